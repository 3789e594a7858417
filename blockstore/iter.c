/*
 * Walking the index: the keys in a range of the ring (scan), every key
 * in order (list, a page at a time; each, every record to a callback),
 * the leases ending before a time (expiring) and the removal of a lease
 * entry that ended.
 */
#include <stdlib.h>
#include <string.h>

#include "blockstore/internal.h"

/* Is the iterator on a record? Then *id is its key and *rec its value. */
static bool iter_rec(leveldb_iterator_t *it, struct cfs_id *id, struct bstore__rec *rec)
{
	size_t kl, vl;
	const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);

	if (kl != 1 + CFS_ID_BYTES || k[0] != BSTORE__P_REC)
		return false;
	memcpy(id->b, k + 1, CFS_ID_BYTES);
	const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
	if (bstore__rec_decode(v, vl, rec) < 0)
		memset(rec, 0, sizeof(*rec));
	return true;
}

int bstore_scan(bstore_t *s, const struct cfs_id *from, const struct cfs_id *to, struct cfs_id *keys,
                struct bstore_meta *metas, uint32_t max, uint32_t *ret_n)
{
	uint8_t k0[1 + CFS_ID_BYTES];
	uint32_t n = 0;

	*ret_n = 0;
	pthread_mutex_lock(&s->mu);
	if (!s->db) {
		pthread_mutex_unlock(&s->mu);
		return -EIO;
	}
	bool wraps = cfs_id_cmp(from, to) >= 0; /* (from, to]: one pass, or two */
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	for (int pass = 0; pass < (wraps ? 2 : 1) && n < max; pass++) {
		bstore__rec_key(k0, pass == 0 ? from : &(struct cfs_id){ { 0 } });
		leveldb_iter_seek(it, (const char *)k0, sizeof(k0));
		struct cfs_id id;
		struct bstore__rec rec;
		for (; leveldb_iter_valid(it) && n < max && iter_rec(it, &id, &rec); leveldb_iter_next(it)) {
			if (!cfs_id_in_oc(&id, from, to)) {
				if (pass == 0 && cfs_id_eq(&id, from))
					continue; /* the open end */
				break;
			}
			if (metas)
				metas[n] = rec.meta;
			keys[n++] = id;
		}
	}
	leveldb_iter_destroy(it);
	pthread_mutex_unlock(&s->mu);
	*ret_n = n;
	return 0;
}

uint32_t bstore_list(bstore_t *s, const struct cfs_id *after, struct cfs_id *keys,
                     struct bstore_meta *metas, uint32_t max, bool *ret_more)
{
	uint8_t k0[1 + CFS_ID_BYTES];
	uint32_t n = 0;
	struct cfs_id id;
	struct bstore__rec rec;

	*ret_more = false;
	pthread_mutex_lock(&s->mu);
	if (!s->db) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	bstore__rec_key(k0, after ? after : &(struct cfs_id){ { 0 } });
	leveldb_iter_seek(it, (const char *)k0, sizeof(k0));
	for (; leveldb_iter_valid(it) && iter_rec(it, &id, &rec); leveldb_iter_next(it)) {
		if (after && cfs_id_eq(&id, after))
			continue;
		if (n == max) {
			*ret_more = true;
			break;
		}
		if (metas)
			metas[n] = rec.meta;
		keys[n++] = id;
	}
	leveldb_iter_destroy(it);
	pthread_mutex_unlock(&s->mu);
	return n;
}

#define EACH_PAGE 1024

uint64_t bstore_each(bstore_t *s, bstore_each_fn fn, void *arg)
{
	struct cfs_id *keys = xmalloc(EACH_PAGE * sizeof(*keys)), after;
	struct bstore_meta *metas = xmalloc(EACH_PAGE * sizeof(*metas));
	uint64_t total = 0;
	bool more = true, first = true, go = true;

	while (go && more) {
		uint32_t n = bstore_list(s, first ? NULL : &after, keys, metas, EACH_PAGE, &more);
		for (uint32_t i = 0; go && i < n; i++, total++)
			go = fn(arg, &keys[i], &metas[i]);
		if (n == 0)
			break;
		after = keys[n - 1];
		first = false;
	}
	free(keys);
	free(metas);
	return total;
}

uint64_t bstore_expiring(bstore_t *s, uint64_t until, struct cfs_id *keys, uint64_t *ends, uint64_t max)
{
	uint8_t lo[9];
	uint64_t n = 0;

	pthread_mutex_lock(&s->mu);
	if (!s->db) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	lo[0] = BSTORE__P_LEASE;
	cfs_put_be64(lo + 1, 0);
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	for (leveldb_iter_seek(it, (const char *)lo, sizeof(lo)); leveldb_iter_valid(it) && n < max;
	     leveldb_iter_next(it)) {
		size_t kl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		if (kl != 9 + CFS_ID_BYTES || k[0] != BSTORE__P_LEASE || cfs_get_be64(k + 1) > until)
			break;
		if (keys)
			memcpy(keys[n].b, k + 9, CFS_ID_BYTES);
		if (ends)
			ends[n] = cfs_get_be64(k + 1);
		n++;
	}
	leveldb_iter_destroy(it);
	pthread_mutex_unlock(&s->mu);
	return n;
}

void bstore_drop_lease(bstore_t *s, const struct cfs_id *key, uint64_t until)
{
	struct bstore__rec rec;
	uint8_t lk[9 + CFS_ID_BYTES];

	pthread_mutex_lock(&s->mu);
	if (s->db && !s->failed && (bstore__rec_read(s, key, &rec) < 0 || rec.meta.lease_until != until)) {
		leveldb_writebatch_t *b = leveldb_writebatch_create();
		bstore__lease_key(lk, until, key);
		leveldb_writebatch_delete(b, (const char *)lk, sizeof(lk));
		(void)bstore__index_write(s, b, false, "drop a lease entry"); /* done again if lost */
		leveldb_writebatch_destroy(b);
	}
	pthread_mutex_unlock(&s->mu);
}
