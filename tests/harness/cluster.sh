# The cluster harness: start, check, kill and restart rings of cfsd daemons.
# Source it after tests/integration/lib.sh (which records PIDs and kills them
# on exit). Used by the ring tests and, later, by every test that needs a ring.
#
#   cluster_start N [V] [EXTRA-CFSD-ARGS...]   N daemons with V vnodes each
#   cluster_wait_correct SECONDS              until every pred/successor list is true
#                                             (CLUSTER_SUCCESSORS: the daemons' --successors)
#   cluster_status_all DIR                    DIR/NODE.json for each live node
#   cluster_lookup_check MODE COUNT           random lookups, each checked true
#   cluster_placement K KEYS                  where blocks live (replica_check.py)
#   cluster_wait_placement K KEYS SECS OUT FIELD WANT   ... until FIELD is WANT
#   cluster_kill I / cluster_stop I / cluster_restart I
#
# Every daemon has its own loopback address, CL_IP[i] = 127.N.(i/250).(i%250+1)
# (any 127/8 address reaches lo on Linux; N is random per test run), bound
# with --bind and hashed into its IDs: IDs are H(IP ‖ index), the port not
# hashed (DESIGN.md §3), so daemons sharing one IP would share its indexes.
# cluster_ip I prints node I's address.
#
# With CLUSTER_NETNS=1 every daemon runs in its own network namespace with
# its own IP (10.77.0.X) on a bridge in a private hub namespace, so node IDs
# really hash distinct addresses; the namespaces are deleted on exit.
: "${TEST_DIR:?}" "${CFS_BIN:?}"
HARNESS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CL_N=0
CL_PORT=()
CL_IP=()
CL_PID=()
CL_ARGS=()
CL_NS=()
CL_TAG="cfs$$"
CL_NET=${CLUSTER_NET:-127.$((RANDOM % 150 + 100))}

cluster_ip() { echo "$CL_NET.$(($1 / 250)).$(($1 % 250 + 1))"; }

cluster_cleanup() {
	local i
	for i in "${!CL_NS[@]}"; do
		ip netns del "${CL_NS[$i]}" 2>/dev/null || true
	done
	[ "${CLUSTER_NETNS:-0}" = 1 ] && ip netns del "${CL_TAG}hub" 2>/dev/null || true
}

# Wrap lib.sh's cleanup: processes first, then namespaces.
trap 'cleanup; cluster_cleanup' EXIT

cluster_netns_setup() {
	ip netns add "${CL_TAG}hub"
	ip -n "${CL_TAG}hub" link add br0 type bridge
	ip -n "${CL_TAG}hub" link set br0 up
	ip -n "${CL_TAG}hub" link set lo up
}

cluster_netns_node() {
	local i=$1 ns="${CL_TAG}n$1"
	ip netns add "$ns"
	CL_NS[$i]=$ns
	ip link add "${CL_TAG}v$i" type veth peer name "${CL_TAG}p$i"
	ip link set "${CL_TAG}v$i" netns "$ns"
	ip link set "${CL_TAG}p$i" netns "${CL_TAG}hub"
	ip -n "${CL_TAG}hub" link set "${CL_TAG}p$i" master br0 up
	ip -n "$ns" addr add "10.77.$((i / 250)).$((i % 250 + 1))/16" dev "${CL_TAG}v$i"
	ip -n "$ns" link set "${CL_TAG}v$i" up
	ip -n "$ns" link set lo up
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
	[ "${CLUSTER_NETNS:-0}" = 1 ] && cluster_netns_setup
	for ((i = 0; i < n; i++)); do
		if [ "${CLUSTER_NETNS:-0}" = 1 ]; then
			cluster_netns_node "$i"
			CL_IP[$i]="10.77.$((i / 250)).$((i % 250 + 1))"
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
			boot="--bootstrap ${CL_IP[$j]}:${CL_PORT[$j]}"
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
		[ "$j" -lt "$CL_N" ] && CL_ARGS[$i]="${CL_ARGS[$i]} --bootstrap ${CL_IP[$j]}:${CL_PORT[$j]}"
	else
		for ((j = 0; j < CL_N; j++)); do
			[ "${CL_IP[$j]}:${CL_PORT[$j]}" = "$boot" ] && break
		done
		if [ "$j" -ge "$CL_N" ] || ! cluster_alive "$j"; then
			for ((j = 0; j < CL_N; j++)); do
				[ "$j" != "$i" ] && cluster_alive "$j" && break
			done
			[ "$j" -lt "$CL_N" ] && CL_ARGS[$i]=${CL_ARGS[$i]/--bootstrap $boot/--bootstrap ${CL_IP[$j]}:${CL_PORT[$j]}}
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
