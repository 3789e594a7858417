#!/bin/bash
# The README's first session, run as written: the shell block under "A first
# session" with /tmp/ moved into the test's directory, HOME there too, and
# the port (4460) replaced by a free one, so that a daemon of the machine's
# own, or another test, does not stand in the way.
# Two daemons on loopback (default settings, k = 6), a key, a publish, a
# mount through the other daemon, a second version seen after cfsctl
# update, umount, and the daemons told to leave. The block must exit 0,
# print the file as each version has it, and leave no process or mount.
. "$(dirname "$0")/lib.sh"
README=$(dirname "$0")/../../README.md
export PATH=$CFS_BIN:$PATH
[ "$(id -u)" -eq 0 ] || fail "the README's session runs as root: run this test as root"

python3 - "$README" >"$TEST_DIR/session.sh" <<'PY' || fail "the README has no first session block"
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"^## A first session\n(.*?)^```sh\n(.*?)^```", text, re.S | re.M)
if not m:
    sys.exit(1)
print(m.group(2), end="")
PY
[ "$(wc -l <"$TEST_DIR/session.sh")" -ge 10 ] || fail "the first session block is $(wc -l <"$TEST_DIR/session.sh") lines"
sed -i "s#/tmp/#$TEST_DIR/#g" "$TEST_DIR/session.sh"
port=$(free_port)
n4460=$(grep -o '\b4460\b' "$TEST_DIR/session.sh" | wc -l)
[ "$n4460" -ge 3 ] || fail "the first session block names port 4460 $n4460 times: the test expects both daemons and the bootstrap address"
sed -i "s#\b4460\b#$port#g" "$TEST_DIR/session.sh"
mkdir -p "$TEST_DIR/home"

# Its own session and process group: the daemons it starts with & stay in
# that group, which cleanup kills whatever happens.
setsid env -u XDG_CONFIG_HOME -u XDG_STATE_HOME -u XDG_CACHE_HOME -u CFS_DATA_DIR HOME="$TEST_DIR/home" \
	bash -e "$TEST_DIR/session.sh" >"$TEST_DIR/out" 2>"$TEST_DIR/err" </dev/null &
SPID=$!
PIDS+=("$SPID")
MOUNTS+=("$TEST_DIR/notes")
trap 'kill -KILL -- -$SPID 2>/dev/null || true; cleanup' EXIT
st=0
timeout 120 tail --pid="$SPID" -f /dev/null || fail "the session did not end in 120 s: $(tail -3 "$TEST_DIR/err")"
wait "$SPID" || st=$?
[ "$st" -eq 0 ] || { tail -20 "$TEST_DIR/err" >&2; fail "the README's session failed (exit $st)"; }

vol=$(grep -m1 -E '^[a-z2-7]{52}$' "$TEST_DIR/out" || true)
[ -n "$vol" ] || fail "the session printed no volume name: $(cat "$TEST_DIR/out")"
python3 - "$TEST_DIR/out" "$TEST_DIR/notes" "$vol" <<'PY' || fail "the session printed: $(cat "$TEST_DIR/out")"
import sys
# the wait loop prints "unhealthy: ..." until the second server has joined
out = [l for l in open(sys.argv[1]).read().split("\n") if l and not l.startswith("unhealthy: ")]
mnt, vol = sys.argv[2], sys.argv[3]
assert out[0].startswith("healthy: "), out
# keygen, the publish's capture echoed, and the second publish name it
assert out.count(vol) == 3, out
want = ["first line", "%s: version 2 (was 1)" % mnt, "first line", "second line"]
rest = [l for l in out[1:] if l != vol and l != mnt]
assert rest == want, (rest, want)
PY
ok "the README's first session ran as written: volume ${vol:0:12}..., version 2 seen after cfsctl update"

mountpoint -q "$TEST_DIR/notes" && fail "the session's mount is still there"
# The block ends with kill %1 %2: the daemons are still telling their
# neighbours they leave (750 ms at most), and the mount's process may be
# ending after the umount. Wait for each process the session started (its
# process group, or named by its paths) to exit, by its PID.
pids=$({ pgrep -g "$SPID" || true; pgrep -f "$TEST_DIR/n[12]|$TEST_DIR/notes" || true; } | sort -u)
for p in $pids; do
	timeout 20 tail --pid="$p" -f /dev/null ||
		fail "process $p did not exit within 20 s of the session's end: $(ps -o args= -p "$p" || true)"
done
left=$({ pgrep -g "$SPID" || true; pgrep -f "$TEST_DIR/n[12]|$TEST_DIR/notes" || true; } | sort -u)
[ -z "$left" ] || fail "processes left after the session: $(ps -o pid,args -p "$(echo $left | tr ' ' ,)" | tail -n +2)"
ok "nothing left running or mounted (waited for $(echo $pids | wc -w) process(es) to exit)"
