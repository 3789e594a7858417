#!/bin/bash
# Caching on the lookup path (CFS section 5.2, Figure 11): a ring of 256
# daemons (one virtual server each: with several per process, a process's
# successor lists cover so much of the ring that lookups end after a hop
# or so, caching or not; and successor lists only k = 6 long, so that
# lookups are not cut short by DHash++'s answer-from-the-list) holds a few
# 8 KiB blocks; each
# is fetched again and again from random processes, one get at a time. A
# get copies the block to the caches of the servers its lookup went
# through, and a lookup hop that has a copy answers with it, so later gets
# stop sooner:
#   - RPCs per get (lookup and fetch, read from the fetching daemon's
#     counters around each get) are printed by fetch number, averaged over
#     the blocks, and the late fetches cost fewer than the first ones;
#   - cached copies are not replicas: afterwards every block is still on
#     exactly its k successors and nowhere else in any store, while caches
#     hold copies.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
N=256
V=1
BLOCKS=10
FETCHES=20
K=6
CLUSTER_SUCCESSORS=$K

start=$SECONDS
# greedy hops one at a time, as in the paper's figure: with two asks out
# at once a lookup also meets copies off the path it takes; and every get
# looks its key up (--guess-holders 0): a get that guesses its holders
# from the learned table takes no lookup path to cache on
cluster_start "$N" "$V" --stabilize-ms 500 --sync-ms 10000 --successors "$K" \
	--lookup-mode iterative,greedy --guess-holders 0
cluster_wait_correct 300 || fail "a ring of $N daemons did not converge"
echo "# ring of $N daemons started in $((SECONDS - start - CLUSTER_CONVERGED_S))s, converged $CLUSTER_CONVERGED_S s later"

"$CFSCTL" --data "$TEST_DIR/node0" put --random "$BLOCKS" --size 8192 --seed 41 >"$TEST_DIR/puts" ||
	fail "putting $BLOCKS blocks failed: $(cat "$TEST_DIR/puts")"
cut -d' ' -f1 "$TEST_DIR/puts" >"$TEST_DIR/all.keys"
cluster_wait_placement "$K" "$TEST_DIR/all.keys" 60 "$TEST_DIR/place.json" exact "$BLOCKS" ||
	fail "blocks not on exactly their $K successors: $(cat "$TEST_DIR/place.json")"

# One get at a time, from random daemons; each get's RPCs are the fetching
# daemon's get_rpcs counter after it minus before it.
python3 - "$CFSCTL" "$TEST_DIR" "$N" "$FETCHES" "$BLOCKS" <<'PY'
import json, random, subprocess, sys
cfsctl, d, n, fetches, blocks = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def rpcs(i):
    out = subprocess.run([cfsctl, "--data", "%s/node%d" % (d, i), "status", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["client"]["get_rpcs"]
rng = random.Random(11)
by_f = {}
for b, key in enumerate(l.split()[0] for l in open(d + "/all.keys")):
    for f in range(1, fetches + 1):
        i = rng.randrange(n)
        before = rpcs(i)
        g = subprocess.run([cfsctl, "--data", "%s/node%d" % (d, i), "get", "--check", "-"],
                           input=key + "\n", capture_output=True, text=True)
        assert g.returncode == 0, "get of block %d from node %d failed: %s" % (b, i, g.stdout + g.stderr)
        by_f.setdefault(f, []).append(rpcs(i) - before)
means = {f: sum(v) / len(v) for f, v in sorted(by_f.items())}
print("# RPCs per get (lookup + fetch) by fetch number, mean of %s blocks, each fetched from random daemons:" % blocks)
print("#   fetch  " + " ".join("%5d" % f for f in means))
print("#   RPCs   " + " ".join("%5.1f" % m for m in means.values()))
last = max(means)
first = (means[1] + means[2]) / 2
late = sum(means[f] for f in range(last - 4, last + 1)) / 5
print("# fetches 1-2: %.2f RPCs; fetches %d-%d: %.2f RPCs (CFS Fig. 11, 1,000 servers: about 4 "
      "at first, falling toward 1-2 as copies spread)" % (first, last - 4, last, late))
assert late < first - 0.5, "RPCs per get did not fall as copies were cached"
PY
[ $? -eq 0 ] || fail "caching did not make later gets cheaper"
ok "gets of a block grow cheaper as copies are cached on the lookup path"

cached=0
pushes=0
for ((i = 0; i < N; i++)); do
	st=$("$CFSCTL" --data "$TEST_DIR/node$i" status --json)
	cached=$((cached + $(echo "$st" | jget "['dhash']['cache']['blocks']")))
	pushes=$((pushes + $(echo "$st" | jget "['client']['cache_pushes']")))
done
[ "$cached" -gt 0 ] || fail "no cache holds a copy: the test proved nothing"
cluster_placement "$K" "$TEST_DIR/all.keys" >"$TEST_DIR/place.json"
[ "$(jget "['exact']" <"$TEST_DIR/place.json")" -eq "$BLOCKS" ] ||
	fail "a cached copy was counted or spread as a replica: $(cat "$TEST_DIR/place.json")"
echo "# $pushes copies pushed to lookup paths; $cached cached copies held in all"
ok "cached copies are not replicas: every block is still on exactly its $K successors"
