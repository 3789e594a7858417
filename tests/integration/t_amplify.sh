#!/bin/bash
# No amplification toward an unvalidated address: a
# spoofed-source request gets no more than 3x its size back. On a
# 3-daemon ring (4 virtual servers each, k = 3: every daemon holds every
# block) with a published 4 MiB file, amplify.py sends, each from a fresh
# UDP socket that never answers a 'Y' or acks a piece (a spoofed victim
# never would), FETCH of an 8 KiB block, SYNC_KEYS and SYNC_DIGEST of the
# whole ring, GET_SUCCS, GET_PRED and FIND_NEXT for 64 successors, and
# counts every byte that comes back within 2 s. Each must be at most 3x
# what was sent. And the honest path: the same FETCH through rpc(), which
# proves its address with 'V', returns the block's bytes. Last, a request
# sent twice (as the transport resends one whose answer is late): a copy
# of a LOOKUP_FWD is acknowledged but not forwarded again.
# First, cfsmsg.py's own self-test (pieces, acks, tokens over loopback).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
HERE=$(dirname "$0")
PUBLISH=$CFS_BIN/cfs-publish
export XDG_CONFIG_HOME=$TEST_DIR/config

python3 "$HARNESS_DIR/cfsmsg_test.py" >"$TEST_DIR/selftest" 2>&1 ||
	fail "the Python wire code fails its self-test: $(tail -5 "$TEST_DIR/selftest")"
echo "# $(cat "$TEST_DIR/selftest")"

# No ring checks: their lookups would be LOOKUP_FWDs counted below.
cluster_start 3 4 --stabilize-ms 250 --replicas 3 --sync-ms 0 --ring-check-ms 0
cluster_wait_correct 60 || fail "a ring of 3 daemons did not converge"
"$PUBLISH" --keygen >/dev/null 2>&1 || fail "keygen"
mkdir -p "$TEST_DIR/src"
head -c $((4 << 20)) /dev/urandom >"$TEST_DIR/src/big"
echo small >"$TEST_DIR/src/small"
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --state-dir "$TEST_DIR/st" --block-size 8192 \
	"$TEST_DIR/src" >/dev/null \
	2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish"; }

python3 "$HERE/amplify.py" "${CL_IP[0]}" "${CL_PORT[0]}" "$TEST_DIR/src/big" >"$TEST_DIR/amp" ||
	fail "amplify.py failed: $(cat "$TEST_DIR/amp")"
echo "# proto v$(python3 -c "import sys; sys.path.insert(0, '$HARNESS_DIR'); import cfsmsg; print(cfsmsg.VERSION)"):" \
	"request sent received ratio datagrams kinds (M whole, P piece, A ack, Y retry)"
awk '$1 == "amp" { print "#   " $2, $3, $4, $5 "x", $6, $7 }' "$TEST_DIR/amp"
[ "$(grep -c '^amp ' "$TEST_DIR/amp")" -eq 6 ] || fail "amplify.py measured $(grep -c '^amp ' "$TEST_DIR/amp") of 6 requests"
grep -q '^honest_fetch ok ' "$TEST_DIR/amp" ||
	fail "the honest client's FETCH: $(grep honest_fetch "$TEST_DIR/amp")"
ok "a client that proves its address gets the 8 KiB block ($(awk '$1 == "honest_fetch" { print $3 }' "$TEST_DIR/amp") bytes)"

over=$(awk '$1 == "amp" && $4 > 3 * $3 { printf "%s %.0fx; ", $2, $4 / $3 }' "$TEST_DIR/amp")
[ -z "$over" ] || fail "an unvalidated address got more than 3x what it sent: $over"
ok "no request from an unvalidated address gets more than 3x its size back"

# A request is sent again when its answer is late, and every
# request must bear that: a copy of a LOOKUP_FWD is acknowledged, but the
# query is forwarded once, not down a second chain.
# The counters are node 0's, which a lookup of another daemon's may cross
# meanwhile (under load one does, now and then): up to three tries,
# each with a fresh query, and one must show exactly 1 and 1. A copy that
# is forwarded again is never counted as a copy, so it fails every try.
for try in 1 2 3; do
	"$CFSCTL" --data "$TEST_DIR/node0" status --json >"$TEST_DIR/before.json" || fail "status"
	python3 "$HERE/fwd_copy.py" "${CL_IP[0]}" "${CL_PORT[0]}" >"$TEST_DIR/fwd" 2>&1 ||
		fail "fwd_copy.py: $(cat "$TEST_DIR/fwd")"
	"$CFSCTL" --data "$TEST_DIR/node0" status --json >"$TEST_DIR/after.json" || fail "status"
	grep -q '^acks 2$' "$TEST_DIR/fwd" || fail "both copies must be acknowledged: $(cat "$TEST_DIR/fwd")"
	fwd=$(($(json_get "$TEST_DIR/after.json" ring.served.lookup_fwd) - $(json_get "$TEST_DIR/before.json" ring.served.lookup_fwd)))
	copies=$(($(json_get "$TEST_DIR/after.json" ring.served.lookup_fwd_copies) -
		$(json_get "$TEST_DIR/before.json" ring.served.lookup_fwd_copies)))
	[ "$fwd" -eq 1 ] && [ "$copies" -eq 1 ] && break
	echo "# try $try: $fwd forwarded, $copies recognised as copies"
done
[ "$fwd" -eq 1 ] && [ "$copies" -eq 1 ] ||
	fail "two copies of one LOOKUP_FWD: $fwd forwarded, $copies recognised as copies (want 1 and 1)"
ok "a copy of a LOOKUP_FWD is acknowledged and not forwarded again"
