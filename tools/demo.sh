#!/bin/bash
# make demo — the main job, on this machine, step by step: start a ring of
# cfsd daemons on loopback, each on its own address 127.76.0.N (IDs hash the
# IP and an index, not the port, so daemons sharing one IP share its 64
# ring positions), publish the project's own docs and sources as a
# signed volume, mount it through FUSE, list it and diff it against the
# source, unmount, stop every daemon. Nothing is left running.
set -euo pipefail
: "${CFS_BIN:?}"
N=${DEMO_NODES:-4}
dir=$(mktemp -d /tmp/cfs-demo.XXXXXX)
pids=()
mnt=$dir/mnt
mount_pid=
cleanup() {
	if [ -n "$mount_pid" ] && kill -0 "$mount_pid" 2>/dev/null; then
		kill -TERM "$mount_pid" 2>/dev/null || true
		wait "$mount_pid" 2>/dev/null || true
	fi
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt" 2>/dev/null || true
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$dir"
	echo "demo: unmounted, stopped every daemon it started; nothing is left running"
}
trap cleanup EXIT
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
pick_port() { while :; do p=$((20000 + RANDOM % 40000)); [ -n "$(ss -Hlun "sport = :$p")" ] || { echo $p; return; }; done; }
ctl() { "$CFS_BIN/cfsctl" --data "$dir/node$1" "${@:2}"; }

say "Starting a ring of $N cfsd daemons on loopback (k = 3 replicas)"
for ((n = 0; n < N; n++)); do
	port=$(pick_port)
	ip=127.76.$((n / 250)).$((n % 250 + 1))
	boot=()
	[ "$n" -gt 0 ] && boot=(--bootstrap "$addr0")
	"$CFS_BIN/cfsd" --bind "$ip" --port "$port" --data "$dir/node$n" --replicas 3 --stabilize-ms 250 \
		"${boot[@]}" 2>"$dir/node$n.log" &
	pids+=($!)
	[ "$n" -eq 0 ] && addr0=$ip:$port
	for _ in $(seq 200); do ctl "$n" status >/dev/null 2>&1 && break; sleep 0.05; done
	echo "node$n: pid ${pids[-1]}, UDP $ip:$port, data $dir/node$n"
done
printf 'waiting for every successor list to be right'
for _ in $(seq 120); do
	ok=1
	for ((n = 0; n < N; n++)); do
		got=$(ctl "$n" status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len({s["id"] for v in d["ring"]["vnodes"] for s in v["succs"]}))' 2>/dev/null || echo 0)
		[ "$got" -ge $((N - 1)) ] || ok=0
	done
	[ $ok = 1 ] && break
	printf '.'; sleep 0.5
done
echo

say "cfsctl status of node0 (ring neighbours, estimate, block store)"
ctl 0 status | sed -n 1,20p   # (sed reads it all: head would quit early, a SIGPIPE under pipefail)

say "cfs-publish: the project's docs and sources, signed, into the ring through node0"
export XDG_CONFIG_HOME=$dir/config
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir/sample"
cp -r "$src/README.md" "$src/docs" "$src/common" "$src/chord" "$src/dhash" "$src/sfsro-format" \
	"$src/publisher" "$src/cfs-fuse" "$src/cfsd" "$dir/sample/"
"$CFS_BIN/cfs-publish" --keygen 2>/dev/null >/dev/null
vol=$("$CFS_BIN/cfs-publish" --quiet --to "cfsd:$dir/node0/cfsd.sock" "$dir/sample")
echo "volume: $vol"

say "cfs-mount: mount the volume through node$((N - 1)) (a different daemon)"
mkdir -p "$mnt"
"$CFS_BIN/cfs-mount" -f --data "$dir/node$((N - 1))" --state-dir "$dir/state" "$vol" "$mnt" \
	>"$dir/mount.out" 2>"$dir/mount.log" &
mount_pid=$!
for _ in $(seq 200); do mountpoint -q "$mnt" && break; sleep 0.05; done
mountpoint -q "$mnt" || { cat "$dir/mount.log"; echo "demo: the mount failed" >&2; exit 1; }
echo "mounted at $(cat "$dir/mount.out") (pid $mount_pid)"

say "ls -l of the mounted volume"
ls -l "$mnt"

say "diff -r of the source against the mount (every byte verified against the signed root)"
diff -r "$dir/sample" "$mnt" && echo "no differences: $(find "$mnt" -type f | wc -l) files, $(du -sb "$mnt" | cut -f1) bytes"

say "Read-only: writing is refused"
touch "$mnt/new-file" 2>&1 || true

say "What the mount fetched (its block cache statistics, from the user.cfs.stats attribute)"
python3 -c "import os,sys; print(os.getxattr(sys.argv[1], 'user.cfs.stats').decode())" "$mnt"

say "Unmounting (SIGTERM) and stopping the daemons"
kill -TERM "$mount_pid"
wait "$mount_pid" && echo "cfs-mount exited cleanly"
mount_pid=
