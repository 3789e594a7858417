/*
 * A put, a have and a refresh of one key as state machines that do no I/O
 * (client_sm.h); client.c carries out what they ask for.
 *
 * put: LOOKUP the key's successors, then STORE to the first with
 * DHASH_STORE_F_PRIMARY: the successor stores the block and replicates it
 * on the next k-1 (CFS 5.1). A silent server is not a refusal: the next
 * successor takes the block, and a later success is the put's answer. A
 * server enforcing quotas may answer with a nonce instead of storing (CFS
 * 5.4: proof that we receive at our address); the STORE goes again to the
 * same server with that nonce, once per put. Any other refusal (a bad
 * block, a stale root, a full disk) ends the put with that error: another
 * server would refuse it for the same reason, or should not be asked to
 * take it instead.
 *
 * have: LOOKUP, then HAVE to the successor, the next one if it is silent.
 * refresh: LOOKUP, then REFRESH to each of the k successors at once (CFS
 * 5.5: leases instead of delete); if none of them answered, all once more
 * with a longer timeout before the refresh fails. A REFRESH is charged like
 * a put: a server enforcing quotas answers the first with a nonce, and the
 * REFRESH goes again to that server with it, once per server.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

/* ------------------------------------------------------------ put */

static void put_finish(struct dhash__put *p, int status, uint64_t lease)
{
	struct dhash__act *a = dhash__actq_push(&p->q, DHASH_ACT_FINISH);

	a->status = status;
	a->lease = lease;
	p->state = DHASH_PUT_DONE;
}

void dhash__put_init(struct dhash__put *p, uint32_t replicas, uint64_t lease_until)
{
	memset(p, 0, sizeof(*p));
	p->replicas = replicas;
	p->lease_until = lease_until;
	dhash__actq_push(&p->q, DHASH_ACT_LOOKUP)->nsucc = replicas;
}

void dhash__put_fini(struct dhash__put *p)
{
	dhash__actq_free(&p->q);
}

bool dhash__put_next(struct dhash__put *p, struct dhash__act *ret)
{
	return dhash__actq_pop(&p->q, ret);
}

/* STORE to the next successor in ring order (CFS 5.1: after the key's
 * successor fails, its next successor is responsible). */
static void store_next(struct dhash__put *p)
{
	if (p->next_cand < p->ncand) {
		dhash__actq_push(&p->q, DHASH_ACT_STORE)->i = p->next_cand++;
		p->rpcs++;
		return;
	}
	put_finish(p, p->miss ? p->miss : -EHOSTUNREACH, 0);
}

void dhash__put_on_lookup(struct dhash__put *p, const struct chord_lookup_result *r)
{
	if (p->state != DHASH_PUT_LOOKUP)
		return;
	p->rpcs += r->rpcs;
	p->timeouts += r->timeouts;
	if (r->status < 0 || r->n == 0) {
		put_finish(p, r->status < 0 ? r->status : -EHOSTUNREACH, 0);
		return;
	}
	p->ncand = r->n;
	memcpy(p->cand, r->succ, r->n * sizeof(r->succ[0]));
	p->state = DHASH_PUT_STORE;
	store_next(p);
}

void dhash__put_on_reply(struct dhash__put *p, const struct dhash__reply *rep)
{
	if (p->state != DHASH_PUT_STORE)
		return;
	if (rep->status == 0 && (rep->flags & DHASH_STORE_R_CHALLENGE)) {
		/* CFS 5.4: the server wants proof that we receive at our
		 * address: its nonce, sent back with the block (once a put). */
		if (p->challenged) {
			put_finish(p, -EACCES, 0);
			return;
		}
		p->challenged = true;
		struct dhash__act *a = dhash__actq_push(&p->q, DHASH_ACT_KEEP_NONCE);
		a->addr = *rep->from;
		memcpy(a->nonce, rep->nonce, CFS_NONCE_BYTES);
		p->next_cand--;
		store_next(p);
	} else if (rep->status == 0) {
		/* A server that names no lease (0) granted what was asked. */
		put_finish(p, 0, rep->lease_until ? rep->lease_until : p->lease_until);
	} else if (rep->status == -ETIMEDOUT) {
		p->timeouts++;
		p->miss = -ETIMEDOUT;
		store_next(p);
	} else {
		put_finish(p, rep->status, 0); /* a refusal, or -ECANCELED */
	}
}

void dhash__put_on_send_failed(struct dhash__put *p)
{
	if (p->state == DHASH_PUT_STORE)
		store_next(p);
}

/* ------------------------------------------------------------ have, refresh */

static void probe_finish(struct dhash__probe *pr, int status)
{
	struct dhash__act *a = dhash__actq_push(&pr->q, DHASH_ACT_FINISH);

	a->status = status;
	a->found = pr->found;
	a->lease = pr->found ? pr->granted : 0;
	pr->state = DHASH_PROBE_DONE;
}

void dhash__probe_init(struct dhash__probe *pr, bool refresh, uint32_t replicas,
                       uint64_t lease_until)
{
	memset(pr, 0, sizeof(*pr));
	pr->refresh = refresh;
	pr->replicas = replicas;
	pr->lease_until = lease_until;
	dhash__actq_push(&pr->q, DHASH_ACT_LOOKUP)->nsucc = replicas;
}

void dhash__probe_fini(struct dhash__probe *pr)
{
	dhash__actq_free(&pr->q);
}

bool dhash__probe_next(struct dhash__probe *pr, struct dhash__act *ret)
{
	return dhash__actq_pop(&pr->q, ret);
}

static void probe_send(struct dhash__probe *pr, uint32_t ci, uint32_t timeout_ms)
{
	struct dhash__act *a = dhash__actq_push(&pr->q, pr->refresh ? DHASH_ACT_REFRESH : DHASH_ACT_HAVE);

	a->i = ci;
	a->timeout_ms = timeout_ms;
	pr->rpcs++;
	pr->waiting++;
}

/* HAVE to the next successor. */
static void have_next(struct dhash__probe *pr)
{
	if (pr->next_cand < pr->ncand) {
		probe_send(pr, pr->next_cand++, 0);
		return;
	}
	probe_finish(pr, -EHOSTUNREACH);
}

/* REFRESH to each distinct server among the first k successors, the
 * replicas (CFS 5.1), at once; timeout_ms 0 the first time. */
static void refresh_all(struct dhash__probe *pr, uint32_t timeout_ms)
{
	for (uint32_t i = 0; i < pr->ncand; i++)
		probe_send(pr, i, timeout_ms);
}

void dhash__probe_on_lookup(struct dhash__probe *pr, const struct chord_lookup_result *r)
{
	if (pr->state != DHASH_PROBE_LOOKUP)
		return;
	pr->rpcs += r->rpcs;
	pr->timeouts += r->timeouts;
	if (r->status < 0 || r->n == 0) {
		probe_finish(pr, r->status < 0 ? r->status : -EHOSTUNREACH);
		return;
	}
	pr->state = DHASH_PROBE_ASK;
	if (!pr->refresh) {
		pr->ncand = r->n;
		memcpy(pr->cand, r->succ, r->n * sizeof(r->succ[0]));
		have_next(pr);
		return;
	}
	for (uint32_t i = 0; i < r->n && i < pr->replicas; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < pr->ncand && !dup; j++)
			dup = cfs_addr_eq(&pr->cand[j].addr, &r->succ[i].addr);
		if (!dup)
			pr->cand[pr->ncand++] = r->succ[i];
	}
	refresh_all(pr, 0);
}

/* A REFRESH round ended (nothing out). No replica answered: silent is not
 * dead (a busy server, a lost datagram, a full window), so all of them
 * once more, with a longer timeout, before the refresh fails. A publisher
 * takes a failed refresh for an error, not for "absent". */
static void refresh_round_done(struct dhash__probe *pr)
{
	if (pr->answered) {
		probe_finish(pr, 0);
	} else if (pr->state == DHASH_PROBE_ASK) {
		pr->state = DHASH_PROBE_RETRY;
		refresh_all(pr, DHASH_RETRY_TIMEOUT_MS);
	} else {
		probe_finish(pr, -ETIMEDOUT);
	}
}

/* CFS 5.4: a server wants proof that we receive at our address before it
 * charges us the extension. Keep its nonce and ask it again, once; true
 * when the REFRESH went out again. A second challenge counts as an answer
 * without the key. */
static bool refresh_challenged(struct dhash__probe *pr, const struct dhash__reply *rep)
{
	uint32_t ci = 0;

	while (ci < pr->ncand && !(rep->from && cfs_addr_eq(&pr->cand[ci].addr, rep->from)))
		ci++;
	if (ci == pr->ncand || pr->challenged[ci] || !rep->nonce)
		return false;
	pr->challenged[ci] = true;
	struct dhash__act *a = dhash__actq_push(&pr->q, DHASH_ACT_KEEP_NONCE);
	a->addr = pr->cand[ci].addr;
	memcpy(a->nonce, rep->nonce, CFS_NONCE_BYTES);
	probe_send(pr, ci, pr->state == DHASH_PROBE_RETRY ? DHASH_RETRY_TIMEOUT_MS : 0);
	return true;
}

void dhash__probe_on_reply(struct dhash__probe *pr, const struct dhash__reply *rep)
{
	bool bit = rep->status == 0 && rep->len >= 1 && (rep->data[0] & 1);

	if (pr->state == DHASH_PROBE_DONE || pr->state == DHASH_PROBE_LOOKUP)
		return;
	pr->waiting--;
	if (rep->status == -ECANCELED) {
		if (!pr->refresh || pr->waiting == 0)
			probe_finish(pr, -ECANCELED);
		return;
	}
	if (pr->refresh && rep->status == 0 && (rep->flags & DHASH_STORE_R_CHALLENGE) &&
	    refresh_challenged(pr, rep))
		return;
	if (rep->status == -ETIMEDOUT)
		pr->timeouts++;
	else if (rep->status == 0)
		pr->answered++;
	pr->found += bit;
	if (!pr->refresh) {
		if (rep->status == 0)
			probe_finish(pr, 0);
		else
			have_next(pr); /* silent, or an error: ask the next successor */
		return;
	}
	if (bit) { /* the least lease any replica granted; 0: what was asked */
		uint64_t g = rep->lease_until ? rep->lease_until : pr->lease_until;
		if (!pr->granted || g < pr->granted)
			pr->granted = g;
	}
	if (pr->waiting == 0)
		refresh_round_done(pr);
}

void dhash__probe_on_send_failed(struct dhash__probe *pr)
{
	if (pr->state == DHASH_PROBE_DONE || pr->state == DHASH_PROBE_LOOKUP)
		return;
	pr->waiting--;
	if (!pr->refresh) {
		have_next(pr);
	} else if (pr->waiting == 0) {
		/* No REFRESH of this round could be sent (no reply can come
		 * before the sends are all out). */
		probe_finish(pr, pr->state == DHASH_PROBE_ASK ? -EHOSTUNREACH : -ETIMEDOUT);
	}
}
