#!/bin/bash
# Durability of the storage engine under kill -9, on one cfsd
# alone with --replicas 1 (it is the successor of every key, so a put is
# acknowledged only once its own store has committed it, and no other copy
# can hide a loss):
#   1. kill -9 in the middle of a stream of puts, three times: every block
#      cfsctl put reported as acknowledged is there after each restart and
#      verifies (cfsctl get --check hashes it);
#   2. leases that end leave dead bytes in status (the expired blocks'
#      bytes, at least);
#   3. kill -9 while the compactor is rewriting a pack (status
#      compacting_pack != 0, some blocks already repointed): every live
#      block verifies after the restart, and the compaction finishes later
#      (dead bytes fall, compactions > 0).
# The active pack is never compacted and a durable pack closes at 256 MiB,
# so the test restarts the daemon after the puts: a new process writes a
# new pack, and the old one becomes a candidate.
. "$(dirname "$0")/lib.sh"
SIZE=8192
ROUNDS=${T_STORAGE_KILLS:-3}

# dstat NAME EXPR: a field of the daemon's status, e.g. "['disk']['dead_bytes']".
dstat() { "$CFSCTL" --data "$TEST_DIR/$1" status --json | jget "['dhash']$2"; }
# ge NAME EXPR MIN: the status field is at least MIN.
ge() { [ "$(dstat "$1" "$2")" -ge "$3" ]; }
# eq NAME EXPR VALUE: the status field is VALUE.
eq() { [ "$(dstat "$1" "$2")" -eq "$3" ]; }
# acked FILE: the keys cfsctl put reported as stored.
acked() { grep -E '^[0-9a-f]{64} ' "$1" | cut -d' ' -f1 || true; }
# check_all KEYS NAME: every key reads back verified through the daemon.
check_all() {
	"$CFSCTL" --data "$TEST_DIR/$2" get --check - <"$1" >"$TEST_DIR/check" 2>&1 ||
		fail "$(grep -vc ' ok ' "$TEST_DIR/check") of $(wc -l <"$1") acknowledged blocks lost or bad: $(grep -v ' ok ' "$TEST_DIR/check" | head -3)"
	[ "$(grep -c ' ok ' "$TEST_DIR/check")" -eq "$(wc -l <"$1")" ] || fail "get --check did not answer every key"
}

# ---- 1. kill -9 during a stream of puts
port=$(free_port)
start_cfsd p "$port" --replicas 1 --sync-ms 0 --cache-mb 0
: >"$TEST_DIR/p.keys"
for ((r = 1; r <= ROUNDS; r++)); do
	want=40000 # far more than the kill lets through, however late the poll sees the count
	before=$(dstat p "['stores']")
	"$CFSCTL" --data "$TEST_DIR/p" put --random "$want" --size "$SIZE" --seed $((100 + r)) \
		>"$TEST_DIR/p.put$r" 2>&1 &
	cpid=$!
	PIDS+=("$cpid")
	# Kill once a few hundred (a random number) have been stored: the kill
	# lands in the middle of the stream, with puts in flight.
	at=$((before + 200 + RANDOM % 600))
	wait_for 60 ge p "['stores']" "$at" || fail "round $r: the puts did not get going"
	kill -KILL "$CFSD_PID"
	wait "$CFSD_PID" 2>/dev/null || true
	wait "$cpid" 2>/dev/null || true
	acked "$TEST_DIR/p.put$r" >"$TEST_DIR/p.acked$r"
	n=$(wc -l <"$TEST_DIR/p.acked$r")
	[ "$n" -gt 0 ] || fail "round $r: nothing acknowledged before the kill"
	[ "$n" -lt "$want" ] || fail "round $r: every put was acknowledged: the kill came too late to prove anything"
	cat "$TEST_DIR/p.acked$r" >>"$TEST_DIR/p.keys"
	start_cfsd p "$port" --replicas 1 --sync-ms 0 --cache-mb 0
	check_all "$TEST_DIR/p.keys" p
	echo "# kill $r: kill -9 once the daemon counted $((at - before))+ stores; $n of $want puts acknowledged;" \
		"after the restart all $(wc -l <"$TEST_DIR/p.keys") acknowledged so far verify;" \
		"torn tail cut $(dstat p "['disk']['torn_cut']") bytes, records dropped $(dstat p "['disk']['records_dropped']")"
done
[ "$(dstat p "['disk']['records_dropped']")" -eq 0 ] || fail "a restart after kill -9 dropped index records"
ok "kill -9 during puts, $ROUNDS times: every acknowledged block survives and verifies"
kill -TERM "$CFSD_PID"
wait "$CFSD_PID" 2>/dev/null || true

# ---- 2 and 3. dead bytes from leases; kill -9 during compaction
# Six rounds of 300 blocks with a lease of 8.6 s and 100 with the daemon's
# 30 days, interleaved in one pack: three quarters of it dies.
SHORT=300
LONG=100
port=$(free_port)
start_cfsd c "$port" --replicas 1 --sync-ms 0 --cache-mb 0 --expire-ms 500 --compact-mb-per-s 0
: >"$TEST_DIR/c.live"
: >"$TEST_DIR/c.short"
t0=$(date +%s.%N)
for r in 1 2 3 4 5 6; do
	"$CFSCTL" --data "$TEST_DIR/c" put --random "$SHORT" --size "$SIZE" --seed $((200 + r)) \
		--lease-days 0.0001 >"$TEST_DIR/c.put" || fail "short-lease puts"
	acked "$TEST_DIR/c.put" >>"$TEST_DIR/c.short"
	"$CFSCTL" --data "$TEST_DIR/c" put --random "$LONG" --size "$SIZE" --seed $((300 + r)) \
		>"$TEST_DIR/c.put" || fail "long-lease puts"
	acked "$TEST_DIR/c.put" >>"$TEST_DIR/c.live"
done
nshort=$(wc -l <"$TEST_DIR/c.short")
nlive=$(wc -l <"$TEST_DIR/c.live")
printf '# %s blocks with an 8.6 s lease and %s with 30 days put in %.1f s\n' "$nshort" "$nlive" "$(echo "$(date +%s.%N) - $t0" | bc)"
# A new process: the pack they are in is closed, a candidate for compaction.
kill -TERM "$CFSD_PID"
wait "$CFSD_PID" 2>/dev/null || true
start_cfsd c "$port" --replicas 1 --sync-ms 0 --cache-mb 0 --expire-ms 500 --compact-mb-per-s 1
wait_for 40 ge c "['expired']" "$nshort" ||
	fail "only $(dstat c "['expired']") of $nshort short leases collected"
dead=$(dstat c "['disk']['dead_bytes']")
[ "$dead" -ge $((nshort * SIZE)) ] || fail "dead bytes $dead after $nshort blocks of $SIZE expired"
[ "$(dstat c "['disk']['live_bytes']")" -eq $((nlive * SIZE)) ] ||
	fail "live bytes $(dstat c "['disk']['live_bytes']"), want $((nlive * SIZE))"
echo "# all $nshort short leases collected: dead_bytes $dead, live_bytes $((nlive * SIZE)), pack_bytes $(dstat c "['disk']['pack_bytes']")"
ok "leases that end leave their bytes dead in status"

# At 1 MB/s the compactor copies about 60 live blocks a second: kill it
# once it has repointed some but far from all.
wait_for 30 ge c "['disk']['compact_copied']" $((40 * SIZE)) ||
	fail "the compactor did not start: $(dstat c "['disk']")"
[ "$(dstat c "['disk']['compacting_pack']")" -ne 0 ] || fail "no compaction in progress: $(dstat c "['disk']")"
copied=$(dstat c "['disk']['compact_copied']")
size=$(dstat c "['disk']['compacting_size']")
done_b=$(dstat c "['disk']['compacting_done']")
kill -KILL "$CFSD_PID"
wait "$CFSD_PID" 2>/dev/null || true
[ "$copied" -lt $((nlive * (SIZE + 48))) ] || fail "the compaction was nearly over before the kill"
start_cfsd c "$port" --replicas 1 --sync-ms 0 --cache-mb 0 --expire-ms 500 --compact-mb-per-s 8
check_all "$TEST_DIR/c.live" c
echo "# kill -9 with pack $size bytes being compacted, $done_b read, $copied bytes copied forward;" \
	"after the restart all $nlive live blocks verify (torn tail cut $(dstat c "['disk']['torn_cut']") bytes)"
start=$SECONDS
wait_for 60 ge c "['disk']['compactions']" 1 || fail "no compaction finished after the restart: $(dstat c "['disk']")"
wait_for 30 eq c "['disk']['compacting_pack']" 0 || fail "the compaction does not end: $(dstat c "['disk']")"
after=$(dstat c "['disk']['dead_bytes']")
[ "$after" -lt $((dead / 10)) ] || fail "dead bytes $after after compaction, from $dead"
check_all "$TEST_DIR/c.live" c
# The compaction brought back none of the expired blocks.
"$CFSCTL" --data "$TEST_DIR/c" get --check - <"$TEST_DIR/c.short" >"$TEST_DIR/check" 2>&1 || true
back=$(grep -c ' ok ' "$TEST_DIR/check" || true)
[ "$back" -eq 0 ] || fail "$back expired blocks came back after the compaction"
echo "# after the restart: compacted in $((SECONDS - start)) s; dead_bytes $dead -> $after," \
	"pack_bytes $(dstat c "['disk']['pack_bytes']"), compactions $(dstat c "['disk']['compactions']"), reclaimed $(dstat c "['disk']['compact_reclaimed']") bytes"
ok "kill -9 during compaction: every live block verifies, no expired one returns, and the compaction finishes after the restart"
