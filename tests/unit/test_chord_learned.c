/* The learned table (chord/learned.c): sorted, bounded, the entry offered
 * longest ago evicted, and the nearest entries before a key found across
 * the wrap of the circle. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "chord/internal.h"

#define N 64

static struct cfs_node ring[N];

static int by_id(const void *a, const void *b)
{
	return cfs_id_cmp(&((const struct cfs_node *)a)->id, &((const struct cfs_node *)b)->id);
}

static void setup(void)
{
	for (int i = 0; i < N; i++) {
		char ip[32];
		snprintf(ip, sizeof(ip), "10.7.0.%d", i + 1);
		cr_assert_eq(cfs_addr_from_ip(&ring[i].addr, ip, 4000), 0);
		cfs_node_id(&ring[i].id, &ring[i].addr, 0);
	}
	qsort(ring, N, sizeof(ring[0]), by_id);
}

TestSuite(chord_learned, .init = setup);

static bool sorted(const struct chord__learned *l)
{
	for (uint32_t i = 1; i < l->n; i++)
		if (cfs_id_cmp(&l->e[i - 1].n.id, &l->e[i].n.id) >= 0)
			return false;
	return true;
}

Test(chord_learned, sorted_refreshed_and_bounded)
{
	struct chord__learned l;
	const int order[] = { 40, 3, 17, 60, 25, 8, 33, 51 };

	chord__learned_init(&l, 6);
	for (int i = 0; i < 8; i++)
		chord__learned_add(&l, &ring[order[i]], (uint64_t)(100 + i));
	cr_assert_eq(l.n, 6);
	cr_assert_eq(l.evicted, 2);
	cr_assert(sorted(&l));
	/* the two offered first went */
	cr_assert_null(chord__learned_find(&l, &ring[40].id));
	cr_assert_null(chord__learned_find(&l, &ring[3].id));
	/* offered again: refreshed in place (address and time), not added */
	struct cfs_node moved = ring[17];
	cr_assert_eq(cfs_addr_from_ip(&moved.addr, "10.7.0.200", 4001), 0);
	chord__learned_add(&l, &moved, 500);
	cr_assert_eq(l.n, 6);
	const struct chord__lnode *e = chord__learned_find(&l, &ring[17].id);
	cr_assert_not_null(e);
	cr_assert(cfs_addr_eq(&e->n.addr, &moved.addr) && e->seen_us == 500);
	/* full: now the oldest is 60 (offered at 103), not 17 */
	chord__learned_add(&l, &ring[1], 600);
	cr_assert_null(chord__learned_find(&l, &ring[60].id));
	cr_assert_not_null(chord__learned_find(&l, &ring[17].id));
	cr_assert(sorted(&l));
	cr_assert(chord__learned_remove(&l, &ring[17].id));
	cr_assert(!chord__learned_remove(&l, &ring[17].id));
	cr_assert_eq(l.n, 5);
	chord__learned_free(&l);

	chord__learned_init(&l, 0); /* off: nothing kept */
	chord__learned_add(&l, &ring[1], 1);
	cr_assert_eq(l.n, 0);
}

Test(chord_learned, preceding_wraps_and_stops_at_from)
{
	struct chord__learned l;
	struct cfs_node out[8];

	chord__learned_init(&l, 32);
	for (int i = 0; i < N; i += 8) /* 0, 8, ..., 56 */
		chord__learned_add(&l, &ring[i], 1);
	/* nearest before ring[20]: 16, 8, 0, then round the wrap to 56, 48 */
	uint32_t n = chord__learned_preceding(&l, NULL, &ring[20].id, UINT64_MAX, 0, true, out, 5);
	cr_assert_eq(n, 5);
	const int want[] = { 16, 8, 0, 56, 48 };
	for (int i = 0; i < 5; i++)
		cr_assert(cfs_id_eq(&out[i].id, &ring[want[i]].id), "entry %d", i);
	/* the key itself is not its own predecessor */
	n = chord__learned_preceding(&l, NULL, &ring[16].id, UINT64_MAX, 0, true, out, 1);
	cr_assert(n == 1 && cfs_id_eq(&out[0].id, &ring[8].id));
	/* only strictly between from and the key */
	n = chord__learned_preceding(&l, &ring[4].id, &ring[20].id, UINT64_MAX, 0, true, out, 8);
	cr_assert_eq(n, 2);
	cr_assert(cfs_id_eq(&out[0].id, &ring[16].id) && cfs_id_eq(&out[1].id, &ring[8].id));
	n = chord__learned_preceding(&l, &ring[50].id, &ring[4].id, UINT64_MAX, 0, true, out, 8);
	cr_assert_eq(n, 2, "across the wrap: 0 and 56");
	cr_assert(cfs_id_eq(&out[0].id, &ring[0].id) && cfs_id_eq(&out[1].id, &ring[56].id));
	/* the whole table at most */
	n = chord__learned_preceding(&l, NULL, &ring[20].id, UINT64_MAX, 0, true, out, 8);
	cr_assert_eq(n, 8);
	chord__learned_free(&l);
}

static double span_to(int from, int to)
{
	struct cfs_id d;

	cfs_id_distance(&d, &ring[from].id, &ring[to].id);
	return cfs_id_to_unit(&d);
}

/* A member's guess at a key's successors: the entries after the key, the
 * nearest first, while within the span, across the wrap, filtered as
 * chord__learned_preceding filters. */
Test(chord_learned, following_stops_at_the_span_and_wraps)
{
	struct chord__learned l;
	struct cfs_node out[8];

	chord__learned_init(&l, 32);
	for (int i = 0; i < N; i += 8) /* 0, 8, ..., 56 */
		chord__learned_add(&l, &ring[i], 1);
	uint32_t n = chord__learned_following(&l, &ring[20].id, span_to(20, 39), UINT64_MAX, 0, true, out, 8);
	cr_assert_eq(n, 2);
	cr_assert(cfs_id_eq(&out[0].id, &ring[24].id) && cfs_id_eq(&out[1].id, &ring[32].id));
	/* the key itself is not its own successor; the span's end is in it */
	n = chord__learned_following(&l, &ring[24].id, span_to(24, 32), UINT64_MAX, 0, true, out, 8);
	cr_assert(n == 1 && cfs_id_eq(&out[0].id, &ring[32].id));
	/* across the wrap */
	n = chord__learned_following(&l, &ring[60].id, span_to(60, 9), UINT64_MAX, 0, true, out, 8);
	cr_assert_eq(n, 2);
	cr_assert(cfs_id_eq(&out[0].id, &ring[0].id) && cfs_id_eq(&out[1].id, &ring[8].id));
	/* nothing that near */
	cr_assert_eq(chord__learned_following(&l, &ring[20].id, span_to(20, 23), UINT64_MAX, 0, true, out, 8), 0);
	/* at most cap */
	cr_assert_eq(chord__learned_following(&l, &ring[20].id, 1.0, UINT64_MAX, 0, true, out, 3), 3);
	/* the young are skipped, and so are hints without hints */
	chord__learned_add(&l, &ring[28], 500);
	n = chord__learned_following(&l, &ring[20].id, span_to(20, 33), 100, 0, true, out, 8);
	cr_assert_eq(n, 2, "ring[28] is younger than the bound");
	chord__learned_free(&l);
}

/* A sweep asks the start of the widest gap wider than the bound, never
 * the gap our own ID is in (our successors cover it), and not the same
 * start again before CHORD_SWEEP_AGAIN_US. */
Test(chord_learned, gap_names_the_widest_unswept_start)
{
	struct chord__learned l;
	struct cfs_node to;
	const uint64_t t = 1000000;
	const int at[] = { 0, 8, 16, 24, 32, 48, 56 };
	double other = 0; /* the widest gap but 32 -> 48 and ours (56 -> 0: we are 60) */

	chord__learned_init(&l, 32);
	for (int i = 0; i < 7; i++) {
		chord__learned_add(&l, &ring[at[i]], 1);
		if (i < 6 && at[i] != 32 && span_to(at[i], at[i + 1]) > other)
			other = span_to(at[i], at[i + 1]);
	}
	double wide = span_to(32, 48);
	cr_assert_gt(wide, other, "16 positions wider than 8 (IDs of this test's ring)");
	cr_assert(chord__learned_gap(&l, &ring[60].id, other, t, &to));
	cr_assert(cfs_id_eq(&to.id, &ring[32].id), "the start of the widest gap");
	/* asked: nothing else is wider than other */
	cr_assert(!chord__learned_gap(&l, &ring[60].id, other, t + 1, &to));
	cr_assert(chord__learned_gap(&l, &ring[60].id, 0, t + 1, &to));
	cr_assert(!cfs_id_eq(&to.id, &ring[32].id) && !cfs_id_eq(&to.id, &ring[56].id),
	          "not the start asked, nor the gap holding our own ID");
	/* the start asked may be asked again once the pause is over */
	cr_assert(chord__learned_gap(&l, &ring[60].id, other, t + CHORD_SWEEP_AGAIN_US + 1, &to));
	cr_assert(cfs_id_eq(&to.id, &ring[32].id));
	cr_assert_eq(l.sweeps, 3);
	/* our own ID in the widest gap: that one is left to our successors */
	cr_assert(!chord__learned_gap(&l, &ring[40].id, other, 3 * CHORD_SWEEP_AGAIN_US, &to));
	/* one entry: the whole ring is its gap */
	struct chord__learned one;
	chord__learned_init(&one, 4);
	chord__learned_add(&one, &ring[10], 1);
	cr_assert(chord__learned_gap(&one, &ring[60].id, 0.5, t, &to) && cfs_id_eq(&to.id, &ring[10].id));
	chord__learned_free(&one);
	chord__learned_free(&l);
}

/* Quarantine and freshness: only entries first offered at or before the
 * one bound and last offered at or after the other are given; offering one
 * again does not make it younger. */
Test(chord_learned, preceding_skips_the_young)
{
	struct chord__learned l;
	struct cfs_node out[8];

	chord__learned_init(&l, 8);
	chord__learned_add(&l, &ring[10], 100);
	chord__learned_add(&l, &ring[12], 200);
	chord__learned_add(&l, &ring[10], 300); /* seen again, first offered at 100 */
	uint32_t n = chord__learned_preceding(&l, NULL, &ring[20].id, 150, 0, true, out, 8);
	cr_assert_eq(n, 1);
	cr_assert(cfs_id_eq(&out[0].id, &ring[10].id));
	n = chord__learned_preceding(&l, NULL, &ring[20].id, 200, 0, true, out, 8);
	cr_assert_eq(n, 2);
	/* freshness: ring[12] was last offered at 200, ring[10] at 300 */
	n = chord__learned_preceding(&l, NULL, &ring[20].id, UINT64_MAX, 250, true, out, 8);
	cr_assert(n == 1 && cfs_id_eq(&out[0].id, &ring[10].id));
	chord__learned_free(&l);
}

/* A plain client's first hops: contacts met in this run, nearest before
 * the key first; contacts loaded from a file (never heard from: seen 0)
 * only when no met one precedes the key. */
Test(chord_learned, client_candidates_prefer_contacts_met)
{
	chord_t *c = calloc(1, sizeof(*c));
	struct cfs_node out[16];

	c->client = true;
	chord__learned_init(&c->learned, 16);
	chord__learned_add(&c->learned, &ring[18], 0); /* loaded, nearest the key */
	chord__learned_add(&c->learned, &ring[10], 500);
	chord__learned_add(&c->learned, &ring[4], 0);
	uint32_t n = chord__client_candidates(c, &ring[20].id, out, 16);
	cr_assert_eq(n, 1, "only the contact met: %u", n);
	cr_assert(cfs_id_eq(&out[0].id, &ring[10].id));
	cr_assert_eq(chord__client_met(c), 1);
	chord__learned_remove(&c->learned, &ring[10].id);
	n = chord__client_candidates(c, &ring[20].id, out, 16);
	cr_assert_eq(n, 2, "none met: the loaded ones, nearest first");
	cr_assert(cfs_id_eq(&out[0].id, &ring[18].id) && cfs_id_eq(&out[1].id, &ring[4].id));
	chord__learned_free(&c->learned);
	free(c);
}

/* The saved contacts' lines: an IP literal and port, then an index. */
Test(chord_learned, contact_lines)
{
	struct cfs_node n;
	struct cfs_addr a;
	struct cfs_id id;

	cr_assert_eq(chord_contact_parse("198.18.0.7:4460 3\n", &n), 0);
	cr_assert_eq(cfs_addr_from_ip(&a, "198.18.0.7", 4460), 0);
	cfs_node_id(&id, &a, 3);
	cr_assert(cfs_addr_eq(&n.addr, &a) && n.vindex == 3 && cfs_id_eq(&n.id, &id));
	cr_assert_eq(chord_contact_parse("[2001:db8::1]:4460 0", &n), 0);
	const char *bad[] = {
		"# a comment", "", "198.18.0.7:4460", "198.18.0.7:4460 64", "198.18.0.7 3",
		"localhost:4460 1", "4460 0", "198.18.0.7:0 1", "198.18.0.7:70000 1",
		"198.18.0.7:4460 1 extra", "2001:db8::1:4460 0", "[198.18.0.7]:4460 0",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(chord_contact_parse(bad[i], &n), -EINVAL, "'%s' parsed", bad[i]);
}

/* A plain client's remembered answers: a run of successors given for a key
 * answers a later key inside it with the successors from there on, when
 * enough follow; the freshest run wins; old runs are not used. */
static void arc(struct chord__arc *a, const struct cfs_id *key, int first, int n, uint64_t at)
{
	memset(a, 0, sizeof(*a));
	a->key = *key;
	a->at_us = at;
	a->n = (uint32_t)n;
	for (int i = 0; i < n; i++)
		a->succ[i] = ring[(first + i) % N];
}

/* an ID just after ring[i] (so that ring[i + 1] is its successor) */
static struct cfs_id after(int i)
{
	struct cfs_id k = ring[i % N].id;
	for (int b = 31; b >= 0 && ++k.b[b] == 0; b--)
		;
	return k;
}

Test(chord_learned, remembered_answers)
{
	struct chord__arc arcs[2];
	struct cfs_node out[16];
	uint64_t t = 1000000;
	struct cfs_id k10 = after(9); /* an answer for a key whose successor is ring[10] */

	arc(&arcs[0], &k10, 10, 8, t);
	/* the key it was given for, and one further in: the successors from there */
	struct cfs_id k = after(9);
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 8, out), 8);
	cr_assert(cfs_id_eq(&out[0].id, &ring[10].id));
	k = after(12); /* successor ring[13]: 5 of the run follow */
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 8, out), 5);
	cr_assert(cfs_id_eq(&out[0].id, &ring[13].id));
	cr_assert(cfs_id_eq(&out[4].id, &ring[17].id));
	k = ring[13].id; /* a node's own ID: that node is the successor */
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 8, out), 5);
	cr_assert(cfs_id_eq(&out[0].id, &ring[13].id));
	/* too near the run's end: fewer than CHORD__ARC_MIN follow */
	k = after(14);
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 8, out), 0);
	/* before the run's key: nothing known of its successor */
	k = after(8);
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 8, out), 0);
	/* a fresher run covering it wins; a stale one is not used */
	k = after(12);
	arc(&arcs[1], &k, 13, 8, t + 5);
	cr_assert_eq(chord__arcs_find(arcs, 2, &k, t + 5, 8, out), 8);
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t + CHORD__ARC_TTL_US, 8, out), 0, "stale");
	/* fewer wanted than the floor: that many are enough */
	k = after(15);
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 2, out), 2);
	/* a run across the wrap of the circle */
	struct cfs_id kw = after(N - 3);
	arc(&arcs[0], &kw, N - 2, 8, t);
	k = after(N - 1);
	cr_assert_eq(chord__arcs_find(arcs, 1, &k, t, 8, out), 6);
	cr_assert(cfs_id_eq(&out[0].id, &ring[0].id));
}

/* A run given for a key that is its first node's own ID: (x, x] must not
 * stand for the whole circle. */
Test(chord_learned, remembered_answer_for_a_node_id)
{
	struct chord__arc a;
	struct cfs_node out[16];
	uint64_t t = 1000000;

	arc(&a, &ring[10].id, 10, 8, t);
	struct cfs_id k = ring[10].id;
	cr_assert_eq(chord__arcs_find(&a, 1, &k, t, 8, out), 8);
	cr_assert(cfs_id_eq(&out[0].id, &ring[10].id));
	k = after(11);
	cr_assert_eq(chord__arcs_find(&a, 1, &k, t, 8, out), 6);
	cr_assert(cfs_id_eq(&out[0].id, &ring[12].id));
	k = after(30); /* far outside the run */
	cr_assert_eq(chord__arcs_find(&a, 1, &k, t, 8, out), 0);
	k = after(5);
	cr_assert_eq(chord__arcs_find(&a, 1, &k, t, 8, out), 0);
}

/* ------------------------------------------------------------ hints */

/* Answer every check the budget allows at now: ok or not. */
static uint32_t pump(struct chord__learned *l, uint64_t now, bool ok)
{
	struct cfs_node n;
	uint32_t sent = 0;

	while (chord__learned_next_check(l, now, &n)) {
		sent++;
		chord__learned_checked(l, &n, ok, now);
	}
	return sent;
}

static uint32_t hints_in(const struct chord__learned *l)
{
	uint32_t h = 0;

	for (uint32_t i = 0; i < l->n; i++)
		h += l->e[i].hint;
	return h;
}

/* Nodes lookup answers name enter once they answer their check, at most
 * a burst and then CHORD_LEARN_AUTH_RATE a second, and only as hints. */
Test(chord_learned, answers_fill_the_table_within_the_budget)
{
	struct chord__learned l;
	struct cfs_node out[N];
	const uint64_t s = 1000000, t0 = 10 * s;

	chord__learned_init(&l, 128);
	for (int i = 0; i < 60; i++)
		chord__learned_hint(&l, &ring[i], t0);
	cr_assert_eq(l.nqueue, 60);
	uint32_t sent = pump(&l, t0, true);
	cr_assert_eq(sent, (uint32_t)CHORD_LEARN_AUTH_BURST, "the burst: %u", sent);
	/* a second later, with a tick every 100 ms: the rate, no more */
	for (uint64_t t = t0 + s / 10; t <= t0 + s; t += s / 10)
		sent += pump(&l, t, true);
	cr_assert(sent <= CHORD_LEARN_AUTH_BURST + CHORD_LEARN_AUTH_RATE + 1 &&
	          sent >= CHORD_LEARN_AUTH_BURST + CHORD_LEARN_AUTH_RATE - 1, "%u checks", sent);
	cr_assert_eq(l.probes, sent);
	cr_assert_eq(l.n, sent);
	cr_assert_eq(hints_in(&l), sent);
	cr_assert(sorted(&l));
	/* hints are next hops of our own lookups only */
	cr_assert_eq(chord__learned_preceding(&l, NULL, &ring[0].id, UINT64_MAX, 0, false, out, N), 0);
	cr_assert_eq(chord__learned_preceding(&l, NULL, &ring[0].id, UINT64_MAX, 0, true, out, N), sent);
	/* a node our tables authenticate is a hint no longer */
	const struct chord__lnode *e = chord__learned_find(&l, &ring[59].id);
	cr_assert(e && e->hint, "the newest named is checked first");
	chord__learned_add(&l, &ring[59], t0 + 11 * s);
	cr_assert(!chord__learned_find(&l, &ring[59].id)->hint);
	cr_assert_eq(chord__learned_preceding(&l, NULL, &ring[0].id, UINT64_MAX, 0, false, out, N), 1);
	chord__learned_free(&l);
}

/* At most CHORD_LEARN_AUTH_INFLIGHT checks wait for an answer at once,
 * whatever the budget; the queue keeps the CHORD__LEARN_QUEUE named last. */
Test(chord_learned, checks_in_flight_and_waiting_are_bounded)
{
	struct chord__learned l;
	struct cfs_node n;
	uint32_t sent = 0;

	chord__learned_init(&l, 128);
	for (int i = 0; i < N; i++)
		chord__learned_hint(&l, &ring[i], 1);
	for (int i = 0; i < N; i++) /* named again: queued once */
		chord__learned_hint(&l, &ring[i], 1);
	cr_assert_eq(l.nqueue, N < CHORD__LEARN_QUEUE ? N : CHORD__LEARN_QUEUE);
	while (chord__learned_next_check(&l, 1000, &n))
		sent++;
	cr_assert_eq(sent, CHORD_LEARN_AUTH_INFLIGHT);
	chord__learned_hint(&l, &l.flight[0], 1000); /* in flight: not queued again */
	cr_assert_eq(l.nqueue, N - CHORD_LEARN_AUTH_INFLIGHT);
	chord__learned_free(&l);

	chord__learned_init(&l, 0); /* off: nothing queued, nothing sent */
	chord__learned_hint(&l, &ring[1], 1);
	cr_assert(!chord__learned_next_check(&l, 1, &n));
	chord__learned_free(&l);
}

/* A node that fails its check never enters, and no answer gets it checked
 * again for CHORD_LEARN_BAD_US; an answer for a check never sent, or sent
 * to another address, is ignored. */
Test(chord_learned, a_node_failing_its_check_never_enters)
{
	struct chord__learned l;
	struct cfs_node n;
	const uint64_t t0 = 1000;

	chord__learned_init(&l, 16);
	chord__learned_hint(&l, &ring[5], t0);
	cr_assert(chord__learned_next_check(&l, t0, &n));
	chord__learned_checked(&l, &n, false, t0 + 1);
	cr_assert_eq(l.n, 0);
	cr_assert_eq(l.probes_failed, 1);
	chord__learned_hint(&l, &ring[5], t0 + 2);
	cr_assert_eq(l.nqueue, 0, "failed lately: not checked again");
	chord__learned_hint(&l, &ring[5], t0 + CHORD_LEARN_BAD_US + 2);
	cr_assert_eq(l.nqueue, 1, "in time it may be");

	/* answers nobody asked for */
	chord__learned_checked(&l, &ring[9], true, t0);
	cr_assert(chord__learned_next_check(&l, t0 + CHORD_LEARN_BAD_US + 3, &n));
	struct cfs_node elsewhere = n;
	elsewhere.addr.in4.sin_port = htons(9);
	chord__learned_checked(&l, &elsewhere, true, t0);
	cr_assert_eq(l.n, 0);
	cr_assert_null(chord__learned_find(&l, &ring[9].id));
	chord__learned_checked(&l, &n, true, t0);
	cr_assert_eq(l.n, 1);
	chord__learned_free(&l);
}

/* A hint that failed as a lookup hop leaves, and is not checked again
 * when the next answer names it; named again where it was checked, a hint
 * is fresh without a check; an entry our tables hold is not moved by an
 * answer naming its ID at another address. */
Test(chord_learned, a_failed_hint_leaves_and_tables_win)
{
	struct chord__learned l;
	struct cfs_node n;

	chord__learned_init(&l, 16);
	chord__learned_hint(&l, &ring[3], 10);
	cr_assert(chord__learned_next_check(&l, 10, &n));
	chord__learned_checked(&l, &n, true, 20);
	cr_assert_eq(chord__learned_find(&l, &ring[3].id)->seen_us, 20);
	chord__learned_hint(&l, &ring[3], 30);
	cr_assert_eq(l.nqueue, 0);
	cr_assert_eq(chord__learned_find(&l, &ring[3].id)->seen_us, 30, "refreshed, not checked");

	chord__learned_forget(&l, &ring[3].id, 40); /* the driver's DROP */
	cr_assert_null(chord__learned_find(&l, &ring[3].id));
	chord__learned_hint(&l, &ring[3], 50);
	cr_assert_eq(l.nqueue, 0);

	chord__learned_add(&l, &ring[7], 60);
	struct cfs_node moved = ring[7];
	moved.addr.in4.sin_port = htons(cfs_addr_port(&moved.addr) + 1);
	chord__learned_hint(&l, &moved, 70);
	cr_assert_eq(l.nqueue, 0);
	cr_assert(cfs_addr_eq(&chord__learned_find(&l, &ring[7].id)->n.addr, &ring[7].addr));
	chord__learned_free(&l);
}

/* A warm start's entries: hints (never named to others), past the
 * quarantine at once, a table entry already there left as it was, the
 * table's bound kept. */
Test(chord_learned, seed_enters_hints_past_the_quarantine)
{
	struct chord__learned l;
	struct cfs_node out[8];
	const uint64_t now = 10 * CHORD_LEARNED_QUARANTINE_US;

	chord__learned_init(&l, 8);
	chord__learned_add(&l, &ring[5], now - 1);
	for (int i = 0; i < 6; i++)
		chord__learned_seed(&l, &ring[3 + i], now);
	cr_assert_eq(l.n, 6, "%u", l.n);
	cr_assert(sorted(&l));
	const struct chord__lnode *e = chord__learned_find(&l, &ring[5].id);
	cr_assert(e && !e->hint && e->seen_us == now - 1, "an entry already there is left");
	e = chord__learned_find(&l, &ring[8].id);
	cr_assert_not_null(e);
	cr_assert(e->hint && e->seen_us == now && e->added_us == now - CHORD_LEARNED_QUARANTINE_US);
	/* usable by a member's lookup filter (known for the quarantine) */
	uint32_t n = chord__learned_preceding(&l, NULL, &ring[9].id,
	                                      now - CHORD_LEARNED_QUARANTINE_US, 0, true, out, 8);
	cr_assert(n >= 1 && cfs_id_eq(&out[0].id, &ring[8].id));
	/* not among those named to others */
	n = chord__learned_preceding(&l, NULL, &ring[9].id, UINT64_MAX, 0, false, out, 8);
	for (uint32_t i = 0; i < n; i++)
		cr_assert(!cfs_id_eq(&out[i].id, &ring[8].id));
	for (int i = 20; i < 40; i++)
		chord__learned_seed(&l, &ring[i], now);
	cr_assert_eq(l.n, 8, "bounded: %u", l.n);
	cr_assert(sorted(&l));
	chord__learned_free(&l);
}
