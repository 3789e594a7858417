#!/bin/bash
# The plain ring client: publishing, checking, reading and mounting with no
# local cfsd, given only bootstrap addresses (8-daemon loopback ring, k = 6):
#   - cfs-publish --to ring:ADDR publishes; cfs-fsck --from ring:ADDR finds
#     the volume whole; every root and data block sits on its k successors;
#   - cfs-mount with $CFS_BOOTSTRAP (no option, no daemon socket) mounts and
#     the tree reads back equal; cfs-cat reads through the client
#     configuration file;
#   - the client is in no daemon's tables (it is nobody's neighbour);
#   - the mount keeps working after its bootstrap daemon is killed (it
#     learned other nodes);
#   - without -f the mount daemonizes: the command returns once mounted,
#     and fusermount3 -u unmounts it and ends the process;
#   - a mount that starts from a stale replica's root moves on to the read
#     quorum's newest and records it; through cfsd too (ctl_get_root's
#     interim root): with every other daemon paused, a cfsd-backed mount
#     starts from a stale root successor's older version (user.cfs.stats:
#     early_root), and once they answer it switches to the quorum's;
#   - an unreachable bootstrap fails the mount with a clear error within a
#     bound; bad addresses and conflicting options are usage errors.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
. "$(dirname "$0")/../harness/tree.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
MOUNT=$CFS_BIN/cfs-mount
CAT=$CFS_BIN/cfs-cat
LISTING=$(dirname "$0")/tree-listing.py
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_CACHE_HOME=$TEST_DIR/cache
# No daemon at the default socket: only bootstrap addresses lead to the ring.
export CFS_DATA_DIR=$TEST_DIR/no-daemon
mkdir -p "$CFS_DATA_DIR"
unset CFS_BOOTSTRAP
N=8
mnt=$TEST_DIR/mnt
MOUNT_PID=
trap 'mount_cleanup || true; cleanup; cluster_cleanup' EXIT

src=$TEST_DIR/src
make_tree "$src/tree" 300 6
head -c $((8 << 20)) /dev/urandom >"$src/big"
echo hello >"$src/hello"
mkdir "$src/unread" # first read after the bootstrap daemon dies
head -c $((4 << 20)) /dev/urandom >"$src/unread/big2"

cluster_start "$N" 1 --stabilize-ms 250
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
addr() { echo "${CL_IP[$1]}:${CL_PORT[$1]}"; }

"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")

# ---- usage errors
expect_exit 2 "$MOUNT" -f --bootstrap nonsense "$vol" "$mnt"
expect_exit 2 "$MOUNT" -f --bootstrap "$(addr 0)" --cfsd /nonexistent "$vol" "$mnt"
expect_exit 2 "$CAT" --bootstrap 127.0.0.1 "$vol" /hello
ok "a bad bootstrap address and --cfsd with --bootstrap are usage errors (exit 2)"

# ---- publish and check with no daemon
start=$SECONDS
"$PUBLISH" --to "ring:$(addr 1)" --block-size 8192 "$src" >"$TEST_DIR/out" 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish through the plain client"; }
[ "$(cat "$TEST_DIR/out")" = "$vol" ] || fail "publish printed '$(cat "$TEST_DIR/out")'"
echo "# published through ring:$(addr 1) in $((SECONDS - start)) s: $(grep -o '[0-9]* files.*' "$TEST_DIR/err")"
"$FSCK" --from "ring:$(addr 2),$(addr 3)" "$vol" >"$TEST_DIR/fsck.out" 2>&1 ||
	{ tail -5 "$TEST_DIR/fsck.out"; fail "cfs-fsck through the plain client"; }
ok "cfs-publish --to ring: and cfs-fsck --from ring: with no local cfsd"

# Every stored key is on exactly its k successors (the publisher's puts
# went through the plain client's lookups to the right servers).
placed() {
	cluster_collect "$TEST_DIR/place"
	python3 "$HARNESS_DIR/replica_check.py" 6 "$TEST_DIR/place" >"$TEST_DIR/placement"
	[ "$(jget "['exact']" <"$TEST_DIR/placement")" = "$(jget "['keys']" <"$TEST_DIR/placement")" ]
}
wait_for 30 placed || fail "blocks not on their k successors: $(cat "$TEST_DIR/placement")"
nkeys=$(jget "['keys']" <"$TEST_DIR/placement")
[ "$nkeys" -gt 1000 ] || fail "only $nkeys keys stored"
ok "$nkeys keys, every one on exactly its 6 successors"

# ---- the client is nobody's neighbour
cluster_status_all "$TEST_DIR/status"
daemons=" "
for ((i = 0; i < N; i++)); do daemons+="$(addr "$i") "; done
for f in "$TEST_DIR"/status/*.json; do
	for a in $(grep -oE '"addr":"[^"]*"' "$f" | cut -d'"' -f4 | sort -u); do
		case "$daemons" in *" $a "*) ;; *) fail "$(basename "$f") has a table entry at $a, not a daemon" ;; esac
	done
done
ok "no daemon's tables name anything but the $N daemons"

# ---- cfs-cat through the configuration file
mkdir -p "$XDG_CONFIG_HOME/cfs"
printf '# the ring\nbootstrap %s\n' "$(addr 4)" >"$XDG_CONFIG_HOME/cfs/client.conf"
"$CAT" "$vol" /big >"$TEST_DIR/big.out" 2>"$TEST_DIR/cat.err" || { cat "$TEST_DIR/cat.err"; fail "cfs-cat"; }
cmp "$src/big" "$TEST_DIR/big.out" || fail "cfs-cat through client.conf read wrong bytes"
rm "$XDG_CONFIG_HOME/cfs/client.conf"
ok "cfs-cat through client.conf's bootstrap reads the 8 MiB file"

# ---- mount through $CFS_BOOTSTRAP
mkdir -p "$mnt"
CFS_BOOTSTRAP="$(addr 5)" "$MOUNT" -f --state-dir "$TEST_DIR/state" --timeout 3000 --retries 1 \
	"$vol" "$mnt" >"$TEST_DIR/mount.out" 2>>"$TEST_DIR/mount.log" &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted"; }
python3 "$LISTING" "$src/tree" | sort >"$TEST_DIR/source"
python3 "$LISTING" "$mnt/tree" | sort >"$TEST_DIR/mounted"
diff "$TEST_DIR/source" "$TEST_DIR/mounted" >/dev/null || fail "the mounted tree differs from the source"
for e in tree big hello; do
	diff -r --no-dereference "$src/$e" "$mnt/$e" || fail "diff -r finds differences in $e"
done
ok "mounted through \$CFS_BOOTSTRAP with no daemon: $(wc -l <"$TEST_DIR/source") entries equal, diff -r clean"

# ---- its bootstrap daemon dies; the mount goes on with the nodes it learned
cluster_kill 5
cmp "$src/unread/big2" "$mnt/unread/big2" || fail "after its bootstrap daemon died the mount read wrong bytes"
ok "bootstrap daemon killed: the mount reads a 4 MiB file it had not read before"
mount_cleanup
wait "$MOUNT_PID" 2>/dev/null || true
MOUNT_PID=

# ---- background mode: the command returns once the volume is mounted;
# fusermount3 -u unmounts it and the daemonized mount exits by itself
CFS_BOOTSTRAP="$(addr 4)" "$MOUNT" --state-dir "$TEST_DIR/state" --timeout 3000 --retries 1 \
	"$vol" "$mnt" >"$TEST_DIR/bg.out" 2>"$TEST_DIR/bg.err" || { cat "$TEST_DIR/bg.err"; fail "cfs-mount in the background failed"; }
bgpid=$(pgrep -n -f "cfs-mount .*$vol $mnt\$" || true)
[ -n "$bgpid" ] || fail "no daemonized cfs-mount process found"
PIDS+=("$bgpid")
mountpoint -q "$mnt" || fail "cfs-mount returned before the volume was mounted"
[ "$(cat "$TEST_DIR/bg.out")" = "$mnt" ] || fail "cfs-mount in the background printed '$(cat "$TEST_DIR/bg.out")'"
diff -r "$src/hello" "$mnt/hello" || fail "the background mount read wrong bytes"
fusermount3 -u "$mnt" || fail "fusermount3 -u of the background mount"
wait_for 10 bash -c "! kill -0 $bgpid 2>/dev/null" || fail "the background cfs-mount did not exit after fusermount3 -u"
mountpoint -q "$mnt" && fail "still mounted after fusermount3 -u"
ok "background mode: returns once mounted, reads, and exits after fusermount3 -u"

# ---- nobody at the bootstrap address
dead=$(free_port)
start=$(date +%s.%N)
"$MOUNT" -f --bootstrap "127.0.0.1:$dead" --state-dir "$TEST_DIR/state" --timeout 2000 --retries 1 \
	"$vol" "$mnt" >/dev/null 2>"$TEST_DIR/dead.err" && fail "a mount with a dead bootstrap succeeded"
took=$(echo "$(date +%s.%N) - $start" | bc)
grep -q "cannot reach" "$TEST_DIR/dead.err" || { cat "$TEST_DIR/dead.err"; fail "no clear error"; }
mountpoint -q "$mnt" && fail "mounted anyway"
ok "a dead bootstrap address: the mount fails in ${took}s with '$(grep -o 'cannot reach.*' "$TEST_DIR/dead.err" | head -1)'"

# ---- the contacts a plain client keeps for its next run: with its
# bootstrap daemon gone, a client given the same bootstrap address reads
# through the ring members its previous run met
cdir=$XDG_CACHE_HOME/cfs
rm -rf "$cdir"
"$CAT" --bootstrap "$(addr 6)" "$vol" /hello >"$TEST_DIR/hello.out" 2>"$TEST_DIR/cat6.err" ||
	{ cat "$TEST_DIR/cat6.err"; fail "cfs-cat through daemon 6"; }
saved=$(ls "$cdir"/contacts-* 2>/dev/null | head -1)
[ -n "$saved" ] || fail "the plain client kept no contacts in $cdir"
nsaved=$(grep -vc '^#' "$saved" || true)
[ "$nsaved" -ge 3 ] || fail "only $nsaved contacts kept: $(cat "$saved")"
daemons=" $(for ((i = 0; i < N; i++)); do printf '%s ' "$(addr $i)"; done)"
while read -r a _; do
	case "$daemons" in *" $a "*) ;; *) fail "a kept contact $a is no daemon" ;; esac
done < <(grep -v '^#' "$saved")
cluster_kill 6
"$CAT" --bootstrap "$(addr 6)" "$vol" /hello >"$TEST_DIR/hello2.out" 2>"$TEST_DIR/cat6b.err" ||
	{ cat "$TEST_DIR/cat6b.err"; fail "with its bootstrap daemon gone, the kept contacts did not lead to the ring"; }
cmp "$src/hello" "$TEST_DIR/hello2.out" || fail "read wrong bytes through the kept contacts"
CFS_CONTACTS=off timeout 60 "$CAT" --bootstrap "$(addr 6)" "$vol" /hello >/dev/null 2>&1 &&
	fail "with the kept contacts switched off and the bootstrap dead, cfs-cat still read"
ok "a plain client kept $nsaved contacts (all daemons) and read through them with its bootstrap daemon gone"

# ---- the first root in two steps: two of the root's replicas were away
# (stopped) while version 2 was published and still hold version 1. A
# plain client's mount may start with whichever root verifies first, but
# it ends at the read quorum's newest, and never goes below it: every
# mount reaches version 2, and records it.
xa() { python3 -c "import os,sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())" "$@"; }
cluster_restart 5
cluster_restart 6
cluster_wait_correct 60 || fail "the ring did not take daemons 5 and 6 back"
on_succs() { # every key on each of its k successors (extra copies allowed)
	cluster_collect "$TEST_DIR/place"
	python3 "$HARNESS_DIR/replica_check.py" 6 "$TEST_DIR/place" >"$TEST_DIR/placement"
	[ "$(jget "['missing_copies']" <"$TEST_DIR/placement")" = 0 ]
}
wait_for 60 on_succs || fail "blocks not back on their k successors: $(cat "$TEST_DIR/placement")"
echo v2 >"$src/hello2"
kill -STOP "${CL_PID[3]}" "${CL_PID[4]}"
"$PUBLISH" --to "ring:$(addr 1)" --block-size 8192 "$src" >"$TEST_DIR/out2" 2>"$TEST_DIR/err2" ||
	{ kill -CONT "${CL_PID[3]}" "${CL_PID[4]}"; cat "$TEST_DIR/err2"; fail "publish of version 2"; }
kill -CONT "${CL_PID[3]}" "${CL_PID[4]}"
stale=0
for run in 1 2 3 4 5 6; do
	rm -rf "$TEST_DIR/state2"
	: >"$TEST_DIR/mount2.log"
	CFS_CONTACTS=off "$MOUNT" -f --bootstrap "$(addr 0)" --state-dir "$TEST_DIR/state2" --update 0 \
		"$vol" "$mnt" >/dev/null 2>>"$TEST_DIR/mount2.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount2.log"; fail "run $run: not mounted"; }
	wait_for 10 bash -c "[ \"\$(python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], \"user.cfs.seq\").decode())' '$mnt')\" = 2 ]" ||
		fail "run $run: the mount stayed at sequence $(xa "$mnt" user.cfs.seq), not the quorum's 2"
	cmp "$src/hello2" "$mnt/hello2" || fail "run $run: version 2's file reads wrong"
	[ "$(cat "$TEST_DIR/state2/$vol.seq")" = 2 ] || fail "run $run: recorded sequence $(cat "$TEST_DIR/state2/$vol.seq")"
	grep -q "now at sequence 2 (was 1)" "$TEST_DIR/mount2.log" && stale=$((stale + 1))
	mount_cleanup
	wait "$MOUNT_PID" 2>/dev/null || true
	MOUNT_PID=
done
echo "# two of the root's replicas stale: $stale of 6 plain mounts started from their version 1 and moved to 2"
ok "two replicas stale: 6 plain mounts ended at the quorum's sequence 2 and recorded it ($stale started from a stale replica's version 1 and moved forward)"

# ---- the same through cfsd: the root key's successor, A, is paused
# while the next version is published, so it holds the one before. The
# reader's daemon is A, and every other daemon (the other replicas have
# the new one) is paused while the mount starts: only A answers, the daemon's interim
# reply (ctl_get_root) is its older version, and the mount starts
# from it (early_root in user.cfs.stats; a mount that waited for the
# read quorum could not be mounted yet). The others go on at once, and
# the quorum's newer version is switched to (logged: "now at sequence N
# (was M)", M < N).
rootkey=$(python3 - "$vol" <<'PY'
import base64, hashlib, sys
name = sys.argv[1].upper()
pk = base64.b32decode(name + "=" * (-len(name) % 8))
print(hashlib.blake2b(b"cfs.root-key.v1" + pk, digest_size=32).hexdigest())
PY
)
succ=$("$CFSCTL" --data "$TEST_DIR/node0" lookup "$rootkey" | awk '{print $3}')
A=-1
for ((i = 0; i < N; i++)); do [ "${CL_IP[$i]}:${CL_PORT[$i]}" = "$succ" ] && A=$i; done
[ "$A" -ge 0 ] || fail "the root's successor $succ is none of the daemons"
"$CFSCTL" --data "$TEST_DIR/node$A" keys >"$TEST_DIR/keysA" || fail "cfsctl keys on daemon $A"
grep -q "^$rootkey" "$TEST_DIR/keysA" || fail "the root's successor, daemon $A, does not hold it"
fresh=()
for ((i = 0; i < N; i++)); do [ "$i" = "$A" ] || fresh+=("${CL_PID[$i]}"); done
xa() { python3 -c "import os,sys; print(os.getxattr(sys.argv[1], sys.argv[2]).decode())" "$@"; }
early_ms() { xa "$1" user.cfs.stats | jget "['start_ms']['early_root']"; }
switched=0
for run in 1 2 3; do
	want=$((run + 2))
	echo "v$want" >"$src/hello$want"
	kill -STOP "${CL_PID[$A]}"
	"$PUBLISH" --to "ring:$(addr $(((A + 1) % N)))" --block-size 8192 "$src" >"$TEST_DIR/out3" 2>"$TEST_DIR/err3" ||
		{ kill -CONT "${CL_PID[$A]}"; cat "$TEST_DIR/err3"; fail "publish of version $want"; }
	kill -CONT "${CL_PID[$A]}"
	grep -q "root sequence $want," "$TEST_DIR/err3" || fail "published $(grep -o 'root sequence [0-9]*' "$TEST_DIR/err3"), not $want"
	rm -rf "$TEST_DIR/state3"
	: >"$TEST_DIR/mount3.log"
	kill -STOP "${fresh[@]}"
	"$MOUNT" -f --data "$TEST_DIR/node$A" --state-dir "$TEST_DIR/state3" --update 0 \
		"$vol" "$mnt" >/dev/null 2>>"$TEST_DIR/mount3.log" &
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	if ! wait_for 5 mountpoint -q "$mnt"; then
		kill -CONT "${fresh[@]}"
		cat "$TEST_DIR/mount3.log"
		fail "cfsd run $run: not mounted from the stale successor's early root"
	fi
	kill -CONT "${fresh[@]}" # at once: the daemon's get still waits for their answers
	wait_for 10 bash -c "[ \"\$(python3 -c 'import os,sys; print(os.getxattr(sys.argv[1], \"user.cfs.seq\").decode())' '$mnt')\" = $want ]" ||
		{ cat "$TEST_DIR/mount3.log"; fail "cfsd run $run: stayed at sequence $(xa "$mnt" user.cfs.seq), not the quorum's $want"; }
	# A holds an older version (the one before, or older still: it is
	# not repaired between runs) unless the new root reached it after it
	# went on and before the others stopped (a STORE left in its socket's
	# buffer, its peers' sync): then the mount started from the newest.
	seq0=$(sed -n "s/.*now at sequence $want (was \([0-9]*\)).*/\1/p" "$TEST_DIR/mount3.log" | head -1)
	if [ -n "$seq0" ] && [ "$seq0" -lt "$want" ]; then
		switched=$((switched + 1))
	elif grep -q "now at sequence" "$TEST_DIR/mount3.log"; then
		cat "$TEST_DIR/mount3.log"; fail "cfsd run $run: switched, but not from an older sequence to $want"
	else
		seq0=$want
	fi
	cmp "$src/hello$want" "$mnt/hello$want" || fail "cfsd run $run: version $want's file reads wrong"
	[ "$(cat "$TEST_DIR/state3/$vol.seq")" = "$want" ] || fail "cfsd run $run: recorded sequence $(cat "$TEST_DIR/state3/$vol.seq")"
	em=$(early_ms "$mnt")
	python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)" "$em" ||
		fail "cfsd run $run: start_ms.early_root is $em: the mount did not start from the daemon's interim root"
	echo "# cfsd run $run: mounted at sequence $seq0 from the interim root ($em ms), at $want now"
	mount_cleanup
	wait "$MOUNT_PID" 2>/dev/null || true
	MOUNT_PID=
done
[ "$switched" -ge 1 ] || fail "through cfsd: no mount of 3 started from an older root and switched (the successor was never stale)"
ok "through cfsd: 3 mounts started from the daemon's interim root (early_root > 0) and ended at the quorum's newest; $switched of them started from the stale successor's older root and switched"
