/*
 * Renewing many leases at once as a state machine that does no I/O
 * (client_sm.h); refresh.c carries out what it asks for.
 *
 * LOOKUP: every key is looked up for its k servers (CFS 5.1: the replicas
 * are the key's first k distinct successors). REFRESH: each server gets
 * one REFRESH naming all the keys it is asked to renew (up to
 * DHASH_REFRESH_CHUNK a message), instead of one REFRESH per key and
 * server (CFS 5.5: leases instead of delete, renewed by the publisher). A
 * key's bit is set when some replica had it (a coded key's: when m of its
 * n holders had their fragment, enough to read it); the lease reported is the
 * least any server granted. A server that does not answer is asked once
 * more with a longer timeout; a key none of whose servers answered (or
 * whose lookup failed) fails the batch, so nobody takes "not renewed" for
 * "absent". A server enforcing quotas answers a REFRESH without its nonce
 * with a challenge (CFS 5.4; the extension is charged to us): the nonce is
 * kept for the server's address and the call sent again, once.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

void dhash__rmany_init(struct dhash__rmany *rm, const struct cfs_id *keys, uint32_t n,
                       uint32_t replicas, uint64_t lease_until)
{
	memset(rm, 0, sizeof(*rm));
	rm->keys = xmemdup(keys, n * sizeof(*keys));
	rm->n = n;
	rm->replicas = replicas;
	rm->need = 1;
	rm->lease_until = lease_until;
	rm->found = xcalloc(1, n);
	rm->answered = xcalloc(1, n);
	for (uint32_t i = 0; i < n; i++) {
		cfs_fanin_add(&rm->lookups);
		struct dhash__act *a = dhash__act_push(&rm->q, DHASH_ACT_LOOKUP);
		a->i = i;
		a->nsucc = replicas;
	}
}

void dhash__rmany_need(struct dhash__rmany *rm, uint32_t need)
{
	rm->need = need ? need : 1;
}

void dhash__rmany_fini(struct dhash__rmany *rm)
{
	for (uint32_t j = 0; j < rm->ng; j++)
		free(rm->g[j].idx);
	free(rm->g);
	free(rm->c);
	free(rm->keys);
	free(rm->found);
	free(rm->answered);
	free(rm->bits);
	cfs_actq_free(&rm->q);
}

bool dhash__rmany_next(struct dhash__rmany *rm, struct dhash__act *ret)
{
	return cfs_actq_pop(&rm->q, ret, sizeof(*ret));
}

const struct cfs_node *dhash__rmany_call_node(const struct dhash__rmany *rm, uint32_t ci)
{
	return &rm->g[rm->c[ci].g].node;
}

uint32_t dhash__rmany_call_keys(const struct dhash__rmany *rm, uint32_t ci, struct cfs_id *out)
{
	const struct dhash__rcall *c = &rm->c[ci];

	for (uint32_t j = 0; j < c->cnt; j++)
		out[j] = rm->keys[rm->g[c->g].idx[c->off + j]];
	return c->cnt;
}

/* Every key's bit; the lookups' error, else -ETIMEDOUT when some key
 * reached none of its servers. */
static void rmany_finish(struct dhash__rmany *rm)
{
	int st = rm->lookups.status;

	rm->bits = xcalloc(1, (rm->n + 7) / 8);
	for (uint32_t i = 0; i < rm->n; i++) {
		if (rm->found[i] >= rm->need)
			rm->bits[i / 8] |= (uint8_t)(1u << (i % 8));
		else if (!rm->answered[i] && !st)
			st = -ETIMEDOUT;
	}
	struct dhash__act *a = dhash__act_push(&rm->q, DHASH_ACT_FINISH);
	a->status = st;
	a->data = st == 0 ? rm->bits : NULL;
	a->len = rm->n;
	a->lease = st == 0 ? rm->granted : 0;
	rm->state = DHASH_RMANY_DONE;
}

static void group_add(struct dhash__rmany *rm, const struct cfs_node *node, uint32_t i)
{
	uint32_t j = 0;

	while (j < rm->ng && !cfs_addr_eq(&rm->g[j].node.addr, &node->addr))
		j++;
	if (j == rm->ng) {
		if (rm->ng == rm->capg) {
			rm->capg = rm->capg ? 2 * rm->capg : 16;
			rm->g = xrealloc(rm->g, rm->capg * sizeof(*rm->g));
		}
		rm->g[rm->ng++] = (struct dhash__rgroup){ .node = *node };
	}
	struct dhash__rgroup *g = &rm->g[j];
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		g->idx = xrealloc(g->idx, g->cap * sizeof(*g->idx));
	}
	g->idx[g->n++] = i;
}

/* Every lookup is back: one REFRESH per server and chunk of its keys. */
static void send_all(struct dhash__rmany *rm)
{
	uint32_t nc = 0;

	for (uint32_t j = 0; j < rm->ng; j++)
		nc += (rm->g[j].n + DHASH_REFRESH_CHUNK - 1) / DHASH_REFRESH_CHUNK;
	rm->c = xcalloc(nc ? nc : 1, sizeof(*rm->c));
	for (uint32_t j = 0; j < rm->ng; j++)
		for (uint32_t off = 0; off < rm->g[j].n; off += DHASH_REFRESH_CHUNK) {
			uint32_t left = rm->g[j].n - off;
			rm->c[rm->nc] = (struct dhash__rcall){ .g = j, .off = off,
			                                     .cnt = left < DHASH_REFRESH_CHUNK ? left : DHASH_REFRESH_CHUNK };
			dhash__act_push(&rm->q, DHASH_ACT_REFRESH)->i = rm->nc++;
			cfs_fanin_add(&rm->calls);
		}
	rm->state = DHASH_RMANY_REFRESH;
	if (rm->nc == 0)
		rmany_finish(rm);
}

void dhash__rmany_on_lookup(struct dhash__rmany *rm, uint32_t i,
                            const struct chord_lookup_result *r, int err)
{
	uint32_t taken = 0;

	if (rm->state != DHASH_RMANY_LOOKUP)
		return;
	if (r && r->status == 0 && r->n == 0)
		err = -EHOSTUNREACH;
	else if (r && r->status < 0)
		err = r->status;
	/* the first k distinct servers: a process's virtual servers count once */
	for (uint32_t s = 0; err == 0 && s < r->n && taken < rm->replicas; s++) {
		bool dup = false;
		for (uint32_t t = 0; t < s && !dup; t++)
			dup = cfs_addr_eq(&r->succ[t].addr, &r->succ[s].addr);
		if (!dup) {
			group_add(rm, &r->succ[s], i);
			taken++;
		}
	}
	if (cfs_fanin_end(&rm->lookups, err))
		send_all(rm);
}

/* A REFRESH answered: bit j of its reply is its j-th key. */
static void call_answered(struct dhash__rmany *rm, const struct dhash__rcall *c,
                          const struct dhash__reply *rep)
{
	const struct dhash__rgroup *g = &rm->g[c->g];

	if (rep->len < (c->cnt + 7) / 8)
		return; /* too short to say: as if silent */
	for (uint32_t j = 0; j < c->cnt; j++) {
		uint32_t i = g->idx[c->off + j];
		rm->answered[i] = 1;
		if (!(rep->data[j / 8] >> (j % 8) & 1))
			continue;
		if (rm->found[i] < UINT8_MAX)
			rm->found[i]++;
		uint64_t l = rep->lease_until ? rep->lease_until : rm->lease_until;
		if (!rm->granted || l < rm->granted)
			rm->granted = l;
	}
}

void dhash__rmany_on_reply(struct dhash__rmany *rm, uint32_t ci, const struct dhash__reply *rep)
{
	struct dhash__rcall *c = &rm->c[ci];

	if (rm->state != DHASH_RMANY_REFRESH)
		return;
	if (rep && rep->status == -ETIMEDOUT && !c->retried) {
		/* silent is not dead: a busy server, a lost datagram */
		c->retried = true;
		struct dhash__act *a = dhash__act_push(&rm->q, DHASH_ACT_REFRESH);
		a->i = ci;
		a->timeout_ms = DHASH_RETRY_TIMEOUT_MS;
		return;
	}
	if (rep && rep->status == 0 && (rep->flags & DHASH_STORE_R_CHALLENGE) && rep->nonce &&
	    !c->challenged) {
		c->challenged = true;
		struct dhash__act *a = dhash__act_push(&rm->q, DHASH_ACT_KEEP_NONCE);
		a->addr = rm->g[c->g].node.addr;
		memcpy(a->nonce, rep->nonce, CFS_NONCE_BYTES);
		a = dhash__act_push(&rm->q, DHASH_ACT_REFRESH);
		a->i = ci;
		a->timeout_ms = c->retried ? DHASH_RETRY_TIMEOUT_MS : 0;
		return;
	}
	if (rep && rep->status == 0 && !(rep->flags & DHASH_STORE_R_CHALLENGE))
		call_answered(rm, c, rep);
	if (cfs_fanin_end(&rm->calls, 0))
		rmany_finish(rm);
}
