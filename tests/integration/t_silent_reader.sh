#!/bin/bash
# A reader that asks and never acknowledges costs a daemon bounded memory:
# one address proves itself, then sends 3,000 FETCHes of 64 KiB blocks and
# acknowledges no piece. The answers held for one peer are capped (8 MiB,
# 256 answers), a peer that acknowledges nothing for a few probe timeouts
# loses what was queued for it, and all peers together hold at most
# 64 MiB. The daemon's peak RSS must grow by well under 64 MiB, and other
# readers' gets through it keep succeeding meanwhile.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
export XDG_CONFIG_HOME=$TEST_DIR/config
N=4
cluster_start "$N" 1 --stabilize-ms 500 --replicas 3
cluster_wait_correct 60 || fail "the ring did not converge"
src=$TEST_DIR/src
mkdir -p "$src"
head -c $((16 << 20)) /dev/urandom >"$src/big"
"$CFS_BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$CFS_BIN/cfs-publish" --to "cfsd:$TEST_DIR/node1/cfsd.sock" --block-size 65536 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }
"$CFSCTL" --data "$TEST_DIR/node0" keys >"$TEST_DIR/keys"
[ "$(wc -l <"$TEST_DIR/keys")" -ge 20 ] || fail "node 0 holds only $(wc -l <"$TEST_DIR/keys") blocks"
pid=${CL_PID[0]}
hwm() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }
rss() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status"; }
# warm the daemon up with a whole read first: the baseline includes it
"$CFS_BIN/cfs-cat" --data "$TEST_DIR/node0" "$vol" /big | cmp - "$src/big" || fail "the first read"
before=$(hwm)

python3 "$(dirname "$0")/silent_reader.py" "$(cluster_addr 0)" "$TEST_DIR/keys" 3000 8 \
	>"$TEST_DIR/silent.out" 2>&1 &
silent=$!
PIDS+=("$silent")
sleep 1
reads=0
for k in 1 2 3; do
	"$CFS_BIN/cfs-cat" --data "$TEST_DIR/node0" "$vol" /big | cmp - "$src/big" ||
		fail "a read through the daemon failed while the silent reader held it"
	reads=$((reads + 1))
done
wait "$silent" || { cat "$TEST_DIR/silent.out"; fail "the silent reader failed"; }
after=$(hwm)
grow=$(((after - before) / 1024))
"$CFSCTL" --data "$TEST_DIR/node0" status --json >"$TEST_DIR/s.json"
refused=$(jget "['rpc']['pieces']['answers_refused']" <"$TEST_DIR/s.json")
dropped=$(jget "['rpc']['pieces']['answers_dropped_silent']" <"$TEST_DIR/s.json")
echo "# silent reader: $(cat "$TEST_DIR/silent.out"); peak RSS $((before / 1024)) -> $((after / 1024)) MiB (+$grow), now $(($(rss) / 1024)) MiB; answers refused $refused, dropped for silence $dropped"
validated=$(jget "['rpc']['validation']['validated']" <"$TEST_DIR/s.json")
[ "$validated" -gt 0 ] || fail "the silent reader never proved its address: every FETCH got a token request"
[ "$grow" -lt 32 ] || fail "the daemon's peak RSS grew by $grow MiB for one silent reader"
[ "$refused" -gt 0 ] || fail "no answer was refused over the peer's bound"
[ "$dropped" -gt 0 ] || fail "no answer was dropped for the silent peer"
ok "3,000 unacknowledged 64 KiB FETCHes: peak RSS +$grow MiB; $reads whole reads through the same daemon meanwhile"
