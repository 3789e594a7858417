/*
 * rpc-bench: RPC rate and round-trip times of the UDP transport between
 * two processes.
 *
 *   rpc-bench serve PORT                 answer PINGs until SIGTERM
 *   rpc-bench run HOST:PORT one N        N calls, one in flight
 *   rpc-bench run HOST:PORT window N     N calls, the STP window decides
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

static uv_loop_t *loop;
static cfs_transport_t *tr;
static struct cfs_addr dst;
static uint64_t total, issued, ended, failed;
static bool windowed;
static struct cfs_hist rtt;
static struct cfs_msg req; /* large: static, not on the stack */

static void serve(void *arg, const struct cfs_msg *m, const struct cfs_reply_to *from)
{
	struct cfs_msg *reply = &req;
	cfs_msg_init(reply, m->type);
	(void)cfs_transport_reply(tr, from, reply);
}

static void on_signal(uv_signal_t *h, int sig)
{
	cfs_transport_close(tr);
	uv_close((uv_handle_t *)h, NULL);
}

static void issue(void);

static void on_reply(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	ended++;
	if (status == 0)
		cfs_hist_add(&rtt, res->rtt_us);
	else
		failed++;
	if (!windowed || ended % 1024 == 0)
		issue();
}

/* One call at a time, or keep a deep queue so that only STP limits. */
static void issue(void)
{
	uint64_t want = windowed ? 8192 : 1;
	while (issued < total && issued - ended < want) {
		cfs_msg_init(&req, CFS_MSG_PING);
		if (cfs_transport_call(tr, &dst, &req, NULL, on_reply, NULL) < 0) {
			fprintf(stderr, "call failed\n");
			exit(1);
		}
		issued++;
	}
}

static int usage(void)
{
	fprintf(stderr, "usage: rpc-bench serve PORT | rpc-bench run HOST:PORT one|window N\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct cfs_transport_config c;
	uv_signal_t sig;

	cfs_log_init(argv[0], CFS_LOG_WARN);
	if (cfs_crypto_init() < 0)
		return 1;
	loop = uv_default_loop();
	cfs_transport_config_default(&c);
	if (argc == 3 && strcmp(argv[1], "serve") == 0) {
		c.host = "127.0.0.1";
		c.port = (uint16_t)atoi(argv[2]);
		if (cfs_transport_new(loop, &c, serve, NULL, &tr) < 0) {
			fprintf(stderr, "cannot bind port %s\n", argv[2]);
			return 1;
		}
		uv_signal_init(loop, &sig);
		uv_signal_start(&sig, on_signal, SIGTERM);
		uv_run(loop, UV_RUN_DEFAULT);
		return 0;
	}
	if (argc != 5 || strcmp(argv[1], "run") != 0 ||
	    (strcmp(argv[3], "one") != 0 && strcmp(argv[3], "window") != 0))
		return usage();
	if (cfs_addr_parse(&dst, argv[2]) < 0)
		return usage();
	windowed = strcmp(argv[3], "window") == 0;
	total = strtoull(argv[4], NULL, 10);
	c.host = "127.0.0.1";
	if (cfs_transport_new(loop, &c, NULL, NULL, &tr) < 0)
		return 1;

	uint64_t t0 = cfs_now_us();
	issue();
	while (ended < total)
		uv_run(loop, UV_RUN_ONCE);
	double secs = (double)(cfs_now_us() - t0) / 1e6;
	struct cfs_transport_stats st;
	cfs_transport_get_stats(tr, &st);
	printf("%-8s %9lu calls %10.0f RPC/s  p50 %6lu us  p99 %6lu us  timeouts %lu  window %.0f\n",
	       argv[3], (unsigned long)total, (double)total / secs,
	       (unsigned long)cfs_hist_quantile(&rtt, 0.5), (unsigned long)cfs_hist_quantile(&rtt, 0.99),
	       (unsigned long)failed, st.window);
	cfs_transport_close(tr);
	uv_run(loop, UV_RUN_DEFAULT);
	return failed ? 1 : 0;
}
