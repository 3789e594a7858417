#!/bin/bash
# make bench-read: reading through cfs-mount on a 16-daemon loopback ring,
# side by side with its baselines, all in one run:
#   - the ring's first read of a file (its lookup paths' servers take cached
#     copies then), by cfs-cat and, of a second file, by the mount; every
#     later comparison reads a file the ring has served once before;
#   - a 256 MiB file read sequentially through the mount, cold (fresh mount,
#     kernel caches dropped) and warm (again, from the kernel's page cache);
#   - the same file after a remount, from the mount's disk cache;
#   - the same file through the client library without FUSE (cfs-cat);
#   - the same file published in 60 KiB blocks (the largest the old
#     transport carried, so that figures compare across versions) instead
#     of 8 KiB: through the mount and cfs-cat; bench-blocksize compares
#     the block sizes themselves;
#   - the mount and cfs-cat again as plain ring clients (--bootstrap, no
#     cfsd in between);
#   - the same file served by nginx over loopback and fetched with curl;
#   - whole-file download speed against the number of blocks in flight,
#     1..64 (the shape of CFS Figure 6), through cfs-cat;
#   - find and ls -lR of a 10,000-file tree through a cold mount: wall time
#     and block fetches.
# Usage: bench-read.sh BIN_DIR   (BENCH_READ_MB, BENCH_SWEEP_MB, BENCH_FILES)
set -euo pipefail
BIN=$1
here=$(cd "$(dirname "$0")" && pwd)
export CFS_BIN=$BIN
TEST_DIR=$(mktemp -d /tmp/cfs-bench-read.XXXXXX)
export TEST_DIR
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
. "$here/lib.sh"
SIZE_MB=${BENCH_READ_MB:-256}
SWEEP_MB=${BENCH_SWEEP_MB:-32}
FILES=${BENCH_FILES:-10000}
N=16
M=5
mnt=$TEST_DIR/mnt
MOUNT_PID=
NGINX_PID=
bench_cleanup() {
	[ -n "$MOUNT_PID" ] && kill -TERM "$MOUNT_PID" 2>/dev/null && wait "$MOUNT_PID" 2>/dev/null
	mountpoint -q "$mnt" 2>/dev/null && fusermount3 -u -z "$mnt"
	[ -n "$NGINX_PID" ] && kill -TERM "$NGINX_PID" 2>/dev/null
	cleanup
	cluster_cleanup
	rm -rf "$TEST_DIR"
}
trap bench_cleanup EXIT

stat_of() { python3 -c "import json,os,sys; print(json.loads(os.getxattr(sys.argv[1], 'user.cfs.stats'))[sys.argv[2]])" "$mnt" "$1"; }

# Wait (at most 120 s) until the daemons are nearly idle: after a publish
# the daemons still work for a while (replica pushes, LevelDB compacting its
# index), and a read timed meanwhile measures that as much as the reader.
wait_quiet() {
	python3 - "${CL_PID[@]}" <<'EOF'
import os, sys, time
pids = [p for p in sys.argv[1:] if p]
hz = os.sysconf("SC_CLK_TCK")
def cpu():
    t = 0
    for p in pids:
        try:
            f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
            t += int(f[11]) + int(f[12])
        except OSError:
            pass
    return t / hz
start = time.time()
last, quiet = cpu(), 0
while time.time() - start < 120 and quiet < 3:
    time.sleep(1)
    now = cpu()
    # under 5 % of one core, all daemons together, three seconds running
    quiet = quiet + 1 if now - last < 0.05 else 0
    last = now
print("%.0f" % (time.time() - start))
EOF
}

mount_fresh() {
	if [ -n "$MOUNT_PID" ]; then
		kill -TERM "$MOUNT_PID"; wait "$MOUNT_PID" || true; MOUNT_PID=
	fi
	"$BIN/cfs-mount" -f ${MOUNT_VIA:---data $TEST_DIR/node$M} --state-dir "$TEST_DIR/state" "$@" "${MOUNT_VOL:-$vol}" "$mnt" \
		>/dev/null 2>>"$TEST_DIR/mount.log" &
	MOUNT_PID=$!
	wait_for 20 mountpoint -q "$mnt" || { cat "$TEST_DIR/mount.log"; fail "not mounted"; }
	sync; echo 3 >/proc/sys/vm/drop_caches
}

echo "== generating: two ${SIZE_MB} MiB files, a ${SWEEP_MB} MiB file, a ${FILES}-file tree"
src=$TEST_DIR/src
mkdir -p "$src/tree"
head -c "$((SIZE_MB << 20))" /dev/urandom >"$src/big"
head -c "$((SIZE_MB << 20))" /dev/urandom >"$src/big2"
head -c "$((SWEEP_MB << 20))" /dev/urandom >"$src/sweep"
python3 - "$src/tree" "$FILES" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(1500 + i % 3000))
EOF

cluster_start "$N" 1 --stabilize-ms 250
cluster_wait_correct 90 || fail "the ring did not converge"
echo "== ring of $N daemons (k = 6) converged in ${CLUSTER_CONVERGED_S}s"
export XDG_CONFIG_HOME=$TEST_DIR/config
"$BIN/cfs-publish" --keygen >/dev/null 2>&1
t0=$(now)
vol=$("$BIN/cfs-publish" --quiet --block-size 8192 --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" \
	2>"$TEST_DIR/publish.log") ||
	{ cat "$TEST_DIR/publish.log"; fail "publish"; }
secs=$(since "$t0")
bytes=$(du -sb --apparent-size "$src" | cut -f1)
echo "== published $(numfmt --to=iec "$bytes") in ${secs}s: $(mbs "$bytes" "$secs") MB/s with 6 replicas"
# the big file again, in 60 KiB blocks: a volume of its own (its own key)
mkdir -p "$TEST_DIR/src60"
ln "$src/big" "$TEST_DIR/src60/big"
"$BIN/cfs-publish" --keygen "$TEST_DIR/key60" >/dev/null 2>&1
vol60=$("$BIN/cfs-publish" --quiet --key "$TEST_DIR/key60" --block-size 61440 \
	--to "cfsd:$TEST_DIR/node0/cfsd.sock" "$TEST_DIR/src60" 2>>"$TEST_DIR/publish.log") ||
	{ cat "$TEST_DIR/publish.log"; fail "publish with 60 KiB blocks"; }

size=$((SIZE_MB << 20))
mkdir -p "$mnt"
echo "== the daemons were idle again $(wait_quiet) s after publishing (pushes, index compactions)"

# ---- the ring's first reads. Servers on a get's lookup path receive a
# copy of the block for their caches (CFS 5.3), so the first read of a file
# costs the ring more than later ones. The comparisons below are made with
# files the ring has served once; these two rows show the first reads, by
# cfs-cat (of big, before everything else) and by the mount (of big2).
sync; echo 3 >/proc/sys/vm/drop_caches
t0=$(now); "$BIN/cfs-cat" --data "$TEST_DIR/node$M" --window 24 "$vol" /big >/dev/null; first_cat=$(since "$t0")
mount_fresh
t0=$(now); dd if="$mnt/big2" of=/dev/null bs=1M status=none; first_mount=$(since "$t0")

# ---- the comparisons: each reader of a pair in turn, BENCH_ROUNDS times
# (3), every read cold (a fresh mount; page caches dropped, the daemons'
# too), the median reported. Alternating keeps the ring's state (what its
# caches and indexes hold) the same for both readers of a pair.
ROUNDS=${BENCH_ROUNDS:-3}
declare -A RUNS
mount_read() { # KEY VOL [cfs-mount options]: one timed cold read of /big
	local key=$1 v=$2 t0; shift 2
	MOUNT_VOL=$v mount_fresh "$@"
	t0=$(now); dd if="$mnt/big" of=/dev/null bs=1M status=none; RUNS[$key]+=" $(since "$t0")"
}
cat_read() { # KEY cfs-cat arguments...: the same through the client library
	local key=$1 t0; shift
	sync; echo 3 >/proc/sys/vm/drop_caches
	t0=$(now); "$BIN/cfs-cat" "$@" /big >/dev/null; RUNS[$key]+=" $(since "$t0")"
}
median() { python3 -c "import statistics, sys; print('%.3f' % statistics.median(map(float, sys.argv[1:])))" ${RUNS[$1]}; }
spread() { python3 -c "import sys; v = [$2 / 1e6 / float(x) for x in sys.argv[1:]]; print('%.0f-%.0f' % (min(v), max(v)))" ${RUNS[$1]}; }

for ((r = 0; r < ROUNDS; r++)); do
	mount_read cold "$vol"
	[ "$r" = 0 ] && fetches=$(stat_of fetches)
	cat_read plain --data "$TEST_DIR/node$M" --window 24 "$vol"
done
dd if="$mnt/big" of=/dev/null bs=1M status=none # the page cache, dropped by cat_read
t0=$(now); dd if="$mnt/big" of=/dev/null bs=1M status=none; warm=$(since "$t0")
cmp -s "$src/big" "$mnt/big" || fail "the mount read different bytes"

# ---- a remount whose disk cache holds the file
disk="--disk-cache-mb $((SIZE_MB * 2)) --cache-dir $TEST_DIR/cache"
mount_fresh $disk
dd if="$mnt/big" of=/dev/null bs=1M status=none
mount_fresh $disk
t0=$(now); dd if="$mnt/big" of=/dev/null bs=1M status=none; remount=$(since "$t0")
remount_fetches=$(stat_of fetches)

# ---- both with 60 KiB blocks, after the ring's first read of the file
sync; echo 3 >/proc/sys/vm/drop_caches
t0=$(now); "$BIN/cfs-cat" --data "$TEST_DIR/node$M" --window 24 "$vol60" /big >/dev/null; first60=$(since "$t0")
for ((r = 0; r < ROUNDS; r++)); do
	mount_read cold60 "$vol60"
	cat_read plain60 --data "$TEST_DIR/node$M" --window 24 "$vol60"
done
cmp -s "$src/big" "$mnt/big" || fail "the mount read different bytes (60 KiB blocks)"

# ---- both again as plain ring clients: no cfsd between them and the ring.
# A plain client looks up iteratively, so its lookup paths (and the servers
# that take cached copies on them) are not the daemon's: the first plain
# read pays for those copies, and is timed apart.
boot="${CL_IP[$M]}:${CL_PORT[$M]}"
sync; echo 3 >/proc/sys/vm/drop_caches
t0=$(now); "$BIN/cfs-cat" --bootstrap "$boot" --window 24 "$vol" /big >/dev/null; ring_first=$(since "$t0")
for ((r = 0; r < ROUNDS; r++)); do
	MOUNT_VIA="--bootstrap $boot" mount_read ring_cold "$vol"
	cat_read ring_plain --bootstrap "$boot" --window 24 "$vol"
done
cmp -s "$src/big" "$mnt/big" || fail "the plain-client mount read different bytes"
mount_fresh
cold=$(median cold) plain=$(median plain) cold60=$(median cold60) plain60=$(median plain60)
ring_cold=$(median ring_cold) ring_plain=$(median ring_plain)

# ---- nginx over loopback
if ! command -v nginx >/dev/null || ! command -v curl >/dev/null; then
	"$here/../../tools/ensure-deps.sh" nginx-light curl >/dev/null
	# the package starts the system's nginx on port 80; this benchmark
	# runs its own and leaves nothing running
	/etc/init.d/nginx stop >/dev/null 2>&1 || true
fi
port=$(free_port)
mkdir -p "$TEST_DIR/nginx"
cat >"$TEST_DIR/nginx/nginx.conf" <<EOF
daemon off;
worker_processes 1;
user root root;
pid $TEST_DIR/nginx/pid;
error_log $TEST_DIR/nginx/error.log;
events { worker_connections 64; }
http {
	access_log off;
	sendfile on;
	client_body_temp_path $TEST_DIR/nginx;
	proxy_temp_path $TEST_DIR/nginx;
	fastcgi_temp_path $TEST_DIR/nginx;
	uwsgi_temp_path $TEST_DIR/nginx;
	scgi_temp_path $TEST_DIR/nginx;
	server { listen 127.0.0.1:$port; root $src; }
}
EOF
nginx -c "$TEST_DIR/nginx/nginx.conf" &
NGINX_PID=$!
wait_for 10 curl -sf -o /dev/null "http://127.0.0.1:$port/sweep" || fail "nginx did not start"
for ((r = 0; r < ROUNDS; r++)); do
	sync; echo 3 >/proc/sys/vm/drop_caches
	t0=$(now); curl -sf -o /dev/null "http://127.0.0.1:$port/big"; RUNS[http_cold]+=" $(since "$t0")"
done
http_cold=$(median http_cold)
t0=$(now); curl -sf -o /dev/null "http://127.0.0.1:$port/big"; http_warm=$(since "$t0")

echo
echo "== sequential read of a ${SIZE_MB} MiB file (16 daemons, loopback)"
printf '%-44s %8s %10s %10s\n' "reader (pairs: median of $ROUNDS, alternating)" "seconds" "MB/s" "range"
printf '%-44s %8s %10s %10s\n' "the ring's first read: cfs-cat -w 24" "$first_cat" "$(mbs $size "$first_cat")"
printf '%-44s %8s %10s %10s\n' "the ring's first read: cfs-mount, cold" "$first_mount" "$(mbs $size "$first_mount")"
printf '%-44s %8s %10s %10s\n' "cfs-mount, cold (fresh mount, caches dropped)" "$cold" "$(mbs $size "$cold")" "$(spread cold $size)"
printf '%-44s %8s %10s %10s\n' "cfs-mount, warm (kernel page cache)" "$warm" "$(mbs $size "$warm")"
printf '%-44s %8s %10s %10s\n' "cfs-mount, remount, from its disk cache" "$remount" "$(mbs $size "$remount")"
printf '%-44s %8s %10s %10s\n' "client library, no FUSE (cfs-cat -w 24)" "$plain" "$(mbs $size "$plain")" "$(spread plain $size)"
printf '%-44s %8s %10s %10s\n' "the ring's first read, 60 KiB blocks: cfs-cat" "$first60" "$(mbs $size "$first60")"
printf '%-44s %8s %10s %10s\n' "cfs-mount, cold, 60 KiB blocks" "$cold60" "$(mbs $size "$cold60")" "$(spread cold60 $size)"
printf '%-44s %8s %10s %10s\n' "client library, 60 KiB blocks (cfs-cat -w 24)" "$plain60" "$(mbs $size "$plain60")" "$(spread plain60 $size)"
printf '%-44s %8s %10s %10s\n' "a plain client's first read: cfs-cat -w 24" "$ring_first" "$(mbs $size "$ring_first")"
printf '%-44s %8s %10s %10s\n' "cfs-mount --bootstrap (no cfsd), cold" "$ring_cold" "$(mbs $size "$ring_cold")" "$(spread ring_cold $size)"
printf '%-44s %8s %10s %10s\n' "cfs-cat --bootstrap -w 24 (no cfsd)" "$ring_plain" "$(mbs $size "$ring_plain")" "$(spread ring_plain $size)"
printf '%-44s %8s %10s %10s\n' "nginx + curl over loopback, cold" "$http_cold" "$(mbs $size "$http_cold")" "$(spread http_cold $size)"
printf '%-44s %8s %10s %10s\n' "nginx + curl over loopback, warm" "$http_warm" "$(mbs $size "$http_warm")"
python3 - "$cold" "$plain" "$http_cold" "$ring_cold" "$ring_plain" "$cold60" "$plain60" "$first_mount" "$first_cat" <<'EOF'
import sys
m, p, h, rm, rp, m60, p60, fm, fc = map(float, sys.argv[1:])
print("first reads:   mount / client library: %.0f %%" % (100 * fc / fm))
print("through cfsd:  mount / client library: %.0f %%  (aim >= 80 %%);  mount / nginx cold: %.0f %%  (aim >= 50 %%)" % (100 * p / m, 100 * h / m))
print("60 KiB blocks: mount / client library: %.0f %%;  mount / nginx cold: %.0f %%" % (100 * p60 / m60, 100 * h / m60))
print("plain client:  mount / client library: %.0f %%;  mount / nginx cold: %.0f %%" % (100 * rp / rm, 100 * h / rm))
EOF
echo "mount fetched $fetches blocks for $((size / 8192)) data blocks; the remount with a disk cache fetched $remount_fetches"

# ---- CFS Figure 6: download speed against the blocks in flight
echo
echo "== whole-file download of ${SWEEP_MB} MiB against the prefetch window (cfs-cat; CFS Figure 6 shape)"
printf '%-8s %8s %10s\n' "window" "seconds" "MB/s"
for w in 1 2 4 8 16 32 64; do
	t0=$(now); "$BIN/cfs-cat" --data "$TEST_DIR/node$M" --window "$w" "$vol" /sweep >/dev/null; s=$(since "$t0")
	printf '%-8s %8s %10s\n' "$w" "$s" "$(mbs $((SWEEP_MB << 20)) "$s")"
done

# ---- a 10,000-file tree: find and ls -lR through a cold mount
echo
echo "== a ${FILES}-file tree through a cold mount"
printf '%-12s %8s %10s %8s\n' "command" "seconds" "fetches" "entries"
mount_fresh
t0=$(now); n=$(find "$mnt/tree" | wc -l); s=$(since "$t0")
printf '%-12s %8s %10s %8s\n' "find" "$s" "$(stat_of fetches)" "$n"
mount_fresh
t0=$(now); n=$(ls -lR "$mnt/tree" | wc -l); s=$(since "$t0")
printf '%-12s %8s %10s %8s\n' "ls -lR" "$s" "$(stat_of fetches)" "$n"
t0=$(now); cp -r "$mnt/tree" "$TEST_DIR/copy"; s=$(since "$t0")
printf '%-12s %8s %10s %8s\n' "cp -r (after ls)" "$s" "$(stat_of fetches)" "$FILES"
