/*
 * The maintenance round's decisions (maint_sm.h): no socket, no timer, no
 * clock. maint.c carries the actions out.
 */
#include "chord/maint_sm.h"

#define JOIN_RETRY_MS 250

static struct chord__mt_act *emit(struct chord__mtsm *sm, enum chord__mt_act_type type,
                                  const struct cfs_node *to)
{
	struct chord__mt_act *a = cfs_actq_push(&sm->q, sizeof(*a));

	a->type = type;
	if (to)
		a->to = *to;
	return a;
}

static struct tnode *find_succ(struct chord__vnode *v, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < v->nsuccs; i++)
		if (cfs_id_eq(&v->succ[i].n.id, id))
			return &v->succ[i];
	return NULL;
}

/* A missed probe of successor t: after fail_probes in a row it is dead,
 * and so at once is a node that says it is gone or refuses us; the next
 * entry of the successor list takes over. */
static void succ_missed(struct chord__mtsm *sm, struct tnode *t, int status)
{
	if (status == -ESRCH || status == -EPERM || status == -ESHUTDOWN ||
	    ++t->misses >= sm->v->c->cfg.fail_probes) {
		struct chord__mt_act *a = emit(sm, CHORD__MTA_DROP, &t->n);
		a->status = status;
		a->n = t->misses;
	}
}

/*
 * Chord Fig. 7, stabilize(): the successor s named its predecessor p and
 * its own list. Adopt [s] + its list (CFS 4.1: the successor list); a p
 * between us and s is a closer successor, offered to the tables; a p that
 * is us confirms the list (nothing between us and s: succ_unsure ends) and
 * needs no notify, any other p does. Its list wraps back to us only if s
 * names us its predecessor too: a node that took us for its successor by
 * mistake names us first.
 */
static void stab_apply(struct chord__mtsm *sm, const struct cfs_node *first, bool has_pred,
                       const struct cfs_node *pred, const struct cfs_node *list, uint32_t n,
                       uint64_t now)
{
	struct chord__vnode *v = sm->v;
	bool pred_is_us = has_pred && cfs_id_eq(&pred->id, &v->self.id);

	chord__table_set_succs(v, first, list, n, sm->auth, sm->ctx, now);
	v->wraps &= pred_is_us;
	if (pred_is_us)
		v->succ_unsure = false;
	if (has_pred && !pred_is_us && cfs_id_in_oo(&pred->id, &v->self.id, &first->id))
		emit(sm, CHORD__MTA_OFFER, pred);
}

void chord__mtsm_succ_reply(struct chord__mtsm *sm, const struct cfs_node *to, int status,
                            const struct cfs_msg *reply, uint64_t now)
{
	struct chord__vnode *v = sm->v;
	struct tnode *t;

	v->stab_busy = false;
	t = find_succ(v, &to->id);
	if (status < 0) {
		if (t)
			succ_missed(sm, t, status);
		return;
	}
	if (!t || t != &v->succ[0])
		return; /* the list changed meanwhile; next round */
	struct cfs_node first = t->n;
	first.coord = reply->coord;
	stab_apply(sm, &first, reply->has_pred, &reply->pred, reply->nodes, reply->n_nodes, now);
	if (!reply->has_pred || !cfs_id_eq(&reply->pred.id, &v->self.id))
		emit(sm, CHORD__MTA_NOTIFY, NULL); /* Chord Fig. 7, notify() */
}

/* A successor that is one of our own virtual servers: its tables are read
 * here, and telling it about us is offering ourselves to the tables. */
static void stab_local(struct chord__mtsm *sm, const struct chord__vnode *u, uint64_t now)
{
	struct cfs_node list[CHORD_SUCC_MAX];

	for (uint32_t i = 0; i < u->nsuccs; i++)
		list[i] = u->succ[i].n;
	stab_apply(sm, &u->self, u->pred.valid, &u->pred.n, list, u->nsuccs, now);
	emit(sm, CHORD__MTA_CONSIDER, &sm->v->self);
}

/* A predecessor silent for two rounds is probed; fail_probes misses in a
 * row and it is gone (Chord's check_predecessor()). */
void chord__mtsm_pred_reply(struct chord__mtsm *sm, const struct cfs_node *to, int status, uint64_t now)
{
	struct chord__vnode *v = sm->v;

	v->pred_probe_busy = false;
	if (!v->pred.valid || !cfs_id_eq(&v->pred.n.id, &to->id))
		return;
	if (status == 0) {
		v->pred_heard_us = now;
		v->pred.misses = 0;
	} else if (++v->pred.misses >= v->c->cfg.fail_probes || status == -ESRCH) {
		struct chord__mt_act *a = emit(sm, CHORD__MTA_PRED_LOST, &v->pred.n);
		a->status = status;
		a->n = v->pred.misses;
		v->pred.valid = false;
	}
}

/* ------------------------------------------------------------ join */

/*
 * Chord Fig. 7, join(n'): look up our own ID through the next join target.
 * With none, found a ring. With cfg.first, found one too once every
 * target was tried and none answered (a founder restarted while the
 * others are down); the ring check keeps trying them, and merges the
 * rings when they come back.
 */
static void join(struct chord__mtsm *sm)
{
	struct chord__vnode *v = sm->v;
	const chord_t *c = v->c;
	size_t n = c->nboot + c->npeers;

	if (v->join_busy || c->index_full)
		return;
	if (n == 0 || c->founded) {
		emit(sm, CHORD__MTA_FOUND_RING, NULL);
		v->joined = true;
		return;
	}
	if (c->cfg.first && v->index == 0 && v->join_attempts >= n) {
		struct chord__mt_act *a = emit(sm, CHORD__MTA_FOUND_RING, NULL);
		a->founded = true;
		a->n = (uint32_t)n;
		v->joined = true;
		return;
	}
	v->join_attempts++;
	v->join_busy = true;
	emit(sm, CHORD__MTA_LOOKUP_JOIN, NULL);
}

/*
 * Our join lookup came back. A failure moves on to the next join target.
 * Otherwise the answer, the key's successor list (CFS 4.1), contiguous,
 * becomes ours once its head is authenticated (CFS 4.4: all of it is
 * being checked; a pending head waits for the next attempt), and our own
 * virtual servers take their places in it at once, not rounds later.
 */
void chord__mtsm_join_answer(struct chord__mtsm *sm, int status, const struct cfs_node *succ,
                             uint32_t n, bool held, uint64_t now)
{
	struct chord__vnode *v = sm->v;
	const chord_t *c = v->c;
	struct cfs_node list[CFS_MSG_MAX_NODES];
	uint32_t m = 0;

	v->join_busy = false;
	if (status == -ECANCELED)
		return;
	if (status < 0 || n == 0) {
		emit(sm, CHORD__MTA_JOIN_FAILED, NULL)->status = status;
		return; /* the stabilization tick retries */
	}
	if (held)
		return;
	for (uint32_t i = 0; i < n && m < CFS_MSG_MAX_NODES; i++)
		if (!cfs_id_eq(&succ[i].id, &v->self.id))
			list[m++] = succ[i];
	if (m == 0)
		return;
	enum auth_state st = sm->auth(sm->ctx, &list[0], now);
	for (uint32_t i = 1; i < m; i++)
		(void)sm->auth(sm->ctx, &list[i], now);
	if (st != AUTH_OK)
		return; /* pending: the next attempt finds it authenticated */
	chord__table_set_succs(v, &list[0], list + 1, m - 1, sm->auth, sm->ctx, now);
	v->succ_unsure = false;
	for (uint32_t i = 0; i < c->nv; i++)
		if (c->v[i].joined)
			emit(sm, CHORD__MTA_CONSIDER, &c->v[i].self);
	emit(sm, CHORD__MTA_ADOPTED, &succ[0]);
}

/* ------------------------------------------------------------ stabilize */

static void stabilize(struct chord__mtsm *sm, uint64_t now)
{
	struct chord__vnode *v = sm->v;
	chord_t *c = v->c;

	/* The first round after a join (which the tables may complete, not
	 * the join's answer) says so, once: join_attempts counts only for it. */
	if (v->join_attempts) {
		emit(sm, CHORD__MTA_JOINED, chord__vn_succ(v))->n = v->join_attempts;
		v->join_attempts = 0;
	}
	if (v->nsuccs > 0 && !v->stab_busy) {
		const struct chord__vnode *u = chord__local(c, &v->succ[0].n.id);
		if (u) {
			stab_local(sm, u, now);
		} else {
			emit(sm, CHORD__MTA_ASK_SUCC, &v->succ[0].n);
			v->stab_busy = true;
		}
	}
	uint64_t quiet = 2ull * c->cfg.stabilize_ms * 1000;
	if (v->pred.valid && !v->pred_probe_busy && !chord__local(c, &v->pred.n.id) &&
	    now - v->pred_heard_us > quiet) {
		emit(sm, CHORD__MTA_PROBE_PRED, &v->pred.n);
		v->pred_probe_busy = true;
	}
}

void chord__mtsm_tick(struct chord__mtsm *sm, uint64_t now)
{
	struct chord__vnode *v = sm->v;

	if (!v->joined)
		join(sm);
	else
		stabilize(sm, now);
	/* While the list is still changing, come back sooner: news travels
	 * backwards round by round, one predecessor at a time. */
	uint32_t period = v->list_changed ? v->c->cfg.stabilize_ms / 4 : v->c->cfg.stabilize_ms;
	v->list_changed = false;
	struct chord__mt_act *a = emit(sm, CHORD__MTA_ARM_STAB, NULL);
	a->jitter = v->joined;
	a->ms = v->joined ? period : JOIN_RETRY_MS;
}

/* ------------------------------------------------------------ fingers */

static void finger_bounds(const struct chord__vnode *v, int k, struct cfs_id *s, struct cfs_id *e)
{
	cfs_id_add_pow2(s, &v->self.id, FINGER_BASE + (unsigned)k);
	if (k + 1 < NFINGERS)
		cfs_id_add_pow2(e, &v->self.id, FINGER_BASE + (unsigned)k + 1);
	else
		*e = v->self.id;
}

/* DHash++ 4.3, PNS(x): of the first x candidates inside finger k's range,
 * the one with the lowest predicted latency; the first candidate if none
 * is inside. Taken once authenticated. */
static void finger_choose(struct chord__mtsm *sm, int k, const struct cfs_node *cand, uint32_t n,
                          uint64_t now)
{
	struct chord__vnode *v = sm->v;
	struct cfs_id s, e;
	int best = -1;
	uint64_t best_rtt = UINT64_MAX;

	if (n == 0)
		return;
	finger_bounds(v, k, &s, &e);
	for (uint32_t i = 0; i < n && i < v->c->cfg.pns; i++) {
		if (!cfs_id_in_co(&cand[i].id, &s, &e))
			break;
		if (cfs_id_eq(&cand[i].id, &v->self.id))
			continue;
		uint64_t p = chord_predict_rtt_us(v->c, &cand[i].coord);
		if (p < best_rtt) {
			best_rtt = p;
			best = (int)i;
		}
	}
	if (best < 0) {
		if (cfs_id_eq(&cand[0].id, &v->self.id))
			return;
		best = 0;
	}
	if (sm->auth(sm->ctx, &cand[best], now) == AUTH_OK) {
		struct tnode *f = &v->finger[k];
		if (!f->valid || !cfs_id_eq(&f->n.id, &cand[best].id))
			*f = (struct tnode){ .n = cand[best], .valid = true };
	}
}

static void next_finger(struct chord__vnode *v)
{
	if (--v->next_finger < 0) {
		v->next_finger = NFINGERS - 1;
		v->fingers_done = true;
	}
}

/* Chord Fig. 7, fix_fingers(), from the highest finger down: refresh
 * fingers until one needs a lookup (or all are done). A finger whose
 * start the successor list covers needs no lookup, nor does any finger
 * below it. */
static void fix_fingers(struct chord__mtsm *sm, uint64_t now)
{
	struct chord__vnode *v = sm->v;

	for (; sm->guard < NFINGERS && !v->fix_busy; sm->guard++) {
		int k = v->next_finger;
		struct cfs_id s, e;
		finger_bounds(v, k, &s, &e);
		const struct cfs_id *last = v->nsuccs ? &v->succ[v->nsuccs - 1].n.id : &v->self.id;
		if (v->nsuccs == 0 || cfs_id_in_oc(&s, &v->self.id, last)) {
			struct cfs_node cand[CHORD_SUCC_MAX];
			uint32_t n = 0;
			for (uint32_t i = 0; i < v->nsuccs; i++)
				if (cfs_id_in_co(&v->succ[i].n.id, &s, &v->self.id) || n)
					cand[n++] = v->succ[i].n;
			finger_choose(sm, k, cand, n, now);
			for (int j = k - 1; j >= 0; j--)
				v->finger[j].valid = false;
			v->next_finger = 0;
			next_finger(v);
			return;
		}
		struct chord__mt_act *a = emit(sm, CHORD__MTA_LOOKUP_FINGER, NULL);
		a->k = k;
		a->key = s;
		next_finger(v);
		v->fix_busy = true;
	}
}

/* The first pass after joining runs back to back. */
static void arm_fix(struct chord__mtsm *sm)
{
	struct chord__mt_act *a = emit(sm, CHORD__MTA_ARM_FIX, NULL);

	a->jitter = sm->v->fingers_done;
	a->ms = sm->v->fingers_done ? sm->v->c->cfg.fix_fingers_ms : 5;
}

void chord__mtsm_fix_tick(struct chord__mtsm *sm, uint64_t now)
{
	struct chord__vnode *v = sm->v;

	sm->guard = 0;
	if (v->joined)
		fix_fingers(sm, now);
	arm_fix(sm);
}

void chord__mtsm_finger_answer(struct chord__mtsm *sm, int k, int status, const struct cfs_node *succ,
                               uint32_t n, uint64_t now)
{
	sm->v->fix_busy = false;
	if (status == 0)
		finger_choose(sm, k, succ, n, now);
}

void chord__mtsm_unsent(struct chord__mtsm *sm, enum chord__mt_act_type type, uint64_t now)
{
	if (type == CHORD__MTA_ASK_SUCC) {
		sm->v->stab_busy = false;
	} else if (type == CHORD__MTA_PROBE_PRED) {
		sm->v->pred_probe_busy = false;
	} else if (type == CHORD__MTA_LOOKUP_JOIN) {
		sm->v->join_busy = false;
		emit(sm, CHORD__MTA_NEXT_TARGET, NULL);
	} else if (type == CHORD__MTA_LOOKUP_FINGER) {
		/* The tick goes on, and arms again: the first pass may have
		 * ended meanwhile. */
		sm->v->fix_busy = false;
		fix_fingers(sm, now);
		arm_fix(sm);
	}
}
