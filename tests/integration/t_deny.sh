#!/bin/bash
# The operator's denylist (cfsctl deny), on a 4-daemon loopback ring (k = 3,
# replica maintenance every second, caches off so that copies are replicas):
#   - bad arguments are refused; lifting what is not denied exits 3;
#   - `cfsctl deny VOLUME` on node3 walks the volume and denies its root and
#     every block: node3 holds none of them afterwards, refuses a direct
#     STORE of one (a clear EKEYREVOKED, not a silent drop) and answers a
#     FETCH as not held; replica maintenance does not pull them back;
#   - the volume still reads whole through another daemon, and a new
#     version still publishes (the puts go past node3);
#   - a volume whose root cannot be read: its root key is denied all the
#     same, and cfsctl says the walk could not run (exit 1);
#   - the list survives a restart of node3 (DATA/denylist);
#   - its peers' replica maintenance stops pushing the denied blocks to it
#     after the first refusal (they believe it for 30 of their rounds);
#   - `--remove` lifts it, and the blocks come back by replication: node3's
#     own range at once, the copies its peers push once they try again.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
HERE=$(dirname "$0")
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/state
K=3
N=4
D=3              # the daemon whose operator denies
EKEYREVOKED=128
ctl() { "$CFSCTL" --data "$TEST_DIR/node$D" "$@"; }
addr() { echo "${CL_IP[$1]}:${CL_PORT[$1]}"; }
held_by() { # NODE KEYS-FILE: how many of those keys NODE stores
	"$CFSCTL" --data "$TEST_DIR/node$1" keys | grep -cFxf "$2" || true
}
denied_keys() { ctl status --json | jget "['dhash']['denied_keys']"; }
fsck() { # VOLUME: is it whole, read through node0?
	timeout 60 "$FSCK" --from "cfsd:$TEST_DIR/node0/cfsd.sock" "$1" >/dev/null 2>"$TEST_DIR/fsck.err"
}

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --sync-ms 1000 --cache-mb 0
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"

# ---- argument checks
expect_exit 2 ctl deny
expect_exit 2 ctl deny not-a-volume
expect_exit 2 ctl deny "$(printf 'g%.0s' $(seq 64))"
expect_exit 2 ctl deny --list extra
expect_exit 3 ctl deny --remove "$(printf '0%.0s' $(seq 64))"
grep -q "is not denied" "$TEST_DIR/err" || fail "--remove of a key not denied said: $(cat "$TEST_DIR/err")"
expect_exit 1 "$CFSCTL" --data "$TEST_DIR/nowhere" deny --list
ok "cfsctl deny refuses bad arguments; lifting what is not denied exits 3"

# ---- publish a volume; its keys are everything on the ring
"$PUBLISH" --keygen "$TEST_DIR/v.key" >"$TEST_DIR/v.vol" 2>/dev/null || fail "keygen"
V=$(cat "$TEST_DIR/v.vol")
mkdir -p "$TEST_DIR/src/sub"
for i in $(seq 1 6); do head -c $((20000 + i * 30000)) /dev/urandom >"$TEST_DIR/src/f$i"; done
for i in $(seq 1 20); do echo "small $i" >"$TEST_DIR/src/sub/s$i"; done
publish() {
	"$PUBLISH" --key "$TEST_DIR/v.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --quiet "$TEST_DIR/src" \
		>/dev/null 2>"$TEST_DIR/pub.err" || { cat "$TEST_DIR/pub.err" >&2; fail "publish"; }
}
publish
cluster_collect "$TEST_DIR/held"
sort -u "$TEST_DIR"/held/*.keys >"$TEST_DIR/v.keys"
nv=$(wc -l <"$TEST_DIR/v.keys")
before=$(held_by "$D" "$TEST_DIR/v.keys")
[ "$before" -gt 0 ] || fail "node$D holds none of the volume's $nv blocks before the denial"

# ---- deny the volume on node3
t0=$SECONDS
ctl deny "$V" >"$TEST_DIR/out" || fail "deny $V: $(cat "$TEST_DIR/out")"
grep -q "^$V denied: root 1 and $((nv - 1)) blocks" "$TEST_DIR/out" || fail "deny said: $(cat "$TEST_DIR/out")"
echo "# node$D held $before of the volume's $nv blocks; cfsctl deny took $((SECONDS - t0)) s: $(cat "$TEST_DIR/out")"
[ "$(held_by "$D" "$TEST_DIR/v.keys")" -eq 0 ] || fail "node$D still holds blocks of the denied volume"
[ "$(denied_keys)" -eq "$nv" ] || fail "status: $(denied_keys) keys denied, not $nv"
ctl deny --list >"$TEST_DIR/list"
grep -q "^volume $V $nv keys\$" "$TEST_DIR/list" || fail "deny --list: $(cat "$TEST_DIR/list")"
grep -q " $V\$" "$TEST_DIR/node$D/denylist" || fail "DATA/denylist: $(head -3 "$TEST_DIR/node$D/denylist")"
ok "deny VOLUME walks the volume: node$D deleted its copies; status and --list count $nv keys"

# a direct STORE of one of its blocks is refused, a FETCH answered as not held
key=$(head -n 1 "$TEST_DIR/v.keys")
"$CFSCTL" --data "$TEST_DIR/node0" get --output "$TEST_DIR/blk" "$key" || fail "get $key through node0"
st=$(python3 "$HERE/dhash_store.py" "$(addr "$D")" 1 "$key" "$TEST_DIR/blk" 1)
[ "$st" = "-$EKEYREVOKED" ] || fail "a client's STORE of a denied block: status $st"
st=$(python3 "$HERE/dhash_store.py" "$(addr "$D")" 1 "$key" "$TEST_DIR/blk" 2)
[ "$st" = "-$EKEYREVOKED" ] || fail "a cache copy of a denied block: status $st"
st=$(python3 "$HERE/dhash_fetch.py" "$(addr "$D")" "$key" "$TEST_DIR/blk")
[ "$st" = "-2" ] || fail "a FETCH of a denied block from node$D: $st"
ok "node$D refuses a STORE of a denied block (EKEYREVOKED) and answers a FETCH as not held"

# the volume is whole through another daemon; a new version still publishes
fsck "$V" || fail "the volume is not whole through node0: $(cat "$TEST_DIR/fsck.err")"
echo "version 2" >"$TEST_DIR/src/f1"
publish
fsck "$V" || fail "version 2 is not whole through node0: $(cat "$TEST_DIR/fsck.err")"
ok "the volume reads whole through node0, and a new version publishes past node$D"

# replica maintenance does not pull the blocks back
sleep 4
[ "$(held_by "$D" "$TEST_DIR/v.keys")" -eq 0 ] || fail "sync pulled denied blocks back to node$D"
ctl status --json >"$TEST_DIR/st.json"
cluster_status_all "$TEST_DIR/all"
pushes=$(cat "$TEST_DIR"/all/*.json | python3 -c "import json,sys
print(sum(json.loads(l)['dhash']['sync']['push_denied'] for l in sys.stdin))")
skipped=$(cat "$TEST_DIR"/all/*.json | python3 -c "import json,sys
print(sum(json.loads(l)['dhash']['sync']['push_denied_skipped'] for l in sys.stdin))")
echo "# 4 s of sync later node$D holds none of them: it skipped $(jget "['dhash']['sync']['denied_skipped']" <"$TEST_DIR/st.json") fetches, refused $(jget "['dhash']['refused']['denied']" <"$TEST_DIR/st.json") STOREs, answered $(jget "['dhash']['fetch_denied']" <"$TEST_DIR/st.json") FETCHes as not held; its peers' sync had $pushes pushes refused and sent $skipped not again"
[ "$pushes" -le $((2 * nv)) ] || fail "the peers pushed denied blocks to node$D $pushes times: again every round"
ok "replica maintenance does not pull denied blocks back"

# ---- a key alone, and a volume whose root cannot be read
"$CFSCTL" --data "$TEST_DIR/node0" put --random 1 --size 3000 --seed 7 >"$TEST_DIR/put.out" || fail "put"
kalone=$(cut -d' ' -f1 "$TEST_DIR/put.out")
ctl deny "$kalone" >"$TEST_DIR/out" || fail "deny $kalone"
[ "$(held_by "$D" <(echo "$kalone"))" -eq 0 ] || fail "node$D holds the denied key $kalone"
"$PUBLISH" --keygen "$TEST_DIR/u.key" >"$TEST_DIR/u.vol" 2>/dev/null || fail "keygen"
U=$(cat "$TEST_DIR/u.vol")
expect_exit 1 ctl deny "$U"
[ "$(wc -l <"$TEST_DIR/err")" -eq 1 ] && grep -q "root key is denied, but the walk could not run" "$TEST_DIR/err" ||
	fail "deny of an unknown volume said: $(cat "$TEST_DIR/err")"
ctl deny --list >"$TEST_DIR/list"
grep -q "^volume $U 1 key\$" "$TEST_DIR/list" && grep -q "^key $kalone\$" "$TEST_DIR/list" ||
	fail "deny --list: $(cat "$TEST_DIR/list")"
ok "a key alone is denied; an unknown volume's root key is denied and cfsctl says the walk could not run"

# ---- across a restart of node3
cluster_stop "$D"
cluster_restart "$D"
[ "$(denied_keys)" -eq $((nv + 2)) ] || fail "after a restart: $(denied_keys) keys denied, not $((nv + 2))"
st=$(python3 "$HERE/dhash_store.py" "$(addr "$D")" 1 "$key" "$TEST_DIR/blk" 1)
[ "$st" = "-$EKEYREVOKED" ] || fail "after a restart, a STORE of a denied block: status $st"
sleep 3
[ "$(held_by "$D" "$TEST_DIR/v.keys")" -eq 0 ] || fail "after a restart node$D holds denied blocks"
ok "the denylist survives a restart of node$D"

# ---- lifted: a STORE is taken again, and the blocks come back by replication
ctl deny --remove "$V" >"$TEST_DIR/out" || fail "deny --remove: $(cat "$TEST_DIR/out")"
grep -q "^$V lifted: $nv keys" "$TEST_DIR/out" || fail "--remove said: $(cat "$TEST_DIR/out")"
[ "$(denied_keys)" -eq 2 ] || fail "after --remove: $(denied_keys) keys denied, not 2"
expect_exit 3 ctl deny --remove "$V"
st=$(python3 "$HERE/dhash_store.py" "$(addr "$D")" 1 "$key" "$TEST_DIR/blk" 1)
[ "$st" = "0" ] || fail "after the lift, a client's STORE of the block: status $st"
# node3's own range comes back by its own sync at once; the copies its
# peers push come back once they try again (a peer believes a denial for
# 30 rounds of its sync, here 30 s, from the first refusal).
t1=$SECONDS
wait_for 30 bash -c "[ \$('$CFSCTL' --data '$TEST_DIR/node$D' keys | grep -cFxf '$TEST_DIR/v.keys') -gt 0 ]" ||
	fail "no block of the lifted volume came back to node$D"
some=$(held_by "$D" "$TEST_DIR/v.keys")
t2=$SECONDS
wait_for 45 bash -c "[ \$('$CFSCTL' --data '$TEST_DIR/node$D' keys | grep -cFxf '$TEST_DIR/v.keys') -ge $before ]" ||
	fail "$(held_by "$D" "$TEST_DIR/v.keys") of the $before blocks node$D held came back after the lift"
echo "# lifted: node$D holds $some of the volume's blocks again after $((t2 - t1)) s (its own sync), all $before it held before the denial after $((SECONDS - t1)) s (its peers' pushes)"
ok "deny --remove lifts the volume; replication brings its blocks back"
