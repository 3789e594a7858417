#!/bin/bash
# Functions longer than LIMIT lines (default 60) in the given C files that
# have no paragraph above them: a comment of at least two lines ending on
# the line before the signature (or before its storage-class line) — the
# place to say why the function is long. Prints one line per offender and
# exits 1 if there are any. A function starts at a line in column 0 that
# names it with "(" and ends at the first "}" in column 0 after its "{".
# Usage: tools/long-functions.sh [-l LIMIT] FILE...
set -u
limit=60
if [ "${1:-}" = "-l" ]; then limit=$2; shift 2; fi
awk -v limit="$limit" '
FNR == 1 { incomment = 0; cstart = 0; cend = -10; infn = 0; sig = 0 }
{
	line = $0
	if (!infn) {
		if (line ~ /^\/\*/) { cstart = FNR; incomment = 1 }
		if (incomment && line ~ /\*\//) { incomment = 0; cend = FNR; clines = FNR - cstart + 1 }
		if (line ~ /^[A-Za-z_].*\(/ && line !~ /;[ \t]*$/ && line !~ /^(typedef|struct|enum|union|#)/ \
		    || line ~ /^(static |const |struct |enum |unsigned |bool |int |void |uint|size_t|ssize_t|double|char)[^;=]*\($/) {
			if (!sig) { sig = FNR; name = line; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n] }
		}
		if (sig && line ~ /^\{/) { infn = 1; start = FNR; para = (cend >= sig - 1 && clines >= 2) }
		else if (sig && line ~ /;[ \t]*$/ && line !~ /^[ \t]/) { sig = 0 }
		else if (sig && line ~ /^$/) { sig = 0 }
		if (!sig && !incomment && line !~ /^\/\*/ && cend < FNR - 0 && line !~ /^[ \t]*\*/) { }
		next
	}
	if (line ~ /^\}/) {
		len = FNR - start - 1
		if (len > limit && !para) { printf "%s:%d: %s is %d lines with no paragraph above it\n", FILENAME, sig, name, len; bad = 1 }
		infn = 0; sig = 0
	}
}
END { exit bad }' "$@"
