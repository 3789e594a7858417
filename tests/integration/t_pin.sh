#!/bin/bash
# Pins keep a volume alive after its publisher stops renewing it, on a
# 5-daemon loopback ring (k = 3, leases of 30 s, collectors every second,
# caches off so that a read finds only replicas):
#   - volume A is pinned on node4, volume B is not, and the publisher never
#     refreshes either: past the 30 s lease A is whole and B is gone;
#   - `cfsctl pins` reports the rounds (blocks, renewed, ...);
#   - node4 stopped until every copy of A on the ring has expired and been
#     collected, then started again: the pin was kept (DATA/pins), its
#     rounds put every block back from its own copies (DATA/pinned), and A
#     is whole again;
#   - unpin empties the list, on disk too;
#   - a pinned coded volume (rs:4/5) outlives its lease, every fragment
#     renewed on all 5 holders, and a block left below 4 fragments is put
#     back by the next round.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/state
K=3
N=5
P=4              # the pinning daemon
LEASE=0.00035    # 30.2 s
PIN_MS=2000

held_of() { # KEYS-FILE: how many of those keys some live server stores
	cluster_collect "$TEST_DIR/held"
	sort -u "$TEST_DIR"/held/*.keys | grep -cFxf "$1" || true
}
fsck() { # VOLUME: is it whole, read through node1?
	timeout 60 "$FSCK" --from "cfsd:$TEST_DIR/node1/cfsd.sock" "$1" >/dev/null 2>"$TEST_DIR/fsck.err"
}
pins_json() { "$CFSCTL" --data "$TEST_DIR/node$P" pins --json; }
# pin_field EXPR: a field of the first pin, e.g. "['last']['restored']".
pin_field() { pins_json | jget "['pins'][0]$1"; }
rounds_done() { [ "$(pin_field "['rounds']")" -ge "$1" ]; }

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --lease-days "$LEASE" --expire-ms 1000 \
	--sync-ms 2000 --cache-mb 0 --pin-ms "$PIN_MS"
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"

for v in a b; do
	"$PUBLISH" --keygen "$TEST_DIR/$v.key" >"$TEST_DIR/$v.vol" 2>/dev/null || fail "keygen $v"
	mkdir -p "$TEST_DIR/src-$v/sub"
	for i in $(seq 1 12); do head -c $((2000 + i * 3000)) /dev/urandom >"$TEST_DIR/src-$v/f$i"; done
	for i in $(seq 1 30); do echo "$v $i" >"$TEST_DIR/src-$v/sub/s$i"; done
done
A=$(cat "$TEST_DIR/a.vol")
B=$(cat "$TEST_DIR/b.vol")
publish() { # VOLUME-LETTER
	"$PUBLISH" --key "$TEST_DIR/$1.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --valid "$LEASE" \
		--quiet "$TEST_DIR/src-$1" >/dev/null 2>"$TEST_DIR/pub.err" ||
		{ cat "$TEST_DIR/pub.err" >&2; fail "publish $1"; }
}

# ---- argument checks
expect_exit 2 "$CFSCTL" --data "$TEST_DIR/node$P" pin not-a-volume
expect_exit 2 "$CFSCTL" --data "$TEST_DIR/node$P" pin
expect_exit 3 "$CFSCTL" --data "$TEST_DIR/node$P" unpin "$A"
expect_exit 1 "$CFSCTL" --data "$TEST_DIR/nowhere" pins
ok "cfsctl pin / unpin / pins refuse bad arguments; unpin of a volume not pinned exits 3"

# ---- publish A (its keys are everything on the ring now), then B
t0=$SECONDS
publish a
cluster_collect "$TEST_DIR/held"
sort -u "$TEST_DIR"/held/*.keys | grep -v '^#' >"$TEST_DIR/a.keys"
na=$(wc -l <"$TEST_DIR/a.keys")
publish b
"$CFSCTL" --data "$TEST_DIR/node$P" pin "$A" >"$TEST_DIR/out" || fail "pin"
grep -q "pinned" "$TEST_DIR/out" || fail "pin said: $(cat "$TEST_DIR/out")"
"$CFSCTL" --data "$TEST_DIR/node$P" pin "$A" | grep -q "pinned already" || fail "a second pin"
wait_for 20 rounds_done 1 || fail "no pin round ended: $(pins_json)"
[ "$(pin_field "['last']['blocks']")" -eq "$na" ] ||
	fail "the round reached $(pin_field "['last']['blocks']") blocks of $na: $(pins_json)"
echo "# A ($na blocks) and B published with a $((30)) s lease; A pinned on node$P: first round in $(pin_field "['last']['ms']") ms, $(pin_field "['last']['fetched']") blocks copied"
grep -q "^$A 1 1\$" "$TEST_DIR/node$P/pins" || fail "DATA/pins: $(cat "$TEST_DIR/node$P/pins")"

# ---- past the lease: A whole, B gone
while [ $((SECONDS - t0)) -lt 45 ]; do sleep 1; done
fsck "$B" && fail "B, not pinned, is still whole $((SECONDS - t0)) s after its 30 s lease"
fsck "$A" || fail "A, pinned, is not whole $((SECONDS - t0)) s after publishing: $(cat "$TEST_DIR/fsck.err")"
[ "$(held_of "$TEST_DIR/a.keys")" -eq "$na" ] || fail "A's blocks are not all on the ring"
renewed=$(pin_field "['last']['renewed']")
[ "$renewed" -eq "$na" ] || fail "the last round renewed $renewed of $na: $(pins_json)"
echo "# $((SECONDS - t0)) s after publishing with a 30 s lease: B (not pinned) missing, A whole; $(pin_field "['rounds']") rounds, the last renewed $renewed of $na leases"
"$CFSCTL" --data "$TEST_DIR/node$P" pins | sed 's/^/# pins: /'
ok "a pinned volume outlives its lease; an unpinned one does not"

# ---- every ring copy of A gone while the pinner is down; back after it returns
cluster_stop "$P"
t1=$SECONDS
end=$((SECONDS + 90))
while :; do
	left=$(held_of "$TEST_DIR/a.keys")
	[ "$left" -eq 0 ] && break
	[ $SECONDS -lt $end ] || fail "$left of A's $na blocks still on the ring $((SECONDS - t1)) s after node$P stopped"
	sleep 1
done
echo "# node$P stopped: every copy of A's $na blocks on the other servers expired and collected after $((SECONDS - t1)) s"
fsck "$A" && fail "A is whole with no copy on the ring"
grep -q "^$A " "$TEST_DIR/node$P/pins" || fail "the pin is not on disk"
t2=$SECONDS
cluster_restart "$P"
pins_json | grep -q "\"$A\"" || fail "the pin did not survive the restart: $(pins_json)"
wait_for 60 fsck "$A" || fail "A not whole $((SECONDS - t2)) s after node$P came back: $(pins_json)"
back=$((SECONDS - t2))
wait_for 20 rounds_done 2 || true
grep -h "pin $A: round" "$TEST_DIR/node$P.log" | tail -n 3 | sed 's/^.*round/# node4 log: round/'
restored=$(grep -h "pin $A: round" "$TEST_DIR/node$P.log" | sed -n 's/.* \([0-9]*\) re-stored.*/\1/p' |
	awk '{ s += $1 } END { print s + 0 }')
[ "$restored" -gt 0 ] || fail "no block was re-stored: $(pins_json)"
[ "$(held_of "$TEST_DIR/a.keys")" -eq "$na" ] || fail "A's blocks are not all back on the ring"
echo "# node$P restarted: its pin was kept; A whole again after ${back} s, $restored blocks put back from DATA/pinned; the round after renewed $(pin_field "['last']['renewed']") of $na"
ok "a pin survives a restart and puts back blocks that vanished from the ring"

# ---- a new version is followed
echo "version 2" >"$TEST_DIR/src-a/f1"
publish a
wait_for 20 sh -c "grep -q '^$A 2 1\$' '$TEST_DIR/node$P/pins'" || fail "the pin did not follow root 2: $(pins_json)"
[ "$(pin_field "['seq']")" -eq 2 ] || fail "pins: $(pins_json)"
ok "the pin follows the volume's new root"

# ---- unpin
"$CFSCTL" --data "$TEST_DIR/node$P" unpin "$A" | grep -q unpinned || fail "unpin"
[ "$(pins_json | jget "['pins'].__len__()")" -eq 0 ] || fail "pins after unpin: $(pins_json)"
grep -q "^$A " "$TEST_DIR/node$P/pins" && fail "DATA/pins still names A"
"$CFSCTL" --data "$TEST_DIR/node$P" pins | grep -q "^0 pins" || fail "pins text: $("$CFSCTL" --data "$TEST_DIR/node$P" pins)"
ok "unpin forgets the volume, on disk too"

# ---- a coded volume (rs:4/5: every daemon holds one of each data block's
# 5 fragments): pinned, it outlives its lease, every fragment renewed on
# all 5 holders (renewing only the first k = 3 would leave 3 of 5, below
# the 4 a read needs), and a block pushed below 4 fragments is put back
mkdir -p "$TEST_DIR/src-c"
for i in 1 2 3; do head -c $((60000 + i * 1000)) /dev/urandom >"$TEST_DIR/src-c/f$i"; done
"$PUBLISH" --keygen "$TEST_DIR/c.key" >"$TEST_DIR/c.vol" 2>/dev/null || fail "keygen c"
C=$(cat "$TEST_DIR/c.vol")
cluster_collect "$TEST_DIR/held"
sort -u "$TEST_DIR"/held/*.keys | grep -v '^#' >"$TEST_DIR/before-c.keys"
t3=$SECONDS
"$PUBLISH" --key "$TEST_DIR/c.key" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --valid "$LEASE" \
	--redundancy rs:4/5 --quiet "$TEST_DIR/src-c" >/dev/null 2>"$TEST_DIR/pub.err" ||
	{ cat "$TEST_DIR/pub.err" >&2; fail "publish c (rs:4/5)"; }
"$CFSCTL" --data "$TEST_DIR/node$P" pin "$C" >/dev/null || fail "pin C"
cluster_collect "$TEST_DIR/held"
cat "$TEST_DIR"/held/*.keys | grep -v '^#' | sort | uniq -c | awk '$1 == 5 { print $2 }' |
	grep -vFxf "$TEST_DIR/before-c.keys" >"$TEST_DIR/c-coded.keys" || true
ncoded=$(wc -l <"$TEST_DIR/c-coded.keys")
[ "$ncoded" -ge 3 ] || fail "only $ncoded of C's keys on 5 servers"
while [ $((SECONDS - t3)) -lt 45 ]; do sleep 1; done
fsck "$C" || fail "C, pinned, is not whole $((SECONDS - t3)) s after its 30 s lease: $(cat "$TEST_DIR/fsck.err")"
cluster_collect "$TEST_DIR/held"
low=$(cat "$TEST_DIR"/held/*.keys | grep -Fxf "$TEST_DIR/c-coded.keys" | sort | uniq -c | awk '$1 != 5' | wc -l)
[ "$low" -eq 0 ] || fail "$low of C's $ncoded coded keys are not on all 5 holders after the lease"
ok "a pinned coded volume outlives its lease: its $ncoded data blocks' fragments renewed on all 5 holders"

# two of one block's five fragments deleted: 3 left, below m = 4
victim=$(head -1 "$TEST_DIR/c-coded.keys")
for i in 1 2; do
	"$CFSCTL" --data "$TEST_DIR/node$i" deny "$victim" >/dev/null || fail "deny on node$i"
	"$CFSCTL" --data "$TEST_DIR/node$i" deny --remove "$victim" >/dev/null || fail "allow on node$i"
done
back_on_5() {
	cluster_collect "$TEST_DIR/held"
	[ "$(cat "$TEST_DIR"/held/*.keys | grep -cFx "$victim")" -eq 5 ]
}
t4=$SECONDS
wait_for 30 back_on_5 || fail "the pin did not put $victim's fragments back: $(pins_json)"
grep -h "pin $C: round" "$TEST_DIR/node$P.log" | tail -n 1 | sed 's/^.*round/# node4 log: round/'
fsck "$C" || fail "C not whole after the put back: $(cat "$TEST_DIR/fsck.err")"
ok "a coded block left with 3 of 5 fragments was put back on all 5 by the pin in $((SECONDS - t4)) s"
