#!/bin/bash
# The wide-area bed, correctness only (make bench-wan measures it): eight
# daemons in four regions (two each in us-east, us-west, eu and asia, RTTs
# of 10 to 200 ms through the delay line, MTU 1500), a volume of one 4 MiB
# file and 40 small files published through a us-east daemon, and a reader
# in eu as a plain ring client:
#   - the delay line delays: the least RTT a daemon measured to each ring
#     neighbour, in its region or another, is within 15 % (+3 ms) of the
#     matrix;
#   - listing a directory fetches its small files ahead: with the reader's
#     link down afterwards, every one of them reads back;
#   - the reader's mount gives back every byte (diff -r of the tree);
#   - cfs-fsck --replicas from the reader agrees with the holders (each
#     daemon's stored keys): as many blocks below k as are really short;
#   - no daemon and no reader suspected an honest node.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/wan.sh"
K=6 # the default: a plain client checks that many
mnt=$TEST_DIR/mnt
export XDG_CONFIG_HOME=$TEST_DIR/config
export CFS_DATA_DIR=$TEST_DIR/no-daemon # the reader is a plain client
mkdir -p "$CFS_DATA_DIR"
trap 'cluster_reader_umount "$mnt"; cleanup; cluster_cleanup' EXIT

wan_world
wan_place us-east:2 us-west:2 eu:2 asia:2
start=$SECONDS
wan_start 1 --stabilize-ms 500
echo "# 8 daemons in 4 regions converged in $((SECONDS - start)) s"

"$CFS_BIN/cfs-publish" --keygen "$TEST_DIR/key" >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
src=$TEST_DIR/src
mkdir -p "$src/small"
head -c $((4 << 20)) /dev/urandom >"$src/big"
for i in $(seq 1 40); do head -c $((4096 + (i * 1543) % 61440)) /dev/urandom >"$src/small/f$i"; done
start=$SECONDS
"$CFS_BIN/cfs-publish" --quiet --key "$TEST_DIR/key" --state-dir "$TEST_DIR/pub" \
	--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/publish.err" ||
	fail "publish from us-east: $(tail -3 "$TEST_DIR/publish.err")"
echo "# published 4 MiB + 40 small files through us-east in $((SECONDS - start)) s"

start=$SECONDS
cluster_reader_mount "$vol" "$mnt" || fail "the reader in eu could not mount"
# Listing a directory fetches its small files ahead of their readers: once
# the cache holds the 40 inodes and 40 data blocks, the reader's link goes
# down, and every small file must still read back whole.
ls "$mnt/small" >/dev/null
stat_of() { python3 -c "import json,os,sys; print(json.loads(os.getxattr(sys.argv[1], 'user.cfs.stats'))[sys.argv[2]])" "$mnt" "$1"; }
all_cached() { [ "$(stat_of cached_blocks)" -ge 82 ]; }
wait_for 60 all_cached ||
	fail "listing small/ did not bring its files in: $(stat_of cached_blocks) blocks cached, $(stat_of dir_prefetches) prefetched"
cluster_in "$CL_READER_NS" ip link set "${CL_TAG}vr" down
for f in "$src"/small/*; do
	timeout 20 cmp -s "$f" "$mnt/small/${f##*/}" || fail "small/${f##*/} did not read back with the link down: not prefetched"
done
cluster_in "$CL_READER_NS" ip link set "${CL_TAG}vr" up
cluster_in "$CL_READER_NS" ip route add 198.19.255.254/32 dev "${CL_TAG}vr" 2>/dev/null || true
cluster_in "$CL_READER_NS" ip route add 198.18.0.0/15 via 198.19.255.254 dev "${CL_TAG}vr" 2>/dev/null || true
ok "a listed directory's 40 small files were fetched ahead ($(stat_of dir_prefetches) blocks) and read with the link down"
diff -r "$src" "$mnt" >"$TEST_DIR/diff" 2>&1 || fail "the mount differs from the tree: $(head -3 "$TEST_DIR/diff")"
ok "a plain client in eu reads every byte back ($((SECONDS - start)) s, mount included)"
cluster_reader_umount "$mnt"

rc=0
cluster_in "$CL_READER_NS" "$CFS_BIN/cfs-fsck" --from "ring:$(cluster_addr 0)" --replicas "$vol" \
	>"$TEST_DIR/rep" 2>"$TEST_DIR/rep.err" || rc=$?
cut -d' ' -f1 "$TEST_DIR/rep" >"$TEST_DIR/keys"
cluster_placement "$K" "$TEST_DIR/keys" >"$TEST_DIR/placement.json"
short=$(python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(d['short'] + d['lost'])" "$TEST_DIR/placement.json")
below=$(awk -v k="$K" '{ split($2, g, "/"); if (g[1] < k) n++ } END { print n + 0 }' "$TEST_DIR/rep")
[ "$(wc -l <"$TEST_DIR/rep")" -gt 60 ] || fail "cfs-fsck --replicas listed $(wc -l <"$TEST_DIR/rep") blocks: $(tail -2 "$TEST_DIR/rep.err")"
[ "$below" -eq "$short" ] ||
	fail "cfs-fsck --replicas across the WAN says $below blocks are below k = $K, the holders say $short (exit $rc): $(grep -m3 -v " $K/$K\$" "$TEST_DIR/rep")"
[ "$rc" -eq $((short > 0 ? 1 : 0)) ] || fail "cfs-fsck --replicas exit $rc with $short blocks short"
ok "cfs-fsck --replicas from eu agrees with the holders ($(wc -l <"$TEST_DIR/rep") blocks, $short below k)"

# The delay line: the least round trip each daemon measured to each ring
# neighbour over the run (cfsd probes them every 5 s). The least, not the
# last: one answer made late by a busy CPU says nothing of the path.
cluster_status_all "$TEST_DIR/st"
python3 - "$TEST_DIR/st" "$WAN_MATRIX" <<'EOF' >"$TEST_DIR/rtt" || fail "measured RTTs off the matrix: $(cat "$TEST_DIR/rtt")"
import glob, json, sys
region, rtt = {}, {}
for l in open(sys.argv[2]):
    f = l.split()
    if f and f[0] == "node":
        region[f[1]] = f[2]
    elif f and f[0] == "rtt":
        rtt[(f[1], f[2])] = float(f[3])
bad, n, daemons = [], 0, 0
for p in glob.glob(sys.argv[1] + "/*.json"):
    st = json.load(open(p))
    me = st["address"].rsplit(":", 1)[0]
    daemons += 1
    for nb in st["neighbours"]:
        if not nb["min_rtt_us"]:
            continue
        ip = nb["addr"].rsplit(":", 1)[0]
        want = rtt[(region[me], region[ip])]
        got = nb["min_rtt_us"] / 1000.0
        n += 1
        if abs(got - want) > 0.15 * want + 3:
            bad.append("%s->%s %.1f ms (matrix %.0f)" % (me, ip, got, want))
print("%d neighbour RTTs checked" % n, "; ".join(bad))
sys.exit(1 if bad or n < daemons else 0)
EOF
ok "the delay line delays: $(cat "$TEST_DIR/rtt")"

if grep -l "suspect" "$TEST_DIR"/node*.log "$TEST_DIR/reader-mount.log" >"$TEST_DIR/suspects" 2>/dev/null; then
	fail "an honest node was suspected across the WAN: $(grep -h -m2 suspect $(cat "$TEST_DIR/suspects"))"
fi
ok "no honest node suspected"
echo "# $(cluster_delayline_counters)"
