#!/bin/bash
# Leases on a 6-daemon loopback ring (k = 3) whose blocks live about 20 s
# unless refreshed (cfsd --lease-days 0.00023, collector every second):
#   - blocks that nobody refreshes disappear from every server once their
#     lease has ended, and replica maintenance does not bring them back;
#   - blocks refreshed (cfsctl refresh, the same call cfs-publish --refresh
#     makes) stay on all k of their successors and can be fetched.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
K=3
N=6
BLOCKS=300
LEASE_DAYS=0.00023 # 19.9 s

held_of() { # KEYS-FILE: how many of those keys some live server still stores
	cluster_collect "$TEST_DIR/held"
	sort -u "$TEST_DIR"/held/*.keys | grep -v '^#' | grep -cFxf "$1" || true
}

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --lease-days "$LEASE_DAYS" \
	--expire-ms 1000 --sync-ms 2000
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"

t0=$SECONDS
"$CFSCTL" --data "$TEST_DIR/node0" put --random "$BLOCKS" --size 1024 --seed 21 >"$TEST_DIR/a" || fail "puts (a)"
"$CFSCTL" --data "$TEST_DIR/node1" put --random "$BLOCKS" --size 1024 --seed 22 >"$TEST_DIR/b" || fail "puts (b)"
cut -d' ' -f1 "$TEST_DIR/a" >"$TEST_DIR/a.keys"
cut -d' ' -f1 "$TEST_DIR/b" >"$TEST_DIR/b.keys"
"$CFSCTL" --data "$TEST_DIR/node2" refresh --lease-days 2 - <"$TEST_DIR/b.keys" >"$TEST_DIR/refresh" ||
	fail "refresh: $(grep -vc ' ok$' "$TEST_DIR/refresh") keys not refreshed"
[ "$(grep -c ' ok$' "$TEST_DIR/refresh")" -eq "$BLOCKS" ] || fail "refresh did not answer every key"
# Both sets were whole before the leases ran out: the test proves something.
a_before=$(held_of "$TEST_DIR/a.keys")
[ $((SECONDS - t0)) -lt 15 ] || fail "the puts and the refresh took too long for a 20 s lease"
[ "$a_before" -eq "$BLOCKS" ] || fail "only $a_before of the $BLOCKS unrefreshed blocks were stored"
echo "# $BLOCKS blocks put with a 20 s lease, $BLOCKS more put and refreshed to two days, in $((SECONDS - t0)) s"
# cfsctl status counts leases ending within a day (the unrefreshed copies)
# and a week (those and the refreshed ones), against the copies held.
a_copies=$(cat "$TEST_DIR"/held/*.keys | grep -cFxf "$TEST_DIR/a.keys" || true)
b_copies=$(cat "$TEST_DIR"/held/*.keys | grep -cFxf "$TEST_DIR/b.keys" || true)
read -r day week < <(cluster_status_sum "$TEST_DIR/held" dhash.leases_expiring.day \
	dhash.leases_expiring.week)
[ "$day" -eq "$a_copies" ] && [ "$week" -eq $((a_copies + b_copies)) ] ||
	fail "status: $day leases ending within a day (want $a_copies), $week within a week (want $((a_copies + b_copies)))"
echo "# cfsctl status: $day leases end within a day, $week within a week, as the copies held say"

end=$((SECONDS + 60))
while :; do
	left=$(held_of "$TEST_DIR/a.keys")
	[ "$left" -eq 0 ] && break
	[ $SECONDS -lt $end ] || fail "$left of $BLOCKS unrefreshed blocks still stored $((SECONDS - t0)) s after their put"
	sleep 1
done
gone=$((SECONDS - t0))
sleep 6 # three sync rounds: nothing brings them back
left=$(held_of "$TEST_DIR/a.keys")
[ "$left" -eq 0 ] || fail "$left expired blocks came back"
expired=0
for ((i = 0; i < N; i++)); do
	expired=$((expired + $("$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['dhash']['expired']")))
done
[ "$expired" -ge $((K * BLOCKS)) ] || fail "the collectors deleted $expired blocks, fewer than $((K * BLOCKS)) copies"
echo "# every unrefreshed block gone from every server ${gone} s after its put ($expired copies collected)"
ok "blocks whose lease ended are deleted everywhere and stay deleted"

cluster_placement "$K" "$TEST_DIR/b.keys" >"$TEST_DIR/b.json"
[ "$(jget "['exact']" <"$TEST_DIR/b.json")" -eq "$BLOCKS" ] ||
	fail "refreshed blocks not on exactly their $K successors: $(cat "$TEST_DIR/b.json")"
"$CFSCTL" --data "$TEST_DIR/node3" get --check - <"$TEST_DIR/b.keys" >"$TEST_DIR/gets" ||
	fail "$(grep -vc ' ok ' "$TEST_DIR/gets") refreshed blocks cannot be fetched"
ok "refreshed blocks stay on their $K successors and are fetched"
