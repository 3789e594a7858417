/* Authenticated leaves and bounded authentication work:
 * the LEAVE cookie (chord/cookie.c), the token buckets (chord/ratelimit.c)
 * and the admission and duplicate-ID rules of chord__auth_check_from
 * (chord/auth.c), on a chord_t built by hand: no socket, no timer. Each test
 * plays the forger or the flooder. */
#include <criterion/criterion.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

static chord_t *C;
static struct cfs_node me, b, d;
static const uint64_t T0 = 1000 * CHORD_COOKIE_PERIOD_US + 12345;

static struct cfs_node mknode(const char *ip, uint16_t port, uint32_t vindex)
{
	struct cfs_node n = { .vindex = vindex };

	cr_assert_eq(cfs_addr_from_ip(&n.addr, ip, port), 0);
	cfs_node_id(&n.id, &n.addr, vindex);
	return n;
}

static void setup(void)
{
	cr_assert_geq(sodium_init(), 0);
	me = mknode("127.0.1.1", 4000, 0);
	b = mknode("127.0.1.2", 4000, 0);
	d = mknode("127.0.1.3", 4000, 0);
	C = calloc(1, sizeof(*C));
	C->cfg.nsucc = 16;
	C->cfg.fail_probes = 3;
	C->nv = 1;
	C->v = calloc(1, sizeof(*C->v));
	C->v[0].c = C;
	C->v[0].self = me;
	C->v[0].joined = true;
	/* Every clock here is scripted from T0, never the machine's uptime
	 * (which passed T0 after 16.7 hours and froze the jar's rotation). */
	chord__auth_init(C, T0);
}

static void teardown(void)
{
	chord__auth_free(C);
	free(C->v);
	free(C);
}

TestSuite(chord_auth, .init = setup, .fini = teardown);

/* ------------------------------------------------------------ cookies */

Test(chord_auth, cookie_round_trip)
{
	uint8_t ck[CFS_NONCE_BYTES];

	chord__cookie_make(&C->cookies, T0, &b, ck);
	cr_assert(chord__cookie_ok(&C->cookies, T0, &b, ck));
	cr_assert_eq(chord__leave_judge(&C->cookies, T0, &b, true, ck), LEAVE_APPLY);
	/* The next period still accepts it (a leave straddling a rotation). */
	cr_assert_eq(chord__leave_judge(&C->cookies, T0 + CHORD_COOKIE_PERIOD_US, &b, true, ck),
	             LEAVE_APPLY);
}

Test(chord_auth, forged_leaves_are_refused)
{
	static const uint8_t zero[CFS_NONCE_BYTES];
	uint8_t ck[CFS_NONCE_BYTES], guess[CFS_NONCE_BYTES];
	struct cfs_node other_port = b, other_ip = b, other_id = b, other_index = b;

	chord__cookie_make(&C->cookies, T0, &b, ck);
	/* A spoofer "from" b sends no cookie, or guesses one. */
	cr_assert_eq(chord__leave_judge(&C->cookies, T0, &b, true, zero), LEAVE_NO_COOKIE);
	randombytes_buf(guess, sizeof(guess));
	cr_assert_eq(chord__leave_judge(&C->cookies, T0, &b, true, guess), LEAVE_BAD_COOKIE);
	/* A cookie is bound to the address, the ID and the index it was
	 * made for: the spoofer's own cookie (got at its own address) does
	 * not work for b. */
	cr_assert_eq(cfs_addr_from_ip(&other_port.addr, "127.0.1.2", 4001), 0);
	cr_assert_eq(cfs_addr_from_ip(&other_ip.addr, "127.0.1.9", 4000), 0);
	other_id.id.b[0] ^= 1;
	other_index.vindex = 1;
	const struct cfs_node *forgers[] = { &other_port, &other_ip, &other_id, &other_index };
	for (size_t i = 0; i < CFS_ARRAY_SIZE(forgers); i++) {
		uint8_t theirs[CFS_NONCE_BYTES];
		chord__cookie_make(&C->cookies, T0, forgers[i], theirs);
		cr_assert_eq(chord__leave_judge(&C->cookies, T0, &b, true, theirs), LEAVE_BAD_COOKIE,
		             "forger %zu", i);
		cr_assert_eq(chord__leave_judge(&C->cookies, T0, forgers[i], true, ck), LEAVE_BAD_COOKIE,
		             "forger %zu used b's cookie", i);
	}
	/* Expired: two periods later the key that made it is gone. */
	cr_assert_eq(chord__leave_judge(&C->cookies, T0 + 2 * CHORD_COOKIE_PERIOD_US, &b, true, ck),
	             LEAVE_BAD_COOKIE);
}

Test(chord_auth, another_process_has_another_key)
{
	struct chord__cookie_jar other;
	uint8_t ck[CFS_NONCE_BYTES];

	chord__cookie_init(&other, T0);
	chord__cookie_make(&other, T0, &b, ck);
	cr_assert_eq(chord__leave_judge(&C->cookies, T0, &b, true, ck), LEAVE_BAD_COOKIE);
	chord__cookie_wipe(&other);
}

Test(chord_auth, stranger_leave_needs_nothing)
{
	static const uint8_t zero[CFS_NONCE_BYTES];

	cr_assert_eq(chord__leave_judge(&C->cookies, T0, &b, false, zero), LEAVE_STRANGER);
}

/* A LEAVE that passed its check removes the node; a judge that said no
 * leaves the tables alone (maint.c calls apply only on LEAVE_APPLY). */
Test(chord_auth, valid_leave_removes_the_node)
{
	struct chord__vnode *v = &C->v[0];
	struct cfs_msg req;
	struct auth_ent *e;

	v->pred = (struct tnode){ .n = b, .valid = true };
	v->succ[0] = (struct tnode){ .n = b, .valid = true };
	v->succ[1] = (struct tnode){ .n = d, .valid = true };
	v->nsuccs = 2;
	/* d is authenticated already: offering it costs nothing. */
	e = cfs_htab_put(&C->auth, &d.id, NULL);
	*e = (struct auth_ent){ .id = d.id, .node = d, .state = AUTH_OK,
	                        .until_us = T0 + 600000000ull };
	e = cfs_htab_put(&C->auth, &b.id, NULL);
	*e = (struct auth_ent){ .id = b.id, .node = b, .state = AUTH_OK,
	                        .until_us = T0 + 600000000ull };
	cfs_msg_init(&req, CFS_MSG_LEAVE);
	req.n_nodes = 1;
	req.nodes[0] = d;
	cr_assert(chord__table_contains(C, &b.id));
	chord__maint_leave_apply(C, v, &b, &req, T0);
	cr_assert_not(chord__table_contains(C, &b.id));
	cr_assert(cfs_id_eq(&v->succ[0].n.id, &d.id));
	cr_assert(!v->pred.valid || !cfs_id_eq(&v->pred.n.id, &b.id));
	cr_assert_eq(chord__auth_peek(C, &b.id, T0), AUTH_DEAD);
	cr_assert_eq(C->leave_applied, 1);
}

/* ------------------------------------------------------------ budgets */

static const struct chord__rl_params P = {
	.src_rate = 10, .src_burst = 20, .all_rate = 100, .all_burst = 200, .sources = 8,
};

Test(chord_auth, one_source_is_held_to_its_rate)
{
	struct chord__ratelimit r;
	struct cfs_addr a;
	int pass = 0;

	chord__rl_init(&r, &P);
	cr_assert_eq(cfs_addr_from_ip(&a, "10.0.0.1", 5000), 0);
	for (int i = 0; i < 1000; i++)
		pass += chord__rl_admit(&r, T0, &a) == 0;
	cr_assert_eq(pass, 20, "a burst of %d", pass);
	cr_assert_eq(r.dropped_src, 980);
	/* Other ports of the same IP are the same source. */
	cr_assert_eq(cfs_addr_from_ip(&a, "10.0.0.1", 5001), 0);
	cr_assert_eq(chord__rl_admit(&r, T0, &a), -EAGAIN);
	/* One second later: ten more. */
	pass = 0;
	for (int i = 0; i < 1000; i++)
		pass += chord__rl_admit(&r, T0 + 1000000, &a) == 0;
	cr_assert_eq(pass, 10);
	chord__rl_free(&r);
}

Test(chord_auth, everyone_together_is_held_to_the_total)
{
	struct chord__ratelimit r;
	int pass = 0;

	chord__rl_init(&r, &P);
	for (int i = 0; i < 1000; i++) {
		struct cfs_addr a;
		char ip[32];
		snprintf(ip, sizeof(ip), "10.1.%d.%d", i / 250, i % 250 + 1);
		cr_assert_eq(cfs_addr_from_ip(&a, ip, 5000), 0);
		pass += chord__rl_admit(&r, T0, &a) == 0;
	}
	cr_assert_eq(pass, 200);
	cr_assert_eq(r.dropped_all, 800);
	/* The source table stayed at its bound. */
	cr_assert_eq(r.nsrc, P.sources);
	cr_assert_geq(r.evicted, 1000 - P.sources);
	/* Our own maintenance (no source) draws on the total only. */
	cr_assert_eq(chord__rl_admit(&r, T0, NULL), -EBUSY);
	cr_assert_eq(chord__rl_admit(&r, T0 + 10000, NULL), 0);
	chord__rl_free(&r);
}

Test(chord_auth, eviction_prefers_idle_sources)
{
	struct chord__ratelimit r;
	struct cfs_addr hot, a;
	char ip[32];

	chord__rl_init(&r, &P);
	cr_assert_eq(cfs_addr_from_ip(&hot, "10.2.0.1", 5000), 0);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(chord__rl_admit(&r, T0, &hot), 0);
	/* Many other sources pass through, each once, long after. */
	for (int i = 0; i < 100; i++) {
		snprintf(ip, sizeof(ip), "10.3.0.%d", i + 1);
		cr_assert_eq(cfs_addr_from_ip(&a, ip, 5000), 0);
		if (chord__rl_admit(&r, T0 + 100 + (uint64_t)i, &a) < 0)
			cr_assert_fail("source %d refused", i);
	}
	/* The hot source's empty bucket was never the one evicted. */
	cr_assert_eq(chord__rl_admit(&r, T0 + 200, &hot), -EAGAIN);
	chord__rl_free(&r);
}

/* An AUTH flood beyond the budget is dropped and counted, not queued: no
 * cache entry, no call (C has no transport: a call would crash). */
Test(chord_auth, flood_beyond_the_budget_is_dropped)
{
	struct cfs_addr src;
	uint64_t now = T0;

	cr_assert_eq(cfs_addr_from_ip(&src, "127.0.9.9", 4000), 0);
	for (int i = 0; i < (int)CHORD_AUTH_SRC_BURST; i++)
		cr_assert_eq(chord__rl_admit(&C->auth_rl, now, &src), 0);
	for (int i = 0; i < 64; i++) {
		struct cfs_node n = mknode("127.0.50.1", (uint16_t)(20000 + i), 0);
		cr_assert_eq(chord__auth_check_from(C, &n, &src, now), AUTH_NONE);
	}
	cr_assert_eq(C->auth_dropped, 64);
	cr_assert_eq(chord__auth_count(C), 0);
	cr_assert_eq(C->auth_sent, 0);

	/* With the in-flight cap reached, even our own checks wait. */
	C->auth_inflight = CHORD_AUTH_INFLIGHT_MAX;
	struct cfs_node n = mknode("127.0.50.2", 20000, 0);
	cr_assert_eq(chord__auth_check(C, &n, now), AUTH_NONE);
	cr_assert_eq(C->auth_dropped, 65);
	cr_assert_eq(chord__auth_count(C), 0);
	C->auth_inflight = 0;
}

/* A node whose ID does not hash from its address is refused without
 * touching the cache: else naming a live node's ID at a wrong address
 * would keep the real one out. */
Test(chord_auth, mismatch_does_not_poison)
{
	struct cfs_node wrong = d;

	cr_assert_eq(cfs_addr_from_ip(&wrong.addr, "127.0.1.9", 4000), 0);
	cr_assert_eq(chord__auth_check(C, &wrong, T0), AUTH_FAILED);
	cr_assert_eq(C->id_mismatch, 1);
	cr_assert_eq(chord__auth_count(C), 0);
}

/* An ID held by a live authenticated node is refused at another address
 * (another port of the same IP: IDs no longer hash the port). */
Test(chord_auth, duplicate_id_at_another_port)
{
	struct auth_ent *e = cfs_htab_put(&C->auth, &b.id, NULL);
	struct cfs_node twin = b;

	*e = (struct auth_ent){ .id = b.id, .node = b, .state = AUTH_OK,
	                        .until_us = T0 + 600000000ull };
	cr_assert_eq(cfs_addr_from_ip(&twin.addr, "127.0.1.2", 4001), 0);
	cr_assert_eq(chord__auth_check(C, &twin, T0), AUTH_FAILED);
	cr_assert_eq(C->auth_dup, 1);
	cr_assert_eq(C->auth_sent, 0); /* just confirmed: no re-check yet */
	/* The holder itself is still fine. */
	cr_assert_eq(chord__auth_check(C, &b, T0), AUTH_OK);
	cr_assert_eq(C->auth_dup, 1);

	/* Once the holder is found dead the twin is no longer refused: it
	 * gets a check of its own (here dropped: no budget). */
	chord__auth_mark_dead(C, &b.id, T0);
	C->auth_inflight = CHORD_AUTH_INFLIGHT_MAX;
	enum auth_state st = chord__auth_check(C, &twin, T0);
	cr_assert_eq(st, AUTH_NONE, "state %d", st);
	cr_assert_eq(C->auth_dup, 1);
	C->auth_inflight = 0;
}

/* ------------------------------------------------------------ expiry */

static void put_entry(const struct cfs_node *n, enum auth_state st, uint64_t until_us)
{
	struct auth_ent *e = cfs_htab_put(&C->auth, &n->id, NULL);

	*e = (struct auth_ent){ .id = n->id, .node = *n, .state = st, .until_us = until_us };
}

/* The cache reads only the time it is given: a verdict holds through its
 * until_us and is gone a microsecond later, whatever the machine's clock. */
Test(chord_auth, verdicts_expire_by_the_given_clock)
{
	const uint64_t until = T0 + 5000000;

	put_entry(&b, AUTH_OK, until);
	put_entry(&d, AUTH_FAILED, until);
	cr_assert_eq(chord__auth_peek(C, &b.id, T0), AUTH_OK);
	cr_assert_eq(chord__auth_peek(C, &b.id, until), AUTH_OK);
	cr_assert_eq(chord__auth_peek(C, &b.id, until + 1), AUTH_NONE);
	cr_assert_eq(chord__auth_peek(C, &d.id, until), AUTH_FAILED);
	cr_assert_eq(chord__auth_peek(C, &d.id, until + 1), AUTH_NONE);
	/* Time is not remembered: an earlier now reads the verdict again. */
	cr_assert_eq(chord__auth_peek(C, &b.id, T0), AUTH_OK);
	/* A local node is always OK, at any time. */
	cr_assert_eq(chord__auth_peek(C, &me.id, UINT64_MAX), AUTH_OK);

	/* A cached failure answers a check without a new AUTH until it
	 * expires; then the node gets a check of its own (here over the
	 * in-flight budget: dropped and counted, nothing sent). */
	C->auth_inflight = CHORD_AUTH_INFLIGHT_MAX;
	cr_assert_eq(chord__auth_check(C, &d, until), AUTH_FAILED);
	cr_assert_eq(C->auth_dropped, 0);
	cr_assert_eq(chord__auth_check(C, &d, until + 1), AUTH_NONE);
	cr_assert_eq(C->auth_dropped, 1);
	cr_assert_eq(C->auth_sent, 0);
	C->auth_inflight = 0;
}

/* A check in flight is never expired by time alone: its reply or its
 * timeout ends it, so one ID has one check at a time. */
Test(chord_auth, pending_never_expires)
{
	put_entry(&b, AUTH_PENDING, T0);
	cr_assert_eq(chord__auth_peek(C, &b.id, T0 + 1), AUTH_PENDING);
	cr_assert_eq(chord__auth_peek(C, &b.id, UINT64_MAX), AUTH_PENDING);
	cr_assert_eq(chord__auth_check(C, &b, UINT64_MAX), AUTH_PENDING);
	cr_assert_eq(C->auth_sent, 0);
	/* Found dead meanwhile: a pending check is not overruled. */
	chord__auth_mark_dead(C, &b.id, T0 + 1);
	cr_assert_eq(chord__auth_peek(C, &b.id, T0 + 2), AUTH_PENDING);
}

/* A node found dead stays out for DEAD_US (15 s) from the time given. */
Test(chord_auth, dead_lasts_fifteen_seconds)
{
	const uint64_t at = T0 + 1000000;

	put_entry(&b, AUTH_OK, T0 + 600000000ull);
	chord__auth_mark_dead(C, &b.id, at);
	cr_assert_eq(chord__auth_peek(C, &b.id, at), AUTH_DEAD);
	cr_assert_eq(chord__auth_peek(C, &b.id, at + 15000000), AUTH_DEAD);
	cr_assert_eq(chord__auth_peek(C, &b.id, at + 15000001), AUTH_NONE);
}
