#!/bin/bash
# make bench-mount-start: the time from starting cfs-mount to the first
# `ls` of the volume's top directory returning, on an 8-daemon loopback
# ring (k = 3), through the local cfsd, with a disk cache:
#   - cold: no root kept, an empty disk cache (the root and the directory
#     come from the ring);
#   - warm disk cache, no root kept: the root from the ring before
#     mounting, the directory from disk;
#   - kept root and warm disk cache: nothing from the ring before the ls
#     (the root check runs in the background);
#   - the same with the mount's cfsd stopped: offline, and the mount
#     that fails without a kept root;
#   - the first three as a plain ring client (--bootstrap, no cfsd).
# The mount runs in the foreground (-f); its "mounted" line on stdout ends
# the wait, then ls runs. Each case BENCH_RUNS times (default 7): the
# median and the fastest.
# Usage: bench-mount-start.sh BIN_DIR   (BENCH_RUNS, BENCH_FILES)
set -euo pipefail
BIN=$1
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-mount-start.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
. "$here/lib.sh"
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/xdg-state
unset CFS_BOOTSTRAP
RUNS=${BENCH_RUNS:-7}
FILES=${BENCH_FILES:-200}
N=8
M=3 # the daemon the mount talks to
MOUNT=$BIN/cfs-mount
mnt=$TEST_DIR/mnt
state=$TEST_DIR/mstate
cache=$TEST_DIR/mcache
MOUNT_PID=
bench_cleanup() {
	[ -n "$MOUNT_PID" ] && kill -TERM "$MOUNT_PID" 2>/dev/null && wait "$MOUNT_PID" 2>/dev/null
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt"
	cleanup
	cluster_cleanup
	rm -rf "$TEST_DIR"
}
trap bench_cleanup EXIT

src=$TEST_DIR/src
mkdir -p "$src" "$mnt"
for i in $(seq 1 "$FILES"); do head -c $((RANDOM % 20000)) /dev/urandom >"$src/f$i"; done
for d in a b c d e; do mkdir "$src/$d"; echo "$d" >"$src/$d/readme"; done
cluster_start "$N" 1 --stabilize-ms 500 --replicas 3
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
"$BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$BIN/cfs-publish" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }

# one: mount, wait for its line on stdout, ls the top directory; prints
# the seconds from the start of cfs-mount to the end of ls, then unmounts.
one() {
	local fifo=$TEST_DIR/fifo t0 line secs
	rm -f "$fifo"
	mkfifo "$fifo"
	t0=$(now)
	"$MOUNT" -f "${TARGET[@]}" --state-dir "$state" --disk-cache-mb 64 \
		--cache-dir "$cache" "$vol" "$mnt" >"$fifo" 2>>"$TEST_DIR/mount.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	read -r line <"$fifo" || { tail -3 "$TEST_DIR/mount.log" >&2; fail "cfs-mount did not mount"; }
	[ "$(ls "$mnt" | wc -l)" -eq $((FILES + 5)) ] || fail "ls lists $(ls "$mnt" | wc -l) entries"
	secs=$(since "$t0")
	kill -TERM "$MOUNT_PID"
	wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
	MOUNT_PID=
	echo "$secs"
}
# run CASE PREPARE: RUNS mounts, PREPARE before each; one result line.
run() {
	local name=$1 prep=$2 i
	: >"$TEST_DIR/times"
	for i in $(seq 1 "$RUNS"); do
		$prep
		one >>"$TEST_DIR/times"
	done
	python3 - "$name" "$TEST_DIR/times" <<'EOF'
import statistics, sys
t = sorted(float(l) * 1000 for l in open(sys.argv[2]) if l.strip())
print("  %-46s %8.1f ms %8.1f ms" % (sys.argv[1], statistics.median(t), t[0]))
EOF
}
cold() { rm -rf "$state" "$cache"; }
no_root() { rm -f "$state/$vol.root"; }
keep() { :; }

TARGET=(--data "$TEST_DIR/node$M")
echo "cfs-mount start to the first ls of / returning: $N-daemon loopback ring, through cfsd,"
echo "$((FILES + 5)) entries in /, disk cache on, $RUNS runs each"
printf '  %-46s %11s %11s\n' "" median fastest
run "cold (no root kept, empty disk cache)" cold
run "warm disk cache, no root kept" no_root
run "kept root, warm disk cache" keep
grep -q "starting from the cached root" "$TEST_DIR/mount.log" || fail "no mount started from the kept root"
# as a plain ring client: the root is looked up and voted on by its
# replicas, the top directory looked up and fetched, before the first ls
TARGET=(--bootstrap "$(cluster_addr 0)")
export CFS_CONTACTS=off
run "plain client: cold" cold
run "plain client: warm disk cache, no root kept" no_root
run "plain client: kept root, warm disk cache" keep
TARGET=(--data "$TEST_DIR/node$M")
cluster_stop "$M"
run "kept root, warm disk cache, cfsd stopped" keep
# the same without a kept root: the mount fails, as it must with nothing
# to start from
no_root
t0=$(now)
"$MOUNT" -f --data "$TEST_DIR/node$M" --state-dir "$state" --disk-cache-mb 64 --cache-dir "$cache" \
	"$vol" "$mnt" >/dev/null 2>>"$TEST_DIR/mount.log" && fail "mounted with no root kept and no cfsd"
printf '  %-46s %s\n' "no root kept, cfsd stopped" "exit 1 after $(python3 -c "print('%.1f' % (float('$(since "$t0")') * 1000))") ms"
