/*
 * Coded put and get as state machines that do no I/O (client_sm.h);
 * coded.c carries out what they ask for.
 *
 * DHash++ 4.4: a block is n fragments, any m of which rebuild it, and
 * fragment i lives on the key's i-th successor (distinct IP addresses, as
 * a replicated put counts servers). Every fragment verifies alone against
 * the key (sfsro_frag_verify), so a server checks what it stores and a
 * reader what it fetches, and a hostile holder costs one FETCH.
 *
 * repair (cfs-fsck --replicas --repair): no LOOKUP; the fragments a
 * locate found missing are stored, each on the holder that lacks it, and
 * the repair succeeds when every one of them acknowledged.
 *
 * put: LOOKUP for the n successors, then STORE fragment i to the i-th,
 * all at once (a server's nonce challenge answered once, CFS 5.4). The put
 * succeeds once dhash_coded_happy of them acknowledged; the STOREs still
 * out then keep going (a nonce challenge answered, as before the ack) and
 * the machine is idle only when every one ended, so a put normally leaves
 * all n fragments, and the spare n - happy only absorb real losses. Fewer
 * servers than happy: -EHOSTUNREACH at once.
 *
 * get: LOOKUP for the n holders, ordered by predicted round trip (in
 * whole milliseconds: ties keep ring order, data fragments first); FETCH
 * from the m nearest and DHASH_CODED_EXTRA more at once (DHash++ 4.4 asks
 * the nearest m; the extras save a round trip when one of them is slow
 * or gone). Each failure (silence, a miss, a fragment that does not
 * verify — its server also reported as a suspect —, or an index we have
 * already) sends one FETCH to the next holder. With m good fragments the
 * block is decoded and checked against the key's H(block); FETCHes still
 * out are ignored when they come back. With every holder asked and too
 * few good fragments, a walk: a LOOKUP of the ID just past the last
 * successor seen, which that successor answers with its own list, whose
 * new holders are asked the same way (a lookup answer from a hop short of
 * the key's predecessor, or from a server that has just started, lists
 * fewer than n; fragments moved along by joins and failures stand past
 * the n-th).
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

uint32_t dhash_coded_happy(uint32_t m, uint32_t n)
{
	return m + (n - m + 1) / 2;
}

/* The first n successors at distinct IP addresses. */
static uint32_t take_holders(struct cfs_node *cand, uint32_t n, const struct chord_lookup_result *r)
{
	uint32_t got = 0;

	for (uint32_t i = 0; i < r->n && got < n; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < got && !dup; j++)
			dup = cfs_addr_same_ip(&cand[j].addr, &r->succ[i].addr);
		if (!dup)
			cand[got++] = r->succ[i];
	}
	return got;
}

/* Successors to ask a lookup for: n, and spares for virtual servers of
 * one process (several IDs, one address). */
static uint32_t coded_nsucc(uint32_t n)
{
	uint32_t want = 2 * n + DHASH_GET_SPARES;

	return want < CFS_MSG_MAX_NODES ? want : CFS_MSG_MAX_NODES;
}

/* ------------------------------------------------------------ put */

static void cput_send(struct dhash__cput *p, uint32_t ci);

/* Report the put (once). A success with STOREs still out stays RUN until
 * they all ended; a failure is DONE at once (late replies are ignored). */
static void cput_finish(struct dhash__cput *p, int status)
{
	struct dhash__act *a = dhash__act_push(&p->q, DHASH_ACT_FINISH);

	a->status = status;
	a->lease = status == 0 ? p->granted : 0;
	p->reported = true;
	if (status < 0 || p->inflight == 0)
		p->state = DHASH_CODED_DONE;
}

void dhash__cput_init(struct dhash__cput *p, uint32_t m, uint32_t n, uint64_t lease_until)
{
	memset(p, 0, sizeof(*p));
	p->m = m;
	p->n = n;
	p->happy = dhash_coded_happy(m, n);
	p->lease_until = lease_until;
	dhash__act_push(&p->q, DHASH_ACT_LOOKUP)->nsucc = coded_nsucc(n);
}

void dhash__cput_init_repair(struct dhash__cput *p, uint32_t m, uint32_t n, uint64_t lease_until,
                             const struct cfs_node *holders, uint32_t nholders, uint32_t mask)
{
	memset(p, 0, sizeof(*p));
	p->m = m;
	p->n = n;
	p->lease_until = lease_until;
	p->ncand = nholders < n ? nholders : n;
	memcpy(p->cand, holders, p->ncand * sizeof(*holders));
	p->state = DHASH_CODED_RUN;
	for (uint32_t i = 0; i < p->ncand; i++)
		if (mask >> i & 1) {
			p->happy++;
			cput_send(p, i);
		}
	if (p->happy == 0)
		cput_finish(p, -EINVAL);
}

void dhash__cput_fini(struct dhash__cput *p)
{
	cfs_actq_free(&p->q);
}

bool dhash__cput_next(struct dhash__cput *p, struct dhash__act *ret)
{
	return cfs_actq_pop(&p->q, ret, sizeof(*ret));
}

bool dhash__cput_idle(const struct dhash__cput *p)
{
	return p->state == DHASH_CODED_DONE && p->inflight == 0;
}

static void cput_send(struct dhash__cput *p, uint32_t ci)
{
	dhash__act_push(&p->q, DHASH_ACT_STORE)->i = ci;
	p->cst[ci] = DHASH_PC_STORING;
	p->inflight++;
	p->rpcs++;
}

void dhash__cput_on_lookup(struct dhash__cput *p, const struct chord_lookup_result *r)
{
	if (p->state != DHASH_CODED_LOOKUP)
		return;
	p->rpcs += r->rpcs;
	p->timeouts += r->timeouts;
	if (r->status < 0) {
		cput_finish(p, r->status);
		return;
	}
	p->ncand = take_holders(p->cand, p->n, r);
	if (p->ncand < p->happy) {
		cput_finish(p, -EHOSTUNREACH);
		return;
	}
	p->state = DHASH_CODED_RUN;
	for (uint32_t i = 0; i < p->ncand; i++)
		cput_send(p, i);
}

void dhash__cput_on_store(struct dhash__cput *p, uint32_t ci, const struct dhash__reply *rep)
{
	if (p->inflight > 0)
		p->inflight--;
	if (p->state != DHASH_CODED_RUN || ci >= p->ncand || p->cst[ci] != DHASH_PC_STORING)
		return;
	if (rep && rep->status == -ECANCELED && !p->reported) {
		cput_finish(p, -ECANCELED);
		return;
	}
	if (rep && rep->status == 0 && (rep->flags & DHASH_STORE_R_CHALLENGE) && rep->nonce &&
	    rep->from && !p->challenged_at[ci]) {
		struct dhash__act *a = dhash__act_push(&p->q, DHASH_ACT_KEEP_NONCE);
		a->addr = *rep->from;
		memcpy(a->nonce, rep->nonce, CFS_NONCE_BYTES);
		p->challenged_at[ci] = 1;
		cput_send(p, ci);
		return;
	}
	if (rep && rep->status == 0 && !(rep->flags & DHASH_STORE_R_CHALLENGE)) {
		uint64_t g = rep->lease_until ? rep->lease_until : p->lease_until;
		p->cst[ci] = DHASH_PC_HOLDS;
		p->acked++;
		if (!p->granted || g < p->granted)
			p->granted = g;
		if (p->acked >= p->happy && !p->reported) {
			cput_finish(p, 0);
			return;
		}
	} else {
		int st = !rep ? -EHOSTUNREACH : rep->status == 0 ? -EACCES : rep->status;
		p->cst[ci] = st == -ETIMEDOUT ? DHASH_PC_SILENT : DHASH_PC_REFUSED;
		p->timeouts += st == -ETIMEDOUT;
		if (!p->miss || (p->miss == -ETIMEDOUT && st != -ETIMEDOUT))
			p->miss = st;
	}
	if (p->inflight == 0 && p->reported)
		p->state = DHASH_CODED_DONE;
	else if (p->inflight == 0)
		cput_finish(p, p->miss && p->miss != -ETIMEDOUT ? p->miss : -EREMOTEIO);
}

/* ------------------------------------------------------------ get */

static void cget_finish(struct dhash__cget *g, int status)
{
	struct dhash__act *a = dhash__act_push(&g->q, DHASH_ACT_FINISH);

	a->status = status;
	a->kind = DHASH_KIND_CHASH;
	if (status == 0) {
		a->data = g->block;
		a->len = g->block_len;
	}
	g->state = DHASH_CODED_DONE;
}

void dhash__cget_init(struct dhash__cget *g, const struct cfs_id *key, uint32_t m, uint32_t n)
{
	memset(g, 0, sizeof(*g));
	g->key = *key;
	g->m = m;
	g->n = n;
	dhash__act_push(&g->q, DHASH_ACT_LOOKUP)->nsucc = coded_nsucc(n);
}

void dhash__cget_fini(struct dhash__cget *g)
{
	for (uint32_t i = 0; i < SFSRO_CODE_N_MAX; i++)
		free(g->frag[i]);
	free(g->block);
	memset(g->frag, 0, sizeof(g->frag));
	g->block = NULL;
	cfs_actq_free(&g->q);
}

bool dhash__cget_next(struct dhash__cget *g, struct dhash__act *ret)
{
	return cfs_actq_pop(&g->q, ret, sizeof(*ret));
}

bool dhash__cget_idle(const struct dhash__cget *g)
{
	return g->state == DHASH_CODED_DONE && g->inflight == 0 && !g->walking;
}

/* FETCH from the next holder not asked yet; false when none is left (a
 * walk may then have been started, for more). */
static bool cget_ask_next(struct dhash__cget *g)
{
	if (g->next_cand >= g->ncand) {
		if (!g->walking && g->walks < DHASH_CODED_WALKS && g->ncand < CFS_MSG_MAX_NODES) {
			dhash__act_push(&g->q, DHASH_ACT_LOOKUP)->nsucc = coded_nsucc(g->n);
			g->walking = true;
			g->walks++;
		}
		return false;
	}
	dhash__act_push(&g->q, DHASH_ACT_FETCH)->i = g->next_cand++;
	g->inflight++;
	g->rpcs++;
	return true;
}

/* Fewer than m good fragments, nothing out: the get has failed. */
static void cget_maybe_fail(struct dhash__cget *g)
{
	if (g->state == DHASH_CODED_RUN && g->inflight == 0 && !g->walking)
		cget_finish(g, g->miss ? g->miss : -ENOENT);
}

/* Add the answer's servers at IPs not asked yet, the new ones nearest
 * first (an unknown latency last; stable). Latencies in the same whole
 * millisecond tie: those holders stay in ring order, data fragments
 * (0..m-1, on the first m) before parity, and a block from its data
 * fragments is copied, not decoded and hashed again (sfsro_code_decode).
 * The first answer gives at most n holders, a walk's as many as fit. */
static void cget_add(struct dhash__cget *g, const struct chord_lookup_result *r, const uint64_t *rtt_us)
{
	uint64_t lat[CFS_MSG_MAX_NODES];
	uint32_t first = g->ncand, cap = g->walks ? CFS_MSG_MAX_NODES : g->n;

	for (uint32_t i = 0; i < r->n && g->ncand < cap; i++) {
		bool dup = false;
		cfs_id_add_pow2(&g->walk_key, &r->succ[i].id, 0);
		for (uint32_t j = 0; j < g->ncand && !dup; j++)
			dup = cfs_addr_same_ip(&g->cand[j].addr, &r->succ[i].addr);
		if (dup)
			continue;
		uint64_t l = rtt_us && rtt_us[i] ? rtt_us[i] / DHASH_CODED_RTT_TIE_US : UINT64_MAX;
		uint32_t j = g->ncand++;
		for (; j > first && lat[j - 1] > l; j--) {
			g->cand[j] = g->cand[j - 1];
			lat[j] = lat[j - 1];
		}
		g->cand[j] = r->succ[i];
		lat[j] = l;
	}
}

void dhash__cget_on_lookup(struct dhash__cget *g, const struct chord_lookup_result *r,
                           const uint64_t *rtt_us)
{
	if (g->state == DHASH_CODED_RUN && g->walking) { /* a walk's answer */
		g->walking = false;
		g->rpcs += r->rpcs;
		g->timeouts += r->timeouts;
		if (r->status == -ECANCELED) {
			cget_finish(g, -ECANCELED);
			return;
		}
		if (r->status == 0)
			cget_add(g, r, rtt_us);
		while (g->inflight < g->m - g->have + DHASH_CODED_EXTRA && cget_ask_next(g))
			;
		cget_maybe_fail(g);
		return;
	}
	if (g->state != DHASH_CODED_LOOKUP) {
		g->walking = false; /* a walk's answer after the end */
		return;
	}
	g->rpcs += r->rpcs;
	g->timeouts += r->timeouts;
	g->lookup_us = r->latency_us;
	if (r->status < 0 || r->n == 0) {
		cget_finish(g, r->status < 0 ? r->status : -EHOSTUNREACH);
		return;
	}
	cget_add(g, r, rtt_us);
	g->state = DHASH_CODED_RUN;
	for (uint32_t i = 0; i < g->m + DHASH_CODED_EXTRA; i++)
		if (!cget_ask_next(g))
			break;
}

/* A fragment that verified: kept by its index; true when it is new. */
static bool cget_keep(struct dhash__cget *g, const struct sfsro_frag *f, const uint8_t *p, size_t len)
{
	if (g->frag[f->index])
		return false;
	g->frag[f->index] = xmalloc(len);
	memcpy(g->frag[f->index], p, len);
	g->flen[f->index] = len;
	g->have++;
	return true;
}

static void cget_decode(struct dhash__cget *g, uint32_t block_len)
{
	const uint8_t *in[SFSRO_CODE_N_MAX];
	size_t got = 0;

	for (uint32_t i = 0; i < g->n; i++)
		in[i] = g->frag[i];
	g->block = xmalloc(block_len);
	int r = sfsro_code_decode(&g->key, in, g->flen, g->n, g->block, block_len, &got);
	g->block_len = got;
	cget_finish(g, r < 0 ? r : 0);
}

void dhash__cget_on_fetch(struct dhash__cget *g, uint32_t ci, const struct dhash__reply *rep)
{
	struct sfsro_frag f;
	int st;

	if (g->inflight > 0)
		g->inflight--;
	if (g->state != DHASH_CODED_RUN || ci >= g->ncand)
		return;
	if (rep && rep->status == -ECANCELED) {
		cget_finish(g, -ECANCELED);
		return;
	}
	st = !rep ? -EHOSTUNREACH : rep->status;
	if (st == 0 && (rep->kind != DHASH_KIND_FRAG ||
	                sfsro_frag_verify(&g->key, rep->data, rep->len, &f) < 0)) {
		g->bad++;
		dhash__act_push(&g->q, DHASH_ACT_SUSPECT)->i = ci;
		st = -EBADMSG;
	} else if (st == 0 && (f.m != g->m || f.n != g->n)) {
		cget_finish(g, -EPROTO); /* the key is another code's: the caller's m, n are wrong */
		return;
	} else if (st == 0 && !cget_keep(g, &f, rep->data, rep->len)) {
		g->dups++;
		st = -ENOENT; /* an index we have: no help */
	}
	if (st == 0 && g->have == g->m) {
		cget_decode(g, f.block_len);
		return;
	}
	if (st < 0) {
		g->timeouts += st == -ETIMEDOUT;
		g->miss = dhash__get_miss(g->miss, st);
		(void)cget_ask_next(g);
	}
	cget_maybe_fail(g);
}
