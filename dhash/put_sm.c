/*
 * A put, a have and a refresh of one key as state machines that do no I/O
 * (client_sm.h); client.c carries out what they ask for.
 *
 * put: LOOKUP the key's successors; the first k distinct ones are its
 * responsible servers (fewer on a small ring). STORE to the first with
 * DHASH_STORE_F_PRIMARY: the successor stores the block, replicates it on
 * the next k-1 (CFS 5.1) and answers once those pushes are acknowledged or
 * timed out. A silent server is not a refusal: the next successor takes
 * the block. A server enforcing quotas may answer with a nonce instead of
 * storing (CFS 5.4: proof that we receive at our address); the STORE goes
 * again to the same server with that nonce, once per server and put. Any
 * other refusal (a bad block, a stale root, a full disk) ends the put with
 * that error: another server would refuse it for the same reason, or
 * should not be asked to take it instead. A server whose operator denies
 * the key (DHASH_DENIED) refuses for itself alone: the next one is asked.
 *
 * One hostile member cannot lose acknowledged puts: the ack is
 * one vote; the put is acknowledged once a majority, floor(n/2)+1 of the n
 * responsible servers, confirm (HAVE "yes"), else the client stores to
 * those that lack the block itself and fails with -EREMOTEIO when still
 * short. Before it stores copies of its own, the key is looked up once
 * more: an honest primary that is not the key's successor in its own view
 * pushes nowhere, and a list that a second lookup does not repeat is
 * dropped for the new one (the put starts over there) rather than filled
 * with copies no later lookup would find. A root is STOREd to all n at
 * once instead (HAVE cannot tell an older root from the new one).
 *
 * have: LOOKUP, then HAVE to a majority of the responsible servers at
 * once, one more for each "no" or silence; "present" only on a majority.
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

uint32_t dhash__majority(uint32_t n)
{
	return n ? n / 2 + 1 : 0;
}

/* The key's responsible servers: the first k successors the lookup named
 * at distinct IP addresses (CFS 5.1: a process's virtual servers count
 * once; so does one address, which may hold up to 64 valid IDs
 * at 64 ports — one IP is one vote, or one liar naming its own IDs after
 * the key would be the whole quorum). The lookup checks this list before
 * it returns it; the quorum below is only as good as the list. */
static uint32_t take_responsible(struct cfs_node *cand, uint32_t k, const struct chord_lookup_result *r)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < r->n && n < k && n < CFS_MSG_MAX_NODES; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_same_ip(&cand[j].addr, &r->succ[i].addr);
		if (!dup)
			cand[n++] = r->succ[i];
	}
	return n;
}

/* Confirmations needed: a majority of the servers found, but never of
 * fewer than the caller knows the ring has (min_servers, from its own
 * successor list): an answer naming too few addresses cannot lower the
 * bar, it makes the put fail instead. */
static uint32_t quorum(uint32_t found, uint32_t min_servers, uint32_t k)
{
	uint32_t n = found > min_servers ? found : min_servers;

	return dhash__majority(n < k ? n : k);
}

static uint32_t lookup_nsucc(uint32_t replicas)
{
	uint32_t n = replicas + DHASH_GET_SPARES; /* spares: virtual servers of one process */

	return n < CFS_MSG_MAX_NODES ? n : CFS_MSG_MAX_NODES;
}

static void put_finish(struct dhash__put *p, int status, uint64_t lease)
{
	struct dhash__act *a = dhash__act_push(&p->q, DHASH_ACT_FINISH);

	a->status = status;
	a->lease = lease;
	p->state = DHASH_PUT_DONE;
}

void dhash__put_init(struct dhash__put *p, uint32_t replicas, uint64_t lease_until)
{
	memset(p, 0, sizeof(*p));
	p->replicas = replicas;
	p->lease_until = lease_until;
	dhash__act_push(&p->q, DHASH_ACT_LOOKUP)->nsucc = lookup_nsucc(replicas);
}

void dhash__put_fini(struct dhash__put *p)
{
	cfs_actq_free(&p->q);
}

bool dhash__put_next(struct dhash__put *p, struct dhash__act *ret)
{
	return cfs_actq_pop(&p->q, ret, sizeof(*ret));
}

bool dhash__put_idle(const struct dhash__put *p)
{
	return p->state == DHASH_PUT_DONE && p->inflight == 0;
}

static struct dhash__act *put_send(struct dhash__put *p, enum dhash__act_type type, uint32_t ci)
{
	struct dhash__act *a = dhash__act_push(&p->q, type);

	a->i = ci;
	p->cst[ci] = type == DHASH_ACT_STORE ? DHASH_PC_STORING : DHASH_PC_ASKING;
	p->inflight++;
	p->rpcs++;
	p->haves += type == DHASH_ACT_HAVE;
	return a;
}

/* A majority holds the block: the put is acknowledged, with the least
 * lease any STORE ack named (0: what was asked). */
static bool put_maybe_done(struct dhash__put *p)
{
	if (p->confirmed < p->need)
		return false;
	put_finish(p, 0, p->granted ? p->granted : p->lease_until);
	return true;
}

/* A STORE's timeout: the driver's default the first round, doubled for
 * each round after every server was silent. */
static uint32_t store_timeout(const struct dhash__put *p)
{
	return p->store_retries ? DHASH_STORE_TIMEOUT_MS << p->store_retries : 0;
}

/* STORE to the next responsible server in ring order (CFS 5.1: after the
 * key's successor fails, its next successor is responsible). */
static void store_next(struct dhash__put *p)
{
	if (p->next_cand < p->ncand) {
		put_send(p, DHASH_ACT_STORE, p->next_cand++)->timeout_ms = store_timeout(p);
		return;
	}
	if (p->miss == -ETIMEDOUT && p->store_retries < DHASH_STORE_RETRIES) {
		/* Every responsible server was silent. On a loaded
		 * ring that is a busy one more often than a dead one (with k = 1
		 * there is no other to ask), so the round goes again, each time
		 * with twice the timeout, before the put fails. */
		p->store_retries++;
		for (uint32_t i = 0; i < p->ncand; i++)
			if (p->cst[i] == DHASH_PC_SILENT)
				p->cst[i] = DHASH_PC_NONE;
		p->next_cand = 0;
		put_send(p, DHASH_ACT_STORE, p->next_cand++)->timeout_ms = store_timeout(p);
		return;
	}
	put_finish(p, p->miss ? p->miss : -EHOSTUNREACH, 0);
}

/* Our own STOREs to every responsible server that said no or was silent
 * (once a put). The one that acknowledged our first STORE is never asked
 * again: a server that acknowledges and then lets its replicas lack the
 * block is what this step works around, not something to trust twice.
 * When none of the others holds the block its ack is withdrawn, so that a
 * majority must come from the others (a liar acking and dropping leaves
 * then no put acknowledged on its word), and it is reported as a suspect
 * so that lookups route around it (Castro et al. 2002). */
static void restore_now(struct dhash__put *p)
{
	uint32_t sent = 0, others = 0, lack = 0;

	p->state = DHASH_PUT_RESTORE;
	for (uint32_t i = 0; i < p->ncand; i++) {
		others += i != p->primary && p->cst[i] == DHASH_PC_HOLDS;
		lack += i != p->primary && p->cst[i] == DHASH_PC_LACKS;
	}
	if (others == 0 && p->cst[p->primary] == DHASH_PC_HOLDS) {
		/* Not one copy of its pushes is where we looked (and it answered
		 * only after them, server.c): its ack no longer counts. */
		p->confirmed--;
		p->granted = 0; /* nor the lease it named */
		/* Suspected on evidence only: servers that answered "no".
		 * Silence (a lost datagram, a slow link) or an answer naming
		 * no other server (a ring still forming) proves nothing. */
		if (lack > 0) {
			p->suspect = true;
			dhash__act_push(&p->q, DHASH_ACT_SUSPECT)->i = p->primary;
		}
	}
	for (uint32_t i = 0; i < p->ncand; i++)
		if (p->cst[i] == DHASH_PC_LACKS || p->cst[i] == DHASH_PC_SILENT) {
			put_send(p, DHASH_ACT_STORE, i);
			p->restores++;
			sent++;
		}
	if (sent == 0)
		put_finish(p, p->miss ? p->miss : -EREMOTEIO, 0);
}

/* The primary acknowledged and servers after it said they lack the block.
 * Either it lies, or our list of the key's servers is wrong: an honest
 * server that is not the key's successor in its own view stores a
 * client's STORE but pushes it nowhere (server.c), and copies of our own
 * on a wrong list would be acknowledged where no lookup finds them. So
 * the key is looked up once more first (nothing is in flight then): the
 * same servers again, and the primary is the one at fault
 * (restore_now); others, and the put starts over on them, nobody
 * accused. */
static void restore(struct dhash__put *p)
{
	uint32_t lack = 0;

	for (uint32_t i = 0; i < p->ncand; i++)
		lack += i != p->primary && p->cst[i] == DHASH_PC_LACKS;
	if (p->relooked || lack == 0 || p->inflight > 0 || p->cst[p->primary] != DHASH_PC_HOLDS) {
		restore_now(p);
		return;
	}
	for (uint32_t i = 0; i < p->ncand; i++)
		if (i != p->primary && p->cst[i] == DHASH_PC_HOLDS) {
			restore_now(p); /* one of its copies is where we looked */
			return;
		}
	p->relooked = true;
	p->state = DHASH_PUT_RELOOK;
	dhash__act_push(&p->q, DHASH_ACT_LOOKUP)->nsucc = lookup_nsucc(p->replicas);
}

/* The second lookup's answer (see restore): the same responsible servers,
 * or none, and the primary's word is weighed as before; others, and the
 * put starts again with them. */
static void relook_done(struct dhash__put *p, const struct chord_lookup_result *r)
{
	struct cfs_node cand[CFS_MSG_MAX_NODES];
	uint32_t n = r->status < 0 ? 0 : take_responsible(cand, p->replicas, r);
	bool same = n == p->ncand;

	if (r->status == -ECANCELED) {
		put_finish(p, -ECANCELED, 0);
		return;
	}
	for (uint32_t i = 0; i < n && same; i++)
		same = cfs_id_eq(&cand[i].id, &p->cand[i].id);
	if (n == 0 || same) {
		restore_now(p);
		return;
	}
	p->moved++;
	memcpy(p->cand, cand, n * sizeof(cand[0]));
	p->ncand = n;
	memset(p->cst, 0, sizeof(p->cst));
	memset(p->challenged_at, 0, sizeof(p->challenged_at));
	p->next_cand = 0;
	p->confirmed = 0;
	p->granted = 0;
	p->primary = 0;
	p->miss = 0;
	p->store_retries = 0;
	p->need = quorum(p->ncand, p->min_servers, p->replicas);
	p->state = DHASH_PUT_STORE;
	store_next(p);
}

/* HAVE to just enough of the other responsible servers, in
 * parallel, to reach a majority with those that confirmed; another one for
 * each that says no or is silent; when none is left to ask, our own STOREs. */
static void confirm_more(struct dhash__put *p)
{
	uint32_t asking = 0;

	if (put_maybe_done(p))
		return;
	for (uint32_t i = 0; i < p->ncand; i++)
		asking += p->cst[i] == DHASH_PC_ASKING;
	for (uint32_t i = 0; i < p->ncand && p->confirmed + asking < p->need; i++)
		if (p->cst[i] == DHASH_PC_NONE) {
			put_send(p, DHASH_ACT_HAVE, i);
			asking++;
		}
	if (asking == 0)
		restore(p);
}

/* The last of a round of parallel STOREs (a root's, or our own after a
 * "no") is back without a majority. */
static void stores_round_done(struct dhash__put *p)
{
	if (put_maybe_done(p) || p->inflight > 0)
		return;
	put_finish(p, p->miss && p->miss != -ETIMEDOUT ? p->miss : -EREMOTEIO, 0);
}

void dhash__put_on_lookup(struct dhash__put *p, const struct chord_lookup_result *r)
{
	if (p->state != DHASH_PUT_LOOKUP && p->state != DHASH_PUT_RELOOK)
		return;
	p->rpcs += r->rpcs;
	p->timeouts += r->timeouts;
	if (p->state == DHASH_PUT_RELOOK) {
		relook_done(p, r);
		return;
	}
	if (r->status < 0 || r->n == 0) {
		put_finish(p, r->status < 0 ? r->status : -EHOSTUNREACH, 0);
		return;
	}
	/* A ring with fewer than k servers: a majority of those there are. */
	p->ncand = take_responsible(p->cand, p->replicas, r);
	p->need = quorum(p->ncand, p->min_servers, p->replicas);
	if (p->store_all) {
		p->state = DHASH_PUT_RESTORE;
		for (uint32_t i = 0; i < p->ncand; i++)
			put_send(p, DHASH_ACT_STORE, i);
		return;
	}
	p->state = DHASH_PUT_STORE;
	store_next(p);
}

/* CFS 5.4: the server wants proof that we receive at our address: its
 * nonce, sent back with the block, once per server and put. */
static void store_challenged(struct dhash__put *p, uint32_t ci, const struct dhash__reply *rep)
{
	struct dhash__act *a = dhash__act_push(&p->q, DHASH_ACT_KEEP_NONCE);

	a->addr = *rep->from;
	memcpy(a->nonce, rep->nonce, CFS_NONCE_BYTES);
	p->challenged_at[ci] = 1;
	p->challenged = true;
	put_send(p, DHASH_ACT_STORE, ci)->timeout_ms = store_timeout(p);
}

/* A STORE of a parallel round (a root's, or our own after a "no") ended:
 * an ack confirms; a refusal or silence does not, and a refusal is the
 * error if no majority is reached. */
static void restore_reply(struct dhash__put *p, uint32_t ci, const struct dhash__reply *rep)
{
	if (rep->status == 0) {
		uint64_t g = rep->lease_until ? rep->lease_until : p->lease_until;
		p->cst[ci] = DHASH_PC_HOLDS;
		p->confirmed++;
		if (!p->granted || g < p->granted)
			p->granted = g;
	} else if (rep->status == -ETIMEDOUT) {
		p->cst[ci] = DHASH_PC_SILENT;
		p->timeouts++;
		if (!p->miss)
			p->miss = -ETIMEDOUT;
	} else {
		p->cst[ci] = DHASH_PC_REFUSED;
		if (!p->miss || p->miss == -ETIMEDOUT)
			p->miss = rep->status;
	}
	stores_round_done(p);
}

void dhash__put_on_store(struct dhash__put *p, uint32_t ci, const struct dhash__reply *rep)
{
	if (p->inflight > 0)
		p->inflight--;
	if ((p->state != DHASH_PUT_STORE && p->state != DHASH_PUT_RESTORE) || ci >= p->ncand ||
	    p->cst[ci] != DHASH_PC_STORING)
		return;
	if (rep->status == -ECANCELED) {
		put_finish(p, -ECANCELED, 0);
		return;
	}
	if (rep->status == 0 && (rep->flags & DHASH_STORE_R_CHALLENGE)) {
		if (p->challenged_at[ci]) {
			if (p->state == DHASH_PUT_STORE) {
				put_finish(p, -EACCES, 0);
				return;
			}
			restore_reply(p, ci, &(struct dhash__reply){ .status = -EACCES });
			return;
		}
		store_challenged(p, ci, rep);
		return;
	}
	if (p->state == DHASH_PUT_RESTORE) {
		restore_reply(p, ci, rep);
		return;
	}
	if (rep->status == 0) {
		/* The primary took it, and (server.c) answered once its pushes to
		 * the next servers were acknowledged or timed out: one vote. */
		p->cst[ci] = DHASH_PC_HOLDS;
		p->primary = ci;
		p->confirmed = 1;
		p->granted = rep->lease_until ? rep->lease_until : p->lease_until;
		p->state = DHASH_PUT_CONFIRM;
		confirm_more(p);
	} else if (rep->status == -ETIMEDOUT) {
		p->cst[ci] = DHASH_PC_SILENT;
		p->timeouts++;
		p->miss = -ETIMEDOUT;
		store_next(p);
	} else if (rep->status == DHASH_DENIED) {
		p->cst[ci] = DHASH_PC_REFUSED; /* this server's policy: not the block's fault */
		p->miss = DHASH_DENIED;
		store_next(p);
	} else {
		put_finish(p, rep->status, 0); /* a refusal: another would refuse too */
	}
}

void dhash__put_on_have(struct dhash__put *p, uint32_t ci, const struct dhash__reply *rep)
{
	if (p->inflight > 0)
		p->inflight--;
	if (p->state != DHASH_PUT_CONFIRM || ci >= p->ncand || p->cst[ci] != DHASH_PC_ASKING)
		return;
	if (rep->status == -ECANCELED) {
		put_finish(p, -ECANCELED, 0);
		return;
	}
	if (rep->status == 0 && rep->len >= 1 && (rep->data[0] & 1)) {
		p->cst[ci] = DHASH_PC_HOLDS;
		p->confirmed++;
	} else if (rep->status == 0) {
		p->cst[ci] = DHASH_PC_LACKS;
	} else {
		p->timeouts += rep->status == -ETIMEDOUT;
		p->cst[ci] = DHASH_PC_SILENT;
	}
	confirm_more(p);
}

void dhash__put_on_send_failed(struct dhash__put *p, uint32_t ci, enum dhash__act_type type)
{
	struct dhash__reply unsent = { .status = -ETIMEDOUT };

	if (type == DHASH_ACT_LOOKUP && p->state == DHASH_PUT_RELOOK) {
		restore_now(p); /* no second lookup: weigh the primary's word as it is */
		return;
	}
	if (p->state == DHASH_PUT_DONE || p->state == DHASH_PUT_LOOKUP) {
		if (p->inflight > 0)
			p->inflight--;
		return;
	}
	if (type == DHASH_ACT_HAVE) {
		dhash__put_on_have(p, ci, &unsent);
		return;
	}
	if (p->state == DHASH_PUT_STORE) { /* never sent: not a timeout */
		p->inflight--;
		p->rpcs--;
		p->cst[ci] = DHASH_PC_SILENT;
		store_next(p);
		return;
	}
	p->timeouts--; /* counted as never sent */
	dhash__put_on_store(p, ci, &unsent);
}

/* ------------------------------------------------------------ have, refresh */

static void probe_finish(struct dhash__probe *pr, int status)
{
	struct dhash__act *a = dhash__act_push(&pr->q, DHASH_ACT_FINISH);

	a->status = status;
	a->found = pr->found;
	a->lease = pr->found ? pr->granted : 0;
	pr->state = DHASH_PROBE_DONE;
}

bool dhash__probe_idle(const struct dhash__probe *pr)
{
	return pr->state == DHASH_PROBE_DONE && pr->waiting == 0;
}

void dhash__probe_init(struct dhash__probe *pr, bool refresh, uint32_t replicas,
                       uint64_t lease_until)
{
	memset(pr, 0, sizeof(*pr));
	pr->refresh = refresh;
	pr->replicas = replicas;
	pr->lease_until = lease_until;
	dhash__act_push(&pr->q, DHASH_ACT_LOOKUP)->nsucc = refresh ? replicas : lookup_nsucc(replicas);
}

void dhash__probe_fini(struct dhash__probe *pr)
{
	cfs_actq_free(&pr->q);
}

bool dhash__probe_next(struct dhash__probe *pr, struct dhash__act *ret)
{
	return cfs_actq_pop(&pr->q, ret, sizeof(*ret));
}

static void probe_send(struct dhash__probe *pr, uint32_t ci, uint32_t timeout_ms)
{
	struct dhash__act *a = dhash__act_push(&pr->q, pr->refresh ? DHASH_ACT_REFRESH : DHASH_ACT_HAVE);

	a->i = ci;
	a->timeout_ms = timeout_ms;
	pr->rpcs++;
	pr->waiting++;
}

/* HAVE counts "present" only when a majority of the key's
 * responsible servers say yes. Asked in parallel, just enough of them to
 * reach a majority, one more for each no or silence; the answer is in as
 * soon as a majority said yes or one can no longer be reached. One liar
 * saying "yes" among honest "no"s is then "absent", and the publisher
 * sends the block. Absent with nobody answering is an error, as before: a
 * have that reached nobody is not "absent". */
static void have_finish(struct dhash__probe *pr, int status, bool present)
{
	struct dhash__act *a = dhash__act_push(&pr->q, DHASH_ACT_FINISH);

	a->status = status;
	a->found = present;
	a->lease = 0;
	pr->state = DHASH_PROBE_DONE;
}

/* A HAVE's timeout: the transport's prediction the first round, then
 * DHASH_RETRY_TIMEOUT_MS doubled for each round after all were silent. */
static uint32_t have_timeout(const struct dhash__probe *pr)
{
	return pr->retries ? DHASH_RETRY_TIMEOUT_MS << (pr->retries - 1) : 0;
}

static void have_next(struct dhash__probe *pr)
{
	if (pr->found >= pr->need) {
		have_finish(pr, 0, true);
		return;
	}
	if (pr->found + pr->waiting + (pr->ncand - pr->next_cand) < pr->need) {
		/* No majority any more. Absent if anyone answered; else, as
		 * before, every server is asked (a loaded ring drops HAVEs)
		 * before the have fails. */
		if (pr->answered) {
			have_finish(pr, 0, false);
			return;
		} else if (pr->next_cand < pr->ncand) {
			if (pr->waiting == 0)
				probe_send(pr, pr->next_cand++, have_timeout(pr));
			return;
		} else if (pr->waiting > 0) {
			return;
		} else if (pr->have_timeouts == 0 || pr->retries == DHASH_HAVE_RETRIES) {
			have_finish(pr, -EHOSTUNREACH, false);
			return;
		}
		/* Nobody answered and some timed out. A silent server
		 * is more often busy than dead, and with k = 1 there is no other
		 * to ask: one timed-out HAVE failed the whole publish. So every
		 * server is asked again, with a longer timeout each round, before
		 * the have fails. */
		pr->retries++;
		pr->next_cand = 0;
	}
	while (pr->found + pr->waiting < pr->need && pr->next_cand < pr->ncand)
		probe_send(pr, pr->next_cand++, have_timeout(pr));
}

static void have_on_reply(struct dhash__probe *pr, const struct dhash__reply *rep)
{
	if (pr->waiting > 0)
		pr->waiting--;
	if (pr->state != DHASH_PROBE_ASK)
		return;
	if (rep->status == -ECANCELED) {
		have_finish(pr, -ECANCELED, false);
		return;
	}
	if (rep->status == -ETIMEDOUT) {
		pr->timeouts++;
		pr->have_timeouts++;
	}
	if (rep->status == 0) {
		pr->answered++;
		if (rep->len >= 1 && (rep->data[0] & 1))
			pr->found++;
		else
			pr->nos++;
	}
	have_next(pr);
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
		/* a ring of fewer than k servers: a majority of those there are */
		pr->ncand = take_responsible(pr->cand, pr->replicas, r);
		pr->need = quorum(pr->ncand, pr->min_servers, pr->replicas);
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
	struct dhash__act *a = dhash__act_push(&pr->q, DHASH_ACT_KEEP_NONCE);
	a->addr = pr->cand[ci].addr;
	memcpy(a->nonce, rep->nonce, CFS_NONCE_BYTES);
	probe_send(pr, ci, pr->state == DHASH_PROBE_RETRY ? DHASH_RETRY_TIMEOUT_MS : 0);
	return true;
}

void dhash__probe_on_reply(struct dhash__probe *pr, const struct dhash__reply *rep)
{
	bool bit = rep->status == 0 && rep->len >= 1 && (rep->data[0] & 1);

	if (!pr->refresh) {
		have_on_reply(pr, rep);
		return;
	}
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
	if (!pr->refresh) {
		if (pr->waiting > 0)
			pr->waiting--;
		if (pr->state == DHASH_PROBE_ASK)
			have_next(pr); /* as if silent */
		return;
	}
	if (pr->state == DHASH_PROBE_DONE || pr->state == DHASH_PROBE_LOOKUP)
		return;
	pr->waiting--;
	if (pr->waiting == 0) {
		/* No REFRESH of this round could be sent (no reply can come
		 * before the sends are all out). */
		probe_finish(pr, pr->state == DHASH_PROBE_ASK ? -EHOSTUNREACH : -ETIMEDOUT);
	}
}
