#!/bin/bash
# cfs-gateway on a 4-daemon loopback ring, read with curl and a real
# browser (headless Chromium):
#   - bad arguments exit 2 with a reason; a --listen address that is not
#     a loopback one is refused without --allow-remote;
#   - whole files equal their sources; ranges at the start, middle and end
#     equal dd of the source; HEAD gives Content-Length and no body; ETag
#     with If-None-Match gives 304; a range past the end gives 416 with
#     Content-Range bytes */SIZE; a missing path 404, a malformed volume
#     400, a volume nobody published 404; no cfsd or no ring 503;
#   - VOLUME/path redirects (302) to VOLUME@SEQ/path, which is cached as
#     immutable; VOLUME@latest answers directly with a short max-age; a
#     directory without its slash redirects to the one with it; after a
#     new publish the redirect names the new version within --max-age,
#     and the old version still reads as it was;
#   - the JSON listing parses and names the directory's entries, a long
#     one in pages of 10,000 (?from=N); the HTML
#     listing, loaded in Chromium, shows them (DOM and a screenshot, kept
#     as an artifact) and its links lead to the files;
#   - /cfs-block/KEY answers bytes that hash to KEY; /cfs-root/ the root;
#   - tampered blocks in a dir: store: a file whose first block is bad is a
#     502 with none of its bytes; one whose last block is bad ends short
#     (the connection closed), its bytes before the bad block exact; a
#     store offering an older root than one served is refused (502);
#   - 200 slow clients (request heads that never end, and readers of a
#     big file at one byte a second) do not delay a normal curl (< 5 s);
#   - a request head sent a byte at a time is cut after --timeout.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/../harness/cluster.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
PUBLISH=$CFS_BIN/cfs-publish
GW=$CFS_BIN/cfs-gateway
export XDG_CONFIG_HOME=$TEST_DIR/config
ARTIFACTS=${CFS_ARTIFACT_DIR:-/tmp/cfs-artifacts}
trap 'cleanup; cluster_cleanup' EXIT

# A TCP port nobody listens on.
free_tcp_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if [ -z "$(ss -Hltn "sport = :$p")" ]; then echo "$p"; return; fi
	done
}

# start_gw NAME ARGS...: a gateway on a free port; sets GW_PID and BASE.
start_gw() {
	local name=$1 port; shift
	port=$(free_tcp_port)
	"$GW" --listen "127.0.0.1:$port" --state-dir "$TEST_DIR/gw-state" "$@" >>"$TEST_DIR/$name.log" 2>&1 &
	GW_PID=$!
	PIDS+=("$GW_PID")
	BASE=http://127.0.0.1:$port
	wait_for 10 curl -s -o /dev/null "$BASE/" || { cat "$TEST_DIR/$name.log"; fail "cfs-gateway $name did not start"; }
}

# code URL [CURL-ARGS...]: the HTTP status of a GET (body to $TEST_DIR/body).
code() {
	local url=$1; shift
	rm -f "$TEST_DIR/body" && : >"$TEST_DIR/body" # curl writes no file for an empty body
	curl -s -o "$TEST_DIR/body" -D "$TEST_DIR/hdr" -w '%{http_code}' "$@" "$url"
}

# header NAME: a header of the last answer ($TEST_DIR/hdr), without CR.
header() { grep -i "^$1:" "$TEST_DIR/hdr" | head -1 | cut -d' ' -f2- | tr -d '\r'; }

# ---- usage: a one-line reason and the usage, exit 2; a public address only when asked
usage_refused() { # ARGS...: exit 2, a reason line and the usage
	expect_exit 2 "$GW" "$@"
	grep -q "^cfs-gateway: " "$TEST_DIR/err" && grep -q "usage: cfs-gateway" "$TEST_DIR/err" ||
		fail "cfs-gateway $*: $(cat "$TEST_DIR/err")"
}
usage_refused --listen 0.0.0.0:8080
grep -q -- "--allow-remote" "$TEST_DIR/err" || fail "the refusal of 0.0.0.0 does not name --allow-remote"
usage_refused --listen "[::]:8080"
usage_refused --listen nonsense
usage_refused --window 0
usage_refused --max-connections lots
usage_refused --from /not/dir:form
usage_refused --from dir:/x --bootstrap 127.0.0.1:9
usage_refused extra-argument
expect_exit 1 "$GW" --from "dir:$TEST_DIR/no-store-here"
ok "bad arguments: exit 2 with a reason; a non-loopback --listen needs --allow-remote"

# ---- no ring to be reached: 503, and the gateway itself answers
vol0=aoqqpp7tzyil4hlq3umoos6atft6jvrqtosq2xy53sdgiesvgg4a
start_gw gw-nocfsd --cfsd "$TEST_DIR/no-cfsd-here.sock"
[ "$(code "$BASE/cfs/$vol0@latest/x")" = 503 ] || fail "no cfsd: $(cat "$TEST_DIR/body")"
kill -TERM "$GW_PID"
wait "$GW_PID" || true
start_gw gw-noring --bootstrap "127.0.0.1:$(free_port)"
[ "$(code "$BASE/cfs/$vol0@latest/x")" = 503 ] || fail "no ring at the bootstrap address: $(cat "$TEST_DIR/body")"
kill -TERM "$GW_PID"
wait "$GW_PID" || true
ok "no cfsd at the socket, no ring at the bootstrap address: 503"

# ---- the tree and the ring
src=$TEST_DIR/src
mkdir -p "$src/sub/deeper" "$src/docs"
head -c $((4 << 20)) /dev/urandom >"$src/big.bin"
printf '<!DOCTYPE html><html><body><h1 id="t">hello from cfs</h1></body></html>\n' >"$src/index.html"
echo '{"a": 1}' >"$src/docs/data.json"
echo "body { color: red }" >"$src/docs/style.css"
head -c 70000 /dev/urandom >"$src/sub/seventy.bin"
echo "a leaf" >"$src/sub/deeper/leaf.txt"
echo "spaced" >"$src/with space.txt"

cluster_start 4 1 --stabilize-ms 250
cluster_wait_correct 60 || fail "the 4-daemon ring did not converge"
"$PUBLISH" --keygen >"$TEST_DIR/vol" 2>/dev/null || fail "keygen"
vol=$(cat "$TEST_DIR/vol")
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/pub.err" ||
	{ cat "$TEST_DIR/pub.err"; fail "publish to the ring"; }
ok "published a tree with a 4 MiB file, small files and subdirectories to 4 daemons"

start_gw gw --data "$TEST_DIR/node1" --max-age 2
L=$BASE/cfs/$vol@latest

# ---- files
for f in big.bin index.html docs/data.json sub/seventy.bin sub/deeper/leaf.txt; do
	[ "$(code "$L/$f")" = 200 ] || fail "GET /$f: $(code "$L/$f") $(cat "$TEST_DIR/body")"
	cmp -s "$TEST_DIR/body" "$src/$f" || fail "/$f differs from its source"
done
[ "$(code "$L/with%20space.txt")" = 200 ] && cmp -s "$TEST_DIR/body" "$src/with space.txt" ||
	fail "a name with a space"
code "$L/index.html" >/dev/null
[ "$(header Content-Type)" = "text/html; charset=utf-8" ] || fail "index.html's type: $(header Content-Type)"
[ "$(header Cache-Control)" = "public, max-age=2" ] || fail "@latest's Cache-Control: $(header Cache-Control)"
code "$L/docs/style.css" >/dev/null
[ "$(header Content-Type)" = "text/css; charset=utf-8" ] || fail "style.css's type: $(header Content-Type)"
code "$L/big.bin" >/dev/null
[ "$(header Content-Type)" = "application/octet-stream" ] || fail "big.bin's type: $(header Content-Type)"
[ "$(header Content-Length)" = $((4 << 20)) ] || fail "big.bin's length: $(header Content-Length)"
ok "whole files equal their sources, with their types, lengths and a short max-age at @latest"

size=$((4 << 20))
check_range() { # RANGE FIRST COUNT
	[ "$(code "$L/big.bin" -r "$1")" = 206 ] || fail "range $1: not 206"
	dd if="$src/big.bin" bs=1M iflag=skip_bytes,count_bytes skip="$2" count="$3" status=none >"$TEST_DIR/want"
	cmp -s "$TEST_DIR/body" "$TEST_DIR/want" || fail "range $1 differs from dd of the source"
	[ "$(header Content-Range)" = "bytes $2-$(($2 + $3 - 1))/$size" ] || fail "range $1: Content-Range $(header Content-Range)"
}
check_range 0-999 0 1000
check_range 1234567-2345678 1234567 1111112
check_range 65530-65545 65530 16 # across a block boundary
check_range -1000 $((size - 1000)) 1000
check_range $((size - 70000))- $((size - 70000)) 70000
[ "$(code "$L/big.bin" -r $((size + 5))-)" = 416 ] || fail "a range past the end is not 416"
[ "$(header Content-Range)" = "bytes */$size" ] || fail "416 without bytes */SIZE: $(header Content-Range)"
[ "$(code "$L/big.bin" -r 0-1,5-6)" = 200 ] && cmp -s "$TEST_DIR/body" "$src/big.bin" ||
	fail "a multi-range request is not answered with the whole file"
ok "ranges at the start, middle, end and across blocks equal dd; past the end 416 bytes */$size"

[ "$(curl -s -I -o /dev/null -w '%{http_code} %{size_download}' "$L/big.bin")" = "200 0" ] || fail "HEAD"
curl -s -I "$L/big.bin" | tr -d '\r' | grep -qx "Content-Length: $size" || fail "HEAD has no Content-Length"
code "$L/big.bin" >/dev/null
etag=$(header ETag)
[[ $etag =~ ^\"[a-z2-7]{52}\"$ ]] || fail "ETag '$etag' is not a quoted base32 key"
[ "$(code "$L/big.bin" -H "If-None-Match: $etag")" = 304 ] || fail "If-None-Match with the ETag is not 304"
[ -s "$TEST_DIR/body" ] && fail "a 304 has a body"
[ "$(code "$L/big.bin" -H 'If-None-Match: "other"')" = 200 ] || fail "If-None-Match with another tag"
ok "HEAD: Content-Length, no body; ETag $etag, If-None-Match: 304"

[ "$(code "$L/no/such/file")" = 404 ] || fail "a missing path is not 404"
[ "$(code "$BASE/cfs/notavolume/x")" = 400 ] || fail "a malformed volume is not 400"
[ "$(code "$BASE/cfs/$vol/a/../b" --path-as-is)" = 400 ] || fail "a .. component is not 400"
"$PUBLISH" --keygen "$TEST_DIR/other.key" >"$TEST_DIR/other" 2>/dev/null || fail "keygen"
[ "$(code "$BASE/cfs/$(cat "$TEST_DIR/other")@latest/x")" = 404 ] || fail "an unpublished volume is not 404"
grep -q "no server has this volume" "$TEST_DIR/body" || fail "404 for a volume: $(cat "$TEST_DIR/body")"
[ "$(code "$BASE/cfs/$vol@latest/x" -X POST)" = 405 ] || fail "POST is not 405"
ok "404 for a missing path and an unpublished volume, 400 for a malformed volume or .., 405 for POST"

# ---- versions: the newest redirects to its number
[ "$(code "$BASE/cfs/$vol/sub/seventy.bin")" = 302 ] || fail "VOLUME/path is not a 302"
loc=$(header Location)
[[ $loc =~ ^/cfs/$vol@([0-9]+)/sub/seventy.bin$ ]] || fail "302 to '$loc'"
seq=${BASH_REMATCH[1]}
[ "$(code "$BASE$loc")" = 200 ] && cmp -s "$TEST_DIR/body" "$src/sub/seventy.bin" ||
	fail "the versioned URL $loc: $(cat "$TEST_DIR/body")"
[ "$(header Cache-Control)" = "public, max-age=29030400, immutable" ] || fail "@SEQ's Cache-Control: $(header Cache-Control)"
[ "$(curl -s -L "$BASE/cfs/$vol/index.html" | md5sum)" = "$(md5sum <"$src/index.html")" ] ||
	fail "following the redirect"
[ "$(code "$BASE/cfs/$vol@latest/sub")" = 302 ] && [ "$(header Location)" = "/cfs/$vol@latest/sub/" ] ||
	fail "a directory without its slash: $(header Location)"
[ "$(code "$BASE/cfs/$vol@$seq/sub")" = 301 ] && [ "$(header Location)" = "/cfs/$vol@$seq/sub/" ] ||
	fail "a versioned directory without its slash: $(header Location)"
ok "VOLUME/path: 302 to VOLUME@$seq/path, cached as immutable; directories get their slash"

# ---- listings
curl -s "$L/?format=json" >"$TEST_DIR/root.json"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
names=[e["name"] for e in d["entries"]]
assert names == ["big.bin","docs","index.html","sub","with space.txt"], names
assert d["volume"] == sys.argv[2] and d["seq"] == int(sys.argv[3]) and d["path"] == "/", d
big=[e for e in d["entries"] if e["name"]=="big.bin"][0]
assert big["type"] == "file" and big["size"] == 4<<20 and big["mtime"] > 0, big
assert [e for e in d["entries"] if e["name"]=="sub"][0]["type"] == "dir"' \
	"$TEST_DIR/root.json" "$vol" "$seq" || fail "the JSON listing of /: $(cat "$TEST_DIR/root.json")"
curl -s -H 'Accept: application/json' "$L/sub/" | python3 -c 'import json,sys
d=json.load(sys.stdin); assert [e["name"] for e in d["entries"]] == ["deeper","seventy.bin"], d' ||
	fail "the JSON listing of /sub/ (Accept: application/json)"
ok "JSON listings parse and name the entries (format=json and Accept)"

# ---- a new version: the newest is fetched again after --max-age; old versions stay
echo "version two" >"$src/docs/data.json"
"$PUBLISH" --to "cfsd:$TEST_DIR/node0/cfsd.sock" "$src" >/dev/null 2>"$TEST_DIR/pub.err" ||
	{ cat "$TEST_DIR/pub.err"; fail "the second publish"; }
seq2=$((seq + 1))
newest() { code "$BASE/cfs/$vol/docs/data.json" >/dev/null; [ "$(header Location)" = "/cfs/$vol@$seq2/docs/data.json" ]; }
wait_for 20 newest || fail "VOLUME/path still redirects to $(header Location) after a newer publish"
[ "$(code "$BASE/cfs/$vol@$seq2/docs/data.json")" = 200 ] && [ "$(cat "$TEST_DIR/body")" = "version two" ] ||
	fail "the new version: $(cat "$TEST_DIR/body")"
[ "$(code "$BASE/cfs/$vol@$seq/docs/data.json")" = 200 ] && [ "$(cat "$TEST_DIR/body")" = '{"a": 1}' ] ||
	fail "version $seq after the publish of $seq2: $(cat "$TEST_DIR/body")"
[ "$(curl -s "$L/docs/data.json")" = "version two" ] || fail "@latest after the publish"
ok "a newer publish: VOLUME/path redirects to @$seq2 within --max-age; @$seq still reads as it was"

# ---- trustless endpoints
code "$L/sub/deeper/leaf.txt" >/dev/null
ikey=$(header ETag | tr -d '"')
[ "$(code "$BASE/cfs-block/$ikey")" = 200 ] || fail "/cfs-block/$ikey"
[ "$(header Content-Type)" = application/vnd.cfs.block ] || fail "a block's type: $(header Content-Type)"
python3 -c 'import base64,hashlib,sys
k=base64.b32decode(sys.argv[1].upper()+"====")
assert hashlib.blake2b(open(sys.argv[2],"rb").read(), digest_size=32).digest() == k' "$ikey" "$TEST_DIR/body" ||
	fail "the block served does not hash to its key"
[ "$(code "$BASE/cfs-block/$(printf '%064d' 0)")" = 404 ] || fail "a block nobody has is not 404"
[ "$(code "$BASE/cfs-root/$vol@$seq")" = 200 ] && [ -s "$TEST_DIR/body" ] || fail "/cfs-root/$vol@$seq"
[ "$(header Content-Type)" = application/vnd.cfs.root ] && [ "$(header CFS-Seq)" = "$seq" ] ||
	fail "the root's headers: $(cat "$TEST_DIR/hdr")"
ok "/cfs-block/KEY hashes to KEY; /cfs-root/ serves the signed root of sequence $seq"

# ---- a real browser
mkdir -p "$ARTIFACTS"
browse() { # ARGS... (a fresh profile each time)
	local prof
	prof=$(mktemp -d "$TEST_DIR/chromium.XXXXXX")
	timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
		--disable-background-networking --disable-component-update --disable-sync \
		--user-data-dir="$prof" --window-size=1024,768 "$@" 2>>"$TEST_DIR/chromium.log"
}
browse --dump-dom "$L/" >"$TEST_DIR/dom.html" || fail "chromium --dump-dom: $(tail -3 "$TEST_DIR/chromium.log")"
for n in big.bin docs/ index.html sub/ "with space.txt"; do
	grep -qF ">$n</a>" "$TEST_DIR/dom.html" || fail "the listing in Chromium's DOM lacks $n"
done
grep -qF 'href="./with%20space.txt"' "$TEST_DIR/dom.html" || fail "the link to 'with space.txt'"
browse --dump-dom "$BASE/cfs/$vol/index.html" >"$TEST_DIR/page.html" || fail "chromium on index.html"
grep -qF '<h1 id="t">hello from cfs</h1>' "$TEST_DIR/page.html" || fail "Chromium did not render index.html: $(head -c 300 "$TEST_DIR/page.html")"
browse --dump-dom "$L/sub/deeper/" >"$TEST_DIR/deeper.html" || fail "chromium on /sub/deeper/"
grep -qF '>leaf.txt</a>' "$TEST_DIR/deeper.html" && grep -qF 'href="../"' "$TEST_DIR/deeper.html" ||
	fail "the listing of /sub/deeper/ in Chromium"
shot=$ARTIFACTS/gateway.png
rm -f "$shot"
browse --screenshot="$shot" "$BASE/cfs/$vol@$seq/" >/dev/null || fail "chromium --screenshot"
python3 -c 'import sys; b=open(sys.argv[1],"rb").read(); assert b[:8]==b"\x89PNG\r\n\x1a\n" and len(b)>5000, len(b)' "$shot" ||
	fail "no screenshot at $shot"
echo "# screenshot of the listing: $shot"
ok "Chromium shows the listing (names, links, ../), renders index.html through the redirect; screenshot kept"

# ---- tampered blocks never reach a client
src2=$TEST_DIR/src2
store=$TEST_DIR/store
mkdir -p "$src2"
head -c 20000 /dev/urandom >"$src2/one"     # one data block
head -c 150000 /dev/urandom >"$src2/three"  # 64 KiB, 64 KiB, 18,928 bytes
"$PUBLISH" --key "$TEST_DIR/other.key" --to "dir:$store" --state-dir "$TEST_DIR/pst" "$src2" >/dev/null 2>&1 ||
	fail "publish to dir:"
vol2=$(cat "$TEST_DIR/other")
k_one=$("$CFS_BIN/cfs-storetool" keys "$store" | awk '$2 > 20000 && $2 < 20100 { print $1 }')
k_last=$("$CFS_BIN/cfs-storetool" keys "$store" | awk '$2 > 18928 && $2 < 19000 { print $1 }')
[ ${#k_one} -eq 64 ] && [ ${#k_last} -eq 64 ] || fail "cannot tell the data blocks apart: $("$CFS_BIN/cfs-storetool" keys "$store")"
cp -a "$store" "$TEST_DIR/store-v1" # the first version, for the rollback check
# then a second version with a listing of more than one page (its
# directory blocks published after the keys above were told apart)
mkdir "$src2/many"
for i in $(seq 1 10005); do echo "$i" >"$src2/many/f$i"; done
"$PUBLISH" --key "$TEST_DIR/other.key" --to "dir:$store" --state-dir "$TEST_DIR/pst" "$src2" >/dev/null 2>&1 ||
	fail "the second publish to dir:"
"$CFS_BIN/cfs-storetool" flip "$store" "$k_one" >/dev/null || fail "flip"
"$CFS_BIN/cfs-storetool" flip "$store" "$k_last" >/dev/null || fail "flip"
start_gw gw-tampered --from "dir:$store"
G2=$BASE/cfs/$vol2@latest
[ "$(code "$G2/one")" = 502 ] || fail "a file with a bad block: $(code "$G2/one")"
grep -q "could not be fetched and verified" "$TEST_DIR/body" || fail "the 502 body: $(cat "$TEST_DIR/body")"
[ "$(stat -c %s "$TEST_DIR/body")" -lt 200 ] || fail "the 502 carries bytes of the file"
st=0
curl -s -o "$TEST_DIR/three" -w '%{http_code}' "$G2/three" >"$TEST_DIR/three.code" || st=$?
[ "$st" -eq 18 ] || fail "a file whose last block is bad: curl exit $st (want 18, a short body)"
[ "$(cat "$TEST_DIR/three.code")" = 200 ] || fail "the headers of /three: $(cat "$TEST_DIR/three.code")"
got=$(stat -c %s "$TEST_DIR/three")
[ "$got" -eq 131072 ] || fail "/three stopped at byte $got, not at the bad block (131072)"
cmp -s -n "$got" "$TEST_DIR/three" "$src2/three" || fail "the bytes before the bad block differ"
grep -q "closing the connection at byte 131072" "$TEST_DIR/gw-tampered.log" || fail "no log line for the abort"
ok "a bad first block: 502 and none of its bytes; a bad last block: the body stops at byte 131072, exact before it"

curl -s "$G2/many/?format=json" >"$TEST_DIR/p1.json"
curl -s "$G2/many/?format=json&from=10000" >"$TEST_DIR/p2.json"
python3 -c 'import json,sys
p1, p2 = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
names = [e["name"] for e in p1["entries"] + p2["entries"]]
assert p1["truncated"] and p1["next"] == 10000 and len(p1["entries"]) == 10000, (p1["truncated"], len(p1["entries"]))
assert not p2["truncated"] and len(names) == 10005 and len(set(names)) == 10005, len(names)
assert set(names) == {"f%d" % i for i in range(1, 10006)}' "$TEST_DIR/p1.json" "$TEST_DIR/p2.json" ||
	fail "a listing of 10,005 entries in pages"
curl -s "$G2/many/" | grep -qF 'href="./?from=10000"' || fail "the HTML listing has no link to its next page"
ok "a directory of 10,005 entries lists in two pages (10,000 and ?from=10000), every name once"

kill -TERM "$GW_PID"
wait "$GW_PID" || true
start_gw gw-rollback --from "dir:$TEST_DIR/store-v1"
[ "$(code "$BASE/cfs/$vol2@latest/one")" = 502 ] || fail "an older root after a newer one: $(cat "$TEST_DIR/body")"
grep -q "older than one already served" "$TEST_DIR/body" || fail "the rollback's 502: $(cat "$TEST_DIR/body")"
[ "$(code "$BASE/cfs/$vol2@1/three")" = 200 ] || fail "version 1 asked for by number: $(cat "$TEST_DIR/body")"
ok "a store offering an older root than one served is refused (502); @1 by number still reads"

# ---- slow clients do not stop the gateway
kill -TERM "$GW_PID" # the tampered store's gateway: SIGTERM ends it, exit 0
st=0
wait "$GW_PID" || st=$?
[ "$st" -eq 0 ] || fail "cfs-gateway exited $st after SIGTERM"
start_gw gw-slow --data "$TEST_DIR/node2" --timeout 60
slow_url=/cfs/$vol@$seq/big.bin
python3 "$HERE/gw_slow.py" 127.0.0.1 "${BASE##*:}" 200 15 "$slow_url" "$TEST_DIR/ready" >"$TEST_DIR/slow.out" 2>&1 &
SLOW_PID=$!
PIDS+=("$SLOW_PID")
wait_for 30 grep -q "ready 200" "$TEST_DIR/ready" || fail "the slow clients did not connect: $(cat "$TEST_DIR/slow.out")"
sleep 1
t0=$(date +%s.%N)
[ "$(code "$BASE/cfs/$vol@$seq/sub/seventy.bin")" = 200 ] && cmp -s "$TEST_DIR/body" "$src/sub/seventy.bin" ||
	fail "a normal request beside 200 slow clients"
[ "$(code "$BASE/cfs/$vol@$seq/big.bin")" = 200 ] && cmp -s "$TEST_DIR/body" "$src/big.bin" ||
	fail "a 4 MiB read beside 200 slow clients"
secs=$(echo "$(date +%s.%N) - $t0" | bc)
rss=$(awk '/VmRSS/ { print $2 }' "/proc/$GW_PID/status")
wait "$SLOW_PID" || fail "the slow clients: $(cat "$TEST_DIR/slow.out")"
grep -q "^open 200 of 200" "$TEST_DIR/slow.out" || fail "the slow clients were cut early: $(cat "$TEST_DIR/slow.out")"
echo "# 200 slow clients ($(cat "$TEST_DIR/slow.out")): a 70 KB and a 4 MiB read took ${secs}s; gateway RSS ${rss} kB"
[ "$(echo "$secs < 5" | bc)" = 1 ] || fail "a normal read took ${secs}s beside 200 slow clients"
ok "200 slow clients: a normal curl is served in ${secs}s (< 5 s), RSS ${rss} kB"

# ---- a request head a byte a second is cut after --timeout
kill -TERM "$GW_PID"
wait "$GW_PID" || true
start_gw gw-head --data "$TEST_DIR/node2" --timeout 2
secs=$(python3 - "${BASE##*:}" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(0.5)
t0 = time.time()
head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100000
for i in range(60):  # a byte every 0.5 s: never idle, never whole
    try:
        s.send(head[i:i + 1])
        if s.recv(1) == b"":
            break
    except socket.timeout:
        continue
    except OSError:
        break
print("%.1f" % (time.time() - t0))
PY
)
echo "# a head sent a byte every 0.5 s was cut after ${secs}s (--timeout 2)"
[ "$(echo "$secs >= 1.5 && $secs < 6" | bc)" = 1 ] || fail "a slow request head was cut after ${secs}s, not about 2 s"
[ "$(code "$BASE/cfs/$vol@$seq/sub/deeper/leaf.txt")" = 200 ] || fail "the gateway after cutting a slow head"
ok "a request head sent a byte at a time is cut after ${secs}s (--timeout 2); the gateway serves on"
