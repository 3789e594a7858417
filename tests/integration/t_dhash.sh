#!/bin/bash
# DHash on a 32-daemon loopback ring (k = 6):
#   - 10,000 blocks put through one daemon each end up on exactly their k
#     successors (distinct servers);
#   - bad blocks are refused with distinct errors: wrong hash, a root whose
#     signature does not verify, a replayed root with a lower sequence (an
#     identical root again is accepted);
#   - a server that serves corrupted bytes does not make any get fail;
#   - kill -9 of four daemons during a stream of puts, then restart: every
#     acknowledged block is stored somewhere and can be fetched;
#   - half the daemons killed at once: every block that still has a live
#     replica is fetched; the share lost is printed next to 0.5^k; then
#     replica maintenance brings every surviving block back to k copies on
#     its k successors, in a time the test prints;
#   - a daemon away for a minute (puts go on meanwhile) comes back and
#     catches up by difference: the bytes it receives are printed and are a
#     small fraction of its store.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
K=6
N=32
BLOCKS=10000

sync_summary() { # replica maintenance counters of every live daemon, one line each
	local i
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" || continue
		echo "node $i: $("$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['dhash']['sync']")"
	done
}

placement() { cluster_placement "$K" "$1"; }


SYNC_MS=2000
cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --sync-ms "$SYNC_MS"
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"
echo "# ring of $N daemons converged in ${CLUSTER_CONVERGED_S}s"

# ---- placement: every block on exactly its k successors
start=$SECONDS
"$CFSCTL" --data "$TEST_DIR/node0" put --random "$BLOCKS" --size 2048 --seed 11 >"$TEST_DIR/keys" ||
	fail "putting $BLOCKS blocks failed: $(grep -c error "$TEST_DIR/keys") errors"
[ "$(wc -l <"$TEST_DIR/keys")" -eq "$BLOCKS" ] || fail "not every put was answered"
echo "# $BLOCKS puts of 2 KiB through one daemon in $((SECONDS - start))s"
cluster_wait_placement "$K" "$TEST_DIR/keys" 60 "$TEST_DIR/place.json" exact "$BLOCKS" ||
	fail "blocks not on exactly their $K successors: $(cat "$TEST_DIR/place.json")"
echo "# placement: $(cat "$TEST_DIR/place.json")"
ok "$BLOCKS blocks, each on exactly its $K successors"

# ---- refusals, each with its own error
port0=${CL_IP[0]}:${CL_PORT[0]}
head -c 3000 /dev/urandom >"$TEST_DIR/blob"
bad_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
st=$(python3 "$(dirname "$0")/dhash_store.py" "$port0" 1 "$bad_key" "$TEST_DIR/blob")
[ "$st" = -74 ] || fail "a block under a key that is not its hash: status $st, want -EBADMSG (-74)"
PUBLISH=$CFS_BIN/cfs-publish
mkdir -p "$TEST_DIR/vol"
echo one >"$TEST_DIR/vol/a"
"$PUBLISH" --keygen "$TEST_DIR/pub.key" >/dev/null 2>&1 || fail "keygen"
"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$TEST_DIR/store" "$TEST_DIR/vol" >/dev/null 2>&1 || fail "publish 1"
dir_root "$TEST_DIR/store" "$TEST_DIR/root1"
echo two >"$TEST_DIR/vol/a"
"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$TEST_DIR/store" "$TEST_DIR/vol" >/dev/null 2>&1 || fail "publish 2"
dir_root "$TEST_DIR/store" "$TEST_DIR/root2"
"$CFSCTL" --data "$TEST_DIR/node0" put --root "$TEST_DIR/root2" >"$TEST_DIR/out" || fail "a valid root was refused: $(cat "$TEST_DIR/out")"
"$CFSCTL" --data "$TEST_DIR/node3" put --root "$TEST_DIR/root2" >"$TEST_DIR/out" || fail "the same root again was refused: $(cat "$TEST_DIR/out")"
expect_exit 3 "$CFSCTL" --data "$TEST_DIR/node0" put --root "$TEST_DIR/root1" >"$TEST_DIR/out"
grep -q "higher sequence number" "$TEST_DIR/out" || fail "a replayed older root: $(cat "$TEST_DIR/out")"
python3 -c "import sys; b=bytearray(open(sys.argv[1],'rb').read()); b[-1]^=1; open(sys.argv[2],'wb').write(b)" \
	"$TEST_DIR/root2" "$TEST_DIR/root-badsig"
expect_exit 3 "$CFSCTL" --data "$TEST_DIR/node0" put --root "$TEST_DIR/root-badsig" >"$TEST_DIR/out"
grep -q "signature does not verify" "$TEST_DIR/out" || fail "a root with a bad signature: $(cat "$TEST_DIR/out")"
ok "refused: wrong hash (-EBADMSG), bad signature (-EKEYREJECTED), older root (-ESTALE); same root accepted again"

# ---- a server that corrupts what it serves: every get still succeeds
bad=5
cluster_kill "$bad"
CL_ARGS[$bad]="${CL_ARGS[$bad]} --test-corrupt-fetches"
cluster_restart "$bad"
cluster_wait_correct 60 || fail "the ring did not re-converge after restarting node $bad"
# Gets through the corrupting daemon itself: it predicts itself nearest, so
# its own corrupted copy is tried first for a block it holds whenever it
# has no more fetches out than the other replicas (on loopback every
# replica is about as near).
cut -d' ' -f1 "$TEST_DIR/keys" | "$CFSCTL" --data "$TEST_DIR/node$bad" get --check - >"$TEST_DIR/gets" ||
	fail "gets failed with one corrupting server: $(grep -c error "$TEST_DIR/gets") errors"
badrep=$("$CFSCTL" --data "$TEST_DIR/node$bad" status --json | jget "['client']['bad_replies']")
[ "$badrep" -gt 0 ] || fail "the corrupting server was never asked: the test proved nothing"
echo "# $BLOCKS gets with one corrupting server: all verified; $badrep corrupted replies skipped"
cluster_kill "$bad"
CL_ARGS[$bad]="${CL_ARGS[$bad]% --test-corrupt-fetches}"
cluster_restart "$bad"
ok "a server serving corrupted bytes makes no get fail"

# ---- kill -9 during a stream of puts: every acknowledged block survives
stdbuf -oL "$CFSCTL" --data "$TEST_DIR/node1" put --random 20000 --size 2048 --seed 12 >"$TEST_DIR/acked" 2>/dev/null &
putter=$!
PIDS+=("$putter")
acked_some() { [ "$(wc -l <"$TEST_DIR/acked")" -ge 1000 ]; }
wait_for 30 acked_some || fail "the put stream did not start"
for i in 10 11 12 13; do cluster_kill "$i"; done
at_kill=$(wc -l <"$TEST_DIR/acked")
[ "$at_kill" -lt 20000 ] || fail "the puts ended before the kill: the test proved nothing"
wait "$putter" || true
grep -v ' error ' "$TEST_DIR/acked" | cut -d' ' -f1 >"$TEST_DIR/acked.keys"
acked=$(wc -l <"$TEST_DIR/acked.keys")
[ "$acked" -gt 0 ] || fail "no put was acknowledged"
for i in 10 11 12 13; do cluster_restart "$i"; done
cluster_wait_correct 90 || fail "the ring did not re-converge after the restarts"
placement "$TEST_DIR/acked.keys" >"$TEST_DIR/acked.json"
[ "$(jget "['lost']" <"$TEST_DIR/acked.json")" -eq 0 ] ||
	fail "acknowledged blocks lost after kill -9: $(cat "$TEST_DIR/acked.json")"
"$CFSCTL" --data "$TEST_DIR/node2" get --check - <"$TEST_DIR/acked.keys" >"$TEST_DIR/gets" ||
	fail "acknowledged blocks not fetchable: $(grep -c error "$TEST_DIR/gets")"
echo "# kill -9 of 4 daemons after $at_kill of 20000 puts: $acked acknowledged in all, each stored and fetchable"
ok "every acknowledged block survives kill -9 and restart"

# ---- half the ring killed at once
# On fresh blocks: those put before the restarts above may have a copy more
# than k (repair copied them while their servers were away), which would
# make the share lost look better than 0.5^k.
"$CFSCTL" --data "$TEST_DIR/node0" put --random "$BLOCKS" --size 2048 --seed 14 >"$TEST_DIR/keys3" ||
	fail "putting $BLOCKS fresh blocks failed"
cut -d' ' -f1 "$TEST_DIR/keys3" >"$TEST_DIR/all.keys"
# the successors push their copies after acknowledging
cluster_wait_placement "$K" "$TEST_DIR/all.keys" 60 "$TEST_DIR/place3.json" exact "$BLOCKS" ||
	{ sync_summary; fail "fresh blocks not on exactly their $K successors: $(cat "$TEST_DIR/place3.json")"; }
cluster_collect "$TEST_DIR/before"
victims=$(python3 -c "import random; random.seed(5); print(' '.join(map(str, random.sample(range(1, $N), $N // 2))))")
for i in $victims; do cluster_kill "$i"; done
for i in $victims; do rm -f "$TEST_DIR/before/node$i".*; done
"$CFSCTL" --data "$TEST_DIR/node0" get --check - <"$TEST_DIR/all.keys" >"$TEST_DIR/gets" || true
python3 - "$TEST_DIR/before" "$TEST_DIR/gets" "$K" "$TEST_DIR/lost-alive" <<'PY'
import glob, os, sys
held = {}
for f in glob.glob(sys.argv[1] + "/*.keys"):
    node = os.path.basename(f)[:-len(".keys")]
    for l in open(f):
        if l.strip() and not l.startswith("#"):
            held.setdefault(l.split()[0], []).append(node)
n = failed = 0
alive = []
for line in open(sys.argv[2]):
    key, st = line.split()[:2]
    n += 1
    if st != "ok":
        failed += 1
        if key in held:
            alive.append("%s %s held by %s" % (key, line.split(None, 2)[2].strip(), " ".join(held[key])))
k = int(sys.argv[3])
print("# half of 32 daemons killed: %d gets, %d failed (%.4f; 0.5^%d = %.4f); "
      "%d of the failures had a live replica" % (n, failed, failed / n, k, 0.5 ** k, len(alive)))
assert n > 0, "no get was answered"
open(sys.argv[4], "w").write("".join(a + "\n" for a in alive))
PY
echo "# ... gets looked up a second time after every candidate failed: $("$CFSCTL" --data "$TEST_DIR/node0" status --json | jget "['client']['relookups']")"
if [ -s "$TEST_DIR/lost-alive" ]; then
	# What the ring says now about the first few, to tell a bad lookup
	# from a silent server.
	head -n 5 "$TEST_DIR/lost-alive"
	head -n 5 "$TEST_DIR/lost-alive" | cut -d' ' -f1 >"$TEST_DIR/lost.keys"
	"$CFSCTL" --data "$TEST_DIR/node0" lookup - <"$TEST_DIR/lost.keys" || true
	"$CFSCTL" --data "$TEST_DIR/node0" get --check - <"$TEST_DIR/lost.keys" || true
	"$CFSCTL" --data "$TEST_DIR/node0" status --json | python3 -c "import json,sys; print(json.load(sys.stdin)['client'])"
	fail "$(wc -l <"$TEST_DIR/lost-alive") gets failed although a live server held the block"
fi
ok "after half the ring died, every block with a live replica was fetched"

# ---- repair: every surviving block back to k copies
debt_sum() { # copies the last whole sync round of every live daemon found missing
	cluster_status_all "$TEST_DIR/debt"
	cluster_status_sum "$TEST_DIR/debt" dhash.sync.debt_last_round
}
start=$SECONDS
cluster_wait_correct 60 || fail "the ring did not re-converge after half of it died"
debt_at_convergence=$(debt_sum)
cluster_wait_placement "$K" "$TEST_DIR/all.keys" 120 "$TEST_DIR/repair.json" short 0 ||
	{ sync_summary; fail "surviving blocks not back to $K copies: $(cat "$TEST_DIR/repair.json")"; }
took=$((SECONDS - start))
lost=$(jget "['lost']" <"$TEST_DIR/repair.json")
cluster_status_all "$TEST_DIR/sync"
python3 - "$TEST_DIR/sync" "$took" "$lost" "$SYNC_MS" <<'PY'
import glob, json, sys
t = {"pushed": 0, "pushed_bytes": 0, "fetched": 0, "digests": 0, "listings": 0, "fetch_bad": 0}
for f in glob.glob(sys.argv[1] + "/*.json"):
    y = json.load(open(f))["dhash"]["sync"]
    for k in t:
        t[k] += y[k]
print("# repair after half the ring died: every surviving block back on its %d successors in %s s "
      "(sync every %d ms; %s lost with every replica); %d copies pushed (%.1f MB), %d fetched, "
      "%d digest and %d listing exchanges, %d bad fetches skipped"
      % (6, sys.argv[2], int(sys.argv[4]), sys.argv[3], t["pushed"], t["pushed_bytes"] / 1e6,
         t["fetched"], t["digests"], t["listings"], t["fetch_bad"]))
PY
ok "after half the ring died, every surviving block is back to $K copies within ${took}s"
debt_zero() { [ "$(debt_sum)" -eq 0 ]; }
wait_for 30 debt_zero ||
	fail "cfsctl status still reports replication debt: $(debt_sum) copies missing in the last round"
echo "# replication debt (cfsctl status, copies missing in the last whole sync round, summed): $debt_at_convergence when the ring re-converged, 0 after repair"

# ---- a daemon away for a minute catches up by difference
away=
for ((i = 1; i < CL_N; i++)); do cluster_alive "$i" && { away=$i; break; }; done
cluster_kill "$away"
start=$SECONDS
"$CFSCTL" --data "$TEST_DIR/node0" put --random 500 --size 2048 --seed 13 >"$TEST_DIR/keys2" ||
	fail "puts while node $away was away"
cut -d' ' -f1 "$TEST_DIR/keys2" >"$TEST_DIR/new.keys"
sleep $((60 - (SECONDS - start)))
cluster_restart "$away"
cluster_wait_correct 60 || fail "the ring did not take node $away back"
cat "$TEST_DIR/all.keys" "$TEST_DIR/new.keys" >"$TEST_DIR/every.keys"
cluster_wait_placement "$K" "$TEST_DIR/every.keys" 60 "$TEST_DIR/back.json" short 0 ||
	fail "blocks not back to $K copies after node $away returned: $(cat "$TEST_DIR/back.json")"
sleep $((2 * SYNC_MS / 1000)) # two more rounds: what a returning node costs in all
"$CFSCTL" --data "$TEST_DIR/node$away" status --json >"$TEST_DIR/away.json"
python3 - "$TEST_DIR/away.json" "$away" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
d, tr = st["dhash"], st["rpc"]
store, got = d["bytes"], tr["bytes_in"]
blocks = d["sync"]["fetched_bytes"]
print("# node %s back after 60 s away (500 blocks put meanwhile): store %.2f MB; received since "
      "restarting %.2f MB over UDP in all (%.1f %% of its store), of which %.2f MB blocks it fetched "
      "and %d blocks pushed to it" % (sys.argv[2], store / 1e6, got / 1e6, 100.0 * got / store,
                                      blocks / 1e6, d["stores"]))
assert store > 0, "the returning node stores nothing"
assert got < 0.25 * store, "a returning node received %d bytes for a %d-byte store: a full copy" % (got, store)
PY
[ $? -eq 0 ] || fail "the returning node was sent too much"
ok "a node back after a minute catches up by difference"
