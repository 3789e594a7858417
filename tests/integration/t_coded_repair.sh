#!/bin/bash
# Background repair of coded fragments (cfsd --frag-repair-ms), after
# Carbonite, on a 12-daemon loopback ring (k = 6) with a volume published
# as rs:4/8 (threshold m + ceil((n-m)/2) = 6) and a round every second:
#   - with every fragment in place, rounds locate the keys and store
#     nothing;
#   - one holder of a key K killed: K at 7 of 8, above the threshold:
#     still nothing stored (a loss the spares absorb costs nothing);
#   - two more of K's holders killed: K at 5, below it: rebuilt and back
#     at 8 distinct fragments (cfs-fsck --replicas), without an operator;
#   - a killed holder restarted: its fragment comes back and is kept
#     (nothing is deleted); the volume reads whole.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
N=12
R=0 # the publishing and reading daemon, never killed
trap 'cleanup; cluster_cleanup' EXIT

cluster_start "$N" 1 --stabilize-ms 250 --replicas 6 --frag-repair-ms 1000 --frag-repair-keys 256
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"

src=$TEST_DIR/src
mkdir -p "$src"
for i in 1 2 3 4; do head -c $((120000 + i * 999)) /dev/urandom >"$src/f$i"; done
"$PUBLISH" --keygen "$TEST_DIR/v.key" >"$TEST_DIR/v.vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/v.vol")
"$PUBLISH" --key "$TEST_DIR/v.key" --redundancy rs:4/8 --to "cfsd:$TEST_DIR/node$R/cfsd.sock" \
	"$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish rs:4/8"; }

ring_sum() { # FIELD: summed over the live daemons' status
	cluster_status_all "$TEST_DIR/st"
	cluster_status_sum "$TEST_DIR/st" "$1"
}
stored() { ring_sum frag_repair.stored; }   # fragments the repair rounds stored
checked() { ring_sum frag_repair.checked; } # keys they counted
good_of() { # KEY: its distinct good fragments, by cfs-fsck --replicas through node R
	"$FSCK" --data "$TEST_DIR/node$R" --replicas "$vol" >"$TEST_DIR/rep.out" 2>"$TEST_DIR/rep.err" || true
	grep "^$1 " "$TEST_DIR/rep.out" | awk '{ split($2, g, "/"); print g[1] }'
}

# the coded keys and their holders (cfsctl keys of every daemon)
for ((i = 0; i < N; i++)); do "$CFSCTL" --data "$TEST_DIR/node$i" keys | sed "s/\$/ $i/"; done >"$TEST_DIR/held"
K=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 8) print k }' "$TEST_DIR/held" | sort | head -1)
[ -n "$K" ] || fail "no key on 8 holders"
mapfile -t victims < <(awk -v k="$K" -v r="$R" '$1 == k && $2 != r { print $2 }' "$TEST_DIR/held" | shuf -n 3)
[ "${#victims[@]}" -eq 3 ] || fail "fewer than 3 holders of $K besides node$R"

t0=$SECONDS
until [ "$(checked)" -gt 0 ]; do
	[ $((SECONDS - t0)) -lt 20 ] || fail "no repair round counted a key in 20 s"
	sleep 1
done
sleep 3
[ "$(stored)" -eq 0 ] || fail "fragments stored with every fragment in place: $(stored)"
located=$(ring_sum frag_repair.located)
[ "$located" -eq 0 ] || fail "$located keys located fragment by fragment with every fragment in place"
ok "repair rounds counted $(checked) keys by HAVEs with every fragment in place, fetched no fragment and stored nothing"

cluster_kill "${victims[0]}"
cluster_wait_correct 60 || fail "the ring did not converge after node${victims[0]} died"
[ "$(good_of "$K")" = 7 ] || { cat "$TEST_DIR/rep.out"; fail "$K not at 7 after one holder died"; }
c0=$(checked)
t0=$SECONDS
until [ "$(checked)" -gt $((c0 + 4)) ]; do
	[ $((SECONDS - t0)) -lt 20 ] || fail "repair rounds stopped after a holder died"
	sleep 1
done
[ "$(stored)" -eq 0 ] || fail "a block at 7 of 8 (threshold 6) was repaired: $(stored) stored"
ok "one holder of ${K:0:8} killed: at 7 of 8, above the threshold: nothing stored"

cluster_kill "${victims[1]}"
cluster_kill "${victims[2]}"
cluster_wait_correct 60 || fail "the ring did not converge after two more holders died"
t0=$SECONDS
until [ "$(good_of "$K")" = 8 ]; do
	[ $((SECONDS - t0)) -lt 60 ] || { cat "$TEST_DIR/rep.out"; fail "$K not back at 8 in 60 s: $(stored) stored"; }
	sleep 1
done
n=$(stored)
[ "$n" -ge 3 ] || fail "$K back at 8 but only $n fragments stored by the repair"
low=$(awk '$2 ~ /\/4\/8$/ { split($2, g, "/"); if (g[1] < 6) print }' "$TEST_DIR/rep.out" | wc -l)
echo "# $K back at 8 distinct fragments after $((SECONDS - t0)) s; $n fragments stored over the ring; $low coded blocks below 6"
ok "three of ${K:0:8}'s holders killed: rebuilt to 8 by the servers' repair, no operator"

held_before=$(grep -c " ${victims[0]}\$" "$TEST_DIR/held")
cluster_restart "${victims[0]}"
cluster_wait_correct 60 || fail "the ring did not converge after node${victims[0]} came back"
sleep 3
held_after=$("$CFSCTL" --data "$TEST_DIR/node${victims[0]}" keys | wc -l)
[ "$held_after" -ge "$held_before" ] ||
	fail "node${victims[0]} held $held_before keys before it died, $held_after after it came back"
[ "$(good_of "$K")" = 8 ] || { cat "$TEST_DIR/rep.out"; fail "$K not at 8 after a holder came back"; }
for f in f1 f2 f3 f4; do
	"$CFS_BIN/cfs-cat" --data "$TEST_DIR/node$R" "$vol" "/$f" >"$TEST_DIR/got" 2>"$TEST_DIR/cat.err" ||
		{ cat "$TEST_DIR/cat.err"; fail "reading /$f"; }
	cmp -s "$TEST_DIR/got" "$src/$f" || fail "/$f read other bytes"
done
ok "a holder that came back keeps its $held_before keys; the volume reads whole"
