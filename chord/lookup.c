/*
 * Lookups. Iterative: the CFS Figure 5 procedure — the originator asks each
 * hop for its best next hops, keeps the path as a stack, and on an RPC
 * failure alerts the previous hop and backtracks to its next-best choice.
 * Recursive: DHash++ Figure 10 — each hop forwards the query and the node
 * whose successor list covers the key answers the originator directly; on
 * a timeout the originator falls back to iterative. Every next hop is
 * chosen by one of three rules (lookup_select). Iterative lookups may keep
 * up to p requests in flight (OpenDHT 3.2.2): each goes to the next-best
 * candidate of the current hop, and the first useful answer moves the
 * lookup on (the others' answers are then stale: a stale final answer is
 * still taken, stale candidates are not).
 */
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

#define NCAND 16
#define MAX_DEPTH 48
#define MAX_FAILED 64
#define MAX_RPCS 96
#define MAX_FWD_HOPS 64
#define FWD_TRIES 3
#define RECURSIVE_DEADLINE_MS 1500
#define TICK_MS 20

struct hop {
	struct cfs_node n;
	uint32_t ncand;
	struct cfs_node cand[NCAND];
	bool tried[NCAND];
};

struct lookup {
	chord_t *c;
	struct lookup *next;
	struct cfs_id key;
	struct chord_lookup_opts o;
	chord_lookup_cb cb;
	void *arg;
	uint64_t started_us, id, deadline_us;
	bool recursive, ended, first_pending;
	bool answering;           /* the answer is being verified: ignore late asks */
	bool client_start;        /* path[0] is a plain client's pseudo-hop */
	bool to_pred;             /* CHORD_MODE_TO_PRED */
	uint32_t par;             /* iterative: requests in flight at most */
	uint32_t step, step_out;  /* changes of the path; asks of this step in flight */
	struct cfs_addr first;
	int outstanding;
	int depth, path_cap;
	struct hop *path; /* grown as the lookup goes deeper, up to MAX_DEPTH */
	uint32_t nfailed, nasked;
	struct cfs_id failed[MAX_FAILED];
	struct cfs_id asked[MAX_RPCS];   /* asked once: never again */
	uint32_t verify_idx;
	/* The key's first successors as told by the hop path[part_depth]
	 * that offered predecessors instead (CFS_LOOKUP_F_PARTIAL): the
	 * answer when none of those predecessors answers. */
	int part_depth;
	uint32_t npart;
	struct cfs_node part[NCAND];
	struct cfs_node done_from; /* recursive: the hop that answered */
	bool has_done_from;
	struct chord_lookup_result res;
};

/* One FIND_NEXT in flight: the step it was sent at, the node asked and
 * the hop that named it (alerted when it fails). */
struct ask {
	struct lookup *l;
	uint32_t step;
	bool has_to, alert;
	struct cfs_node to, via;
};

static void iter_next(struct lookup *l);
static void arm(chord_t *c);

static void ignore_reply(void *arg, int status, const struct cfs_msg *reply,
                         const struct cfs_rpc_result *res)
{
}

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

int lookup_select(chord_t *c, uint32_t sel, const struct cfs_id *cur, const struct cfs_id *key,
                  const struct cfs_node *cand, uint32_t n, const bool *skip)
{
	double best = 0, est = sel == CHORD_CFS_COST ? chord_estimate_n(c) : 0;
	double dbar = c->avg_rtt_ms > 0 ? c->avg_rtt_ms : 1;
	int bi = -1;

	for (uint32_t i = 0; i < n; i++) {
		if ((skip && skip[i]) || !cfs_id_in_oo(&cand[i].id, cur, key))
			continue;
		double score, lat = (double)chord_predict_rtt_us(c, &cand[i].coord) / 1000.0;
		switch (sel) {
		case CHORD_CFS_COST: /* minimise C = d_i + d̄·H(n_i) */
			score = -(lat + dbar * hops_left(&cand[i].id, key, est));
			break;
		case CHORD_NONLINEAR: /* OpenDHT: maximise progress / f(latency) */
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

/* ------------------------------------------------------------ endings */

static bool is_failed(const struct lookup *l, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < l->nfailed; i++)
		if (cfs_id_eq(&l->failed[i], id))
			return true;
	return false;
}

static bool was_asked(const struct lookup *l, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < l->nasked; i++)
		if (cfs_id_eq(&l->asked[i], id))
			return true;
	return false;
}

static void add_failed(struct lookup *l, const struct cfs_id *id)
{
	if (l->nfailed < MAX_FAILED && !is_failed(l, id))
		l->failed[l->nfailed++] = *id;
}

static void unlink_lookup(chord_t *c, struct lookup *l)
{
	for (struct lookup **pp = &c->lookups; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	l->next = NULL;
}

static void finish(struct lookup *l, int status)
{
	chord_t *c = l->c;

	if (l->ended)
		return;
	l->ended = true;
	l->res.status = status;
	if (l->res.n > l->o.nsucc)
		l->res.n = l->o.nsucc;
	l->res.latency_us = cfs_now_us() - l->started_us;
	if (status < 0)
		l->res.n = 0;
	if (status == 0)
		c->lookups_done++;
	else if (status != -ECANCELED)
		c->lookups_failed++;
	c->lookup_rpcs += l->res.rpcs;
	c->lookup_timeouts += l->res.timeouts;
	unlink_lookup(c, l);
	l->next = c->finished;
	c->finished = l;
	arm(c);
}

static void maybe_free(struct lookup *l)
{
	if (l->ended && l->outstanding == 0 && !l->cb) {
		free(l->path);
		free(l);
	}
}

/* The next hop of the path, cleared; NULL at MAX_DEPTH. */
static struct hop *push_hop(struct lookup *l)
{
	if (l->depth >= MAX_DEPTH)
		return NULL;
	if (l->depth == l->path_cap) {
		l->path_cap = l->path_cap ? 2 * l->path_cap : 8;
		if (l->path_cap > MAX_DEPTH)
			l->path_cap = MAX_DEPTH;
		l->path = xrealloc(l->path, (size_t)l->path_cap * sizeof(*l->path));
	}
	struct hop *h = &l->path[l->depth++];
	memset(h, 0, sizeof(*h));
	l->step++;
	l->step_out = 0; /* asks in flight now belong to an earlier step */
	return h;
}

static void pop_hop(struct lookup *l)
{
	l->depth--;
	l->step++;
	l->step_out = 0;
}

static void run_finished(chord_t *c)
{
	while (c->finished) {
		struct lookup *l = c->finished;
		c->finished = l->next;
		chord_lookup_cb cb = l->cb;
		l->cb = NULL;
		cb(l->arg, &l->res);
		maybe_free(l);
	}
}

static void fall_back(struct lookup *l);

static void on_tick(uv_timer_t *t)
{
	chord_t *c = container_of(t, chord_t, lk_timer);
	uint64_t now = cfs_now_us();

	c->lk_timer_armed = false;
	run_finished(c);
	bool any = false;
	for (struct lookup *l = c->lookups, *n; l; l = n) {
		n = l->next;
		if (!l->recursive)
			continue;
		if (now >= l->deadline_us) {
			l->res.timeouts++;
			fall_back(l);
		} else {
			any = true;
		}
	}
	if (any || c->finished)
		arm(c);
}

static void arm(chord_t *c)
{
	if (c->freeing)
		return;
	if (!c->lk_timer_armed) {
		c->lk_timer_armed = true;
		uv_timer_start(&c->lk_timer, on_tick, c->finished ? 0 : TICK_MS, 0);
	} else if (c->finished) {
		uv_timer_start(&c->lk_timer, on_tick, 0, 0);
	}
}

void lookup_cancel_all(chord_t *c)
{
	while (c->lookups)
		finish(c->lookups, -ECANCELED);
	run_finished(c);
}

/* ------------------------------------------------------------ results */

/* Successors asked of each hop: with VERIFY, spares for the dead ones. */
static uint32_t want_succs(const struct lookup *l)
{
	uint32_t n = l->o.nsucc;

	if (l->o.flags & CFS_LOOKUP_F_VERIFY)
		n += CHORD_SUCC_MAX / 4;
	return n < CFS_MSG_MAX_NODES ? n : CFS_MSG_MAX_NODES;
}

static void set_result(struct lookup *l, const struct cfs_node *nodes, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n && k < want_succs(l); i++)
		if (!is_failed(l, &nodes[i].id))
			l->res.succ[k++] = nodes[i];
	l->res.n = k;
	/* The path: the remote hops that answered, then the recursive
	 * answerer; only the last CHORD_PATH_MAX are kept. */
	l->res.npath = 0;
	for (int d = 0; d <= l->depth; d++) {
		const struct cfs_node *h = d < l->depth ? &l->path[d].n : &l->done_from;
		if ((d == l->depth && !l->has_done_from) || chord__local(l->c, &h->id) ||
		    (d == 0 && l->client_start))
			continue;
		if (l->res.npath == CHORD_PATH_MAX) {
			memmove(&l->res.path[0], &l->res.path[1], (CHORD_PATH_MAX - 1) * sizeof(*h));
			l->res.npath--;
		}
		l->res.path[l->res.npath++] = *h;
	}
}

static void verify_reply(void *arg, int status, const struct cfs_msg *reply,
                         const struct cfs_rpc_result *res);

/* CFS_LOOKUP_F_VERIFY: the first successor that answers is the answer
 * (Theorem 1's "closest living successor"). */
static void verify_next(struct lookup *l)
{
	chord_t *c = l->c;

	while (l->verify_idx < l->res.n) {
		const struct cfs_node *s = &l->res.succ[l->verify_idx];
		if (chord__local(c, &s->id)) {
			break;
		}
		chord__msg_init(c, NULL, CFS_MSG_PING, s);
		l->res.rpcs++;
		if (chord_call(c, s, &c->msg, 0, verify_reply, l) == 0) {
			l->outstanding++;
			return;
		}
		l->verify_idx++;
	}
	if (l->verify_idx >= l->res.n) {
		log_debug("lookup: all %u successors found dead", l->res.n);
		finish(l, -EHOSTUNREACH);
		return;
	}
	memmove(&l->res.succ[0], &l->res.succ[l->verify_idx],
	        (l->res.n - l->verify_idx) * sizeof(l->res.succ[0]));
	l->res.n -= l->verify_idx;
	finish(l, 0);
}

static void verify_reply(void *arg, int status, const struct cfs_msg *reply,
                         const struct cfs_rpc_result *res)
{
	struct lookup *l = arg;

	l->outstanding--;
	if (l->ended) {
		maybe_free(l);
		return;
	}
	if (status == 0) {
		memmove(&l->res.succ[0], &l->res.succ[l->verify_idx],
		        (l->res.n - l->verify_idx) * sizeof(l->res.succ[0]));
		l->res.n -= l->verify_idx;
		finish(l, 0);
		return;
	}
	if (status == -ETIMEDOUT)
		l->res.timeouts++;
	add_failed(l, &l->res.succ[l->verify_idx].id);
	table_remove(l->c, &l->res.succ[l->verify_idx].id);
	l->verify_idx++;
	verify_next(l);
}

static void answer(struct lookup *l, const struct cfs_node *nodes, uint32_t n)
{
	if (l->answering)
		return;
	l->answering = true;
	set_result(l, nodes, n);
	if (l->res.n == 0) {
		finish(l, -EHOSTUNREACH);
		return;
	}
	if (l->o.flags & CFS_LOOKUP_F_VERIFY) {
		l->verify_idx = 0;
		verify_next(l);
		return;
	}
	finish(l, 0);
}

/* ------------------------------------------------------------ iterative */

/* Keep only well-formed candidates that make progress toward the key. */
static uint32_t filter(struct lookup *l, const struct cfs_id *from, const struct cfs_node *in,
                       uint32_t n, struct cfs_node *out, uint32_t cap, bool progress)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n && k < cap; i++) {
		if (!chord__node_id_ok(l->c, &in[i]) || is_failed(l, &in[i].id))
			continue;
		if (progress && !cfs_id_in_oo(&in[i].id, from, &l->key))
			continue;
		out[k++] = in[i];
	}
	return k;
}

/* Remember a hop's partial answer (the tail of nodes after ncand). */
static void keep_partial(struct lookup *l, int depth, const struct cfs_node *nodes,
                         uint32_t ncand, uint32_t n)
{
	if (ncand >= n)
		return;
	l->npart = filter(l, NULL, nodes + ncand, n - ncand, l->part, NCAND, false);
	l->part_depth = depth;
}

/* The hop at depth gave up its candidates: answer with its partial list. */
static bool use_partial(struct lookup *l, int depth)
{
	struct cfs_node ok[NCAND];

	if (l->npart == 0 || l->part_depth != depth)
		return false;
	uint32_t n = filter(l, NULL, l->part, l->npart, ok, NCAND, false);
	l->npart = 0;
	if (n == 0)
		return false;
	answer(l, ok, n);
	return true;
}

static void find_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res);

static void send_find(struct lookup *l, const struct cfs_addr *addr, const struct cfs_node *to)
{
	chord_t *c = l->c;
	int r;

	struct ask *a = xcalloc(1, sizeof(*a));

	a->l = l;
	a->step = l->step;
	if (to) {
		a->has_to = true;
		a->to = *to;
		if (l->depth > 0) {
			a->via = l->path[l->depth - 1].n;
			a->alert = !chord__local(c, &a->via.id) && !(l->client_start && l->depth == 1);
		}
	}
	chord__msg_init(c, NULL, CFS_MSG_FIND_NEXT, to);
	c->msg.key = l->key;
	c->msg.nsucc = want_succs(l);
	c->msg.flags = (l->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) | (l->to_pred ? CFS_LOOKUP_F_TO_PRED : 0);
	l->res.rpcs++;
	r = to ? chord_call(c, to, &c->msg, 0, find_reply, a)
	       : chord__call_addr(c, addr, &c->msg, c->cfg.probe_timeout_ms, find_reply, a);
	if (r < 0) {
		free(a);
		finish(l, r == -ECANCELED ? -ECANCELED : -EHOSTUNREACH);
		return;
	}
	l->outstanding++;
	l->step_out++;
}

static void send_alert(struct lookup *l, const struct cfs_node *to, const struct cfs_id *dead)
{
	chord_t *c = l->c;

	chord__msg_init(c, NULL, CFS_MSG_ALERT, to);
	c->msg.key = *dead;
	(void)chord_call(c, to, &c->msg, c->cfg.probe_timeout_ms, ignore_reply, NULL);
}

static void find_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct ask a = *(struct ask *)arg;
	struct lookup *l = a.l;
	chord_t *c = l->c;
	bool current = a.step == l->step;

	free(arg);
	l->outstanding--;
	if (current)
		l->step_out--;
	if (l->ended) {
		maybe_free(l);
		return;
	}
	if (status == -ECANCELED) {
		finish(l, -ECANCELED);
		return;
	}
	if (l->answering)
		return; /* a parallel ask answered already */
	if (l->first_pending) {
		/* The bootstrap step: we only knew an address. */
		l->first_pending = false;
		if (status < 0 || !reply->has_from) {
			if (status == -ETIMEDOUT)
				l->res.timeouts++;
			finish(l, -EHOSTUNREACH);
			return;
		}
		struct hop *h = push_hop(l);
		h->n = (struct cfs_node){ .id = reply->from_id, .addr = *res->from,
		                          .vindex = reply->from_vindex, .coord = reply->coord };
		if (!chord__node_id_ok(c, &h->n)) {
			finish(l, -EHOSTUNREACH);
			return;
		}
	} else {
		if (status < 0) {
			/* The hop we tried failed: tell the hop that named it
			 * (CFS Fig. 5 alert), forget it, try the next best. */
			if (status == -ETIMEDOUT)
				l->res.timeouts++;
			if (a.has_to && !is_failed(l, &a.to.id)) {
				add_failed(l, &a.to.id);
				if (a.alert)
					send_alert(l, &a.via, &a.to.id);
				table_drop_finger(c, &a.to.id);
				if (c->client)
					client_forget(c, &a.to.id);
			}
			if (current)
				iter_next(l);
			return;
		}
		if (!current) {
			/* A parallel ask moved the lookup on; only a final
			 * answer from this one is still worth taking. */
			if (reply->flags & CFS_LOOKUP_F_DONE) {
				struct cfs_node ok[CFS_MSG_MAX_NODES];
				uint32_t n = filter(l, NULL, reply->nodes, reply->n_nodes, ok,
				                    CFS_MSG_MAX_NODES, false);
				if (n > 0) {
					l->res.hops++;
					answer(l, ok, n);
				}
			}
			return;
		}
		struct hop *h = push_hop(l);
		if (!h) {
			finish(l, -EHOSTUNREACH);
			return;
		}
		h->n = (struct cfs_node){ .id = reply->from_id, .addr = *res->from,
		                          .vindex = reply->from_vindex, .coord = reply->coord };
	}
	struct hop *h = &l->path[l->depth - 1];
	l->res.hops++;
	if (reply->flags & CFS_LOOKUP_F_HAS_BLOCK) {
		l->res.has_block = true;
		l->res.holder = h->n;
	}
	if (reply->flags & (CFS_LOOKUP_F_DONE | CFS_LOOKUP_F_HAS_BLOCK)) {
		struct cfs_node ok[CFS_MSG_MAX_NODES];
		uint32_t n = filter(l, NULL, reply->nodes, reply->n_nodes, ok, CFS_MSG_MAX_NODES, false);
		if (n > 0) {
			answer(l, ok, n);
			return;
		}
		pop_hop(l); /* an empty answer is no answer: try elsewhere */
		iter_next(l);
		return;
	}
	uint32_t ncand = reply->n_nodes;
	if ((reply->flags & CFS_LOOKUP_F_PARTIAL) && reply->count < reply->n_nodes) {
		ncand = reply->count;
		keep_partial(l, l->depth - 1, reply->nodes, ncand, reply->n_nodes);
	}
	h->ncand = filter(l, &h->n.id, reply->nodes, ncand, h->cand, NCAND, true);
	iter_next(l);
}

static void iter_next(struct lookup *l)
{
	chord_t *c = l->c;

	if (l->answering)
		return;
	while (l->depth > 0) {
		struct hop *top = &l->path[l->depth - 1];
		while (l->step_out < l->par) {
			bool skip[NCAND];
			for (uint32_t i = 0; i < top->ncand; i++)
				skip[i] = top->tried[i] || is_failed(l, &top->cand[i].id) ||
				          was_asked(l, &top->cand[i].id);
			int i = lookup_select(c, CHORD_MODE_SELECT(l->o.mode), &top->n.id, &l->key,
			                      top->cand, top->ncand, skip);
			if (i < 0)
				break;
			if (l->res.rpcs >= MAX_RPCS) {
				log_debug("lookup gave up after %u RPCs", l->res.rpcs);
				finish(l, -EHOSTUNREACH);
				return;
			}
			top->tried[i] = true;
			if (l->nasked < MAX_RPCS)
				l->asked[l->nasked++] = top->cand[i].id;
			send_find(l, NULL, &top->cand[i]);
			if (l->ended)
				return;
		}
		if (l->step_out > 0)
			return; /* answers are on their way */
		if (use_partial(l, l->depth - 1))
			return;
		pop_hop(l); /* nothing left here: back up one hop */
	}
	log_debug("lookup: no live route left after %u RPCs, %u timeouts", l->res.rpcs, l->res.timeouts);
	finish(l, -EHOSTUNREACH);
}

/* The originator's own step: answered locally or the first hop's choices. */
static bool local_step(struct lookup *l)
{
	chord_t *c = l->c;
	struct vnode *u = table_closest_local(c, &l->key);
	struct cfs_node out[CFS_MSG_MAX_NODES];
	uint32_t n = 0;

	if ((l->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) && c->has_block &&
	    c->has_block(c->has_block_arg, &l->key)) {
		l->res.has_block = true;
		l->res.holder = u->self;
	}
	uint32_t want = want_succs(l), ncand;
	if (table_step(c, u, &l->key, want, l->to_pred, out, &n, &ncand, want > NCAND ? want : NCAND) ||
	    l->res.has_block) {
		answer(l, out, n);
		return true;
	}
	keep_partial(l, 0, out, ncand, n);
	l->depth = 0;
	struct hop *h = push_hop(l);
	h->n = u->self;
	h->ncand = ncand < NCAND ? ncand : NCAND;
	memcpy(h->cand, out, h->ncand * sizeof(out[0]));
	return false;
}

/* ------------------------------------------------------------ recursive */

static void fwd_ack(void *arg, int status, const struct cfs_msg *reply,
                    const struct cfs_rpc_result *res);

static void rec_send(struct lookup *l)
{
	chord_t *c = l->c;
	struct hop *h = &l->path[0];
	bool skip[NCAND];

	for (;;) {
		for (uint32_t i = 0; i < h->ncand; i++)
			skip[i] = h->tried[i] || is_failed(l, &h->cand[i].id);
		int i = lookup_select(c, CHORD_MODE_SELECT(l->o.mode), &h->n.id, &l->key, h->cand,
		                      h->ncand, skip);
		if (i < 0) {
			fall_back(l);
			return;
		}
		h->tried[i] = true;
		chord__msg_init(c, NULL, CFS_MSG_LOOKUP_FWD, &h->cand[i]);
		c->msg.key = l->key;
		c->msg.lookup_id = l->id;
		c->msg.node = c->v[0].self;
		c->msg.node.coord = c->coord;
		c->msg.hops = 1;
		c->msg.nsucc = want_succs(l);
		c->msg.flags = (l->o.flags & CFS_LOOKUP_F_CHECK_BLOCK) | (CHORD_MODE_SELECT(l->o.mode) << 8) |
		               (l->to_pred ? CFS_LOOKUP_F_TO_PRED : 0);
		if (chord_call(c, &h->cand[i], &c->msg, 0, fwd_ack, l) == 0) {
			l->outstanding++;
			l->deadline_us = cfs_now_us() + RECURSIVE_DEADLINE_MS * 1000ull;
			arm(c);
			return;
		}
	}
}

static void fwd_ack(void *arg, int status, const struct cfs_msg *reply,
                    const struct cfs_rpc_result *res)
{
	struct lookup *l = arg;

	l->outstanding--;
	if (l->ended || !l->recursive) {
		maybe_free(l);
		return;
	}
	if (status < 0) {
		if (status == -ETIMEDOUT)
			l->res.timeouts++;
		struct hop *h = &l->path[0];
		for (uint32_t i = 0; i < h->ncand; i++)
			if (h->tried[i] && cfs_addr_eq(&h->cand[i].addr, res->from))
				add_failed(l, &h->cand[i].id);
		rec_send(l);
	}
}

/* Recursive routing failed: do it iteratively from scratch (DHash++). */
static void fall_back(struct lookup *l)
{
	if (l->ended)
		return;
	l->recursive = false;
	if (!local_step(l))
		iter_next(l);
}

void lookup_handle_done(chord_t *c, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct lookup *l;

	chord__msg_init(c, NULL, CFS_MSG_LOOKUP_DONE, NULL);
	chord__reply_simple(c, from, &c->msg);
	for (l = c->lookups; l; l = l->next)
		if (l->recursive && l->id == req->lookup_id && cfs_id_eq(&l->key, &req->key))
			break;
	if (!l)
		return; /* late (we fell back) or forged */
	l->res.rpcs += req->hops;
	l->res.hops = req->hops;
	if (req->has_from) {
		l->done_from = (struct cfs_node){ .id = req->from_id, .addr = from->addr,
		                                  .vindex = req->from_vindex, .coord = req->coord };
		l->has_done_from = chord__node_id_ok(c, &l->done_from);
	}
	if (req->flags & CFS_LOOKUP_F_HAS_BLOCK && req->n_nodes > 0) {
		l->res.has_block = true;
		l->res.holder = req->nodes[0];
	}
	struct cfs_node ok[CFS_MSG_MAX_NODES];
	uint32_t n = filter(l, NULL, req->nodes, req->n_nodes, ok, CFS_MSG_MAX_NODES, false);
	l->recursive = false;
	if (n == 0) {
		fall_back(l);
		return;
	}
	answer(l, ok, n);
}

/* One forwarding hop: acknowledge, then answer the originator or pass on. */
struct fwd {
	chord_t *c;
	struct cfs_msg m;     /* the query as we forward it */
	struct cfs_node cand[NCAND];
	bool tried[NCAND];
	uint32_t ncand, tries;
	struct cfs_node part[NCAND]; /* our partial answer, if any */
	uint32_t npart;
	struct cfs_id self;
};

/* Answer the originator: the key's successors (or our block copy). */
static void fwd_answer(chord_t *c, struct vnode *v, const struct cfs_msg *q, uint32_t flags,
                       const struct cfs_node *nodes, uint32_t n)
{
	struct cfs_node origin = q->node;

	chord__msg_init(c, v, CFS_MSG_LOOKUP_DONE, &origin);
	c->msg.key = q->key;
	c->msg.lookup_id = q->lookup_id;
	c->msg.hops = q->hops;
	c->msg.flags = flags;
	memcpy(c->msg.nodes, nodes, n * sizeof(nodes[0]));
	c->msg.n_nodes = n;
	(void)chord_call(c, &origin, &c->msg, 0, ignore_reply, NULL);
}

/* Every candidate failed: give the originator what we know, if anything. */
static void fwd_give_up(struct fwd *f)
{
	if (f->npart > 0) {
		struct vnode *v = chord__local(f->c, &f->self);
		f->m.hops--; /* the hop count as it reached us */
		fwd_answer(f->c, v, &f->m, CFS_LOOKUP_F_DONE, f->part, f->npart);
	}
	free(f);
}

static void fwd_send(struct fwd *f);

static void fwd_next_ack(void *arg, int status, const struct cfs_msg *reply,
                         const struct cfs_rpc_result *res)
{
	struct fwd *f = arg;

	if (status < 0 && status != -ECANCELED && !f->c->freeing) {
		for (uint32_t i = 0; i < f->ncand; i++)
			if (f->tried[i] && cfs_addr_eq(&f->cand[i].addr, res->from))
				table_drop_finger(f->c, &f->cand[i].id);
		if (++f->tries < FWD_TRIES) {
			fwd_send(f);
			return;
		}
		fwd_give_up(f);
		return;
	}
	free(f);
}

static void fwd_send(struct fwd *f)
{
	chord_t *c = f->c;
	int i = lookup_select(c, CFS_LOOKUP_F_SELECT(f->m.flags), &f->self, &f->m.key, f->cand,
	                      f->ncand, f->tried);
	if (i < 0) {
		fwd_give_up(f);
		return;
	}
	f->tried[i] = true;
	f->m.has_to = true;
	f->m.to_id = f->cand[i].id;
	if (chord_call(c, &f->cand[i], &f->m, 0, fwd_next_ack, f) < 0)
		free(f);
}

/* The served half of a step (find_next and lookup_fwd): clamp the count
 * asked for, consult the block hook, then the tables. */
static bool served_step(chord_t *c, struct vnode *v, const struct cfs_msg *req,
                        struct cfs_node *out, uint32_t *n, uint32_t *ncand, uint32_t *nsucc,
                        bool *has)
{
	*nsucc = req->nsucc < 1 ? 1 : req->nsucc > CFS_MSG_MAX_NODES ? CFS_MSG_MAX_NODES : req->nsucc;
	*has = (req->flags & CFS_LOOKUP_F_CHECK_BLOCK) && c->has_block &&
	       c->has_block(c->has_block_arg, &req->key);
	return table_step(c, v, &req->key, *nsucc, (req->flags & CFS_LOOKUP_F_TO_PRED) != 0, out, n, ncand,
	                  *nsucc > NCAND ? *nsucc : NCAND);
}

void lookup_handle_fwd(chord_t *c, struct vnode *v, const struct cfs_msg *req,
                       const struct cfs_reply_to *from)
{
	struct cfs_node out[CFS_MSG_MAX_NODES];
	uint32_t n = 0, ncand, nsucc;
	bool done, has;

	chord__msg_init(c, v, CFS_MSG_LOOKUP_FWD, NULL);
	chord__reply_simple(c, from, &c->msg);
	c->fwd_handled++;
	if (req->hops > MAX_FWD_HOPS || !chord__node_id_ok(c, &req->node)) {
		c->hostile_dropped++;
		return;
	}
	done = served_step(c, v, req, out, &n, &ncand, &nsucc, &has);
	if (done || has) {
		uint32_t flags = (done ? CFS_LOOKUP_F_DONE : 0) | (has ? CFS_LOOKUP_F_HAS_BLOCK : 0);
		if (has)
			fwd_answer(c, v, req, flags, &v->self, 1);
		else
			fwd_answer(c, v, req, flags, out, n);
		return;
	}
	struct fwd *f = xcalloc(1, sizeof(*f));
	f->c = c;
	f->self = v->self.id;
	f->ncand = ncand < NCAND ? ncand : NCAND;
	memcpy(f->cand, out, f->ncand * sizeof(out[0]));
	f->npart = n - ncand < NCAND ? n - ncand : NCAND;
	memcpy(f->part, out + ncand, f->npart * sizeof(out[0]));
	cfs_msg_init(&f->m, CFS_MSG_LOOKUP_FWD);
	f->m.has_from = true;
	f->m.from_id = v->self.id;
	f->m.from_vindex = v->index;
	f->m.key = req->key;
	f->m.lookup_id = req->lookup_id;
	f->m.node = req->node;
	f->m.hops = req->hops + 1;
	f->m.nsucc = nsucc;
	f->m.flags = req->flags;
	fwd_send(f);
}

/* ------------------------------------------------------------ entry points */

void lookup_handle_find_next(chord_t *c, struct vnode *v, const struct cfs_msg *req,
                             const struct cfs_reply_to *from)
{
	struct cfs_node out[CFS_MSG_MAX_NODES];
	uint32_t n = 0, ncand, nsucc;
	bool done, has;

	c->find_next_handled++;
	if (!req->has_to)
		v = table_closest_local(c, &req->key); /* a bootstrap query: best local start */
	if (!v->joined) {
		/* Our tables mean nothing yet: do not lead a joiner astray. */
		(void)cfs_transport_reply_error(c->tr, from, -EAGAIN);
		return;
	}
	done = served_step(c, v, req, out, &n, &ncand, &nsucc, &has);
	chord__msg_init(c, v, CFS_MSG_FIND_NEXT, NULL);
	c->msg.flags = (done ? CFS_LOOKUP_F_DONE : 0) | (has ? CFS_LOOKUP_F_HAS_BLOCK : 0);
	if (!done && ncand < n) {
		c->msg.flags |= CFS_LOOKUP_F_PARTIAL;
		c->msg.count = ncand;
	}
	memcpy(c->msg.nodes, out, n * sizeof(out[0]));
	c->msg.n_nodes = n;
	chord__reply_simple(c, from, &c->msg);
}

int lookup_start(chord_t *c, struct vnode *from, const struct cfs_addr *first,
                 const struct cfs_id *key, const struct chord_lookup_opts *o,
                 chord_lookup_cb cb, void *arg)
{
	struct lookup *l;

	if (c->freeing || c->leaving)
		return -ECANCELED;
	l = xcalloc(1, sizeof(*l));
	l->c = c;
	l->key = *key;
	l->o = *o;
	if (l->o.nsucc < 1)
		l->o.nsucc = 1;
	if (l->o.nsucc > CFS_MSG_MAX_NODES)
		l->o.nsucc = CFS_MSG_MAX_NODES;
	l->par = CHORD_MODE_PAR(o->mode) ? CHORD_MODE_PAR(o->mode) : 1;
	if (l->par > CHORD_PAR_MAX)
		l->par = CHORD_PAR_MAX;
	l->to_pred = (o->mode & CHORD_MODE_TO_PRED) != 0;
	l->cb = cb;
	l->arg = arg;
	l->started_us = cfs_now_us();
	l->next = c->lookups;
	c->lookups = l;
	if (first) {
		l->first = *first;
		l->first_pending = true;
		send_find(l, &l->first, NULL);
		return 0;
	}
	if (c->client) {
		/* A plain client has no table: its known nodes are the first
		 * hop's candidates, seen from the key itself (every one of them
		 * makes progress). */
		struct hop *h = push_hop(l);
		h->n.id = *key;
		h->ncand = client_candidates(c, key, h->cand, NCAND);
		l->client_start = true;
		iter_next(l);
		return 0;
	}
	if (local_step(l))
		return 0;
	if (CHORD_MODE_ALGO(o->mode) == CHORD_RECURSIVE) {
		l->recursive = true;
		randombytes_buf(&l->id, sizeof(l->id));
		rec_send(l);
		return 0;
	}
	iter_next(l);
	return 0;
}

int chord_lookup(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                 chord_lookup_cb cb, void *arg)
{
	if (c->client)
		return client_lookup(c, key, o, cb, arg);
	return lookup_start(c, &c->v[0], NULL, key, o, cb, arg);
}
