#!/bin/bash
# make lint: the layering rules, in miniature (after Tor's .may_include),
# and the docs against the code (tools/check-docs.py).
#   common/       includes no other module
#   blockstore/   includes only common/ (the storage engine)
#   sfsro-format/ includes only common/
#   chord/        includes only common/
#   dhash/        includes only chord/, sfsro-format/ (to check roots), blockstore/, common/
#   client/       includes only dhash/, chord/, common/ (how a program reaches the
#                 ring: the local cfsd's control socket, or a plain ring client)
#   publisher/    includes only client/, sfsro-format/, dhash/, chord/, blockstore/ (dir:), common/
#   cfs-fuse/     includes only client/, dhash/, sfsro-format/, chord/, blockstore/ (dir:), common/
#   cfsd/         includes only client/ (cfsctl's control requests), dhash/, sfsro-format/
#                 (pins walk volumes), chord/, common/
# A module includes only another's public header; leveldb/c.h only in
# blockstore/, fuse_lowlevel.h only in cfs-fuse/, msgpack.h only in the codec
# files (common/msg.c, and sfsro-format/ for blocks), ISA-L only in
# sfsro-format/coded.c. The transport's machines (common/link*.c, rpc.c,
# xfer.c, heap.c, upcap.c) include no libuv or socket header and call no
# socket or clock. Every symbol a
# module's archive exports carries the module's prefix (nm, below).
set -u
cd "$(dirname "$0")/.."
bad=0
declare -A allowed=(
	[common]=""
	[blockstore]="common"
	[sfsro-format]="common"
	[chord]="common"
	[dhash]="chord sfsro-format blockstore common"
	[client]="dhash chord common"
	[publisher]="client sfsro-format dhash chord blockstore common"
	[cfs-fuse]="client dhash sfsro-format chord blockstore common"
	[cfsd]="client dhash sfsro-format chord common"
)
declare -A public=(
	[common]="common/cfs.h" [blockstore]="blockstore/blockstore.h" [sfsro-format]="sfsro-format/sfsro.h" [chord]="chord/chord.h"
	[dhash]="dhash/dhash.h" [client]="client/client.h" [publisher]="publisher/publisher.h"
	[cfs-fuse]="cfs-fuse/cfsfuse.h"
	[cfsd]="cfsd/cfsd.h"
)
for mod in "${!allowed[@]}"; do
	[ -d "$mod" ] || continue
	while IFS= read -r line; do
		file=${line%%:*}
		inc=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
		dep=${inc%%/*}
		[ "$dep" = "$inc" ] && continue # same-folder include
		[ "$dep" = "$mod" ] && continue
		if [[ " ${allowed[$mod]} " != *" $dep "* ]]; then
			echo "lint: $file includes $inc: $mod may not depend on $dep"; bad=1
		elif [ "${public[$dep]:-}" != "$inc" ]; then
			echo "lint: $file includes $inc: only ${public[$dep]:-?} is public"; bad=1
		fi
	done < <(grep -H '#include "' "$mod"/*.[ch] 2>/dev/null)
done
check_only() { # HEADER ALLOWED-PATH-REGEX
	local hits
	hits=$(grep -l "#include <$1>" common/*.[ch] blockstore/*.[ch] chord/*.[ch] dhash/*.[ch] sfsro-format/*.[ch] \
		client/*.[ch] publisher/*.[ch] cfs-fuse/*.[ch] cfsd/*.[ch] 2>/dev/null | grep -v -E "$2")
	if [ -n "$hits" ]; then echo "lint: <$1> outside its module: $hits"; bad=1; fi
}
check_only leveldb/c.h '^blockstore/'
check_only fuse_lowlevel.h '^cfs-fuse/'
check_only msgpack.h '^(common/msg\.c|sfsro-format/)'
check_only isa-l/erasure_code.h '^sfsro-format/coded\.c'
# The transport's machines do no I/O (docs/INTERNALS.md, "The transport's
# layers"): the links, the calls, the frames, the heap and the upload cap
# include no libuv and no socket header, call no socket, timer or clock,
# and do not reach back into the driver (common/transport.c, which alone
# has udp.c and the loop).
sans_io=(common/link.[ch] common/link_*.[ch] common/rpc.[ch] common/xfer.[ch] common/heap.[ch] common/upcap.[ch] common/dgramq.[ch])
hits=$(grep -n -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](uv\.h|uv/|sys/socket\.h|netinet/|arpa/|netdb\.h|common/udp\.h|common/transport_int\.h)' \
	"${sans_io[@]}" 2>/dev/null)
[ -z "$hits" ] || { echo "lint: I/O or driver headers in the transport's machines:"; echo "$hits"; bad=1; }
hits=$(grep -n -E '\b(uv_[a-z_]+|cfs_udp_[a-z_]+|cfs_now_us|cfs_wall_ms|cfs__ver_[a-z_]+|socket|bind|connect|send|sendto|sendmsg|sendmmsg|recv|recvfrom|recvmsg|recvmmsg|clock_gettime|gettimeofday|time)\(' \
	"${sans_io[@]}" 2>/dev/null)
[ -z "$hits" ] || { echo "lint: I/O, the clock or the driver called from the transport's machines:"; echo "$hits"; bad=1; }
# Module-internal symbols (prefix__) stay inside their module.
declare -A prefix_dir=([bstore]=blockstore [chord]=chord [dhash]=dhash [sfsro]=sfsro-format [cfsd]=cfsd
	[cfsfuse]=cfs-fuse [pub]=publisher [cfs]=common [client]=client)
for p in "${!prefix_dir[@]}"; do
	hits=$(grep -l -E "\b${p}__[a-z]" */*.[ch] 2>/dev/null | grep -v "^${prefix_dir[$p]}/" || true)
	[ -z "$hits" ] || { echo "lint: ${p}__ symbols used outside ${prefix_dir[$p]}/: $hits"; bad=1; }
done
# A loop runs only through common/loop.c (cfs_loop_run_until, cfs_loop_run,
# cfs_loop_poll), which asserts on a run from inside a loop callback: no
# nested uv_run anywhere.
hits=$(grep -n 'uv_run(' common/*.c blockstore/*.c chord/*.c dhash/*.c sfsro-format/*.c client/*.c \
	publisher/*.c cfs-fuse/*.c cfsd/*.c 2>/dev/null | grep -v -E '^common/loop\.c:' || true)
[ -z "$hits" ] || { echo "lint: uv_run outside common/loop.c (use cfs_loop_*):"; echo "$hits"; bad=1; }
# A source file over 800 lines says why at its top (a paragraph starting
# "Why one file of over 800 lines").
for f in common/*.c blockstore/*.c chord/*.c dhash/*.c sfsro-format/*.c client/*.c publisher/*.c \
	cfs-fuse/*.c cfsd/*.c; do
	[ "$(wc -l <"$f")" -le 800 ] || head -n 60 "$f" | grep -q 'Why one file of over 800 lines' ||
		{ echo "lint: $f has over 800 lines and does not say why at its top"; bad=1; }
done
# A function over 60 lines in the protocol and file-system code says why
# in a paragraph above it (STYLE: "a paragraph above a non-obvious function").
tools/long-functions.sh chord/*.c dhash/*.c client/*.c cfs-fuse/*.c || bad=1

# LINT_SOURCES_ONLY=1 stops here: the checks of the sources alone, with no
# build (tests/integration/t_lint.sh runs them on a copy of the tree).
if [ "${LINT_SOURCES_ONLY:-}" = 1 ]; then
	[ $bad -eq 0 ] && echo "lint: sources ok"
	exit $bad
fi

# Exported names: every global symbol an archive defines carries its
# module's prefix (single underscore: the public API; double: shared
# between the module's own files only). Checked on the built archives with
# nm, so a helper forgotten `static` is caught too. The archives come from
# $B (default build) and are brought up to date first.
B=${B:-build}
declare -A lib_prefix=(
	[libchord.a]='chord_' [libdhash.a]='dhash_' [libsfsro.a]='sfsro_' [libclient.a]='client_'
	[libcfs_common.a]='cfs_' [libcfsd.a]='cfsd_' [libcfsfuse.a]='cfsfuse_|fs__'
	[libpublisher.a]='pub_' [libblockstore.a]='bstore_'
)
# The one allocation family (STYLE: "one xmalloc family") keeps its names.
allowed_names='^(xmalloc|xcalloc|xrealloc|xstrdup|xmemdup)$'
libs=()
for l in "${!lib_prefix[@]}"; do libs+=("$B/$l"); done
if ! command -v nm >/dev/null; then
	echo "lint: nm is missing (binutils): cannot check exported names"; bad=1
elif ! make -s --no-print-directory B="$B" "${libs[@]}" >/dev/null; then
	echo "lint: cannot build ${libs[*]} to check exported names (see make's errors above)"; bad=1
else
	for l in "${!lib_prefix[@]}"; do
		while read -r sym; do
			[[ $sym =~ ^(${lib_prefix[$l]}) ]] && continue
			[[ $sym =~ $allowed_names ]] && continue
			echo "lint: $B/$l exports '$sym': give it the prefix ${lib_prefix[$l]//|/ or } (or make it static)"
			bad=1
		done < <(nm -g --defined-only "$B/$l" | awk 'NF == 3 { print $3 }' | sort -u)
	done
fi

# Docs that cannot drift: every option of every installed program in its
# --help and man page, the same defaults in both, every cfsd setting in the
# sample config and cfsd.conf(5), every client setting in
# cfs-client.conf(5) (tools/check-docs.py reads them from the sources and
# runs each program's --help, so the programs are brought up to date first).
if ! command -v python3 >/dev/null; then
	echo "lint: python3 is missing: cannot check the docs against the code"; bad=1
elif ! progs=$(tools/check-docs.py --programs "$B") ||
	! make -s --no-print-directory B="$B" $progs >/dev/null; then
	echo "lint: cannot build the programs to check their docs (see make's errors above)"; bad=1
else
	tools/check-docs.py "$B/bin" || bad=1
fi
[ $bad -eq 0 ] && echo "lint: layering, exported names and docs ok"
exit $bad
