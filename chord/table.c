/*
 * The routing tables of each virtual server — successor list, predecessor,
 * fingers — and the local half of a lookup step. Nodes arrive here only
 * authenticated (auth.c); the virtual servers of a process share what they
 * know (CFS 6.2: they look at each other's tables).
 */
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"



const struct cfs_node *chord__vn_succ(const struct chord__vnode *v)
{
	return v->nsuccs ? &v->succ[0].n : &v->self;
}

static void finger_range(const struct chord__vnode *v, int k, struct cfs_id *start, struct cfs_id *end)
{
	cfs_id_add_pow2(start, &v->self.id, FINGER_BASE + (unsigned)k);
	if (k + 1 < NFINGERS)
		cfs_id_add_pow2(end, &v->self.id, FINGER_BASE + (unsigned)k + 1);
	else
		*end = v->self.id;
}

/*
 * Insert n into v's successor list at its place by clockwise distance. Only
 * between two entries (or as the first): appending after the last entry
 * could leave out nodes we do not know of, and the list must stay gap-free
 * for lookups to trust it.
 */
static void succ_insert(struct chord__vnode *v, const struct cfs_node *n, uint32_t r)
{
	uint32_t i;

	if (cfs_id_eq(&n->id, &v->self.id))
		return;
	for (i = 0; i < v->nsuccs; i++) {
		if (cfs_id_eq(&v->succ[i].n.id, &n->id))
			return;
		const struct cfs_id *prev = i ? &v->succ[i - 1].n.id : &v->self.id;
		if (cfs_id_in_oo(&n->id, prev, &v->succ[i].n.id))
			break;
	}
	if (i >= r || (i == v->nsuccs && v->nsuccs > 0))
		return;
	uint32_t end = v->nsuccs < r ? v->nsuccs : r - 1;
	memmove(&v->succ[i + 1], &v->succ[i], (end - i) * sizeof(v->succ[0]));
	v->succ[i] = (struct tnode){ .n = *n, .valid = true };
	if (v->nsuccs < r)
		v->nsuccs++;
	if (i == 0)
		chord__maint_kick(v); /* a new successor: ask it about its neighbours now */
}

void chord__table_consider(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	bool local = chord__local(c, &n->id) != NULL;

	chord__merge_learned(c, n);
	if (!local)
		chord__learned_add(&c->learned, n, now);
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		struct chord__vnode *v = &c->v[vi];
		if (cfs_id_eq(&n->id, &v->self.id))
			continue;
		/* A virtual server still joining takes its successors from its
		 * join's answer alone: a node met meanwhile (a NOTIFY from the
		 * node just before it, most often) is no successor, and once
		 * taken as one, stabilizing would walk the successor backwards
		 * round the ring, a wrong list at each step. */
		if (v->joined)
			succ_insert(v, n, c->cfg.nsucc);
		/* A node that would lengthen a short list: it was cut there
		 * while this node's authentication was pending; fetch the list
		 * again now rather than a round later. */
		if (v->nsuccs > 0 && v->nsuccs < c->cfg.nsucc &&
		    cfs_id_in_oo(&n->id, &v->succ[v->nsuccs - 1].n.id, &v->self.id))
			chord__maint_kick(v);
		if (!v->pred.valid || cfs_id_in_oo(&n->id, &v->pred.n.id, &v->self.id)) {
			if (!v->pred.valid || !cfs_id_eq(&v->pred.n.id, &n->id)) {
				v->pred = (struct tnode){ .n = *n, .valid = true };
				v->pred_sure = local; /* one of ours: its tables are ours */
			}
			v->pred_heard_us = now;
		}
		for (int k = 0; k < NFINGERS; k++) {
			struct cfs_id s, e;
			finger_range(v, k, &s, &e);
			if (!cfs_id_in_co(&n->id, &s, &e))
				continue;
			struct tnode *f = &v->finger[k];
			if (!f->valid || !cfs_id_in_co(&f->n.id, &s, &e))
				*f = (struct tnode){ .n = *n, .valid = true };
		}
	}
}

void chord__table_offer(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	if (chord__auth_check(c, n, now) == AUTH_OK)
		chord__table_consider(c, n, now);
}

void chord__table_remove(chord_t *c, const struct cfs_id *id, uint64_t now)
{
	char s[9];
	bool found = false;

	if (chord__local(c, id))
		return;
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		struct chord__vnode *v = &c->v[vi];
		for (uint32_t i = 0; i < v->nsuccs; i++)
			if (cfs_id_eq(&v->succ[i].n.id, id)) {
				memmove(&v->succ[i], &v->succ[i + 1], (v->nsuccs - i - 1) * sizeof(v->succ[0]));
				v->nsuccs--;
				found = true;
				break;
			}
		if (v->pred.valid && cfs_id_eq(&v->pred.n.id, id)) {
			v->pred.valid = false;
			found = true;
		}
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid && cfs_id_eq(&v->finger[k].n.id, id)) {
				v->finger[k].valid = false;
				found = true;
			}
	}
	found |= chord__learned_remove(&c->learned, id);
	chord__auth_mark_dead(c, id, now);
	if (found)
		log_debug("dropped node %s from the tables", cfs_id_short(id, s));
	/* A virtual server whose successors all died falls back on whatever
	 * else it knows, so the ring heals instead of splitting. That list may
	 * skip live nodes: until stabilisation confirms it (succ_unsure),
	 * lookups do not answer from it. */
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		struct chord__vnode *v = &c->v[vi];
		if (v->nsuccs > 0)
			continue;
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid)
				succ_insert(v, &v->finger[k].n, c->cfg.nsucc);
		if (v->pred.valid)
			succ_insert(v, &v->pred.n, c->cfg.nsucc);
		for (uint32_t u = 0; u < c->nv; u++)
			if (u != vi)
				succ_insert(v, &c->v[u].self, c->cfg.nsucc);
		v->succ_unsure = v->nsuccs > 0;
		v->wraps = false;
	}
}

void chord__table_drop_finger(chord_t *c, const struct cfs_id *id)
{
	(void)chord__learned_remove(&c->learned, id);
	for (uint32_t vi = 0; vi < c->nv; vi++)
		for (int k = 0; k < NFINGERS; k++)
			if (c->v[vi].finger[k].valid && cfs_id_eq(&c->v[vi].finger[k].n.id, id))
				c->v[vi].finger[k].valid = false;
}

/* Does v's successor list name every node v's predecessor and fingers
 * do? A successor list that claims the whole ring must: one successor's
 * word ("the ring is you and me") cannot shrink what else we know. */
static bool list_has_all(const chord_t *c, const struct chord__vnode *v)
{
	for (int k = -1; k < NFINGERS; k++) {
		const struct tnode *t = k < 0 ? &v->pred : &v->finger[k];
		if (!t->valid || chord__local(c, &t->n.id))
			continue;
		bool found = false;
		for (uint32_t i = 0; i < v->nsuccs && !found; i++)
			found = cfs_id_eq(&v->succ[i].n.id, &t->n.id);
		if (!found)
			return false;
	}
	return true;
}

void chord__table_set_succs(struct chord__vnode *v, const struct cfs_node *first,
                            const struct cfs_node *list, uint32_t n, chord__auth_fn auth,
                            void *auth_ctx, uint64_t now)
{
	chord_t *c = v->c;
	struct tnode old[CHORD_SUCC_MAX], *nw = v->succ;
	uint32_t nold = v->nsuccs, k = 0, r = c->cfg.nsucc;

	memcpy(old, v->succ, nold * sizeof(old[0]));
	nw[k++] = (struct tnode){ .n = *first, .valid = true };
	bool stopped = false, skipped = false, wraps = false;
	const struct cfs_id *prev = &first->id;
	for (uint32_t i = 0; i < n && k < r; i++) {
		const struct cfs_node *x = &list[i];
		if (cfs_id_eq(&x->id, &v->self.id)) {
			wraps = !stopped && !skipped;
			break; /* wrapped around the ring */
		}
		/* Must move clockwise from the previous entry. */
		if (!cfs_id_in_oo(&x->id, prev, &v->self.id))
			continue;
		prev = &x->id;
		/* Authenticate every newcomer now (answers arrive by the next
		 * round), but keep the list gap-free: it ends at the first
		 * node not yet authenticated. */
		enum auth_state st = auth(auth_ctx, x, now);
		if (st == AUTH_FAILED || st == AUTH_DEAD) {
			skipped = true; /* the list may still wrap; we cannot say so */
			continue;
		}
		if (stopped)
			continue;
		if (st != AUTH_OK) {
			stopped = true;
			continue;
		}
		nw[k++] = (struct tnode){ .n = *x, .valid = true };
	}
	for (uint32_t i = 0; i < k; i++)
		for (uint32_t j = 0; j < nold; j++)
			if (cfs_id_eq(&old[j].n.id, &nw[i].n.id)) {
				nw[i].rtt_us = old[j].rtt_us;
				nw[i].misses = i ? old[j].misses : nw[i].misses;
				break;
			}
	v->list_changed = k != nold;
	for (uint32_t i = 0; i < k && !v->list_changed; i++)
		v->list_changed = !cfs_id_eq(&nw[i].n.id, &old[i].n.id);
	v->nsuccs = k;
	v->wraps = wraps && k < r && list_has_all(c, v);
	v->joined = true;
}

void chord__table_note_rtt(chord_t *c, const struct cfs_id *id, uint32_t rtt_us)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		struct chord__vnode *v = &c->v[vi];
		for (uint32_t i = 0; i < v->nsuccs; i++)
			if (cfs_id_eq(&v->succ[i].n.id, id)) {
				v->succ[i].rtt_us = rtt_us;
				v->succ[i].misses = 0;
			}
		if (v->pred.valid && cfs_id_eq(&v->pred.n.id, id)) {
			v->pred.rtt_us = rtt_us;
			v->pred.misses = 0;
		}
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid && cfs_id_eq(&v->finger[k].n.id, id))
				v->finger[k].rtt_us = rtt_us;
	}
}

bool chord__table_contains(const chord_t *c, const struct cfs_id *id)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *v = &c->v[vi];
		for (uint32_t i = 0; i < v->nsuccs; i++)
			if (cfs_id_eq(&v->succ[i].n.id, id))
				return true;
		if (v->pred.valid && cfs_id_eq(&v->pred.n.id, id))
			return true;
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid && cfs_id_eq(&v->finger[k].n.id, id))
				return true;
	}
	return false;
}

struct chord__vnode *chord__table_closest_local(chord_t *c, const struct cfs_id *key)
{
	struct chord__vnode *best = &c->v[0];
	struct cfs_id bd, d;

	cfs_id_distance(&bd, &best->self.id, key);
	for (uint32_t i = 1; i < c->nv; i++) {
		cfs_id_distance(&d, &c->v[i].self.id, key);
		if (cfs_id_cmp(&d, &bd) < 0) {
			bd = d;
			best = &c->v[i];
		}
	}
	return best;
}

/* Add x to the candidate list (sorted by distance to key, no repeats). */
static void cand_add(struct cfs_node *out, uint32_t *n, uint32_t cap, const struct cfs_node *x,
                     const struct cfs_id *key)
{
	struct cfs_id dx, di;
	uint32_t i;

	cfs_id_distance(&dx, &x->id, key);
	for (i = 0; i < *n; i++) {
		if (cfs_id_eq(&out[i].id, &x->id))
			return;
		cfs_id_distance(&di, &out[i].id, key);
		if (cfs_id_cmp(&dx, &di) < 0)
			break;
	}
	for (uint32_t j = i; j < *n; j++)
		if (cfs_id_eq(&out[j].id, &x->id))
			return;
	if (i >= cap)
		return;
	uint32_t end = *n < cap ? *n : cap - 1;
	memmove(&out[i + 1], &out[i], (end - i) * sizeof(out[0]));
	out[i] = *x;
	if (*n < cap)
		(*n)++;
}

/* A next hop from v toward key: it makes progress and, with skipped,
 * is no suspect (*skipped tells that one was left out). */
static bool cand_ok(const chord_t *c, const struct cfs_node *x, const struct cfs_node *v,
                    const struct cfs_id *key, bool *skipped, uint64_t now)
{
	if (!cfs_id_in_oo(&x->id, &v->id, key))
		return false;
	if (skipped && chord__suspect_is(c, &x->id, now)) {
		*skipped = true;
		return false;
	}
	return true;
}

static void closest_preceding(chord_t *c, const struct chord__vnode *v, const struct cfs_id *key,
                              bool own, struct cfs_node *out, uint32_t *n, uint32_t cap,
                              bool *skipped, uint64_t now)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *u = &c->v[vi];
		if (u != v && cfs_id_in_oo(&u->self.id, &v->self.id, key))
			cand_add(out, n, cap, &u->self, key);
		for (uint32_t i = 0; i < u->nsuccs; i++)
			if (cand_ok(c, &u->succ[i].n, &v->self, key, skipped, now))
				cand_add(out, n, cap, &u->succ[i].n, key);
		for (int k = 0; k < NFINGERS; k++)
			if (u->finger[k].valid && cand_ok(c, &u->finger[k].n, &v->self, key, skipped, now))
				cand_add(out, n, cap, &u->finger[k].n, key);
		if (u->pred.valid && cand_ok(c, &u->pred.n, &v->self, key, skipped, now))
			cand_add(out, n, cap, &u->pred.n, key);
	}
	/* The nodes learned from traffic nearest before the key: with most of
	 * the ring learned, one of them has the key in its successor list.
	 * Hints (learned.c) only for our own lookups. */
	struct cfs_node near[16];
	uint32_t nn = chord__learned_preceding(
		&c->learned, &v->self.id, key,
		now > CHORD_LEARNED_QUARANTINE_US ? now - CHORD_LEARNED_QUARANTINE_US : 0,
		now > CHORD_LEARNED_FRESH_US ? now - CHORD_LEARNED_FRESH_US : 0, own, near,
		cap < 16 ? cap : 16);
	for (uint32_t i = 0; i < nn; i++)
		if (cand_ok(c, &near[i], &v->self, key, skipped, now))
			cand_add(out, n, cap, &near[i], key);
}

/* One lookup step as this virtual server sees it, served to others and
 * taken by our own lookups. In order: we are the key's successor (CFS
 * 4.1); our successor list covers the key (DHash++ 4.2: answer early), or
 * it covers it too late to give nsucc successors and we offer the key's
 * predecessors plus what we know of its successors (PARTIAL); else the
 * closest preceding nodes from every table of this process (CFS 4.3),
 * continuing at a local virtual server if one is closer. Kept in one
 * function because each case falls through to the next on the same
 * tables, and the order is the protocol. */
bool chord__table_step(chord_t *c, struct chord__vnode *v, const struct cfs_id *key, uint32_t nsucc,
                bool to_pred, bool wrap_ok, bool own, struct cfs_node *out, uint32_t *n_out,
                uint32_t *n_cand, uint32_t cap, uint64_t now)
{
	uint32_t n = 0;

	*n_cand = 0;
	if (nsucc < 1)
		nsucc = 1;
	if (nsucc > cap)
		nsucc = cap;
	/* Are we the key's successor? Only by a predecessor that named us its
	 * successor (or is one of our own): one from hearsay is routed
	 * through instead, as any node before the key. */
	if (v->nsuccs == 0 ||
	    (v->pred.valid && v->pred_sure && cfs_id_in_oc(key, &v->pred.n.id, &v->self.id))) {
		out[n++] = v->self;
		for (uint32_t i = 0; i < v->nsuccs && n < nsucc && !v->succ_unsure; i++)
			out[n++] = v->succ[i].n;
		*n_out = n;
		return true;
	}
	/* A list shorter than r holds the whole ring: after its last entry the
	 * ring comes back to us. The key's successors are then the list from
	 * the first one at or after the key, wrapping through ourselves, so
	 * that on a ring smaller than k every server, the asker too, counts.
	 * Not for an asker of the previous protocol version (!wrap_ok): it
	 * refuses an answer that names its sender past the first place. */
	if (wrap_ok && v->wraps && v->nsuccs > 0 && v->nsuccs < c->cfg.nsucc && !v->succ_unsure) {
		uint32_t j = 0;
		while (j < v->nsuccs &&
		       !cfs_id_in_oc(key, j ? &v->succ[j - 1].n.id : &v->self.id, &v->succ[j].n.id))
			j++;
		for (uint32_t i = 0; i <= v->nsuccs && n < nsucc; i++) {
			uint32_t at = (j + i) % (v->nsuccs + 1);
			out[n++] = at < v->nsuccs ? v->succ[at].n : v->self;
		}
		*n_out = n;
		return true;
	}
	/* Does the successor list cover it (DHash++: answer early)? */
	for (uint32_t j = 0; j < v->nsuccs && !v->succ_unsure; j++) {
		const struct cfs_id *prev = j ? &v->succ[j - 1].n.id : &v->self.id;
		if (!cfs_id_in_oc(key, prev, &v->succ[j].n.id))
			continue;
		if (j == 0 || (!to_pred && v->nsuccs - j >= nsucc)) {
			for (uint32_t i = j; i < v->nsuccs && n < nsucc; i++)
				out[n++] = v->succ[i].n;
			*n_out = n;
			return true;
		}
		/* Not enough successors after it: the key's predecessors have
		 * them. Offer those we know, nearest the key first, then what
		 * we know of the key's successors as the fallback answer. */
		for (uint32_t i = j; i-- > 0 && n < cap;)
			out[n++] = v->succ[i].n;
		*n_cand = n;
		for (uint32_t i = j; i < v->nsuccs && n < cap; i++)
			out[n++] = v->succ[i].n;
		*n_out = n;
		return false;
	}
	/* The closest preceding nodes anywhere in this process's tables,
	 * suspects left out (Castro et al. 2002 §4.2: route around them) —
	 * unless they are all there is: a suspect before the key means our
	 * successor is not the key's. */
	bool skipped = false;
	closest_preceding(c, v, key, own, out, &n, cap, &skipped, now);
	if (n == 0 && skipped)
		closest_preceding(c, v, key, own, out, &n, cap, NULL, now);
	if (n > 0) {
		struct chord__vnode *u = chord__local(c, &out[0].id);
		if (u && u != v) /* a local virtual server is closer: continue there */
			return chord__table_step(c, u, key, nsucc, to_pred, wrap_ok, own, out, n_out, n_cand,
			                         cap, now);
	}
	if (n == 0 && v->succ_unsure) {
		*n_out = 0; /* our successor may not be the key's: no answer */
		return false;
	}
	if (n == 0) {
		/* Nothing between us and the key: our successor is the answer. */
		out[n++] = *chord__vn_succ(v);
		for (uint32_t i = 1; i < v->nsuccs && n < nsucc; i++)
			out[n++] = v->succ[i].n;
		*n_out = n;
		return true;
	}
	*n_out = *n_cand = n;
	return false;
}

double chord__table_estimate_n(const struct chord__vnode *v)
{
	const chord_t *c = v->c;

	if (v->nsuccs == 0)
		return 1;
	if (v->nsuccs < c->cfg.nsucc)
		return v->nsuccs + 1; /* the whole ring fits in the list */
	struct cfs_id d;
	cfs_id_distance(&d, &v->self.id, &v->succ[v->nsuccs - 1].n.id);
	double f = cfs_id_to_unit(&d);
	return f > 0 ? (double)v->nsuccs / f : 1;
}

/* ------------------------------------------------------------ predecessors */

struct behind {
	struct cfs_id d;          /* how far the node is behind the virtual server */
	struct cfs_node n;
};

static int behind_cmp(const void *a, const void *b)
{
	return cfs_id_cmp(&((const struct behind *)a)->d, &((const struct behind *)b)->d);
}

static void behind_add(const chord_t *c, const struct cfs_id *me, const struct cfs_node *n,
                       struct behind *out, uint32_t *nout)
{
	if (chord__local(c, &n->id))
		return;
	out[*nout].n = *n;
	cfs_id_distance(&out[*nout].d, &n->id, me);
	(*nout)++;
}

/*
 * Chord keeps one predecessor; the nodes further back are whatever this
 * process has met: every virtual server's successors, predecessor and
 * fingers (in a ring shorter than the successor list these hold all of
 * it, the successors wrapping round to the predecessors), and the nodes
 * learned from traffic and heard from lately (the members behind us
 * place their replicas here and sync with us, so they are met), but not
 * the hints, which only our tables' word would make predecessors. A node
 * missing from all of them is skipped, never invented.
 */
uint32_t chord_vnode_preds(const chord_t *c, uint32_t vi, struct cfs_node *ret, uint32_t max)
{
	const struct cfs_id *me = &c->v[vi].self.id;
	uint32_t cap = c->nv * (1 + CHORD_SUCC_MAX + NFINGERS) + CHORD_SUCC_MAX, n = 0, out = 0;
	struct behind *b = xmalloc(cap * sizeof(*b));
	struct cfs_node learned[CHORD_SUCC_MAX];
	uint64_t now = cfs_now_us();

	for (uint32_t i = 0; i < c->nv; i++) {
		const struct chord__vnode *u = &c->v[i];
		if (u->pred.valid)
			behind_add(c, me, &u->pred.n, b, &n);
		for (uint32_t j = 0; j < u->nsuccs; j++)
			behind_add(c, me, &u->succ[j].n, b, &n);
		for (int j = 0; j < NFINGERS; j++)
			if (u->finger[j].valid)
				behind_add(c, me, &u->finger[j].n, b, &n);
	}
	uint32_t nl = chord__learned_preceding(&c->learned, NULL, me, UINT64_MAX,
	                                       now > CHORD_LEARNED_FRESH_US ? now - CHORD_LEARNED_FRESH_US : 0,
	                                       false, learned, CHORD_SUCC_MAX);
	for (uint32_t i = 0; i < nl; i++)
		behind_add(c, me, &learned[i], b, &n);
	if (n)
		qsort(b, n, sizeof(*b), behind_cmp);
	for (uint32_t i = 0; i < n && out < max; i++)
		if (i == 0 || !cfs_id_eq(&b[i].n.id, &b[i - 1].n.id))
			ret[out++] = b[i].n;
	free(b);
	return out;
}
