# The cluster harness: start, check, kill and restart rings of cfsd daemons.
# Source it after tests/integration/lib.sh (which records PIDs and kills them
# on exit). Used by the ring tests and, later, by every test that needs a ring.
#
#   cluster_start N [V] [EXTRA-CFSD-ARGS...]   N daemons with V vnodes each
#   cluster_wait_correct SECONDS              until every pred/successor list is true
#                                             (CLUSTER_SUCCESSORS: the daemons' --successors)
#   cluster_status_all DIR                    DIR/NODE.json for each live node
#   cluster_status_sum DIR FIELD...           those reports' FIELDs summed
#   cluster_lookup_check MODE COUNT           random lookups, each checked true
#   cluster_placement K KEYS                  where blocks live (replica_check.py)
#   cluster_wait_placement K KEYS SECS OUT FIELD WANT   ... until FIELD is WANT
#   cluster_kill I / cluster_stop I / cluster_restart I
#
# Every daemon has its own loopback address, CL_IP[i] = 127.N.(i/250).(i%250+1)
# (any 127/8 address reaches lo on Linux; N is random per test run), bound
# with --bind and hashed into its IDs: IDs are H(IP ‖ index), the port not
# hashed (docs/PROTOCOL.md "Node IDs"), so daemons sharing one IP would share its indexes.
# cluster_ip I prints node I's address.
#
# With CLUSTER_NETNS=1 every daemon runs in its own network namespace with
# its own IP (10.77.0.X) on a bridge in a private hub namespace, so node IDs
# really hash distinct addresses; the namespaces are deleted on exit.
# Field conditions in those namespaces (the field tests, make bench-field):
#   CLUSTER_MTU=M      every veth and the bridge at MTU M (default 1500, set
#                      explicitly; an Ethernet path), with segmentation
#                      offloads and GRO off (ethtool): packets as on a wire
#   CLUSTER_IPV6=1     the veths carry fd77::X/64 (nodad) instead of
#                      10.77.0.X; daemons bind and advertise [fd77::X]:4460
#   cluster_netns_reader           a further namespace on the bridge for a
#                                  reader (CL_READER_NS, CL_READER_IP)
#   cluster_in NS CMD...           run CMD with NS's network (the mount
#                                  namespace stays shared: FUSE mounts made
#                                  there are visible outside)
#   cluster_loss P                 drop each arriving packet with probability
#                                  P (0..1) in every namespace (iptables raw
#                                  PREROUTING, IPv4 and IPv6); 0 removes it
#   cluster_shape RATE [LAT] [BURST]  tbf on both ends of the reader's link
#                                  (a shallow queue: LAT 2.6ms, BURST 3028 B
#                                  by default); "off" removes it
#   cluster_frag_snapshot FILE     IP fragment counters of every namespace
#   cluster_frag_delta A B         "creates reasm_reqds reasm_mem" from A to B
# A wide-area bed (tests/harness/wan.sh sets these up):
#   CLUSTER_DELAY_MATRIX=FILE      the hub is a router, not a bridge: every
#                                  namespace has a /32 of 198.18.0.0/15 and
#                                  a route through the hub, whose FORWARD
#                                  chain hands every packet to cfs-delayline
#                                  (tests/testbed/delay.h: FILE holds each
#                                  pair's delay and loss)
: "${TEST_DIR:?}" "${CFS_BIN:?}"
HARNESS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CL_N=0
CL_PORT=()
CL_IP=()
CL_PID=()
CL_ARGS=()
CL_NS=()
CL_XNS=() # namespaces that run no daemon (the reader)
CL_READER_NS=""
CL_READER_IP=""
CL_TAG="cfs$$"
CL_NET=${CLUSTER_NET:-127.$((RANDOM % 150 + 100))}

cluster_ip() { echo "$CL_NET.$(($1 / 250)).$(($1 % 250 + 1))"; }
# cluster_addr I: node I's HOST:PORT as the daemons take it ([IPV6]:PORT).
cluster_addr() {
	case "${CL_IP[$1]}" in
	*:*) echo "[${CL_IP[$1]}]:${CL_PORT[$1]}" ;;
	*) echo "${CL_IP[$1]}:${CL_PORT[$1]}" ;;
	esac
}

cluster_cleanup() {
	local i
	for i in "${!CL_NS[@]}"; do
		ip netns del "${CL_NS[$i]}" 2>/dev/null || true
	done
	for i in "${!CL_XNS[@]}"; do
		ip netns del "${CL_XNS[$i]}" 2>/dev/null || true
	done
	[ "${CLUSTER_NETNS:-0}" = 1 ] && ip netns del "${CL_TAG}hub" 2>/dev/null || true
}

# Wrap lib.sh's cleanup: processes first, then namespaces.
trap 'cleanup; cluster_cleanup' EXIT

cluster_netns_setup() {
	ip netns add "${CL_TAG}hub"
	ip -n "${CL_TAG}hub" link set lo up
	if [ -n "${CLUSTER_DELAY_MATRIX:-}" ]; then
		cluster_delayline_start
		return
	fi
	ip -n "${CL_TAG}hub" link add br0 type bridge
	ip -n "${CL_TAG}hub" link set br0 up
}

# The router's delay line: cfs-delayline on netfilter queue 0 of the hub,
# and the rule that hands it every forwarded packet, added only once it
# listens (a queue rule with no listener drops everything). Its counters go
# to $TEST_DIR/delayline.log. CL_DELAY_PID.
CL_DELAY_PID=""
cluster_delayline_start() {
	local hub="${CL_TAG}hub" ready="$TEST_DIR/delayline.ready"
	[ -x "$CFS_BIN/cfs-delayline" ] || fail "cluster: $CFS_BIN/cfs-delayline missing (make)"
	command -v iptables-legacy >/dev/null || fail "cluster: iptables-legacy missing (make deps-test)"
	ip netns exec "$hub" sysctl -qw net.ipv4.ip_forward=1
	rm -f "$ready"
	nsenter --net="/run/netns/$hub" "$CFS_BIN/cfs-delayline" --matrix "$CLUSTER_DELAY_MATRIX" --ready "$ready" --realtime \
		>>"$TEST_DIR/delayline.log" 2>&1 &
	CL_DELAY_PID=$!
	PIDS+=("$CL_DELAY_PID")
	wait_for 10 test -e "$ready" || { cat "$TEST_DIR/delayline.log" >&2; fail "cfs-delayline did not start"; }
	cluster_in "$hub" iptables-legacy -t mangle -A FORWARD -j NFQUEUE --queue-num 0
}

# cluster_delayline_reload: the delay line reads its matrix file again.
cluster_delayline_reload() { kill -HUP "$CL_DELAY_PID"; }

# cluster_delayline_counters: the delay line's counters now, one line.
cluster_delayline_counters() {
	local n
	n=$(grep -c '^delayline ' "$TEST_DIR/delayline.log" 2>/dev/null || true)
	kill -USR1 "$CL_DELAY_PID" 2>/dev/null || return 1
	wait_for 5 test "$(grep -c '^delayline ' "$TEST_DIR/delayline.log")" -gt "${n:-0}" || return 1
	grep '^delayline ' "$TEST_DIR/delayline.log" | tail -1
}

# cluster_netns_ip I: the address of namespace I (the reader is I = 254*250).
cluster_netns_ip() {
	if [ -n "${CLUSTER_DELAY_MATRIX:-}" ]; then
		echo "198.18.$(($1 / 250)).$(($1 % 250 + 1))"
	elif [ "${CLUSTER_IPV6:-0}" = 1 ]; then
		printf 'fd77::%x\n' $(($1 + 1))
	else
		echo "10.77.$(($1 / 250)).$(($1 % 250 + 1))"
	fi
}

# cluster_netns_link NS S I: a veth from NS to the hub's bridge (NS's end
# ${CL_TAG}vS, the hub's ${CL_TAG}pS) at CLUSTER_MTU, with address I.
cluster_netns_link() {
	local ns=$1 i=$2 a=$3 mtu=${CLUSTER_MTU:-1500}
	ip link add "${CL_TAG}v$i" mtu "$mtu" type veth peer name "${CL_TAG}p$i" mtu "$mtu"
	ip link set "${CL_TAG}v$i" netns "$ns"
	ip link set "${CL_TAG}p$i" netns "${CL_TAG}hub"
	if [ -n "${CLUSTER_DELAY_MATRIX:-}" ]; then
		# Routed: the node's /32 behind the hub's 198.19.255.254, which
		# every hub end of a veth carries.
		local ip gw=198.19.255.254
		ip=$(cluster_netns_ip "$a")
		ip -n "${CL_TAG}hub" addr add "$gw/32" dev "${CL_TAG}p$i"
		ip -n "${CL_TAG}hub" link set "${CL_TAG}p$i" up
		ip -n "${CL_TAG}hub" route add "$ip/32" dev "${CL_TAG}p$i"
		ip -n "$ns" addr add "$ip/32" dev "${CL_TAG}v$i"
		ip -n "$ns" link set "${CL_TAG}v$i" up
		ip -n "$ns" route add "$gw/32" dev "${CL_TAG}v$i"
		ip -n "$ns" route add 198.18.0.0/15 via "$gw" dev "${CL_TAG}v$i"
	elif [ "${CLUSTER_IPV6:-0}" = 1 ]; then
		ip -n "${CL_TAG}hub" link set "${CL_TAG}p$i" master br0 up
		ip -n "${CL_TAG}hub" link set br0 mtu "$mtu"
		ip -n "$ns" -6 addr add "$(cluster_netns_ip "$a")/64" dev "${CL_TAG}v$i" nodad
	else
		ip -n "${CL_TAG}hub" link set "${CL_TAG}p$i" master br0 up
		ip -n "${CL_TAG}hub" link set br0 mtu "$mtu"
		ip -n "$ns" addr add "$(cluster_netns_ip "$a")/16" dev "${CL_TAG}v$i"
	fi
	ip -n "$ns" link set "${CL_TAG}v$i" up
	ip -n "$ns" link set lo up
	# A wire carries packets of at most the MTU, each lost on its own: no
	# segmentation offload and no GRO on either end, so that a TCP or UDP
	# GSO burst is cut into packets before the loss rules see it (with
	# offloads, iptables drops a 64 KiB aggregate at a time and "1 % of
	# packets" means 1 % of bursts).
	ip netns exec "$ns" ethtool -K "${CL_TAG}v$i" tso off gso off gro off tx-udp-segmentation off \
		>/dev/null || echo "cluster: offloads stay on at ${CL_TAG}v$i (ethtool failed)" >&2
	ip netns exec "${CL_TAG}hub" ethtool -K "${CL_TAG}p$i" tso off gso off gro off \
		tx-udp-segmentation off >/dev/null || echo "cluster: offloads stay on at ${CL_TAG}p$i" >&2
}

cluster_netns_node() {
	local i=$1 ns="${CL_TAG}n$1"
	ip netns add "$ns"
	CL_NS[$i]=$ns
	cluster_netns_link "$ns" "$i" "$i"
}

# cluster_netns_reader: a namespace on the bridge that runs no daemon, for
# a reader (a plain ring client, curl); call after cluster_start.
CL_READER_I=$((254 * 250))
cluster_netns_reader() {
	CL_READER_NS="${CL_TAG}rd"
	ip netns add "$CL_READER_NS"
	CL_XNS+=("$CL_READER_NS")
	cluster_netns_link "$CL_READER_NS" r "$CL_READER_I"
	CL_READER_IP=$(cluster_netns_ip "$CL_READER_I")
}

# cluster_in NS CMD...: CMD in namespace NS's network only (nsenter execs
# it, so $! of a backgrounded cluster_in is CMD's PID).
cluster_in() {
	local ns=$1; shift
	nsenter --net="/run/netns/$ns" "$@"
}

# Every namespace with an address: the daemons' and the reader's.
cluster_netns_all() {
	local i
	for i in "${!CL_NS[@]}"; do echo "${CL_NS[$i]}"; done
	for i in "${!CL_XNS[@]}"; do echo "${CL_XNS[$i]}"; done
}

# cluster_loss P: every namespace drops each arriving packet (IPv4 and
# IPv6, fragments included: raw PREROUTING sees them before reassembly)
# with probability P; P = 0 takes the rule away.
cluster_loss() {
	local p=$1 ns t
	for ns in $(cluster_netns_all); do
		for t in iptables-legacy ip6tables-legacy; do
			cluster_in "$ns" "$t" -t raw -F PREROUTING
			[ "$p" = 0 ] || cluster_in "$ns" "$t" -t raw -A PREROUTING \
				-m statistic --mode random --probability "$p" -j DROP
		done
	done
}

# cluster_shape RATE [LATENCY] [BURST] | off: a token bucket on both ends of
# the reader's veth (the hub's end shapes what the reader receives, the
# reader's end what it sends), with a queue of LATENCY at RATE: a shallow
# bottleneck that drops what a burst puts beyond it.
cluster_shape() {
	local rate=$1 lat=${2:-2.6ms} burst=${3:-3028} i=r
	ip -n "${CL_TAG}hub" link show "${CL_TAG}p$i" >/dev/null 2>&1 || fail "cluster_shape: no reader namespace"
	tc -n "${CL_TAG}hub" qdisc del dev "${CL_TAG}p$i" root 2>/dev/null || true
	tc -n "$CL_READER_NS" qdisc del dev "${CL_TAG}v$i" root 2>/dev/null || true
	[ "$rate" = off ] && return 0
	tc -n "${CL_TAG}hub" qdisc add dev "${CL_TAG}p$i" root tbf rate "$rate" burst "$burst" latency "$lat"
	tc -n "$CL_READER_NS" qdisc add dev "${CL_TAG}v$i" root tbf rate "$rate" burst "$burst" latency "$lat"
}

# cluster_frag_snapshot FILE: per namespace, IPv4 + IPv6 fragments created
# (FragCreates), datagrams that needed reassembly (ReasmReqds), and the
# reassembly memory in use now (sockstat FRAG memory).
cluster_frag_snapshot() {
	local ns
	for ns in $(cluster_netns_all); do
		cluster_in "$ns" python3 - "$ns" <<'PY'
import sys
def table(path, sep):
    d = {}
    try:
        lines = open(path).read().split("\n")
    except OSError:
        return d
    if sep:  # snmp: a header line and a value line per protocol
        for h, v in zip(lines[0::2], lines[1::2]):
            if h.startswith("Ip:"):
                d.update(zip(h.split()[1:], map(int, v.split()[1:])))
    else:  # snmp6: NAME VALUE
        for l in lines:
            f = l.split()
            if len(f) == 2:
                d[f[0]] = int(f[1])
    return d
v4, v6 = table("/proc/net/snmp", True), table("/proc/net/snmp6", False)
mem = 0
for path in ("/proc/net/sockstat", "/proc/net/sockstat6"):
    try:
        for l in open(path):
            if l.startswith("FRAG"):
                f = l.split()
                mem += int(f[f.index("memory") + 1])
    except OSError:
        pass
print(sys.argv[1], v4.get("FragCreates", 0) + v6.get("Ip6FragCreates", 0),
      v4.get("ReasmReqds", 0) + v6.get("Ip6ReasmReqds", 0), mem)
PY
	done >"$1"
}

# cluster_frag_delta BEFORE AFTER: fragments created and reassemblies
# asked for between two snapshots, summed over every namespace, and the
# reassembly memory in use at AFTER.
cluster_frag_delta() {
	awk 'NR == FNR { c[$1] = $2; r[$1] = $3; next }
	     { dc += $2 - c[$1]; dr += $3 - r[$1]; m += $4 }
	     END { print dc + 0, dr + 0, m + 0 }' "$1" "$2"
}

# Run daemon I (its settings are already recorded).
cluster_run() {
	local i=$1 dir="$TEST_DIR/node$1"
	local cmd=("$CFSD" --port "${CL_PORT[$i]}" --data "$dir" --bind "${CL_IP[$i]}" ${CL_ARGS[$i]})
	if [ -n "${CL_NS[$i]:-}" ]; then
		nsenter --net="/run/netns/${CL_NS[$i]}" "${cmd[@]}" >>"$dir.log" 2>&1 &
	else
		"${cmd[@]}" >>"$dir.log" 2>&1 &
	fi
	CL_PID[$i]=$!
	PIDS+=("${CL_PID[$i]}")
}

cluster_wait_up() {
	local i=$1
	wait_for 10 "$CFSCTL" --data "$TEST_DIR/node$i" status ||
		{ tail -5 "$TEST_DIR/node$i.log" >&2; fail "cfsd node$i did not start"; }
}

# cluster_start N [V] [EXTRA...]: node 0 starts the ring, node i joins
# through a random earlier node. V is the virtual servers per process, or a
# comma-separated list of them, node i taking entry i (cycling).
cluster_start() {
	local n=$1 v=${2:-1}; shift; [ $# -gt 0 ] && shift
	local extra="$*" i boot vs
	IFS=, read -r -a vs <<<"$v"
	[ -n "${CLUSTER_DELAY_MATRIX:-}" ] && CLUSTER_NETNS=1
	[ "${CLUSTER_NETNS:-0}" = 1 ] && cluster_netns_setup
	for ((i = 0; i < n; i++)); do
		if [ "${CLUSTER_NETNS:-0}" = 1 ]; then
			cluster_netns_node "$i"
			CL_IP[$i]=$(cluster_netns_ip "$i")
			CL_PORT[$i]=4460
		else
			CL_IP[$i]=$(cluster_ip "$i")
			CL_PORT[$i]=$(free_port)
		fi
		boot=""
		# A new ring on a routable address (the namespaces' 10.77/16) must be asked for.
		[ "$i" -eq 0 ] && [ "${CLUSTER_NETNS:-0}" = 1 ] && boot="--first"
		if [ "$i" -gt 0 ]; then
			local j=$((RANDOM % i))
			boot="--bootstrap $(cluster_addr "$j")"
		fi
		CL_ARGS[$i]="--vnodes ${vs[i % ${#vs[@]}]} $boot $extra"
		cluster_run "$i"
	done
	CL_N=$n
	for ((i = 0; i < n; i++)); do cluster_wait_up "$i"; done
}

cluster_alive() { [ -n "${CL_PID[$1]:-}" ] && kill -0 "${CL_PID[$1]}" 2>/dev/null; }

# cluster_status_all DIR: one JSON report per live daemon.
cluster_status_all() {
	local out=$1 i
	rm -rf "$out"; mkdir -p "$out"
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" || continue
		"$CFSCTL" --data "$TEST_DIR/node$i" status --json >"$out/node$i.json" 2>/dev/null ||
			rm -f "$out/node$i.json"
	done
}

# cluster_status_sum DIR FIELD...: the sum over DIR's status reports (from
# cluster_status_all or cluster_collect) of each dotted FIELD (e.g.
# dhash.leases_expiring.day), one line, space-separated.
cluster_status_sum() {
	local dir=$1; shift
	cat "$dir"/*.json | python3 -c '
import json, sys
dec = json.JSONDecoder(); s = sys.stdin.read().strip(); i = 0
fields = sys.argv[1:]; sums = [0] * len(fields)
while i < len(s):
    o, i = dec.raw_decode(s, i)
    for j, f in enumerate(fields):
        v = o
        for part in f.split("."): v = v[part]
        sums[j] += v
    while i < len(s) and s[i].isspace(): i += 1
print(*sums)' "$@"
}

# cluster_collect DIR: status (NODE.json) and stored keys (NODE.keys) of
# every live daemon.
cluster_collect() {
	local out=$1 i
	cluster_status_all "$out"
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" || continue
		"$CFSCTL" --data "$TEST_DIR/node$i" keys >"$out/node$i.keys" || rm -f "$out/node$i.json"
	done
}

# cluster_placement K KEYS-FILE: where those blocks are now, as the JSON
# summary of replica_check.py.
cluster_placement() {
	cluster_collect "$TEST_DIR/place"
	python3 "$HARNESS_DIR/replica_check.py" "$1" "$TEST_DIR/place" "$2"
}
# cluster_wait_placement K KEYS SECONDS OUT FIELD WANT: check placement
# every second (into OUT) until its FIELD (exact, short, ...) is WANT;
# 1 when SECONDS pass first (OUT then holds the last check).
cluster_wait_placement() {
	local end=$((SECONDS + $3))
	while :; do
		cluster_placement "$1" "$2" >"$4"
		[ "$(jget "['$5']" <"$4")" -eq "$6" ] && return 0
		[ $SECONDS -lt $end ] || return 1
		sleep 1
	done
}

cluster_check() {
	cluster_status_all "$TEST_DIR/status"
	python3 "$HARNESS_DIR/ring_check.py" --successors="${CLUSTER_SUCCESSORS:-16}" "$TEST_DIR"/status/*.json
}

# cluster_wait_correct SECONDS: prints the time it took; fails after SECONDS.
cluster_wait_correct() {
	local secs=$1 start=$SECONDS
	while ! cluster_check >"$TEST_DIR/check.out" 2>&1; do
		if [ $((SECONDS - start)) -ge "$secs" ]; then
			cat "$TEST_DIR/check.out" >&2
			return 1
		fi
		sleep 0.5
	done
	CLUSTER_CONVERGED_S=$((SECONDS - start))
}

cluster_kill() { kill -KILL "${CL_PID[$1]}" 2>/dev/null || true; wait "${CL_PID[$1]}" 2>/dev/null || true; CL_PID[$1]=""; }
cluster_stop() { kill -TERM "${CL_PID[$1]}" 2>/dev/null || true; wait "${CL_PID[$1]}" 2>/dev/null || true; CL_PID[$1]=""; }
# A restarted node joins through its first bootstrap if that one is alive,
# else through the first live node. The node that started the ring has no
# bootstrap: back alone it would start a second ring, so it joins the first
# live node too.
cluster_restart() {
	local i=$1 j boot
	boot=$(sed -n 's/.*--bootstrap \([^ ]*\).*/\1/p' <<<"${CL_ARGS[$i]}")
	if [ -z "$boot" ]; then
		for ((j = 0; j < CL_N; j++)); do
			[ "$j" != "$i" ] && cluster_alive "$j" && break
		done
		[ "$j" -lt "$CL_N" ] && CL_ARGS[$i]="${CL_ARGS[$i]} --bootstrap $(cluster_addr "$j")"
	else
		for ((j = 0; j < CL_N; j++)); do
			[ "$(cluster_addr "$j")" = "$boot" ] && break
		done
		if [ "$j" -ge "$CL_N" ] || ! cluster_alive "$j"; then
			for ((j = 0; j < CL_N; j++)); do
				[ "$j" != "$i" ] && cluster_alive "$j" && break
			done
			[ "$j" -lt "$CL_N" ] && CL_ARGS[$i]=${CL_ARGS[$i]/--bootstrap $boot/--bootstrap $(cluster_addr "$j")}
		fi
	fi
	cluster_run "$i"
	cluster_wait_up "$i"
}

# cluster_lookup_check MODE COUNT: COUNT random lookups from a random live
# node, each checked against the true successor from every node's ID.
cluster_lookup_check() {
	local mode=$1 count=$2
	cluster_status_all "$TEST_DIR/status"
	python3 "$HARNESS_DIR/ring_check.py" --ids "$TEST_DIR"/status/*.json >"$TEST_DIR/ids"
	local node=$((RANDOM % CL_N))
	cluster_alive "$node" || node=0
	"$CFSCTL" --data "$TEST_DIR/node$node" lookup --mode "$mode" --random "$count" >"$TEST_DIR/lookups" ||
		fail "cfsctl lookup --mode $mode failed"
	python3 - "$TEST_DIR/ids" "$TEST_DIR/lookups" "$mode" <<'PY'
import bisect, sys
ids = [int(l, 16) for l in open(sys.argv[1])]
n = wrong = rpcs = 0
for line in open(sys.argv[2]):
    key, succ, addr, r, t = line.split()
    k = int(key, 16)
    i = bisect.bisect_left(ids, k)
    truth = ids[i % len(ids)]
    n += 1
    rpcs += int(r)
    if int(succ, 16) != truth:
        wrong += 1
print("# %s: %d lookups, %d wrong, %.2f RPCs per lookup" % (sys.argv[3], n, wrong, rpcs / max(n, 1)))
sys.exit(1 if wrong or n == 0 else 0)
PY
}

# cluster_reader_mount VOLUME MOUNTPOINT [CFS-MOUNT-ARGS...]: mount VOLUME
# from the reader namespace as a plain ring client (bootstrap: node 0) and
# wait until it is mounted; sets CL_MOUNT_PID (recorded for the cleanup).
# 1 (with the log's tail on stderr) if it did not mount within 30 s.
# The mount namespace is shared, so the mountpoint is readable from here.
CL_MOUNT_PID=""
cluster_reader_mount() {
	local vol=$1 mnt=$2; shift 2
	mkdir -p "$mnt"
	cluster_in "$CL_READER_NS" "$CFS_BIN/cfs-mount" -f --bootstrap "$(cluster_addr 0)" \
		--state-dir "$TEST_DIR/reader-state" --update 0 "$@" "$vol" "$mnt" \
		>/dev/null 2>>"$TEST_DIR/reader-mount.log" &
	CL_MOUNT_PID=$!
	PIDS+=("$CL_MOUNT_PID")
	MOUNTS+=("$mnt")
	wait_for 30 mountpoint -q "$mnt" || { tail -3 "$TEST_DIR/reader-mount.log" >&2; return 1; }
}

# cluster_reader_umount MOUNTPOINT: stop the mount of cluster_reader_mount.
cluster_reader_umount() {
	if [ -n "$CL_MOUNT_PID" ]; then
		kill -TERM "$CL_MOUNT_PID" 2>/dev/null || true
		wait "$CL_MOUNT_PID" 2>/dev/null || true
	fi
	if mountpoint -q "$1" 2>/dev/null; then fusermount3 -u -z "$1" || true; fi
	CL_MOUNT_PID=""
	true
}

# cluster_reader_read FILE OUT SECONDS: copy FILE (through a mount) to OUT
# from the reader's side, at most SECONDS; prints "SECONDS STATUS" where
# STATUS is ok, EIO (an I/O error) or timeout, or the first error line.
cluster_reader_read() {
	local t0 st=0 err
	t0=$(date +%s.%N)
	timeout --kill-after=5 "$3" dd if="$1" of="$2" bs=1M status=none 2>"$TEST_DIR/read.err" || st=$?
	printf '%.2f ' "$(echo "$(date +%s.%N) - $t0" | bc)"
	if [ $st -eq 0 ]; then
		echo ok
	elif [ $st -eq 124 ] || [ $st -eq 137 ]; then
		echo timeout
	elif grep -q "Input/output error" "$TEST_DIR/read.err"; then
		echo EIO
	else
		err=$(head -1 "$TEST_DIR/read.err"); echo "${err:-exit $st}" | tr ' ' _
	fi
}

# cluster_http_start I DIR PORT: a plain HTTP server of DIR in node I's
# namespace (the TCP baseline on the same path); sets CL_HTTP_PID.
cluster_http_start() {
	cluster_in "${CL_NS[$1]}" python3 -m http.server --bind "${CL_IP[$1]}" --directory "$2" "$3" \
		>>"$TEST_DIR/http.log" 2>&1 &
	CL_HTTP_PID=$!
	PIDS+=("$CL_HTTP_PID")
}
