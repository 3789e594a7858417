#!/bin/bash
# Leases and roots follow publishing, on a 6-daemon loopback ring (k = 3,
# servers grant at most 5 days, collectors every second):
#   - a volume published with a 40 s lease and republished with one change
#     before that lease ends is whole after it: the republish renewed every
#     block the new root references, changed or not, and every copy left
#     holds the new lease;
#   - a root asking for more than the servers grant is signed valid only
#     as long as the leases it got, with a warning;
#   - the root's successor down during a republish, back afterwards: a fresh
#     reader and one that saw the newest both read the newest (a root get
#     asks every replica and keeps the highest sequence), and the next
#     publish signs a sequence above every one used.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
CAT=$CFS_BIN/cfs-cat
export XDG_CONFIG_HOME=$TEST_DIR/config
K=3
N=6
state=$TEST_DIR/pubstate

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --max-lease-days 5 --expire-ms 1000 \
	--sync-ms 2000
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"

"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
src=$TEST_DIR/src
mkdir -p "$src/same" "$src/changes"
for i in $(seq 1 40); do head -c $((3000 + i * 700)) /dev/urandom >"$src/same/file$i"; done
echo "version 1" >"$src/changes/note"
head -c 100000 /dev/urandom >"$src/changes/big"

# cfsctl status over the ring: copies of blocks whose lease ends within a
# day, within a week, and all copies.
leases() {
	cluster_status_all "$TEST_DIR/st"
	cluster_status_sum "$TEST_DIR/st" dhash.leases_expiring.day dhash.leases_expiring.week \
		dhash.blocks
}
pub() { # NODE ARGS...: publish through that node's daemon
	local n=$1; shift
	"$PUBLISH" --to "cfsd:$TEST_DIR/node$n/cfsd.sock" --state-dir "$state" "$@" >"$TEST_DIR/out" \
		2>"$TEST_DIR/err" || { cat "$TEST_DIR/err" >&2; return 1; }
}

# ---- 1. a republish renews what it does not send
t0=$SECONDS
pub 0 --valid 0.00046 "$src" || fail "first publish (40 s lease)"
grep -q 'root sequence 1,' "$TEST_DIR/err" || fail "first publish: $(cat "$TEST_DIR/err")"
echo "# first publish, 40 s lease: $(grep -o '[0-9]* blocks.*' "$TEST_DIR/err")"
echo "version 2" >"$src/changes/note"
pub 1 --valid 2 "$src" || fail "republish"
renewed=$(grep -o '[0-9]* renewed' "$TEST_DIR/err" | cut -d' ' -f1)
sent=$(grep -o '[0-9]* sent' "$TEST_DIR/err" | cut -d' ' -f1)
[ "$renewed" -gt 40 ] && [ "$sent" -ge 3 ] && [ "$sent" -lt 10 ] ||
	fail "republish sent $sent and renewed $renewed blocks: $(cat "$TEST_DIR/err")"
grep -q 'root sequence 2,' "$TEST_DIR/err" || fail "republish: $(cat "$TEST_DIR/err")"
[ $((SECONDS - t0)) -lt 30 ] || fail "publishing took $((SECONDS - t0)) s, too long for a 40 s lease"
echo "# republished with one change at $((SECONDS - t0)) s: $sent blocks sent, $renewed renewed"
# Past the first lease, and past the collectors: the old version's own
# blocks are gone, every block of the new one is there.
sleep $((50 - (SECONDS - t0)))
end=$((SECONDS + 20))
while :; do
	read -r day week blocks < <(leases)
	[ "$day" -eq 0 ] && break
	[ $SECONDS -lt $end ] || fail "$day copies still end within a day $((SECONDS - t0)) s after the first publish"
	sleep 1
done
[ "$week" -eq "$blocks" ] && [ "$blocks" -ge $((K * (renewed + sent))) ] ||
	fail "$blocks copies held, $week of them ending within a week; want at least $((K * (renewed + sent)))"
"$FSCK" --from "cfsd:$TEST_DIR/node2/cfsd.sock" "$vol" >/dev/null 2>"$TEST_DIR/fsck.err" ||
	fail "the republished volume is not whole after the first lease: $(tail -3 "$TEST_DIR/fsck.err")"
echo "# $((SECONDS - t0)) s after the first publish: fsck whole; $blocks copies, none ending within a day, all within the two days of the republish"
ok "a republish renews every block of the new root, changed or not"

# ---- 2. a root never outlives the leases its publish got
pub 2 --valid 3650 "$src" || fail "publish asking for ten years"
grep -q 'the servers granted leases only until' "$TEST_DIR/err" || fail "no warning: $(cat "$TEST_DIR/err")"
until=$(grep -o 'valid until [0-9-]* [0-9:]*' "$TEST_DIR/err" | tail -1 | cut -d' ' -f3-)
days=$(( ($(date -u -d "$until" +%s) - $(date -u +%s)) / 86400 ))
[ "$days" -ge 4 ] && [ "$days" -le 5 ] || fail "the root is valid until $until ($days days), not 5"
read -r day week blocks < <(leases)
[ "$week" -eq "$blocks" ] || fail "a lease beyond the 5-day cap: $week of $blocks copies end within a week"
echo "# --valid 3650 against --max-lease-days 5: root valid until $until; every copy's lease within the cap"
ok "servers cap leases; the root is valid no longer than what they granted"

# ---- 3. a stale root replica: readers and the publisher take the newest
# The root key, H("cfs.root-key.v1" || public key); cfsctl lookup names its
# successor.
python3 - "$vol" >"$TEST_DIR/rootkey" <<'EOF'
import base64, hashlib, sys
name = sys.argv[1].upper()
pk = base64.b32decode(name + "=" * (-len(name) % 8))
print(hashlib.blake2b(b"cfs.root-key.v1" + pk, digest_size=32).hexdigest())
EOF
rootkey=$(cat "$TEST_DIR/rootkey")
"$CFSCTL" --data "$TEST_DIR/node0" get --check "$rootkey" | grep -q ' ok ' ||
	fail "the root key $rootkey computed here is not the volume's"
succ=$("$CFSCTL" --data "$TEST_DIR/node0" lookup "$rootkey" | awk '{print $3}')
victim=-1
for ((i = 0; i < N; i++)); do
	[ "${CL_IP[$i]}:${CL_PORT[$i]}" = "$succ" ] && victim=$i
done
[ "$victim" -ge 0 ] || fail "the root's successor $succ is none of the daemons"
via=$(((victim + 1) % N))
seq_before=$(grep -o 'root sequence [0-9]*' "$TEST_DIR/err" | cut -d' ' -f3)
cluster_kill "$victim"
echo "version 3" >"$src/changes/note"
sleep 3 # the ring notices the dead successor
pub "$via" --valid 2 "$src" || fail "republish with the root's successor down"
seq_new=$(grep -o 'root sequence [0-9]*' "$TEST_DIR/err" | cut -d' ' -f3)
[ "$seq_new" -eq $((seq_before + 1)) ] || fail "sequence $seq_new after $seq_before"
cluster_restart "$victim"
cluster_wait_up "$victim"
# A fresh reader through the restarted server, which holds the old root.
"$CAT" --data "$TEST_DIR/node$victim" "$vol" /changes/note >"$TEST_DIR/note" 2>"$TEST_DIR/cat.err" ||
	fail "a fresh reader through the stale server: $(cat "$TEST_DIR/cat.err")"
[ "$(cat "$TEST_DIR/note")" = "version 3" ] || fail "a fresh reader read '$(cat "$TEST_DIR/note")', not version 3"
ok "a fresh reader through the server holding the stale root reads the newest"
# The next publish, through the stale server, with no sequence record
# (another machine of the same publisher): a sequence above every one used.
echo "version 4" >"$src/changes/note"
rm -rf "$state"
pub "$victim" --valid 2 "$src" || fail "publish through the formerly stale server"
seq_next=$(grep -o 'root sequence [0-9]*' "$TEST_DIR/err" | cut -d' ' -f3)
[ "$seq_next" -eq $((seq_new + 1)) ] || fail "signed sequence $seq_next; the newest was $seq_new"
for ((i = 0; i < N; i++)); do
	"$CAT" --data "$TEST_DIR/node$i" "$vol" /changes/note >"$TEST_DIR/note" 2>"$TEST_DIR/cat.err" ||
		fail "reader through node$i: $(cat "$TEST_DIR/cat.err")"
	[ "$(cat "$TEST_DIR/note")" = "version 4" ] || fail "node$i's reader read '$(cat "$TEST_DIR/note")'"
done
ok "the next publish signs sequence $seq_next, above the newest; readers through every server read it"
# The publisher's own record: a store that lost the newest root cannot make
# it sign a sequence twice.
echo 41 >"$state/$vol.seq"
echo "version 5" >"$src/changes/note"
pub 0 --valid 2 "$src" || fail "publish with a sequence record ahead of the ring"
grep -q 'root sequence 42,' "$TEST_DIR/err" || fail "the record said 41: $(cat "$TEST_DIR/err")"
ok "the publisher signs above its own record (41 -> 42), whatever the ring holds"
