#!/bin/bash
# cfsctl leave --drain hands a server's blocks on before it leaves. On a
# 7-daemon loopback ring (k = 3, replica maintenance off, so nothing else
# moves a copy) a published volume is on all k servers of every block;
#   - a daemon holding copies runs cfsctl leave --drain: it pushes them to
#     the servers that hold their keys once it is gone, leaves and exits 0;
#     cfsctl reports the copies pushed and failed, the same counts as the
#     daemon's log, and exits 0 only when none failed (3 otherwise); right
#     after, every block is at k again but at most one per copy that
#     failed (cfs-fsck --replicas), and it pushed no more copies than it
#     held (each block has one new holder: none is sent to a server that
#     would not hold it);
#   - the control: a second holder leaves without --drain and the blocks it
#     held are short of k, so the check above could fail.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
K=3
N=7

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --sync-ms 0
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
mkdir -p "$TEST_DIR/src/d"
for i in $(seq 1 40); do head -c $((2000 + i * 900)) /dev/urandom >"$TEST_DIR/src/d/f$i"; done
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$TEST_DIR/src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }
fsck_r() { # NODE: cfs-fsck --replicas through that node; its exit code in $rc
	rc=0
	"$FSCK" -d "$TEST_DIR/node$1" --replicas "$vol" >"$TEST_DIR/rep" 2>"$TEST_DIR/rep.err" || rc=$?
}
fsck_r 0
[ "$rc" -eq 0 ] || fail "a fresh volume is not on all k: $(tail -3 "$TEST_DIR/rep.err")"
nblocks=$(wc -l <"$TEST_DIR/rep")
"$CFS_BIN/cfs-cat" -d "$TEST_DIR/node0" "$vol" /d/f7 | cmp -s - "$TEST_DIR/src/d/f7" || fail "cfs-cat -d read wrong bytes"
[ "$nblocks" -gt 40 ] || fail "cfs-fsck --replicas listed $nblocks blocks"

# the two daemons (not node0, which the checks go through) holding the most
cluster_collect "$TEST_DIR/held"
read -r d1 d2 <<<"$(for ((i = 1; i < N; i++)); do
	echo "$(grep -vc '^#' "$TEST_DIR/held/node$i.keys" || true) $i"
done | sort -rn | head -2 | cut -d' ' -f2 | tr '\n' ' ')"
held1=$(grep -vc '^#' "$TEST_DIR/held/node$d1.keys")

drc=0
"$CFSCTL" --data "$TEST_DIR/node$d1" leave --drain >"$TEST_DIR/drain.out" 2>"$TEST_DIR/drain.err" || drc=$?
re="^drained: ([0-9]+) cop(y|ies) pushed to the ([0-9]+) servers? that hold them next, ([0-9]+) failed(, ([0-9]+) of ([0-9]+) comparisons cut short \\(a server stopped answering\\))?; leaving the ring$"
[[ "$(cat "$TEST_DIR/drain.out")" =~ $re ]] ||
	fail "cfsctl leave --drain said: $(cat "$TEST_DIR/drain.out" "$TEST_DIR/drain.err")"
pushed=${BASH_REMATCH[1]} servers=${BASH_REMATCH[3]} failed=${BASH_REMATCH[4]} cut=${BASH_REMATCH[6]:-0}
[ "$servers" -eq "$K" ] || fail "the drain compared with $servers servers, not k = $K"
# the daemon's own count, in its log, is the one reported
wait_for 10 grep -q "drain: $pushed copies pushed, $failed failed, to $servers servers" "$TEST_DIR/node$d1.log" ||
	fail "the daemon's log does not say $pushed pushed, $failed failed: $(grep 'drain:' "$TEST_DIR/node$d1.log")"
if [ "$failed" -eq 0 ] && [ "$cut" -eq 0 ]; then
	[ "$drc" -eq 0 ] || fail "cfsctl leave --drain exited $drc with nothing failed: $(cat "$TEST_DIR/drain.err")"
else
	[ "$drc" -eq 3 ] || fail "cfsctl leave --drain exited $drc with $failed copies failed, $cut comparisons cut short"
	echo "# the drain reported $failed copies failed and $cut comparisons cut short, and exited 3"
fi
[ "$pushed" -le "$held1" ] || fail "the drain pushed $pushed copies of the $held1 it held: some went to servers that do not hold them next"
wait_for 10 bash -c "! kill -0 ${CL_PID[$d1]} 2>/dev/null" || fail "the drained daemon did not exit"
st=0; wait "${CL_PID[$d1]}" || st=$?
CL_PID[$d1]=""
[ "$st" -eq 0 ] || fail "the drained daemon exited $st"
sleep 2 # its neighbours take the LEAVE and stabilise
cluster_wait_correct 30 || fail "the ring did not close over the drained daemon"
fsck_r 0
short=$(grep -vc " $K/$K\$" "$TEST_DIR/rep" || true)
if [ "$cut" -eq 0 ]; then
	[ "$short" -le "$failed" ] ||
		fail "after the drain, $short blocks below k, $failed copies failed ($(tail -1 "$TEST_DIR/rep.err"))"
	[ "$failed" -gt 0 ] || [ "$rc" -eq 0 ] || fail "cfs-fsck --replicas exited $rc: $(tail -3 "$TEST_DIR/rep.err")"
else
	echo "# $short blocks below k after a drain cut short: not checked"
fi
ok "daemon $d1 held $held1 copies; $(cut -d';' -f1 "$TEST_DIR/drain.out"); $((nblocks - short)) of $nblocks blocks at k = $K right after it left"

# the control: leaving without --drain leaves the ring short
"$CFSCTL" --data "$TEST_DIR/node$d2" leave >"$TEST_DIR/leave.out" 2>&1 || fail "cfsctl leave: $(cat "$TEST_DIR/leave.out")"
[ "$(cat "$TEST_DIR/leave.out")" = "leaving the ring" ] || fail "cfsctl leave said: $(cat "$TEST_DIR/leave.out")"
wait_for 10 bash -c "! kill -0 ${CL_PID[$d2]} 2>/dev/null" || fail "the leaving daemon did not exit"
CL_PID[$d2]=""
sleep 2
cluster_wait_correct 30 || fail "the ring did not close over the second daemon"
fsck_r 0
short=$(grep -vc " $K/$K\$" "$TEST_DIR/rep" || true)
[ "$rc" -eq 1 ] && [ "$short" -gt 0 ] || fail "without --drain nothing went short (exit $rc): the check proves nothing"
ok "the control: daemon $d2 left without --drain and $short blocks went below k"
