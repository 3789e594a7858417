/*
 * The UDP socket layer (common/udp.h): socket options, GSO/sendmmsg on the
 * way out, recvmmsg/GRO on the way in. Linux only, as the rest of CFS.
 */
#define _GNU_SOURCE /* sendmmsg, recvmmsg */
#include "common/udp.h"

#include <netinet/udp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* Datagrams per sendmmsg when GSO is off (UIO_MAXIOV allows 1024; 64
 * matches one GSO call and keeps the arrays on the stack small). */
#define MMSG_BATCH 64

/* ------------------------------------------------------------ addresses */

void cfs_udp_addr_normalize(struct cfs_addr *ret, const struct sockaddr *sa)
{
	memset(ret, 0, sizeof(*ret));
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			ret->in4.sin_family = AF_INET;
			ret->in4.sin_port = s6->sin6_port;
			memcpy(&ret->in4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
			return;
		}
		ret->in6 = *s6;
	} else if (sa->sa_family == AF_INET) {
		ret->in4 = *(const struct sockaddr_in *)sa;
	}
}

/* dst as the socket's family wants it: an IPv4 destination on a dual-stack
 * socket becomes v4-mapped, a v4-mapped one on an IPv4 socket plain IPv4. */
static int dest_for(const struct cfs_udp *u, const struct cfs_addr *dst, struct cfs_addr *ret,
                    socklen_t *ret_len)
{
	memset(ret, 0, sizeof(*ret));
	if (u->family == AF_INET6 && dst->sa.sa_family == AF_INET) {
		ret->in6.sin6_family = AF_INET6;
		ret->in6.sin6_port = dst->in4.sin_port;
		ret->in6.sin6_addr.s6_addr[10] = 0xff;
		ret->in6.sin6_addr.s6_addr[11] = 0xff;
		memcpy(ret->in6.sin6_addr.s6_addr + 12, &dst->in4.sin_addr, 4);
	} else if (u->family == AF_INET && dst->sa.sa_family == AF_INET6) {
		if (!IN6_IS_ADDR_V4MAPPED(&dst->in6.sin6_addr))
			return -EAFNOSUPPORT;
		cfs_udp_addr_normalize(ret, &dst->sa);
	} else if (dst->sa.sa_family == AF_INET || dst->sa.sa_family == AF_INET6) {
		*ret = *dst;
	} else {
		return -EAFNOSUPPORT;
	}
	*ret_len = ret->sa.sa_family == AF_INET6 ? sizeof(ret->in6) : sizeof(ret->in4);
	return 0;
}

/* ------------------------------------------------------------ opening */

static int set_int(int fd, int level, int name, int v)
{
	return setsockopt(fd, level, name, &v, sizeof(v)) < 0 ? -errno : 0;
}

/* Root (CAP_NET_ADMIN) may exceed net.core.rmem_max/wmem_max with the
 * FORCE variants; anyone else gets the cap, silently, as the kernel does. */
static int size_buffers(int fd, int bufsize)
{
	int r;

	if (bufsize <= 0)
		return 0;
	if (set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, bufsize) < 0 &&
	    (r = set_int(fd, SOL_SOCKET, SO_RCVBUF, bufsize)) < 0)
		return log_error_errno(r, "udp: cannot set SO_RCVBUF to %d", bufsize);
	if (set_int(fd, SOL_SOCKET, SO_SNDBUFFORCE, bufsize) < 0 &&
	    (r = set_int(fd, SOL_SOCKET, SO_SNDBUF, bufsize)) < 0)
		return log_error_errno(r, "udp: cannot set SO_SNDBUF to %d", bufsize);
	return 0;
}

/* The don't-fragment bit, without the kernel's path-MTU cache (PROBE): a
 * datagram above the device MTU is refused with EMSGSIZE, one within it
 * leaves whole with DF set, and an ICMP "fragmentation needed" from a
 * router does not shrink what later sends may use (the transport keeps
 * every datagram at 1,200 bytes; probing larger is the transport's business,
 * RFC 8899). A dual-stack socket sends IPv4 with the IPv4 option. */
static int set_dont_fragment(int fd, int family)
{
	int r;

	if ((r = set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_PROBE)) < 0)
		return log_error_errno(r, "udp: cannot set IP_MTU_DISCOVER");
	if (family != AF_INET6)
		return 0;
	if ((r = set_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_PROBE)) < 0)
		return log_error_errno(r, "udp: cannot set IPV6_MTU_DISCOVER");
	if ((r = set_int(fd, IPPROTO_IPV6, IPV6_DONTFRAG, 1)) < 0)
		return log_error_errno(r, "udp: cannot set IPV6_DONTFRAG");
	return 0;
}

/* One attempt at a family. quiet: the caller falls back to IPv4 if IPv6
 * is missing here, so that failure is not worth an error line. */
static int open_at(struct cfs_udp *u, const struct cfs_addr *a, int bufsize, bool quiet)
{
	char s[CFS_ADDR_STRLEN];
	int fd, r, v;
	socklen_t vlen = sizeof(v);

	fd = socket(a->sa.sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
	if (fd < 0) {
		r = -errno;
		if (quiet && r == -EAFNOSUPPORT)
			return r;
		return log_error_errno(r, "udp: cannot open a socket for %s", cfs_addr_str(a, s));
	}
	if (a->sa.sa_family == AF_INET6 && (r = set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 0)) < 0) {
		log_error_errno(r, "udp: cannot turn IPV6_V6ONLY off");
		goto fail;
	}
	if ((r = size_buffers(fd, bufsize)) < 0 || (r = set_dont_fragment(fd, a->sa.sa_family)) < 0)
		goto fail;
	if (bind(fd, &a->sa, cfs_addr_len(a)) < 0) {
		r = -errno;
		if (!(quiet && (r == -EADDRNOTAVAIL || r == -EAFNOSUPPORT)))
			log_error_errno(r, "udp: cannot bind to %s", cfs_addr_str(a, s));
		goto fail;
	}
	u->fd = fd;
	u->family = a->sa.sa_family;
	/* Optional features: a kernel without them (before 4.18 and 5.0) gets
	 * sendmmsg and plain datagrams, which work the same, only slower. */
	u->gso = getsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &v, &vlen) == 0;
	u->gro = set_int(fd, IPPROTO_UDP, UDP_GRO, 1) == 0;
	return 0;
fail:
	close(fd);
	return r;
}

int cfs_udp_open(struct cfs_udp *u, const char *host, uint16_t port, int bufsize)
{
	struct cfs_addr a;
	int r;

	memset(u, 0, sizeof(*u));
	u->fd = -1;
	if (host) {
		if (cfs_addr_from_ip(&a, host, port) < 0)
			return log_error_errno(-EINVAL, "udp: bind address '%s' is not an IP literal", host);
		return open_at(u, &a, bufsize, false);
	}
	if (cfs_addr_from_ip(&a, "::", port) < 0)
		return -EINVAL; /* cannot happen: "::" is a literal */
	r = open_at(u, &a, bufsize, true);
	if (r != -EAFNOSUPPORT && r != -EADDRNOTAVAIL)
		return r;
	log_info("udp: no IPv6 here (%s): listening on IPv4 only", strerror(-r));
	if (cfs_addr_from_ip(&a, "0.0.0.0", port) < 0)
		return -EINVAL;
	return open_at(u, &a, bufsize, false);
}

void cfs_udp_close(struct cfs_udp *u)
{
	if (u->fd >= 0)
		close(u->fd);
	u->fd = -1;
}

int cfs_udp_local_addr(const struct cfs_udp *u, struct cfs_addr *ret)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(u->fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	cfs_udp_addr_normalize(ret, (struct sockaddr *)&ss);
	return 0;
}

/* ------------------------------------------------------------ sending */

/* The kernel's ways of saying "not GSO, not here": EIO when the device
 * cannot checksum the segments, EINVAL for a segment size it will not
 * take, ENOPROTOOPT for a kernel without UDP_SEGMENT. */
static bool gso_refused(int r)
{
	return r == -EIO || r == -EINVAL || r == -ENOPROTOOPT;
}

/* One sendmsg of p[0, len) as datagrams of seg bytes (no control message
 * when it is a single datagram). The bytes sent, or -errno. */
static ssize_t send_one(struct cfs_udp *u, const struct cfs_addr *to, socklen_t tolen,
                        const uint8_t *p, size_t len, size_t seg)
{
	union {
		char buf[CMSG_SPACE(sizeof(uint16_t))];
		struct cmsghdr align;
	} ctrl;
	struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
	struct msghdr m = { .msg_name = (void *)&to->sa, .msg_namelen = tolen, .msg_iov = &iov,
	                    .msg_iovlen = 1 };
	size_t nseg = 1;

	if (seg && len > seg) {
		struct cmsghdr *c;
		uint16_t gso = (uint16_t)seg;

		memset(&ctrl, 0, sizeof(ctrl));
		m.msg_control = ctrl.buf;
		m.msg_controllen = sizeof(ctrl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = IPPROTO_UDP;
		c->cmsg_type = UDP_SEGMENT;
		c->cmsg_len = CMSG_LEN(sizeof(gso));
		memcpy(CMSG_DATA(c), &gso, sizeof(gso));
		nseg = (len + seg - 1) / seg;
	}
	for (;;) {
		ssize_t n = sendmsg(u->fd, &m, 0);
		if (n >= 0) {
			u->send_calls++;
			u->sends += nseg;
			return (ssize_t)len;
		}
		if (errno != EINTR)
			return -errno;
	}
}

/* p[0, len) in GSO calls of at most CFS_UDP_GSO_SEGS segments and
 * CFS_UDP_GSO_BYTES bytes. Bytes sent; -errno if none were. */
static ssize_t send_gso(struct cfs_udp *u, const struct cfs_addr *to, socklen_t tolen,
                        const uint8_t *p, size_t len, size_t seg)
{
	size_t per_call = CFS_UDP_GSO_BYTES / seg, off = 0;

	if (per_call > CFS_UDP_GSO_SEGS)
		per_call = CFS_UDP_GSO_SEGS;
	if (per_call < 1)
		per_call = 1;
	while (off < len) {
		size_t chunk = len - off < per_call * seg ? len - off : per_call * seg;
		ssize_t n = send_one(u, to, tolen, p + off, chunk, seg);
		if (n < 0)
			return off ? (ssize_t)off : n;
		off += chunk;
	}
	return (ssize_t)off;
}

/* p[0, len) as one datagram per segment, MMSG_BATCH per sendmmsg. A short
 * count means the socket buffer filled (or the next datagram fails, which
 * the caller hears on its next send). Bytes sent; -errno if none were. */
static ssize_t send_mmsg(struct cfs_udp *u, const struct cfs_addr *to, socklen_t tolen,
                         const uint8_t *p, size_t len, size_t seg)
{
	struct mmsghdr mm[MMSG_BATCH];
	struct iovec iov[MMSG_BATCH];
	size_t off = 0;

	while (off < len) {
		size_t k = 0, batch_off = off;
		int n;

		memset(mm, 0, sizeof(mm));
		while (k < MMSG_BATCH && batch_off < len) {
			size_t l = len - batch_off < seg ? len - batch_off : seg;
			iov[k] = (struct iovec){ .iov_base = (void *)(p + batch_off), .iov_len = l };
			mm[k].msg_hdr.msg_name = (void *)&to->sa;
			mm[k].msg_hdr.msg_namelen = tolen;
			mm[k].msg_hdr.msg_iov = &iov[k];
			mm[k].msg_hdr.msg_iovlen = 1;
			batch_off += l;
			k++;
		}
		do
			n = sendmmsg(u->fd, mm, (unsigned)k, 0);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return off ? (ssize_t)off : -errno;
		u->send_calls++;
		u->sends += (uint64_t)n;
		for (int i = 0; i < n; i++)
			off += iov[i].iov_len;
		if ((size_t)n < k)
			break;
	}
	return (ssize_t)off;
}

ssize_t cfs_udp_send(struct cfs_udp *u, const struct cfs_addr *dst, const void *p, size_t len,
                     size_t seg)
{
	struct cfs_addr to;
	socklen_t tolen;
	ssize_t n;
	int r;

	if (u->fd < 0)
		return -EBADF;
	if ((r = dest_for(u, dst, &to, &tolen)) < 0)
		return r;
	if (!seg || len <= seg)
		return send_one(u, &to, tolen, p, len, 0);
	if (u->gso) {
		n = send_gso(u, &to, tolen, p, len, seg);
		if (n >= 0 || !gso_refused((int)n))
			return n;
		/* Refused at its first call (a later one would have returned
		 * what went before). EINVAL is also the answer to a segment
		 * larger than the device MTU allows: that is the caller's size,
		 * not GSO, if the same datagrams alone are too large as well. */
		ssize_t m = send_mmsg(u, &to, tolen, p, len, seg);
		if (m == -EMSGSIZE)
			return m;
		u->gso = false;
		log_warn("udp: the kernel refused GSO (%s): sending one datagram at a time",
		         strerror((int)-n));
		return m;
	}
	return send_mmsg(u, &to, tolen, p, len, seg);
}

/* ------------------------------------------------------------ receiving */

/*
 * The receive scratch: CFS_UDP_RECV_BATCH buffers of 64 KiB (a GRO buffer
 * holds up to 64 KiB of datagrams) with their headers. One per thread,
 * shared by every socket of the thread, since a drain hands each datagram
 * to its callback before reading the next batch. Allocated at a thread's
 * first drain (1 MiB of static TLS in every thread, the libuv pool's and
 * FUSE's included, would be a waste) and freed when the thread exits.
 */
struct scratch {
	struct mmsghdr mm[CFS_UDP_RECV_BATCH];
	struct iovec iov[CFS_UDP_RECV_BATCH];
	struct sockaddr_storage names[CFS_UDP_RECV_BATCH];
	union {
		char buf[CMSG_SPACE(sizeof(int)) + 64];
		struct cmsghdr align;
	} ctrl[CFS_UDP_RECV_BATCH];
	uint8_t buf[CFS_UDP_RECV_BATCH][CFS_UDP_RECV_BUF];
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static __thread struct scratch *scratch;
static __thread bool draining;

static void scratch_free(void *p)
{
	free(p);
}

static void scratch_key_init(void)
{
	if (pthread_key_create(&scratch_key, scratch_free) != 0)
		abort(); /* only with PTHREAD_KEYS_MAX keys taken: a bug */
}

static struct scratch *scratch_get(void)
{
	if (!scratch) {
		pthread_once(&scratch_once, scratch_key_init);
		scratch = xmalloc(sizeof(*scratch));
		pthread_setspecific(scratch_key, scratch);
	}
	return scratch;
}

/* The segment size of a GRO-coalesced buffer, 0 when it holds one datagram. */
static size_t gro_segment_size(struct msghdr *m)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level == IPPROTO_UDP && c->cmsg_type == UDP_GRO &&
		    c->cmsg_len >= CMSG_LEN(sizeof(int))) {
			int v;
			memcpy(&v, CMSG_DATA(c), sizeof(v));
			return v > 0 ? (size_t)v : 0;
		}
	}
	return 0;
}

/* Hand buffer i of the last batch to cb, split into its datagrams. The
 * number delivered. */
static int deliver(struct cfs_udp *u, struct scratch *s, int i, cfs_udp_dgram_cb cb, void *arg)
{
	struct msghdr *m = &s->mm[i].msg_hdr;
	size_t len = s->mm[i].msg_len, seg;
	struct cfs_addr from;
	int n = 0;

	cfs_udp_addr_normalize(&from, (const struct sockaddr *)&s->names[i]);
	if (m->msg_flags & MSG_TRUNC) {
		u->recvs++;
		cb(arg, &from, s->buf[i], 0, true);
		return 1;
	}
	seg = gro_segment_size(m);
	if (!seg || len <= seg) {
		u->recvs++;
		cb(arg, &from, s->buf[i], len, false);
		return 1;
	}
	u->gro_coalesced++;
	for (size_t off = 0; off < len && u->fd >= 0; off += seg) {
		u->recvs++;
		n++;
		cb(arg, &from, s->buf[i] + off, len - off < seg ? len - off : seg, false);
	}
	return n;
}

int cfs_udp_drain(struct cfs_udp *u, unsigned max_calls, cfs_udp_dgram_cb cb, void *arg)
{
	struct scratch *s;
	int delivered = 0;

	if (draining)
		return -EBUSY;
	if (u->fd < 0)
		return -EBADF;
	s = scratch_get();
	draining = true;
	for (unsigned call = 0; call < (max_calls ? max_calls : 1) && u->fd >= 0; call++) {
		int n;

		for (int i = 0; i < CFS_UDP_RECV_BATCH; i++) {
			s->iov[i] = (struct iovec){ .iov_base = s->buf[i], .iov_len = CFS_UDP_RECV_BUF };
			s->mm[i].msg_hdr = (struct msghdr){
				.msg_name = &s->names[i], .msg_namelen = sizeof(s->names[i]),
				.msg_iov = &s->iov[i], .msg_iovlen = 1,
				.msg_control = s->ctrl[i].buf, .msg_controllen = sizeof(s->ctrl[i].buf),
			};
			s->mm[i].msg_len = 0;
		}
		do
			n = recvmmsg(u->fd, s->mm, CFS_UDP_RECV_BATCH, MSG_DONTWAIT, NULL);
		while (n < 0 && errno == EINTR);
		u->recv_calls++;
		if (n < 0) {
			int r = -errno;
			draining = false;
			if (r == -EAGAIN || delivered)
				return delivered;
			return r;
		}
		for (int i = 0; i < n && u->fd >= 0; i++)
			delivered += deliver(u, s, i, cb, arg);
		/* A short batch emptied the socket: save the EAGAIN call. */
		if (n < CFS_UDP_RECV_BATCH)
			break;
	}
	draining = false;
	return delivered;
}
