#!/bin/bash
# Quotas with nonce confirmation (CFS 5.4), with every daemon in its own
# network namespace and its own IP, so that each publisher is one address:
#   - a publisher over quota is refused with "over this server's quota"
#     (-EDQUOT) while another publisher is not, and copies between servers
#     are not charged (every acknowledged block is on its k servers);
#   - a STORE whose source address is forged (a raw packet from another
#     namespace claiming a publisher's IP) is answered with a challenge that
#     goes to the real owner of the address, and nothing is stored;
#   - the same block from the sender's own address, sent again with the
#     challenge's nonce, is stored (a plain client can follow the protocol).
. "$(dirname "$0")/lib.sh"
CLUSTER_NETNS=1
. "$(dirname "$0")/../harness/cluster.sh"
N=6
K=2
A=4 # publisher A: over quota
B=5 # publisher B: well under it

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --quota-mb 1 --sync-ms 0
cluster_wait_correct 90 || fail "a ring of $N namespaced daemons did not converge"

# A puts 6 MiB: with its primary stores spread over 6 servers, about 1 MiB
# each, several servers pass their 1 MiB quota for A.
"$CFSCTL" --data "$TEST_DIR/node$A" put --random 768 --size 8192 --seed 5 >"$TEST_DIR/a.puts" || true
refused=$(grep -c "over this server's quota" "$TEST_DIR/a.puts" || true)
acked=$(grep -vc ' error ' "$TEST_DIR/a.puts" || true)
[ "$refused" -gt 0 ] || fail "publisher A put 6 MiB against 1 MiB quotas and nothing was refused"
[ "$acked" -gt 0 ] || fail "publisher A had nothing stored at all: $(head -3 "$TEST_DIR/a.puts")"
other=$(grep ' error ' "$TEST_DIR/a.puts" | grep -vc "over this server's quota" || true)
[ "$other" -eq 0 ] || fail "puts failed for other reasons: $(grep ' error ' "$TEST_DIR/a.puts" | grep -v quota | head -3)"
[ $((acked * 8192)) -le $((N * 1048576)) ] || fail "$acked blocks of 8 KiB acknowledged: more than $N quotas of 1 MiB"
"$CFSCTL" --data "$TEST_DIR/node$B" put --random 40 --size 8192 --seed 6 >"$TEST_DIR/b.puts" ||
	fail "publisher B was refused: $(grep error "$TEST_DIR/b.puts" | head -3)"
grep -v ' error ' "$TEST_DIR/a.puts" "$TEST_DIR/b.puts" | cut -d: -f2 | cut -d' ' -f1 >"$TEST_DIR/acked.keys"
cluster_placement "$K" "$TEST_DIR/acked.keys" >"$TEST_DIR/place.json"
[ "$(jget "['exact']" <"$TEST_DIR/place.json")" -eq "$(wc -l <"$TEST_DIR/acked.keys")" ] ||
	fail "acknowledged blocks not on their $K servers (were copies charged?): $(cat "$TEST_DIR/place.json")"
echo "# publisher A (${CL_IP[$A]}): $acked of 768 puts of 8 KiB stored, $refused refused over the 1 MiB quotas; publisher B (${CL_IP[$B]}): 40 of 40"
ok "a publisher over quota is refused, another is not, and copies between servers are not charged"

# The forger: a namespace of its own on the same bridge.
F=200
cluster_netns_node "$F"
FIP="10.77.0.$((F + 1))"
head -c 1000 /dev/urandom >"$TEST_DIR/forged.blk" # one unfragmented raw datagram
key=$(b2sum -l 256 "$TEST_DIR/forged.blk" | cut -d' ' -f1)
before=$("$CFSCTL" --data "$TEST_DIR/node0" status --json | jget "['dhash']['challenges']")
ip netns exec "${CL_NS[$F]}" python3 "$(dirname "$0")/forge_store.py" forged "${CL_IP[$A]}" "${CL_IP[0]}" 4460 \
	"$TEST_DIR/forged.blk" || fail "could not send the forged packets"
sleep 1
after=$("$CFSCTL" --data "$TEST_DIR/node0" status --json | jget "['dhash']['challenges']")
[ "$after" -gt "$before" ] || fail "the forged STOREs never reached node 0: the test proved nothing"
# (the listing goes to a file: grep -q in a pipe under pipefail fails the
# pipeline when it quits before cfsctl has written everything)
"$CFSCTL" --data "$TEST_DIR/node0" keys >"$TEST_DIR/keys0"
grep -q "^$key" "$TEST_DIR/keys0" && fail "a STORE from a forged source address was stored"
ok "STOREs from a forged source address ($FIP claiming ${CL_IP[$A]}) are challenged and nothing is stored"

st=$(ip netns exec "${CL_NS[$F]}" python3 "$(dirname "$0")/forge_store.py" honest "$FIP" "${CL_IP[0]}" 4460 \
	"$TEST_DIR/forged.blk") || fail "the honest client failed: $st"
[ "$st" = "challenged, then 0" ] || fail "the honest client's store: $st"
"$CFSCTL" --data "$TEST_DIR/node0" keys >"$TEST_DIR/keys0"
grep -q "^$key" "$TEST_DIR/keys0" || fail "the honest client's block is not stored"
ok "the same block from its sender's own address, sent again with the nonce, is stored"
