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
 *
 * A failed write (a full disk, say) leaves LevelDB with a sticky error:
 * every later write fails with it until the database is opened again, and
 * the log it failed in may end in a torn record, so nothing more may be
 * appended there. So after a failed write the store writes nothing until
 * it has closed and reopened the database (store_writable), which it tries
 * before a write, at most once a second, once the file system has room
 * for the reopen. Reads go on meanwhile. What was acknowledged is in the
 * log before the failure, and the reopen replays it.
 */
#include <dirent.h>
#include <leveldb/c.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "dhash/internal.h"

#define P_BLOCK 'B'
#define P_LEASE 'L'
#define HDR 33 /* kind, lease_until, seq, owner */
#define RETRY_MS 1000          /* reopen attempts after a failed write, at most */
#define ROOM_SPARE (1u << 20)  /* free space a reopen needs beyond its logs */

struct dhash_store {
	leveldb_t *db;
	leveldb_options_t *opt;
	leveldb_readoptions_t *ro;
	leveldb_writeoptions_t *wo_sync;
	leveldb_writeoptions_t *wo;
	uint64_t blocks, bytes;
	struct cfs_htab owners;   /* owner IP (16 bytes) -> uint64_t bytes charged (quotas) */
	char *dir;
	int failed;               /* the failed write's error: no writes until reopened */
	uint64_t retry_ms;        /* next reopen attempt (monotonic ms) */
	uint64_t recoveries;
};

static bool owner_none(const uint8_t ip[16])
{
	static const uint8_t zero[16];
	return !memcmp(ip, zero, 16);
}

/* Charge (add) or refund (subtract) len bytes to ip; counted at open,
 * kept up to date, an owner dropped once it is charged nothing. */
static void owner_charge(dhash_store_t *s, const uint8_t ip[16], uint64_t len, bool add)
{
	if (owner_none(ip))
		return;
	uint64_t *bytes = add ? cfs_htab_put(&s->owners, ip, NULL) : cfs_htab_get(&s->owners, ip);
	if (!bytes)
		return;
	if (add) {
		*bytes += len;
	} else {
		*bytes -= len < *bytes ? len : *bytes;
		if (*bytes == 0)
			cfs_htab_del(&s->owners, ip, NULL);
	}
}

uint64_t dhash_store_usage(const dhash_store_t *s, const uint8_t owner[16])
{
	const uint64_t *bytes = cfs_htab_get(&s->owners, owner);
	return bytes ? *bytes : 0;
}

static void block_key(uint8_t out[1 + CFS_ID_BYTES], const struct cfs_id *key)
{
	out[0] = P_BLOCK;
	memcpy(out + 1, key->b, CFS_ID_BYTES);
}

static void lease_key(uint8_t out[9 + CFS_ID_BYTES], uint64_t until, const struct cfs_id *key)
{
	out[0] = P_LEASE;
	cfs_put_be64(out + 1, until);
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

static void owners_clear(dhash_store_t *s)
{
	cfs_htab_free(&s->owners);
}

/* Open the database and count what is there. */
static int db_open(dhash_store_t *s)
{
	char *err = NULL;

	s->db = leveldb_open(s->opt, s->dir, &err);
	if (err) {
		s->db = NULL;
		if (strstr(err, "lock")) {
			log_error("block store %s is in use: %s", s->dir, err);
			leveldb_free(err);
			return -EBUSY;
		}
		return db_error(err, "cannot open");
	}
	s->blocks = s->bytes = 0;
	owners_clear(s);
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
	return 0;
}

int dhash_store_open(const char *dir, dhash_store_t **ret)
{
	dhash_store_t *s = xcalloc(1, sizeof(*s));

	s->dir = xstrdup(dir);
	cfs_htab_init(&s->owners, 16, sizeof(uint64_t));
	s->opt = leveldb_options_create();
	leveldb_options_set_create_if_missing(s->opt, 1);
	s->ro = leveldb_readoptions_create();
	s->wo = leveldb_writeoptions_create();
	s->wo_sync = leveldb_writeoptions_create();
	leveldb_writeoptions_set_sync(s->wo_sync, 1);
	int r = db_open(s);
	if (r < 0) {
		dhash_store_close(s);
		return r;
	}
	*ret = s;
	return 0;
}

void dhash_store_close(dhash_store_t *s)
{
	if (!s)
		return;
	if (s->db)
		leveldb_close(s->db);
	leveldb_readoptions_destroy(s->ro);
	leveldb_writeoptions_destroy(s->wo);
	leveldb_writeoptions_destroy(s->wo_sync);
	leveldb_options_destroy(s->opt);
	owners_clear(s);
	free(s->dir);
	free(s);
}

/* Room for a reopen: LevelDB replays its write-ahead logs into a new
 * table, so about their size, and a spare MiB for the new log and manifest. */
static bool room_for_reopen(const char *dir)
{
	uint64_t need = ROOM_SPARE;
	struct statvfs vfs;
	DIR *d = opendir(dir);

	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);
			struct stat st;
			if (n > 4 && !strcmp(e->d_name + n - 4, ".log") && fstatat(dirfd(d), e->d_name, &st, 0) == 0)
				need += (uint64_t)st.st_size;
		}
		closedir(d);
	}
	return statvfs(dir, &vfs) == 0 && (uint64_t)vfs.f_bavail * vfs.f_frsize >= need;
}

/* 0 when writes may go to the database; else the failed write's error
 * (see the top of the file). */
static int store_writable(dhash_store_t *s)
{
	uint64_t now = cfs_now_ms();

	if (!s->failed)
		return 0;
	if (now < s->retry_ms || !room_for_reopen(s->dir))
		return s->failed;
	s->retry_ms = now + RETRY_MS;
	if (s->db)
		leveldb_close(s->db);
	s->db = NULL;
	if (db_open(s) < 0)
		return s->failed; /* reads fail too until the next attempt succeeds */
	log_info("block store: writable again after '%s' (reopened: %lu blocks, %lu bytes)",
	         strerror(-s->failed), (unsigned long)s->blocks, (unsigned long)s->bytes);
	s->failed = 0;
	s->recoveries++;
	return 0;
}

/* A write failed: no more writes until the database is reopened. */
static int write_failed(dhash_store_t *s, char *err, const char *what)
{
	int r = db_error(err, what);

	if (!s->failed)
		log_warn("block store: writes refused until the database reopens (tried every %u ms "
		         "once the disk has room)", RETRY_MS);
	s->failed = r;
	s->retry_ms = cfs_now_ms() + RETRY_MS;
	return r;
}

bool dhash_store_failed(const dhash_store_t *s, uint64_t *ret_recoveries)
{
	if (ret_recoveries)
		*ret_recoveries = s->recoveries;
	return s->failed != 0;
}

/* Key's record as LevelDB holds it (*ret freed with leveldb_free): 0,
 * -ENOENT, or -EIO. */
static int raw_get(dhash_store_t *s, const struct cfs_id *key, char **ret, size_t *ret_len)
{
	uint8_t k[1 + CFS_ID_BYTES];
	char *err = NULL;

	if (!s->db)
		return -EIO; /* a reopen failed: see store_writable */
	block_key(k, key);
	*ret = leveldb_get(s->db, s->ro, (const char *)k, sizeof(k), ret_len, &err);
	if (err)
		return db_error(err, "read");
	return *ret ? 0 : -ENOENT;
}

int dhash_store_get(dhash_store_t *s, const struct cfs_id *key, struct dhash_rec *ret)
{
	size_t vl;
	char *v;
	int r = raw_get(s, key, &v, &vl);

	if (r < 0)
		return r;
	if (vl < HDR) {
		leveldb_free(v);
		log_error("block store: record %s is truncated", cfs_id_short(key, (char[9]){ 0 }));
		return -EUCLEAN; /* damaged, not a passing read error: only this may be dropped */
	}
	memset(ret, 0, sizeof(*ret));
	ret->kind = (uint8_t)v[0];
	ret->lease_until = cfs_get_be64((const uint8_t *)v + 1);
	ret->seq = cfs_get_be64((const uint8_t *)v + 9);
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
	cfs_put_be64(v + 1, rec->lease_until);
	cfs_put_be64(v + 9, rec->seq);
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
	int r = store_writable(s);

	if (r < 0)
		return r;
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	batch_rec(b, key, rec, old);
	leveldb_write(s->db, s->wo_sync, b, &err);
	leveldb_writebatch_destroy(b);
	if (err)
		return write_failed(s, err, "write");
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
	int r = store_writable(s);

	for (size_t i = 0; i < n && r == 0; i++) {
		bool dup = false;
		for (size_t j = 0; j < i && !dup; j++) /* the same key twice: the first one counts */
			dup = write[j] && cfs_id_eq(&keys[j], &keys[i]);
		if (dup) {
			status[i] = 0;
			continue;
		}
		int pr = plan_put(s, &keys[i], &recs[i], &nr[i], &old[i], &has_old[i]);
		status[i] = pr < 0 ? pr : 0;
		if (pr == 0) {
			batch_rec(b, &keys[i], &nr[i], has_old[i] ? &old[i] : NULL);
			write[i] = true;
			nw++;
		}
	}
	if (r < 0) { /* nothing planned: every record gets the store's error */
		for (size_t i = 0; i < n; i++)
			status[i] = r;
	} else if (nw) {
		leveldb_write(s->db, s->wo_sync, b, &err);
		if (err)
			r = write_failed(s, err, "write");
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

int dhash_store_extend_many(dhash_store_t *s, const struct cfs_id *keys, uint32_t n,
                            uint64_t lease_until, bool *found)
{
	return dhash_store_extend_charged(s, keys, n, lease_until, NULL, 0, found, NULL);
}

/* May key i of an extension move its charge to owner (NULL: no charge)?
 * It stays where it is when owner holds it already. */
static bool charge_fits(const dhash_store_t *s, const uint8_t *owner, uint64_t quota,
                        const struct dhash_rec *old, uint64_t *batch)
{
	if (!owner || !memcmp(old->owner, owner, 16))
		return true;
	if (quota && dhash_store_usage(s, owner) + *batch + old->len > quota)
		return false;
	*batch += old->len;
	return true;
}

/* The one write of a REFRESH: every key found whose lease is shorter gets
 * lease_until and, when owner is given, is charged to owner from now on
 * (the former owner refunded) if owner's quota holds it; a key that does
 * not fit is left alone and reported absent (*ret_over counts them). */
int dhash_store_extend_charged(dhash_store_t *s, const struct cfs_id *keys, uint32_t n,
                               uint64_t lease_until, const uint8_t *owner, uint64_t quota,
                               bool *found, uint32_t *ret_over)
{
	struct dhash_rec *old = xcalloc(n ? n : 1, sizeof(*old)), *nr = xcalloc(n ? n : 1, sizeof(*nr));
	bool *write = xcalloc(n ? n : 1, sizeof(*write));
	leveldb_writebatch_t *b = NULL;
	char *err = NULL;
	uint64_t batch = 0;
	uint32_t over = 0;
	int r = 0;

	for (uint32_t i = 0; i < n && r == 0; i++) {
		uint32_t j = 0;
		while (j < i && !cfs_id_eq(&keys[j], &keys[i]))
			j++;
		if (j < i) { /* the same key twice: the first one counts */
			found[i] = found[j];
			continue;
		}
		int g = dhash_store_get(s, &keys[i], &old[i]);
		found[i] = g == 0;
		if (g < 0 && g != -ENOENT)
			r = g;
		if (g < 0 || old[i].lease_until >= lease_until)
			continue;
		if (!charge_fits(s, owner, quota, &old[i], &batch)) {
			found[i] = false;
			over++;
			continue;
		}
		if (!b && (r = store_writable(s)) < 0)
			break;
		if (!b)
			b = leveldb_writebatch_create();
		nr[i] = old[i];
		nr[i].lease_until = lease_until;
		if (owner)
			memcpy(nr[i].owner, owner, 16);
		batch_rec(b, &keys[i], &nr[i], &old[i]);
		write[i] = true;
	}
	if (b && r == 0) {
		leveldb_write(s->db, s->wo_sync, b, &err);
		if (err)
			r = write_failed(s, err, "write");
		for (uint32_t i = 0; i < n && r == 0; i++)
			if (write[i])
				account(s, &nr[i], &old[i]);
	}
	if (b)
		leveldb_writebatch_destroy(b);
	for (uint32_t i = 0; i < n; i++)
		free(old[i].data);
	free(old);
	free(nr);
	free(write);
	if (ret_over)
		*ret_over = over;
	return r;
}

int dhash_store_extend(dhash_store_t *s, const struct cfs_id *key, uint64_t lease_until)
{
	bool found;
	int r = dhash_store_extend_many(s, key, 1, lease_until, &found);

	return r < 0 ? r : found ? 0 : -ENOENT;
}

/* Delete key's block record (when blk) and its lease entry at until (when
 * lease); refund len bytes to owner (NULL: nobody). Not synchronous: a
 * delete lost in a crash is only done again. */
static int delete_rec(dhash_store_t *s, const struct cfs_id *key, bool blk, bool lease,
                      uint64_t until, size_t len, const uint8_t *owner)
{
	uint8_t k[1 + CFS_ID_BYTES], lk[9 + CFS_ID_BYTES];
	char *err = NULL;
	int r = store_writable(s);

	if (r < 0)
		return r;
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	if (lease) {
		lease_key(lk, until, key);
		leveldb_writebatch_delete(b, (const char *)lk, sizeof(lk));
	}
	if (blk) {
		block_key(k, key);
		leveldb_writebatch_delete(b, (const char *)k, sizeof(k));
	}
	leveldb_write(s->db, s->wo, b, &err);
	leveldb_writebatch_destroy(b);
	if (err)
		return write_failed(s, err, "delete");
	if (blk) {
		s->blocks--;
		s->bytes -= len < s->bytes ? len : s->bytes;
		if (owner)
			owner_charge(s, owner, len, false);
	}
	return 0;
}

int dhash_store_drop(dhash_store_t *s, const struct cfs_id *key)
{
	size_t vl;
	char *v;
	int r = raw_get(s, key, &v, &vl);

	if (r < 0)
		return r;
	/* A record too short for its header has no lease entry we can name:
	 * the collector removes such orphans (dhash_store_expire). */
	bool hdr = vl >= HDR;
	r = delete_rec(s, key, true, hdr, hdr ? cfs_get_be64((const uint8_t *)v + 1) : 0,
	                   hdr ? vl - HDR : 0, hdr ? (const uint8_t *)v + 17 : NULL);
	leveldb_free(v);
	return r;
}

/* The lease index in order, up to max entries ending at or before until:
 * their count, and their keys and ends in keys and ends when not NULL. */
static uint64_t lease_walk(dhash_store_t *s, uint64_t until, struct cfs_id *keys, uint64_t *ends,
                           uint64_t max)
{
	uint8_t lo[9];
	uint64_t n = 0;

	if (!s->db)
		return 0;
	lo[0] = P_LEASE;
	cfs_put_be64(lo + 1, 0);
	leveldb_iterator_t *it = leveldb_create_iterator(s->db, s->ro);
	for (leveldb_iter_seek(it, (const char *)lo, sizeof(lo)); leveldb_iter_valid(it) && n < max;
	     leveldb_iter_next(it)) {
		size_t kl;
		const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
		if (kl != 9 + CFS_ID_BYTES || k[0] != P_LEASE || cfs_get_be64(k + 1) > until)
			break;
		if (keys)
			memcpy(keys[n].b, k + 9, CFS_ID_BYTES);
		if (ends)
			ends[n] = cfs_get_be64(k + 1);
		n++;
	}
	leveldb_iter_destroy(it);
	return n;
}

int dhash_store_expire(dhash_store_t *s, uint64_t now, uint32_t max, uint32_t *ret_n)
{
	uint32_t n = 0;
	struct cfs_id keys[256];
	uint64_t ends[256];
	int r = 0;

	if (max > 256)
		max = 256;
	uint32_t m = (uint32_t)lease_walk(s, now, keys, ends, max);
	for (uint32_t i = 0; i < m; i++) {
		struct dhash_rec old;
		if ((r = dhash_store_get(s, &keys[i], &old)) < 0) {
			if (r == -ENOENT) /* an orphan entry (its block was dropped): it goes */
				r = delete_rec(s, &keys[i], false, true, ends[i], 0, NULL);
			if (r < 0)
				break;
			continue;
		}
		if (old.lease_until <= now &&
		    (r = delete_rec(s, &keys[i], true, true, old.lease_until, old.len, old.owner)) == 0)
			n++;
		else if (r == 0 && old.lease_until != ends[i]) /* a stale entry beside the record's own */
			r = delete_rec(s, &keys[i], false, true, ends[i], 0, NULL);
		free(old.data);
		if (r < 0)
			break;
	}
	*ret_n = n;
	return r < 0 ? r : 0;
}

uint64_t dhash_store_expiring(dhash_store_t *s, uint64_t until, uint64_t max)
{
	return lease_walk(s, until, NULL, NULL, max);
}

int dhash_store_scan(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                     struct cfs_id *keys, uint32_t max, uint32_t *ret_n)
{
	return dhash_store_scan_info(s, from, to, keys, NULL, NULL, max, ret_n);
}

int dhash_store_scan_info(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                          struct cfs_id *keys, uint8_t *kinds, uint64_t *seqs, uint32_t max,
                          uint32_t *ret_n)
{
	uint8_t k0[1 + CFS_ID_BYTES];
	uint32_t n = 0;

	*ret_n = 0;
	if (!s->db)
		return -EIO;
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
			if (kinds || seqs) { /* the header is in the value the iterator holds */
				size_t vl;
				const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
				if (kinds)
					kinds[n] = vl >= HDR ? v[0] : 0;
				if (seqs)
					seqs[n] = vl >= HDR ? cfs_get_be64(v + 9) : 0;
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

	*ret_more = false;
	if (!s->db)
		return 0;
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
