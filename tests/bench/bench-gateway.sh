#!/bin/bash
# make bench-gateway: reading through cfs-gateway on a 4-daemon loopback
# ring, beside cfs-cat of the same files and a plain HTTP server of the
# source directory (python3 -m http.server), in one run:
#   - a 100 MiB file: MB/s through the gateway (curl, a fresh gateway each
#     round, so its block cache starts empty), through cfs-cat, and from
#     the HTTP server;
#   - 1,000 small files (4 KiB): files/s through the gateway over one
#     keep-alive connection (one curl, every URL), through cfs-cat (one
#     process a file), and from the HTTP server (one curl).
# Every reader goes through the same daemon (node 1); the ring has served
# every file once before the first timed read.
# Usage: bench-gateway.sh BIN_DIR   (BENCH_GW_MB, BENCH_GW_FILES, BENCH_GW_ROUNDS)
set -euo pipefail
BIN=$1
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-gw.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
. "$here/lib.sh"
SIZE_MB=${BENCH_GW_MB:-100}
FILES=${BENCH_GW_FILES:-1000}
ROUNDS=${BENCH_GW_ROUNDS:-2}
export XDG_CONFIG_HOME=$TEST_DIR/config
bench_cleanup() {
	cleanup
	cluster_cleanup
	rm -rf "$TEST_DIR"
}
trap bench_cleanup EXIT

free_tcp_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if [ -z "$(ss -Hltn "sport = :$p")" ]; then echo "$p"; return; fi
	done
}

src=$TEST_DIR/src
mkdir -p "$src/small"
head -c $((SIZE_MB << 20)) /dev/urandom >"$src/big"
for i in $(seq 1 "$FILES"); do head -c 4096 /dev/urandom >"$src/small/f$i"; done
cluster_start 4 1 --stabilize-ms 250
cluster_wait_correct 60 || fail "the ring did not converge"
"$BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null
vol=$(cat "$TEST_DIR/vol")
"$BIN/cfs-publish" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>&1 || fail "publish"
D=$TEST_DIR/node1
CAT=("$BIN/cfs-cat" --data "$D")
"${CAT[@]}" "$vol" /big | cmp - "$src/big" || fail "cfs-cat of /big differs"
for i in $(seq 1 "$FILES"); do "${CAT[@]}" "$vol" "/small/f$i" >/dev/null; done
echo "# published ${SIZE_MB} MiB and $FILES files of 4 KiB; each read once through node1"

hport=$(free_tcp_port)
python3 -m http.server --bind 127.0.0.1 --directory "$src" "$hport" >"$TEST_DIR/http.log" 2>&1 &
PIDS+=("$!")
wait_for 10 curl -s -o /dev/null "http://127.0.0.1:$hport/" || fail "http.server did not start"

# urls BASE: a curl config fetching every small file to /dev/null.
urls() {
	local i
	for i in $(seq 1 "$FILES"); do printf 'url = "%s/small/f%s"\noutput = "/dev/null"\n' "$1" "$i"; done
}

bytes=$((SIZE_MB << 20))
printf '%-6s %-34s %10s %10s\n' round reader "MB/s" "files/s"
for r in $(seq 1 "$ROUNDS"); do
	port=$(free_tcp_port)
	"$BIN/cfs-gateway" --data "$D" --listen "127.0.0.1:$port" --state-dir "$TEST_DIR/gw-state" \
		2>>"$TEST_DIR/gw.log" &
	gw=$!
	PIDS+=("$gw")
	G=http://127.0.0.1:$port/cfs/$vol@latest
	wait_for 10 curl -s -o /dev/null "$G/" || fail "cfs-gateway did not start"

	t=$(now)
	curl -s -o "$TEST_DIR/got" "$G/big" || fail "curl through the gateway"
	gw_mb=$(mbs "$bytes" "$(since "$t")")
	cmp -s "$TEST_DIR/got" "$src/big" || fail "the gateway's /big differs"
	urls "$G" >"$TEST_DIR/gw.curl"
	t=$(now)
	curl -s -K "$TEST_DIR/gw.curl" || fail "curl of the small files through the gateway"
	gw_fs=$(python3 -c "import sys; print('%.0f' % ($FILES / float(sys.argv[1])))" "$(since "$t")")
	kill -TERM "$gw"; wait "$gw" || true

	t=$(now)
	"${CAT[@]}" "$vol" /big >"$TEST_DIR/got"
	cat_mb=$(mbs "$bytes" "$(since "$t")")
	t=$(now)
	for i in $(seq 1 "$FILES"); do "${CAT[@]}" "$vol" "/small/f$i" >/dev/null; done
	cat_fs=$(python3 -c "import sys; print('%.0f' % ($FILES / float(sys.argv[1])))" "$(since "$t")")

	t=$(now)
	curl -s -o "$TEST_DIR/got" "http://127.0.0.1:$hport/big"
	h_mb=$(mbs "$bytes" "$(since "$t")")
	urls "http://127.0.0.1:$hport" >"$TEST_DIR/h.curl"
	t=$(now)
	curl -s -K "$TEST_DIR/h.curl"
	h_fs=$(python3 -c "import sys; print('%.0f' % ($FILES / float(sys.argv[1])))" "$(since "$t")")

	printf '%-6s %-34s %10s %10s\n' "$r" "cfs-gateway + curl (keep-alive)" "$gw_mb" "$gw_fs"
	printf '%-6s %-34s %10s %10s\n' "$r" "cfs-cat (a process per file)" "$cat_mb" "$cat_fs"
	printf '%-6s %-34s %10s %10s\n' "$r" "python3 http.server + curl" "$h_mb" "$h_fs"
	printf '%-6s %-34s %9s%% %9s%%\n' "$r" "gateway / cfs-cat" \
		"$(python3 -c "print('%.0f' % (100 * $gw_mb / $cat_mb))")" \
		"$(python3 -c "print('%.0f' % (100 * $gw_fs / $cat_fs))")"
done
