/*
 * The block store: one LevelDB database per process, in the data directory.
 *
 * Records, kept apart by a one-byte prefix:
 *   'B' key          -> kind (1) | lease_until (8, BE) | seq (8, BE) |
 *                       owner (16: the IP its space is charged to, zeros for
 *                       nobody) | bytes
 *                       a replica (a block this server is asked to keep)
 *   'L' lease key    -> ""  the lease index: lease_until (8, BE) then key,
 *                       so the collector reads expired blocks in order
 * Every write that acknowledges a put is a synchronous batch (the block and
 * its index entry together), so an acknowledged block survives kill -9.
 * The byte and block totals are counted once at open and kept up to date.
 */
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

#define P_BLOCK 'B'
#define P_LEASE 'L'
#define HDR 33 /* kind, lease_until, seq, owner */
#define OWNER_BUCKETS 256

/* Bytes charged per owner IP (quotas); counted at open, kept up to date. */
struct owner_use {
	uint8_t ip[16];
	uint64_t bytes;
	struct owner_use *next;
};

struct dhash_store {
	leveldb_t *db;
	leveldb_options_t *opt;
	leveldb_readoptions_t *ro;
	leveldb_writeoptions_t *wo_sync;
	leveldb_writeoptions_t *wo;
	uint64_t blocks, bytes;
	struct owner_use *owners[OWNER_BUCKETS];
};

static bool owner_none(const uint8_t ip[16])
{
	static const uint8_t zero[16];
	return !memcmp(ip, zero, 16);
}

static struct owner_use **owner_slot(const dhash_store_t *s, const uint8_t ip[16])
{
	uint32_t h = 2166136261u;
	for (int i = 0; i < 16; i++)
		h = (h ^ ip[i]) * 16777619u;
	struct owner_use **pp = (struct owner_use **)&s->owners[h % OWNER_BUCKETS];
	while (*pp && memcmp((*pp)->ip, ip, 16))
		pp = &(*pp)->next;
	return pp;
}

/* Charge (add) or refund (subtract) len bytes to ip. */
static void owner_charge(dhash_store_t *s, const uint8_t ip[16], uint64_t len, bool add)
{
	if (owner_none(ip))
		return;
	struct owner_use **pp = owner_slot(s, ip);
	if (!*pp) {
		if (!add)
			return;
		*pp = xcalloc(1, sizeof(**pp));
		memcpy((*pp)->ip, ip, 16);
	}
	if (add) {
		(*pp)->bytes += len;
	} else {
		(*pp)->bytes -= len < (*pp)->bytes ? len : (*pp)->bytes;
		if ((*pp)->bytes == 0) {
			struct owner_use *e = *pp;
			*pp = e->next;
			free(e);
		}
	}
}

uint64_t dhash_store_usage(const dhash_store_t *s, const uint8_t owner[16])
{
	struct owner_use **pp = owner_slot(s, owner);
	return *pp ? (*pp)->bytes : 0;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void block_key(uint8_t out[1 + CFS_ID_BYTES], const struct cfs_id *key)
{
	out[0] = P_BLOCK;
	memcpy(out + 1, key->b, CFS_ID_BYTES);
}

static void lease_key(uint8_t out[9 + CFS_ID_BYTES], uint64_t until, const struct cfs_id *key)
{
	out[0] = P_LEASE;
	put_be64(out + 1, until);
	memcpy(out + 9, key->b, CFS_ID_BYTES);
}

/* Is the iterator on a block record? Then *id is its key. */
static bool iter_block(leveldb_iterator_t *it, struct cfs_id *id)
{
	size_t kl;
	const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);

	if (kl != 1 + CFS_ID_BYTES || k[0] != P_BLOCK)
		return false;
	memcpy(id->b, k + 1, CFS_ID_BYTES);
	return true;
}

/* LevelDB reports errors as text: keep the errno that matters to a putter. */
static int db_error(char *err, const char *what)
{
	int r = strstr(err, "No space left") ? -ENOSPC : -EIO;
	log_error("block store: %s: %s", what, err);
	leveldb_free(err);
	return r;
}

int dhash_store_open(const char *dir, dhash_store_t **ret)
{
	dhash_store_t *s = xcalloc(1, sizeof(*s));
	char *err = NULL;

	s->opt = leveldb_options_create();
	leveldb_options_set_create_if_missing(s->opt, 1);
	s->db = leveldb_open(s->opt, dir, &err);
	if (err) {
		int r = strstr(err, "lock") ? -EBUSY : db_error(err, "cannot open") ;
		if (r == -EBUSY) {
			log_error("block store %s is in use: %s", dir, err);
			leveldb_free(err);
		}
		leveldb_options_destroy(s->opt);
		free(s);
		return r;
	}
	s->ro = leveldb_readoptions_create();
	s->wo = leveldb_writeoptions_create();
	s->wo_sync = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(s->wo_sync, 1);

	/* Count what is there. */
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	uint8_t lo = P_BLOCK;
	struct cfs_id id;
	for (leveldb_iter_seek(it, (const char *)&lo, 1); leveldb_iter_valid(it) && iter_block(it, &id);
	     leveldb_iter_next(it)) {
		size_t vl;
		const char *v = leveldb_iter_value(it, &vl);
		s->blocks++;
		s->bytes += vl > HDR ? vl - HDR : 0;
		if (vl >= HDR)
			owner_charge(s, (const uint8_t *)v + 17, vl - HDR, true);
	}
	leveldb_iter_destroy(it);
	*ret = s;
	return 0;
}

void dhash_store_close(dhash_store_t *s)
{
	if (!s)
		return;
	leveldb_close(s->db);
	leveldb_readoptions_destroy(s->ro);
	leveldb_writeoptions_destroy(s->wo);
	leveldb_writeoptions_destroy(s->wo_sync);
	leveldb_options_destroy(s->opt);
	for (int i = 0; i < OWNER_BUCKETS; i++)
		while (s->owners[i]) {
			struct owner_use *e = s->owners[i];
			s->owners[i] = e->next;
			free(e);
		}
	free(s);
}

int dhash_store_get(dhash_store_t *s, const struct cfs_id *key, struct dhash_rec *ret)
{
	uint8_t k[1 + CFS_ID_BYTES];
	char *err = NULL;
	size_t vl;

	block_key(k, key);
	char *v = leveldb_get(s->db, s->ro, (const char *)k, sizeof(k), &vl, &err);
	if (err)
		return db_error(err, "read");
	if (!v)
		return -ENOENT;
	if (vl < HDR) {
		leveldb_free(v);
		log_error("block store: record %s is truncated", cfs_id_short(key, (char[9]){ 0 }));
		return -EIO;
	}
	memset(ret, 0, sizeof(*ret));
	ret->kind = (uint8_t)v[0];
	ret->lease_until = get_be64((const uint8_t *)v + 1);
	ret->seq = get_be64((const uint8_t *)v + 9);
	memcpy(ret->owner, v + 17, 16);
	ret->len = vl - HDR;
	ret->data = xmalloc(ret->len ? ret->len : 1);
	memcpy(ret->data, v + HDR, ret->len);
	leveldb_free(v);
	return 0;
}

bool dhash_store_has(dhash_store_t *s, const struct cfs_id *key)
{
	struct dhash_rec r;
	if (dhash_store_get(s, key, &r) < 0)
		return false;
	free(r.data);
	return true;
}

/* Add rec under key (replacing old, whose lease entry goes) to batch b. */
static void batch_rec(leveldb_writebatch_t *b, const struct cfs_id *key, const struct dhash_rec *rec,
                      const struct dhash_rec *old)
{
	uint8_t k[1 + CFS_ID_BYTES], lk[9 + CFS_ID_BYTES];
	uint8_t *v = xmalloc(HDR + rec->len);

	block_key(k, key);
	v[0] = rec->kind;
	put_be64(v + 1, rec->lease_until);
	put_be64(v + 9, rec->seq);
	memcpy(v + 17, rec->owner, 16);
	memcpy(v + HDR, rec->data, rec->len);
	if (old) {
		lease_key(lk, old->lease_until, key);
		leveldb_writebatch_delete(b, (const char *)lk, sizeof(lk));
	}
	lease_key(lk, rec->lease_until, key);
	leveldb_writebatch_put(b, (const char *)lk, sizeof(lk), "", 0);
	leveldb_writebatch_put(b, (const char *)k, sizeof(k), (const char *)v, HDR + rec->len);
	free(v);
}

static void account(dhash_store_t *s, const struct dhash_rec *rec, const struct dhash_rec *old)
{
	if (old) {
		s->bytes -= old->len;
		owner_charge(s, old->owner, old->len, false);
	} else {
		s->blocks++;
	}
	s->bytes += rec->len;
	owner_charge(s, rec->owner, rec->len, true);
}

static int write_rec(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *rec,
                     const struct dhash_rec *old)
{
	char *err = NULL;
	leveldb_writebatch_t *b = leveldb_writebatch_create();

	batch_rec(b, key, rec, old);
	leveldb_write(s->db, s->wo_sync, b, &err);
	leveldb_writebatch_destroy(b);
	if (err)
		return db_error(err, "write");
	account(s, rec, old);
	return 0;
}

/* What a put of rec must write: 0 with *ret (lease merged) and *ret_old
 * (has_old), 1 when the stored record is identical, or an error. */
static int plan_put(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *rec,
                    struct dhash_rec *ret, struct dhash_rec *ret_old, bool *has_old)
{
	int r = dhash_store_get(s, key, ret_old);

	*ret = *rec;
	*has_old = r == 0;
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		if (ret_old->lease_until > ret->lease_until)
			ret->lease_until = ret_old->lease_until; /* a put never shortens a lease */
		memcpy(ret->owner, ret_old->owner, 16); /* the space was charged once, to the first */
		if (ret_old->kind == ret->kind && ret_old->seq == ret->seq && ret_old->len == ret->len &&
		    ret_old->lease_until == ret->lease_until && !memcmp(ret_old->data, ret->data, ret->len)) {
			free(ret_old->data);
			*has_old = false;
			return 1;
		}
	}
	return 0;
}

int dhash_store_put(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *rec)
{
	struct dhash_rec nr, old;
	bool has_old;
	int r = plan_put(s, key, rec, &nr, &old, &has_old);

	if (r != 0)
		return r < 0 ? r : 0;
	r = write_rec(s, key, &nr, has_old ? &old : NULL);
	if (has_old)
		free(old.data);
	return r;
}

int dhash_store_put_many(dhash_store_t *s, const struct cfs_id *keys, const struct dhash_rec *recs,
                         size_t n, int *status)
{
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	struct dhash_rec *nr = xcalloc(n ? n : 1, sizeof(*nr)), *old = xcalloc(n ? n : 1, sizeof(*old));
	bool *has_old = xcalloc(n ? n : 1, sizeof(*has_old)), *write = xcalloc(n ? n : 1, sizeof(*write));
	char *err = NULL;
	size_t nw = 0;

	for (size_t i = 0; i < n; i++) {
		bool dup = false;
		for (size_t j = 0; j < i && !dup; j++) /* the same key twice: the first one counts */
			dup = write[j] && cfs_id_eq(&keys[j], &keys[i]);
		if (dup) {
			status[i] = 0;
			continue;
		}
		int r = plan_put(s, &keys[i], &recs[i], &nr[i], &old[i], &has_old[i]);
		status[i] = r < 0 ? r : 0;
		if (r == 0) {
			batch_rec(b, &keys[i], &nr[i], has_old[i] ? &old[i] : NULL);
			write[i] = true;
			nw++;
		}
	}
	int r = 0;
	if (nw) {
		leveldb_write(s->db, s->wo_sync, b, &err);
		if (err)
			r = db_error(err, "write");
	}
	for (size_t i = 0; i < n; i++) {
		if (write[i]) {
			if (r < 0)
				status[i] = r;
			else
				account(s, &nr[i], has_old[i] ? &old[i] : NULL);
		}
		if (has_old[i])
			free(old[i].data);
	}
	leveldb_writebatch_destroy(b);
	free(nr);
	free(old);
	free(has_old);
	free(write);
	return r;
}

int dhash_store_extend(dhash_store_t *s, const struct cfs_id *key, uint64_t lease_until)
{
	struct dhash_rec old;
	int r = dhash_store_get(s, key, &old);

	if (r < 0)
		return r;
	if (old.lease_until >= lease_until) {
		free(old.data);
		return 0;
	}
	struct dhash_rec nr = old;
	nr.lease_until = lease_until;
	r = write_rec(s, key, &nr, &old);
	free(old.data);
	return r;
}

static int delete_rec(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *old)
{
	uint8_t k[1 + CFS_ID_BYTES], lk[9 + CFS_ID_BYTES];
	char *err = NULL;

	block_key(k, key);
	lease_key(lk, old->lease_until, key);
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	leveldb_writebatch_delete(b, (const char *)lk, sizeof(lk));
	leveldb_writebatch_delete(b, (const char *)k, sizeof(k));
	leveldb_write(s->db, s->wo, b, &err);
	leveldb_writebatch_destroy(b);
	if (err)
		return db_error(err, "delete");
	s->blocks--;
	s->bytes -= old->len;
	owner_charge(s, old->owner, old->len, false);
	return 0;
}

/* The lease index in order, up to max entries ending at or before until:
 * their count, and their keys in keys when it is not NULL. */
static uint64_t lease_walk(dhash_store_t *s, uint64_t until, struct cfs_id *keys, uint64_t max)
{
	uint8_t lo[9];
	uint64_t n = 0;

	lo[0] = P_LEASE;
	put_be64(lo + 1, 0);
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	for (leveldb_iter_seek(it, (const char *)lo, sizeof(lo)); leveldb_iter_valid(it) && n < max;
	     leveldb_iter_next(it)) {
		size_t kl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		if (kl != 9 + CFS_ID_BYTES || k[0] != P_LEASE || get_be64(k + 1) > until)
			break;
		if (keys)
			memcpy(keys[n].b, k + 9, CFS_ID_BYTES);
		n++;
	}
	leveldb_iter_destroy(it);
	return n;
}

int dhash_store_expire(dhash_store_t *s, uint64_t now, uint32_t max, uint32_t *ret_n)
{
	uint32_t n = 0;
	struct cfs_id keys[256];
	int r = 0;

	if (max > 256)
		max = 256;
	uint32_t m = (uint32_t)lease_walk(s, now, keys, max);
	for (uint32_t i = 0; i < m; i++) {
		struct dhash_rec old;
		if ((r = dhash_store_get(s, &keys[i], &old)) < 0) {
			if (r == -ENOENT)
				continue;
			break;
		}
		if (old.lease_until <= now && (r = delete_rec(s, &keys[i], &old)) == 0)
			n++;
		free(old.data);
		if (r < 0)
			break;
	}
	*ret_n = n;
	return r < 0 ? r : 0;
}

uint64_t dhash_store_expiring(dhash_store_t *s, uint64_t until, uint64_t max)
{
	return lease_walk(s, until, NULL, max);
}

int dhash_store_scan(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                     struct cfs_id *keys, uint32_t max, uint32_t *ret_n)
{
	uint8_t k0[1 + CFS_ID_BYTES];
	uint32_t n = 0;

	/* (from, to] on the circle: one pass, or two when it wraps. */
	bool wraps = cfs_id_cmp(from, to) >= 0;
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	for (int pass = 0; pass < (wraps ? 2 : 1) && n < max; pass++) {
		block_key(k0, pass == 0 ? from : &(struct cfs_id){ { 0 } });
		leveldb_iter_seek(it, (const char *)k0, sizeof(k0));
		struct cfs_id id;
		for (; leveldb_iter_valid(it) && n < max && iter_block(it, &id); leveldb_iter_next(it)) {
			if (!cfs_id_in_oc(&id, from, to)) {
				if (pass == 0 && cfs_id_eq(&id, from))
					continue; /* the open end */
				break;
			}
			keys[n++] = id;
		}
	}
	leveldb_iter_destroy(it);
	*ret_n = n;
	return 0;
}

uint32_t dhash_store_list(dhash_store_t *s, const struct cfs_id *after, struct cfs_id *keys,
                          uint32_t max, bool *ret_more)
{
	uint8_t k0[1 + CFS_ID_BYTES];
	uint32_t n = 0;
	struct cfs_id id;
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);

	block_key(k0, after ? after : &(struct cfs_id){ { 0 } });
	leveldb_iter_seek(it, (const char *)k0, sizeof(k0));
	*ret_more = false;
	for (; leveldb_iter_valid(it) && iter_block(it, &id); leveldb_iter_next(it)) {
		if (after && cfs_id_eq(&id, after))
			continue;
		if (n == max) {
			*ret_more = true;
			break;
		}
		keys[n++] = id;
	}
	leveldb_iter_destroy(it);
	return n;
}

void dhash_store_totals(const dhash_store_t *s, uint64_t *blocks, uint64_t *bytes)
{
	*blocks = s->blocks;
	*bytes = s->bytes;
}
