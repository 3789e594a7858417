#!/bin/bash
# make bench-rpc: RPC rate and round trips between two processes over
# loopback, one call in flight and with the STP window open.
# Usage: bench-rpc.sh BIN_DIR   (the build's bin/; rpc-bench is in ../bench/)
set -u
bench=$1/../bench/rpc-bench
port=${BENCH_PORT:-$((20000 + RANDOM % 20000))}
"$bench" serve "$port" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT
sleep 0.3
echo "rpc-bench: UDP RPCs over loopback, client and server in separate processes ($(nproc) cores)"
st=0
"$bench" run "127.0.0.1:$port" one 50000 || st=1
"$bench" run "127.0.0.1:$port" window 1000000 || st=1
exit $st
