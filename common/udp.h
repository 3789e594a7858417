/*
 * common/udp.h — the UDP socket layer under the transport.
 *
 * Internal to common/ (common/transport.c drives it from its own uv_poll_t;
 * other folders include common/cfs.h only). libuv 1.44's uv_udp_t can
 * neither send with UDP GSO nor report the segment size of a GRO-coalesced
 * receive, and a block now leaves as ~1,200-byte pieces, so this layer
 * gives the transport what the kernel offers for many small datagrams:
 *
 *   - one sendmsg with UDP_SEGMENT (GSO) carries up to 64 datagrams, or one
 *     sendmmsg up to 64 where the kernel or device refuses GSO;
 *   - one recvmmsg reads up to 16 buffers, and with UDP_GRO each buffer may
 *     hold many datagrams, split here again so the caller sees datagrams
 *     exactly as their sender sent them;
 *   - the don't-fragment bit is set for IPv4 and IPv6 (PMTUDISC_PROBE), so
 *     the kernel never fragments: a datagram too large for the device is
 *     refused with -EMSGSIZE rather than sent as fragments that a lossy or
 *     filtering path drops (1 - (1 - p)^fragments);
 *   - one dual-stack socket ("::", v6only off) serves IPv4 and IPv6 peers,
 *     and every address handed to the caller is normalised (v4-mapped IPv6
 *     shown as AF_INET), so one peer has one address.
 *
 * Nothing here allocates per datagram, and nothing here runs a loop: the
 * socket is nonblocking, and the caller polls fd.
 */
#ifndef CFS_COMMON_UDP_H
#define CFS_COMMON_UDP_H

#include "common/cfs.h"

#include <sys/types.h>

/* Datagrams per recvmmsg, and the size of each receive buffer. */
#define CFS_UDP_RECV_BATCH 16
#define CFS_UDP_RECV_BUF   65536
/* Bounds of one GSO sendmsg: the kernel's UDP_MAX_SEGMENTS and a total
 * below the 65,507-byte IPv4 UDP payload limit. */
#define CFS_UDP_GSO_SEGS   64
#define CFS_UDP_GSO_BYTES  65000

/* A socket and what the kernel was found to offer. A plain struct: the
 * caller embeds it, cfs_udp_open fills it, cfs_udp_close closes fd. The
 * counters only grow. */
struct cfs_udp {
	int fd;                 /* -1 when closed */
	int family;             /* AF_INET6 (dual stack, v6only=0) or AF_INET */
	bool gso, gro;          /* UDP_SEGMENT, UDP_GRO usable (gso turns off if the kernel refuses it) */
	uint64_t sends;         /* datagrams handed to the kernel */
	uint64_t send_calls;    /* sendmsg/sendmmsg calls that sent something */
	uint64_t recvs;         /* datagrams delivered to callbacks (after GRO split) */
	uint64_t recv_calls;    /* recvmmsg calls */
	uint64_t gro_coalesced; /* receive buffers that held more than one datagram */
};

/*
 * Open a nonblocking UDP socket bound to host (an IP literal; NULL = "::"
 * dual stack, falling back to 0.0.0.0 when IPv6 is unavailable) and port
 * (0 = any). SO_RCVBUF and SO_SNDBUF are set to bufsize (SO_*BUFFORCE
 * first, which root may use to exceed rmem_max/wmem_max; 0 leaves the
 * kernel's default); the don't-fragment bit is on for both families
 * (IP_PMTUDISC_PROBE; IPV6_PMTUDISC_PROBE and IPV6_DONTFRAG); UDP_GRO is on
 * where the kernel has it. 0, or -errno with a message logged (u->fd = -1).
 */
int cfs_udp_open(struct cfs_udp *u, const char *host, uint16_t port, int bufsize) CFS_WUR;
/* Close the socket (a closed or never-opened u with fd -1 is fine). */
void cfs_udp_close(struct cfs_udp *u);
/* The bound address, normalised (v4-mapped shown as IPv4). 0 or -errno. */
int cfs_udp_local_addr(const struct cfs_udp *u, struct cfs_addr *ret);

/*
 * Send len bytes to dst as datagrams of seg bytes each, the last possibly
 * shorter; seg == 0 or len <= seg sends one datagram. With GSO one sendmsg
 * carries up to CFS_UDP_GSO_SEGS segments and CFS_UDP_GSO_BYTES bytes
 * (larger sends take several); if the kernel refuses GSO (EIO, EINVAL,
 * ENOPROTOOPT), u->gso turns off for good and the rest goes by sendmmsg.
 * Returns the bytes handed to the kernel, whole segments only: less than
 * len when the socket buffer filled part way (the caller sends the rest
 * later). -EAGAIN when nothing could be sent; -EMSGSIZE for a datagram
 * above the device MTU (it is never fragmented); -EAFNOSUPPORT for an IPv6
 * destination on an IPv4 socket; other -errno from the kernel.
 */
ssize_t cfs_udp_send(struct cfs_udp *u, const struct cfs_addr *dst, const void *p, size_t len,
                     size_t seg);

/* One datagram: from and p are valid only during the call. A datagram
 * larger than CFS_UDP_RECV_BUF (none is, over UDP) comes with len 0 and
 * trunc true. */
typedef void (*cfs_udp_dgram_cb)(void *arg, const struct cfs_addr *from, const uint8_t *p,
                                 size_t len, bool trunc);
/*
 * Read until the socket is empty or max_calls recvmmsg calls (at least 1)
 * were made, and call cb for every datagram, in arrival order; a
 * GRO-coalesced buffer is split by its segment size first. The buffers are
 * thread-local scratch shared by every socket of the thread, so cb must
 * not call cfs_udp_drain itself (it gets -EBUSY); cb may send, and may
 * close u (the drain then stops). Returns the datagrams delivered, or
 * -errno if the first read failed with anything but EAGAIN.
 */
int cfs_udp_drain(struct cfs_udp *u, unsigned max_calls, cfs_udp_dgram_cb cb, void *arg);

/* The one place a kernel socket address becomes a cfs_addr: AF_INET and
 * AF_INET6 copied, v4-mapped IPv6 turned into AF_INET. */
void cfs_udp_addr_normalize(struct cfs_addr *ret, const struct sockaddr *sa);

#endif
