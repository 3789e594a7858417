#!/bin/bash
# make bench-wan: a reader across continents. Twelve cfsd with their
# default settings in four regions (three each in us-east, us-west, eu and
# asia; RTTs of tests/harness/wan.sh's wan_world: 10 ms within a region,
# 65 to 200 ms between), each in its own network namespace at MTU 1500
# behind a router whose delay line holds every packet for its pair's
# one-way delay. A reader in eu. Published through a us-east daemon: a
# BENCH_MB (32) MiB file and BENCH_FILES (300) files of 4-64 KiB, once per
# CFS column (so that neither reads blocks the other left in caches).
#
# Columns:
#   cfsd     the reader runs its own cfsd, which joined the ring
#            BENCH_JOINED (10) s before, and mounts through it
#   plain    the reader mounts as a plain ring client (--bootstrap us-east)
#   tcp      an HTTP server in the publisher's us-east namespace (Python's,
#            HTTP/1.1) and curl in the reader's: the same tree, the same path
# Rows:
#   start to first ls   cfs-mount started until `ls` of the mount answers;
#                       TCP: the first GET of the directory listing
#   cold ls -lR         of the whole tree, right after; TCP: GETs of the two
#                       directory listings on one connection
#   small files         find -exec cat over the small files, one after another
#                       (TCP: one keep-alive connection, one GET after another)
#   big file            a cold read of the big file, MB/s
# Then the plain client's second run: start to first ls of a mount that
# starts from the ring contacts the first one kept on disk.
# Then where each mount's start went (user.cfs.stats' start_ms: the root
# key's lookup, the first verified root, the root's read quorum, the
# kernel mount, the first opendir and readdir of the top directory).
# Then single-block gets (a 64 KiB block each, through the reader's cfsd,
# of a volume no one has read) beside their oracle: the RTT from eu to the
# nearest daemon that holds the block, plus the get tool's own cost (the
# median get of a block the reader's cfsd holds itself, subtracted from
# every get before the ratio). IPFS kubo is not in Debian 12 and is not
# measured here.
# Usage: bench-wan.sh BIN_DIR
#   BENCH_MB (32)  BENCH_FILES (300)  BENCH_GETS (100)  BENCH_JOINED (10 s)
#   BENCH_KEEP=1 keeps the logs and files (the path is printed at the end)
#   BENCH_MOUNT_ARGS: more cfs-mount options for both CFS columns (a sweep)
#   BENCH_CFSD_ARGS: more cfsd options for every daemon, the reader's too
set -euo pipefail
BIN=$1
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-wan.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/wan.sh"
. "$here/lib.sh"
MB=${BENCH_MB:-32}
FILES=${BENCH_FILES:-300}
GETS=${BENCH_GETS:-100}
JOINED=${BENCH_JOINED:-10}
mnt=$TEST_DIR/mnt
export XDG_CONFIG_HOME=$TEST_DIR/config
[ "$(id -u)" = 0 ] || { echo "bench-wan: needs root (network namespaces)" >&2; exit 1; }
command -v iptables-legacy >/dev/null && command -v curl >/dev/null ||
	"$here/../../tools/ensure-deps.sh" iptables curl
MOUNT_PID=""
bench_cleanup() {
	[ -n "$MOUNT_PID" ] && kill -TERM "$MOUNT_PID" 2>/dev/null || true
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt" || true
	cleanup
	cluster_cleanup
	if [ -n "${BENCH_KEEP:-}" ]; then echo "bench-wan: kept $TEST_DIR"; else rm -rf "$TEST_DIR"; fi
}
trap bench_cleanup EXIT

# The trees: one per CFS column, the same shape, different bytes.
make_tree() {
	local d=$1 i
	mkdir -p "$d/small"
	head -c $((MB << 20)) /dev/urandom >"$d/big"
	for ((i = 1; i <= FILES; i++)); do
		head -c $((4096 + (i * 7919) % 61441)) /dev/urandom >"$d/small/f$i"
	done
}
make_tree "$TEST_DIR/treeA"
make_tree "$TEST_DIR/treeB"
mkdir -p "$TEST_DIR/probe"
head -c $((GETS * 65536)) /dev/urandom >"$TEST_DIR/probe/blocks"

wan_world
wan_place us-east:3 us-west:3 eu:3 asia:3
start=$SECONDS
# shellcheck disable=SC2086
wan_start 1 ${BENCH_CFSD_ARGS:-}
echo "== 12 cfsd (defaults) in us-east, us-west, eu, asia (3 each), MTU 1500; the ring converged in $((SECONDS - start)) s; the reader in eu"

publish() { # NAME DIR: publish DIR through node 0 (us-east); the volume's key on stdout
	"$BIN/cfs-publish" --keygen "$TEST_DIR/$1.key" >"$TEST_DIR/$1.vol" 2>/dev/null
	"$BIN/cfs-publish" --quiet --key "$TEST_DIR/$1.key" --state-dir "$TEST_DIR/$1.pub" \
		--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$2" >/dev/null 2>"$TEST_DIR/$1.err" ||
		{ cat "$TEST_DIR/$1.err" >&2; fail "publish of $1"; }
	cat "$TEST_DIR/$1.vol"
}
start=$SECONDS
volA=$(publish A "$TEST_DIR/treeA")
volB=$(publish B "$TEST_DIR/treeB")
volP=$(publish P "$TEST_DIR/probe")
echo "   published 2 x ($MB MiB + $FILES small files) and $GETS probe blocks through us-east in $((SECONDS - start)) s"

# ---- TCP from us-east
port=8080
# nsenter itself, not cluster_in: $! must be the server's own PID (a
# function run in the background is a subshell, and the cleanup's TERM
# to it left the server running)
nsenter --net="/run/netns/${CL_NS[0]}" python3 -c '
import functools, http.server, sys
http.server.SimpleHTTPRequestHandler.protocol_version = "HTTP/1.1"
http.server.SimpleHTTPRequestHandler.disable_nagle_algorithm = True  # as any real server does
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[2])
h.log_message = lambda *a: None
http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[3])), h).serve_forever()
' "${CL_IP[0]}" "$TEST_DIR/treeA" "$port" >>"$TEST_DIR/http.log" 2>&1 &
PIDS+=($!)
url="http://${CL_IP[0]}:$port"
wait_for 10 in_reader curl -sf -o /dev/null "$url/" || fail "the HTTP server did not start"
sleep 1
t=$(now); in_reader curl -sf -o /dev/null "$url/"; tcp_first=$(since "$t")
{ echo "url = \"$url/\""; echo "output = /dev/null"; echo "url = \"$url/small/\""; echo "output = /dev/null"; } >"$TEST_DIR/ls.curl"
t=$(now); in_reader curl -sf --config "$TEST_DIR/ls.curl"; tcp_ls=$(since "$t")
for ((i = 1; i <= FILES; i++)); do echo "url = \"$url/small/f$i\""; echo "output = /dev/null"; done >"$TEST_DIR/small.curl"
t=$(now); in_reader curl -sf --config "$TEST_DIR/small.curl"; tcp_small=$(since "$t")
t=$(now); in_reader curl -sf -o /dev/null "$url/big"; tcp_big=$(mbs $((MB << 20)) "$(since "$t")")

# Where a mount's start went (user.cfs.stats' start_ms), one line.
start_ms() {
	python3 -c 'import json, os, sys
t = json.loads(os.getxattr(sys.argv[1], "user.cfs.stats")).get("start_ms", {})
print("root lookup %.0f ms (%d RPCs), early root %.0f, root quorum %.0f, mounted %.0f, first opendir %.0f, first readdir answered %.0f"
      % (t.get("root_lookup", 0), t.get("root_rpcs", 0), t.get("early_root", 0), t.get("root", 0),
         t.get("mounted", 0), t.get("opendir", 0), t.get("readdir", 0)))' "$1"
}

# ---- CFS: the four rows through one fresh mount. mount_rows LABEL VOL [MOUNT-ARGS...]
mount_rows() {
	local label=$1 vol=$2 t; shift 2
	mkdir -p "$mnt"
	t=$(now)
	# shellcheck disable=SC2086
	in_reader "$BIN/cfs-mount" -f --state-dir "$TEST_DIR/$label.state" --update 0 ${BENCH_MOUNT_ARGS:-} "$@" "$vol" "$mnt" \
		>>"$TEST_DIR/$label.mount.log" 2>&1 &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	local end=$((SECONDS + 60))
	until mountpoint -q "$mnt" && ls "$mnt" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || { tail -3 "$TEST_DIR/$label.mount.log" >&2; fail "$label: no mount"; }
		sleep 0.01
	done
	eval "${label}_first=$(since "$t")"
	t=$(now); ls -lR "$mnt" >/dev/null; eval "${label}_ls=$(since "$t")"
	t=$(now); find "$mnt/small" -type f -exec cat {} \; >/dev/null; eval "${label}_small=$(since "$t")"
	t=$(now); cat "$mnt/big" >/dev/null; eval "${label}_big=$(mbs $((MB << 20)) "$(since "$t")")"
	# the mount's bounds after the read: prefetch window, fetches in flight
	eval "${label}_bounds=\"$(python3 -c 'import json, os, sys
s = json.loads(os.getxattr(sys.argv[1], "user.cfs.stats"))
print("window %.0f, fetches in flight %d" % (s["window"], s["fetch_limit"]))' "$mnt")\""
	eval "${label}_start=\"$(start_ms "$mnt")\""
	kill -TERM "$MOUNT_PID" 2>/dev/null || true
	wait "$MOUNT_PID" 2>/dev/null || true
	mountpoint -q "$mnt" && fusermount3 -u -z "$mnt" || true
	MOUNT_PID=""
}

CFS_DATA_DIR=$TEST_DIR/no-daemon mount_rows plain "$volA" --bootstrap "$(cluster_addr 0)"
# The same plain client's next run: it starts from the ring contacts the
# first one kept ($XDG_CACHE_HOME, the bench's own); start to first ls only.
mkdir -p "$mnt"
t=$(now)
CFS_DATA_DIR=$TEST_DIR/no-daemon in_reader "$BIN/cfs-mount" -f --state-dir "$TEST_DIR/plain2.state" --update 0 \
	--bootstrap "$(cluster_addr 0)" "$volA" "$mnt" >>"$TEST_DIR/plain2.mount.log" 2>&1 &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
end=$((SECONDS + 60))
until mountpoint -q "$mnt" && ls "$mnt" >/dev/null 2>&1; do
	[ $SECONDS -lt $end ] || { tail -3 "$TEST_DIR/plain2.mount.log" >&2; fail "plain, second run: no mount"; }
	sleep 0.01
done
plain2_first=$(since "$t")
plain2_start=$(start_ms "$mnt")
kept=$(grep -vc '^#' "$XDG_CACHE_HOME"/cfs/contacts-* 2>/dev/null || true)
kill -TERM "$MOUNT_PID" 2>/dev/null || true
wait "$MOUNT_PID" 2>/dev/null || true
mountpoint -q "$mnt" && fusermount3 -u -z "$mnt" || true
MOUNT_PID=""
# shellcheck disable=SC2086
wan_reader_cfsd ${BENCH_CFSD_ARGS:-}
sleep "$JOINED"
CFS_DATA_DIR=$TEST_DIR/reader-node mount_rows cfsd "$volB"

# ---- single-block gets through the reader's cfsd, beside their oracle
"$BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node0/cfsd.sock" --replicas "$volP" >"$TEST_DIR/P.rep" 2>/dev/null || true
cut -d' ' -f1 "$TEST_DIR/P.rep" >"$TEST_DIR/P.keys"
cluster_collect "$TEST_DIR/held"
"$CFSCTL" --data "$TEST_DIR/reader-node" keys >"$TEST_DIR/reader.keys"
get_ms() { # KEY: one get through the reader's cfsd, in ms
	local t
	t=$(now)
	"$CFSCTL" --data "$TEST_DIR/reader-node" get --check "$1" >"$TEST_DIR/get.out" 2>&1 || true
	grep -q " ok " "$TEST_DIR/get.out" || { echo "bench-wan: get $1: $(cat "$TEST_DIR/get.out")" >&2; return 1; }
	python3 -c "import sys; print('%.2f' % ((float(sys.argv[2]) - float(sys.argv[1])) * 1000))" "$t" "$(now)"
}
# The tool's own cost: gets of blocks the reader's cfsd holds, or, when it
# holds none yet, the same process start and control round trip without a
# block (cfsctl status).
: >"$TEST_DIR/local.ms"
for k in $(head -20 "$TEST_DIR/reader.keys"); do get_ms "$k" >>"$TEST_DIR/local.ms" || true; done
cost_how="local gets"
if [ ! -s "$TEST_DIR/local.ms" ]; then
	cost_how="cfsctl status runs: the reader's cfsd held no block yet"
	for _ in $(seq 20); do
		t=$(now)
		"$CFSCTL" --data "$TEST_DIR/reader-node" status >/dev/null
		python3 -c "import sys; print('%.2f' % ((float(sys.argv[2]) - float(sys.argv[1])) * 1000))" "$t" "$(now)"
	done >>"$TEST_DIR/local.ms"
fi
: >"$TEST_DIR/gets"
while read -r k; do
	grep -qx "$k" "$TEST_DIR/reader.keys" && continue # held by the reader's cfsd: no trip at all
	holders=""
	for ((i = 0; i < CL_N; i++)); do grep -qx "$k" "$TEST_DIR/held/node$i.keys" 2>/dev/null && holders="$holders $i"; done
	[ -n "$holders" ] || continue
	# shellcheck disable=SC2086
	o=$(wan_oracle_ms $holders)
	g=$(get_ms "$k") || continue
	echo "$k $g $o$holders" >>"$TEST_DIR/gets"
done <"$TEST_DIR/P.keys"

python3 - "$TEST_DIR/local.ms" "$TEST_DIR/gets" <<EOF
import statistics, sys
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else float("nan")
local = [float(l) for l in open(sys.argv[1]) if l.strip()]
gets = [tuple(map(float, l.split()[1:3])) for l in open(sys.argv[2]) if l.strip()]
over = statistics.median(local) if local else 0.0
rows = [
    ("start to first ls (s)", "$cfsd_first", "$plain_first", "$tcp_first"),
    ("cold ls -lR (s)", "$cfsd_ls", "$plain_ls", "$tcp_ls"),
    ("$FILES small files, find -exec cat (s)", "$cfsd_small", "$plain_small", "$tcp_small"),
    ("$MB MiB cold read (MB/s)", "$cfsd_big", "$plain_big", "$tcp_big"),
]
print("%-36s %10s %10s %14s" % ("", "cfsd", "plain", "TCP (us-east)"))
for r in rows:
    print("%-36s %10s %10s %14s" % r)
print("ratios to TCP: first ls cfsd %.2fx plain %.2fx; small files cfsd %.2fx plain %.2fx; big file cfsd %.2fx plain %.2fx"
      % (float("$cfsd_first") / float("$tcp_first"), float("$plain_first") / float("$tcp_first"),
         float("$cfsd_small") / float("$tcp_small"), float("$plain_small") / float("$tcp_small"),
         float("$cfsd_big") / float("$tcp_big"), float("$plain_big") / float("$tcp_big")))
print("the mounts' bounds after the big file: cfsd $cfsd_bounds; plain $plain_bounds")
print("where the start went (ms since cfs-mount began): cfsd: $cfsd_start")
print("  plain: $plain_start")
print("  plain, second run: $plain2_start")
print("plain client, second run (from the %s ring contacts the first kept): start to first ls %s s (%.2fx TCP)"
      % ("$kept", "$plain2_first", float("$plain2_first") / float("$tcp_first")))
if gets:
    g = [max(0.0, x - over) for x, _ in gets]
    o = [y for _, y in gets]
    rdp = [gi / oi for gi, oi in zip(g, o) if oi > 0]
    print("single-block gets through the reader's cfsd (joined $JOINED s before the first read): %d blocks, the tool's own cost %.1f ms (median of %d $cost_how) subtracted"
          % (len(gets), over, len(local)))
    print("  get    p50 %6.1f  p90 %6.1f  p99 %6.1f ms" % (pct(g, 50), pct(g, 90), pct(g, 99)))
    print("  oracle p50 %6.1f  p90 %6.1f  p99 %6.1f ms (RTT from eu to the nearest holder)" % (pct(o, 50), pct(o, 90), pct(o, 99)))
    print("  ratio  p50 %.2fx  p99 %.2fx (of the percentiles); stretch p50 %.2fx p90 %.2fx (per get)"
          % (pct(g, 50) / pct(o, 50), pct(g, 99) / pct(o, 99), pct(rdp, 50), pct(rdp, 90)))
else:
    print("single-block gets: none measured")
EOF
echo "   delay line: $(cluster_delayline_counters)"
suspects=$(cat "$TEST_DIR"/node*.log "$TEST_DIR"/reader-node.log "$TEST_DIR"/*.mount.log 2>/dev/null | grep -c "suspect" || true)
echo "   lines naming a suspect in the daemons' and readers' logs: $suspects"
