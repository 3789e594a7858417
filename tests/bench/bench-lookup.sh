#!/bin/bash
# make bench-lookup: RPCs per lookup vs. ring size (CFS Fig. 9), memory per
# node. Rings run in the many-nodes-per-process harness (cfs-ring): each
# node its own UDP socket and tables; the ring is built by the join
# protocol (in generations that at most double the ring) and checked
# correct before 10,000 random lookups are timed.
# BENCH_SIZES overrides the ring sizes (default 16 64 256 1024 4096).
# Usage: bench-lookup.sh BIN_DIR
set -euo pipefail
RING=$1/cfs-ring
sizes=${BENCH_SIZES:-16 64 256 1024 4096}
out=$(mktemp -d /tmp/cfs-bench-lookup.XXXXXX)
trap 'rm -rf "$out"' EXIT
printf '%6s  %-18s %8s %6s %10s %9s %10s %12s\n' N mode "RPCs" "± sd" "½·log2 N" "wrong" "build s" "KiB/node"
for n in $sizes; do
	# Maintenance periods grow with N: every node shares one event loop
	# here, where a real node would have a CPU to itself.
	stab=1000 fix=500
	[ "$n" -ge 1024 ] && stab=2000 fix=2000
	[ "$n" -ge 4096 ] && stab=4000 fix=4000
	if ! "$RING" --nodes "$n" --base-port 30000 --stabilize-ms "$stab" --fix-ms "$fix" --lookups 10000 \
		--mode iterative --mode recursive --converge-timeout 3000 >"$out/$n.json" 2>"$out/$n.err"; then
		echo "N=$n: the run failed:" >&2
		tail -3 "$out/$n.err" >&2
	fi
	python3 - "$out/$n.json" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
b = [r for r in rows if r["phase"] == "build"][0]
for r in rows:
    if r["phase"] != "stable":
        continue
    print("%6d  %-18s %8.2f %6.2f %10.2f %9d %10.1f %12.1f" % (
        r["nodes"], r["mode"], r["rpcs_mean"], r["rpcs_sd"], r["half_log2_n"],
        r["wrong"] + r["failed"], b["seconds"], b["kib_per_node"]))
if not b["converged"]:
    print("%6d  ring did not converge" % b["nodes"])
PY
done
echo "(CFS paper, Fig. 9: 6.7 RPCs per lookup at 4096; the aim is ≤ ½·log2 N at every N and < 100 KiB per node)"
