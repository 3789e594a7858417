/* dhash: the put, have, refresh, refresh-many and locate state machines
 * (put_sm.c, refresh_sm.c, locate_sm.c) driven by scripted events, with
 * no socket. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"
#include "tests/unit/dhash_sm_fixtures.h"

#define MAXA 64

static struct dhash__act acts[MAXA];
static uint32_t nacts;

static void setup(void)
{
	cfs_log_init("test", CFS_LOG_ERROR);
}

TestSuite(dhash_put, .init = setup);
TestSuite(dhash_probe, .init = setup);
TestSuite(dhash_rmany, .init = setup);
TestSuite(dhash_locate, .init = setup);


/* A lookup result naming nodes first..first+n-1 as the key's successors. */
static struct chord_lookup_result *succs_from(uint8_t first, uint32_t n)
{
	static struct chord_lookup_result r;

	memset(&r, 0, sizeof(r));
	r.n = n;
	for (uint32_t i = 0; i < n; i++)
		r.succ[i] = node((uint8_t)(first + i));
	return &r;
}

static struct chord_lookup_result *succs(uint32_t n)
{
	return succs_from(1, n);
}

static struct chord_lookup_result *lookup_error(int status)
{
	struct chord_lookup_result *r = succs(0);

	r->status = status;
	return r;
}

static struct dhash__reply err(int status)
{
	return (struct dhash__reply){ .status = status };
}

#define DRAIN(next, sm)                                                          \
	do {                                                                     \
		nacts = 0;                                                       \
		while (nacts < MAXA && next(sm, &acts[nacts]))                   \
			nacts++;                                                 \
	} while (0)

/* ------------------------------------------------------------ put */

static const uint8_t yes = 1, no = 0;

static struct dhash__reply bit(const uint8_t *b, uint64_t lease)
{
	return (struct dhash__reply){ .status = 0, .data = b, .len = 1, .lease_until = lease };
}

static void put_start_k(struct dhash__put *p, uint32_t k)
{
	dhash__put_init(p, k, 1000);
	DRAIN(dhash__put_next, p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_eq(acts[0].nsucc, k + DHASH_GET_SPARES); /* virtual servers count once */
	cr_assert_eq(acts[0].flags, 0);
}

static void put_start(struct dhash__put *p)
{
	put_start_k(p, 3);
}

static void put_lookup(struct dhash__put *p, struct chord_lookup_result *r)
{
	dhash__put_on_lookup(p, r);
	DRAIN(dhash__put_next, p);
}

static void put_store(struct dhash__put *p, uint32_t ci, struct dhash__reply rep)
{
	dhash__put_on_store(p, ci, &rep);
	DRAIN(dhash__put_next, p);
}

static void put_have(struct dhash__put *p, uint32_t ci, struct dhash__reply rep)
{
	dhash__put_on_have(p, ci, &rep);
	DRAIN(dhash__put_next, p);
}

/* The second lookup after a primary's ack that nobody else bears out
 * (put_sm.c restore): it names the same servers again. */
#define same_again(p, r)                                                         \
	do {                                                                     \
		cr_assert_eq(nacts, 1);                                          \
		cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);                    \
		put_lookup(p, r);                                                \
	} while (0)

#define expect(at, type, i) expect_at(__LINE__, at, type, i)
static void expect_at(int line, uint32_t at, enum dhash__act_type type, uint32_t i)
{
	cr_assert_gt(nacts, at, "line %d: %u actions", line, nacts);
	cr_assert_eq(acts[at].type, type, "action %u: type %d, not %d", at, acts[at].type, type);
	if (type != DHASH_ACT_FINISH)
		cr_assert_eq(acts[at].i, i, "action %u: to %u, not %u", at, acts[at].i, i);
}

Test(dhash_put, majority_arithmetic)
{
	/* floor(k/2)+1 of the key's k servers */
	cr_assert_eq(dhash__majority(0), 0);
	cr_assert_eq(dhash__majority(1), 1);
	cr_assert_eq(dhash__majority(2), 2);
	cr_assert_eq(dhash__majority(3), 2);
	cr_assert_eq(dhash__majority(4), 3);
	cr_assert_eq(dhash__majority(6), 4);
}

Test(dhash_put, the_primary_and_one_have_make_a_majority_of_three)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(5)); /* the first 3 are responsible */
	cr_assert_eq(p.ncand, 3);
	cr_assert_eq(p.need, 2);
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_STORE, 0);
	put_store(&p, 0, (struct dhash__reply){ .lease_until = 777 });
	cr_assert_eq(nacts, 1); /* one HAVE: the ack is one vote of the two */
	expect(0, DHASH_ACT_HAVE, 1);
	put_have(&p, 1, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 777);
	cr_assert_eq(p.rpcs, 2);
	cr_assert_eq(p.haves, 1);
	cr_assert_eq(p.restores, 0);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);
}

Test(dhash_put, six_replicas_need_four)
{
	struct dhash__put p;

	put_start_k(&p, 6);
	put_lookup(&p, succs(6));
	cr_assert_eq(p.need, 4);
	put_store(&p, 0, err(0));
	cr_assert_eq(nacts, 3); /* three HAVEs at once */
	expect(0, DHASH_ACT_HAVE, 1);
	expect(2, DHASH_ACT_HAVE, 3);
	put_have(&p, 2, bit(&no, 0));
	cr_assert_eq(nacts, 1); /* one more for the "no" */
	expect(0, DHASH_ACT_HAVE, 4);
	put_have(&p, 1, bit(&yes, 0));
	put_have(&p, 3, bit(&yes, 0));
	cr_assert_eq(nacts, 0);
	put_have(&p, 4, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(p.haves, 4);
	dhash__put_fini(&p);
}

Test(dhash_put, a_timeout_is_retried_and_the_later_success_wins)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	expect(0, DHASH_ACT_STORE, 0); /* the successor first */
	put_store(&p, 0, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_STORE, 1);
	put_store(&p, 1, (struct dhash__reply){ .status = 0, .lease_until = 777 });
	expect(0, DHASH_ACT_HAVE, 2); /* the silent one is not asked again */
	put_have(&p, 2, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0); /* never a failed publish */
	cr_assert_eq(acts[0].lease, 777);
	cr_assert_eq(p.timeouts, 1);
	cr_assert_eq(p.rpcs, 3);
	put_store(&p, 0, err(-ETIMEDOUT)); /* nothing after the end */
	cr_assert_eq(nacts, 0);
	dhash__put_fini(&p);
}

/* A liar as the key's successor: it acknowledges the STORE,
 * pushes nothing, and the others say no. The put stores to them itself,
 * and is acknowledged only once they hold it; the liar's ack is withdrawn. */
Test(dhash_put, a_liar_that_acks_and_drops_is_worked_around)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0)); /* the liar */
	expect(0, DHASH_ACT_HAVE, 1);
	put_have(&p, 1, bit(&no, 0));
	expect(0, DHASH_ACT_HAVE, 2);
	put_have(&p, 2, err(-ETIMEDOUT)); /* silent counts as no */
	same_again(&p, succs(3));
	cr_assert_eq(nacts, 3);
	expect(0, DHASH_ACT_SUSPECT, 0); /* lookups route around it from now on */
	expect(1, DHASH_ACT_STORE, 1); /* ours, to the two others; never the liar */
	expect(2, DHASH_ACT_STORE, 2);
	cr_assert(p.suspect);
	cr_assert_eq(p.confirmed, 0);
	put_store(&p, 2, err(0));
	cr_assert_eq(nacts, 0); /* one real copy is no majority */
	put_store(&p, 1, (struct dhash__reply){ .lease_until = 500 });
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 500);
	cr_assert_eq(p.restores, 2);
	dhash__put_fini(&p);
}

/* An honest server that is not the key's successor in its own view
 * stores a client's STORE and pushes it nowhere: the put's list of the
 * key's servers was wrong. The second lookup names others, and the put
 * starts over on them with nobody accused, not with copies of our own on
 * servers where no lookup would find them. */
Test(dhash_put, a_wrong_list_is_looked_up_again_and_nobody_is_accused)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs_from(20, 3)); /* a stale answer: nodes 20..22 */
	put_store(&p, 0, err(0));
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_LOOKUP, 0);
	cr_assert_eq(acts[0].nsucc, 3 + DHASH_GET_SPARES);
	cr_assert_not(p.suspect);
	put_lookup(&p, succs(3)); /* the key's real servers */
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_STORE, 0);
	struct cfs_node n1 = node(1);
	cr_assert(cfs_id_eq(&p.cand[0].id, &n1.id));
	cr_assert_eq(p.moved, 1);
	put_store(&p, 0, err(0));
	expect(0, DHASH_ACT_HAVE, 1);
	put_have(&p, 1, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_not(p.suspect);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);
}

/* Looked up once more only: a second wrong-looking round weighs the
 * primary's word as before (a liar, then copies of our own). */
Test(dhash_put, the_second_lookup_happens_once)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs_from(20, 3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	cr_assert_eq(nacts, 3);
	expect(0, DHASH_ACT_SUSPECT, 0);
	expect(1, DHASH_ACT_STORE, 1);
	expect(2, DHASH_ACT_STORE, 2);
	dhash__put_fini(&p);
}

/* No second lookup (it failed, or could not be sent): the primary's
 * word is weighed on the list there is. */
Test(dhash_put, a_failed_second_lookup_falls_back_on_the_first_list)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	put_lookup(&p, lookup_error(-EHOSTUNREACH));
	cr_assert_eq(nacts, 3);
	expect(0, DHASH_ACT_SUSPECT, 0);
	dhash__put_fini(&p);

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	dhash__put_on_send_failed(&p, 0, DHASH_ACT_LOOKUP);
	DRAIN(dhash__put_next, &p);
	cr_assert_eq(nacts, 3);
	expect(0, DHASH_ACT_SUSPECT, 0);
	expect(1, DHASH_ACT_STORE, 1);
	dhash__put_fini(&p);
}

Test(dhash_put, the_liar_silent_to_have_and_one_store_fails)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, err(-ETIMEDOUT));
	put_have(&p, 2, bit(&no, 0));
	same_again(&p, succs(3));
	cr_assert_eq(nacts, 3);
	expect(0, DHASH_ACT_SUSPECT, 0);
	put_store(&p, 1, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 0);
	put_store(&p, 2, err(0));
	/* only one server is known to hold it: a distinct error */
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -EREMOTEIO);
	cr_assert_eq(acts[0].lease, 0);
	dhash__put_fini(&p);
}

/* A primary whose replicas are only silent (loss, a slow link) is not
 * accused: its ack is not counted alone, the put stores to the others
 * itself, and nothing is reported. */
Test(dhash_put, silence_is_no_evidence_against_the_primary)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, err(-ETIMEDOUT));
	put_have(&p, 2, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 2);
	expect(0, DHASH_ACT_STORE, 1);
	expect(1, DHASH_ACT_STORE, 2);
	cr_assert(!p.suspect);
	put_store(&p, 1, err(0));
	put_store(&p, 2, err(0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	dhash__put_fini(&p);
}

Test(dhash_put, an_honest_primary_with_one_replica_down_keeps_its_vote)
{
	struct dhash__put p;

	put_start_k(&p, 5);
	put_lookup(&p, succs(5));
	cr_assert_eq(p.need, 3);
	put_store(&p, 0, err(0));
	cr_assert_eq(nacts, 2);
	put_have(&p, 1, bit(&yes, 0));
	put_have(&p, 2, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_HAVE, 3);
	put_have(&p, 3, bit(&no, 0));
	expect(0, DHASH_ACT_HAVE, 4);
	put_have(&p, 4, bit(&no, 0));
	cr_assert_eq(nacts, 3); /* ours to 2, 3, 4 */
	cr_assert_not(p.suspect); /* one of its copies is there */
	put_store(&p, 3, err(0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_not(dhash__put_idle(&p)); /* two STOREs still out */
	put_store(&p, 2, err(-ETIMEDOUT));
	put_store(&p, 4, err(0));
	cr_assert_eq(nacts, 0);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);
}

Test(dhash_put, a_ring_smaller_than_k)
{
	struct dhash__put p;

	/* one server: its ack is the majority of one */
	put_start(&p);
	put_lookup(&p, succs(1));
	put_store(&p, 0, err(0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 1000); /* 0: granted as asked */
	dhash__put_fini(&p);

	/* two servers (or three virtual servers of two processes): both */
	put_start(&p);
	struct chord_lookup_result *r = succs(3);
	r->succ[1].addr = r->succ[0].addr;
	put_lookup(&p, r);
	cr_assert_eq(p.ncand, 2);
	cr_assert_eq(p.need, 2);
	put_store(&p, 0, err(0));
	expect(0, DHASH_ACT_HAVE, 1);
	cr_assert_eq(p.cand[1].id.b[0], 3);
	put_have(&p, 1, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	dhash__put_fini(&p);
}

/* One address holds up to 64 valid IDs at 64 ports. A liar answering
 * with its own IDs after the key is one vote, and the server's own view
 * (min_servers) keeps the bar at a majority of three: its ack and its
 * "yes" do not make a put. Nobody said "no", so nothing proves it lied (a
 * ring still forming answers the same): no suspicion. */
Test(dhash_put, one_address_is_one_vote)
{
	struct dhash__put p;
	struct chord_lookup_result *r = succs(3);

	for (uint32_t i = 1; i < 3; i++)
		cr_assert_eq(cfs_addr_from_ip(&r->succ[i].addr, "10.0.0.1", (uint16_t)(4000 + i)), 0);
	put_start(&p);
	p.min_servers = 3;
	put_lookup(&p, r);
	cr_assert_eq(p.ncand, 1, "three ports of one IP are one server");
	cr_assert_eq(p.need, 2);
	put_store(&p, 0, err(0)); /* the liar acks */
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(nacts, 1, "no suspicion without a server that said no");
	cr_assert_eq(acts[0].status, -EREMOTEIO, "one address cannot confirm a put alone");
	dhash__put_fini(&p);
}

/* A round where every server was silent goes again, with twice
 * the STORE timeout, before the put fails */
Test(dhash_put, all_silent_fails_with_timeout)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(2));
	cr_assert_eq(acts[0].timeout_ms, 0); /* the driver's default the first round */
	put_store(&p, 0, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_STORE, 1);
	put_store(&p, 1, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_STORE, 0); /* the round again */
	cr_assert_eq(acts[0].timeout_ms, 2 * DHASH_STORE_TIMEOUT_MS);
	put_store(&p, 0, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_STORE, 1);
	cr_assert_eq(acts[0].timeout_ms, 2 * DHASH_STORE_TIMEOUT_MS);
	put_store(&p, 1, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(p.timeouts, 4);
	cr_assert_eq(acts[0].status, -ETIMEDOUT);
	cr_assert_eq(acts[0].lease, 0);
	dhash__put_fini(&p);
}

Test(dhash_put, a_refusal_ends_the_put)
{
	static const int refusals[] = { -EDQUOT, -EBADMSG, -ESTALE, -ENOSPC };

	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		struct dhash__put p;
		put_start(&p);
		put_lookup(&p, succs(3));
		put_store(&p, 0, err(refusals[i]));
		cr_assert_eq(nacts, 1);
		expect(0, DHASH_ACT_FINISH, 0);
		cr_assert_eq(acts[0].status, refusals[i]);
		dhash__put_fini(&p);
	}
}

/* A server whose operator denies the key refuses for itself: the put goes
 * on to the next server, and the others make the majority. */
Test(dhash_put, a_denial_moves_on_to_the_next_server)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(DHASH_DENIED));
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_STORE, 1);
	put_store(&p, 1, (struct dhash__reply){ .status = 0, .lease_until = 777 });
	expect(0, DHASH_ACT_HAVE, 2); /* the denier is not asked: it said no */
	put_have(&p, 2, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(p.timeouts, 0); /* a refusal, not silence */
	dhash__put_fini(&p);
}

Test(dhash_put, denied_everywhere_fails_with_the_denial)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	for (uint32_t i = 0; i < 3; i++) {
		expect(0, DHASH_ACT_STORE, i);
		put_store(&p, i, err(DHASH_DENIED));
	}
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, DHASH_DENIED);
	dhash__put_fini(&p);
}

Test(dhash_put, a_refusal_of_our_own_store_is_the_error)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	same_again(&p, succs(3));
	put_store(&p, 1, err(-ENOSPC));
	put_store(&p, 2, err(0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -ENOSPC);
	dhash__put_fini(&p);
}

Test(dhash_put, nonce_challenge_answered_once)
{
	struct dhash__put p;
	struct cfs_node n1 = node(1);
	uint8_t nonce[CFS_NONCE_BYTES];

	memset(nonce, 0xab, sizeof(nonce));
	put_start(&p);
	put_lookup(&p, succs(3));
	struct dhash__reply ch = { .status = 0, .flags = DHASH_STORE_R_CHALLENGE, .nonce = nonce,
	                           .from = &n1.addr };
	put_store(&p, 0, ch);
	/* CFS 5.4: keep the nonce, then the same server again */
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_KEEP_NONCE);
	cr_assert(cfs_addr_eq(&acts[0].addr, &n1.addr));
	cr_assert_eq(memcmp(acts[0].nonce, nonce, CFS_NONCE_BYTES), 0);
	expect(1, DHASH_ACT_STORE, 0);
	put_store(&p, 0, ch); /* challenged again: the nonce did not help */
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -EACCES);
	dhash__put_fini(&p);
}

Test(dhash_put, challenge_then_success)
{
	struct dhash__put p;
	struct cfs_node n1 = node(1), n2 = node(2);
	uint8_t nonce[CFS_NONCE_BYTES] = { 1 };

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, (struct dhash__reply){ .flags = DHASH_STORE_R_CHALLENGE, .nonce = nonce,
	                                        .from = &n1.addr });
	put_store(&p, 0, (struct dhash__reply){ .lease_until = 5 });
	put_have(&p, 1, bit(&no, 0));
	put_have(&p, 2, bit(&no, 0));
	same_again(&p, succs(3));
	/* our own STOREs: each server challenges once for itself */
	put_store(&p, 1, (struct dhash__reply){ .flags = DHASH_STORE_R_CHALLENGE, .nonce = nonce,
	                                        .from = &n2.addr });
	expect(0, DHASH_ACT_KEEP_NONCE, 0);
	expect(1, DHASH_ACT_STORE, 1);
	put_store(&p, 1, (struct dhash__reply){ .lease_until = 9 });
	put_store(&p, 2, (struct dhash__reply){ .lease_until = 7 });
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 7); /* the least granted */
	dhash__put_fini(&p);
}

Test(dhash_put, a_root_is_stored_to_every_server)
{
	struct dhash__put p;

	put_start(&p);
	p.store_all = true; /* HAVE cannot tell an old root from the new one */
	put_lookup(&p, succs(3));
	cr_assert_eq(nacts, 3);
	for (uint32_t i = 0; i < 3; i++)
		expect(i, DHASH_ACT_STORE, i);
	put_store(&p, 2, err(-ESTALE)); /* a liar's refusal is one voice */
	put_store(&p, 0, err(0));
	cr_assert_eq(nacts, 0);
	put_store(&p, 1, err(0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	dhash__put_fini(&p);

	put_start(&p);
	p.store_all = true;
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(-ESTALE));
	put_store(&p, 1, err(-ESTALE));
	put_store(&p, 2, err(0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -ESTALE); /* the refusal keeps its meaning */
	dhash__put_fini(&p);
}

Test(dhash_put, send_failures_and_lookup_failures)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(2));
	dhash__put_on_send_failed(&p, 0, DHASH_ACT_STORE);
	DRAIN(dhash__put_next, &p);
	expect(0, DHASH_ACT_STORE, 1);
	dhash__put_on_send_failed(&p, 1, DHASH_ACT_STORE);
	DRAIN(dhash__put_next, &p);
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	dhash__put_on_send_failed(&p, 1, DHASH_ACT_HAVE); /* as if silent */
	DRAIN(dhash__put_next, &p);
	expect(0, DHASH_ACT_HAVE, 2);
	put_have(&p, 2, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);

	put_start(&p);
	put_lookup(&p, succs(0));
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	dhash__put_fini(&p);

	put_start(&p);
	put_lookup(&p, lookup_error(-ECANCELED));
	cr_assert_eq(acts[0].status, -ECANCELED);
	put_lookup(&p, succs(1)); /* late: ignored */
	dhash__put_on_send_failed(&p, 0, DHASH_ACT_STORE);
	DRAIN(dhash__put_next, &p);
	cr_assert_eq(nacts, 0);
	dhash__put_fini(&p);

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(0));
	put_have(&p, 1, err(-ECANCELED));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -ECANCELED);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);
}

/* ------------------------------------------------------------ have */

static void probe_reply(struct dhash__probe *pr, struct dhash__reply rep)
{
	dhash__probe_on_reply(pr, &rep);
	DRAIN(dhash__probe_next, pr);
}

static void have_start(struct dhash__probe *pr, struct chord_lookup_result *r)
{
	dhash__probe_init(pr, false, 3, 0);
	DRAIN(dhash__probe_next, pr);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_eq(acts[0].nsucc, 3 + DHASH_GET_SPARES);
	dhash__probe_on_lookup(pr, r);
	DRAIN(dhash__probe_next, pr);
}

Test(dhash_probe, have_asks_a_majority_at_once_and_the_next_when_silent)
{
	struct dhash__probe pr;

	have_start(&pr, succs(5));
	cr_assert_eq(nacts, 2); /* 2 of 3 */
	expect(0, DHASH_ACT_HAVE, 0);
	expect(1, DHASH_ACT_HAVE, 1);
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_HAVE, 2);
	probe_reply(&pr, bit(&yes, 0));
	cr_assert_eq(nacts, 0);
	probe_reply(&pr, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 1);
	cr_assert_eq(pr.timeouts, 1);
	cr_assert(dhash__probe_idle(&pr));
	dhash__probe_fini(&pr);
}

/* The liar says yes, the honest say no: absent, and the
 * publisher sends the block. */
Test(dhash_probe, one_liar_saying_yes_is_not_present)
{
	struct dhash__probe pr;

	have_start(&pr, succs(3));
	probe_reply(&pr, bit(&yes, 0)); /* the liar */
	cr_assert_eq(nacts, 0);
	probe_reply(&pr, bit(&no, 0));
	expect(0, DHASH_ACT_HAVE, 2);
	probe_reply(&pr, bit(&no, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 0);
	dhash__probe_fini(&pr);

	/* two no's: a majority can no longer be reached; the third not asked */
	have_start(&pr, succs(3));
	probe_reply(&pr, bit(&no, 0));
	expect(0, DHASH_ACT_HAVE, 2);
	probe_reply(&pr, bit(&no, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].found, 0);
	cr_assert_not(dhash__probe_idle(&pr)); /* the third HAVE is out */
	probe_reply(&pr, bit(&yes, 0));
	cr_assert_eq(nacts, 0);
	cr_assert(dhash__probe_idle(&pr));
	dhash__probe_fini(&pr);
}

Test(dhash_probe, have_absent_and_all_silent)
{
	struct dhash__probe pr;

	have_start(&pr, succs(1));
	probe_reply(&pr, bit(&no, 0));
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 0);
	dhash__probe_fini(&pr);

	have_start(&pr, succs(1)); /* a ring of one: its yes is the majority */
	probe_reply(&pr, bit(&yes, 0));
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 1);
	dhash__probe_fini(&pr);

	have_start(&pr, succs(2));
	cr_assert_eq(nacts, 2);
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 0); /* 2 of 2 can no longer say yes, but nobody answered yet */
	dhash__probe_on_send_failed(&pr); /* the second could not be sent */
	DRAIN(dhash__probe_next, &pr);
	/* Nobody answered and one timed out: all asked again, with
	 * DHASH_RETRY_TIMEOUT_MS, then twice that, before "unreachable" */
	cr_assert_eq(nacts, 2);
	expect(0, DHASH_ACT_HAVE, 0);
	expect(1, DHASH_ACT_HAVE, 1);
	cr_assert_eq(acts[0].timeout_ms, DHASH_RETRY_TIMEOUT_MS);
	probe_reply(&pr, err(-ETIMEDOUT));
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[1].timeout_ms, 2 * DHASH_RETRY_TIMEOUT_MS);
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 0);
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH); /* nobody answered: not "absent" */
	cr_assert(dhash__probe_idle(&pr));
	dhash__probe_fini(&pr);

	/* no HAVE could be sent at all: no round again (nothing was silent) */
	have_start(&pr, succs(1));
	dhash__probe_on_send_failed(&pr);
	DRAIN(dhash__probe_next, &pr);
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	dhash__probe_fini(&pr);

	/* silent servers: the rest are asked in turn, then every round again,
	 * before "unreachable" */
	have_start(&pr, succs(3));
	probe_reply(&pr, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_HAVE, 2);
	probe_reply(&pr, err(-ETIMEDOUT));
	probe_reply(&pr, err(-ETIMEDOUT));
	for (uint32_t round = 1; round <= DHASH_HAVE_RETRIES; round++) {
		cr_assert_eq(nacts, 2);
		expect(0, DHASH_ACT_HAVE, 0);
		expect(1, DHASH_ACT_HAVE, 1);
		cr_assert_eq(acts[0].timeout_ms, DHASH_RETRY_TIMEOUT_MS << (round - 1));
		probe_reply(&pr, err(-ETIMEDOUT));
		expect(0, DHASH_ACT_HAVE, 2);
		probe_reply(&pr, err(-ETIMEDOUT));
		probe_reply(&pr, err(-ETIMEDOUT));
	}
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	cr_assert_eq(pr.timeouts, 3 * (1 + DHASH_HAVE_RETRIES));
	dhash__probe_fini(&pr);

	have_start(&pr, succs(3));
	probe_reply(&pr, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_HAVE, 2);
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 0);
	probe_reply(&pr, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0); /* answered, but one yes of three */
	cr_assert_eq(acts[0].found, 0);
	dhash__probe_fini(&pr);

	have_start(&pr, lookup_error(-EHOSTUNREACH));
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	dhash__probe_fini(&pr);

	have_start(&pr, succs(2));
	probe_reply(&pr, err(-ECANCELED));
	cr_assert_eq(acts[0].status, -ECANCELED);
	dhash__probe_fini(&pr);
}

/* ------------------------------------------------------------ refresh */

static void refresh_start(struct dhash__probe *pr, struct chord_lookup_result *r)
{
	dhash__probe_init(pr, true, 3, 9000);
	DRAIN(dhash__probe_next, pr);
	dhash__probe_on_lookup(pr, r);
	DRAIN(dhash__probe_next, pr);
}

Test(dhash_probe, refresh_every_distinct_replica_at_once)
{
	struct dhash__probe pr;
	struct chord_lookup_result *r = succs(5);

	r->succ[1].addr = r->succ[0].addr; /* one process, two virtual servers */
	refresh_start(&pr, r);
	/* the distinct servers among the first k = 3 */
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_REFRESH);
	cr_assert_eq(acts[0].timeout_ms, 0);
	cr_assert_eq(pr.cand[acts[1].i].id.b[0], 3);
	probe_reply(&pr, bit(&yes, 8000));
	cr_assert_eq(nacts, 0);
	probe_reply(&pr, bit(&yes, 0)); /* 0: what was asked */
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 2);
	cr_assert_eq(acts[0].lease, 8000); /* the least */
	dhash__probe_fini(&pr);
}

Test(dhash_probe, refresh_retries_the_silent_once)
{
	struct dhash__probe pr;

	refresh_start(&pr, succs(2));
	probe_reply(&pr, err(-ETIMEDOUT));
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_REFRESH);
	cr_assert_eq(acts[0].timeout_ms, DHASH_RETRY_TIMEOUT_MS);
	probe_reply(&pr, err(-ETIMEDOUT));
	probe_reply(&pr, bit(&no, 0)); /* answered, without the block */
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 0);
	cr_assert_eq(acts[0].lease, 0);
	dhash__probe_fini(&pr);

	refresh_start(&pr, succs(1));
	probe_reply(&pr, err(-ETIMEDOUT));
	probe_reply(&pr, err(-ETIMEDOUT));
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ETIMEDOUT); /* not "absent" */
	dhash__probe_fini(&pr);
}

Test(dhash_probe, refresh_send_failures_and_cancel)
{
	struct dhash__probe pr;

	refresh_start(&pr, succs(2));
	dhash__probe_on_send_failed(&pr);
	dhash__probe_on_send_failed(&pr);
	DRAIN(dhash__probe_next, &pr);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	dhash__probe_fini(&pr);

	refresh_start(&pr, succs(1));
	probe_reply(&pr, err(-ETIMEDOUT));
	dhash__probe_on_send_failed(&pr); /* the retry could not be sent */
	DRAIN(dhash__probe_next, &pr);
	cr_assert_eq(acts[0].status, -ETIMEDOUT);
	dhash__probe_fini(&pr);

	refresh_start(&pr, succs(2));
	probe_reply(&pr, err(-ECANCELED));
	cr_assert_eq(nacts, 0); /* waits for the other */
	probe_reply(&pr, err(-ECANCELED));
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ECANCELED);
	probe_reply(&pr, err(0)); /* late */
	cr_assert_eq(nacts, 0);
	dhash__probe_fini(&pr);
}

/* ------------------------------------------------------------ refresh many */

static struct cfs_id keyn(uint32_t i)
{
	struct cfs_id k = { 0 };

	memcpy(k.b, &i, sizeof(i));
	k.b[31] = 0x5a;
	return k;
}

static void rmany_start(struct dhash__rmany *rm, uint32_t n, uint32_t k)
{
	struct cfs_id *keys = calloc(n, sizeof(*keys));

	for (uint32_t i = 0; i < n; i++)
		keys[i] = keyn(i);
	dhash__rmany_init(rm, keys, n, k, 5000);
	free(keys);
	for (uint32_t i = 0; i < n; i++) {
		struct dhash__act a;
		cr_assert(dhash__rmany_next(rm, &a));
		cr_assert_eq(a.type, DHASH_ACT_LOOKUP);
		cr_assert_eq(a.i, i);
		cr_assert_eq(a.nsucc, k);
	}
}

static void rmany_reply(struct dhash__rmany *rm, uint32_t ci, const uint8_t *bits, size_t len,
                        uint64_t lease)
{
	struct dhash__reply rep = { .status = 0, .data = bits, .len = len, .lease_until = lease };

	dhash__rmany_on_reply(rm, ci, &rep);
	DRAIN(dhash__rmany_next, rm);
}

Test(dhash_rmany, one_refresh_per_server)
{
	struct dhash__rmany rm;
	struct cfs_id keys[4];

	rmany_start(&rm, 3, 2);
	/* key 0 on servers 1, 2; key 1 on 2, 3; key 2 on 1, 1 (one process), 3 */
	dhash__rmany_on_lookup(&rm, 0, succs_from(1, 2), 0);
	dhash__rmany_on_lookup(&rm, 1, succs_from(2, 2), 0);
	struct chord_lookup_result *r = succs_from(1, 3);
	r->succ[1].addr = r->succ[0].addr;
	dhash__rmany_on_lookup(&rm, 2, r, 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 3); /* servers 1, 2, 3 */
	for (uint32_t c = 0; c < 3; c++) {
		cr_assert_eq(acts[c].type, DHASH_ACT_REFRESH);
		cr_assert_eq(acts[c].i, c);
		cr_assert_eq(acts[c].timeout_ms, 0);
	}
	cr_assert_eq(dhash__rmany_call_node(&rm, 0)->id.b[0], 1);
	cr_assert_eq(dhash__rmany_call_keys(&rm, 0, keys), 2); /* keys 0 and 2 */
	cr_assert_eq(keys[0].b[0], 0);
	cr_assert_eq(keys[1].b[0], 2);
	cr_assert_eq(dhash__rmany_call_keys(&rm, 1, keys), 2); /* server 2: keys 0, 1 */
	cr_assert_eq(dhash__rmany_call_keys(&rm, 2, keys), 2); /* server 3: keys 1, 2 */

	rmany_reply(&rm, 0, &(uint8_t){ 0x1 }, 1, 7000); /* key 0 there, key 2 not */
	rmany_reply(&rm, 1, &(uint8_t){ 0x0 }, 1, 0);
	cr_assert_eq(nacts, 0);
	rmany_reply(&rm, 2, &(uint8_t){ 0x1 }, 1, 0); /* key 1 there, lease as asked */
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].len, 3);
	cr_assert_eq(acts[0].data[0], 0x3); /* keys 0 and 1; key 2 answered absent */
	cr_assert_eq(acts[0].lease, 5000);
	dhash__rmany_fini(&rm);
}

/* A coded key's bit needs m of its n holders: renewed on fewer, the block
 * cannot be read, and the publisher must hear that it is not whole. */
Test(dhash_rmany, coded_keys_need_m_holders)
{
	struct dhash__rmany rm;

	rmany_start(&rm, 2, 4); /* 2-of-4: every holder of both keys */
	dhash__rmany_need(&rm, 2);
	dhash__rmany_on_lookup(&rm, 0, succs_from(1, 4), 0);
	dhash__rmany_on_lookup(&rm, 1, succs_from(1, 4), 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 4); /* one REFRESH per holder, naming both keys */
	struct cfs_id keys[2];
	for (uint32_t c = 0; c < 4; c++)
		cr_assert_eq(dhash__rmany_call_keys(&rm, c, keys), 2);
	/* key 0 on holders 1 and 3; key 1 on holder 2 only */
	rmany_reply(&rm, 0, &(uint8_t){ 0x1 }, 1, 0);
	rmany_reply(&rm, 1, &(uint8_t){ 0x2 }, 1, 0);
	rmany_reply(&rm, 2, &(uint8_t){ 0x1 }, 1, 0);
	rmany_reply(&rm, 3, &(uint8_t){ 0x0 }, 1, 0);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].data[0], 0x1); /* key 1 on one holder of the two it needs */
	dhash__rmany_fini(&rm);
}

Test(dhash_rmany, chunks_of_many_keys)
{
	struct dhash__rmany rm;
	uint32_t n = DHASH_REFRESH_CHUNK + 10;
	struct cfs_id *keys = calloc(DHASH_REFRESH_CHUNK, sizeof(*keys));
	uint8_t all[DHASH_REFRESH_CHUNK / 8];

	memset(all, 0xff, sizeof(all));
	rmany_start(&rm, n, 1);
	for (uint32_t i = 0; i < n; i++)
		dhash__rmany_on_lookup(&rm, i, succs(1), 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 2);
	cr_assert_eq(dhash__rmany_call_keys(&rm, 0, keys), DHASH_REFRESH_CHUNK);
	cr_assert_eq(dhash__rmany_call_keys(&rm, 1, keys), 10);
	cr_assert_eq(keys[0].b[0], DHASH_REFRESH_CHUNK & 0xff);
	rmany_reply(&rm, 1, all, 1, 0); /* too short for 10 keys: as if silent */
	rmany_reply(&rm, 0, all, sizeof(all), 0);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ETIMEDOUT);
	cr_assert_null(acts[0].data);
	dhash__rmany_fini(&rm);
	free(keys);
}

Test(dhash_rmany, a_silent_server_is_asked_once_more)
{
	struct dhash__rmany rm;
	struct dhash__reply to = err(-ETIMEDOUT);

	rmany_start(&rm, 1, 2);
	dhash__rmany_on_lookup(&rm, 0, succs(2), 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 2);
	dhash__rmany_on_reply(&rm, 0, &to);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_REFRESH);
	cr_assert_eq(acts[0].i, 0);
	cr_assert_eq(acts[0].timeout_ms, DHASH_RETRY_TIMEOUT_MS);
	dhash__rmany_on_reply(&rm, 0, &to); /* silent twice: given up */
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 0);
	dhash__rmany_on_reply(&rm, 1, &to);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(acts[0].type, DHASH_ACT_REFRESH); /* the other's second try */
	rmany_reply(&rm, 1, &(uint8_t){ 1 }, 1, 0);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0); /* one server answered for the key */
	cr_assert_eq(acts[0].data[0], 1);
	dhash__rmany_fini(&rm);
}

Test(dhash_rmany, lookup_and_send_failures)
{
	struct dhash__rmany rm;

	rmany_start(&rm, 2, 1);
	dhash__rmany_on_lookup(&rm, 0, NULL, -ECANCELED); /* could not start */
	dhash__rmany_on_lookup(&rm, 1, succs(1), 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 1);
	dhash__rmany_on_reply(&rm, 0, NULL); /* the REFRESH could not be sent */
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ECANCELED); /* the lookup's error first */
	dhash__rmany_fini(&rm);

	rmany_start(&rm, 2, 1);
	dhash__rmany_on_lookup(&rm, 0, succs(0), 0);
	dhash__rmany_on_lookup(&rm, 1, lookup_error(-EHOSTUNREACH), 0);
	DRAIN(dhash__rmany_next, &rm);
	cr_assert_eq(nacts, 1); /* no server to ask: done */
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	dhash__rmany_fini(&rm);
}

/* ------------------------------------------------------------ locate */

static int seq_verify(uint32_t kind, const struct cfs_id *key, const uint8_t *p, size_t len,
                      uint64_t *ret_seq)
{
	*ret_seq = len > 1 ? p[1] : 0;
	return len >= 1 && p[0] == 'G' ? 0 : -EBADMSG;
}

Test(dhash_locate, copies_classified)
{
	struct dhash__locate lc;
	struct cfs_id key = { { 7 } };
	struct chord_lookup_result *r = succs(7);

	dhash__locate_init(&lc, &key, 6);
	lc.verify = seq_verify;
	DRAIN(dhash__locate_next, &lc);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_eq(acts[0].nsucc, 6);
	r->succ[5].addr = r->succ[4].addr; /* one server counts once: 6 distinct of 7 */
	dhash__locate_on_lookup(&lc, r);
	DRAIN(dhash__locate_next, &lc);
	cr_assert_eq(nacts, 6);
	cr_assert_eq(lc.r.n, 6);
	struct dhash__reply good = { .data = (const uint8_t *)"G\x05", .len = 2, .lease_until = 9 };
	struct dhash__reply newer = { .data = (const uint8_t *)"G\x06", .len = 2, .lease_until = 9 };
	struct dhash__reply bad = { .data = (const uint8_t *)"B", .len = 1, .lease_until = 9 };
	struct dhash__reply cached = { .data = (const uint8_t *)"G\x06", .len = 2, .lease_until = 0 };
	struct dhash__reply missing = err(-ENOENT), silent = err(-ETIMEDOUT);
	dhash__locate_on_fetch(&lc, 0, &good);
	dhash__locate_on_fetch(&lc, 1, &newer);
	dhash__locate_on_fetch(&lc, 2, &bad);
	dhash__locate_on_fetch(&lc, 3, &cached);
	dhash__locate_on_fetch(&lc, 4, &missing);
	DRAIN(dhash__locate_next, &lc);
	cr_assert_eq(nacts, 0);
	dhash__locate_on_fetch(&lc, 5, &silent);
	DRAIN(dhash__locate_next, &lc);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(lc.r.state[0], DHASH_COPY_STALE);
	cr_assert_eq(lc.r.state[1], DHASH_COPY_GOOD);
	cr_assert_eq(lc.r.state[2], DHASH_COPY_BAD);
	cr_assert_eq(lc.r.state[3], DHASH_COPY_MISSING);
	cr_assert_eq(lc.r.state[4], DHASH_COPY_MISSING);
	cr_assert_eq(lc.r.state[5], DHASH_COPY_SILENT);
	cr_assert_eq(lc.r.good, 1);
	dhash__locate_fini(&lc);
}

Test(dhash_locate, lookup_failure_and_unsent)
{
	struct dhash__locate lc;
	struct cfs_id key = { { 7 } };

	dhash__locate_init(&lc, &key, 3);
	DRAIN(dhash__locate_next, &lc);
	dhash__locate_on_lookup(&lc, lookup_error(-EHOSTUNREACH));
	DRAIN(dhash__locate_next, &lc);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	cr_assert_eq(lc.r.n, 0);
	dhash__locate_fini(&lc);

	dhash__locate_init(&lc, &key, 3);
	DRAIN(dhash__locate_next, &lc);
	dhash__locate_on_lookup(&lc, succs(1));
	DRAIN(dhash__locate_next, &lc);
	dhash__locate_on_fetch(&lc, 0, NULL);
	DRAIN(dhash__locate_next, &lc);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(lc.r.state[0], DHASH_COPY_SILENT);
	cr_assert_eq(lc.r.good, 0);
	dhash__locate_fini(&lc);
}

/* ------------------------------------------------------------ transient timeouts */

/* With --replicas 1 one timed-out HAVE (or STORE) with
 * no other server to ask failed the whole publish. The reply lost (or
 * late: the transport drops a reply to a call that timed out) is scripted
 * here as -ETIMEDOUT; the next round's answer carries the put or have. */
Test(dhash_put, k1_a_lost_store_reply_is_retried_and_acknowledged)
{
	struct dhash__put p;

	put_start_k(&p, 1);
	put_lookup(&p, succs(1));
	cr_assert_eq(p.need, 1);
	expect(0, DHASH_ACT_STORE, 0);
	put_store(&p, 0, err(-ETIMEDOUT)); /* the ack lost or late */
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_STORE, 0);
	cr_assert_eq(acts[0].timeout_ms, 2 * DHASH_STORE_TIMEOUT_MS);
	put_store(&p, 0, (struct dhash__reply){ .lease_until = 555 });
	cr_assert_eq(nacts, 1);
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 555);
	cr_assert_eq(p.timeouts, 1);
	cr_assert(dhash__put_idle(&p));
	dhash__put_fini(&p);
}

/* k = 3: the primary silent once, the next one too; the second round's
 * primary acks and a HAVE makes the majority: acknowledged, not failed. */
Test(dhash_put, every_server_silent_once_then_a_majority)
{
	struct dhash__put p;

	put_start(&p);
	put_lookup(&p, succs(3));
	put_store(&p, 0, err(-ETIMEDOUT));
	put_store(&p, 1, err(-ETIMEDOUT));
	put_store(&p, 2, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_STORE, 0);
	put_store(&p, 0, err(0));
	expect(0, DHASH_ACT_HAVE, 1);
	put_have(&p, 1, bit(&yes, 0));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	dhash__put_fini(&p);

	/* a refusal in the second round is still the error */
	put_start(&p);
	put_lookup(&p, succs(1));
	put_store(&p, 0, err(-ETIMEDOUT));
	put_store(&p, 0, err(-ENOSPC));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, -ENOSPC);
	dhash__put_fini(&p);
}

Test(dhash_probe, k1_a_lost_have_reply_is_asked_again)
{
	struct dhash__probe pr;
	static struct chord_lookup_result r;

	for (int answer = 0; answer < 2; answer++) {
		dhash__probe_init(&pr, false, 1, 0);
		DRAIN(dhash__probe_next, &pr);
		cr_assert_eq(acts[0].nsucc, 1 + DHASH_GET_SPARES);
		r = *succs(1);
		dhash__probe_on_lookup(&pr, &r);
		DRAIN(dhash__probe_next, &pr);
		cr_assert_eq(nacts, 1);
		expect(0, DHASH_ACT_HAVE, 0);
		cr_assert_eq(acts[0].timeout_ms, 0);
		probe_reply(&pr, err(-ETIMEDOUT)); /* lost, or late */
		cr_assert_eq(nacts, 1);            /* not "unreachable": asked again */
		expect(0, DHASH_ACT_HAVE, 0);
		cr_assert_eq(acts[0].timeout_ms, DHASH_RETRY_TIMEOUT_MS);
		probe_reply(&pr, err(-ETIMEDOUT));
		expect(0, DHASH_ACT_HAVE, 0);
		cr_assert_eq(acts[0].timeout_ms, 2 * DHASH_RETRY_TIMEOUT_MS);
		probe_reply(&pr, bit(answer ? &yes : &no, 0));
		expect(0, DHASH_ACT_FINISH, 0);
		cr_assert_eq(acts[0].status, 0);
		cr_assert_eq(acts[0].found, (uint32_t)answer);
		cr_assert_eq(pr.timeouts, 2);
		cr_assert(dhash__probe_idle(&pr));
		dhash__probe_fini(&pr);
	}
}

/* k = 3, a majority asked: one says yes, the other is silent, then the
 * third is silent too. A yes was an answer, so no round again: absent
 * (the publisher sends the block), as before. */
Test(dhash_probe, an_answer_means_no_round_again)
{
	struct dhash__probe pr;

	have_start(&pr, succs(3));
	probe_reply(&pr, bit(&yes, 0));
	probe_reply(&pr, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_HAVE, 2);
	probe_reply(&pr, err(-ETIMEDOUT));
	expect(0, DHASH_ACT_FINISH, 0);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].found, 0);
	cr_assert_eq(pr.retries, 0);
	dhash__probe_fini(&pr);
}
