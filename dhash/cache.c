/*
 * A block cache on disk (a server's cached copies, a mount's warm cache):
 * the storage engine in cache mode (blockstore/blockstore.h), bounded in
 * bytes on disk. Old packs go first, the blocks used recently in them
 * copied forward (a CLOCK-like approximation of LRU that spares writes on
 * hot blocks). Nothing is flushed: a crash may lose the newest entries,
 * never the consistency of the rest, and readers verify every block they
 * take from here anyway.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

struct dhash_cache {
	bstore_t *bs;
	uint64_t cap;
};

int dhash_cache_open(const char *dir, uint64_t cap_bytes, dhash_cache_t **ret)
{
	dhash_cache_t *c = xcalloc(1, sizeof(*c));
	struct bstore_config cfg = { .mode = BSTORE_CACHE, .cap_bytes = cap_bytes, .what = "block cache" };
	int r = bstore_open(dir, &cfg, &c->bs);

	if (r < 0) {
		free(c);
		return r;
	}
	c->cap = cap_bytes;
	*ret = c;
	return 0;
}

void dhash_cache_close(dhash_cache_t *c)
{
	if (!c)
		return;
	bstore_close(c->bs);
	free(c);
}

void dhash_cache_trim(dhash_cache_t *c, uint64_t bytes)
{
	bstore_trim(c->bs, bytes);
}

int dhash_cache_get(dhash_cache_t *c, const struct cfs_id *key, uint8_t *kind, uint8_t **data,
                    size_t *len)
{
	struct bstore_meta m;
	int r = bstore_get(c->bs, key, &m, data);

	if (r == -EUCLEAN) { /* a damaged entry: forgotten, so that a put caches it again */
		(void)dhash_cache_del(c, key);
		return -ENOENT;
	}
	if (r < 0)
		return r;
	*kind = m.kind;
	*len = m.len;
	return 0;
}

int dhash_cache_put(dhash_cache_t *c, const struct cfs_id *key, uint8_t kind, const uint8_t *p,
                    size_t len)
{
	struct bstore_meta m;

	if (len > c->cap || len > BSTORE_BLOCK_MAX)
		return -EFBIG;
	/* Cached already: a content-hash key names its bytes, so only the
	 * recency may change, as for a hit. */
	if (bstore_get(c->bs, key, &m, NULL) == 0 && m.len == len)
		return 0;
	struct bstore_op op = { .type = BSTORE_PUT, .key = *key, .data = p };
	op.meta.kind = kind;
	op.meta.len = (uint32_t)len;
	int r = bstore_apply(c->bs, &op, 1);
	return r < 0 ? r : op.status;
}

int dhash_cache_del(dhash_cache_t *c, const struct cfs_id *key)
{
	struct bstore_op op = { .type = BSTORE_DEL, .key = *key };
	int r = bstore_apply(c->bs, &op, 1);
	return r < 0 ? r : op.status;
}

bool dhash_cache_has(dhash_cache_t *c, const struct cfs_id *key)
{
	return bstore_has(c->bs, key);
}

void dhash_cache_totals(const dhash_cache_t *c, uint64_t *blocks, uint64_t *bytes,
                        uint64_t *evicted)
{
	struct bstore_stats st;

	bstore_stats(c->bs, &st);
	*blocks = st.blocks;
	*bytes = st.live_bytes;
	*evicted = st.evicted;
}

void dhash_cache_disk(const dhash_cache_t *c, uint64_t *disk, uint64_t *dead)
{
	struct bstore_stats st;

	bstore_stats(c->bs, &st);
	*disk = st.disk_bytes;
	*dead = st.dead_bytes;
}
