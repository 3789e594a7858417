/*
 * cfsctl ping HOST:PORT: a server's round trip, as ping(8) gives a host's.
 * No daemon is needed: cfsctl opens a UDP transport of its own and sends
 * --count PINGs (default 3), one after another, each waiting --timeout ms
 * (default 1000) for its reply. Exit 0 when every PING was answered.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/cfsctl.h"

struct pinger {
	cfs_transport_t *tr;
	struct cfs_addr dst;
	unsigned left, sent, ok, timeout_ms;
	struct cfs_msg req;
};

static void send_ping(struct pinger *p);

static void on_pong(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	struct pinger *p = arg;
	char a[CFS_ADDR_STRLEN];

	cfs_addr_str(&p->dst, a);
	if (status == 0) {
		p->ok++;
		printf("reply from %s: seq=%u time=%.3f ms\n", a, p->sent, (double)res->rtt_us / 1000.0);
	} else if (status == -ETIMEDOUT) {
		printf("no reply from %s: seq=%u timed out after %u ms\n", a, p->sent, p->timeout_ms);
	} else if (status != -ECANCELED) {
		printf("error from %s: seq=%u %s\n", a, p->sent, strerror(-status));
	}
	if (p->left > 0)
		send_ping(p);
	else
		cfs_transport_close(p->tr);
}

static void send_ping(struct pinger *p)
{
	struct cfs_call_opts o = { .timeout_ms = p->timeout_ms };
	int r;

	cfs_msg_init(&p->req, CFS_MSG_PING);
	p->left--;
	p->sent++;
	if ((r = cfs_transport_call(p->tr, &p->dst, &p->req, &o, on_pong, p)) < 0) {
		fprintf(stderr, "cfsctl: cannot send: %s\n", strerror(-r));
		cfs_transport_close(p->tr);
	}
}

struct ping_opts {
	unsigned count, timeout_ms;
};

static void ping_opt(void *arg, int c, const char *optarg)
{
	struct ping_opts *o = arg;

	if (c == 'c')
		o->count = cfsctl_uint("--count", optarg, 1000000);
	else
		o->timeout_ms = cfsctl_uint("--timeout", optarg, 600000);
}

int cfsctl_ping_main(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "count", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ 0 },
	};
	struct ping_opts o = { .count = 3, .timeout_ms = 1000 };
	struct cfs_transport_config c;
	uv_loop_t *loop = uv_default_loop();
	int r, i = cfsctl_getopt(g, argc, argv, "", opts, ping_opt, &o);

	if (i + 1 != argc)
		cfsctl_usage("ping takes one HOST:PORT");
	const char *target = argv[i];
	unsigned count = o.count, timeout_ms = o.timeout_ms;
	struct pinger *p = xcalloc(1, sizeof(*p));
	if (cfs_addr_parse(&p->dst, target) < 0)
		cfsctl_usage("cannot use '%s' as HOST:PORT", target);
	cfs_transport_config_default(&c);
	c.host = p->dst.sa.sa_family == AF_INET6 ? "::" : "0.0.0.0";
	if ((r = cfs_transport_new(loop, &c, NULL, NULL, &p->tr)) < 0) {
		fprintf(stderr, "cfsctl: cannot open a UDP socket: %s\n", uv_strerror(r));
		return 1;
	}
	p->left = count;
	p->timeout_ms = timeout_ms;
	send_ping(p);
	cfs_loop_run(loop);
	printf("%u sent, %u replies\n", p->sent, p->ok);
	r = p->ok == p->sent ? 0 : 1;
	free(p);
	return r;
}
