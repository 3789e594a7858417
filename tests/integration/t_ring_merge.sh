#!/bin/bash
# One ring after a partition: 12 daemons, each in its own network
# namespace, are cut into two halves of six for 90 s (every datagram
# between the halves dropped) while a new version of a volume is published
# on one side; then the partition heals:
#   - during it, the halves form two rings of six;
#   - within 60 s of the heal, one ring: every successor pointer on one
#     cycle of 12, every successor list true (the ring check found the
#     other loop through remembered peers and stabilization zipped them);
#   - within a few sync periods, every replica holds the newest root and
#     cfs-fsck --replicas through a daemon of the other half finds every
#     block of the new version at k; every block of the first version is
#     still served.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
export CLUSTER_NETNS=1
N=12
H=$((N / 2))
PART_S=${PART_S:-90}
RING_CHECK_MS=${RING_CHECK_MS:-3000} # 0: the control run, no ring check
cycles() { cluster_status_all "$TEST_DIR/status"; python3 "$HARNESS_DIR/ring_cycles.py" "$TEST_DIR"/status/*.json; }
two_rings() { [ "$(cycles | sed -n 1p)" = "2 $H,$H" ]; }
one_ring() { [ "$(cycles | sed -n 1p)" = "1 $N" ] && cluster_check; }

cluster_start "$N" 1 --stabilize-ms 500 --ring-check-ms "$RING_CHECK_MS" --sync-ms 5000
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
ok "a ring of $N in $CLUSTER_CONVERGED_S s"

src=$TEST_DIR/src
mkdir -p "$src"
for i in $(seq 1 30); do head -c $((RANDOM * 2)) /dev/urandom >"$src/f$i"; done
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish of the first version"; }
"$CFS_BIN/cfsctl" --data "$TEST_DIR/node0" keys >/dev/null
cluster_collect "$TEST_DIR/v1"
cat "$TEST_DIR"/v1/*.keys | sort -u >"$TEST_DIR/v1.keys"
ok "version 1 published: $(wc -l <"$TEST_DIR/v1.keys") keys in the ring"
sleep 6 # every daemon has written its peers (checked every 5 s)

# ---- the partition: each half drops every datagram from the other
lo=$(cluster_netns_ip 0) mid=$(cluster_netns_ip $((H - 1))) hi=$(cluster_netns_ip $H) top=$(cluster_netns_ip $((N - 1)))
for ((i = 0; i < N; i++)); do
	if [ "$i" -lt "$H" ]; then range=$hi-$top; else range=$lo-$mid; fi
	cluster_in "${CL_NS[$i]}" iptables-legacy -t raw -A PREROUTING -m iprange --src-range "$range" -j DROP
done
start=$SECONDS
wait_for 60 two_rings || fail "the halves did not form two rings of $H: $(cycles | sed -n 1p)"
ok "partitioned: two rings of $H after $((SECONDS - start)) s"

echo "version 2" >"$src/new-in-v2"
head -c 50000 /dev/urandom >"$src/f1"
"$PUBLISH" --to "cfsd:$TEST_DIR/node1/cfsd.sock" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish of the second version on one side"; }
grep -o 'root sequence [0-9]*' "$TEST_DIR/err" >"$TEST_DIR/seq2"
ok "version 2 published in the first half ($(cat "$TEST_DIR/seq2"))"
while [ $((SECONDS - start)) -lt "$PART_S" ]; do sleep 1; done
two_rings || fail "after $PART_S s of partition: $(cycles | sed -n 1p)"

# ---- heal
for ((i = 0; i < N; i++)); do cluster_in "${CL_NS[$i]}" iptables-legacy -t raw -F PREROUTING; done
start=$SECONDS
wait_for 60 one_ring || { cycles >&2; cat "$TEST_DIR/check.out" >&2 2>/dev/null; fail "no single ring 60 s after the heal"; }
merged=$((SECONDS - start))
grep -h "ring check:" "$TEST_DIR"/node*.log | head -3 || true # none when stabilization merged first
ok "healed: one ring of $N, every successor list true, $merged s after the heal"
echo "# one ring $merged s after a ${PART_S} s partition of $N daemons into two halves"

# ---- the data converge: newest root on every replica, both versions whole
fsck_ok() { "$FSCK" --from "cfsd:$TEST_DIR/node$((N - 1))/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1; }
start=$SECONDS
wait_for 60 fsck_ok || { tail -3 "$TEST_DIR/fsck.out"; fail "version 2 not whole at k 60 s after the heal"; }
seq_seen=$("$FSCK" --from "cfsd:$TEST_DIR/node$((N - 1))/cfsd.sock" "$vol" 2>&1 | grep -o 'sequence [0-9]*' | head -1 || true)
ok "version 2 at k on every block through the other half, $((SECONDS - start)) s after the merge: $(tail -1 "$TEST_DIR/fsck.out")"
"$CFS_BIN/cfsctl" --data "$TEST_DIR/node$((N - 1))" get --check - <"$TEST_DIR/v1.keys" >"$TEST_DIR/v1.check" 2>&1 || true
nbad=$(grep -vc ' ok ' "$TEST_DIR/v1.check" || true)
[ "$nbad" -eq 0 ] || { grep -v ' ok ' "$TEST_DIR/v1.check" | head -3; fail "$nbad blocks of version 1 not served"; }
ok "every one of the $(wc -l <"$TEST_DIR/v1.keys") blocks of version 1 still served"
