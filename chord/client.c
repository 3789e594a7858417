/*
 * A plain client of the ring: a chord_t that is not a member. It has no
 * ID in anyone's tables (its messages carry no sender node, so servers
 * never offer it to their tables), runs no maintenance and answers no ring
 * requests. Its lookups are iterative and start at the known node that
 * most closely precedes the key, by the lookup mode's next-hop rule.
 *
 * The known nodes ("contacts") are what earlier lookups returned: the
 * key's successors and the hops on the way, each checked to be the hash
 * of its address (CFS 4.4), at most CONTACTS of them, a random one out
 * when full. A contact that fails to answer is forgotten. Before the first
 * lookup, and when every contact has failed, a lookup starts at a
 * bootstrap address; each is tried once before the lookup fails.
 */
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

#define CONTACTS 64

struct clk {
	chord_t *c;
	struct cfs_id key;
	struct chord_lookup_opts o;
	chord_lookup_cb cb;
	void *arg;
	uint32_t boot_tries;      /* bootstrap addresses tried */
	uint32_t rpcs, timeouts;  /* of the attempts that failed */
	uint64_t started_us;
};

int chord_client_new(uv_loop_t *loop, cfs_transport_t *t, const struct cfs_addr *boot, size_t n,
                     chord_t **ret)
{
	struct chord_config cfg;
	struct cfs_addr self;
	chord_t *c;
	int r;

	if (n == 0)
		return log_error_errno(-EINVAL, "a ring client needs a bootstrap address");
	if ((r = cfs_transport_local_addr(t, &self)) < 0)
		return r;
	chord_config_default(&cfg);
	if ((r = chord_new(loop, t, &self, &cfg, &c)) < 0)
		return r;
	c->client = true;
	c->nboot = n;
	c->boot = xmemdup(boot, n * sizeof(*boot));
	c->contacts = xcalloc(CONTACTS, sizeof(*c->contacts));
	*ret = c;
	return 0;
}

bool chord_is_client(const chord_t *c)
{
	return c->client;
}

/*
 * A member that the ring cannot reach becomes a plain client in place: it
 * stops its maintenance and answers no ring request any more (members
 * drop it after their missed probes, so it leaves no hole), and its
 * lookups start from what its tables knew, with the bootstrap addresses
 * and remembered peers as the bootstrap. Its users see no change: reads,
 * publishes and pins go on through the same chord_t.
 */
void chord__become_client(chord_t *c)
{
	struct cfs_addr *boot;
	size_t nb = 0;

	if (c->client)
		return;
	chord__maint_stop(c);
	chord__merge_stop(c);
	chord__reach_stop(c);
	c->contacts = xcalloc(CONTACTS, sizeof(*c->contacts));
	c->client = true; /* from here on: no sender node in our messages */
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct vnode *v = &c->v[vi];
		for (uint32_t i = 0; i < v->nsuccs; i++)
			chord__client_learn(c, &v->succ[i].n);
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid)
				chord__client_learn(c, &v->finger[k].n);
		if (v->pred.valid)
			chord__client_learn(c, &v->pred.n);
	}
	/* local virtual servers are no contacts: they answer nothing now */
	for (uint32_t i = 0; i < c->ncontacts;)
		if (chord__local(c, &c->contacts[i].id))
			c->contacts[i] = c->contacts[--c->ncontacts];
		else
			i++;
	boot = xcalloc(c->nboot + c->npeers + 1, sizeof(*boot));
	for (size_t i = 0; i < c->nboot; i++)
		boot[nb++] = c->boot[i];
	for (uint32_t i = 0; i < c->npeers; i++)
		boot[nb++] = c->peers[i];
	free(c->boot);
	c->boot = boot;
	c->nboot = nb;
	c->boot_next = 0;
}

uint32_t chord_client_contacts(const chord_t *c)
{
	return c->ncontacts;
}

uint32_t chord_client_addresses(const chord_t *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->ncontacts; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < i && !dup; j++)
			dup = cfs_addr_same_ip(&c->contacts[i].addr, &c->contacts[j].addr);
		n += !dup;
	}
	return n;
}

#define PROBES_MAX 8

static void probed(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	chord_t *c = arg;

	/* the transport measured the round trip; chord_rtt_us reads it */
	c->probes--;
}

/*
 * A contact is pinged, in the background, when a lookup meets it and this
 * process has no round trip to its address yet: a plain client's Vivaldi
 * coordinate is young, and both its first hops and the replica it fetches
 * from are chosen by latency (chord_rtt_us); without a measurement a
 * replica or a hop an ocean away looked as near as one next door. At most
 * PROBES_MAX PINGs at a time (a lookup in a large ring brings a dozen new
 * nodes; the rest are pinged when met again).
 */
static void probe_contact(chord_t *c, const struct cfs_node *n)
{
	struct cfs_msg m;

	if (c->probes >= PROBES_MAX || chord__local(c, &n->id) ||
	    cfs_transport_peer_srtt_us(c->tr, &n->addr))
		return;
	cfs_msg_init(&m, CFS_MSG_PING);
	m.has_to = true;
	m.to_id = n->id;
	if (chord__call_background(c, n, &m, 0, probed, c) == 0)
		c->probes++;
}

void chord__client_learn(chord_t *c, const struct cfs_node *n)
{
	if (!c->client || !chord__node_id_ok(c, n))
		return;
	for (uint32_t i = 0; i < c->ncontacts; i++)
		if (cfs_id_eq(&c->contacts[i].id, &n->id)) {
			c->contacts[i] = *n; /* a fresher coordinate */
			probe_contact(c, n);
			return;
		}
	if (c->ncontacts < CONTACTS)
		c->contacts[c->ncontacts++] = *n;
	else
		c->contacts[cfs_rng_next(&c->rng) % CONTACTS] = *n;
	probe_contact(c, n);
}

void chord__client_forget(chord_t *c, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < c->ncontacts; i++)
		if (cfs_id_eq(&c->contacts[i].id, id)) {
			c->contacts[i] = c->contacts[--c->ncontacts];
			return;
		}
}

/* Up to cap contacts, nearest predecessor of key first. */
uint32_t chord__client_candidates(const chord_t *c, const struct cfs_id *key, struct cfs_node *out,
                           uint32_t cap)
{
	uint32_t n = 0;
	double gap[CONTACTS];

	for (uint32_t i = 0; i < c->ncontacts; i++) {
		struct cfs_id d;
		cfs_id_distance(&d, &c->contacts[i].id, key);
		double g = cfs_id_to_unit(&d);
		uint32_t j = n < cap ? n++ : cap;
		if (j == cap && g >= gap[cap - 1])
			continue;
		if (j == cap)
			j = cap - 1;
		while (j > 0 && gap[j - 1] > g) {
			gap[j] = gap[j - 1];
			out[j] = out[j - 1];
			j--;
		}
		gap[j] = g;
		out[j] = c->contacts[i];
	}
	return n;
}

static void clk_done(void *arg, const struct chord_lookup_result *r)
{
	struct clk *k = arg;
	chord_t *c = k->c;

	if (r->status == 0) {
		for (uint32_t i = 0; i < r->n; i++)
			chord__client_learn(c, &r->succ[i]);
		for (uint32_t i = 0; i < r->npath; i++)
			chord__client_learn(c, &r->path[i]);
	} else if (r->status != -ECANCELED && k->boot_tries < c->nboot && !c->freeing) {
		/* Every contact failed (or there were none): a bootstrap. */
		const struct cfs_addr *a = &c->boot[c->boot_next++ % c->nboot];
		k->boot_tries++;
		k->rpcs += r->rpcs;
		k->timeouts += r->timeouts;
		if (chord__lookup_start(c, &c->v[0], a, &k->key, &k->o, clk_done, k) == 0)
			return;
	}
	struct chord_lookup_result res = *r;
	res.rpcs += k->rpcs;
	res.timeouts += k->timeouts;
	res.latency_us = cfs_now_us() - k->started_us;
	k->cb(k->arg, &res);
	free(k);
}

int chord__client_lookup(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                  chord_lookup_cb cb, void *arg)
{
	struct clk *k = xcalloc(1, sizeof(*k));
	const struct cfs_addr *first = NULL;
	int r;

	k->c = c;
	k->key = *key;
	k->o = *o;
	k->o.mode = CHORD_MODE(CHORD_ITERATIVE, CHORD_MODE_SELECT(o->mode));
	k->cb = cb;
	k->arg = arg;
	k->started_us = cfs_now_us();
	if (c->ncontacts == 0) {
		first = &c->boot[c->boot_next++ % c->nboot];
		k->boot_tries = 1;
	}
	if ((r = chord__lookup_start(c, &c->v[0], first, key, &k->o, clk_done, k)) < 0)
		free(k);
	return r;
}
