#!/bin/bash
# make bench-blocksize: the block size on loopback, with the transport no
# longer the limit. For each size (BENCH_SIZES, KiB; default
# 8 16 32 64 128) a file of BENCH_MB MiB (default 64) is published into
# a 16-daemon ring (k = 6) through one cfsd, then read twice: the ring's
# first read through another daemon (cfs-cat -w 24), and again through a
# fresh cfs-mount of a third daemon (its caches cold, the file system's
# page cache dropped). Prints MB/s of each, and what the daemons sent and
# received for it: RPCs (calls made, requests answered) and datagrams per
# MB read. The lossy links are bench-field's (BENCH_BLOCKS there).
# Usage: bench-blocksize.sh BIN_DIR
set -euo pipefail
bin=$1
export TEST_DIR=$(mktemp -d /tmp/cfs-bench-blocksize.XXXXXX) CFS_BIN=$bin
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
mnt=$TEST_DIR/mnt
trap 'umount -l "$mnt" 2>/dev/null || true; cleanup; cluster_cleanup 2>/dev/null || true; rm -rf "$TEST_DIR"' EXIT
export XDG_CONFIG_HOME=$TEST_DIR/config HOME=$TEST_DIR
sizes=${BENCH_SIZES:-8 16 32 64 128}
mb=${BENCH_MB:-64}
N=16
cluster_start "$N" 1 --stabilize-ms 250 --replicas 6
cluster_wait_correct 60 || fail "the ring did not converge"
"$bin/cfs-publish" --keygen >/dev/null 2>&1
mkdir -p "$TEST_DIR/src" "$mnt"
head -c "${mb}M" /dev/urandom >"$TEST_DIR/src/f"
bytes=$((mb * 1048576))

# Sum of a status counter over every daemon.
total() {
	local sum=0 i v
	for i in $(seq 0 $((N - 1))); do
		v=$("$bin/cfsctl" --data "$TEST_DIR/node$i" status --json |
			python3 -c "import json,sys; d=json.load(sys.stdin); print(d['rpc']$1)")
		sum=$((sum + v))
	done
	echo "$sum"
}
counters() { echo "$(total "['calls']") $(total "['datagrams_out']")"; }
secs() { echo "$(date +%s.%N) - $1" | bc; }
rate() { echo "scale=1; $bytes / 1000000 / $1" | bc; }

printf '%-6s %12s %12s %12s %12s %12s\n' "block" "publish MB/s" "1st read" "cold mount" "RPCs/MB" "dgrams/MB"
for kib in $sizes; do
	key=$TEST_DIR/key$kib
	"$bin/cfs-publish" --keygen "$key" >/dev/null 2>&1
	sleep 2
	t=$(date +%s.%N)
	vol=$("$bin/cfs-publish" --quiet --key "$key" --block-size $((kib * 1024)) \
		--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$TEST_DIR/src" 2>"$TEST_DIR/pub.log") ||
		{ cat "$TEST_DIR/pub.log"; fail "publish with $kib KiB blocks"; }
	pub=$(secs "$t")
	sleep 3 # the pushes settle
	read -r c0 d0 <<<"$(counters)"
	t=$(date +%s.%N)
	"$bin/cfs-cat" --data "$TEST_DIR/node5" -w 24 "$vol" f >"$TEST_DIR/out" ||
		fail "first read, $kib KiB blocks"
	first=$(secs "$t")
	read -r c1 d1 <<<"$(counters)"
	cmp -s "$TEST_DIR/src/f" "$TEST_DIR/out" || fail "first read, $kib KiB blocks: different bytes"
	"$bin/cfs-mount" --data "$TEST_DIR/node9" "$vol" "$mnt" >/dev/null 2>"$TEST_DIR/mount.log" ||
		{ cat "$TEST_DIR/mount.log"; fail "mount"; }
	sync; echo 3 >/proc/sys/vm/drop_caches
	t=$(date +%s.%N)
	cat "$mnt/f" >"$TEST_DIR/out"
	cold=$(secs "$t")
	umount "$mnt"
	cmp -s "$TEST_DIR/src/f" "$TEST_DIR/out" || fail "cold mount, $kib KiB blocks: different bytes"
	printf '%-6s %12s %12s %12s %12.0f %12.0f\n' "$kib KiB" "$(rate "$pub")" "$(rate "$first")" \
		"$(rate "$cold")" "$(echo "($c1 - $c0) / ($bytes / 1000000)" | bc -l)" \
		"$(echo "($d1 - $d0) / ($bytes / 1000000)" | bc -l)"
done
echo "(RPCs and datagrams per MB: every daemon's, during the first read)"
