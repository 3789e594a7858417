# Wrong arguments: a one-line reason, the usage, a non-zero exit.
. "$(dirname "$0")/lib.sh"

check_usage() { # expect_exit already ran; stderr must say why and show usage
	grep -q "^$1: " "$TEST_DIR/err" || fail "no reason line from $1: $(cat "$TEST_DIR/err")"
	grep -q "usage: $1" "$TEST_DIR/err" || fail "no usage from $1"
	[ ! -s "$TEST_DIR/out" ] || fail "$1 printed to stdout on an error"
}

expect_exit 2 "$CFSD" --bogus;            check_usage cfsd
expect_exit 2 "$CFSD" --port 0;           check_usage cfsd
expect_exit 2 "$CFSD" --port 70000;       check_usage cfsd
expect_exit 2 "$CFSD" --port;             check_usage cfsd
expect_exit 2 "$CFSD" --bind not-an-ip;   check_usage cfsd
expect_exit 2 "$CFSD" --log-level loud;   check_usage cfsd
expect_exit 2 "$CFSD" extra-argument;     check_usage cfsd
ok "cfsd refuses bad arguments"

expect_exit 2 "$CFSCTL";                       check_usage cfsctl
expect_exit 2 "$CFSCTL" frobnicate;            check_usage cfsctl
expect_exit 2 "$CFSCTL" status extra;          check_usage cfsctl
expect_exit 2 "$CFSCTL" ping;                  check_usage cfsctl
expect_exit 2 "$CFSCTL" ping 127.0.0.1:0;      check_usage cfsctl
expect_exit 2 "$CFSCTL" ping --count 0 127.0.0.1:9; check_usage cfsctl
ok "cfsctl refuses bad arguments"

MOUNT=$CFS_BIN/cfs-mount
vol=$(printf 'a%.0s' $(seq 52))
expect_exit 2 "$MOUNT";                                   check_usage cfs-mount
expect_exit 2 "$MOUNT" not-a-volume /mnt;                 check_usage cfs-mount
expect_exit 2 "$MOUNT" --max-fetches 0 "$vol" /mnt;       check_usage cfs-mount
expect_exit 2 "$MOUNT" --disk-cache-mb lots "$vol" /mnt;  check_usage cfs-mount
expect_exit 2 "$MOUNT" --prefetch-init 9 --prefetch 4 "$vol" /mnt; check_usage cfs-mount
ok "cfs-mount refuses bad arguments"

expect_exit 0 "$CFSD" --help
grep -q -- "--port" "$TEST_DIR/out" || fail "cfsd --help lacks --port"
expect_exit 0 "$CFSCTL" --help
grep -q "status" "$TEST_DIR/out" || fail "cfsctl --help lacks status"
expect_exit 1 "$CFSCTL" --data "$TEST_DIR/nobody" status
grep -q "no cfsd is running" "$TEST_DIR/err" || fail "status without a daemon: $(cat "$TEST_DIR/err")"
ok "help and a missing daemon are reported"

# every program says its version; a short option means one thing in all
for p in cfsd cfsctl cfs-publish cfs-fsck cfs-mount cfs-cat cfs-get; do
	expect_exit 0 "$CFS_BIN/$p" --version
	grep -qE "^$p [0-9]+\.[0-9]+" "$TEST_DIR/out" || fail "$p --version: $(cat "$TEST_DIR/out")"
done
# The help is read whole before grep looks at it: grep -q would stop at the
# first match, and a help longer than a pipe write would then die of
# SIGPIPE, a failure under pipefail.
for p in cfsd cfsctl cfs-mount cfs-publish cfs-fsck cfs-cat cfs-get; do # -d is --data, in every tool
	help=$("$CFS_BIN/$p" --help 2>&1)
	grep -qE -- "-d, --data" <<<"$help" || fail "$p: -d is not --data"
done
for p in cfsd cfsctl cfs-publish cfs-fsck cfs-mount cfs-cat cfs-get; do
	help=$("$CFS_BIN/$p" --help 2>&1)
	grep -qE -- "-d, --debug|-f, --from|-v, --vnodes" <<<"$help" &&
		fail "$p: a short option with another meaning"
done
expect_exit 2 "$CFS_BIN/cfs-publish" -d "$TEST_DIR/x" --to dir:"$TEST_DIR/y" "$TEST_DIR"; check_usage cfs-publish
expect_exit 2 "$CFS_BIN/cfs-fsck" -d "$TEST_DIR/x" --from dir:"$TEST_DIR/y" "$vol"; check_usage cfs-fsck
ok "--version of every program; -d is --data everywhere"

