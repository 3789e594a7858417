/*
 * A block cache on disk: one LevelDB database, bounded in bytes, the least
 * recently used blocks out first.
 *
 * Records, kept apart by a one-byte prefix:
 *   'C' key              -> kind (1) | bytes
 *   'T' key              -> tick (8, BE) | length (4, BE)
 *   'A' tick (8, BE) key -> length (4, BE)   the recency index, oldest first
 * A hit moves the block to the young end (two small records, never the
 * bytes) only when it has aged past the youngest quarter of the cache, a
 * CLOCK-like approximation of LRU that spares writes on hot blocks.
 * Writes are not synchronous: a
 * crash may lose the newest entries, never the consistency of the rest, and
 * readers verify every block they take from here anyway.
 */
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

#define P_CACHED 'C'
#define P_TICK 'T'
#define P_AGE 'A'

struct dhash_cache {
	leveldb_t *db;
	leveldb_options_t *opt;
	leveldb_filterpolicy_t *bloom;
	leveldb_readoptions_t *ro;
	leveldb_writeoptions_t *wo;
	uint64_t cap, blocks, bytes, tick, evicted;
};

static void ckey(uint8_t out[1 + CFS_ID_BYTES], uint8_t prefix, const struct cfs_id *key)
{
	out[0] = prefix;
	memcpy(out + 1, key->b, CFS_ID_BYTES);
}

static void akey(uint8_t out[9 + CFS_ID_BYTES], uint64_t tick, const struct cfs_id *key)
{
	out[0] = P_AGE;
	cfs_put_be64(out + 1, tick);
	memcpy(out + 9, key->b, CFS_ID_BYTES);
}

static int cache_error(char *err, const char *what)
{
	log_warn("block cache: %s: %s", what, err);
	leveldb_free(err);
	return -EIO;
}

/* Delete a block's three records, named by its recency-index key. */
static void forget(leveldb_writebatch_t *wb, const uint8_t ak[9 + CFS_ID_BYTES])
{
	uint8_t ck[1 + CFS_ID_BYTES] = { P_CACHED }, tk[1 + CFS_ID_BYTES] = { P_TICK };

	memcpy(ck + 1, ak + 9, CFS_ID_BYTES);
	memcpy(tk + 1, ak + 9, CFS_ID_BYTES);
	leveldb_writebatch_delete(wb, (const char *)ak, 9 + CFS_ID_BYTES);
	leveldb_writebatch_delete(wb, (const char *)ck, sizeof(ck));
	leveldb_writebatch_delete(wb, (const char *)tk, sizeof(tk));
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
		forget(wb, k);
		uint64_t len = vl == 4 ? cfs_get_be32(v) : 0;
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

void dhash_cache_trim(dhash_cache_t *c, uint64_t bytes)
{
	uint64_t cap = c->cap;

	if (c->bytes <= bytes)
		return;
	c->cap = bytes;
	shrink(c);
	c->cap = cap;
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
	/* A cache churns: most blocks put are evicted again. A memtable of a
	 * quarter of the bound (4..64 MiB) lets many die there instead of
	 * being written out and compacted (LevelDB's default is 4 MiB). */
	uint64_t wb = cap_bytes / 4;
	leveldb_options_set_write_buffer_size(c->opt, wb < (4u << 20) ? (4u << 20) : wb > (64u << 20) ? (64u << 20) : wb);
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
			c->bytes += cfs_get_be32(v);
		c->tick = cfs_get_be64(k + 1);
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

/* Key's tick and length: 0, -ENOENT or -EIO. */
static int read_tick(dhash_cache_t *c, const struct cfs_id *key, uint64_t *tick, uint32_t *len)
{
	uint8_t tk[1 + CFS_ID_BYTES];
	char *err = NULL;
	size_t vl;

	ckey(tk, P_TICK, key);
	char *v = leveldb_get(c->db, c->ro, (const char *)tk, sizeof(tk), &vl, &err);
	if (err)
		return cache_error(err, "read");
	if (!v)
		return -ENOENT;
	int r = vl == 12 ? 0 : -EIO;
	if (r == 0) {
		*tick = cfs_get_be64((const uint8_t *)v);
		*len = cfs_get_be32((const uint8_t *)v + 8);
	}
	leveldb_free(v);
	return r;
}

/* Has a block with this tick aged past the youngest quarter? Only then
 * does a use make it young again (a write), CLOCK-like. */
static bool aged(const dhash_cache_t *c, uint64_t tick)
{
	return c->tick - tick > c->blocks / 4;
}

/* Give key a new tick: its index entry moves to the young end. With p,
 * its bytes are (re)written too. */
static int make_young(dhash_cache_t *c, const struct cfs_id *key, bool had, uint64_t old_tick,
                      uint32_t len, uint8_t kind, const uint8_t *p)
{
	leveldb_writebatch_t *wb = leveldb_writebatch_create();
	uint8_t k[1 + CFS_ID_BYTES], ak[9 + CFS_ID_BYTES], t[12], alen[4];
	char *err = NULL;

	if (had) {
		akey(ak, old_tick, key);
		leveldb_writebatch_delete(wb, (const char *)ak, sizeof(ak));
	}
	c->tick++;
	if (p) {
		uint8_t *v = xmalloc(1 + (size_t)len);
		v[0] = kind;
		memcpy(v + 1, p, len);
		ckey(k, P_CACHED, key);
		leveldb_writebatch_put(wb, (const char *)k, sizeof(k), (const char *)v, 1 + (size_t)len);
		free(v);
	}
	ckey(k, P_TICK, key);
	cfs_put_be64(t, c->tick);
	cfs_put_be32(t + 8, len);
	leveldb_writebatch_put(wb, (const char *)k, sizeof(k), (const char *)t, sizeof(t));
	akey(ak, c->tick, key);
	cfs_put_be32(alen, len);
	leveldb_writebatch_put(wb, (const char *)ak, sizeof(ak), (const char *)alen, 4);
	leveldb_write(c->db, c->wo, wb, &err);
	leveldb_writebatch_destroy(wb);
	return err ? cache_error(err, "write") : 0;
}

int dhash_cache_get(dhash_cache_t *c, const struct cfs_id *key, uint8_t *kind, uint8_t **data,
                    size_t *len)
{
	uint8_t ck[1 + CFS_ID_BYTES];
	char *err = NULL;
	size_t vl;
	uint64_t tick;
	uint32_t tlen;

	ckey(ck, P_CACHED, key);
	char *v = leveldb_get(c->db, c->ro, (const char *)ck, sizeof(ck), &vl, &err);
	if (err)
		return cache_error(err, "read");
	if (!v)
		return -ENOENT;
	if (vl < 1) {
		leveldb_free(v);
		return -EIO;
	}
	*kind = (uint8_t)v[0];
	*len = vl - 1;
	*data = xmemdup(v + 1, *len ? *len : 1);
	leveldb_free(v);
	if (read_tick(c, key, &tick, &tlen) == 0 && aged(c, tick))
		(void)make_young(c, key, true, tick, tlen, 0, NULL); /* aged: young again */
	return 0;
}

int dhash_cache_put(dhash_cache_t *c, const struct cfs_id *key, uint8_t kind, const uint8_t *p,
                    size_t len)
{
	uint64_t old_tick = 0;
	uint32_t old_len = 0;
	int r;

	if (len > c->cap || len > UINT32_MAX)
		return -EFBIG;
	r = read_tick(c, key, &old_tick, &old_len);
	if (r < 0 && r != -ENOENT)
		return r;
	bool had = r == 0;
	if (had && old_len == len) {
		/* Cached already: a content-hash key names its bytes, so only
		 * the recency may change (as for a hit), and nothing is written
		 * while the block is young. */
		if (aged(c, old_tick))
			return make_young(c, key, true, old_tick, old_len, 0, NULL);
		return 0;
	}
	if ((r = make_young(c, key, had, old_tick, (uint32_t)len, kind, p)) < 0)
		return r;
	if (had)
		c->bytes -= old_len < c->bytes ? old_len : c->bytes;
	else
		c->blocks++;
	c->bytes += len;
	shrink(c);
	return 0;
}

int dhash_cache_del(dhash_cache_t *c, const struct cfs_id *key)
{
	uint8_t ak[9 + CFS_ID_BYTES];
	uint64_t tick;
	uint32_t len;
	char *err = NULL;
	int r = read_tick(c, key, &tick, &len);

	if (r < 0)
		return r;
	leveldb_writebatch_t *wb = leveldb_writebatch_create();
	akey(ak, tick, key);
	forget(wb, ak);
	leveldb_write(c->db, c->wo, wb, &err);
	leveldb_writebatch_destroy(wb);
	if (err)
		return cache_error(err, "delete");
	c->bytes -= len < c->bytes ? len : c->bytes;
	c->blocks -= c->blocks > 0;
	return 0;
}

bool dhash_cache_has(dhash_cache_t *c, const struct cfs_id *key)
{
	uint64_t tick;
	uint32_t len;

	return read_tick(c, key, &tick, &len) == 0;
}

void dhash_cache_totals(const dhash_cache_t *c, uint64_t *blocks, uint64_t *bytes,
                        uint64_t *evicted)
{
	*blocks = c->blocks;
	*bytes = c->bytes;
	*evicted = c->evicted;
}
