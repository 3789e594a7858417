/*
 * Token buckets for node authentication (about 1 MB of UDP once
 * queued 12,735 AUTH calls). Every node offered to the tables by a LEAVE, a
 * NOTIFY or a reply costs an AUTH round trip to an address someone else
 * chose; this bounds how many a daemon sends, per source address and
 * overall. Beyond the budget a check is dropped (and counted), not queued:
 * whatever offered the node offers it again next round if it is real.
 *
 * The per-source table is bounded. When it is full, the entry with the
 * fullest bucket is reused (the least recently used among equals): a new
 * entry starts full, so this gives back the least budget, nothing at all
 * when that bucket had refilled, and a source that spent its budget is the
 * last to be forgotten. Sources are IP
 * addresses without the port (IPv6: the /64), the unit that part A's node
 * IDs bound.
 */
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

double chord__bucket_level(const struct chord__bucket *b, uint64_t now_us, double rate, double burst)
{
	double t;

	if (b->at_us == 0)
		return burst; /* new: starts full */
	t = b->tokens;
	if (now_us > b->at_us)
		t += rate * (double)(now_us - b->at_us) / 1e6;
	return t > burst ? burst : t;
}

bool chord__bucket_take(struct chord__bucket *b, uint64_t now_us, double rate, double burst)
{
	double t = chord__bucket_level(b, now_us, rate, burst);

	if (t < 1.0)
		return false;
	b->tokens = t - 1.0;
	if (now_us > b->at_us || b->at_us == 0)
		b->at_us = now_us ? now_us : 1;
	return true;
}

void chord__rl_init(struct chord__ratelimit *r, const struct chord__rl_params *p)
{
	memset(r, 0, sizeof(*r));
	r->p = *p;
	r->src = xcalloc(p->sources, sizeof(r->src[0]));
}

void chord__rl_free(struct chord__ratelimit *r)
{
	free(r->src);
	r->src = NULL;
}

/* The source key of an address: its IP, an IPv6 address cut to its /64. */
static void src_key(const struct cfs_addr *a, uint8_t key[static 17])
{
	const uint8_t *ip;
	size_t len = cfs_addr_ip_bytes(a, &ip);

	memset(key, 0, 17);
	key[0] = (uint8_t)len;
	memcpy(key + 1, ip, len > 8 && len == 16 ? 8 : len);
}

static struct chord__rl_src *src_get(struct chord__ratelimit *r, const struct cfs_addr *a, uint64_t now_us)
{
	uint8_t key[17];
	struct chord__rl_src *victim = NULL;

	src_key(a, key);
	for (uint32_t i = 0; i < r->nsrc; i++)
		if (memcmp(r->src[i].key, key, sizeof(key)) == 0)
			return &r->src[i];
	if (r->nsrc < r->p.sources) {
		victim = &r->src[r->nsrc++];
	} else {
		double best = -1;
		for (uint32_t i = 0; i < r->nsrc; i++) {
			struct chord__rl_src *s = &r->src[i];
			double lv = chord__bucket_level(&s->b, now_us, r->p.src_rate, r->p.src_burst);
			if (lv > best || (lv == best && s->used_us < victim->used_us)) {
				best = lv;
				victim = s;
			}
		}
		r->evicted++;
	}
	memset(victim, 0, sizeof(*victim));
	memcpy(victim->key, key, sizeof(key));
	return victim;
}

int chord__rl_admit(struct chord__ratelimit *r, uint64_t now_us, const struct cfs_addr *src)
{
	struct chord__rl_src *s = NULL;

	if (src) {
		s = src_get(r, src, now_us);
		s->used_us = now_us;
		if (chord__bucket_level(&s->b, now_us, r->p.src_rate, r->p.src_burst) < 1.0) {
			r->dropped_src++;
			return -EAGAIN;
		}
	}
	if (!chord__bucket_take(&r->all, now_us, r->p.all_rate, r->p.all_burst)) {
		r->dropped_all++;
		return -EBUSY;
	}
	if (s)
		(void)chord__bucket_take(&s->b, now_us, r->p.src_rate, r->p.src_burst);
	return 0;
}
