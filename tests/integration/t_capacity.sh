#!/bin/bash
# A server's capacity holds its replicas and its cached copies together, and
# the cache gives way first (CFS 5.2: cached copies are evicted before any
# replica is touched). One daemon, --capacity-mb 1, --cache-mb 1:
#   - cached copies (STOREs with the CACHE flag, as a get's push) fill the
#     cache up to its bound;
#   - puts of replicas then evict cached copies to make room, and all of
#     them are stored: store + cache never exceed the capacity;
#   - when the replicas alone fill the capacity a put is refused with
#     "disk full" (-ENOSPC) and the cache is empty; nothing acknowledged is
#     lost.
. "$(dirname "$0")/lib.sh"
STORE_PY=$(dirname "$0")/dhash_store.py
CAP=$((1 << 20))
port=$(free_port)
start_cfsd n0 "$port" --capacity-mb 1 --quota-mb 1 --cache-mb 1
status() { "$CFSCTL" --data "$TEST_DIR/n0" status --json; }

# ---- fill the cache with 100 cached copies of 8 KiB
for i in $(seq 100); do
	head -c 8192 /dev/urandom >"$TEST_DIR/c"
	key=$(b2sum -l 256 "$TEST_DIR/c" | cut -d' ' -f1)
	st=$(python3 "$STORE_PY" "$port" 1 "$key" "$TEST_DIR/c" 2)
	[ "$st" = 0 ] || fail "cached copy $i refused: $st"
done
cached=$(status | jget "['dhash']['cache']['bytes']")
[ "$cached" -ge $((100 * 8192)) ] || fail "the cache holds $cached bytes after 100 copies of 8 KiB"
echo "# 100 cached copies: the cache holds $cached bytes"

# ---- replicas push the cache out
"$CFSCTL" --data "$TEST_DIR/n0" put --random 60 --size 8192 --seed 5 >"$TEST_DIR/put1" ||
	fail "puts within the capacity refused: $(grep -c error "$TEST_DIR/put1")"
status >"$TEST_DIR/s1"
stored=$(jget "['dhash']['bytes']" <"$TEST_DIR/s1")
cached=$(jget "['dhash']['cache']['bytes']" <"$TEST_DIR/s1")
evicted=$(jget "['dhash']['cache']['evicted']" <"$TEST_DIR/s1")
[ "$stored" -ge $((60 * 8192)) ] || fail "only $stored bytes of replicas stored"
[ $((stored + cached)) -le "$CAP" ] || fail "store $stored + cache $cached bytes exceed the 1 MiB capacity"
[ "$evicted" -gt 0 ] || fail "no cached copy was evicted"
echo "# 60 puts of 8 KiB all stored ($stored bytes); the cache gave way: $cached bytes left, $evicted copies evicted"

# ---- the replicas alone fill it: refused as disk full
"$CFSCTL" --data "$TEST_DIR/n0" put --random 80 --size 8192 --seed 6 >"$TEST_DIR/put2" 2>&1 && fail "80 more puts all fitted in 1 MiB"
refused=$(grep -c "error" "$TEST_DIR/put2" || true)
grep "error" "$TEST_DIR/put2" | grep -qv "disk is full" && fail "a refusal other than disk full: $(grep error "$TEST_DIR/put2" | head -1)"
status >"$TEST_DIR/s2"
stored=$(jget "['dhash']['bytes']" <"$TEST_DIR/s2")
cached=$(jget "['dhash']['cache']['bytes']" <"$TEST_DIR/s2")
[ $((stored + cached)) -le "$CAP" ] || fail "store $stored + cache $cached bytes exceed the capacity"
[ "$cached" -lt 8192 ] || fail "the cache still holds $cached bytes while replicas are refused"
# Every acknowledged block is there.
grep -v error "$TEST_DIR/put1" "$TEST_DIR/put2" -h | cut -d' ' -f1 >"$TEST_DIR/acked"
"$CFSCTL" --data "$TEST_DIR/n0" keys | grep -v '^#' | sort >"$TEST_DIR/held"
missing=$(sort "$TEST_DIR/acked" | comm -23 - "$TEST_DIR/held" | wc -l)
[ "$missing" -eq 0 ] || fail "$missing acknowledged blocks are missing"
echo "# 80 more puts: $refused refused as disk full; store $stored bytes, cache $cached; all $(wc -l <"$TEST_DIR/acked") acknowledged blocks held"

# A cached copy no longer fits either.
head -c 8192 /dev/urandom >"$TEST_DIR/c"
st=$(python3 "$STORE_PY" "$port" 1 "$(b2sum -l 256 "$TEST_DIR/c" | cut -d' ' -f1)" "$TEST_DIR/c" 2)
[ "$st" = "-28" ] || fail "a cached copy into a full server answered $st, not -ENOSPC"
ok "capacity: the cache gives way to replicas, then replicas are refused as disk full, nothing acknowledged lost"
