/*
 * Locate as a state machine that does no I/O (client_sm.h); locate.c
 * carries out what it asks for. Where are a block's copies? LOOKUP the key
 * for its k successors (the servers responsible for it, CFS 5.1), then
 * FETCH the block from each distinct one at once and verify what comes
 * back. A copy answered from a server's cache (lease 0) is not a replica
 * (CFS 5.2: cached copies never count as replicas), and a root older than
 * another replica's is stale (CFS 5.5).
 *
 * A coded block (DHash++ 4.4) has no copies but n fragments: the LOOKUP
 * asks for spare successors (virtual servers share an IP), holder i is
 * the key's i-th successor at a distinct IP, as the coded put placed
 * them, and its answer is good only when it is a fragment that verifies
 * alone against the key (sfsro_frag_verify) and carries index i. Since
 * the put, joins and failures may have moved the key's successors along:
 * a fragment that verifies with another index counts as that index
 * (DHASH_COPY_OTHER), the DHASH_CODED_SPARES holders past the n-th are
 * asked too (a fragment pushed outward still counts, as Carbonite reuses
 * copies that come back), and the block's count is of distinct indices.
 *
 * A probe (dhash_probe_coded) asks the same holders HAVE instead, and
 * counts those that say they keep the key (PRESENT), index unknown.
 */
#include <string.h>

#include "dhash/client_sm.h"

void dhash__locate_init(struct dhash__locate *lc, const struct cfs_id *key, uint32_t replicas)
{
	memset(lc, 0, sizeof(*lc));
	lc->key = *key;
	lc->replicas = replicas;
	lc->verify = dhash_verify;
	dhash__act_push(&lc->q, DHASH_ACT_LOOKUP)->nsucc = replicas;
}

void dhash__locate_init_coded(struct dhash__locate *lc, const struct cfs_id *key, uint32_t n)
{
	uint32_t want = 2 * n + DHASH_GET_SPARES; /* as a coded get asks */

	memset(lc, 0, sizeof(*lc));
	lc->key = *key;
	lc->replicas = n + DHASH_CODED_SPARES < CFS_MSG_MAX_NODES ? n + DHASH_CODED_SPARES
	                                                          : CFS_MSG_MAX_NODES;
	lc->code_n = n;
	dhash__act_push(&lc->q, DHASH_ACT_LOOKUP)->nsucc = want < CFS_MSG_MAX_NODES ? want
	                                                   : CFS_MSG_MAX_NODES;
}

void dhash__locate_fini(struct dhash__locate *lc)
{
	cfs_actq_free(&lc->q);
}

bool dhash__locate_next(struct dhash__locate *lc, struct dhash__act *ret)
{
	return cfs_actq_pop(&lc->q, ret, sizeof(*ret));
}

/* Every FETCH is back: good copies below the newest root are stale. */
static void locate_finish(struct dhash__locate *lc)
{
	uint64_t top = 0;

	for (uint32_t i = 0; i < lc->r.n; i++)
		if (lc->r.state[i] == DHASH_COPY_GOOD && lc->seq[i] > top)
			top = lc->seq[i];
	for (uint32_t i = 0; i < lc->r.n; i++)
		if (lc->r.state[i] == DHASH_COPY_GOOD && lc->seq[i] < top)
			lc->r.state[i] = DHASH_COPY_STALE;
	if (lc->probe)
		for (uint32_t i = 0; i < lc->r.n; i++)
			lc->r.good += lc->r.state[i] == DHASH_COPY_PRESENT;
	else if (lc->code_n)
		lc->r.good = dhash_locate_coded_good(&lc->r);
	else
		for (uint32_t i = 0; i < lc->r.n; i++)
			lc->r.good += lc->r.state[i] == DHASH_COPY_GOOD;
	dhash__act_push(&lc->q, DHASH_ACT_FINISH)->status = lc->r.status;
	lc->state = DHASH_LOCATE_DONE;
}

void dhash__locate_on_lookup(struct dhash__locate *lc, const struct chord_lookup_result *r)
{
	if (lc->state != DHASH_LOCATE_LOOKUP)
		return;
	lc->r.status = r->status < 0 ? r->status : r->n == 0 ? -EHOSTUNREACH : 0;
	for (uint32_t i = 0; lc->r.status == 0 && i < r->n && lc->r.n < lc->replicas; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < lc->r.n && !dup; j++)
			dup = lc->code_n ? cfs_addr_same_ip(&lc->r.nodes[j].addr, &r->succ[i].addr)
			      : cfs_addr_eq(&lc->r.nodes[j].addr, &r->succ[i].addr);
		if (!dup)
			lc->r.nodes[lc->r.n++] = r->succ[i];
	}
	lc->state = DHASH_LOCATE_FETCH;
	for (uint32_t i = 0; i < lc->r.n; i++) {
		lc->r.state[i] = DHASH_COPY_SILENT;
		dhash__act_push(&lc->q, lc->probe ? DHASH_ACT_HAVE : DHASH_ACT_FETCH)->i = i;
		cfs_fanin_add(&lc->fetches);
	}
	if (lc->fetches.out == 0)
		locate_finish(lc);
}

int dhash_copy_index(int8_t state, uint32_t position)
{
	if (state == DHASH_COPY_GOOD)
		return (int)position;
	if (state >= DHASH_COPY_OTHER_BASE && state < DHASH_COPY_OTHER_BASE + SFSRO_CODE_N_MAX)
		return state - DHASH_COPY_OTHER_BASE;
	return -1;
}

uint32_t dhash_locate_coded_good(const struct dhash_locate_result *r)
{
	uint32_t seen = 0, good = 0;

	for (uint32_t i = 0; i < r->n; i++) {
		int x = dhash_copy_index(r->state[i], i);
		if (x >= 0 && !(seen >> x & 1)) {
			seen |= 1u << x;
			good++;
		}
	}
	return good;
}

uint32_t dhash_coded_assign(const struct dhash_locate_result *r, uint32_t n, struct cfs_node *to)
{
	uint32_t have = 0, mask = 0, next = 0;

	if (r->n == 0)
		return 0;
	for (uint32_t x = 0; x < n; x++) /* entries the mask leaves out: any real node */
		to[x] = r->nodes[x < r->n ? x : 0];
	for (uint32_t j = 0; j < r->n; j++) {
		int x = dhash_copy_index(r->state[j], j);
		if (x >= 0)
			have |= 1u << x;
	}
	for (uint32_t x = 0; x < n; x++) {
		if (have >> x & 1)
			continue;
		while (next < r->n && next < n && r->state[next] != DHASH_COPY_MISSING)
			next++;
		if (next >= r->n || next >= n)
			break;
		to[x] = r->nodes[next++];
		mask |= 1u << x;
	}
	return mask;
}

/* Holder i's answer: GOOD when it is fragment i of the key's block,
 * OTHER(j) when fragment j, BAD when no fragment of the key. */
static int8_t frag_state(const struct dhash__locate *lc, uint32_t i, const struct dhash__reply *rep)
{
	struct sfsro_frag f;

	if (rep->kind != DHASH_KIND_FRAG || sfsro_frag_verify(&lc->key, rep->data, rep->len, &f) != 0)
		return DHASH_COPY_BAD;
	return f.index == i ? DHASH_COPY_GOOD : DHASH_COPY_OTHER(f.index);
}

void dhash__locate_on_fetch(struct dhash__locate *lc, uint32_t i, const struct dhash__reply *rep)
{
	uint64_t seq = 0;

	if (lc->state != DHASH_LOCATE_FETCH || lc->probe)
		return;
	if (!rep)
		lc->r.state[i] = DHASH_COPY_SILENT; /* never sent */
	else if (rep->status == 0)
		lc->r.state[i] = rep->lease_until == 0 ? DHASH_COPY_MISSING /* a cached copy */
		                 : lc->code_n ? frag_state(lc, i, rep)
		                 : lc->verify(rep->kind, &lc->key, rep->data, rep->len, &seq) == 0
		                 ? DHASH_COPY_GOOD : DHASH_COPY_BAD;
	else if (rep->status == -ENOENT)
		lc->r.state[i] = DHASH_COPY_MISSING;
	else
		lc->r.state[i] = DHASH_COPY_SILENT;
	lc->seq[i] = seq;
	if (cfs_fanin_end(&lc->fetches, 0))
		locate_finish(lc);
}

void dhash__locate_on_have(struct dhash__locate *lc, uint32_t i, int status, bool found)
{
	if (lc->state != DHASH_LOCATE_FETCH || !lc->probe)
		return;
	lc->r.state[i] = status < 0 ? DHASH_COPY_SILENT : found ? DHASH_COPY_PRESENT : DHASH_COPY_MISSING;
	if (cfs_fanin_end(&lc->fetches, 0))
		locate_finish(lc);
}
