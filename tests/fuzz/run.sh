#!/bin/bash
# make fuzz: run each fuzz target SECONDS from seeds the current encoder
# writes (gen_seeds), keeping its corpus and findings under FB; any
# finding fails. Usage: run.sh FB SECONDS TARGET...
set -u
fb=$1 secs=$2
shift 2
mkdir -p "$fb/seeds" && "$fb/fuzz/gen_seeds" "$fb"/seeds/fuzz_{msg,name,block,denylist} || exit 1
for f in "$@"; do
	n=$(basename "$f")
	mkdir -p "$fb/corpus/$n" "$fb/findings/$n" "$fb/seeds/$n"
	echo "== $n: $secs s"
	"$f" -max_total_time="$secs" -max_len=70000 -print_final_stats=1 \
		-artifact_prefix="$fb/findings/$n/" "$fb/corpus/$n" "$fb/seeds/$n" > "$fb/$n.log" 2>&1
	st=$?
	grep -E '^#[0-9]+.*DONE|stat::number_of_executed_units|ERROR|SUMMARY' "$fb/$n.log"
	if [ $st -ne 0 ]; then echo "$n: FINDING, see $fb/$n.log"; exit 1; fi
	echo "$n: no finding"
done
