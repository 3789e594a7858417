/*
 * Renewing many leases at once (a publisher's pass, cfs-publish --refresh,
 * cfs-fsck's neighbours): look every key up for its k servers, then send
 * each server one REFRESH naming all the keys it is asked to renew (up to
 * CHUNK a message), instead of one REFRESH per key and server. A key's
 * bit is set when some replica had it; the lease reported is the least any
 * server granted. A server that does not answer is asked once more with a
 * longer timeout; a key none of whose servers answered (or whose lookup
 * failed) fails the batch, so nobody takes "not renewed" for "absent".
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

#define CHUNK 256                /* keys per REFRESH: 8 KiB of keys */
#define RETRY_TIMEOUT_MS 1000

struct rgroup {                  /* one server and the keys it renews */
	struct cfs_node node;
	uint32_t *idx, n, cap;
};

struct rmany {
	dhash_client_t *d;
	struct cfs_id *keys;
	uint32_t n;
	uint64_t lease_until;
	dhash_bits_cb cb;
	void *arg;
	uint32_t lookups_left, calls;
	int lookup_err;
	struct rgroup *g;
	uint32_t ng, capg;
	uint8_t *found, *answered;  /* per key: a replica had it, some server answered */
	uint64_t granted;
};

struct rcall {
	struct rmany *rm;
	uint32_t g, off, cnt;
	bool retried;
};

struct rlookup {
	struct rmany *rm;
	uint32_t i;
};

static void finish(struct rmany *rm)
{
	uint8_t *bits = xcalloc(1, (rm->n + 7) / 8);
	int st = rm->lookup_err;

	for (uint32_t i = 0; i < rm->n; i++) {
		if (rm->found[i])
			bits[i / 8] |= (uint8_t)(1u << (i % 8));
		else if (!rm->answered[i] && !st)
			st = -ETIMEDOUT;
	}
	if (dhash__client_closing(rm->d))
		st = -ECANCELED;
	rm->cb(rm->arg, st, st == 0 ? bits : NULL, rm->n, st == 0 ? rm->granted : 0);
	free(bits);
	for (uint32_t j = 0; j < rm->ng; j++)
		free(rm->g[j].idx);
	free(rm->g);
	free(rm->keys);
	free(rm->found);
	free(rm->answered);
	dhash__client_release(rm->d);
	free(rm);
}

static void send_chunk(struct rcall *c, uint32_t timeout_ms);

static void refresh_reply(void *arg, int status, const struct cfs_msg *reply,
                          const struct cfs_rpc_result *res)
{
	struct rcall *c = arg;
	struct rmany *rm = c->rm;
	const struct rgroup *g = &rm->g[c->g];

	if (status == -ETIMEDOUT && !c->retried && !dhash__client_closing(rm->d)) {
		/* silent is not dead: a busy server, a lost datagram */
		c->retried = true;
		send_chunk(c, RETRY_TIMEOUT_MS);
		return;
	}
	if (status == 0 && reply->data.len >= (c->cnt + 7) / 8) {
		for (uint32_t j = 0; j < c->cnt; j++) {
			uint32_t i = g->idx[c->off + j];
			rm->answered[i] = 1;
			if (!(reply->data.p[j / 8] >> (j % 8) & 1))
				continue;
			rm->found[i] = 1;
			uint64_t l = reply->lease_until ? reply->lease_until : rm->lease_until;
			if (!rm->granted || l < rm->granted)
				rm->granted = l;
		}
	}
	free(c);
	if (--rm->calls == 0)
		finish(rm);
}

static void send_chunk(struct rcall *c, uint32_t timeout_ms)
{
	struct rmany *rm = c->rm;
	const struct rgroup *g = &rm->g[c->g];
	struct cfs_id *keys = xmalloc(c->cnt * sizeof(*keys));
	struct cfs_msg *m = xmalloc(sizeof(*m));

	for (uint32_t j = 0; j < c->cnt; j++)
		keys[j] = rm->keys[g->idx[c->off + j]];
	cfs_msg_init(m, CFS_MSG_REFRESH);
	m->keys = keys;
	m->n_keys = c->cnt;
	m->lease_until = rm->lease_until;
	m->has_to = true;
	m->to_id = g->node.id;
	/* the message is encoded inside the call: keys may go right after */
	int r = chord_call(dhash__client_chord(rm->d), &g->node, m, timeout_ms, refresh_reply, c);
	free(keys);
	free(m);
	if (r < 0) {
		free(c);
		if (--rm->calls == 0)
			finish(rm);
	}
}

static void send_all(struct rmany *rm)
{
	rm->calls = 1; /* held while the calls go out */
	for (uint32_t j = 0; j < rm->ng; j++)
		for (uint32_t off = 0; off < rm->g[j].n; off += CHUNK) {
			struct rcall *c = xcalloc(1, sizeof(*c));
			*c = (struct rcall){ rm, j, off, rm->g[j].n - off < CHUNK ? rm->g[j].n - off : CHUNK, false };
			rm->calls++;
			send_chunk(c, 0);
		}
	if (--rm->calls == 0)
		finish(rm);
}

static void group_add(struct rmany *rm, const struct cfs_node *node, uint32_t i)
{
	uint32_t j = 0;

	while (j < rm->ng && !cfs_addr_eq(&rm->g[j].node.addr, &node->addr))
		j++;
	if (j == rm->ng) {
		if (rm->ng == rm->capg) {
			rm->capg = rm->capg ? 2 * rm->capg : 16;
			rm->g = xrealloc(rm->g, rm->capg * sizeof(*rm->g));
		}
		rm->g[rm->ng++] = (struct rgroup){ .node = *node };
	}
	struct rgroup *g = &rm->g[j];
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		g->idx = xrealloc(g->idx, g->cap * sizeof(*g->idx));
	}
	g->idx[g->n++] = i;
}

static void lookup_done(void *arg, const struct chord_lookup_result *res)
{
	struct rlookup *lk = arg;
	struct rmany *rm = lk->rm;
	uint32_t i = lk->i, k = dhash__client_replicas(rm->d), taken = 0;

	free(lk);
	if (res->status < 0 || res->n == 0) {
		if (!rm->lookup_err)
			rm->lookup_err = res->status < 0 ? res->status : -EHOSTUNREACH;
	}
	/* the first k distinct servers: a process's virtual servers count once */
	for (uint32_t s = 0; res->status == 0 && s < res->n && taken < k; s++) {
		bool dup = false;
		for (uint32_t t = 0; t < s && !dup; t++)
			dup = cfs_addr_eq(&res->succ[t].addr, &res->succ[s].addr);
		if (!dup) {
			group_add(rm, &res->succ[s], i);
			taken++;
		}
	}
	if (--rm->lookups_left == 0)
		send_all(rm);
}

int dhash_refresh_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n,
                       uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	if (n == 0)
		return -EINVAL;
	struct rmany *rm = xcalloc(1, sizeof(*rm));
	struct chord_lookup_opts lo = { .mode = dhash__client_mode(d), .nsucc = dhash__client_replicas(d) };

	rm->d = d;
	rm->keys = xmemdup(keys, n * sizeof(*keys));
	rm->n = n;
	rm->lease_until = lease_until ? lease_until : cfs_wall_s() + dhash__client_lease(d);
	rm->cb = cb;
	rm->arg = arg;
	rm->found = xcalloc(1, n);
	rm->answered = xcalloc(1, n);
	dhash__client_hold(d);
	rm->lookups_left = 1; /* held while the lookups go out */
	for (uint32_t i = 0; i < n; i++) {
		struct rlookup *lk = xmalloc(sizeof(*lk));
		*lk = (struct rlookup){ rm, i };
		rm->lookups_left++;
		int r = chord_lookup(dhash__client_chord(d), &keys[i], &lo, lookup_done, lk);
		if (r < 0) {
			free(lk);
			rm->lookups_left--;
			if (!rm->lookup_err)
				rm->lookup_err = r;
		}
	}
	if (--rm->lookups_left == 0)
		send_all(rm);
	return 0;
}
