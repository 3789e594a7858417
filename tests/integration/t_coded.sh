#!/bin/bash
# Erasure-coded volumes on a 16-daemon loopback ring (k = 6):
#   - a tree published with --redundancy rs:4/12 reads back whole through
#     cfs-cat (through a daemon and as a plain ring client) and cfs-mount
#     (diff -r against the source), next to a replicated volume on the
#     same ring, which reads too;
#   - the disk bytes per published byte of copies:6 and rs:4/12 are
#     printed, and coded is below replicated;
#   - with 8 daemons killed (n - m = 8 holders of one data block, so
#     every block keeps at least m = 4; none of them the reader's) the
#     coded volume still reads whole;
#   - each killed daemon's store holds at most one fragment per key, and
#     a key's holders hold different fragments.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
CAT=$CFS_BIN/cfs-cat
MOUNT=$CFS_BIN/cfs-mount
TOOL=$CFS_BIN/cfs-storetool
export XDG_CONFIG_HOME=$TEST_DIR/config
N=16
M=5 # the reader's daemon
mnt=$TEST_DIR/mnt
MOUNT_PID=
umount_coded() {
	[ -n "$MOUNT_PID" ] || return 0
	fusermount -u "$mnt" 2>/dev/null || fusermount3 -u "$mnt" 2>/dev/null || true
	kill "$MOUNT_PID" 2>/dev/null || true
	wait "$MOUNT_PID" 2>/dev/null || true
	MOUNT_PID=
}
trap 'umount_coded; cleanup; cluster_cleanup' EXIT

src=$TEST_DIR/src
mkdir -p "$src/sub/deeper"
for i in 1 2 3; do head -c $((1 << 20)) /dev/urandom >"$src/big$i"; done
head -c $((200 * 1024 + 17)) /dev/urandom >"$src/sub/odd"
head -c 3000 /dev/urandom >"$src/sub/deeper/small"
echo "inline" >"$src/sub/tiny"
ln -s big1 "$src/link"
published=$(find "$src" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')

# replica maintenance every 2 s: its rounds run while the fragments are
# checked below (it must neither move nor copy them)
cluster_start "$N" 1 --stabilize-ms 250 --replicas 6 --sync-ms 2000
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"
echo "# ring of $N daemons converged in ${CLUSTER_CONVERGED_S}s"

disk_bytes() { # bytes stored on every live daemon
	local i total=0 b
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" || continue
		b=$("$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['dhash']['bytes']")
		total=$((total + b))
	done
	echo "$total"
}

# ---- a replicated and a coded volume on the same ring
"$PUBLISH" --keygen "$TEST_DIR/copies.key" >"$TEST_DIR/copies.vol" 2>/dev/null || fail "keygen"
"$PUBLISH" --keygen "$TEST_DIR/coded.key" >"$TEST_DIR/coded.vol" 2>/dev/null || fail "keygen"
vcopies=$(cat "$TEST_DIR/copies.vol")
vcoded=$(cat "$TEST_DIR/coded.vol")
expect_exit 2 "$PUBLISH" --key "$TEST_DIR/coded.key" --redundancy rs:12/4 "$src" 2>"$TEST_DIR/err"
grep -q "redundancy" "$TEST_DIR/err" || fail "rs:12/4 refused without saying why: $(cat "$TEST_DIR/err")"
expect_exit 1 "$PUBLISH" --key "$TEST_DIR/coded.key" --redundancy rs:4/12 --to "dir:$TEST_DIR/d" \
	"$src" 2>"$TEST_DIR/err"
grep -q "only be published to the ring" "$TEST_DIR/err" || fail "a coded dir: publish: $(cat "$TEST_DIR/err")"

before=$(disk_bytes)
"$PUBLISH" --key "$TEST_DIR/copies.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" \
	>/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish copies"; }
mid=$(disk_bytes)
"$PUBLISH" --key "$TEST_DIR/coded.key" --redundancy rs:4/12 --to "cfsd:$TEST_DIR/node0/cfsd.sock" \
	"$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish rs:4/12"; }
after=$(disk_bytes)
copies_bytes=$((mid - before))
coded_bytes=$((after - mid))
echo "# disk bytes per published byte ($published bytes of files): copies:6 $(awk -v a="$copies_bytes" -v p="$published" 'BEGIN { printf "%.2f", a / p }'), rs:4/12 $(awk -v a="$coded_bytes" -v p="$published" 'BEGIN { printf "%.2f", a / p }')"
[ "$coded_bytes" -lt "$copies_bytes" ] || fail "coded ($coded_bytes bytes) not below replicated ($copies_bytes)"
ok "both published; rs:4/12 stores $coded_bytes bytes, copies:6 $copies_bytes"

read_all() { # VOLUME, then how: cfs-cat's options; every file compared
	local vol=$1 f; shift
	for f in big1 big2 big3 sub/odd sub/deeper/small sub/tiny; do
		"$CAT" "$@" "$vol" "/$f" >"$TEST_DIR/got" 2>"$TEST_DIR/cat.err" ||
			{ cat "$TEST_DIR/cat.err"; return 1; }
		cmp -s "$TEST_DIR/got" "$src/$f" || { echo "/$f differs"; return 1; }
	done
}
read_all "$vcoded" --data "$TEST_DIR/node$M" || fail "the coded volume through cfsd"
read_all "$vcoded" --bootstrap "$(cluster_addr 3)" || fail "the coded volume as a plain ring client"
read_all "$vcopies" --data "$TEST_DIR/node$M" || fail "the replicated volume"
ok "both volumes read whole through cfs-cat (the coded one through cfsd and as a plain client)"

# cfs-fsck reads every block of the coded volume, its data blocks decoded
# from 4 fragments, through cfsd and as a plain ring client
fsck_whole() { # cfs-fsck's options: every file and byte of the tree counted
	"$CFS_BIN/cfs-fsck" "$@" "$vcoded" >"$TEST_DIR/fsck.out" 2>"$TEST_DIR/fsck.err" ||
		{ cat "$TEST_DIR/fsck.err"; return 1; }
	nfiles=$(find "$src" -type f | wc -l)
	grep -q "volume whole: $nfiles files" "$TEST_DIR/fsck.err" ||
		{ echo "not $nfiles files whole: $(tail -1 "$TEST_DIR/fsck.err")"; return 1; }
}
fsck_whole --data "$TEST_DIR/node$M" || fail "cfs-fsck of the coded volume through cfsd"
fsck_whole --from "ring:$(cluster_addr 3)" || fail "cfs-fsck of the coded volume as a plain client"
ok "cfs-fsck of the coded volume: $(tail -1 "$TEST_DIR/fsck.err")"
# cfs-fsck --replicas: every data block's 12 fragments on their holders
"$CFS_BIN/cfs-fsck" --data "$TEST_DIR/node$M" --replicas "$vcoded" >"$TEST_DIR/rep.out" 2>"$TEST_DIR/err" ||
	fail "cfs-fsck --replicas of the coded volume: $(cat "$TEST_DIR/err")"
grep -q " at n, 0 below n, 0 below m" "$TEST_DIR/err" ||
	fail "cfs-fsck --replicas of the coded volume: $(cat "$TEST_DIR/err")"
[ "$(grep -c " 12/4/12\$" "$TEST_DIR/rep.out")" -gt 0 ] || fail "no block at 12/4/12: $(head -3 "$TEST_DIR/rep.out")"
# a refresh renews every fragment (t_coded_fsck counts the leases)
"$PUBLISH" --key "$TEST_DIR/coded.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --refresh "$vcoded" \
	>/dev/null 2>"$TEST_DIR/err" || fail "--refresh of a coded volume: $(cat "$TEST_DIR/err")"
ok "cfs-fsck --replicas finds every fragment at 12/4/12; --refresh of the coded volume succeeds"

mkdir -p "$mnt"
"$MOUNT" -f --data "$TEST_DIR/node$M" --state-dir "$TEST_DIR/state" "$vcoded" "$mnt" \
	>/dev/null 2>>"$TEST_DIR/mount.log" &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted"; }
diff -r --no-dereference "$src" "$mnt" || fail "diff -r of the coded mount finds differences"
umount_coded
ok "cfs-mount of the coded volume: diff -r equal to the source"
# cfs-get shares the mount's reader: the coded volume copied out, and a
# version of it by number
"$CFS_BIN/cfs-get" -q --data "$TEST_DIR/node$M" "$vcoded@1" "$TEST_DIR/got-tree" ||
	fail "cfs-get of the coded volume"
diff -r --no-dereference "$src" "$TEST_DIR/got-tree" || fail "cfs-get of the coded volume differs"
ok "cfs-get copies the coded volume out (as $vcoded@1), equal to the source"

sync_rounds() { # the least sync rounds any live daemon has finished
	local i lo= r
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" || continue
		r=$("$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['dhash']['sync']['rounds']")
		[ -z "$lo" ] || [ "$r" -lt "$lo" ] && lo=$r
	done
	echo "$lo"
}
r0=$(sync_rounds)
rounds_at_least() { [ "$(sync_rounds)" -ge "$1" ]; }
wait_for 30 rounds_at_least $((r0 + 2)) || fail "replica maintenance did not run two rounds"
echo "# every daemon ran two more maintenance rounds since the publish"

# ---- n - m = 8 daemons gone: 8 of one data block's 12 holders, so every
# block keeps at least 4 (12 - 8) and that one exactly 4
for ((i = 0; i < N; i++)); do
	"$CFSCTL" --data "$TEST_DIR/node$i" keys | sed "s/\$/ $i/"
done >"$TEST_DIR/held"
# a coded data key is held by 12 daemons, a replicated block by k = 6:
# the put sees every fragment through, not only the 8 it is acknowledged at
short=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] > 6 && n[k] < 12) c++; print c + 0 }' "$TEST_DIR/held")
full=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 12) c++; print c + 0 }' "$TEST_DIR/held")
[ "$short" -eq 0 ] || fail "$short coded keys on fewer than 12 holders ($full on 12)"
ok "all $full coded keys on their 12 holders"
target=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 12) print k }' "$TEST_DIR/held" | sort | head -1)
[ -n "$target" ] || fail "no key held by 12 daemons"
# cfsctl get --code: one coded block through the reader's daemon, its
# payload one block of a published file; the key under another code refused
"$CFSCTL" --data "$TEST_DIR/node$M" get --code 4/12 "$target" >"$TEST_DIR/one" ||
	fail "cfsctl get --code 4/12 $target"
python3 - "$TEST_DIR/one" "$src" <<'PY' || fail "cfsctl get --code: not a block of the published files"
import os, sys
blk = open(sys.argv[1], "rb").read()
# a data block: ["cfs.data", 1, payload] (docs/FORMAT.md), payload a bin 8/16/32
head = b"\x93\xa8cfs.data\x01"
if not blk.startswith(head):
    sys.exit(1)
w = {0xc4: 1, 0xc5: 2, 0xc6: 4}.get(blk[len(head)], 0)
n = int.from_bytes(blk[len(head) + 1:len(head) + 1 + w], "big")
one = blk[len(head) + 1 + w:]
if not w or n != len(one):
    sys.exit(1)
for d, _, fs in os.walk(sys.argv[2]):
    for f in fs:
        p = os.path.join(d, f)
        if os.path.islink(p):
            continue
        b = open(p, "rb").read()
        if any(b[o:o + len(one)] == one for o in range(0, len(b), 65536)):
            sys.exit(0)
sys.exit(1)
PY
"$CFSCTL" --data "$TEST_DIR/node$M" get --check --code 5/12 "$target" >"$TEST_DIR/out" 2>&1 &&
	fail "cfsctl get --code 5/12 of an rs:4/12 key succeeded: $(cat "$TEST_DIR/out")"
grep -q "$target error" "$TEST_DIR/out" || fail "cfsctl get --code 5/12: $(cat "$TEST_DIR/out")"
expect_exit 2 "$CFSCTL" --data "$TEST_DIR/node$M" get --code 12/4 "$target"
grep -q -- "--code" "$TEST_DIR/err" || fail "cfsctl get --code 12/4: $(cat "$TEST_DIR/err")"
ok "cfsctl get --code 4/12 fetches ${target:0:8} ($(wc -c <"$TEST_DIR/one") bytes, a block of a published file); 5/12 and 12/4 refused"
# 8 of its holders, not the reader's daemon, and never every one of a
# replicated block's k holders (directories, inodes and roots are copies:
# losing all of them at once is the replicated volume's limit, not the code's)
mapfile -t killed < <(python3 - "$TEST_DIR/held" "$target" "$M" <<'PY'
import itertools, sys
held = {}
for line in open(sys.argv[1]):
    k, n = line.split()
    held.setdefault(k, set()).add(int(n))
cands = sorted(held[sys.argv[2]] - {int(sys.argv[3])})
whole = [h for h in held.values() if len(h) < 12]
for c in itertools.combinations(cands, 8):
    if all(h - set(c) for h in whole):
        print("\n".join(map(str, c)))
        break
PY
)
[ "${#killed[@]}" -eq 8 ] || fail "no 8 holders of $target to kill that leave every replicated block a copy"
for i in "${killed[@]}"; do cluster_kill "$i"; done
cluster_wait_correct 90 || fail "the ring of the 8 left did not converge"
start=$SECONDS
read_all "$vcoded" --data "$TEST_DIR/node$M" || fail "the coded volume with 8 daemons gone"
fsck_whole --data "$TEST_DIR/node$M" || fail "cfs-fsck of the coded volume with 8 daemons gone"
ok "the coded volume reads whole (cfs-cat, cfs-fsck) with 8 of 16 daemons killed, 8 of them holders of ${target:0:8} ($((SECONDS - start)) s)"

# ---- fragments in the killed daemons' stores
for i in "${killed[@]}"; do
	"$TOOL" frags "$TEST_DIR/node$i/blocks" | sed "s/\$/ node$i/"
done >"$TEST_DIR/frags"
nfrag=$(wc -l <"$TEST_DIR/frags")
[ "$nfrag" -gt 0 ] || fail "no fragment in the killed daemons' stores"
dup_key=$(awk '{ print $1, $4 }' "$TEST_DIR/frags" | sort | uniq -d | head -1)
[ -z "$dup_key" ] || fail "a store holds two records of one key: $dup_key"
dup_index=$(awk '{ print $1, $3 }' "$TEST_DIR/frags" | sort | uniq -d | head -1)
[ -z "$dup_index" ] || fail "two holders hold the same fragment: $dup_index"
keys=$(awk '{ print $1 }' "$TEST_DIR/frags" | sort -u | wc -l)
# of each key's 12 holders, those killed: at least 12 + 8 - 16 = 4
read -r lo hi < <(awk '{ n[$1]++ } END { lo = 99; for (k in n) { if (n[k] < lo) lo = n[k]; if (n[k] > hi) hi = n[k] } print lo, hi }' "$TEST_DIR/frags")
[ "$lo" -ge 4 ] || fail "a key with only $lo of its holders among the killed"
[ "$hi" -eq 8 ] || fail "at most $hi of a key's holders were killed, not 8"
ok "$nfrag fragments of $keys keys in 8 stores: one per key in each, no index held twice; $lo to $hi of each key's 12 holders were killed"
