/* Joins of two real chord instances on loopback: across a slow path
 * (chord/lookup.c, chord__addr_wait_ms), the joiner's every datagram held
 * 900 ms by the simple network model, longer than the 750 ms probe timeout
 * that was once the whole wait for a join target's answer; and a server
 * restarted in place, which the other held dead (chord/auth.c). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "chord/internal.h"

struct node {
	cfs_transport_t *tr;
	chord_t *c;
	struct cfs_addr a;
};

static uv_loop_t loop;
static struct node founder, joiner, third, cli; /* third and cli: one test's */
static struct cfs_netmodel_simple slow;

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct node *n = arg;

	if (n->c && chord_handle_request(n->c, req, from))
		return;
	(void)cfs_transport_reply_error(n->tr, from, -EOPNOTSUPP);
}

static void node_new_at(struct node *n, const char *ip, uint16_t port)
{
	struct cfs_transport_config tc;
	struct chord_config cc;

	cfs_transport_config_default(&tc);
	tc.host = ip;
	tc.port = port;
	cr_assert_eq(cfs_transport_new(&loop, &tc, on_request, n, &n->tr), 0);
	cr_assert_eq(cfs_transport_local_addr(n->tr, &n->a), 0);
	chord_config_default(&cc);
	cr_assert_eq(chord_new(&loop, n->tr, &n->a, &cc, &n->c), 0);
}

static void node_new(struct node *n, const char *ip)
{
	node_new_at(n, ip, 0);
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
	struct node *extra[] = { &third, &cli };
	for (size_t i = 0; i < 2; i++)
		if (extra[i]->tr) {
			chord_free(extra[i]->c);
			cfs_transport_close(extra[i]->tr);
		}
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

/* The joiner's every datagram held 900 ms; both started, the joiner
 * through the founder. */
static void start_joiner_900ms_away(void)
{
	struct cfs_netmodel m;

	cfs_netmodel_simple_init(&slow, 0, 900000, 1);
	m = cfs_netmodel_simple_ops(&slow);
	cfs_transport_set_model(joiner.tr, &m);
	chord_start(founder.c, NULL, 0);
	chord_start(joiner.c, &founder.a, 1);
}

/* A pass over the join targets (here one) that none answered doubles the
 * wait; the answer that finally comes (900 ms) sets it to hold two such
 * waits. Before, the joiner asked again every 750 ms and never joined. */
Test(chord_join, a_path_slower_than_the_probe_timeout_still_joins)
{
	start_joiner_900ms_away();
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

/* ------------------------------------------------------------ restarts */

static bool (*until_fn)(void);
static uv_timer_t poll_timer;
static bool polled;

static void on_poll(uv_timer_t *t)
{
	if (until_fn()) {
		polled = true;
		uv_timer_stop(t);
	}
}

/* Run the loop until f() holds or limit_ms pass; f()'s last word. */
static bool run_until(bool (*f)(void), uint32_t limit_ms)
{
	uint64_t end = cfs_now_us() + limit_ms * 1000ull;

	until_fn = f;
	polled = false;
	uv_timer_init(&loop, &poll_timer);
	uv_timer_start(&poll_timer, on_poll, 20, 20);
	while (!polled && cfs_now_us() < end)
		uv_run(&loop, UV_RUN_ONCE);
	uv_timer_stop(&poll_timer);
	uv_close((uv_handle_t *)&poll_timer, NULL);
	uv_run(&loop, UV_RUN_NOWAIT);
	return polled || f();
}

static bool linked(void)
{
	const struct chord__vnode *f = &founder.c->v[0];
	const struct cfs_id *j = &joiner.c->v[0].self.id;

	return chord_vnode_joined(joiner.c, 0) && f->nsuccs > 0 && cfs_id_eq(&f->succ[0].n.id, j) &&
	       f->pred.valid && cfs_id_eq(&f->pred.n.id, j);
}

static bool never(void)
{
	return false;
}

/* A member every path of which is slower than the maintenance calls'
 * fixed timeouts (AUTH 1,000 ms, stabilization 750 ms) joins, and is
 * then linked in: the founder takes it as its successor and predecessor
 * and keeps it, its calls to it waiting for its own round trip. */
Test(chord_join, a_member_behind_a_slow_path_is_linked_in)
{
	start_joiner_900ms_away();
	uint64_t t0 = cfs_now_us();
	cr_assert(run_until(linked, 30000), "a member 900 ms away was not linked in within 30 s");
	double secs = (double)(cfs_now_us() - t0) / 1e6;
	/* and stays linked: ten seconds of the founder's stabilization, long
	 * enough for the three missed probes that would drop it */
	(void)run_until(never, 10000);
	cr_assert(linked(), "the member 900 ms away was dropped again");
	fprintf(stderr, "a member 900 ms away was linked in after %.1f s and stayed\n", secs);
}

/* A server restarted in place comes back under its old ID at its old
 * address, while the other still holds it dead (it left, or stopped
 * answering). Its own requests (its NOTIFY) get it asked again, and it is
 * back in the other's tables in a round or two, not after the fifteen
 * seconds of the dead verdict. */
Test(chord_join, a_server_restarted_in_place_is_taken_back_at_once)
{
	chord_start(founder.c, NULL, 0);
	chord_start(joiner.c, &founder.a, 1);
	cr_assert(run_until(linked, 15000), "the two never formed a ring");

	/* The joiner stops; the founder finds it dead (as a LEAVE or the
	 * timeouts of its probes would). */
	struct cfs_id jid = joiner.c->v[0].self.id;
	uint16_t port = cfs_addr_port(&joiner.a);
	chord_free(joiner.c);
	joiner.c = NULL;
	cfs_transport_close(joiner.tr);
	(void)run_until(never, 100);
	uint64_t dead_at = cfs_now_us();
	chord__table_remove(founder.c, &jid, dead_at);
	cr_assert_eq(chord__auth_peek(founder.c, &jid, dead_at), AUTH_DEAD);
	cr_assert_eq(founder.c->auth_revived, 0);

	node_new_at(&joiner, "127.0.0.2", port);
	cr_assert(cfs_id_eq(&joiner.c->v[0].self.id, &jid));
	chord_start(joiner.c, &founder.a, 1);
	bool back = run_until(linked, 10000);
	double secs = (double)(cfs_now_us() - dead_at) / 1e6;
	cr_assert(back, "the restarted server was not taken back in 10 s");
	cr_assert_lt(secs, 8.0, "taken back after %.1f s", secs);
	cr_assert_geq(founder.c->auth_revived, 1, "no dead verdict was asked again");
	cr_assert_eq(chord__auth_peek(founder.c, &jid, cfs_now_us()), AUTH_OK);
	fprintf(stderr, "a server restarted in place was taken back after %.2f s\n", secs);
}

static bool founder_revive_done(void)
{
	return founder.c->auth_inflight == 0;
}

static bool founder_trusts_joiner(void)
{
	return chord__auth_peek(founder.c, &joiner.c->v[0].self.id, cfs_now_us()) == AUTH_OK;
}

/* A node held dead that our successor names its predecessor is asked
 * again once the verdict is a second old; the verdict stands until the
 * node answers, and a younger one is not asked at all. Any other mention
 * (a list, a lookup: a plain check) asks nothing: a server restarted but
 * not yet joined answers AUTH too, and taken back then it answers our
 * stabilization with no list and is dropped again, round after round. */
Test(chord_join, a_dead_verdict_is_asked_again_when_vouched_for)
{
	chord_start(founder.c, NULL, 0);
	chord_start(joiner.c, &founder.a, 1);
	cr_assert(run_until(linked, 15000), "the two never formed a ring");
	cr_assert(run_until(founder_revive_done, 5000));

	struct cfs_node j = joiner.c->v[0].self;
	uint64_t now = cfs_now_us();
	chord__auth_mark_dead(founder.c, &j.id, now);
	cr_assert_eq(chord__auth_check(founder.c, &j, now + 5000000), AUTH_DEAD);
	cr_assert_eq(founder.c->auth_revived, 0, "a plain mention asked again");
	chord__auth_vouched(founder.c, &j, now + 999999);
	cr_assert_eq(founder.c->auth_revived, 0, "a verdict under a second old was asked again");
	chord__auth_vouched(founder.c, &j, now + 1000000);
	cr_assert_eq(founder.c->auth_revived, 1);
	cr_assert_eq(chord__auth_check(founder.c, &j, now + 1000000), AUTH_DEAD,
	             "the verdict stands until the answer");
	chord__auth_vouched(founder.c, &j, now + 1000001);
	cr_assert_eq(founder.c->auth_revived, 1, "one check at a time");
	cr_assert(run_until(founder_trusts_joiner, 5000), "the live node's answer did not revive it");
}

/* The node itself talking to us from its address is asked again at once,
 * however young the verdict. A verdict given while that check is in
 * flight wins over its answer; a server on its way out (after its LEAVE)
 * refuses the check and stays dead, not failed. */
Test(chord_join, a_dead_node_heard_from_is_asked_at_once)
{
	chord_start(founder.c, NULL, 0);
	chord_start(joiner.c, &founder.a, 1);
	cr_assert(run_until(linked, 15000), "the two never formed a ring");
	cr_assert(run_until(founder_revive_done, 5000));

	/* the joiner's own stabilization would ask again too: only the
	 * calls below may */
	chord_freeze(joiner.c, true);
	cr_assert(run_until(founder_revive_done, 5000));
	struct cfs_node j = joiner.c->v[0].self;
	uint64_t now = cfs_now_us();
	chord__auth_mark_dead(founder.c, &j.id, now);
	chord__auth_heard(founder.c, &j, now);
	cr_assert_eq(founder.c->auth_revived, 1, "not asked at once");
	cr_assert(run_until(founder_trusts_joiner, 5000), "the live node's answer did not revive it");

	/* found dead again while the check is in flight: its answer is stale */
	now = cfs_now_us();
	chord__auth_mark_dead(founder.c, &j.id, now);
	chord__auth_heard(founder.c, &j, now);
	cr_assert_eq(founder.c->auth_revived, 2);
	chord__auth_mark_dead(founder.c, &j.id, now);
	cr_assert(run_until(founder_revive_done, 5000));
	cr_assert_eq(chord__auth_peek(founder.c, &j.id, cfs_now_us()), AUTH_DEAD,
	             "an answer to a check older than the verdict counted");

	/* leaving: it refuses, and stays dead */
	joiner.c->leaving = true;
	chord__auth_heard(founder.c, &j, cfs_now_us());
	cr_assert_eq(founder.c->auth_revived, 3);
	cr_assert(run_until(founder_revive_done, 5000));
	cr_assert_eq(chord__auth_peek(founder.c, &j.id, cfs_now_us()), AUTH_DEAD);
	cr_assert_eq(founder.c->auth_revived, 3, "asked again behind the test's back");
	joiner.c->leaving = false;
}

/* A cold plain client's first call to an address goes at the older
 * protocol version (docs/PROTOCOL.md, "Versions"), before it knows the
 * server speaks the newer one. Its lookup says it takes an answer that
 * wraps through the answerer (CFS_LOOKUP_F_WRAP_OK), so a member of a
 * ring shorter than its successor list answers it whole in one round
 * trip; for a key two places after the member, an answer cut for an
 * older asker names the key's predecessor and one successor, and needs a
 * second call. */
static struct chord_lookup_result cold_res;
static bool cold_done;

static bool ring_of_three(void)
{
	struct chord__vnode *v[3] = { &founder.c->v[0], &joiner.c->v[0], &third.c->v[0] };
	for (int i = 0; i < 3; i++)
		if (!v[i]->joined || v[i]->nsuccs != 2 || !v[i]->wraps)
			return false;
	return true;
}

static void on_cold_lookup(void *arg, const struct chord_lookup_result *r)
{
	cold_res = *r;
	cold_done = true;
}

static bool cold_answered(void)
{
	return cold_done;
}

Test(chord_join, a_cold_clients_first_lookup_in_a_small_ring_takes_one_call)
{
	node_new(&third, "127.0.0.3");
	chord_start(founder.c, NULL, 0);
	chord_start(joiner.c, &founder.a, 1);
	chord_start(third.c, &founder.a, 1);
	cr_assert(run_until(ring_of_three, 20000), "the three never formed a ring");

	struct cfs_transport_config tc;
	cfs_transport_config_default(&tc);
	tc.host = "127.0.0.4";
	cr_assert_eq(cfs_transport_new(&loop, &tc, on_request, &cli, &cli.tr), 0);
	cr_assert_eq(chord_client_new(&loop, cli.tr, &founder.a, 1, &cli.c), 0);
	cr_assert_eq(cfs_transport_peer_version(cli.tr, &founder.a), CFS_PROTO_VERSION_MIN,
	             "the client should not know the founder's version yet");
	/* the key of the founder's second successor: its list covers it with
	 * one successor after it, fewer than the three asked for */
	struct cfs_id key = founder.c->v[0].succ[1].n.id;
	struct chord_lookup_opts o = { .mode = CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY), .nsucc = 3 };
	cr_assert_eq(chord_lookup(cli.c, &key, &o, on_cold_lookup, NULL), 0);
	cr_assert(run_until(cold_answered, 10000), "the cold lookup was not answered");
	cr_assert_eq(cold_res.status, 0);
	cr_assert_eq(cold_res.rpcs, 1, "a cold lookup took %u calls", cold_res.rpcs);
	cr_assert_eq(cold_res.n, 3, "the answer named %u of the ring's three members", cold_res.n);
	cr_assert(cfs_id_eq(&cold_res.succ[0].id, &key));
}
