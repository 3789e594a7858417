/*
 * A client's FETCHes out per server (client_sm.h, struct dhash__busy),
 * for the choice among replicas about as near as each other
 * (get_sm.c, order_candidates): a small table, scanned. A server the
 * table has no room for is not counted, and counts as idle; the answer
 * to a fetch it did not count may take one off a count begun later, an
 * undercount that only makes that server look less busy. Coded
 * fragments' fetches (coded.c) are not counted.
 */
#include "dhash/client_sm.h"

static struct dhash__busy_entry *busy_find(struct dhash__busy *b, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < b->n; i++)
		if (b->e[i].out && cfs_addr_eq(&b->e[i].addr, a))
			return &b->e[i];
	return NULL;
}

void dhash__busy_add(struct dhash__busy *b, const struct cfs_addr *a)
{
	struct dhash__busy_entry *e = busy_find(b, a);

	for (uint32_t i = 0; !e && i < b->n; i++)
		if (!b->e[i].out)
			e = &b->e[i];
	if (!e && b->n < DHASH_BUSY_MAX)
		e = &b->e[b->n++];
	if (!e)
		return;
	if (!e->out)
		e->addr = *a;
	e->out++;
}

void dhash__busy_drop(struct dhash__busy *b, const struct cfs_addr *a)
{
	struct dhash__busy_entry *e = busy_find(b, a);

	if (e)
		e->out--;
}

uint32_t dhash__busy_of(struct dhash__busy *b, const struct cfs_addr *a)
{
	const struct dhash__busy_entry *e = busy_find(b, a);

	return e ? e->out : 0;
}
