/*
 * The DHash client: get, put, have and refresh over a chord_t.
 *
 * What each operation does, step by step, is decided by its state machine
 * (get_sm.c, put_sm.c; client_sm.h says how they talk). This file is
 * their driver: it feeds them events (a lookup's result, a reply, a
 * timeout, the hedge timer) and carries out the actions they queue
 * (lookups through chord_lookup, FETCH / STORE / HAVE / REFRESH through
 * chord_call, the hedge timer, the callbacks), and it keeps what outlives
 * one operation: the nonces servers gave this client and the counters.
 *
 * An operation is in the client's list from its start until its callback
 * has run; it is freed in one place (op_maybe_free) once it is finished,
 * no FETCH of it is still out and its hedge timer is closed. A finished
 * operation never touches the client again: dhash_client_free may have
 * released it by then.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dhash/client_sm.h"

/* The nonces servers gave this client (quotas, CFS 5.4), by address. */
#define NONCES 64
struct server_nonce {
	struct cfs_addr addr;
	uint8_t nonce[CFS_NONCE_BYTES];
};

struct dhash_op;

struct dhash_client {
	chord_t *chord;
	struct dhash_config cfg;
	struct cfs_msg msg;       /* large: not on the stack */
	struct dhash_op *ops;
	uint32_t holds;           /* dhash__client_hold: others' operations in flight */
	bool closing;
	struct dhash_client_stats st;
	double push_tokens;        /* cache_push_bytes_per_s's bucket */
	double hedge_tokens;       /* automatic hedges allowed now (DHASH_HEDGE_SHARE) */
	uint64_t push_refill_us;
	struct server_nonce nonces[NONCES];
	uint32_t nnonces, nonce_next;
	struct dhash__busy busy;  /* FETCHes out per server */
};

enum op_type { OP_GET, OP_PUT, OP_PROBE };

struct dhash_op {
	dhash_client_t *d;
	struct dhash_op *next;
	enum op_type type;
	struct cfs_id key;
	void *arg;
	uint64_t started_us;
	bool finished;            /* its callback ran; it is out of d->ops */
	union {
		struct {
			struct dhash__get sm;
			dhash_get_cb cb;
			dhash_get_cb early; /* dhash_get_root_early's, until it ran */
			uv_timer_t *hedge; /* hedge_ms's timer, or NULL */
		} get;
		struct {
			struct dhash__put sm;
			dhash_put_cb cb;
			uint32_t kind;
			uint8_t *data;
			size_t len;
		} put;
		struct {
			struct dhash__probe sm;
			dhash_key_cb cb;
		} probe;
	};
};

struct fetch_call {
	struct dhash_op *o;
	uint32_t ci;              /* the candidate asked */
	bool hedge;               /* sent because an earlier one was slow */
	struct cfs_addr to;       /* counted in busy while it is out */
};

static void op_run(struct dhash_op *o);

static void client_maybe_free(dhash_client_t *d)
{
	if (d->closing && !d->ops && !d->holds)
		free(d);
}

static void op_unlink(struct dhash_op *o)
{
	for (struct dhash_op **pp = &o->d->ops; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			return;
		}
}

/* The one place an operation is freed. */
static void op_maybe_free(struct dhash_op *o)
{
	if (!o->finished)
		return;
	switch (o->type) {
	case OP_GET:
		if (o->get.sm.inflight > 0 || o->get.hedge)
			return;
		dhash__get_fini(&o->get.sm);
		break;
	case OP_PUT:
		if (o->put.sm.inflight > 0)
			return; /* a STORE or HAVE still out */
		dhash__put_fini(&o->put.sm);
		free(o->put.data);
		break;
	case OP_PROBE:
		if (o->probe.sm.waiting > 0)
			return; /* a HAVE still out */
		dhash__probe_fini(&o->probe.sm);
		break;
	}
	free(o);
}

/* An RPC's reply as the machines read it (client.c, refresh.c, locate.c);
 * its fields only when status is 0. */
struct dhash__reply dhash__reply_of(int status, const struct cfs_msg *m,
                                    const struct cfs_rpc_result *res)
{
	struct dhash__reply r = { .status = status, .from = res ? res->from : NULL };

	if (r.status == 0 && m) {
		r.kind = m->kind;
		r.flags = m->flags;
		r.data = m->data.p;
		r.len = m->data.len;
		r.lease_until = m->lease_until;
		r.nonce = m->nonce;
	}
	return r;
}

/* A reply to an op: -ECANCELED for all once the client is closing. */
static struct dhash__reply reply_of(const struct dhash_op *o, int status, const struct cfs_msg *m,
                                    const struct cfs_rpc_result *res)
{
	return dhash__reply_of(!o->finished && o->d->closing ? -ECANCELED : status, m, res);
}

/* ------------------------------------------------------------ lookups */

static void lookup_done(void *arg, const struct chord_lookup_result *r)
{
	static const struct chord_lookup_result cancelled = { .status = -ECANCELED };
	struct dhash_op *o = arg;
	dhash_client_t *d = o->d;
	uint64_t rtt[CFS_MSG_MAX_NODES];
	uint32_t busy[CFS_MSG_MAX_NODES];

	if (d->closing)
		r = &cancelled;
	switch (o->type) {
	case OP_GET:
		for (uint32_t i = 0; r->status == 0 && i < r->n; i++) {
			rtt[i] = chord_rtt_us(d->chord, &r->succ[i]);
			busy[i] = dhash__busy_of(&d->busy, &r->succ[i].addr);
		}
		dhash__get_on_lookup_busy(&o->get.sm, r, rtt, busy);
		break;
	case OP_PUT:
		dhash__put_on_lookup(&o->put.sm, r);
		break;
	case OP_PROBE:
		dhash__probe_on_lookup(&o->probe.sm, r);
		break;
	}
	op_run(o);
}

static int op_lookup(struct dhash_op *o, const struct dhash__act *a)
{
	struct chord_lookup_opts lo = { .mode = o->d->cfg.lookup_mode, .nsucc = a->nsucc,
	                                .flags = a->flags };

	/* A get's first lookup of a block that verifies by its content (not a
	 * root, whose replicas vote) may be answered from what earlier
	 * lookups were told; a stale guess ends in the second lookup. */
	if (o->type == OP_GET && !o->get.sm.all_first && (a->flags & CFS_LOOKUP_F_CHECK_BLOCK))
		lo.flags |= CHORD_LOOKUP_F_REMEMBERED;

	return chord_lookup(o->d->chord, &o->key, &lo, lookup_done, o);
}

/* ------------------------------------------------------------ get */

static void fetch_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct fetch_call *fc = arg;
	struct dhash_op *o = fc->o;
	struct dhash__reply rep = reply_of(o, status, reply, res);
	uint64_t seq;

	if (o->get.early && !o->finished && rep.status == 0 && rep.kind == DHASH_KIND_ROOT &&
	    dhash_verify(rep.kind, &o->key, rep.data, rep.len, &seq) == 0) {
		dhash_get_cb early = o->get.early;
		struct dhash_get_result r = { .status = 0, .kind = rep.kind, .data = rep.data,
		                              .len = rep.len, .rpcs = o->get.sm.rpcs,
		                              .latency_us = cfs_now_us() - o->started_us,
		                              .lookup_us = o->get.sm.lookup_us };
		o->get.early = NULL;
		early(o->arg, &r);
	}
	dhash__busy_drop(&o->d->busy, &fc->to);
	dhash__get_on_fetch(&o->get.sm, fc->ci, fc->hedge, &rep);
	free(fc);
	op_run(o);
}

static int fetch_send(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	const struct cfs_node *to = &o->get.sm.cand[a->i];
	struct fetch_call *fc = xmalloc(sizeof(*fc));
	int r;

	cfs_msg_init(&d->msg, CFS_MSG_FETCH);
	d->msg.key = o->key;
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	*fc = (struct fetch_call){ o, a->i, a->hedge, to->addr };
	d->hedge_tokens += DHASH_HEDGE_SHARE;
	if (d->hedge_tokens > DHASH_HEDGE_BURST)
		d->hedge_tokens = DHASH_HEDGE_BURST;
	dhash__busy_add(&d->busy, &to->addr);
	if ((r = dhash__client_call(d, to, &d->msg, a->timeout_ms, fetch_reply, fc)) < 0) {
		dhash__busy_drop(&d->busy, &to->addr);
		free(fc);
	}
	return r;
}

static void push_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	(void)arg; /* a cache copy is best effort: nothing waits for it */
}

/* A token bucket of a second's worth: may a copy of len bytes go now? */
static bool push_allowed(dhash_client_t *d, size_t len)
{
	uint64_t rate = d->cfg.cache_push_bytes_per_s, now = cfs_now_us();

	if (!rate)
		return true;
	d->push_tokens += (double)rate * (double)(now - d->push_refill_us) / 1e6;
	d->push_refill_us = now;
	if (d->push_tokens > (double)rate)
		d->push_tokens = (double)rate;
	if (d->push_tokens < (double)len)
		return false;
	d->push_tokens -= (double)len;
	return true;
}

static void cache_push(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	const struct cfs_node *to = &o->get.sm.path[a->i];

	if (!push_allowed(d, a->len)) {
		d->st.cache_pushes_skipped++;
		return;
	}
	cfs_msg_init(&d->msg, CFS_MSG_STORE);
	d->msg.kind = DHASH_KIND_CHASH;
	d->msg.key = o->key;
	d->msg.flags = DHASH_STORE_F_CACHE;
	d->msg.data = (struct cfs_bytes){ a->data, a->len };
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	if (chord_call_low(d->chord, to, &d->msg, DHASH_STORE_TIMEOUT_MS, push_reply, NULL) == 0)
		d->st.cache_pushes++;
}

static void hedge_fired(uv_timer_t *t)
{
	struct dhash_op *o = t->data;
	dhash_client_t *d = o->d;

	if (!dhash__get_can_hedge(&o->get.sm))
		return; /* nobody left to hedge to: a stale timer, no token spent */
	if (o->get.sm.hedge_ms == DHASH_HEDGE_AUTO) {
		if (d->hedge_tokens < 1) {
			d->st.hedges_skipped++;
			return;
		}
		d->hedge_tokens -= 1;
	}
	dhash__get_on_hedge(&o->get.sm);
	op_run(o);
}

/* The hedge timer behind a FETCH to cand[ci]: hedge_ms, or automatic. */
static void hedge_arm(struct dhash_op *o, uint32_t ms, uint32_t ci)
{
	if (ms == DHASH_HEDGE_AUTO)
		ms = dhash_hedge_auto_ms(chord_rtt_us(o->d->chord, &o->get.sm.cand[ci]));
	if (!o->get.hedge) {
		o->get.hedge = xmalloc(sizeof(*o->get.hedge));
		uv_timer_init(cfs_transport_loop(chord_transport(o->d->chord)), o->get.hedge);
		o->get.hedge->data = o;
	}
	uv_timer_start(o->get.hedge, hedge_fired, ms, 0);
}

static void hedge_closed(uv_handle_t *h)
{
	struct dhash_op *o = h->data;

	free(h);
	o->get.hedge = NULL;
	op_maybe_free(o);
}

static void get_finish(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	const struct dhash__get *g = &o->get.sm;
	struct dhash_get_result r = {
		.status = d->closing ? -ECANCELED : a->status, .kind = a->kind, .data = a->data,
		.len = a->len, .rpcs = g->rpcs, .timeouts = g->timeouts, .bad_replies = g->bad,
		.latency_us = cfs_now_us() - o->started_us, .lookup_us = g->lookup_us,
	};

	d->st.gets++;
	d->st.gets_failed += a->status < 0;
	d->st.bad_replies += g->bad;
	d->st.get_rpcs += g->rpcs;
	d->st.fetch_timeouts += g->fetch_timeouts;
	d->st.relookups += g->relookups;
	d->st.hedges += g->hedges;
	d->st.hedge_wins += g->hedge_wins;
	cfs_hist_add(&d->st.get_us, r.latency_us);
	o->get.cb(o->arg, &r);
	if (o->get.hedge && !uv_is_closing((uv_handle_t *)o->get.hedge))
		uv_close((uv_handle_t *)o->get.hedge, hedge_closed);
}

/* ------------------------------------------------------------ put */

static struct server_nonce *nonce_find(dhash_client_t *d, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < d->nnonces; i++)
		if (cfs_addr_eq(&d->nonces[i].addr, a))
			return &d->nonces[i];
	return NULL;
}

static void nonce_keep(dhash_client_t *d, const struct cfs_addr *a, const uint8_t *nonce)
{
	struct server_nonce *n = nonce_find(d, a);

	if (!n) {
		n = &d->nonces[d->nnonces < NONCES ? d->nnonces++ : d->nonce_next++ % NONCES];
		n->addr = *a;
	}
	memcpy(n->nonce, nonce, CFS_NONCE_BYTES);
}

/* One STORE or HAVE of a put, to cand[ci]: several may be out at once. */
struct put_call {
	struct dhash_op *o;
	uint32_t ci;
	bool have;
};

static void put_reply(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	struct put_call *pc = arg;
	struct dhash_op *o = pc->o;
	struct dhash__reply rep = reply_of(o, status, reply, res);

	if (pc->have)
		dhash__put_on_have(&o->put.sm, pc->ci, &rep);
	else
		dhash__put_on_store(&o->put.sm, pc->ci, &rep);
	free(pc);
	op_run(o);
}

void dhash__client_nonce(dhash_client_t *d, const struct cfs_addr *a, uint8_t out[CFS_NONCE_BYTES])
{
	const struct server_nonce *sn = nonce_find(d, a);

	memset(out, 0, CFS_NONCE_BYTES);
	if (sn)
		memcpy(out, sn->nonce, CFS_NONCE_BYTES);
}

void dhash__client_keep_nonce(dhash_client_t *d, const struct cfs_addr *a, const uint8_t *nonce)
{
	nonce_keep(d, a, nonce);
}

static int put_call(struct dhash_op *o, const struct dhash__act *a, uint32_t timeout_ms)
{
	struct put_call *pc = xmalloc(sizeof(*pc));
	int r;

	*pc = (struct put_call){ o, a->i, a->type == DHASH_ACT_HAVE };
	if ((r = dhash__client_call(o->d, &o->put.sm.cand[a->i], &o->d->msg, timeout_ms, put_reply, pc)) < 0)
		free(pc);
	return r;
}

static int store_send(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	const struct cfs_node *to = &o->put.sm.cand[a->i];
	const struct server_nonce *sn = nonce_find(d, &to->addr);

	cfs_msg_init(&d->msg, CFS_MSG_STORE);
	d->msg.kind = o->put.kind;
	d->msg.key = o->key;
	d->msg.lease_until = o->put.sm.lease_until;
	d->msg.flags = DHASH_STORE_F_PRIMARY;
	if (sn)
		memcpy(d->msg.nonce, sn->nonce, CFS_NONCE_BYTES);
	d->msg.data = (struct cfs_bytes){ o->put.data, o->put.len };
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	return put_call(o, a, a->timeout_ms ? a->timeout_ms : DHASH_STORE_TIMEOUT_MS);
}

/* A put's HAVE: does cand[i] hold the block now (the quorum)? */
static int put_have_send(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	const struct cfs_node *to = &o->put.sm.cand[a->i];

	cfs_msg_init(&d->msg, CFS_MSG_HAVE);
	d->msg.keys = &o->key;
	d->msg.n_keys = 1;
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	return put_call(o, a, a->timeout_ms);
}

/* ------------------------------------------------------------ have, refresh */

static void probe_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct dhash_op *o = arg;
	struct dhash__reply rep = reply_of(o, status, reply, res);

	dhash__probe_on_reply(&o->probe.sm, &rep);
	op_run(o);
}

static int probe_send(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	const struct cfs_node *to = &o->probe.sm.cand[a->i];

	cfs_msg_init(&d->msg, a->type == DHASH_ACT_REFRESH ? CFS_MSG_REFRESH : CFS_MSG_HAVE);
	d->msg.keys = &o->key;
	d->msg.n_keys = 1;
	d->msg.lease_until = o->probe.sm.lease_until;
	dhash__client_nonce(d, &to->addr, d->msg.nonce); /* a REFRESH is charged like a put */
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	return dhash__client_call(d, to, &d->msg, a->timeout_ms, probe_reply, o);
}

/* ------------------------------------------------------------ the driver */

static void op_finish(struct dhash_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	int status = d->closing ? -ECANCELED : a->status;

	o->finished = true;
	switch (o->type) {
	case OP_GET:
		get_finish(o, a);
		break;
	case OP_PUT:
		d->st.puts++;
		d->st.puts_failed += a->status < 0;
		d->st.puts_moved += o->put.sm.moved;
		o->put.cb(o->arg, status, &o->key, a->status == 0 ? a->lease : 0);
		break;
	case OP_PROBE:
		o->probe.cb(o->arg, status, &o->key, a->found, a->lease);
		break;
	}
	/* Unlinked only now: a callback that frees the client must not
	 * release it under our feet. */
	op_unlink(o);
	client_maybe_free(d);
}

static bool op_next(struct dhash_op *o, struct dhash__act *a)
{
	switch (o->type) {
	case OP_GET: return dhash__get_next(&o->get.sm, a);
	case OP_PUT: return dhash__put_next(&o->put.sm, a);
	case OP_PROBE: return dhash__probe_next(&o->probe.sm, a);
	}
	return false;
}

/* A send the transport refused at once goes back to the machine before
 * the next action is taken (client_sm.h). */
static void send_failed(struct dhash_op *o, const struct dhash__act *a, int r)
{
	if (r == 0)
		return;
	if (o->type == OP_GET && a->type == DHASH_ACT_LOOKUP)
		dhash__get_on_lookup_failed(&o->get.sm, r);
	else if (o->type == OP_GET)
		dhash__get_on_send_failed(&o->get.sm, a->i, a->hedge);
	else if (o->type == OP_PUT)
		dhash__put_on_send_failed(&o->put.sm, a->i, a->type);
	else
		dhash__probe_on_send_failed(&o->probe.sm);
}

/* A server the machine caught lying: a get's holder that did not serve
 * the block it claimed, a put's server that acknowledged a STORE whose
 * copies nobody holds. Lookups route around it for a while. */
static void op_suspect(struct dhash_op *o, const struct dhash__act *a)
{
	if (o->type == OP_GET)
		chord_suspect(o->d->chord, &o->get.sm.cand[a->i].id, "claimed a block it did not serve");
	else if (o->type == OP_PUT)
		chord_suspect(o->d->chord, &o->put.sm.cand[a->i].id, "acknowledged a STORE it dropped");
}

/* Carry out what o's machine asks for, in order, then free o if it is
 * done with (o may be gone on return). FINISH is always the last action. */
static void op_run(struct dhash_op *o)
{
	struct dhash__act a;

	while (!o->finished && op_next(o, &a)) {
		switch (a.type) {
		case DHASH_ACT_LOOKUP: send_failed(o, &a, op_lookup(o, &a)); break;
		case DHASH_ACT_FETCH: send_failed(o, &a, fetch_send(o, &a)); break;
		case DHASH_ACT_STORE: send_failed(o, &a, store_send(o, &a)); break;
		case DHASH_ACT_HAVE:
			send_failed(o, &a, o->type == OP_PUT ? put_have_send(o, &a) : probe_send(o, &a));
			break;
		case DHASH_ACT_REFRESH: send_failed(o, &a, probe_send(o, &a)); break;
		case DHASH_ACT_KEEP_NONCE: nonce_keep(o->d, &a.addr, a.nonce); break;
		case DHASH_ACT_CACHE_PUSH: cache_push(o, &a); break;
		case DHASH_ACT_ARM_HEDGE: hedge_arm(o, a.timeout_ms, a.i); break;
		case DHASH_ACT_STOP_HEDGE:
			if (o->get.hedge)
				uv_timer_stop(o->get.hedge);
			break;
		case DHASH_ACT_FINISH: op_finish(o, &a); break;
		case DHASH_ACT_SUSPECT: op_suspect(o, &a); break;
		}
	}
	op_maybe_free(o);
}

static struct dhash_op *op_new(dhash_client_t *d, enum op_type type, const struct cfs_id *key, void *arg)
{
	struct dhash_op *o = xcalloc(1, sizeof(*o));

	o->d = d;
	o->type = type;
	o->key = *key;
	o->arg = arg;
	o->started_us = cfs_now_us();
	o->next = d->ops;
	d->ops = o;
	return o;
}

/* The machine's first action, the lookup: when it cannot start, the
 * operation is dropped with no callback and the caller gets the error. */
static int op_start(struct dhash_op *o)
{
	struct dhash__act a;
	int r;

	if (!op_next(o, &a) || a.type != DHASH_ACT_LOOKUP) {
		r = -EINVAL; /* not reached: every machine starts with its lookup */
	} else if ((r = op_lookup(o, &a)) == 0) {
		return 0;
	}
	op_unlink(o);
	o->finished = true;
	op_maybe_free(o);
	return r;
}

static int get_start(dhash_client_t *d, const struct cfs_id *key, bool all_first,
                     dhash_get_cb early, dhash_get_cb cb, void *arg)
{
	if (d->closing)
		return -ECANCELED;
	struct dhash_op *o = op_new(d, OP_GET, key, arg);
	o->get.cb = cb;
	o->get.early = early;
	dhash__get_init(&o->get.sm, key, &d->cfg);
	o->get.sm.all_first = all_first;
	return op_start(o);
}

int dhash_get(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	return get_start(d, key, false, NULL, cb, arg);
}

int dhash_get_root(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	return get_start(d, key, true, NULL, cb, arg);
}

int dhash_get_root_early(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb early,
                         dhash_get_cb cb, void *arg)
{
	return get_start(d, key, true, early, cb, arg);
}

/* Distinct addresses among this process and its first successors: a put or have needs a majority of at least that many of the key's k
 * servers, whatever a lookup answer names. A plain client counts the
 * addresses of the contacts it learned. */
static uint32_t known_servers(const dhash_client_t *d)
{
	const struct cfs_node *succ[CHORD_SUCC_MAX], *seen[CHORD_SUCC_MAX + 1];
	uint32_t n = 0, ns;

	if (chord_client_contacts(d->chord) > 0) { /* a plain client */
		n = chord_client_addresses(d->chord);
		return n < d->cfg.replicas ? n : d->cfg.replicas;
	}
	if (chord_vnode_count(d->chord) == 0 || !chord_vnode_joined(d->chord, 0))
		return 1;
	/* We are one of a key's servers only where our list is known to hold
	 * the whole ring (lookups then answer through us); a small ring still
	 * forming answers without us, and counting us would ask for one
	 * confirmation more than its answers can name. */
	if (chord_ring_addresses(d->chord) > 0)
		seen[n++] = chord_vnode_self(d->chord, 0);
	ns = chord_vnode_succs(d->chord, 0, succ);
	for (uint32_t i = 0; i < ns && n < d->cfg.replicas; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_same_ip(&seen[j]->addr, &succ[i]->addr);
		if (!dup)
			seen[n++] = succ[i];
	}
	return n ? n : 1;
}

int dhash_put(dhash_client_t *d, uint32_t kind, const uint8_t *p, size_t len,
              uint64_t lease_until, dhash_put_cb cb, void *arg)
{
	struct cfs_id key;
	int r;

	if (d->closing)
		return -ECANCELED;
	if (len > CFS_BLOCK_MAX)
		return -EMSGSIZE;
	if ((r = dhash_block_key(kind, p, len, &key)) < 0)
		return r;
	struct dhash_op *o = op_new(d, OP_PUT, &key, arg);
	o->put.cb = cb;
	o->put.kind = kind;
	o->put.data = xmalloc(len ? len : 1);
	memcpy(o->put.data, p, len);
	o->put.len = len;
	dhash__put_init(&o->put.sm, d->cfg.replicas,
	                lease_until ? lease_until : cfs_wall_s() + d->cfg.lease_s);
	o->put.sm.store_all = kind == DHASH_KIND_ROOT;
	o->put.sm.min_servers = known_servers(d);
	return op_start(o);
}

static int probe_start(dhash_client_t *d, bool refresh, const struct cfs_id *key,
                       uint64_t lease_until, dhash_key_cb cb, void *arg)
{
	if (d->closing)
		return -ECANCELED;
	struct dhash_op *o = op_new(d, OP_PROBE, key, arg);
	o->probe.cb = cb;
	dhash__probe_init(&o->probe.sm, refresh, d->cfg.replicas, lease_until);
	o->probe.sm.min_servers = known_servers(d);
	return op_start(o);
}

int dhash_have(dhash_client_t *d, const struct cfs_id *key, dhash_key_cb cb, void *arg)
{
	return probe_start(d, false, key, 0, cb, arg);
}

int dhash_refresh(dhash_client_t *d, const struct cfs_id *key, uint64_t lease_until,
                  dhash_key_cb cb, void *arg)
{
	if (!lease_until)
		lease_until = cfs_wall_s() + d->cfg.lease_s;
	return probe_start(d, true, key, lease_until, cb, arg);
}

int dhash_client_new(chord_t *c, const struct dhash_config *cfg, dhash_client_t **ret)
{
	if (cfg->replicas < 1 || cfg->replicas > CFS_MSG_MAX_NODES)
		return -EINVAL;
	dhash_client_t *d = xcalloc(1, sizeof(*d));
	d->chord = c;
	d->cfg = *cfg;
	d->hedge_tokens = DHASH_HEDGE_BURST;
	*ret = d;
	return 0;
}

const struct dhash_client_stats *dhash_client_stats(const dhash_client_t *d)
{
	return &d->st;
}

void dhash_client_free(dhash_client_t *d)
{
	if (!d)
		return;
	d->closing = true;
	client_maybe_free(d);
}

struct dhash_client_stats *dhash__client_stats_mut(dhash_client_t *d)
{
	return &d->st;
}

chord_t *dhash__client_chord(const dhash_client_t *d)
{
	return d->chord;
}

uint32_t dhash__client_replicas(const dhash_client_t *d)
{
	return d->cfg.replicas;
}

uint32_t dhash__client_mode(const dhash_client_t *d)
{
	return d->cfg.lookup_mode;
}

int dhash__client_call(dhash_client_t *d, const struct cfs_node *to, struct cfs_msg *m,
                       uint32_t timeout_ms, cfs_reply_cb cb, void *arg)
{
	return (d->cfg.background ? chord_call_low : chord_call)(d->chord, to, m, timeout_ms, cb, arg);
}

bool dhash__client_closing(const dhash_client_t *d)
{
	return d->closing;
}

void dhash__client_hold(dhash_client_t *d)
{
	d->holds++;
}

void dhash__client_release(dhash_client_t *d)
{
	d->holds--;
	client_maybe_free(d);
}

uint64_t dhash__client_lease(const dhash_client_t *d)
{
	return d->cfg.lease_s;
}
