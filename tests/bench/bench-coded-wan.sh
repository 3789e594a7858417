#!/bin/bash
# The wide-area part of make bench-coded (DHash++ Figure 9's point: a coded
# get waits for the m nearest of n holders, a replicated one for the
# nearest of k). make bench-wan's bed: twelve cfsd with their default
# settings (k = 6) in us-east, us-west, eu and asia (three each; RTTs of
# tests/harness/wan.sh's wan_world), each in its own network namespace at
# MTU 1500 behind the delay line, and a reader's cfsd in eu that joined
# BENCH_JOINED (10) s before the first get.
# Published through a us-east daemon: BENCH_GETS (100) blocks of 64 KiB
# as a replicated volume (copies) and as coded ones (BENCH_CODES, "4/12
# 2/6": rs:4/12, whose n = 12 is every daemon of the bed, and rs:2/6, the
# same rate on half of them), different bytes in each.
# Then single-block gets through the reader's cfsd (cfsctl get --check,
# and --code M/N for the coded blocks), round robin over the volumes,
# each beside its oracle: the RTT from eu to the nearest holder of the
# block (copies), to the m-th nearest holder of a fragment (coded: the
# earliest m fragments can all be back), and, for the coded block, also to
# its nearest holder. The get tool's own cost (the median get of a block
# the reader's cfsd holds itself) is subtracted from every get, as in
# make bench-wan.
# Usage: bench-coded-wan.sh BIN_DIR   (BENCH_GETS, BENCH_CODES, BENCH_JOINED)
set -euo pipefail
BIN=$1
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-coded-wan.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/wan.sh"
. "$here/lib.sh"
GETS=${BENCH_GETS:-100}
CODES=${BENCH_CODES:-4/12 2/6}
JOINED=${BENCH_JOINED:-10}
export XDG_CONFIG_HOME=$TEST_DIR/config
[ "$(id -u)" = 0 ] || { echo "bench-coded-wan: needs root (network namespaces)" >&2; exit 1; }
for code in $CODES; do
	[ "${code#*/}" -le 12 ] || { echo "bench-coded-wan: rs:$code wants ${code#*/} holders; the bed has 12" >&2; exit 2; }
done
command -v iptables-legacy >/dev/null || "$here/../../tools/ensure-deps.sh" iptables
trap 'cleanup; cluster_cleanup; rm -rf "$TEST_DIR"' EXIT

mkdir -p "$TEST_DIR/probeP"
head -c $((GETS * 65536)) /dev/urandom >"$TEST_DIR/probeP/blocks"

wan_world
wan_place us-east:3 us-west:3 eu:3 asia:3
start=$SECONDS
wan_start 1
echo "== wide area: 12 cfsd (defaults, k = 6) in us-east, us-west, eu, asia (3 each), MTU 1500; the ring converged in $((SECONDS - start)) s; the reader in eu"

publish() { # NAME DIR REDUNDANCY: publish DIR through node 0 (us-east); the volume's key on stdout
	"$BIN/cfs-publish" --keygen "$TEST_DIR/$1.key" >"$TEST_DIR/$1.vol" 2>/dev/null
	"$BIN/cfs-publish" --quiet --key "$TEST_DIR/$1.key" --redundancy "$3" \
		--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$2" >/dev/null 2>"$TEST_DIR/$1.err" ||
		{ cat "$TEST_DIR/$1.err" >&2; fail "publish of $1 ($3)"; }
	cat "$TEST_DIR/$1.vol"
}
start=$SECONDS
volP=$(publish P "$TEST_DIR/probeP" copies)
sleep 2 # the replica pushes after the publish
cluster_collect "$TEST_DIR/before0"
ci=0
for code in $CODES; do
	ci=$((ci + 1))
	mkdir -p "$TEST_DIR/probeC$ci"
	head -c $((GETS * 65536)) /dev/urandom >"$TEST_DIR/probeC$ci/blocks"
	publish "C$ci" "$TEST_DIR/probeC$ci" "rs:$code" >/dev/null
	sleep 2
	cluster_collect "$TEST_DIR/before$ci"
done
cp -r "$TEST_DIR/before$ci" "$TEST_DIR/held"
echo "   published $GETS blocks of 64 KiB through us-east as copies and as rs:${CODES// /, rs:} in $((SECONDS - start)) s"
# The fragments every daemon stores: from a copy of its store (the daemon
# holds the store's lock)
for ((i = 0; i < CL_N; i++)); do
	rm -rf "$TEST_DIR/storecopy"
	cp -r "$TEST_DIR/node$i/blocks" "$TEST_DIR/storecopy"
	rm -f "$TEST_DIR/storecopy/LOCK"
	"$BIN/cfs-storetool" frags "$TEST_DIR/storecopy" | cut -d' ' -f1
done | sort -u >"$TEST_DIR/frag.keys"
rm -rf "$TEST_DIR/storecopy"
wan_reader_cfsd
sleep "$JOINED"

# The replicated volume's keys, from cfs-fsck; a coded volume's data keys:
# the fragment keys its publish added
"$BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node0/cfsd.sock" --replicas "$volP" >"$TEST_DIR/P.rep" 2>/dev/null || true
cut -d' ' -f1 "$TEST_DIR/P.rep" >"$TEST_DIR/P.keys"
for ((c = 1; c <= ci; c++)); do
	cat "$TEST_DIR/before$((c - 1))"/node*.keys | sort -u >"$TEST_DIR/b.keys"
	cat "$TEST_DIR/before$c"/node*.keys | sort -u | comm -23 - "$TEST_DIR/b.keys" |
		comm -12 - "$TEST_DIR/frag.keys" >"$TEST_DIR/C$c.keys"
	[ -s "$TEST_DIR/C$c.keys" ] || fail "no fragment key of the rs:$(echo $CODES | cut -d' ' -f$c) volume"
done
"$CFSCTL" --data "$TEST_DIR/reader-node" keys >"$TEST_DIR/reader.keys"

ms_since() { python3 -c "import sys; print('%.2f' % ((float(sys.argv[2]) - float(sys.argv[1])) * 1000))" "$1" "$(now)"; }
get_ms() { # KEY [cfsctl get options]: one get through the reader's cfsd, in ms
	local k=$1 t; shift
	t=$(now)
	"$CFSCTL" --data "$TEST_DIR/reader-node" get --check "$@" "$k" >"$TEST_DIR/get.out" 2>&1 || true
	grep -q " ok " "$TEST_DIR/get.out" || { echo "bench-coded-wan: get $k: $(cat "$TEST_DIR/get.out")" >&2; return 1; }
	ms_since "$t"
}
: >"$TEST_DIR/local.ms"
for k in $(head -20 "$TEST_DIR/reader.keys"); do get_ms "$k" >>"$TEST_DIR/local.ms" || true; done
cost_how="local gets"
if [ ! -s "$TEST_DIR/local.ms" ]; then
	cost_how="cfsctl status runs: the reader's cfsd held no block yet"
	for _ in $(seq 20); do
		t=$(now); "$CFSCTL" --data "$TEST_DIR/reader-node" status >/dev/null; ms_since "$t"
	done >>"$TEST_DIR/local.ms"
fi
holders_of() { # KEY: the indexes of the daemons that held it after the publishes
	local i
	for ((i = 0; i < CL_N; i++)); do grep -qx "$1" "$TEST_DIR/held/node$i.keys" 2>/dev/null && echo "$i"; done
}
rtts_of() { # NODE...: each one's RTT from the reader, sorted
	local i
	for i in "$@"; do wan_rtt_between r "$i"; done | sort -g
}
one_get() { # P|M/N KEY: a get and its oracles, one line to $TEST_DIR/gets
	local vol=$1 k=$2 h g o1 om cm=${1%/*}
	grep -qx "$k" "$TEST_DIR/reader.keys" && return 0 # the reader's cfsd holds it: no trip
	mapfile -t h < <(holders_of "$k")
	[ "${#h[@]}" -gt 0 ] || return 0
	mapfile -t rt < <(rtts_of "${h[@]}")
	o1=${rt[0]}
	if [ "$vol" != P ]; then
		[ "${#rt[@]}" -ge "$cm" ] || return 0
		om=${rt[$((cm - 1))]}
		g=$(get_ms "$k" --code "$vol") || return 0
	else
		om=$o1
		g=$(get_ms "$k") || return 0
	fi
	echo "$vol $k $g $om $o1 ${#h[@]}" >>"$TEST_DIR/gets"
}
: >"$TEST_DIR/gets"
# round robin over the volumes, one key of each in turn
# (as many rounds as the volume with the fewest keys has)
rounds=$(wc -l "$TEST_DIR/P.keys" "$TEST_DIR"/C[0-9]*.keys | awk '$2 != "total" { print $1 }' | sort -n | head -1)
for f in "$TEST_DIR/P.keys" "$TEST_DIR"/C[0-9]*.keys; do head -n "$rounds" "$f" >"$f.r"; done
paste -d' ' "$TEST_DIR/P.keys.r" "$TEST_DIR"/C[0-9]*.keys.r >"$TEST_DIR/rounds"
read -r -a vols <<<"P $CODES"
while read -r -a ks; do
	for ((j = 0; j < ${#ks[@]}; j++)); do one_get "${vols[$j]}" "${ks[$j]}"; done
done <"$TEST_DIR/rounds"

python3 - "$TEST_DIR/local.ms" "$TEST_DIR/gets" "$CODES" "$cost_how" "$JOINED" <<'EOF'
import statistics, sys
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))] if v else float("nan")
local = [float(l) for l in open(sys.argv[1]) if l.strip()]
rows = [l.split() for l in open(sys.argv[2]) if l.strip()]
codes, how, joined = sys.argv[3].split(), sys.argv[4], sys.argv[5]
over = statistics.median(local) if local else 0.0
print("single-block gets (64 KiB) through the reader's cfsd in eu (joined %s s before), the tool's own cost %.1f ms (median of %d %s) subtracted"
      % (joined, over, len(local), how))
print("%-26s %6s %8s %8s %8s %22s %22s %8s" % ("volume", "gets", "p50 ms", "p90 ms", "p99 ms",
      "oracle p50/p99 ms", "nearest p50/p99 ms", "holders"))
for vol, name in [("P", "copies (k = 6)")] + [(c, "rs:" + c) for c in codes]:
    r = [x for x in rows if x[0] == vol]
    if not r:
        print("%-26s none measured" % name)
        continue
    g = [max(0.0, float(x[2]) - over) for x in r]
    om = [float(x[3]) for x in r]
    o1 = [float(x[4]) for x in r]
    hs = sorted(int(x[5]) for x in r)
    print("%-26s %6d %8.1f %8.1f %8.1f %22s %22s %8s" % (name, len(r), pct(g, 50), pct(g, 90), pct(g, 99),
          "%.0f / %.0f (%s)" % (pct(om, 50), pct(om, 99), "1st" if vol == "P" else "m-th"),
          "%.0f / %.0f" % (pct(o1, 50), pct(o1, 99)), "%d-%d" % (hs[0], hs[-1])))
    st = [gi / oi for gi, oi in zip(g, om) if oi > 0]
    print("%-26s ratio to its oracle: p50 %.2fx  p99 %.2fx (of the percentiles); stretch per get p50 %.2fx p90 %.2fx"
          % ("", pct(g, 50) / pct(om, 50), pct(g, 99) / pct(om, 99), pct(st, 50), pct(st, 90)))
EOF
echo "   delay line: $(cluster_delayline_counters)"
