/*
 * Who may hand this process a replica's copy (dhash's store admission).
 *
 * A replica STORE (no PRIMARY flag) costs nobody's quota, so it must come
 * from a ring member that could be placing a copy of that key here: an
 * authenticated member (CFS 4.4: its ID hashes from the address the
 * datagram came from, and it echoed a nonce sent there), whose ID lies
 * just after the key — the key's successor, which replicates and syncs
 * the key (CFS 5.1, 5.2) — with one of our virtual servers a little
 * further on. "A little" is measured in successor gaps from the ring-size
 * estimate (CFS 6.1), generously: a wrong refusal costs a copy until the
 * next sync round, a wrong admission costs a stranger's block. Sit and
 * Morris (IPTPS 2002 §4.2): a node should store only what it is
 * responsible for, as judged from its own view.
 */
#include <math.h>
#include "chord/internal.h"

/* The neighbourhood, in successor gaps per replica (k), plus slack: the
 * replica servers are the first k *distinct* addresses, which in a ring of
 * V virtual servers a process may stretch over more positions. */
#define GAPS_PER_REPLICA 2
#define GAPS_SLACK 8

static bool node_at(const struct cfs_node *n, const struct cfs_id *id, const struct cfs_addr *a)
{
	return cfs_id_eq(&n->id, id) && cfs_addr_eq(&n->addr, a);
}

static bool in_tables(const chord_t *c, const struct cfs_id *id, const struct cfs_addr *from)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *v = &c->v[vi];
		if (v->pred.valid && node_at(&v->pred.n, id, from))
			return true;
		for (uint32_t i = 0; i < v->nsuccs; i++)
			if (node_at(&v->succ[i].n, id, from))
				return true;
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid && node_at(&v->finger[k].n, id, from))
				return true;
	}
	return false;
}

bool chord_is_member(const chord_t *c, const struct cfs_id *id, const struct cfs_addr *from)
{
	const struct auth_ent *e;

	if (c->client)
		return false;
	if (chord__local(c, id))
		return cfs_addr_eq(&c->addr, from);
	if (in_tables(c, id, from))
		return true;
	e = cfs_htab_get(&c->auth, id);
	return e && chord__auth_peek(c, id, cfs_now_us()) == AUTH_OK && cfs_addr_eq(&e->node.addr, from);
}

bool chord_member_check(chord_t *c, const struct cfs_node *n)
{
	uint64_t now = cfs_now_us();

	if (chord_is_member(c, &n->id, &n->addr))
		return true;
	if (!c->client && chord__auth_peek(c, &n->id, now) == AUTH_NONE)
		/* the ID must hash from the address first; the check is charged
		 * to the sender's address like one a LEAVE or NOTIFY asks for,
		 * so forged replica STOREs cannot spend the daemon's own budget */
		(void)chord__auth_check_from(c, n, &n->addr, now);
	return false;
}

bool chord_member_pending(const chord_t *c, const struct cfs_id *id)
{
	return chord__auth_peek(c, id, cfs_now_us()) == AUTH_PENDING;
}

/* The clockwise distance from a to b as a fraction of the circle. */
static double arc(const struct cfs_id *a, const struct cfs_id *b)
{
	struct cfs_id d;

	cfs_id_distance(&d, a, b);
	return cfs_id_to_unit(&d);
}

bool chord_holder_plausible(const struct cfs_id *key, const struct cfs_id *sender,
                            const struct cfs_id *selves, uint32_t nself, double est_n, uint32_t k)
{
	double span = (double)(GAPS_PER_REPLICA * k + GAPS_SLACK) * (nself ? nself : 1);
	double lim = est_n > span ? span / est_n : 1.0, s = arc(key, sender);

	if (s > lim)
		return false;
	/* the sender is the key's successor or near it; we come after it */
	for (uint32_t i = 0; i < nself; i++) {
		double v = arc(key, &selves[i]);
		if (v <= lim && (v > s || lim >= 1.0))
			return true;
	}
	return false;
}

/* The estimate is r / (the span of r successor gaps), and that span is
 * Gamma(r) in units of the mean gap: with a short list it overstates N by
 * a large factor now and then (a node of a 256-node ring with 6
 * successors estimated 1,400 and refused its own replicas' copies). The
 * test uses the lower 1e-4 quantile (Wilson-Hilferty), so that about one
 * honest node in 10,000 is too strict, at the price of a looser bound:
 * about 3x for 16 successors, 9x for 6. */
double chord_ring_size_floor(double est, uint32_t m)
{
	if (m == 0)
		return est;
	double t = 1.0 - 1.0 / (9.0 * m) - 3.72 / (3.0 * sqrt((double)m));
	double f = t > 0.1 ? t * t * t : 0.001;
	return est * f > 1 ? est * f : 1;
}

bool chord_plausible_holder(const chord_t *c, const struct cfs_id *sender, const struct cfs_id *key,
                            uint32_t k)
{
	struct cfs_id selves[CHORD_VNODES_MAX];
	bool whole = true; /* every table holds the whole ring: the estimate is exact */

	if (c->client)
		return false;
	for (uint32_t i = 0; i < c->nv; i++) {
		selves[i] = c->v[i].self.id;
		whole &= c->v[i].nsuccs < c->cfg.nsucc;
	}
	double est = chord_estimate_n(c);
	if (!whole)
		est = chord_ring_size_floor(est, c->cfg.nsucc * c->nv);
	return chord_holder_plausible(key, sender, selves, c->nv, est, k);
}
