/*
 * The learned table: nodes met in traffic (lookup answers, requests,
 * maintenance), kept sorted by ID up to a fixed count, so that a lookup can
 * start at the known node nearest before its key. In a ring whose members
 * this table mostly holds, that node's successor list covers the key and a
 * lookup takes one round trip (EpiChord; Accordion's table learned from
 * lookup traffic). It costs no message of its own: what enters it was
 * already checked (a member's table: authenticated, chord__table_consider;
 * a plain client's: its ID is the hash of its address), and full, the entry
 * heard from longest ago makes room. A node found dead leaves it.
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

void chord__learned_add(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us)
{
	if (l->cap == 0)
		return;
	uint32_t i = lower_bound(l, &n->id);
	if (i < l->n && cfs_id_eq(&l->e[i].n.id, &n->id)) {
		l->e[i].n = *n; /* a new address or a fresher coordinate */
		l->e[i].seen_us = now_us;
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
	l->e[i] = (struct chord__lnode){ .n = *n, .seen_us = now_us, .added_us = now_us };
	l->n++;
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

uint32_t chord__learned_preceding(const struct chord__learned *l, const struct cfs_id *from,
                                  const struct cfs_id *key, uint64_t added_before_us,
                                  uint64_t seen_after_us, struct cfs_node *out, uint32_t cap)
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
		if (l->e[i].added_us > added_before_us || l->e[i].seen_us < seen_after_us)
			continue;
		out[n++] = l->e[i].n;
	}
	return n;
}

uint32_t chord_learned_count(const chord_t *c)
{
	return c->learned.n;
}

uint64_t chord_lookups_remembered(const chord_t *c)
{
	return c->lookups_remembered;
}
