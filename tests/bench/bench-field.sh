#!/bin/bash
# make bench-field: blocks across a real link (the field table in docs/BENCHMARKS.md).
# Eight cfsd in eight network namespaces on a bridge, every veth at MTU
# 1500, a reader in a ninth namespace mounting the volumes as a plain ring
# client. Rows: per-packet loss on every namespace's ingress (iptables raw
# PREROUTING, -m statistic) of 0, 0.1, 1 and 3 %, and a 50 Mbit/s token
# bucket with a shallow queue (2.6 ms) on the reader's link. Columns, per
# data block size: the MB/s of a cold read (a fresh mount) of a BENCH_MB
# MiB file, or how it failed (EIO: the read got an I/O error, the mount
# gave up on a block; timeout: BENCH_READ_LIMIT passed); beside them the
# same file over TCP (python3 -m http.server in node 0's namespace, curl in
# the reader's: the same loss and shaper apply), and the IP fragments
# created and reassemblies asked for in all namespaces during the row,
# with the reassembly memory still held at its end. Then the publish rate
# of another BENCH_MB MiB file per block size at 1 % loss.
# Usage: bench-field.sh BIN_DIR
#   BENCH_MB (32)  BENCH_BLOCKS ("8 16 32 64 128", KiB)  BENCH_LOSSES ("0 0.1 1 3", %)
#   BENCH_SHAPER (50mbit; "" for no shaper row)  BENCH_READ_LIMIT (120 s)
#   BENCH_PUBLISH_LOSS (1, %; "" skips the lossy publish)
set -euo pipefail
BIN=$1
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-field.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
CLUSTER_NETNS=1
CLUSTER_MTU=1500
. "$here/../harness/cluster.sh"
. "$here/lib.sh"
MB=${BENCH_MB:-32}
BLOCKS=${BENCH_BLOCKS:-8 16 32 64 128}
LOSSES=${BENCH_LOSSES:-0 0.1 1 3}
SHAPER=${BENCH_SHAPER-50mbit}
LIMIT=${BENCH_READ_LIMIT:-120}
PUBLOSS=${BENCH_PUBLISH_LOSS-1}
N=8
mnt=$TEST_DIR/mnt
export XDG_CONFIG_HOME=$TEST_DIR/config
export CFS_DATA_DIR=$TEST_DIR/no-daemon
mkdir -p "$CFS_DATA_DIR"
[ "$(id -u)" = 0 ] || { echo "bench-field: needs root (network namespaces)" >&2; exit 1; }
command -v iptables-legacy >/dev/null && command -v curl >/dev/null ||
	"$here/../../tools/ensure-deps.sh" iptables curl
bench_cleanup() {
	cluster_reader_umount "$mnt"
	cleanup
	cluster_cleanup
	rm -rf "$TEST_DIR"
}
trap bench_cleanup EXIT

size=$((MB << 20))
frac() { python3 -c "import sys; print(float(sys.argv[1]) / 100)" "$1"; }

echo "== $N daemons in namespaces, veth MTU $CLUSTER_MTU; a ${MB} MiB file per block size (${BLOCKS// /, } KiB)"
mkdir -p "$TEST_DIR/src" "$TEST_DIR/pub"
head -c "$size" /dev/urandom >"$TEST_DIR/src/file"
cluster_start "$N" 1 --stabilize-ms 250
cluster_netns_reader
cluster_wait_correct 60 || fail "the ring did not converge"
boot=$(cluster_addr 0)
declare -A VOL
for b in $BLOCKS; do
	in_reader "$BIN/cfs-publish" --keygen "$TEST_DIR/key$b" >"$TEST_DIR/vol$b" 2>/dev/null
	VOL[$b]=$(cat "$TEST_DIR/vol$b")
	t0=$(date +%s.%N)
	in_reader "$BIN/cfs-publish" --quiet --key "$TEST_DIR/key$b" --block-size $((b * 1024)) \
		--state-dir "$TEST_DIR/pubstate" --to "ring:$boot" "$TEST_DIR/src" >/dev/null 2>"$TEST_DIR/publish.err" ||
		{ cat "$TEST_DIR/publish.err"; fail "publish with $b KiB blocks"; }
	echo "== published with $b KiB blocks (no loss) in $(printf '%.1f' "$(echo "$(date +%s.%N) - $t0" | bc)") s"
done
port=8077
cluster_http_start 0 "$TEST_DIR/src" "$port"
url="http://${CL_IP[0]}:$port/file"
wait_for 10 in_reader curl -sf -o /dev/null --max-time 5 "$url" || fail "the HTTP server did not start"

# cell B: a cold read of the file in B KiB blocks: "MB/s" or "EIO 13s".
cell() {
	local r secs st
	sync; echo 3 >/proc/sys/vm/drop_caches
	if ! cluster_reader_mount "${VOL[$1]}" "$mnt" 2>>"$TEST_DIR/mount.err"; then
		cluster_reader_umount "$mnt"
		echo "no-mount"
		return 0
	fi
	r=$(cluster_reader_read "$mnt/file" "$TEST_DIR/read.out" "$LIMIT")
	secs=${r% *} st=${r#* }
	cluster_reader_umount "$mnt"
	if [ "$st" = ok ] && ! cmp -s "$TEST_DIR/src/file" "$TEST_DIR/read.out"; then st=wrong-bytes; fi
	rm -f "$TEST_DIR/read.out"
	if [ "$st" = ok ]; then echo "$(mbs "$size" "$secs")"; else printf '%s %.0fs\n' "$st" "$secs"; fi
}
tcp() {
	local r
	sync; echo 3 >/proc/sys/vm/drop_caches
	r=$(in_reader curl -sf -o /dev/null --max-time "$LIMIT" -w '%{speed_download}' "$url") ||
		{ echo "failed"; return; }
	python3 -c "import sys; print('%.1f' % (float(sys.argv[1]) / 1e6))" "$r"
}

hdr=$(printf '%-24s' "row")
for b in $BLOCKS; do hdr+=$(printf ' %12s' "${b} KiB MB/s"); done
hdr+=$(printf ' %9s %10s %10s %10s' "TCP MB/s" "frags" "reasm" "reasm KiB")
rows=()
row() { # LABEL: one row at the conditions set now
	local line r
	cluster_frag_snapshot "$TEST_DIR/f0"
	line=$(printf '%-24s' "$1")
	for b in $BLOCKS; do line+=$(printf ' %12s' "$(cell "$b")"); done
	line+=$(printf ' %9s' "$(tcp)")
	cluster_frag_snapshot "$TEST_DIR/f1"
	read -r c r m <<<"$(cluster_frag_delta "$TEST_DIR/f0" "$TEST_DIR/f1")"
	line+=$(printf ' %10s %10s %10s' "$c" "$r" "$((m / 1024))")
	rows+=("$line")
	echo "$line"
}
echo
echo "$hdr"
for l in $LOSSES; do
	cluster_loss "$(frac "$l")"
	row "loss $l %"
done
cluster_loss 0
if [ -n "$SHAPER" ]; then
	cluster_shape "$SHAPER"
	row "$SHAPER, queue 2.6 ms"
	cluster_shape off
fi

pubs=""
if [ -n "$PUBLOSS" ]; then
	cluster_loss "$(frac "$PUBLOSS")"
	for b in $BLOCKS; do
		head -c "$size" /dev/urandom >"$TEST_DIR/pub/file"
		in_reader "$BIN/cfs-publish" --keygen "$TEST_DIR/pkey$b" >/dev/null 2>&1
		t0=$(date +%s.%N)
		if in_reader "$BIN/cfs-publish" --quiet --key "$TEST_DIR/pkey$b" --block-size $((b * 1024)) \
			--state-dir "$TEST_DIR/pubstate" --to "ring:$boot" "$TEST_DIR/pub" >/dev/null 2>"$TEST_DIR/publish.err"; then
			secs=$(echo "$(date +%s.%N) - $t0" | bc)
			pubs+="  $b KiB: $(mbs "$size" "$secs") MB/s;"
		else
			secs=$(echo "$(date +%s.%N) - $t0" | bc)
			pubs+="  $b KiB: failed after $(printf '%.0f' "$secs") s;"
		fi
	done
	cluster_loss 0
fi

echo
echo "== cold read of a ${MB} MiB file through cfs-mount (plain ring client) from a ninth namespace;"
echo "   MB/s, or how the read ended: EIO = an I/O error (the mount gave up on a block), timeout = over ${LIMIT} s,"
echo "   no-mount = cfs-mount could not reach the ring (its errors are counted below the table)"
echo "   frags / reasm: IP fragments created / reassemblies asked in all namespaces during the row;"
echo "   reasm KiB: IP reassembly memory still held at its end (Linux keeps a half-built datagram 30 s)"
echo "$hdr"
printf '%s\n' "${rows[@]}"
[ -n "$pubs" ] && echo "publish of ${MB} MiB at $PUBLOSS % loss:${pubs%;}"
if grep -q "error:" "$TEST_DIR/reader-mount.log" 2>/dev/null; then
	echo "the reader's mount errors (times seen):"
	grep "error:" "$TEST_DIR/reader-mount.log" | sed -e 's/^cfs-mount\[[0-9]*\]: //' -e 's/block [0-9a-f]*:/block ...:/' | sort | uniq -c | sort -rn | head -5
fi
true
