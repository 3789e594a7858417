/*
 * common/udp.c on real sockets: loopback over IPv4 and IPv6, GSO and GRO
 * (and the sendmmsg path without them), the don't-fragment bit, and a full
 * send buffer. Two tests make their own network namespace (Criterion runs
 * every test in its own process, so nothing leaks into the others): one
 * with a 1,500-byte loopback MTU, so that a datagram above it would be
 * fragmented if DF were off, and one with a slow tbf qdisc on loopback,
 * the one way to make a UDP send buffer fill (loopback frees a datagram's
 * buffer space as it sends it; a qdisc holds it).
 */
#define _GNU_SOURCE /* unshare */
#include <criterion/criterion.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/udp.h"

#define SEG 1200

/* ------------------------------------------------------------ helpers */

struct got {
	size_t n;
	size_t len[256];
	uint8_t *data[256];
	bool trunc;
	struct cfs_addr from;
	int reentry; /* what a cfs_udp_drain from inside the callback returned */
	struct cfs_udp *self;
};

static void collect(void *arg, const struct cfs_addr *from, const uint8_t *p, size_t len,
                    bool trunc)
{
	struct got *g = arg;

	if (g->self)
		g->reentry = cfs_udp_drain(g->self, 1, collect, arg);
	g->trunc |= trunc;
	g->from = *from;
	if (g->n < CFS_ARRAY_SIZE(g->len)) {
		g->len[g->n] = len;
		g->data[g->n] = xmemdup(p, len ? len : 1);
	}
	g->n++;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->n && i < CFS_ARRAY_SIZE(g->data); i++)
		free(g->data[i]);
	memset(g, 0, sizeof(*g));
}

/* Read from u until want datagrams came or 2 s passed. */
static void recv_until(struct cfs_udp *u, struct got *g, size_t want)
{
	uint64_t end = cfs_now_us() + 2000000;

	while (g->n < want && cfs_now_us() < end) {
		struct pollfd pfd = { .fd = u->fd, .events = POLLIN };
		if (poll(&pfd, 1, 100) > 0)
			cr_assert_geq(cfs_udp_drain(u, 8, collect, g), 0);
	}
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + i / 251);
}

static void open_pair(struct cfs_udp *a, struct cfs_udp *b, const char *host, int bufsize)
{
	cr_assert_eq(cfs_udp_open(a, host, 0, bufsize), 0);
	cr_assert_eq(cfs_udp_open(b, host, 0, bufsize), 0);
}

/* Send len bytes in seg-byte datagrams from a to b and check that b gets
 * exactly those datagrams, in order, whole. */
static void check_segments(struct cfs_udp *a, struct cfs_udp *b, size_t len, size_t seg)
{
	struct cfs_addr dst, src;
	struct got g = { 0 };
	size_t want = seg ? (len + seg - 1) / seg : 1;
	uint8_t *p = xmalloc(len);

	fill(p, len, (uint32_t)len);
	cr_assert_eq(cfs_udp_local_addr(b, &dst), 0);
	cr_assert_eq(cfs_udp_local_addr(a, &src), 0);
	cr_assert_eq(cfs_udp_send(a, &dst, p, len, seg), (ssize_t)len);
	recv_until(b, &g, want);
	cr_assert_eq(g.n, want, "%zu datagrams arrived, %zu sent", g.n, want);
	cr_assert(cfs_addr_eq(&g.from, &src));
	for (size_t i = 0, off = 0; i < want; i++) {
		size_t l = len - off < seg ? len - off : seg;
		cr_assert_eq(g.len[i], l, "datagram %zu: %zu bytes, want %zu", i, g.len[i], l);
		cr_assert_arr_eq(g.data[i], p + off, l, "datagram %zu differs", i);
		off += l;
	}
	got_free(&g);
	free(p);
}

/* ------------------------------------------------------------ basics */

static void one_each_way(const char *host, int family)
{
	struct cfs_udp a, b;
	struct cfs_addr aa, ba;
	struct got g = { 0 };

	open_pair(&a, &b, host, 1 << 20);
	cr_assert_eq(a.family, family);
	cr_assert_eq(cfs_udp_local_addr(&a, &aa), 0);
	cr_assert_eq(cfs_udp_local_addr(&b, &ba), 0);
	cr_assert_eq(aa.sa.sa_family, family);
	cr_assert_eq(cfs_udp_send(&a, &ba, "ping", 4, 0), 4);
	recv_until(&b, &g, 1);
	cr_assert_eq(g.n, 1);
	cr_assert_eq(g.len[0], 4);
	cr_assert_arr_eq(g.data[0], "ping", 4);
	cr_assert(cfs_addr_eq(&g.from, &aa));
	cr_assert_eq(cfs_udp_send(&b, &g.from, "pong!", 5, SEG), 5);
	got_free(&g);
	recv_until(&a, &g, 1);
	cr_assert_eq(g.n, 1);
	cr_assert_arr_eq(g.data[0], "pong!", 5);
	cr_assert(cfs_addr_eq(&g.from, &ba));
	cr_assert_eq(a.sends, 1);
	cr_assert_eq(b.recvs, 1);
	got_free(&g);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

Test(udp, ipv4_one_datagram_each_way)
{
	one_each_way("127.0.0.1", AF_INET);
}

Test(udp, ipv6_one_datagram_each_way)
{
	one_each_way("::1", AF_INET6);
}

/* The default socket ("::", dual stack) talks to an IPv4-only peer, and
 * sees it as AF_INET, not as ::ffff:127.0.0.1. */
Test(udp, dual_stack_normalises_ipv4_peers)
{
	struct cfs_udp d, v4;
	struct cfs_addr da, v4a, local;
	struct got g = { 0 };

	cr_assert_eq(cfs_udp_open(&d, NULL, 0, 0), 0);
	cr_assert_eq(d.family, AF_INET6);
	cr_assert_eq(cfs_udp_open(&v4, "127.0.0.1", 0, 0), 0);
	cr_assert_eq(cfs_udp_local_addr(&v4, &v4a), 0);
	cr_assert_eq(cfs_udp_local_addr(&d, &local), 0);
	cr_assert_eq(cfs_addr_from_ip(&da, "127.0.0.1", cfs_addr_port(&local)), 0);
	cr_assert_eq(cfs_udp_send(&v4, &da, "v4", 2, 0), 2);
	recv_until(&d, &g, 1);
	cr_assert_eq(g.n, 1);
	cr_assert_eq(g.from.sa.sa_family, AF_INET, "a v4 peer must not show as v4-mapped");
	cr_assert(cfs_addr_eq(&g.from, &v4a));
	/* and an AF_INET destination works on the IPv6 socket */
	cr_assert_eq(cfs_udp_send(&d, &g.from, "back", 4, 0), 4);
	got_free(&g);
	recv_until(&v4, &g, 1);
	cr_assert_eq(g.n, 1);
	cr_assert_arr_eq(g.data[0], "back", 4);
	got_free(&g);
	/* an IPv6 destination cannot be reached from an IPv4 socket */
	struct cfs_addr six;
	cr_assert_eq(cfs_addr_from_ip(&six, "::1", 9), 0);
	cr_assert_eq(cfs_udp_send(&v4, &six, "x", 1, 0), -EAFNOSUPPORT);
	cfs_udp_close(&d);
	cfs_udp_close(&v4);
}

Test(udp, bad_host_is_an_error)
{
	struct cfs_udp u;

	cr_assert_eq(cfs_udp_open(&u, "localhost", 0, 0), -EINVAL);
	cr_assert_eq(u.fd, -1);
	cfs_udp_close(&u); /* harmless */
}

/* ------------------------------------------------------------ segments */

Test(udp, gso_twenty_segments_arrive_as_twenty_datagrams)
{
	struct cfs_udp a, b;

	open_pair(&a, &b, "127.0.0.1", 4 << 20);
	check_segments(&a, &b, 20 * SEG, SEG);
	cr_log_info("gso %d gro %d: 1 send -> %lu calls; received in %lu calls, %lu buffers coalesced",
	            a.gso, b.gro, (unsigned long)a.send_calls, (unsigned long)b.recv_calls,
	            (unsigned long)b.gro_coalesced);
	cr_assert_eq(a.sends, 20);
	if (a.gso)
		cr_assert_eq(a.send_calls, 1, "20 segments fit one GSO call");
	cr_assert_eq(b.recvs, 20);
	/* Loopback hands a GSO send to a GRO socket whole: one buffer. */
	if (a.gso && b.gro)
		cr_assert_geq(b.gro_coalesced, 1);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

Test(udp, last_segment_may_be_short)
{
	struct cfs_udp a, b;

	open_pair(&a, &b, "::1", 4 << 20);
	check_segments(&a, &b, 4 * SEG + 200, SEG);
	check_segments(&a, &b, SEG + 1, SEG);
	check_segments(&a, &b, SEG, SEG); /* exactly one segment: one datagram */
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

Test(udp, more_than_64_segments_take_several_calls)
{
	struct cfs_udp a, b;

	open_pair(&a, &b, "127.0.0.1", 8 << 20);
	check_segments(&a, &b, 150 * SEG + 17, SEG);
	cr_assert_eq(a.sends, 151);
	if (a.gso) /* 54 x 1200 fit under 65,000 bytes: 54 + 54 + 43 */
		cr_assert_eq(a.send_calls, 3);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

Test(udp, without_gso_sendmmsg_gives_the_same_datagrams)
{
	struct cfs_udp a, b;

	open_pair(&a, &b, "127.0.0.1", 8 << 20);
	a.gso = false;
	check_segments(&a, &b, 20 * SEG, SEG);
	cr_assert_eq(a.send_calls, 1, "20 datagrams fit one sendmmsg");
	check_segments(&a, &b, 150 * SEG + 17, SEG);
	cr_assert_eq(a.send_calls, 1 + 3, "151 datagrams: 64 + 64 + 23");
	cr_assert_eq(a.sends, 20 + 151);
	cr_assert_eq(b.gro_coalesced, 0, "separate datagrams are not coalesced on loopback");
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

Test(udp, without_gro_gso_sends_still_arrive_one_by_one)
{
	struct cfs_udp a, b;
	int off = 0;

	open_pair(&a, &b, "::1", 8 << 20);
	cr_assert_eq(setsockopt(b.fd, IPPROTO_UDP, UDP_GRO, &off, sizeof(off)), 0);
	b.gro = false;
	check_segments(&a, &b, 70 * SEG + 5, SEG);
	cr_assert_eq(b.gro_coalesced, 0);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

/* SO_NO_CHECK makes the kernel refuse GSO (EINVAL: it will not send GSO
 * segments without checksums) while plain datagrams still go: the send
 * falls back to sendmmsg, delivers the same datagrams, and GSO stays off. */
Test(udp, refused_gso_falls_back_to_sendmmsg)
{
	struct cfs_udp a, b;
	int one = 1;

	open_pair(&a, &b, "127.0.0.1", 4 << 20);
	if (!a.gso)
		cr_skip_test("this kernel has no UDP GSO: nothing to refuse");
	cr_assert_eq(setsockopt(a.fd, SOL_SOCKET, SO_NO_CHECK, &one, sizeof(one)), 0);
	check_segments(&a, &b, 20 * SEG + 3, SEG);
	cr_assert_not(a.gso, "GSO should be off after the kernel refused it");
	cr_assert_eq(a.sends, 21);
	cr_assert_eq(a.send_calls, 1, "the failed GSO call is not counted; one sendmmsg is");
	check_segments(&a, &b, 2 * SEG, SEG);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

Test(udp, drain_from_inside_a_callback_is_refused)
{
	struct cfs_udp a, b;
	struct cfs_addr dst;
	struct got g = { 0 };

	open_pair(&a, &b, "127.0.0.1", 0);
	cr_assert_eq(cfs_udp_local_addr(&b, &dst), 0);
	cr_assert_eq(cfs_udp_send(&a, &dst, "x", 1, 0), 1);
	g.self = &b;
	recv_until(&b, &g, 1);
	cr_assert_eq(g.n, 1);
	cr_assert_eq(g.reentry, -EBUSY);
	got_free(&g);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

/* ------------------------------------------------------------ DF */

static int getopt_int(int fd, int level, int name)
{
	int v = -1;
	socklen_t l = sizeof(v);
	cr_assert_eq(getsockopt(fd, level, name, &v, &l), 0);
	return v;
}

/* Ip: FragCreates from /proc/net/snmp (this process's namespace). */
static long frag_creates(void)
{
	char head[4096], vals[4096];
	FILE *f = fopen("/proc/net/snmp", "r");
	long r = -1;

	cr_assert(f);
	while (fgets(head, sizeof(head), f) && fgets(vals, sizeof(vals), f)) {
		char *hs, *vs, *h, *v;
		if (strncmp(head, "Ip:", 3) != 0)
			continue;
		h = strtok_r(head, " \n", &hs);
		v = strtok_r(vals, " \n", &vs);
		while (h && v) {
			if (strcmp(h, "FragCreates") == 0)
				r = atol(v);
			h = strtok_r(NULL, " \n", &hs);
			v = strtok_r(NULL, " \n", &vs);
		}
		break;
	}
	fclose(f);
	cr_assert_geq(r, 0, "no Ip: FragCreates in /proc/net/snmp");
	return r;
}

Test(udp, dont_fragment_is_set_for_both_families)
{
	struct cfs_udp d, v4;

	cr_assert_eq(cfs_udp_open(&d, NULL, 0, 0), 0);
	cr_assert_eq(cfs_udp_open(&v4, "127.0.0.1", 0, 0), 0);
	cr_assert_eq(getopt_int(d.fd, IPPROTO_IP, IP_MTU_DISCOVER), IP_PMTUDISC_PROBE);
	cr_assert_eq(getopt_int(d.fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER), IPV6_PMTUDISC_PROBE);
	cr_assert_eq(getopt_int(d.fd, IPPROTO_IPV6, IPV6_DONTFRAG), 1);
	cr_assert_eq(getopt_int(v4.fd, IPPROTO_IP, IP_MTU_DISCOVER), IP_PMTUDISC_PROBE);
	cfs_udp_close(&d);
	cfs_udp_close(&v4);
}

/* A namespace of our own with loopback up at the given MTU; false (and the
 * test is skipped, saying why) where namespaces are not allowed. */
static bool private_loopback(int mtu)
{
	struct ifreq ifr = { 0 };
	int s;

	if (unshare(CLONE_NEWNET) < 0) {
		cr_skip_test("cannot make a network namespace (%s): needs CAP_SYS_ADMIN",
		             strerror(errno));
		return false;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	strcpy(ifr.ifr_name, "lo");
	ifr.ifr_mtu = mtu;
	cr_assert_eq(ioctl(s, SIOCSIFMTU, &ifr), 0, "SIOCSIFMTU: %s", strerror(errno));
	cr_assert_eq(ioctl(s, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	cr_assert_eq(ioctl(s, SIOCSIFFLAGS, &ifr), 0, "SIOCSIFFLAGS: %s", strerror(errno));
	close(s);
	return true;
}

/* With an Ethernet MTU a datagram above it is refused, not fragmented; the
 * same send from a socket without DF does make fragments, so the counter
 * is the right one to watch. 1,200-byte segments pass whole, 60,000 bytes
 * of them too. The namespace's counter moves for this process alone. */
Test(udp, over_mtu_is_refused_not_fragmented)
{
	struct cfs_udp a, b, a6, b6;
	struct cfs_addr dst, dst6;
	uint8_t p[3000];
	struct got g = { 0 };
	long before;
	int plain;

	if (!private_loopback(1500))
		return;
	open_pair(&a, &b, "127.0.0.1", 1 << 20);
	open_pair(&a6, &b6, "::1", 1 << 20);
	cr_assert_eq(cfs_udp_local_addr(&b, &dst), 0);
	cr_assert_eq(cfs_udp_local_addr(&b6, &dst6), 0);
	fill(p, sizeof(p), 2);
	before = frag_creates();
	cr_assert_eq(cfs_udp_send(&a, &dst, p, sizeof(p), 0), -EMSGSIZE);
	cr_assert_eq(cfs_udp_send(&a6, &dst6, p, sizeof(p), 0), -EMSGSIZE);
	cr_assert_eq(cfs_udp_send(&a, &dst, p, 1472, 0), 1472); /* 1500 - 20 - 8 */
	cr_assert_eq(cfs_udp_send(&a6, &dst6, p, 1452, 0), 1452); /* 1500 - 40 - 8 */
	cr_assert_eq(cfs_udp_send(&a, &dst, p, 1473, 0), -EMSGSIZE);
	cr_assert_eq(cfs_udp_send(&a, &dst, p, sizeof(p), SEG), (ssize_t)sizeof(p));
	/* A segment too large for the MTU is the caller's error, not a GSO
	 * refusal: GSO stays on. */
	cr_assert(a.gso);
	cr_assert_eq(cfs_udp_send(&a, &dst, p, sizeof(p), 1473), -EMSGSIZE);
	cr_assert(a.gso, "an oversized segment turned GSO off");
	recv_until(&b, &g, 4);
	cr_assert_eq(g.n, 4);
	cr_assert_eq(g.len[0], 1472);
	cr_assert_eq(g.len[3], 600);
	got_free(&g);
	recv_until(&b6, &g, 1);
	cr_assert_eq(g.n, 1);
	cr_assert_eq(g.len[0], 1452);
	got_free(&g);
	/* 60,000 bytes as 1,200-byte datagrams, by GSO and by sendmmsg. */
	uint8_t *big = xmalloc(60000);
	fill(big, 60000, 4);
	cr_assert_eq(cfs_udp_send(&a6, &dst6, big, 60000, SEG), 60000);
	recv_until(&b6, &g, 50);
	cr_assert_eq(g.n, 50);
	got_free(&g);
	a.gso = false;
	cr_assert_eq(cfs_udp_send(&a, &dst, big, 60000, SEG), 60000);
	recv_until(&b, &g, 50);
	cr_assert_eq(g.n, 50);
	got_free(&g);
	free(big);
	cr_assert_eq(frag_creates(), before, "the kernel fragmented a datagram");

	/* Control: without DF the kernel fragments, and the counter moves. */
	plain = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(plain, 0);
	int dont = IP_PMTUDISC_DONT;
	cr_assert_eq(setsockopt(plain, IPPROTO_IP, IP_MTU_DISCOVER, &dont, sizeof(dont)), 0);
	cr_assert_eq(sendto(plain, p, sizeof(p), 0, &dst.sa, sizeof(dst.in4)), (ssize_t)sizeof(p));
	cr_assert_gt(frag_creates(), before, "FragCreates did not count a fragmented send");
	close(plain);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
	cfs_udp_close(&a6);
	cfs_udp_close(&b6);
}

/* ------------------------------------------------------------ full buffer */

/* Loopback behind a 8 kbit/s tbf that queues up to 1 MB: the queue keeps
 * what is sent charged to the sender's buffer, which fills. */
Test(udp, full_send_buffer_gives_eagain_and_partial_counts)
{
	struct cfs_udp a, b;
	struct cfs_addr dst;
	uint8_t p[64 * SEG];
	ssize_t n = 0;
	int sent = 0, st;

	if (!private_loopback(1500))
		return;
	st = system("tc qdisc add dev lo root tbf rate 8kbit burst 1600 limit 1000000");
	cr_assert_eq(st, 0, "tc failed (%d): iproute2 is in TEST_PKGS", st);
	open_pair(&a, &b, "127.0.0.1", 16384);
	cr_assert_eq(cfs_udp_local_addr(&b, &dst), 0);
	fill(p, sizeof(p), 3);

	/* sendmmsg stops part way when the buffer fills: whole segments. */
	a.gso = false;
	n = cfs_udp_send(&a, &dst, p, sizeof(p), SEG);
	cr_assert_gt(n, 0);
	cr_assert_lt(n, (ssize_t)sizeof(p), "64 datagrams fitted a 16 KiB buffer");
	cr_assert_eq(n % SEG, 0, "%zd is not whole segments", n);
	cr_assert_eq(cfs_udp_send(&a, &dst, p, sizeof(p), SEG), -EAGAIN);
	cr_assert_eq(cfs_udp_send(&a, &dst, p, 10, 0), -EAGAIN);

	/* The GSO path on a fresh socket: sends succeed until the buffer is
	 * full, then -EAGAIN, never a partial segment. */
	struct cfs_udp c;
	cr_assert_eq(cfs_udp_open(&c, "127.0.0.1", 0, 16384), 0);
	for (sent = 0; sent < 100; sent++) {
		n = cfs_udp_send(&c, &dst, p, 8 * SEG, SEG);
		if (n < 0)
			break;
		cr_assert_eq(n, 8 * SEG);
	}
	cr_assert_eq(n, -EAGAIN, "after %d sends: %zd", sent, n);
	cr_assert_lt(sent, 100);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
	cfs_udp_close(&c);
}
