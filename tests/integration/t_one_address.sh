#!/bin/bash
# One address trying many ports holds at most 64 ring positions
# (docs/PROTOCOL.md "Node IDs": IDs are H(IP ‖ index), index < 64, the port
# not hashed).
# Three daemons on their own addresses make a ring; then, on ONE shared
# address, a daemon with 40 virtual servers, a second with 20 (its indexes
# 0..19 are the first's: each moves to a free one, 40..59), and a third with
# 10, for which only 4 indexes are left: it refuses to run, saying why.
# Every table of every daemon then names at most 64 IDs of that address,
# all distinct and each the hash of the address and an index below 64, and
# the ring is correct.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
STAB="--stabilize-ms 250"

cluster_start 3 1 $STAB
cluster_wait_correct 60 || fail "the 3-daemon ring did not converge"

SHARED=$CL_NET.200.1
shared_node() { # I V: daemon I on the shared address with V virtual servers
	CL_IP[$1]=$SHARED; CL_PORT[$1]=$(free_port)
	CL_ARGS[$1]="--vnodes $2 --bootstrap ${CL_IP[0]}:${CL_PORT[0]} $STAB"
	cluster_run "$1"; cluster_wait_up "$1"; CL_N=$(($1 + 1))
}
shared_node 3 40
cluster_wait_correct 60 || fail "the ring did not absorb 40 virtual servers on $SHARED"
shared_node 4 20
cluster_wait_correct 60 || fail "the ring did not absorb a second process on $SHARED"
echo "# a second process on $SHARED: its 20 virtual servers found $(grep -c 'is taken by another process' "$TEST_DIR/node4.log") taken indexes before settling on free ones; ring correct in ${CLUSTER_CONVERGED_S}s"
ok "a second process on one address takes free indexes; the ring is correct"

# The third: 10 asked, 4 free. It must exit 1 with a clear message.
dir=$TEST_DIR/node5
"$CFSD" --port "$(free_port)" --bind "$SHARED" --data "$dir" --vnodes 10 \
	--bootstrap "${CL_IP[0]}:${CL_PORT[0]}" $STAB >>"$dir.log" 2>&1 &
pid=$!
PIDS+=("$pid")
wait_for 30 bash -c "! kill -0 $pid 2>/dev/null" || fail "a process asking for more indexes than are free kept running"
st=0; wait "$pid" || st=$?
[ "$st" -eq 1 ] || fail "it exited $st, wanted 1"
grep -q "all 64 virtual-server indexes of IP $SHARED are taken" "$dir.log" ||
	{ tail -5 "$dir.log" >&2; fail "no clear message"; }
echo "# the third process: '$(grep -o 'all 64 virtual-server indexes.*' "$dir.log" | head -1)'"
ok "a process that cannot get its virtual servers on a full address refuses to run"

# Every table of every live daemon: the IDs of the shared address.
cluster_wait_correct 60 || fail "the ring is not correct after the refused process left"
cluster_status_all "$TEST_DIR/st"
python3 - "$SHARED" "$TEST_DIR"/st/*.json <<'PY' || fail "the shared address holds too many or wrong IDs"
import hashlib, ipaddress, json, struct, sys
ip = sys.argv[1]
raw = ipaddress.ip_address(ip).packed
legal = {hashlib.blake2b(raw + struct.pack(">I", i), digest_size=32).hexdigest(): i for i in range(64)}
seen, own = set(), []
for f in sys.argv[2:]:
    st = json.load(open(f))
    for v in st["ring"]["vnodes"]:
        if st["ring"]["address"].rsplit(":", 1)[0] == ip:
            own.append(v["id"])
            assert legal.get(v["id"]) == v["index"], "%s: vnode %s is not H(IP ‖ %d)" % (f, v["id"][:8], v["index"])
        nodes = ([v["pred"]] if v["pred"] else []) + v["succs"] + [x["node"] for x in v["fingers"]]
        for n in nodes:
            if n["addr"].rsplit(":", 1)[0] == ip:
                assert n["id"] in legal, "%s names %s at %s: not H(IP ‖ index < 64)" % (f, n["id"][:8], n["addr"])
                seen.add(n["id"])
assert len(own) == 60 and len(set(own)) == 60, "%d virtual servers on %s, %d distinct" % (len(own), ip, len(set(own)))
assert len(seen) <= 64, "%d IDs of %s in tables" % (len(seen), ip)
print("# %s: %d virtual servers, all distinct; the tables name %d IDs of it (at most 64)" % (ip, len(own), len(seen)))
PY
ok "one address: at most 64 distinct, well-formed IDs in every table; the ring is correct"
