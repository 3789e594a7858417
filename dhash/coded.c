/*
 * Coded put and get: the driver of coded_sm.c's machines. It encodes the
 * block (the machine only places fragments), does the lookup and the
 * STOREs and FETCHes, and reports the result. Each operation is freed in
 * one place (coded_maybe_free), once its callback ran and nothing of it
 * is out.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

struct coded_op {
	dhash_client_t *d;
	bool put;
	bool finished;
	int *start;               /* a repair's first sends: a FINISH now is the caller's error */
	struct cfs_id key;
	void *arg;
	uint64_t started_us;
	union {
		struct {
			struct dhash__cput sm;
			dhash_put_cb cb;
			uint8_t *frags[SFSRO_CODE_N_MAX]; /* one allocation, frags[0] */
			size_t flen;
		} p;
		struct {
			struct dhash__cget sm;
			dhash_get_cb cb;
		} g;
	};
};

struct coded_call {
	struct coded_op *o;
	uint32_t ci;
};

static void coded_run(struct coded_op *o);

static bool coded_next(struct coded_op *o, struct dhash__act *a)
{
	return o->put ? dhash__cput_next(&o->p.sm, a) : dhash__cget_next(&o->g.sm, a);
}

static void coded_maybe_free(struct coded_op *o)
{
	if (!o->finished || (o->put ? !dhash__cput_idle(&o->p.sm) : !dhash__cget_idle(&o->g.sm)))
		return;
	dhash_client_t *d = o->d;
	if (o->put) {
		dhash__cput_fini(&o->p.sm);
		free(o->p.frags[0]);
	} else {
		dhash__cget_fini(&o->g.sm);
	}
	free(o);
	dhash__client_release(d);
}

static void lookup_done(void *arg, const struct chord_lookup_result *r)
{
	static const struct chord_lookup_result cancelled = { .status = -ECANCELED };
	struct coded_op *o = arg;
	chord_t *c = dhash__client_chord(o->d);
	uint64_t rtt[CFS_MSG_MAX_NODES];

	if (dhash__client_closing(o->d))
		r = &cancelled;
	if (o->put) {
		dhash__cput_on_lookup(&o->p.sm, r);
	} else {
		for (uint32_t i = 0; r->status == 0 && i < r->n; i++)
			rtt[i] = chord_rtt_us(c, &r->succ[i]);
		dhash__cget_on_lookup(&o->g.sm, r, rtt);
	}
	coded_run(o);
}

static void call_done(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	struct coded_call *c = arg;
	struct coded_op *o = c->o;
	struct dhash__reply rep = dhash__reply_of(!o->finished && dhash__client_closing(o->d) ? -ECANCELED
	                                          : status, reply, res);

	if (o->put)
		dhash__cput_on_store(&o->p.sm, c->ci, &rep);
	else
		dhash__cget_on_fetch(&o->g.sm, c->ci, &rep);
	free(c);
	coded_run(o);
}

/* A STORE of fragment i (kind FRAG, F_PRIMARY: a client's, charged to us)
 * or a FETCH, to the i-th holder. */
static int coded_send(struct coded_op *o, const struct dhash__act *a)
{
	const struct cfs_node *to = o->put ? &o->p.sm.cand[a->i] : &o->g.sm.cand[a->i];
	struct cfs_msg *m = xmalloc(sizeof(*m));
	struct coded_call *c = xmalloc(sizeof(*c));
	uint32_t timeout = 0;
	int r;

	*c = (struct coded_call){ o, a->i };
	if (o->put) {
		cfs_msg_init(m, CFS_MSG_STORE);
		m->kind = DHASH_KIND_FRAG;
		m->lease_until = o->p.sm.lease_until;
		m->flags = DHASH_STORE_F_PRIMARY;
		dhash__client_nonce(o->d, &to->addr, m->nonce);
		m->data = (struct cfs_bytes){ o->p.frags[a->i], o->p.flen };
		timeout = DHASH_STORE_TIMEOUT_MS;
	} else {
		cfs_msg_init(m, CFS_MSG_FETCH);
	}
	m->key = o->key;
	m->has_to = true;
	m->to_id = to->id;
	if ((r = dhash__client_call(o->d, to, m, timeout, call_done, c)) < 0)
		free(c);
	free(m);
	return r;
}

static void coded_finish(struct coded_op *o, const struct dhash__act *a)
{
	dhash_client_t *d = o->d;
	struct dhash_client_stats *st = dhash__client_stats_mut(d);
	int status = dhash__client_closing(d) ? -ECANCELED : a->status;

	o->finished = true;
	if (o->start) { /* every send failed at once: no callback, the call fails */
		*o->start = status < 0 ? status : -EIO;
		return;
	}
	if (o->put) {
		st->coded_puts++;
		st->coded_puts_failed += status < 0;
		o->p.cb(o->arg, status, &o->key, status == 0 ? a->lease : 0);
		return;
	}
	const struct dhash__cget *g = &o->g.sm;
	struct dhash_get_result r = {
		.status = status, .kind = a->kind, .data = a->data, .len = a->len, .rpcs = g->rpcs,
		.timeouts = g->timeouts, .bad_replies = g->bad,
		.latency_us = cfs_now_us() - o->started_us, .lookup_us = g->lookup_us,
	};
	st->coded_gets++;
	st->coded_gets_failed += status < 0;
	st->bad_replies += g->bad;
	st->get_rpcs += g->rpcs;
	o->g.cb(o->arg, &r);
}

/* Carry out the machine's actions in order; free o once it is done with
 * (o may be gone on return). */
static void coded_run(struct coded_op *o)
{
	struct dhash__act a;
	chord_t *c = dhash__client_chord(o->d);

	/* A put's actions after its FINISH are the STOREs still being seen
	 * through (challenge answers); a get queues nothing after its own. */
	while ((o->put || !o->finished) && coded_next(o, &a)) {
		switch (a.type) {
		case DHASH_ACT_STORE:
		case DHASH_ACT_FETCH:
			if (coded_send(o, &a) < 0) {
				if (o->put)
					dhash__cput_on_store(&o->p.sm, a.i, NULL);
				else
					dhash__cget_on_fetch(&o->g.sm, a.i, NULL);
			}
			break;
		case DHASH_ACT_KEEP_NONCE:
			dhash__client_keep_nonce(o->d, &a.addr, a.nonce);
			break;
		case DHASH_ACT_SUSPECT:
			chord_suspect(c, &o->g.sm.cand[a.i].id, "served a fragment that does not verify");
			break;
		case DHASH_ACT_LOOKUP: { /* a get's walk on along the ring */
			struct chord_lookup_opts lo = { .mode = dhash__client_mode(o->d), .nsucc = a.nsucc };
			int r = chord_lookup(c, &o->g.sm.walk_key, &lo, lookup_done, o);
			if (r < 0)
				dhash__cget_on_lookup(&o->g.sm, &(struct chord_lookup_result){ .status = r }, NULL);
			break;
		}
		case DHASH_ACT_FINISH:
			if (!o->finished)
				coded_finish(o, &a);
			break;
		default:
			break; /* the coded machines ask for nothing else */
		}
	}
	coded_maybe_free(o);
}

/* The machine's first action is its lookup: when it cannot start, the
 * operation is dropped with no callback and the caller gets the error. */
static int coded_start(struct coded_op *o)
{
	struct dhash__act a;
	int r = -EINVAL;

	dhash__client_hold(o->d);
	if (coded_next(o, &a) && a.type == DHASH_ACT_LOOKUP) {
		struct chord_lookup_opts lo = { .mode = dhash__client_mode(o->d), .nsucc = a.nsucc };
		if ((r = chord_lookup(dhash__client_chord(o->d), &o->key, &lo, lookup_done, o)) == 0)
			return 0;
	}
	o->finished = true;
	if (o->put)
		o->p.sm.state = DHASH_CODED_DONE;
	else
		o->g.sm.state = DHASH_CODED_DONE;
	coded_maybe_free(o);
	return r;
}

bool dhash_code_valid(uint32_t m, uint32_t n)
{
	return sfsro_code_valid(m, n);
}

int dhash_coded_key(const uint8_t *p, size_t len, uint32_t m, uint32_t n, struct cfs_id *ret)
{
	return sfsro_code_key(p, len, m, n, ret);
}

/* A put's op with the block encoded into its n fragments; key: the coded
 * key the block must encode to (else -EBADMSG), or NULL. NULL and *ret
 * the error when the block cannot be coded. */
static struct coded_op *encoded_op(dhash_client_t *d, uint32_t m, uint32_t n, const uint8_t *p,
                                   size_t len, const struct cfs_id *key, dhash_put_cb cb, void *arg,
                                   int *ret)
{
	struct coded_op *o = xcalloc(1, sizeof(*o));
	size_t flen = sfsro_frag_len((uint32_t)len, m, n);

	o->d = d;
	o->put = true;
	o->arg = arg;
	o->started_us = cfs_now_us();
	o->p.cb = cb;
	o->p.flen = flen;
	o->p.frags[0] = xmalloc(flen * n);
	for (uint32_t i = 1; i < n; i++)
		o->p.frags[i] = o->p.frags[0] + i * flen;
	if ((*ret = sfsro_code_encode(p, len, m, n, &o->key, o->p.frags)) < 0 ||
	    (key && (*ret = cfs_id_eq(&o->key, key) ? 0 : -EBADMSG) < 0)) { /* not the key's block */
		free(o->p.frags[0]);
		free(o);
		return NULL;
	}
	return o;
}

int dhash_put_coded(dhash_client_t *d, uint32_t m, uint32_t n, const uint8_t *p, size_t len,
                    uint64_t lease_until, dhash_put_cb cb, void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	if (!sfsro_code_valid(m, n) || len == 0 || len > SFSRO_CODED_BLOCK_MAX)
		return -EINVAL;
	int r;
	struct coded_op *o = encoded_op(d, m, n, p, len, NULL, cb, arg, &r);

	if (!o)
		return r;
	dhash__cput_init(&o->p.sm, m, n, lease_until ? lease_until : cfs_wall_s() + dhash__client_lease(d));
	return coded_start(o);
}

int dhash_repair_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                       const uint8_t *p, size_t len, const struct cfs_node *holders,
                       uint32_t nholders, uint32_t mask, uint64_t lease_until, dhash_put_cb cb,
                       void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	if (!sfsro_code_valid(m, n) || len == 0 || len > SFSRO_CODED_BLOCK_MAX || nholders > n ||
	    (mask & ((nholders < 32 ? 1u << nholders : 0u) - 1)) == 0)
		return -EINVAL;
	int r;
	struct coded_op *o = encoded_op(d, m, n, p, len, key, cb, arg, &r);

	if (!o)
		return r;
	dhash__cput_init_repair(&o->p.sm, m, n, lease_until ? lease_until
	                        : cfs_wall_s() + dhash__client_lease(d), holders, nholders, mask);
	dhash__client_hold(d);
	r = 1;
	o->start = &r;
	coded_run(o); /* frees o when every send failed at once (r then says why) */
	if (r == 1) {
		o->start = NULL;
		r = 0;
	}
	return r;
}

int dhash_get_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                    dhash_get_cb cb, void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	if (!sfsro_code_valid(m, n))
		return -EINVAL;
	struct coded_op *o = xcalloc(1, sizeof(*o));

	o->d = d;
	o->key = *key;
	o->arg = arg;
	o->started_us = cfs_now_us();
	o->g.cb = cb;
	dhash__cget_init(&o->g.sm, key, m, n);
	return coded_start(o);
}
