/* A join across a slow path (chord/lookup.c, chord__addr_wait_ms): two real
 * chord instances on loopback, the joiner's every datagram held 900 ms by
 * the simple network model, longer than the 750 ms probe timeout that was
 * once the whole wait for a join target's answer. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "chord/internal.h"

struct node {
	cfs_transport_t *tr;
	chord_t *c;
	struct cfs_addr a;
};

static uv_loop_t loop;
static struct node founder, joiner;
static struct cfs_netmodel_simple slow;

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct node *n = arg;

	if (n->c && chord_handle_request(n->c, req, from))
		return;
	(void)cfs_transport_reply_error(n->tr, from, -EOPNOTSUPP);
}

static void node_new(struct node *n, const char *ip)
{
	struct cfs_transport_config tc;
	struct chord_config cc;

	cfs_transport_config_default(&tc);
	tc.host = ip;
	cr_assert_eq(cfs_transport_new(&loop, &tc, on_request, n, &n->tr), 0);
	cr_assert_eq(cfs_transport_local_addr(n->tr, &n->a), 0);
	chord_config_default(&cc);
	cr_assert_eq(chord_new(&loop, n->tr, &n->a, &cc, &n->c), 0);
}

static void setup(void)
{
	cfs_log_init("test", CFS_LOG_ERROR);
	cr_assert_eq(cfs_crypto_init(), 0);
	uv_loop_init(&loop);
	node_new(&founder, "127.0.0.1");
	node_new(&joiner, "127.0.0.2");
}

static void teardown(void)
{
	chord_free(joiner.c);
	chord_free(founder.c);
	cfs_transport_close(joiner.tr);
	cfs_transport_close(founder.tr);
	cfs_loop_run(&loop);
	uv_loop_close(&loop);
}

static bool done;
static uint64_t started_us, joined_us;
static uv_timer_t check;

static void on_check(uv_timer_t *t)
{
	if (chord_vnode_joined(joiner.c, 0))
		joined_us = cfs_now_us();
	if (joined_us || cfs_now_us() - started_us > 20000000u) {
		done = true;
		uv_timer_stop(t);
	}
}

TestSuite(chord_join, .init = setup, .fini = teardown, .timeout = 60);

/* A pass over the join targets (here one) that none answered doubles the
 * wait; the answer that finally comes (900 ms) sets it to hold two such
 * waits. Before, the joiner asked again every 750 ms and never joined. */
Test(chord_join, a_path_slower_than_the_probe_timeout_still_joins)
{
	struct cfs_netmodel m;

	cfs_netmodel_simple_init(&slow, 0, 900000, 1);
	m = cfs_netmodel_simple_ops(&slow);
	cfs_transport_set_model(joiner.tr, &m);
	chord_start(founder.c, NULL, 0);
	chord_start(joiner.c, &founder.a, 1);
	cr_assert_eq(chord__addr_wait_ms(joiner.c), joiner.c->cfg.probe_timeout_ms);
	started_us = cfs_now_us();
	uv_timer_init(&loop, &check);
	uv_timer_start(&check, on_check, 100, 100);
	cr_assert_eq(cfs_loop_run_until(&loop, &done), 0);
	uv_close((uv_handle_t *)&check, NULL);
	cr_assert(joined_us, "the joiner never joined across a 900 ms path");
	cr_assert_geq(chord__addr_wait_ms(joiner.c), 1800, "two answers' waits: %u ms",
	              chord__addr_wait_ms(joiner.c));
	fprintf(stderr, "joined across a 900 ms path after %.1f s, waiting %u ms for an address\n",
	        (double)(joined_us - started_us) / 1e6, chord__addr_wait_ms(joiner.c));
}

/* A pass over the join targets that none answered doubles the wait, not
 * each silent target: a restart whose remembered peers are down tries
 * them all at the probe timeout first. An answer sets the wait to hold
 * two of its own times, and the count starts again. */
Test(chord_join, the_wait_doubles_per_silent_pass)
{
	chord_t *c = founder.c;
	uint32_t p = c->cfg.probe_timeout_ms;

	c->nboot = 3; /* as if given three bootstrap addresses */
	cr_assert_eq(chord__addr_wait_ms(c), p);
	chord__addr_heard(c, -ETIMEDOUT, p * 1000ull);
	chord__addr_heard(c, -ETIMEDOUT, p * 1000ull);
	cr_assert_eq(chord__addr_wait_ms(c), p, "two of three silent: the first pass goes on");
	chord__addr_heard(c, -ETIMEDOUT, p * 1000ull);
	cr_assert_eq(chord__addr_wait_ms(c), 2 * p);
	for (int i = 0; i < 30; i++)
		chord__addr_heard(c, -ETIMEDOUT, 0);
	cr_assert_eq(chord__addr_wait_ms(c), 16 * p, "at most 16 times");
	chord__addr_heard(c, -ECANCELED, 0);
	cr_assert_eq(chord__addr_wait_ms(c), 16 * p, "a cancelled ask says nothing");
	chord__addr_heard(c, 0, 900000);
	cr_assert_eq(chord__addr_wait_ms(c), 4 * p, "two 900 ms answers: 1,800 ms, so 3,000");
	chord__addr_heard(c, 0, 20000);
	cr_assert_eq(chord__addr_wait_ms(c), p);
	c->nboot = 0;
}
