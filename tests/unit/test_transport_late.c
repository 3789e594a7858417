/* The transport's answer to RPC timeouts followed by late
 * replies on a loaded machine): the RTO floor, and replies that arrive
 * after their call timed out counted, taught to the estimator, and the
 * window their timeout halved given back. Two endpoints on loopback; the
 * server answers after delay_ms, as a busy daemon does. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "common/cfs.h"

static uv_loop_t loop;
static cfs_transport_t *srv, *cli;
static struct cfs_addr srv_addr;
static uv_timer_t later;
static struct cfs_reply_to pending;
static bool has_pending;
static uint32_t delay_ms;
static int last_status;
static bool done;

static void answer(uv_timer_t *h)
{
	struct cfs_msg m;

	(void)h;
	cfs_msg_init(&m, CFS_MSG_PING);
	cr_assert(cfs_transport_reply(srv, &pending, &m) == 0);
	has_pending = false;
}

static void serve(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	(void)arg;
	(void)req;
	pending = *from;
	has_pending = true;
	uv_timer_start(&later, answer, delay_ms, 0);
}

static void start(uint32_t timeout_min_ms)
{
	struct cfs_transport_config c;

	cr_assert(cfs_crypto_init() == 0);
	uv_loop_init(&loop);
	cfs_transport_config_default(&c);
	cr_assert_eq(c.timeout_min_ms, CFS_RTO_MIN_MS);
	c.host = "127.0.0.1";
	c.timeout_min_ms = timeout_min_ms;
	cr_assert(cfs_transport_new(&loop, &c, serve, NULL, &srv) == 0);
	cr_assert(cfs_transport_new(&loop, &c, NULL, NULL, &cli) == 0);
	cr_assert(cfs_transport_local_addr(srv, &srv_addr) == 0);
	uv_timer_init(&loop, &later);
}

static void stop(void)
{
	cfs_transport_close(cli);
	cfs_transport_close(srv);
	uv_close((uv_handle_t *)&later, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert(uv_loop_close(&loop) == 0, "every handle was closed");
}

TestSuite(transport_late, .timeout = 30);

static void on_one(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	(void)arg;
	(void)reply;
	(void)res;
	last_status = status;
	done = true;
}

static int call(const struct cfs_call_opts *o)
{
	struct cfs_msg m;

	cfs_msg_init(&m, CFS_MSG_PING);
	done = false;
	cr_assert(cfs_transport_call(cli, &srv_addr, &m, o, on_one, NULL) == 0);
	while (!done)
		uv_run(&loop, UV_RUN_ONCE);
	return last_status;
}

/* Run until the server has answered and its reply had time to arrive. */
static void settle(void)
{
	while (has_pending)
		uv_run(&loop, UV_RUN_ONCE);
	for (int i = 0; i < 50; i++)
		uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
}

Test(transport_late, a_late_reply_is_counted_taught_and_gives_the_window_back)
{
	struct cfs_transport_stats st, before;

	start(CFS_RTO_MIN_MS);
	delay_ms = 150;
	cfs_transport_get_stats(cli, &before);
	cr_assert_eq(call(&(struct cfs_call_opts){ .timeout_ms = 30 }), -ETIMEDOUT);
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.timeouts, 1);
	cr_assert_lt(st.window, before.window, "the timeout halved the window");
	cr_assert_eq(st.late_replies, 0);
	settle();
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.late_replies, 1);
	cr_assert_eq(st.unmatched, 1, "a late reply is still one no call matched");
	cr_assert_eq(st.replies, 0, "the caller was told once, -ETIMEDOUT");
	cr_assert_geq(st.late_by_us_max, 100000u, "late by %llu us", (unsigned long long)st.late_by_us_max);
	cr_assert_geq(st.srtt_us, 140000.0, "its round trip taught: srtt %.0f us", st.srtt_us);
	cr_assert_eq(st.window, before.window, "the spurious timeout's halving undone");
	cr_assert_eq(st.rtt_us.count, 1);
	stop();
}

/* A forged or duplicated reply is not late: only one per timed-out call,
 * and only from the address it was sent to. */
Test(transport_late, only_the_first_reply_of_a_timed_out_call_is_late)
{
	struct cfs_transport_stats st;

	start(CFS_RTO_MIN_MS);
	delay_ms = 100;
	cr_assert_eq(call(&(struct cfs_call_opts){ .timeout_ms = 20 }), -ETIMEDOUT);
	struct cfs_reply_to again = pending;
	settle();
	struct cfs_msg m;
	cfs_msg_init(&m, CFS_MSG_PING);
	cr_assert(cfs_transport_reply(srv, &again, &m) == 0); /* the same reply once more */
	settle();
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.late_replies, 1);
	cr_assert_eq(st.unmatched, 2);
	stop();
}

/* A computed RTO (the peer predicted 1 ms away, as on loopback) never
 * falls below the floor: a server whose loop takes 80 ms to answer is
 * slow, not dead. Without the floor (0: eq. (2) alone) it times out. */
Test(transport_late, the_rto_floor_outlasts_a_busy_peer)
{
	struct cfs_transport_stats st;
	const struct cfs_call_opts near = { .predicted_rtt_us = 1000 };

	start(CFS_RTO_MIN_MS);
	delay_ms = 80;
	cr_assert_eq(call(&near), 0);
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.timeouts, 0);
	stop();

	start(0);
	delay_ms = 80;
	cr_assert_eq(call(&near), -ETIMEDOUT); /* 1 ms + 6 alpha + 15 ms */
	settle();
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.late_replies, 1);
	stop();
}

/* Each destination has its own estimate (RFC 6298), late replies
 * included: a peer seen answering in 150 ms, then once in 250 ms (late),
 * is given an RTO above that, though its coordinates predict 1 ms. The
 * floor is off here, so only the estimate can save the call. */
Test(transport_late, a_slow_peer_is_learnt)
{
	struct cfs_transport_stats st;
	const struct cfs_call_opts near = { .predicted_rtt_us = 1000 };

	start(0);
	delay_ms = 150;
	cr_assert_eq(call(&near), -ETIMEDOUT); /* eq. (2) alone: ~16 ms */
	settle();                              /* its late reply is a sample */
	delay_ms = 250;
	cr_assert_eq(call(&near), 0, "RTO from the peer's 150 ms: 150 + 4 x 75 ms");
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.timeouts, 1);
	cr_assert_eq(st.late_replies, 1);
	stop();
}
