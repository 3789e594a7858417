#!/bin/sh
# Write B/config.mk: the compiler and linker flags of every library the
# build uses, from pkg-config, once the packages are in place. LevelDB
# ships no .pc file on Debian 12, hence its fallback.
# Usage: configure.sh BUILD_DIR
set -eu
out=$1/config.mk
mkdir -p "$1"
{
	for m in UV:libuv SODIUM:libsodium MSGPACK:msgpack FUSE:fuse3 MHD:libmicrohttpd; do
		echo "${m%%:*}_CFLAGS := $(pkg-config --cflags "${m#*:}")"
		echo "${m%%:*}_LIBS := $(pkg-config --libs "${m#*:}")"
	done
	echo "LEVELDB_LIBS := $(pkg-config --libs leveldb 2>/dev/null || echo -lleveldb)"
} >"$out.tmp"
mv "$out.tmp" "$out"
