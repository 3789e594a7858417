#!/bin/bash
# Run every tests/integration/t_*.sh, each in its own temp dir with a time
# limit, and finish with one "N passed, N failed" line. CFS_TESTS="t_a t_b"
# runs only those.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${CFS_BIN:?set CFS_BIN to the directory holding cfsd and cfsctl}"
export CFS_BIN
limit=${CFS_TEST_TIMEOUT:-600}
passed=0 failed=0 failures="" faildirs=""
for t in "$here"/t_*.sh; do
	name=$(basename "$t" .sh)
	if [ -n "${CFS_TESTS:-}" ]; then
		case " $CFS_TESTS " in *" $name "*) ;; *) continue ;; esac
	fi
	dir=$(mktemp -d "/tmp/cfs-it-$name.XXXXXX")
	start=$(date +%s.%N)
	if TEST_DIR=$dir timeout --kill-after=10 "$limit" bash "$t" >"$dir/log" 2>&1; then
		st=0
	else
		st=$?
	fi
	secs=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
	if [ $st -eq 0 ]; then
		passed=$((passed + 1))
		echo "[PASS] $name (${secs}s)"
		grep '^#' "$dir/log" | sed 's/^/    /'
		rm -rf "$dir"
	else
		failed=$((failed + 1))
		failures="$failures $name"
		echo "[FAIL] $name (${secs}s, exit $st); log follows:"
		sed 's/^/    | /' "$dir/log" | tail -n 60
		faildirs="$faildirs $dir"
	fi
done
# The failures' logs once more at the very end, where a reader of only the
# tail of the output (a CI summary) sees them.
# CFS_FAIL_TAILS names a file that gets each failure's last lines, for a
# caller that prints them after stages of its own (make test).
[ -n "${CFS_FAIL_TAILS:-}" ] && : >"$CFS_FAIL_TAILS"
for dir in $faildirs; do
	echo "---- the end of $(basename "$dir")/log:"
	sed 's/^/    | /' "$dir/log" | tail -n 40
	if [ -n "${CFS_FAIL_TAILS:-}" ]; then
		echo "the end of $(basename "$dir")/log:" >>"$CFS_FAIL_TAILS"
		grep -v '^#' "$dir/log" | tail -n 8 | sed 's/^/  | /' >>"$CFS_FAIL_TAILS"
	fi
done
[ -n "$failures" ] && echo "failed:$failures"
echo "integration: $passed passed, $failed failed"
[ $failed -eq 0 ]
