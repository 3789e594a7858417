#!/bin/bash
# make install: the programs, every page of docs/man (sections 1, 5, 8),
# the service (cfsd.service; the user cfs from cfs.sysusers.conf, read by
# systemd-sysusers only under /usr/lib or /etc) and the sample
# /etc/cfs/cfsd.conf, never over one already there. Without DESTDIR it
# also creates the user and group cfs (systemd-sysusers, else useradd) and
# tells a running systemd about the unit; with DESTDIR (a package or a
# test) it touches nothing outside DESTDIR.
# The Makefile passes DESTDIR BINDIR MANDIR SYSCONFDIR UNITDIR SYSUSERSDIR
# in the environment and the programs as arguments.
set -eu
: "${DESTDIR=}" "$BINDIR" "$MANDIR" "$SYSCONFDIR" "$UNITDIR" "$SYSUSERSDIR"
set -x
install -d "$DESTDIR$BINDIR" "$DESTDIR$UNITDIR" "$DESTDIR$SYSUSERSDIR" "$DESTDIR$SYSCONFDIR/cfs" \
	"$DESTDIR$MANDIR/man1" "$DESTDIR$MANDIR/man5" "$DESTDIR$MANDIR/man8"
install -m 0755 "$@" "$DESTDIR$BINDIR/"
{ set +x; } 2>/dev/null
for m in docs/man/*.1 docs/man/*.5 docs/man/*.8; do
	install -m 0644 "$m" "$DESTDIR$MANDIR/man${m##*.}/"
done
sed "s|/usr/local/bin|$BINDIR|; s|/etc/cfs|$SYSCONFDIR/cfs|" tools/systemd/cfsd.service \
	>"$DESTDIR$UNITDIR/cfsd.service"
install -m 0644 tools/systemd/cfs.sysusers.conf "$DESTDIR$SYSUSERSDIR/cfs.conf"
[ -e "$DESTDIR$SYSCONFDIR/cfs/cfsd.conf" ] ||
	install -m 0644 tools/cfsd.conf "$DESTDIR$SYSCONFDIR/cfs/cfsd.conf"
[ -z "$DESTDIR" ] || exit 0
if command -v systemd-sysusers >/dev/null; then
	systemd-sysusers "$SYSUSERSDIR/cfs.conf"
else
	getent group cfs >/dev/null || groupadd --system cfs
	getent passwd cfs >/dev/null || useradd --system --gid cfs --home-dir /var/lib/cfs \
		--shell /usr/sbin/nologin --comment "CFS server daemon" cfs
fi
[ ! -d /run/systemd/system ] || systemctl daemon-reload
echo "installed; configure $SYSCONFDIR/cfs/cfsd.conf, then: systemctl enable --now cfsd"
echo "readers: adduser USER cfs (then log in again) to use the system daemon"
