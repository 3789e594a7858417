#!/bin/bash
# One and then two hostile members cannot lose data or stall
# gets. A 16-daemon ring (short successor lists, so that lookups take
# several hops, as on a large ring) is joined by cfs-hostile (tests/harness/
# cfs_hostile.c): a member that joins honestly, then answers every lookup
# step with "done, I hold it" naming only itself, acknowledges and drops
# every STORE, says "yes" to every HAVE and refuses every FETCH. First its
# lie is checked directly (a FIND_NEXT for a key across the ring); then,
# through honest daemons, N random blocks are put, each acknowledged one is
# got back from another honest daemon, and a small tree is published and
# checked whole by cfs-fsck. Wanted: 0 acknowledged puts
# lost, >= 99.9 % of gets of stored blocks succeed, the tree whole.
#
# CFS_REPORT_ONLY=1 prints the figures without failing on them (the
# "before" figures of a tree without the defences). CFS_HOSTILE: the
# cfs-hostile binary (default $CFS_BIN/cfs-hostile), so that the figures
# of another build's daemons can be taken with this one. HOSTILE_ARGS:
# other lies (e.g. "--lookup far --fetch garbage"; the direct FIND_NEXT
# check then expects flags and nodes of that lie), HOSTILE_PUTS (200: 13 per daemon, 208),
# HOSTILE_SUCCESSORS (4), HOSTILE_REPLICAS (3).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
HOSTILE=${CFS_HOSTILE:-$CFS_BIN/cfs-hostile}
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
N=16
PUTS=${HOSTILE_PUTS:-200}
# Successor lists of 8 (not 16) so that lookups cross several hops; k = 6
# as by default: a put needs 4 confirmations, so two liars among a key's
# servers leave at least two honest copies (with k = 3, two liars next to
# each other on the ring are a majority of their keys' servers).
R=${HOSTILE_SUCCESSORS:-8}
K=${HOSTILE_REPLICAS:-6}
export CLUSTER_SUCCESSORS=$R
REPORT_ONLY=${CFS_REPORT_ONLY:-0}
failed_checks=0
[ -x "$HOSTILE" ] || fail "no cfs-hostile at $HOSTILE (set CFS_HOSTILE)"

# check COND-STATUS MESSAGE: fail unless the status is 0; with
# CFS_REPORT_ONLY=1 only say what would have failed.
check() {
	[ "$1" -eq 0 ] && return 0
	failed_checks=$((failed_checks + 1))
	[ "$REPORT_ONLY" = 1 ] && { echo "# would fail: $2"; return 0; }
	fail "$2"
}

cluster_start "$N" 1 --stabilize-ms 250 --successors "$R" --replicas "$K"
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"
ok "$N honest daemons in a correct ring after ${CLUSTER_CONVERGED_S} s"

HOSTILE_IDS=()
# start_hostile H: hostile member H on its own loopback address, joining
# through a random honest daemon; waits until it is in the ring.
start_hostile() {
	local h=$1 ip="127.66.6.$(($1 + 1))" port j
	port=$(free_port)
	j=$((RANDOM % N))
	"$HOSTILE" --bind "$ip" --port "$port" --bootstrap "${CL_IP[$j]}:${CL_PORT[$j]}" \
		--stabilize-ms 250 --successors "$R" --seed $((h + 7)) ${HOSTILE_ARGS:-} \
		>"$TEST_DIR/hostile$h.ids" 2>"$TEST_DIR/hostile$h.log" &
	PIDS+=("$!")
	HPID[$h]=$!
	HIP[$h]=$ip
	HPORT[$h]=$port
	wait_for 10 grep -q '^id ' "$TEST_DIR/hostile$h.ids" ||
		{ cat "$TEST_DIR/hostile$h.log" >&2; fail "cfs-hostile $h did not start"; }
	HOSTILE_IDS+=($(awk '$1 == "id" { print $2 }' "$TEST_DIR/hostile$h.ids"))
	local start=$SECONDS
	in_tables 0.25 60 || { cat "$TEST_DIR/joined" >&2; fail "hostile member $h never joined"; }
	# Then the honest members' finger refreshes, whose lookups it answers
	# too, spread it further: wait (at most SPREAD_S) until half of them
	# know it, as they would after a while on a long-lived ring.
	in_tables 0.5 "${HOSTILE_SPREAD_S:-30}" || true
	echo "# hostile member $h at $ip:$port after $((SECONDS - start)) s: $(cat "$TEST_DIR/joined")"
}

# in_tables FRAC SECONDS: until every hostile member is linked into the
# ring and in the tables of FRAC of the honest daemons; 1 after SECONDS.
in_tables() {
	local end=$((SECONDS + $2))
	until cluster_status_all "$TEST_DIR/st" &&
		python3 "$HERE/hostile_figures.py" joined "$1" "$TEST_DIR/st" "${HOSTILE_IDS[@]}" >"$TEST_DIR/joined"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.5
	done
}

# probe_lie H: a FIND_NEXT for the key opposite hostile member H on the
# ring (whose true successor is far from it) must come back "done, I hold
# it", naming only itself: the member really lies.
probe_lie() {
	local h=$1 id key out
	id=$(awk '$1 == "id" { print $2; exit }' "$TEST_DIR/hostile$h.ids")
	key=$(python3 -c "import sys; print('%064x' % ((int(sys.argv[1], 16) + (1 << 255)) % (1 << 256)))" "$id")
	out=$(python3 "$HERE/find_next_probe.py" "${HIP[$h]}" "${HPORT[$h]}" "$key") ||
		fail "no FIND_NEXT answer from hostile member $h"
	if [[ " ${HOSTILE_ARGS:-} " == *" --lookup far "* ]]; then
		# "done", itself first, then its own successors
		grep -qx 'status 0' <<<"$out" && grep -qx 'flags 1' <<<"$out" &&
			[ "$(grep -m1 '^node ' <<<"$out" | cut -d' ' -f2)" = "$id" ] ||
			fail "hostile member $h does not lie as it should: $out"
	else
		grep -qx 'status 0' <<<"$out" && grep -qx 'flags 3' <<<"$out" &&
			[ "$(grep -c '^node ' <<<"$out")" -eq 1 ] && grep -q "^node $id " <<<"$out" ||
			fail "hostile member $h does not lie as it should: $out"
	fi
	ok "hostile member $h answers a FIND_NEXT for a key across the ring with \"done, I hold it\", naming itself"
}

# lookup_figures LABEL: 20 random lookups from every honest daemon, in
# each mode (recursive ones meet the liar's LOOKUP_FWD): how many answers
# are wrong, how many of those name a liar. Printed, not checked: the
# issue's criteria are the puts, gets and the tree below.
lookup_figures() {
	local label=$1 mode i t w h
	cluster_status_all "$TEST_DIR/st"
	for mode in iterative recursive; do
		: >"$TEST_DIR/lk.$label.$mode"
		for ((i = 0; i < N; i++)); do
			"$CFSCTL" --data "$TEST_DIR/node$i" lookup --mode "$mode" --random 20 \
				>>"$TEST_DIR/lk.$label.$mode" 2>/dev/null || true
		done
		read -r t w h < <(python3 "$HERE/hostile_figures.py" lookups "$TEST_DIR/st" \
			"$TEST_DIR/lk.$label.$mode" "${HOSTILE_IDS[@]}")
		echo "# $label: $mode lookups: $w of $t wrong ($h ended at a liar)"
	done
}

# round LABEL SEED: put PUTS random blocks, PUTS/N through each honest
# daemon (whether a daemon's lookups meet a liar depends on its fingers:
# all of them, for a figure that does not hang on one), get every
# acknowledged one back through another daemon, publish a small tree
# through one and check it whole through another; print and check the
# figures.
round() {
	local label=$1 seed=$2 acked got lost first among two pub_rc fsck_rc src vol i c d
	local per=$(((PUTS + N - 1) / N))
	: >"$TEST_DIR/acked.$label"
	: >"$TEST_DIR/gets.$label"
	for ((i = 0; i < N; i++)); do
		"$CFSCTL" --data "$TEST_DIR/node$i" put --random "$per" --size 2048 --seed "$((seed * 100 + i))" \
			>"$TEST_DIR/puts.$label.$i" 2>>"$TEST_DIR/puts.$label.err" || true
		grep -E '^[0-9a-f]{64} ' "$TEST_DIR/puts.$label.$i" >>"$TEST_DIR/acked.$label" || true
		grep -E '^[0-9a-f]{64} ' "$TEST_DIR/puts.$label.$i" | cut -d' ' -f1 |
			"$CFSCTL" --data "$TEST_DIR/node$(((i + 5) % N))" get --check - \
			>>"$TEST_DIR/gets.$label" 2>&1 || true
	done
	acked=$(wc -l <"$TEST_DIR/acked.$label")
	got=$(grep -c ' ok ' "$TEST_DIR/gets.$label" || true)
	cluster_collect "$TEST_DIR/place.$label"
	python3 "$HERE/hostile_figures.py" place "$K" "$TEST_DIR/place.$label" "$TEST_DIR/acked.$label" \
		"${HOSTILE_IDS[@]}" >"$TEST_DIR/place.$label.out"
	read -r _ first _ among _ lost _ two < <(head -1 "$TEST_DIR/place.$label.out")
	echo "# $label: $acked of $((per * N)) puts acknowledged, $lost lost; $got/$acked gets succeeded" \
		"($first keys with a hostile first successor, $among with one among their $K, $two with two)"

	c=$((RANDOM % N)); d=$(((c + 1 + RANDOM % (N - 1)) % N))
	src=$TEST_DIR/src.$label
	mkdir -p "$src/sub"
	for i in $(seq 1 12); do head -c $((500 + i * 3100)) /dev/urandom >"$src/f$i"; done
	for i in $(seq 1 6); do head -c $((i * 7000)) /dev/urandom >"$src/sub/g$i"; done
	pub_rc=0
	"$PUBLISH" --to "cfsd:$TEST_DIR/node$c/cfsd.sock" --state-dir "$TEST_DIR/pubst" "$src" \
		>"$TEST_DIR/vol" 2>"$TEST_DIR/pub.$label.err" || pub_rc=$?
	vol=$(cat "$TEST_DIR/volname")
	fsck_rc=0
	"$FSCK" --from "cfsd:$TEST_DIR/node$d/cfsd.sock" "$vol" >"$TEST_DIR/fsck.$label" \
		2>"$TEST_DIR/fsck.$label.err" || fsck_rc=$?
	echo "# $label: cfs-publish exit $pub_rc ($(tail -1 "$TEST_DIR/pub.$label.err" | sed 's/^cfs-publish: //'));" \
		"cfs-fsck exit $fsck_rc ($(tail -1 "$TEST_DIR/fsck.$label.err" | sed 's/^cfs-fsck: //'))"

	check $((acked == 0)) "$label: no put was acknowledged at all"
	check $((lost != 0)) "$label: $lost of $acked acknowledged puts lost"
	check $((got * 1000 < acked * 999)) "$label: only $got of $acked gets of stored blocks succeeded"
	check $((fsck_rc != 0)) "$label: the published tree is not whole (cfs-fsck exit $fsck_rc)"
}

"$PUBLISH" --keygen >"$TEST_DIR/volname" 2>/dev/null || fail "keygen"

start_hostile 0
probe_lie 0
lookup_figures one-hostile
round one-hostile 101
start_hostile 1
probe_lie 1
lookup_figures two-hostile
round two-hostile 202
for h in 0 1; do kill -USR1 "${HPID[$h]}" 2>/dev/null || true; done
wait_for 5 grep -q 'lies told' "$TEST_DIR/hostile1.log" || true
for h in 0 1; do
	echo "# hostile member $h: $(grep 'lies told' "$TEST_DIR/hostile$h.log" | tail -1 | sed 's/.*lies told: //')"
done
if [ "$failed_checks" -gt 0 ]; then
	echo "# $failed_checks checks would have failed (CFS_REPORT_ONLY=1)"
else
	ok "no acknowledged put lost, every get and the published trees whole, with one and two hostile members"
fi
