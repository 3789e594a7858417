#!/bin/bash
# The ring with every daemon in its own network namespace and its own IP
# (CLUSTER_NETNS=1: 10.77.0.X on a bridge in a private hub namespace), all
# on the same port, so node IDs hash distinct addresses for real: the ring
# converges, every virtual server's ID is H(its IP ‖ index) and
# every table entry is authenticated by its address, lookups in both modes
# return the true successor, and a killed node is absorbed.
. "$(dirname "$0")/lib.sh"
CLUSTER_NETNS=1
. "$(dirname "$0")/../harness/cluster.sh"
N=8

# Successor lists of 4 in a ring of 16 virtual servers: lookups need hops
# from one namespace to another.
CLUSTER_SUCCESSORS=4
cluster_start "$N" 2 --stabilize-ms 250 --successors 4 --replicas 4
cluster_wait_correct 90 || fail "a ring of $N namespaced daemons did not converge"
echo "# ring of $N daemons, each in its own network namespace (2 vnodes each), converged in ${CLUSTER_CONVERGED_S}s"

cluster_status_all "$TEST_DIR/status"
python3 - "$N" "$TEST_DIR"/status/*.json <<'PY' || fail "IDs or addresses"
import hashlib, ipaddress, json, re, struct, sys
n, files = int(sys.argv[1]), sys.argv[2:]
seen_ips, ids = set(), set()
for f in files:
    d = json.load(open(f))
    i = int(re.search(r"node(\d+)\.json$", f).group(1))
    want_ip = "10.77.0.%d" % (i + 1)
    ip, port = d["ring"]["address"].rsplit(":", 1)
    assert ip == want_ip, "%s: daemon at %s, wanted %s" % (f, ip, want_ip)
    for v in d["ring"]["vnodes"]:
        raw = ipaddress.ip_address(ip).packed + struct.pack(">I", v["index"])
        assert v["index"] < 64, "%s: index %d" % (f, v["index"])
        assert hashlib.blake2b(raw, digest_size=32).hexdigest() == v["id"], "%s: ID is not H(IP, index)" % f
        ids.add(v["id"])
        for s in v["succs"]:  # every neighbour a namespaced daemon, on its own IP
            assert s["addr"].startswith("10.77.0."), "%s: successor %s" % (f, s["addr"])
    seen_ips.add(want_ip)
assert len(seen_ips) == n and len(ids) == 2 * n, "%d IPs, %d IDs" % (len(seen_ips), len(ids))
print("# %d daemons on %d IPs, %d distinct IDs, each H(IP, index)" % (n, len(seen_ips), len(ids)))
PY
"$CFSCTL" --data "$TEST_DIR/node0" status --json >"$TEST_DIR/s0.json"
auth=$(json_get "$TEST_DIR/s0.json" ring.auth.ok)
[ "$auth" -gt 0 ] || fail "node 0 authenticated no neighbour by nonce"
echo "# node 0 authenticated $auth neighbours by nonce"
ok "namespaced ring converges; IDs hash each daemon's own IP"

for mode in iterative recursive; do
	cluster_lookup_check "$mode" 1000 >"$TEST_DIR/lk" || { cat "$TEST_DIR/lk"; fail "lookups ($mode) across namespaces"; }
	cat "$TEST_DIR/lk"
	grep -q " 0.00 RPCs" "$TEST_DIR/lk" && fail "lookups ($mode) made no RPC: nothing crossed a namespace"
done
ok "1,000 lookups per mode across namespaces return the true successor"

cluster_kill 3
cluster_wait_correct 60 || fail "the ring did not absorb a killed node"
echo "# a killed namespaced node absorbed in ${CLUSTER_CONVERGED_S}s"
cluster_lookup_check recursive 1000 || fail "lookups after a node was killed"
ok "a killed node is absorbed; lookups stay true"
