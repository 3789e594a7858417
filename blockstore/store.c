/*
 * The engine: the packs, the index, reads and the group commit. Opening
 * a store (its format, its packs, recovery after a crash) is in open.c,
 * the walks of the index (ranges, leases) in iter.c.
 *
 *   DIR/FORMAT                 "cfs-blockstore 1": the format's version
 *   DIR/db/                    LevelDB: 'K' key -> record, 'L' lease key -> ""
 *   DIR/packs/NNNNNNNN.pack    block bytes (format.c)
 *
 * A group commit appends every new block to the active pack, flushes it
 * (fdatasync, durable stores), then writes every record in one LevelDB
 * batch (synchronous, durable stores). A crash before the batch leaves
 * unindexed bytes at a pack's tail, which the next open cuts; a record
 * never names bytes that were not on disk first. Every process that
 * writes starts a new pack, so it never appends after such a tail.
 *
 * A failed index write (a full disk, say) leaves LevelDB with a sticky
 * error, and its log may end in a torn record: after one, the store
 * writes nothing until it has closed and reopened the database, tried
 * before a write at most once a second once the disk has room. Reads go
 * on meanwhile. A failed pack append is cut back and only fails its batch.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "blockstore/internal.h"

#define RETRY_MS 1000                 /* reopen attempts after a failed write, at most */
#define ROOM_SPARE (1u << 20)         /* free space a reopen needs */
#define OPEN_MAX 128                  /* read descriptors kept open */

/* ---------------------------------------------------------------- packs */

static int pack_cmp(const void *a, const void *b)
{
	const struct bstore__pack *x = a, *y = b;
	return x->num < y->num ? -1 : x->num > y->num;
}

struct bstore__pack *bstore__pack_find(bstore_t *s, uint32_t num)
{
	struct bstore__pack key = { .num = num };
	return bsearch(&key, s->packs, s->npacks, sizeof(*s->packs), pack_cmp);
}

void bstore__pack_path(const bstore_t *s, uint32_t num, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%08u.pack", s->pack_dir, num);
}

void bstore__close_reads(bstore_t *s)
{
	for (size_t i = 0; i < s->npacks; i++)
		if (s->packs[i].fd >= 0) {
			close(s->packs[i].fd);
			s->packs[i].fd = -1;
		}
	s->nopen = 0;
}

int bstore__pack_fd(bstore_t *s, struct bstore__pack *p)
{
	char path[PATH_MAX];

	if (p->fd >= 0)
		return p->fd;
	if (s->nopen >= OPEN_MAX)
		bstore__close_reads(s);
	bstore__pack_path(s, p->num, path, sizeof(path));
	p->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (p->fd < 0)
		return -errno;
	s->nopen++;
	return p->fd;
}

uint64_t bstore__dead(const struct bstore__pack *p)
{
	uint64_t used = BSTORE__PACK_HDR + p->live;
	return p->size > used ? p->size - used : 0;
}

struct bstore__pack *bstore__pack_add(bstore_t *s, uint32_t num, uint64_t size)
{
	if (s->npacks == s->cap_packs) {
		s->cap_packs = s->cap_packs ? 2 * s->cap_packs : 16;
		s->packs = xrealloc(s->packs, s->cap_packs * sizeof(*s->packs));
	}
	s->packs[s->npacks++] = (struct bstore__pack){ .num = num, .fd = -1, .size = size };
	qsort(s->packs, s->npacks, sizeof(*s->packs), pack_cmp);
	return bstore__pack_find(s, num);
}

static int sync_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

void bstore__pack_unlink(bstore_t *s, struct bstore__pack *p)
{
	char path[PATH_MAX];
	size_t i = (size_t)(p - s->packs);

	if (p->fd >= 0) {
		close(p->fd);
		s->nopen--;
	}
	bstore__pack_path(s, p->num, path, sizeof(path));
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("%s %s: cannot delete pack %u: %s", s->cfg.what, s->dir, p->num, strerror(errno));
	memmove(&s->packs[i], &s->packs[i + 1], (s->npacks - i - 1) * sizeof(*s->packs));
	s->npacks--;
	(void)sync_dir(s->pack_dir); /* a lost unlink only leaves a pack the next open deletes */
}

/* Close the active pack: the next append starts a new one. */
void bstore__active_close(bstore_t *s)
{
	if (s->active_fd >= 0)
		close(s->active_fd);
	s->active_fd = -1;
	s->active = 0;
}

/* A new pack after every other, its header written and its name flushed. */
static int active_open(bstore_t *s)
{
	char path[PATH_MAX];
	uint8_t hdr[BSTORE__PACK_HDR];
	uint32_t num = s->next_pack;
	int r = 0;

	bstore__pack_path(s, num, path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	bstore__pack_header(hdr, num);
	if (pwrite(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		r = errno ? -errno : -EIO;
	if (r == 0 && s->cfg.mode == BSTORE_DURABLE && (fdatasync(fd) < 0 || sync_dir(s->pack_dir) < 0))
		r = -errno;
	if (r < 0) {
		close(fd);
		unlink(path);
		return r;
	}
	bstore__active_close(s);
	s->next_pack = num + 1;
	s->active = num;
	s->active_fd = fd;
	bstore__pack_add(s, num, BSTORE__PACK_HDR);
	return 0;
}

static int pwritev_all(int fd, struct iovec *iov, int n, uint64_t off)
{
	while (n > 0) {
		ssize_t w = pwritev(fd, iov, n > IOV_MAX ? IOV_MAX : n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		off += (uint64_t)w;
		for (; n > 0 && (size_t)w >= iov->iov_len; iov++, n--)
			w -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int bstore__append(bstore_t *s, const struct iovec *iov, int n, uint64_t total, uint32_t *ret_pack,
                   uint64_t *ret_off)
{
	struct bstore__pack *p = s->active ? bstore__pack_find(s, s->active) : NULL;
	int r;

	if (!p || (p->size > BSTORE__PACK_HDR && p->size + total > s->cfg.pack_max)) {
		if ((r = active_open(s)) < 0)
			return r;
		p = bstore__pack_find(s, s->active);
	}
	struct iovec *v = xmemdup(iov, (size_t)(n ? n : 1) * sizeof(*iov));
	r = pwritev_all(s->active_fd, v, n, p->size);
	free(v);
	if (r == 0 && s->cfg.mode == BSTORE_DURABLE) {
		s->st.flushes++;
		if (fdatasync(s->active_fd) < 0) {
			/* What the kernel kept of a failed flush is unknown: this
			 * pack takes no more, its tail is dead. */
			r = -errno;
			struct stat st;
			if (fstat(s->active_fd, &st) == 0)
				p->size = (uint64_t)st.st_size;
			bstore__active_close(s);
			return r;
		}
	}
	if (r < 0) {
		if (ftruncate(s->active_fd, (off_t)p->size) < 0) {
			/* cannot cut it back: never append after it, and its
			 * size says where the head goes past these bytes */
			struct stat st;
			if (fstat(s->active_fd, &st) == 0)
				p->size = (uint64_t)st.st_size;
			bstore__active_close(s);
		}
		return r;
	}
	*ret_pack = p->num;
	*ret_off = p->size;
	p->size += total;
	s->st.written_bytes += total;
	return 0;
}

/* ------------------------------------------------------------ the index */

int bstore__db_error(bstore_t *s, char *err, const char *what)
{
	int r = strstr(err, "No space left") ? -ENOSPC : -EIO;
	log_error("%s %s: %s: %s", s->cfg.what, s->dir, what, err);
	leveldb_free(err);
	return r;
}

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

int bstore__writable(bstore_t *s)
{
	uint64_t now = cfs_now_ms();

	if (!s->failed)
		return 0;
	if (now < s->retry_ms || !room_for_reopen(s->db_dir))
		return s->failed;
	s->retry_ms = now + RETRY_MS;
	if (s->db)
		leveldb_close(s->db);
	s->db = NULL;
	if (bstore__db_open(s, false) < 0)
		return s->failed;
	/* The reopen made every record before the failure durable; a flushed
	 * head past the failed batch's bytes keeps a later replay from
	 * indexing what was refused. */
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	int fr = s->failed;
	s->failed = 0;
	int r = bstore__index_write(s, b, true, "write its head");
	leveldb_writebatch_destroy(b);
	if (r < 0)
		return r;
	s->failed = fr;
	log_info("%s %s: writable again after '%s' (%lu blocks, %lu bytes)", s->cfg.what, s->dir,
	         strerror(-s->failed), (unsigned long)s->st.blocks, (unsigned long)s->st.live_bytes);
	s->failed = 0;
	s->st.recoveries++;
	return 0;
}

/* Flush every write-ahead log of the index. LevelDB flushes only the log
 * it writes to: one it closed when its memtable filled may still hold
 * unflushed records, and a flushed write's head must not pass them. */
static void flush_logs(bstore_t *s)
{
	DIR *d = opendir(s->db_dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 5 || strcmp(e->d_name + n - 4, ".log") != 0)
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			(void)fdatasync(fd);
			close(fd);
		}
	}
	closedir(d);
}

int bstore__index_write(bstore_t *s, leveldb_writebatch_t *b, bool sync, const char *what)
{
	char *err = NULL;
	bool durable = s->cfg.mode == BSTORE_DURABLE;

	if (durable && sync && s->unsynced)
		flush_logs(s);
	/* The head: every entry before it is indexed (the active pack's end,
	 * or with none the last pack's; nothing is appended between). */
	struct bstore__pack *p = s->active ? bstore__pack_find(s, s->active)
	                                   : s->npacks ? &s->packs[s->npacks - 1] : NULL;

	if (p) {
		uint8_t h[12];
		cfs_put_be32(h, p->num);
		cfs_put_be64(h + 4, p->size);
		leveldb_writebatch_put(b, (const char[]){ BSTORE__P_HEAD }, 1, (const char *)h, sizeof(h));
	}
	leveldb_write(s->db, sync ? s->wo : s->wo_async, b, &err);
	if (!err) {
		s->unsynced = durable && !sync ? true : sync ? false : s->unsynced;
		return 0;
	}
	int r = bstore__db_error(s, err, what);
	if (!s->failed)
		log_warn("%s %s: writes refused until its index reopens (tried every %u ms once the "
		         "disk has room)", s->cfg.what, s->dir, RETRY_MS);
	s->failed = r;
	s->retry_ms = cfs_now_ms() + RETRY_MS;
	return r;
}

int bstore__rec_read(bstore_t *s, const struct cfs_id *key, struct bstore__rec *ret)
{
	uint8_t k[1 + CFS_ID_BYTES];
	char *err = NULL;
	size_t vl;

	if (!s->db)
		return -EIO;
	bstore__rec_key(k, key);
	char *v = leveldb_get(s->db, s->ro, (const char *)k, sizeof(k), &vl, &err);
	if (err)
		return bstore__db_error(s, err, "read");
	if (!v)
		return -ENOENT;
	int r = bstore__rec_decode((const uint8_t *)v, vl, ret);
	leveldb_free(v);
	if (r < 0) {
		s->st.damaged++;
		return -EUCLEAN;
	}
	return 0;
}

/* ------------------------------------------------------------ reads */

static bool aged(const bstore_t *s, uint64_t tick)
{
	return s->tick - tick > s->st.blocks / 4;
}

/* A cache block used: it becomes young again once it has aged past the
 * youngest quarter (CLOCK-like: hot blocks cost no writes). */
static void touch(bstore_t *s, const struct cfs_id *key, struct bstore__rec *rec)
{
	uint8_t k[1 + CFS_ID_BYTES], v[BSTORE__REC_BYTES];

	if (s->cfg.mode != BSTORE_CACHE || !aged(s, rec->tick) || s->failed)
		return;
	rec->tick = ++s->tick;
	bstore__rec_key(k, key);
	bstore__rec_encode(v, rec);
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	leveldb_writebatch_put(b, (const char *)k, sizeof(k), (const char *)v, sizeof(v));
	(void)bstore__index_write(s, b, false, "mark used");
	leveldb_writebatch_destroy(b);
}

static int read_entry(bstore_t *s, const struct cfs_id *key, const struct bstore__rec *rec, uint8_t **data)
{
	struct bstore__pack *p = bstore__pack_find(s, rec->pack);
	size_t n = BSTORE__ENTRY_HDR + rec->meta.len;
	struct cfs_id k;
	struct bstore_meta em;
	int fd;

	if (!p)
		return -EUCLEAN;
	if ((fd = bstore__pack_fd(s, p)) < 0)
		return fd;
	uint8_t *buf = xmalloc(n);
	ssize_t got = pread(fd, buf, n, (off_t)rec->off);
	if (got < 0) {
		int r = -errno;
		free(buf);
		return r;
	}
	if ((size_t)got != n || bstore__entry_parse(buf, n, &k, &em) != 1 || !cfs_id_eq(&k, key) ||
	    em.len != rec->meta.len) {
		free(buf);
		s->st.damaged++;
		log_warn("%s %s: the entry of %s in pack %u at %lu is damaged", s->cfg.what, s->dir,
		         cfs_id_short(key, (char[9]){ 0 }), rec->pack, (unsigned long)rec->off);
		return -EUCLEAN;
	}
	memmove(buf, buf + BSTORE__ENTRY_HDR, em.len);
	*data = buf;
	return 0;
}

int bstore_get(bstore_t *s, const struct cfs_id *key, struct bstore_meta *meta, uint8_t **data)
{
	struct bstore__rec rec;

	pthread_mutex_lock(&s->mu);
	int r = bstore__rec_read(s, key, &rec);
	if (r == 0 && data)
		r = read_entry(s, key, &rec, data);
	if (r == 0) {
		*meta = rec.meta;
		touch(s, key, &rec);
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

bool bstore_has(bstore_t *s, const struct cfs_id *key)
{
	struct bstore__rec rec;

	pthread_mutex_lock(&s->mu);
	bool r = bstore__rec_read(s, key, &rec) == 0;
	pthread_mutex_unlock(&s->mu);
	return r;
}

/* ------------------------------------------------------------ writes */

static void batch_lease(bstore_t *s, leveldb_writebatch_t *b, const struct cfs_id *key,
                        const struct bstore_meta *old, const struct bstore_meta *nw)
{
	uint8_t lk[9 + CFS_ID_BYTES];

	if (s->cfg.no_lease_index)
		return;
	if (old && old->lease_until && (!nw || nw->lease_until != old->lease_until)) {
		bstore__lease_key(lk, old->lease_until, key);
		leveldb_writebatch_delete(b, (const char *)lk, sizeof(lk));
	}
	if (nw && nw->lease_until && (!old || nw->lease_until != old->lease_until)) {
		bstore__lease_key(lk, nw->lease_until, key);
		leveldb_writebatch_put(b, (const char *)lk, sizeof(lk), "", 0);
	}
}

struct plan {
	struct bstore__rec cur, nw;
	bool has_cur, skip;
	uint8_t hdr[BSTORE__ENTRY_HDR];
};

/* Read what each op replaces; an op a later one of the batch overrides is
 * skipped. 0 or a read error for the batch. */
static int plan_ops(bstore_t *s, struct bstore_op *ops, size_t n, struct plan *pl, uint64_t *ret_bytes)
{
	struct cfs_idmap last = { 0 };

	cfs_htab_init(&last.t, CFS_ID_BYTES, sizeof(uint32_t));
	for (size_t i = 0; i < n; i++)
		cfs_idmap_put(&last, &ops[i].key, (uint32_t)i);
	*ret_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct bstore_op *o = &ops[i];
		uint32_t li;
		o->status = 0;
		pl[i].skip = cfs_idmap_get(&last, &o->key, &li) && li != i;
		if (pl[i].skip)
			continue;
		int r = bstore__rec_read(s, &o->key, &pl[i].cur);
		if (r < 0 && r != -ENOENT && r != -EUCLEAN) {
			cfs_idmap_free(&last);
			return r;
		}
		pl[i].has_cur = r == 0;
		if (r == -EUCLEAN)
			memset(&pl[i].cur, 0, sizeof(pl[i].cur)); /* a damaged record: a PUT or DEL replaces it */
		if (o->type == BSTORE_PUT) {
			if (o->meta.len > BSTORE_BLOCK_MAX) {
				o->status = -EFBIG;
				pl[i].skip = true;
				continue;
			}
			bstore__entry_header(pl[i].hdr, &o->key, &o->meta);
			*ret_bytes += BSTORE__ENTRY_HDR + o->meta.len;
		} else if (r == -ENOENT || (r == -EUCLEAN && o->type == BSTORE_SET)) {
			o->status = -ENOENT;
			pl[i].skip = true;
		}
	}
	cfs_idmap_free(&last);
	return 0;
}

static void account(bstore_t *s, const struct bstore_op *o, const struct plan *pl)
{
	if (pl->has_cur && o->type != BSTORE_SET) {
		struct bstore__pack *p = bstore__pack_find(s, pl->cur.pack);
		uint64_t e = BSTORE__ENTRY_HDR + pl->cur.meta.len;
		if (p)
			p->live -= e < p->live ? e : p->live;
		s->st.blocks--;
		s->st.live_bytes -= pl->cur.meta.len;
	}
	if (o->type == BSTORE_PUT) {
		struct bstore__pack *p = bstore__pack_find(s, pl->nw.pack);
		if (p)
			p->live += BSTORE__ENTRY_HDR + o->meta.len;
		s->st.blocks++;
		s->st.live_bytes += o->meta.len;
	}
}

/* The group commit (top of the file): bytes first, then one index batch. */
static int commit(bstore_t *s, struct bstore_op *ops, size_t n, struct plan *pl, uint64_t bytes)
{
	struct iovec *iov = xmalloc((2 * n + 1) * sizeof(*iov));
	uint8_t k[1 + CFS_ID_BYTES], v[BSTORE__REC_BYTES];
	uint32_t pack = 0;
	uint64_t off = 0;
	int niov = 0, r = 0;

	for (size_t i = 0; i < n; i++)
		if (!pl[i].skip && ops[i].type == BSTORE_PUT) {
			iov[niov++] = (struct iovec){ pl[i].hdr, BSTORE__ENTRY_HDR };
			iov[niov++] = (struct iovec){ (void *)ops[i].data, ops[i].meta.len };
		}
	if (bytes)
		r = bstore__append(s, iov, niov, bytes, &pack, &off);
	free(iov);
	if (r < 0)
		return r;
	leveldb_writebatch_t *b = leveldb_writebatch_create();
	for (size_t i = 0; i < n; i++) {
		struct bstore_op *o = &ops[i];
		struct plan *p = &pl[i];
		if (p->skip)
			continue;
		bstore__rec_key(k, &o->key);
		if (o->type == BSTORE_DEL) {
			leveldb_writebatch_delete(b, (const char *)k, sizeof(k));
			batch_lease(s, b, &o->key, &p->cur.meta, NULL);
			continue;
		}
		p->nw = p->cur;
		if (o->type == BSTORE_PUT) {
			p->nw.pack = pack;
			p->nw.off = off;
			off += BSTORE__ENTRY_HDR + o->meta.len;
			p->nw.tick = ++s->tick;
		}
		uint32_t len = p->nw.meta.len;
		p->nw.meta = o->meta;
		if (o->type == BSTORE_SET)
			p->nw.meta.len = len;
		bstore__rec_encode(v, &p->nw);
		leveldb_writebatch_put(b, (const char *)k, sizeof(k), (const char *)v, sizeof(v));
		batch_lease(s, b, &o->key, p->has_cur ? &p->cur.meta : NULL, &p->nw.meta);
	}
	/* Puts alone need no flushed index: their entries, flushed, carry
	 * what the records say, and the next open indexes them again from
	 * the last flushed head (replay). A change or a drop is flushed. */
	bool sync = false;
	for (size_t i = 0; i < n; i++)
		sync |= !pl[i].skip && ops[i].type != BSTORE_PUT;
	r = bstore__index_write(s, b, sync || !bytes, "write");
	leveldb_writebatch_destroy(b);
	if (r < 0)
		return r; /* the appended bytes are dead: the next open cuts them */
	for (size_t i = 0; i < n; i++)
		if (!pl[i].skip)
			account(s, &ops[i], &pl[i]);
	return 0;
}

/* One line when writes start failing (a full disk) and one when they
 * work again. */
static void write_outcome(bstore_t *s, int r, uint64_t bytes)
{
	if (r < 0 && r != -EFBIG && !s->append_failed && !s->failed) {
		log_warn("%s %s: cannot write: %s; puts are refused until it can", s->cfg.what, s->dir,
		         strerror(-r));
		s->append_failed = r;
	} else if (r == 0 && bytes && s->append_failed) {
		log_info("%s %s: writable again after '%s'", s->cfg.what, s->dir, strerror(-s->append_failed));
		s->append_failed = 0;
		s->st.recoveries++;
	}
}

int bstore_apply(bstore_t *s, struct bstore_op *ops, size_t n)
{
	struct plan *pl = xcalloc(n ? n : 1, sizeof(*pl));
	uint64_t bytes = 0;

	pthread_mutex_lock(&s->mu);
	int r = bstore__writable(s);
	if (r == 0 && s->cfg.mode == BSTORE_CACHE) { /* room first: eviction may drop what ops replace */
		uint64_t need = BSTORE__PACK_HDR; /* perhaps in a new pack */
		for (size_t i = 0; i < n; i++)
			need += ops[i].type == BSTORE_PUT ? BSTORE__ENTRY_HDR + ops[i].meta.len : 0;
		bstore__make_room(s, need);
	}
	if (r == 0)
		r = plan_ops(s, ops, n, pl, &bytes);
	if (r == 0)
		r = commit(s, ops, n, pl, bytes);
	if (r < 0)
		for (size_t i = 0; i < n; i++)
			if (!pl[i].skip || ops[i].status == 0)
				ops[i].status = r;
	if (r == 0)
		s->st.commits++;
	write_outcome(s, r, bytes);
	pthread_mutex_unlock(&s->mu);
	free(pl);
	return r;
}

void bstore_stats(bstore_t *s, struct bstore_stats *ret)
{
	pthread_mutex_lock(&s->mu);
	*ret = s->st;
	ret->disk_bytes = ret->dead_bytes = 0;
	ret->packs = (uint32_t)s->npacks;
	for (size_t i = 0; i < s->npacks; i++) {
		ret->disk_bytes += s->packs[i].size;
		ret->dead_bytes += bstore__dead(&s->packs[i]);
	}
	ret->failed = s->failed != 0 || s->append_failed != 0;
	ret->compacting_pack = s->victim;
	if (s->victim) {
		struct bstore__pack *p = bstore__pack_find(s, s->victim);
		ret->compacting_done = s->scan_off;
		ret->compacting_size = p ? p->size : 0;
	}
	pthread_mutex_unlock(&s->mu);
}
