#!/bin/bash
# Hedged gets (OpenDHT section 5; cfsd --hedge-ms) on a 9-daemon loopback
# ring (k = 3): five servers are frozen (SIGSTOP: silent, not yet known
# dead), then blocks whose first two successors are frozen and whose third
# is alive are fetched (gets ask the successors in ring order here,
# --test-ring-order, so the frozen ones are asked first: with the usual
# nearest-first order the test could not know who is asked first)
# through a daemon that hedges after 5 ms, one that hedges by default
# (auto: after twice the round trip plus 15 ms, at least 30 ms, for at
# most 5 % of its FETCHes) and one that does not (--hedge-ms 0):
#   - every get succeeds through all three;
#   - the 5 ms daemon sent hedged FETCHes and some of them answered;
#   - the default one hedged and kept to its budget (at most its burst of
#     10 plus 5 % of its FETCHes);
#   - the get latencies of both are printed (the hedging one should not
#     wait out a timeout on the frozen server; a figure, not an assertion).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
K=3
N=9
BLOCKS=400

# Slow stabilisation keeps the frozen server in the successor lists for the
# few seconds the gets take.
cluster_start "$N" 1 --stabilize-ms 2000 --replicas "$K" --sync-ms 0 --test-ring-order --hedge-ms 0
# The three readers are neighbours on the ring (BASE, no hedging; HEDGE,
# after 5 ms; AUTO, the default), so that the other six are an unbroken
# run of the ring and many keys have all three successors among them: the
# three just before the widest arc between two neighbours, so that the keys
# of that arc (at least a ninth of them) have their three successors among
# the six others, whatever identifiers this run's daemons drew.
for ((i = 0; i < N; i++)); do
	echo "$("$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['ring']['vnodes'][0]['id']") $i"
done >"$TEST_DIR/order"
readers=$(python3 - "$TEST_DIR/order" <<'PY'
import sys
ring = sorted((int(l.split()[0], 16), l.split()[1]) for l in open(sys.argv[1]))
n = len(ring)
gap = lambda p: (ring[p][0] - ring[p - 1][0]) % (1 << 256)
p = max(range(n), key=gap)
print(" ".join(ring[(p - 3 + m) % n][1] for m in range(3)))
PY
) || fail "cannot order the ring: $(cat "$TEST_DIR/order")"
read -r BASE HEDGE AUTO <<<"$readers"
cluster_stop "$HEDGE"
CL_ARGS[$HEDGE]="${CL_ARGS[$HEDGE]} --hedge-ms 5"
cluster_restart "$HEDGE"
cluster_stop "$AUTO"
CL_ARGS[$AUTO]="${CL_ARGS[$AUTO]} --hedge-ms auto"
cluster_restart "$AUTO"
cluster_wait_correct 120 || fail "the $N-daemon ring did not converge"

"$CFSCTL" --data "$TEST_DIR/node$BASE" put --random "$BLOCKS" --size 4096 --seed 41 >"$TEST_DIR/puts" ||
	fail "puts: $(grep -c error "$TEST_DIR/puts") errors"
cut -d' ' -f1 "$TEST_DIR/puts" >"$TEST_DIR/all.keys"
cluster_wait_placement "$K" "$TEST_DIR/all.keys" 30 "$TEST_DIR/place.json" exact "$BLOCKS" ||
	fail "blocks not on their $K successors: $(cat "$TEST_DIR/place.json")"
# The live daemon: of the six others, the one that is the third successor
# of the most keys whose first two successors are also among them; the
# other five are frozen.
python3 - "$TEST_DIR/place" "$TEST_DIR/all.keys" "$BASE" "$HEDGE" "$AUTO" >"$TEST_DIR/frozen.keys" 2>"$TEST_DIR/live" <<'PY'
import bisect, glob, json, re, sys
readers = set(int(a) for a in sys.argv[3:6])
ring = []
for f in glob.glob(sys.argv[1] + "/node*.json"):
    i = int(re.search(r"node(\d+)\.json$", f).group(1))
    ring += [(int(v["id"], 16), i) for v in json.load(open(f))["ring"]["vnodes"]]
ring.sort()
ids = [r[0] for r in ring]
by_live = {}
for key in (l.split()[0] for l in open(sys.argv[2])):
    j, succ = bisect.bisect_left(ids, int(key, 16)), []
    while len(succ) < 3:
        n = ring[j % len(ring)][1]
        if n not in succ:
            succ.append(n)
        j += 1
    if all(n not in readers for n in succ):
        by_live.setdefault(succ[2], []).append(key)
live = max(by_live, key=lambda n: len(by_live[n]))
print("\n".join(by_live[live]))
sys.stderr.write("%d\n" % live)
PY
LIVE=$(cat "$TEST_DIR/live")
held=$(wc -l <"$TEST_DIR/frozen.keys")
[ "$held" -gt 20 ] || fail "only $held blocks have daemon $LIVE third and two of the six others first"
frozen=()
for ((i = 0; i < N; i++)); do
	case " $BASE $HEDGE $AUTO $LIVE " in *" $i "*) ;; *) frozen+=("$i") ;; esac
done
for i in "${frozen[@]}"; do kill -STOP "${CL_PID[$i]}"; done
# The three daemons at once, so that none learns from another's timeouts first.
declare -A getter
for i in "$HEDGE" "$AUTO" "$BASE"; do
	"$CFSCTL" --data "$TEST_DIR/node$i" get --check - <"$TEST_DIR/frozen.keys" >"$TEST_DIR/gets$i" &
	getter[$i]=$!
	PIDS+=("$!")
done
for i in "$HEDGE" "$AUTO" "$BASE"; do
	wait "${getter[$i]}" || fail "node $i: $(grep -vc ' ok ' "$TEST_DIR/gets$i") of $held gets failed with two replicas frozen"
	"$CFSCTL" --data "$TEST_DIR/node$i" status --json >"$TEST_DIR/client$i.json"
done
for i in "${frozen[@]}"; do kill -CONT "${CL_PID[$i]}"; done
ok "with the first two of three replica servers frozen, all $held gets succeed through hedging and plain daemons"

hedges=$(jget "['client']['hedges']" <"$TEST_DIR/client$HEDGE.json")
wins=$(jget "['client']['hedge_wins']" <"$TEST_DIR/client$HEDGE.json")
[ "$hedges" -gt 0 ] || fail "the hedging daemon sent no hedged FETCH: the test proved nothing"
[ "$wins" -gt 0 ] || fail "$hedges hedged FETCHes and none answered first"
[ "$(jget "['client']['hedges']" <"$TEST_DIR/client$BASE.json")" -eq 0 ] || fail "node $BASE hedged with --hedge-ms 0"
lat() { echo "p50 $(($(jget "['client']['get_p50_us']" <"$1") / 1000)) ms, p99 $(($(jget "['client']['get_p99_us']" <"$1") / 1000)) ms, $(jget "['client']['fetch_timeouts']" <"$1") fetch timeouts"; }
echo "# $held gets of blocks whose first two servers are frozen: hedging after 5 ms: $(lat "$TEST_DIR/client$HEDGE.json"), $hedges hedges, $wins answered first; without: $(lat "$TEST_DIR/client$BASE.json")"
ok "hedged FETCHes are sent after 5 ms and answer gets"

# The default: hedges within the budget. Its FETCHes are its get RPCs less
# its lookups' (a local ring: no lookup leaves the daemon), so the
# bound below counts every RPC as a FETCH: never lower than the truth.
ah=$(jget "['client']['hedges']" <"$TEST_DIR/client$AUTO.json")
aw=$(jget "['client']['hedge_wins']" <"$TEST_DIR/client$AUTO.json")
askip=$(jget "['client']['hedges_skipped']" <"$TEST_DIR/client$AUTO.json")
arpcs=$(jget "['client']['get_rpcs']" <"$TEST_DIR/client$AUTO.json")
[ "$ah" -gt 0 ] || fail "the default (auto) daemon sent no hedged FETCH against frozen servers"
[ "$ah" -le $((10 + (arpcs + 19) / 20)) ] || fail "the default daemon hedged $ah times for $arpcs RPCs: over its 5 % budget"
echo "# by default (auto): $(lat "$TEST_DIR/client$AUTO.json"), $ah hedges ($askip over the budget), $aw answered first, $arpcs get RPCs"
ok "hedges by default fire at frozen servers, within their budget"
