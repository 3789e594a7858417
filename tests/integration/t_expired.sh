#!/bin/bash
# A volume whose publisher stopped refreshing it, read by explicit choice:
#   - a root past its valid-until is refused by cfs-cat and cfs-mount by
#     default, with one line naming the date and the option;
#   - with --expired allow (cfs-cat) and -o expired=allow (cfs-mount, a
#     real kernel FUSE mount) it reads back equal to its source, with a
#     warning that names the date it expired;
#   - the choice does not lift rollback protection: a root older than one
#     already seen is still refused.
# The volume is published into a dir: store (no ring is needed to check
# the reader's rule) with a root valid for 2 s.
. "$(dirname "$0")/lib.sh"
PUBLISH=$CFS_BIN/cfs-publish
MOUNT=$CFS_BIN/cfs-mount
CAT=$CFS_BIN/cfs-cat
export XDG_CONFIG_HOME=$TEST_DIR/config
unset CFS_BOOTSTRAP CFS_STORE
export CFS_DATA_DIR=$TEST_DIR/no-daemon-here
store=$TEST_DIR/store
mnt=$TEST_DIR/mnt
MOUNT_PID=
trap 'mount_cleanup; cleanup' EXIT

src=$TEST_DIR/src
mkdir -p "$src/sub" "$mnt"
head -c 300000 /dev/urandom >"$src/blob"
echo "an archive" >"$src/sub/readme"
"$PUBLISH" --keygen "$TEST_DIR/pub.key" >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$store" --state-dir "$TEST_DIR/pst" \
	--valid 0.00002 "$src" >/dev/null 2>"$TEST_DIR/pub.err" || { cat "$TEST_DIR/pub.err"; fail "publish"; }
# read while still valid: the volume is fine
"$CAT" --from "dir:$store" "$vol" /sub/readme >"$TEST_DIR/fresh" || fail "a fresh root refused"
cmp -s "$TEST_DIR/fresh" "$src/sub/readme" || fail "a fresh read differs"
cp -a "$store" "$TEST_DIR/store-v1" # the first version, kept for the rollback check
sleep 3
expect_exit 1 "$CAT" --from "dir:$store" "$vol" /sub/readme
[ "$(wc -l <"$TEST_DIR/err")" -eq 1 ] || fail "the refusal takes more than one line: $(cat "$TEST_DIR/err")"
grep -q "expired at 20" "$TEST_DIR/err" && grep -q -- "--expired allow" "$TEST_DIR/err" ||
	fail "the refusal does not name the date and the option: $(cat "$TEST_DIR/err")"
[ -s "$TEST_DIR/out" ] && fail "a refused read wrote bytes"
expect_exit 1 "$MOUNT" -f --state-dir "$TEST_DIR/mst" --from "dir:$store" "$vol" "$mnt"
grep -q "expired at 20" "$TEST_DIR/err" || fail "cfs-mount's refusal: $(cat "$TEST_DIR/err")"
mountpoint -q "$mnt" && fail "an expired volume was mounted by default"
ok "an expired root is refused by default, in one line naming its date and --expired allow"

"$CAT" --from "dir:$store" --expired allow "$vol" /blob >"$TEST_DIR/blob" 2>"$TEST_DIR/cat.err" ||
	fail "cfs-cat --expired allow: $(cat "$TEST_DIR/cat.err")"
cmp -s "$TEST_DIR/blob" "$src/blob" || fail "the archive read differs from its source"
grep -q "expired at 20.*read anyway" "$TEST_DIR/cat.err" || fail "no warning: $(cat "$TEST_DIR/cat.err")"
expect_exit 2 "$CAT" --from "dir:$store" --expired maybe "$vol" /blob

"$MOUNT" -f --state-dir "$TEST_DIR/mst" -o expired=allow --from "dir:$store" "$vol" "$mnt" \
	>"$TEST_DIR/mount.out" 2>"$TEST_DIR/mount.log" &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "-o expired=allow did not mount"; }
diff -r "$src" "$mnt" || fail "the mounted archive differs from its source"
grep -q "expired at 20.*read anyway" "$TEST_DIR/mount.log" || fail "no warning: $(cat "$TEST_DIR/mount.log")"
kill -TERM "$MOUNT_PID"
wait "$MOUNT_PID" || fail "cfs-mount exited $? after SIGTERM"
MOUNT_PID=
ok "with --expired allow and -o expired=allow the archive reads back equal, with a warning"

# rollback protection stays: publish a newer root, read it (seen), then
# offer the first version's store: refused even with the option
"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$store" --state-dir "$TEST_DIR/pst" \
	--valid 0.00002 "$src" >/dev/null 2>&1 || fail "republish"
sleep 3
"$MOUNT" -f --state-dir "$TEST_DIR/mst" -o expired=allow --from "dir:$store" "$vol" "$mnt" \
	>"$TEST_DIR/mount.out" 2>"$TEST_DIR/mount.log" &
MOUNT_PID=$!
PIDS+=("$MOUNT_PID")
wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "the newer root did not mount"; }
kill -TERM "$MOUNT_PID"
wait "$MOUNT_PID" || fail "cfs-mount exited $?"
MOUNT_PID=
expect_exit 1 "$MOUNT" -f --state-dir "$TEST_DIR/mst" -o expired=allow --from "dir:$TEST_DIR/store-v1" "$vol" "$mnt"
grep -q "older than one already seen" "$TEST_DIR/err" || fail "an old root after a newer one: $(cat "$TEST_DIR/err")"
ok "an older root is still refused with the option (rollback protection unchanged)"
