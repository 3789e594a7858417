#!/bin/bash
# make bench-dhash: puts/s and gets/s of 8 KiB blocks on a 16-process
# loopback ring (k = 6, one vnode each), 64 requests in flight through one
# daemon's control socket; p50/p99 get latency and RPCs per get from the
# fetching daemons' DHash clients. Run twice on fresh rings: with caching
# (the defaults: 64 MiB caches, copies pushed along the lookup path) and
# without (--cache-mb 0 --cache-push none). Each ring is read twice: every
# block once through node 7, then once more through node 11, whose lookups
# meet the copies node 7's gets left on the way. BENCH_BLOCKS overrides the
# block count (10000).
set -euo pipefail
CFS_BIN=$1
export CFS_BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-dhash.XXXXXX)
export TEST_DIR
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
trap 'cleanup; rm -rf "$TEST_DIR"' EXIT
blocks=${BENCH_BLOCKS:-10000}

# run LABEL CFSD-ARGS...: one ring, puts, two passes of gets; a JSON line.
run() {
	local label=$1 i t0 t1 t2 t3
	shift
	cluster_start 16 1 --stabilize-ms 500 --replicas 6 "$@"
	cluster_wait_correct 60 || fail "the ring did not converge"
	sleep 3 # let the fingers fill
	t0=$(date +%s.%N)
	"$CFSCTL" --data "$TEST_DIR/node0" put --random "$blocks" --size 8192 --seed 3 >"$TEST_DIR/keys" ||
		fail "puts failed"
	t1=$(date +%s.%N)
	cut -d' ' -f1 "$TEST_DIR/keys" | "$CFSCTL" --data "$TEST_DIR/node7" get --check - >"$TEST_DIR/gets" ||
		fail "gets through node 7 failed"
	t2=$(date +%s.%N)
	cut -d' ' -f1 "$TEST_DIR/keys" | "$CFSCTL" --data "$TEST_DIR/node11" get --check - >"$TEST_DIR/gets" ||
		fail "gets through node 11 failed"
	t3=$(date +%s.%N)
	"$CFSCTL" --data "$TEST_DIR/node7" status --json >"$TEST_DIR/st7.json"
	"$CFSCTL" --data "$TEST_DIR/node11" status --json >"$TEST_DIR/st11.json"
	python3 - "$label" "$blocks" "$t0" "$t1" "$t2" "$t3" "$TEST_DIR/st7.json" "$TEST_DIR/st11.json" \
		>>"$TEST_DIR/results" <<'PY'
import json, sys
label, n = sys.argv[1], int(sys.argv[2])
t0, t1, t2, t3 = map(float, sys.argv[3:7])
passes = []
for f, (a, b) in zip(sys.argv[7:9], ((t1, t2), (t2, t3))):
    c = json.load(open(f))["client"]
    passes.append({"gets_s": n / (b - a), "p50": c["get_p50_us"], "p99": c["get_p99_us"],
                   "rpcs": c["get_rpcs"] / max(c["gets"], 1), "failed": c["gets_failed"],
                   "pushes": c["cache_pushes"]})
print(json.dumps({"label": label, "puts_s": n / (t1 - t0), "passes": passes}))
PY
	for ((i = 0; i < 16; i++)); do cluster_stop "$i"; done
	rm -rf "$TEST_DIR"/node*
}

run "with caching"
run "without caching" --cache-mb 0 --cache-push none

python3 - "$TEST_DIR/results" "$blocks" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("16 cfsd processes on loopback, k = 6, %s blocks of 8 KiB, 64 in flight" % sys.argv[2])
print("%-16s %8s | %-36s | %-36s" % ("", "puts/s", "first read (node 7)", "second read (node 11)"))
print("%-16s %8s | %8s %8s %8s %8s | %8s %8s %8s %8s" % ("", "", "gets/s", "p50 us", "p99 us", "RPCs",
                                                         "gets/s", "p50 us", "p99 us", "RPCs"))
for r in rows:
    a, b = r["passes"]
    print("%-16s %8.0f | %8.0f %8d %8d %8.2f | %8.0f %8d %8d %8.2f" % (
        r["label"], r["puts_s"], a["gets_s"], a["p50"], a["p99"], a["rpcs"],
        b["gets_s"], b["p50"], b["p99"], b["rpcs"]))
for r in rows:
    print("%s: %d copies pushed to lookup paths by the first read; failed gets %d + %d" % (
        r["label"], r["passes"][0]["pushes"], r["passes"][0]["failed"], r["passes"][1]["failed"]))
PY
