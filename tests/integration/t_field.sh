#!/bin/bash
# Blocks across a real link, the short version of make
# bench-field: 8 daemons in 8 network namespaces on a bridge, every veth at
# MTU 1500, a reader in a ninth namespace mounting the volume as a plain
# ring client. Per-packet loss on every node's ingress (iptables raw
# PREROUTING, -m statistic) and a 50 Mbit/s token bucket with a shallow
# queue on the reader's link:
#   - a FIELD_MB (8) MiB file read through a fresh mount at 0, 1 and 3 %
#     loss and behind the shaper: every read completes (no EIO) and equals
#     the published bytes;
#   - a publish of another file at 1 % loss succeeds;
#   - cfs-fsck finds both volumes whole afterwards;
#   - no IP fragment was created on any node (FragCreates, IPv4 and IPv6)
#     and none reassembled (ReasmReqds), no reassembly memory in use;
#   - no daemon and no reader suspected an honest node (loss and a full
#     queue are no evidence).
# Every step runs even when an earlier one failed, so that the log shows
# every way the transport falls short; the test fails if any did.
. "$(dirname "$0")/lib.sh"
CLUSTER_NETNS=1
CLUSTER_MTU=1500
. "$(dirname "$0")/../harness/cluster.sh"
N=8
MB=${FIELD_MB:-8}
READ_LIMIT=${FIELD_READ_LIMIT:-60} # seconds per read; a failing fetch gives EIO in ~31 s
# FIELD_BLOCK: data block size in bytes (default: the publisher's default)
bs_arg=()
[ -n "${FIELD_BLOCK:-}" ] && bs_arg=(--block-size "$FIELD_BLOCK")
mnt=$TEST_DIR/mnt
export XDG_CONFIG_HOME=$TEST_DIR/config
export CFS_DATA_DIR=$TEST_DIR/no-daemon # no daemon socket: only --bootstrap leads to the ring
mkdir -p "$CFS_DATA_DIR"
trap 'cluster_reader_umount "$mnt"; cleanup; cluster_cleanup' EXIT
command -v iptables-legacy >/dev/null || fail "iptables-legacy missing (Debian package iptables; make deps-test)"

problems=()
problem() { echo "# PROBLEM: $*"; problems+=("$*"); }

head -c $((MB << 20)) /dev/urandom >"$TEST_DIR/file"
mkdir -p "$TEST_DIR/src" "$TEST_DIR/src2"
mv "$TEST_DIR/file" "$TEST_DIR/src/file"
head -c $((MB << 20)) /dev/urandom >"$TEST_DIR/src2/file"

cluster_start "$N" 1 --stabilize-ms 250
cluster_netns_reader
cluster_wait_correct 60 || fail "a ring of $N namespaced daemons did not converge"
echo "# $N daemons in namespaces, MTU $CLUSTER_MTU, converged in ${CLUSTER_CONVERGED_S}s; reader at $CL_READER_IP"
cluster_frag_snapshot "$TEST_DIR/frag0"

# run_in_reader CMD...: CMD in the reader's namespace (a plain ring client).
run_in_reader() { cluster_in "$CL_READER_NS" "$@"; }
boot=$(cluster_addr 0)
run_in_reader "$CFS_BIN/cfs-publish" --keygen "$TEST_DIR/key1" >"$TEST_DIR/vol1" 2>/dev/null || fail "keygen"
run_in_reader "$CFS_BIN/cfs-publish" --keygen "$TEST_DIR/key2" >"$TEST_DIR/vol2" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol1") vol2=$(cat "$TEST_DIR/vol2")
start=$SECONDS
run_in_reader "$CFS_BIN/cfs-publish" --quiet --key "$TEST_DIR/key1" "${bs_arg[@]}" \
	--state-dir "$TEST_DIR/pubstate" --to "ring:$boot" "$TEST_DIR/src" >/dev/null 2>"$TEST_DIR/publish.err" ||
	{ cat "$TEST_DIR/publish.err"; fail "publish of $MB MiB without loss"; }
echo "# published $MB MiB (blocks: ${FIELD_BLOCK:-default} bytes) from the reader namespace in $((SECONDS - start)) s (no loss)"

# read_at LABEL: a fresh mount reads the file; it must complete and match.
read_at() {
	local r secs st
	if ! cluster_reader_mount "$vol" "$mnt" 2>"$TEST_DIR/mount.err"; then
		problem "mount for the read at $1 failed: $(tail -1 "$TEST_DIR/mount.err")"
		cluster_reader_umount "$mnt"
		return 0
	fi
	r=$(cluster_reader_read "$mnt/file" "$TEST_DIR/read.out" "$READ_LIMIT")
	secs=${r% *} st=${r#* }
	cluster_reader_umount "$mnt"
	if [ "$st" != ok ]; then
		problem "read at $1: $st after ${secs}s"
	elif ! cmp -s "$TEST_DIR/src/file" "$TEST_DIR/read.out"; then
		problem "read at $1: different bytes"
	else
		echo "# read $MB MiB at $1 in ${secs}s: $(echo "scale=1; $MB * 1.048576 / $secs" | bc) MB/s"
	fi
	rm -f "$TEST_DIR/read.out"
}

for loss in 0 0.01 0.03; do
	cluster_loss "$loss"
	read_at "$(echo "$loss * 100" | bc | sed 's/\.00$//') % loss"
done
cluster_loss 0
cluster_shape 50mbit
read_at "50 Mbit/s behind a shallow queue"
cluster_shape off
[ ${#problems[@]} -eq 0 ] && ok "$MB MiB read whole at 0, 1, 3 % loss and behind a 50 Mbit/s shallow shaper"

cluster_loss 0.01
start=$SECONDS
published2=0
if run_in_reader "$CFS_BIN/cfs-publish" --quiet --key "$TEST_DIR/key2" "${bs_arg[@]}" \
	--state-dir "$TEST_DIR/pubstate" --to "ring:$boot" "$TEST_DIR/src2" >/dev/null 2>"$TEST_DIR/publish2.err"; then
	published2=1
	ok "published $MB MiB at 1 % loss in $((SECONDS - start)) s"
else
	problem "publish at 1 % loss failed after $((SECONDS - start)) s: $(tail -1 "$TEST_DIR/publish2.err")"
fi
cluster_loss 0

checked=("$vol")
[ $published2 = 1 ] && checked+=("$vol2") || echo "# cfs-fsck of the volume published at 1 % loss skipped: its publish failed (counted above)"
for v in "${checked[@]}"; do
	if run_in_reader "$CFS_BIN/cfs-fsck" --from "ring:$boot" "$v" >"$TEST_DIR/fsck.out" 2>&1; then
		echo "# cfs-fsck: ${v:0:16}... whole"
	else
		problem "cfs-fsck of ${v:0:16}...: $(tail -1 "$TEST_DIR/fsck.out")"
	fi
done

cluster_frag_snapshot "$TEST_DIR/frag1"
read -r creates reasm mem <<<"$(cluster_frag_delta "$TEST_DIR/frag0" "$TEST_DIR/frag1")"
echo "# IP fragments over the whole test, all namespaces: $creates created, $reasm reassemblies asked, $mem bytes of reassembly memory in use now"
[ "$creates" -eq 0 ] || problem "$creates IP fragments created (a datagram above the path MTU)"
[ "$reasm" -eq 0 ] || problem "$reasm IP reassemblies"
[ "$mem" -eq 0 ] || problem "$mem bytes held in IP reassembly queues"

# Loss and a full queue are no evidence against anyone: no daemon and no
# reader may have suspected an honest node.
nsusp=$(cat "$TEST_DIR"/node*.log "$TEST_DIR/reader-mount.log" "$TEST_DIR"/publish*.err 2>/dev/null |
	grep -c 'suspect' || true)
echo "# nodes suspected over the whole test (loss, shaper, publish at 1 %): $nsusp"
[ "$nsusp" -eq 0 ] || problem "$nsusp suspicions of honest nodes: $(cat "$TEST_DIR"/node*.log "$TEST_DIR/reader-mount.log" | grep -m1 suspect)"

if [ ${#problems[@]} -gt 0 ]; then
	printf 'FAIL: %s\n' "${problems[@]}" >&2
	fail "${#problems[@]} field check(s) failed"
fi
ok "no IP fragment, no reassembly; both volumes whole"
