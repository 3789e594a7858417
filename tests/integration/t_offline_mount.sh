#!/bin/bash
# Offline and instant mounts, on a 4-daemon loopback ring (k = 3), through
# real kernel FUSE mounts with a disk cache:
#   - an online mount keeps the verified root beside the rollback state
#     (STATE/VOLUME.root) and fills the disk cache with what it reads;
#   - the mount's own daemon stopped: a remount starts from the kept root
#     at once, the tree lists, every file read before reads back equal to
#     its source, a file never read is EIO within the fetch bound, and
#     user.cfs.offline says 1; a kept root altered on disk is refused in
#     one line and the mount fails as it does without one;
#   - the whole ring stopped: the same, as a plain ring client whose
#     fetches time out;
#   - the ring back on the same data directories and a newer version
#     published: that mount picks it up (cfsctl update), user.cfs.offline
#     goes back to 0, and the kept root is the newer one.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
MOUNT=$CFS_BIN/cfs-mount
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/xdg-state
unset CFS_BOOTSTRAP
N=4
K=3
M=2 # the daemon the first mounts talk to
TIMEOUT_MS=2000
RETRIES=1
# a block neither cache holds: (retries + 1) fetches and the pauses
# between them (blocks.c), with a second of slack for the kernel and us
BOUND_S=$(((RETRIES + 1) * TIMEOUT_MS / 1000 + 1 + 1))
mnt=$TEST_DIR/mnt
state=$TEST_DIR/mstate
cache=$TEST_DIR/mcache
MOUNT_PID=
trap 'mount_cleanup; cleanup; cluster_cleanup' EXIT

# ---- the tree: files to read, and one never read (over the 256 KiB up
# to which a listed directory's files are fetched ahead)
src=$TEST_DIR/src
mkdir -p "$src/read/sub" "$src/unread" "$mnt"
echo "small" >"$src/read/small"
head -c 20000 /dev/urandom >"$src/read/a"
head -c 300000 /dev/urandom >"$src/read/b"
head -c 1500000 /dev/urandom >"$src/read/sub/c"
head -c 1048576 /dev/urandom >"$src/unread/big"
echo v1 >"$src/version"
read_files="read/small read/a read/b read/sub/c version"

cluster_start "$N" 1 --stabilize-ms 250 --ring-check-ms 2000 --sync-ms 5000 --replicas "$K"
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }

xa() { python3 -c "import os,sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())" "$@"; }
xl() { python3 -c "import os,sys; print(' '.join(sorted(os.listxattr(sys.argv[1]))))" "$1"; }
stat_of() { python3 -c "import json,os,sys; print(json.loads(os.getxattr(sys.argv[1], 'user.cfs.stats'))[sys.argv[2]])" "$mnt" "$1"; }
is_offline() { [ "$(xa "$mnt" user.cfs.offline)" = "$1" ]; }
# start_mount ARGS...: mount with the disk cache; MOUNT_S: seconds until mounted.
start_mount() {
	local t0
	t0=$(date +%s.%N)
	"$MOUNT" -f --state-dir "$state" --disk-cache-mb 64 --cache-dir "$cache" \
		--timeout "$TIMEOUT_MS" --retries "$RETRIES" "$@" "$vol" "$mnt" \
		>"$TEST_DIR/mount.out" 2>>"$TEST_DIR/mount.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	wait_for 20 mountpoint -q "$mnt" || { tail -5 "$TEST_DIR/mount.log"; fail "not mounted ($*)"; }
	MOUNT_S=$(printf '%.2f' "$(echo "$(date +%s.%N) - $t0" | bc)")
}
stop_mount() {
	kill -TERM "$MOUNT_PID"
	wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
	MOUNT_PID=
}
listing() { (cd "$1" && find . | LC_ALL=C sort); }
# offline_checks WHAT: the tree lists, what was read reads back, the
# unread file is EIO within the bound, the mount says it is offline.
offline_checks() {
	local what=$1 f t0 secs
	grep -q "starting from the cached root (sequence 1" "$TEST_DIR/mount.log" ||
		fail "$what: the mount did not start from the kept root: $(tail -3 "$TEST_DIR/mount.log")"
	[ "$(listing "$src")" = "$(listing "$mnt")" ] || fail "$what: the tree does not list as its source"
	for f in $read_files; do
		cmp -s "$src/$f" "$mnt/$f" || fail "$what: $f differs from its source"
	done
	t0=$(date +%s.%N)
	timeout 60 cat "$mnt/unread/big" >/dev/null 2>"$TEST_DIR/cat.err" && fail "$what: a file never read was read"
	secs=$(printf '%.2f' "$(echo "$(date +%s.%N) - $t0" | bc)")
	grep -q "Input/output error" "$TEST_DIR/cat.err" || fail "$what: the unread file: $(cat "$TEST_DIR/cat.err")"
	[ "$(echo "$secs <= $BOUND_S" | bc)" = 1 ] || fail "$what: EIO after $secs s, over the bound of $BOUND_S s"
	wait_for 30 is_offline 1 || fail "$what: user.cfs.offline is $(xa "$mnt" user.cfs.offline), not 1"
	local age
	age=$(xa "$mnt" user.cfs.root_age)
	[ "$age" -ge 0 ] && [ "$age" -le $((SECONDS + 60)) ] || fail "$what: user.cfs.root_age '$age'"
	[ "$(xl "$mnt")" = "user.cfs.key user.cfs.offline user.cfs.root_age user.cfs.seq user.cfs.stats user.cfs.volume" ] ||
		fail "$what: listxattr of /: $(xl "$mnt")"
	# cfsctl status lists the mount as it reports itself, with no daemon to ask
	"$CFSCTL" --data "$TEST_DIR/node$M" status >"$TEST_DIR/status.out" 2>/dev/null || true
	grep -qF "  $mnt (cfs:${vol:0:16}): version 1, signed " "$TEST_DIR/status.out" &&
		grep -F "  $mnt " "$TEST_DIR/status.out" | grep -q "OFFLINE" ||
		fail "$what: cfsctl status: $(cat "$TEST_DIR/status.out")"
	ok "$what: mounted in $MOUNT_S s from the kept root; the tree lists, $(wc -w <<<"$read_files") files read before read back equal, the unread one is EIO in $secs s (bound $BOUND_S s), offline = 1, root_age = $age s"
	echo "# $what: mounted in $MOUNT_S s, EIO in $secs s"
}

# ---- online: read some files, let the census list every directory
start_mount --data "$TEST_DIR/node$M" --update 1
for f in $read_files; do cmp -s "$src/$f" "$mnt/$f" || fail "online: $f differs"; done
wait_for 30 test "$(stat_of census_complete)" = True || fail "the census did not complete"
is_offline 0 || fail "an online mount says offline"
[ "$(cat "$state/$vol.seq")" = 1 ] || fail "the recorded sequence is '$(cat "$state/$vol.seq")'"
[ -s "$state/$vol.root" ] || fail "no root kept in $state/$vol.root"
[ "$(stat -c %a "$state/$vol.root")" = 600 ] || fail "the kept root's mode is $(stat -c %a "$state/$vol.root")"
stop_mount
ok "online mount: files read, the root kept in STATE/VOLUME.root (0600) beside VOLUME.seq"

# ---- the mount's own daemon stopped
cluster_stop "$M"
# a kept root altered on disk: refused in one line, and the mount fails as
# without one (its daemon does not answer)
cp "$state/$vol.root" "$TEST_DIR/root.good"
python3 - "$state/$vol.root" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-10] ^= 1 # in the signature
open(p, "wb").write(bytes(b))
EOF
expect_exit 1 "$MOUNT" -f --state-dir "$state" --disk-cache-mb 64 --cache-dir "$cache" \
	--data "$TEST_DIR/node$M" "$vol" "$mnt"
grep -q "not starting from the cached root .*: its signature does not verify" "$TEST_DIR/err" ||
	fail "an altered kept root: $(cat "$TEST_DIR/err")"
[ "$(grep -c "cached root" "$TEST_DIR/err")" = 1 ] || fail "the refusal takes more than one line: $(cat "$TEST_DIR/err")"
grep -q "no cfsd" "$TEST_DIR/err" || fail "no error about the daemon: $(cat "$TEST_DIR/err")"
mountpoint -q "$mnt" && fail "mounted from an altered root"
cp "$TEST_DIR/root.good" "$state/$vol.root"
ok "a kept root whose signature does not verify is refused in one line; the mount then fails as before"

start_mount --data "$TEST_DIR/node$M" --update 1
offline_checks "local daemon stopped"
stop_mount

# ---- the whole ring stopped: a plain ring client, whose fetches time out
for ((i = 0; i < N; i++)); do cluster_alive "$i" && cluster_stop "$i"; done
start_mount --bootstrap "$(cluster_addr 0)" --update 2
offline_checks "whole ring stopped"

# ---- the ring back, a newer version: the same mount picks it up
for i in $(seq 1 $((N - 1))) 0; do
	cluster_run "$i"
	cluster_wait_up "$i"
done
cluster_wait_correct 60 || fail "the ring did not come back"
echo v2 >"$src/version"
echo new >"$src/added"
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish v2"; }
updated() { "$CFSCTL" update "$mnt" >"$TEST_DIR/update.out" 2>&1 && grep -q "version 2" "$TEST_DIR/update.out"; }
wait_for 60 updated || fail "the mount did not pick up version 2: $(cat "$TEST_DIR/update.out"); $(tail -3 "$TEST_DIR/mount.log")"
[ "$(cat "$mnt/version")" = v2 ] || fail "version reads '$(cat "$mnt/version")' after the update"
[ "$(cat "$mnt/added")" = new ] || fail "the added file"
[ "$(xa "$mnt" user.cfs.seq)" = 2 ] || fail "user.cfs.seq is $(xa "$mnt" user.cfs.seq)"
is_offline 0 || fail "user.cfs.offline is still $(xa "$mnt" user.cfs.offline) with the ring back"
grep -q "online: the root check was answered" "$TEST_DIR/mount.log" || fail "no log line for being online again"
[ "$(cat "$state/$vol.seq")" = 2 ] || fail "the recorded sequence is '$(cat "$state/$vol.seq")'"
cmp -s "$TEST_DIR/root.good" "$state/$vol.root" && fail "the kept root is still the first version's"
stop_mount
ok "the ring back and version 2 published: the mount switched to it (cfsctl update), offline = 0, the kept root is sequence 2"
