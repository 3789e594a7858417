/* dhash: the get state machine (get_sm.c) driven by scripted events, with
 * no socket: server selection, timeouts, bad bytes, hedging, the relookup,
 * root mode, cache pushes and which error a failed get reports. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"
#include "tests/unit/dhash_sm_fixtures.h"

#define MAXA 128

static struct dhash__act acts[MAXA];
static uint32_t nacts;

static void setup(void)
{
	cfs_log_init("test", CFS_LOG_ERROR);
}

TestSuite(dhash_get, .init = setup);


/* Take every queued action into acts[]; returns how many. */
static uint32_t drain(struct dhash__get *g)
{
	nacts = 0;
	while (nacts < MAXA && dhash__get_next(g, &acts[nacts]))
		nacts++;
	return nacts;
}

/* A lookup result naming nodes 1..n as the key's successors. */
static struct chord_lookup_result *succs(uint32_t n)
{
	static struct chord_lookup_result r;

	memset(&r, 0, sizeof(r));
	r.n = n;
	r.rpcs = 2;
	r.latency_us = 1000;
	for (uint32_t i = 0; i < n; i++)
		r.succ[i] = node((uint8_t)(i + 1));
	return &r;
}

static struct dhash_config cfg(uint32_t k, uint32_t hedge_ms)
{
	struct dhash_config c = { 0 };

	c.replicas = k;
	c.hedge_ms = hedge_ms;
	c.cache_push = DHASH_PUSH_NONE;
	return c;
}

/* A stand-in for dhash_verify: "good", "root:N" (a root of sequence N)
 * verify; anything else does not. */
static int fake_verify(uint32_t kind, const struct cfs_id *key, const uint8_t *p, size_t len,
                       uint64_t *ret_seq)
{
	char s[64];

	*ret_seq = 0;
	snprintf(s, sizeof(s), "%.*s", (int)len, (const char *)p);
	if (kind == DHASH_KIND_ROOT && strncmp(s, "root:", 5) == 0) {
		*ret_seq = strtoull(s + 5, NULL, 10);
		return 0;
	}
	return strcmp(s, "good") == 0 ? 0 : -EBADMSG;
}

static struct dhash__reply ok(uint32_t kind, const char *s)
{
	return (struct dhash__reply){ .status = 0, .kind = kind, .data = (const uint8_t *)s,
	                              .len = strlen(s), .lease_until = 1 };
}

static struct dhash__reply err(int status)
{
	return (struct dhash__reply){ .status = status };
}

/* Start a get on key 0x77.. with the fake verifier; the LOOKUP is checked and taken. */
static void start(struct dhash__get *g, const struct dhash_config *c)
{
	struct cfs_id key;

	memset(&key, 0x77, sizeof(key));
	dhash__get_init(g, &key, c);
	g->verify = fake_verify;
	cr_assert_eq(drain(g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_eq(acts[0].nsucc, c->replicas + DHASH_GET_SPARES);
	cr_assert_eq(acts[0].flags, CFS_LOOKUP_F_CHECK_BLOCK);
}

static void fetch(struct dhash__get *g, uint32_t ci, struct dhash__reply rep)
{
	dhash__get_on_fetch(g, ci, false, &rep);
}

/* The one FETCH now queued is to node x (by the candidate it names). */
static void expect_fetch_to(const struct dhash__get *g, uint8_t x)
{
	cr_assert_geq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FETCH, "action %d", acts[0].type);
	cr_assert_eq(g->cand[acts[0].i].id.b[0], x, "fetch to %u, not %u",
	             g->cand[acts[0].i].id.b[0], x);
}

/* A replica whose latency nobody knows (0: no measurement, no usable
 * coordinate) is asked after every replica with a known one. */
Test(dhash_get, unknown_latency_after_known)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	uint64_t rtt[3] = { 0, 200, 100 };

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), rtt);
	cr_assert_eq(drain(&g), 1);
	expect_fetch_to(&g, 3);
	cr_assert_eq(g.cand[1].id.b[0], 2);
	cr_assert_eq(g.cand[2].id.b[0], 1);
	dhash__get_fini(&g);
}

Test(dhash_get, nearest_replica_first_spares_last)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	uint64_t rtt[4] = { 300, 100, 200, 50 }; /* node 4 is a spare: last despite 50 */

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(4), rtt);
	cr_assert_eq(drain(&g), 1);
	expect_fetch_to(&g, 2);
	cr_assert_eq(acts[0].timeout_ms, 0); /* the transport's prediction */
	cr_assert_eq(g.cand[1].id.b[0], 3);
	cr_assert_eq(g.cand[2].id.b[0], 1);
	cr_assert_eq(g.cand[3].id.b[0], 4);
	cr_assert_eq(g.state, DHASH_GET_FETCH);
	cr_assert_eq(g.rpcs, 3); /* the lookup's two and the FETCH */
	cr_assert_eq(g.lookup_us, 1000);
	dhash__get_fini(&g);
}

/* Among the replicas within 20 % + 5 ms of the nearest, the one with the
 * fewest fetches out goes first; equally busy ones keep latency order,
 * and a farther replica never overtakes a near one, however busy. */
/* The first fetch goes to want[0], the candidates after it in want's
 * order (the spare, node 5, last). */
static void expect_order(const struct dhash_config *c, const uint64_t *rtt, const uint32_t *busy,
                         const uint8_t want[5])
{
	struct dhash__get g;

	start(&g, c);
	dhash__get_on_lookup_busy(&g, succs(5), rtt, busy);
	cr_assert_eq(drain(&g), 1);
	expect_fetch_to(&g, want[0]);
	for (int i = 1; i < 5; i++)
		cr_assert_eq(g.cand[i].id.b[0], want[i], "candidate %d: %u, not %u", i, g.cand[i].id.b[0],
		             want[i]);
	dhash__get_fini(&g);
}

Test(dhash_get, the_least_busy_of_the_near_replicas_first)
{
	struct dhash_config c = cfg(4, 0);
	uint64_t rtt[5] = { 145000, 80000, 82000, 101000, 1000 }; /* node 5: a spare */
	uint32_t busy[5] = { 0, 3, 1, 0, 0 };

	/* 101 ms: within 80 + 16 + 5, and idle; 145 ms is not as near as 80,
	 * idle or not */
	expect_order(&c, rtt, busy, (const uint8_t[]){ 4, 3, 2, 1, 5 });
	uint32_t even[5] = { 2, 2, 2, 2, 2 };
	expect_order(&c, rtt, even, (const uint8_t[]){ 2, 3, 4, 1, 5 });
	/* on a LAN (the nearest under DHASH_NEAR_SPREAD_MIN_US) the nearest
	 * first, however busy */
	uint64_t lan[5] = { 900, 300, 320, 400, 1000 };
	expect_order(&c, lan, busy, (const uint8_t[]){ 2, 3, 4, 1, 5 });
}

Test(dhash_get, holder_first_and_ring_order_option)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	uint64_t rtt[3] = { 300, 100, 200 };
	struct chord_lookup_result *r = succs(3);

	c.ring_order = true;
	start(&g, &c);
	r->has_block = true;
	r->checked = true; /* DONE and HAS_BLOCK: succ[] are the key's successors */
	r->holder = node(9);
	dhash__get_on_lookup(&g, r, rtt);
	drain(&g);
	expect_fetch_to(&g, 9);
	cr_assert_eq(g.cand[1].id.b[0], 1); /* ring order, not by latency */
	cr_assert_eq(g.cand[2].id.b[0], 2);
	cr_assert_eq(g.ncand, 4);
	dhash__get_fini(&g);
}

Test(dhash_get, duplicate_servers_asked_once)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	struct chord_lookup_result *r = succs(3);

	r->succ[2].addr = r->succ[0].addr; /* two virtual servers of one process */
	start(&g, &c);
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	cr_assert_eq(g.ncand, 2);
	dhash__get_fini(&g);
}

Test(dhash_get, timeout_then_the_next_then_second_tries_together)
{
	struct dhash__get g;
	struct dhash_config c = cfg(2, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(2), NULL);
	drain(&g);
	expect_fetch_to(&g, 1);
	fetch(&g, 0, err(-ETIMEDOUT));
	cr_assert_eq(drain(&g), 1);
	expect_fetch_to(&g, 2);
	fetch(&g, 1, err(-ETIMEDOUT));
	/* both silent: one more try each, at once, with the longer timeout */
	cr_assert_eq(drain(&g), 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_FETCH);
	cr_assert_eq(acts[1].type, DHASH_ACT_FETCH);
	cr_assert_eq(acts[0].timeout_ms, DHASH_RETRY_TIMEOUT_MS);
	cr_assert_eq(g.cand[acts[0].i].id.b[0], 1);
	cr_assert_eq(g.cand[acts[1].i].id.b[0], 2);
	fetch(&g, acts[0].i, err(-ETIMEDOUT)); /* a second try is not tried a third time */
	cr_assert_eq(drain(&g), 0);
	fetch(&g, acts[1].i, ok(DHASH_KIND_CHASH, "good"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(g.timeouts, 3);
	cr_assert_eq(g.fetch_timeouts, 3);
	cr_assert(dhash__get_idle(&g));
	dhash__get_fini(&g);
}

Test(dhash_get, corrupt_reply_skipped_with_real_verification)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	const char *good = "a block of content", *bad = "a block of c0ntent";
	struct cfs_id key;

	cr_assert_eq(dhash_block_key(DHASH_KIND_CHASH, (const uint8_t *)good, strlen(good), &key), 0);
	dhash__get_init(&g, &key, &c); /* dhash_verify, the real one */
	drain(&g);
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_CHASH, bad));
	cr_assert_eq(drain(&g), 1);
	expect_fetch_to(&g, 2);
	cr_assert_eq(g.bad, 1);
	fetch(&g, 1, ok(DHASH_KIND_CHASH, good));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].len, strlen(good));
	cr_assert_eq(memcmp(acts[0].data, good, acts[0].len), 0);
	dhash__get_fini(&g);
}

Test(dhash_get, miss_and_enoent_move_on)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	fetch(&g, 0, err(-ENOENT));
	drain(&g);
	expect_fetch_to(&g, 2);
	fetch(&g, 1, err(-EPROTO)); /* some other error: next as well */
	drain(&g);
	expect_fetch_to(&g, 3);
	fetch(&g, 2, ok(DHASH_KIND_CHASH, "good"));
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	dhash__get_fini(&g);
}

Test(dhash_get, hedge_fires_after_the_delay_and_the_hedge_wins)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 40);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	cr_assert_eq(drain(&g), 2);
	expect_fetch_to(&g, 1);
	cr_assert_eq(acts[1].type, DHASH_ACT_ARM_HEDGE);
	cr_assert_eq(acts[1].timeout_ms, 40);
	cr_assert_eq(acts[1].i, 0, "the timer is for the FETCH just sent");
	dhash__get_on_hedge(&g);
	cr_assert_eq(drain(&g), 2);
	expect_fetch_to(&g, 2);
	cr_assert(acts[0].hedge);
	cr_assert_eq(acts[1].type, DHASH_ACT_ARM_HEDGE);
	cr_assert_eq(acts[1].i, 1);
	cr_assert_eq(g.hedges, 1);
	cr_assert_eq(g.inflight, 2);
	dhash__get_on_fetch(&g, 1, true, &(struct dhash__reply){ .status = 0, .kind = DHASH_KIND_CHASH,
	                                                         .data = (const uint8_t *)"good", .len = 4 });
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(g.hedge_wins, 1);
	cr_assert_not(dhash__get_idle(&g)); /* the first FETCH is still out */
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "good")); /* too late: nothing more */
	cr_assert_eq(drain(&g), 0);
	cr_assert(dhash__get_idle(&g));
	dhash__get_on_hedge(&g); /* a stale timer */
	cr_assert_eq(drain(&g), 0);
	dhash__get_fini(&g);
}

Test(dhash_get, hedge_first_answer_wins_when_the_first_is_first)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 40);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	dhash__get_on_hedge(&g);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "good"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(g.hedge_wins, 0);
	dhash__get_on_fetch(&g, 1, true, &(struct dhash__reply){ .status = -ETIMEDOUT });
	cr_assert_eq(drain(&g), 0);
	cr_assert(dhash__get_idle(&g));
	dhash__get_fini(&g);
}

Test(dhash_get, hedge_not_armed_for_the_last_candidate_nor_fired_idle)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 40);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(1), NULL);
	cr_assert_eq(drain(&g), 1); /* nobody to hedge to: no timer */
	dhash__get_on_hedge(&g);
	cr_assert_eq(drain(&g), 0);
	cr_assert_eq(g.hedges, 0);
	dhash__get_fini(&g);
}

Test(dhash_get, a_failed_hedged_fetch_waits_for_the_first)
{
	struct dhash__get g;
	struct dhash_config c = cfg(2, 40);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(2), NULL);
	drain(&g);
	dhash__get_on_hedge(&g);
	drain(&g);
	dhash__get_on_fetch(&g, 1, true, &(struct dhash__reply){ .status = -ENOENT });
	cr_assert_eq(drain(&g), 0); /* the first may still answer */
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "good"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].status, 0);
	dhash__get_fini(&g);
}

/* Every candidate fails; then the relookup's do too. */
/* Every candidate fails, in both rounds (the second after a fresh
 * lookup): in round r, the server of node x answers errs[r][x - 1]
 * (-EBADMSG: bytes that do not verify). The get's final status. */
static int fail_rounds(uint32_t n, const int *const errs[2])
{
	struct dhash__get g;
	struct dhash_config c = cfg(n, 0);
	int st;

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(n), NULL);
	for (int round = 0; round < 2; round++) {
		while (drain(&g) && acts[0].type == DHASH_ACT_FETCH)
			for (uint32_t i = 0; i < nacts; i++) {
				int e = errs[round][g.cand[acts[i].i].id.b[0] - 1]; /* node(x) */
				fetch(&g, acts[i].i, e == -EBADMSG ? ok(DHASH_KIND_CHASH, "bad") : err(e));
			}
		if (round == 0) {
			cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
			cr_assert_eq(acts[0].flags, 0); /* to the successors this time */
			cr_assert_eq(g.relookups, 1);
			dhash__get_on_lookup(&g, succs(n), NULL);
		}
	}
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	st = acts[0].status;
	dhash__get_fini(&g);
	return st;
}

/* Every server answers first_round, then second_round. */
static int fail_all(uint32_t n, int first_round, int second_round)
{
	int a[CFS_MSG_MAX_NODES], b[CFS_MSG_MAX_NODES];

	for (uint32_t i = 0; i < n; i++) {
		a[i] = first_round;
		b[i] = second_round;
	}
	return fail_rounds(n, (const int *const[2]){ a, b });
}

/* Server x answers errs[x - 1] in both rounds. */
static int fail_each(uint32_t n, const int *errs)
{
	return fail_rounds(n, (const int *const[2]){ errs, errs });
}

Test(dhash_get, error_precedence_when_all_fail)
{
	/* the rule, once */
	cr_assert_eq(dhash__get_miss(0, -ETIMEDOUT), -ETIMEDOUT);
	cr_assert_eq(dhash__get_miss(-ETIMEDOUT, -ENOENT), -ENOENT);
	cr_assert_eq(dhash__get_miss(-ENOENT, -ETIMEDOUT), -ENOENT);
	cr_assert_eq(dhash__get_miss(-ENOENT, -EBADMSG), -EBADMSG);
	cr_assert_eq(dhash__get_miss(-EBADMSG, -ENOENT), -EBADMSG);
	cr_assert_eq(dhash__get_miss(-EBADMSG, -ETIMEDOUT), -EBADMSG);
	cr_assert_eq(dhash__get_miss(-ETIMEDOUT, -EPROTO), -ETIMEDOUT);
	cr_assert_eq(dhash__get_miss(0, -EPROTO), 0);
	/* and through the machine */
	cr_assert_eq(fail_all(3, -ETIMEDOUT, -ETIMEDOUT), -ETIMEDOUT);
	cr_assert_eq(fail_all(3, -ENOENT, -ENOENT), -ENOENT);
	cr_assert_eq(fail_all(3, -ETIMEDOUT, -ENOENT), -ENOENT);
	cr_assert_eq(fail_all(3, -EBADMSG, -ETIMEDOUT), -EBADMSG);
	cr_assert_eq(fail_all(3, -ENOENT, -EBADMSG), -EBADMSG);
	cr_assert_eq(fail_all(2, -EPROTO, -EPROTO), -ENOENT); /* nothing telling: missing */
}

/* One server sending garbage among servers that say "none" (a liar, or a
 * copy gone bad) does not make a missing block look damaged once a read
 * quorum of the k said "none" (4 of 6); with fewer, the bad bytes stand. */
Test(dhash_get, a_quorum_saying_none_outranks_one_bad_copy)
{
	int liar[6] = { -EBADMSG, -ENOENT, -ENOENT, -ENOENT, -ENOENT, -ENOENT };
	int few[6] = { -EBADMSG, -ENOENT, -ENOENT, -ENOENT, -ETIMEDOUT, -ETIMEDOUT };
	int bad[6] = { -EBADMSG, -EBADMSG, -EBADMSG, -ENOENT, -ENOENT, -ENOENT };

	cr_assert_eq(fail_each(6, liar), -ENOENT);
	cr_assert_eq(fail_each(6, few), -EBADMSG, "3 of 6 said none: not a quorum");
	cr_assert_eq(fail_each(6, bad), -EBADMSG);
}

Test(dhash_get, a_servers_own_ebadmsg_is_not_a_bad_block)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(1), NULL);
	drain(&g);
	fetch(&g, 0, err(-EBADMSG)); /* the server's error status, no bytes */
	cr_assert_eq(g.bad, 0);
	cr_assert_eq(g.miss, 0);
	dhash__get_fini(&g);
}

Test(dhash_get, relookup_finds_the_block)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(1), NULL);
	drain(&g);
	fetch(&g, 0, err(-ENOENT));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_eq(g.state, DHASH_GET_LOOKUP);
	dhash__get_on_lookup(&g, succs(2), NULL);
	drain(&g);
	expect_fetch_to(&g, 1);
	fetch(&g, 0, err(-ENOENT));
	drain(&g);
	expect_fetch_to(&g, 2);
	fetch(&g, 1, ok(DHASH_KIND_CHASH, "good"));
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(g.relookups, 1);
	cr_assert_eq(g.rpcs, 2 + 1 + 2 + 2);
	dhash__get_fini(&g);
}

Test(dhash_get, relookup_that_fails)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 0);
	struct chord_lookup_result *r;

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(1), NULL);
	drain(&g);
	fetch(&g, 0, err(-ETIMEDOUT));
	drain(&g);
	fetch(&g, acts[0].i, err(-ETIMEDOUT)); /* the second try */
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	r = succs(0);
	r->status = -EHOSTUNREACH;
	dhash__get_on_lookup(&g, r, NULL); /* the lookup's error wins */
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	dhash__get_fini(&g);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(1), NULL);
	drain(&g);
	fetch(&g, 0, err(-ENOENT));
	drain(&g);
	dhash__get_on_lookup_failed(&g, -ECANCELED); /* could not even start */
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ENOENT);
	dhash__get_fini(&g);
}

Test(dhash_get, lookup_failures)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	struct chord_lookup_result *r;

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(0), NULL);
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	cr_assert(dhash__get_idle(&g));
	dhash__get_fini(&g);

	start(&g, &c);
	r = succs(0);
	r->status = -ECANCELED;
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	cr_assert_eq(acts[0].status, -ECANCELED);
	dhash__get_fini(&g);
}

Test(dhash_get, cancelled_fetch_ends_the_get)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	fetch(&g, 0, err(-ECANCELED));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ECANCELED);
	dhash__get_fini(&g);
}

Test(dhash_get, root_mode_keeps_the_highest_sequence)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 40);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(4), NULL); /* 3 and a spare */
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:5"));
	/* every other candidate at once, the spare too; the hedge timer stops */
	cr_assert_eq(drain(&g), 4);
	cr_assert_eq(acts[0].type, DHASH_ACT_STOP_HEDGE);
	for (uint32_t i = 1; i < 4; i++) {
		cr_assert_eq(acts[i].type, DHASH_ACT_FETCH);
		cr_assert_eq(acts[i].i, i);
	}
	cr_assert_eq(g.state, DHASH_GET_ROOT);
	dhash__get_on_hedge(&g); /* no hedging in root mode */
	cr_assert_eq(drain(&g), 0);
	fetch(&g, 1, ok(DHASH_KIND_ROOT, "root:7"));
	cr_assert_eq(drain(&g), 0);
	fetch(&g, 2, ok(DHASH_KIND_ROOT, "root:3"));
	cr_assert_eq(drain(&g), 1, "the three replicas are the read quorum; the spare is not waited for");
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].kind, DHASH_KIND_ROOT);
	cr_assert_eq(acts[0].len, 6);
	cr_assert_eq(memcmp(acts[0].data, "root:7", 6), 0);
	cr_assert_not(dhash__get_idle(&g), "the spare's FETCH is still out");
	fetch(&g, 3, err(-ETIMEDOUT)); /* no second tries in root mode */
	cr_assert_eq(drain(&g), 0);
	cr_assert(dhash__get_idle(&g));
	dhash__get_fini(&g);
}

/* A root put is acknowledged by a majority of the k responsible servers,
 * so a root get may end once roots came from k - floor(k/2) + 1 of them
 * (4 of 6): the newest is among them even if one of them lies. A spare's
 * root is kept but is no vote; neither is "no such block", silence, or a
 * second server at an IP that already voted. */
Test(dhash_get, root_mode_ends_at_a_read_quorum)
{
	struct dhash__get g;
	struct dhash_config c = cfg(6, 0);

	cr_assert_eq(dhash__root_quorum(6), 4);
	cr_assert_eq(dhash__root_quorum(5), 4);
	cr_assert_eq(dhash__root_quorum(3), 3);
	cr_assert_eq(dhash__root_quorum(2), 2);
	cr_assert_eq(dhash__root_quorum(1), 1);
	start(&g, &c);
	struct chord_lookup_result *r = succs(9); /* 6 and three spares */
	cr_assert_eq(cfs_addr_from_ip(&r->succ[2].addr, "10.0.0.2", 4001), 0); /* succ[1]'s IP */
	dhash__get_on_lookup(&g, r, NULL);
	cr_assert_eq(g.nresp, 6, "the first six successors at distinct IPs");
	drain(&g);
	fetch(&g, 0, err(-ENOENT)); /* before any root: the next one is asked */
	cr_assert_eq(drain(&g), 1);
	fetch(&g, 1, ok(DHASH_KIND_ROOT, "root:4"));
	cr_assert_eq(drain(&g), 7, "every other candidate at once");
	fetch(&g, 2, ok(DHASH_KIND_ROOT, "root:4")); /* the same IP again */
	fetch(&g, 8, ok(DHASH_KIND_ROOT, "root:9")); /* a spare */
	fetch(&g, 3, err(-ETIMEDOUT));
	fetch(&g, 4, ok(DHASH_KIND_ROOT, "root:5"));
	fetch(&g, 5, ok(DHASH_KIND_ROOT, "root:5"));
	cr_assert_eq(drain(&g), 0, "three votes so far");
	fetch(&g, 6, ok(DHASH_KIND_ROOT, "root:2"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(memcmp(acts[0].data, "root:9", 6), 0, "the newest answer wins, a spare's too");
	cr_assert_not(dhash__get_idle(&g));
	fetch(&g, 7, ok(DHASH_KIND_ROOT, "root:1"));
	cr_assert_eq(drain(&g), 0, "a late answer after the end is dropped");
	cr_assert(dhash__get_idle(&g));
	dhash__get_fini(&g);

	/* fewer responsible servers than k (a short list, a small ring): no
	 * early end, every candidate answers */
	start(&g, &c);
	dhash__get_on_lookup(&g, succs(5), NULL);
	drain(&g);
	for (uint32_t i = 0; i < 4; i++) {
		fetch(&g, i, ok(DHASH_KIND_ROOT, "root:3"));
		drain(&g);
	}
	cr_assert_neq(g.state, DHASH_GET_DONE);
	fetch(&g, 4, ok(DHASH_KIND_ROOT, "root:3"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	dhash__get_fini(&g);
}

/* dhash_get_root: a volume's root key, whose replicas are all asked once
 * one answers with a root anyway, goes to every candidate at once, and
 * still ends at the read quorum. */
Test(dhash_get, a_root_get_asks_every_candidate_at_once)
{
	struct dhash__get g;
	struct dhash_config c = cfg(6, 40);

	start(&g, &c);
	g.all_first = true;
	dhash__get_on_lookup(&g, succs(8), NULL);
	cr_assert_eq(drain(&g), 8, "every candidate, the spares too, and no hedge timer");
	for (uint32_t i = 0; i < 8; i++) {
		cr_assert_eq(acts[i].type, DHASH_ACT_FETCH);
		cr_assert_eq(acts[i].i, i);
	}
	for (uint32_t i = 0; i < 3; i++) {
		fetch(&g, i, ok(DHASH_KIND_ROOT, "root:2"));
		cr_assert_eq(drain(&g), i == 0 ? 1 : 0); /* STOP_HEDGE with the first root */
	}
	fetch(&g, 4, ok(DHASH_KIND_ROOT, "root:3"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(memcmp(acts[0].data, "root:3", 6), 0);
	dhash__get_fini(&g);
}

Test(dhash_get, root_mode_bad_and_equal_roots)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:4"));
	cr_assert_eq(drain(&g), 2);
	fetch(&g, 1, ok(DHASH_KIND_ROOT, "rot:9")); /* does not verify: skipped */
	fetch(&g, 2, ok(DHASH_KIND_ROOT, "root:04")); /* same sequence, other bytes */
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(memcmp(acts[0].data, "root:4", 6), 0);
	cr_assert_eq(g.bad, 1);
	dhash__get_fini(&g);
}

Test(dhash_get, root_from_the_last_candidate_finishes_at_once)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 0);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(1), NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:2"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].kind, DHASH_KIND_ROOT);
	dhash__get_fini(&g);
}

Test(dhash_get, send_failures_move_on)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 40);

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	/* FETCH 0 and its timer queued; the send fails before the timer is armed */
	struct dhash__act a;
	cr_assert(dhash__get_next(&g, &a));
	cr_assert_eq(a.type, DHASH_ACT_FETCH);
	dhash__get_on_send_failed(&g, a.i, a.hedge);
	cr_assert_eq(drain(&g), 2); /* the stale timer is gone */
	expect_fetch_to(&g, 2);
	cr_assert_eq(acts[1].type, DHASH_ACT_ARM_HEDGE);
	cr_assert_eq(g.inflight, 1);
	dhash__get_fini(&g);

	/* every send fails: relookup, then the get fails as missing */
	c.hedge_ms = 0;
	start(&g, &c);
	dhash__get_on_lookup(&g, succs(2), NULL);
	while (dhash__get_next(&g, &a) && a.type == DHASH_ACT_FETCH)
		dhash__get_on_send_failed(&g, a.i, a.hedge);
	cr_assert_eq(a.type, DHASH_ACT_LOOKUP);
	dhash__get_on_lookup(&g, succs(2), NULL);
	while (dhash__get_next(&g, &a) && a.type == DHASH_ACT_FETCH)
		dhash__get_on_send_failed(&g, a.i, a.hedge);
	cr_assert_eq(a.type, DHASH_ACT_FINISH);
	cr_assert_eq(a.status, -ENOENT);
	cr_assert(dhash__get_idle(&g));
	dhash__get_fini(&g);
}

Test(dhash_get, send_failures_in_root_mode)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	struct dhash__act a;

	start(&g, &c);
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:1"));
	while (dhash__get_next(&g, &a) && a.type == DHASH_ACT_FETCH)
		dhash__get_on_send_failed(&g, a.i, a.hedge);
	cr_assert_eq(a.type, DHASH_ACT_FINISH);
	cr_assert_eq(memcmp(a.data, "root:1", 6), 0);
	dhash__get_fini(&g);
}

/* A get whose lookup went through nodes 20, 21, 22 and node 2 (a replica). */
static void cached_get(uint32_t mode, uint32_t want_pushes, const uint8_t *want)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	struct chord_lookup_result *r = succs(3);

	c.cache_push = mode;
	r->npath = 4;
	r->path[0] = node(20);
	r->path[1] = node(21);
	r->path[2] = node(2);
	r->path[3] = node(22);
	start(&g, &c);
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "good"));
	cr_assert_eq(drain(&g), want_pushes + 1);
	for (uint32_t i = 0; i < want_pushes; i++) {
		cr_assert_eq(acts[i].type, DHASH_ACT_CACHE_PUSH);
		cr_assert_eq(g.path[acts[i].i].id.b[0], want[i]);
		cr_assert_eq(acts[i].len, 4);
	}
	cr_assert_eq(acts[want_pushes].type, DHASH_ACT_FINISH);
	dhash__get_fini(&g);
}

Test(dhash_get, cache_push_modes)
{
	/* nearest the key first; the replica on the path is skipped */
	cached_get(DHASH_PUSH_PATH, 3, (const uint8_t[]){ 22, 21, 20 });
	cached_get(DHASH_PUSH_LAST, 1, (const uint8_t[]){ 22 });
	cached_get(DHASH_PUSH_NONE, 0, NULL);
}

Test(dhash_get, no_cache_push_of_a_root)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 0);
	struct chord_lookup_result *r = succs(1);

	c.cache_push = DHASH_PUSH_PATH;
	r->npath = 1;
	r->path[0] = node(20);
	start(&g, &c);
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:1"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	dhash__get_fini(&g);
}

Test(dhash_get, late_events_are_ignored)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);

	start(&g, &c);
	dhash__get_on_fetch(&g, 0, false, &(struct dhash__reply){ .status = -ETIMEDOUT });
	/* not asked for: ignored as far as the machine goes */
	dhash__get_on_lookup(&g, succs(3), NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "good"));
	drain(&g);
	dhash__get_on_lookup(&g, succs(3), NULL); /* a lookup after the end */
	dhash__get_on_lookup_failed(&g, -EIO);
	dhash__get_on_send_failed(&g, 1, false);
	cr_assert_eq(drain(&g), 0);
	dhash__get_fini(&g);
}

/* ------------------------------------------------------------ lying holders */

/* A hop that said "done, I hold it" naming only itself (the lookup could
 * not check its word: succ[] are its next hops): only it is asked; its
 * "not here" makes it a suspect and the key is looked up again at once,
 * without CHECK_BLOCK, and the real successors serve the block. */
Test(dhash_get, lying_holder_enoent_relooks_past_it)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	struct chord_lookup_result *r = succs(2);

	start(&g, &c);
	r->has_block = true;
	r->holder = node(9);
	r->checked = false;
	dhash__get_on_lookup(&g, r, NULL);
	cr_assert_eq(drain(&g), 1);
	expect_fetch_to(&g, 9);
	cr_assert_eq(g.ncand, 1, "the liar's next hops are not candidates");
	fetch(&g, 0, err(-ENOENT));
	cr_assert_eq(drain(&g), 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_SUSPECT);
	cr_assert_eq(g.cand[acts[0].i].id.b[0], 9);
	cr_assert_eq(acts[1].type, DHASH_ACT_LOOKUP);
	cr_assert_eq(acts[1].flags, 0, "the relookup goes to the successors");
	cr_assert_eq(g.suspects, 1);
	r = succs(3);
	r->checked = true;
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	expect_fetch_to(&g, 1);
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "good"));
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	dhash__get_fini(&g);
}

/* A holder among checked successors that sends garbage: a suspect, and
 * the successors are asked next, as for any bad copy. */
Test(dhash_get, lying_holder_garbage_then_successors)
{
	struct dhash__get g;
	struct dhash_config c = cfg(3, 0);
	struct chord_lookup_result *r = succs(3);

	c.ring_order = true;
	start(&g, &c);
	r->has_block = true;
	r->checked = true;
	r->holder = node(9);
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	expect_fetch_to(&g, 9);
	fetch(&g, 0, ok(DHASH_KIND_CHASH, "garbage"));
	cr_assert_eq(drain(&g), 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_SUSPECT);
	cr_assert_eq(acts[1].type, DHASH_ACT_FETCH);
	cr_assert_eq(g.cand[acts[1].i].id.b[0], 1);
	fetch(&g, acts[1].i, ok(DHASH_KIND_CHASH, "good"));
	drain(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(g.suspects, 1);
	dhash__get_fini(&g);
}

/* A silent holder is no suspect (silence proves nothing: a lost datagram,
 * a slow link) and, like a silent replica, gets a second try at the end. */
Test(dhash_get, silent_holder_is_no_suspect)
{
	struct dhash__get g;
	struct dhash_config c = cfg(1, 0);
	struct chord_lookup_result *r = succs(1);

	start(&g, &c);
	r->has_block = true;
	r->checked = true;
	r->holder = node(9);
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	fetch(&g, 0, err(-ETIMEDOUT));
	cr_assert_eq(drain(&g), 1, "no SUSPECT for a silent holder");
	cr_assert_eq(acts[0].type, DHASH_ACT_FETCH);
	cr_assert_eq(g.cand[acts[0].i].id.b[0], 1);
	fetch(&g, acts[0].i, err(-ETIMEDOUT));
	cr_assert_eq(drain(&g), 2, "the second tries go out together");
	cr_assert_eq(acts[0].type, DHASH_ACT_FETCH);
	cr_assert_eq(g.cand[acts[0].i].id.b[0], 9, "the holder's second try");
	cr_assert_eq(acts[1].type, DHASH_ACT_FETCH);
	cr_assert_eq(g.cand[acts[1].i].id.b[0], 1, "the replica's second try");
	cr_assert_eq(g.ncand, 4);
	cr_assert_eq(g.suspects, 0);
	dhash__get_fini(&g);
}

/* A hop claims to hold a volume's root and serves an old one
 * (it verifies: roots are signed, not hashed). Its answer is kept, but the
 * get asks the key's replicas too, and the newest root wins. */
Test(dhash_get, a_claimed_old_root_does_not_roll_back)
{
	struct dhash__get g;
	struct dhash_config c = cfg(2, 0);
	struct chord_lookup_result *r = succs(2);

	start(&g, &c);
	r->has_block = true;
	r->holder = node(9);
	r->checked = false;
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	expect_fetch_to(&g, 9);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:1"));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP, "a claim alone does not end a root get");
	cr_assert_eq(acts[0].flags, 0);
	r = succs(2);
	r->checked = true;
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:2"));
	drain(&g);
	fetch(&g, 1, err(-ETIMEDOUT));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(memcmp(acts[0].data, "root:2", 6), 0);
	dhash__get_fini(&g);

	/* the replicas all silent: the claimed root is still an answer */
	start(&g, &c);
	r = succs(2);
	r->has_block = true;
	r->holder = node(9);
	r->checked = false;
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	fetch(&g, 0, ok(DHASH_KIND_ROOT, "root:1"));
	drain(&g);
	r = succs(1);
	r->checked = true;
	dhash__get_on_lookup(&g, r, NULL);
	drain(&g);
	fetch(&g, 0, err(-ETIMEDOUT));
	drain(&g); /* its second try */
	fetch(&g, 1, err(-ETIMEDOUT));
	cr_assert_eq(drain(&g), 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(memcmp(acts[0].data, "root:1", 6), 0);
	dhash__get_fini(&g);
}

/* The default delay: twice the round trip to the server asked plus 15 ms
 * (DHash++ 5.2.2's margin), within [30 ms, 2 s]; 500 ms when nothing is
 * known of it. And the default config hedges that way. */
Test(dhash_get, automatic_hedge_delay)
{
	struct dhash_config c;

	cr_assert_eq(dhash_hedge_auto_ms(0), DHASH_HEDGE_UNKNOWN_MS);
	cr_assert_eq(dhash_hedge_auto_ms(100), DHASH_HEDGE_MIN_MS, "loopback: the floor");
	cr_assert_eq(dhash_hedge_auto_ms(10000), 35, "10 ms away");
	cr_assert_eq(dhash_hedge_auto_ms(200000), 415, "200 ms away");
	cr_assert_eq(dhash_hedge_auto_ms(5000000), DHASH_HEDGE_MAX_MS, "a wild estimate: the cap");
	dhash_config_default(&c);
	cr_assert_eq(c.hedge_ms, DHASH_HEDGE_AUTO);
}

/* The count of fetches out per server: up and down per address; a server
 * the full table has no room for counts as idle, and a freed entry is
 * taken again. */
Test(dhash_get, fetches_out_are_counted_per_server)
{
	struct dhash__busy b = { 0 };
	struct cfs_addr a[DHASH_BUSY_MAX + 1];
	char s[32];

	for (uint32_t i = 0; i <= DHASH_BUSY_MAX; i++) {
		snprintf(s, sizeof(s), "10.0.%u.%u:4460", i / 200, i % 200 + 1);
		cr_assert_eq(cfs_addr_parse(&a[i], s), 0);
	}
	dhash__busy_add(&b, &a[0]);
	dhash__busy_add(&b, &a[0]);
	dhash__busy_add(&b, &a[1]);
	cr_assert_eq(dhash__busy_of(&b, &a[0]), 2);
	cr_assert_eq(dhash__busy_of(&b, &a[1]), 1);
	cr_assert_eq(dhash__busy_of(&b, &a[2]), 0);
	dhash__busy_drop(&b, &a[2]); /* never counted: nothing */
	dhash__busy_drop(&b, &a[1]);
	cr_assert_eq(dhash__busy_of(&b, &a[1]), 0);
	for (uint32_t i = 1; i <= DHASH_BUSY_MAX; i++)
		dhash__busy_add(&b, &a[i]);
	cr_assert_eq(dhash__busy_of(&b, &a[DHASH_BUSY_MAX - 1]), 1);
	cr_assert_eq(dhash__busy_of(&b, &a[DHASH_BUSY_MAX]), 0, "no room: idle");
	dhash__busy_drop(&b, &a[0]);
	dhash__busy_drop(&b, &a[0]);
	dhash__busy_add(&b, &a[DHASH_BUSY_MAX]);
	cr_assert_eq(dhash__busy_of(&b, &a[DHASH_BUSY_MAX]), 1, "a freed entry is taken again");
	cr_assert_eq(b.n, DHASH_BUSY_MAX);
}
