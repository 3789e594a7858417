# cfsd as a system service: `make install
# DESTDIR`, the unit's verification and security score, the sample config,
# the start-up refusals, readiness (sd_notify), journald priorities, SIGHUP,
# and readers without root through the group socket.
#
# It runs in a private mount namespace (it re-executes itself under
# `unshare -m`) where /etc is a copy and /var/lib/cfs a tmpfs: the user and
# group cfs it creates and the system daemon it runs there vanish with the
# namespace, and the host's /etc and /var/lib are never touched.
if [ -z "${CFS_SERVICE_NS:-}" ]; then
	CFS_SERVICE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
command -v systemd-analyze >/dev/null || fail "systemd-analyze missing (make deps-test installs systemd)"
command -v man >/dev/null || fail "man missing (make deps-test installs man-db)"

# ---- the namespace: a private /etc (users), a private /var/lib/cfs
cp -a /etc "$TEST_DIR/etc"
mount --bind "$TEST_DIR/etc" /etc
if [ -d /var/lib/cfs ]; then mount -t tmpfs tmpfs /var/lib/cfs
else mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/cfs; fi
chmod 0711 "$TEST_DIR" # the unprivileged users run the installed binaries from here

# ---- 1. make install DESTDIR
D=$TEST_DIR/root
B=$(realpath --relative-to="$ROOT" "$CFS_BIN/..")
make -s -C "$ROOT" B="$B" install DESTDIR="$D" >"$TEST_DIR/install.log" 2>&1 ||
	{ cat "$TEST_DIR/install.log"; fail "make install DESTDIR"; }
for f in usr/local/bin/cfsd usr/local/bin/cfsctl usr/local/bin/cfs-cat usr/local/bin/cfs-get \
         usr/local/lib/systemd/system/cfsd.service usr/lib/sysusers.d/cfs.conf \
         etc/cfs/cfsd.conf usr/local/share/man/man8/cfsd.8 usr/local/share/man/man5/cfsd.conf.5; do
	[ -e "$D/$f" ] || fail "make install did not install $f"
done
UNIT=$D/usr/local/lib/systemd/system/cfsd.service
grep -q '^User=cfs$' "$UNIT" && grep -q '^Type=notify$' "$UNIT" || fail "unit: not User=cfs, Type=notify"
! grep -q '^ExecStartPre' "$UNIT" || fail "unit: a pre-start step is back"
# every program and configuration file has its page, and every page renders
pages=0
for m in "$D"/usr/local/share/man/man[158]/*; do
	MANWIDTH=80 man -l --warnings "$m" >"$TEST_DIR/man.out" 2>"$TEST_DIR/man.err" || fail "man -l $m"
	[ ! -s "$TEST_DIR/man.err" ] || fail "man -l $m: $(cat "$TEST_DIR/man.err")"
	grep -q "SEE ALSO" "$TEST_DIR/man.out" || fail "man -l $m rendered no SEE ALSO"
	pages=$((pages + 1))
done
for p in man1/cfs-publish.1 man1/cfs-fsck.1 man1/cfs-mount.1 man1/cfs-cat.1 man1/cfs-get.1 man5/cfsd.conf.5 \
         man5/cfs-client.conf.5 man8/cfsd.8 man8/cfsctl.8; do
	[ -e "$D/usr/local/share/man/$p" ] || fail "no page $p installed"
done
echo "# $pages man pages installed, each rendered without a warning"
ok "make install DESTDIR puts programs, unit, sysusers, config and man pages in place"

# ---- 2. systemd-analyze verify and security on the installed unit
# verify checks that ExecStart exists: point it at DESTDIR's copy.
sed "s|/usr/local/bin/cfsd|$D/usr/local/bin/cfsd|" "$UNIT" >"$TEST_DIR/cfsd.service"
systemd-analyze verify --man=no "$TEST_DIR/cfsd.service" >"$TEST_DIR/verify" 2>&1 ||
	{ cat "$TEST_DIR/verify"; fail "systemd-analyze verify"; }
systemd-analyze security --offline=true --threshold=20 "$UNIT" >"$TEST_DIR/security" 2>&1 ||
	{ grep -v '✓' "$TEST_DIR/security"; fail "systemd-analyze security: above 2.0"; }
score=$(sed -n 's/.*Overall exposure level for cfsd.service: \([0-9.]*\).*/\1/p' "$TEST_DIR/security")
[ -n "$score" ] && [ "$(echo "$score <= 2.0" | bc)" = 1 ] || fail "security score '$score'"
echo "# systemd-analyze security --offline=true: $score"
ok "the installed unit verifies and rates $score (at most 2.0)"

# ---- 3. the sample config parses; the start-up refusals name the setting
CONF=$D/etc/cfs/cfsd.conf
expect_exit 2 "$D/usr/local/bin/cfsd" --config "$CONF" --data "$TEST_DIR/chk" --check
grep -q 'set "addr = IP" in the config file (--addr IP)' "$TEST_DIR/err" ||
	fail "sample config as shipped: $(cat "$TEST_DIR/err")"
expect_exit 2 "$D/usr/local/bin/cfsd" --config "$CONF" --data "$TEST_DIR/chk" --addr 192.0.2.10 --check
grep -q 'set "bootstrap = HOST:PORT" in the config file (--bootstrap) .* or "first = true" (--first)' \
	"$TEST_DIR/err" || fail "new ring refusal: $(cat "$TEST_DIR/err")"
# Every example of the sample, uncommented (but "first": it excludes bootstrap).
grep -E '^#[a-z-]+ = ' "$CONF" | grep -v '^#first' | sed 's/^#//' >"$TEST_DIR/all.conf"
[ "$(wc -l <"$TEST_DIR/all.conf")" -ge 10 ] || fail "the sample has few examples"
expect_exit 0 "$D/usr/local/bin/cfsd" --config "$TEST_DIR/all.conf" --data "$TEST_DIR/chk" --check
[ ! -e "$TEST_DIR/chk" ] || fail "--check created the data directory"
# A real start, not only --check, refuses the same way.
expect_exit 2 "$CFSD" --port "$(free_port)" --data "$TEST_DIR/lo"
grep -q 'cfsd would listen on every interface (bind ::) but tell its peers it is at 127.0.0.1' \
	"$TEST_DIR/err" || fail "loopback refusal: $(cat "$TEST_DIR/err")"
ok "the sample config parses; loopback-advertise and accidental new ring are refused, naming the setting"

# ---- 4. the system daemon: user cfs (sysusers), group socket, notify, journal, SIGHUP
systemd-sysusers "$D/usr/lib/sysusers.d/cfs.conf" || fail "systemd-sysusers on cfs.conf"
getent passwd cfs >/dev/null && getent group cfs >/dev/null || fail "no user and group cfs"
useradd -M -N -g nogroup -G cfs -s /usr/sbin/nologin cfsreader || fail "useradd cfsreader"
chown cfs:cfs /var/lib/cfs && chmod 0750 /var/lib/cfs # what StateDirectory{,Mode}= do
port=$(free_port)
mkdir -p /etc/cfs
printf 'bind = 127.0.0.1\nport = %s\nlog-level = info\ncapacity-mb = 100\n' "$port" >/etc/cfs/cfsd.conf
chmod 0644 /etc/cfs/cfsd.conf

# Readiness: a listener on an abstract socket, as systemd's.
listen_notify() { # NAME: its messages, one a line, in $TEST_DIR/NAME.tmp
	python3 - "$TEST_DIR/$1" "cfs-$1-$$" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + sys.argv[2]); s.settimeout(60)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("listening\n"); f.flush()
    while True:
        m = s.recv(4096).decode()
        f.write(m.replace("\n", " ") + "\n"); f.flush()
        if "STOPPING=1" in m:
            break
PY
	PIDS+=("$!")
	wait_for 10 grep -q listening "$TEST_DIR/$1.tmp" || fail "notify listener $1"
}
listen_notify notify
log=$TEST_DIR/sys.log
: >"$log"
chmod 0666 "$log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$log") NOTIFY_SOCKET="@cfs-notify-$$" \
	setpriv --reuid=cfs --regid=cfs --init-groups \
	"$D/usr/local/bin/cfsd" --data /var/lib/cfs --config /etc/cfs/cfsd.conf --socket-group cfs \
	2>>"$log" &
pid=$!
PIDS+=("$pid")
wait_for 10 grep -q 'READY=1' "$TEST_DIR/notify.tmp" || { cat "$log"; fail "no READY=1 on NOTIFY_SOCKET"; }
[ "$(stat -c '%a %U %G' /var/lib/cfs/cfsd.sock)" = "660 cfs cfs" ] ||
	fail "socket: $(stat -c '%a %U %G' /var/lib/cfs/cfsd.sock)"
grep -q '^<6>info: serving on 127.0.0.1' "$log" || fail "no <6> journal priority: $(head -3 "$log")"
"$CFSCTL" --data /var/lib/cfs health >"$TEST_DIR/health1" 2>&1 ||
	fail "cfsctl health of a daemon alone in its new ring: $(cat "$TEST_DIR/health1")"
ok "cfsd as user cfs: READY=1 on an abstract NOTIFY_SOCKET, socket 0660 cfs:cfs, <N> priorities; healthy alone"

# SIGHUP: reloads the log level, reports the rest, keeps running.
kill -HUP "$pid"
wait_for 5 grep -q 'SIGHUP: reloaded /etc/cfs/cfsd.conf: log level info' "$log" || fail "SIGHUP 1: $(tail -3 "$log")"
sed -i 's/log-level = info/log-level = debug/; s/capacity-mb = 100/capacity-mb = 200/' /etc/cfs/cfsd.conf
kill -HUP "$pid"
wait_for 5 grep -q 'SIGHUP: reloaded /etc/cfs/cfsd.conf: log level debug' "$log" || fail "SIGHUP 2: $(tail -3 "$log")"
grep -q '^<4>warn: SIGHUP: settings other than log-level changed in /etc/cfs/cfsd.conf' "$log" ||
	fail "SIGHUP: changed settings not reported: $(tail -3 "$log")"
kill -0 "$pid" || fail "SIGHUP killed cfsd"
ok "SIGHUP reloads the log level, reports the other changes, cfsd keeps running"

# ---- 5. readers without root
printf 'hello from the system daemon\n' >"$TEST_DIR/src.txt"
mkdir "$TEST_DIR/src" && cp "$TEST_DIR/src.txt" "$TEST_DIR/src/hello.txt"
"$CFS_BIN/cfs-publish" --keygen "$TEST_DIR/k" >/dev/null 2>&1 || fail "keygen"
vol=$("$CFS_BIN/cfs-publish" --quiet --key "$TEST_DIR/k" --state-dir "$TEST_DIR/st" \
	--to cfsd:/var/lib/cfs/cfsd.sock "$TEST_DIR/src" 2>"$TEST_DIR/pub.err") ||
	{ cat "$TEST_DIR/pub.err"; fail "publish through the system socket"; }
# as USER, with no daemon of their own and nothing telling where the daemon is
as() {
	local u=$1; shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups \
		env -i PATH=/usr/bin:/bin HOME=/nonexistent "$@"
}
as cfsreader "$D/usr/local/bin/cfs-cat" "$vol" hello.txt >"$TEST_DIR/read" 2>"$TEST_DIR/read.err" ||
	{ cat "$TEST_DIR/read.err"; fail "cfsreader (group cfs) could not read"; }
cmp -s "$TEST_DIR/read" "$TEST_DIR/src.txt" || fail "cfsreader read other bytes"
as cfsreader "$D/usr/local/bin/cfsctl" status >"$TEST_DIR/st.out" 2>&1 || fail "cfsreader: cfsctl status: $(cat "$TEST_DIR/st.out")"
ok "a non-root member of cfs reads a volume and the status through the system socket"

want='permission denied on the cfsd socket /var/lib/cfs/cfsd.sock: only root and the members of the group cfs may use it; add yourself to it (sudo adduser $USER cfs) and log in again'
st=0; as nobody "$D/usr/local/bin/cfs-cat" "$vol" hello.txt >/dev/null 2>"$TEST_DIR/deny" || st=$?
[ "$st" -ne 0 ] || fail "nobody read through the group socket"
grep -qF "$want" "$TEST_DIR/deny" || fail "cfs-cat as nobody: $(cat "$TEST_DIR/deny")"
! grep -q "No such file\|start cfsd" "$TEST_DIR/deny" || fail "cfs-cat as nobody: $(cat "$TEST_DIR/deny")"
st=0; as nobody "$D/usr/local/bin/cfsctl" status >/dev/null 2>"$TEST_DIR/deny2" || st=$?
[ "$st" -ne 0 ] && grep -qF "$want" "$TEST_DIR/deny2" || fail "cfsctl as nobody: $(cat "$TEST_DIR/deny2")"
ok "a user outside cfs is told: permission denied, add yourself to the group cfs"

# ---- 5b. a daemon joining a ring is READY only once it has joined
dead=$(free_port)
jport=$(free_port)
listen_notify joinA
NOTIFY_SOCKET="@cfs-joinA-$$" "$CFS_BIN/cfsd" --data "$TEST_DIR/joiner" --bind 127.0.0.2 --port "$jport" \
	--bootstrap "127.0.0.1:$dead" 2>"$TEST_DIR/joinA.log" &
jpid=$!
PIDS+=("$jpid")
wait_for 10 grep -q 'STATUS=serving on 127.0.0.2.*joining a ring' "$TEST_DIR/joinA.tmp" ||
	fail "no joining STATUS: $(cat "$TEST_DIR/joinA.tmp")"
sleep 3
grep -q 'READY=1' "$TEST_DIR/joinA.tmp" && fail "READY=1 from a daemon whose bootstrap server is not there"
st=0; "$CFSCTL" --data "$TEST_DIR/joiner" health >"$TEST_DIR/health" 2>&1 || st=$?
[ "$st" = 1 ] && grep -q '^unhealthy: virtual server 0 has not joined the ring$' "$TEST_DIR/health" ||
	fail "cfsctl health of a daemon that has not joined: exit $st, $(cat "$TEST_DIR/health")"
kill -TERM "$jpid"
wait "$jpid" || true
listen_notify joinB
NOTIFY_SOCKET="@cfs-joinB-$$" "$CFS_BIN/cfsd" --data "$TEST_DIR/joiner" --bind 127.0.0.2 --port "$jport" \
	--bootstrap "127.0.0.1:$port" 2>"$TEST_DIR/joinB.log" &
jpid=$!
PIDS+=("$jpid")
wait_for 30 grep -q 'READY=1' "$TEST_DIR/joinB.tmp" || { cat "$TEST_DIR/joinB.log"; fail "no READY=1 after joining"; }
"$CFSCTL" --data "$TEST_DIR/joiner" status --json | jget "['ring']['vnodes'][0]['joined']" | grep -q True ||
	fail "READY=1 before the virtual server joined"
healthy() { "$CFSCTL" --data "$TEST_DIR/joiner" health >"$TEST_DIR/health" 2>&1; }
wait_for 20 healthy || fail "cfsctl health of a member of a ring of two: $(cat "$TEST_DIR/health")"
grep -q '^healthy: 1 virtual server joined with full successor lists; ' "$TEST_DIR/health" ||
	fail "cfsctl health: $(cat "$TEST_DIR/health")"
# status opens with a summary: health, the ring's size and lists, the store
"$CFSCTL" --data "$TEST_DIR/joiner" status >"$TEST_DIR/status.txt"
head -3 "$TEST_DIR/status.txt" >"$TEST_DIR/summary"
python3 - "$TEST_DIR/summary" "$TEST_DIR/health" <<'PY' || fail "status summary: $(cat "$TEST_DIR/summary")"
import re, sys
l = open(sys.argv[1]).read().split("\n")
assert l[0] == "health      " + open(sys.argv[2]).read().strip(), l[0]
assert re.match(r"ring size   about 2 virtual servers .*; successor lists full \(the whole ring\), the shortest 1 of \d+$", l[1]), l[1]
assert re.match(r"stored      \S+ \S+ of \S+ \S+ \(\d+ %\); replication debt: \d+ copies missing in the last whole round, \d+ in this one$", l[2]), l[2]
PY
kill -TERM "$jpid"
wait "$jpid" || fail "the joining daemon exited non-zero on SIGTERM"
st=0; "$CFSCTL" --data "$TEST_DIR/joiner" health >"$TEST_DIR/health" 2>&1 || st=$?
[ "$st" = 1 ] && grep -q 'no cfsd is running' "$TEST_DIR/health" ||
	fail "cfsctl health with no daemon: exit $st, $(cat "$TEST_DIR/health")"
ok "a joining daemon tells systemd it is joining, and READY=1 only once it is a member; cfsctl health exits 1 before (and with no daemon), 0 once joined; status opens with health, ring size and store"

# ---- 6. STOPPING=1 and a clean exit on SIGTERM
kill -TERM "$pid"
wait "$pid" || fail "cfsd exited non-zero on SIGTERM"
wait_for 5 grep -q 'STOPPING=1' "$TEST_DIR/notify.tmp" || fail "no STOPPING=1"
ok "SIGTERM: STOPPING=1, exit 0"
