#!/bin/bash
# make bench-dhash: puts/s and gets/s of 8 KiB blocks on a 16-process
# loopback ring (k = 6, one vnode each), 64 requests in flight through one
# daemon's control socket; p50/p99 get latency and RPCs per get from that
# daemon's DHash client. BENCH_BLOCKS overrides the block count (10000).
set -euo pipefail
CFS_BIN=$1
export CFS_BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-dhash.XXXXXX)
export TEST_DIR
. "$(dirname "$0")/../integration/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
trap 'cleanup; rm -rf "$TEST_DIR"' EXIT
blocks=${BENCH_BLOCKS:-10000}

cluster_start 16 1 --stabilize-ms 500 --replicas 6
cluster_wait_correct 60 || fail "the ring did not converge"
sleep 3 # let the fingers fill

t0=$(date +%s.%N)
"$CFSCTL" --data "$TEST_DIR/node0" put --random "$blocks" --size 8192 --seed 3 >"$TEST_DIR/keys" ||
	fail "puts failed"
t1=$(date +%s.%N)
cut -d' ' -f1 "$TEST_DIR/keys" | "$CFSCTL" --data "$TEST_DIR/node7" get --check - >"$TEST_DIR/gets" ||
	fail "gets failed"
t2=$(date +%s.%N)
"$CFSCTL" --data "$TEST_DIR/node7" status --json >"$TEST_DIR/st.json"
python3 - "$blocks" "$t0" "$t1" "$t2" "$TEST_DIR/st.json" <<'PY'
import json, sys
n = int(sys.argv[1]); t0, t1, t2 = map(float, sys.argv[2:5])
c = json.load(open(sys.argv[5]))["client"]
print("16 cfsd processes on loopback, k = 6, 8 KiB blocks, 64 in flight")
print("%-28s %10s" % ("", "value"))
print("%-28s %10.0f  (%.1f MB/s of block data; each block stored 6 times)" % ("puts/s", n / (t1 - t0), n * 8192 / (t1 - t0) / 1e6))
print("%-28s %10.0f  (%.1f MB/s)" % ("gets/s", n / (t2 - t1), n * 8192 / (t2 - t1) / 1e6))
print("%-28s %10d us" % ("get latency p50", c["get_p50_us"]))
print("%-28s %10d us" % ("get latency p99", c["get_p99_us"]))
print("%-28s %10.2f" % ("RPCs per get", c["get_rpcs"] / max(c["gets"], 1)))
print("%-28s %10d" % ("failed gets", c["gets_failed"]))
print("caching: not implemented yet, so no with/without-caching rows")
PY
