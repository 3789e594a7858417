#!/bin/bash
# cfs-mount on a 16-daemon loopback ring (k = 6), through a real kernel
# FUSE mount:
#   - a published tree with every kind of entry reads back equal to its
#     source: contents, types, modes, sizes, mtimes, link targets (listing
#     and diff -r), tar of the mount equals tar of the source, cp -a out of
#     it works, and a git repository inside passes git fsck and git log;
#   - a file larger than 4 GiB has its size and its last bytes;
#   - it is read-only (EROFS) and exposes user.cfs.key / user.cfs.seq;
#   - a newer root is picked up; a file opened before keeps reading the
#     version it opened; a remembered higher sequence refuses an older root;
#   - a block whose every replica is gone is EIO within a bounded time and
#     the rest of the mount keeps working;
#   - SIGTERM unmounts and exits.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
. "$(dirname "$0")/../harness/tree.sh"
PUBLISH=$CFS_BIN/cfs-publish
MOUNT=$CFS_BIN/cfs-mount
LISTING=$(dirname "$0")/tree-listing.py
export XDG_CONFIG_HOME=$TEST_DIR/config
N=16
M=5 # the daemon the mount talks to
mnt=$TEST_DIR/mnt
MOUNT_PID=
trap 'mount_cleanup; cleanup; cluster_cleanup' EXIT

# ---- the tree
src=$TEST_DIR/src
t=$src/tree
make_tree "$t" 3000 12
git init -q "$t/repo"
cp -r "$(dirname "$0")/../../docs" "$t/repo/docs"
git -C "$t/repo" add -A
git -C "$t/repo" -c user.name=t -c user.email=t@t commit -qm "first"
echo more >>"$t/repo/docs/README.extra"
git -C "$t/repo" add -A
git -C "$t/repo" -c user.name=t -c user.email=t@t commit -qm "second"
truncate -s 4500M "$src/huge"
printf 'the end of a huge file' | dd of="$src/huge" bs=1 seek=$((4500 * 1024 * 1024 - 22)) conv=notrunc status=none
echo v1 >"$src/version"
mkdir "$src/large"
for i in 1 2 3 4; do head -c $((6 << 20)) /dev/urandom >"$src/large/r$i"; done
head -c $((64 << 20)) /dev/urandom >"$src/large/during-failure"
mkdir "$src/untouched" # never read before the replica-loss check
# 24 of them: the replica-loss check needs one whose inode the mount's own
# daemon does not hold, and after the k-1 failure below maintenance has
# copied many blocks to more servers than k (8 files were sometimes too few)
for i in $(seq 1 24); do head -c 2000 /dev/urandom >"$src/untouched/f$i"; done
ok "tree generated"

cluster_start "$N" 1 --stabilize-ms 250
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"
echo "# ring of $N daemons converged in ${CLUSTER_CONVERGED_S}s"

"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
start=$SECONDS
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >"$TEST_DIR/out" 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish to the ring"; }
[ "$(cat "$TEST_DIR/out")" = "$vol" ] || fail "publish printed '$(cat "$TEST_DIR/out")'"
echo "# published to the ring in $((SECONDS - start)) s: $(grep -o '[0-9]* files.*' "$TEST_DIR/err")"

mkdir -p "$mnt"
start_mount() { # extra cfs-mount options
	"$MOUNT" -f --data "$TEST_DIR/node$M" --state-dir "$TEST_DIR/state" "$@" "$vol" "$mnt" \
		>"$TEST_DIR/mount.out" 2>>"$TEST_DIR/mount.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted"; }
	[ "$(cat "$TEST_DIR/mount.out")" = "$mnt" ] || fail "cfs-mount printed '$(cat "$TEST_DIR/mount.out")'"
}
start_mount --update 1 --timeout 3000 --retries 1

# ---- the tree reads back equal
start=$SECONDS
python3 "$LISTING" "$t" | sort >"$TEST_DIR/source"
python3 "$LISTING" "$mnt/tree" | sort >"$TEST_DIR/mounted"
diff "$TEST_DIR/source" "$TEST_DIR/mounted" >"$TEST_DIR/diff" ||
	{ head -20 "$TEST_DIR/diff"; fail "the mounted tree differs from the source"; }
entries=$(wc -l <"$TEST_DIR/source")
[ "$entries" -gt 3000 ] || fail "only $entries entries compared"
diff -r --no-dereference "$t" "$mnt/tree" || fail "diff -r finds differences"
ok "mounted tree equals the source: $entries entries (contents, types, modes, sizes, mtimes, targets) in $((SECONDS - start)) s"

tar_of() { tar -C "$1" -c --sort=name --owner=0 --group=0 --numeric-owner --format=gnu . | sha256sum; }
[ "$(tar_of "$t")" = "$(tar_of "$mnt/tree")" ] || fail "tar of the mount differs from tar of the source"
cp -a "$mnt/tree" "$TEST_DIR/copy" || fail "cp -a out of the mount"
diff -r --no-dereference "$t" "$TEST_DIR/copy" || fail "the copy differs"
git -C "$mnt/tree/repo" fsck --no-dangling >"$TEST_DIR/git.out" 2>&1 || { cat "$TEST_DIR/git.out"; fail "git fsck"; }
[ "$(git -C "$mnt/tree/repo" log --format=%s | tr '\n' ' ')" = "second first " ] || fail "git log"
ok "tar equal, cp -a works, git fsck and git log pass inside the mount"

[ "$(stat -c %s "$mnt/huge")" = $((4500 * 1024 * 1024)) ] || fail "size of the 4.5 GiB file: $(stat -c %s "$mnt/huge")"
tail=$(dd if="$mnt/huge" bs=1M skip=4499 status=none | tail -c 22)
[ "$tail" = "the end of a huge file" ] || fail "the end of the 4.5 GiB file reads '$tail'"
ok "a 4.5 GiB file: size and last bytes"

# ---- four concurrent readers of different large files
rpids=()
for i in 1 2 3 4; do cmp "$src/large/r$i" "$mnt/large/r$i" & rpids+=($!); done
for p in "${rpids[@]}"; do wait "$p" || fail "a concurrent reader got wrong bytes"; done
ok "four concurrent readers of different 6 MiB files get the right bytes"

# ---- read-only: writes of every kind
erofs() { # what COMMAND...
	local what=$1; shift
	"$@" 2>"$TEST_DIR/err" && fail "$what succeeded on the mount"
	grep -q "Read-only file system" "$TEST_DIR/err" || fail "$what: $(cat "$TEST_DIR/err")"
}
erofs create touch "$mnt/new"
erofs write sh -c "echo x >>'$mnt/version'"
erofs truncate truncate -s 0 "$mnt/version"
erofs unlink rm -f "$mnt/version"
erofs chmod chmod 600 "$mnt/version"
erofs rename mv "$mnt/version" "$mnt/version2"
erofs mkdir mkdir "$mnt/newdir"
erofs symlink ln -s x "$mnt/newlink"
xa() { python3 -c "import os,sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())" "$@"; }
[ "$(xa "$mnt" user.cfs.seq)" = 1 ] || fail "user.cfs.seq of / is $(xa "$mnt" user.cfs.seq)"
[ "$(xa "$mnt" user.cfs.volume)" = "$vol" ] || fail "user.cfs.volume"
key=$(xa "$mnt/tree/three-mb" user.cfs.key)
[ ${#key} = 64 ] || fail "user.cfs.key '$key'"
[[ "$("$CFSCTL" --data "$TEST_DIR/node$M" get --check "$key")" == *" ok "* ]] || fail "the inode named by user.cfs.key is not on the ring"
# every attribute is listed: the top directory's with user.cfs.stats
xl() { python3 -c "import os,sys; print(' '.join(sorted(os.listxattr(sys.argv[1]))))" "$1"; }
[ "$(xl "$mnt")" = "user.cfs.key user.cfs.offline user.cfs.root_age user.cfs.seq user.cfs.stats user.cfs.volume" ] || fail "listxattr of /: $(xl "$mnt")"
[ "$(xl "$mnt/version")" = "user.cfs.key user.cfs.seq user.cfs.volume" ] || fail "listxattr of a file: $(xl "$mnt/version")"
python3 -c "import json,os,sys; json.loads(os.getxattr(sys.argv[1], 'user.cfs.stats'))" "$mnt" || fail "user.cfs.stats is not JSON"
[ "$(xa "$mnt" user.cfs.offline)" = 0 ] || fail "user.cfs.offline of an online mount: $(xa "$mnt" user.cfs.offline)"
[ "$(xa "$mnt" user.cfs.root_age)" -lt 3600 ] || fail "user.cfs.root_age of a fresh root: $(xa "$mnt" user.cfs.root_age)"
ok "EROFS on create, write, truncate, unlink, chmod, rename, mkdir, symlink; user.cfs.seq, user.cfs.volume, user.cfs.key (fetchable), user.cfs.stats, all listed"

# ---- a newer root; an open file keeps its version
exec 7<"$mnt/version"
echo v2 >"$src/version"
echo new >"$src/added"
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish v2"; }
wait_for 30 test -e "$mnt/added" || fail "the mount did not pick up the new root: $(tail -3 "$TEST_DIR/mount.log")"
[ "$(cat "$mnt/version")" = v2 ] || fail "after the switch version reads '$(cat "$mnt/version")'"
[ "$(cat <&7)" = v1 ] || fail "a file opened before the switch does not read its old version"
exec 7<&-
[ "$(xa "$mnt" user.cfs.seq)" = 2 ] || fail "user.cfs.seq after the switch"
ok "newer root picked up (sequence 2); a file opened before still reads v1"

# ---- k-1 daemons killed during a read: it completes, correct
cmp "$src/large/during-failure" "$mnt/large/during-failure" &
rpid=$!
sleep 0.1
kill -0 "$rpid" 2>/dev/null || fail "the read ended before the daemons were killed: the test would test nothing"
killed=()
for ((i = 0; i < CL_N && ${#killed[@]} < 5; i++)); do
	[ "$i" -eq "$M" ] && continue
	[ $((i % 3)) -eq 1 ] || continue # spread over the ring: every third daemon
	cluster_kill "$i"; killed+=("$i")
done
for ((i = CL_N - 1; i >= 0 && ${#killed[@]} < 5; i--)); do
	[ "$i" -eq "$M" ] || ! cluster_alive "$i" || { cluster_kill "$i"; killed+=("$i"); }
done
wait "$rpid" || fail "a read during the failure of 5 daemons (k-1) returned wrong bytes or failed"
echo "# killed ${#killed[@]} daemons (${killed[*]}) during a 64 MiB read: it completed, correct"
ok "k-1 daemons killed during a read: the read completes with the right bytes"
for i in "${killed[@]}"; do cluster_restart "$i"; done
cluster_wait_correct 60 || fail "the ring did not recover after the killed daemons came back"

# ---- a disk cache makes a remount warm: not one block from the ring
remount() { # extra cfs-mount options
	kill -TERM "$MOUNT_PID"
	wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
	mountpoint -q "$mnt" && fail "still mounted after SIGTERM"
	start_mount --update 1 --timeout 3000 --retries 1 "$@"
}
stat_of() { python3 -c "import json,os,sys; print(json.loads(os.getxattr(sys.argv[1], 'user.cfs.stats'))[sys.argv[2]])" "$mnt" "$1"; }
remount --disk-cache-mb 32 --cache-dir "$TEST_DIR/cache"
cmp -s "$src/tree/three-mb" "$mnt/tree/three-mb" || fail "reading through a mount with a disk cache"
cold=$(stat_of fetches)
[ "$cold" -gt 0 ] || fail "the first mount with an empty disk cache fetched nothing"
remount --disk-cache-mb 32 --cache-dir "$TEST_DIR/cache"
cmp -s "$src/tree/three-mb" "$mnt/tree/three-mb" || fail "reading from the disk cache after a remount"
[ "$(stat_of fetches)" -eq 0 ] || fail "the remount fetched $(stat_of fetches) blocks from the ring: not warm"
hits=$(stat_of disk_hits)
[ "$hits" -ge $((3000000 / 65536)) ] || fail "only $hits disk-cache hits for a 3 MB file (64 KiB blocks)"
echo "# remount with a disk cache: a 3 MB file read again with 0 fetches from the ring ($cold cold), $hits blocks from disk"
ok "a disk cache makes a remount warm: every block of the path and the file from disk"

# ---- relative paths: mounted, the process works from /, so --data,
# --state-dir, --cache-dir and the mountpoint are made absolute before that
kill -TERM "$MOUNT_PID"
wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
(cd "$TEST_DIR" && exec "$MOUNT" -f --data "node$M" --state-dir state --disk-cache-mb 32 --cache-dir cache \
	--update 1 --timeout 3000 --retries 1 "$vol" mnt >mount.out 2>>mount.log) &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted with relative paths"; }
[ "$(cat "$TEST_DIR/mount.out")" = "$mnt" ] || fail "cfs-mount printed '$(cat "$TEST_DIR/mount.out")', not $mnt"
cmp -s "$src/large/r1" "$mnt/large/r1" || fail "reading large/r1 through the cfsd named by a relative --data"
[ "$(stat_of fetches)" -gt 0 ] || fail "nothing fetched through the relative --data"
cmp -s "$src/tree/three-mb" "$mnt/tree/three-mb" || fail "reading three-mb with a relative --cache-dir"
[ "$(stat_of disk_hits)" -ge $((3000000 / 65536)) ] || fail "the relative --cache-dir was not the disk cache used before"
ok "relative --data, --state-dir, --cache-dir and mountpoint: printed absolute, fetches and disk cache work"

# ---- a block with no replica left: EIO, bounded, the rest still works
holders() { # KEY: indices of the daemons storing it
	local i
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" || continue
		# to a file first: grep -q would end the pipe early (SIGPIPE, pipefail)
		"$CFSCTL" --data "$TEST_DIR/node$i" keys >"$TEST_DIR/keys.out" || continue
		grep -q "^$1" "$TEST_DIR/keys.out" && echo "$i"
	done
	true
}
victim=
for f in $(seq -f 'f%g' 1 24); do
	k=$(xa "$mnt/untouched/$f" user.cfs.key)
	h=$(holders "$k")
	if [ "$(wc -w <<<"$h")" -ge 3 ] && ! grep -qx "$M" <<<"$h"; then victim=$f; break; fi
done
[ -n "$victim" ] || fail "no file whose inode the mount's own daemon does not hold"
# Blocks in the same arc of the ring as the victim's inode lose their
# replicas too, so "the rest still works" is shown on what the mount holds:
# a file read just before, and the directories.
other=f1; [ "$victim" = f1 ] && other=f2
cmp -s "$src/untouched/$other" "$mnt/untouched/$other" || fail "reading $other"
for i in $h; do cluster_kill "$i"; done
echo "# killed daemons $(echo $h | tr '\n' ' ')holding the inode of $victim"
start=$SECONDS
cat "$mnt/untouched/$victim" >/dev/null 2>"$TEST_DIR/err" && fail "reading $victim with every replica gone succeeded"
took=$((SECONDS - start))
grep -q "Input/output error" "$TEST_DIR/err" || fail "reading a lost block: $(cat "$TEST_DIR/err")"
[ $took -le 30 ] || fail "EIO took $took s"
grep -q "$(echo "$k" | head -c 8)" "$TEST_DIR/mount.log" || fail "the lost block's key is not in the log"
cmp -s "$src/untouched/$other" "$mnt/untouched/$other" || fail "the mount stopped working after an EIO"
ls -l "$mnt/untouched" >/dev/null || fail "ls after an EIO"
echo "# every replica of one inode gone: EIO after ${took}s (bound 30 s)"
ok "every replica gone: EIO after ${took}s (bound 30 s), key logged; the rest of the mount works"
# The killed holders may include every holder of the root block: bring them
# back, so that the next step tests the remembered sequence, not a lost root.
for i in $h; do cluster_restart "$i"; done
cluster_wait_correct 60 || fail "the ring did not recover after the inode's holders came back"

# ---- rollback protection: a remembered higher sequence refuses the ring's root
kill -TERM "$MOUNT_PID"
wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
mountpoint -q "$mnt" && fail "still mounted after SIGTERM"
MOUNT_PID=
[ "$(cat "$TEST_DIR/state/$vol.seq")" = 2 ] || fail "the highest sequence seen was not kept"
echo 99 >"$TEST_DIR/state/$vol.seq"
expect_exit 1 "$MOUNT" -f --data "$TEST_DIR/node$M" --state-dir "$TEST_DIR/state" "$vol" "$mnt" 2>"$TEST_DIR/err"
grep -q "older than one already seen" "$TEST_DIR/err" || fail "an older root: $(cat "$TEST_DIR/err")"
mountpoint -q "$mnt" && fail "mounted an older root"
ok "SIGTERM unmounts and exits 0; a root below the remembered sequence is refused"

# ---- a mount point that is not empty: refused, unless -o nonempty
echo 2 >"$TEST_DIR/state/$vol.seq"
echo mine >"$mnt/own-file"
expect_exit 1 "$MOUNT" -f --data "$TEST_DIR/node$M" --state-dir "$TEST_DIR/state" "$vol" "$mnt" 2>"$TEST_DIR/err"
grep -q "is not empty" "$TEST_DIR/err" || fail "a non-empty mount point: $(cat "$TEST_DIR/err")"
[ "$(wc -l <"$TEST_DIR/err")" = 1 ] || fail "the refusal took more than one line: $(cat "$TEST_DIR/err")"
mountpoint -q "$mnt" && fail "mounted over a non-empty directory"
start_mount -o nonempty
[ -e "$mnt/version" ] && [ ! -e "$mnt/own-file" ] || fail "-o nonempty: the volume is not what is seen there"
kill -TERM "$MOUNT_PID"
wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
MOUNT_PID=
[ "$(cat "$mnt/own-file")" = mine ] || fail "the directory's own file is gone after unmounting"
rm -f "$mnt/own-file"
ok "a non-empty mount point is refused in one line; -o nonempty mounts over it and leaves it as it was"
