#!/bin/bash
# Volunteers behind home routers that map ports become full members: four
# daemons on a bridge, each in its own network namespace; two more, each
# in a home network behind its own router namespace that NATs (nftables
# snat) and runs miniupnpd, one answering NAT-PMP, the other UPnP-IGD only.
# Each home daemon, on a private address with no --addr, asks its router
# to forward its UDP port (cfsd/portmap.c: libnatpmp, libminiupnpc), takes
# the router's public address as its own, joins, and is dialled back:
#   - each logs which protocol mapped its port and the public address;
#   - each is reachable (a dial-back from a fresh socket arrives through
#     the mapping) and a member;
#   - the six form one ring: every successor pointer on one cycle of 6,
#     every list true; a block put through a home daemon is on its k
#     successors and read back through a daemon on the bridge.
# The routers' public side uses 11.77.0.0/16 in the namespaces:
# miniupnpd maps nothing on a private or documentation-range address
# (RFC 1918, 198.18.0.0/15 and the like), and these namespaces route only
# among themselves.
. "$(dirname "$0")/lib.sh"
export CLUSTER_NETNS=1
. "$(dirname "$0")/../harness/cluster.sh"
command -v miniupnpd >/dev/null || fail "miniupnpd is not installed (make test installs it)"
command -v nft >/dev/null || fail "nft is not installed (make test installs nftables)"
N=4
cluster_start "$N" 1 --stabilize-ms 500
cluster_wait_correct 60 || fail "the ring of $N did not converge"
for ((i = 0; i < N; i++)); do ip -n "${CL_NS[$i]}" route add 11.77.0.0/16 dev "${CL_TAG}v$i"; done

# make_home K NATPMP: router namespace K (bridge side 10.77.0.24K and public
# 11.77.0.24K), home network 10.8K.0.0/24, miniupnpd with NAT-PMP yes/no;
# a daemon at 10.8K.0.2 that knows only a bootstrap address.
make_home() {
	local k=$1 natpmp=$2 rt="${CL_TAG}r$1" home="${CL_TAG}o$1" pub="11.77.0.24$1"
	ip netns add "$rt"
	ip netns add "$home"
	CL_XNS+=("$rt" "$home")
	cluster_netns_link "$rt" "r$k" $((239 + k))
	ip -n "$rt" addr add "$pub/16" dev "${CL_TAG}vr$k"
	ip link add "${CL_TAG}a$k" type veth peer name "${CL_TAG}b$k"
	ip link set "${CL_TAG}a$k" netns "$rt"
	ip link set "${CL_TAG}b$k" netns "$home"
	ip -n "$rt" addr add "10.8$k.0.1/24" dev "${CL_TAG}a$k"
	ip -n "$rt" link set "${CL_TAG}a$k" up
	ip -n "$home" addr add "10.8$k.0.2/24" dev "${CL_TAG}b$k"
	ip -n "$home" link set "${CL_TAG}b$k" up
	ip -n "$home" link set lo up
	ip -n "$home" route add default via "10.8$k.0.1"
	cluster_in "$rt" sysctl -qw net.ipv4.ip_forward=1
	cat >"$TEST_DIR/r$k.nft" <<NFT
table inet filter {
	chain forward { type filter hook forward priority 0; policy accept; jump miniupnpd; }
	chain miniupnpd { }
}
table inet nat {
	chain prerouting { type nat hook prerouting priority -100; policy accept; jump prerouting_miniupnpd; }
	chain postrouting { type nat hook postrouting priority 100; policy accept; jump postrouting_miniupnpd; oifname "${CL_TAG}vr$k" snat ip to $pub; }
	chain prerouting_miniupnpd { }
	chain postrouting_miniupnpd { }
}
NFT
	cluster_in "$rt" nft -f "$TEST_DIR/r$k.nft"
	cat >"$TEST_DIR/r$k.conf" <<CONF
ext_ifname=${CL_TAG}vr$k
ext_ip=$pub
listening_ip=${CL_TAG}a$k
port=0
enable_natpmp=$natpmp
enable_upnp=yes
secure_mode=yes
system_uptime=yes
uuid=3db6483d-4674-4394-9740-3b1e0d3b5ef$k
upnp_table_name=filter
upnp_nat_table_name=nat
upnp_forward_chain=miniupnpd
upnp_nat_chain=prerouting_miniupnpd
upnp_nat_postrouting_chain=postrouting_miniupnpd
allow 1024-65535 10.8$k.0.0/24 1024-65535
deny 0-65535 0.0.0.0/0 0-65535
CONF
	nsenter --net="/run/netns/$rt" miniupnpd -f "$TEST_DIR/r$k.conf" -d -P "$TEST_DIR/r$k.pid" \
		>"$TEST_DIR/r$k.log" 2>&1 &
	PIDS+=("$!")
	sleep 0.5
	mkdir -p "$TEST_DIR/home$k"
	nsenter --net="/run/netns/$home" "$CFSD" --port 4460 --bind "10.8$k.0.2" --data "$TEST_DIR/home$k" \
		--bootstrap "$(cluster_addr 0)" --stabilize-ms 500 >"$TEST_DIR/home$k.log" 2>&1 &
	PIDS+=("$!")
}
make_home 1 yes
make_home 2 no

reach() { "$CFSCTL" --data "$TEST_DIR/$1" status --json 2>/dev/null | jget "['ring']['reach']['$2']"; }
verdict() { [ "$(reach "$1" reachable)" = yes ]; }
for k in 1 2; do
	wait_for 30 verdict "home$k" || { tail -5 "$TEST_DIR/home$k.log"; fail "home daemon $k: reachable '$(reach "home$k" reachable)'"; }
	[ "$(reach "home$k" role)" = member ] || fail "home daemon $k is not a member"
done
grep -q "the router forwards UDP port 4460 (NAT-PMP): members reach this server at 11.77.0.241:4460" \
	"$TEST_DIR/home1.log" || fail "home daemon 1 did not map its port with NAT-PMP: $(head -3 "$TEST_DIR/home1.log")"
grep -q "the router forwards UDP port 4460 (UPnP-IGD): members reach this server at 11.77.0.242:4460" \
	"$TEST_DIR/home2.log" || fail "home daemon 2 did not map its port with UPnP-IGD: $(head -3 "$TEST_DIR/home2.log")"
ok "behind NAT-PMP and behind UPnP-IGD: ports mapped, public addresses taken, reachable, members"

all_status() {
	cluster_status_all "$TEST_DIR/status"
	for k in 1 2; do "$CFSCTL" --data "$TEST_DIR/home$k" status --json >"$TEST_DIR/status/home$k.json"; done
}
one_ring() {
	all_status
	[ "$(python3 "$HARNESS_DIR/ring_cycles.py" "$TEST_DIR"/status/*.json | sed -n 1p)" = "1 6" ] &&
		python3 "$HARNESS_DIR/ring_check.py" --successors=16 "$TEST_DIR"/status/*.json >"$TEST_DIR/check.out" 2>&1
}
wait_for 60 one_ring || { cat "$TEST_DIR/check.out"; fail "the six daemons are not one ring"; }
ok "one ring of 6 with both home daemons in it, every list true"

head -c 5000 /dev/urandom >"$TEST_DIR/blk"
key=$("$CFSCTL" --data "$TEST_DIR/home2" put "$TEST_DIR/blk" | cut -d' ' -f1)
[ ${#key} -eq 64 ] || fail "put through home daemon 2: '$key'"
"$CFSCTL" --data "$TEST_DIR/node3" get "$key" | cmp - "$TEST_DIR/blk" || fail "get through a bridge daemon"
ok "a block put behind UPnP-IGD is read back on the bridge"
