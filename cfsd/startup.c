/*
 * cfsd's start-up: what main checks and sets up before the loop runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cfsd/daemon.h"

/* Take DIR/cfsd.lock for the life of the process (flock: released by the
 * kernel however the process ends, so a crash never leaves it stuck). */
int cfsd__lock_data_dir(struct daemon *d)
{
	char path[600], pid[32];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", d->data_dir, CFSD_LOCK_NAME);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return log_error_errno(-errno, "cannot open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		ssize_t n = read(fd, pid, sizeof(pid) - 1);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		if (r == -EWOULDBLOCK) {
			log_error("data directory %s is in use by another cfsd%s%s%s", d->data_dir,
			          *pid ? " (pid " : "", pid, *pid ? ")" : "");
			return -EBUSY;
		}
		return log_error_errno(r, "cannot lock %s", path);
	}
	if (ftruncate(fd, 0) == 0) {
		int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
		if (write(fd, pid, (size_t)n) != n)
			log_warn("cannot record the pid in %s", path);
	}
	d->lock_fd = fd;
	return 0;
}

/*
 * --netmodel: every datagram this daemon sends passes the wide-area model
 * as sent from d->addr, the address peers know us by and send to, so each
 * daemon's view of a pair is the one its peer has (an unspecified bind
 * address such as :: would name no place).
 */
void cfsd__install_netmodel(struct daemon *d)
{
	char desc[512];
	struct cfs_netmodel m;

	if (!d->has_wan)
		return;
	cfs_wan_node_init(&d->wan_node, &d->wan, &d->addr, d->wan.seed);
	m = cfs_wan_ops(&d->wan_node);
	cfs_transport_set_model(d->tr, &m);
	cfs_wan_describe(&d->wan, desc, sizeof(desc));
	log_warn("evaluation only: every datagram sent is delayed or dropped by a network model: %s%s",
	         desc, cfs_wan_is_slow(&d->wan, &d->addr) ? "; this server is one of the slow" : "");
}

/*
 * Start-up checks that need no socket, shared by --check and a real start.
 * A loopback address advertised while listening on every interface is the
 * default config's trap: peers elsewhere would be told to reach 127.0.0.1.
 * A new ring is never started by accident on an address others can reach:
 * that takes --first (a loopback ring cannot be joined from elsewhere, so
 * tests and the demo need no flag).
 */
static bool ip_is_loopback(const struct cfs_addr *a)
{
	const uint8_t *ip;
	size_t n = cfs_addr_ip_bytes(a, &ip);
	static const uint8_t v6_loop[16] = { [15] = 1 };
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (n == 4)
		return ip[0] == 127;
	return memcmp(ip, v6_loop, 16) == 0 || (memcmp(ip, v4_mapped, 12) == 0 && ip[12] == 127);
}

/* RFC 1918 and RFC 6598 (carrier-grade NAT) IPv4: behind a router. */
static bool ip_is_private4(const struct cfs_addr *a)
{
	const uint8_t *ip;

	if (cfs_addr_ip_bytes(a, &ip) != 4)
		return false;
	return ip[0] == 10 || (ip[0] == 172 && (ip[1] & 0xf0) == 16) || (ip[0] == 192 && ip[1] == 168) ||
	       (ip[0] == 100 && (ip[1] & 0xc0) == 64);
}

#define PORTMAP_LIFETIME_S 3600
#define PORTMAP_WAIT_MS 1500

/* Behind a home router (a private address, no --addr given): ask the
 * router to forward our port, and tell peers its public address. Renewed
 * at half the lifetime; a new public address needs a restart (our node
 * IDs hash it). */
static void portmap_renew(uv_timer_t *t)
{
	struct daemon *d = t->data;
	char pub[64];
	const char *how = "";

	if (cfsd_portmap(d->port, PORTMAP_LIFETIME_S, PORTMAP_WAIT_MS, pub, sizeof(pub), &how) < 0)
		log_warn("the port mapping on the router could not be renewed; members may lose this server");
	else if (strcmp(pub, d->advertise))
		log_warn("the router's public address is now %s, not %s: restart cfsd to take it", pub,
		         d->advertise);
}

void cfsd__try_portmap(const struct settings *st)
{
	struct daemon *d = st->d;
	static char pub[64];
	const char *how = "";
	struct cfs_addr a;

	if (!d->map_port || d->advertise || !st->bind_host || cfs_addr_from_ip(&a, st->bind_host, 1) < 0 ||
	    !ip_is_private4(&a))
		return;
	int r = cfsd_portmap(d->port, PORTMAP_LIFETIME_S, PORTMAP_WAIT_MS, pub, sizeof(pub), &how);
	if (r == -ENETUNREACH)
		return; /* no default gateway: no router to ask */
	if (r < 0) {
		log_info("no port mapping on the router (NAT-PMP, UPnP-IGD): %s", strerror(-r));
		return;
	}
	log_info("the router forwards UDP port %u (%s): members reach this server at %s:%u", d->port, how, pub,
	         d->port);
	d->advertise = pub;
	uv_timer_init(d->loop, &d->portmap_timer);
	d->portmap_timer.data = d;
	uv_timer_start(&d->portmap_timer, portmap_renew, PORTMAP_LIFETIME_S * 500ull, PORTMAP_LIFETIME_S * 500ull);
	d->portmap_on = true;
}

const char *cfsd__advertised(const struct settings *st)
{
	struct daemon *d = st->d;
	if (d->advertise)
		return d->advertise;
	if (st->bind_host && strcmp(st->bind_host, "::") && strcmp(st->bind_host, "0.0.0.0"))
		return st->bind_host;
	return "127.0.0.1";
}

void cfsd__check_addresses(const struct settings *st)
{
	struct daemon *d = st->d;
	const char *adv = cfsd__advertised(st), *bind = st->bind_host ? st->bind_host : "::";
	struct cfs_addr a;
	bool every = !strcmp(bind, "::") || !strcmp(bind, "0.0.0.0");

	if (cfs_addr_from_ip(&a, adv, 1) < 0)
		exit(2);
	if (every && ip_is_loopback(&a)) {
		log_error("cfsd would listen on every interface (bind %s) but tell its peers it is at "
		          "%s, where no other machine reaches it: set \"addr = IP\" in the config file "
		          "(--addr IP), the address peers reach this server at, or \"bind = 127.0.0.1\" "
		          "(--bind) for a ring on this machine only", bind, adv);
		exit(2);
	}
	if (!d->first && d->nboot == 0 && !ip_is_loopback(&a)) {
		log_error("no ring to join: set \"bootstrap = HOST:PORT\" in the config file "
		          "(--bootstrap) to join one through a member, or \"first = true\" (--first) "
		          "to start a new ring at %s", adv);
		exit(2);
	}
}

/* READY=1 once every virtual server has joined the ring. */
void cfsd__ready_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;
	char ready[CFS_ADDR_STRLEN + 64], a[CFS_ADDR_STRLEN];

	for (uint32_t i = 0; i < chord_vnode_count(d->chord); i++)
		if (!chord_vnode_joined(d->chord, i))
			return;
	uv_timer_stop(t);
	if (d->ready_sent)
		return;
	d->ready_sent = true;
	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=serving on %s, a member of the ring",
	         cfs_addr_str(&d->addr, a));
	cfsd__notify(ready);
}

/* sd_notify(3)'s protocol without libsystemd: one datagram to the
 * AF_UNIX socket named by $NOTIFY_SOCKET ('@': the abstract namespace).
 * Quiet when there is none (not run by systemd with Type=notify). */
void cfsd__notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;
	int fd;

	if (!path || !*path || (path[0] != '/' && path[0] != '@') ||
	    (n = strlen(path)) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
	           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
		log_warn_errno(-errno, "cannot tell systemd %s through %s", state, path);
	close(fd);
}

/* --socket-group: members of the group reach the daemon (mode 0660). The
 * listener made the socket 0600; its group changes first, then its mode. */
int cfsd__share_socket(struct daemon *d)
{
	struct group *g;

	if (!d->sock_group)
		return 0;
	if (!(g = getgrnam(d->sock_group)))
		return log_error_errno(-ENOENT, "--socket-group %s: no such group (make install "
		                       "creates cfs)", d->sock_group);
	if (chown(d->sock_path, (uid_t)-1, g->gr_gid) < 0 || chmod(d->sock_path, 0660) < 0)
		return log_error_errno(-errno, "cannot give the control socket %s to the group %s",
		                       d->sock_path, d->sock_group);
	return 0;
}
