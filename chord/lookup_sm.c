/*
 * The originator's lookup as a state machine without I/O (lookup_sm.h).
 *
 * Iterative (CFS 6.2, Figure 5): ask each hop for its best next hops,
 * keep the path as a stack, and on an RPC failure alert the hop that named
 * the failed node and back up to its next-best choice. Up to p asks may be
 * in flight (OpenDHT 3.2.2): each goes to the next-best candidate of the
 * current hop and the first useful answer moves the lookup on; the others'
 * answers are then stale (a stale final answer is still taken, stale
 * candidates are not). Recursive (DHash++ 4.2, 4.5 and Figure 10): forward
 * the query and wait for the node whose successor list covers the key to
 * answer; on a failure or past a deadline, fall back to iterative.
 *
 *   LOCAL ──start──▶ DONE (answered from our tables)
 *     │ ├──start──▶ RECURSIVE ──DONE msg──▶ VERIFYING / DONE
 *     │ │              └──deadline, every next hop failed──▶ ITERATING
 *     │ └──start──▶ ITERATING ──final answer──▶ VERIFYING / DONE
 *     └──start_addr──▶ BOOTSTRAP ──reply──▶ ITERATING
 *   VERIFYING ──a successor answers the ping, or all failed──▶ DONE
 *
 * Next hops are chosen by one of three rules (chord__lk_select).
 *
 * Why one file of over 800 lines: it is one machine. The recursive mode
 * falls back to the iterative one, both end through the same answer
 * checks and verification, and a bootstrap or a client start enters the
 * same iteration; the states share the path stack, the failed and
 * suspect sets and the asks in flight, all static here. Split by mode,
 * those helpers would become cross-file names and the transitions in the
 * diagram above would be read across files. The pure parts (selection,
 * answer checks) are small and stay beside the steps that use them.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chord/lookup_sm.h"

#define NCAND CHORD__LK_NCAND

/* ------------------------------------------------------------ selection */

static double unit(const struct cfs_id *from, const struct cfs_id *to)
{
	struct cfs_id d;
	cfs_id_distance(&d, from, to);
	return cfs_id_to_unit(&d);
}

/* CFS 4.3: ones((key - n) >> (256 - log N)), the hops left after n. */
static int hops_left(const struct cfs_id *n, const struct cfs_id *key, double est_n)
{
	struct cfs_id d;
	int bits = (int)ceil(log2(est_n > 2 ? est_n : 2)), ones = 0;

	cfs_id_distance(&d, n, key);
	for (int i = 0; i < bits && i < CFS_ID_BITS; i++)
		ones += (d.b[i / 8] >> (7 - i % 8)) & 1;
	return ones;
}

int chord__lk_select(const struct chord__lk_env *env, uint32_t sel, const struct cfs_id *cur,
                     const struct cfs_id *key, const struct cfs_node *cand, uint32_t n,
                     const bool *skip)
{
	const struct chord__lk_ops *ops = env->ops;
	double best = 0, est = sel == CHORD_CFS_COST ? ops->estimate_n(env->ctx) : 0;
	double avg = ops->avg_rtt_ms(env->ctx), dbar = avg > 0 ? avg : 1;
	int bi = -1;

	for (uint32_t i = 0; i < n; i++) {
		if ((skip && skip[i]) || !cfs_id_in_oo(&cand[i].id, cur, key))
			continue;
		double score, lat = (double)ops->predict_rtt_us(env->ctx, &cand[i]) / 1000.0;
		if (lat <= 0 && sel != CHORD_GREEDY)
			lat = 2 * dbar; /* unknown: no nearer than twice the mean */
		switch (sel) {
		case CHORD_CFS_COST: /* CFS 4.3: minimise C = d_i + d̄·H(n_i) */
			score = -(lat + dbar * hops_left(&cand[i].id, key, est));
			break;
		case CHORD_NONLINEAR: /* OpenDHT 3.2.1: maximise progress / f(latency) */
			score = unit(cur, &cand[i].id) / (1 + exp((lat - 100) / 17.232));
			break;
		default: /* greedy: the closest predecessor of the key */
			score = unit(cur, &cand[i].id);
			break;
		}
		if (bi < 0 || score > best ||
		    (score == best && unit(&cand[i].id, key) < unit(&cand[bi].id, key))) {
			best = score;
			bi = (int)i;
		}
	}
	return bi;
}

/* ------------------------------------------------------------ sets, path */

static bool is_failed(const struct chord__lksm *sm, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < sm->nfailed; i++)
		if (cfs_id_eq(&sm->failed[i], id))
			return true;
	return false;
}

static bool was_asked(const struct chord__lksm *sm, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < sm->nasked; i++)
		if (cfs_id_eq(&sm->asked[i], id))
			return true;
	return false;
}

static bool is_suspect(const struct chord__lksm *sm, const struct cfs_id *id)
{
	const struct chord__lk_ops *ops = sm->env.ops;

	return ops->is_suspect && ops->is_suspect(sm->env.ctx, id);
}

static void add_failed(struct chord__lksm *sm, const struct cfs_id *id)
{
	if (sm->nfailed < CHORD__LK_MAX_FAILED && !is_failed(sm, id))
		sm->failed[sm->nfailed++] = *id;
}

/* The next hop of the path, cleared; NULL at MAX_DEPTH. A new step: the
 * asks in flight now belong to an earlier one (their answers are stale). */
static struct chord__lk_hop *push_hop(struct chord__lksm *sm)
{
	if (sm->depth >= CHORD__LK_MAX_DEPTH)
		return NULL;
	if (sm->depth == sm->path_cap) {
		sm->path_cap = sm->path_cap ? 2 * sm->path_cap : 8;
		if (sm->path_cap > CHORD__LK_MAX_DEPTH)
			sm->path_cap = CHORD__LK_MAX_DEPTH;
		sm->path = xrealloc(sm->path, (size_t)sm->path_cap * sizeof(*sm->path));
	}
	struct chord__lk_hop *h = &sm->path[sm->depth++];
	memset(h, 0, sizeof(*h));
	sm->step++;
	sm->step_out = 0;
	return h;
}

static void pop_hop(struct chord__lksm *sm)
{
	sm->depth--;
	sm->step++;
	sm->step_out = 0;
}

/* Record an RPC and queue its send. */
static struct chord__lk_act *ask(struct chord__lksm *sm, enum chord__lk_act_type type,
                                 const struct cfs_node *to)
{
	if (sm->nasks == sm->asks_cap) {
		sm->asks_cap = sm->asks_cap ? 2 * sm->asks_cap : 8;
		sm->asks = xrealloc(sm->asks, sm->asks_cap * sizeof(*sm->asks));
	}
	struct chord__lk_ask *k = &sm->asks[sm->nasks];
	memset(k, 0, sizeof(*k));
	k->type = type;
	k->step = sm->step;
	k->has_to = true;
	k->to = *to;
	struct chord__lk_act *a = chord__lk_emit(&sm->q, type);
	a->ask = sm->nasks++;
	a->has_to = true;
	a->to = *to;
	return a;
}

/* ------------------------------------------------------------ endings */

void chord__lksm_init(struct chord__lksm *sm, const struct chord__lk_env *env,
                      const struct cfs_id *key, const struct chord_lookup_opts *o, uint64_t id)
{
	memset(sm, 0, sizeof(*sm));
	sm->state = CHORD__LK_LOCAL;
	sm->env = *env;
	sm->key = *key;
	sm->o = *o;
	if (sm->o.nsucc < 1)
		sm->o.nsucc = 1;
	if (sm->o.nsucc > CFS_MSG_MAX_NODES)
		sm->o.nsucc = CFS_MSG_MAX_NODES;
	sm->par = CHORD_MODE_PAR(o->mode) ? CHORD_MODE_PAR(o->mode) : 1;
	if (sm->par > CHORD_PAR_MAX)
		sm->par = CHORD_PAR_MAX;
	sm->to_pred = (o->mode & CHORD_MODE_TO_PRED) != 0;
	sm->id = id;
}

void chord__lksm_release(struct chord__lksm *sm)
{
	free(sm->path);
	free(sm->asks);
	cfs_actq_free(&sm->q);
	sm->path = NULL;
	sm->asks = NULL;
}

static void finish(struct chord__lksm *sm, int status)
{
	if (sm->state == CHORD__LK_DONE)
		return;
	sm->state = CHORD__LK_DONE;
	sm->res.status = status;
	if (sm->res.n > sm->o.nsucc)
		sm->res.n = sm->o.nsucc;
	if (status < 0)
		sm->res.n = 0;
	chord__lk_emit(&sm->q, CHORD__LKA_FINISH)->status = status;
}

void chord__lksm_cancel(struct chord__lksm *sm)
{
	finish(sm, -ECANCELED);
}

/* ------------------------------------------------------------ results */

/* Successors asked of each hop: with VERIFY, spares for the dead ones. */
static uint32_t want_succs(const struct chord__lksm *sm)
{
	uint32_t n = sm->o.nsucc;

	if (sm->o.flags & CFS_LOOKUP_F_VERIFY)
		n += CHORD_SUCC_MAX / 4;
	return n < CFS_MSG_MAX_NODES ? n : CFS_MSG_MAX_NODES;
}

/* The answer's successors (less the failed), and the path: the remote
 * hops that answered, then the recursive answerer; only the last
 * CHORD_PATH_MAX are kept (DHash caches blocks along it, CFS 5.2). */
static void set_result(struct chord__lksm *sm, const struct cfs_node *nodes, uint32_t n)
{
	const struct chord__lk_env *env = &sm->env;
	struct chord_lookup_result *res = &sm->res;
	uint32_t k = 0;

	for (uint32_t i = 0; i < n && k < want_succs(sm); i++)
		if (!is_failed(sm, &nodes[i].id))
			res->succ[k++] = nodes[i];
	res->n = k;
	res->npath = 0;
	for (int d = 0; d <= sm->depth; d++) {
		const struct cfs_node *h = d < sm->depth ? &sm->path[d].n : &sm->done_from;
		if ((d == sm->depth && !sm->has_done_from) || env->ops->is_local(env->ctx, &h->id) ||
		    (d == 0 && sm->client_start))
			continue;
		if (res->npath == CHORD_PATH_MAX) {
			memmove(&res->path[0], &res->path[1], (CHORD_PATH_MAX - 1) * sizeof(*h));
			res->npath--;
		}
		res->path[res->npath++] = *h;
	}
}

/* The verified answer starts at the first successor that answered. */
static void verified(struct chord__lksm *sm)
{
	struct chord_lookup_result *res = &sm->res;

	memmove(&res->succ[0], &res->succ[sm->verify_idx],
	        (res->n - sm->verify_idx) * sizeof(res->succ[0]));
	res->n -= sm->verify_idx;
	finish(sm, 0);
}

/* CFS_LOOKUP_F_VERIFY: the first successor that answers a ping is the
 * answer (CFS 4.2 / Chord Theorem 1's "closest living successor"); one of
 * our own virtual servers needs no ping. */
static void verify_next(struct chord__lksm *sm)
{
	const struct chord__lk_env *env = &sm->env;

	if (sm->verify_idx >= sm->res.n) {
		finish(sm, -EHOSTUNREACH); /* all the successors are dead */
		return;
	}
	const struct cfs_node *s = &sm->res.succ[sm->verify_idx];
	if (env->ops->is_local(env->ctx, &s->id)) {
		verified(sm);
		return;
	}
	sm->res.rpcs++;
	ask(sm, CHORD__LKA_PING, s);
}

static void verify_reply(struct chord__lksm *sm, int status)
{
	if (sm->state != CHORD__LK_VERIFYING)
		return;
	if (status == 0) {
		verified(sm);
		return;
	}
	if (status == -ETIMEDOUT)
		sm->res.timeouts++;
	const struct cfs_id *dead = &sm->res.succ[sm->verify_idx].id;
	add_failed(sm, dead);
	chord__lk_emit(&sm->q, CHORD__LKA_REMOVE)->id = *dead;
	sm->verify_idx++;
	verify_next(sm);
}

/* A final answer: the key's successors (VERIFY: check them first);
 * checked: they passed chord__lk_check or are our own. */
static void answer(struct chord__lksm *sm, const struct cfs_node *nodes, uint32_t n, bool checked)
{
	if (sm->state == CHORD__LK_VERIFYING || sm->state == CHORD__LK_DONE)
		return;
	set_result(sm, nodes, n);
	sm->res.checked = checked;
	if (sm->res.n == 0) {
		finish(sm, -EHOSTUNREACH);
		return;
	}
	if (sm->o.flags & CFS_LOOKUP_F_VERIFY) {
		sm->state = CHORD__LK_VERIFYING;
		sm->verify_idx = 0;
		verify_next(sm);
		return;
	}
	finish(sm, 0);
}

/* ------------------------------------------------------------ iterative */

/* Keep only well-formed candidates (CFS 4.4: the ID hashes from the
 * address) not known to have failed; with progress, only those between
 * from and the key. */
static uint32_t filter(const struct chord__lksm *sm, const struct cfs_id *from,
                       const struct cfs_node *in, uint32_t n, struct cfs_node *out, uint32_t cap,
                       bool progress)
{
	const struct chord__lk_env *env = &sm->env;
	uint32_t k = 0;

	for (uint32_t i = 0; i < n && k < cap; i++) {
		if (!env->ops->node_id_ok(env->ctx, &in[i]) || is_failed(sm, &in[i].id))
			continue;
		/* Castro et al. 2002 §4.2: route around suspects (they stay in
		 * answers: a liar may still be one of the key's successors). */
		if (progress && (!cfs_id_in_oo(&in[i].id, from, &sm->key) || is_suspect(sm, &in[i].id)))
			continue;
		out[k++] = in[i];
	}
	return k;
}

/* ------------------------------------------------------------ answer checks */

static void iter_next(struct chord__lksm *sm);

/*
 * Castro, Druschel, Ganesh, Rowstron, Wallach, "Secure routing for
 * structured peer-to-peer overlay networks" (OSDI 2002) §4.1 with CFS
 * 4.4, before an answer is believed: IDs that hash from their addresses;
 * successors in ring order after the key, the answering node not among
 * them past the first unless the list wraps back to it (a ring shorter
 * than its successor list; then the list must pass the density test
 * below as the whole ring); the key between the answerer and its first
 * successor — and a node asked because it precedes the key cannot claim
 * to be the key's successor (every next hop is chosen in (hop, key)); a
 * full answer naming at least half of min(want, r, N̂ - 1) successors
 * (honest lists hold min(r, N - 1); half leaves room for lists still
 * growing); and the routing-failure test: the mean gap of key, succ[0],
 * ..., succ[n-1] at most γ times the mean gap 1/N̂ of our own list.
 */
const char chord__lk_too_few[] = "named too few successors for the ring's size";
const char chord__lk_claims_preceding[] = "claimed the key although it precedes it";

/* The most entries a whole-ring answer may hold: max(want, r). */
static uint32_t wrap_max(const struct chord__lk_env *env, uint32_t want)
{
	uint32_t r = env->ops->succ_max ? env->ops->succ_max(env->ctx) : UINT32_MAX;

	return r > want ? r : want;
}

const char *chord__lk_check(const struct chord__lk_env *env, const struct cfs_id *key,
                            const struct cfs_node *from, bool from_before_key,
                            const struct cfs_node *nodes, uint32_t n, uint32_t want, bool full)
{
	const struct chord__lk_ops *ops = env->ops;
	struct cfs_id d, prev = { 0 };
	bool wraps = false; /* it named itself after the key: the whole ring */

	if (n == 0)
		return "named no successor";
	for (uint32_t i = 0; i < n; i++) {
		if (!ops->node_id_ok(env->ctx, &nodes[i]))
			return "named a node whose ID does not hash from its address";
		cfs_id_distance(&d, key, &nodes[i].id);
		if (i > 0 && cfs_id_cmp(&d, &prev) <= 0)
			return "named successors out of ring order";
		if (i > 0 && cfs_id_eq(&nodes[i].id, &from->id)) {
			if (wraps)
				return "named itself among its own successors";
			wraps = true;
		}
		prev = d;
	}
	if (cfs_id_eq(&from->id, &nodes[0].id)) {
		if (from_before_key)
			return chord__lk_claims_preceding;
	} else if (!cfs_id_in_oc(key, &from->id, &nodes[0].id)) {
		return "the key is not between it and its first successor";
	}
	double est = ops->estimate_n(env->ctx);
	/* Castro et al. 2002 §4.1: the routing-failure test */
	double gaps = n > CHORD__LK_DENSITY_MIN_N ? n : CHORD__LK_DENSITY_MIN_N;
	if (est >= 2 && cfs_id_to_unit(&prev) * est > CHORD__LK_GAMMA * gaps)
		return wraps ? "named itself among its own successors"
		             : "named successors sparser than the ring (routing-failure test)";
	/* a whole ring must be about as large as we think the ring is, and
	 * known from a list shorter than r: the answerer's N - 1 successors
	 * and itself, at most r entries in all; or at most as many as we
	 * asked for, when that is more (VERIFY asks for spares, and the
	 * answerer's r may be longer than ours) */
	if (wraps && ((double)(n + 1) * 2 < est || n > wrap_max(env, want)))
		return "named itself among its own successors";
	/* last: every other check fails as a suspect first */
	if (full) {
		uint32_t cap = want;
		if (ops->succ_max && ops->succ_max(env->ctx) < cap)
			cap = ops->succ_max(env->ctx);
		if (est - 1 < cap)
			cap = est > 1 ? (uint32_t)(est - 1) : 0;
		if (n < cap / 2)
			return chord__lk_too_few;
	}
	return NULL;
}

/* Was path[d] asked because it precedes the key (chosen in (path[d-1],
 * key))? Not a bootstrap node, nor a plain client's first hop. */
static bool hop_before_key(const struct chord__lksm *sm, int d)
{
	return d >= 1 && !(d == 1 && sm->client_start);
}

/*
 * An answer failed the checks: its node is out of this lookup and, but for
 * a short successor list, a suspect (the driver tells the suspect table).
 * A short list is no proof: an honest node that joined a second ago knows
 * one successor until stabilization has run a few times, which across a
 * 200 ms path takes seconds; its answer is refused (REFUSED), and nothing
 * more. chord__lk_check tests the length last, so an answer that fails
 * anything else as well still makes a suspect.
 */
static void suspect(struct chord__lksm *sm, const struct cfs_node *n, const char *why)
{
	sm->res.checks_failed++;
	add_failed(sm, &n->id);
	struct chord__lk_act *a =
		chord__lk_emit(&sm->q, why == chord__lk_too_few ? CHORD__LKA_REFUSED : CHORD__LKA_SUSPECT);

	a->has_to = true;
	a->to = *n;
	a->id = n->id;
	a->why = why;
}

/* Castro et al. 2002 §4.2, redundant routing: the hop on top of the path
 * lied. The first time, start again at the root of the path, avoiding the
 * first hop of the path that led to the liar (every node asked on it stays
 * asked: the new path is disjoint); after that, back up one hop as after
 * a failure. */
static void reroute(struct chord__lksm *sm)
{
	if (!sm->restarted && sm->depth > 2) {
		sm->restarted = true;
		sm->has_avoid = true;
		sm->avoid = sm->path[1].n.id;
		sm->depth = 1;
		sm->step++;
		sm->step_out = 0;
		if (sm->part_depth >= 1)
			sm->npart = 0; /* told by a hop of the bad path */
	} else {
		pop_hop(sm);
	}
	iter_next(sm);
}

/* Remember a hop's partial answer (the tail of nodes after ncand). */
static void keep_partial(struct chord__lksm *sm, int depth, const struct cfs_node *nodes,
                         uint32_t ncand, uint32_t n)
{
	if (ncand >= n)
		return;
	sm->npart = filter(sm, NULL, nodes + ncand, n - ncand, sm->part, NCAND, false);
	sm->part_depth = depth;
}

/* DHash++ Fig. 10, the "overlap" case: the hop at depth offered the key's
 * predecessors and they all failed, so answer with the successors it
 * knew (those not failed since). */
static bool use_partial(struct chord__lksm *sm, int depth)
{
	struct cfs_node ok[NCAND];

	if (sm->npart == 0 || sm->part_depth != depth)
		return false;
	const struct cfs_node *from = &sm->path[depth].n;
	if (!sm->env.ops->is_local(sm->env.ctx, &from->id) && !(depth == 0 && sm->client_start)) {
		const char *why = chord__lk_check(&sm->env, &sm->key, from, hop_before_key(sm, depth),
		                                  sm->part, sm->npart, want_succs(sm), false);
		if (why) {
			sm->npart = 0;
			suspect(sm, from, why);
			return false;
		}
	}
	uint32_t n = filter(sm, NULL, sm->part, sm->npart, ok, NCAND, false);
	sm->npart = 0;
	if (n == 0)
		return false;
	answer(sm, ok, n, true);
	return true;
}

/* Ask a candidate of the top hop: the hop is the one alerted if it fails
 * (unless it is ours, or a plain client's pseudo-hop). */
static void send_find(struct chord__lksm *sm, const struct cfs_node *to)
{
	const struct chord__lk_env *env = &sm->env;
	struct chord__lk_act *a = ask(sm, CHORD__LKA_FIND, to);
	struct chord__lk_ask *k = &sm->asks[a->ask];

	if (sm->depth > 0) {
		k->via = sm->path[sm->depth - 1].n;
		k->alert = !env->ops->is_local(env->ctx, &k->via.id) &&
		           !(sm->client_start && sm->depth == 1);
	}
	k->before_key = hop_before_key(sm, sm->depth);
	a->nsucc = want_succs(sm);
	a->flags = (sm->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) | (sm->to_pred ? CFS_LOOKUP_F_TO_PRED : 0);
	sm->res.rpcs++;
	sm->step_out++;
}

/*
 * CFS Fig. 5's loop, with OpenDHT 3.2.2's parallelism: keep up to p asks
 * in flight to the top hop's best untried candidates; when it has none
 * left (and nothing is in flight), fall back on its partial answer or
 * back up one hop. An empty path means no live route.
 */
static void iter_next(struct chord__lksm *sm)
{
	if (sm->state != CHORD__LK_ITERATING)
		return;
	while (sm->depth > 0) {
		struct chord__lk_hop *top = &sm->path[sm->depth - 1];
		while (sm->step_out < sm->par) {
			bool skip[NCAND], avoid[NCAND];
			for (uint32_t i = 0; i < top->ncand; i++) {
				skip[i] = top->tried[i] || is_failed(sm, &top->cand[i].id) ||
				          was_asked(sm, &top->cand[i].id) || is_suspect(sm, &top->cand[i].id);
				/* after a liar: a first hop other than the bad path's */
				avoid[i] = skip[i] || (sm->depth == 1 && sm->has_avoid &&
				                       cfs_id_eq(&top->cand[i].id, &sm->avoid));
			}
			uint32_t sel = CHORD_MODE_SELECT(sm->o.mode);
			int i = chord__lk_select(&sm->env, sel, &top->n.id, &sm->key, top->cand, top->ncand, avoid);
			if (i < 0)
				i = chord__lk_select(&sm->env, sel, &top->n.id, &sm->key, top->cand, top->ncand, skip);
			if (i < 0)
				break;
			if (sm->res.rpcs >= CHORD__LK_MAX_RPCS) {
				finish(sm, -EHOSTUNREACH); /* a loop, or a ring of liars */
				return;
			}
			top->tried[i] = true;
			if (sm->nasked < CHORD__LK_MAX_RPCS)
				sm->asked[sm->nasked++] = top->cand[i].id;
			send_find(sm, &top->cand[i]);
		}
		if (sm->step_out > 0)
			return; /* answers are on their way */
		if (use_partial(sm, sm->depth - 1))
			return;
		pop_hop(sm); /* CFS Fig. 5: nothing left here, back up one hop */
	}
	finish(sm, -EHOSTUNREACH);
}

/* The hop on top of the path answered (CFS Fig. 5's lookup_step): it holds
 * the block, knows the key's successors, or names next hops (DHash++ 4.5:
 * with PARTIAL, the key's predecessors plus the successors it knows). */
static void take_step(struct chord__lksm *sm, const struct chord__lk_reply *r, bool before_key)
{
	struct chord__lk_hop *h = &sm->path[sm->depth - 1];
	bool done = r->flags & CFS_LOOKUP_F_DONE, has = r->flags & CFS_LOOKUP_F_HAS_BLOCK;

	sm->res.hops++;
	if (has && !(sm->o.flags & CFS_LOOKUP_F_CHECK_BLOCK)) {
		suspect(sm, &h->n, "claimed a block nobody asked about");
		reroute(sm);
		return;
	}
	/* A PARTIAL answer naming no predecessor is a final one in disguise
	 * (an honest one names at least the key's predecessor). */
	if ((r->flags & CFS_LOOKUP_F_PARTIAL) && r->count == 0)
		done = true;
	if (done) {
		const char *why = chord__lk_check(&sm->env, &sm->key, &h->n, before_key, r->nodes, r->n,
		                                  want_succs(sm), true);
		if (why) {
			suspect(sm, &h->n, why);
			reroute(sm);
			return;
		}
	}
	if (has) { /* CFS 5.2; counts only once served (DHash's get) */
		sm->res.has_block = true;
		sm->res.holder = h->n;
	}
	if (done || has) {
		struct cfs_node ok[CFS_MSG_MAX_NODES];
		uint32_t n = filter(sm, NULL, r->nodes, r->n, ok, CFS_MSG_MAX_NODES, false);
		if (n > 0) {
			answer(sm, ok, n, done);
			return;
		}
		pop_hop(sm); /* an empty answer is no answer: try elsewhere */
		iter_next(sm);
		return;
	}
	uint32_t ncand = r->n;
	if ((r->flags & CFS_LOOKUP_F_PARTIAL) && r->count < r->n) {
		ncand = r->count;
		keep_partial(sm, sm->depth - 1, r->nodes, ncand, r->n);
	}
	/* Candidates that make no progress would lead us in circles. */
	h->ncand = filter(sm, &h->n.id, r->nodes, ncand, h->cand, NCAND, true);
	iter_next(sm);
}

/* CFS Fig. 5: the node we tried failed; tell the hop that named it
 * (alert), forget it, and try that hop's next best. */
static void hop_failed(struct chord__lksm *sm, const struct chord__lk_ask *k, int status,
                       bool current)
{
	if (status == -ETIMEDOUT)
		sm->res.timeouts++;
	if (k->has_to && !is_failed(sm, &k->to.id)) {
		add_failed(sm, &k->to.id);
		if (k->alert) {
			struct chord__lk_act *a = chord__lk_emit(&sm->q, CHORD__LKA_ALERT);
			a->has_to = true;
			a->to = k->via;
			a->id = k->to.id;
		}
		chord__lk_emit(&sm->q, CHORD__LKA_DROP)->id = k->to.id;
	}
	if (current)
		iter_next(sm);
}

/* The bootstrap step: we only knew an address; the answer names its node,
 * which must hash from the address it answered from (CFS 4.4). */
static void bootstrap_reply(struct chord__lksm *sm, const struct chord__lk_reply *r)
{
	sm->state = CHORD__LK_ITERATING;
	if (r->status < 0 || !r->has_from) {
		if (r->status == -ETIMEDOUT)
			sm->res.timeouts++;
		finish(sm, -EHOSTUNREACH);
		return;
	}
	struct chord__lk_hop *h = push_hop(sm);
	h->n = r->from;
	if (!sm->env.ops->node_id_ok(sm->env.ctx, &h->n)) {
		finish(sm, -EHOSTUNREACH);
		return;
	}
	take_step(sm, r, false);
}

static void find_reply(struct chord__lksm *sm, const struct chord__lk_ask *k,
                       const struct chord__lk_reply *r)
{
	bool current = k->step == sm->step;

	if (current && sm->step_out > 0)
		sm->step_out--;
	if (sm->state == CHORD__LK_DONE)
		return;
	if (r->status == -ECANCELED) {
		finish(sm, -ECANCELED);
		return;
	}
	if (sm->state == CHORD__LK_VERIFYING)
		return; /* a parallel ask answered already */
	if (sm->state == CHORD__LK_BOOTSTRAP) {
		bootstrap_reply(sm, r);
		return;
	}
	if (r->status < 0) {
		hop_failed(sm, k, r->status, current);
		return;
	}
	/* The node asked answers under its own ID (a process answers for the
	 * virtual server addressed), or nothing it says counts. */
	if (k->has_to && (!r->has_from || !cfs_id_eq(&r->from.id, &k->to.id))) {
		suspect(sm, &k->to, "answered under another node's ID");
		if (current)
			iter_next(sm);
		return;
	}
	if (!current) {
		/* OpenDHT 3.2.2: a parallel ask moved the lookup on; only a
		 * final answer from this one is still worth taking, checked. */
		struct cfs_node ok[CFS_MSG_MAX_NODES];
		uint32_t n = 0;
		if (!(r->flags & CFS_LOOKUP_F_DONE))
			return;
		const char *why = chord__lk_check(&sm->env, &sm->key, &k->to, k->before_key, r->nodes,
		                                  r->n, want_succs(sm), true);
		if (why) {
			suspect(sm, &k->to, why);
			return;
		}
		n = filter(sm, NULL, r->nodes, r->n, ok, CFS_MSG_MAX_NODES, false);
		if (n > 0) {
			sm->res.hops++;
			answer(sm, ok, n, true);
		}
		return;
	}
	struct chord__lk_hop *h = push_hop(sm);
	if (!h) {
		finish(sm, -EHOSTUNREACH); /* MAX_DEPTH: a loop, or liars */
		return;
	}
	h->n = r->from;
	take_step(sm, r, k->before_key);
}

/* The originator's own step (CFS Fig. 5 run locally first): answered from
 * our tables or block store, or the first hop's candidates. */
static bool local_step(struct chord__lksm *sm)
{
	const struct chord__lk_env *env = &sm->env;
	struct cfs_node out[CFS_MSG_MAX_NODES], self;
	uint32_t n = 0, ncand = 0, want = want_succs(sm);

	memset(&self, 0, sizeof(self));
	bool done = env->ops->local_step(env->ctx, &sm->key, want, sm->to_pred, out, &n, &ncand,
	                                 want > NCAND ? want : NCAND, &self);
	if ((sm->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) && env->ops->has_block(env->ctx, &sm->key)) {
		sm->res.has_block = true;
		sm->res.holder = self;
	}
	if (done || sm->res.has_block) {
		answer(sm, out, n, done); /* our own tables */
		return true;
	}
	keep_partial(sm, 0, out, ncand, n);
	sm->depth = 0;
	struct chord__lk_hop *h = push_hop(sm);
	h->n = self;
	h->ncand = ncand < NCAND ? ncand : NCAND;
	memcpy(h->cand, out, h->ncand * sizeof(out[0]));
	return false;
}

/* ------------------------------------------------------------ recursive */

static void fall_back(struct chord__lksm *sm);

/* DHash++ Fig. 10 at the originator: hand the query to our best next hop
 * and wait for the answer, at most the deadline. */
static void rec_send(struct chord__lksm *sm)
{
	struct chord__lk_hop *h = &sm->path[0];
	bool skip[NCAND];

	for (uint32_t i = 0; i < h->ncand; i++)
		skip[i] = h->tried[i] || is_failed(sm, &h->cand[i].id) || is_suspect(sm, &h->cand[i].id);
	int i = chord__lk_select(&sm->env, CHORD_MODE_SELECT(sm->o.mode), &h->n.id, &sm->key, h->cand,
	                         h->ncand, skip);
	if (i < 0) {
		fall_back(sm);
		return;
	}
	h->tried[i] = true;
	sm->rec_first = h->cand[i].id;
	struct chord__lk_act *a = ask(sm, CHORD__LKA_FWD, &h->cand[i]);
	a->nsucc = want_succs(sm);
	a->flags = (sm->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) | (CHORD_MODE_SELECT(sm->o.mode) << 8) |
	           (sm->to_pred ? CFS_LOOKUP_F_TO_PRED : 0);
	chord__lk_emit(&sm->q, CHORD__LKA_DEADLINE)->ms = CHORD__LK_DEADLINE_MS;
}

/* The first hop did not take the query: every candidate at its address
 * is out; try the next best. */
static void fwd_ack(struct chord__lksm *sm, const struct chord__lk_ask *k, int status)
{
	if (sm->state != CHORD__LK_RECURSIVE || status == 0)
		return;
	if (status == -ETIMEDOUT)
		sm->res.timeouts++;
	struct chord__lk_hop *h = &sm->path[0];
	for (uint32_t i = 0; i < h->ncand; i++)
		if (h->tried[i] && cfs_addr_eq(&h->cand[i].addr, &k->to.addr))
			add_failed(sm, &h->cand[i].id);
	rec_send(sm);
}

/* DHash++ 4.2: "falls back on iterative lookups after persistent
 * failures" — from scratch, keeping what failed. */
static void fall_back(struct chord__lksm *sm)
{
	if (sm->state == CHORD__LK_DONE)
		return;
	sm->state = CHORD__LK_ITERATING;
	if (!local_step(sm))
		iter_next(sm);
}

bool chord__lksm_awaits_done(const struct chord__lksm *sm, uint64_t id, const struct cfs_id *key)
{
	return sm->state == CHORD__LK_RECURSIVE && sm->id == id && cfs_id_eq(&sm->key, key);
}

/* DHash++ Fig. 10: "return overlap to the originator q" — the answer. */
/* The recursive answer is checked as an iterative one (its answerer was
 * forwarded to as a node preceding the key); one that fails makes its
 * answerer a suspect and the lookup iterative, avoiding the first hop we
 * forwarded to (Castro et al. 2002 §4.2). A block claim answers with the
 * claimer alone (fwd_sm.c) and counts once served (DHash's get). */
void chord__lksm_done_msg(struct chord__lksm *sm, const struct chord__lk_reply *d)
{
	const char *why = NULL;

	if (sm->state != CHORD__LK_RECURSIVE)
		return;
	sm->res.rpcs += d->hops;
	sm->res.hops = d->hops;
	if (d->has_from) {
		sm->done_from = d->from;
		sm->has_done_from = sm->env.ops->node_id_ok(sm->env.ctx, &sm->done_from);
	}
	sm->state = CHORD__LK_ITERATING;
	if (!sm->has_done_from) {
		fall_back(sm); /* nobody to believe, nor to blame */
		return;
	}
	bool has = d->flags & CFS_LOOKUP_F_HAS_BLOCK;
	if (has && !(sm->o.flags & CFS_LOOKUP_F_CHECK_BLOCK))
		why = "claimed a block nobody asked about";
	else if (!has)
		why = chord__lk_check(&sm->env, &sm->key, &sm->done_from, true, d->nodes, d->n,
		                      want_succs(sm), true);
	if (why) {
		suspect(sm, &sm->done_from, why);
		sm->has_done_from = false;
		sm->restarted = sm->has_avoid = true;
		sm->avoid = sm->rec_first;
		fall_back(sm);
		return;
	}
	if (has) {
		sm->res.has_block = true;
		sm->res.holder = sm->done_from;
	}
	struct cfs_node ok[CFS_MSG_MAX_NODES];
	uint32_t n = filter(sm, NULL, d->nodes, d->n, ok, CFS_MSG_MAX_NODES, false);
	if (n == 0) {
		fall_back(sm);
		return;
	}
	answer(sm, ok, n, !has);
}

void chord__lksm_deadline(struct chord__lksm *sm)
{
	if (sm->state != CHORD__LK_RECURSIVE)
		return;
	sm->res.timeouts++;
	fall_back(sm); /* DHash++ 4.2: the answer is overdue */
}

/* ------------------------------------------------------------ starting */

void chord__lksm_start(struct chord__lksm *sm)
{
	sm->state = CHORD__LK_ITERATING;
	if (local_step(sm))
		return;
	if (CHORD_MODE_ALGO(sm->o.mode) == CHORD_RECURSIVE) {
		sm->state = CHORD__LK_RECURSIVE;
		rec_send(sm);
		return;
	}
	iter_next(sm);
}

void chord__lksm_start_addr(struct chord__lksm *sm, const struct cfs_addr *addr)
{
	struct cfs_node to = { .addr = *addr };

	sm->state = CHORD__LK_BOOTSTRAP;
	struct chord__lk_act *a = ask(sm, CHORD__LKA_FIND, &to);
	a->has_to = sm->asks[a->ask].has_to = false;
	a->nsucc = want_succs(sm);
	a->flags = (sm->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) | (sm->to_pred ? CFS_LOOKUP_F_TO_PRED : 0);
	sm->res.rpcs++;
	sm->step_out++;
}

/* A plain client has no table: its known nodes are the first hop's
 * candidates, seen from the key itself (every one of them makes
 * progress); it alerts nobody about them. */
void chord__lksm_start_client(struct chord__lksm *sm, const struct cfs_node *cand, uint32_t n)
{
	sm->state = CHORD__LK_ITERATING;
	struct chord__lk_hop *h = push_hop(sm);
	h->n.id = sm->key;
	h->ncand = n < NCAND ? n : NCAND;
	memcpy(h->cand, cand, h->ncand * sizeof(cand[0]));
	sm->client_start = true;
	iter_next(sm);
}

void chord__lksm_reply(struct chord__lksm *sm, uint32_t askno, const struct chord__lk_reply *r)
{
	if (askno >= sm->nasks)
		return;
	const struct chord__lk_ask *k = &sm->asks[askno];
	switch (k->type) {
	case CHORD__LKA_FIND:
		find_reply(sm, k, r);
		break;
	case CHORD__LKA_FWD:
		fwd_ack(sm, k, r->status);
		break;
	default:
		verify_reply(sm, r->status);
		break;
	}
}

/* The transport refused a send (it is closing, or the message would not
 * encode): a FIND ends the lookup, a FWD or PING moves to the next node. */
void chord__lksm_send_failed(struct chord__lksm *sm, uint32_t askno, int r)
{
	if (askno >= sm->nasks || sm->state == CHORD__LK_DONE)
		return;
	const struct chord__lk_ask *k = &sm->asks[askno];
	switch (k->type) {
	case CHORD__LKA_FIND:
		if (k->step == sm->step && sm->step_out > 0)
			sm->step_out--;
		finish(sm, r == -ECANCELED ? -ECANCELED : -EHOSTUNREACH);
		break;
	case CHORD__LKA_FWD:
		if (sm->state == CHORD__LK_RECURSIVE)
			rec_send(sm);
		break;
	default:
		if (sm->state == CHORD__LK_VERIFYING) {
			sm->verify_idx++;
			verify_next(sm);
		}
		break;
	}
}
