/*
 * Lookups: the libuv driver of the state machines in lookup_sm.c (the
 * originator's lookup) and fwd_sm.c (a recursive lookup's forwarding hop),
 * and the served half of a step (FIND_NEXT, LOOKUP_FWD, LOOKUP_DONE).
 *
 * The driver owns what touches the world: the lookup table (for
 * cancellation and for matching LOOKUP_DONE), the RPCs (chord_call), the
 * timer that runs callbacks and recursive deadlines, the tables the
 * machines' DROP / REMOVE actions edit, and the counters. It hands each
 * reply to its machine as an event and carries out the actions that come
 * back, in order. A lookup is freed in one place (lookup_put): once it
 * has finished, its callback has run and no RPC of it is in flight.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"
#include "chord/lookup_sm.h"

#define TICK_MS 20

struct chord__lookup {
	chord_t *c;
	struct chord__lookup *next;
	chord_lookup_cb cb;       /* NULL once called */
	void *arg;
	uint64_t started_us;
	uint64_t deadline_us;     /* recursive: fall back at this time; 0 none */
	int outstanding;          /* RPCs whose callback has not run yet */
	bool ended;               /* FINISH carried out: on c->finished or done */
	struct chord__lksm sm;
};

/* One RPC of a lookup in flight: its machine's ask number. */
struct lk_call {
	struct chord__lookup *l;
	uint32_t ask;
	uint64_t addr_sent_us;    /* an ask of an address alone: when it left */
};

/* A forwarding hop in progress (at most one next hop asked at a time). */
struct fwd {
	chord_t *c;
	struct chord__vnode *v;
	uint32_t ask;
	struct chord__fwdsm sm;
};

static void arm(chord_t *c);

static void ignore_reply(void *arg, int status, const struct cfs_msg *reply,
                         const struct cfs_rpc_result *res)
{
}

/* ------------------------------------------------------------ the node, for the machines */

static bool env_node_id_ok(void *ctx, const struct cfs_node *n)
{
	return chord__node_id_ok(ctx, n);
}

static bool env_is_local(void *ctx, const struct cfs_id *id)
{
	return chord__local(ctx, id) != NULL;
}

static bool env_local_step(void *ctx, const struct cfs_id *key, uint32_t nsucc, bool to_pred,
                           struct cfs_node *out, uint32_t *n_out, uint32_t *n_cand, uint32_t cap,
                           struct cfs_node *ret_self)
{
	chord_t *c = ctx;
	struct chord__vnode *u = chord__table_closest_local(c, key);

	*ret_self = u->self;
	return chord__table_step(c, u, key, nsucc, to_pred, true, true, out, n_out, n_cand, cap,
	                         cfs_now_us());
}

static bool env_has_block(void *ctx, const struct cfs_id *key)
{
	chord_t *c = ctx;

	return c->has_block && c->has_block(c->has_block_arg, key);
}

static uint64_t env_predict_rtt_us(void *ctx, const struct cfs_node *to)
{
	return chord_rtt_us(ctx, to);
}

static double env_estimate_n(void *ctx)
{
	return chord_estimate_n(ctx);
}

static double env_avg_rtt_ms(void *ctx)
{
	return ((chord_t *)ctx)->avg_rtt_ms;
}

static bool env_is_suspect(void *ctx, const struct cfs_id *id)
{
	return chord__suspect_is(ctx, id, cfs_now_us());
}

static uint32_t env_succ_max(void *ctx)
{
	return ((chord_t *)ctx)->cfg.nsucc;
}

static const struct chord__lk_ops lk_ops = {
	.node_id_ok = env_node_id_ok,
	.is_local = env_is_local,
	.local_step = env_local_step,
	.has_block = env_has_block,
	.predict_rtt_us = env_predict_rtt_us,
	.estimate_n = env_estimate_n,
	.avg_rtt_ms = env_avg_rtt_ms,
	.is_suspect = env_is_suspect,
	.succ_max = env_succ_max,
};

/* ------------------------------------------------------------ endings */

static void unlink_lookup(chord_t *c, struct chord__lookup *l)
{
	for (struct chord__lookup **pp = &c->lookups; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	l->next = NULL;
}

/* The one place a lookup is freed. */
static void lookup_put(struct chord__lookup *l)
{
	if (l->ended && l->outstanding == 0 && !l->cb) {
		chord__lksm_release(&l->sm);
		free(l);
	}
}

/* A member learns the nodes its lookup met (learned.c), into the learned
 * table only: an answer may name a node that has died since, and it is no
 * sign of where the node stands to us, so the successor lists, fingers and
 * predecessor never take it from here. A node our tables authenticated
 * (within ten minutes, auth.c) is added or refreshed at once; any other
 * is a hint, checked by an AUTH of its own within the learned table's
 * budget before it enters. A plain client learns in client.c. */
void chord__learn_node(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	if (c->client || chord__local(c, &n->id) || c->learned.cap == 0)
		return;
	enum auth_state st = chord__auth_peek(c, &n->id, now);
	if (st == AUTH_OK)
		chord__learned_add(&c->learned, n, now);
	else if (st == AUTH_NONE && !chord__suspect_is(c, &n->id, now))
		chord__learned_hint(&c->learned, n, now);
}

/* FINISH: count it, and queue the callback for the timer (never from
 * inside the call that started the lookup). */
static void finished(struct chord__lookup *l)
{
	chord_t *c = l->c;
	struct chord_lookup_result *res = &l->sm.res;

	l->ended = true;
	l->deadline_us = 0;
	res->latency_us = cfs_now_us() - l->started_us;
	if (res->status == 0) {
		uint64_t now = cfs_now_us();
		c->lookups_done++;
		for (uint32_t i = 0; i < res->n; i++)
			chord__learn_node(c, &res->succ[i], now);
		for (uint32_t i = 0; i < res->npath; i++)
			chord__learn_node(c, &res->path[i], now);
		if (!c->client)
			chord__auth_learn_pump(c, now);
	} else if (res->status != -ECANCELED)
		c->lookups_failed++;
	c->lookup_rpcs += res->rpcs;
	c->lookup_timeouts += res->timeouts;
	unlink_lookup(c, l);
	l->next = c->finished;
	c->finished = l;
	arm(c);
}

static void run_finished(chord_t *c)
{
	while (c->finished) {
		struct chord__lookup *l = c->finished;
		c->finished = l->next;
		chord_lookup_cb cb = l->cb;
		l->cb = NULL;
		cb(l->arg, &l->sm.res);
		lookup_put(l);
	}
}

/* ------------------------------------------------------------ actions */

static void lk_reply(void *arg, int status, const struct cfs_msg *m,
                     const struct cfs_rpc_result *res);
static void drive(struct chord__lookup *l);

/* The request an ask action stands for, in c->msg. A plain client (whose
 * lookups are iterative: FIND_NEXT only) says it takes an answer that
 * wraps through the server (WRAP_OK): its first call to a server goes at
 * the older protocol version, and a cut answer costs its cold start a
 * second round trip. A member's first calls, made while it joins, are
 * answered as before. */
static void build_ask(chord_t *c, struct chord__lookup *l, const struct chord__lk_act *a)
{
	switch (a->type) {
	case CHORD__LKA_FIND:
		chord__msg_init(c, NULL, CFS_MSG_FIND_NEXT, a->has_to ? &a->to : NULL);
		c->msg.key = l->sm.key;
		c->msg.nsucc = a->nsucc;
		c->msg.flags = a->flags | (c->client ? CFS_LOOKUP_F_WRAP_OK : 0);
		break;
	case CHORD__LKA_FWD:
		chord__msg_init(c, NULL, CFS_MSG_LOOKUP_FWD, &a->to);
		c->msg.key = l->sm.key;
		c->msg.lookup_id = l->sm.id;
		c->msg.node = c->v[0].self;
		c->msg.node.coord = c->coord;
		c->msg.hops = 1;
		c->msg.nsucc = a->nsucc;
		c->msg.flags = a->flags;
		break;
	default:
		chord__msg_init(c, NULL, CFS_MSG_PING, &a->to);
		break;
	}
}

/*
 * The wait for the first answer of an address we know nothing else of (a
 * join target, a plain client's bootstrap): its round trip is unknown, and
 * a stranger's answer of more than three times its request takes two (a
 * token first: QUIC's address validation, docs/PROTOCOL.md). With the
 * probe timeout alone, a node behind a slow link (a path of 400 ms and
 * more: a geostationary satellite, a congested uplink) never heard any
 * join target within it and retried forever. So every pass over the join
 * targets that none answered doubles the wait, up to ADDR_WAIT_SHIFT_MAX
 * doublings, and an answer sets it to the least that holds two of that
 * answer's waits. The first pass is as fast as before, and a pass is what
 * a restart with many remembered peers down costs; a live target answers
 * whatever the wait, only the dead are waited on longer (as TCP's
 * connection attempts back off).
 */
#define ADDR_WAIT_SHIFT_MAX 4

uint32_t chord__addr_wait_ms(const chord_t *c)
{
	size_t targets = c->nboot + c->npeers;
	size_t s = c->addr_silent / (targets ? targets : 1);

	if (s < c->addr_wait_shift)
		s = c->addr_wait_shift;
	return c->cfg.probe_timeout_ms << (s < ADDR_WAIT_SHIFT_MAX ? s : ADDR_WAIT_SHIFT_MAX);
}

void chord__addr_heard(chord_t *c, int status, uint64_t waited_us)
{
	if (status == -ECANCELED)
		return;
	if (status == -ETIMEDOUT) {
		c->addr_silent++;
		return;
	}
	uint32_t s = 0;
	while (s < ADDR_WAIT_SHIFT_MAX && ((uint64_t)c->cfg.probe_timeout_ms << s) * 1000 < 2 * waited_us)
		s++;
	c->addr_wait_shift = s;
	c->addr_silent = 0;
}

/* A send the transport refuses goes back to the machine as an event; its
 * actions join the end of the queue. */
static void send_ask(struct chord__lookup *l, const struct chord__lk_act *a)
{
	chord_t *c = l->c;
	struct lk_call *k = xcalloc(1, sizeof(*k));
	int r;

	k->l = l;
	k->ask = a->ask;
	build_ask(c, l, a);
	if (a->has_to) {
		r = chord__call_ask(c, &a->to.addr, &a->to, &c->msg, 0, lk_reply, k);
	} else {
		k->addr_sent_us = cfs_now_us();
		r = chord__call_ask(c, &a->to.addr, NULL, &c->msg, chord__addr_wait_ms(c), lk_reply, k);
	}
	if (r < 0) {
		free(k);
		chord__lksm_send_failed(&l->sm, a->ask, r);
		return;
	}
	l->outstanding++;
}

static void run(struct chord__lookup *l, const struct chord__lk_act *a)
{
	chord_t *c = l->c;

	switch (a->type) {
	case CHORD__LKA_FIND:
	case CHORD__LKA_FWD:
	case CHORD__LKA_PING:
		send_ask(l, a);
		break;
	case CHORD__LKA_ALERT:
		chord__msg_init(c, NULL, CFS_MSG_ALERT, &a->to);
		c->msg.key = a->id;
		(void)chord_call(c, &a->to, &c->msg, c->cfg.probe_timeout_ms, ignore_reply, NULL);
		break;
	case CHORD__LKA_DROP:
		chord__table_drop_finger(c, &a->id);
		if (c->client)
			chord__client_forget(c, &a->id);
		else
			chord__learned_forget(&c->learned, &a->id, cfs_now_us());
		break;
	case CHORD__LKA_REMOVE:
		chord__table_remove(c, &a->id, cfs_now_us());
		if (!c->client)
			chord__learned_forget(&c->learned, &a->id, cfs_now_us());
		break;
	case CHORD__LKA_DEADLINE:
		l->deadline_us = cfs_now_us() + a->ms * 1000ull;
		arm(c);
		break;
	case CHORD__LKA_FINISH:
		finished(l);
		break;
	case CHORD__LKA_SUSPECT:
		c->lookup_checks_failed++;
		if (a->why == chord__lk_claims_preceding) {
			/* an honest node's first claim: it stays a contact */
			if (!chord__suspect_claim(c, &a->id, a->why, cfs_now_us()))
				break;
		} else {
			chord_suspect(c, &a->id, a->why);
		}
		if (c->client)
			chord__client_forget(c, &a->id);
		break;
	case CHORD__LKA_REFUSED:
		c->lookup_checks_failed++;
		if (c->client)
			chord__client_forget(c, &a->id);
		break;
	default:
		break;
	}
}

/* Carry out the machine's actions, in order. */
static void drive(struct chord__lookup *l)
{
	struct chord__lk_act a;

	while (chord__lk_pop(&l->sm.q, &a))
		run(l, &a);
	if (l->sm.state != CHORD__LK_RECURSIVE)
		l->deadline_us = 0; /* answered or fell back: no deadline to watch */
}

static void decode(int status, const struct cfs_msg *m, const struct cfs_addr *from,
                   struct chord__lk_reply *r)
{
	memset(r, 0, sizeof(*r));
	r->status = status;
	if (status < 0 || !m)
		return;
	r->has_from = m->has_from;
	r->from = (struct cfs_node){ .id = m->from_id, .vindex = m->from_vindex, .coord = m->coord };
	if (from)
		r->from.addr = *from;
	r->flags = m->flags;
	r->count = m->count;
	r->hops = m->hops;
	r->nodes = m->nodes;
	r->n = m->n_nodes;
}

static void lk_reply(void *arg, int status, const struct cfs_msg *m,
                     const struct cfs_rpc_result *res)
{
	struct lk_call k = *(struct lk_call *)arg;
	struct chord__lookup *l = k.l;
	struct chord__lk_reply r;

	free(arg);
	l->outstanding--;
	if (k.addr_sent_us)
		chord__addr_heard(l->c, status, cfs_now_us() - k.addr_sent_us);
	decode(status, m, res ? res->from : NULL, &r);
	chord__lksm_reply(&l->sm, k.ask, &r);
	drive(l);
	lookup_put(l);
}

/* ------------------------------------------------------------ the timer */

static void on_tick(uv_timer_t *t)
{
	chord_t *c = container_of(t, chord_t, lk_timer);
	uint64_t now = cfs_now_us();
	bool any = false;

	c->lk_timer_armed = false;
	run_finished(c);
	for (struct chord__lookup *l = c->lookups, *n; l; l = n) {
		n = l->next;
		if (!l->deadline_us)
			continue;
		if (now >= l->deadline_us) {
			l->deadline_us = 0;
			chord__lksm_deadline(&l->sm);
			drive(l);
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

void chord__lookup_cancel_all(chord_t *c)
{
	while (c->lookups) {
		struct chord__lookup *l = c->lookups;
		chord__lksm_cancel(&l->sm);
		drive(l);
		if (!l->ended) /* cannot happen: a live machine always finishes */
			unlink_lookup(c, l);
	}
	run_finished(c);
}

/* ------------------------------------------------------------ recursive, served */

void chord__lookup_handle_done(chord_t *c, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct chord__lk_reply d;
	struct chord__lookup *l;

	chord__msg_init(c, NULL, CFS_MSG_LOOKUP_DONE, NULL);
	chord__reply_simple(c, from, &c->msg);
	for (l = c->lookups; l; l = l->next)
		if (chord__lksm_awaits_done(&l->sm, req->lookup_id, &req->key))
			break;
	if (!l)
		return; /* late (we fell back) or forged */
	decode(0, req, &from->addr, &d);
	chord__lksm_done_msg(&l->sm, &d);
	drive(l);
}

static void fwd_ack(void *arg, int status, const struct cfs_msg *reply,
                    const struct cfs_rpc_result *res);

static void fwd_send(struct fwd *f, const struct chord__lk_act *a)
{
	chord_t *c = f->c;

	chord__msg_init(c, f->v, CFS_MSG_LOOKUP_FWD, &a->to);
	c->msg.key = f->sm.qry.key;
	c->msg.lookup_id = f->sm.qry.lookup_id;
	c->msg.node = f->sm.qry.origin;
	c->msg.hops = a->hops;
	c->msg.nsucc = a->nsucc;
	c->msg.flags = a->flags;
	f->ask = a->ask;
	int r = chord_call(c, &a->to, &c->msg, 0, fwd_ack, f);
	if (r < 0)
		chord__fwdsm_send_failed(&f->sm, a->ask, r);
}

/* A node of the previous protocol version refuses an answer that names
 * its sender after the first place; it gets the list cut there (a ring
 * shorter than the successor list wraps through the answering node). A
 * lookup's asker is known to take it when the address speaks version 5,
 * or when its request says so: its first call to us came at version 4,
 * before it knew we speak 5, and a cut answer would cost it a call to
 * the key's predecessor. */
static bool wraps_ok(uint32_t version, uint32_t flags)
{
	return version >= 5 || (flags & CFS_LOOKUP_F_WRAP_OK);
}

static uint32_t cut_for_older(const struct cfs_id *sender, const struct cfs_node *nodes, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++)
		if (cfs_id_eq(&nodes[i].id, sender))
			return i;
	return n;
}

/* Carry out a forwarding hop's actions; END frees it. */
static void fwd_drive(struct fwd *f)
{
	chord_t *c = f->c;
	struct chord__lk_act a;

	while (chord__lk_pop(&f->sm.q, &a)) {
		switch (a.type) {
		case CHORD__LKA_FWD_NEXT:
			fwd_send(f, &a);
			break;
		case CHORD__LKA_ANSWER:
			chord__msg_init(c, f->v, CFS_MSG_LOOKUP_DONE, &a.to);
			c->msg.key = f->sm.qry.key;
			c->msg.lookup_id = f->sm.qry.lookup_id;
			c->msg.hops = a.hops;
			c->msg.flags = a.flags;
			memcpy(c->msg.nodes, a.nodes, a.n * sizeof(a.nodes[0]));
			c->msg.n_nodes = a.n;
			if (!wraps_ok(cfs_transport_peer_version(c->tr, &a.to.addr), f->sm.qry.flags))
				c->msg.n_nodes = cut_for_older(&c->msg.from_id, a.nodes, a.n);
			(void)chord_call(c, &a.to, &c->msg, 0, ignore_reply, NULL);
			break;
		case CHORD__LKA_DROP:
			chord__table_drop_finger(c, &a.id);
			break;
		case CHORD__LKA_END:
			chord__fwdsm_release(&f->sm);
			free(f);
			return;
		default:
			break;
		}
	}
}

static void fwd_ack(void *arg, int status, const struct cfs_msg *reply,
                    const struct cfs_rpc_result *res)
{
	struct fwd *f = arg;

	chord__fwdsm_ack(&f->sm, f->ask, status);
	fwd_drive(f);
}

/* The served half of a step (find_next and lookup_fwd): clamp the count
 * asked for, consult the block hook, then the tables. */
static bool served_step(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req, bool wrap_ok,
                        struct cfs_node *out, uint32_t *n, uint32_t *ncand, uint32_t *nsucc,
                        bool *has)
{
	*nsucc = req->nsucc < 1 ? 1 : req->nsucc > CFS_MSG_MAX_NODES ? CFS_MSG_MAX_NODES : req->nsucc;
	*has = (req->flags & CFS_LOOKUP_F_CHECK_BLOCK) && c->has_block &&
	       c->has_block(c->has_block_arg, &req->key);
	return chord__table_step(c, v, &req->key, *nsucc, (req->flags & CFS_LOOKUP_F_TO_PRED) != 0, wrap_ok,
	                         false, out, n, ncand, *nsucc > CHORD__LK_NCAND ? *nsucc : CHORD__LK_NCAND,
	                         cfs_now_us());
}

/* Was this request taken already? */
static bool fwd_seen(const chord_t *c, uint64_t reqid)
{
	for (uint32_t i = 0; i < CHORD__FWD_SEEN; i++)
		if (c->fwd_seen[i] == reqid)
			return true;
	return false;
}

/* It is being taken now: only queries that pass the checks are noted, so
 * junk cannot push real ones out. */
static void fwd_note(chord_t *c, uint64_t reqid)
{
	c->fwd_seen[c->fwd_seen_next] = reqid;
	c->fwd_seen_next = (c->fwd_seen_next + 1) % CHORD__FWD_SEEN;
}

/* One forwarding hop (DHash++ Fig. 10): acknowledge, then let the
 * machine answer the originator or pass the query on. */
void chord__lookup_handle_fwd(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                       const struct cfs_reply_to *from)
{
	const struct chord__lk_env env = { &lk_ops, c };
	struct chord__fwd_query q = { .key = req->key, .lookup_id = req->lookup_id,
	                              .origin = req->node, .hops = req->hops, .flags = req->flags };
	struct cfs_node out[CFS_MSG_MAX_NODES];
	uint32_t n = 0, ncand = 0;
	bool done, has;

	chord__msg_init(c, v, CFS_MSG_LOOKUP_FWD, NULL);
	chord__reply_simple(c, from, &c->msg);
	if (from->reqid && fwd_seen(c, from->reqid)) {
		c->fwd_copies++; /* our ack was lost or late: the chain runs already */
		return;
	}
	c->fwd_handled++;
	if (!chord__fwd_acceptable(&env, &q)) {
		c->hostile_dropped++;
		return;
	}
	fwd_note(c, from->reqid);
	/* the answer goes to the originator: wrapped only if it takes it */
	uint32_t origin_version = cfs_transport_peer_version(c->tr, &req->node.addr);
	done = served_step(c, v, req, wraps_ok(origin_version, req->flags), out, &n, &ncand, &q.nsucc, &has);
	struct fwd *f = xcalloc(1, sizeof(*f));
	f->c = c;
	f->v = v;
	chord__fwdsm_start(&f->sm, &env, &v->self, &q, done, has, out, n, ncand);
	fwd_drive(f);
}

/* ------------------------------------------------------------ entry points */

void chord__lookup_handle_find_next(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                             const struct cfs_reply_to *from)
{
	struct cfs_node out[CFS_MSG_MAX_NODES];
	uint32_t n = 0, ncand, nsucc;
	bool done, has;

	c->find_next_handled++;
	if (!req->has_to)
		v = chord__table_closest_local(c, &req->key); /* a bootstrap query: best local start */
	if (!v->joined) {
		/* Our tables mean nothing yet: do not lead a joiner astray. */
		(void)cfs_transport_reply_error(c->tr, from, -EAGAIN);
		return;
	}
	bool wrap_ok = wraps_ok(from->version, req->flags);
	done = served_step(c, v, req, wrap_ok, out, &n, &ncand, &nsucc, &has);
	chord__msg_init(c, v, CFS_MSG_FIND_NEXT, NULL);
	c->msg.flags = (done ? CFS_LOOKUP_F_DONE : 0) | (has ? CFS_LOOKUP_F_HAS_BLOCK : 0);
	if (!done && ncand < n) {
		c->msg.flags |= CFS_LOOKUP_F_PARTIAL;
		c->msg.count = ncand;
	}
	memcpy(c->msg.nodes, out, n * sizeof(out[0]));
	c->msg.n_nodes = n;
	if (!wrap_ok)
		c->msg.n_nodes = cut_for_older(from->has_to ? &from->to_id : &c->msg.from_id, out,
		                               cut_for_older(&c->msg.from_id, out, n));
	chord__reply_simple(c, from, &c->msg);
}

int chord__lookup_start(chord_t *c, struct chord__vnode *from, const struct cfs_addr *first,
                 const struct cfs_id *key, const struct chord_lookup_opts *o,
                 chord_lookup_cb cb, void *arg)
{
	const struct chord__lk_env env = { &lk_ops, c };
	struct chord__lookup *l;
	uint64_t id = 0;

	if (c->freeing || c->leaving)
		return -ECANCELED;
	if (CHORD_MODE_ALGO(o->mode) == CHORD_RECURSIVE)
		randombytes_buf(&id, sizeof(id));
	l = xcalloc(1, sizeof(*l));
	l->c = c;
	l->cb = cb;
	l->arg = arg;
	l->started_us = cfs_now_us();
	chord__lksm_init(&l->sm, &env, key, o, id);
	l->next = c->lookups;
	c->lookups = l;
	if (first) {
		chord__lksm_start_addr(&l->sm, first);
	} else if (c->client) {
		struct cfs_node cand[CHORD__LK_NCAND];
		uint32_t n = chord__client_candidates(c, key, cand, CHORD__LK_NCAND);
		chord__lksm_start_client(&l->sm, cand, n);
	} else {
		chord__lksm_start(&l->sm);
	}
	drive(l);
	return 0;
}

int chord__lookup_answered(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                            const struct chord_lookup_result *res, chord_lookup_cb cb, void *arg)
{
	const struct chord__lk_env env = { &lk_ops, c };
	struct chord__lookup *l;

	if (c->freeing || c->leaving)
		return -ECANCELED;
	l = xcalloc(1, sizeof(*l));
	l->c = c;
	l->cb = cb;
	l->arg = arg;
	l->started_us = cfs_now_us();
	chord__lksm_init(&l->sm, &env, key, o, 0);
	l->sm.res = *res;
	l->next = c->lookups;
	c->lookups = l;
	finished(l);
	return 0;
}

/*
 * A member's guess at a key's successors, with no message: the learned
 * nodes just after the key, when our own tables do not cover it. With
 * N nodes a mean spacing 1/N apart, a node within g spacings after the
 * key is among its k successors unless k or more nodes we do not know lie
 * before it: for k = 6, one time in 12 at 3 spacings and 38 in 100 at 5,
 * far less near the key, and the get asks the nearest of them by delay
 * first, wherever it lies in the span. So a get skips the lookup's round
 * trip (a one-hop lookup whose state is the learned table); a guess that
 * misses costs one fetch and then the lookup the get would have made; the
 * nodes asked answer "not here" and are no suspects (dhash/get_sm.c).
 * Unlike a next hop, a guess need not wait out the learned table's
 * quarantine: it is a fetch whose block proves itself, not an answer we
 * must trust (measured on 1,000 testbed nodes: 40 % of the readers' gets
 * guessed without the quarantine, 23 % with it).
 */
bool chord__lookup_guess(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                         struct chord_lookup_result *res, uint64_t now)
{
	if (!(o->flags & CHORD_LOOKUP_F_REMEMBERED) || c->cfg.guess_spacings == 0 || c->learned.n == 0)
		return false;
	if ((o->flags & CFS_LOOKUP_F_CHECK_BLOCK) && c->has_block && c->has_block(c->has_block_arg, key))
		return false; /* the lookup's first step finds our own copy */
	for (uint32_t i = 0; i < c->nv; i++) {
		const struct chord__vnode *v = &c->v[i];
		if (v->nsuccs == 0 || !v->pred.valid ||
		    cfs_id_in_oc(key, &v->pred.n.id, &v->succ[v->nsuccs - 1].n.id))
			return false; /* our tables answer it, with no message either */
	}
	double n = chord_estimate_n(c);
	if (n < 2)
		return false;
	struct cfs_node near[CFS_MSG_MAX_NODES];
	uint32_t want = o->nsucc < 1 ? 1 : o->nsucc > CFS_MSG_MAX_NODES ? CFS_MSG_MAX_NODES : o->nsucc;
	uint32_t got = chord__learned_following(
		&c->learned, key, c->cfg.guess_spacings / n, UINT64_MAX,
		now > CHORD_LEARNED_FRESH_US ? now - CHORD_LEARNED_FRESH_US : 0, true, near, want);
	res->n = 0;
	for (uint32_t i = 0; i < got; i++)
		if (!chord__local(c, &near[i].id) && !chord__suspect_is(c, &near[i].id, now))
			res->succ[res->n++] = near[i];
	res->checked = true;
	return res->n > 0;
}

int chord_lookup(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                 chord_lookup_cb cb, void *arg)
{
	bool joined = false;
	struct chord_lookup_result res = { 0 };

	if (c->client)
		return chord__client_lookup(c, key, o, cb, arg);
	for (uint32_t i = 0; i < c->nv && !joined; i++)
		joined = c->v[i].joined;
	/* Still joining: our tables know nothing of the ring yet (an empty
	 * successor list would name us alone), so ask it through the
	 * address we join through. */
	if (!joined && !c->founded && c->nboot + c->npeers > 0)
		return chord__lookup_start(c, &c->v[0], chord__join_target(c), key, o, cb, arg);
	if (chord__lookup_guess(c, key, o, &res, cfs_now_us()) && chord__lookup_answered(c, key, o, &res, cb, arg) == 0) {
		c->lookups_remembered++;
		return 0;
	}
	return chord__lookup_start(c, &c->v[0], NULL, key, o, cb, arg);
}
