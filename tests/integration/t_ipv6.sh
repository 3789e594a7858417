#!/bin/bash
# The ring over IPv6 at the minimum MTU: 8 daemons in 8 network
# namespaces whose veths carry only fd77::X/64 (no IPv4), every veth and
# the bridge at MTU 1280 (IPv6's minimum link MTU, RFC 8200 §5):
#   - the daemons bind and advertise [fd77::X]:4460 and the ring converges;
#     every virtual server's ID is H(its 16-byte IP ‖ index); iterative
#     and recursive lookups return the true successor;
#   - a volume (a small tree and a FIELD_MB (4) MiB file) is published from
#     a reader namespace as a plain ring client, read back through a mount
#     there and found equal, and cfs-fsck finds it whole;
#   - no IPv6 fragment was created or reassembled on any node.
. "$(dirname "$0")/lib.sh"
CLUSTER_NETNS=1
CLUSTER_IPV6=1
CLUSTER_MTU=1280
. "$(dirname "$0")/../harness/cluster.sh"
. "$(dirname "$0")/../harness/tree.sh"
N=8
MB=${FIELD_MB:-4}
mnt=$TEST_DIR/mnt
export XDG_CONFIG_HOME=$TEST_DIR/config
export CFS_DATA_DIR=$TEST_DIR/no-daemon
mkdir -p "$CFS_DATA_DIR"
trap 'cluster_reader_umount "$mnt"; cleanup; cluster_cleanup' EXIT

src=$TEST_DIR/src
make_tree "$src/tree" 100 4
head -c $((MB << 20)) /dev/urandom >"$src/big"

# Successor lists of 6 (k = 6 replicas, the default) in a ring of 16
# virtual servers: lookups need hops.
CLUSTER_SUCCESSORS=6
cluster_start "$N" 2 --stabilize-ms 250 --successors 6
cluster_netns_reader
cluster_wait_correct 60 || fail "a ring of $N daemons over IPv6 did not converge"
echo "# $N daemons on fd77::/64, MTU $CLUSTER_MTU, converged in ${CLUSTER_CONVERGED_S}s; reader at $CL_READER_IP"
cluster_frag_snapshot "$TEST_DIR/frag0"

cluster_status_all "$TEST_DIR/status"
python3 - "$N" "$TEST_DIR"/status/*.json <<'PY' || fail "IPv6 addresses or IDs"
import hashlib, ipaddress, json, re, struct, sys
n, files = int(sys.argv[1]), sys.argv[2:]
ids = set()
for f in files:
    d = json.load(open(f))
    i = int(re.search(r"node(\d+)\.json$", f).group(1))
    want = "[fd77::%x]:4460" % (i + 1)
    assert d["ring"]["address"] == want, "%s: daemon at %s, wanted %s" % (f, d["ring"]["address"], want)
    ip = ipaddress.ip_address(want[1:want.index("]")])
    for v in d["ring"]["vnodes"]:
        raw = ip.packed + struct.pack(">I", v["index"])
        assert hashlib.blake2b(raw, digest_size=32).hexdigest() == v["id"], "%s: ID is not H(IP, index)" % f
        ids.add(v["id"])
        for s in v["succs"]:
            assert s["addr"].startswith("[fd77::"), "%s: successor %s" % (f, s["addr"])
assert len(files) == n and len(ids) == 2 * n, "%d reports, %d IDs" % (len(files), len(ids))
print("# %d daemons advertise [fd77::X]:4460; IDs hash the 16-byte address" % n)
PY
for mode in iterative recursive; do
	cluster_lookup_check "$mode" 300 >"$TEST_DIR/lk" || { cat "$TEST_DIR/lk"; fail "lookups ($mode) over IPv6"; }
	cat "$TEST_DIR/lk"
	grep -q " 0.00 RPCs" "$TEST_DIR/lk" && fail "lookups ($mode) made no RPC: nothing crossed a namespace"
done
ok "a ring over IPv6 at MTU 1280 converges; lookups in both modes return the true successor"

boot=$(cluster_addr 0)
cluster_in "$CL_READER_NS" "$CFS_BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
start=$SECONDS
cluster_in "$CL_READER_NS" "$CFS_BIN/cfs-publish" --quiet --to "ring:$boot" "$src" \
	>/dev/null 2>"$TEST_DIR/publish.err" || { tail -5 "$TEST_DIR/publish.err"; cluster_in "$CL_READER_NS" ip -6 neigh; fail "publish over IPv6 through ring:$boot"; }
echo "# published $(du -sh --apparent-size "$src" | cut -f1) over IPv6 in $((SECONDS - start)) s"
cluster_in "$CL_READER_NS" "$CFS_BIN/cfs-fsck" --from "ring:$boot" "$vol" >"$TEST_DIR/fsck.out" 2>&1 ||
	{ tail -5 "$TEST_DIR/fsck.out"; fail "cfs-fsck over IPv6"; }
ok "published from the reader namespace; cfs-fsck over IPv6 finds the volume whole"

cluster_reader_mount "$vol" "$mnt" || fail "cfs-mount over IPv6 in the reader namespace"
diff -r --no-dereference "$src" "$mnt" >"$TEST_DIR/diff" 2>&1 || { head -5 "$TEST_DIR/diff"; fail "the tree read over IPv6 differs"; }
cluster_reader_umount "$mnt"
ok "mounted over IPv6 from the reader namespace: diff -r clean"

cluster_frag_snapshot "$TEST_DIR/frag1"
read -r creates reasm mem <<<"$(cluster_frag_delta "$TEST_DIR/frag0" "$TEST_DIR/frag1")"
echo "# IPv6 fragments, all namespaces: $creates created, $reasm reassemblies asked, $mem bytes in reassembly now"
[ "$creates" -eq 0 ] && [ "$reasm" -eq 0 ] && [ "$mem" -eq 0 ] ||
	fail "IP fragments over IPv6 at MTU 1280: $creates created, $reasm reassembled, $mem bytes held"
ok "no IPv6 fragment created or reassembled"
