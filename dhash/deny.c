/*
 * The operator's denylist, as the server applies it. The list itself (its
 * file, the volumes it came from) is cfsd's; the server only holds the set
 * of keys it was handed, and every path that stores or serves a block
 * asks it: a STORE (replica, client or cache copy) is refused with
 * DHASH_DENIED, a FETCH is answered -ENOENT as by a server that holds no
 * copy, a lookup hop does not claim the block, and replica maintenance
 * neither fetches a denied key from a peer nor pushes one (sync.c). Since
 * a denied key is never stored here again, the copies deleted when it was
 * denied stay deleted: no round of maintenance pulls them back.
 *
 * A denied volume is denied by its root key; its versions, each under a
 * key of its own, are recognised by the volume they name (a version block
 * is a signed root): dhash__deny_covers.
 */
#include <stdlib.h>

#include "dhash/internal.h"
#include "sfsro-format/sfsro.h"

static void deny_init(dhash_server_t *s)
{
	if (!s->deny_init) {
		cfs_htab_init(&s->deny, sizeof(struct cfs_id), 1);
		s->deny_init = true;
	}
}

bool dhash_server_is_denied(const dhash_server_t *s, const struct cfs_id *key)
{
	return s->deny_init && s->deny.n && cfs_htab_get(&s->deny, key) != NULL;
}

bool dhash__deny_covers(const dhash_server_t *s, uint32_t kind, const uint8_t *p, size_t len)
{
	struct sfsro_root r;
	struct cfs_id root_key;

	if (kind != DHASH_KIND_VERSION || !s->deny_init || !s->deny.n ||
	    sfsro_root_decode(p, len, &r) < 0)
		return false;
	sfsro_root_key(&r.pk, &root_key);
	return dhash_server_is_denied(s, &root_key);
}

uint32_t dhash_server_deny(dhash_server_t *s, const struct cfs_id *keys, uint32_t n)
{
	uint32_t dropped = 0;

	deny_init(s);
	for (uint32_t i = 0; i < n; i++) {
		bool added;
		(void)cfs_htab_put(&s->deny, &keys[i], &added);
		if (dhash_store_drop(s->store, &keys[i]) == 0)
			dropped++;
		if (s->cache && dhash_cache_del(s->cache, &keys[i]) == 0)
			dropped++;
	}
	s->deny_dropped += dropped;
	return dropped;
}

void dhash_server_allow(dhash_server_t *s, const struct cfs_id *key)
{
	if (s->deny_init)
		(void)cfs_htab_del(&s->deny, key, NULL);
}

uint64_t dhash_server_denied_count(const dhash_server_t *s)
{
	return s->deny_init ? cfs_htab_count(&s->deny) : 0;
}

void dhash__deny_free(dhash_server_t *s)
{
	if (s->deny_init)
		cfs_htab_free(&s->deny);
	s->deny_init = false;
}
