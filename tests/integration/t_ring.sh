#!/bin/bash
# The Chord ring with real cfsd daemons on loopback: rings of 1, 2, 3 and 16
# processes converge (every predecessor and whole successor list true); a
# node joining and one leaving are absorbed; a quarter of the ring killed at
# once re-converges; a 64-process ring answers 10,000 random lookups
# correctly in each lookup mode.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
STAB="--stabilize-ms 250"

for n in 1 2 3; do
	cluster_start "$n" 1 $STAB
	cluster_wait_correct 60 || fail "a ring of $n did not converge"
	echo "# ring of $n converged in ${CLUSTER_CONVERGED_S}s"
	for ((i = 0; i < n; i++)); do cluster_stop "$i"; done
	CL_N=0
done
ok "rings of 1, 2 and 3 processes converge"

TEST_DIR=$TEST_DIR/r16; mkdir -p "$TEST_DIR"
cluster_start 16 2 $STAB
cluster_wait_correct 120 || fail "a ring of 16 processes (32 vnodes) did not converge"
echo "# ring of 16 processes × 2 vnodes converged in ${CLUSTER_CONVERGED_S}s"
cluster_lookup_check iterative 1000 || fail "lookups in the 16-ring"

# A node joins...
CL_IP[16]=$(cluster_ip 16); CL_PORT[16]=$(free_port)
CL_ARGS[16]="--vnodes 2 --bootstrap ${CL_IP[3]}:${CL_PORT[3]} $STAB"
cluster_run 16; cluster_wait_up 16; CL_N=17
cluster_wait_correct 60 || fail "the ring did not absorb a joining node"
echo "# a joining node absorbed in ${CLUSTER_CONVERGED_S}s"
# ... and one leaves gracefully (SIGTERM: it tells its neighbours).
cluster_stop 5
cluster_wait_correct 60 || fail "the ring did not absorb a leaving node"
echo "# a leaving node absorbed in ${CLUSTER_CONVERGED_S}s"
grep -q "left the ring" "$TEST_DIR/node5.log" || fail "node 5 did not leave cleanly"

# A quarter of the ring killed at once (no goodbye).
for i in 1 4 7 10; do cluster_kill "$i"; done
cluster_wait_correct 90 || fail "the ring did not re-converge after 25% were killed"
echo "# 25% of the processes killed at once: re-converged in ${CLUSTER_CONVERGED_S}s"
cluster_lookup_check recursive 1000 || fail "lookups after the failures"
for ((i = 0; i < CL_N; i++)); do cluster_alive "$i" && cluster_stop "$i"; done
ok "join, leave and 25% failure absorbed"

TEST_DIR=${TEST_DIR%/r16}/r64; mkdir -p "$TEST_DIR"
CL_N=0
cluster_start 64 1 $STAB
cluster_wait_correct 180 || fail "a ring of 64 processes did not converge"
echo "# ring of 64 processes converged in ${CLUSTER_CONVERGED_S}s"
for mode in iterative,greedy recursive,greedy iterative,cost recursive,nonlinear iterative,greedy,p3; do
	cluster_lookup_check "$mode" 10000 || fail "lookups ($mode) in the 64-ring"
done
ok "10,000 lookups per mode in a 64-process ring all return the true successor"
