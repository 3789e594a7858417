#!/bin/bash
# Damage to the storage engine's files and a full disk:
#   1. on a 4-daemon loopback ring (k = 3, sync every second), a stopped
#      daemon's pack is cut short in the middle of a block and a byte is
#      flipped in another block: after the restart the cut is reported
#      (records_dropped, a log line), the flipped block is never served
#      (every get returns its true bytes, the daemon itself answers with a
#      good copy or none), the scrub drops it and replica maintenance puts
#      it and every cut block back, with good bytes;
#   2. a full data disk (a 16 MiB tmpfs) during puts and during a
#      compaction: puts are refused as "disk is full", nothing acknowledged
#      is lost, and once the filler is deleted the compaction goes on by
#      itself (dead bytes fall, compactions > 0);
#   3. the cache's bound holds in bytes on disk: a daemon with --cache-mb 1
#      is offered 3.2 MiB of cached copies (STOREs with the CACHE flag, as
#      gets push them); its cache's pack_bytes and the pack files in
#      DATA/cache/packs stay within 1 MiB, and the newest copy is served;
#   4. leases end in a daemon that keeps running (no restart after its
#      puts): their dead bytes fall as the compactor reclaims them, from
#      the pack it appends to as well. T_STORAGE_PARTS picks parts.
# kill -9, and dead bytes from leases, are in t_storage_crash.sh.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
TOOL=$CFS_BIN/cfs-storetool
K=3
N=4
SIZE=8192
PARTS=${T_STORAGE_PARTS:-1234}

jstat() { "$CFSCTL" --data "$TEST_DIR/$1" status --json | jget "['dhash']$2"; }
ge() { [ "$(jstat "$1" "$2")" -ge "$3" ]; }
lt() { [ "$(jstat "$1" "$2")" -lt "$3" ]; }
acked() { grep -E '^[0-9a-f]{64} ' "$1" | cut -d' ' -f1 || true; }
# fetch_is I KEY FILE: node I's own server answers KEY with FILE's bytes.
fetch_is() {
	[ "$(python3 "$HERE/dhash_fetch.py" "${CL_IP[$1]}:${CL_PORT[$1]}" "$2" "$3")" = "0 $(basename "$3")" ]
}

# ---- 1. a pack cut short and a flipped byte
if [[ $PARTS == *1* ]]; then
cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --sync-ms 1000 --scrub-days 0
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
echo "# ring of $N daemons converged in ${CLUSTER_CONVERGED_S}s"
mkdir -p "$TEST_DIR/blk"
for i in $(seq 0 79); do head -c "$SIZE" /dev/urandom >"$TEST_DIR/blk/b$i"; done
"$CFSCTL" --data "$TEST_DIR/node0" put "$TEST_DIR"/blk/b* >"$TEST_DIR/puts" || fail "puts: $(grep error "$TEST_DIR/puts" | head -3)"
cut -d' ' -f1 "$TEST_DIR/puts" >"$TEST_DIR/all.keys"
nblk=$(wc -l <"$TEST_DIR/all.keys")
cluster_wait_placement "$K" "$TEST_DIR/all.keys" 30 "$TEST_DIR/place.json" exact "$nblk" ||
	fail "blocks not on their $K successors: $(cat "$TEST_DIR/place.json")"
X=1
cluster_stop "$X"
store=$TEST_DIR/node$X/blocks
while read -r key _; do
	echo "$key $("$TOOL" where "$store" "$key")"
done < <("$TOOL" keys "$store") >"$TEST_DIR/where"
# In the pack holding most of node$X's blocks: flip a byte of the first
# block, and cut the pack in the middle of the block three quarters in.
# Every block from that one on loses its bytes: that many records should
# be dropped at the next open.
read -r pack flipkey cutkey cut dropped < <(python3 - "$TEST_DIR/where" <<'PY'
import collections, sys
by = collections.defaultdict(list)
for l in open(sys.argv[1]):
    key, pack, off, ln = l.split()
    by[pack].append((int(off), int(ln), key))
pack = max(by, key=lambda p: len(by[p]))
e = sorted(by[pack])
off, ln, cutkey = e[len(e) * 3 // 4]
cut = off + ln // 2
print(pack, e[0][2], cutkey, cut, sum(1 for o, l, _ in e if o + l > cut))
PY
)
[ "$dropped" -ge 2 ] || fail "node$X holds too few blocks in $pack to cut"
grep -q "^$flipkey " "$TEST_DIR/puts" || fail "the block to flip is not one of ours"
flipfile=$(grep "^$flipkey " "$TEST_DIR/puts" | cut -d' ' -f2)
"$TOOL" flip "$store" "$flipkey" >/dev/null || fail "cannot flip a byte of $flipkey"
"$TOOL" get "$store" "$flipkey" | cmp -s - "$flipfile" && fail "the flip changed nothing"
truncate -s "$cut" "$pack" || fail "cannot cut $pack"
python3 - "$TEST_DIR/where" "$pack" "$cut" >"$TEST_DIR/cut.keys" <<'PY'
import sys
for l in open(sys.argv[1]):
    key, pack, off, ln = l.split()
    if pack == sys.argv[2] and int(off) + int(ln) > int(sys.argv[3]):
        print(key)
PY
echo "# node$X stopped: a byte flipped in block ${flipkey:0:12}…, $(basename "$pack") cut at byte $cut, in the middle of a block: $dropped blocks lose their bytes"

args=${CL_ARGS[$X]}
CL_ARGS[$X]=${args/--scrub-days 0/--scrub-days 0.0001} # a pass every 9 s, the first at once
start=$(date +%s.%N)
cluster_restart "$X"
got=$(jstat "node$X" "['disk']['records_dropped']")
[ "$got" -eq "$dropped" ] || fail "records_dropped $got, want $dropped"
grep -q "dropped $dropped index records" "$TEST_DIR/node$X.log" || fail "no log line for the dropped records"
# Never served: node$X's own server answers with good bytes or not at all,
# and a get through any daemon returns the true bytes.
st=$(python3 "$HERE/dhash_fetch.py" "${CL_IP[$X]}:${CL_PORT[$X]}" "$flipkey" "$flipfile")
[ "$st" != "0 other" ] || fail "node$X served the flipped copy"
for ((i = 0; i < N; i++)); do
	"$CFSCTL" --data "$TEST_DIR/node$i" get "$flipkey" >"$TEST_DIR/got" || fail "get of the flipped block via node$i"
	cmp -s "$TEST_DIR/got" "$flipfile" || fail "a get via node$i returned other bytes"
	"$CFSCTL" --data "$TEST_DIR/node$i" get --check - <"$TEST_DIR/all.keys" >"$TEST_DIR/check" ||
		fail "gets via node$i: $(grep -v ' ok ' "$TEST_DIR/check" | head -3)"
done
echo "# after the restart: records_dropped $got, node$X's first answer for the flipped block: '$st'; every get via every daemon returns true bytes"
held_again() {
	local k
	fetch_is "$X" "$flipkey" "$flipfile" || return 1
	while read -r k; do
		fetch_is "$X" "$k" "$(grep "^$k " "$TEST_DIR/puts" | cut -d' ' -f2)" || return 1
	done <"$TEST_DIR/cut.keys"
}
wait_for 60 held_again || fail "node$X does not hold good copies of every damaged block again"
t=$(echo "$(date +%s.%N) - $start" | bc)
[ "$(jstat "node$X" "['scrub']['dropped']")" -ge 1 ] || fail "the flipped copy was not dropped: $(jstat "node$X" "['scrub']")"
printf '# node%s holds good copies of the flipped block and the %s cut ones again %.1fs after its restart; scrub %s\n' \
	"$X" "$dropped" "$t" "$(jstat "node$X" "['scrub']")"
CL_ARGS[$X]=$args
ok "a pack cut short and a flipped byte: reported, never served, dropped and repaired from the replicas"
fi

# ---- 2. a full disk during puts and during a compaction
if [[ $PARTS == *2* ]]; then
mnt=$TEST_DIR/small
mkdir -p "$mnt"
mount -t tmpfs -o size=16m tmpfs "$mnt" || fail "cannot mount a tmpfs (root needed)"
MOUNTS+=("$mnt")
port=$(free_port)
F=(--replicas 1 --sync-ms 0 --cache-mb 0 --expire-ms 500)
start_cfsd small/d "$port" "${F[@]}" --compact-mb-per-s 0
: >"$TEST_DIR/f.live"
: >"$TEST_DIR/f.short"
for r in 1 2 3 4 5 6; do
	"$CFSCTL" --data "$mnt/d" put --random 60 --size "$SIZE" --seed $((400 + r)) --lease-days 0.0001 \
		>"$TEST_DIR/f.put" || fail "short-lease puts"
	acked "$TEST_DIR/f.put" >>"$TEST_DIR/f.short"
	"$CFSCTL" --data "$mnt/d" put --random 20 --size "$SIZE" --seed $((500 + r)) >"$TEST_DIR/f.put" ||
		fail "long-lease puts"
	acked "$TEST_DIR/f.put" >>"$TEST_DIR/f.live"
done
nshort=$(wc -l <"$TEST_DIR/f.short")
kill -TERM "$CFSD_PID"
wait "$CFSD_PID" 2>/dev/null || true
# 0.2 MB/s: about ten live blocks copied a second, the compaction of the
# pack takes some 12 s.
start_cfsd small/d "$port" "${F[@]}" --compact-mb-per-s 0.2
wait_for 40 ge small/d "['expired']" "$nshort" || fail "short leases not collected: $(jstat small/d "['expired']")"
wait_for 30 ge small/d "['disk']['compact_copied']" $((3 * SIZE)) ||
	fail "the compactor did not start: $(jstat small/d "['disk']")"
dd if=/dev/zero of="$mnt/fill" bs=64k 2>/dev/null || true
"$CFSCTL" --data "$mnt/d" put --random 20 --size "$SIZE" --seed 600 >"$TEST_DIR/full" 2>&1 || true
grep -q "disk is full" "$TEST_DIR/full" || fail "puts on a full disk: $(head -3 "$TEST_DIR/full")"
refused=$(grep -c "disk is full" "$TEST_DIR/full")
acked "$TEST_DIR/full" >>"$TEST_DIR/f.live"
c1=$(jstat small/d "['disk']['compact_copied']")
d1=$(jstat small/d "['disk']['dead_bytes']")
[ "$(jstat small/d "['disk']['compactions']")" -eq 0 ] || fail "the compaction ended before the disk filled"
sleep 3
c2=$(jstat small/d "['disk']['compact_copied']")
echo "# disk full during a compaction: $refused of 20 puts refused as disk full; compact_copied $c1 -> $c2 bytes in 3 s while full, dead_bytes $d1"
rm -f "$mnt/fill"
start=$SECONDS
wait_for 60 ge small/d "['disk']['compactions']" 1 ||
	fail "the compaction did not resume once the disk had room: $(jstat small/d "['disk']"); $(tail -3 "$TEST_DIR/small/d.log")"
d2=$(jstat small/d "['disk']['dead_bytes']")
[ "$d2" -lt $((d1 / 4)) ] || fail "dead bytes $d1 -> $d2 after the compaction"
"$CFSCTL" --data "$mnt/d" put --random 20 --size "$SIZE" --seed 601 >"$TEST_DIR/f.put" ||
	fail "puts after the disk had room: $(head -3 "$TEST_DIR/f.put")"
acked "$TEST_DIR/f.put" >>"$TEST_DIR/f.live"
"$CFSCTL" --data "$mnt/d" get --check - <"$TEST_DIR/f.live" >"$TEST_DIR/check" ||
	fail "acknowledged blocks lost: $(grep -v ' ok ' "$TEST_DIR/check" | head -3)"
[ "$(grep -c ' ok ' "$TEST_DIR/check")" -eq "$(wc -l <"$TEST_DIR/f.live")" ] || fail "get --check did not answer every key"
echo "# filler removed: the compaction finished $((SECONDS - start)) s later, dead_bytes $d1 -> $d2, pack_bytes $(jstat small/d "['disk']['pack_bytes']");" \
	"all $(wc -l <"$TEST_DIR/f.live") acknowledged live blocks verify"
ok "a full disk refuses puts clearly, loses nothing acknowledged, and compaction resumes once there is room"
fi

# ---- 3. the cache's bound, in bytes on disk
if [[ $PARTS == *3* ]]; then
port=$(free_port)
start_cfsd cache "$port" --replicas 1 --sync-ms 0 --cache-mb 1
bound=$((1 << 20))
offered=400 # 3.2 MiB of copies for a 1 MiB cache
got=$(python3 "$HERE/cache_fill.py" "127.0.0.1:$port" "$offered" "$SIZE" 800 "$TEST_DIR/cache.offered")
[ "$got" -eq "$offered" ] || fail "the cache took $got of $offered copies: $(grep -v ' 0$' "$TEST_DIR/cache.offered" | head -3)"
pb=$(jstat cache "['cache']['pack_bytes']")
files=$(find "$TEST_DIR/cache/cache/packs" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
dk=$(du -sk "$TEST_DIR/cache/cache/packs" | cut -f1)
ev=$(jstat cache "['cache']['evicted']")
nb=$(jstat cache "['cache']['blocks']")
echo "# $offered copies of $SIZE bytes ($((offered * SIZE)) bytes) offered to a cache of $bound bytes:" \
	"$nb blocks cached ($(jstat cache "['cache']['bytes']") bytes), $ev evicted;" \
	"pack_bytes $pb, dead_bytes $(jstat cache "['cache']['dead_bytes']"), DATA/cache/packs files $files bytes (du: $dk KiB)"
[ "$pb" -le "$bound" ] || fail "the cache's pack_bytes $pb over its bound $bound"
[ "$files" -le "$bound" ] || fail "DATA/cache/packs holds $files bytes, over the bound $bound"
[ "$ev" -gt 0 ] && [ "$nb" -gt 0 ] || fail "the cache never evicted or holds nothing: the bound was not tested"
last=$(tail -1 "$TEST_DIR/cache.offered" | cut -d' ' -f1)
st=$(python3 "$HERE/dhash_fetch.py" "127.0.0.1:$port" "$last")
[ "$st" = "0 other" ] || fail "the newest cached copy is not served: $st"
ok "the cache stays within its bound of $bound bytes on disk while offered more"
fi

# ---- 4. dead bytes of expired leases fall in a daemon that keeps running
# The other parts restart the daemon after its puts, so that their pack is
# closed. Here it runs on: the blocks' pack is still the one it appends to.
if [[ $PARTS == *4* ]]; then
port=$(free_port)
start_cfsd run "$port" --replicas 1 --sync-ms 0 --cache-mb 0 --expire-ms 500
"$CFSCTL" --data "$TEST_DIR/run" put --random 600 --size "$SIZE" --seed 900 --lease-days 0.0001 \
	>"$TEST_DIR/r.put" || fail "short-lease puts"
"$CFSCTL" --data "$TEST_DIR/run" put --random 200 --size "$SIZE" --seed 901 >"$TEST_DIR/r.put" || fail "long-lease puts"
acked "$TEST_DIR/r.put" >"$TEST_DIR/r.live"
wait_for 40 ge run "['expired']" 600 || fail "short leases not collected: $(jstat run "['expired']")"
dead=$(jstat run "['disk']['dead_bytes']")
[ "$dead" -ge $((600 * SIZE)) ] || fail "dead bytes $dead after 600 blocks of $SIZE expired"
start=$SECONDS
if ! wait_for 30 lt run "['disk']['dead_bytes']" $((dead / 4)); then
	echo "# the running daemon: dead_bytes $(jstat run "['disk']['dead_bytes']") of pack_bytes" \
		"$(jstat run "['disk']['pack_bytes']") in $(jstat run "['disk']['packs']") pack(s), 30 s after the leases ended;" \
		"compactions $(jstat run "['disk']['compactions']")"
	fail "dead bytes of expired leases are not reclaimed while the daemon runs (the compactor never picks the active pack)"
fi
"$CFSCTL" --data "$TEST_DIR/run" get --check - <"$TEST_DIR/r.live" >"$TEST_DIR/check" ||
	fail "live blocks lost: $(grep -v ' ok ' "$TEST_DIR/check" | head -3)"
echo "# the running daemon: dead_bytes $dead -> $(jstat run "['disk']['dead_bytes']") in $((SECONDS - start)) s, no restart"
ok "dead bytes of expired leases fall while the daemon runs"
fi
