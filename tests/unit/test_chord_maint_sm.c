/* The maintenance round's machine (chord/maint_sm.c) driven by scripted
 * events: no socket, no timer, a fake clock and scripted authentication
 * verdicts. ring[] holds real nodes sorted by ID, so ring[i] precedes
 * ring[i + 1] on the circle. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chord/maint_sm.h"

#define RING 64
#define STAB_MS 1000

static struct cfs_node ring[RING];
static chord_t *C;
static struct chord__mtsm SM;
static struct cfs_msg reply;
static const uint64_t T0 = 1000ull * 1000000;
/* The verdict every node gets, unless it is one of ours. */
static enum auth_state verdict = AUTH_OK;

static int by_id(const void *a, const void *b)
{
	return cfs_id_cmp(&((const struct cfs_node *)a)->id, &((const struct cfs_node *)b)->id);
}

static enum auth_state fake_auth(void *ctx, const struct cfs_node *n, uint64_t now)
{
	return chord__local(ctx, &n->id) ? AUTH_OK : verdict;
}

/* Virtual server vi at ring[self] with successors ring[first .. first + nsuccs). */
static struct chord__vnode *vn(uint32_t vi, int self, int first, uint32_t nsuccs)
{
	struct chord__vnode *v = &C->v[vi];

	v->c = C;
	v->index = vi;
	v->self = ring[self];
	v->joined = true;
	v->nsuccs = nsuccs;
	for (uint32_t i = 0; i < nsuccs; i++)
		v->succ[i] = (struct tnode){ .n = ring[first + (int)i], .valid = true };
	return v;
}

static void setup(void)
{
	for (int i = 0; i < RING; i++) {
		char ip[32];
		snprintf(ip, sizeof(ip), "10.8.0.%d", i + 1);
		cr_assert_eq(cfs_addr_from_ip(&ring[i].addr, ip, 4000), 0);
		cfs_node_id(&ring[i].id, &ring[i].addr, 0);
	}
	qsort(ring, RING, sizeof(ring[0]), by_id);
	C = calloc(1, sizeof(*C));
	C->cfg.nsucc = 8;
	C->cfg.fail_probes = 3;
	C->cfg.stabilize_ms = STAB_MS;
	C->cfg.pns = 4;
	C->v = calloc(2, sizeof(*C->v));
	C->nv = 1;
	verdict = AUTH_OK;
}

static void teardown(void)
{
	cfs_actq_free(&SM.q);
	free(C->v);
	free(C);
}

/* A fresh machine for v: the driver builds one per event. */
static struct chord__mtsm *sm_for(struct chord__vnode *v)
{
	cfs_actq_free(&SM.q);
	SM = (struct chord__mtsm){ .v = v, .auth = fake_auth, .ctx = C };
	return &SM;
}

/* The next action must be of this type (and to ring[to], unless to < 0). */
static struct chord__mt_act expect(enum chord__mt_act_type type, int to)
{
	struct chord__mt_act a;

	cr_assert(chord__mt_pop(&SM, &a), "no action left, wanted type %d", type);
	cr_assert_eq(a.type, type, "action type %d, wanted %d", a.type, type);
	if (to >= 0)
		cr_assert(cfs_id_eq(&a.to.id, &ring[to].id), "action to the wrong node");
	return a;
}

static void expect_none(void)
{
	struct chord__mt_act a;

	cr_assert(!chord__mt_pop(&SM, &a), "unexpected action of type %d", a.type);
}

/* GET_PRED's answer: predecessor ring[pred] (none when < 0), successors
 * ring[from .. from + n). */
static const struct cfs_msg *answer(int pred, int from, uint32_t n)
{
	memset(&reply, 0, sizeof(reply));
	reply.type = CFS_MSG_GET_PRED;
	reply.has_pred = pred >= 0;
	if (pred >= 0)
		reply.pred = ring[pred];
	for (uint32_t i = 0; i < n; i++)
		reply.nodes[reply.n_nodes++] = ring[from + (int)i];
	return &reply;
}

/* The successor asked and its answer taken: what the driver does. */
static void round_trip(struct chord__vnode *v, const struct cfs_msg *m, uint64_t now)
{
	chord__mtsm_tick(sm_for(v), now);
	struct chord__mt_act a = expect(CHORD__MTA_ASK_SUCC, -1);
	expect(CHORD__MTA_ARM_STAB, -1);
	cr_assert(v->stab_busy);
	chord__mtsm_succ_reply(sm_for(v), &a.to, m ? 0 : -ETIMEDOUT, m, now);
	cr_assert(!v->stab_busy);
}

TestSuite(chord_maint_sm, .init = setup, .fini = teardown);

Test(chord_maint_sm, pred_between_us_and_successor_is_offered)
{
	struct chord__vnode *v = vn(0, 10, 12, 3);

	round_trip(v, answer(11, 13, 4), T0);
	expect(CHORD__MTA_OFFER, 11);
	expect(CHORD__MTA_NOTIFY, -1);
	expect_none();
	cr_assert_eq(v->nsuccs, 5, "adopted [12] + 13..16");
	cr_assert(cfs_id_eq(&v->succ[0].n.id, &ring[12].id));
	cr_assert(cfs_id_eq(&v->succ[4].n.id, &ring[16].id));
}

Test(chord_maint_sm, successor_naming_us_needs_no_notify)
{
	struct chord__vnode *v = vn(0, 10, 11, 3);

	v->succ_unsure = true;
	round_trip(v, answer(10, 13, 3), T0);
	expect_none();
	cr_assert(!v->succ_unsure, "nothing between us and the successor");
}

Test(chord_maint_sm, successor_naming_another_is_notified)
{
	struct chord__vnode *v = vn(0, 10, 11, 3);

	v->succ_unsure = true;
	round_trip(v, answer(5, 13, 3), T0);
	expect(CHORD__MTA_NOTIFY, -1);
	expect_none();
	cr_assert(v->succ_unsure, "a node outside (us, successor) confirms nothing");

	round_trip(v, answer(-1, 13, 3), T0);
	expect(CHORD__MTA_NOTIFY, -1);
	expect_none();
}

Test(chord_maint_sm, list_stops_at_first_unauthenticated)
{
	struct chord__vnode *v = vn(0, 10, 11, 1);

	verdict = AUTH_PENDING;
	round_trip(v, answer(10, 12, 4), T0);
	cr_assert_eq(v->nsuccs, 1, "the successor alone: its list is being checked");
	verdict = AUTH_OK;
	round_trip(v, answer(10, 12, 4), T0);
	cr_assert_eq(v->nsuccs, 5);
	cr_assert(v->list_changed);
}

Test(chord_maint_sm, silent_successor_dropped_after_fail_probes)
{
	struct chord__vnode *v = vn(0, 10, 11, 3);

	for (uint32_t i = 1; i < C->cfg.fail_probes; i++) {
		round_trip(v, NULL, T0 + i);
		expect_none();
		cr_assert_eq(v->succ[0].misses, i);
	}
	round_trip(v, NULL, T0 + 9);
	struct chord__mt_act a = expect(CHORD__MTA_DROP, 11);
	cr_assert_eq(a.n, C->cfg.fail_probes);
	cr_assert_eq(a.status, -ETIMEDOUT);
	expect_none();

	/* The driver drops it from the tables; the next round asks the next. */
	memmove(&v->succ[0], &v->succ[1], 2 * sizeof(v->succ[0]));
	v->nsuccs = 2;
	chord__mtsm_tick(sm_for(v), T0 + 10);
	expect(CHORD__MTA_ASK_SUCC, 12);
	expect(CHORD__MTA_ARM_STAB, -1);
	expect_none();
}

Test(chord_maint_sm, refusing_successor_dropped_at_once)
{
	struct chord__vnode *v = vn(0, 10, 11, 3);

	chord__mtsm_tick(sm_for(v), T0);
	expect(CHORD__MTA_ASK_SUCC, 11);
	expect(CHORD__MTA_ARM_STAB, -1);
	chord__mtsm_succ_reply(sm_for(v), &ring[11], -ESRCH, NULL, T0);
	cr_assert_eq(expect(CHORD__MTA_DROP, 11).status, -ESRCH);
}

Test(chord_maint_sm, one_question_at_a_time_and_stale_answers_ignored)
{
	struct chord__vnode *v = vn(0, 10, 11, 3);

	chord__mtsm_tick(sm_for(v), T0);
	expect(CHORD__MTA_ASK_SUCC, 11);
	expect(CHORD__MTA_ARM_STAB, -1);
	chord__mtsm_tick(sm_for(v), T0 + 1);
	expect(CHORD__MTA_ARM_STAB, -1);
	expect_none();
	/* Meanwhile ring[11] left the list: its answer changes nothing. */
	v->succ[0] = v->succ[1];
	v->succ[1] = v->succ[2];
	v->nsuccs = 2;
	chord__mtsm_succ_reply(sm_for(v), &ring[11], 0, answer(10, 12, 3), T0 + 2);
	expect_none();
	cr_assert_eq(v->nsuccs, 2);
	cr_assert(!v->stab_busy);

	/* A question that could not be sent is not in flight. */
	chord__mtsm_tick(sm_for(v), T0 + 3);
	expect(CHORD__MTA_ASK_SUCC, 12);
	expect(CHORD__MTA_ARM_STAB, -1);
	chord__mtsm_unsent(&SM, CHORD__MTA_ASK_SUCC, T0 + 3);
	cr_assert(!v->stab_busy);
}

Test(chord_maint_sm, local_successor_read_directly)
{
	C->nv = 2;
	struct chord__vnode *v = vn(0, 10, 12, 1), *u = vn(1, 12, 13, 2);

	u->pred = (struct tnode){ .n = ring[11], .valid = true };
	chord__mtsm_tick(sm_for(v), T0);
	expect(CHORD__MTA_OFFER, 11);
	expect(CHORD__MTA_CONSIDER, 10); /* ourselves, to u: its notify */
	expect(CHORD__MTA_ARM_STAB, -1);
	expect_none();
	cr_assert_eq(v->nsuccs, 3);
	cr_assert(!v->stab_busy);
}

Test(chord_maint_sm, quiet_predecessor_probed_and_lost)
{
	struct chord__vnode *v = vn(0, 10, 11, 0);
	uint64_t quiet = 2ull * STAB_MS * 1000;

	v->pred = (struct tnode){ .n = ring[9], .valid = true };
	v->pred_heard_us = T0;
	chord__mtsm_tick(sm_for(v), T0 + quiet);
	expect(CHORD__MTA_ARM_STAB, -1);
	expect_none();
	chord__mtsm_tick(sm_for(v), T0 + quiet + 1);
	expect(CHORD__MTA_PROBE_PRED, 9);
	expect(CHORD__MTA_ARM_STAB, -1);
	cr_assert(v->pred_probe_busy);
	chord__mtsm_tick(sm_for(v), T0 + quiet + 2);
	expect(CHORD__MTA_ARM_STAB, -1);
	expect_none();

	/* It answers: heard now, misses cleared. */
	v->pred.misses = 2;
	chord__mtsm_pred_reply(sm_for(v), &ring[9], 0, T0 + quiet + 3);
	expect_none();
	cr_assert_eq(v->pred_heard_us, T0 + quiet + 3);
	cr_assert_eq(v->pred.misses, 0);

	uint64_t t = T0 + 2 * quiet + 4;
	for (uint32_t i = 1; i <= C->cfg.fail_probes; i++) {
		chord__mtsm_tick(sm_for(v), t + i);
		expect(CHORD__MTA_PROBE_PRED, 9);
		expect(CHORD__MTA_ARM_STAB, -1);
		chord__mtsm_pred_reply(sm_for(v), &ring[9], -ETIMEDOUT, t + i);
		if (i < C->cfg.fail_probes)
			expect_none();
	}
	cr_assert_eq(expect(CHORD__MTA_PRED_LOST, 9).n, C->cfg.fail_probes);
	cr_assert(!v->pred.valid);
}

Test(chord_maint_sm, first_round_after_join_said_once)
{
	struct chord__vnode *v = vn(0, 10, 11, 1);

	v->join_attempts = 2;
	chord__mtsm_tick(sm_for(v), T0);
	cr_assert_eq(expect(CHORD__MTA_JOINED, 11).n, 2);
	expect(CHORD__MTA_ASK_SUCC, 11);
	expect(CHORD__MTA_ARM_STAB, -1);
	cr_assert_eq(v->join_attempts, 0);
}

/* The first ring node at or after finger k's start, seen from ring[self]. */
static int finger_first(int self, int k)
{
	struct cfs_id s;

	cfs_id_add_pow2(&s, &ring[self].id, FINGER_BASE + (unsigned)k);
	for (int d = 1; d < RING; d++) {
		int i = (self + d) % RING;
		if (cfs_id_in_co(&ring[i].id, &s, &ring[self].id))
			return i;
	}
	cr_assert_fail("no node in finger %d's range", k);
	return -1;
}

Test(chord_maint_sm, finger_answer_in_range_taken_nearest_first)
{
	struct chord__vnode *v = vn(0, 10, 11, 1);
	int k = NFINGERS - 1, j = finger_first(10, k);
	struct cfs_node cand[2] = { ring[j], ring[(j + 1) % RING] };

	v->next_finger = k;
	chord__mtsm_fix_tick(sm_for(v), T0);
	struct chord__mt_act a = expect(CHORD__MTA_LOOKUP_FINGER, -1);
	cr_assert_eq(a.k, k);
	struct cfs_id s;
	cfs_id_add_pow2(&s, &v->self.id, FINGER_BASE + (unsigned)k);
	cr_assert(cfs_id_eq(&a.key, &s), "looks up the finger's start");
	a = expect(CHORD__MTA_ARM_FIX, -1);
	cr_assert(!a.jitter && a.ms == 5, "the first pass runs back to back");
	expect_none();
	cr_assert(v->fix_busy);
	cr_assert_eq(v->next_finger, k - 1);

	/* PNS: the second candidate is predicted nearer (our coordinate is
	 * the origin), so it is taken, once authenticated. */
	cand[0].coord.v[0] = 100;
	verdict = AUTH_PENDING;
	chord__mtsm_finger_answer(sm_for(v), k, 0, cand, 2, T0 + 1);
	cr_assert(!v->fix_busy);
	cr_assert(!v->finger[k].valid, "not yet authenticated");
	verdict = AUTH_OK;
	chord__mtsm_finger_answer(sm_for(v), k, 0, cand, 2, T0 + 2);
	expect_none();
	cr_assert(v->finger[k].valid);
	cr_assert(cfs_id_eq(&v->finger[k].n.id, &cand[1].id));

	/* A failed lookup changes nothing. */
	chord__mtsm_finger_answer(sm_for(v), k, -ETIMEDOUT, NULL, 0, T0 + 3);
	cr_assert(cfs_id_eq(&v->finger[k].n.id, &cand[1].id));
}

Test(chord_maint_sm, finger_answer_outside_range_takes_first)
{
	struct chord__vnode *v = vn(0, 10, 11, 1);
	int k = NFINGERS - 1, j = finger_first(10, k);
	struct cfs_node cand[2] = { ring[(j + RING - 1) % RING], ring[j] };

	cand[1].coord.v[0] = 0;
	cand[0].coord.v[0] = 100;
	chord__mtsm_finger_answer(sm_for(v), k, 0, cand, 2, T0);
	cr_assert(v->finger[k].valid);
	cr_assert(cfs_id_eq(&v->finger[k].n.id, &cand[0].id), "no candidate inside: the first");
}

Test(chord_maint_sm, fingers_covered_by_successors_need_no_lookup)
{
	struct chord__vnode *v = vn(0, 10, 11, 0);

	v->next_finger = NFINGERS - 1;
	v->finger[3] = (struct tnode){ .n = ring[20], .valid = true };
	chord__mtsm_fix_tick(sm_for(v), T0);
	struct chord__mt_act a = expect(CHORD__MTA_ARM_FIX, -1);
	expect_none();
	cr_assert(v->fingers_done);
	cr_assert(a.jitter);
	cr_assert(!v->finger[3].valid, "every lower finger is covered too");

	/* Not joined: no finger work, the tick is armed all the same. */
	v->joined = false;
	chord__mtsm_fix_tick(sm_for(v), T0);
	expect(CHORD__MTA_ARM_FIX, -1);
	expect_none();
}

Test(chord_maint_sm, unsent_finger_lookup_moves_on)
{
	struct chord__vnode *v = vn(0, 10, 11, 1);
	int k = NFINGERS - 1;

	v->next_finger = k;
	chord__mtsm_fix_tick(sm_for(v), T0);
	expect(CHORD__MTA_LOOKUP_FINGER, -1);
	expect(CHORD__MTA_ARM_FIX, -1);
	chord__mtsm_unsent(&SM, CHORD__MTA_LOOKUP_FINGER, T0);
	cr_assert_eq(expect(CHORD__MTA_LOOKUP_FINGER, -1).k, k - 1);
	expect(CHORD__MTA_ARM_FIX, -1);
	expect_none();
	cr_assert(v->fix_busy);
}

/* A virtual server that has not joined yet, with one join target. */
static struct chord__vnode *joining(void)
{
	struct chord__vnode *v = vn(0, 10, 11, 0);

	v->joined = false;
	C->nboot = 1;
	return v;
}

Test(chord_maint_sm, join_answer_adopted_once_its_head_is_authenticated)
{
	struct chord__vnode *v = joining();
	struct cfs_node succ[4] = { ring[11], ring[12], ring[13], ring[14] };

	chord__mtsm_tick(sm_for(v), T0);
	expect(CHORD__MTA_LOOKUP_JOIN, -1);
	struct chord__mt_act a = expect(CHORD__MTA_ARM_STAB, -1);
	cr_assert(!a.jitter && a.ms == 250, "a joining server retries soon");
	expect_none();
	cr_assert(v->join_busy);
	chord__mtsm_tick(sm_for(v), T0 + 1);
	expect(CHORD__MTA_ARM_STAB, -1);
	expect_none(); /* one join lookup at a time */

	/* The head's check is pending: nothing adopted, the next attempt
	 * finds it authenticated. */
	verdict = AUTH_PENDING;
	chord__mtsm_join_answer(sm_for(v), 0, succ, 4, false, T0 + 2);
	expect_none();
	cr_assert(!v->join_busy);
	cr_assert(!v->joined);
	cr_assert_eq(v->nsuccs, 0);

	chord__mtsm_tick(sm_for(v), T0 + 3);
	expect(CHORD__MTA_LOOKUP_JOIN, -1);
	expect(CHORD__MTA_ARM_STAB, -1);
	verdict = AUTH_OK;
	v->succ_unsure = true;
	chord__mtsm_join_answer(sm_for(v), 0, succ, 4, false, T0 + 4);
	expect(CHORD__MTA_CONSIDER, 10); /* our own joined servers take their places */
	expect(CHORD__MTA_ADOPTED, 11);
	expect_none();
	cr_assert(v->joined);
	cr_assert(!v->succ_unsure);
	cr_assert_eq(v->nsuccs, 4);

	/* The next round says so, then stabilizes. */
	chord__mtsm_tick(sm_for(v), T0 + 5);
	cr_assert_eq(expect(CHORD__MTA_JOINED, 11).n, 2);
	expect(CHORD__MTA_ASK_SUCC, 11);
	a = expect(CHORD__MTA_ARM_STAB, -1);
	cr_assert(a.jitter);
	cr_assert_eq(a.ms, STAB_MS / 4, "the list just changed: come back sooner");
}

Test(chord_maint_sm, join_answer_naming_us_skips_us)
{
	struct chord__vnode *v = joining();
	struct cfs_node succ[3] = { ring[10], ring[11], ring[12] };

	v->join_busy = true;
	chord__mtsm_join_answer(sm_for(v), 0, succ, 3, false, T0);
	expect(CHORD__MTA_CONSIDER, 10);
	expect(CHORD__MTA_ADOPTED, 10);
	cr_assert_eq(v->nsuccs, 2);
	cr_assert(cfs_id_eq(&v->succ[0].n.id, &ring[11].id));

	/* An answer naming only us, or one the index check holds, is not taken. */
	struct chord__vnode *w = vn(1, 20, 21, 0);
	C->nv = 2;
	w->joined = false;
	chord__mtsm_join_answer(sm_for(w), 0, &ring[20], 1, false, T0);
	expect_none();
	chord__mtsm_join_answer(sm_for(w), 0, &ring[21], 1, true, T0);
	expect_none();
	cr_assert_eq(w->nsuccs, 0);
}

Test(chord_maint_sm, failed_join_moves_to_next_target)
{
	struct chord__vnode *v = joining();

	chord__mtsm_tick(sm_for(v), T0);
	expect(CHORD__MTA_LOOKUP_JOIN, -1);
	expect(CHORD__MTA_ARM_STAB, -1);
	chord__mtsm_join_answer(sm_for(v), -ETIMEDOUT, NULL, 0, false, T0 + 1);
	cr_assert_eq(expect(CHORD__MTA_JOIN_FAILED, -1).status, -ETIMEDOUT);
	expect_none();
	chord__mtsm_join_answer(sm_for(v), 0, NULL, 0, false, T0 + 1);
	cr_assert_eq(expect(CHORD__MTA_JOIN_FAILED, -1).status, 0, "no successor in its answer");

	/* A lookup that cannot start moves on too, quietly. */
	chord__mtsm_tick(sm_for(v), T0 + 2);
	expect(CHORD__MTA_LOOKUP_JOIN, -1);
	expect(CHORD__MTA_ARM_STAB, -1);
	chord__mtsm_unsent(&SM, CHORD__MTA_LOOKUP_JOIN, T0 + 2);
	expect(CHORD__MTA_NEXT_TARGET, -1);
	cr_assert(!v->join_busy);

	/* Cancelled: nothing but the lookup's end. */
	v->join_busy = true;
	chord__mtsm_join_answer(sm_for(v), -ECANCELED, NULL, 0, false, T0 + 3);
	expect_none();
	cr_assert(!v->join_busy);
}

Test(chord_maint_sm, no_join_target_or_first_founds_a_ring)
{
	struct chord__vnode *v = joining();

	C->nboot = 0;
	chord__mtsm_tick(sm_for(v), T0);
	cr_assert(!expect(CHORD__MTA_FOUND_RING, -1).founded);
	cr_assert(expect(CHORD__MTA_ARM_STAB, -1).jitter);
	cr_assert(v->joined);

	/* cfg.first: once every target was tried without an answer. */
	v->joined = false;
	C->nboot = 2;
	C->cfg.first = true;
	for (int i = 0; i < 2; i++) {
		chord__mtsm_tick(sm_for(v), T0 + 1);
		expect(CHORD__MTA_LOOKUP_JOIN, -1);
		expect(CHORD__MTA_ARM_STAB, -1);
		chord__mtsm_join_answer(sm_for(v), -ETIMEDOUT, NULL, 0, false, T0 + 2);
		expect(CHORD__MTA_JOIN_FAILED, -1);
	}
	chord__mtsm_tick(sm_for(v), T0 + 3);
	struct chord__mt_act a = expect(CHORD__MTA_FOUND_RING, -1);
	cr_assert(a.founded);
	cr_assert_eq(a.n, 2);
	cr_assert(v->joined);
}
