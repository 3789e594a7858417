#!/bin/bash
# cfsctl leave --drain hands a server's blocks on before it leaves. On a
# 7-daemon loopback ring (k = 3, replica maintenance off, so nothing else
# moves a copy) a published volume is on all k servers of every block;
#   - a daemon holding copies runs cfsctl leave --drain: it pushes them to
#     the servers that hold their keys once it is gone, leaves and exits 0;
#     right after, every block is at k again (cfs-fsck --replicas), and it
#     pushed no more copies than it held (each block has one new holder:
#     none is sent to a server that would not hold it);
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

"$CFSCTL" --data "$TEST_DIR/node$d1" leave --drain >"$TEST_DIR/drain.out" 2>&1 ||
	fail "cfsctl leave --drain: $(cat "$TEST_DIR/drain.out")"
grep -q "^drained: [0-9]* cop.* pushed to the $K servers that hold them next, 0 failed; leaving the ring$" "$TEST_DIR/drain.out" ||
	fail "cfsctl leave --drain said: $(cat "$TEST_DIR/drain.out")"
pushed=$(sed -n 's/^drained: \([0-9]*\) cop.*/\1/p' "$TEST_DIR/drain.out")
[ "$pushed" -le "$held1" ] || fail "the drain pushed $pushed copies of the $held1 it held: some went to servers that do not hold them next"
wait_for 10 bash -c "! kill -0 ${CL_PID[$d1]} 2>/dev/null" || fail "the drained daemon did not exit"
st=0; wait "${CL_PID[$d1]}" || st=$?
CL_PID[$d1]=""
[ "$st" -eq 0 ] || fail "the drained daemon exited $st"
sleep 2 # its neighbours take the LEAVE and stabilise
cluster_wait_correct 30 || fail "the ring did not close over the drained daemon"
fsck_r 0
[ "$rc" -eq 0 ] || fail "after the drain, blocks below k: $(grep -vc " $K/$K\$" "$TEST_DIR/rep") ($(tail -1 "$TEST_DIR/rep.err"))"
ok "daemon $d1 held $held1 copies; $(cat "$TEST_DIR/drain.out" | cut -d';' -f1); every one of $nblocks blocks at k = $K right after it left"

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
