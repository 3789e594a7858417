#!/bin/bash
# Operator visibility: a three-daemon ring, each with a
# Prometheus endpoint on loopback. The endpoint's text must parse with
# Debian's prometheus_client, name counters *_total with HELP and TYPE,
# and its counters must move by what traffic we made (blocks put through
# one daemon, read through another); anything but GET /metrics is 404, an
# oversized request 431, several clients at once are served. cfsctl status
# speaks human units and lists the neighbours with round trips; cfsctl
# peers lists the other two; the log says when a daemon joined, lost a
# neighbour (one killed) and could not reach its bootstrap (a dead one).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, where python3-prometheus-client lives
"$PY" -c 'import prometheus_client' 2>/dev/null ||
	fail "python3-prometheus-client is not installed (make deps-test installs it)"
command -v curl >/dev/null || fail "curl is not installed (make deps-test installs it)"

port=$(free_port)
tcp_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if [ -z "$(ss -Hltn "sport = :$p")" ]; then echo "$p"; return; fi
	done
}
mport=$(tcp_port)
for i in 0 1 2; do
	boot=()
	[ "$i" -gt 0 ] && boot=(--bootstrap "127.0.0.1:$port")
	start_cfsd "node$i" "$port" --bind "127.0.0.$((i + 1))" --metrics "127.0.0.$((i + 1)):$mport" \
		"${boot[@]}"
	eval "pid$i=$CFSD_PID"
done
url() { echo "http://127.0.0.$(($1 + 1)):$mport/metrics"; }

# The ring is whole when node0 has heard both others answer its probes.
peers_heard() { [ "$("$CFSCTL" --data "$TEST_DIR/node0" peers | grep -c ' ago')" -ge 2 ]; }
wait_for 30 peers_heard || { "$CFSCTL" --data "$TEST_DIR/node0" peers >&2; fail "node0 never heard two neighbours"; }
ok "a three-daemon ring with --metrics on each"

# --- the text format parses, with HELP and TYPE on every family
scrape() { curl -sf --max-time 5 "$(url "$1")" >"$2" || fail "GET /metrics of node$1"; }
parse() {
	"$PY" - "$@" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = {f.name: f for f in text_string_to_metric_families(text)}
for line in text.splitlines():
    if line.startswith("# TYPE "):
        name = line.split()[2]
        assert ("# HELP %s " % name) in text, "no HELP for " + name
want_counters = ["cfs_rpc_out", "cfs_rpc_in", "cfs_network_in_bytes", "cfs_network_out_bytes",
                 "cfs_client_gets", "cfs_client_puts", "cfs_store_accepted"]
for n in want_counters:
    assert n in fams and fams[n].type == "counter", "no counter %s: %s" % (n, sorted(fams))
    assert fams[n].samples[0].name == n + "_total", fams[n].samples
for n in ["cfs_uptime_seconds", "cfs_ring_estimated_size", "cfs_store_bytes", "cfs_neighbour_rtt_seconds"]:
    assert n in fams and fams[n].type == "gauge", "no gauge " + n
rtts = [s for s in fams["cfs_neighbour_rtt_seconds"].samples]
assert len(rtts) >= 2 and all(0 < s.value < 1 for s in rtts), rtts
vals = {}
for f in fams.values():
    for s in f.samples:
        if not s.labels:
            vals[s.name] = s.value
print(" ".join("%s=%r" % kv for kv in sorted(vals.items())))
PY
}
for i in 0 1 2; do
	scrape "$i" "$TEST_DIR/m$i.before"
	parse "$TEST_DIR/m$i.before" >"$TEST_DIR/v$i.before" || fail "node$i's /metrics does not parse"
done
ok "/metrics parses with prometheus_client: counters *_total, gauges, HELP and TYPE, neighbour RTTs"

# --- counters move with traffic: 20 blocks of 8 KiB put through node0,
# read back through node1
"$CFSCTL" --data "$TEST_DIR/node0" put --random 20 --size 8192 --seed 5 >"$TEST_DIR/put" ||
	fail "cfsctl put"
[ "$(grep -c ' random$' "$TEST_DIR/put")" -eq 20 ] || fail "put stored $(wc -l <"$TEST_DIR/put") of 20"
cut -d' ' -f1 "$TEST_DIR/put" | "$CFSCTL" --data "$TEST_DIR/node1" get --check - >"$TEST_DIR/get" ||
	fail "cfsctl get"
[ "$(grep -c ' ok 8192$' "$TEST_DIR/get")" -eq 20 ] || fail "read back $(grep -c ' ok ' "$TEST_DIR/get") of 20"
for i in 0 1; do
	scrape "$i" "$TEST_DIR/m$i.after"
	parse "$TEST_DIR/m$i.after" >"$TEST_DIR/v$i.after" || fail "node$i's /metrics does not parse"
done
"$PY" - "$TEST_DIR" <<'PY' || fail "the counters did not move with the traffic"
import sys
d = sys.argv[1]
def load(n, when):
    return {k: float(v) for k, v in (kv.split("=") for kv in open("%s/v%d.%s" % (d, n, when)).read().split())}
b0, a0, b1, a1 = load(0, "before"), load(0, "after"), load(1, "before"), load(1, "after")
delta = lambda b, a, k: a[k] - b[k]
puts = delta(b0, a0, "cfs_client_puts_total")
gets = delta(b1, a1, "cfs_client_gets_total")
sent = delta(b0, a0, "cfs_network_out_bytes_total")
got = delta(b1, a1, "cfs_network_in_bytes_total")
assert puts == 20, "node0 puts moved by %d, not 20" % puts
assert gets == 20, "node1 gets moved by %d, not 20" % gets
# each put sends the 8 KiB block at least once; each get receives it once
assert sent >= 20 * 8192, "node0 sent %d bytes for 20 blocks of 8192" % sent
assert got >= 20 * 8192, "node1 received %d bytes for 20 blocks of 8192" % got
for k in ("cfs_rpc_out_total", "cfs_rpc_in_total"):
    assert a0[k] >= b0[k] and a1[k] >= b1[k], k
print("# 20 blocks of 8 KiB: node0 puts +%d, sent +%d bytes; node1 gets +%d, received +%d bytes"
      % (puts, sent, gets, got))
PY
ok "counters move by the traffic made (puts, gets, bytes out and in)"

# --- not /metrics: 404; an endless request head: 431; clients at once
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@"; }
[ "$(code "http://127.0.0.1:$mport/")" = 404 ] || fail "GET / is not 404"
[ "$(code -X POST "$(url 0)")" = 404 ] || fail "POST /metrics is not 404"
[ "$(code -H "X-Big: $(head -c 6000 /dev/zero | tr '\0' a)" "$(url 0)")" = 431 ] ||
	fail "a 6000-byte header is not refused with 431"
cpids=()
for k in $(seq 8); do
	curl -sf --max-time 10 -o "$TEST_DIR/par$k" "$(url 0)" &
	cpids+=($!)
done
for p in "${cpids[@]}"; do wait "$p" || fail "one of 8 clients at once got no answer"; done
for k in $(seq 8); do grep -q '^cfs_rpc_out_total ' "$TEST_DIR/par$k" || fail "client $k: no metrics"; done
ok "404 for other paths and methods, 431 for an oversized head, 8 clients at once served"

# --- 200 slowloris connections (from another address, reopened as soon as
# they are closed): scrapes are still answered, one after another
python3 "$(dirname "$0")/slowloris.py" 127.0.0.1 "$mport" 200 25 127.0.0.9 >"$TEST_DIR/slow.out" 2>&1 &
slow=$!
PIDS+=("$slow")
sleep 3
answered=0
for k in $(seq 20); do
	curl -sf --max-time 5 -o "$TEST_DIR/slow$k" "$(url 0)" && grep -q '^cfs_rpc_out_total ' "$TEST_DIR/slow$k" &&
		answered=$((answered + 1))
	sleep 0.5
done
kill "$slow" 2>/dev/null; wait "$slow" 2>/dev/null || true
closed=$(curl -sf --max-time 5 "$(url 0)" | sed -n 's/^cfs_metrics_connections_closed_total //p')
[ "$answered" -eq 20 ] || fail "under 200 slowloris connections only $answered of 20 scrapes were answered"
[ "${closed:-0}" -gt 0 ] || fail "no slow connection was closed to make room"
ok "200 slowloris connections: 20 of 20 scrapes answered; $closed slow connections closed for them"

# --- cfsctl status: human units and neighbours; peers: the other two
"$CFSCTL" --data "$TEST_DIR/node0" status >"$TEST_DIR/status" || fail "cfsctl status"
grep -Eq '^store .* bytes [0-9.]+ (B|KiB|MiB)' "$TEST_DIR/status" || fail "store bytes not in human units"
grep -Eq '^cfsd .* up [0-9]+(s|m [0-9]+s)' "$TEST_DIR/status" || fail "uptime not a duration"
grep -Eq '^traffic .*over the last [0-9]+s, in [0-9.]+ (B|KiB|MiB)/s, out [0-9.]+ (B|KiB|MiB)/s, RPCs in [0-9.]+ /s, RPCs out [0-9.]+ /s' \
	"$TEST_DIR/status" || fail "no traffic rates: $(grep ^traffic "$TEST_DIR/status")"
for ip in 127.0.0.2 127.0.0.3; do
	grep -Eq "^ +0 +(pred|succ [0-9]+) +[0-9a-f]{8} $ip:$port +[0-9.]+ (us|ms) +[0-9.]+ (us|ms) +[0-9]+s ago" \
		"$TEST_DIR/status" || { cat "$TEST_DIR/status" >&2; fail "status lacks neighbour $ip with its RTT"; }
done
"$CFSCTL" --data "$TEST_DIR/node0" status --json | "$PY" -c '
import json, sys
s = json.load(sys.stdin)
assert isinstance(s["rpc"]["bytes_in"], int) and isinstance(s["traffic"]["in_bytes_per_s"], float), s["traffic"]
assert len(s["neighbours"]) == 2 and all(n["rtt_us"] > 0 for n in s["neighbours"]), s["neighbours"]' ||
	fail "status --json lacks raw numbers or neighbours"
"$CFSCTL" --data "$TEST_DIR/node0" peers >"$TEST_DIR/peers" || fail "cfsctl peers"
for ip in 127.0.0.2 127.0.0.3; do
	grep -q " $ip:$port " "$TEST_DIR/peers" || { cat "$TEST_DIR/peers" >&2; fail "peers lacks $ip"; }
done
[ "$(wc -l <"$TEST_DIR/peers")" -eq 3 ] || fail "peers: not a heading and two neighbours"
ok "status: human units, rates, neighbours with RTT; --json raw; peers lists the other two"
sed 's/^/# /' "$TEST_DIR/peers"

# --- log lines: joined, a lost neighbour, an unreachable bootstrap
grep -q 'joined the ring after [0-9]* attempts*; successor' "$TEST_DIR/node1.log" || fail "node1's log has no join line"
kill -KILL "$pid2"
lost() { grep -Eq "lost (successor|predecessor) [0-9a-f]{8} at 127.0.0.3:$port" \
	"$TEST_DIR/node0.log" "$TEST_DIR/node1.log"; }
wait_for 20 lost || fail "no 'lost' line for the killed neighbour"
ok "join and lost-neighbour lines: $(grep -h 'lost ' "$TEST_DIR/node0.log" "$TEST_DIR/node1.log" | head -1 | sed 's/.*lost/lost/')"
dead=$(free_port)
"$CFSD" --port "$port" --data "$TEST_DIR/lone" --bind 127.0.0.5 --bootstrap "127.0.0.9:$dead" \
	>>"$TEST_DIR/lone.log" 2>&1 &
PIDS+=("$!")
unreach() { grep -q "bootstrap 127.0.0.9:$dead is unreachable" "$TEST_DIR/lone.log"; }
wait_for 20 unreach || { cat "$TEST_DIR/lone.log" >&2; fail "no 'unreachable' line for a dead bootstrap"; }
ok "unreachable-bootstrap line: $(grep -h 'unreachable' "$TEST_DIR/lone.log" | head -1 | sed 's/.*bootstrap/bootstrap/')"
