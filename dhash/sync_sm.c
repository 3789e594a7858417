/*
 * Replica maintenance's rules (sync_sm.h), pure; sync.c says why replicas
 * are compared this way (CFS 5.2, DHash++ 4.4) and applies them.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/sync_sm.h"

#define REFUSED_CAP_MS (24ull * 3600 * 1000) /* a peer's denial believed at most a day, ... */
#define REFUSED_MAX 65536                     /* ... for at most this many (key, peer) pairs */

void dhash__sync_part_end(const struct dhash__sync_range *r, uint32_t i, struct cfs_id *ret)
{
	struct cfs_id width, step_;

	if (i + 1 == DHASH_SYNC_PARTS) {
		*ret = r->hi;
		return;
	}
	cfs_id_sub(&width, &r->hi, &r->lo);
	if (cfs_id_is_zero(&width)) /* the whole circle */
		cfs_id_add_pow2(&step_, &(struct cfs_id){ { 0 } }, CFS_ID_BITS - DHASH_SYNC_PART_BITS);
	else
		cfs_id_shr(&step_, &width, DHASH_SYNC_PART_BITS);
	*ret = r->lo;
	for (uint32_t k = 0; k <= i; k++)
		cfs_id_add(ret, ret, &step_);
}

/* DHash++ 4.4: a range with few keys here is listed at once, unless it
 * holds a root not yet compared by digest (a listing alone cannot tell
 * root versions apart); a larger one is split by digest, down to
 * DEPTH_MAX levels. */
bool dhash__sync_splits(const struct dhash__sync_range *r, uint32_t n, bool roots)
{
	return (n > DHASH_SYNC_LEAF_KEYS || (roots && !r->differs)) && r->depth < DHASH_SYNC_DEPTH_MAX;
}

/* A server that was down during a republish holds the older root under
 * the same key: the newer of the two is kept on both sides (the peer
 * accepts a higher sequence, handle_store). */
int dhash__sync_root_cmp(uint8_t mine_kind, uint64_t mine_seq, uint8_t their_kind, uint64_t their_seq)
{
	if (mine_kind != DHASH_KIND_ROOT || their_kind != DHASH_KIND_ROOT || their_seq == mine_seq)
		return 0;
	return their_seq < mine_seq ? -1 : 1;
}

/* ------------------------------------------------------------ refusals */

struct refused_key {
	struct cfs_id key, peer;
};
struct refused_val {
	uint64_t until_ms;        /* not pushed before */
	uint64_t interval_ms;     /* the last wait; the next refusal doubles it */
};

void dhash__sync_refused_init(struct cfs_htab *t)
{
	cfs_htab_init(t, sizeof(struct refused_key), sizeof(struct refused_val));
}

/* cfs_htab_filter: keep an entry while its backoff may still matter. */
static bool refused_live(void *ctx, const void *key, void *val)
{
	const struct refused_val *v = val;

	return v->until_ms + v->interval_ms > *(uint64_t *)ctx;
}

void dhash__sync_refuse(struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                        uint64_t now_ms, uint64_t first_ms)
{
	struct refused_key rk = { *key, *peer };
	struct refused_val *v;
	bool added;

	if (cfs_htab_count(t) >= REFUSED_MAX && cfs_htab_filter(t, refused_live, &now_ms) == 0)
		cfs_htab_clear(t); /* all live: start again, pushes cost a round */
	v = cfs_htab_put(t, &rk, &added);
	if (added || v->until_ms + v->interval_ms <= now_ms)
		v->interval_ms = first_ms;
	else if (v->interval_ms < REFUSED_CAP_MS / 2)
		v->interval_ms *= 2;
	else
		v->interval_ms = REFUSED_CAP_MS;
	v->until_ms = now_ms + v->interval_ms;
}

bool dhash__sync_is_refused(const struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                            uint64_t now_ms)
{
	struct refused_key rk = { *key, *peer };
	struct refused_val *v;

	if (!t || !(v = cfs_htab_get(t, &rk)))
		return false;
	return v->until_ms > now_ms;
}
