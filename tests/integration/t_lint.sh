#!/bin/bash
# make lint catches what it says it catches: on a copy of the sources, each
# rule broken on purpose, one at a time, must fail the lint with a line
# naming the rule and the file, and the untouched copy must pass. The
# checks that need a build (exported names, the docs against --help) are
# left to make lint itself (LINT_SOURCES_ONLY=1).
. "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)

tree=$TEST_DIR/tree
mkdir -p "$tree"
(cd "$ROOT" && tar cf - tools common blockstore chord dhash sfsro-format client publisher cfs-fuse cfsd) |
	(cd "$tree" && tar xf -)
lint() { LINT_SOURCES_ONLY=1 "$tree/tools/lint.sh" >"$TEST_DIR/lint.out" 2>&1; }

lint || { cat "$TEST_DIR/lint.out"; fail "the untouched copy fails the lint"; }
ok "the untouched copy passes"

# break FILE with LINE (appended), expect the lint to fail with a line
# matching REGEX, then put FILE back
expect_caught() { # FILE LINE REGEX
	local f=$tree/$1
	cp "$f" "$TEST_DIR/saved"
	printf '%s\n' "$2" >>"$f"
	if lint; then fail "lint passed with '$2' in $1"; fi
	grep -q -E "$3" "$TEST_DIR/lint.out" ||
		{ cat "$TEST_DIR/lint.out"; fail "lint failed, but not with /$3/, for '$2' in $1"; }
	cp "$TEST_DIR/saved" "$f"
	ok "caught: ${2:0:60} in $1"
}
expect_caught common/rpc.c '#include <uv.h>' 'I/O or driver headers in the transport.s machines'
expect_caught common/link.c '#include <sys/socket.h>' 'I/O or driver headers'
expect_caught common/link_reasm.c '#include "common/transport_int.h"' 'I/O or driver headers'
expect_caught common/rpc.c 'static int f(void) { return time(0); }' 'the clock or the driver called'
expect_caught chord/table.c '#include "dhash/dhash.h"' 'chord/table.c includes dhash/dhash.h: chord may not depend on dhash'
expect_caught dhash/get_sm.c '#include "chord/internal.h"' 'only chord/chord.h is public'
expect_caught chord/chord.c '#include <leveldb/c.h>' '<leveldb/c.h> outside its module'
expect_caught client/client.c 'static void g(void) { uv_run(0, 0); }' 'uv_run outside common/loop.c'
# a file grown past 800 lines with no word on why
big=$(for i in $(seq 1 810); do echo "/* line $i */"; done)
expect_caught dhash/have.c "$big" 'dhash/have.c has over 800 lines and does not say why'

lint || { cat "$TEST_DIR/lint.out"; fail "the copy put back fails the lint"; }
ok "every break caught; the copy put back passes"
