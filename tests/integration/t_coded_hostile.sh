#!/bin/bash
# A hostile holder of a coded volume's fragments, on a 16-daemon loopback
# ring (k = 6) joined by cfs-hostile (tests/harness/cfs_hostile.c) with
# --fetch garbage: it joins honestly, acknowledges and drops every STORE,
# and answers every FETCH with random bytes, so every fragment asked of it
# is wrong. A volume published with rs:4/12 through an honest daemon:
#   - the liar is among the 12 holders of some data blocks (checked);
#   - every file reads back whole, as a plain ring client and through a
#     daemon, each block rebuilt from fragments that verify;
#   - the plain client, which asks holders in ring order, meets the liar's
#     garbage, suspects it and nobody else.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
HOSTILE=$CFS_BIN/cfs-hostile
PUBLISH=$CFS_BIN/cfs-publish
CAT=$CFS_BIN/cfs-cat
export XDG_CONFIG_HOME=$TEST_DIR/config
N=16
M=5 # the reader's daemon
trap 'cleanup; cluster_cleanup' EXIT
[ -x "$HOSTILE" ] || fail "no cfs-hostile at $HOSTILE"

cluster_start "$N" 1 --stabilize-ms 250 --replicas 6
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"

hip=127.66.7.1
hport=$(free_port)
"$HOSTILE" --bind "$hip" --port "$hport" --bootstrap "$(cluster_addr 0)" --stabilize-ms 250 \
	--fetch garbage --lookup none --seed 11 >"$TEST_DIR/hostile.ids" 2>"$TEST_DIR/hostile.log" &
PIDS+=("$!")
wait_for 10 grep -q '^id ' "$TEST_DIR/hostile.ids" ||
	{ cat "$TEST_DIR/hostile.log" >&2; fail "cfs-hostile did not start"; }
hid=$(awk '$1 == "id" { print $2; exit }' "$TEST_DIR/hostile.ids")
# in the ring: some honest daemon has it as its successor or predecessor
linked() {
	cluster_status_all "$TEST_DIR/st"
	grep -l "$hip" "$TEST_DIR"/st/*.json >/dev/null 2>&1
}
wait_for 60 linked || fail "the hostile member never joined the ring"
cluster_wait_correct 60 || true # the ring settles with it
sleep 3
echo "# hostile member ${hid:0:16} at $hip:$hport joined"

src=$TEST_DIR/src
mkdir -p "$src"
for i in $(seq 1 12); do head -c $((100000 + i * 7777)) /dev/urandom >"$src/f$i"; done
"$PUBLISH" --keygen "$TEST_DIR/v.key" >"$TEST_DIR/v.vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/v.vol")
"$PUBLISH" --key "$TEST_DIR/v.key" --redundancy rs:4/12 --to "cfsd:$TEST_DIR/node0/cfsd.sock" \
	"$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish rs:4/12"; }

# the liar's share: data blocks whose 12 holders (cfs-fsck --replicas,
# through an honest daemon) include it
"$CFS_BIN/cfs-fsck" --data "$TEST_DIR/node$M" --replicas "$vol" >"$TEST_DIR/rep.out" \
	2>"$TEST_DIR/rep.err" || true
held=$(grep -c " $hip:$hport" "$TEST_DIR/rep.out" || true)
[ "$held" -ge 1 ] || { cat "$TEST_DIR/rep.out"; fail "the hostile member holds no fragment of the volume"; }
echo "# the liar is a holder of $held data blocks (named by fsck --replicas as lacking its fragment)"

read_all() { # LOG, then cfs-cat's options: every file read and compared, stderr kept in LOG
	local log=$1 f; shift
	: >"$log"
	for f in $(cd "$src" && ls); do
		"$CAT" "$@" "$vol" "/$f" >"$TEST_DIR/got" 2>>"$log" || { cat "$log"; return 1; }
		cmp -s "$TEST_DIR/got" "$src/$f" || { echo "/$f differs"; return 1; }
	done
}
# A plain client knows no holder's round trip: it asks each block's
# holders in ring order (the data fragments' first), so it meets the liar
# wherever the liar holds one of the first m + 2 fragments.
read_all "$TEST_DIR/plain.err" --bootstrap "$(cluster_addr 3)" ||
	fail "the coded volume as a plain client, with a liar among its holders"
read_all "$TEST_DIR/cfsd.err" --data "$TEST_DIR/node$M" ||
	fail "the coded volume through cfsd, with a liar among its holders"
ok "every file read whole as a plain client and through cfsd; the liar holds a fragment of $held blocks"

bad=$(grep -c "served a fragment that does not verify" "$TEST_DIR/plain.err" || true)
[ "$bad" -ge 1 ] || fail "the plain client met no bad fragment: $(head -5 "$TEST_DIR/plain.err")"
grep "suspect .*: served a fragment that does not verify" "$TEST_DIR/plain.err" | grep -v "suspect ${hid:0:8}:" &&
	fail "an honest holder was suspected"
grep -q "suspect ${hid:0:8}: served a fragment that does not verify" "$TEST_DIR/plain.err" ||
	fail "the liar ${hid:0:8} was not suspected: $(grep suspect "$TEST_DIR/plain.err" | head -3)"
ok "the plain client rebuilt every block past $bad bad fragment(s) and suspected the liar ${hid:0:8} only"
