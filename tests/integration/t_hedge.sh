#!/bin/bash
# Hedged gets (OpenDHT section 5; cfsd --hedge-ms) on an 8-daemon loopback
# ring (k = 3): five servers are frozen (SIGSTOP: silent, not yet known
# dead), then blocks with two frozen replicas and one live one are fetched
# through a daemon that hedges after 5 ms and through one that does not
# (on loopback a FETCH's own timeout, predicted RTT plus margins, is some
# 20-30 ms: a longer hedge delay would rarely fire before it):
#   - every get succeeds through both;
#   - the hedging daemon sent hedged FETCHes and some of them answered;
#   - the get latencies of both are printed (the hedging one should not
#     wait out a timeout on the frozen server; a figure, not an assertion).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
K=3
N=8
BLOCKS=400
HEDGE=1 # the hedging daemon; node 0 does not hedge

# Slow stabilisation keeps the frozen server in the successor lists for the
# few seconds the gets take.
cluster_start "$N" 1 --stabilize-ms 2000 --replicas "$K" --sync-ms 0
cluster_stop "$HEDGE"
CL_ARGS[$HEDGE]="${CL_ARGS[$HEDGE]} --hedge-ms 5"
cluster_restart "$HEDGE"
cluster_wait_correct 120 || fail "the $N-daemon ring did not converge"

"$CFSCTL" --data "$TEST_DIR/node2" put --random "$BLOCKS" --size 4096 --seed 41 >"$TEST_DIR/puts" ||
	fail "puts: $(grep -c error "$TEST_DIR/puts") errors"
cut -d' ' -f1 "$TEST_DIR/puts" >"$TEST_DIR/all.keys"
cluster_wait_placement "$K" "$TEST_DIR/all.keys" 30 "$TEST_DIR/place.json" exact "$BLOCKS" ||
	fail "blocks not on their $K successors: $(cat "$TEST_DIR/place.json")"
# Keep alive, of daemons 2-7, only one and freeze the other five: for the
# blocks that this one holds and daemons 0 and 1 do not, both other
# replicas are frozen. Which replica a get asks first follows the hedging
# daemon's latency predictions (Vivaldi), which the test cannot steer: so
# it tries the daemons holding more than 20 such blocks, the one predicted
# farthest first, until a round has had its frozen replicas asked first
# (hedges sent). Every get of every round must succeed.
python3 - "$TEST_DIR/place" "$HEDGE" >"$TEST_DIR/order" <<'PY'
import json, math, sys
d, me = sys.argv[1], int(sys.argv[2])
coord = lambda i: json.load(open("%s/node%d.json" % (d, i)))["ring"]["coord"]
keys = lambda i: {l.strip() for l in open("%s/node%d.keys" % (d, i)) if l.strip() and not l.startswith("#")}
a = coord(me)
def dist(b):
    return math.sqrt(sum((a[j] - b[j]) ** 2 for j in range(3))) + a[3] + b[3]
taken = keys(0) | keys(me)
ok = [i for i in range(2, 8) if len(keys(i) - taken) > 20]
print(" ".join(str(i) for i in sorted(ok, key=lambda i: -dist(coord(i)))))
PY
[ -s "$TEST_DIR/order" ] || fail "no daemon holds 20 blocks that daemons 0 and 1 lack"
rounds=0
for LIVE in $(cat "$TEST_DIR/order"); do
	rounds=$((rounds + 1))
	grep -v '^#' "$TEST_DIR/place/node$LIVE.keys" | grep -vFxf "$TEST_DIR/place/node0.keys" |
		grep -vFxf "$TEST_DIR/place/node$HEDGE.keys" >"$TEST_DIR/frozen.keys" || true
	held=$(wc -l <"$TEST_DIR/frozen.keys")
	frozen=()
	for ((i = 2; i < N; i++)); do [ "$i" -ne "$LIVE" ] && frozen+=("$i"); done
	for i in "${frozen[@]}"; do kill -STOP "${CL_PID[$i]}"; done
	# Both daemons at once, so that neither learns from the other's timeouts first.
	"$CFSCTL" --data "$TEST_DIR/node$HEDGE" get --check - <"$TEST_DIR/frozen.keys" >"$TEST_DIR/gets$HEDGE" &
	g1=$!
	"$CFSCTL" --data "$TEST_DIR/node0" get --check - <"$TEST_DIR/frozen.keys" >"$TEST_DIR/gets0" &
	g0=$!
	PIDS+=("$g1" "$g0")
	for i in "$HEDGE" 0; do
		pid=$g0; [ "$i" = "$HEDGE" ] && pid=$g1
		wait "$pid" || fail "node $i: $(grep -vc ' ok ' "$TEST_DIR/gets$i") of $held gets failed with two replicas frozen"
		"$CFSCTL" --data "$TEST_DIR/node$i" status --json >"$TEST_DIR/client$i.json"
	done
	for i in "${frozen[@]}"; do kill -CONT "${CL_PID[$i]}"; done
	ok "with two of three replica servers frozen (daemon $LIVE alive), all $held gets succeed through a hedging and a plain daemon"
	[ "$(jget "['client']['hedges']" <"$TEST_DIR/client$HEDGE.json")" -gt 0 ] && break
	sleep 3 # the thawed daemons answer again before the next round
done

hedges=$(jget "['client']['hedges']" <"$TEST_DIR/client$HEDGE.json")
wins=$(jget "['client']['hedge_wins']" <"$TEST_DIR/client$HEDGE.json")
[ "$hedges" -gt 0 ] || fail "the hedging daemon sent no hedged FETCH in $rounds rounds: the test proved nothing"
[ "$wins" -gt 0 ] || fail "$hedges hedged FETCHes and none answered first"
[ "$(jget "['client']['hedges']" <"$TEST_DIR/client0.json")" -eq 0 ] || fail "node 0 hedged without --hedge-ms"
lat() { echo "p50 $(($(jget "['client']['get_p50_us']" <"$1") / 1000)) ms, p99 $(($(jget "['client']['get_p99_us']" <"$1") / 1000)) ms, $(jget "['client']['fetch_timeouts']" <"$1") fetch timeouts"; }
echo "# $rounds round(s); gets of blocks two of whose three servers are frozen, all rounds: hedging after 5 ms: $(lat "$TEST_DIR/client$HEDGE.json"), $hedges hedges, $wins answered first; without: $(lat "$TEST_DIR/client0.json")"
ok "hedged FETCHes are sent after 5 ms and answer gets"
