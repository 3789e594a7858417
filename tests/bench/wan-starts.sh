#!/bin/bash
# Paired plain-client starts across continents: the wide-area bed of
# make bench-wan (12 cfsd, three each in us-east, us-west, eu and asia; a
# reader in eu), BENCH_VOLUMES (5) small volumes published through
# us-east, and for each volume a cold start (no kept ring contacts) and
# then a warm one (the contacts the cold one kept) of every build given,
# in turn. Every build mounts the same volumes, so each sees the same
# root keys: a root key's place on the ring decides the path a cold
# start's lookup walks, which makes one bench-wan run per build (new
# volumes each time) no measure of a change to the start.
# Prints, per volume and build: start to first ls (s), then user.cfs.stats'
# start_ms (root lookup, its RPCs, early root, first readdir answered).
# Usage: wan-starts.sh BIN_DIR [BIN_DIR...]   (each a copy of build/bin)
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: wan-starts.sh BIN_DIR [BIN_DIR...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$1
TEST_DIR=$(mktemp -d /tmp/cfs-wan-starts.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/wan.sh"
. "$here/lib.sh"
[ "$(id -u)" = 0 ] || { echo "wan-starts: needs root (network namespaces)" >&2; exit 1; }
mnt=$TEST_DIR/mnt
MOUNT_PID=""
starts_cleanup() {
	[ -n "$MOUNT_PID" ] && kill -TERM "$MOUNT_PID" 2>/dev/null || true
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt" || true
	cleanup
	cluster_cleanup
	rm -rf "$TEST_DIR"
}
trap starts_cleanup EXIT
mkdir -p "$TEST_DIR/tree/small"
for i in $(seq 20); do head -c $((4096 + i * 997)) /dev/urandom >"$TEST_DIR/tree/small/f$i"; done
wan_world
wan_place us-east:3 us-west:3 eu:3 asia:3
wan_start 1

start() { # BIN LABEL VOLUME CACHE-DIR: one mount until its first ls, then its start_ms
	mkdir -p "$mnt"
	local t f
	t=$(now)
	XDG_CACHE_HOME=$4 CFS_DATA_DIR=$TEST_DIR/no-daemon in_reader "$1/cfs-mount" -f \
		--state-dir "$TEST_DIR/$2.state" --update 0 --bootstrap "$(cluster_addr 0)" "$3" "$mnt" \
		>>"$TEST_DIR/$2.log" 2>&1 &
	MOUNT_PID=$!
	local end=$((SECONDS + 60))
	until mountpoint -q "$mnt" && ls "$mnt" >/dev/null 2>&1; do
		[ $SECONDS -lt $end ] || { tail -3 "$TEST_DIR/$2.log" >&2; fail "$2: no mount"; }
		sleep 0.01
	done
	f=$(since "$t")
	python3 -c 'import json, os, sys
t = json.loads(os.getxattr(sys.argv[1], "user.cfs.stats")).get("start_ms", {})
print("%-28s first ls %s s; root lookup %.0f ms (%d RPCs), early root %.0f, first readdir %.0f"
      % (sys.argv[2], sys.argv[3], t.get("root_lookup", 0), t.get("root_rpcs", 0),
         t.get("early_root", 0), t.get("readdir", 0)))' "$mnt" "$2" "$f"
	kill -TERM "$MOUNT_PID" 2>/dev/null || true
	wait "$MOUNT_PID" 2>/dev/null || true
	mountpoint -q "$mnt" && fusermount3 -u -z "$mnt" || true
	MOUNT_PID=""
}

for ((v = 1; v <= ${BENCH_VOLUMES:-5}; v++)); do
	"$1/cfs-publish" --keygen "$TEST_DIR/v$v.key" >"$TEST_DIR/v$v.vol" 2>/dev/null
	"$1/cfs-publish" --quiet --key "$TEST_DIR/v$v.key" --state-dir "$TEST_DIR/v$v.pub" \
		--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$TEST_DIR/tree" >/dev/null
	vol=$(cat "$TEST_DIR/v$v.vol")
	b=0
	for bin in "$@"; do
		b=$((b + 1))
		start "$bin" "volume $v, build $b, cold" "$vol" "$TEST_DIR/cache-$v-$b"
		start "$bin" "volume $v, build $b, warm" "$vol" "$TEST_DIR/cache-$v-$b"
	done
done
