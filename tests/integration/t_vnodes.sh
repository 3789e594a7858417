#!/bin/bash
# Virtual servers and storage (CFS section 5.3, Figure 12): a ring of 10
# processes running 1, 1, 2, 2, 4, 4, 8, 8, 16 and 16 virtual servers
# (62 in all) stores 6,200 blocks, one copy each (k = 1, so that what a
# process stores is exactly the key space its virtual servers own):
#   - every block is on the process of its key's successor, nowhere else;
#   - blocks per process grow with its virtual servers: the table printed
#     gives, per number of virtual servers, blocks stored, the share of
#     the key space owned and blocks per virtual server;
#   - the 8- and 16-vnode processes store more per process than the 1- and
#     2-vnode ones (a loose bound: a process's share is a sum of random
#     arcs, so exact proportion holds only on average).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
VN=1,1,2,2,4,4,8,8,16,16
N=10
BLOCKS=6200

cluster_start "$N" "$VN" --stabilize-ms 250 --replicas 1 --sync-ms 2000
cluster_wait_correct 120 || fail "a ring of $N processes with $VN virtual servers did not converge"
echo "# ring of $N processes ($VN virtual servers) converged in ${CLUSTER_CONVERGED_S}s"

"$CFSCTL" --data "$TEST_DIR/node0" put --random "$BLOCKS" --size 1024 --seed 31 >"$TEST_DIR/puts" ||
	fail "putting $BLOCKS blocks failed: $(grep -c error "$TEST_DIR/puts") errors"
cut -d' ' -f1 "$TEST_DIR/puts" >"$TEST_DIR/all.keys"
cluster_wait_placement 1 "$TEST_DIR/all.keys" 60 "$TEST_DIR/place.json" exact "$BLOCKS" ||
	fail "blocks not on exactly their successor's process: $(cat "$TEST_DIR/place.json")"
ok "every block is stored by the process of its key's successor, and only there"

python3 - "$TEST_DIR/place" "$BLOCKS" <<'PY'
import glob, json, os, sys
by_v = {}
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    st = json.load(open(f))
    v = len(st["ring"]["vnodes"])
    keys = [l for l in open(f[:-5] + ".keys") if l.strip() and not l.startswith("#")]
    by_v.setdefault(v, []).append(len(keys))
total_v = sum(v * len(b) for v, b in by_v.items())
blocks = int(sys.argv[2])
print("# vnodes/process  processes  blocks/process  expected (share of vnodes)  blocks per vnode")
for v in sorted(by_v):
    b = by_v[v]
    mean = sum(b) / len(b)
    print("#  %14d  %9d  %14.0f  %26.0f  %16.1f" % (v, len(b), mean, blocks * v / total_v, mean / v))
small = sum(by_v[1] + by_v[2]) / len(by_v[1] + by_v[2])
large = sum(by_v[8] + by_v[16]) / len(by_v[8] + by_v[16])
print("# 8- and 16-vnode processes store %.1f times what 1- and 2-vnode ones do (%.0f vs %.0f; "
      "vnode ratio 8)" % (large / small if small else float("inf"), large, small))
assert large > 2 * small, "storage does not grow with virtual servers"
PY
[ $? -eq 0 ] || fail "blocks per process do not grow with virtual servers"
ok "blocks stored per process grow with its virtual servers"
