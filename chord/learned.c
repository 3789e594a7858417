/*
 * The learned table: nodes met in traffic (lookup answers, requests,
 * maintenance), kept sorted by ID up to a fixed count, so that a lookup can
 * start at the known node nearest before its key. In a ring whose members
 * this table mostly holds, that node's successor list covers the key and a
 * lookup takes one round trip (EpiChord; Accordion's table learned from
 * lookup traffic). What enters it was checked: a member's tables
 * authenticated it (chord__table_consider), or a lookup answer named it
 * and it answered an AUTH of its own, sent within a budget (a hint); a
 * plain client's: its ID is the hash of its address. Full, the entry heard
 * from longest ago makes room. A node found dead leaves it.
 *
 * Why hints are checked rather than tried as they come: an answer may
 * name any ID that hashes from an address, and a hostile node can grind
 * addresses for IDs just before the keys we look up; every fake it names
 * would cost one of our lookups a timeout before it was dropped, and send
 * our requests to addresses of its choosing. A check costs one AUTH in the
 * background, once a node; a checked node costs nothing later. Hints stay
 * out of everything but our own lookups' first hops: the successor lists,
 * fingers and predecessor, the authentication cache and the answers we
 * give others are what they would be without them.
 *
 * No I/O: the caller passes the time, so a unit test scripts it.
 */
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

void chord__learned_init(struct chord__learned *l, uint32_t cap)
{
	memset(l, 0, sizeof(*l));
	l->cap = cap;
}

void chord__learned_free(struct chord__learned *l)
{
	free(l->e);
	memset(l, 0, sizeof(*l));
}

/* The index of the first entry whose ID is >= id (n if none). */
static uint32_t lower_bound(const struct chord__learned *l, const struct cfs_id *id)
{
	uint32_t lo = 0, hi = l->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (cfs_id_cmp(&l->e[mid].n.id, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void remove_at(struct chord__learned *l, uint32_t i)
{
	memmove(&l->e[i], &l->e[i + 1], (l->n - i - 1) * sizeof(l->e[0]));
	l->n--;
}

static void insert(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us, bool hint)
{
	if (l->cap == 0)
		return;
	uint32_t i = lower_bound(l, &n->id);
	if (i < l->n && cfs_id_eq(&l->e[i].n.id, &n->id)) {
		l->e[i].n = *n; /* a new address or a fresher coordinate */
		l->e[i].seen_us = now_us;
		l->e[i].hint &= hint;
		return;
	}
	if (l->n == l->cap) {
		uint32_t old = 0;
		for (uint32_t j = 1; j < l->n; j++)
			if (l->e[j].seen_us < l->e[old].seen_us)
				old = j;
		remove_at(l, old);
		l->evicted++;
		if (old < i)
			i--;
	}
	if (!l->e)
		l->e = xcalloc(l->cap, sizeof(l->e[0]));
	memmove(&l->e[i + 1], &l->e[i], (l->n - i) * sizeof(l->e[0]));
	l->e[i] = (struct chord__lnode){ .n = *n, .seen_us = now_us, .added_us = now_us, .hint = hint };
	l->n++;
}

void chord__learned_add(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us)
{
	insert(l, n, now_us, false);
}

bool chord__learned_remove(struct chord__learned *l, const struct cfs_id *id)
{
	uint32_t i = lower_bound(l, id);

	if (i >= l->n || !cfs_id_eq(&l->e[i].n.id, id))
		return false;
	remove_at(l, i);
	return true;
}

const struct chord__lnode *chord__learned_find(const struct chord__learned *l, const struct cfs_id *id)
{
	uint32_t i = lower_bound(l, id);

	return i < l->n && cfs_id_eq(&l->e[i].n.id, id) ? &l->e[i] : NULL;
}

/* First offered at or before added_before_us, last at or after
 * seen_after_us, and a hint only when hints are wanted. */
static bool usable(const struct chord__lnode *e, uint64_t added_before_us, uint64_t seen_after_us,
                   bool hints)
{
	return e->added_us <= added_before_us && e->seen_us >= seen_after_us && (!e->hint || hints);
}

uint32_t chord__learned_preceding(const struct chord__learned *l, const struct cfs_id *from,
                                  const struct cfs_id *key, uint64_t added_before_us,
                                  uint64_t seen_after_us, bool hints, struct cfs_node *out,
                                  uint32_t cap)
{
	uint32_t n = 0;

	if (l->n == 0)
		return 0;
	/* Backwards from the last entry before key, wrapping round the ring,
	 * until cap entries, the whole table, or from. */
	uint32_t i = lower_bound(l, key);
	for (uint32_t seen = 0; seen < l->n && n < cap; seen++) {
		i = i ? i - 1 : l->n - 1;
		const struct cfs_id *id = &l->e[i].n.id;
		if (cfs_id_eq(id, key))
			continue;
		if (from && !cfs_id_in_oo(id, from, key))
			break;
		if (usable(&l->e[i], added_before_us, seen_after_us, hints))
			out[n++] = l->e[i].n;
	}
	return n;
}

uint32_t chord__learned_following(const struct chord__learned *l, const struct cfs_id *key,
                                  double span, uint64_t added_before_us, uint64_t seen_after_us,
                                  bool hints, struct cfs_node *out, uint32_t cap)
{
	uint32_t n = 0;

	if (l->n == 0)
		return 0;
	/* Forwards from the first entry after key, wrapping round the ring,
	 * while within span of it. */
	uint32_t i = lower_bound(l, key) % l->n;
	for (uint32_t seen = 0; seen < l->n && n < cap; seen++, i = (i + 1) % l->n) {
		const struct cfs_id *id = &l->e[i].n.id;
		struct cfs_id d;
		if (cfs_id_eq(id, key))
			continue;
		cfs_id_distance(&d, key, id);
		if (cfs_id_to_unit(&d) > span)
			break;
		if (usable(&l->e[i], added_before_us, seen_after_us, hints))
			out[n++] = l->e[i].n;
	}
	return n;
}

/* ------------------------------------------------------------ sweeps */

static bool swept_lately(const struct chord__learned *l, const struct cfs_id *id, uint64_t now_us)
{
	for (uint32_t i = 0; i < l->nswept; i++)
		if (cfs_id_eq(&l->swept[i].id, id))
			return l->swept[i].until_us > now_us;
	return false;
}

/* Note id as asked now; full, the note that ends first makes room. */
static void note_swept(struct chord__learned *l, const struct cfs_id *id, uint64_t now_us)
{
	uint32_t at = l->nswept;

	for (uint32_t i = 0; i < l->nswept && at == l->nswept; i++)
		if (cfs_id_eq(&l->swept[i].id, id))
			at = i;
	if (at == CHORD__LEARN_SWEPT) {
		at = 0;
		for (uint32_t i = 1; i < l->nswept; i++)
			if (l->swept[i].until_us < l->swept[at].until_us)
				at = i;
	} else if (at == l->nswept) {
		l->nswept++;
	}
	l->swept[at] = (struct chord__lbad){ .id = *id, .until_us = now_us + CHORD_SWEEP_AGAIN_US };
}

bool chord__learned_gap(struct chord__learned *l, const struct cfs_id *self, double min_gap,
                        uint64_t now_us, struct cfs_node *ret)
{
	double widest = min_gap;
	uint32_t at = UINT32_MAX;

	for (uint32_t i = 0; i < l->n; i++) {
		const struct cfs_id *a = &l->e[i].n.id, *b = &l->e[(i + 1) % l->n].n.id;
		struct cfs_id d;
		double g = 1.0;
		if (l->n > 1) {
			cfs_id_distance(&d, a, b);
			g = cfs_id_to_unit(&d);
		}
		/* ours to know: our successor list covers what follows us */
		if (g <= widest || (l->n > 1 && cfs_id_in_oo(self, a, b)) || swept_lately(l, a, now_us))
			continue;
		widest = g;
		at = i;
	}
	if (at == UINT32_MAX)
		return false;
	*ret = l->e[at].n;
	note_swept(l, &ret->id, now_us);
	l->sweeps++;
	return true;
}

/* ------------------------------------------------------------ hints */

static bool same_node(const struct cfs_node *a, const struct cfs_node *b)
{
	return cfs_id_eq(&a->id, &b->id) && a->vindex == b->vindex && cfs_addr_eq(&a->addr, &b->addr);
}

static int find_node(const struct cfs_node *v, uint32_t n, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < n; i++)
		if (cfs_id_eq(&v[i].id, id))
			return (int)i;
	return -1;
}

static bool is_bad(const struct chord__learned *l, const struct cfs_id *id, uint64_t now_us)
{
	for (uint32_t i = 0; i < l->nbad; i++)
		if (cfs_id_eq(&l->bad[i].id, id))
			return l->bad[i].until_us > now_us;
	return false;
}

/* Keep id out until now + CHORD_LEARN_BAD_US; full, the entry that
 * expires first makes room. */
static void mark_bad(struct chord__learned *l, const struct cfs_id *id, uint64_t now_us)
{
	uint32_t at = l->nbad;

	for (uint32_t i = 0; i < l->nbad && at == l->nbad; i++)
		if (cfs_id_eq(&l->bad[i].id, id))
			at = i;
	if (at == CHORD__LEARN_BAD) {
		at = 0;
		for (uint32_t i = 1; i < l->nbad; i++)
			if (l->bad[i].until_us < l->bad[at].until_us)
				at = i;
	} else if (at == l->nbad) {
		l->nbad++;
	}
	l->bad[at] = (struct chord__lbad){ .id = *id, .until_us = now_us + CHORD_LEARN_BAD_US };
}

void chord__learned_forget(struct chord__learned *l, const struct cfs_id *id, uint64_t now_us)
{
	int q = find_node(l->queue, l->nqueue, id);

	(void)chord__learned_remove(l, id);
	if (q >= 0) {
		memmove(&l->queue[q], &l->queue[q + 1], (l->nqueue - (uint32_t)q - 1) * sizeof(l->queue[0]));
		l->nqueue--;
	}
	if (l->cap)
		mark_bad(l, id, now_us);
}

void chord__learned_hint(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us)
{
	if (l->cap == 0)
		return;
	uint32_t i = lower_bound(l, &n->id);
	/* There already: named again at the address it was checked at, it is
	 * fresh; a hint named at another address waits for a check like a new
	 * node, one our tables hold stays as they hold it. */
	if (i < l->n && cfs_id_eq(&l->e[i].n.id, &n->id)) {
		if (same_node(&l->e[i].n, n))
			l->e[i].seen_us = now_us;
		if (same_node(&l->e[i].n, n) || !l->e[i].hint)
			return; /* the tables' word on where it is wins */
	}
	if (is_bad(l, &n->id, now_us) || find_node(l->flight, l->nflight, &n->id) >= 0 ||
	    find_node(l->queue, l->nqueue, &n->id) >= 0)
		return;
	if (l->nqueue == CHORD__LEARN_QUEUE) {
		memmove(&l->queue[0], &l->queue[1], (l->nqueue - 1) * sizeof(l->queue[0]));
		l->nqueue--;
		l->hints_dropped++;
	}
	l->queue[l->nqueue++] = *n;
}

bool chord__learned_next_check(struct chord__learned *l, uint64_t now_us, struct cfs_node *ret)
{
	if (l->nqueue == 0 || l->nflight >= CHORD_LEARN_AUTH_INFLIGHT ||
	    !chord__bucket_take(&l->budget, now_us, CHORD_LEARN_AUTH_RATE, CHORD_LEARN_AUTH_BURST))
		return false;
	*ret = l->queue[--l->nqueue]; /* the newest named: the likeliest alive */
	l->flight[l->nflight++] = *ret;
	l->probes++;
	return true;
}

void chord__learned_checked(struct chord__learned *l, const struct cfs_node *n, bool ok,
                            uint64_t now_us)
{
	int f = find_node(l->flight, l->nflight, &n->id);

	if (f < 0 || !same_node(&l->flight[f], n))
		return; /* not one in flight: never asked, or asked of another address */
	l->flight[f] = l->flight[--l->nflight];
	if (ok) {
		const struct chord__lnode *e = chord__learned_find(l, &n->id);
		l->probes_ok++;
		if (!e || e->hint)
			insert(l, n, now_us, true);
	} else {
		l->probes_failed++;
		mark_bad(l, &n->id, now_us);
	}
}

void chord__learned_seed(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us)
{
	if (chord__learned_find(l, &n->id))
		return;
	insert(l, n, now_us, true);
	struct chord__lnode *e = (struct chord__lnode *)chord__learned_find(l, &n->id);
	if (e) /* known for as long as the quarantine: usable as a hop now */
		e->added_us = now_us > CHORD_LEARNED_QUARANTINE_US ? now_us - CHORD_LEARNED_QUARANTINE_US : 0;
}

uint32_t chord_learned_seed(chord_t *c, const struct cfs_node *n, uint32_t count)
{
	uint64_t now = cfs_now_us();
	uint32_t before = c->learned.n;

	for (uint32_t i = 0; i < count; i++) {
		bool own = false;
		for (uint32_t v = 0; v < c->nv && !own; v++)
			own = cfs_id_eq(&n[i].id, &c->v[v].self.id);
		if (!own)
			chord__learned_seed(&c->learned, &n[i], now);
	}
	return c->learned.n - before;
}

uint32_t chord_learned_count(const chord_t *c)
{
	return c->learned.n;
}

uint64_t chord_learn_auths(const chord_t *c)
{
	return c->learned.probes;
}

uint64_t chord_learn_sweeps(const chord_t *c)
{
	return c->learned.sweeps;
}

uint64_t chord_lookups_remembered(const chord_t *c)
{
	return c->lookups_remembered;
}
