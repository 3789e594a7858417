#!/bin/bash
# The offline store is a real store:
#   - a tree published into a dir: store mounts straight from it (cfs-mount
#     --from dir:PATH: no ring, no daemon) and reads back equal to its
#     source, through a real kernel FUSE mount;
#   - cfs-publish --from dir:PATH --to ring:HOST:PORT VOLUME pushes it into
#     a 6-daemon loopback ring (k = 3): the first push sends every block the
#     publish stored, a second sends none, and after a republish into the
#     dir: store only the blocks that republish stored travel;
#   - the pushed volume verifies from the ring (cfs-fsck) and mounts from
#     it, equal to the source again;
#   - refusals: a missing store, a volume the store does not hold, a ring
#     that holds a newer root, an expired root.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
. "$(dirname "$0")/../harness/tree.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
MOUNT=$CFS_BIN/cfs-mount
CAT=$CFS_BIN/cfs-cat
LISTING=$(dirname "$0")/tree-listing.py
export XDG_CONFIG_HOME=$TEST_DIR/config
unset CFS_BOOTSTRAP CFS_STORE
export CFS_DATA_DIR=$TEST_DIR/no-daemon-here # no cfsd answers there
N=6
K=3
store=$TEST_DIR/store
state=$TEST_DIR/pubstate
mnt=$TEST_DIR/mnt
MOUNT_PID=
trap 'mount_cleanup; cleanup; cluster_cleanup' EXIT

# ---- the tree, published offline
src=$TEST_DIR/src
make_tree "$src/tree" 500 8
head -c $((5 << 20)) /dev/urandom >"$src/five-mb"
echo v1 >"$src/version"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "dir:$store" --state-dir "$state" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/pub1.err" ||
	{ cat "$TEST_DIR/pub1.err"; fail "publish to dir:"; }
# "..., N blocks, M sent (X MB), ...": into an empty store, M is every
# distinct block of the volume, counted by the publisher's own walk
pub_sent() { sed -n 's/.* blocks, \([0-9]*\) sent .*/\1/p' "$1"; }
sent1=$(pub_sent "$TEST_DIR/pub1.err")
[ -n "$sent1" ] && [ "$sent1" -gt 600 ] || fail "publish sent '$sent1' blocks: $(cat "$TEST_DIR/pub1.err")"
python3 "$LISTING" "$src" | sort >"$TEST_DIR/source"
entries=$(wc -l <"$TEST_DIR/source")
ok "published offline: $sent1 blocks, $entries entries"

# ---- mounted straight from the dir: store, no ring and no daemon
mkdir -p "$mnt"
start_mount() { # cfs-mount options...
	"$MOUNT" -f --state-dir "$TEST_DIR/mstate" "$@" "$vol" "$mnt" >"$TEST_DIR/mount.out" \
		2>>"$TEST_DIR/mount.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted ($*)"; }
}
stop_mount() {
	kill -TERM "$MOUNT_PID"
	wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
	MOUNT_PID=
	mountpoint -q "$mnt" && fail "still mounted after SIGTERM"
	true
}
compare_mount() { # what
	python3 "$LISTING" "$mnt" | sort >"$TEST_DIR/mounted"
	diff "$TEST_DIR/source" "$TEST_DIR/mounted" >"$TEST_DIR/diff" ||
		{ head -20 "$TEST_DIR/diff"; fail "$1: the mounted tree differs from the source"; }
	diff -r --no-dereference "$src" "$mnt" || fail "$1: diff -r finds differences"
}
start_mount --from "dir:$store"
compare_mount "mounted from dir:"
stop_mount
ok "mounted from the dir: store with no ring and no daemon: $entries entries equal (listing and diff -r)"
"$CAT" --from "dir:$store" "$vol" /five-mb | cmp -s - "$src/five-mb" || fail "cfs-cat --from dir:"
ok "cfs-cat --from dir: reads a 5 MiB file"
expect_exit 1 "$MOUNT" -f --from "dir:$TEST_DIR/nowhere" "$vol" "$mnt"
grep -q "nowhere" "$TEST_DIR/err" || fail "a missing store: $(cat "$TEST_DIR/err")"
[ -e "$TEST_DIR/nowhere" ] && fail "mounting from a missing store created it"
ok "a missing store is refused, not created"

# ---- refusals before any ring
expect_exit 1 "$PUBLISH" --from "dir:$TEST_DIR/nowhere" --to "dir:$TEST_DIR/other" "$vol"
grep -q "no such store: $TEST_DIR/nowhere does not exist" "$TEST_DIR/err" || fail "push from a missing store: $(cat "$TEST_DIR/err")"
"$PUBLISH" --keygen "$TEST_DIR/other.key" >"$TEST_DIR/vol2" 2>/dev/null || fail "second key"
expect_exit 1 "$PUBLISH" --from "dir:$store" --to "dir:$TEST_DIR/other" "$(cat "$TEST_DIR/vol2")"
grep -q "holds no root of this volume" "$TEST_DIR/err" || fail "push of an absent volume: $(cat "$TEST_DIR/err")"
expect_exit 2 "$PUBLISH" --from "dir:$store" "$vol" "$src"
ok "push refuses a missing store and a volume the store does not hold"

# ---- pushed into a ring
cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K"
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
ring="ring:$(cluster_ip 0):${CL_PORT[0]}"
# "pushed B blocks (X MB) in S s: S1 sent (Y bytes), P already present (Z bytes); root ..."
field() { # FILE FIELD: blocks | sent | present
	case $2 in
	blocks) sed -n 's/.*pushed \([0-9]*\) blocks.*/\1/p' "$1" ;;
	sent) sed -n 's/.*: \([0-9]*\) sent (.*/\1/p' "$1" ;;
	present) sed -n 's/.*, \([0-9]*\) already present (.*/\1/p' "$1" ;;
	esac
}
push() { # NAME: push the volume into the ring, stderr in $TEST_DIR/NAME.err
	"$PUBLISH" --from "dir:$store" --to "$ring" "$vol" >"$TEST_DIR/$1.out" 2>"$TEST_DIR/$1.err" ||
		{ cat "$TEST_DIR/$1.err"; fail "push $1"; }
	[ "$(cat "$TEST_DIR/$1.out")" = "$vol" ] || fail "push $1 printed '$(cat "$TEST_DIR/$1.out")'"
	echo "# push $1: $(grep -o 'pushed.*' "$TEST_DIR/$1.err")"
}
push first
[ "$(field "$TEST_DIR/first.err" blocks)" = "$sent1" ] ||
	fail "the first push walked $(field "$TEST_DIR/first.err" blocks) blocks, the publish stored $sent1"
[ "$(field "$TEST_DIR/first.err" sent)" = "$sent1" ] || fail "the first push did not send every block"
[ "$(field "$TEST_DIR/first.err" present)" = 0 ] || fail "an empty ring had blocks already"
grep -q "root sequence 1 sent" "$TEST_DIR/first.err" || fail "the root was not sent"
ok "first push: all $sent1 blocks sent, none present, root sent"

push second
[ "$(field "$TEST_DIR/second.err" sent)" = 0 ] || fail "the second push sent blocks"
[ "$(field "$TEST_DIR/second.err" present)" = "$sent1" ] || fail "the second push found not every block"
grep -q "root sequence 1 already present" "$TEST_DIR/second.err" || fail "the second push sent the root again"
ok "second push: 0 blocks sent, $sent1 already present, root already present"

"$FSCK" --from "$ring" "$vol" 2>"$TEST_DIR/fsck.err" || { cat "$TEST_DIR/fsck.err"; fail "fsck from the ring"; }
ok "the pushed volume verifies from the ring (cfs-fsck)"

start_mount --bootstrap "$(cluster_ip 1):${CL_PORT[1]}"
compare_mount "mounted from the ring"
[ "$(cat "$mnt/version")" = v1 ] || fail "version"
stop_mount
ok "mounted from the ring: $entries entries equal (listing and diff -r)"

# ---- a republish offline travels as its new blocks only
echo v2 >"$src/version"
echo added >"$src/added"
"$PUBLISH" --to "dir:$store" --state-dir "$state" --block-size 8192 "$src" >/dev/null 2>"$TEST_DIR/pub2.err" ||
	{ cat "$TEST_DIR/pub2.err"; fail "republish to dir:"; }
sent2=$(pub_sent "$TEST_DIR/pub2.err")
[ -n "$sent2" ] && [ "$sent2" -gt 0 ] && [ "$sent2" -lt 50 ] || fail "republish sent '$sent2' blocks"
push third
[ "$(field "$TEST_DIR/third.err" sent)" = "$sent2" ] ||
	fail "the push after a republish sent $(field "$TEST_DIR/third.err" sent) blocks, the republish stored $sent2"
grep -q "root sequence 2 sent" "$TEST_DIR/third.err" || fail "the new root was not sent"
python3 "$LISTING" "$src" | sort >"$TEST_DIR/source"
start_mount --bootstrap "$(cluster_ip 2):${CL_PORT[2]}"
compare_mount "version 2 from the ring"
stop_mount
ok "after a republish offline, the push sends only its $sent2 new blocks; version 2 mounts from the ring"

# ---- the ring holds a newer root than the store
"$PUBLISH" --keygen "$TEST_DIR/k3.key" >"$TEST_DIR/vol3" 2>/dev/null || fail "third key"
vol3=$(cat "$TEST_DIR/vol3")
mkdir -p "$TEST_DIR/small"
echo one >"$TEST_DIR/small/f"
"$PUBLISH" --key "$TEST_DIR/k3.key" --to "dir:$TEST_DIR/store3" --state-dir "$state" "$TEST_DIR/small" \
	>/dev/null 2>&1 || fail "publish small to dir:"
"$PUBLISH" --key "$TEST_DIR/k3.key" --to "$ring" --state-dir "$state" "$TEST_DIR/small" \
	>/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish small to the ring"; }
expect_exit 1 "$PUBLISH" --from "dir:$TEST_DIR/store3" --to "$ring" "$vol3"
grep -q "holds a newer root" "$TEST_DIR/err" || fail "a stale push: $(cat "$TEST_DIR/err")"
ok "a push older than the ring's root is refused"

# ---- an expired root is not pushed
"$PUBLISH" --key "$TEST_DIR/k3.key" --to "dir:$TEST_DIR/store4" --state-dir "$TEST_DIR/st4" \
	--valid 0.00002 "$TEST_DIR/small" >/dev/null 2>&1 || fail "publish with a 2 s root"
sleep 3
expect_exit 1 "$PUBLISH" --from "dir:$TEST_DIR/store4" --to "dir:$TEST_DIR/store5" "$vol3"
grep -q "has expired" "$TEST_DIR/err" || fail "an expired push: $(cat "$TEST_DIR/err")"
ok "an expired root is refused, with what to do"
