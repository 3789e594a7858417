#!/bin/sh
# Install the Debian packages named on the command line that are missing,
# and nothing else: one `apt-get update`, then one `apt-get install -y` of
# exactly the missing ones. Make targets call this just before they need a
# package, so a fresh Debian 12 machine needs no separate set-up step.
# A name starting with @ stands for the set of packages a kind of target
# needs: @build (compile and link), @test (unit and integration tests),
# @fuzz (clang's libFuzzer), @eval (make eval's plots).
set -eu
pkgs=""
for p in "$@"; do
	case "$p" in
	@build) pkgs="$pkgs gcc g++ make pkg-config libuv1-dev libsodium-dev libmsgpack-dev libfuse3-dev
		fuse3 libleveldb-dev libminiupnpc-dev libnatpmp-dev libnetfilter-queue-dev libisal-dev
		libmicrohttpd-dev" ;;
	@test) pkgs="$pkgs libcriterion-dev iproute2 procps python3 bc systemd man-db iptables ethtool
		miniupnpd nftables python3-prometheus-client curl chromium" ;;
	@fuzz) pkgs="$pkgs clang libclang-rt-14-dev" ;;
	@eval) pkgs="$pkgs gnuplot-nox python3" ;;
	*) pkgs="$pkgs $p" ;;
	esac
done
missing=""
for p in $pkgs; do
	s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$s" in
	*" installed") ;;
	*) missing="$missing $p" ;;
	esac
done
[ -z "$missing" ] && exit 0
echo "ensure-deps: installing missing Debian packages:$missing" >&2
if [ "$(id -u)" -eq 0 ]; then
	sudo=""
elif command -v sudo >/dev/null 2>&1; then
	sudo="sudo -n"
else
	echo "ensure-deps: need root (or sudo) to install:$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# One update per build tree: later targets reuse the fresh package lists.
stamp=${CFS_APT_STAMP:-}
if [ -z "$stamp" ] || [ ! -e "$stamp" ]; then
	$sudo apt-get update -qq </dev/null >&2
	[ -n "$stamp" ] && mkdir -p "$(dirname "$stamp")" && : >"$stamp"
fi
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing </dev/null >&2
