#!/bin/bash
# Node-ID authentication (CFS 4.4) and hostile input: a peer claiming an ID
# that does not hash from its address, a peer that never echoes the nonce,
# a LEAVE naming nodes that do not exist, and malformed datagrams (wrong
# version, unknown type, an oversized list, truncated, garbage). None of the
# claimed nodes may enter any table; the ring stays correct and answers.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
cluster_start 3 1 --stabilize-ms 250
cluster_wait_correct 60 || fail "the ring did not converge"
python3 "$(dirname "$0")/hostile_peer.py" "${CL_IP[0]}" "${CL_PORT[0]}" 127.66.1.1 "$(free_port)" \
	"${CL_IP[1]}:${CL_PORT[1]}" "${CL_IP[2]}:${CL_PORT[2]}" >"$TEST_DIR/claimed" ||
	fail "the hostile peer could not run"
[ "$(wc -l <"$TEST_DIR/claimed")" -eq 12 ] || fail "the hostile peer claimed nothing"
sleep 4 # longer than the nonce timeout: every check has ended
cluster_status_all "$TEST_DIR/st"
for id in $(cat "$TEST_DIR/claimed"); do
	if grep -q "$id" "$TEST_DIR"/st/*.json; then fail "node $id entered a table"; fi
done
ok "no forged, silent or nonexistent node entered any table"
malformed=$(json_get "$TEST_DIR/st/node0.json" rpc.malformed)
[ "$malformed" -ge 4 ] || fail "only $malformed malformed datagrams counted"
failed=0 # the silent peer's NOTIFY is checked by the member whose arc holds its ID
for i in 0 1 2; do failed=$((failed + $(json_get "$TEST_DIR/st/node$i.json" ring.auth.failed))); done
hostile=$(json_get "$TEST_DIR/st/node0.json" ring.hostile_dropped)
[ "$failed" -ge 1 ] || fail "no failed authentication recorded"
[ "$hostile" -ge 1 ] || fail "the forged ID was not dropped"
echo "# $malformed malformed datagrams dropped, $failed authentications failed, $hostile forged senders refused"
cluster_wait_correct 10 || fail "the ring is no longer correct"
"$CFSCTL" ping "${CL_IP[0]}:${CL_PORT[0]}" --count 2 >/dev/null || fail "node 0 stopped answering"
ok "the ring is intact and answering"
