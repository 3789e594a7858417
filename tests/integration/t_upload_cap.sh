#!/bin/bash
# cfsd --max-upload-mb-per-s caps everything the daemon sends. A ring of
# one daemon capped at 1 MB/s holds a 36 MiB file; a plain ring client
# (cfs-cat, no daemon of its own) reads it, so every byte comes from the
# capped daemon over loopback, where it could go a hundred times faster.
# Over 30 s of the read the daemon's bytes out (every datagram it sent:
# answers, pieces, acks) are at most 10 % over the cap, and at least half
# of it (a loaded test machine may not keep the reader hungry), and status
# counts the pieces that waited for it.
. "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME=$TEST_DIR/config
CAP_MB=1
port=$(free_port)
# Published before the cap, which would hold the daemon's copies to itself
# too (they cross its socket): then restarted with it.
start_cfsd n1 "$port"
mkdir -p "$TEST_DIR/src"
head -c $((36 << 20)) /dev/urandom >"$TEST_DIR/src/big"
"$CFS_BIN/cfs-publish" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$CFS_BIN/cfs-publish" --quiet --to "cfsd:$TEST_DIR/n1/cfsd.sock" "$TEST_DIR/src" >/dev/null 2>"$TEST_DIR/pub.err" ||
	fail "publish: $(tail -2 "$TEST_DIR/pub.err")"
kill -TERM "$CFSD_PID"
wait "$CFSD_PID" || fail "cfsd exited non-zero on SIGTERM"
start_cfsd n1 "$port" --max-upload-mb-per-s "$CAP_MB"

sent() { "$CFSCTL" --data "$TEST_DIR/n1" status --json | jget "['rpc']['bytes_out']"; }
"$CFS_BIN/cfs-cat" --bootstrap "127.0.0.1:$port" "$vol" /big >"$TEST_DIR/out" 2>"$TEST_DIR/cat.err" &
cat_pid=$!
PIDS+=("$cat_pid")
sleep 3
b0=$(sent); t0=$(date +%s%N)
sleep 30
b1=$(sent); t1=$(date +%s%N)
kill -0 "$cat_pid" 2>/dev/null || fail "the read ended within 33 s: the cap did not hold it ($(wc -c <"$TEST_DIR/out") bytes read)"
kill -TERM "$cat_pid"
held=$("$CFSCTL" --data "$TEST_DIR/n1" status --json | jget "['rpc']['validation']['upload_held']")
rate=$(python3 -c "print('%.3f' % (($b1 - $b0) / (($t1 - $t0) / 1e9) / 1e6))")
python3 -c "import sys; r = $rate; sys.exit(0 if 0.5 * $CAP_MB <= r <= 1.1 * $CAP_MB else 1)" ||
	fail "the daemon sent $rate MB/s over 30 s of reads, capped at $CAP_MB MB/s (wanted 0.5 to 1.1 times it)"
[ "$held" -gt 0 ] || fail "status counts no wait for the upload cap"
echo "# capped at $CAP_MB MB/s, the daemon sent $rate MB/s over 30 s of a hungry read ($held waits for the cap)"
ok "the upload cap holds: at most 10 % over it, at least half of it"
