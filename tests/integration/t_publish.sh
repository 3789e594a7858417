# cfs-publish and cfs-fsck on a generated tree with every kind of entry:
# publish, read back and compare byte for byte and attribute for attribute,
# republish, determinism, tampering, refusals, and a failed publish that
# leaves the previous root in place.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/tree.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
LISTING=$(dirname "$0")/tree-listing.py
STORE=$CFS_BIN/cfs-storetool # looks inside a dir: store
export XDG_CONFIG_HOME=$TEST_DIR/config
src=$TEST_DIR/src
mkdir -p "$src"

# ---- the tree: the shared one, and a 5 GiB sparse file, a hard link, a FIFO
make_tree "$src" 10000 20
truncate -s 5G "$src/sparse-5g"
printf 'tail of a huge file' | dd of="$src/sparse-5g" bs=1 seek=$((5 * 1024 * 1024 * 1024 - 19)) conv=notrunc status=none
ln "$src/three-mb" "$src/hardlink-to-three-mb"
mkfifo "$src/a-fifo"
ok "tree generated"

# ---- keys
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>"$TEST_DIR/err" || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
[ ${#vol} -eq 52 ] || fail "volume name '$vol'"
key=$XDG_CONFIG_HOME/cfs/publish.key
[ "$(stat -c %a "$key")" = 600 ] || fail "key file mode $(stat -c %a "$key")"
expect_exit 1 "$PUBLISH" --keygen
grep -q "cannot create key file" "$TEST_DIR/err" || fail "keygen overwrote a key"
chmod 644 "$key"
expect_exit 1 "$PUBLISH" --to "dir:$TEST_DIR/store" "$src"
grep -q "readable by others" "$TEST_DIR/err" || fail "a readable key was used: $(cat "$TEST_DIR/err")"
chmod 600 "$key"
ok "keygen makes a 0600 key; a readable key is refused"

# ---- publish and compare
start=$SECONDS
"$PUBLISH" --to "dir:$TEST_DIR/store" "$src" >"$TEST_DIR/out" 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish"; }
[ "$(cat "$TEST_DIR/out")" = "$vol" ] || fail "stdout is not just the volume name: $(cat "$TEST_DIR/out")"
[ "$(grep -c 'skipping .*a-fifo' "$TEST_DIR/err")" = 1 ] || fail "FIFO not skipped with one warning"
echo "# first publish: $((SECONDS - start)) s: $(grep -o '[0-9]* files.*' "$TEST_DIR/err")"
blocks1=$(grep -o '[0-9]* blocks,' "$TEST_DIR/err" | head -1 | cut -d' ' -f1)
[ "${blocks1:-0}" -gt 100 ] || fail "the first publish reported '$blocks1' blocks"
"$FSCK" --from "dir:$TEST_DIR/store" --list "$vol" >"$TEST_DIR/published" 2>"$TEST_DIR/fsck.err" ||
	{ cat "$TEST_DIR/fsck.err"; fail "fsck of a fresh volume"; }
python3 "$LISTING" "$src" >"$TEST_DIR/source"
sort "$TEST_DIR/source" >"$TEST_DIR/source.sorted"
sort "$TEST_DIR/published" >"$TEST_DIR/published.sorted"
diff "$TEST_DIR/source.sorted" "$TEST_DIR/published.sorted" >"$TEST_DIR/diff" ||
	{ head -20 "$TEST_DIR/diff"; fail "published tree differs from the source"; }
entries=$(wc -l <"$TEST_DIR/source")
[ "$entries" -gt 10020 ] || fail "only $entries entries compared"
ok "published tree equals the source: $entries entries, contents and attributes"

# ---- republish: nothing but the root travels; the tree is identical
"$PUBLISH" --to "dir:$TEST_DIR/store" "$src" >/dev/null 2>"$TEST_DIR/err" || fail "republish"
grep -q ' 0 sent' "$TEST_DIR/err" || fail "republish sent blocks: $(cat "$TEST_DIR/err")"
grep -q 'root sequence 2' "$TEST_DIR/err" || fail "sequence did not grow"
"$FSCK" --from "dir:$TEST_DIR/store" --list "$vol" 2>/dev/null | sort | cmp -s - "$TEST_DIR/published.sorted" ||
	fail "republished tree differs"
ok "republish sends no block, sequence 2, same tree"

# ---- determinism: the same tree and key give the same blocks elsewhere
"$PUBLISH" --to "dir:$TEST_DIR/store2" "$src" >/dev/null 2>&1 || fail "publish to store2"
"$STORE" keys "$TEST_DIR/store" | cut -d' ' -f1,2 >"$TEST_DIR/b1"
"$STORE" keys "$TEST_DIR/store2" | cut -d' ' -f1,2 >"$TEST_DIR/b2"
[ "$(wc -l <"$TEST_DIR/b1")" -ge "$blocks1" ] ||
	fail "only $(wc -l <"$TEST_DIR/b1") blocks in the store, $blocks1 published"
cmp -s "$TEST_DIR/b1" "$TEST_DIR/b2" || fail "different block sets"
ok "two publishes of one tree give identical blocks ($(wc -l <"$TEST_DIR/b1") blocks)"

# ---- tampering: one flipped bit, one missing block
victim=$("$STORE" flip "$TEST_DIR/store") # a block over 8 KiB
expect_exit 1 "$FSCK" --from "dir:$TEST_DIR/store" "$vol"
grep -q "^corrupt: " "$TEST_DIR/err" || fail "flipped bit not reported: $(cat "$TEST_DIR/err")"
grep -q " 0 missing, [1-9][0-9]* corrupt" "$TEST_DIR/err" || fail "corrupt count: $(tail -1 "$TEST_DIR/err")"
"$STORE" flip "$TEST_DIR/store" "$victim" >/dev/null # flipped back
"$FSCK" --from "dir:$TEST_DIR/store" "$vol" 2>/dev/null || fail "the bit flipped back is still reported"
"$STORE" drop "$TEST_DIR/store" "$victim" # forgotten: lost
expect_exit 1 "$FSCK" --from "dir:$TEST_DIR/store" "$vol"
grep -q "^missing: " "$TEST_DIR/err" || fail "missing block not reported"
"$PUBLISH" --to "dir:$TEST_DIR/store" "$src" >/dev/null 2>&1 || fail "repair by republish"
"$FSCK" --from "dir:$TEST_DIR/store" "$vol" 2>/dev/null || fail "republish did not repair"
ok "a flipped bit and a missing block are reported by path; republish repairs"

# ---- a file that changes while read: non-zero exit, previous root kept
root_before=$("$STORE" roots "$TEST_DIR/store")
mkdir "$TEST_DIR/moving"
head -c 20000000 /dev/urandom >"$TEST_DIR/moving/growing"
( while :; do echo more >>"$TEST_DIR/moving/growing"; done ) &
grower=$!
PIDS+=("$grower")
expect_exit 1 "$PUBLISH" --to "dir:$TEST_DIR/store" "$TEST_DIR/moving"
kill "$grower"
grep -q "changed while it was being read" "$TEST_DIR/err" || fail "no change detected: $(cat "$TEST_DIR/err")"
[ "$("$STORE" roots "$TEST_DIR/store")" = "$root_before" ] || fail "root replaced"
"$FSCK" --from "dir:$TEST_DIR/store" "$vol" 2>/dev/null || fail "volume damaged by a failed publish"
ok "a file changing during publish fails it and leaves the previous root"

# ---- an unreadable file, then an unreadable directory: non-zero exit, the
# previous root kept. Root reads everything, so the publisher runs as nobody.
u=$TEST_DIR/as-nobody
mkdir -p "$u/tree/sub"
echo fine >"$u/tree/ok"
echo secret >"$u/tree/sub/locked"
chown -R nobody:nogroup "$u"
chmod 711 "$TEST_DIR"
nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME="$u" XDG_CONFIG_HOME="$u/cfg" "$@"; }
nobody "$PUBLISH" --keygen >"$TEST_DIR/nvol" 2>/dev/null || fail "keygen as nobody"
nobody "$PUBLISH" --to "dir:$u/store" "$u/tree" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish as nobody"; }
nroot=$(nobody "$STORE" roots "$u/store")
echo more >>"$u/tree/ok" # a new root would differ
chmod 000 "$u/tree/sub/locked"
expect_exit 1 nobody "$PUBLISH" --to "dir:$u/store" "$u/tree"
grep -q "cannot read $u/tree/sub/locked: Permission denied" "$TEST_DIR/err" || fail "unreadable file: $(cat "$TEST_DIR/err")"
[ "$(nobody "$STORE" roots "$u/store")" = "$nroot" ] || fail "root replaced after an unreadable file"
chmod 644 "$u/tree/sub/locked"
chmod 000 "$u/tree/sub"
expect_exit 1 nobody "$PUBLISH" --to "dir:$u/store" "$u/tree"
grep -q "cannot open directory $u/tree/sub: Permission denied" "$TEST_DIR/err" || fail "unreadable directory: $(cat "$TEST_DIR/err")"
[ "$(nobody "$STORE" roots "$u/store")" = "$nroot" ] || fail "root replaced after an unreadable directory"
chmod 755 "$u/tree/sub"
nobody "$FSCK" --from "dir:$u/store" "$(cat "$TEST_DIR/nvol")" >/dev/null 2>&1 ||
	fail "the store is not whole after two failed publishes"
ok "an unreadable file or directory fails the publish with its path and leaves the previous root"

# ---- the store itself: one process at a time; a torn pack tail is cut
"$STORE" hold "$TEST_DIR/store" 30 >"$TEST_DIR/held" 2>&1 &
holder=$!
PIDS+=("$holder")
for _ in $(seq 100); do grep -q held "$TEST_DIR/held" && break; sleep 0.1; done
expect_exit 1 "$PUBLISH" --to "dir:$TEST_DIR/store" "$src"
kill "$holder"
wait "$holder" 2>/dev/null || true
grep -q "dir: store $TEST_DIR/store is in use by another process" "$TEST_DIR/err" || fail "a locked store: $(cat "$TEST_DIR/err")"
last=$(ls "$TEST_DIR/store/packs/" | sort | tail -1)
size=$(stat -c %s "$TEST_DIR/store/packs/$last")
printf 'CFSBtorn' >>"$TEST_DIR/store/packs/$last" # a crash in the middle of an append
"$FSCK" --from "dir:$TEST_DIR/store" "$vol" 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "fsck after a torn pack tail"; }
grep -q "cut 8 bytes of torn or unindexed pack tails" "$TEST_DIR/err" || fail "torn tail not reported: $(cat "$TEST_DIR/err")"
[ "$(stat -c %s "$TEST_DIR/store/packs/$last")" -eq "$size" ] || fail "the torn tail is still there"
ok "a store in use is refused; a torn pack tail is cut and the volume still checks"

# ---- a full disk: the publish fails with the error, the previous root and
# its blocks stay readable
full=$TEST_DIR/full
mkdir "$full" "$TEST_DIR/small"
mount -t tmpfs -o size=4m tmpfs "$full"
MOUNTS+=("$full")
head -c 100000 /dev/urandom >"$TEST_DIR/small/a"
"$PUBLISH" --to "dir:$full/store" "$TEST_DIR/small" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish to a small file system"; }
froot=$("$STORE" roots "$full/store")
head -c 8000000 /dev/urandom >"$TEST_DIR/small/b"
expect_exit 1 "$PUBLISH" --to "dir:$full/store" "$TEST_DIR/small"
grep -q "No space left on device" "$TEST_DIR/err" || fail "a full disk: $(cat "$TEST_DIR/err")"
[ "$("$STORE" roots "$full/store")" = "$froot" ] || fail "root replaced after a full disk"
"$FSCK" --from "dir:$full/store" "$vol" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "the previous version after a full disk"; }
ok "a full disk fails the publish (ENOSPC), and the previous root and its blocks stay readable"

# ---- refresh: leases extended, root re-signed
"$PUBLISH" --to "dir:$TEST_DIR/store" --valid 90 --refresh "$vol" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "refresh"; }
grep -q "refreshed" "$TEST_DIR/err" || fail "refresh report"
refreshed=$(grep -o 'refreshed [0-9]*' "$TEST_DIR/err" | cut -d' ' -f2)
extended=$("$STORE" keys "$TEST_DIR/store" | awk -v t=$(( $(date +%s) + 80 * 86400 )) '$3 > t' | wc -l)
[ "$refreshed" -ge "$blocks1" ] && [ "$extended" -eq "$refreshed" ] ||
	fail "refreshed $refreshed of $blocks1 blocks, extended $extended"
ok "refresh extends every lease and re-signs the root"

# ---- bad arguments
expect_exit 2 "$PUBLISH"
expect_exit 2 "$PUBLISH" --block-size 100 --to "dir:$TEST_DIR/store" "$src"
# no --to: the ring through the local cfsd, and none runs here
CFS_DATA_DIR=$TEST_DIR/no-daemon expect_exit 1 "$PUBLISH" "$src" 2>"$TEST_DIR/err"
grep -q "cannot reach cfsd at $TEST_DIR/no-daemon/cfsd.sock: no cfsd is running there" "$TEST_DIR/err" &&
	grep -q "start cfsd, or give --to cfsd:SOCKET or --to ring:HOST:PORT" "$TEST_DIR/err" || fail "no daemon: $(cat "$TEST_DIR/err")"
expect_exit 2 "$FSCK" --from "dir:$TEST_DIR/store" not-a-volume
expect_exit 1 "$PUBLISH" --to "dir:$TEST_DIR/store" "$TEST_DIR/does-not-exist"
ok "bad arguments refused; with no daemon the default store names its socket"
