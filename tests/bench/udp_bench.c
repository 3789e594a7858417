/*
 * udp-bench: what common/udp.c costs per 1,200-byte datagram on loopback.
 *
 * One thread sends a burst (54 segments of 1,200 bytes, 64,800 bytes: about
 * one block) from one socket and reads it back on another, for a few
 * seconds per mode, so the figure is the CPU cost of both ends together
 * (the cost that matters on a loaded machine; loopback has no wire). Modes:
 *   gso+gro   cfs_udp_send with UDP_SEGMENT, receiver with UDP_GRO
 *   gso       the same, the receiver without GRO (the kernel splits)
 *   mmsg      sendmmsg and recvmmsg, no GSO/GRO
 *   plain     one sendto and one recvfrom per datagram (libuv's uv_udp
 *             today: uv_udp_try_send, and recvmsg per datagram)
 *   whole     the burst as one 64,800-byte datagram (today's transport:
 *             one block, one datagram, fragmented on a real link)
 * Usage: udp-bench [seconds per mode, default 2]
 */
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/udp.h"

#define SEG   1200
#define BURST (54 * SEG)

struct counter {
	uint64_t dgrams, bytes;
};

static void count(void *arg, const struct cfs_addr *from, const uint8_t *p, size_t len, bool trunc)
{
	struct counter *c = arg;
	c->dgrams++;
	c->bytes += len;
}

enum mode { GSO_GRO, GSO, MMSG, PLAIN, WHOLE };
static const char *const names[] = { "gso+gro", "gso", "mmsg", "plain", "whole" };

/* Wait for the burst to come back (a lost datagram ends the wait at
 * 100 ms: loopback does not lose them while the receive buffer has room). */
static void receive_burst(struct cfs_udp *b, enum mode m, struct counter *c, uint64_t want_bytes)
{
	static uint8_t buf[65536];
	uint64_t start = c->bytes;

	while (c->bytes - start < want_bytes) {
		struct pollfd pfd = { .fd = b->fd, .events = POLLIN };
		if (poll(&pfd, 1, 100) <= 0)
			return;
		if (m != PLAIN && m != WHOLE) {
			cfs_udp_drain(b, 64, count, c);
			continue;
		}
		for (;;) {
			ssize_t n = recvfrom(b->fd, buf, sizeof(buf), MSG_DONTWAIT, NULL, NULL);
			if (n < 0)
				break;
			b->recv_calls++;
			count(c, NULL, buf, (size_t)n, false);
		}
	}
}

static void send_burst(struct cfs_udp *a, const struct cfs_addr *dst, enum mode m, const uint8_t *p)
{
	if (m == PLAIN) {
		for (size_t off = 0; off < BURST; off += SEG) {
			if (sendto(a->fd, p + off, SEG, 0, &dst->sa, cfs_addr_len(dst)) == SEG)
				a->send_calls++;
		}
		return;
	}
	if (cfs_udp_send(a, dst, p, BURST, m == WHOLE ? 0 : SEG) != BURST)
		fprintf(stderr, "udp-bench: short send\n");
}

static void run(enum mode m, double seconds)
{
	struct cfs_udp a, b;
	struct cfs_addr dst;
	struct counter c = { 0 };
	static uint8_t p[BURST];
	uint64_t t0, t1, bursts = 0;
	int off = 0;

	if (cfs_udp_open(&a, "127.0.0.1", 0, 4 << 20) < 0 || cfs_udp_open(&b, "127.0.0.1", 0, 4 << 20) < 0)
		exit(1);
	if (m == GSO || m == MMSG || m == PLAIN)
		setsockopt(b.fd, IPPROTO_UDP, UDP_GRO, &off, sizeof(off));
	if (m == MMSG)
		a.gso = false;
	if (cfs_udp_local_addr(&b, &dst) < 0)
		exit(1);
	memset(p, 0x5a, sizeof(p));
	t0 = cfs_now_us();
	do {
		send_burst(&a, &dst, m, p);
		receive_burst(&b, m, &c, BURST);
		bursts++;
		t1 = cfs_now_us();
	} while (t1 - t0 < (uint64_t)(seconds * 1e6));
	double s = (double)(t1 - t0) / 1e6;
	uint64_t sent = bursts * BURST;
	printf("%-8s %10.0f %9.1f %9.2f %9.2f %9.3f\n", names[m],
	       m == WHOLE ? (double)c.dgrams * BURST / SEG / s : (double)c.dgrams / s,
	       (double)c.bytes / s / 1e6, (double)a.send_calls / bursts, (double)b.recv_calls / bursts,
	       sent ? 1.0 - (double)c.bytes / (double)sent : 0.0);
	cfs_udp_close(&a);
	cfs_udp_close(&b);
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 2.0;
	struct cfs_udp probe;

	cfs_log_init("udp-bench", CFS_LOG_WARN);
	if (seconds <= 0)
		seconds = 2.0;
	if (cfs_udp_open(&probe, "127.0.0.1", 0, 0) < 0)
		return 1;
	printf("loopback, %d-byte datagrams in bursts of %d bytes, %.1f s per mode; kernel GSO %s, GRO %s\n",
	       SEG, BURST, seconds, probe.gso ? "yes" : "no", probe.gro ? "yes" : "no");
	cfs_udp_close(&probe);
	printf("%-8s %10s %9s %9s %9s %9s\n", "mode", "dgram/s", "MB/s", "sends/b", "recvs/b", "lost");
	for (enum mode m = GSO_GRO; m <= WHOLE; m++)
		run(m, seconds);
	printf("(whole: dgram/s counts 1,200-byte equivalents; sends/b and recvs/b are syscalls per burst)\n");
	return 0;
}
