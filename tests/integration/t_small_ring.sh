#!/bin/bash
# Rings smaller than k (k = 6, the default) work:
#   - the README's "try it on one machine" commands, run as written (only
#     /tmp/ moved into the test's directory): two daemons; a publish
#     through each, a mount through each reads the tree back equal;
#   - rings of 1, 2, 3 and 5 daemons: publish, mount and cfs-fsck through
#     every daemon and as a plain ring client agree (every block on all the
#     servers there are), and nobody is suspected;
#   - a ring of fewer servers than k says so in the log and in status.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
MOUNT=$CFS_BIN/cfs-mount
README=$(dirname "$0")/../../README.md
export XDG_CONFIG_HOME=$TEST_DIR/config
mnt=$TEST_DIR/mnt
MOUNT_PID=
trap 'mount_cleanup; cleanup; cluster_cleanup' EXIT
export PATH=$CFS_BIN:$PATH

src=$TEST_DIR/src
mkdir -p "$src/sub"
for i in $(seq 1 40); do head -c $((RANDOM * 3)) /dev/urandom >"$src/f$i"; done
head -c $((3 << 20)) /dev/urandom >"$src/sub/big"
echo hello >"$src/hello"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")

# mount_check SOCKET|--bootstrap=ADDR: mount through it, compare, unmount.
mount_check() {
	local how=$1
	mkdir -p "$mnt"
	if [ "${how#--bootstrap=}" != "$how" ]; then
		"$MOUNT" -f --bootstrap "${how#--bootstrap=}" --state-dir "$TEST_DIR/state" "$vol" "$mnt" \
			>"$TEST_DIR/mount.out" 2>"$TEST_DIR/mount.err" &
	else
		"$MOUNT" -f --cfsd "$how" --state-dir "$TEST_DIR/state" "$vol" "$mnt" \
			>"$TEST_DIR/mount.out" 2>"$TEST_DIR/mount.err" &
	fi
	MOUNT_PID=$!
	PIDS+=("$MOUNT_PID")
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.err"; fail "mount through $how"; }
	diff -r "$src" "$mnt" >/dev/null || fail "the tree mounted through $how differs from its source"
	kill -TERM "$MOUNT_PID"
	wait "$MOUNT_PID" || fail "cfs-mount through $how exited $? after SIGTERM"
	MOUNT_PID=
}

# fsck_all SUMMARY-FILE STORE...: cfs-fsck --replicas through each store;
# every one must exit 0 with the same summary line.
fsck_all() {
	local out=$1 st first=""; shift
	for st in "$@"; do
		"$FSCK" --from "$st" --replicas "$vol" >"$TEST_DIR/fsck.out" 2>&1 ||
			{ tail -3 "$TEST_DIR/fsck.out"; fail "cfs-fsck --replicas through $st exited $?"; }
		local line
		line=$(grep -o 'every block at k.*' "$TEST_DIR/fsck.out") ||
			{ tail -3 "$TEST_DIR/fsck.out"; fail "no summary through $st"; }
		[ -z "$first" ] && first=$line
		[ "$line" = "$first" ] || fail "cfs-fsck through $st says '$line', another store '$first'"
	done
	echo "$first" >"$out"
}

# ---- the README's example, as written
grep -q '^cfsd --bind 127.0.0.1 --port 4460 --data /tmp/n1' "$README" ||
	fail "the README no longer has the two-daemon example this test runs"
[ -z "$(ss -Hlun 'sport = :4460')" ] || fail "port 4460 is in use: the README's example needs it"
grep '^cfsd --bind 127\.0\.0\.' "$README" | sed -e "s#/tmp/#$TEST_DIR/#g" -e 's/ *#.*$//' -e 's/ *&$//' \
	>"$TEST_DIR/readme-cmds"
[ "$(wc -l <"$TEST_DIR/readme-cmds")" -eq 2 ] || fail "expected two cfsd lines in the README"
while read -r cmd; do
	eval "exec $cmd" >>"$TEST_DIR/readme-daemons.log" 2>&1 &
	PIDS+=("$!")
	sleep 0.5
done <"$TEST_DIR/readme-cmds"
wait_for 10 cfsctl -d "$TEST_DIR/n1" status || fail "the README's first daemon did not start"
wait_for 10 cfsctl -d "$TEST_DIR/n2" status || fail "the README's second daemon did not start"
joined() { cfsctl -d "$TEST_DIR/n1" status --json | jget "['ring']['vnodes'][0]['joined']" | grep -q True &&
	[ "$(cfsctl -d "$TEST_DIR/n1" status --json | jget "['dhash']['ring_servers']")" = 2 ]; }
wait_for 30 joined || fail "the README's two daemons did not form a ring of two"
for n in n1 n2 n1 n2; do
	echo "x$n" >>"$src/hello" # each publish sends new blocks
	"$PUBLISH" --to "cfsd:$TEST_DIR/$n/cfsd.sock" "$src" >"$TEST_DIR/out" 2>"$TEST_DIR/err" ||
		{ cat "$TEST_DIR/err"; fail "publish through the README's $n"; }
done
mount_check "$TEST_DIR/n1/cfsd.sock"
mount_check "$TEST_DIR/n2/cfsd.sock"
fsck_all "$TEST_DIR/readme.fsck" "cfsd:$TEST_DIR/n1/cfsd.sock" "cfsd:$TEST_DIR/n2/cfsd.sock" \
	ring:127.0.0.1:4460 ring:127.0.0.2:4460
grep -q "on k = 2 servers each" "$TEST_DIR/readme.fsck" || fail "fsck: $(cat "$TEST_DIR/readme.fsck")"
grep -q "suspect" "$TEST_DIR/readme-daemons.log" && fail "an honest daemon was suspected: $(grep suspect "$TEST_DIR/readme-daemons.log" | head -1)"
grep -q "fewer than k = 6" "$TEST_DIR/readme-daemons.log" || fail "no daemon said its ring is smaller than k"
ok "the README's two daemons: 4 publishes, mounts through both, fsck agrees four ways: $(cat "$TEST_DIR/readme.fsck")"
cleanup
PIDS=()

# ---- rings of 1, 2, 3 and 5 daemons, k = 6
for n in 1 2 3 5; do
	cluster_start "$n" 1 --stabilize-ms 250 --sync-ms 2000
	cluster_wait_correct 60 || fail "the $n-daemon ring did not converge"
	# as a user would: until every daemon's status says the ring is whole
	whole() {
		local i
		for ((i = 0; i < n; i++)); do
			[ "$(cfsctl -d "$TEST_DIR/node$i" status --json | jget "['dhash']['ring_servers']")" = "$n" ] ||
				return 1
		done
	}
	wait_for 60 whole || fail "the daemons of the ring of $n never all saw the whole ring"
	stores=()
	for ((i = 0; i < n; i++)); do
		echo "y$n.$i" >>"$src/hello"
		"$PUBLISH" --to "cfsd:$TEST_DIR/node$i/cfsd.sock" "$src" >"$TEST_DIR/out" 2>"$TEST_DIR/err" || {
			cat "$TEST_DIR/err"
			for ((j = 0; j < n; j++)); do
				cfsctl -d "$TEST_DIR/node$j" status | grep -E '^(ring|vnode|store|traffic|refused|replica) '
			done
			fail "publish through daemon $i of $n"
		}
		stores+=("cfsd:$TEST_DIR/node$i/cfsd.sock" "ring:$(cluster_addr "$i")")
	done
	mount_check "$TEST_DIR/node$((n - 1))/cfsd.sock"
	mount_check "--bootstrap=$(cluster_addr 0)"
	fsck_all "$TEST_DIR/ring$n.fsck" "${stores[@]}"
	grep -q "on k = $n servers each" "$TEST_DIR/ring$n.fsck" || fail "ring of $n: $(cat "$TEST_DIR/ring$n.fsck")"
	cfsctl -d "$TEST_DIR/node0" status >"$TEST_DIR/status.txt"
	grep -q "servers, in a ring of fewer than k (0: k or more) $n" "$TEST_DIR/status.txt" ||
		fail "status of a ring of $n does not say it is smaller than k"
	grep -h "suspect" "$TEST_DIR"/node*.log && fail "an honest daemon was suspected in the ring of $n"
	ok "a ring of $n (k = 6): $n publishes, mounts through cfsd and as a plain client, fsck agrees $((2 * n)) ways: $(cat "$TEST_DIR/ring$n.fsck")"
	cluster_cleanup
	for ((i = 0; i < n; i++)); do cluster_kill "$i"; rm -rf "$TEST_DIR/node$i" "$TEST_DIR/node$i.log"; done
done
