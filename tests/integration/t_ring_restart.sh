#!/bin/bash
# One ring after a mass restart: all 16 daemons of a ring are killed at
# once (kill -9: no leave, nothing saved at exit) and started again with
# their old arguments in a random order, the founder last. Each rejoins
# through the peers it remembered on disk before it would found a ring:
# within 60 s one ring (every successor pointer on one cycle of 16, every
# successor list true), and the volume published before is whole at k.
# Also: the founder alone, restarted with no bootstrap address after the
# others dropped it, rejoins through its remembered peers instead of
# founding a second ring; and a daemon given first = true and remembered
# peers, started while all of them are down, founds a ring of its own
# after trying them, and merges into the ring when the others come back.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
N=16
cycles() { cluster_status_all "$TEST_DIR/status"; python3 "$HARNESS_DIR/ring_cycles.py" "$TEST_DIR"/status/*.json; }
one_ring() { [ "$(cycles | sed -n 1p)" = "1 $1" ] && cluster_check; }

cluster_start "$N" 1 --stabilize-ms 500 --ring-check-ms 3000 --sync-ms 5000
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
src=$TEST_DIR/src
mkdir -p "$src"
for i in $(seq 1 30); do head -c $((RANDOM * 2)) /dev/urandom >"$src/f$i"; done
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/node3/cfsd.sock" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }
sleep 6 # every daemon has written its peers (checked every 5 s)
for ((i = 0; i < N; i++)); do
	[ -s "$TEST_DIR/node$i/peers" ] || fail "node $i remembered no peer"
done
ok "a ring of $N, a volume published, every daemon remembers $(wc -l <"$TEST_DIR/node0/peers") or so peers"

# ---- every daemon killed at once, started again in a random order, founder last
for ((i = 0; i < N; i++)); do kill -KILL "${CL_PID[$i]}" 2>/dev/null || true; done
for ((i = 0; i < N; i++)); do wait "${CL_PID[$i]}" 2>/dev/null || true; CL_PID[$i]=""; done
order=$(seq 1 $((N - 1)) | shuf | tr '\n' ' ')
for i in $order 0; do
	cluster_run "$i"
	cluster_wait_up "$i"
done
start=$SECONDS
wait_for 60 one_ring "$N" || { cycles >&2; fail "no single ring 60 s after the restart (order: $order 0)"; }
ok "restarted in the order $order 0: one ring of $N after $((SECONDS - start)) s"
echo "# one ring $((SECONDS - start)) s after all $N daemons were killed and restarted, founder last"
fsck_ok() { "$FSCK" --from "cfsd:$TEST_DIR/node0/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1; }
wait_for 60 fsck_ok || { tail -3 "$TEST_DIR/fsck.out"; fail "the volume is not whole at k after the restart"; }
ok "the volume is whole: $(tail -1 "$TEST_DIR/fsck.out")"

# ---- the founder alone restarts after the others dropped it: no bootstrap
# address, so only its remembered peers lead back (it must not found a
# second ring)
cluster_stop 0
fifteen() { [ "$(cycles | sed -n 1p)" = "1 $((N - 1))" ]; }
wait_for 60 fifteen || fail "the others did not close the ring without the founder: $(cycles | sed -n 1p)"
: >"$TEST_DIR/node0.log"
cluster_run 0
cluster_wait_up 0
start=$SECONDS
wait_for 60 one_ring "$N" || { cycles >&2; fail "the restarted founder did not rejoin the ring"; }
grep -q "starting a new ring" "$TEST_DIR/node0.log" && fail "the restarted founder founded a ring of its own"
grep -q "remembered .* peers* from the last run" "$TEST_DIR/node0.log" || fail "the founder remembered no peer"
ok "the founder, restarted alone with no bootstrap, rejoined through remembered peers: one ring in $((SECONDS - start)) s"

# ---- a founder (first = true) back alone founds a ring, then merges
for ((i = 0; i < N; i++)); do cluster_kill "$i"; done
CL_ARGS[5]="${CL_ARGS[5]/--bootstrap [^ ]*/} --first"
cluster_run 5
cluster_wait_up 5
alone() { "$CFSCTL" --data "$TEST_DIR/node5" status --json | jget "['ring']['vnodes'][0]['joined']" | grep -q True; }
wait_for 60 alone || fail "a first = true daemon with every remembered peer down did not found a ring"
grep -q "starting a new ring" "$TEST_DIR/node5.log" || fail "no log line says the founder started a ring alone"
ok "with every remembered peer down, the first = true daemon founded a ring after trying them"
for ((i = 0; i < N; i++)); do [ "$i" = 5 ] || cluster_run "$i"; done
for ((i = 0; i < N; i++)); do cluster_wait_up "$i"; done
start=$SECONDS
wait_for 60 one_ring "$N" || { cycles >&2; fail "the founder's ring and the others did not become one"; }
ok "the others came back: one ring of $N after $((SECONDS - start)) s"
