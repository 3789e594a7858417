# Shared helpers for the integration tests. Source it first.
# Every process a test starts is recorded and killed by PID on exit, and
# every file system it mounts unmounted, whether the test passes or fails.
set -euo pipefail
: "${TEST_DIR:?}" "${CFS_BIN:?}"
# Plain clients keep their ring contacts under $XDG_CACHE_HOME: the test's
# own directory, not the machine's.
export XDG_CACHE_HOME=$TEST_DIR/xdg-cache
CFSD=$CFS_BIN/cfsd
CFSCTL=$CFS_BIN/cfsctl
PIDS=()
MOUNTS=() # file systems a test mounted: unmounted on exit

cleanup() {
	local pid m
	for m in "${MOUNTS[@]}"; do
		umount -l "$m" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${PIDS[@]}"; do
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# A UDP port nobody is using right now.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if [ -z "$(ss -Hlun "sport = :$p")" ]; then echo "$p"; return; fi
	done
}

# wait_for SECONDS COMMAND...: poll until the command succeeds.
wait_for() {
	local secs=$1; shift
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.05
	done
}

# start_cfsd NAME PORT [ARGS...]: start a daemon with data in $TEST_DIR/NAME,
# wait until its control socket answers; sets CFSD_PID. It binds 127.0.0.1
# unless ARGS give another --bind (cfsd refuses to listen on every interface
# while advertising a loopback address).
start_cfsd() {
	local name=$1 port=$2; shift 2
	"$CFSD" --port "$port" --data "$TEST_DIR/$name" --bind 127.0.0.1 "$@" >>"$TEST_DIR/$name.log" 2>&1 &
	CFSD_PID=$!
	PIDS+=("$CFSD_PID")
	wait_for 10 "$CFSCTL" --data "$TEST_DIR/$name" status ||
		{ cat "$TEST_DIR/$name.log" >&2; fail "cfsd $name did not start"; }
}

# mount_cleanup: stop the cfs-mount whose PID is $MOUNT_PID (SIGTERM
# unmounts it) and lazily unmount $mnt if it is still mounted.
mount_cleanup() {
	[ -n "$MOUNT_PID" ] && kill -TERM "$MOUNT_PID" 2>/dev/null
	sleep 0.5
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt" 2>/dev/null
	true
}

# expect_exit CODE COMMAND...: run it, check its exit status.
expect_exit() {
	local want=$1; shift
	local got=0
	"$@" >"$TEST_DIR/out" 2>"$TEST_DIR/err" || got=$?
	[ "$got" -eq "$want" ] || { cat "$TEST_DIR/err" >&2; fail "'$*' exited $got, wanted $want"; }
}

# dir_root STORE OUT: the signed root a dir: store holds (it must hold one) into OUT.
dir_root() {
	local key
	key=$("$CFS_BIN/cfs-storetool" roots "$1" | cut -d' ' -f1)
	[ ${#key} -eq 64 ] || fail "no root in $1"
	"$CFS_BIN/cfs-storetool" get "$1" "$key" >"$2" || fail "cannot read the root of $1"
}

# jget EXPR: a field of the JSON object on stdin, e.g. jget "['dhash']['expired']".
jget() { python3 -c "import json,sys; print(json.load(sys.stdin)$1)"; }

# json_get FILE KEY.SUBKEY: one value from a JSON document.
json_get() {
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d)' "$1" "$2"
}
