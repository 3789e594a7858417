#!/bin/bash
# make bench-ring-publish: a 205 MB tree (a 100 MiB file, four of 16 MiB,
# 1,000 files of 1-64 KiB: 205.5 MB of random bytes, generated afresh from
# a fixed seed) published through one cfsd of a 16-daemon loopback ring
# with k = 6, and in the same run into a local dir: store. Prints both
# rates and their ratio; the daemons' write amplification (the bytes they
# wrote to disk during the publish, /proc/PID/io write_bytes less
# cancelled_write_bytes, over the replica bytes they then store, and over
# k x the tree); CPU seconds per stored MB (daemons + publisher); the RPC
# timeouts and, of those, the replies that came after their call had timed
# out (late), summed over the daemons. The publisher talks to its cfsd
# over the control socket and sends no RPCs of its own.
#
# BENCH_SCALE (default 1) scales the tree (0.1: 20.5 MB, a quick run);
# BENCH_DAEMONS (16) and BENCH_K (6) the ring; BENCH_SEED (23) the bytes.
set -euo pipefail
bin=$1
scale=${BENCH_SCALE:-1} n=${BENCH_DAEMONS:-16} k=${BENCH_K:-6} seed=${BENCH_SEED:-23}
export TEST_DIR=$(mktemp -d /tmp/cfs-bench-ring-publish.XXXXXX) CFS_BIN=$bin
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../integration/lib.sh"
. "$here/../harness/cluster.sh"
trap 'cleanup; cluster_cleanup 2>/dev/null || true; [ -n "${BENCH_KEEP:-}" ] || rm -rf "$TEST_DIR"' EXIT
export XDG_CONFIG_HOME=$TEST_DIR/config
src=$TEST_DIR/src

# The tree, from a seeded generator: the same bytes every run.
python3 - "$src" "$scale" "$seed" <<'PY'
import os, random, sys
root, scale, seed = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
def write(path, size):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        while size > 0:
            n = min(size, 1 << 22)
            f.write(rng.randbytes(n))
            size -= n
write(os.path.join(root, "big.bin"), int((100 << 20) * scale))
for i in range(4):
    write(os.path.join(root, "mid", "m%d.bin" % i), int((16 << 20) * scale))
for i in range(max(1, int(1000 * scale))):
    write(os.path.join(root, "small", "d%02d" % (i % 20), "f%04d" % i), rng.randint(1024, 65536))
PY
tree_bytes=$(du -sb --apparent-size "$src" | cut -f1)
"$bin/cfs-publish" --keygen >/dev/null 2>&1
cat $(find "$src" -type f) >/dev/null # warm the page cache for both runs

# Into a dir: store first (no daemons running yet).
start=$(date +%s.%N)
"$bin/cfs-publish" --quiet --to "dir:$TEST_DIR/store" --state-dir "$TEST_DIR/st-dir" "$src" \
	>/dev/null 2>"$TEST_DIR/dir.err" || { cat "$TEST_DIR/dir.err"; fail "publishing into dir: failed"; }
dir_secs=$(echo "$(date +%s.%N) - $start" | bc)

cluster_start "$n" 1 --stabilize-ms 250 --replicas "$k"
cluster_wait_correct 60 || fail "the ring did not converge"
sleep 2 # the ring idle

# The ring publish, measured by one python process: /proc before and after
# for every daemon, the publisher's own rusage, status before and after.
pids=$(printf '%s,' "${CL_PID[@]:0:$n}")
python3 - "$bin" "$TEST_DIR" "$n" "$k" "$tree_bytes" "$dir_secs" "$pids" "$src" <<'PY'
import json, os, subprocess, sys, time
bin_, tdir, n, k, tree, dir_secs, pids, src = sys.argv[1:9]
n, k, tree, dir_secs = int(n), int(k), int(tree), float(dir_secs)
pids = [int(p) for p in pids.split(",") if p]
tick = os.sysconf("SC_CLK_TCK")

def io(pid):
    d = dict(l.split(": ") for l in open("/proc/%d/io" % pid).read().splitlines())
    return int(d["write_bytes"]) - int(d["cancelled_write_bytes"])

def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick  # utime, stime (fields 14, 15)

def status(i):
    out = subprocess.run([bin_ + "/cfsctl", "--data", "%s/node%d" % (tdir, i), "status", "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)

def rpc(s):
    r = s["rpc"]
    late = r.get("late_replies")
    # a daemon without a late counter (an older release): its "unmatched" (late or
    # forged; nobody forges on this ring) stands in for it
    return r["timeouts"], late if late is not None else r["unmatched"], late is not None

def sums():
    st = [status(i) for i in range(n)]
    rp = [rpc(s) for s in st]
    return {"io": sum(io(p) for p in pids), "cpu": sum(cpu(p) for p in pids),
            "stored": sum(s["dhash"]["bytes"] for s in st),
            "timeouts": sum(r[0] for r in rp), "late": sum(r[1] for r in rp),
            "late_counted": all(r[2] for r in rp),
            "per": [(r[0], r[1]) for r in rp]}

b = sums()
t0 = time.time()
with open(tdir + "/ring.err", "w") as err:
    p = subprocess.Popen([bin_ + "/cfs-publish", "--quiet", "--to", "cfsd:%s/node0/cfsd.sock" % tdir,
                          "--state-dir", tdir + "/st-ring", src], stdout=subprocess.DEVNULL, stderr=err)
    _, st, ru = os.wait4(p.pid, 0)
secs = time.time() - t0
time.sleep(2)  # pushes still out when the root was acknowledged
a = sums()
if os.waitstatus_to_exitcode(st) != 0:
    sys.stderr.write(open(tdir + "/ring.err").read())
    sys.exit("FAIL: publishing into the ring failed")
pub_cpu = ru.ru_utime + ru.ru_stime
wrote, stored = a["io"] - b["io"], a["stored"] - b["stored"]
cpu_s = a["cpu"] - b["cpu"] + pub_cpu
ring_mb_s, dir_mb_s = tree / 1e6 / secs, tree / 1e6 / dir_secs
to, late = a["timeouts"] - b["timeouts"], a["late"] - b["late"]
print("bench-ring-publish: %.1f MB tree, %d loopback cfsd, k = %d, %d cores" % (tree / 1e6, n, k, os.cpu_count()))
print("  into the ring      %8.1f MB/s  (%.2f s)" % (ring_mb_s, secs))
print("  into dir:          %8.1f MB/s  (%.2f s)" % (dir_mb_s, dir_secs))
print("  dir: / ring        %8.1f x" % (dir_mb_s / ring_mb_s))
print("  daemons wrote      %8.1f MB to disk for %.1f MB of replicas stored (k x tree = %.1f MB)"
      % (wrote / 1e6, stored / 1e6, k * tree / 1e6))
print("  write amplification %7.2f per byte stored, %.2f per byte of k x tree"
      % (wrote / max(stored, 1), wrote / (k * tree)))
print("  CPU                %8.2f s (daemons %.2f + publisher %.2f): %.3f s per stored MB"
      % (cpu_s, cpu_s - pub_cpu, pub_cpu, cpu_s / max(stored / 1e6, 1e-9)))
print("  RPC timeouts       %8d  of them answered late: %d%s" %
      (to, late, "" if a["late_counted"] else " (no late counter: unmatched replies)"))
worst = sorted(((x[0] - y[0], x[1] - y[1], i) for i, (x, y) in enumerate(zip(a["per"], b["per"]))), reverse=True)[:3]
print("  most timeouts      " + ", ".join("node%d %d (%d late)" % (i, t, l) for t, l, i in worst))
PY
