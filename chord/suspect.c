/*
 * Suspects: ring members caught lying in a lookup answer (lookup_sm.c's
 * checks) or failing to serve a block they claimed to hold (DHash reports
 * them through chord_suspect). Castro, Druschel, Ganesh, Rowstron,
 * Wallach, "Secure routing for structured peer-to-peer overlay networks"
 * (OSDI 2002) §4: once the routing-failure test fails, route again around
 * the node that misled us. A suspect is only skipped as a next hop (and
 * its block claims are not believed); it stays in the successor lists,
 * where it may well belong, and every entry expires, so an honest node
 * blamed for a timeout comes back by itself.
 *
 * Only this process's own checks add entries, never a remote's word, so
 * the table needs no admission; it is bounded all the same: when full,
 * the entry expiring first makes room.
 */
#include <string.h>

#include "chord/internal.h"

void chord__suspects_init(struct chord__suspects *s, uint64_t ttl_us)
{
	memset(s, 0, sizeof(*s));
	s->ttl_us = ttl_us;
}

static int find(const struct chord__suspects *s, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (cfs_id_eq(&s->e[i].id, id))
			return (int)i;
	return -1;
}

bool chord__suspects_add(struct chord__suspects *s, const struct cfs_id *id, const char *why,
                         uint64_t now_us)
{
	int i = find(s, id);
	bool fresh = i < 0 || s->e[i].until_us <= now_us;

	if (i < 0) {
		if (s->n < CHORD__SUSPECTS_MAX) {
			i = (int)s->n++;
		} else {
			i = 0;
			for (uint32_t j = 1; j < s->n; j++)
				if (s->e[j].until_us < s->e[i].until_us)
					i = (int)j;
		}
	}
	s->e[i] = (struct chord__suspect){ .id = *id, .until_us = now_us + s->ttl_us, .why = why };
	s->reported += fresh;
	return fresh;
}

bool chord__suspects_has(const struct chord__suspects *s, const struct cfs_id *id, uint64_t now_us)
{
	int i = find(s, id);

	return i >= 0 && s->e[i].until_us > now_us;
}

uint32_t chord__suspects_count(const struct chord__suspects *s, uint64_t now_us)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < s->n; i++)
		k += s->e[i].until_us > now_us;
	return k;
}

bool chord__suspect_is(const chord_t *c, const struct cfs_id *id)
{
	return c->susp.n > 0 && chord__suspects_has(&c->susp, id, cfs_now_us());
}

void chord_suspect(chord_t *c, const struct cfs_id *id, const char *why)
{
	char s[9];

	if (chord__local(c, id))
		return;
	if (c->susp.ttl_us == 0) /* chord_new leaves it to us: the default */
		c->susp.ttl_us = (uint64_t)(c->cfg.suspect_ms ? c->cfg.suspect_ms
		                                               : CHORD_SUSPECT_MS_DEFAULT) * 1000;
	if (chord__suspects_add(&c->susp, id, why, cfs_now_us()))
		log_warn("chord: suspect %s: %s", cfs_id_short(id, s), why);
}

bool chord_is_suspect(const chord_t *c, const struct cfs_id *id)
{
	return chord__suspect_is(c, id);
}
