#!/bin/bash
# make test: the layering lint, Criterion's unit tests (plain, under ASan +
# UBSan, and with line coverage), the shell-driven integration tests and
# the quick evaluation. Every stage runs even when one before it failed;
# the last lines name every stage that failed (and the integration tests
# that did), for a reader of only the tail of the output.
# Usage: test.sh BUILD_DIR   (MAKE and UNIT_ARGS from make's environment)
set -u
b=$1 make=${MAKE:-make}
bin=$PWD/$b/bin it=$b/integration.out bad=
rm -f "$it.tails"
tools/lint.sh || bad="$bad lint"
# shellcheck disable=SC2086
"$b/tests/unit-tests" --jobs 2 ${UNIT_ARGS:-} || bad="$bad unit"
$make --no-print-directory asan || bad="$bad asan"
$make --no-print-directory coverage || bad="$bad coverage"
CFS_FAIL_TAILS=$it.tails CFS_BIN=$bin tests/integration/run.sh | tee "$it"
[ "${PIPESTATUS[0]}" -eq 0 ] || bad="$bad integration"
tests/testbed/eval.sh "$bin" quick "$PWD/$b/eval-quick" || bad="$bad eval-quick"
if [ -s "$it.tails" ]; then sed "s/^/make test: /" "$it.tails"; fi
tail -n 2 "$it" | sed 's/^/make test: /'
if [ -n "$bad" ]; then echo "make test: FAILED:$bad"; exit 1; fi
echo "make test: every stage passed"
