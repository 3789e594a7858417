#!/bin/bash
# make coverage: line coverage of the libraries by the unit tests alone.
# Usage: tools/coverage.sh BUILD_DIR UNIT_BIN MIN_PERCENT FOCUS_FILES -- DIRS...
#   Runs the unit-test binary (built with --coverage into BUILD_DIR), then
#   prints gcov's line coverage of every .c file in DIRS and of the focus
#   set (the state machines of lookups, gets/puts and the walk) as a whole.
#   Fails if the focus set is below MIN_PERCENT, if a focus file has no
#   coverage data (it was never built or never ran), or if the tests fail.
set -u
b=$1 bin=$2 min=$3
shift 3
focus=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do focus+=("$1"); shift; done
shift
dirs=("$@")
find "$b" -name '*.gcda' -delete
"$bin" --jobs 2 >"$b/coverage-unit.log" 2>&1 || { tail -20 "$b/coverage-unit.log"; echo "coverage: the unit tests failed"; exit 1; }
# lines FILE → "executed total" from gcov's summary of that one file.
lines() {
	local src=$1 obj
	obj="$b/$(dirname "$src")"
	gcov -n -o "$obj" "$src" 2>/dev/null | awk -v f="$src" '
		$0 ~ "^File .*" f "'"'"'$" { want = 1; next }
		want && /^Lines executed:/ { sub(/^Lines executed:/, ""); split($0, a, "% of "); 
			printf "%d %d\n", a[1] * a[2] / 100 + 0.5, a[2]; exit }
		/^File/ { want = 0 }'
}
st=0
printf '%-34s %8s %8s %7s\n' "file" "lines" "run" "cover"
tot_l=0 tot_r=0
for d in "${dirs[@]}"; do
	for src in "$d"/*.c; do
		[ -f "$b/${src%.c}.gcno" ] || continue
		read -r run total < <(lines "$src"; echo "0 0")
		[ "$total" -gt 0 ] || continue
		printf '%-34s %8d %8d %6.1f%%\n' "$src" "$total" "$run" "$(echo "100*$run/$total" | bc -l)"
		tot_l=$((tot_l + total)) tot_r=$((tot_r + run))
	done
done
printf '%-34s %8d %8d %6.1f%%\n' "all of ${dirs[*]}" "$tot_l" "$tot_r" "$(echo "100*$tot_r/($tot_l+0.0001)" | bc -l)"
f_l=0 f_r=0
for src in "${focus[@]}"; do
	read -r run total < <(lines "$src"; echo "0 0")
	if [ "$total" -eq 0 ]; then echo "coverage: no data for $src"; st=1; continue; fi
	f_l=$((f_l + total)) f_r=$((f_r + run))
done
pct=$(echo "100*$f_r/($f_l+0.0001)" | bc -l)
printf '%-34s %8d %8d %6.1f%%   (minimum %s%%)\n' "state machines: ${#focus[@]} files" "$f_l" "$f_r" "$pct" "$min"
echo "  ${focus[*]}"
if [ "$(echo "$pct < $min" | bc)" = 1 ]; then echo "coverage: below $min%"; st=1; fi
exit $st
