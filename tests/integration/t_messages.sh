# What cfs-publish and cfs-fsck say, and their exit codes. Each
# message that misled is asserted in its new wording; cfs-fsck's exit code
# tells a damaged volume (1) from one it could not check (2); the progress
# bar on a terminal shows totals and a percentage; Ctrl-C says what was
# left undone; -q is silent; --version. No ring is needed: the unreachable
# stores are a port nobody serves and a socket nobody listens on.
. "$(dirname "$0")/lib.sh"

PUB=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
STORE=$CFS_BIN/cfs-storetool
export XDG_CONFIG_HOME=$TEST_DIR/config XDG_STATE_HOME=$TEST_DIR/state
unset CFS_STORE CFS_BOOTSTRAP
command -v script >/dev/null || fail "script(1) (util-linux) is needed for the terminal test"

# has FILE TEXT: the file holds TEXT (fixed string), else show it and fail.
has() { grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "no '$2' in $(basename "$1")"; }; }
hasnt() { ! grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "'$2' in $(basename "$1")"; }; }

# ---- --version
for p in "$PUB" "$FSCK"; do
	expect_exit 0 "$p" --version
	grep -qE "^$(basename "$p") [0-9]+\.[0-9]+" "$TEST_DIR/out" || fail "$p --version: $(cat "$TEST_DIR/out")"
	expect_exit 0 "$p" -V
done
ok "--version and -V"

# ---- -q: nothing on stderr when all goes well; the volume name on stdout
mkdir -p "$TEST_DIR/src/sub"
echo hello >"$TEST_DIR/src/a"
head -c 200000 /dev/urandom >"$TEST_DIR/src/sub/b"
expect_exit 0 "$PUB" --keygen "$TEST_DIR/key" -q
[ ! -s "$TEST_DIR/err" ] || fail "--keygen -q printed: $(cat "$TEST_DIR/err")"
expect_exit 0 "$PUB" -q -k "$TEST_DIR/key" --to "dir:$TEST_DIR/store" "$TEST_DIR/src"
[ ! -s "$TEST_DIR/err" ] || fail "cfs-publish -q printed: $(cat "$TEST_DIR/err")"
vol=$(cat "$TEST_DIR/out")
[ ${#vol} -eq 52 ] || fail "no volume name on stdout: '$vol'"
expect_exit 0 "$FSCK" -q --from "dir:$TEST_DIR/store" "$vol"
[ ! -s "$TEST_DIR/err" ] || fail "cfs-fsck -q printed: $(cat "$TEST_DIR/err")"
expect_exit 0 "$FSCK" --from "dir:$TEST_DIR/store" "$vol"
has "$TEST_DIR/err" "cfs-fsck: volume whole: 2 files, 2 directories"
ok "-q prints nothing on success; a whole volume exits 0 and says so"

# ---- an unreachable ring: named rightly, advice with the program's option
port=$(free_port)
expect_exit 1 "$PUB" -k "$TEST_DIR/key" --to "ring:127.0.0.1:$port" "$TEST_DIR/src"
has "$TEST_DIR/err" "cannot reach the ring through 127.0.0.1:$port: no ring node answered there"
has "$TEST_DIR/err" "give --to cfsd:SOCKET or --to ring:HOST:PORT, or publish offline with --to dir:PATH"
hasnt "$TEST_DIR/err" "no the ring"
[ "$(wc -l <"$TEST_DIR/err")" -eq 1 ] || fail "cfs-publish's error takes more than one line: $(cat "$TEST_DIR/err")"
expect_exit 2 "$FSCK" --from "ring:127.0.0.1:$port" "$vol"
has "$TEST_DIR/err" "cannot reach the ring through 127.0.0.1:$port"
has "$TEST_DIR/err" "no check was made of the volume; give another store"
[ "$(wc -l <"$TEST_DIR/err")" -eq 1 ] || fail "cfs-fsck's error takes more than one line: $(cat "$TEST_DIR/err")"
has "$TEST_DIR/err" "give another store with --from (cfsd:SOCKET, ring:HOST:PORT or dir:PATH) or -d DIR"
hasnt "$TEST_DIR/err" "--to"
hasnt "$TEST_DIR/err" "cfs-fsck: volume" # no summary after a check that did not happen
hasnt "$TEST_DIR/err" "0 missing, 0 corrupt"
expect_exit 2 "$FSCK" --from "cfsd:$TEST_DIR/nobody.sock" "$vol"
has "$TEST_DIR/err" "cannot reach cfsd at $TEST_DIR/nobody.sock: no cfsd is running there"
hasnt "$TEST_DIR/err" "--to"
expect_exit 2 "$FSCK" --replicas --from "cfsd:$TEST_DIR/nobody.sock" "$vol"
[ "$(wc -l <"$TEST_DIR/err")" -eq 1 ] || fail "cfs-fsck --replicas: $(cat "$TEST_DIR/err")"
ok "an unreachable store: named, advice with the right option, on one line; cfs-fsck exits 2"

# ---- a store that does not exist is not made by a reader
expect_exit 2 "$FSCK" --from "dir:$TEST_DIR/NEW" "$vol"
has "$TEST_DIR/err" "no such store: $TEST_DIR/NEW does not exist"
[ ! -e "$TEST_DIR/NEW" ] || fail "cfs-fsck --from dir:NEW created $TEST_DIR/NEW"
mkdir "$TEST_DIR/empty"
expect_exit 2 "$FSCK" --from "dir:$TEST_DIR/empty" "$vol"
has "$TEST_DIR/err" "no such store: $TEST_DIR/empty is not a dir: store"
[ -z "$(ls -A "$TEST_DIR/empty")" ] || fail "cfs-fsck made a store in an empty directory"
expect_exit 1 "$PUB" --from "dir:$TEST_DIR/NEW" --to "dir:$TEST_DIR/store2" "$vol"
has "$TEST_DIR/err" "no such store: $TEST_DIR/NEW does not exist"
[ ! -e "$TEST_DIR/NEW" ] || fail "cfs-publish --from dir:NEW created it"
ok "cfs-fsck --from dir:NEW refuses and creates nothing"

# ---- a host name that does not resolve is not bad syntax (.invalid never
# resolves, RFC 6761)
expect_exit 1 timeout 60 "$PUB" -k "$TEST_DIR/key" --to ring:no-such-host.invalid:4460 "$TEST_DIR/src"
has "$TEST_DIR/err" "cannot resolve the host name 'no-such-host.invalid'"
hasnt "$TEST_DIR/err" "bad address"
hasnt "$TEST_DIR/err" "is not an address"
expect_exit 2 timeout 60 "$FSCK" --from ring:no-such-host.invalid:4460 "$vol"
has "$TEST_DIR/err" "cannot resolve the host name 'no-such-host.invalid'"
hasnt "$TEST_DIR/err" "bad address"
expect_exit 1 "$PUB" -k "$TEST_DIR/key" --to ring:127.0.0.1:notaport "$TEST_DIR/src"
has "$TEST_DIR/err" "bad address '127.0.0.1:notaport'" # bad syntax still is
# ... and by the reader's tools (common/id.c), not only the publisher's
expect_exit 2 timeout 60 "$CFS_BIN/cfs-cat" --bootstrap no-such-host.invalid:4460 "$vol" x
has "$TEST_DIR/err" "cannot resolve the host name 'no-such-host.invalid'"
hasnt "$TEST_DIR/err" "bad address"
ok "an unresolvable host name is called that; bad syntax still is"

# ---- damaged (1) vs not checked (2) vs no such volume (1)
other=$("$PUB" --keygen "$TEST_DIR/key2" 2>/dev/null)
expect_exit 1 "$FSCK" --from "dir:$TEST_DIR/store" "$other"
has "$TEST_DIR/err" "has no root for volume $other"
victim=$("$STORE" keys "$TEST_DIR/store" | awk '$2 > 8000 { print $1; exit }')
[ -n "$victim" ] || fail "no data block to drop"
"$STORE" drop "$TEST_DIR/store" "$victim"
expect_exit 1 "$FSCK" --from "dir:$TEST_DIR/store" "$vol"
has "$TEST_DIR/err" "missing: /sub/b"
has "$TEST_DIR/err" "cfs-fsck: volume DAMAGED:"
expect_exit 1 "$FSCK" -q --from "dir:$TEST_DIR/store" "$vol"
has "$TEST_DIR/err" "cfs-fsck: volume DAMAGED:" # -q never hides damage
ok "cfs-fsck: 1 for a damaged volume or none, 2 when it could not check"

# ---- one meaning per short option: -b is cfsd's --bind, -l its --log-level
expect_exit 2 "$PUB" -b 4096 "$TEST_DIR/src"
has "$TEST_DIR/err" "unknown option '-b'"
expect_exit 2 "$FSCK" -l "$vol"
has "$TEST_DIR/err" "unknown option '-l'"
ok "publisher short options no longer clash with cfsd's"

# ---- the progress bar on a terminal: totals, percentage, ETA, one summary
mkdir "$TEST_DIR/big"
for i in $(seq 1 24); do head -c 1000000 /dev/urandom >"$TEST_DIR/big/f$i"; done
script -qfec "'$PUB' -k '$TEST_DIR/key' --to 'dir:$TEST_DIR/pstore' '$TEST_DIR/big'" /dev/null \
	>"$TEST_DIR/tty.raw" </dev/null || fail "publish on a terminal failed: $(cat "$TEST_DIR/tty.raw")"
tr '\r' '\n' <"$TEST_DIR/tty.raw" | sed 's/\x1b\[K//g' >"$TEST_DIR/tty"
grep -qE '^ *[0-9]+%  [0-9]+/24 files  [0-9.]+ [kM]?B/24\.0 MB  [0-9.]+ [kMG]?B/s  ETA ' "$TEST_DIR/tty" ||
	{ cat "$TEST_DIR/tty" >&2; fail "no bar with done/total files and bytes and a percentage"; }
grep -E 'info: 24 files, 1 dirs' "$TEST_DIR/tty" >/dev/null || fail "no summary line"
last=$(grep -v '^\s*$' "$TEST_DIR/tty" | grep -vE '^[0-9a-z]{52}$' | tail -n 1)
case $last in *"info: 24 files, 1 dirs"*) ;; *) fail "the bar does not end with the summary: '$last'" ;; esac
script -qfec "'$PUB' -q -k '$TEST_DIR/key' --to 'dir:$TEST_DIR/qstore' '$TEST_DIR/big' >/dev/null" /dev/null \
	>"$TEST_DIR/qtty" </dev/null || fail "publish -q on a terminal failed"
! grep -q '%' "$TEST_DIR/qtty" || fail "-q on a terminal drew a bar: $(cat -v "$TEST_DIR/qtty")"
ok "the bar shows done/total files and bytes and a percentage, then one summary line; -q hides it"

# ---- Ctrl-C during a publish: what was left undone, the root untouched
mkdir "$TEST_DIR/huge"
for i in $(seq 1 60); do head -c 2000000 /dev/urandom >"$TEST_DIR/huge/f$i"; done
root_before=$("$STORE" roots "$TEST_DIR/store")
"$PUB" -k "$TEST_DIR/key" --to "dir:$TEST_DIR/store" "$TEST_DIR/huge" >"$TEST_DIR/iout" 2>"$TEST_DIR/ierr" &
ipid=$!
PIDS+=("$ipid")
# SIGINT once the publish is under way (some packs written), not before
# its handler is in place.
packs_over() { [ "$(du -sk "$TEST_DIR/store/packs" | cut -f1)" -gt "$1" ]; }
wait_for 30 packs_over 4000 ||
	fail "the publish did not start writing"
kill -INT "$ipid"
st=0
wait "$ipid" || st=$?
[ "$st" -eq 130 ] || { cat "$TEST_DIR/ierr" >&2; fail "an interrupted publish exited $st, wanted 130"; }
grep -qE 'interrupted: left undone: [1-9][0-9]* of 60 files \([0-9.]+ [kM]?B of 120\.0 MB\) not published; the root was not updated' "$TEST_DIR/ierr" ||
	{ cat "$TEST_DIR/ierr" >&2; fail "no 'left undone' line"; }
[ ! -s "$TEST_DIR/iout" ] || fail "an interrupted publish printed a volume name"
[ "$("$STORE" roots "$TEST_DIR/store")" = "$root_before" ] || fail "the root changed"
echo "# interrupted: $(grep -o 'left undone: [^;]*' "$TEST_DIR/ierr")"
ok "Ctrl-C says what was left undone and leaves the root"
