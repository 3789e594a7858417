#!/bin/bash
# make install: the programs, every page of docs/man (sections 1, 5, 8),
# the service (cfsd.service; the user cfs from cfs.sysusers.conf, read by
# systemd-sysusers only under /usr/lib or /etc) and the sample
# /etc/cfs/cfsd.conf, never over one already there, and mount(8)'s helper
# mount.cfs (in MOUNT_HELPER_DIR) that runs BINDIR's cfs-mount. Without DESTDIR it
# also creates the user and group cfs (systemd-sysusers, else useradd) and
# tells a running systemd about the unit; with DESTDIR (a package or a
# test) it touches nothing outside DESTDIR.
# The directories come from the environment (make passes on those given on
# its command line), with these defaults; the programs are the arguments.
# mount(8) looks for its helper in /sbin only, whatever PREFIX is.
set -eu
: "${DESTDIR=}" "${PREFIX:=/usr/local}" "${SYSCONFDIR:=/etc}" "${SYSUSERSDIR:=/usr/lib/sysusers.d}"
: "${BINDIR:=$PREFIX/bin}" "${MANDIR:=$PREFIX/share/man}" "${UNITDIR:=$PREFIX/lib/systemd/system}"
: "${MOUNT_HELPER_DIR:=/sbin}"
set -x
install -d "$DESTDIR$BINDIR" "$DESTDIR$UNITDIR" "$DESTDIR$SYSUSERSDIR" "$DESTDIR$SYSCONFDIR/cfs" \
	"$DESTDIR$MANDIR/man1" "$DESTDIR$MANDIR/man5" "$DESTDIR$MANDIR/man8" "$DESTDIR$MOUNT_HELPER_DIR"
install -m 0755 "$@" "$DESTDIR$BINDIR/"
sed "s|@BINDIR@|$BINDIR|" cfs-fuse/mount.cfs.in >"$DESTDIR$MOUNT_HELPER_DIR/mount.cfs"
chmod 0755 "$DESTDIR$MOUNT_HELPER_DIR/mount.cfs"
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
