#!/bin/bash
# Store admission, from a plain UDP client that is no
# ring member, on a ring with quotas and a 10-day lease cap:
#   - a replica STORE (no PRIMARY flag) naming no sender, or a made-up
#     member, is refused (-EPERM) and nothing is stored;
#   - a client's put asking for a lease of 2^64-1 gets at most the cap;
#   - a REFRESH without the nonce is challenged; with it, the block's lease
#     is extended to the cap, not beyond;
#   - the ring's own copies are still admitted: blocks put through the
#     ring reach their k servers.
# Prints the figures as "# name value" lines.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
N=4
K=3

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --quota-mb 4 --max-lease-days 10 --sync-ms 2000
cluster_wait_correct 90 || fail "a ring of $N daemons did not converge"

python3 "$(dirname "$0")/admit_probe.py" "${CL_IP[0]}" "${CL_PORT[0]}" >"$TEST_DIR/probe.out" ||
	fail "the probe failed: $(cat "$TEST_DIR/probe.out")"
sed 's/^/# /' "$TEST_DIR/probe.out"
fig() { awk -v k="$1" '$1 == k { print $2 }' "$TEST_DIR/probe.out"; }
[ "$(fig replica_anonymous)" = -1 ] || fail "an anonymous replica STORE was not refused with -EPERM"
[ "$(fig replica_forged_member)" = -1 ] || fail "a replica STORE from a made-up member was not refused"
ok "replica STOREs from outside the ring are refused"
[ "$(fig put_status)" = 0 ] || fail "the client's put failed"
awk -v d="$(fig put_lease_days)" 'BEGIN { exit !(d > 9.9 && d <= 10.01) }' ||
	fail "a put asking for 2^64-1 was granted $(fig put_lease_days) days, not the 10-day cap"
ok "a put asking for a lease of 2^64-1 gets the cap"
[ "$(fig refresh_no_nonce)" = challenge ] || fail "a REFRESH without the nonce was not challenged: $(fig refresh_no_nonce)"
[ "$(fig refresh_with_nonce)" = found ] || fail "a REFRESH with the nonce did not extend: $(fig refresh_with_nonce)"
awk -v d="$(fig refresh_lease_days)" 'BEGIN { exit !(d > 9.9 && d <= 10.01) }' ||
	fail "a REFRESH to 2^64-1 was granted $(fig refresh_lease_days) days"
ok "a REFRESH needs the nonce and cannot pass the cap"
key=$(fig key)
"$CFSCTL" --data "$TEST_DIR/node0" keys >"$TEST_DIR/keys0"
n=$(grep -c "^$key" "$TEST_DIR/keys0" || true)
[ "$n" -le 1 ] || fail "the probe's block is stored twice?"

# The ring's copies: replicate() and sync must still be admitted.
"$CFSCTL" --data "$TEST_DIR/node1" put --random 30 --size 4096 --seed 3 >"$TEST_DIR/puts" ||
	fail "honest puts failed: $(grep error "$TEST_DIR/puts" | head -3)"
cut -d: -f2 "$TEST_DIR/puts" | cut -d' ' -f1 >"$TEST_DIR/acked.keys"
cluster_wait_placement "$K" "$TEST_DIR/acked.keys" 30 "$TEST_DIR/place.json" exact 30 ||
	fail "blocks put through the ring did not reach their $K servers: $(cat "$TEST_DIR/place.json")"
cluster_status_all "$TEST_DIR/st"
python3 - "$TEST_DIR/st" <<'PY'
import json, os, sys
d = sys.argv[1]
ok = far = stranger = 0
for f in os.listdir(d):
    a = json.load(open(os.path.join(d, f)))["dhash"].get("admission", {})
    ok += a.get("admitted", 0); far += a.get("refused_far", 0); stranger += a.get("refused_not_member", 0)
print("# ring copies admitted %d, refused as far %d, refused as not members %d" % (ok, far, stranger))
PY
ok "copies between members are admitted: 30 blocks on their $K servers"
