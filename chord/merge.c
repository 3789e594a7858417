/*
 * One ring, always: remembered peers and the ring check.
 *
 * Stabilization repairs a ring from inside. After a partition or a mass
 * restart it can leave several loops, each consistent on its own, and
 * nothing inside a loop shows that the others exist (Chord's stabilization
 * proofs assume one loop to start from). So every node remembers the
 * addresses of the peers it has had in its tables (chord_remember /
 * chord_peers; cfsd keeps them on disk), and every ring-check period one
 * virtual server looks up its own ID starting at a node outside its
 * successor list: a remembered peer that is in none of our tables first,
 * then a bootstrap address, then a finger. Every node the answer names is
 * offered to the tables (authenticated first, CFS 4.4); a better
 * successor found that way is adopted, and ordinary stabilization and
 * notify zip the two loops together, one predecessor at a time.
 *
 * Cost: one iterative lookup (about ½·log2 N RPCs) per process and
 * period, 30 s by default. The same remembered peers are join targets
 * after a restart (maint.c), before a node founds a ring of its own.
 */
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

static void merge_tick(uv_timer_t *t);

/* Move a to the front of the remembered peers (most recently seen first). */
static void peer_touch(chord_t *c, const struct cfs_addr *a)
{
	uint32_t i;

	if (cfs_addr_eq(a, &c->addr))
		return;
	for (i = 0; i < c->npeers; i++)
		if (cfs_addr_eq(&c->peers[i], a))
			break;
	if (i == c->npeers) {
		if (c->npeers < CHORD_PEERS_MAX)
			c->npeers++;
		i = c->npeers - 1; /* full: the least recently seen goes */
	}
	memmove(&c->peers[1], &c->peers[0], i * sizeof(c->peers[0]));
	c->peers[0] = *a;
}

void chord_remember(chord_t *c, const struct cfs_addr *a)
{
	uint32_t i;

	if (cfs_addr_eq(a, &c->addr))
		return;
	for (i = 0; i < c->npeers; i++)
		if (cfs_addr_eq(&c->peers[i], a))
			return;
	if (c->npeers < CHORD_PEERS_MAX)
		c->peers[c->npeers++] = *a; /* loaded in order: behind what we saw */
}

/* Everything in the tables is seen now. */
static void peers_from_tables(chord_t *c)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *v = &c->v[vi];
		for (int k = NFINGERS - 1; k >= 0; k--)
			if (v->finger[k].valid)
				peer_touch(c, &v->finger[k].n.addr);
		if (v->pred.valid)
			peer_touch(c, &v->pred.n.addr);
		for (uint32_t i = v->nsuccs; i-- > 0;)
			peer_touch(c, &v->succ[i].n.addr);
	}
}

uint32_t chord_peers(chord_t *c, struct cfs_addr *ret, uint32_t max)
{
	uint32_t n = c->npeers < max ? c->npeers : max;

	if (c->started && !c->client)
		peers_from_tables(c);
	memcpy(ret, c->peers, n * sizeof(ret[0]));
	return n;
}

/* Has v no successor but this process's own virtual servers? */
static bool alone(const chord_t *c, const struct chord__vnode *v)
{
	for (uint32_t i = 0; i < v->nsuccs; i++)
		if (!chord__local(c, &v->succ[i].n.id))
			return false;
	return true;
}

static bool in_any_table(const chord_t *c, const struct cfs_addr *a)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *v = &c->v[vi];
		for (uint32_t i = 0; i < v->nsuccs; i++)
			if (cfs_addr_eq(&v->succ[i].n.addr, a))
				return true;
		if (v->pred.valid && cfs_addr_eq(&v->pred.n.addr, a))
			return true;
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid && cfs_addr_eq(&v->finger[k].n.addr, a))
				return true;
	}
	return false;
}

static bool in_succ_list(const struct chord__vnode *v, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < v->nsuccs; i++)
		if (cfs_addr_eq(&v->succ[i].n.addr, a))
			return true;
	return false;
}

/*
 * Where the ring check starts its lookup, in order of how likely it is to
 * lie outside our loop: a remembered peer in none of our tables (dropped
 * when it went silent: it may be alive on the other side of a healed
 * partition), a bootstrap address, then any remembered peer outside v's
 * successor list. Each kind is taken in turn from where the last check
 * left off, so every candidate is tried within a few periods.
 */
bool chord__merge_contact(chord_t *c, const struct chord__vnode *v, struct cfs_addr *ret)
{
	uint32_t n = (uint32_t)c->nboot + c->npeers;

	/* alone: anyone else may know the ring better */
	bool lone = alone(c, v);
	for (int pass = lone ? 2 : 0; pass < 3; pass++)
		for (uint32_t j = 0; j < n; j++) {
			uint32_t i = (c->merge_next + j) % n;
			bool boot = i < c->nboot;
			const struct cfs_addr *a = boot ? &c->boot[i] : &c->peers[i - c->nboot];
			if (cfs_addr_eq(a, &c->addr))
				continue;
			if ((pass == 0 && (boot || in_any_table(c, a))) || (pass == 1 && !boot) ||
			    (pass == 2 && !lone && in_succ_list(v, a)))
				continue;
			c->merge_next = i + 1;
			*ret = *a;
			return true;
		}
	return false;
}

static void check_done(void *arg, const struct chord_lookup_result *r)
{
	chord_t *c = arg;
	struct chord__vnode *v = &c->v[c->merge_vi % c->nv];
	char s1[9], s2[9], a[CFS_ADDR_STRLEN];
	uint64_t now = cfs_now_us();

	c->merge_busy = false;
	if (r->status == -ECANCELED || c->freeing || r->status < 0 || r->n == 0)
		return;
	const struct cfs_node *best = &r->succ[0];
	if (cfs_id_eq(&best->id, &v->self.id) && r->n > 1)
		best = &r->succ[1];
	if (!chord__local(c, &best->id) && !cfs_id_eq(&best->id, &v->self.id) &&
	    (v->nsuccs == 0 || cfs_id_in_oo(&best->id, &v->self.id, &v->succ[0].n.id))) {
		c->merge_found++;
		log_info("ring check: %s at %s lies between vnode %u (%s) and its successor %s; "
		         "joining the loops", cfs_id_short(&best->id, s1), cfs_addr_str(&best->addr, a),
		         v->index, cfs_id_short(&v->self.id, s2),
		         v->nsuccs ? cfs_id_short(&v->succ[0].n.id, (char[9]){ 0 }) : "itself");
	}
	for (uint32_t i = 0; i < r->n; i++)
		if (!cfs_id_eq(&r->succ[i].id, &v->self.id))
			chord__table_offer(c, &r->succ[i], now);
	for (uint32_t i = 0; i < r->npath; i++)
		chord__table_offer(c, &r->path[i], now);
	chord__maint_kick(v);
}

/* One ring check: look up a virtual server's own ID from outside. */
void chord__merge_check(chord_t *c)
{
	struct chord_lookup_opts o = { .mode = CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY),
	                               .nsucc = c->cfg.nsucc };
	struct cfs_addr to;

	if (c->merge_busy || c->client || c->frozen || c->leaving || c->freeing)
		return;
	peers_from_tables(c);
	struct chord__vnode *v = &c->v[++c->merge_vi % c->nv];
	if (!v->joined || !chord__merge_contact(c, v, &to))
		return;
	c->merge_checks++;
	c->merge_busy = true;
	if (chord__lookup_start(c, v, &to, &v->self.id, &o, check_done, c) < 0)
		c->merge_busy = false;
}

/*
 * A node appears while one of our virtual servers is alone (it founded a
 * ring: first start, or a restart with no peer remembered, and a member
 * of the old ring now stabilizes with us). Taking it as our successor as
 * stabilization would is wrong for a while; a ring check through it, now,
 * finds our real successors in its ring.
 */
void chord__merge_learned(chord_t *c, const struct cfs_node *n)
{
	bool lone = false;

	if (!c->started || c->client || c->frozen || c->leaving || c->freeing || chord__local(c, &n->id))
		return;
	for (uint32_t i = 0; i < c->nv && !lone; i++)
		lone = c->v[i].joined && alone(c, &c->v[i]);
	if (!lone)
		return;
	peer_touch(c, &n->addr);
	if (!c->merge_busy && c->cfg.merge_ms)
		uv_timer_start(&c->merge_timer, merge_tick, 0, 0);
}

static void merge_tick(uv_timer_t *t)
{
	chord_t *c = t->data;

	chord__merge_check(c);
	uv_timer_start(t, merge_tick, chord__jitter_ms(c, c->cfg.merge_ms), 0);
}

void chord__merge_start(chord_t *c)
{
	if (c->cfg.merge_ms && !c->client)
		uv_timer_start(&c->merge_timer, merge_tick, chord__jitter_ms(c, c->cfg.merge_ms), 0);
}

void chord__merge_stop(chord_t *c)
{
	uv_timer_stop(&c->merge_timer);
}
