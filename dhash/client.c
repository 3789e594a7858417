/*
 * The DHash client: get and put over a chord_t.
 *
 * get: look the key up for its k successors and a few spares (a hop holding
 * the block, when the lookup found one, goes first), order the k by
 * predicted latency, FETCH from the nearest, and on a timeout, a miss or
 * bytes that do not verify try the next (DHash++ 5.2.3); the spares, for
 * lists gone stale after failures, come last, and a replica that timed out
 * gets one more try with a longer timeout at the very end; when all of
 * that fails and some were silent, the key is looked up once more (the
 * timeouts have taken the dead out of the tables by then). Only verified
 * bytes are returned. With hedge_ms (OpenDHT's answer to slow nodes), a
 * FETCH unanswered after hedge_ms is not waited on alone: the next
 * candidate is asked too, and the first verified answer wins.
 *
 * A signed root is different: replicas may hold older versions (a server
 * that was away during a republish), so the first root that verifies is
 * not the answer. Once a FETCH returns a root, every other candidate is
 * asked at once, and the get returns the highest sequence among the
 * answers that come within their timeouts.
 *
 * put: compute the key, look up its successors, STORE to the first with
 * DHASH_STORE_F_PRIMARY (it replicates); if that one does not answer, the
 * next successor takes the block. A refusal (a bad block, a stale root, a
 * full disk) ends the put with that error: another server would refuse it
 * for the same reason, or should not be asked to take it instead.
 *
 * have: look up the key's successor and ask it (HAVE) whether it stores the
 * block; the next successor if it is silent. refresh: look up the k
 * successors and send REFRESH to each at once; the answer counts the
 * replicas whose lease moved.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dhash/internal.h"

#define FETCH_RETRY_TIMEOUT_MS 1000
#define GET_SPARES 4 /* successors asked beyond k, for stale lists after failures */


struct op;

/* The nonces servers gave this client (quotas, CFS 5.4), by address. */
#define NONCES 64
struct server_nonce {
	struct cfs_addr addr;
	uint8_t nonce[CFS_NONCE_BYTES];
};

struct dhash_client {
	chord_t *chord;
	struct dhash_config cfg;
	struct cfs_msg msg;       /* large: not on the stack */
	struct op *ops;
	uint32_t holds;           /* dhash__client_hold: others' operations in flight */
	bool closing;
	struct dhash_client_stats st;
	struct server_nonce nonces[NONCES];
	uint32_t nnonces, nonce_next;
};

struct op {
	dhash_client_t *d;
	struct op *next;
	bool is_put;
	uint8_t probe;            /* CFS_MSG_HAVE or CFS_MSG_REFRESH, else 0 */
	struct cfs_id key;
	uint64_t started_us;
	/* candidates, in the order they are tried */
	struct cfs_node cand[CFS_MSG_MAX_NODES];
	uint32_t ncand, next_cand;
	uint32_t nfirst;          /* cand[nfirst..] are second tries of silent replicas */
	uint32_t rpcs, timeouts, bad;
	uint64_t lookup_us;       /* time spent in lookups (the rest is fetching) */
	bool relooked;            /* a get's second lookup, after every candidate failed */
	bool challenged;          /* a put answered a server's nonce challenge */
	bool done;                /* finished; freed once its last call is back */
	uint32_t inflight;        /* a get's FETCHes out */
	bool hedging;             /* the FETCH being sent is a hedge */
	uv_timer_t *hedge;        /* a get's hedging timer (hedge_ms), or NULL */
	int miss_status;          /* the error to report when every candidate failed */
	bool root_mode;           /* a root came back: ask every candidate, keep the newest */
	uint8_t *best;            /* root mode: the newest root so far (malloc'd) */
	size_t best_len;
	uint64_t best_seq;
	uint32_t npath;           /* a get's lookup path (caches to push to) */
	struct cfs_node path[CHORD_PATH_MAX];
	/* get */
	dhash_get_cb get_cb;
	/* put */
	dhash_put_cb put_cb;
	uint32_t kind;
	uint64_t lease_until;
	uint8_t *data;
	size_t len;
	/* have / refresh */
	dhash_key_cb key_cb;
	uint32_t found, waiting, answered;
	uint64_t granted;         /* put: the lease the server granted; refresh: the least */
	void *arg;
};

static void op_unlink(struct op *o)
{
	for (struct op **pp = &o->d->ops; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			return;
		}
}

static void client_maybe_free(dhash_client_t *d)
{
	if (d->closing && !d->ops && !d->holds)
		free(d);
}

static void hedge_closed(uv_handle_t *h)
{
	struct op *o = h->data;

	free(h);
	o->hedge = NULL;
	if (o->inflight == 0)
		free(o);
}

/* A finished get is freed once its last FETCH is back and its timer closed. */
static void get_release(struct op *o)
{
	if (o->hedge) {
		if (!uv_is_closing((uv_handle_t *)o->hedge))
			uv_close((uv_handle_t *)o->hedge, hedge_closed);
		return;
	}
	if (o->inflight == 0)
		free(o);
}

static void get_finish(struct op *o, int status, uint32_t kind, const uint8_t *p, size_t len)
{
	dhash_client_t *d = o->d;
	struct dhash_get_result r = {
		.status = d->closing ? -ECANCELED : status, .kind = kind, .data = p, .len = len,
		.rpcs = o->rpcs, .timeouts = o->timeouts, .bad_replies = o->bad,
		.latency_us = cfs_now_us() - o->started_us, .lookup_us = o->lookup_us,
	};

	op_unlink(o);
	d->st.gets++;
	d->st.gets_failed += status < 0;
	d->st.bad_replies += o->bad;
	d->st.get_rpcs += o->rpcs;
	cfs_hist_add(&d->st.get_us, r.latency_us);
	o->done = true;
	o->get_cb(o->arg, &r);
	free(o->best);
	o->best = NULL;
	get_release(o);
	client_maybe_free(d);
}

static void put_finish(struct op *o, int status)
{
	dhash_client_t *d = o->d;

	op_unlink(o);
	d->st.puts++;
	d->st.puts_failed += status < 0;
	o->put_cb(o->arg, d->closing ? -ECANCELED : status, &o->key, status == 0 ? o->granted : 0);
	free(o->data);
	free(o);
	client_maybe_free(d);
}

static void probe_finish(struct op *o, int status)
{
	dhash_client_t *d = o->d;

	op_unlink(o);
	o->key_cb(o->arg, d->closing ? -ECANCELED : status, &o->key, o->found, o->found ? o->granted : 0);
	free(o);
	client_maybe_free(d);
}

static void op_fail(struct op *o, int status)
{
	if (o->probe)
		probe_finish(o, status);
	else if (o->is_put)
		put_finish(o, status);
	else
		get_finish(o, status, 0, NULL, 0);
}

/* ------------------------------------------------------------ get */

static void fetch_next(struct op *o);
static int op_lookup_start(struct op *o);
static bool fetch_send(struct op *o, uint32_t ci, bool hedge);

struct fetch_call {
	struct op *o;
	uint32_t ci;              /* the candidate asked */
	bool hedge;               /* sent because an earlier one was slow */
};

static void push_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	(void)arg; /* a cache copy is best effort: nothing waits for it */
}

/* Is a at one of the servers the get asked (they have it or are replicas)? */
static bool asked_server(const struct op *o, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < o->ncand; i++)
		if (cfs_addr_eq(&o->cand[i].addr, a))
			return true;
	return false;
}

/* CFS 5.2: a fetched block is copied to the servers on its lookup path, so
 * that later lookups for it stop sooner (the last hops before the key's
 * successors are where lookups from everywhere converge). DHASH_PUSH_LAST
 * copies it only to the hop nearest the key. Servers on the path that were
 * candidates (replicas, or the hop that answered with a copy) are skipped. */
static void cache_push(struct op *o, const struct cfs_node *from, const uint8_t *p, size_t len)
{
	dhash_client_t *d = o->d;

	if (d->cfg.cache_push == DHASH_PUSH_NONE)
		return;
	for (uint32_t i = o->npath; i-- > 0;) {
		const struct cfs_node *to = &o->path[i];
		if (cfs_addr_eq(&to->addr, &from->addr) || asked_server(o, &to->addr))
			continue;
		cfs_msg_init(&d->msg, CFS_MSG_STORE);
		d->msg.kind = DHASH_KIND_CHASH;
		d->msg.key = o->key;
		d->msg.flags = DHASH_STORE_F_CACHE;
		d->msg.data = (struct cfs_bytes){ p, len };
		d->msg.has_to = true;
		d->msg.to_id = to->id;
		if (chord_call(d->chord, to, &d->msg, DHASH_STORE_TIMEOUT_MS, push_reply, NULL) == 0)
			d->st.cache_pushes++;
		if (d->cfg.cache_push == DHASH_PUSH_LAST)
			return;
	}
}

/* A root that verifies: keep the newest; the first one sends a FETCH to
 * every candidate not yet asked (the spares too: after failures the
 * holders of the newest root may sit beyond the first k). */
static void root_answer(struct op *o, const struct cfs_node *from, const uint8_t *p, size_t len,
                        uint64_t seq)
{
	if (!o->best || seq > o->best_seq) {
		free(o->best);
		o->best = xmemdup(p, len ? len : 1);
		o->best_len = len;
		o->best_seq = seq;
	} else if (seq == o->best_seq && (len != o->best_len || memcmp(p, o->best, len))) {
		char a[CFS_ADDR_STRLEN], k[9];
		log_warn("dhash: %s holds another root for %s with the same sequence %lu "
		         "(two publishers with one key?)", cfs_addr_str(&from->addr, a),
		         cfs_id_short(&o->key, k), (unsigned long)seq);
	} else if (seq < o->best_seq) {
		char a[CFS_ADDR_STRLEN], k[9];
		log_debug("dhash: %s holds an older root for %s (sequence %lu < %lu)",
		          cfs_addr_str(&from->addr, a), cfs_id_short(&o->key, k), (unsigned long)seq,
		          (unsigned long)o->best_seq);
	}
	if (!o->root_mode) {
		o->root_mode = true;
		if (o->hedge)
			uv_timer_stop(o->hedge);
		while (o->next_cand < o->nfirst)
			fetch_send(o, o->next_cand++, false);
	}
	if (o->inflight == 0)
		get_finish(o, 0, DHASH_KIND_ROOT, o->best, o->best_len);
}

static void fetch_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct fetch_call *fc = arg;
	struct op *o = fc->o;
	uint32_t ci = fc->ci;
	bool hedge = fc->hedge;
	uint64_t seq;

	free(fc);
	o->inflight--;
	if (o->done) { /* a hedged FETCH answered after the get ended */
		get_release(o);
		return;
	}
	const struct cfs_node *from = &o->cand[ci];
	if (status == -ECANCELED || o->d->closing) {
		get_finish(o, -ECANCELED, 0, NULL, 0);
		return;
	}
	if (status == 0 && reply->kind == DHASH_KIND_ROOT &&
	    dhash_verify(reply->kind, &o->key, reply->data.p, reply->data.len, &seq) == 0) {
		root_answer(o, from, reply->data.p, reply->data.len, seq);
		return;
	}
	if (status == 0) {
		if (dhash_verify(reply->kind, &o->key, reply->data.p, reply->data.len, &seq) == 0) {
			o->d->st.hedge_wins += hedge;
			if (reply->kind == DHASH_KIND_CHASH)
				cache_push(o, from, reply->data.p, reply->data.len);
			get_finish(o, 0, reply->kind, reply->data.p, reply->data.len);
			return;
		}
		char a[CFS_ADDR_STRLEN], k[9];
		cfs_addr_str(&from->addr, a);
		log_warn("dhash: %s sent bytes for %s that do not verify; trying another replica", a,
		         cfs_id_short(&o->key, k));
		o->bad++;
		o->miss_status = -EBADMSG;
	} else if (status == -ETIMEDOUT) {
		o->timeouts++;
		o->d->st.fetch_timeouts++;
		/* Silent is not the same as dead (a busy server, a lost
		 * datagram): one more try at the end, with a longer timeout. */
		if (ci < o->nfirst && o->ncand < CFS_MSG_MAX_NODES)
			o->cand[o->ncand++] = *from;
		if (o->miss_status != -ENOENT && o->miss_status != -EBADMSG)
			o->miss_status = -ETIMEDOUT;
	} else if (status == -ENOENT) {
		if (o->miss_status != -EBADMSG)
			o->miss_status = -ENOENT;
	}
	if (o->root_mode) {
		if (o->inflight == 0)
			get_finish(o, 0, DHASH_KIND_ROOT, o->best, o->best_len);
		return;
	}
	if (o->inflight == 0) /* else a hedged FETCH may still answer */
		fetch_next(o);
}

static void on_hedge(uv_timer_t *t)
{
	struct op *o = t->data;

	if (o->done || o->root_mode || o->inflight == 0 || o->next_cand >= o->ncand)
		return;
	o->d->st.hedges++;
	o->hedging = true;
	fetch_next(o);
	o->hedging = false;
}

/* One FETCH to candidate ci; false if it could not be sent. */
static bool fetch_send(struct op *o, uint32_t ci, bool hedge)
{
	dhash_client_t *d = o->d;
	const struct cfs_node *to = &o->cand[ci];

	cfs_msg_init(&d->msg, CFS_MSG_FETCH);
	d->msg.key = o->key;
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	o->rpcs++;
	uint32_t timeout = ci >= o->nfirst ? FETCH_RETRY_TIMEOUT_MS : 0;
	struct fetch_call *fc = xmalloc(sizeof(*fc));
	*fc = (struct fetch_call){ o, ci, hedge };
	if (chord_call(d->chord, to, &d->msg, timeout, fetch_reply, fc) < 0) {
		free(fc);
		return false;
	}
	o->inflight++;
	return true;
}

static void fetch_next(struct op *o)
{
	dhash_client_t *d = o->d;

	while (o->next_cand < o->ncand) {
		uint32_t ci = o->next_cand++;
		if (fetch_send(o, ci, o->hedging)) {
			/* Second tries go out together: one after another, a list
			 * of dead successors cost a second each (a get failed after
			 * 14 s when half a 16-node ring had just died). */
			if (ci >= o->nfirst)
				continue;
			if (d->cfg.hedge_ms && o->next_cand < o->ncand) {
				if (!o->hedge) {
					o->hedge = xmalloc(sizeof(*o->hedge));
					uv_timer_init(cfs_transport_loop(chord_transport(d->chord)), o->hedge);
					o->hedge->data = o;
				}
				uv_timer_start(o->hedge, on_hedge, d->cfg.hedge_ms, 0);
			}
			return;
		}
	}
	if (o->inflight > 0)
		return; /* a hedged FETCH is still out */
	if (!o->relooked && !d->closing) {
		/* Every candidate failed. Some may have been silent: the lookup
		 * named servers that had just died, or a busy one missed both
		 * tries; the timeouts have since taken the dead out of the
		 * tables. Or all answered that they do not have it: a lookup
		 * taken while the ring changes (many servers just died or
		 * joined) can end at a node whose list skips the holders for a
		 * round. Either way, once more from a fresh lookup; a block
		 * that really is missing costs one lookup more. */
		o->relooked = true;
		d->st.relookups++;
		o->ncand = o->next_cand = o->nfirst = 0;
		if (op_lookup_start(o) == 0)
			return;
	}
	if (cfs_log_get_level() >= CFS_LOG_DEBUG) {
		char k[9], a[CFS_ADDR_STRLEN];
		struct cfs_sbuf b = { 0 };
		for (uint32_t i = 0; i < o->ncand; i++)
			cfs_sb_printf(&b, " %s", cfs_addr_str(&o->cand[i].addr, a));
		log_debug("dhash: get %s failed after %u RPCs, %u timeouts; asked%s",
		          cfs_id_short(&o->key, k), o->rpcs, o->timeouts, b.p ? b.p : " nobody");
		free(b.p);
	}
	get_finish(o, o->miss_status ? o->miss_status : -ENOENT, 0, NULL, 0);
}

/* Candidates: the hop that holds a copy, then the k successors by predicted
 * latency, then the spare successors in ring order; each server once. */
static void order_candidates(struct op *o, const struct chord_lookup_result *r, uint32_t k)
{
	chord_t *c = o->d->chord;
	uint32_t n = 0, sorted_end = 0;
	uint64_t lat[CFS_MSG_MAX_NODES];

	if (r->has_block)
		o->cand[n++] = r->holder;
	uint32_t first = n;
	for (uint32_t i = 0; i < r->n && n < CFS_MSG_MAX_NODES; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_eq(&o->cand[j].addr, &r->succ[i].addr);
		if (dup)
			continue;
		o->cand[n++] = r->succ[i];
		if (i < k && !o->d->cfg.ring_order)
			sorted_end = n;
	}
	for (uint32_t i = first; i < sorted_end; i++)
		lat[i] = chord_predict_rtt_us(c, &o->cand[i].coord);
	for (uint32_t i = first + 1; i < sorted_end; i++) { /* insertion sort: stable, n <= 64 */
		struct cfs_node x = o->cand[i];
		uint64_t lx = lat[i];
		uint32_t j = i;
		for (; j > first && lat[j - 1] > lx; j--) {
			o->cand[j] = o->cand[j - 1];
			lat[j] = lat[j - 1];
		}
		o->cand[j] = x;
		lat[j] = lx;
	}
	o->ncand = o->nfirst = n;
}

/* ------------------------------------------------------------ put */

static void store_next(struct op *o);

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

static void store_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct op *o = arg;

	if (status == -ECANCELED || o->d->closing) {
		put_finish(o, -ECANCELED);
		return;
	}
	if (status == 0 && (reply->flags & DHASH_STORE_R_CHALLENGE)) {
		/* The server wants proof that we receive at our address: its
		 * nonce, sent back with the block (once per put). */
		if (o->challenged) {
			put_finish(o, -EACCES);
			return;
		}
		o->challenged = true;
		nonce_keep(o->d, res->from, reply->nonce);
		o->next_cand--;
		store_next(o);
		return;
	}
	if (status == 0) {
		/* A server that names no lease (0) granted what was asked. */
		o->granted = reply->lease_until ? reply->lease_until : o->lease_until;
		put_finish(o, 0);
		return;
	}
	if (status == -ETIMEDOUT) {
		o->timeouts++;
		o->miss_status = -ETIMEDOUT;
		store_next(o);
		return;
	}
	put_finish(o, status);
}

static void store_next(struct op *o)
{
	dhash_client_t *d = o->d;

	while (o->next_cand < o->ncand) {
		const struct cfs_node *to = &o->cand[o->next_cand++];
		cfs_msg_init(&d->msg, CFS_MSG_STORE);
		d->msg.kind = o->kind;
		d->msg.key = o->key;
		d->msg.lease_until = o->lease_until;
		d->msg.flags = DHASH_STORE_F_PRIMARY;
		const struct server_nonce *sn = nonce_find(d, &to->addr);
		if (sn)
			memcpy(d->msg.nonce, sn->nonce, CFS_NONCE_BYTES);
		d->msg.data = (struct cfs_bytes){ o->data, o->len };
		d->msg.has_to = true;
		d->msg.to_id = to->id;
		o->rpcs++;
		if (chord_call(d->chord, to, &d->msg, DHASH_STORE_TIMEOUT_MS, store_reply, o) == 0)
			return;
	}
	put_finish(o, o->miss_status ? o->miss_status : -EHOSTUNREACH);
}

/* ------------------------------------------------------------ have, refresh */

static void have_next(struct op *o);
static bool refresh_retry(struct op *o);

static void probe_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct op *o = arg;
	bool bit = status == 0 && reply->data.len >= 1 && (reply->data.p[0] & 1);

	if (status == -ECANCELED || o->d->closing) {
		if (o->probe == CFS_MSG_REFRESH && --o->waiting)
			return;
		probe_finish(o, -ECANCELED);
		return;
	}
	if (status == -ETIMEDOUT)
		o->timeouts++;
	else if (status == 0)
		o->answered++;
	o->found += bit;
	if (bit && o->probe == CFS_MSG_REFRESH) {
		uint64_t g = reply->lease_until ? reply->lease_until : o->lease_until;
		if (!o->granted || g < o->granted)
			o->granted = g;
	}
	if (o->probe == CFS_MSG_HAVE) {
		if (status == 0)
			probe_finish(o, 0);
		else
			have_next(o);
		return;
	}
	if (--o->waiting == 0 && (o->answered || !refresh_retry(o)))
		probe_finish(o, o->answered ? 0 : -ETIMEDOUT);
}

static int probe_send(struct op *o, const struct cfs_node *to, uint32_t timeout_ms)
{
	dhash_client_t *d = o->d;

	cfs_msg_init(&d->msg, o->probe);
	d->msg.keys = &o->key;
	d->msg.n_keys = 1;
	d->msg.lease_until = o->lease_until;
	d->msg.has_to = true;
	d->msg.to_id = to->id;
	o->rpcs++;
	return chord_call(d->chord, to, &d->msg, timeout_ms, probe_reply, o);
}

static void have_next(struct op *o)
{
	while (o->next_cand < o->ncand)
		if (probe_send(o, &o->cand[o->next_cand++], 0) == 0)
			return;
	probe_finish(o, -EHOSTUNREACH);
}

/* REFRESH to each distinct server among the first k successors. */
static void refresh_send(struct op *o, const struct chord_lookup_result *r)
{
	uint32_t k = o->d->cfg.replicas;

	o->ncand = 0;
	for (uint32_t i = 0; i < r->n && i < k; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < o->ncand && !dup; j++)
			dup = cfs_addr_eq(&o->cand[j].addr, &r->succ[i].addr);
		if (!dup)
			o->cand[o->ncand++] = r->succ[i];
	}
	for (uint32_t i = 0; i < o->ncand; i++)
		if (probe_send(o, &o->cand[i], 0) == 0)
			o->waiting++;
	if (!o->waiting)
		probe_finish(o, -EHOSTUNREACH);
}

/* No replica answered a REFRESH: silent is not dead (a busy server, a
 * lost datagram, a full window), so all of them once more, with a longer
 * timeout, before the refresh fails. A publisher takes a failed refresh
 * for an error, not for "absent". */
static bool refresh_retry(struct op *o)
{
	if (o->relooked || o->d->closing)
		return false;
	o->relooked = true;
	for (uint32_t i = 0; i < o->ncand; i++)
		if (probe_send(o, &o->cand[i], FETCH_RETRY_TIMEOUT_MS) == 0)
			o->waiting++;
	return o->waiting > 0;
}

/* ------------------------------------------------------------ all */

static void lookup_done(void *arg, const struct chord_lookup_result *r)
{
	struct op *o = arg;

	o->rpcs += r->rpcs;
	o->timeouts += r->timeouts;
	o->lookup_us += r->latency_us;
	if (o->d->closing) {
		op_fail(o, -ECANCELED);
		return;
	}
	if (r->status < 0 || r->n == 0) {
		op_fail(o, r->status < 0 ? r->status : -EHOSTUNREACH);
		return;
	}
	if (o->probe == CFS_MSG_REFRESH) {
		refresh_send(o, r);
	} else if (o->probe == CFS_MSG_HAVE) {
		o->ncand = r->n;
		memcpy(o->cand, r->succ, r->n * sizeof(r->succ[0]));
		have_next(o);
	} else if (o->is_put) {
		/* The successor first, the others in ring order as fallbacks. */
		o->ncand = r->n;
		memcpy(o->cand, r->succ, r->n * sizeof(r->succ[0]));
		store_next(o);
	} else {
		o->npath = r->npath;
		memcpy(o->path, r->path, r->npath * sizeof(r->path[0]));
		order_candidates(o, r, o->d->cfg.replicas);
		fetch_next(o);
	}
}

static struct op *op_new(dhash_client_t *d, const struct cfs_id *key, void *arg)
{
	struct op *o = xcalloc(1, sizeof(*o));

	o->d = d;
	o->key = *key;
	o->arg = arg;
	o->started_us = cfs_now_us();
	o->next = d->ops;
	d->ops = o;
	return o;
}

static int op_lookup_start(struct op *o)
{
	dhash_client_t *d = o->d;
	/* A get's first lookup may stop at a hop holding a copy (stored or
	 * cached); the nodes such a hop names are next hops, not the key's
	 * successors. So the second lookup, after every candidate failed
	 * (the copy was bad or gone), goes all the way to the successors. */
	bool check = !o->is_put && !o->probe && !o->relooked;
	struct chord_lookup_opts lo = { .mode = d->cfg.lookup_mode,
	                                .nsucc = d->cfg.replicas + (o->is_put || o->probe ? 0 : GET_SPARES),
	                                .flags = check ? CFS_LOOKUP_F_CHECK_BLOCK : 0 };
	return chord_lookup(d->chord, &o->key, &lo, lookup_done, o);
}

static int op_lookup(struct op *o)
{
	int r = op_lookup_start(o);

	if (r < 0) {
		op_unlink(o);
		free(o->data);
		free(o);
	}
	return r;
}

int dhash_get(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb cb, void *arg)
{
	if (d->closing)
		return -ECANCELED;
	struct op *o = op_new(d, key, arg);
	o->get_cb = cb;
	return op_lookup(o);
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
	struct op *o = op_new(d, &key, arg);
	o->is_put = true;
	o->put_cb = cb;
	o->kind = kind;
	o->lease_until = lease_until ? lease_until : (uint64_t)time(NULL) + d->cfg.lease_s;
	o->data = xmalloc(len ? len : 1);
	memcpy(o->data, p, len);
	o->len = len;
	return op_lookup(o);
}

static int probe_start(dhash_client_t *d, uint8_t type, const struct cfs_id *key,
                       uint64_t lease_until, dhash_key_cb cb, void *arg)
{
	if (d->closing)
		return -ECANCELED;
	struct op *o = op_new(d, key, arg);
	o->probe = type;
	o->key_cb = cb;
	o->lease_until = lease_until;
	return op_lookup(o);
}

int dhash_have(dhash_client_t *d, const struct cfs_id *key, dhash_key_cb cb, void *arg)
{
	return probe_start(d, CFS_MSG_HAVE, key, 0, cb, arg);
}

int dhash_refresh(dhash_client_t *d, const struct cfs_id *key, uint64_t lease_until,
                  dhash_key_cb cb, void *arg)
{
	if (!lease_until)
		lease_until = (uint64_t)time(NULL) + d->cfg.lease_s;
	return probe_start(d, CFS_MSG_REFRESH, key, lease_until, cb, arg);
}

int dhash_client_new(chord_t *c, const struct dhash_config *cfg, dhash_client_t **ret)
{
	if (cfg->replicas < 1 || cfg->replicas > CFS_MSG_MAX_NODES)
		return -EINVAL;
	dhash_client_t *d = xcalloc(1, sizeof(*d));
	d->chord = c;
	d->cfg = *cfg;
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
