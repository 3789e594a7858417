# The wide-area bed: regions of cfsd daemons, each in its own network
# namespace at MTU 1500, behind one router namespace whose delay line
# (cfs-delayline) holds every packet for the one-way delay of its pair of
# regions. Source it after tests/integration/lib.sh; it sources cluster.sh.
#
#   wan_world                     the four regions of make bench-wan: us-east,
#                                 us-west, eu, asia; RTTs within a region 10
#                                 ms, us-east–eu 80, us-east–us-west 65,
#                                 us-west–eu 145, us-east–asia 200,
#                                 us-west–asia 110, eu–asia 160
#   wan_rtt A B MS [LOSS%]        set (or change) a pair's RTT and loss
#   wan_place R1:N1 R2:N2 ...     the first N1 daemons are in R1, the next N2
#                                 in R2, ...; the reader namespace is in the
#                                 region WAN_READER_REGION (default eu)
#   wan_start [V] [CFSD-ARGS...]  write the matrix, start the ring (cluster_start
#                                 over the placed daemons) and the reader's
#                                 namespace, and wait until the ring is correct
#   wan_apply                     after wan_rtt on a running bed: the delay
#                                 line reads the matrix again
#   wan_reader_cfsd [ARGS...]     a cfsd in the reader's namespace that joins
#                                 through node 0 (data: $TEST_DIR/reader-node;
#                                 WAN_READER_PID)
#   wan_region_of I               node I's region (I = r for the reader)
#   wan_rtt_between I J           the RTT in ms between nodes I and J
#   wan_oracle_ms KEY-HOLDERS...  the RTT from the reader to the nearest of
#                                 the named nodes (node indexes)
: "${TEST_DIR:?}" "${CFS_BIN:?}"
WAN_MATRIX=$TEST_DIR/wan.matrix
CLUSTER_DELAY_MATRIX=$WAN_MATRIX
CLUSTER_NETNS=1
CLUSTER_MTU=${CLUSTER_MTU:-1500}
. "$(dirname "${BASH_SOURCE[0]}")/cluster.sh"

declare -A WAN_RTT=()   # "A B" -> "MS LOSS"
WAN_REGION=()           # node index -> region
WAN_READER_REGION=${WAN_READER_REGION:-eu}
WAN_READER_PID=""

wan_rtt() {
	local a=$1 b=$2 ms=$3 loss=${4:-0}
	WAN_RTT["$a $b"]="$ms $loss"
	WAN_RTT["$b $a"]="$ms $loss"
}

wan_world() {
	local r
	for r in us-east us-west eu asia; do wan_rtt "$r" "$r" 10; done
	wan_rtt us-east eu 80
	wan_rtt us-east us-west 65
	wan_rtt us-west eu 145
	wan_rtt us-east asia 200
	wan_rtt us-west asia 110
	wan_rtt eu asia 160
}

wan_place() {
	local spec r n i=0 k
	WAN_REGION=()
	for spec in "$@"; do
		r=${spec%%:*} n=${spec#*:}
		for ((k = 0; k < n; k++)); do WAN_REGION[$i]=$r; i=$((i + 1)); done
	done
}

wan_region_of() {
	if [ "$1" = r ]; then echo "$WAN_READER_REGION"; else echo "${WAN_REGION[$1]}"; fi
}

wan_rtt_between() {
	local a b v
	a=$(wan_region_of "$1") b=$(wan_region_of "$2")
	v=${WAN_RTT["$a $b"]:-0 0}
	echo "${v%% *}"
}

wan_oracle_ms() {
	local best="" i r
	for i in "$@"; do
		r=$(wan_rtt_between r "$i")
		if [ -z "$best" ] || [ "$(echo "$r < $best" | bc)" = 1 ]; then best=$r; fi
	done
	echo "${best:-0}"
}

wan_write() {
	local i pair
	{
		echo "# written by tests/harness/wan.sh"
		for i in "${!WAN_REGION[@]}"; do echo "node $(cluster_netns_ip "$i") ${WAN_REGION[$i]}"; done
		echo "node $(cluster_netns_ip "$CL_READER_I") $WAN_READER_REGION"
		for pair in "${!WAN_RTT[@]}"; do echo "rtt $pair ${WAN_RTT[$pair]}"; done
	} >"$WAN_MATRIX.tmp"
	mv "$WAN_MATRIX.tmp" "$WAN_MATRIX"
}

wan_apply() {
	wan_write
	cluster_delayline_reload
}

wan_start() {
	local v=${1:-1}; shift || true
	[ "${#WAN_REGION[@]}" -gt 0 ] || fail "wan_start: no daemons placed (wan_place)"
	wan_write
	cluster_start "${#WAN_REGION[@]}" "$v" "$@"
	cluster_netns_reader
	cluster_wait_correct 120 || fail "the wide-area ring of ${#WAN_REGION[@]} daemons did not converge"
}

wan_reader_cfsd() {
	local dir=$TEST_DIR/reader-node
	mkdir -p "$dir"
	nsenter --net="/run/netns/$CL_READER_NS" "$CFSD" --port 4460 --data "$dir" --bind "$CL_READER_IP" \
		--bootstrap "$(cluster_addr 0)" "$@" >>"$dir.log" 2>&1 &
	WAN_READER_PID=$!
	PIDS+=("$WAN_READER_PID")
	wait_for 10 "$CFSCTL" --data "$dir" status ||
		{ tail -5 "$dir.log" >&2; fail "the reader's cfsd did not start"; }
}
