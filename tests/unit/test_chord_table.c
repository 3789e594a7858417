/* chord__table_step (chord/table.c), the local half of a lookup step, on tables
 * filled by hand: no socket, no timer. ring[] holds real nodes sorted by
 * ID, so ring[i] precedes ring[i + 1] on the circle. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

#define RING 512

static struct cfs_node ring[RING];
static chord_t *C;
static struct cfs_node out[CFS_MSG_MAX_NODES];
static uint32_t n_out, n_cand;
/* The scripted clock every step is taken at. */
static const uint64_t T0 = 100 * CHORD_LEARNED_FRESH_US;

static int by_id(const void *a, const void *b)
{
	return cfs_id_cmp(&((const struct cfs_node *)a)->id, &((const struct cfs_node *)b)->id);
}

/* Just before ring[i]: its successor is ring[i]. */
static struct cfs_id before(int i)
{
	struct cfs_id one = { 0 }, k;

	one.b[31] = 1;
	cfs_id_sub(&k, &ring[i].id, &one);
	return k;
}

static bool same(const struct cfs_node *a, int idx)
{
	return cfs_id_eq(&a->id, &ring[idx].id);
}

/* Virtual server vi at ring[self] with successors ring[self+1 .. +nsuccs]. */
static struct chord__vnode *vn(uint32_t vi, int self, uint32_t nsuccs)
{
	struct chord__vnode *v = &C->v[vi];

	v->c = C;
	v->index = vi;
	v->self = ring[self];
	v->joined = true;
	v->nsuccs = nsuccs;
	for (uint32_t i = 0; i < nsuccs; i++)
		v->succ[i] = (struct tnode){ .n = ring[self + 1 + (int)i], .valid = true };
	return v;
}

static void setup(void)
{
	for (int i = 0; i < RING; i++) {
		char ip[32]; /* one IP each: the port is not hashed (PROTOCOL.md "Node IDs") */
		snprintf(ip, sizeof(ip), "10.9.%d.%d", i / 250, i % 250 + 1);
		cr_assert_eq(cfs_addr_from_ip(&ring[i].addr, ip, (uint16_t)(3000 + i)), 0);
		cfs_node_id(&ring[i].id, &ring[i].addr, 0);
	}
	qsort(ring, RING, sizeof(ring[0]), by_id);
	C = calloc(1, sizeof(*C));
	C->cfg.nsucc = 16;
	C->nv = 2;
	C->v = calloc(2, sizeof(*C->v));
	C->nv = 1;
}

static void teardown(void)
{
	free(C->v);
	free(C);
}

static bool step(struct chord__vnode *v, int key_at, uint32_t nsucc, bool to_pred, uint32_t cap)
{
	struct cfs_id k = before(key_at);

	memset(out, 0, sizeof(out));
	return chord__table_step(C, v, &k, nsucc, to_pred, true, true, out, &n_out, &n_cand, cap, T0);
}

TestSuite(chord_table, .init = setup, .fini = teardown);

/* A predecessor from hearsay (the first node met after a restart) may lie
 * far before the true one: keys between are not answered with our own
 * list, whose nodes do not hold them, but routed to the nodes before
 * them; the predecessor's own GET_PRED or NOTIFY (maint.c) makes it sure,
 * and a new predecessor is unsure again. */
Test(chord_table, a_predecessor_from_hearsay_answers_nothing)
{
	struct chord__vnode *v = vn(0, 100, 8);

	chord__table_consider(C, &ring[40], T0); /* met first: taken as predecessor */
	cr_assert(v->pred.valid && same(&v->pred.n, 40));
	cr_assert_not(v->pred_sure);
	cr_assert_not(step(v, 60, 3, false, 16), "key 60 lies between 40 and the true predecessor");
	cr_assert_geq(n_out, 1);
	cr_assert(same(&out[0], 40), "routed to the node before the key");
	v->pred_sure = true; /* its GET_PRED came */
	cr_assert(step(v, 60, 3, false, 16));
	cr_assert(same(&out[0], 100));
	chord__table_consider(C, &ring[95], T0); /* a nearer one: unsure again */
	cr_assert(same(&v->pred.n, 95));
	cr_assert_not(v->pred_sure);
	cr_assert_not(step(v, 99, 3, false, 16));
	cr_assert(same(&out[0], 95));
}

Test(chord_table, alone_answers_itself)
{
	struct chord__vnode *v = vn(0, 0, 0);

	cr_assert(step(v, 200, 4, false, 16));
	cr_assert_eq(n_out, 1);
	cr_assert(same(&out[0], 0));
}

/* key in (pred, self]: we are its successor, our list follows, once the
 * predecessor itself has named us its successor. */
Test(chord_table, own_key)
{
	struct chord__vnode *v = vn(0, 100, 8);

	v->pred = (struct tnode){ .n = ring[90], .valid = true };
	v->pred_sure = true;
	cr_assert(step(v, 100, 3, false, 16));
	cr_assert_eq(n_out, 3);
	cr_assert(same(&out[0], 100) && same(&out[1], 101) && same(&out[2], 102));
	v->succ_unsure = true; /* a list refilled from fingers is not offered */
	cr_assert(step(v, 100, 3, false, 16));
	cr_assert_eq(n_out, 1);
}

/* DHash++ 4.5: a successor list that covers the key with enough
 * successors after it answers early. */
Test(chord_table, covering_list_answers_early)
{
	struct chord__vnode *v = vn(0, 0, 16);

	cr_assert(step(v, 1, 4, false, 16), "the first successor");
	cr_assert_eq(n_out, 4);
	cr_assert(same(&out[0], 1));
	cr_assert(step(v, 4, 4, false, 16));
	cr_assert_eq(n_out, 4);
	cr_assert(same(&out[0], 4) && same(&out[3], 7));
	cr_assert_eq(n_cand, 0);
}

/* Too few successors after the key: the key's predecessors (nearest
 * first), then the successors we know as the partial answer. */
Test(chord_table, partial_answer)
{
	struct chord__vnode *v = vn(0, 0, 16);

	cr_assert(!step(v, 15, 4, false, 32));
	cr_assert_eq(n_cand, 14);
	cr_assert_eq(n_out, 16);
	cr_assert(same(&out[0], 14) && same(&out[13], 1));
	cr_assert(same(&out[14], 15) && same(&out[15], 16));
	/* the cap bounds both */
	cr_assert(!step(v, 15, 4, false, 10));
	cr_assert_eq(n_cand, 10);
	cr_assert_eq(n_out, 10);
}

/* Classic Chord (TO_PRED): only the predecessor answers. */
Test(chord_table, to_pred)
{
	struct chord__vnode *v = vn(0, 0, 16);

	cr_assert(!step(v, 4, 4, true, 16));
	cr_assert_eq(n_cand, 3);
	cr_assert(same(&out[0], 3) && same(&out[2], 1));
	cr_assert(step(v, 1, 4, true, 16), "the first successor: we are the predecessor");
}

/* Beyond the list: the closest preceding nodes of every table, nearest
 * the key first, without repeats. */
Test(chord_table, fingers)
{
	struct chord__vnode *v = vn(0, 0, 4);

	v->finger[0] = (struct tnode){ .n = ring[100], .valid = true };
	v->finger[1] = (struct tnode){ .n = ring[300], .valid = true };
	v->finger[2] = (struct tnode){ .n = ring[300], .valid = true };
	v->finger[3] = (struct tnode){ .n = ring[450], .valid = true };
	v->finger[4] = (struct tnode){ .n = ring[499], .valid = false };
	v->finger[5] = (struct tnode){ .n = ring[500], .valid = true };
	v->pred = (struct tnode){ .n = ring[RING - 1], .valid = true };
	cr_assert(!step(v, 480, 4, false, 16));
	cr_assert_eq(n_cand, n_out);
	cr_assert_eq(n_out, 7);
	cr_assert(same(&out[0], 450) && same(&out[1], 300) && same(&out[2], 100) && same(&out[3], 4));
	cr_assert(same(&out[6], 1));
	cr_assert(!step(v, 480, 4, false, 2));
	cr_assert_eq(n_out, 2);
	cr_assert(same(&out[0], 450) && same(&out[1], 300));
}

/* Nodes learned from traffic are next hops too: the nearest one before
 * the key comes first, ahead of every finger; one at or past the key, or
 * behind us, is not offered. */
Test(chord_table, learned_nodes_are_next_hops)
{
	struct chord__vnode *v = vn(0, 0, 4);

	v->finger[1] = (struct tnode){ .n = ring[300], .valid = true };
	v->finger[3] = (struct tnode){ .n = ring[450], .valid = true };
	/* known for two minutes: out of quarantine, still fresh */
	uint64_t t0 = T0 - 2 * CHORD_LEARNED_QUARANTINE_US;
	chord__learned_init(&C->learned, 8);
	chord__learned_add(&C->learned, &ring[477], t0);
	chord__learned_add(&C->learned, &ring[479], t0);
	chord__learned_add(&C->learned, &ring[480], t0);
	chord__learned_add(&C->learned, &ring[200], t0);
	/* just met: quarantined, no next hop yet */
	chord__learned_add(&C->learned, &ring[478], T0);
	cr_assert(!step(v, 480, 4, false, 16));
	cr_assert(same(&out[0], 479) && same(&out[1], 477) && same(&out[2], 450),
	          "learned nodes nearest the key first");
	for (uint32_t i = 0; i < n_out; i++)
		cr_assert(!same(&out[i], 480) && !same(&out[i], 478),
		          "a node past the key, or one just met, is no next hop");
	/* A node dropped after a failed hop leaves the learned table too. */
	chord__table_drop_finger(C, &ring[479].id);
	cr_assert(!step(v, 480, 4, false, 16));
	cr_assert(same(&out[0], 477));
	chord__learned_free(&C->learned);
}

static bool holds_all(void *arg, const struct cfs_id *key)
{
	(void)arg;
	(void)key;
	return true;
}

/* A member's guess at a content block's holders: the learned nodes just
 * after the key, when its own tables do not cover the key, even nodes
 * just met (a block proves itself); none beyond the span, and no guess
 * when the tables answer anyway, when we hold the block, or when off. */
Test(chord_table, a_get_guesses_the_learned_nodes_just_after_its_key)
{
	struct chord__vnode *v = vn(0, 0, 16); /* about 512 nodes by its list */
	struct chord_lookup_opts o = { .nsucc = 8, .flags = CHORD_LOOKUP_F_REMEMBERED | CFS_LOOKUP_F_CHECK_BLOCK };
	struct chord_lookup_result res;
	struct cfs_id key = before(301);

	v->pred = (struct tnode){ .n = ring[RING - 1], .valid = true };
	C->cfg.guess_spacings = 5;
	chord__learned_init(&C->learned, 16);
	chord__learned_add(&C->learned, &ring[299], T0);
	chord__learned_add(&C->learned, &ring[301], T0);
	chord__learned_add(&C->learned, &ring[303], T0 - 2 * CHORD_LEARNED_QUARANTINE_US);
	chord__learned_add(&C->learned, &ring[330], T0);
	cr_assert(chord__lookup_guess(C, &key, &o, &res, T0));
	cr_assert(res.checked);
	cr_assert_eq(res.n, 2, "301 and 303; 299 is before the key, 330 far past it");
	cr_assert(same(&res.succ[0], 301) && same(&res.succ[1], 303));
	/* a suspect is not guessed */
	chord__suspects_init(&C->susp, 60 * 1000000ull);
	chord__suspects_add(&C->susp, &ring[301].id, "test", T0);
	cr_assert(chord__lookup_guess(C, &key, &o, &res, T0));
	cr_assert(res.n == 1 && same(&res.succ[0], 303));
	/* our own successor list covers the key: no guess */
	struct cfs_id near = before(10);
	chord__learned_add(&C->learned, &ring[10], T0);
	cr_assert(!chord__lookup_guess(C, &near, &o, &res, T0));
	/* only lookups that may be answered so */
	struct chord_lookup_opts plain = { .nsucc = 8, .flags = CFS_LOOKUP_F_CHECK_BLOCK };
	cr_assert(!chord__lookup_guess(C, &key, &plain, &res, T0));
	/* we hold the block: the lookup's first step finds it */
	C->has_block = holds_all;
	cr_assert(!chord__lookup_guess(C, &key, &o, &res, T0));
	C->has_block = NULL;
	/* off */
	C->cfg.guess_spacings = 0;
	cr_assert(!chord__lookup_guess(C, &key, &o, &res, T0));
	chord__learned_free(&C->learned);
}

/* CFS 6.2: a closer virtual server of ours continues the step. */
Test(chord_table, local_shortcut)
{
	struct chord__vnode *v = vn(0, 0, 4);

	C->nv = 2;
	vn(1, 479, 16);
	cr_assert(step(v, 480, 2, false, 16));
	cr_assert_eq(n_out, 2);
	cr_assert(same(&out[0], 480) && same(&out[1], 481));
}

/* An unsure list with nothing before the key: no answer at all. */
Test(chord_table, unsure_and_empty)
{
	struct chord__vnode *v = vn(0, 0, 1);

	v->succ[0].n = ring[5];
	v->succ_unsure = true;
	cr_assert(!step(v, 3, 1, false, 16));
	cr_assert_eq(n_out, 0);
}

Test(chord_table, estimate_n)
{
	struct chord__vnode *v = vn(0, 0, 0);

	cr_assert_float_eq(chord__table_estimate_n(v), 1, 1e-9);
	vn(0, 0, 4);
	cr_assert_float_eq(chord__table_estimate_n(v), 5, 1e-9, "the whole ring fits");
	vn(0, 0, 16);
	double est = chord__table_estimate_n(v);
	cr_assert(est > RING / 4 && est < RING * 4, "N ≈ r / f: %f", est);
}

/* A virtual server still joining takes its successors from its join's
 * answer alone. A node that tells it "I am your predecessor" (a NOTIFY,
 * or any node its tables meet) is no successor: taken as one, the
 * joiner's successor would be the node just before it, and stabilizing
 * would walk that successor backwards round the ring, each step a wrong
 * successor list that lookups answer from. */
Test(chord_table, a_joining_server_takes_no_successor_from_what_it_meets)
{
	struct chord__vnode *v = vn(0, 100, 0);

	v->joined = false;
	chord__table_consider(C, &ring[99], T0);
	cr_assert_eq(v->nsuccs, 0);
	cr_assert_not(v->joined);
	cr_assert(v->pred.valid && same(&v->pred.n, 99)); /* its predecessor it may be */

	/* Joined, the same news does place a node in the list. */
	v->joined = true;
	chord__table_consider(C, &ring[101], T0);
	cr_assert_eq(v->nsuccs, 1);
	cr_assert(same(&v->succ[0].n, 101));
}

/* The nodes before a virtual server, nearest first, from every table and
 * the learned nodes: a finger far ahead is far behind round the circle,
 * a successor further still; our own virtual servers are never among
 * them, and a node in two tables is named once. */
Test(chord_table, preds_nearest_first_from_every_table)
{
	struct cfs_node got[8];
	struct chord__vnode *v = vn(0, 100, 4), *w = vn(1, 300, 2);

	C->nv = 2;
	chord__learned_init(&C->learned, 64);
	v->pred = (struct tnode){ .n = ring[99], .valid = true };
	v->finger[3] = (struct tnode){ .n = ring[200], .valid = true };
	w->pred = (struct tnode){ .n = ring[99], .valid = true }; /* named twice */
	chord__learned_add(&C->learned, &ring[97], cfs_now_us());
	chord__learned_add(&C->learned, &ring[98], cfs_now_us());
	chord__learned_add(&C->learned, &ring[300], cfs_now_us()); /* ours */

	uint32_t n = chord_vnode_preds(C, 0, got, 8);
	int want[] = { 99, 98, 97, 302, 301, 200, 104, 103 };
	cr_assert_eq(n, 8);
	for (uint32_t i = 0; i < n; i++)
		cr_assert(same(&got[i], want[i]), "entry %u is not ring[%d]", i, want[i]);
	cr_assert_eq(chord_vnode_preds(C, 0, got, 2), 2);
	cr_assert(same(&got[1], 98));
	chord__learned_free(&C->learned);
}

/* A hint (a node an answer named, checked by an AUTH of its own) is a first
 * hop of our own lookups only: a step served to others does not name it,
 * it is no predecessor, and learning it changes no successor list, finger
 * or predecessor. Failed as a hop, it leaves. */
Test(chord_table, hints_serve_our_own_lookups_only)
{
	struct chord__vnode *v = vn(0, 0, 4);
	struct cfs_node n, got[8];
	uint64_t t0 = T0 - 2 * CHORD_LEARNED_QUARANTINE_US;

	v->finger[3] = (struct tnode){ .n = ring[450], .valid = true };
	v->pred = (struct tnode){ .n = ring[RING - 1], .valid = true };
	chord__learned_init(&C->learned, 8);
	struct chord__vnode before_v = *v;

	chord__learned_hint(&C->learned, &ring[479], t0);
	cr_assert(chord__learned_next_check(&C->learned, t0, &n));
	chord__learned_checked(&C->learned, &n, true, t0);
	cr_assert_eq(memcmp(&before_v, v, sizeof(*v)), 0, "the tables are as they were");
	cr_assert(!chord__table_contains(C, &ring[479].id));

	struct cfs_id k = before(480);
	cr_assert(!chord__table_step(C, v, &k, 4, false, true, true, out, &n_out, &n_cand, 16, T0));
	cr_assert(same(&out[0], 479), "our own lookup starts at the hint");
	cr_assert(!chord__table_step(C, v, &k, 4, false, true, false, out, &n_out, &n_cand, 16, T0));
	cr_assert(same(&out[0], 450), "a step served to others does not name it");
	for (uint32_t i = 0; i < n_out; i++)
		cr_assert(!same(&out[i], 479));
	cr_assert_eq(chord_vnode_preds(C, 0, got, 8), 6); /* pred, finger, successors */
	for (uint32_t i = 0; i < 6; i++)
		cr_assert(!same(&got[i], 479), "no predecessor");

	/* it times out as our first hop: the driver drops it */
	chord__table_drop_finger(C, &ring[479].id);
	chord__learned_forget(&C->learned, &ring[479].id, T0);
	cr_assert(!chord__table_step(C, v, &k, 4, false, true, true, out, &n_out, &n_cand, 16, T0));
	cr_assert(same(&out[0], 450));
	chord__learned_hint(&C->learned, &ring[479], T0 + 1);
	cr_assert_eq(C->learned.nqueue, 0, "not checked again soon");
	chord__learned_free(&C->learned);
}
