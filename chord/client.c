/*
 * A plain client of the ring: a chord_t that is not a member. It has no
 * ID in anyone's tables (its messages carry no sender node, so servers
 * never offer it to their tables), runs no maintenance and answers no ring
 * requests. Its lookups are iterative and start at the known node that
 * most closely precedes the key, by the lookup mode's next-hop rule.
 *
 * The known nodes ("contacts") are what earlier lookups returned: the
 * key's successors and the hops on the way, each checked to be the hash
 * of its address (CFS 4.4), kept in the learned table (learned.c), so
 * that once it holds most of the ring a lookup takes one round trip. A
 * contact that fails to answer is forgotten. The table can be saved and
 * loaded again by the next run (chord_client_save / chord_client_load).
 * Before the first lookup, and when every contact has failed, a lookup
 * starts at a bootstrap address; each is tried once before the lookup
 * fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chord/internal.h"

#define CLIENT_LEARNED_MIN 64 /* contacts a member keeps once it turns client */
#define CLIENT_PAR 3          /* asks in flight per lookup (OpenDHT 3.2.2) */

struct clk {
	chord_t *c;
	struct cfs_id key;
	struct chord_lookup_opts o;
	chord_lookup_cb cb;
	void *arg;
	uint32_t boot_tries;      /* bootstrap addresses tried */
	bool contacts_after;      /* then the contacts loaded from a file */
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
	chord__sweep_stop(c);
	if (c->learned.cap == 0) /* --learned-nodes 0: a client still needs contacts */
		chord__learned_init(&c->learned, CLIENT_LEARNED_MIN);
	c->client = true; /* from here on: no sender node in our messages */
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *v = &c->v[vi];
		for (uint32_t i = 0; i < v->nsuccs; i++)
			chord__client_learn(c, &v->succ[i].n);
		for (int k = 0; k < NFINGERS; k++)
			if (v->finger[k].valid)
				chord__client_learn(c, &v->finger[k].n);
		if (v->pred.valid)
			chord__client_learn(c, &v->pred.n);
	}
	/* local virtual servers are no contacts: they answer nothing now */
	for (uint32_t vi = 0; vi < c->nv; vi++)
		(void)chord__learned_remove(&c->learned, &c->v[vi].self.id);
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
	return c->client ? c->learned.n : 0;
}

uint32_t chord_client_addresses(const chord_t *c)
{
	struct cfs_addr seen[CHORD_SUCC_MAX];
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->learned.n && n < CHORD_SUCC_MAX; i++) {
		if (!c->learned.e[i].seen_us) /* loaded, not yet heard from */
			continue;
		const struct cfs_addr *a = &c->learned.e[i].n.addr;
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_same_ip(a, &seen[j]);
		if (!dup)
			seen[n++] = *a;
	}
	return n;
}

#define PROBES_MAX 8
#define CAND_MAX 16 /* first hops offered to a lookup */

static void probe_contact(chord_t *c, const struct cfs_node *n);

/* Ping the loaded contacts not yet pinged, while probes are free. */
static void probe_more(chord_t *c)
{
	while (c->unproven_next < c->nunproven && c->probes < PROBES_MAX && !c->freeing) {
		struct cfs_node x = c->unproven[c->unproven_next++];
		probe_contact(c, &x);
	}
}

static void probed(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	chord_t *c = arg;

	/* the transport measured the round trip; chord_rtt_us reads it */
	c->probes--;
	if (status == -ECANCELED || c->freeing)
		return;
	/* a contact loaded from a file: met once it answers, gone if not */
	for (uint32_t i = 0; res && res->from && i < c->learned.n; i++) {
		struct chord__lnode *e = &c->learned.e[i];
		if (e->seen_us != 0 || !cfs_addr_eq(&e->n.addr, res->from))
			continue;
		if (status == 0)
			e->seen_us = cfs_now_us();
		else
			(void)chord__learned_remove(&c->learned, &e->n.id);
		break;
	}
	probe_more(c);
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
	if (!c->client || !chord__node_id_ok(c, n) || chord__local(c, &n->id))
		return;
	chord__learned_add(&c->learned, n, cfs_now_us());
	probe_contact(c, n);
}

void chord__client_forget(chord_t *c, const struct cfs_id *id)
{
	(void)chord__learned_remove(&c->learned, id);
	/* a remembered run naming it would send gets to it for minutes */
	for (uint32_t i = 0; i < c->narcs; i++)
		for (uint32_t j = 0; j < c->arcs[i].n; j++)
			if (cfs_id_eq(&c->arcs[i].succ[j].id, id)) {
				c->arcs[i].n = 0;
				break;
			}
}

/* Up to cap contacts, nearest predecessor of key first: those met in this
 * run (a contact loaded from a file counts once it answered a ping), or,
 * when none of those precedes the key, the loaded ones. */
uint32_t chord__client_candidates(const chord_t *c, const struct cfs_id *key, struct cfs_node *out,
                           uint32_t cap)
{
	struct cfs_node near[4 * CAND_MAX], later[4 * CAND_MAX];
	uint32_t want = cap < CAND_MAX ? cap : CAND_MAX, n = 0, nl = 0;
	uint32_t got = chord__learned_preceding(&c->learned, NULL, key, UINT64_MAX, 0, true, near, 4 * want);

	for (uint32_t i = 0; i < got && n < want; i++) {
		const struct chord__lnode *e = chord__learned_find(&c->learned, &near[i].id);
		if (e && e->seen_us == 0)
			later[nl++] = near[i];
		else
			out[n++] = near[i];
	}
	if (n == 0)
		for (uint32_t i = 0; i < nl && n < want; i++)
			out[n++] = later[i];
	return n;
}

uint32_t chord__client_met(const chord_t *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->learned.n; i++)
		n += c->learned.e[i].seen_us != 0;
	return n;
}

/* Has any contact been met in this run? */
static bool any_met(const chord_t *c)
{
	for (uint32_t i = 0; i < c->learned.n; i++)
		if (c->learned.e[i].seen_us)
			return true;
	return false;
}

/* The contacts that a save keeps: the most recently met. */
#define SAVED_MAX 512

static int by_seen_desc(const void *a, const void *b)
{
	const struct chord__saved *x = a, *y = b;
	return x->seen_us < y->seen_us ? 1 : x->seen_us > y->seen_us ? -1 : 0;
}

/* Measured ones first, the nearest first; then the rest, the most
 * recently met first. */
static int by_rtt(const void *a, const void *b)
{
	const struct chord__saved *x = a, *y = b;

	if ((x->rtt_us != 0) != (y->rtt_us != 0))
		return x->rtt_us ? -1 : 1;
	if (x->rtt_us != y->rtt_us)
		return x->rtt_us < y->rtt_us ? -1 : 1;
	return by_seen_desc(a, b);
}

/*
 * The order a save writes the contacts in, which is the order the next
 * run pings them in (PROBES_MAX at a time) and so, often, the order they
 * answer in: of the keep most recently met, those whose round trip this
 * run measured, nearest first, then the others, most recent first. The
 * next run's first requests wait for the first answer, 150 ms at most
 * (client/plain.c), and its first lookups start at the contacts that
 * answered; pinged most recent first, eight far contacts could keep a
 * near one waiting behind them. The round trips are this run's, so a
 * client that moved measures them again.
 */
uint32_t chord__client_save_order(struct chord__saved *v, uint32_t n, uint32_t keep)
{
	qsort(v, n, sizeof(*v), by_seen_desc);
	if (n > keep)
		n = keep;
	qsort(v, n, sizeof(*v), by_rtt);
	return n;
}

/* "IP:PORT" or "[IPv6]:PORT", literals only: a file is never a reason to
 * ask a name server. */
static int numeric_addr(char *s, struct cfs_addr *ret)
{
	char *colon = strrchr(s, ':'), *ip = s, *end;

	if (!colon || colon == s)
		return -EINVAL;
	*colon = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (*end || end == colon + 1 || port == 0 || port > 65535)
		return -EINVAL;
	if (ip[0] == '[') {
		size_t len = strlen(ip);
		if (len < 3 || ip[len - 1] != ']')
			return -EINVAL;
		ip[len - 1] = 0;
		ip++;
		if (!strchr(ip, ':'))
			return -EINVAL;
	} else if (strchr(ip, ':')) {
		return -EINVAL;
	}
	return cfs_addr_from_ip(ret, ip, (uint16_t)port);
}

int chord_contact_parse(const char *line, struct cfs_node *ret)
{
	char addr[CFS_ADDR_STRLEN + 1], extra;
	unsigned vi;
	struct cfs_node x = { 0 };

	if (sscanf(line, "%64s %u %c", addr, &vi, &extra) != 2 || addr[0] == '#' ||
	    vi >= CFS_VNODE_INDEX_MAX || numeric_addr(addr, &x.addr) < 0)
		return -EINVAL;
	x.vindex = vi;
	cfs_node_id(&x.id, &x.addr, vi);
	*ret = x;
	return 0;
}

int chord_client_save(const chord_t *c, const char *path)
{
	if (c->learned.n == 0) /* every contact gone: nothing to start from */
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	struct chord__saved *v = xcalloc(c->learned.n, sizeof(*v));
	struct cfs_sbuf b = { 0 };
	char a[CFS_ADDR_STRLEN];
	int r;

	for (uint32_t i = 0; i < c->learned.n; i++)
		v[i] = (struct chord__saved){ i, c->learned.e[i].seen_us,
		                              cfs_transport_peer_srtt_us(c->tr, &c->learned.e[i].n.addr) };
	uint32_t n = chord__client_save_order(v, c->learned.n, SAVED_MAX);
	cfs_sb_printf(&b, "# cfs ring contacts: address virtual-server-index\n");
	for (uint32_t i = 0; i < n; i++) {
		const struct cfs_node *x = &c->learned.e[v[i].idx].n;
		cfs_sb_printf(&b, "%s %u\n", cfs_addr_str(&x->addr, a), x->vindex);
	}
	r = cfs_write_file_atomic(path, b.p, b.len, 0644);
	free(b.p);
	free(v);
	return r;
}

/*
 * Contacts saved by an earlier run: each one's ID is the hash of its
 * address and index, so nothing in the file is taken on trust; but any of
 * them may have left since. They enter the table as met long ago (the first
 * to go when it fills), are pinged in the background (one that does not
 * answer is dropped), and come after every contact that has answered as a
 * lookup's first hop (chord__client_candidates).
 */
int chord_client_load(chord_t *c, const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	uint32_t n = 0;

	if (!f)
		return -errno;
	if (!c->unproven)
		c->unproven = xcalloc(SAVED_MAX, sizeof(*c->unproven));
	while (fgets(line, sizeof(line), f) && c->nunproven < SAVED_MAX) {
		struct cfs_node x;
		if (chord_contact_parse(line, &x) < 0)
			continue;
		if (chord__local(c, &x.id) || chord__learned_find(&c->learned, &x.id))
			continue;
		chord__learned_add(&c->learned, &x, 0);
		c->unproven[c->nunproven++] = x;
		n++;
	}
	fclose(f);
	probe_more(c);
	return (int)n;
}

uint32_t chord__arcs_find(const struct chord__arc *arcs, uint32_t n, const struct cfs_id *key,
                          uint64_t now_us, uint32_t want, struct cfs_node *out)
{
	const struct chord__arc *best = NULL;
	uint32_t best_j = 0, need = want < CHORD__ARC_MIN ? want : CHORD__ARC_MIN;

	for (uint32_t i = 0; i < n; i++) {
		const struct chord__arc *a = &arcs[i];
		if (a->n == 0 || a->at_us + CHORD__ARC_TTL_US <= now_us || (best && a->at_us <= best->at_us))
			continue;
		/* key's successor is the first of the run at or after it, the
		 * run starting right after the key it was given for */
		uint32_t j = 0;
		if (cfs_id_eq(&a->key, &a->succ[0].id)) /* (x, x] would be the whole circle */
			j = cfs_id_eq(key, &a->key) ? 0 : 1;
		while (j < a->n && !cfs_id_eq(key, &a->key) &&
		       !cfs_id_in_oc(key, j ? &a->succ[j - 1].id : &a->key, &a->succ[j].id))
			j++;
		if (j < a->n && a->n - j >= need) {
			best = a;
			best_j = j;
		}
	}
	if (!best)
		return 0;
	uint32_t m = 0;
	for (uint32_t j = best_j; j < best->n && m < want; j++)
		out[m++] = best->succ[j];
	return m;
}

/* Remember a checked answer's run of successors (the oldest run makes
 * room). */
static void arc_keep(chord_t *c, const struct cfs_id *key, const struct chord_lookup_result *r)
{
	if (!r->checked || r->has_block || r->n < 2)
		return;
	if (!c->arcs)
		c->arcs = xcalloc(CHORD__ARCS_MAX, sizeof(*c->arcs));
	struct chord__arc *a = &c->arcs[c->arc_next];

	c->arc_next = (c->arc_next + 1) % CHORD__ARCS_MAX;
	if (c->narcs < CHORD__ARCS_MAX)
		c->narcs++;
	a->key = *key;
	a->at_us = cfs_now_us();
	a->n = r->n;
	memcpy(a->succ, r->succ, r->n * sizeof(r->succ[0]));
}

static void clk_done(void *arg, const struct chord_lookup_result *r)
{
	struct clk *k = arg;
	chord_t *c = k->c;

	if (r->status == 0) {
		arc_keep(c, &k->key, r);
		for (uint32_t i = 0; i < r->n; i++)
			chord__client_learn(c, &r->succ[i]);
		for (uint32_t i = 0; i < r->npath; i++)
			chord__client_learn(c, &r->path[i]);
	} else if (r->status != -ECANCELED && !c->freeing &&
	           (k->boot_tries < c->nboot || (k->contacts_after && c->learned.n > 0))) {
		/* Every contact failed (or there were none): a bootstrap; every
		 * bootstrap failed: the contacts loaded from a file. */
		const struct cfs_addr *a = NULL;
		if (k->boot_tries < c->nboot) {
			a = &c->boot[c->boot_next++ % c->nboot];
			k->boot_tries++;
		} else {
			k->contacts_after = false;
		}
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

/*
 * A plain client's lookups are iterative, by the caller's next-hop rule.
 * While it knows the delays of few of its contacts (a cold client knows
 * only a bootstrap address; a warm one's loaded contacts are still being
 * pinged), its rule cannot tell the near next hop from the far one among
 * those an answer names, and it asks CLIENT_PAR of them at once (OpenDHT
 * 3.2.2): the near one answers first and moves the lookup on. Asked one at
 * a time, a client in eu on the wide-area bed followed a us-west hop (145
 * ms, twice that to a server that has not seen its address yet) where an
 * eu one (10 ms) had the same answer: a cold start's root lookup took 322
 * ms, 161 with several at once (the bootstrap's own round trips). Once it
 * knows most of the delays it asks one at a time, as before: the rule
 * then picks well, and every extra ask is load on the ring (a directory's
 * prefetch makes hundreds of lookups). A caller's larger count is kept
 * while the delays are unknown.
 */
uint32_t chord__client_mode(uint32_t mode, uint32_t contacts, uint32_t delays_known)
{
	uint32_t m = CHORD_MODE(CHORD_ITERATIVE, CHORD_MODE_SELECT(mode));
	uint32_t par = CHORD_MODE_PAR(mode) > CLIENT_PAR ? CHORD_MODE_PAR(mode) : CLIENT_PAR;

	if (2 * delays_known > contacts)
		par = 1;

	return CHORD_MODE_WITH_PAR(m, par);
}

/* Contacts whose round trip this process has measured. */
static uint32_t delays_known(const chord_t *c)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < c->learned.n; i++)
		n += cfs_transport_peer_srtt_us(c->tr, &c->learned.e[i].n.addr) != 0;
	return n;
}

int chord__client_lookup(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                  chord_lookup_cb cb, void *arg)
{
	const struct cfs_addr *first = NULL;
	int r;

	if ((o->flags & CHORD_LOOKUP_F_REMEMBERED) && c->narcs > 0) {
		struct chord_lookup_result res = { .checked = true };
		uint32_t want = o->nsucc < 1 ? 1 : o->nsucc > CFS_MSG_MAX_NODES ? CFS_MSG_MAX_NODES : o->nsucc;
		if ((res.n = chord__arcs_find(c->arcs, c->narcs, key, cfs_now_us(), want, res.succ)) > 0 &&
		    chord__lookup_answered(c, key, o, &res, cb, arg) == 0) {
			c->lookups_remembered++;
			return 0;
		}
	}
	struct clk *k = xcalloc(1, sizeof(*k));

	k->c = c;
	k->key = *key;
	k->o = *o;
	k->o.mode = chord__client_mode(o->mode, c->learned.n, delays_known(c));
	k->cb = cb;
	k->arg = arg;
	k->started_us = cfs_now_us();
	/* Contacts first once one was met in this run; before that (none, or
	 * only those loaded from a file, which may all have left) a bootstrap
	 * address, the loaded contacts after them (clk_done). */
	if (!any_met(c)) {
		first = &c->boot[c->boot_next++ % c->nboot];
		k->boot_tries = 1;
		k->contacts_after = c->learned.n > 0;
	}
	if ((r = chord__lookup_start(c, &c->v[0], first, key, &k->o, clk_done, k)) < 0)
		free(k);
	return r;
}
