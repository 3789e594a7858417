/*
 * cfs-delayline: a wide-area link in user space. It takes the packets an
 * `iptables -j NFQUEUE --queue-num Q` rule hands to netfilter queue Q (in a
 * router namespace, on FORWARD), holds each for the one-way delay of its
 * (source, destination) pair, drops the pair's share of loss, and lets the
 * rest go in order of release time. The kernel here has no netem, so this
 * is how the tests put continents between namespaces.
 *
 *   cfs-delayline --matrix FILE [--queue Q] [--seed S] [--ready FILE] [--realtime]
 *
 * FILE is the matrix of tests/testbed/delay.h; SIGHUP reads it again (new
 * delays apply to packets that arrive afterwards), SIGUSR1 prints the
 * counters, SIGTERM and SIGINT print them and exit. --ready FILE is
 * written once the queue is bound, so that a harness adds its iptables
 * rule only when something listens (a rule with no listener drops every
 * packet). --realtime runs it under SCHED_FIFO, so that a busy machine
 * (a dozen daemons on two cores) does not hold packets past their time.
 * Only the first 40 bytes of each packet cross to user space: the
 * IP header is all the line reads. IPv4 only.
 */
#define _GNU_SOURCE   /* ppoll */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/testbed/delay.h"

static volatile sig_atomic_t g_hup, g_usr1, g_stop;

static struct {
	struct delay_matrix m;
	struct delay_line line;
	struct nfq_q_handle *qh;
	uint64_t rng;
	uint64_t seen, held, passed, lost, released, not_ipv4, oom;
	uint64_t max_held, late_sum_us, late_max_us;
	const char *matrix_path;
} g;

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* xorshift64*: loss decisions need no more than this. */
static uint32_t rnd_ppm(void)
{
	g.rng ^= g.rng >> 12;
	g.rng ^= g.rng << 25;
	g.rng ^= g.rng >> 27;
	return (uint32_t)((g.rng * 0x2545F4914F6CDD1DULL >> 32) % 1000000u);
}

static int load_matrix(const char *path, struct delay_matrix *m)
{
	char err[300];
	FILE *f = fopen(path, "r");
	char *buf;
	size_t len;

	if (!f) {
		fprintf(stderr, "cfs-delayline: %s: %s\n", path, strerror(errno));
		return -1;
	}
	buf = malloc(1 << 20);
	if (!buf) {
		fclose(f);
		fprintf(stderr, "cfs-delayline: out of memory\n");
		return -1;
	}
	len = fread(buf, 1, 1 << 20, f);
	bool whole = len < (1 << 20) && !ferror(f);
	fclose(f);
	if (!whole) {
		free(buf);
		fprintf(stderr, "cfs-delayline: %s: unreadable or over 1 MiB\n", path);
		return -1;
	}
	int r = delay_parse(buf, len, m, err, sizeof(err));
	free(buf);
	if (r < 0)
		fprintf(stderr, "cfs-delayline: %s: %s\n", path, err);
	return r;
}

static void print_counters(void)
{
	printf("delayline seen %llu held %llu passed %llu lost %llu released %llu not_ipv4 %llu oom %llu "
	       "max_held %llu late_mean_us %llu late_max_us %llu\n",
	       (unsigned long long)g.seen, (unsigned long long)g.held, (unsigned long long)g.passed,
	       (unsigned long long)g.lost, (unsigned long long)g.released,
	       (unsigned long long)g.not_ipv4, (unsigned long long)g.oom,
	       (unsigned long long)g.max_held,
	       (unsigned long long)(g.released ? g.late_sum_us / g.released : 0),
	       (unsigned long long)g.late_max_us);
	fflush(stdout);
}

/* One packet from the queue: drop it, pass it, or hold it. */
static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *nfmsg, struct nfq_data *nfa, void *data)
{
	struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
	unsigned char *p;
	int len = nfq_get_payload(nfa, &p);
	uint32_t id, src, dst, oneway, loss;

	if (!ph)
		return 0;
	id = ntohl(ph->packet_id);
	g.seen++;
	if (len < 20 || (p[0] >> 4) != 4) {
		g.not_ipv4++;
		return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
	}
	memcpy(&src, p + 12, 4);
	memcpy(&dst, p + 16, 4);
	delay_pair(&g.m, ntohl(src), ntohl(dst), &oneway, &loss);
	if (loss && rnd_ppm() < loss) {
		g.lost++;
		return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
	}
	if (!oneway) {
		g.passed++;
		return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
	}
	if (delay_line_push(&g.line, id, now_us() + oneway) < 0) {
		g.oom++;
		return nfq_set_verdict(qh, id, NF_DROP, 0, NULL);
	}
	g.held++;
	if (g.line.n > g.max_held)
		g.max_held = g.line.n;
	return 0;
}

static void release_due(void)
{
	uint64_t now = now_us();
	uint32_t id;
	uint64_t due;

	while ((due = delay_line_next(&g.line)) <= now && delay_line_pop_due(&g.line, now, &id)) {
		uint64_t late = now - due;
		g.late_sum_us += late;
		if (late > g.late_max_us)
			g.late_max_us = late;
		g.released++;
		nfq_set_verdict(g.qh, id, NF_ACCEPT, 0, NULL);
	}
}

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		g_hup = 1;
	else if (sig == SIGUSR1)
		g_usr1 = 1;
	else
		g_stop = 1;
}

static void usage(int code)
{
	fprintf(code ? stderr : stdout,
	        "usage: cfs-delayline --matrix FILE [--queue Q] [--seed S] [--ready FILE] [--realtime]\n");
	exit(code);
}

static void handle_signals(void)
{
	if (g_hup) {
		static struct delay_matrix m;
		g_hup = 0;
		if (load_matrix(g.matrix_path, &m) == 0)
			g.m = m;   /* a bad file keeps the old matrix */
	}
	if (g_usr1) {
		g_usr1 = 0;
		print_counters();
	}
}

/*
 * The loop: read every packet the kernel has queued (each is decided or
 * held at once), release the held packets that are due, then sleep until
 * the next release or the next packet, to the microsecond (ppoll).
 */
static int run(struct nfq_handle *h)
{
	int fd = nfq_fd(h);
	static char buf[1 << 16];
	sigset_t block, open;

	/* the signals arrive only inside ppoll: none is lost between the
	 * check of g_stop and the wait */
	sigemptyset(&block);
	sigaddset(&block, SIGHUP);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &open);
	while (!g_stop) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t next = delay_line_next(&g.line), now = now_us();
		struct timespec ts = { 1, 0 }, *tsp = &ts;
		if (next != UINT64_MAX) {
			uint64_t wait = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(wait / 1000000u);
			ts.tv_nsec = (long)(wait % 1000000u) * 1000;
		}
		int r = ppoll(&pfd, 1, tsp, &open);
		if (r < 0 && errno != EINTR) {
			perror("cfs-delayline: ppoll");
			return -1;
		}
		handle_signals();
		if (r > 0) {
			for (int k = 0; k < 256; k++) {
				ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
				if (n < 0) {
					if (errno == ENOBUFS)   /* the kernel dropped some: a full queue */
						continue;
					break;
				}
				nfq_handle_packet(h, buf, (int)n);
			}
		}
		release_due();
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "matrix", required_argument, NULL, 'm' }, { "queue", required_argument, NULL, 'q' },
		{ "seed", required_argument, NULL, 's' },   { "ready", required_argument, NULL, 'r' },
		{ "realtime", no_argument, NULL, 't' },     { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *ready = NULL;
	unsigned queue = 0;
	bool realtime = false;
	int c;

	g.rng = (uint64_t)time(NULL) * 2654435761u | 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'm': g.matrix_path = optarg; break;
		case 'q': queue = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': g.rng = strtoull(optarg, NULL, 10) | 1; break;
		case 'r': ready = optarg; break;
		case 't': realtime = true; break;
		case 'h': usage(0); break;
		default: usage(2);
		}
	}
	if (!g.matrix_path || optind != argc || queue > 65535)
		usage(2);
	if (load_matrix(g.matrix_path, &g.m) < 0)
		return 1;
	if (realtime) {
		struct sched_param sp = { .sched_priority = 20 };
		if (sched_setscheduler(0, SCHED_FIFO, &sp) < 0)
			fprintf(stderr, "cfs-delayline: no SCHED_FIFO (%s): delays may run late under load\n",
			        strerror(errno));
	}
	delay_line_init(&g.line);

	struct nfq_handle *h = nfq_open();
	if (!h || nfq_bind_pf(h, AF_INET) < 0) {
		fprintf(stderr, "cfs-delayline: cannot open a netfilter queue handle (root? CONFIG_NETFILTER_NETLINK_QUEUE?)\n");
		return 1;
	}
	g.qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
	if (!g.qh) {
		fprintf(stderr, "cfs-delayline: queue %u is taken or cannot be made\n", queue);
		return 1;
	}
	if (nfq_set_mode(g.qh, NFQNL_COPY_PACKET, 40) < 0 || nfq_set_queue_maxlen(g.qh, 1 << 17) < 0) {
		fprintf(stderr, "cfs-delayline: cannot configure queue %u\n", queue);
		return 1;
	}
	nfnl_rcvbufsiz(nfq_nfnlh(h), 64u << 20);

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (ready) {
		FILE *f = fopen(ready, "w");
		if (!f || fclose(f) != 0) {
			fprintf(stderr, "cfs-delayline: %s: %s\n", ready, strerror(errno));
			return 1;
		}
	}
	int r = run(h);
	/* Let what is held go before leaving: nothing is dropped by a stop. */
	for (uint32_t id; delay_line_pop_due(&g.line, UINT64_MAX, &id);)
		nfq_set_verdict(g.qh, id, NF_ACCEPT, 0, NULL);
	print_counters();
	nfq_destroy_queue(g.qh);
	nfq_close(h);
	delay_line_free(&g.line);
	return r < 0 ? 1 : 0;
}
