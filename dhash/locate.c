/*
 * Locate: where are a block's copies? Look the key up for its k
 * successors (the servers responsible for it, DHash 5.1) and FETCH the
 * block from each distinct one, verifying what comes back. cfs-fsck
 * --replicas asks this per block to say which of the k hold a good copy.
 * A copy answered from a server's cache (lease 0) is not a replica, and a
 * root older than another replica's is stale: neither counts as good.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

struct locate {
	dhash_client_t *d;
	struct cfs_id key;
	dhash_locate_cb cb;
	void *arg;
	uint32_t waiting;
	uint64_t seq[CFS_MSG_MAX_NODES]; /* roots: each good copy's sequence */
	struct dhash_locate_result r;
};

static void locate_finish(struct locate *lc)
{
	uint64_t top = 0;

	for (uint32_t i = 0; i < lc->r.n; i++)
		if (lc->r.state[i] == DHASH_COPY_GOOD && lc->seq[i] > top)
			top = lc->seq[i];
	for (uint32_t i = 0; i < lc->r.n; i++)
		if (lc->r.state[i] == DHASH_COPY_GOOD && lc->seq[i] < top)
			lc->r.state[i] = DHASH_COPY_STALE;
	for (uint32_t i = 0; i < lc->r.n; i++)
		lc->r.good += lc->r.state[i] == DHASH_COPY_GOOD;
	if (dhash__client_closing(lc->d))
		lc->r.status = -ECANCELED;
	lc->cb(lc->arg, &lc->r);
	dhash__client_release(lc->d);
	free(lc);
}

struct locate_call {
	struct locate *lc;
	uint32_t i;
};

static void fetch_done(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct locate_call *c = arg;
	struct locate *lc = c->lc;
	uint32_t i = c->i;
	uint64_t seq = 0;

	free(c);
	if (status == 0)
		lc->r.state[i] = reply->lease_until == 0 ? DHASH_COPY_MISSING /* a cached copy */
		                 : dhash_verify(reply->kind, &lc->key, reply->data.p, reply->data.len,
		                                &seq) == 0 ? DHASH_COPY_GOOD : DHASH_COPY_BAD;
	else if (status == -ENOENT)
		lc->r.state[i] = DHASH_COPY_MISSING;
	else
		lc->r.state[i] = DHASH_COPY_SILENT;
	lc->seq[i] = seq;
	if (--lc->waiting == 0)
		locate_finish(lc);
}

static void lookup_done(void *arg, const struct chord_lookup_result *res)
{
	struct locate *lc = arg;
	chord_t *c = dhash__client_chord(lc->d);
	uint32_t k = dhash__client_replicas(lc->d);
	struct cfs_msg *m = xmalloc(sizeof(*m));

	lc->r.status = res->status < 0 ? res->status : res->n == 0 ? -EHOSTUNREACH : 0;
	for (uint32_t i = 0; lc->r.status == 0 && i < res->n && lc->r.n < k; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < lc->r.n && !dup; j++)
			dup = cfs_addr_eq(&lc->r.nodes[j].addr, &res->succ[i].addr);
		if (!dup)
			lc->r.nodes[lc->r.n++] = res->succ[i];
	}
	lc->waiting = 1; /* held while the FETCHes go out */
	for (uint32_t i = 0; i < lc->r.n; i++) {
		struct locate_call *call = xmalloc(sizeof(*call));
		*call = (struct locate_call){ lc, i };
		cfs_msg_init(m, CFS_MSG_FETCH);
		m->key = lc->key;
		m->has_to = true;
		m->to_id = lc->r.nodes[i].id;
		lc->r.state[i] = DHASH_COPY_SILENT;
		if (chord_call(c, &lc->r.nodes[i], m, 0, fetch_done, call) == 0)
			lc->waiting++;
		else
			free(call);
	}
	free(m);
	if (--lc->waiting == 0)
		locate_finish(lc);
}

int dhash_locate(dhash_client_t *d, const struct cfs_id *key, dhash_locate_cb cb, void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	struct locate *lc = xcalloc(1, sizeof(*lc));
	struct chord_lookup_opts lo = { .mode = dhash__client_mode(d), .nsucc = dhash__client_replicas(d) };
	int r;

	lc->d = d;
	lc->key = *key;
	lc->cb = cb;
	lc->arg = arg;
	dhash__client_hold(d);
	if ((r = chord_lookup(dhash__client_chord(d), key, &lo, lookup_done, lc)) < 0) {
		dhash__client_release(d);
		free(lc);
	}
	return r;
}
