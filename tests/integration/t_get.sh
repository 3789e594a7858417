#!/bin/bash
# cfs-get on a 4-daemon loopback ring:
#   - the whole volume copied out equals its source: contents, types,
#     modes, sizes, mtimes and link targets (tree-listing.py), diff -r;
#     the summary counts every file copied; a second run copies nothing;
#   - --check finds a file changed in place with its size and mtime kept,
#     which a plain run skips;
#   - one file into a directory and under a name of its own, a link (kept
#     a link), a subdirectory by /path, and as a plain ring client;
#   - killed with SIGKILL half-way through, it leaves no partial file
#     under a real name, and the next run copies the rest, skips what was
#     done, and leaves no temporary file;
#   - a link planted in DEST where the volume has a directory is not
#     followed: that directory fails with one line, the rest is copied;
#   - VOLUME@1 after a second publish gives the first version's tree;
#   - a malformed volume name exits 2, a missing path 1, each with one line.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
. "$(dirname "$0")/../harness/tree.sh"
PUBLISH=$CFS_BIN/cfs-publish
GET=$CFS_BIN/cfs-get
CAT=$CFS_BIN/cfs-cat
LISTING=$(dirname "$0")/tree-listing.py
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/state
N=4

# ---- the tree
src=$TEST_DIR/src
make_tree "$src/tree" 200 5
head -c $((6 << 20)) /dev/urandom >"$src/six-mb"
chmod 755 "$src/six-mb"
mkdir "$src/private" && echo secret >"$src/private/key" && chmod 600 "$src/private/key"
chmod 700 "$src/private"
mkdir "$src/many" # the tree the interrupted run is killed in
# 2,000 files of one block each (past the inline limit): at one block in
# flight the copy takes over a second, so the kill lands well inside it
for i in $(seq -w 1 2000); do head -c $((1100 + 10#$i)) /dev/urandom >"$src/many/f$i"; done
touch -d '2010-01-01 00:00:00.5' "$src/six-mb"

cluster_start "$N" 1 --stabilize-ms 250
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
sock=$TEST_DIR/node1/cfsd.sock
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/err" ||
	{ cat "$TEST_DIR/err"; fail "publish"; }
python3 "$LISTING" "$src" >"$TEST_DIR/src.list"
nfiles=$(grep -c '^[fl] ' "$TEST_DIR/src.list")
ok "published $(wc -l <"$TEST_DIR/src.list") entries ($nfiles files and links)"

# summary FILE: "C S F" from cfs-get's summary line in FILE.
summary() {
	sed -n 's/.*info: \([0-9]*\) copied, \([0-9]*\) skipped, \([0-9]*\) failed of .*/\1 \2 \3/p' "$1"
}

# ---- the whole volume
start=$(date +%s.%N)
"$GET" --cfsd "$sock" "$vol" "$TEST_DIR/copy" 2>"$TEST_DIR/get.err" || { cat "$TEST_DIR/get.err"; fail "cfs-get of the volume"; }
secs=$(printf %.2f "$(echo "$(date +%s.%N) - $start" | bc)")
python3 "$LISTING" "$TEST_DIR/copy" >"$TEST_DIR/copy.list"
diff "$TEST_DIR/src.list" "$TEST_DIR/copy.list" >"$TEST_DIR/diff" || { head "$TEST_DIR/diff"; fail "the copy's listing differs from the source's"; }
diff -r --no-dereference "$src" "$TEST_DIR/copy" || fail "diff -r finds differences"
[ -L "$TEST_DIR/copy/tree/link-rel" ] || fail "a link was not copied as a link"
[ "$(summary "$TEST_DIR/get.err")" = "$nfiles 0 0" ] || fail "summary: $(cat "$TEST_DIR/get.err")"
bytes=$(du -sb --apparent-size "$src" | cut -f1)
echo "# whole volume: $nfiles files and links, $((bytes / 1000000)) MB in $secs s: $(grep -o '[0-9.]* MB/s' "$TEST_DIR/get.err")"
ok "the whole volume copied out equals its source (contents, modes, mtimes, link targets)"

"$GET" --cfsd "$sock" "$vol" "$TEST_DIR/copy" 2>"$TEST_DIR/get.err" || { cat "$TEST_DIR/get.err"; fail "second cfs-get"; }
[ "$(summary "$TEST_DIR/get.err")" = "0 $nfiles 0" ] || fail "second run: $(cat "$TEST_DIR/get.err")"
ok "a second run skips all $nfiles"

"$GET" --cfsd "$sock" --progress "$vol/tree" "$TEST_DIR/bar" 2>"$TEST_DIR/get.err" || fail "cfs-get --progress"
grep -q "files .* ETA " "$TEST_DIR/get.err" || fail "--progress drew no bar: $(cat "$TEST_DIR/get.err")"
"$GET" --cfsd "$sock" --quiet "$vol/tree" "$TEST_DIR/quiet" 2>"$TEST_DIR/get.err" || fail "cfs-get --quiet"
[ ! -s "$TEST_DIR/get.err" ] || fail "--quiet printed: $(cat "$TEST_DIR/get.err")"
"$GET" --cfsd "$sock" "$vol/tree" "$TEST_DIR/nobar" 2>"$TEST_DIR/get.err" || fail "cfs-get"
[ "$(wc -l <"$TEST_DIR/get.err")" -eq 1 ] || fail "a bar or more than the summary off a terminal: $(cat "$TEST_DIR/get.err")"
ok "--progress draws the bar off a terminal, --quiet prints nothing, neither: the summary alone"

# ---- --check: a change that keeps size and mtime
f=$TEST_DIR/copy/six-mb
printf 'X' | dd of="$f" bs=1 seek=4000000 conv=notrunc status=none
touch -d '2010-01-01 00:00:00.5' "$f"
"$GET" --cfsd "$sock" "$vol/six-mb" "$f" 2>"$TEST_DIR/get.err" || fail "cfs-get of one file"
[ "$(summary "$TEST_DIR/get.err")" = "0 1 0" ] || fail "without --check: $(cat "$TEST_DIR/get.err")"
cmp -s "$src/six-mb" "$f" && fail "the file was not changed: the test would test nothing"
"$GET" --cfsd "$sock" --check "$vol" "$TEST_DIR/copy" 2>"$TEST_DIR/get.err" || fail "cfs-get --check"
[ "$(summary "$TEST_DIR/get.err")" = "1 $((nfiles - 1)) 0" ] || fail "--check: $(cat "$TEST_DIR/get.err")"
cmp "$src/six-mb" "$f" || fail "--check did not copy the changed file again"
ok "--check copies again a file changed with its size and mtime kept; a plain run skips it"

# ---- one file, a link, a subdirectory, a plain client
mkdir "$TEST_DIR/one"
"$GET" --cfsd "$sock" "$vol/tree/three-mb" "$TEST_DIR/one" 2>/dev/null || fail "one file into a directory"
cmp "$src/tree/three-mb" "$TEST_DIR/one/three-mb" || fail "one file into a directory differs"
"$GET" --cfsd "$sock" "$vol/private/key" "$TEST_DIR/one/renamed" 2>/dev/null || fail "one file under a name"
cmp "$src/private/key" "$TEST_DIR/one/renamed" || fail "one file under a name differs"
[ "$(stat -c %a "$TEST_DIR/one/renamed")" = 600 ] || fail "mode of one file: $(stat -c %a "$TEST_DIR/one/renamed")"
"$GET" --cfsd "$sock" "$vol/tree/link-dangling" "$TEST_DIR/one/" 2>/dev/null || fail "a link"
[ "$(readlink "$TEST_DIR/one/link-dangling")" = /nonexistent/target ] || fail "a link's target"
"$GET" --bootstrap "$(cluster_addr 2)" "$vol/tree/deep" "$TEST_DIR/deep" 2>"$TEST_DIR/get.err" ||
	{ cat "$TEST_DIR/get.err"; fail "a subdirectory as a plain client"; }
diff <(python3 "$LISTING" "$src/tree/deep") <(python3 "$LISTING" "$TEST_DIR/deep") || fail "the subdirectory differs"
ok "one file (into a directory, under a name, mode 0600), a dangling link, a subdirectory as a plain client"

# ---- interrupted, then resumed
"$GET" --cfsd "$sock" --window 1 --jobs 1 "$vol/many" "$TEST_DIR/many" 2>"$TEST_DIR/kill.err" &
gpid=$!
PIDS+=("$gpid")
# files go in name order: the fifth in place means the run is under way
wait_for 30 test -e "$TEST_DIR/many/f0005" || fail "the first files never came"
kill -KILL "$gpid"
wait "$gpid" 2>/dev/null && fail "cfs-get finished before it was killed: the test would test nothing"
done_before=$(ls "$TEST_DIR/many" | grep -c '^f')
[ "$done_before" -lt 2000 ] || fail "all 2000 files were there when it was killed"
for f in "$TEST_DIR"/many/f*; do
	cmp -s "$f" "$src/many/${f##*/}" || fail "a partial or wrong file under its real name: ${f##*/}"
done
temps=$(ls -A "$TEST_DIR/many" | grep -c '^\.cfs-get-' || true)
echo "# killed with $done_before of 2000 files in place, $temps temporary file(s)"
"$GET" --cfsd "$sock" "$vol/many" "$TEST_DIR/many" 2>"$TEST_DIR/get.err" || { cat "$TEST_DIR/get.err"; fail "the resumed run"; }
[ "$(summary "$TEST_DIR/get.err")" = "$((2000 - done_before)) $done_before 0" ] ||
	fail "resumed with $done_before done: $(cat "$TEST_DIR/get.err")"
diff -r "$src/many" "$TEST_DIR/many" || fail "the resumed copy differs (or holds a temporary file)"
ok "killed half-way: every file under its name whole; the rerun copied $((2000 - done_before)) and skipped $done_before"

# ---- a link planted in DEST where the volume has a directory
mkdir -p "$TEST_DIR/outside" "$TEST_DIR/planted"
ln -s "$TEST_DIR/outside" "$TEST_DIR/planted/private"
expect_exit 1 "$GET" --cfsd "$sock" "$vol" "$TEST_DIR/planted"
[ -z "$(ls -A "$TEST_DIR/outside")" ] || fail "cfs-get wrote through a link planted in DEST"
[ -L "$TEST_DIR/planted/private" ] || fail "the planted link was replaced"
[ "$(grep -c 'error:' "$TEST_DIR/err")" -eq 1 ] && grep -q "planted/private: cannot make the directory" "$TEST_DIR/err" ||
	fail "a planted link: $(cat "$TEST_DIR/err")"
grep -q "1 failed of $nfiles files and links; [0-9]* directories, 1 failed" "$TEST_DIR/err" ||
	fail "a planted link's summary: $(tail -1 "$TEST_DIR/err")"
cmp "$src/six-mb" "$TEST_DIR/planted/six-mb" || fail "the rest was not copied beside the planted link"
ok "a link planted where a directory goes is not followed: one line, exit 1, the rest copied"

# ---- bad input
expect_exit 2 "$GET" --cfsd "$sock" not-a-volume "$TEST_DIR/x"
[ "$(wc -l <"$TEST_DIR/err")" -eq 2 ] && grep -q "^cfs-get: 'not-a-volume' is not a volume name" "$TEST_DIR/err" ||
	fail "malformed volume: $(cat "$TEST_DIR/err")"
expect_exit 2 "$GET" --cfsd "$sock" --jobs 0 "$vol" "$TEST_DIR/x"
expect_exit 1 "$GET" --cfsd "$sock" "$vol/no/such/path" "$TEST_DIR/x"
[ "$(wc -l <"$TEST_DIR/err")" -eq 1 ] && grep -q "no/such/path: No such file or directory" "$TEST_DIR/err" ||
	fail "missing path: $(cat "$TEST_DIR/err")"
[ ! -e "$TEST_DIR/x" ] || fail "a failed cfs-get made its DEST"
ok "a malformed volume exits 2, a missing path 1, each with one line"

# ---- a version by number
echo changed >"$src/tree/inline-small"
rm -r "$src/many"
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "second publish"; }
"$GET" --cfsd "$sock" "$vol@1" "$TEST_DIR/v1" 2>"$TEST_DIR/get.err" || { cat "$TEST_DIR/get.err"; fail "cfs-get VOLUME@1"; }
python3 "$LISTING" "$TEST_DIR/v1" >"$TEST_DIR/v1.list"
diff "$TEST_DIR/src.list" "$TEST_DIR/v1.list" >/dev/null || fail "VOLUME@1 is not the first version's tree"
"$GET" --cfsd "$sock" "$vol" "$TEST_DIR/v2" 2>/dev/null || fail "cfs-get of the newest version"
diff -r --no-dereference "$src" "$TEST_DIR/v2" || fail "the newest version differs from the source"
"$GET" --cfsd "$sock" "$vol@1/many/f0007" "$TEST_DIR/f0007" 2>/dev/null || fail "cfs-get VOLUME@1/PATH"
cmp -s "$TEST_DIR/f0007" "$TEST_DIR/many/f0007" || fail "VOLUME@1/many/f0007 differs"
expect_exit 1 "$GET" --cfsd "$sock" "$vol/many/f0007" "$TEST_DIR/gone"
ok "VOLUME@1 after a second publish is the first version's tree (and @1/PATH a file only it has); VOLUME the second's"

# ---- figures: the same bytes through cfs-cat and cfs-get
t0=$(date +%s.%N)
"$CAT" --cfsd "$sock" "$vol" /six-mb >"$TEST_DIR/cat.out" || fail "cfs-cat"
t1=$(date +%s.%N)
"$GET" --cfsd "$sock" "$vol/six-mb" "$TEST_DIR/get.out" 2>/dev/null || fail "cfs-get"
t2=$(date +%s.%N)
echo "# 6 MiB file, cold caches aside: cfs-cat $(echo "scale=1; 6.29 / ($t1 - $t0)" | bc) MB/s, cfs-get $(echo "scale=1; 6.29 / ($t2 - $t1)" | bc) MB/s"
