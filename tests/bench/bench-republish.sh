#!/bin/bash
# make bench-republish: publish an 81 MB tree (a 32 MiB file, three of
# 10 MiB, 500 small files: 10,714 blocks of 8 KiB) into a 16-daemon
# loopback ring (k = 6) through one cfsd, then publish it again unchanged:
# the second run sends nothing and renews every block's lease on its six
# replicas (leases follow publishing). Prints both times.
set -euo pipefail
bin=$1
export TEST_DIR=$(mktemp -d /tmp/cfs-bench-republish.XXXXXX) CFS_BIN=$bin
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
trap 'cleanup; cluster_cleanup 2>/dev/null || true; rm -rf "$TEST_DIR"' EXIT
export XDG_CONFIG_HOME=$TEST_DIR/config
cluster_start 16 1 --stabilize-ms 250 --replicas 6
cluster_wait_correct 60 || fail "the ring did not converge"
"$bin/cfs-publish" --keygen >/dev/null 2>&1
src=$TEST_DIR/src
mkdir -p "$src/d"
head -c 32M /dev/urandom >"$src/big"
for i in $(seq 1 500); do head -c $((i * 130)) /dev/urandom >"$src/d/f$i"; done
for i in 1 2 3; do mkdir -p "$src/e$i"; head -c 10M /dev/urandom >"$src/e$i/x"; done
sleep 2 # the ring idle
for run in "first publish" "again, unchanged"; do
	start=$(date +%s.%N)
	"$bin/cfs-publish" --quiet --to "cfsd:$TEST_DIR/node0/cfsd.sock" --state-dir "$TEST_DIR/st" \
		"$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "$run"; }
	printf '%-17s %6.2f s: %s\n' "$run" "$(echo "$(date +%s.%N) - $start" | bc)" \
		"$(grep -o '[0-9]* blocks, .*renewed' "$TEST_DIR/err")"
done
