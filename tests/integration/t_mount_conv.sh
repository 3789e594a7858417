#!/bin/bash
# cfs-mount under mount(8)'s and FUSE's conventions, on a
# one-daemon ring reached as a plain client (-o bootstrap=...):
#   - --version of cfs-mount and cfs-cat; cfs-cat's error does not say "mount";
#   - cfs-mount -o rw, and mount -t fuse.cfs-mount -o rw, give read-only
#     mounts: writes fail with EROFS "Read-only file system";
#   - statfs: f_flag has ST_RDONLY; the size and file count are the
#     volume's (computed here from the source); df shows a nonzero size and
#     df -i no 100 %;
#   - a second mount of one volume at one place is refused, with a message;
#   - cfsctl update VOLUME makes a mount that never checks by itself show a
#     newer version at once (under a second); update MOUNTPOINT says it is
#     the newest; a plain directory and an unmounted volume are errors;
#   - mount -t cfs (the mount.cfs helper) and an fstab line (mount -T FILE,
#     with _netdev, noauto, nofail, x-*) mount it;
#   - as root without a MOUNTPOINT: /cfs/VOLUME, allow_other, readable by
#     nobody (and a 0600 file is not); its background daemon logs to syslog;
#     umount ends it and removes the directory; a failed mount leaves no
#     directory behind.
# Everything that mounts runs in a private mount and PID namespace (unshare
# -m -p): /cfs, /dev/log and /sbin/mount.cfs are overlaid there only, and
# every process in it dies with it.
. "$(dirname "$0")/lib.sh"
MOUNT=$CFS_BIN/cfs-mount
PUBLISH=$CFS_BIN/cfs-publish
export XDG_CONFIG_HOME=$TEST_DIR/config
made_cfs=
trap 'cleanup; [ -z "$made_cfs" ] || rmdir /cfs 2>/dev/null || true' EXIT

[ "$(id -u)" -eq 0 ] || fail "this test mounts file systems: run it as root"
[ -x "$CFS_BIN/mount.cfs" ] || fail "no $CFS_BIN/mount.cfs (make builds it)"

# ---- --version, and cfs-cat's message
v=$("$MOUNT" --version) || fail "cfs-mount --version"
[[ $v =~ ^cfs-mount\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "cfs-mount --version printed '$v'"
v2=$("$CFS_BIN/cfs-cat" -V) || fail "cfs-cat -V"
[ "$v2" = "cfs-cat ${v#cfs-mount }" ] || fail "cfs-cat -V printed '$v2'"
ok "--version: '$v', '$v2'"

# ---- a volume on a one-daemon ring
port=$(free_port)
start_cfsd n0 "$port"
boot=127.0.0.1:$port
src=$TEST_DIR/src
mkdir -p "$src/sub/deeper"
echo "hello, every user" >"$src/hello"
head -c 300000 /dev/urandom >"$src/sub/big"
echo secret >"$src/sub/private"
chmod 0600 "$src/sub/private"
ln -s hello "$src/link"
for i in $(seq 1 20); do echo "$i" >"$src/sub/deeper/f$i"; done
chmod 0755 "$src" "$src/sub" "$src/sub/deeper"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/n0/cfsd.sock" "$src" >"$TEST_DIR/pub.out" 2>&1 ||
	{ cat "$TEST_DIR/pub.out"; fail "publish"; }
"$PUBLISH" --keygen "$TEST_DIR/other.key" >"$TEST_DIR/vol2" 2>/dev/null || fail "keygen"
unpublished=$(cat "$TEST_DIR/vol2")

# what statfs should say, from the source: every entry and the root; the
# files' sizes in blocks of the default size (64 KiB), each file rounded up
want_files=$(find "$src" | wc -l)
want_blocks=$(python3 -c 'import os,sys
n=0
for d,ds,fs in os.walk(sys.argv[1]):
    for f in fs:
        p=os.path.join(d,f)
        if not os.path.islink(p): n+=(os.path.getsize(p)+65535)//65536
print(n)' "$src")
echo "# the volume: $want_files entries, $want_blocks blocks of 64 KiB"

# cfs-cat reads; it does not mount, and its failure says so
"$CFS_BIN/cfs-cat" --bootstrap "$boot" "$unpublished" /hello >/dev/null 2>"$TEST_DIR/cat.err" &&
	fail "cfs-cat of an unpublished volume succeeded"
grep -q "cannot read volume" "$TEST_DIR/cat.err" && ! grep -q "mount" "$TEST_DIR/cat.err" ||
	{ cat "$TEST_DIR/cat.err"; fail "cfs-cat's error should say 'cannot read volume', not mount"; }
ok "cfs-cat's error: $(head -1 "$TEST_DIR/cat.err" | cut -d' ' -f2- | cut -c1-60)..."

# /cfs exists on this machine only for the test's duration, when missing;
# what is mounted on it is in the namespace below
if [ ! -d /cfs ]; then mkdir /cfs; made_cfs=1; fi

cat >"$TEST_DIR/inner.sh" <<'EOF'
set -euo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
wait_for() { local end=$((SECONDS + $1)); shift; until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $end ] || return 1; sleep 0.05; done; }
mounted_at() { awk -v m="$1" '$5 == m' /proc/self/mountinfo; }
# erofs DIR: every kind of write under DIR fails with EROFS
erofs() {
	python3 - "$1" <<'PY' || fail "writes under $1 are not all EROFS"
import errno, os, sys
d = sys.argv[1]
tries = [lambda: os.open(d + "/new", os.O_WRONLY | os.O_CREAT, 0o644),
         lambda: os.open(d + "/hello", os.O_WRONLY),
         lambda: os.open(d + "/hello", os.O_RDONLY | os.O_TRUNC),
         lambda: os.mkdir(d + "/newdir"), lambda: os.unlink(d + "/hello"),
         lambda: os.rename(d + "/hello", d + "/renamed"), lambda: os.chmod(d + "/hello", 0o600),
         lambda: os.symlink("x", d + "/newlink"), lambda: os.utime(d + "/hello"),
         lambda: os.setxattr(d + "/hello", "user.x", b"1")]
for i, t in enumerate(tries):
    try:
        t()
        sys.exit("write %d succeeded" % i)
    except OSError as e:
        if e.errno != errno.EROFS:
            sys.exit("write %d: %s, not EROFS" % (i, e))
PY
	local msg
	msg=$( (echo x >"$1/new") 2>&1 ) && fail "echo > $1/new succeeded"
	[[ $msg == *"Read-only file system"* ]] || fail "echo > $1/new said '$msg'"
}
export PATH=$CFS_BIN:$PATH

# syslog, in this namespace: /dev overlaid, a listener at /dev/log
mkdir -p "$TEST_DIR/devup" "$TEST_DIR/devwork"
mount -t overlay overlay -o "lowerdir=/dev,upperdir=$TEST_DIR/devup,workdir=$TEST_DIR/devwork" /dev
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind("/dev/log")
with open(sys.argv[1], "ab", buffering=0) as f:
    while True: f.write(s.recv(4096) + b"\n")' "$TEST_DIR/syslog" &
wait_for 5 test -S /dev/log || fail "no syslog listener"
mount -t tmpfs -o mode=0755 tmpfs /cfs

# ---- -o rw: read-only all the same; statfs
m1=$TEST_DIR/m1; mkdir "$m1"
cfs-mount -f -o rw,bootstrap=$BOOT,state_dir=$TEST_DIR/state,update=0 "$VOL" "$m1" \
	>"$TEST_DIR/m1.out" 2>"$TEST_DIR/m1.err" &
wait_for 20 mountpoint -q "$m1" || { cat "$TEST_DIR/m1.err"; fail "cfs-mount -o rw did not mount"; }
cmp -s "$SRC/hello" "$m1/hello" || fail "the -o rw mount reads wrong bytes"
mounted_at "$m1" | grep -q " ro," || fail "the -o rw mount is not ro: $(mounted_at "$m1")"
erofs "$m1"
ok "cfs-mount -o rw: a ro mount ($(mounted_at "$m1" | cut -d' ' -f6)); 10 kinds of write get EROFS"
wait_for 10 python3 -c "import os,sys; sys.exit(os.statvfs('$m1').f_files != $WANT_FILES)" ||
	fail "statfs f_files $(python3 -c "import os; print(os.statvfs('$m1').f_files)"), wanted $WANT_FILES"
read -r flag_ro blocks bsize <<<"$(python3 -c "import os; s = os.statvfs('$m1'); print(int(bool(s.f_flag & os.ST_RDONLY)), s.f_blocks, s.f_frsize)")"
[ "$flag_ro" = 1 ] || fail "statfs f_flag has no ST_RDONLY"
[ "$blocks" = "$WANT_BLOCKS" ] && [ "$bsize" = 65536 ] || fail "statfs: $blocks blocks of $bsize, wanted $WANT_BLOCKS of 65536"
size=$(df --output=size "$m1" | tail -1 | tr -d ' ')
[ "$size" -gt 0 ] || fail "df shows size $size"
ipct=$(df --output=ipcent "$m1" | tail -1 | tr -d " ")
[ "$ipct" != "100%" ] || fail "df -i shows $ipct"
ok "statfs: ST_RDONLY, $blocks blocks of 64 KiB, $WANT_FILES files; df size ${size}K, df -i IUse% '$ipct'"

# ---- the same volume at the same place again
if cfs-mount -o bootstrap=$BOOT,state_dir=$TEST_DIR/state "$VOL" "$m1" >/dev/null 2>"$TEST_DIR/again.err"; then
	fail "a second mount of the volume at $m1 succeeded"
fi
grep -q "already mounted at $m1" "$TEST_DIR/again.err" || { cat "$TEST_DIR/again.err"; fail "no clear message"; }
[ "$(mounted_at "$m1" | wc -l)" = 1 ] || fail "two mounts stacked at $m1"
ok "a second mount at one place: refused ($(cut -d' ' -f3-9 "$TEST_DIR/again.err")...)"

# ---- cfsctl update: the mount (update=0: never by itself) checks now
cp -a "$SRC" "$TEST_DIR/src2"
echo "published later" >"$TEST_DIR/src2/added-later"
cfs-publish --to "cfsd:$TEST_DIR/n0/cfsd.sock" "$TEST_DIR/src2" >"$TEST_DIR/pub2.out" 2>&1 ||
	{ cat "$TEST_DIR/pub2.out"; fail "publishing version 2"; }
[ ! -e "$m1/added-later" ] || fail "the mount showed version 2 before it was asked"
t0=$(date +%s%N)
cfsctl update "$VOL" >"$TEST_DIR/update.out" 2>&1 || { cat "$TEST_DIR/update.out"; fail "cfsctl update VOLUME"; }
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$(cat "$TEST_DIR/update.out")" = "$m1: version 2 (was 1)" ] || fail "cfsctl update said '$(cat "$TEST_DIR/update.out")'"
cmp -s "$TEST_DIR/src2/added-later" "$m1/added-later" || fail "the new file is not in the mount after cfsctl update"
[ "$ms" -lt 1000 ] || fail "cfsctl update took $ms ms"
out=$(cfsctl update "$m1") || fail "cfsctl update MOUNTPOINT: $out"
[ "$out" = "$m1: version 2, the newest" ] || fail "cfsctl update MOUNTPOINT said '$out'"
out=$(cfsctl update "$TEST_DIR" 2>&1) && fail "cfsctl update of a plain directory succeeded"
[[ $out == *"not a cfs mount"* ]] || fail "cfsctl update of a plain directory said '$out'"
out=$(cfsctl update "$UNPUBLISHED" 2>&1) && fail "cfsctl update of an unmounted volume succeeded"
[ "$out" = "cfsctl: $UNPUBLISHED is not mounted here" ] || fail "cfsctl update of an unmounted volume said '$out'"
ok "cfsctl update: the mount showed version 2 in $ms ms; '$out'"

# mount(8) runs its helpers from /sbin, and mount.fuse3 finds cfs-mount
# on a PATH of its own: /sbin overlaid with the build's mount.cfs and cfs-mount
mkdir -p "$TEST_DIR/sbinup/" "$TEST_DIR/sbinwork"
cp "$CFS_BIN/mount.cfs" "$TEST_DIR/sbinup/"
ln -s "$CFS_BIN/cfs-mount" "$TEST_DIR/sbinup/cfs-mount"
sbin=$(readlink -f /sbin)
mount -t overlay overlay -o "lowerdir=$sbin,upperdir=$TEST_DIR/sbinup,workdir=$TEST_DIR/sbinwork" "$sbin"

# ---- mount -t fuse.cfs-mount -o rw (mount.fuse3 runs cfs-mount)
m2=$TEST_DIR/m2; mkdir "$m2"
mount -t fuse.cfs-mount "$VOL" "$m2" -o rw,bootstrap=$BOOT,state-dir=$TEST_DIR/state,update=0 ||
	fail "mount -t fuse.cfs-mount"
cmp -s "$SRC/sub/big" "$m2/sub/big" || fail "mount -t fuse.cfs-mount reads wrong bytes"
erofs "$m2"
umount "$m2"
ok "mount -t fuse.cfs-mount -o rw: ro, writes get EROFS"

# ---- mount -t cfs
m3=$TEST_DIR/m3; mkdir "$m3"
mount -t cfs "$VOL" "$m3" -o bootstrap=$BOOT,state-dir=$TEST_DIR/state,update=0 || fail "mount -t cfs"
cmp -s "$SRC/sub/big" "$m3/sub/big" || fail "mount -t cfs reads wrong bytes"
mounted_at "$m3" | grep -q " fuse.cfs cfs:" || fail "mount -t cfs: $(mounted_at "$m3")"
umount "$m3"
ok "mount -t cfs VOLUME DIR -o bootstrap=...: mounted, read, unmounted"

# ---- an fstab line
m4=$TEST_DIR/m4; mkdir "$m4"
echo "$VOL $m4 cfs ro,_netdev,noauto,nofail,x-systemd.automount,bootstrap=$BOOT,state_dir=$TEST_DIR/state,cache_mb=16 0 0" >"$TEST_DIR/fstab"
mount -T "$TEST_DIR/fstab" "$m4" || fail "mount -T fstab $m4"
cmp -s "$SRC/hello" "$m4/hello" || fail "the fstab mount reads wrong bytes"
umount "$m4"
ok "fstab line '$(cut -d' ' -f3- "$TEST_DIR/fstab" | cut -c1-60)...': mounted"

# ---- /cfs/VOLUME as root: allow_other, read by nobody; syslog
: >"$TEST_DIR/syslog" # what the mounts above logged: this one's lines only from here
cfs-mount -o bootstrap=$BOOT,state_dir=$TEST_DIR/state,update=0 "$VOL" >"$TEST_DIR/m5.out" 2>"$TEST_DIR/m5.err" ||
	{ cat "$TEST_DIR/m5.err"; fail "cfs-mount VOLUME (no MOUNTPOINT)"; }
m5=/cfs/$VOL
[ "$(cat "$TEST_DIR/m5.out")" = "$m5" ] || fail "cfs-mount printed '$(cat "$TEST_DIR/m5.out")'"
mounted_at "$m5" | grep -q "allow_other" || fail "/cfs mount without allow_other: $(mounted_at "$m5")"
got=$(setpriv --reuid=65534 --regid=65534 --clear-groups cat "$m5/hello") || fail "nobody cannot read $m5/hello"
[ "$got" = "hello, every user" ] || fail "nobody read '$got'"
setpriv --reuid=65534 --regid=65534 --clear-groups cat "$m5/sub/private" >/dev/null 2>&1 &&
	fail "nobody read a 0600 file (default_permissions)"
ok "/cfs/VOLUME: allow_other; nobody reads a 0644 file and not a 0600 one"
wait_for 10 grep -q "files, .* directories" "$TEST_DIR/syslog" ||
	{ cat "$TEST_DIR/syslog"; fail "the background mount's log did not reach syslog"; }
umount "$m5"
wait_for 10 test ! -e "$m5" || fail "$m5 is still there after umount"
wait_for 5 grep -q "was unmounted" "$TEST_DIR/syslog" || fail "no unmount line in syslog"
ok "syslog got the background mount's lines: $(grep -c 'cfs-mount\[' "$TEST_DIR/syslog") of them, e.g. '$(grep -m1 'directories' "$TEST_DIR/syslog" | cut -c1-80)'"

# ---- a failed mount leaves no directory
if cfs-mount -o bootstrap=$BOOT,state_dir=$TEST_DIR/state,retries=0 "$UNPUBLISHED" >/dev/null 2>"$TEST_DIR/fail.err"; then
	fail "mounting an unpublished volume succeeded"
fi
[ ! -e "/cfs/$UNPUBLISHED" ] || fail "the failed mount left /cfs/$UNPUBLISHED behind"
ok "a failed mount: exit 1, no /cfs/VOLUME left ($(head -1 "$TEST_DIR/fail.err" | cut -d' ' -f2- | cut -c1-50)...)"
EOF

export TEST_DIR CFS_BIN VOL=$vol UNPUBLISHED=$unpublished BOOT=$boot SRC=$src \
	WANT_FILES=$want_files WANT_BLOCKS=$want_blocks
unshare -m -p -f --mount-proc --propagation private bash "$TEST_DIR/inner.sh" ||
	fail "the checks in the private namespace failed"
