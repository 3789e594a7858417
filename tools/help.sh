#!/bin/sh
# make help: the targets as docs/DEVELOPING.md's table lists them, each
# with its description wrapped at 78 columns.
exec awk -F ' [|] ' '/^[|] `make/ { gsub(/`|^[|] | [|]$/, ""); print $1; n = split($2, w, " ");
	l = "   "; for (i = 1; i <= n; i++) { if (length(l) + length(w[i]) > 78) { print l; l = "   " }
	l = l " " w[i] } print l }' "$1"
