#!/bin/bash
# cfs-fsck --replicas [--repair] of an erasure-coded volume on a
# 10-daemon loopback ring (k = 6, rs:4/8):
#   - with every fragment in place, each data block reads 8/4/8 and each
#     metadata block 6/6, through cfsd and as a plain ring client;
#   - one data block's fragment deleted from two of its holders (cfsctl
#     deny, then deny --remove: the copy is gone, the key allowed again):
#     fsck names exactly those two holders' addresses as missing for that
#     block, every other block is whole, the summary counts one block
#     below n and none below m, and the exit code is 1;
#   - --repair rebuilds the two fragments from 4 good ones and stores each
#     on the holder that lacks it; a second fsck reports every block at n;
#   - leases: a republish of an unchanged coded tree and cfs-publish
#     --refresh renew every fragment on all 8 holders, not only 6;
#   - a volume of 128 KiB blocks is coded and read back whole;
#   - a holder killed: the successors move along, fragments count by
#     their index wherever they stand, the blocks it held are at n - 1,
#     and --repair puts the lost index on the holder without one.
# The holders are found from the daemons' own key lists (cfsctl keys).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
N=10
R=3 # the reader's daemon
trap 'cleanup; cluster_cleanup' EXIT

src=$TEST_DIR/src
mkdir -p "$src/sub"
head -c $((300 * 1024)) /dev/urandom >"$src/a"
head -c $((100 * 1024 + 7)) /dev/urandom >"$src/sub/b"
echo small >"$src/sub/c"

cluster_start "$N" 1 --stabilize-ms 250 --replicas 6
cluster_wait_correct 90 || fail "the $N-daemon ring did not converge"
echo "# ring of $N daemons converged in ${CLUSTER_CONVERGED_S}s"

"$PUBLISH" --keygen "$TEST_DIR/v.key" >"$TEST_DIR/v.vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/v.vol")
"$PUBLISH" --key "$TEST_DIR/v.key" --redundancy rs:4/8 --to "cfsd:$TEST_DIR/node0/cfsd.sock" \
	"$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish rs:4/8"; }

held() { # KEY NODE lines: what every daemon stores
	local i
	for ((i = 0; i < N; i++)); do
		"$CFSCTL" --data "$TEST_DIR/node$i" keys | sed "s/\$/ $i/"
	done
}
held >"$TEST_DIR/held"
# a coded key has 8 holders, a replicated block k = 6
ncoded=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 8) c++; print c + 0 }' "$TEST_DIR/held")
nother=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] != 8 && n[k] != 6) c++; print c + 0 }' "$TEST_DIR/held")
[ "$ncoded" -ge 5 ] || fail "only $ncoded keys on 8 holders"
[ "$nother" -eq 0 ] || fail "$nother keys on neither 8 nor 6 holders"

fsck_r() { # OUTPUT-NAME, then cfs-fsck's options; its exit code in $rc
	local out=$1; shift
	rc=0
	"$FSCK" "$@" --replicas "$vol" >"$TEST_DIR/$out.out" 2>"$TEST_DIR/$out.err" || rc=$?
}
# every line: KEY GOOD/K or KEY GOOD/4/8, then the holders lacking theirs
check_whole() { # OUTPUT-NAME
	local out=$1 lines coded
	lines=$(wc -l <"$TEST_DIR/$out.out")
	coded=$(awk '$2 == "8/4/8" && NF == 2' "$TEST_DIR/$out.out" | wc -l)
	[ "$coded" -eq "$ncoded" ] || { cat "$TEST_DIR/$out.out" "$TEST_DIR/$out.err"; return 1; }
	[ "$(awk '$2 == "6/6" && NF == 2' "$TEST_DIR/$out.out" | wc -l)" -eq $((lines - coded)) ] ||
		{ cat "$TEST_DIR/$out.out"; return 1; }
	grep -q "$ncoded data blocks as rs:4/8 fragments: $ncoded at n, 0 below n, 0 below m" \
		"$TEST_DIR/$out.err" || { cat "$TEST_DIR/$out.err"; return 1; }
}
t0=$(date +%s%N)
fsck_r whole --data "$TEST_DIR/node$R"
echo "# fsck --replicas of $(wc -l <"$TEST_DIR/whole.out") blocks ($ncoded coded) through cfsd: $((($(date +%s%N) - t0) / 1000000)) ms"
[ "$rc" -eq 0 ] || { cat "$TEST_DIR/whole.err"; fail "fsck --replicas of the whole volume exited $rc"; }
check_whole whole || fail "fsck --replicas through cfsd: not every block at n / k"
fsck_r whole-plain --from "ring:$(cluster_addr 1)"
[ "$rc" -eq 0 ] || { cat "$TEST_DIR/whole-plain.err"; fail "fsck --replicas as a plain client exited $rc"; }
check_whole whole-plain || fail "fsck --replicas as a plain client: not every block at n / k"
ok "fsck --replicas: $ncoded coded blocks at 8/4/8, the rest at 6/6 (through cfsd and a plain client)"

# ---- one fragment gone from two holders of one coded key
target=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 8) print k }' "$TEST_DIR/held" | sort | head -1)
mapfile -t victims < <(awk -v k="$target" -v r="$R" '$1 == k && $2 != r { print $2 }' "$TEST_DIR/held" |
	shuf -n 2 | sort -n)
[ "${#victims[@]}" -eq 2 ] || fail "no two holders of $target"
for i in "${victims[@]}"; do
	"$CFSCTL" --data "$TEST_DIR/node$i" deny "$target" >/dev/null || fail "deny on node$i"
	"$CFSCTL" --data "$TEST_DIR/node$i" deny --remove "$target" >/dev/null || fail "allow on node$i"
	! "$CFSCTL" --data "$TEST_DIR/node$i" keys | grep -q "$target" || fail "node$i still holds $target"
done
want=$(for i in "${victims[@]}"; do echo "missing $(cluster_addr "$i")"; done | sort | tr '\n' ' ')
check_damaged() { # OUTPUT-NAME
	local out=$1 line got
	[ "$rc" -eq 1 ] || { cat "$TEST_DIR/$out.err"; echo "exit $rc, not 1"; return 1; }
	line=$(grep "^$target " "$TEST_DIR/$out.out") || { echo "no line for $target"; return 1; }
	[ "$(echo "$line" | awk '{ print $2 }')" = "6/4/8" ] || { echo "$line"; return 1; }
	got=$(echo "$line" | awk '{ for (i = 3; i < NF; i += 2) print $i, $(i + 1) }' | sort | tr '\n' ' ')
	[ "$got" = "$want" ] || { echo "named: $got; want: $want"; return 1; }
	[ "$(awk '$2 == "8/4/8" && NF == 2' "$TEST_DIR/$out.out" | wc -l)" -eq $((ncoded - 1)) ] ||
		{ cat "$TEST_DIR/$out.out"; return 1; }
	grep -q "$ncoded data blocks as rs:4/8 fragments: $((ncoded - 1)) at n, 1 below n, 0 below m" \
		"$TEST_DIR/$out.err" || { cat "$TEST_DIR/$out.err"; return 1; }
}
fsck_r damaged --data "$TEST_DIR/node$R"
check_damaged damaged || fail "fsck --replicas through cfsd after the deletes"
fsck_r damaged-plain --from "ring:$(cluster_addr 1)"
check_damaged damaged-plain || fail "fsck --replicas as a plain client after the deletes"
ok "fsck --replicas names exactly the two holders without their fragment: $(grep "^$target " "$TEST_DIR/damaged.out" | cut -c1-8,65-)"

# ---- --repair: the two fragments rebuilt from 4 and stored on their holders
rc=0
t0=$(date +%s%N)
"$FSCK" --data "$TEST_DIR/node$R" --replicas --repair "$vol" >"$TEST_DIR/repair.out" \
	2>"$TEST_DIR/repair.err" || rc=$?
echo "# fsck --replicas --repair of one block's 2 fragments, with both locates: $((($(date +%s%N) - t0) / 1000000)) ms"
[ "$rc" -eq 0 ] || { cat "$TEST_DIR/repair.out" "$TEST_DIR/repair.err"; fail "--repair exited $rc"; }
grep -q "^1 blocks stored again\|: 1 blocks stored again" "$TEST_DIR/repair.err" ||
	{ cat "$TEST_DIR/repair.err"; fail "--repair did not store one block again"; }
[ "$(sed -n '/^# after repair/,$p' "$TEST_DIR/repair.out" | grep "^$target " | awk '{ print $2, NF }')" = "8/4/8 2" ] ||
	{ cat "$TEST_DIR/repair.out"; fail "after the repair $target is not at 8/4/8"; }
for i in "${victims[@]}"; do
	"$CFSCTL" --data "$TEST_DIR/node$i" keys | grep -q "$target" ||
		fail "node$i does not hold $target after the repair"
done
# each holder keeps the fragment of its own index: the next fsck verifies
# every one (index == position), through the plain client this time
fsck_r repaired-plain --from "ring:$(cluster_addr 1)"
[ "$rc" -eq 0 ] || { cat "$TEST_DIR/repaired-plain.err"; fail "fsck after the repair exited $rc"; }
check_whole repaired-plain || fail "fsck after the repair: not every block at n / k"
ok "--repair stored the 2 fragments on ${victims[*]/#/node}; fsck then finds all $ncoded coded blocks at 8/4/8"

drop_frag() { # KEY NODE...: delete KEY's fragment on those daemons
	local key=$1 i; shift
	for i in "$@"; do
		"$CFSCTL" --data "$TEST_DIR/node$i" deny "$key" >/dev/null || fail "deny on node$i"
		"$CFSCTL" --data "$TEST_DIR/node$i" deny --remove "$key" >/dev/null || fail "allow on node$i"
	done
}
# ---- the same as a plain ring client: another key, one holder
other=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 8) print k }' "$TEST_DIR/held" | sort | sed -n 2p)
one=$(awk -v k="$other" '$1 == k { print $2 }' "$TEST_DIR/held" | shuf -n 1)
drop_frag "$other" "$one"
rc=0
"$FSCK" --from "ring:$(cluster_addr 1)" --replicas --repair "$vol" >"$TEST_DIR/repair2.out" \
	2>"$TEST_DIR/repair2.err" || rc=$?
[ "$rc" -eq 0 ] || { cat "$TEST_DIR/repair2.out" "$TEST_DIR/repair2.err"; fail "plain --repair exited $rc"; }
[ "$(sed -n '/^# after repair/,$p' "$TEST_DIR/repair2.out" | grep "^$other " | awk '{ print $2, NF }')" = "8/4/8 2" ] ||
	{ cat "$TEST_DIR/repair2.out"; fail "after the plain repair $other is not at 8/4/8"; }
[ "$(grep "^$other " "$TEST_DIR/repair2.out" | head -1 | awk '{ print $2, $3, $4 }')" = "7/4/8 missing $(cluster_addr "$one")" ] ||
	{ cat "$TEST_DIR/repair2.out"; fail "the plain client did not name node$one"; }
ok "as a plain ring client: node$one's fragment of ${other:0:8} named, rebuilt and stored back"

# ---- below m: 5 of 8 fragments gone, 3 left: unreadable, not repairable
third=$(awk '{ n[$1]++ } END { for (k in n) if (n[k] == 8) print k }' "$TEST_DIR/held" | sort | sed -n 3p)
mapfile -t five < <(awk -v k="$third" '$1 == k { print $2 }' "$TEST_DIR/held" | shuf -n 5)
drop_frag "$third" "${five[@]}"
rc=0
"$FSCK" --data "$TEST_DIR/node$R" --replicas --repair "$vol" >"$TEST_DIR/lost.out" \
	2>"$TEST_DIR/lost.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$TEST_DIR/lost.err"; fail "--repair with a block below m exited $rc, not 1"; }
[ "$(grep "^$third " "$TEST_DIR/lost.out" | head -1 | awk '{ print $2, NF }')" = "3/4/8 12" ] ||
	{ cat "$TEST_DIR/lost.out"; fail "$third not reported at 3/4/8 with its 5 holders"; }
grep -q "$third has fewer than 4 good fragments: it cannot be rebuilt" "$TEST_DIR/lost.err" ||
	{ cat "$TEST_DIR/lost.err"; fail "no 'cannot be rebuilt' line"; }
grep -q "$((ncoded - 1)) at n, 1 below n, 1 below m (unreadable)" "$TEST_DIR/lost.err" ||
	{ cat "$TEST_DIR/lost.err"; fail "the summary does not count one block below m"; }
ok "a block at 3 of 4 needed fragments: reported below m, unrepairable, exit 1"

# ---- leases: a coded volume's fragments are renewed on all n holders
# (k = 6 of the 8 before), by a republish and by --refresh. Copies whose
# lease ends within a day, over the whole ring (cfsctl status):
within_day() {
	cluster_status_all "$TEST_DIR/st"
	cluster_status_sum "$TEST_DIR/st" dhash.leases_expiring.day
}
lsrc=$TEST_DIR/lsrc
mkdir -p "$lsrc"
for i in 1 2 3; do head -c $((70000 + i * 999)) /dev/urandom >"$lsrc/f$i"; done
pub_lease() { # KEY ARGS...
	local key=$1; shift
	"$PUBLISH" --key "$key" --redundancy rs:4/8 --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$@" \
		>/dev/null 2>"$TEST_DIR/lease.err" || { cat "$TEST_DIR/lease.err"; fail "cfs-publish $*"; }
}
base=$(within_day)
for v in l1 l2; do "$PUBLISH" --keygen "$TEST_DIR/$v.key" >"$TEST_DIR/$v.vol" 2>/dev/null || fail "keygen"; done
pub_lease "$TEST_DIR/l1.key" --valid 0.5 "$lsrc"
short=$(( $(within_day) - base ))
# 3 files of 2 blocks: 6 coded keys at 8 fragments, the rest at 6 copies
[ "$short" -ge $((6 * 8)) ] || fail "a 12-hour publish left only $short copies ending within a day"
pub_lease "$TEST_DIR/l1.key" "$lsrc" # the same tree again, a 30-day lease
left=$(( $(within_day) - base ))
# left: the first version's record (its version key, k = 6 copies), which
# a newer version does not renew: old versions expire
[ "$left" -eq 6 ] || fail "after the republish $left of $short copies still end within a day, not 6"
ok "a republish of an unchanged coded tree renewed all $((short - 6)) copies but the old version's, fragments on all 8 holders"
lsrc2=$TEST_DIR/lsrc2 # other bytes: other keys than l1's, renewed above
mkdir -p "$lsrc2"
for i in 1 2 3; do head -c $((70000 + i * 999)) /dev/urandom >"$lsrc2/f$i"; done
base=$(within_day)
pub_lease "$TEST_DIR/l2.key" --valid 0.5 "$lsrc2"
short=$(( $(within_day) - base ))
[ "$short" -ge $((6 * 8)) ] || fail "the second 12-hour publish left only $short copies within a day"
"$PUBLISH" --key "$TEST_DIR/l2.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --refresh "$(cat "$TEST_DIR/l2.vol")" \
	>/dev/null 2>"$TEST_DIR/refresh.err" || { cat "$TEST_DIR/refresh.err"; fail "--refresh of a coded volume"; }
left=$(( $(within_day) - base ))
[ "$left" -eq 6 ] || fail "after --refresh $left of $short copies still end within a day, not 6"
ok "--refresh of a coded volume renewed all $((short - 6)) copies but the old version's, fragments on all 8 holders"

# ---- the largest blocks (--block-size 131072) can be coded too
bsrc=$TEST_DIR/bsrc
mkdir -p "$bsrc"
head -c $((300 * 1024)) /dev/urandom >"$bsrc/big"
"$PUBLISH" --keygen "$TEST_DIR/b.key" >"$TEST_DIR/b.vol" 2>/dev/null || fail "keygen"
"$PUBLISH" --key "$TEST_DIR/b.key" --redundancy rs:4/8 --block-size 131072 \
	--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$bsrc" >/dev/null 2>"$TEST_DIR/b.err" ||
	{ cat "$TEST_DIR/b.err"; fail "publish rs:4/8 with 128 KiB blocks"; }
"$CFS_BIN/cfs-cat" --data "$TEST_DIR/node$R" "$(cat "$TEST_DIR/b.vol")" /big >"$TEST_DIR/b.got" \
	2>"$TEST_DIR/b.cat" || { cat "$TEST_DIR/b.cat"; fail "cfs-cat of the 128 KiB-block volume"; }
cmp -s "$bsrc/big" "$TEST_DIR/b.got" || fail "the 128 KiB-block coded volume read other bytes"
ok "a coded volume of 128 KiB blocks publishes and reads back whole"

# ---- a holder dies: the key's successors move along. The survivors'
# fragments count by their index wherever they now stand, the block is at
# n - 1, and --repair stores the lost index on the holder that moved in
# without one (a killed daemon sends no goodbye: no drain). The victim is
# a daemon that holds a fragment of a block at n (node IDs are random: a
# given daemon may hold none, when every coded key falls where its 8
# holders leave it out).
fsck_r pre --data "$TEST_DIR/node$R"
victim=
for i in 7 6 5 4 2 1 8 9; do
	"$CFSCTL" --data "$TEST_DIR/node$i" keys >"$TEST_DIR/victim.keys"
	if awk 'NR == FNR { v[$1] = 1; next } $2 == "8/4/8" && ($1 in v) { found = 1 } END { exit !found }' \
		"$TEST_DIR/victim.keys" "$TEST_DIR/pre.out"; then
		victim=$i
		break
	fi
done
[ -n "$victim" ] || { cat "$TEST_DIR/pre.out"; fail "no daemon but node0 and node$R holds a fragment of a block at 8/4/8"; }
cluster_kill "$victim"
cluster_wait_correct 60 || fail "the ring did not converge after node$victim died"
fsck_r post --data "$TEST_DIR/node$R"
[ "$rc" -eq 1 ] || { cat "$TEST_DIR/post.err"; fail "fsck after node$victim died exited $rc, not 1"; }
# every coded key: one good fragment fewer exactly when the victim held one
bad=$(awk 'NR == FNR { v[$1] = 1; next }
	FILENAME ~ /pre/ && $2 ~ /\/4\/8$/ { split($2, g, "/"); pre[$1] = g[1]; next }
	FILENAME ~ /post/ && $2 ~ /\/4\/8$/ { split($2, g, "/"); want = pre[$1] - ($1 in v);
		if (g[1] != want) { print $1, "pre", pre[$1], "post", g[1], "want", want } }' \
	"$TEST_DIR/victim.keys" "$TEST_DIR/pre.out" "$TEST_DIR/post.out")
[ -z "$bad" ] || fail "counts after node$victim died: $bad"
lost=$(awk '$2 == "7/4/8"' "$TEST_DIR/post.out" | wc -l)
[ "$lost" -ge 1 ] || fail "node$victim held no fragment at n: nothing to check"
moved=$(grep -c " index-" "$TEST_DIR/post.out" || true)
echo "# node$victim killed: $lost coded blocks at 7/4/8; $moved blocks with fragments counted at other positions"
rc=0
"$FSCK" --data "$TEST_DIR/node$R" --replicas --repair "$vol" >"$TEST_DIR/repair3.out" \
	2>"$TEST_DIR/repair3.err" || rc=$?
# still 1: the block left below m above cannot be rebuilt
[ "$rc" -eq 1 ] || { cat "$TEST_DIR/repair3.err"; fail "--repair after the death exited $rc, not 1"; }
sed -n '/^# after repair/,$p' "$TEST_DIR/repair3.out" >"$TEST_DIR/after3.out"
for k in $(awk '$2 == "7/4/8" { print $1 }' "$TEST_DIR/post.out"); do
	[ "$(grep "^$k " "$TEST_DIR/after3.out" | awk '{ print $2 }')" = "8/4/8" ] ||
		{ cat "$TEST_DIR/repair3.out"; fail "$k not back at 8/4/8 after --repair"; }
done
ok "a holder killed: $lost blocks at 7/4/8, each back at 8 distinct fragments after --repair"
