#!/bin/bash
# Does a volunteer learn whether the ring can reach it? Four daemons on a
# bridge, each in its own network namespace, and two more that members
# cannot reach on their own: one behind a firewall that drops unsolicited
# UDP (iptables conntrack NEW), one behind a home router (a router
# namespace masquerading a private network, Linux NAT). Each daemon asks
# members to dial it back from a fresh socket (chord/reach.c):
#   - the four on the bridge say "reachable yes";
#   - the firewalled one says "no" and logs that a firewall drops
#     unsolicited UDP;
#   - the one behind the NAT says "no", names the address members see it
#     at (the router's), and logs that it is behind a NAT.
#   - both then run as client-only nodes: a publish through the one behind
#     the NAT and a read through the firewalled one succeed, no member
#     keeps either in its tables, and lookups among the members are right.
# The router here maps no port (t_upnp has routers that do).
. "$(dirname "$0")/lib.sh"
export CLUSTER_NETNS=1
. "$(dirname "$0")/../harness/cluster.sh"
N=4
cluster_start "$N" 1 --stabilize-ms 500
cluster_wait_correct 60 || fail "the ring of $N did not converge"

# ---- a firewalled daemon on the bridge (index 10)
FW_NS="${CL_TAG}fw"
ip netns add "$FW_NS"
CL_XNS+=("$FW_NS")
cluster_netns_link "$FW_NS" fw 10
FW_IP=$(cluster_netns_ip 10)
cluster_in "$FW_NS" iptables-legacy -A INPUT -p udp -m conntrack --ctstate NEW -j DROP
mkdir -p "$TEST_DIR/fw"
nsenter --net="/run/netns/$FW_NS" "$CFSD" --port 4460 --bind "$FW_IP" --data "$TEST_DIR/fw" --bootstrap "$(cluster_addr 0)" \
	--stabilize-ms 500 >"$TEST_DIR/fw.log" 2>&1 &
PIDS+=("$!")

# ---- a daemon behind a masquerading router: home 10.78.0.2 -- 10.78.0.1 router 10.77.0.250 -- bridge
RT_NS="${CL_TAG}rt" HOME_NS="${CL_TAG}home"
ip netns add "$RT_NS"
ip netns add "$HOME_NS"
CL_XNS+=("$RT_NS" "$HOME_NS")
cluster_netns_link "$RT_NS" rt 249
RT_IP=$(cluster_netns_ip 249)
ip link add "${CL_TAG}h0" type veth peer name "${CL_TAG}h1"
ip link set "${CL_TAG}h0" netns "$RT_NS"
ip link set "${CL_TAG}h1" netns "$HOME_NS"
ip -n "$RT_NS" addr add 10.78.0.1/24 dev "${CL_TAG}h0"
ip -n "$RT_NS" link set "${CL_TAG}h0" up
ip -n "$HOME_NS" addr add 10.78.0.2/24 dev "${CL_TAG}h1"
ip -n "$HOME_NS" link set "${CL_TAG}h1" up
ip -n "$HOME_NS" link set lo up
ip -n "$HOME_NS" route add default via 10.78.0.1
cluster_in "$RT_NS" sysctl -qw net.ipv4.ip_forward=1
cluster_in "$RT_NS" iptables-legacy -t nat -A POSTROUTING -s 10.78.0.0/24 -o "${CL_TAG}vrt" -j MASQUERADE
mkdir -p "$TEST_DIR/home"
nsenter --net="/run/netns/$HOME_NS" "$CFSD" --port 4460 --bind 10.78.0.2 --data "$TEST_DIR/home" --bootstrap "$(cluster_addr 0)" \
	--stabilize-ms 500 >"$TEST_DIR/home.log" 2>&1 &
PIDS+=("$!")

reach() { "$CFSCTL" --data "$TEST_DIR/$1" status --json 2>/dev/null | jget "['ring']['reach']['$2']"; }
verdict() { [ "$(reach "$1" reachable)" = "$2" ]; }
for ((i = 0; i < N; i++)); do
	wait_for 30 verdict "node$i" yes || fail "daemon $i on the bridge: reachable '$(reach "node$i" reachable)'"
done
ok "the $N daemons on the bridge: reachable yes"
wait_for 30 verdict fw no || fail "the firewalled daemon: reachable '$(reach fw reachable)'"
grep -q "not reachable at $FW_IP:4460: .*a firewall drops unsolicited UDP" "$TEST_DIR/fw.log" ||
	fail "the firewalled daemon did not say why: $(grep -m1 reachable "$TEST_DIR/fw.log")"
ok "the firewalled daemon: reachable no, logged ($(grep -o 'not reachable at [^:]*:[0-9]*' "$TEST_DIR/fw.log" | head -1))"
wait_for 30 verdict home no || fail "the daemon behind the NAT: reachable '$(reach home reachable)'"
seen=$(reach home seen_at)
[ "${seen%:*}" = "$RT_IP" ] || fail "the daemon behind the NAT thinks members see it at '$seen', not at $RT_IP"
grep -q "members see it at $RT_IP:[0-9]*, not at its address 10.78.0.2:4460 (behind a NAT?)" "$TEST_DIR/home.log" ||
	fail "the daemon behind the NAT did not say so: $(grep -m1 reachable "$TEST_DIR/home.log")"
"$CFSCTL" --data "$TEST_DIR/home" status >"$TEST_DIR/home.status"
grep -q "^reachable .*by members' dial-backs no" "$TEST_DIR/home.status" ||
	fail "cfsctl status of the daemon behind the NAT does not show it unreachable"
ok "the daemon behind the NAT: reachable no, seen at $seen, logged and in status"

# ---- both run as client-only nodes: they read and publish through the
# ring, and hold no part of it (no member has them in its tables)
role() { [ "$(reach "$1" role)" = client-only ]; }
for d in fw home; do
	wait_for 30 role "$d" || fail "daemon $d did not become client-only: role '$(reach "$d" role)'"
	grep -q "running as a client-only node" "$TEST_DIR/$d.log" || fail "daemon $d did not log its role"
done
src=$TEST_DIR/src
mkdir -p "$src"
head -c 300000 /dev/urandom >"$src/f"
export XDG_CONFIG_HOME=$TEST_DIR/config
"$CFS_BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$CFS_BIN/cfs-publish" --to "cfsd:$TEST_DIR/home/cfsd.sock" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish through the client-only daemon behind the NAT"; }
"$CFS_BIN/cfs-cat" --data "$TEST_DIR/fw" "$vol" /f | cmp - "$src/f" ||
	fail "read through the firewalled client-only daemon"
"$CFS_BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node2/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1 ||
	{ tail -3 "$TEST_DIR/fsck.out"; fail "the volume published behind the NAT is not at k on the members"; }
ok "client-only: published behind the NAT, read behind the firewall; on the members: $(tail -1 "$TEST_DIR/fsck.out")"
no_hole() {
	cluster_status_all "$TEST_DIR/status"
	! grep -q "\"addr\":\"\($FW_IP\|10.78.0.2\|$RT_IP\):" "$TEST_DIR"/status/*.json && cluster_check
}
wait_for 30 no_hole || fail "a member still has a client-only daemon in its tables, or its lists are wrong"
cluster_lookup_check iterative 200 >"$TEST_DIR/lookups.out" 2>&1 || { cat "$TEST_DIR/lookups.out"; fail "lookups among the members"; }
ok "no hole: no member's tables name them, every list is right, $(tail -1 "$TEST_DIR/lookups.out")"
