#!/bin/bash
# A hostile volume costs bounded memory and time. One
# cfsd holds a correctly signed volume built by hand (cfs-hostile-vol):
#   /wide  index levels whose every item names the same child: a naive
#          listing is about 400 million entries from four blocks;
#   /deep  25 directories each naming the next twice: 2^25 paths from 26
#          blocks;
#   /ok    an honest 20,000-byte file.
# The mount answers ls, stat and lookups in /wide with EIO quickly, its
# peak RSS stays under a bound, it stays up (/ok reads back, /deep lists);
# cfs-fsck finishes in seconds, reports /wide corrupt and exits 1.
. "$(dirname "$0")/lib.sh"
MOUNT=$CFS_BIN/cfs-mount
FSCK=$CFS_BIN/cfs-fsck
WIDE=${CFS_HOSTILE_WIDE:-3}  # index levels over /wide's leaf
DEEP=${CFS_HOSTILE_DEEP:-25} # levels of /deep
RSS_MAX_KIB=$((100 * 1024))
export XDG_CONFIG_HOME=$TEST_DIR/config
mnt=$TEST_DIR/mnt
MOUNT_PID=
trap 'mount_cleanup; cleanup' EXIT

ms() { date +%s%3N; }

start_cfsd n0 "$(free_port)"
"$CFS_BIN/cfs-hostile-vol" "$TEST_DIR/hv" "$WIDE" "$DEEP" >"$TEST_DIR/vol" 2>"$TEST_DIR/hv.err" ||
	fail "cfs-hostile-vol"
vol=$(cat "$TEST_DIR/vol")
echo "# hostile volume: $(cat "$TEST_DIR/hv.err")"
"$CFSCTL" --data "$TEST_DIR/n0" put "$TEST_DIR"/hv/blocks/* >"$TEST_DIR/put" 2>&1 || { cat "$TEST_DIR/put"; fail "put blocks"; }
"$CFSCTL" --data "$TEST_DIR/n0" put --root "$TEST_DIR/hv/root" >>"$TEST_DIR/put" 2>&1 || { cat "$TEST_DIR/put"; fail "put root"; }
! grep -q error "$TEST_DIR/put" || { cat "$TEST_DIR/put"; fail "a block was refused"; }
ok "$(ls "$TEST_DIR/hv/blocks" | wc -l) blocks and the root stored"

# ---- the mount
mkdir -p "$mnt"
"$MOUNT" -f --data "$TEST_DIR/n0" --state-dir "$TEST_DIR/state" --update 0 "$vol" "$mnt" \
	>"$TEST_DIR/mount.out" 2>>"$TEST_DIR/mount.log" &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted"; }

# expect_eio WHAT COMMAND...: the command fails with "Input/output error"
# within 10 s.
expect_eio() {
	local what=$1; shift
	local t0 st=0
	t0=$(ms)
	timeout 10 "$@" >"$TEST_DIR/out" 2>"$TEST_DIR/err" || st=$?
	[ "$st" -ne 124 ] || fail "$what: still running after 10 s"
	[ "$st" -ne 0 ] || fail "$what succeeded: $(head -c 300 "$TEST_DIR/out")"
	grep -q "Input/output error" "$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "$what: not EIO"; }
	echo "# $what: EIO in $(($(ms) - t0)) ms"
}
expect_eio "ls of /wide" ls "$mnt/wide"
expect_eio "ls -l of /wide" ls -l "$mnt/wide"
expect_eio "stat of /wide/e000000" stat "$mnt/wide/e000000"
expect_eio "stat of /wide/e000077" stat "$mnt/wide/e000077"
expect_eio "python os.listdir of /wide" python3 -c 'import os, sys; os.listdir(sys.argv[1])' "$mnt/wide"
grep -q "directory block .* index" "$TEST_DIR/mount.log" || { cat "$TEST_DIR/mount.log"; fail "the log does not name the block"; }
ok "/wide is EIO, and the log names the block"

# the mount stays up: an honest file, and the DAG (fine per directory)
kill -0 "$MOUNT_PID" || fail "cfs-mount died"
python3 -c 'import sys
want = bytes(ord("a") + i % 26 for i in range(20000))
sys.exit(open(sys.argv[1], "rb").read() != want)' "$mnt/ok" || fail "/ok does not read back"
[ "$(ls "$mnt/deep/a/b/a/b/a")" = "$(printf 'a\nb')" ] || fail "/deep/a/b/a/b/a does not list a, b"
ok "the mount stays up: /ok reads back, /deep/a/b/a/b/a lists"
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$MOUNT_PID/status")
echo "# cfs-mount peak RSS (VmHWM): $((hwm / 1024)) MiB (bound $((RSS_MAX_KIB / 1024)) MiB)"
[ "$hwm" -lt "$RSS_MAX_KIB" ] || fail "cfs-mount's peak RSS is ${hwm} KiB"
ok "cfs-mount's peak RSS is under the bound"

# ---- cfs-fsck: each block once
for list in "" --list; do
	t0=$(ms)
	st=0
	timeout 60 "$FSCK" --from "cfsd:$TEST_DIR/n0/cfsd.sock" $list "$vol" >"$TEST_DIR/fsck.out" \
		2>"$TEST_DIR/fsck.err" || st=$?
	[ "$st" -ne 124 ] || fail "cfs-fsck $list still running after 60 s"
	echo "# cfs-fsck $list: exit $st in $(($(ms) - t0)) ms; $(tail -1 "$TEST_DIR/fsck.err")"
	[ "$st" -eq 1 ] || { cat "$TEST_DIR/fsck.err"; fail "cfs-fsck $list exited $st, wanted 1"; }
	grep -q "^corrupt: /wide " "$TEST_DIR/fsck.err" || { cat "$TEST_DIR/fsck.err"; fail "cfs-fsck did not report /wide"; }
done
lines=$(wc -l <"$TEST_DIR/fsck.out")
[ "$lines" -lt 1000 ] || fail "cfs-fsck --list printed $lines lines"
grep -q ' /ok$' "$TEST_DIR/fsck.out" || fail "cfs-fsck --list does not list /ok"
grep -q '^d .* /deep/a/a/a$' "$TEST_DIR/fsck.out" || fail "cfs-fsck --list does not list /deep/a/a/a"
grep -q '^d .* /deep/b$' "$TEST_DIR/fsck.out" || fail "cfs-fsck --list does not list /deep/b"
ok "cfs-fsck reports /wide corrupt in seconds; --list prints $lines lines"
