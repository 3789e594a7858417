#!/bin/bash
# Data safety of the block store, on an 8-daemon loopback ring
# (k = 3, sync every second):
#   1. a byte flipped on disk in the copy held by a block's successor; the
#      other holders killed one at a time with repair between: the
#      successor's pushes read and verify, so the bad copy is dropped and
#      fetched back instead of blocking repair; the block survives and reads;
#   2. the scrub finds a flipped byte with no read at all: the status
#      counts it, the key is dropped and replica maintenance restores it;
#   3. a root holder away during a republish comes back with the older
#      sequence: sync compares root sequences and every replica ends up with
#      the newest;
#   4. a data disk (tmpfs) filled up: puts are refused as disk full, and
#      once the filler is deleted they succeed again without a restart,
#      every block acknowledged before still there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
K=3
N=8
HERE=$(cd "$(dirname "$0")" && pwd)
SOFT=${T_SCRUB_SOFT:-0} # 1: report a failed wait and go on (to measure an old build)
PARTS=${T_SCRUB_PARTS:-1234} # the parts to run

soft_fail() { if [ "$SOFT" = 1 ]; then echo "# (soft) $*"; else fail "$*"; fi; }

# succ KEY: the node indices of the key's K distinct successor servers, in
# ring order (from every live daemon's status).
succ() {
	cluster_status_all "$TEST_DIR/st"
	python3 - "$1" "$K" "$TEST_DIR/st" "${CL_PORT[@]}" <<'PY'
import glob, json, os, sys
key, k, d, ports = int(sys.argv[1], 16), int(sys.argv[2]), sys.argv[3], [int(p) for p in sys.argv[4:]]
vn = []
for f in glob.glob(os.path.join(d, "*.json")):
    st = json.load(open(f))
    for v in st["ring"]["vnodes"]:
        vn.append((int(v["id"], 16), ports.index(st["port"])))
vn.sort()
start = next((i for i, v in enumerate(vn) if v[0] >= key), 0)
out = []
for j in range(len(vn)):
    n = vn[(start + j) % len(vn)][1]
    if n not in out:
        out.append(n)
print(" ".join(map(str, out[:k])))
PY
}

# holds NODE KEY: does the daemon list the key among its stored blocks?
holds() { "$CFSCTL" --data "$TEST_DIR/node$1" keys | grep -q "^$2"; }

# repaired KEY: every one of the key's K successors holds it.
repaired() {
	local n
	for n in $(succ "$1"); do holds "$n" "$1" || return 1; done
}

# wait_repaired KEY SECONDS: prints the seconds it took, or "timeout".
wait_repaired() {
	local start=$SECONDS
	if wait_for "$2" repaired "$1"; then echo $((SECONDS - start)); else echo timeout; fi
}

# to_table NODE: stop the daemon and start it again (a restart between
# the write and the rot, as on a real disk), then stop it.
to_table() {
	cluster_stop "$1"
	cluster_restart "$1"
	cluster_stop "$1"
}

# via NODE...: a live node other than those named (to put through).
via() {
	local i
	for ((i = 0; i < CL_N; i++)); do
		cluster_alive "$i" && [[ " $* " != *" $i "* ]] && { echo "$i"; return; }
	done
	fail "no live node to put through"
}

jstat() { "$CFSCTL" --data "$TEST_DIR/node$1" status --json | jget "['dhash']$2"; }

# The scrub stays off but in part 2: part 1 is about the reads of repair.
cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --sync-ms 1000 ${T_SCRUB_ARGS---scrub-days 0}
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
echo "# ring of $N daemons converged in ${CLUSTER_CONVERGED_S}s"

# ---- 1. a rotted copy on the successor; the other holders die one by one
if [[ $PARTS == *1* ]]; then
head -c 8000 /dev/urandom >"$TEST_DIR/blk1"
key1=$("$CFSCTL" --data "$TEST_DIR/node0" put "$TEST_DIR/blk1" | cut -d' ' -f1)
[ ${#key1} -eq 64 ] || fail "put of blk1: $key1"
[ "$(wait_repaired "$key1" 20)" != timeout ] || fail "blk1 never reached its $K successors"
read -r -a holders <<<"$(succ "$key1")"
s1=${holders[0]}
to_table "$s1"
python3 "$HERE/rot_store.py" "$TEST_DIR/node$s1" "$TEST_DIR/blk1" >/dev/null ||
	fail "the bytes of blk1 are not in a pack of node$s1"
cluster_restart "$s1"
cluster_wait_correct 30 || fail "the ring did not converge after node$s1 came back"
# Every other copy there is now (the replicas, and one made while node$s1
# was away), killed one at a time.
others=()
for ((i = 0; i < CL_N; i++)); do
	[ "$i" != "$s1" ] && cluster_alive "$i" && holds "$i" "$key1" && others+=("$i")
done
echo "# node$s1 (blk1's successor) holds a copy with a byte flipped; good copies on nodes ${others[*]}"
for h in "${others[@]}"; do
	cluster_kill "$h"
	cluster_wait_correct 30 || fail "the ring did not converge after node$h was killed"
	t=$(wait_repaired "$key1" 30)
	echo "# node$h (a holder of blk1) killed: back on $K servers in ${t}s"
	[ "$t" != timeout ] || soft_fail "blk1 not repaired after node$h was killed"
done
"$CFSCTL" --data "$TEST_DIR/node$s1" get "$key1" >"$TEST_DIR/got1" 2>"$TEST_DIR/err1" ||
	soft_fail "blk1 cannot be read after its other holders died: $(cat "$TEST_DIR/err1")"
cmp -s "$TEST_DIR/blk1" "$TEST_DIR/got1" || soft_fail "blk1 read back differs"
st=$(python3 "$HERE/dhash_fetch.py" "${CL_IP[$s1]}:${CL_PORT[$s1]}" "$key1" "$TEST_DIR/blk1")
[ "$st" = "0 blk1" ] || soft_fail "node$s1 does not hold a good copy of blk1 again (fetch: $st)"
echo "# node$s1: bad copies found by replica maintenance $(jstat "$s1" "['scrub']['bad_push']"), by fetches $(jstat "$s1" "['scrub']['bad_fetch']"), dropped $(jstat "$s1" "['scrub']['dropped']")"
ok "a rotted copy on the successor is dropped and fetched back; the block survives its other holders"
fi

# ---- 2. the scrub finds a flipped byte nobody reads
if [[ $PARTS == *2* ]]; then
head -c 8000 /dev/urandom >"$TEST_DIR/blk2"
key2=$("$CFSCTL" --data "$TEST_DIR/node$(via)" put "$TEST_DIR/blk2" | cut -d' ' -f1)
[ "$(wait_repaired "$key2" 20)" != timeout ] || fail "blk2 never reached its $K successors"
read -r -a holders <<<"$(succ "$key2")"
s2=${holders[1]} # a replica, not the successor: nobody pushes from it
to_table "$s2"
python3 "$HERE/rot_store.py" "$TEST_DIR/node$s2" "$TEST_DIR/blk2" >/dev/null ||
	fail "the bytes of blk2 are not in a pack of node$s2"
args=${CL_ARGS[$s2]}
CL_ARGS[$s2]="$args --scrub-days 0.0001" # a pass every 9 s, the first at once
start=$(date +%s.%N)
cluster_restart "$s2"
wait_for 20 test "$(jstat "$s2" "['scrub']['bad_scrub']" 2>/dev/null)" -ge 1 ||
	fail "the scrub of node$s2 did not find the flipped byte: $(jstat "$s2" "['scrub']")"
found=$(echo "$(date +%s.%N) - $start" | bc)
[ "$(jstat "$s2" "['scrub']['dropped']")" -ge 1 ] || fail "the bad copy was not dropped"
[ "$(jstat "$s2" "['scrub']['bad_fetch']")" -eq 0 ] || fail "a fetch, not the scrub, found it"
wait_for 30 bash -c "[ \"\$(python3 '$HERE/dhash_fetch.py' '${CL_IP[$s2]}:${CL_PORT[$s2]}' '$key2' '$TEST_DIR/blk2')\" = '0 blk2' ]" ||
	fail "node$s2 did not get a good copy of blk2 back"
back=$(echo "$(date +%s.%N) - $start" | bc)
printf '# scrub: flipped byte found %.1fs after the restart, a good copy back after %.1fs; %s\n' \
	"$found" "$back" "$(jstat "$s2" "['scrub']")"
CL_ARGS[$s2]=$args
ok "the scrub finds a rotted copy without any read; repair restores it"
fi

# ---- 3. a root replica that missed a republish
if [[ $PARTS == *3* ]]; then
PUBLISH=$CFS_BIN/cfs-publish
mkdir -p "$TEST_DIR/vol"
echo one >"$TEST_DIR/vol/a"
"$PUBLISH" --keygen "$TEST_DIR/pub.key" >/dev/null 2>&1 || fail "keygen"
"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$TEST_DIR/store" "$TEST_DIR/vol" >/dev/null 2>&1 || fail "publish 1"
dir_root "$TEST_DIR/store" "$TEST_DIR/root1"
echo two >"$TEST_DIR/vol/a"
"$PUBLISH" --key "$TEST_DIR/pub.key" --to "dir:$TEST_DIR/store" "$TEST_DIR/vol" >/dev/null 2>&1 || fail "publish 2"
dir_root "$TEST_DIR/store" "$TEST_DIR/root2"
rkey=$("$CFSCTL" --data "$TEST_DIR/node$(via)" put --root "$TEST_DIR/root1" | cut -d' ' -f1)
[ ${#rkey} -eq 64 ] || fail "put of root 1: $rkey"
[ "$(wait_repaired "$rkey" 20)" != timeout ] || fail "root 1 never reached its $K successors"
read -r -a holders <<<"$(succ "$rkey")"
stale=${holders[$K - 1]}
cluster_stop "$stale"
"$CFSCTL" --data "$TEST_DIR/node$(via "$stale")" put --root "$TEST_DIR/root2" >"$TEST_DIR/out" ||
	fail "root 2 refused: $(cat "$TEST_DIR/out")"
# A store to it still in flight is sent again within its timeout (3 s, or 6 s for the put's second round) and would reach it once it
# is back: wait them out, so that it comes back as stale as it left.
sleep 7
cluster_restart "$stale"
start=$(date +%s.%N)
python3 "$HERE/dhash_fetch.py" "${CL_IP[$stale]}:${CL_PORT[$stale]}" "$rkey" "$TEST_DIR/root1" "$TEST_DIR/root2" >"$TEST_DIR/out"
[ "$(cat "$TEST_DIR/out")" = "0 root1" ] || fail "node$stale came back holding: $(cat "$TEST_DIR/out")"
cluster_wait_correct 30 || fail "the ring did not converge after node$stale came back"
conv=$(echo "$(date +%s.%N) - $start" | bc)
newest() {
	local n
	for n in $(succ "$rkey"); do
		[ "$(python3 "$HERE/dhash_fetch.py" "${CL_IP[$n]}:${CL_PORT[$n]}" "$rkey" "$TEST_DIR/root1" "$TEST_DIR/root2")" = "0 root2" ] ||
			return 1
	done
	python3 "$HERE/dhash_fetch.py" "${CL_IP[$stale]}:${CL_PORT[$stale]}" "$rkey" "$TEST_DIR/root1" "$TEST_DIR/root2" | grep -q root2
}
if ! wait_for 20 newest; then
	for n in $(succ "$rkey") "$stale"; do
		echo "node$n: $(python3 "$HERE/dhash_fetch.py" "${CL_IP[$n]}:${CL_PORT[$n]}" "$rkey" "$TEST_DIR/root1" "$TEST_DIR/root2") $(jstat "$n" "['sync']")"
	done
	soft_fail "node$stale still holds root 1"
fi
t=$(echo "$(date +%s.%N) - $start - $conv" | bc)
printf '# node%s came back with root sequence 1; the ring whole again after %.1fs, and %.1fs later every replica holds sequence 2 (sync every 1 s); roots taken %s, sent %s\n' \
	"$stale" "$conv" "$t" "$(jstat "$stale" "['sync']['roots_fetched']")" \
	"$(for n in $(succ "$rkey"); do jstat "$n" "['sync']['roots_pushed']"; done | paste -sd+ | bc)"
ok "every replica of a root holds its newest sequence after a replica missed a republish"
fi

# ---- 4. a full data disk, then room again, without a restart
if [[ $PARTS == *4* ]]; then
mnt=$TEST_DIR/small
mkdir -p "$mnt"
mount -t tmpfs -o size=8m tmpfs "$mnt" || fail "cannot mount a tmpfs (root needed)"
MOUNTS+=("$mnt")
port=$(free_port)
"$CFSD" --port "$port" --bind 127.0.0.1 --data "$mnt/d" --replicas 1 --sync-ms 0 --cache-mb 0 >>"$TEST_DIR/full.log" 2>&1 &
PIDS+=("$!")
wait_for 10 "$CFSCTL" --data "$mnt/d" status || fail "cfsd on the tmpfs did not start"
"$CFSCTL" --data "$mnt/d" put --random 20 --size 4096 --seed 1 >"$TEST_DIR/acked" || fail "puts before the disk filled"
dd if=/dev/zero of="$mnt/fill" bs=64k 2>/dev/null || true
"$CFSCTL" --data "$mnt/d" put --random 20 --size 4096 --seed 2 >"$TEST_DIR/full" 2>&1 || true
grep -q "disk is full" "$TEST_DIR/full" || fail "puts on a full disk: $(head -3 "$TEST_DIR/full")"
refused=$(grep -c "disk is full" "$TEST_DIR/full")
rm -f "$mnt/fill"
start=$(date +%s.%N)
wait_for 20 "$CFSCTL" --data "$mnt/d" put --random 1 --size 4096 --seed 3 ||
	fail "puts still refused after the disk has room: $(tail -3 "$TEST_DIR/full.log")"
t=$(echo "$(date +%s.%N) - $start" | bc)
"$CFSCTL" --data "$mnt/d" put --random 20 --size 4096 --seed 2 >"$TEST_DIR/after" || fail "puts after the recovery"
cut -d' ' -f1 "$TEST_DIR/acked" | "$CFSCTL" --data "$mnt/d" get --check - >"$TEST_DIR/check" ||
	fail "blocks acknowledged before the disk filled: $(grep -v ' ok ' "$TEST_DIR/check" | head -3)"
grep -q "writable again" "$TEST_DIR/full.log" || fail "no log line for the recovery"
printf '# full disk: %s puts refused as disk full; puts accepted again %.1fs after the filler went, no restart; %s acknowledged blocks intact\n' \
	"$refused" "$t" "$(grep -c ' ok ' "$TEST_DIR/check")"
ok "a store that hit a full disk recovers by itself"
fi
