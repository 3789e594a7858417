#!/bin/bash
# make demo — what CFS can do today, on this machine, step by step.
#
# Today that is the cfsd daemon, its control socket and the UDP RPC
# transport, and publishing a tree into a local store and verifying it. The
# ring, the block store on it and the FUSE mount arrive with later issues,
# and this demo grows with them into "start a ring, publish a tree, mount
# it, diff it".
set -euo pipefail
: "${CFS_BIN:?}"
dir=$(mktemp -d /tmp/cfs-demo.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
	echo "demo: stopped every daemon it started; nothing is left running"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
pick_port() { while :; do p=$((20000 + RANDOM % 40000)); ss -Hlun "sport = :$p" | grep -q . || { echo $p; return; }; done; }

say "Starting two cfsd daemons on loopback"
for n in 1 2; do
	port=$(pick_port)
	"$CFS_BIN/cfsd" --port "$port" --data "$dir/node$n" 2>"$dir/node$n.log" &
	pids+=($!)
	eval "port$n=$port"
	for _ in $(seq 100); do "$CFS_BIN/cfsctl" --data "$dir/node$n" status >/dev/null 2>&1 && break; sleep 0.05; done
	echo "node$n: pid ${pids[-1]}, UDP port $port, data $dir/node$n"
done

say "cfsctl ping: UDP RPCs to each daemon (IPv4 and IPv6)"
"$CFS_BIN/cfsctl" ping -c 3 "127.0.0.1:$port1"
"$CFS_BIN/cfsctl" ping -c 2 "[::1]:$port2"

say "Hostile input: junk datagrams are counted and dropped"
for junk in '\xdd\xff\xff\xff\xff' '\xc1' 'not msgpack at all'; do printf "$junk" >/dev/udp/127.0.0.1/"$port1"; done
"$CFS_BIN/cfsctl" ping -c 1 "127.0.0.1:$port1"

say "cfsctl status of node1"
"$CFS_BIN/cfsctl" --data "$dir/node1" status

say "A second daemon on node1's data directory is refused"
"$CFS_BIN/cfsd" --port "$(pick_port)" --data "$dir/node1" || echo "(refused, exit $?)"

say "cfs-publish: the project's docs and sources, signed, into a local directory store"
export XDG_CONFIG_HOME=$dir/config
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir/sample"
cp -r "$src/docs" "$src/common" "$src/sfsro-format" "$src/publisher" "$src/README.md" "$dir/sample/"
vol=$("$CFS_BIN/cfs-publish" --keygen 2>/dev/null)
echo "volume: $vol"
"$CFS_BIN/cfs-publish" --quiet --to "dir:$dir/store" "$dir/sample"

say "cfs-fsck: verify every block from the signed root, list the tree"
"$CFS_BIN/cfs-fsck" --from "dir:$dir/store" --list "$vol" >"$dir/listing"
head -12 "$dir/listing"
echo "..."

say "Not yet here: the Chord ring, DHash block storage on it, and cfs-mount (later issues)"
