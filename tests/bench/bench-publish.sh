#!/bin/bash
# make bench-publish: publish a generated 1 GiB tree (one 768 MiB file and
# 2,560 files of 100 KiB) to a local directory store; print MB/s and
# blocks/s, beside the single-core BLAKE2b-256 rate over the same bytes
# measured in the same run (the ceiling: every byte is hashed once).
# Usage: bench-publish.sh BIN_DIR   (hash-rate is in BIN_DIR/../bench/)
set -euo pipefail
bin=$1 hashrate=$1/../bench/hash-rate
dir=$(mktemp -d /tmp/cfs-bench-publish.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/tree/small" "$dir/cfg"
head -c $((768 << 20)) /dev/urandom >"$dir/tree/large.bin"
for i in $(seq 1 2560); do head -c 102400 /dev/urandom >"$dir/tree/small/f$i"; done
export XDG_CONFIG_HOME=$dir/cfg
"$bin/cfs-publish" --keygen >/dev/null 2>&1
cat "$dir/tree/large.bin" "$dir/tree/small/"* >/dev/null # warm the page cache for both runs
ceiling=$("$hashrate" "$dir/tree" 8192)
start=$(date +%s.%N)
"$bin/cfs-publish" --quiet --to "dir:$dir/store" "$dir/tree" >/dev/null 2>"$dir/log"
secs=$(echo "$(date +%s.%N) - $start" | bc)
blocks=$("$bin/cfs-storetool" count "$dir/store") # blocks stored, the root included
mb=$(du -sb "$dir/tree" --apparent-size | cut -f1)
printf 'bench-publish: 1 GiB tree (768 MiB file + 2,560 x 100 KiB), 8 KiB blocks, local dir store\n'
printf '  publish            %8.1f MB/s  %9.0f blocks/s  (%d blocks in %.2f s)\n' \
	"$(echo "$mb / 1000000 / $secs" | bc -l)" "$(echo "$blocks / $secs" | bc -l)" "$blocks" "$secs"
printf '  BLAKE2b-256 ceiling %7.1f MB/s  (one core, same bytes, 8 KiB pieces)\n' "$ceiling"
printf '  publish / ceiling  %8.0f %%\n' "$(echo "100 * $mb / 1000000 / $secs / $ceiling" | bc -l)"
