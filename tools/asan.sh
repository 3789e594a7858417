#!/bin/bash
# make asan: the unit tests built with AddressSanitizer + UndefinedBehavior-
# Sanitizer (build-asan) and run. Criterion does not count a sanitizer
# report in a test's worker as a failure, so the log is checked too: any
# report fails. libcriterion's runner leaks one object of its own;
# tests/lsan.supp suppresses leaks whose allocating caller is in
# libcriterion, and malloc_context_size=2 keeps that to the direct caller
# (a test's own leak has the test, not libcriterion, there). For full
# stacks when debugging:
#   ASAN_OPTIONS=malloc_context_size=30 build-asan/tests/unit-tests
# Usage: asan.sh   (MAKE and UNIT_ARGS from make's environment)
set -euo pipefail
${MAKE:-make} --no-print-directory B=build-asan OPT=-O1 \
	SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
	build-asan/tests/unit-tests
# shellcheck disable=SC2086
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:malloc_context_size=2 \
	LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	build-asan/tests/unit-tests --jobs 2 ${UNIT_ARGS:-} 2>&1 | tee build-asan/unit.log
if grep -q -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' build-asan/unit.log; then
	echo "asan: sanitizer reports above (build-asan/unit.log)"
	exit 1
fi
echo "asan: no sanitizer reports"
