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
 *
 * One lie is no proof on its own: a node asked because it precedes the
 * key that claims the key. An honest node does that too for a moment: a
 * server that has just joined (or restarted) between it and its
 * predecessor names it as the next hop for the joiner's own keys, and it
 * claims them until the joiner's first stabilization notifies it. Such a
 * claim is refused at once (the lookup goes on without the node), and
 * the node becomes a suspect only when it claims again more than
 * CHORD__CLAIM_GRACE_US later: a liar keeps claiming, an honest node has
 * learned its predecessor by then.
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

bool chord__suspects_strike(struct chord__suspects *s, const struct cfs_id *id, uint64_t now_us)
{
	uint32_t i, oldest = 0;

	for (i = 0; i < s->nstrike; i++) {
		if (cfs_id_eq(&s->strike[i].id, id))
			break;
		if (s->strike[i].first_us < s->strike[oldest].first_us)
			oldest = i;
	}
	if (i < s->nstrike && s->strike[i].first_us + CHORD__CLAIM_WINDOW_US > now_us) {
		if (s->strike[i].first_us + CHORD__CLAIM_GRACE_US >= now_us)
			return false;
		/* a suspect: its next claim in a window from now is one too */
		s->strike[i].first_us = now_us - CHORD__CLAIM_GRACE_US;
		return true;
	}
	if (i == s->nstrike)
		i = s->nstrike < CHORD__SUSPECTS_MAX ? s->nstrike++ : oldest;
	s->strike[i] = (struct chord__strike){ .id = *id, .first_us = now_us };
	return false;
}

uint32_t chord__suspects_count(const struct chord__suspects *s, uint64_t now_us)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < s->n; i++)
		k += s->e[i].until_us > now_us;
	return k;
}

bool chord__suspect_is(const chord_t *c, const struct cfs_id *id, uint64_t now)
{
	return c->susp.n > 0 && chord__suspects_has(&c->susp, id, now);
}

static void add(chord_t *c, const struct cfs_id *id, const char *why, uint64_t now)
{
	char s[9];

	if (chord__local(c, id))
		return;
	if (c->susp.ttl_us == 0) /* chord_new leaves it to us: the default */
		c->susp.ttl_us = (uint64_t)(c->cfg.suspect_ms ? c->cfg.suspect_ms
		                                               : CHORD_SUSPECT_MS_DEFAULT) * 1000;
	if (chord__suspects_add(&c->susp, id, why, now))
		log_warn("chord: suspect %s: %s", cfs_id_short(id, s), why);
}

void chord_suspect(chord_t *c, const struct cfs_id *id, const char *why)
{
	add(c, id, why, cfs_now_us());
}

bool chord__suspect_claim(chord_t *c, const struct cfs_id *id, const char *why, uint64_t now)
{
	char s[9];

	if (chord__local(c, id))
		return false;
	if (chord__suspects_strike(&c->susp, id, now)) {
		add(c, id, why, now);
		return true;
	}
	log_debug("chord: %s %s; refused, no suspect yet (its predecessor may have just joined)",
	          cfs_id_short(id, s), why);
	return false;
}

bool chord_is_suspect(const chord_t *c, const struct cfs_id *id)
{
	return chord__suspect_is(c, id, cfs_now_us());
}
