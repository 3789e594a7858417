#!/bin/bash
# A rolling upgrade: 8 daemons of the previous release (the commit named in
# tests/integration/previous-release, built by this test from git) are
# replaced one at a time by this tree's cfsd, while readers read a volume
# without pause: through a daemon (cfs-cat --data) and as plain ring
# clients of both versions. Every read must succeed and return the file;
# at the end every daemon speaks the newer protocol to the others, the
# ring is one, and the volume is whole at k. The two versions share the
# ring throughout: each daemon speaks its own version and the previous
# one, and peers use the lower one both support (docs/OPERATIONS.md,
# "Upgrades"). A mount of this tree through an old daemon asks for the
# interim root (hello), is told no and gets the daemon's one answer; the
# old mount through an upgraded daemon gets what it always got; this
# tree's mount through an upgraded daemon starts from the interim root.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PREV=$(sed -n 's/^\([0-9a-f]\{7,40\}\).*/\1/p' "$(dirname "$0")/previous-release" | head -1)
[ -n "$PREV" ] || fail "tests/integration/previous-release names no commit"
git -C "$REPO" cat-file -e "$PREV^{commit}" 2>/dev/null ||
	fail "commit $PREV (the previous release) is not in this clone's history"
OLD=$TEST_DIR/old
mkdir -p "$OLD"
git -C "$REPO" archive "$PREV" | tar -x -C "$OLD" || fail "git archive $PREV"
start=$SECONDS
make -C "$OLD" -j2 >"$TEST_DIR/old-build.log" 2>&1 || { tail -20 "$TEST_DIR/old-build.log"; fail "building $PREV"; }
OLD_BIN=$OLD/build/bin
ok "the previous release ($PREV) built in $((SECONDS - start)) s"
NEW_CFSD=$CFS_BIN/cfsd
[ "${CONTROL:-0}" = 1 ] && NEW_CFSD=$OLD_BIN/cfsd # the control run: restarts, no upgrade
export XDG_CONFIG_HOME=$TEST_DIR/config
N=8
cycles() { cluster_status_all "$TEST_DIR/status"; python3 "$HARNESS_DIR/ring_cycles.py" "$TEST_DIR"/status/*.json; }

# ---- a ring of the previous release, a volume on it
CFSD=$OLD_BIN/cfsd
cluster_start "$N" 1 --stabilize-ms 500 --sync-ms 5000
cluster_wait_correct 60 || fail "the ring of $N old daemons did not converge"
src=$TEST_DIR/src
mkdir -p "$src"
head -c $((3 << 20)) /dev/urandom >"$src/big"
"$CFS_BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$OLD_BIN/cfs-publish" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --block-size 16384 "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish through an old daemon"; }
want=$(sha256sum <"$src/big")
whole() { "$OLD_BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node0/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck0.out" 2>&1; }
wait_for 60 whole || { tail -3 "$TEST_DIR/fsck0.out"; fail "the volume never reached k copies on the old ring"; }
ok "$N daemons of $PREV, a 3 MiB file published: $(tail -1 "$TEST_DIR/fsck0.out")"

# ---- mounts of either version through either daemon (docs/PROTOCOL.md,
# "ctl_get_root", old and new both ways)
mnt=$TEST_DIR/mnt
mkdir -p "$mnt"
MOUNT_PID=
trap 'mount_cleanup || true; cleanup; cluster_cleanup' EXIT
early_ms() { python3 -c "import os,sys; print(os.getxattr(sys.argv[1], 'user.cfs.stats').decode())" "$mnt" |
	jget "['start_ms']['early_root']"; }
mount_read() { # BIN_DIR DAEMON NAME: mount through the daemon, read the file
	"$1/cfs-mount" -f --data "$TEST_DIR/node$2" --state-dir "$TEST_DIR/mstate-$3" "$vol" "$mnt" \
		>/dev/null 2>"$TEST_DIR/mount-$3.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount-$3.log"; fail "$3: not mounted"; }
	[ "$(sha256sum <"$mnt/big")" = "$want" ] || fail "$3: the file reads wrong through the mount"
}
mount_done() {
	mount_cleanup
	wait "$MOUNT_PID" 2>/dev/null || true
	MOUNT_PID=
}
mount_read "$CFS_BIN" 2 new-on-old
em=$(early_ms)
[ "$em" = 0.0 ] || [ "$em" = 0 ] || fail "new-on-old: early_root $em, but an old daemon sends no interim root"
mount_done
ok "this tree's cfs-mount through a daemon of $PREV mounts and reads (no interim root from it: early_root $em)"

# ---- readers that do not stop: through a daemon's socket (moved to the
# next daemon before its own is restarted), and as plain clients, new and
# old, bootstrapped at every daemon
boots=()
for ((i = 0; i < N; i++)); do boots+=(--bootstrap "$(cluster_addr "$i")"); done
reader() { # NAME CMD... (VIA in CMD: the data directory of the daemon named in $TEST_DIR/via)
	local name=$1 ok=0 bad=0 via args a; shift
	while [ ! -e "$TEST_DIR/stop" ]; do
		via=$(cat "$TEST_DIR/via")
		echo "$via" >"$TEST_DIR/$name.using"
		args=()
		for a in "$@"; do [ "$a" = VIA ] && args+=("$TEST_DIR/node$via") || args+=("$a"); done
		if got=$("${args[@]}" "$vol" /big 2>>"$TEST_DIR/$name.err" | sha256sum) && [ "$got" = "$want" ]; then
			ok=$((ok + 1))
		else
			bad=$((bad + 1))
			echo "read failed at $(date +%T.%N)" >>"$TEST_DIR/$name.err"
		fi
	done
	echo "$ok $bad" >"$TEST_DIR/$name.count"
}
echo 7 >"$TEST_DIR/via"
reader via-cfsd "$CFS_BIN/cfs-cat" --data VIA &
r1=$!
reader plain-new "$CFS_BIN/cfs-cat" "${boots[@]}" &
r2=$!
reader plain-old "$OLD_BIN/cfs-cat" "${boots[@]}" &
r3=$!
PIDS+=("$r1" "$r2" "$r3")
sleep 3

# ---- replace the daemons one at a time (SIGTERM, then this tree's cfsd
# on the same data directory, address and arguments)
CFSD=$NEW_CFSD
for ((i = 0; i < N; i++)); do
	if [ "$(cat "$TEST_DIR/via")" = "$i" ]; then # the socket reader moves on first
		# renamed into place: a reader never reads the file half written
		echo $(((i + 1) % N)) >"$TEST_DIR/via.new" && mv "$TEST_DIR/via.new" "$TEST_DIR/via"
		moved() { [ "$(cat "$TEST_DIR/via-cfsd.using")" = $(((i + 1) % N)) ]; }
		wait_for 30 moved || fail "the reader through daemon $i did not move on"
	fi
	echo "$(date +%T.%N) stopping daemon $i" >>"$TEST_DIR/timeline"
	cluster_stop "$i"
	# The founder of a ring of the previous release, which remembered no
	# peers, is given a member to rejoin through (OPERATIONS.md, "Upgrades")
	[ "$i" = 0 ] && [ "${CONTROL:-0}" != 1 ] && CL_ARGS[0]="${CL_ARGS[0]} --bootstrap $(cluster_addr 1)"
	echo "$(date +%T.%N) starting daemon $i" >>"$TEST_DIR/timeline"
	cluster_run "$i"
	cluster_wait_up "$i"
	joined() { "$CFSCTL" --data "$TEST_DIR/node$i" status --json | jget "['ring']['vnodes'][0]['joined']" | grep -q True; }
	wait_for 30 joined || fail "upgraded daemon $i did not join"
	sleep 4
	echo "# daemon $i upgraded at $((SECONDS - start)) s"
done
wait_for 60 cluster_check || { cat "$TEST_DIR/check.out" >&2; fail "the upgraded ring's lists are not right"; }
[ "$(cycles | sed -n 1p)" = "1 $N" ] || fail "not one ring after the upgrade: $(cycles | sed -n 1p)"
sleep 3
touch "$TEST_DIR/stop"
wait "$r1" "$r2" "$r3" 2>/dev/null || true
for name in via-cfsd plain-new plain-old; do
	read -r good bad <"$TEST_DIR/$name.count" || fail "reader $name left no count"
	[ "$bad" -eq 0 ] || { tail -5 "$TEST_DIR/$name.err"; fail "reader $name: $bad of $((good + bad)) reads failed"; }
	[ "$good" -ge 3 ] || fail "reader $name read only $good times"
	echo "# $name: $good reads of the 3 MiB file during the upgrade, none failed"
done
ok "every read during the rolling upgrade succeeded"

# ---- the new version is spoken between upgraded daemons
"$CFSCTL" --data "$TEST_DIR/node3" status --json >"$TEST_DIR/s3.json"
newer=$(jget "['rpc']['peers_newer']" <"$TEST_DIR/s3.json")
[ "$newer" -ge 1 ] || fail "daemon 3 found no peer speaking the newer version"
"$CFS_BIN/cfs-fsck" --from "cfsd:$TEST_DIR/node3/cfsd.sock" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1 ||
	{ tail -3 "$TEST_DIR/fsck.out"; fail "the volume is not whole at k after the upgrade"; }
ok "after the upgrade: one ring of $N, daemon 3 speaks the newer version to $newer peers, $(tail -1 "$TEST_DIR/fsck.out")"

mount_read "$OLD_BIN" 3 old-on-new
mount_done
mount_read "$CFS_BIN" 3 new-on-new
em=$(early_ms)
python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$em" ||
	fail "new-on-new: early_root $em: the mount did not start from the upgraded daemon's interim root"
mount_done
ok "the mount of $PREV through an upgraded daemon reads; this tree's starts from its interim root ($em ms)"
