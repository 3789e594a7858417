/*
 * A block cache on disk: one LevelDB database, bounded in bytes, the least
 * recently used blocks out first.
 *
 * Records, kept apart by a one-byte prefix:
 *   'C' key              -> tick (8, BE) | kind (1) | bytes
 *   'A' tick (8, BE) key -> length (4, BE)   the recency index, oldest first
 * A hit moves the block to the young end only when it has aged past the
 * youngest quarter of the cache (a CLOCK-like approximation of LRU that
 * spares a rewrite per hit of a hot block). Writes are not synchronous: a
 * crash may lose the newest entries, never the consistency of the rest, and
 * readers verify every block they take from here anyway.
 */
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

#define P_CACHED 'C'
#define P_AGE 'A'
#define CHDR 9 /* tick, kind */

struct dhash_cache {
	leveldb_t *db;
	leveldb_options_t *opt;
	leveldb_filterpolicy_t *bloom;
	leveldb_readoptions_t *ro;
	leveldb_writeoptions_t *wo;
	uint64_t cap, blocks, bytes, tick, evicted;
};

static void be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void ckey(uint8_t out[1 + CFS_ID_BYTES], const struct cfs_id *key)
{
	out[0] = P_CACHED;
	memcpy(out + 1, key->b, CFS_ID_BYTES);
}

static void akey(uint8_t out[9 + CFS_ID_BYTES], uint64_t tick, const struct cfs_id *key)
{
	out[0] = P_AGE;
	be64(out + 1, tick);
	memcpy(out + 9, key->b, CFS_ID_BYTES);
}

static int cache_error(char *err, const char *what)
{
	log_warn("block cache: %s: %s", what, err);
	leveldb_free(err);
	return -EIO;
}

/* Drop the oldest blocks until the cache fits its bound. */
static void shrink(dhash_cache_t *c)
{
	if (c->bytes <= c->cap)
		return;
	leveldb_iterator_t *it = leveldb_create_iterator(c->db, c->ro);
	leveldb_writebatch_t *wb = leveldb_writebatch_create();
	uint8_t lo = P_AGE;
	char *err = NULL;

	for (leveldb_iter_seek(it, (const char *)&lo, 1); c->bytes > c->cap && leveldb_iter_valid(it);
	     leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
		if (kl != 9 + CFS_ID_BYTES || k[0] != P_AGE)
			break;
		uint8_t ck[1 + CFS_ID_BYTES] = { P_CACHED };
		memcpy(ck + 1, k + 9, CFS_ID_BYTES);
		leveldb_writebatch_delete(wb, (const char *)k, kl);
		leveldb_writebatch_delete(wb, (const char *)ck, sizeof(ck));
		uint64_t len = vl == 4 ? (uint64_t)v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3] : 0;
		c->bytes -= len < c->bytes ? len : c->bytes;
		c->blocks -= c->blocks > 0;
		c->evicted++;
	}
	leveldb_iter_destroy(it);
	leveldb_write(c->db, c->wo, wb, &err);
	leveldb_writebatch_destroy(wb);
	if (err)
		(void)cache_error(err, "eviction");
}

int dhash_cache_open(const char *dir, uint64_t cap_bytes, dhash_cache_t **ret)
{
	dhash_cache_t *c = xcalloc(1, sizeof(*c));
	char *err = NULL;

	if (cfs_mkdir_p(dir, 0700) < 0) {
		free(c);
		return -errno;
	}
	c->cap = cap_bytes;
	c->opt = leveldb_options_create();
	c->bloom = leveldb_filterpolicy_create_bloom(10); /* most lookups miss */
	leveldb_options_set_filter_policy(c->opt, c->bloom);
	leveldb_options_set_create_if_missing(c->opt, 1);
	c->db = leveldb_open(c->opt, dir, &err);
	if (err) {
		int r = strstr(err, "lock") ? -EBUSY : -EIO;
		log_warn("block cache %s: %s", dir, err);
		leveldb_free(err);
		leveldb_options_destroy(c->opt);
		leveldb_filterpolicy_destroy(c->bloom);
		free(c);
		return r;
	}
	c->ro = leveldb_readoptions_create();
	c->wo = leveldb_writeoptions_create();

	/* Totals and the youngest tick, from the recency index. */
	leveldb_iterator_t *it = leveldb_create_iterator(c->db, c->ro);
	uint8_t lo = P_AGE;
	for (leveldb_iter_seek(it, (const char *)&lo, 1); leveldb_iter_valid(it); leveldb_iter_next(it)) {
		size_t kl, vl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
		if (kl != 9 + CFS_ID_BYTES || k[0] != P_AGE)
			break;
		c->blocks++;
		if (vl == 4)
			c->bytes += (uint64_t)v[0] << 24 | v[1] << 16 | v[2] << 8 | v[3];
		c->tick = get64(k + 1);
	}
	leveldb_iter_destroy(it);
	shrink(c); /* the bound may have been lowered since */
	*ret = c;
	return 0;
}

void dhash_cache_close(dhash_cache_t *c)
{
	if (!c)
		return;
	leveldb_close(c->db);
	leveldb_readoptions_destroy(c->ro);
	leveldb_writeoptions_destroy(c->wo);
	leveldb_options_destroy(c->opt);
	leveldb_filterpolicy_destroy(c->bloom);
	free(c);
}

/* Write key's record with a new tick (replacing the index entry of old). */
static int write_young(dhash_cache_t *c, const struct cfs_id *key, uint64_t old_tick, bool had,
                       uint8_t kind, const uint8_t *p, size_t len)
{
	leveldb_writebatch_t *wb = leveldb_writebatch_create();
	uint8_t ck[1 + CFS_ID_BYTES], ak[9 + CFS_ID_BYTES], alen[4];
	uint8_t *v = xmalloc(CHDR + len);
	char *err = NULL;

	if (had) {
		akey(ak, old_tick, key);
		leveldb_writebatch_delete(wb, (const char *)ak, sizeof(ak));
	}
	c->tick++;
	ckey(ck, key);
	be64(v, c->tick);
	v[8] = kind;
	memcpy(v + CHDR, p, len);
	leveldb_writebatch_put(wb, (const char *)ck, sizeof(ck), (const char *)v, CHDR + len);
	akey(ak, c->tick, key);
	alen[0] = (uint8_t)(len >> 24), alen[1] = (uint8_t)(len >> 16);
	alen[2] = (uint8_t)(len >> 8), alen[3] = (uint8_t)len;
	leveldb_writebatch_put(wb, (const char *)ak, sizeof(ak), (const char *)alen, 4);
	leveldb_write(c->db, c->wo, wb, &err);
	leveldb_writebatch_destroy(wb);
	free(v);
	return err ? cache_error(err, "write") : 0;
}

int dhash_cache_get(dhash_cache_t *c, const struct cfs_id *key, uint8_t *kind, uint8_t **data,
                    size_t *len)
{
	uint8_t ck[1 + CFS_ID_BYTES];
	char *err = NULL;
	size_t vl;

	ckey(ck, key);
	char *v = leveldb_get(c->db, c->ro, (const char *)ck, sizeof(ck), &vl, &err);
	if (err)
		return cache_error(err, "read");
	if (!v)
		return -ENOENT;
	if (vl < CHDR) {
		leveldb_free(v);
		return -EIO;
	}
	uint64_t tick = get64((const uint8_t *)v);
	*kind = (uint8_t)v[8];
	*len = vl - CHDR;
	*data = xmemdup(v + CHDR, *len ? *len : 1);
	leveldb_free(v);
	if (c->tick - tick > c->blocks / 4) /* aged: make it young again */
		(void)write_young(c, key, tick, true, *kind, *data, *len);
	return 0;
}

int dhash_cache_put(dhash_cache_t *c, const struct cfs_id *key, uint8_t kind, const uint8_t *p,
                    size_t len)
{
	uint8_t ck[1 + CFS_ID_BYTES];
	char *err = NULL;
	size_t vl;
	int r;

	if (len > c->cap)
		return -EFBIG;
	ckey(ck, key);
	char *v = leveldb_get(c->db, c->ro, (const char *)ck, sizeof(ck), &vl, &err);
	if (err)
		return cache_error(err, "read");
	bool had = v && vl >= CHDR;
	uint64_t old_tick = had ? get64((const uint8_t *)v) : 0;
	size_t old_len = had ? vl - CHDR : 0;
	leveldb_free(v);
	if ((r = write_young(c, key, old_tick, had, kind, p, len)) < 0)
		return r;
	if (had) {
		c->bytes -= old_len < c->bytes ? old_len : c->bytes;
	} else {
		c->blocks++;
	}
	c->bytes += len;
	shrink(c);
	return 0;
}

void dhash_cache_totals(const dhash_cache_t *c, uint64_t *blocks, uint64_t *bytes,
                        uint64_t *evicted)
{
	*blocks = c->blocks;
	*bytes = c->bytes;
	*evicted = c->evicted;
}
