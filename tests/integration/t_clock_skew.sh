#!/bin/bash
# A daemon whose wall clock is wrong loses nothing: 6 daemons lease every
# block for at most a day; two run their clocks two days ahead. One has
# the default skew bound: it sees its clock off the median of its peers',
# says so in the log and in status, and suspends lease expiry. The other
# is told to tolerate any skew: its peers' lease times are read on their
# clocks (version 5 messages carry the sender's clock), so the copies it
# takes stay leased for a day by its own. With the collectors running
# every second, no copy that the others consider leased is dropped
# anywhere, and every block is still served. A plain reader whose clock
# is right reads the volume; one two days ahead sees the root (valid for
# a day) as expired and is told that its own clock is wrong.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
export XDG_CONFIG_HOME=$TEST_DIR/config
N=6
AHEAD=$((2 * 86400))

cluster_start "$N" 1 --stabilize-ms 500 --sync-ms 3000 --expire-ms 1000 --lease-days 1 --max-lease-days 1
cluster_wait_correct 60 || fail "the ring did not converge"
# two daemons come back with their clocks two days ahead
for i in 4 5; do
	cluster_stop "$i"
	CL_ARGS[$i]="${CL_ARGS[$i]} --test-clock-offset-s $AHEAD"
done
CL_ARGS[5]="${CL_ARGS[5]} --max-clock-skew-s 31536000"
for i in 4 5; do cluster_run "$i"; cluster_wait_up "$i"; done
cluster_wait_correct 60 || fail "the ring did not converge with the skewed daemons"

src=$TEST_DIR/src
mkdir -p "$src"
for i in $(seq 1 40); do head -c $((RANDOM + 1000)) /dev/urandom >"$src/f$i"; done
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }
wait_whole() { "$CFS_BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node1/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1; }
wait_for 60 wait_whole || { tail -3 "$TEST_DIR/fsck.out"; fail "the volume never reached k copies"; }
cluster_collect "$TEST_DIR/before"
sleep 12 # a dozen collector rounds, several sync rounds
cluster_collect "$TEST_DIR/after"
for i in 4 5; do
	b=$(wc -l <"$TEST_DIR/before/node$i.keys") a=$(wc -l <"$TEST_DIR/after/node$i.keys")
	[ "$a" -ge "$b" ] || fail "daemon $i, its clock two days ahead, dropped copies: $b before, $a after"
	[ "$b" -gt 0 ] || fail "daemon $i holds no copy"
	echo "# daemon $i (clock +2 days): $b copies, $a twelve seconds later"
done
for ((i = 0; i < N; i++)); do
	e=$(jget "['dhash']['expired']" <"$TEST_DIR/after/node$i.json")
	[ "$e" -eq 0 ] || fail "daemon $i expired $e copies the others consider leased"
done
"$CFS_BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node2/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1 ||
	{ tail -3 "$TEST_DIR/fsck.out"; fail "the volume is not whole at k"; }
ok "no copy expired anywhere; $(tail -1 "$TEST_DIR/fsck.out")"

# ---- the skew is seen, said and shown
skew4=$(jget "['dhash']['clock']['skew_s']" <"$TEST_DIR/after/node4.json")
susp4=$(jget "['dhash']['clock']['expiry_suspended']" <"$TEST_DIR/after/node4.json")
susp5=$(jget "['dhash']['clock']['expiry_suspended']" <"$TEST_DIR/after/node5.json")
skew0=$(jget "['dhash']['clock']['skew_s']" <"$TEST_DIR/after/node0.json")
python3 -c "import sys; s=float(sys.argv[1]); sys.exit(0 if abs(s - $AHEAD) < 60 else 1)" "$skew4" ||
	fail "daemon 4 measured a skew of $skew4 s, not about $AHEAD"
python3 -c "import sys; s=float(sys.argv[1]); sys.exit(0 if abs(s) < 60 else 1)" "$skew0" ||
	fail "daemon 0, whose clock is right, measured a skew of $skew0 s"
[ "$susp4" = True ] || fail "daemon 4 did not suspend lease expiry"
[ "$susp5" = False ] || fail "daemon 5 (told to tolerate any skew) suspended expiry"
grep -q "clock is +$AHEAD s off the median" "$TEST_DIR/node4.log" || fail "daemon 4 did not log its skew"
"$CFSCTL" --data "$TEST_DIR/node4" status >"$TEST_DIR/node4.status"
grep -q "lease expiry suspended yes" "$TEST_DIR/node4.status" ||
	fail "cfsctl status of daemon 4 does not show expiry suspended"
ok "daemon 4 measured its clock +$skew4 s off its peers', logged it and suspended expiry; daemon 0 measured $skew0 s"

# ---- a reader whose clock is two days ahead: the root (valid for a day)
# looks expired to it, and it says its own clock is wrong, not that the
# publisher stopped; with a right clock the same read succeeds
boots=()
for ((i = 0; i < 4; i++)); do boots+=(--bootstrap "$(cluster_addr "$i")"); done
"$CFS_BIN/cfs-cat" "${boots[@]}" "$vol" /f1 | cmp - "$src/f1" || fail "a reader with a right clock"
got=0
CFS_TEST_CLOCK_OFFSET_S=$AHEAD "$CFS_BIN/cfs-cat" "${boots[@]}" "$vol" /f1 >/dev/null 2>"$TEST_DIR/skewed.err" || got=$?
[ "$got" -ne 0 ] || fail "a reader two days ahead read a root valid for a day"
grep -q "this machine's clock is wrong: .* +$AHEAD s off the median of [0-9]* servers' clocks" "$TEST_DIR/skewed.err" ||
	fail "the skewed reader was not told its clock is wrong: $(cat "$TEST_DIR/skewed.err")"
ok "a reader two days ahead: $(grep -o "this machine's clock is wrong.*" "$TEST_DIR/skewed.err" | head -1)"
