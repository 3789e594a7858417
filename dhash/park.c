/*
 * Replica copies that wait for their sender's authentication.
 *
 * A replica's copy (a STORE without flags) is admitted only from an
 * authenticated member near the key (server.c, dhash__admit_replica; CFS
 * 4.4, Sit and Morris 2002). A primary several places before a replica is
 * in none of the replica's tables, so the first copy it pushes there starts
 * an authentication (one AUTH round trip) and, refused at once, was left
 * for sync to repair: a put then had one copy less until the next round.
 * Such a copy now waits here until the answer is in — at most DHASH_PARK_MS,
 * at most DHASH_PARK_MAX copies and DHASH_PARK_BYTES in all, beyond which
 * it is refused as before — and is then stored or refused.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

#define DHASH_PARK_MS 1000          /* longer than an AUTH's timeout */
#define DHASH_PARK_TICK_MS 20
#define DHASH_PARK_MAX 256
#define DHASH_PARK_BYTES (8u << 20)

struct dhash__parked {
	struct dhash__parked *next;
	struct cfs_reply_to from;
	uint64_t until_us;
	struct cfs_id key, from_id;
	uint32_t from_vindex, kind, flags;
	uint64_t lease_until;
	size_t len;
	uint8_t data[];
};

void dhash__park_init(dhash_server_t *s)
{
	uv_timer_init(s->loop, &s->park_timer);
	s->park_timer.data = s;
}

/* The STORE as it arrived (the bytes are the parked copy's). */
static void rebuild(const struct dhash__parked *p, struct cfs_msg *m)
{
	cfs_msg_init(m, CFS_MSG_STORE);
	m->has_from = true;
	m->from_id = p->from_id;
	m->from_vindex = p->from_vindex;
	m->key = p->key;
	m->kind = p->kind;
	m->flags = p->flags;
	m->lease_until = p->lease_until;
	m->data = (struct cfs_bytes){ p->data, p->len };
}

static void release(dhash_server_t *s, struct dhash__parked **at)
{
	struct dhash__parked *p = *at;

	*at = p->next;
	s->nparked--;
	s->parked_bytes -= p->len;
	free(p);
}

/* Every tick: a copy whose sender's check ended goes through the STORE
 * path again (admitted or refused there); one still waiting at its
 * deadline is refused. */
static void on_tick(uv_timer_t *h)
{
	dhash_server_t *s = h->data;
	static struct cfs_msg m; /* large: not on the stack */
	uint64_t now = cfs_now_us();

	for (struct dhash__parked **at = &s->parked; *at;) {
		struct dhash__parked *p = *at;
		bool waiting = chord_member_pending(s->chord, &p->from_id);
		if (waiting && now < p->until_us) {
			at = &p->next;
			continue;
		}
		struct cfs_reply_to from = p->from;
		rebuild(p, &m);
		if (waiting) {
			s->admit_stranger++;
			(void)cfs_transport_reply_error(chord_transport(s->chord), &from, -EPERM);
		} else {
			dhash__handle_store(s, &m, &from);
		}
		release(s, at);
	}
	if (!s->parked)
		uv_timer_stop(&s->park_timer);
}

bool dhash__park(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct dhash__parked *p;

	if (!req->has_from || !chord_member_pending(s->chord, &req->from_id) ||
	    s->nparked >= DHASH_PARK_MAX || s->parked_bytes + req->data.len > DHASH_PARK_BYTES)
		return false;
	p = xmalloc(sizeof(*p) + (req->data.len ? req->data.len : 1));
	*p = (struct dhash__parked){ .next = s->parked, .from = *from,
	                             .until_us = cfs_now_us() + DHASH_PARK_MS * 1000ull,
	                             .key = req->key, .from_id = req->from_id,
	                             .from_vindex = req->from_vindex, .kind = req->kind,
	                             .flags = req->flags, .lease_until = req->lease_until,
	                             .len = req->data.len };
	memcpy(p->data, req->data.p, req->data.len);
	s->parked = p;
	s->nparked++;
	s->parked_bytes += p->len;
	s->admit_parked++;
	if (!uv_is_active((uv_handle_t *)&s->park_timer))
		uv_timer_start(&s->park_timer, on_tick, DHASH_PARK_TICK_MS, DHASH_PARK_TICK_MS);
	return true;
}

void dhash__park_close(dhash_server_t *s, uv_close_cb cb)
{
	while (s->parked) {
		(void)cfs_transport_reply_error(chord_transport(s->chord), &s->parked->from, -EPERM);
		release(s, &s->parked);
	}
	uv_close((uv_handle_t *)&s->park_timer, cb);
}
