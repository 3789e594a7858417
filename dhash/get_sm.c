/*
 * A get as a state machine that does no I/O (client_sm.h); client.c
 * carries out what it asks for.
 *
 * LOOKUP: the key is looked up for its k successors and a few spares (CFS
 * 5.1: the replicas are the key's successors; CFS 5.2: a hop that holds a
 * copy says so and is asked first).
 *
 * FETCH: the k are ordered by predicted latency and asked one at a time,
 * nearest first (CFS 5.1 server selection, DHash++ 4.3); on a timeout, a
 * miss or bytes that do not verify the next is asked (DHash++ 5.2.3). The
 * spares, for lists gone stale after failures, come last, and a replica
 * that timed out gets one more try with a longer timeout at the very end.
 * With hedge_ms, a FETCH unanswered after hedge_ms is not waited on alone:
 * the next candidate is asked too, the first verified answer wins
 * (OpenDHT 3.2, slow nodes). When every candidate failed, the key is
 * looked up once more, then the get fails with dhash__get_miss's error.
 * A content-hash block that verifies ends the get, and a copy of it goes
 * to the caches on the lookup path (CFS 5.2).
 *
 * A hop's claim to hold the block (CFS 5.2) counts only once served:
 * a holder that answers with no block, bytes that do not
 * verify, or silence is reported as a suspect to chord, which then routes
 * around it; when the lookup ended at that hop's word alone (its nodes
 * were next hops, not successors chord had checked: !r->checked), nothing it
 * named is tried: the get looks the key up again at once, all the way to
 * the successors, and the suspect is no next hop of that lookup.
 *
 * ROOT: a signed root is different: replicas may hold older versions (a
 * server that was away during a republish), so the first root that
 * verifies is not the answer. Once a FETCH returns one, every candidate
 * not yet asked is asked at once, and the get returns the highest
 * sequence among the answers (CFS 5.5: roots are the only blocks that
 * change) as soon as roots came from a read quorum of the key's k
 * responsible servers (dhash__root_quorum), or when every candidate has
 * answered or failed. Across continents the quorum is the nearest two
 * thirds of the replicas: the farthest no longer sets the time a mount
 * takes.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

static void get_finish(struct dhash__get *g, int status, uint32_t kind, const uint8_t *p,
                       size_t len)
{
	struct dhash__act *a = dhash__act_push(&g->q, DHASH_ACT_FINISH);

	a->status = status;
	a->kind = kind;
	a->data = p;
	a->len = len;
	g->state = DHASH_GET_DONE;
}

static void get_lookup(struct dhash__get *g)
{
	struct dhash__act *a = dhash__act_push(&g->q, DHASH_ACT_LOOKUP);

	/* CFS 5.2: the first lookup may stop at a hop holding a copy (stored
	 * or cached); the nodes such a hop names are next hops, not the key's
	 * successors. So the second lookup, after every candidate failed (the
	 * copy was bad or gone), goes all the way to the successors. */
	a->nsucc = g->replicas + DHASH_GET_SPARES;
	a->flags = g->relooked ? 0 : CFS_LOOKUP_F_CHECK_BLOCK;
	g->state = DHASH_GET_LOOKUP;
}

void dhash__get_init(struct dhash__get *g, const struct cfs_id *key, const struct dhash_config *cfg)
{
	memset(g, 0, sizeof(*g));
	g->key = *key;
	g->replicas = cfg->replicas;
	g->hedge_ms = cfg->hedge_ms;
	g->cache_push = cfg->cache_push;
	g->ring_order = cfg->ring_order;
	g->verify = dhash_verify;
	get_lookup(g);
}

void dhash__get_fini(struct dhash__get *g)
{
	free(g->best);
	g->best = NULL;
	cfs_actq_free(&g->q);
}

bool dhash__get_next(struct dhash__get *g, struct dhash__act *ret)
{
	return cfs_actq_pop(&g->q, ret, sizeof(*ret));
}

bool dhash__get_idle(const struct dhash__get *g)
{
	return g->state == DHASH_GET_DONE && g->inflight == 0;
}

/*
 * The error a get reports when every candidate failed, written down once:
 * bytes that did not verify (-EBADMSG: somebody serves a bad copy) over a
 * server saying it has no such block (-ENOENT) over silence (-ETIMEDOUT);
 * other failures (a malformed reply, a refused request) leave the choice
 * as it was. A get that recorded none of these reports -ENOENT.
 */
static int miss_rank(int status)
{
	switch (status) {
	case -EBADMSG: return 3;
	case -ENOENT: return 2;
	case -ETIMEDOUT: return 1;
	default: return 0;
	}
}

int dhash__get_miss(int kept, int status)
{
	return miss_rank(status) > miss_rank(kept) ? status : kept;
}

/* Stable insertion sort of cand[from, to), lat[] and bz[] moving with
 * it: by bz when by_busy, else by lat (n <= 64). */
static void sort_cands(struct dhash__get *g, uint64_t *lat, uint32_t *bz, uint32_t from,
                       uint32_t to, bool by_busy)
{
	for (uint32_t i = from + 1; i < to; i++) {
		struct cfs_node x = g->cand[i];
		uint64_t lx = lat[i];
		uint32_t bx = bz[i], j = i;
		for (; j > from && (by_busy ? bz[j - 1] > bx : lat[j - 1] > lx); j--) {
			g->cand[j] = g->cand[j - 1];
			lat[j] = lat[j - 1];
			bz[j] = bz[j - 1];
		}
		g->cand[j] = x;
		lat[j] = lx;
		bz[j] = bx;
	}
}

/*
 * Candidates: the hop that holds a copy (CFS 5.2), then the k successors
 * by predicted latency (CFS 5.1, DHash++ 4.3: the replica likely fastest
 * first), then the spare successors in ring order; each server once.
 *
 * Among the replicas about as near as the nearest (DHASH_NEAR_TIE_PCT
 * and _US), the one with the fewest of this client's fetches out goes
 * first (busy[i]: for r->succ[i]). A server sends its answers to one
 * peer one after another, so fetches that all go to the one nearest
 * replica of an arc wait for each other while a second one as near is
 * idle.
 */
static void order_candidates(struct dhash__get *g, const struct chord_lookup_result *r,
                             const uint64_t *rtt_us, const uint32_t *busy)
{
	uint32_t n = 0, sorted_end = 0, k = g->replicas;
	uint64_t lat[CFS_MSG_MAX_NODES];
	uint32_t bz[CFS_MSG_MAX_NODES];

	g->holder = r->has_block;
	g->holder_only = r->has_block && !r->checked;
	if (r->has_block)
		g->cand[n++] = r->holder;
	uint32_t first = n;
	for (uint32_t i = 0; i < r->n && n < CFS_MSG_MAX_NODES && !g->holder_only; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_eq(&g->cand[j].addr, &r->succ[i].addr);
		if (dup)
			continue;
		/* an unknown latency (0) goes after every known one */
		lat[n] = rtt_us && rtt_us[i] ? rtt_us[i] : UINT64_MAX;
		bz[n] = busy ? busy[i] : 0;
		g->cand[n++] = r->succ[i];
		if (i < k && !g->ring_order)
			sorted_end = n;
	}
	sort_cands(g, lat, bz, first, sorted_end, false);
	uint32_t near_end = first;
	if (sorted_end > first && lat[first] != UINT64_MAX && lat[first] >= DHASH_NEAR_SPREAD_MIN_US) {
		uint64_t tie = lat[first] + lat[first] * DHASH_NEAR_TIE_PCT / 100 + DHASH_NEAR_TIE_US;
		while (near_end < sorted_end && lat[near_end] <= tie)
			near_end++;
	}
	sort_cands(g, lat, bz, first, near_end, true); /* the near ones: least busy first */
	g->ncand = g->nfirst = n;
	g->next_cand = 0;

	/* Root mode's voters: the key's first k successors at distinct IP
	 * addresses, as a put counts them (put_sm.c: one IP, one vote). Only
	 * a lookup that reached the successors names them. */
	g->nresp = g->nvotes = g->nabsent = 0;
	memset(g->voted, 0, sizeof(g->voted));
	memset(g->absent, 0, sizeof(g->absent));
	for (uint32_t i = 0; i < r->n && g->nresp < k && !g->holder_only; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < g->nresp && !dup; j++)
			dup = cfs_addr_same_ip(&g->resp_ip[j], &r->succ[i].addr);
		if (!dup)
			g->resp_ip[g->nresp++] = r->succ[i].addr;
	}
}

uint32_t dhash__root_quorum(uint32_t n)
{
	uint32_t q = n - n / 2 + 1;

	return q < n ? q : n;
}

/* Root mode: a verified root from cand[ci] is a vote when its IP is one of
 * the key's responsible servers' and has not voted yet. */
static void root_vote(struct dhash__get *g, uint32_t ci)
{
	for (uint32_t j = 0; j < g->nresp; j++) {
		if (!cfs_addr_same_ip(&g->resp_ip[j], &g->cand[ci].addr))
			continue;
		if (!g->voted[j]) {
			g->voted[j] = true;
			g->nvotes++;
		}
		return;
	}
}

/* cand[ci] said it has no such block: counted once per responsible IP. */
static void absent_vote(struct dhash__get *g, uint32_t ci)
{
	for (uint32_t j = 0; j < g->nresp; j++)
		if (cfs_addr_same_ip(&g->resp_ip[j], &g->cand[ci].addr)) {
			if (!g->absent[j]) {
				g->absent[j] = true;
				g->nabsent++;
			}
			return;
		}
}

/* The get's error once every candidate failed. Bytes that do not verify
 * outrank "not here" (dhash__get_miss), except when a read quorum of the
 * responsible servers said they have none: then the block is not there,
 * and one server sending garbage (a liar, or a copy gone bad) does not
 * make it look present but damaged — a publisher reading a new volume's
 * root must hear "none", not "unreadable". */
static int miss_status(const struct dhash__get *g)
{
	if (g->miss == -EBADMSG && g->nresp && g->nabsent >= dhash__root_quorum(g->nresp))
		return -ENOENT;
	return g->miss ? g->miss : -ENOENT;
}

/* Root mode: roots came from a read quorum of the k responsible servers
 * (never of fewer: a short list cannot lower the bar). */
static bool root_quorum(const struct dhash__get *g)
{
	return g->nresp >= g->replicas && g->nvotes >= dhash__root_quorum(g->nresp);
}

/* Root mode: the newest root is known once every candidate asked has
 * answered or failed, or at a read quorum. */
static bool root_known(const struct dhash__get *g)
{
	return g->inflight == 0 || root_quorum(g);
}

static void fetch_send(struct dhash__get *g, uint32_t ci, bool hedge)
{
	struct dhash__act *a = dhash__act_push(&g->q, DHASH_ACT_FETCH);

	a->i = ci;
	a->hedge = hedge;
	a->timeout_ms = ci >= g->nfirst ? DHASH_RETRY_TIMEOUT_MS : 0;
	g->rpcs++;
	g->inflight++;
}

static void log_failure(const struct dhash__get *g)
{
	char k[9], a[CFS_ADDR_STRLEN];
	struct cfs_sbuf b = { 0 };

	if (cfs_log_get_level() < CFS_LOG_DEBUG)
		return;
	for (uint32_t i = 0; i < g->ncand; i++)
		cfs_sb_printf(&b, " %s", cfs_addr_str(&g->cand[i].addr, a));
	log_debug("dhash: get %s failed after %u RPCs, %u timeouts; asked%s",
	          cfs_id_short(&g->key, k), g->rpcs, g->timeouts, b.p ? b.p : " nobody");
	free(b.p);
}

/* Every candidate failed and nothing is out. */
static void get_exhausted(struct dhash__get *g)
{
	if (!g->relooked) {
		/* Some may have been silent: the lookup named servers that had
		 * just died, or a busy one missed both tries; the timeouts have
		 * since taken the dead out of the tables (CFS 4.2, failures).
		 * Or all answered that they do not have it: a lookup taken while
		 * the ring changes can end at a node whose list skips the
		 * holders for a round. Either way, once more from a fresh
		 * lookup; a block that really is missing costs one lookup more. */
		g->relooked = true;
		g->relookups++;
		g->ncand = g->next_cand = g->nfirst = 0;
		get_lookup(g);
		return;
	}
	if (g->best) { /* a claimed holder's root, and no replica answered */
		get_finish(g, 0, DHASH_KIND_ROOT, g->best, g->best_len);
		return;
	}
	log_failure(g);
	get_finish(g, miss_status(g), 0, NULL, 0);
}

/* Ask the next candidate (DHash++ 5.2.3: on a failure, the next-nearest
 * replica); arm the hedge timer behind a first try. */
static void fetch_next(struct dhash__get *g, bool hedging)
{
	while (g->next_cand < g->ncand) {
		uint32_t ci = g->next_cand++;
		fetch_send(g, ci, hedging);
		/* Second tries go out together: one after another, a list of
		 * dead successors cost a second each (a get failed after 14 s
		 * when half a 16-node ring had just died). */
		if (ci >= g->nfirst || (g->all_first && g->next_cand < g->nfirst))
			continue;
		if (g->hedge_ms && g->next_cand < g->ncand) {
			struct dhash__act *a = dhash__act_push(&g->q, DHASH_ACT_ARM_HEDGE);
			a->timeout_ms = g->hedge_ms;
			a->i = ci;
		}
		return;
	}
	if (g->inflight == 0) /* else a hedged FETCH may still answer */
		get_exhausted(g);
}

void dhash__get_on_lookup(struct dhash__get *g, const struct chord_lookup_result *r,
                          const uint64_t *rtt_us)
{
	dhash__get_on_lookup_busy(g, r, rtt_us, NULL);
}

void dhash__get_on_lookup_busy(struct dhash__get *g, const struct chord_lookup_result *r,
                               const uint64_t *rtt_us, const uint32_t *busy)
{
	if (g->state != DHASH_GET_LOOKUP)
		return;
	g->rpcs += r->rpcs;
	g->timeouts += r->timeouts;
	g->lookup_us += r->latency_us;
	if (r->status < 0 || r->n == 0) {
		get_finish(g, r->status < 0 ? r->status : -EHOSTUNREACH, 0, NULL, 0);
		return;
	}
	g->npath = r->npath < CHORD_PATH_MAX ? r->npath : CHORD_PATH_MAX;
	memcpy(g->path, r->path, g->npath * sizeof(r->path[0]));
	order_candidates(g, r, rtt_us, busy);
	g->state = DHASH_GET_FETCH;
	fetch_next(g, false);
}

void dhash__get_on_lookup_failed(struct dhash__get *g, int err)
{
	if (g->state != DHASH_GET_LOOKUP)
		return;
	/* only the second lookup gets here: the first one's failure is
	 * dhash_get's return value. The candidates' failure stands. */
	if (g->best) { /* a claimed holder's root, and no replica answered */
		get_finish(g, 0, DHASH_KIND_ROOT, g->best, g->best_len);
		return;
	}
	log_failure(g);
	get_finish(g, miss_status(g), 0, NULL, 0);
}

/* Is a at one of the servers the get asked (they have it or are replicas)? */
static bool asked_server(const struct dhash__get *g, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < g->ncand; i++)
		if (cfs_addr_eq(&g->cand[i].addr, a))
			return true;
	return false;
}

/* CFS 5.2: a fetched block is copied to the servers on its lookup path, so
 * that later lookups for it stop sooner (the last hops before the key's
 * successors are where lookups from everywhere converge). DHASH_PUSH_LAST
 * copies it only to the hop nearest the key (CFS 5.2's "second-to-last
 * server"). Servers on the path that were candidates (replicas, or the hop
 * that answered with a copy) are skipped. */
static void cache_push(struct dhash__get *g, uint32_t ci, const uint8_t *p, size_t len)
{
	if (g->cache_push == DHASH_PUSH_NONE)
		return;
	for (uint32_t i = g->npath; i-- > 0;) {
		const struct cfs_node *to = &g->path[i];
		if (cfs_addr_eq(&to->addr, &g->cand[ci].addr) || asked_server(g, &to->addr))
			continue;
		struct dhash__act *a = dhash__act_push(&g->q, DHASH_ACT_CACHE_PUSH);
		a->i = i;
		a->data = p;
		a->len = len;
		if (g->cache_push == DHASH_PUSH_LAST)
			return;
	}
}

/* Keep the newest root (CFS 5.5: a root's sequence number orders its
 * versions); two different roots with one sequence are worth a warning. */
static void root_keep(struct dhash__get *g, uint32_t ci, const uint8_t *p, size_t len, uint64_t seq)
{
	char a[CFS_ADDR_STRLEN], k[9];

	if (!g->best || seq > g->best_seq) {
		free(g->best);
		g->best = xmemdup(p, len ? len : 1);
		g->best_len = len;
		g->best_seq = seq;
	} else if (seq == g->best_seq && (len != g->best_len || memcmp(p, g->best, len))) {
		log_warn("dhash: %s holds another root for %s with the same sequence %lu "
		         "(two publishers with one key?)", cfs_addr_str(&g->cand[ci].addr, a),
		         cfs_id_short(&g->key, k), (unsigned long)seq);
	} else if (seq < g->best_seq) {
		log_debug("dhash: %s holds an older root for %s (sequence %lu < %lu)",
		          cfs_addr_str(&g->cand[ci].addr, a), cfs_id_short(&g->key, k),
		          (unsigned long)seq, (unsigned long)g->best_seq);
	}
}

/* A root that verifies. The first one sends a FETCH to every candidate
 * not yet asked (the spares too: after failures the holders of the newest
 * root may sit beyond the first k); the get ends when all have answered. */
static void root_answer(struct dhash__get *g, uint32_t ci, const uint8_t *p, size_t len,
                        uint64_t seq)
{
	root_keep(g, ci, p, len, seq);
	root_vote(g, ci);
	if (g->holder_only && !g->relooked) {
		/* A hop's claim alone named this server. An old root
		 * verifies as well as the newest, so a liar holding one could
		 * roll a volume back: keep it, and ask the key's replicas from a
		 * lookup that goes all the way to them; the newest wins. */
		g->relooked = true;
		g->relookups++;
		g->ncand = g->next_cand = g->nfirst = 0;
		get_lookup(g);
		return;
	}
	if (g->state != DHASH_GET_ROOT) {
		g->state = DHASH_GET_ROOT;
		if (g->hedge_ms)
			dhash__act_push(&g->q, DHASH_ACT_STOP_HEDGE);
		while (g->next_cand < g->nfirst && !root_quorum(g))
			fetch_send(g, g->next_cand++, false);
	}
	if (root_known(g))
		get_finish(g, 0, DHASH_KIND_ROOT, g->best, g->best_len);
}

/* Bytes that do not verify (DHash checks every block it fetches, CFS 5.5):
 * that server is skipped, and the get's error may become -EBADMSG. */
static void fetch_bad(struct dhash__get *g, uint32_t ci)
{
	char a[CFS_ADDR_STRLEN], k[9];

	log_warn("dhash: %s sent bytes for %s that do not verify; trying another replica",
	         cfs_addr_str(&g->cand[ci].addr, a), cfs_id_short(&g->key, k));
	g->bad++;
	g->miss = dhash__get_miss(g->miss, -EBADMSG);
}

/* The hop that claimed the block denied it or served bytes that do not
 * verify: a suspect (a claim counts only when served), and not asked
 * again. A claim met by silence proves nothing (a lost datagram, a slow
 * link): that holder is asked once more at the end, like any other. */
static bool holder_failed(struct dhash__get *g, uint32_t ci)
{
	if (!g->holder || ci != 0)
		return false;
	g->holder = false;
	g->suspects++;
	dhash__act_push(&g->q, DHASH_ACT_SUSPECT)->i = ci;
	return true;
}

/* A FETCH ended without a block. Only silence and "not here" take part in
 * dhash__get_miss; a server's other errors (even its own -EBADMSG, which
 * says nothing about bytes we checked) do not. */
static void fetch_failed(struct dhash__get *g, uint32_t ci, int status)
{
	bool suspect = status == -ENOENT && holder_failed(g, ci); /* claimed, then denied */

	if (status == -ETIMEDOUT) {
		g->timeouts++;
		g->fetch_timeouts++;
		/* Silent is not the same as dead (a busy server, a lost
		 * datagram): one more try at the end, with a longer timeout —
		 * but not for a holder whose claim just failed. */
		if (ci < g->nfirst && g->ncand < CFS_MSG_MAX_NODES && !suspect)
			g->cand[g->ncand++] = g->cand[ci];
	}
	if (status == -ETIMEDOUT || status == -ENOENT)
		g->miss = dhash__get_miss(g->miss, status);
	if (status == -ENOENT)
		absent_vote(g, ci);
}

void dhash__get_on_fetch(struct dhash__get *g, uint32_t ci, bool hedge,
                         const struct dhash__reply *rep)
{
	int status = rep->status;
	uint64_t seq = 0;

	if (g->inflight == 0 || g->state == DHASH_GET_LOOKUP)
		return; /* not one of ours: nothing is out */
	g->inflight--;
	if (g->state == DHASH_GET_DONE) /* a hedged FETCH answered after the get ended */
		return;
	if (status == -ECANCELED) {
		get_finish(g, -ECANCELED, 0, NULL, 0);
		return;
	}
	if (status == 0) {
		/* Only bytes that verify under the key are an answer (CFS 5.5) */
		if (g->verify(rep->kind, &g->key, rep->data, rep->len, &seq) != 0) {
			fetch_bad(g, ci);
			holder_failed(g, ci);
		} else if (rep->kind == DHASH_KIND_ROOT) {
			root_answer(g, ci, rep->data, rep->len, seq);
			return;
		} else {
			g->hedge_wins += hedge;
			if (rep->kind == DHASH_KIND_CHASH)
				cache_push(g, ci, rep->data, rep->len);
			get_finish(g, 0, rep->kind, rep->data, rep->len);
			return;
		}
	} else {
		fetch_failed(g, ci, status);
	}
	if (g->state == DHASH_GET_ROOT) {
		if (root_known(g))
			get_finish(g, 0, DHASH_KIND_ROOT, g->best, g->best_len);
		return;
	}
	if (g->inflight == 0) /* else a hedged FETCH may still answer */
		fetch_next(g, false);
}

/* The driver could not send the FETCH to cand[ci]: as if it had never been
 * asked for. A hedge timer queued behind that send is dropped with it. */
void dhash__get_on_send_failed(struct dhash__get *g, uint32_t ci, bool hedge)
{
	struct dhash__act dropped;

	if (g->inflight == 0 || g->state == DHASH_GET_LOOKUP)
		return; /* not one of ours: nothing is out */
	g->inflight--;
	if (g->state == DHASH_GET_DONE)
		return;
	if (g->state == DHASH_GET_ROOT) {
		if (g->inflight == 0)
			get_finish(g, 0, DHASH_KIND_ROOT, g->best, g->best_len);
		return;
	}
	const struct dhash__act *next = cfs_actq_peek(&g->q);
	if (next && next->type == DHASH_ACT_ARM_HEDGE)
		cfs_actq_pop(&g->q, &dropped, sizeof(dropped));
	fetch_next(g, hedge);
}

/* OpenDHT 3.2 (slow nodes): a FETCH unanswered after hedge_ms gets
 * company: the next candidate is asked too, without giving up on the
 * first. */
bool dhash__get_can_hedge(const struct dhash__get *g)
{
	return g->state == DHASH_GET_FETCH && g->inflight > 0 && g->next_cand < g->ncand;
}

void dhash__get_on_hedge(struct dhash__get *g)
{
	if (!dhash__get_can_hedge(g))
		return;
	g->hedges++;
	fetch_next(g, true);
}
