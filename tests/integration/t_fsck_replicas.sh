#!/bin/bash
# cfs-fsck --replicas answers "where": on an 8-daemon loopback ring (k = 3,
# replica maintenance off, so that nothing but --repair restores a copy)
# a published volume is on all k servers of every block; two holders are
# killed; --replicas names exactly the blocks that lost copies, how many
# good copies each has left and which servers now responsible lack them;
# --repair stores them again from a good copy and every block is back at k.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
PUBLISH=$CFS_BIN/cfs-publish
FSCK=$CFS_BIN/cfs-fsck
export XDG_CONFIG_HOME=$TEST_DIR/config
K=3
N=8

cluster_start "$N" 1 --stabilize-ms 250 --replicas "$K" --sync-ms 0
cluster_wait_correct 60 || fail "the $N-daemon ring did not converge"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
src=$TEST_DIR/src
mkdir -p "$src/d"
for i in $(seq 1 30); do head -c $((2000 + i * 900)) /dev/urandom >"$src/d/f$i"; done
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" --state-dir "$TEST_DIR/st" "$src" >/dev/null \
	2>"$TEST_DIR/err" || { cat "$TEST_DIR/err"; fail "publish"; }
fsck_r() { # NODE ARGS...: cfs-fsck --replicas through that node; its exit code in $rc
	local n=$1; shift
	rc=0
	"$FSCK" --from "cfsd:$TEST_DIR/node$n/cfsd.sock" "$@" "$vol" >"$TEST_DIR/rep" 2>"$TEST_DIR/rep.err" || rc=$?
}
fsck_r 1 --replicas
[ "$rc" -eq 0 ] || fail "a fresh volume is not on all k: $(tail -3 "$TEST_DIR/rep") $(cat "$TEST_DIR/rep.err")"
blocks=$(grep -c " $K/$K\$" "$TEST_DIR/rep" || true)
[ "$blocks" -eq "$(wc -l <"$TEST_DIR/rep")" ] && [ "$blocks" -gt 60 ] ||
	fail "$blocks lines at $K/$K of $(wc -l <"$TEST_DIR/rep")"
echo "# a fresh volume: $(tail -1 "$TEST_DIR/rep.err" | sed 's/^cfs-fsck: //')"

# Who holds what, then two holders die.
cluster_collect "$TEST_DIR/held"
cut -d' ' -f1 "$TEST_DIR/rep" >"$TEST_DIR/vol.keys"
v1=2 v2=5
cluster_kill "$v1"
cluster_kill "$v2"
sleep 4 # the ring drops them (3 missed probes) and stabilises
cluster_wait_correct 60 || fail "the ring did not heal after two deaths"
# Expected: every block one of the two held, with its good copies left.
python3 - "$TEST_DIR/held" "$TEST_DIR/vol.keys" "node$v1" "node$v2" >"$TEST_DIR/expect" <<'EOF'
import os, sys
held, keys, dead = sys.argv[1], sys.argv[2], set(sys.argv[3:])
holders = {}
for f in os.listdir(held):
    if f.endswith(".keys"):
        node = f[:-5]
        for l in open(os.path.join(held, f)):
            if l.strip() and not l.startswith("#"):
                holders.setdefault(l.split()[0], set()).add(node)
for k in open(keys):
    k = k.strip()
    h = holders.get(k, set())
    if h & dead:
        print(k, len(h - dead))
EOF
fsck_r 1 --replicas
[ "$rc" -eq 1 ] || fail "--replicas exit $rc with two holders dead"
awk -v k="$K" '{split($2, g, "/"); if (g[1] < k) print $1, g[1]}' "$TEST_DIR/rep" | sort >"$TEST_DIR/got"
sort "$TEST_DIR/expect" >"$TEST_DIR/want"
lost=$(wc -l <"$TEST_DIR/want")
[ "$lost" -gt 10 ] || fail "only $lost blocks lost a copy: the test proves little"
diff "$TEST_DIR/want" "$TEST_DIR/got" >"$TEST_DIR/diff" ||
	fail "--replicas named other blocks or counts than the holders say: $(head -5 "$TEST_DIR/diff")"
# Each line names the servers now responsible that lack the block: live
# ones, none of them a server that held it before.
python3 - "$TEST_DIR/rep" "$TEST_DIR/held" "${CL_PORT[$v1]}" "${CL_PORT[$v2]}" "$K" <<'EOF' ||
import os, sys
rep, held, d1, d2, k = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
for line in open(rep):
    f = line.split()
    good = int(f[1].split("/")[0])
    if good >= k:
        continue
    lack = [f[i + 1] for i in range(2, len(f), 2) if f[i] == "missing"]
    if len(lack) != k - good:
        sys.exit("block %s: %d good but %d named missing: %s" % (f[0], good, len(lack), line))
    for a in lack:
        if a.endswith(":" + d1) or a.endswith(":" + d2):
            sys.exit("a dead server named as responsible: " + line)
EOF
	fail "the servers named are wrong"
echo "# two of $N holders killed: --replicas names the $lost blocks that lost a copy, each with its good copies left and the servers now lacking it: $(tail -1 "$TEST_DIR/rep.err" | sed 's/^cfs-fsck: //')"
ok "--replicas names exactly the blocks below k and where they are missing"

fsck_r 3 --repair
[ "$rc" -eq 0 ] || fail "--repair exit $rc: $(tail -2 "$TEST_DIR/rep.err")"
repaired=$(grep -o '[0-9]* blocks stored again' "$TEST_DIR/rep.err" | cut -d' ' -f1)
[ "$repaired" -eq "$(awk '$2 > 0' "$TEST_DIR/want" | wc -l)" ] || fail "repaired $repaired of $lost"
fsck_r 4 --replicas
[ "$rc" -eq 0 ] || fail "after --repair, not every block is at k: $(grep -v " $K/$K\$" "$TEST_DIR/rep" | head -3)"
echo "# --repair stored $repaired blocks again; then $(tail -1 "$TEST_DIR/rep.err" | sed 's/^cfs-fsck: //')"
ok "--repair brings every block back to k"
