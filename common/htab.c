/*
 * The one growable hash table (see cfs_htab in cfs.h): open addressing with
 * linear probing, at most 3/4 full, entries stored in one array.
 *
 * Deletion shifts the rest of the probe run back instead of leaving
 * tombstones: after a delete at slot i, each following entry j of the run
 * moves into the hole unless its home slot lies cyclically in (i, j] (then
 * a lookup starting at home still reaches it without crossing the hole).
 * So a table with a steady churn of puts and deletes (the transport's
 * calls) never fills up with dead slots and never needs a rebuild.
 *
 * The hash is seeded once per process from libsodium's random source, so
 * a peer that chooses keys (node IDs in the auth cache) cannot aim them
 * all at one probe run.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

#define MIN_CAP 16

static uint64_t hash_seed;

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t cfs_hash64(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h, w;

	if (!hash_seed) {
		randombytes_buf(&hash_seed, sizeof(hash_seed));
		hash_seed |= 1;
	}
	h = hash_seed ^ (n * 0x9e3779b97f4a7c15ull);
	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = mix(h ^ w);
	}
	if (n) {
		w = 0;
		memcpy(&w, b, n);
		h = mix(h ^ w ^ (uint64_t)n << 56);
	}
	return h;
}

void cfs_htab_init(struct cfs_htab *t, size_t key_len, size_t val_len)
{
	size_t align = val_len >= 8 ? 8 : val_len >= 4 ? 4 : val_len >= 2 ? 2 : 1;
	size_t val_off = (key_len + align - 1) / align * align;
	size_t esize = (val_off + val_len + align - 1) / align * align;

	*t = (struct cfs_htab){
		.key_len = (uint32_t)key_len,
		.val_len = (uint32_t)val_len,
		.val_off = (uint32_t)val_off,
		.esize = (uint32_t)(esize ? esize : 1),
	};
}

static uint8_t *entry(const struct cfs_htab *t, size_t i)
{
	return t->e + i * t->esize;
}

static size_t home(const struct cfs_htab *t, const void *key)
{
	return (size_t)cfs_hash64(key, t->key_len) & (t->cap - 1);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t probe(const struct cfs_htab *t, const void *key)
{
	size_t i = home(t, key);

	while (t->used[i] && memcmp(entry(t, i), key, t->key_len) != 0)
		i = (i + 1) & (t->cap - 1);
	return i;
}

static void resize(struct cfs_htab *t, size_t cap)
{
	struct cfs_htab old = *t;

	t->cap = cap;
	t->e = xcalloc(cap, t->esize);
	t->used = xcalloc(cap, 1);
	for (size_t i = 0; i < old.cap; i++)
		if (old.used[i]) {
			size_t j = probe(t, entry(&old, i));
			memcpy(entry(t, j), entry(&old, i), t->esize);
			t->used[j] = 1;
		}
	free(old.e);
	free(old.used);
}

void *cfs_htab_get(const struct cfs_htab *t, const void *key)
{
	if (!t->n)
		return NULL;
	size_t i = probe(t, key);
	return t->used[i] ? entry(t, i) + t->val_off : NULL;
}

void *cfs_htab_put(struct cfs_htab *t, const void *key, bool *ret_added)
{
	if (4 * (t->n + 1) > 3 * t->cap)
		resize(t, t->cap ? 2 * t->cap : MIN_CAP);
	size_t i = probe(t, key);
	bool added = !t->used[i];

	if (added) {
		memset(entry(t, i), 0, t->esize);
		memcpy(entry(t, i), key, t->key_len);
		t->used[i] = 1;
		t->n++;
	}
	if (ret_added)
		*ret_added = added;
	return entry(t, i) + t->val_off;
}

/* Empty slot i, then close the hole by backward shift. */
static void remove_at(struct cfs_htab *t, size_t i)
{
	size_t mask = t->cap - 1;

	for (size_t j = (i + 1) & mask; t->used[j]; j = (j + 1) & mask) {
		size_t h = home(t, entry(t, j));
		/* j stays when its home is cyclically in (i, j]. */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		memcpy(entry(t, i), entry(t, j), t->esize);
		i = j;
	}
	t->used[i] = 0;
	t->n--;
}

bool cfs_htab_del(struct cfs_htab *t, const void *key, void *ret_val)
{
	if (!t->n)
		return false;
	size_t i = probe(t, key);
	if (!t->used[i])
		return false;
	if (ret_val)
		memcpy(ret_val, entry(t, i) + t->val_off, t->val_len);
	remove_at(t, i);
	return true;
}

size_t cfs_htab_count(const struct cfs_htab *t)
{
	return t->n;
}

bool cfs_htab_next(const struct cfs_htab *t, size_t *pos, const void **ret_key, void **ret_val)
{
	for (size_t i = *pos; i < t->cap; i++)
		if (t->used[i]) {
			*pos = i + 1;
			if (ret_key)
				*ret_key = entry(t, i);
			if (ret_val)
				*ret_val = entry(t, i) + t->val_off;
			return true;
		}
	*pos = t->cap;
	return false;
}

size_t cfs_htab_filter(struct cfs_htab *t, cfs_htab_keep_fn keep, void *ctx)
{
	size_t dropped = 0;

	/* Rebuilt at the same size: deleting in place while walking the array
	 * would let the backward shift move entries past the walk. */
	struct cfs_htab old = *t;
	if (!old.cap)
		return 0;
	t->e = xcalloc(old.cap, t->esize);
	t->used = xcalloc(old.cap, 1);
	t->n = 0;
	for (size_t i = 0; i < old.cap; i++) {
		if (!old.used[i])
			continue;
		uint8_t *e = entry(&old, i);
		if (!keep(ctx, e, e + old.val_off)) {
			dropped++;
			continue;
		}
		size_t j = probe(t, e);
		memcpy(entry(t, j), e, t->esize);
		t->used[j] = 1;
		t->n++;
	}
	free(old.e);
	free(old.used);
	return dropped;
}

void cfs_htab_clear(struct cfs_htab *t)
{
	if (t->cap)
		memset(t->used, 0, t->cap);
	t->n = 0;
}

void cfs_htab_free(struct cfs_htab *t)
{
	free(t->e);
	free(t->used);
	t->e = t->used = NULL;
	t->cap = t->n = 0;
}
