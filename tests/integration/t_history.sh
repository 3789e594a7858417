#!/bin/bash
# Every version stays addressable, on a 5-daemon loopback ring (k = 3,
# leases of 30 s, collectors every second, caches off):
#   - three versions published; VOLUME@1, VOLUME@2 and VOLUME mounted side
#     by side (real kernel FUSE mounts) each equal their own source;
#     cfs-cat and cfs-fsck take VOLUME@SEQ too;
#   - cfsctl history lists the three, newest first, with the sizes and file
#     counts of their sources;
#   - rollback protection is intact: once the newest (3) was mounted, a
#     store that serves version 2 as the newest is refused, while asking
#     for @2 by number from that same store works;
#   - a pin of the newest two versions (cfsctl pin --versions 2) keeps
#     them after the publisher stops: past the lease, @2 and @3 are whole,
#     @1 (not pinned) is gone and history lists only the two.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
MOUNT=$CFS_BIN/cfs-mount
CAT=$CFS_BIN/cfs-cat
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/state
unset CFS_BOOTSTRAP CFS_STORE
K=3
N=5
P=4              # the pinning daemon
LEASE=0.00035    # 30.2 s
MOUNT_PIDS=()
mnts=()
umount_all() {
	local pid m
	for pid in "${MOUNT_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	sleep 0.5
	for m in "${mnts[@]}"; do
		mountpoint -q "$m" 2>/dev/null && fusermount3 -u -z "$m" 2>/dev/null
	done
	true
}
trap 'umount_all; cluster_cleanup; cleanup' EXIT

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --lease-days "$LEASE" --expire-ms 1000 \
	--sync-ms 2000 --cache-mb 0 --pin-ms 2000
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"

"$PUBLISH" --keygen "$TEST_DIR/pub.key" >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
# Three sources: v2 changes a file and adds one, v3 removes a directory.
mkdir -p "$TEST_DIR/src1/sub" "$TEST_DIR/src1/gone"
for i in $(seq 1 8); do head -c $((3000 + i * 7000)) /dev/urandom >"$TEST_DIR/src1/f$i"; done
for i in $(seq 1 20); do echo "small $i" >"$TEST_DIR/src1/sub/s$i"; done
echo "in v1 and v2" >"$TEST_DIR/src1/gone/note"
cp -a "$TEST_DIR/src1" "$TEST_DIR/src2"
head -c 150000 /dev/urandom >"$TEST_DIR/src2/f3"
echo "new in v2" >"$TEST_DIR/src2/sub/added"
cp -a "$TEST_DIR/src2" "$TEST_DIR/src3"
rm -r "$TEST_DIR/src3/gone"
head -c 90000 /dev/urandom >"$TEST_DIR/src3/f8"

t0=$SECONDS
for v in 1 2 3; do
	"$PUBLISH" --key "$TEST_DIR/pub.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --valid "$LEASE" \
		--state-dir "$TEST_DIR/pst" --quiet "$TEST_DIR/src$v" >/dev/null 2>"$TEST_DIR/pub.err" ||
		{ cat "$TEST_DIR/pub.err" >&2; fail "publish v$v"; }
	grep -q "could not be kept" "$TEST_DIR/pub.err" && fail "version $v was not kept: $(cat "$TEST_DIR/pub.err")"
done
"$CFSCTL" --data "$TEST_DIR/node$P" pin --versions 2 "$vol" >"$TEST_DIR/out" || fail "pin --versions 2"
grep -q "newest 2 versions" "$TEST_DIR/out" || fail "pin said: $(cat "$TEST_DIR/out")"
ok "three versions published; volume pinned on node$P with its newest 2 versions"

# ---- side by side
for v in 1 2 latest; do
	m=$TEST_DIR/mnt-$v
	mkdir -p "$m"
	mnts+=("$m")
	spec=$vol@$v
	[ "$v" = latest ] && spec=$vol
	"$MOUNT" -f -d "$TEST_DIR/node1" --state-dir "$TEST_DIR/mst" "$spec" "$m" \
		>"$TEST_DIR/mount-$v.out" 2>"$TEST_DIR/mount-$v.log" &
	MOUNT_PIDS+=("$!")
	PIDS+=("$!")
	wait_for 30 mountpoint -q "$m" || { cat "$TEST_DIR/mount-$v.log" >&2; fail "mount of $spec"; }
done
diff -r "$TEST_DIR/src1" "$TEST_DIR/mnt-1" || fail "$vol@1 differs from the first source"
diff -r "$TEST_DIR/src2" "$TEST_DIR/mnt-2" || fail "$vol@2 differs from the second source"
diff -r "$TEST_DIR/src3" "$TEST_DIR/mnt-latest" || fail "the newest differs from the third source"
"$CAT" -d "$TEST_DIR/node2" "$vol@2" /f3 | cmp -s - "$TEST_DIR/src2/f3" || fail "cfs-cat $vol@2"
"$CAT" -d "$TEST_DIR/node2" "$vol@latest" /f8 | cmp -s - "$TEST_DIR/src3/f8" || fail "cfs-cat @latest"
timeout 60 "$FSCK" -q -d "$TEST_DIR/node3" "$vol@1" || fail "cfs-fsck $vol@1"
expect_exit 1 "$CAT" -d "$TEST_DIR/node2" "$vol@9" /f3
grep -q "no server has that version" "$TEST_DIR/err" || fail "@9: $(cat "$TEST_DIR/err")"
expect_exit 2 "$CAT" -d "$TEST_DIR/node2" "$vol@0" /f3
ok "$vol@1, @2 and the newest mounted side by side, each equal to its source; cfs-cat, cfs-fsck take @SEQ"

# ---- history
"$CFSCTL" --data "$TEST_DIR/node2" history "$vol" >"$TEST_DIR/history" || fail "history"
sed "s/^/# /" "$TEST_DIR/history"
"$CFSCTL" --data "$TEST_DIR/node2" history --json "$vol" >"$TEST_DIR/history.json" || fail "history --json"
python3 - "$TEST_DIR" <<'EOF' || fail "history does not match the sources"
import json, os, sys
d = sys.argv[1]
h = json.load(open(d + "/history.json"))
seqs = [v["seq"] for v in h["versions"]]
assert seqs == [3, 2, 1], seqs
for v in h["versions"]:
    src = "%s/src%d" % (d, v["seq"])
    sizes = [os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(src) for f in fs]
    assert v["complete"] and v["bytes"] == sum(sizes) and v["files"] == len(sizes), (v, sum(sizes), len(sizes))
EOF
ok "cfsctl history lists versions 3, 2, 1 with their sources' sizes and file counts"

# ---- rollback: the newest mount recorded 3; a store whose newest is 2 is refused
for v in 1 2; do
	"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$TEST_DIR/old-store" --state-dir "$TEST_DIR/pst-old" \
		--quiet "$TEST_DIR/src$v" >/dev/null 2>&1 || fail "publish v$v into a dir: store"
done
m=$TEST_DIR/mnt-old
mkdir -p "$m"
mnts+=("$m")
expect_exit 1 "$MOUNT" -f --state-dir "$TEST_DIR/mst" --from "dir:$TEST_DIR/old-store" "$vol" "$m"
grep -q "older than one already seen" "$TEST_DIR/err" || fail "the old store's newest: $(cat "$TEST_DIR/err")"
"$MOUNT" -f --state-dir "$TEST_DIR/mst" --from "dir:$TEST_DIR/old-store" "$vol@2" "$m" \
	>"$TEST_DIR/mount-old.out" 2>"$TEST_DIR/mount-old.log" &
MOUNT_PIDS+=("$!")
PIDS+=("$!")
wait_for 30 mountpoint -q "$m" || { cat "$TEST_DIR/mount-old.log" >&2; fail "@2 from the old store"; }
diff -r "$TEST_DIR/src2" "$m" || fail "@2 from the old store differs"
[ "$(cat "$TEST_DIR/mst/$vol.seq")" = 3 ] || fail "reading @2 moved the recorded sequence: $(cat "$TEST_DIR/mst/$vol.seq")"
ok "the newest is never rolled back (a store serving 2 as newest is refused); @2 by number reads"
umount_all
MOUNT_PIDS=()

# ---- past the lease, with nobody publishing: the pin keeps 2 and 3
while [ $((SECONDS - t0)) -lt 48 ]; do sleep 1; done
timeout 60 "$FSCK" -q -d "$TEST_DIR/node1" "$vol@3" || fail "@3 is not whole past the lease"
timeout 60 "$FSCK" -q -d "$TEST_DIR/node1" "$vol@2" || fail "@2 is not whole past the lease"
timeout 60 "$FSCK" -q -d "$TEST_DIR/node1" "$vol" || fail "the newest is not whole past the lease"
rc=0
timeout 60 "$FSCK" -q -d "$TEST_DIR/node1" "$vol@1" >/dev/null 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "@1, not pinned, is still whole $((SECONDS - t0)) s after its 30 s lease"
"$CFSCTL" --data "$TEST_DIR/node2" history --json "$vol" >"$TEST_DIR/history.json" || fail "history"
[ "$(jget "['versions'].__len__()" <"$TEST_DIR/history.json")" = 2 ] ||
	fail "history past the lease: $(cat "$TEST_DIR/history.json")"
"$CFSCTL" --data "$TEST_DIR/node$P" pins --json >"$TEST_DIR/pins.json"
[ "$(jget "['pins'][0]['last']['versions_kept']" <"$TEST_DIR/pins.json")" = 2 ] ||
	fail "pins: $(cat "$TEST_DIR/pins.json")"
grep -q "^$vol [0-9]* 2\$" "$TEST_DIR/node$P/pins" || fail "DATA/pins: $(cat "$TEST_DIR/node$P/pins")"
ok "$((SECONDS - t0)) s after publishing with a 30 s lease: @3 and @2 (pinned) whole, @1 gone"
