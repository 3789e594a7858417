#!/bin/bash
# make bench-coded: erasure-coded volumes (cfs-publish --redundancy rs:M/N)
# beside replicated ones, all in one run:
#   - the coding itself on one core, first, while nothing else of the run
#     runs: make bench-code's table (encode, verify, decode MB/s of 64 KiB
#     blocks);
#   - storage: the same tree (a BENCH_MB (24) MiB file and BENCH_FILES (200)
#     files of 4-64 KiB) published as copies:6, rs:8/24 and rs:8/32 onto a
#     ring of 32 daemons on loopback (--successors 32: a code's n holders
#     come from one successor list), and the two codes again in 120 KiB
#     blocks; the bytes the daemons store (cfsctl status --json,
#     dhash.bytes) and their data directories grew by (du), per byte of
#     files published;
#   - reads: the big file read cold through cfs-mount (a fresh mount through
#     a daemon, kernel caches dropped) from each of the five volumes, and
#     through the client library (cfs-cat -w 24), BENCH_ROUNDS (3) rounds
#     taking turns over the volumes, medians and ranges in MB/s, and each
#     as a share of copies:6's; first the ring's first read of each;
#   - wide area (root only; BENCH_WAN=0 leaves it out, and says so):
#     tests/bench/bench-coded-wan.sh, single-block gets of a replicated
#     and two coded volumes on make bench-wan's 12-daemon bed, beside
#     their oracles.
# Usage: bench-coded.sh BIN_DIR   (code-bench is in BIN_DIR/../bench/)
#   BENCH_MB (24)  BENCH_FILES (200)  BENCH_ROUNDS (3)  BENCH_WAN (1)
set -euo pipefail
BIN=$1
CODE_BENCH=$1/../bench/code-bench
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-coded.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
. "$here/lib.sh"
MB=${BENCH_MB:-24}
FILES=${BENCH_FILES:-200}
ROUNDS=${BENCH_ROUNDS:-3}
N=32
M=5 # the reader's daemon
# each with 64 KiB blocks (the default), and the codes again with 120 KiB
# blocks (@122880: fragments nearly twice the size, about half the fetches
# per byte; 128 KiB blocks cannot be coded: a data block is its payload
# and a few bytes of framing, and a coded block is at most 128 KiB)
CODES="copies:6 rs:8/24 rs:8/32 rs:8/24@122880 rs:8/32@122880"
mnt=$TEST_DIR/mnt
MOUNT_PID=
bench_cleanup() {
	[ -n "$MOUNT_PID" ] && kill -TERM "$MOUNT_PID" 2>/dev/null && wait "$MOUNT_PID" 2>/dev/null
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt"
	cleanup
	cluster_cleanup
	rm -rf "$TEST_DIR"
}
trap bench_cleanup EXIT

# ---- the coding on one core first: nothing else of this run is running yet
echo "== erasure coding of 64 KiB blocks on one core (make bench-code)"
"$CODE_BENCH"

echo
echo "== generating: a $MB MiB file and $FILES files of 4-64 KiB"
src=$TEST_DIR/src
mkdir -p "$src/small"
head -c $((MB << 20)) /dev/urandom >"$src/big"
for ((i = 1; i <= FILES; i++)); do
	head -c $((4096 + (i * 7919) % 61441)) /dev/urandom >"$src/small/f$i"
done
published=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')

cluster_start "$N" 1 --stabilize-ms 250 --replicas 6 --successors 32
cluster_wait_correct 120 || fail "the $N-daemon ring did not converge"
echo "== ring of $N daemons (k = 6) on loopback converged in ${CLUSTER_CONVERGED_S}s"
export XDG_CONFIG_HOME=$TEST_DIR/config

stored_bytes() { # bytes the daemons store (dhash.bytes), all together
	local i total=0 b
	for ((i = 0; i < CL_N; i++)); do
		b=$("$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['dhash']['bytes']")
		total=$((total + b))
	done
	echo "$total"
}
disk_bytes() { # what the daemons' data directories take on disk
	local i total=0
	for ((i = 0; i < CL_N; i++)); do
		total=$((total + $(du -sb "$TEST_DIR/node$i" | cut -f1)))
	done
	echo "$total"
}
ratio() { python3 -c "import sys; print('%.2f' % (float(sys.argv[1]) / float(sys.argv[2])))" "$@"; }

declare -A VOL STORED DISK PUBSECS
for code in $CODES; do
	name=${code//[:\/@]/-}
	"$BIN/cfs-publish" --keygen "$TEST_DIR/$name.key" >"$TEST_DIR/$name.vol" 2>/dev/null || fail "keygen"
	VOL[$code]=$(cat "$TEST_DIR/$name.vol")
	redundancy=${code%@*} bs=65536
	[ "$code" != "${code#*@}" ] && bs=${code#*@}
	[ "$code" = copies:6 ] && redundancy=copies # k = 6: the daemons' --replicas
	s0=$(stored_bytes) d0=$(disk_bytes) t0=$(now)
	"$BIN/cfs-publish" --quiet --key "$TEST_DIR/$name.key" --redundancy "$redundancy" --block-size "$bs" \
		--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/$name.err" ||
		{ cat "$TEST_DIR/$name.err"; fail "publish $code"; }
	PUBSECS[$code]=$(since "$t0")
	# the replica pushes of a replicated publish land a little after it
	sleep 3
	STORED[$code]=$(($(stored_bytes) - s0))
	DISK[$code]=$(($(disk_bytes) - d0))
done

echo
echo "== storage: the same tree ($published bytes of files) published once per row onto $N daemons"
printf '%-16s %6s %14s %10s %14s %10s %10s\n' "redundancy" "rate" "stored bytes" "per byte" "disk (du)" "per byte" "publish s"
for code in $CODES; do
	m=${code#rs:} m=${m%/*} n=${code#*/} n=${n%@*}
	[ "$code" = copies:6 ] && rate=6 || rate=$(python3 -c "print('%.0f' % ($n / $m))")
	printf '%-16s %6s %14s %10s %14s %10s %10s\n' "$code" "$rate" "${STORED[$code]}" \
		"$(ratio "${STORED[$code]}" "$published")" "${DISK[$code]}" "$(ratio "${DISK[$code]}" "$published")" \
		"${PUBSECS[$code]}"
done
echo "(stored: dhash.bytes of every daemon's cfsctl status, metadata blocks included; du: the data"
echo " directories, LevelDB's logs and tables as they stand 3 s after the publish)"

# ---- reads
mkdir -p "$mnt"
mount_fresh() { # VOLUME: a fresh mount through daemon M, caches dropped
	if [ -n "$MOUNT_PID" ]; then
		kill -TERM "$MOUNT_PID"; wait "$MOUNT_PID" || true; MOUNT_PID=
	fi
	"$BIN/cfs-mount" -f --data "$TEST_DIR/node$M" --state-dir "$TEST_DIR/state" "$1" "$mnt" \
		>/dev/null 2>>"$TEST_DIR/mount.log" &
	MOUNT_PID=$!
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted"; }
	sync; echo 3 >/proc/sys/vm/drop_caches
}
declare -A RUNS FIRST
size=$((MB << 20))
for code in $CODES; do
	sync; echo 3 >/proc/sys/vm/drop_caches
	t0=$(now); "$BIN/cfs-cat" --data "$TEST_DIR/node$M" --window 24 "${VOL[$code]}" /big >"$TEST_DIR/got"
	FIRST[$code]=$(since "$t0")
	cmp -s "$TEST_DIR/got" "$src/big" || fail "cfs-cat read different bytes from the $code volume"
done
rm -f "$TEST_DIR/got"
for ((r = 0; r < ROUNDS; r++)); do
	for code in $CODES; do
		mount_fresh "${VOL[$code]}"
		t0=$(now); dd if="$mnt/big" of=/dev/null bs=1M status=none; RUNS[mount $code]+=" $(since "$t0")"
		sync; echo 3 >/proc/sys/vm/drop_caches
		t0=$(now); "$BIN/cfs-cat" --data "$TEST_DIR/node$M" --window 24 "${VOL[$code]}" /big >/dev/null
		RUNS[cat $code]+=" $(since "$t0")"
	done
done
for code in $CODES; do
	mount_fresh "${VOL[$code]}"
	cmp -s "$src/big" "$mnt/big" || fail "the mount of the $code volume read different bytes"
done
kill -TERM "$MOUNT_PID"; wait "$MOUNT_PID" || true; MOUNT_PID=

median_mbs() { python3 -c "import statistics, sys; print('%.1f' % ($size / 1e6 / statistics.median(map(float, sys.argv[1:]))))" ${RUNS[$1]}; }
spread() { python3 -c "import sys; v = [$size / 1e6 / float(x) for x in sys.argv[1:]]; print('%.0f-%.0f' % (min(v), max(v)))" ${RUNS[$1]}; }
echo
echo "== cold sequential read of the $MB MiB file (through daemon $M; MB/s: median of $ROUNDS, range)"
pct() { python3 -c "import sys; print('%.0f %%' % (100 * float(sys.argv[1]) / float(sys.argv[2])))" "$@"; }
printf '%-16s %10s %14s %10s %10s %14s %10s %10s\n' "redundancy" "first read" "cfs-mount cold" "range" \
	"of copies" "cfs-cat -w 24" "range" "of copies"
for code in $CODES; do
	printf '%-16s %10s %14s %10s %10s %14s %10s %10s\n' "$code" "$(mbs "$size" "${FIRST[$code]}")" \
		"$(median_mbs "mount $code")" "$(spread "mount $code")" \
		"$(pct "$(median_mbs "mount $code")" "$(median_mbs "mount copies:6")")" \
		"$(median_mbs "cat $code")" "$(spread "cat $code")" \
		"$(pct "$(median_mbs "cat $code")" "$(median_mbs "cat copies:6")")"
done
echo "(@122880: published with --block-size 122880; the rest in 64 KiB blocks. Aim: coded >= 80 % of copies)"

# ---- the wide area: its own bed (network namespaces), after this ring is gone
cleanup
if [ "${BENCH_WAN:-1}" = 0 ]; then
	echo
	echo "== wide-area gets: left out (BENCH_WAN=0)"
elif [ "$(id -u)" != 0 ]; then
	echo
	echo "== wide-area gets: left out: they need root (network namespaces); run as root, or BENCH_WAN=0"
else
	echo
	"$here/bench-coded-wan.sh" "$BIN"
fi
