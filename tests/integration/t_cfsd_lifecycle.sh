# cfsd start-up, refusals, control socket, UDP ping, hostile datagrams, shutdown.
. "$(dirname "$0")/lib.sh"

port=$(free_port)
start_cfsd a "$port"
pid=$CFSD_PID
[ -S "$TEST_DIR/a/cfsd.sock" ] || fail "no control socket"
[ "$(stat -c %a "$TEST_DIR/a/cfsd.sock")" = 600 ] || fail "control socket not 0600"
ok "cfsd started on port $port"

"$CFSCTL" --data "$TEST_DIR/a" status --json >"$TEST_DIR/st.json"
[ "$(json_get "$TEST_DIR/st.json" port)" = "$port" ] || fail "status port"
[ "$(json_get "$TEST_DIR/st.json" pid)" = "$pid" ] || fail "status pid"
ok "status --json reports port and pid"

# A second daemon on the same data directory, or the same port, refuses.
expect_exit 1 "$CFSD" --port "$(free_port)" --bind 127.0.0.1 --data "$TEST_DIR/a"
grep -q "in use by another cfsd (pid $pid)" "$TEST_DIR/err" || fail "same dir: $(cat "$TEST_DIR/err")"
expect_exit 1 "$CFSD" --port "$port" --bind 127.0.0.1 --data "$TEST_DIR/b"
grep -q "UDP port $port is in use" "$TEST_DIR/err" || fail "same port: $(cat "$TEST_DIR/err")"
kill -0 "$pid" || fail "the first daemon died"
ok "a second daemon on the same directory or port is refused"

"$CFSCTL" ping --count 3 "127.0.0.1:$port" >"$TEST_DIR/ping" || fail "IPv4 ping: $(cat "$TEST_DIR/ping")"
grep -q "3 sent, 3 replies" "$TEST_DIR/ping" || fail "ping output"
# IPv6: a second daemon on ::1 (one on every interface would have to
# advertise a routable address, which a test machine may not have).
port6=$(free_port)
start_cfsd v6 "$port6" --bind ::1
"$CFSCTL" ping --count 2 "[::1]:$port6" >"$TEST_DIR/ping6" || fail "IPv6 ping: $(cat "$TEST_DIR/ping6")"
kill -TERM "$CFSD_PID"; wait "$CFSD_PID" || fail "the ::1 daemon exited non-zero"
"$CFSCTL" ping --count 2 "127.0.0.1:$port" >/dev/null || fail "IPv4 ping" # daemon a's count below, as before
ok "UDP pings over IPv4 and IPv6 answered"

# Hostile datagrams: counted, dropped; the daemon keeps answering.
for junk in '\xdd\xff\xff\xff\xff' '\x99\x01\x02' '\xc1' 'GET / HTTP/1.0\r\n\r\n' '\x81\xa1a\x01'; do
	printf "$junk" >/dev/udp/127.0.0.1/"$port"
done
head -c 1400 /dev/urandom >/dev/udp/127.0.0.1/"$port"
"$CFSCTL" ping --count 1 "127.0.0.1:$port" >/dev/null || fail "no answer after junk"
"$CFSCTL" --data "$TEST_DIR/a" status --json >"$TEST_DIR/st.json"
# (bash may split one printf into several datagrams: at least 6 arrive)
bad=$(json_get "$TEST_DIR/st.json" rpc.malformed)
[ "$bad" -ge 6 ] || fail "malformed count: $(cat "$TEST_DIR/st.json")"
[ "$(json_get "$TEST_DIR/st.json" rpc.requests_in)" -ge 6 ] || fail "requests_in"
echo "# $bad malformed datagrams counted and dropped"
ok "malformed datagrams counted and dropped, daemon still answers"

# Garbage on the control socket closes that connection only.
python3 - "$TEST_DIR/a/cfsd.sock" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"\x00\x00\x00\x03\xc1\xc1\xc1"); s.settimeout(5)
assert s.recv(10) == b"", "connection not closed after a malformed frame"
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall(b"\x7f\xff\xff\xff"); s.settimeout(5)
assert s.recv(10) == b"", "connection not closed after an oversized frame"
PY
"$CFSCTL" --data "$TEST_DIR/a" status >/dev/null || fail "status after control garbage"
ok "malformed control frames close only their connection"

kill -TERM "$pid"
for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "cfsd did not stop on SIGTERM"
wait "$pid" || fail "cfsd exited non-zero on SIGTERM"
[ ! -e "$TEST_DIR/a/cfsd.sock" ] || fail "control socket left behind"
grep -q "SIGTERM: telling the ring neighbours, then shutting down" "$TEST_DIR/a.log" || fail "no shutdown log"
grep -q "left the ring" "$TEST_DIR/a.log" || fail "no leave log"
ok "SIGTERM stops cfsd cleanly, socket removed"

# The lock dies with the process: even after kill -9 a new daemon starts.
start_cfsd a "$port"
kill -KILL "$CFSD_PID"
wait "$CFSD_PID" 2>/dev/null || true
start_cfsd a "$port"
ok "restart after kill -9 takes the directory again (stale socket replaced)"
