/* dhash: the coded put and get state machines (coded_sm.c) driven by
 * scripted events, with no socket; the fragments are real (sfsro-format's
 * encoder), so the get's checks and decoding are the real ones. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"
#include "tests/unit/dhash_sm_fixtures.h"

#define M 4
#define N 12
#define BLEN 10000

static struct dhash__act acts[64];
static uint32_t nacts;
static uint8_t block[BLEN], *frags[N];
static size_t flen;
static struct cfs_id key;

static void setup(void)
{
	cfs_log_init("test", CFS_LOG_ERROR);
	for (size_t i = 0; i < BLEN; i++)
		block[i] = (uint8_t)(i * 13 + 1);
	flen = sfsro_frag_len(BLEN, M, N);
	frags[0] = malloc(flen * N);
	for (int i = 1; i < N; i++)
		frags[i] = frags[0] + i * flen;
	cr_assert_eq(sfsro_code_encode(block, BLEN, M, N, &key, frags), 0);
}

static void teardown(void)
{
	free(frags[0]);
}

TestSuite(dhash_coded, .init = setup, .fini = teardown);

static void drain_put(struct dhash__cput *p)
{
	nacts = 0;
	while (nacts < 64 && dhash__cput_next(p, &acts[nacts]))
		nacts++;
}

static void drain_get(struct dhash__cget *g)
{
	nacts = 0;
	while (nacts < 64 && dhash__cget_next(g, &acts[nacts]))
		nacts++;
}

static uint32_t count(enum dhash__act_type t)
{
	uint32_t c = 0;

	for (uint32_t i = 0; i < nacts; i++)
		c += acts[i].type == t;
	return c;
}

static const struct dhash__act *find(enum dhash__act_type t)
{
	for (uint32_t i = 0; i < nacts; i++)
		if (acts[i].type == t)
			return &acts[i];
	return NULL;
}

/* Successors 1..n; every third repeats the previous one's IP (a second
 * virtual server of that process), so distinct holders are fewer. */
static struct chord_lookup_result *ring(uint32_t n, bool vnodes)
{
	static struct chord_lookup_result r;

	memset(&r, 0, sizeof(r));
	for (uint32_t i = 0; i < n; i++) {
		r.succ[r.n++] = node((uint8_t)(i + 1));
		if (vnodes && i % 3 == 2) {
			struct cfs_node v = node((uint8_t)(i + 1));
			v.id.b[1] = 0x80;
			r.succ[r.n++] = v;
		}
	}
	return &r;
}

static struct dhash__reply err(int status)
{
	return (struct dhash__reply){ .status = status };
}

Test(dhash_coded, happy_quorum)
{
	cr_assert_eq(dhash_coded_happy(4, 12), 8);
	cr_assert_eq(dhash_coded_happy(1, 2), 2);
	cr_assert_eq(dhash_coded_happy(4, 7), 6);
	cr_assert_eq(dhash_coded_happy(16, 32), 24);
}

/* Fragment i goes to the i-th distinct server; the put is acknowledged at
 * the happy quorum with the least lease granted; late acks change nothing. */
Test(dhash_coded, put_stores_fragment_i_on_the_ith_holder)
{
	struct dhash__cput p;

	dhash__cput_init(&p, M, N, 5000);
	drain_put(&p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_geq(acts[0].nsucc, N);
	dhash__cput_on_lookup(&p, ring(14, true));
	drain_put(&p);
	cr_assert_eq(count(DHASH_ACT_STORE), N);
	for (uint32_t i = 0; i < N; i++) {
		cr_assert_eq(acts[i].i, i);
		for (uint32_t j = 0; j < i; j++)
			cr_assert(!cfs_addr_same_ip(&p.cand[i].addr, &p.cand[j].addr), "holders %u, %u share an IP", i, j);
	}
	for (uint32_t i = 0; i < 7; i++) {
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .status = 0, .lease_until = 4000 + i });
		drain_put(&p);
		cr_assert_eq(nacts, 0, "finished after %u acks", i + 1);
	}
	dhash__cput_on_store(&p, 7, &(struct dhash__reply){ .status = 0, .lease_until = 3000 });
	drain_put(&p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 3000);
	cr_assert(!dhash__cput_idle(&p), "four STOREs still out");
	for (uint32_t i = 8; i < N; i++)
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .status = -ETIMEDOUT });
	drain_put(&p);
	cr_assert_eq(nacts, 0);
	cr_assert(dhash__cput_idle(&p));
	dhash__cput_fini(&p);
}

/* A nonce challenge is answered once; too few acks fail the put with the
 * servers' refusal, or -EREMOTEIO when they were only silent. */
Test(dhash_coded, put_challenge_and_too_few)
{
	struct dhash__cput p;
	struct cfs_addr from = node(3).addr;
	uint8_t nonce[CFS_NONCE_BYTES] = "a nonce";

	dhash__cput_init(&p, M, N, 5000);
	drain_put(&p);
	dhash__cput_on_lookup(&p, ring(N, false));
	drain_put(&p);
	dhash__cput_on_store(&p, 2, &(struct dhash__reply){ .flags = DHASH_STORE_R_CHALLENGE, .nonce = nonce,
	                                                     .from = &from });
	drain_put(&p);
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_KEEP_NONCE);
	cr_assert(cfs_addr_eq(&acts[0].addr, &from));
	cr_assert_eq(acts[1].type, DHASH_ACT_STORE);
	cr_assert_eq(acts[1].i, 2);
	for (uint32_t i = 0; i < 7; i++)
		dhash__cput_on_store(&p, i, i == 2 ? &(struct dhash__reply){ .status = -EDQUOT } : &(struct dhash__reply){ .status = 0 });
	for (uint32_t i = 7; i < N - 1; i++)
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .status = -ETIMEDOUT });
	drain_put(&p);
	cr_assert_eq(nacts, 0);
	dhash__cput_on_store(&p, N - 1, NULL); /* never sent */
	drain_put(&p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].status, -EDQUOT);
	cr_assert(dhash__cput_idle(&p));
	dhash__cput_fini(&p);

	dhash__cput_init(&p, M, N, 5000);
	drain_put(&p);
	dhash__cput_on_lookup(&p, ring(N, false));
	drain_put(&p);
	for (uint32_t i = 0; i < N; i++)
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .status = i < 7 ? 0 : -ETIMEDOUT });
	drain_put(&p);
	cr_assert_eq(acts[0].status, -EREMOTEIO, "7 of 12 is below the happy 8");
	dhash__cput_fini(&p);
}

/* The STOREs still out at the acknowledgement are seen through: a nonce
 * challenge that comes back after the quorum is answered, and the machine
 * is idle only when every STORE ended, so all n fragments land. */
Test(dhash_coded, put_sees_every_fragment_through)
{
	struct dhash__cput p;
	struct cfs_addr from[N];
	uint8_t nonce[CFS_NONCE_BYTES] = "a nonce";

	dhash__cput_init(&p, M, N, 5000);
	drain_put(&p);
	dhash__cput_on_lookup(&p, ring(N, false));
	drain_put(&p);
	cr_assert_eq(count(DHASH_ACT_STORE), N);
	for (uint32_t i = 0; i < 8; i++)
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .status = 0 });
	drain_put(&p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert(!dhash__cput_idle(&p));
	for (uint32_t i = 8; i < N; i++) {
		from[i] = node((uint8_t)(i + 1)).addr;
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .flags = DHASH_STORE_R_CHALLENGE,
		                                                     .nonce = nonce, .from = &from[i] });
	}
	drain_put(&p);
	cr_assert_eq(count(DHASH_ACT_KEEP_NONCE), N - 8);
	cr_assert_eq(count(DHASH_ACT_STORE), N - 8, "every challenged fragment is sent again");
	cr_assert_eq(count(DHASH_ACT_FINISH), 0, "reported once");
	cr_assert(!dhash__cput_idle(&p));
	for (uint32_t i = 8; i < N - 1; i++)
		dhash__cput_on_store(&p, i, &(struct dhash__reply){ .status = 0 });
	cr_assert(!dhash__cput_idle(&p), "one STORE still out");
	dhash__cput_on_store(&p, N - 1, &(struct dhash__reply){ .status = -ETIMEDOUT });
	drain_put(&p);
	cr_assert_eq(nacts, 0);
	cr_assert(dhash__cput_idle(&p));
	cr_assert_eq(p.acked, N - 1);
	dhash__cput_fini(&p);
}

Test(dhash_coded, put_on_a_ring_too_small)
{
	struct dhash__cput p;

	dhash__cput_init(&p, M, N, 5000);
	drain_put(&p);
	dhash__cput_on_lookup(&p, ring(7, false));
	drain_put(&p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].status, -EHOSTUNREACH);
	cr_assert(dhash__cput_idle(&p));
	dhash__cput_fini(&p);
}

/* The holder of fragment i is node i+1 (ring(N, false)). */
static struct dhash__reply frag_reply(uint32_t i)
{
	return (struct dhash__reply){ .status = 0, .kind = DHASH_KIND_FRAG, .data = frags[i], .len = flen,
	                              .lease_until = 1 };
}

static void fetched(struct dhash__cget *g, uint32_t ci, struct dhash__reply r)
{
	dhash__cget_on_fetch(g, ci, &r);
}

/* The m nearest and two more are asked at once; the block is decoded
 * from the first m good fragments, parity included, and checked. */
Test(dhash_coded, get_asks_the_nearest_and_decodes)
{
	struct dhash__cget g;
	uint64_t rtt[N];

	for (uint32_t i = 0; i < N; i++)
		rtt[i] = (uint64_t)(N - i) * 1000; /* the farthest in ring order is nearest */
	dhash__cget_init(&g, &key, M, N);
	drain_get(&g);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	dhash__cget_on_lookup(&g, ring(N, false), rtt);
	drain_get(&g);
	cr_assert_eq(count(DHASH_ACT_FETCH), M + DHASH_CODED_EXTRA);
	for (uint32_t j = 0; j < nacts; j++)
		cr_assert_eq(g.cand[acts[j].i].id.b[0], N - j, "asked %u-th: node %u", j, g.cand[acts[j].i].id.b[0]);
	/* cand[j] is node N - j, which holds fragment N - j - 1 */
	for (uint32_t j = 0; j < M - 1; j++) {
		fetched(&g, j, frag_reply(N - j - 1));
		drain_get(&g);
		cr_assert_eq(nacts, 0);
	}
	fetched(&g, M - 1, frag_reply(N - M));
	drain_get(&g);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].kind, DHASH_KIND_CHASH);
	cr_assert_eq(acts[0].len, BLEN);
	cr_assert_arr_eq(acts[0].data, block, BLEN, "parity-only decode gives the block");
	cr_assert(!dhash__cget_idle(&g));
	fetched(&g, M, frag_reply(N - M - 1));
	fetched(&g, M + 1, err(-ETIMEDOUT));
	cr_assert(dhash__cget_idle(&g));
	dhash__cget_fini(&g);
}

/* Holders whose predicted round trips fall in the same millisecond (a
 * LAN) are asked in ring order: the data fragments' holders first, and
 * the block is theirs; a holder a whole millisecond nearer still goes
 * first, one a millisecond farther last. */
Test(dhash_coded, get_ties_keep_ring_order)
{
	struct dhash__cget g;
	uint64_t rtt[N];

	for (uint32_t i = 0; i < N; i++)
		rtt[i] = 1900 - i * 50; /* 1.90 .. 1.35 ms: the farthest in ring order is nearest */
	rtt[N - 1] = 10;   /* node N: a millisecond nearer */
	rtt[N - 2] = 2500; /* node N - 1: a millisecond farther */
	dhash__cget_init(&g, &key, M, N);
	drain_get(&g);
	dhash__cget_on_lookup(&g, ring(N, false), rtt);
	drain_get(&g);
	cr_assert_eq(count(DHASH_ACT_FETCH), M + DHASH_CODED_EXTRA);
	cr_assert_eq(g.cand[acts[0].i].id.b[0], N, "the nearest by a millisecond first");
	for (uint32_t j = 1; j < nacts; j++)
		cr_assert_eq(g.cand[acts[j].i].id.b[0], j, "asked %u-th: node %u", j, g.cand[acts[j].i].id.b[0]);
	cr_assert_eq(g.cand[N - 1].id.b[0], N - 1, "the one a millisecond farther last");
	/* cand[j] (j >= 1) is node j, which holds fragment j - 1: data first */
	for (uint32_t j = 1; j <= M; j++)
		fetched(&g, j, frag_reply(j - 1));
	drain_get(&g);
	const struct dhash__act *f = find(DHASH_ACT_FINISH);
	cr_assert_not_null(f);
	cr_assert_eq(f->status, 0);
	cr_assert_arr_eq(f->data, block, BLEN, "the data fragments give the block");
	fetched(&g, 0, err(-ETIMEDOUT));
	for (uint32_t j = M + 1; j < M + DHASH_CODED_EXTRA; j++)
		fetched(&g, j, err(-ETIMEDOUT));
	cr_assert(dhash__cget_idle(&g));
	dhash__cget_fini(&g);
}

/* A lying holder: its server is suspected and another asked; a miss, a
 * silence and a repeated index each cost one more FETCH. */
Test(dhash_coded, get_routes_around_bad_fragments)
{
	struct dhash__cget g;
	uint8_t bad[4096];

	cr_assert_leq(flen, sizeof(bad));
	memcpy(bad, frags[1], flen);
	bad[SFSRO_FRAG_HDR + 10] ^= 1;
	dhash__cget_init(&g, &key, M, N);
	drain_get(&g);
	dhash__cget_on_lookup(&g, ring(N, false), NULL); /* no latencies: ring order */
	drain_get(&g);
	cr_assert_eq(count(DHASH_ACT_FETCH), 6);
	fetched(&g, 0, frag_reply(0));
	dhash__cget_on_fetch(&g, 1, &(struct dhash__reply){ .status = 0, .kind = DHASH_KIND_FRAG,
	                                                      .data = bad, .len = flen });
	drain_get(&g);
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_SUSPECT);
	cr_assert_eq(acts[0].i, 1);
	cr_assert_eq(acts[1].type, DHASH_ACT_FETCH);
	cr_assert_eq(acts[1].i, 6);
	fetched(&g, 2, err(-ENOENT));
	fetched(&g, 3, err(-ETIMEDOUT));
	fetched(&g, 4, frag_reply(0)); /* index 0 again */
	drain_get(&g);
	cr_assert_eq(count(DHASH_ACT_FETCH), 3);
	cr_assert_eq(g.dups, 1);
	cr_assert_eq(g.bad, 1);
	fetched(&g, 5, frag_reply(5));
	fetched(&g, 6, frag_reply(6));
	fetched(&g, 7, frag_reply(7));
	drain_get(&g);
	const struct dhash__act *f = find(DHASH_ACT_FINISH);
	cr_assert_not_null(f);
	cr_assert_eq(f->status, 0);
	cr_assert_arr_eq(f->data, block, BLEN);
	fetched(&g, 8, err(-ENOENT));
	fetched(&g, 9, err(-ENOENT));
	cr_assert(dhash__cget_idle(&g));
	dhash__cget_fini(&g);
}

/* n - m + 1 holders gone: the get fails with the worst error seen. */
Test(dhash_coded, get_fails_with_fewer_than_m)
{
	struct dhash__cget g;

	dhash__cget_init(&g, &key, M, N);
	drain_get(&g);
	dhash__cget_on_lookup(&g, ring(N, false), NULL);
	drain_get(&g);
	uint32_t asked = 6, walks = 0;
	for (uint32_t i = 0; i < N; i++) {
		bool good = i >= N - (M - 1);
		fetched(&g, i, good ? frag_reply(i) : err(i == 3 ? -ENOENT : -ETIMEDOUT));
		drain_get(&g);
		asked += count(DHASH_ACT_FETCH);
		walks += count(DHASH_ACT_LOOKUP);
		cr_assert_null(find(DHASH_ACT_FINISH), "finished after %u", i);
	}
	cr_assert_eq(asked, N);
	/* every holder asked: walks on along the ring, which has nobody new */
	cr_assert_eq(walks, 1);
	for (uint32_t w = 0; w < DHASH_CODED_WALKS; w++) {
		cr_assert(g.walk_key.b[0] == N && g.walk_key.b[CFS_ID_BYTES - 1] == 1,
		          "just past the last successor seen");
		cr_assert(!dhash__cget_idle(&g), "a walk out keeps the get");
		dhash__cget_on_lookup(&g, ring(N, false), NULL);
		drain_get(&g);
		cr_assert_eq(count(DHASH_ACT_LOOKUP), w + 1 < DHASH_CODED_WALKS, "walk %u", w);
		cr_assert_eq(count(DHASH_ACT_FETCH), 0);
	}
	const struct dhash__act *f = find(DHASH_ACT_FINISH);
	cr_assert_not_null(f);
	cr_assert_eq(f->status, -ENOENT);
	cr_assert(dhash__cget_idle(&g));
	dhash__cget_fini(&g);

	/* the caller's m and n are not the key's */
	dhash__cget_init(&g, &key, 3, N);
	drain_get(&g);
	dhash__cget_on_lookup(&g, ring(N, false), NULL);
	drain_get(&g);
	fetched(&g, 0, frag_reply(0));
	drain_get(&g);
	cr_assert_eq(acts[0].status, -EPROTO);
	dhash__cget_fini(&g);
}

/* A lookup answer that stops short (6 of 12 holders, 3 of them silent):
 * the get walks on from the last one and decodes with a fragment found
 * past them; the walk's answer repeats two holders, asked only once. */
Test(dhash_coded, get_walks_past_a_short_answer)
{
	struct dhash__cget g;
	struct chord_lookup_result more;

	dhash__cget_init(&g, &key, M, N);
	drain_get(&g);
	dhash__cget_on_lookup(&g, ring(6, false), NULL);
	drain_get(&g);
	cr_assert_eq(count(DHASH_ACT_FETCH), M + DHASH_CODED_EXTRA);
	cr_assert_null(find(DHASH_ACT_LOOKUP), "no walk while holders are left");
	for (uint32_t i = 0; i < 3; i++)
		fetched(&g, i, frag_reply(i));
	fetched(&g, 3, err(-ETIMEDOUT));
	drain_get(&g);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert(g.walk_key.b[0] == 6 && g.walk_key.b[CFS_ID_BYTES - 1] == 1);
	fetched(&g, 4, err(-ETIMEDOUT));
	fetched(&g, 5, err(-ENOENT));
	drain_get(&g);
	cr_assert_eq(nacts, 0, "one walk at a time, and no end while it is out");
	memset(&more, 0, sizeof(more));
	for (uint8_t i = 5; i <= N; i++)
		more.succ[more.n++] = node(i);
	dhash__cget_on_lookup(&g, &more, NULL);
	drain_get(&g);
	cr_assert_eq(g.ncand, N);
	cr_assert_eq(count(DHASH_ACT_FETCH), 1 + DHASH_CODED_EXTRA, "one fragment short, and the extras");
	cr_assert_eq(acts[0].i, 6);
	cr_assert_eq(g.cand[6].id.b[0], 7, "the first new holder");
	fetched(&g, 6, frag_reply(6));
	drain_get(&g);
	const struct dhash__act *f = find(DHASH_ACT_FINISH);
	cr_assert_not_null(f);
	cr_assert_eq(f->status, 0);
	cr_assert_arr_eq(f->data, block, BLEN);
	cr_assert_eq(g.walks, 1);
	fetched(&g, 7, err(-ETIMEDOUT));
	cr_assert(!dhash__cget_idle(&g));
	fetched(&g, 8, err(-ETIMEDOUT));
	cr_assert(dhash__cget_idle(&g));
	dhash__cget_fini(&g);
}

/* ------------------------------------------------------------ locate */

static void drain_locate(struct dhash__locate *lc)
{
	nacts = 0;
	while (nacts < 64 && dhash__locate_next(lc, &acts[nacts]))
		nacts++;
}

static void located(struct dhash__locate *lc, uint32_t i, struct dhash__reply r)
{
	dhash__locate_on_fetch(lc, i, &r);
}

/* A probe asks the same holders HAVE, not FETCH, and counts those that
 * say they keep the key; silence and a "no" do not count. */
Test(dhash_coded, probe_counts_holders_that_say_so)
{
	struct dhash__locate lc;

	dhash__locate_init_coded(&lc, &key, N);
	lc.probe = true;
	drain_locate(&lc);
	dhash__locate_on_lookup(&lc, ring(N + 4, true));
	drain_locate(&lc);
	const uint32_t S = N + DHASH_CODED_SPARES;
	cr_assert_eq(nacts, S);
	for (uint32_t i = 0; i < S; i++)
		cr_assert_eq(acts[i].type, DHASH_ACT_HAVE);
	dhash__locate_on_fetch(&lc, 0, &(struct dhash__reply){ .status = 0 }); /* not a probe's: ignored */
	for (uint32_t i = 0; i < S; i++) {
		dhash__locate_on_have(&lc, i, i == 3 ? -ETIMEDOUT : 0, i != 4 && i != N);
		drain_locate(&lc);
		cr_assert_eq(nacts, i == S - 1 ? 1 : 0);
	}
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(lc.r.good, S - 3);
	cr_assert_eq(lc.r.state[0], DHASH_COPY_PRESENT);
	cr_assert_eq(lc.r.state[3], DHASH_COPY_SILENT);
	cr_assert_eq(lc.r.state[4], DHASH_COPY_MISSING);
	cr_assert_eq(dhash_copy_index(lc.r.state[0], 0), -1, "a probe knows no index");
	dhash__locate_fini(&lc);
}

/* Holder i is the i-th distinct IP and is asked for fragment i; each
 * answer is judged alone: a miss, bytes that do not verify, a good
 * fragment of another index and silence are each told apart from good. */
Test(dhash_coded, locate_classifies_each_holder)
{
	struct dhash__locate lc;

	dhash__locate_init_coded(&lc, &key, N);
	drain_locate(&lc);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_LOOKUP);
	cr_assert_geq(acts[0].nsucc, N + N / 3); /* spares for virtual servers */
	dhash__locate_on_lookup(&lc, ring(N + 4, true));
	drain_locate(&lc);
	const uint32_t S = N + DHASH_CODED_SPARES; /* and the spares past n */
	cr_assert_eq(nacts, S);
	cr_assert_eq(lc.r.n, S);
	for (uint32_t i = 0; i < S; i++) {
		cr_assert_eq(acts[i].type, DHASH_ACT_FETCH);
		cr_assert_eq(lc.r.nodes[i].id.b[0], i + 1); /* the virtual servers skipped */
		cr_assert_eq(lc.r.nodes[i].id.b[1], 0);
	}
	uint8_t *corrupt = malloc(flen);
	memcpy(corrupt, frags[5], flen);
	corrupt[flen - 1] ^= 1;
	for (uint32_t i = 0; i < S; i++) {
		if (i == 2)
			located(&lc, i, err(-ENOENT));                      /* missing */
		else if (i == 5)
			located(&lc, i, (struct dhash__reply){ .kind = DHASH_KIND_FRAG, .data = corrupt,
			                                       .len = flen, .lease_until = 1 }); /* bad */
		else if (i == 7)
			located(&lc, i, frag_reply(8));                     /* good, but not its own */
		else if (i == 9)
			located(&lc, i, err(-ETIMEDOUT));                   /* silent */
		else if (i == 10)
			dhash__locate_on_fetch(&lc, i, NULL);               /* never sent */
		else if (i == N)
			located(&lc, i, err(-ENOENT));                      /* a spare: none */
		else if (i == N + 1)
			located(&lc, i, frag_reply(2));                     /* a spare: 2, moved */
		else
			located(&lc, i, frag_reply(i));
		drain_locate(&lc);
		cr_assert_eq(nacts, i == S - 1 ? 1 : 0);
	}
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(lc.r.state[2], DHASH_COPY_MISSING);
	cr_assert_eq(lc.r.state[5], DHASH_COPY_BAD);
	cr_assert_eq(lc.r.state[7], DHASH_COPY_OTHER(8)); /* counts as 8, which holder 8 has too */
	cr_assert_eq(dhash_copy_index(lc.r.state[7], 7), 8);
	cr_assert_eq(dhash_copy_index(lc.r.state[3], 3), 3);
	cr_assert_eq(dhash_copy_index(lc.r.state[5], 5), -1);
	cr_assert_eq(lc.r.state[9], DHASH_COPY_SILENT);
	cr_assert_eq(lc.r.state[10], DHASH_COPY_SILENT);
	/* distinct indices: holder 2's lost one is on a spare */
	cr_assert_eq(lc.r.good, N - 4);
	cr_assert_eq(lc.r.state[N + 1], DHASH_COPY_OTHER(2));
	for (uint32_t i = 0; i < N; i++)
		if (i != 2 && i != 5 && i != 7 && i != 9 && i != 10)
			cr_assert_eq(lc.r.state[i], DHASH_COPY_GOOD, "holder %u", i);
	free(corrupt);
	dhash__locate_fini(&lc);
}

/* A whole block, a cached copy (no lease) or a fragment of another key
 * under this key is not the holder's fragment. */
Test(dhash_coded, locate_wrong_kind_cached_and_small_ring)
{
	struct dhash__locate lc;
	uint8_t other_block[100] = { 1 }, *of[N];
	struct cfs_id other;
	size_t olen = sfsro_frag_len(sizeof(other_block), M, N);

	of[0] = malloc(olen * N);
	for (int i = 1; i < N; i++)
		of[i] = of[0] + i * olen;
	cr_assert_eq(sfsro_code_encode(other_block, sizeof(other_block), M, N, &other, of), 0);
	dhash__locate_init_coded(&lc, &key, N);
	drain_locate(&lc);
	dhash__locate_on_lookup(&lc, ring(4, false)); /* only 4 servers */
	drain_locate(&lc);
	cr_assert_eq(lc.r.n, 4);
	cr_assert_eq(nacts, 4);
	struct dhash__reply whole = frag_reply(0), cached = frag_reply(1), foreign = frag_reply(2);
	whole.kind = DHASH_KIND_CHASH;
	cached.lease_until = 0;
	foreign.data = of[2];
	foreign.len = olen;
	located(&lc, 0, whole);
	located(&lc, 1, cached);
	located(&lc, 2, foreign);
	located(&lc, 3, frag_reply(3));
	drain_locate(&lc);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(lc.r.state[0], DHASH_COPY_BAD);
	cr_assert_eq(lc.r.state[1], DHASH_COPY_MISSING);
	cr_assert_eq(lc.r.state[2], DHASH_COPY_BAD);
	cr_assert_eq(lc.r.state[3], DHASH_COPY_GOOD);
	cr_assert_eq(lc.r.good, 1);
	dhash__locate_fini(&lc);
	free(of[0]);
}

/* A repair stores only the fragments the mask names, each on its holder,
 * and succeeds when all of them acknowledged; one refusal fails it. */
Test(dhash_coded, repair_stores_the_masked_fragments_on_their_holders)
{
	struct dhash__cput p;
	struct chord_lookup_result *r = ring(N, false);
	uint32_t mask = 1u << 3 | 1u << 9;

	dhash__cput_init_repair(&p, M, N, 5000, r->succ, N, mask);
	drain_put(&p);
	cr_assert_eq(nacts, 2);
	cr_assert_eq(acts[0].type, DHASH_ACT_STORE);
	cr_assert_eq(acts[0].i, 3);
	cr_assert_eq(acts[1].i, 9);
	cr_assert_eq(p.cand[9].id.b[0], 10);
	dhash__cput_on_store(&p, 3, &(struct dhash__reply){ .lease_until = 4000 });
	drain_put(&p);
	cr_assert_eq(nacts, 0);
	dhash__cput_on_store(&p, 9, &(struct dhash__reply){ .lease_until = 4500 });
	drain_put(&p);
	cr_assert_eq(nacts, 1);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, 0);
	cr_assert_eq(acts[0].lease, 4000);
	cr_assert(dhash__cput_idle(&p));
	dhash__cput_fini(&p);

	dhash__cput_init_repair(&p, M, N, 5000, r->succ, N, mask);
	drain_put(&p);
	dhash__cput_on_store(&p, 3, &(struct dhash__reply){ .lease_until = 4000 });
	dhash__cput_on_store(&p, 9, &(struct dhash__reply){ .status = -ENOSPC });
	drain_put(&p);
	cr_assert_eq(acts[0].type, DHASH_ACT_FINISH);
	cr_assert_eq(acts[0].status, -ENOSPC);
	dhash__cput_fini(&p);
}
