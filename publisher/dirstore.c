/*
 * The local directory store ("dir:PATH"): a block sink and block source on
 * the local file system, for offline publishing and for tests.
 *
 *   PATH/packs/NNNNNN.pack   block bytes, appended back to back
 *   PATH/index               64-byte records, appended: where each block is
 *   PATH/roots/<root key>    the current signed root of a volume, one file each
 *   PATH/lock                held (flock) by the one process using the store
 *
 * An index record, little-endian (docs/PUBLISHING.md):
 *    0  key[32]
 *   32  pack   u32   the pack file's number
 *   36  len    u32   the block's length
 *   40  offset u64   where the block starts in the pack
 *   48  lease  u64   lease expiry, wall-clock seconds
 *   56  check[8]     the first 8 bytes of BLAKE2b-256 over bytes 0..55
 * The last valid record for a key wins: a refresh appends one with the new
 * lease. A record whose check fails, or that points past its pack's end,
 * is ignored; a torn tail (a crash during an append) is cut at open.
 *
 * A put batch is written on a libuv worker thread while the publisher
 * builds the next batch, one batch at a time in order: the blocks are
 * appended to the pack and flushed (fdatasync), then their records are
 * appended to the index and flushed, and only then is the batch
 * acknowledged — a crash never leaves a record pointing at bytes that were
 * not on disk, and an acknowledged block survives it. A pack is closed at
 * 1 GiB; every process that writes starts a new one, so it never appends
 * after bytes a crashed writer left unindexed. Other completions are
 * delivered from the loop (an idle handle), never inside the call that
 * started them.
 *
 * Unlike a DHash server, this store does not hash what it is given again:
 * its only writer is the publisher in the same process, which made each
 * key from the bytes it hands over (hashing twice cost a fifth of the
 * publishing speed). Every reader verifies — cfs-fsck, the walker, a mount.
 */
#define _GNU_SOURCE
#include "publisher/internal.h"
#include "dhash/dhash.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define REC_BYTES 64
#define PACK_MAX (1ull << 30)
#define PACK_NUMBER_MAX (1u << 20) /* tables are indexed by pack number */

struct completion {
	pub_done_fn done;
	void *arg;
	int status;
	struct completion *next;
};

/* Where a block is. */
struct loc {
	uint32_t pack, len;
	uint64_t off, lease;
};

/* A put or a refresh, written on a worker thread, one at a time in order. */
struct job {
	uv_work_t w;
	struct dirstore *d;
	struct pub_block *blocks;  /* put: written, status set */
	size_t n;
	uint8_t *recs;             /* refresh: the records, built on the loop */
	size_t nrecs;
	uint64_t lease;
	int fd;                    /* put: the pack written (-1: create it) */
	uint32_t pack;
	uint64_t pack_end, index_end; /* where the job starts; moved by the worker */
	int status;
	pub_done_fn done;
	void *arg;
	struct job *next;
};

struct pack_info {
	int fd;                    /* for reading, opened on first use; -1 */
	int64_t size;              /* as found at open; -1: not looked at */
};

struct dirstore {
	char *path;
	uv_loop_t *loop;
	uv_idle_t idle;
	struct completion *head, *tail;
	struct sfsro_source src;
	int lock_fd, index_fd, packs_fd;
	struct cfs_idmap map;      /* key -> index into locs */
	struct loc *locs;
	size_t nlocs, cap_locs;
	struct pack_info *packs;   /* by pack number */
	uint32_t npacks;
	int pack_fd;               /* the pack being appended to, or -1 */
	uint32_t pack;             /* its number */
	uint64_t pack_end, index_end;
	struct job *jobs, *jobs_tail; /* in order; the first one is written next */
	bool writing, closing;
};

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int bytes)
{
	uint64_t v = 0;
	for (int i = bytes - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void rec_encode(uint8_t *r, const struct cfs_id *key, const struct loc *l)
{
	struct cfs_id check;
	memcpy(r, key->b, 32);
	put_le(r + 32, l->pack, 4);
	put_le(r + 36, l->len, 4);
	put_le(r + 40, l->off, 8);
	put_le(r + 48, l->lease, 8);
	cfs_hash(&check, r, 56);
	memcpy(r + 56, check.b, 8);
}

static bool rec_decode(const uint8_t *r, struct cfs_id *key, struct loc *l)
{
	struct cfs_id check;
	cfs_hash(&check, r, 56);
	if (memcmp(r + 56, check.b, 8) != 0)
		return false;
	memcpy(key->b, r, 32);
	l->pack = (uint32_t)get_le(r + 32, 4);
	l->len = (uint32_t)get_le(r + 36, 4);
	l->off = get_le(r + 40, 8);
	l->lease = get_le(r + 48, 8);
	return l->len <= CFS_BLOCK_MAX && l->pack > 0;
}

static void set_loc(struct dirstore *d, const struct cfs_id *key, const struct loc *l)
{
	uint32_t i;
	if (cfs_idmap_get(&d->map, key, &i)) {
		d->locs[i] = *l;
		return;
	}
	if (d->nlocs == d->cap_locs) {
		d->cap_locs = d->cap_locs ? 2 * d->cap_locs : 1024;
		d->locs = xrealloc(d->locs, d->cap_locs * sizeof(*d->locs));
	}
	d->locs[d->nlocs] = *l;
	cfs_idmap_put(&d->map, key, (uint32_t)d->nlocs++);
}

static const struct loc *find_loc(const struct dirstore *d, const struct cfs_id *key)
{
	uint32_t i;
	return cfs_idmap_get(&d->map, key, &i) ? &d->locs[i] : NULL;
}

static void on_idle(uv_idle_t *h)
{
	struct dirstore *d = h->data;
	struct completion *c = d->head;

	d->head = d->tail = NULL;
	uv_idle_stop(&d->idle);
	while (c) {
		struct completion *next = c->next;
		c->done(c->arg, c->status);
		free(c);
		c = next;
	}
}

static void complete_later(struct dirstore *d, pub_done_fn done, void *arg, int status)
{
	struct completion *c = xcalloc(1, sizeof(*c));
	c->done = done;
	c->arg = arg;
	c->status = status;
	if (d->tail)
		d->tail->next = c;
	else
		d->head = c;
	d->tail = c;
	uv_idle_start(&d->idle, on_idle);
}

static void root_path(const struct dirstore *d, const struct cfs_id *key, char *buf, size_t n)
{
	char h[65];
	snprintf(buf, n, "%s/roots/%s", d->path, cfs_id_hex(key, h));
}

static void pack_name(uint32_t pack, char buf[static 32])
{
	snprintf(buf, 32, "%06u.pack", pack);
}

/* fsync a directory by path: names created in it become durable. */
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

/* Replace a root file atomically and durably. */
static int write_root(const struct dirstore *d, const char *path, const uint8_t *p, size_t len)
{
	return cfs_write_file_atomic(path, p, len, 0644);
}

static int read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size > CFS_BLOCK_MAX) {
		close(fd);
		return -EFBIG;
	}
	*ret = xmalloc((size_t)st.st_size + 1);
	n = read(fd, *ret, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(*ret);
		return -EIO;
	}
	*ret_len = (size_t)n;
	return 0;
}

/* ---- writing: one job at a time, on a worker thread */

static int pwrite_all(int fd, struct iovec *iov, int n, uint64_t off)
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
		if (n > 0) { /* a short write: go on from where it stopped */
			iov->iov_base = (uint8_t *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Append the job's records to the index and flush them; on failure cut
 * the index back, so that the next append starts at a record boundary. */
static int append_records(struct job *j)
{
	struct iovec v = { j->recs, j->nrecs * REC_BYTES };
	int r = pwrite_all(j->d->index_fd, &v, 1, j->index_end);
	if (r == 0 && fdatasync(j->d->index_fd) < 0)
		r = -errno;
	if (r < 0) {
		if (ftruncate(j->d->index_fd, (off_t)j->index_end) < 0)
			log_warn("%s/index: cannot cut a failed append: %s", j->d->path, strerror(errno));
		return r;
	}
	j->index_end += j->nrecs * REC_BYTES;
	return 0;
}

static void put_work(uv_work_t *w)
{
	struct job *j = w->data;
	struct iovec *iov = xmalloc((j->n ? j->n : 1) * sizeof(*iov));
	uint64_t off = j->pack_end;
	int niov = 0, r = 0;

	j->recs = xmalloc(j->n * REC_BYTES + 1);
	for (size_t i = 0; i < j->n; i++) {
		struct pub_block *b = &j->blocks[i];
		b->status = 0;
		struct loc l = { .pack = j->pack, .len = (uint32_t)b->len, .off = off, .lease = j->lease };
		iov[niov++] = (struct iovec){ (void *)b->p, b->len };
		rec_encode(j->recs + j->nrecs++ * REC_BYTES, &b->key, &l);
		off += b->len;
	}
	if (niov == 0)
		goto out;
	if (j->fd < 0) { /* a new pack, its name flushed before any record names it */
		char name[32];
		pack_name(j->pack, name);
		/* the number is past every pack found at open, under the lock:
		 * a file there is ours, from an attempt that failed */
		j->fd = openat(j->d->packs_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (j->fd < 0)
			r = -errno;
		else if (fsync(j->d->packs_fd) < 0) {
			r = -errno;
			close(j->fd);
			j->fd = -1;
		}
	}
	if (r == 0)
		r = pwrite_all(j->fd, iov, niov, j->pack_end);
	if (r == 0 && fdatasync(j->fd) < 0) /* the bytes before the records that name them */
		r = -errno;
	if (r == 0)
		r = append_records(j);
	if (r == 0)
		j->pack_end = off;
	else {
		j->nrecs = 0;
		for (size_t i = 0; i < j->n; i++)
			if (j->blocks[i].status == 0)
				j->blocks[i].status = r;
	}
out:
	free(iov);
}

static void refresh_work(uv_work_t *w)
{
	struct job *j = w->data;
	j->status = append_records(j);
}

static void run_next(struct dirstore *d);

static void after_work(uv_work_t *w, int status)
{
	struct job *j = w->data;
	struct dirstore *d = j->d;
	struct cfs_id key;
	struct loc l;

	(void)status; /* a queued job is never cancelled */
	d->writing = false;
	d->jobs = j->next;
	if (!d->jobs)
		d->jobs_tail = NULL;
	if (j->blocks) {
		d->pack_fd = j->fd;
		d->pack_end = j->pack_end;
	}
	d->index_end = j->index_end;
	for (size_t i = 0; i < j->nrecs; i++)
		if (j->status == 0 && rec_decode(j->recs + i * REC_BYTES, &key, &l))
			set_loc(d, &key, &l);
	if (d->pack_fd >= 0 && d->pack_end >= PACK_MAX) {
		close(d->pack_fd);
		d->pack_fd = -1;
		d->pack++;
		d->pack_end = 0;
	}
	if (j->done)
		j->done(j->arg, j->blocks ? 0 : j->status);
	free(j->recs);
	free(j);
	run_next(d);
}

static void finalize(struct dirstore *d);

static void run_next(struct dirstore *d)
{
	struct job *j = d->jobs;

	if (d->writing)
		return;
	if (!j) {
		if (d->closing)
			finalize(d);
		return;
	}
	d->writing = true;
	j->fd = d->pack_fd;
	j->pack = d->pack;
	j->pack_end = d->pack_end;
	j->index_end = d->index_end;
	j->w.data = j;
	uv_queue_work(d->loop, &j->w, j->blocks ? put_work : refresh_work, after_work);
}

static void enqueue(struct dirstore *d, struct job *j)
{
	j->d = d;
	if (d->jobs_tail)
		d->jobs_tail->next = j;
	else
		d->jobs = j;
	d->jobs_tail = j;
	run_next(d);
}

static void ds_put(void *sink, struct pub_block *blocks, size_t n, uint64_t lease_until,
                   pub_done_fn done, void *arg)
{
	struct job *j = xcalloc(1, sizeof(*j));
	j->blocks = blocks;
	j->n = n;
	j->lease = lease_until ? lease_until : cfs_wall_s() + DHASH_LEASE_DEFAULT_S;
	j->done = done;
	j->arg = arg;
	enqueue(sink, j);
}

static void ds_refresh(void *sink, const struct cfs_id *keys, size_t n, uint64_t lease_until,
                       pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct job *j = xcalloc(1, sizeof(*j));

	j->recs = xmalloc(n * REC_BYTES + 1);
	for (size_t i = 0; i < n; i++) {
		const struct loc *at = find_loc(d, &keys[i]);
		if (!at) {
			free(j->recs);
			free(j);
			complete_later(d, done, arg, -ENOENT);
			return;
		}
		struct loc l = *at;
		l.lease = lease_until;
		rec_encode(j->recs + j->nrecs++ * REC_BYTES, &keys[i], &l);
	}
	j->done = done;
	j->arg = arg;
	enqueue(d, j);
}

/* Which blocks are here; those whose lease ends before lease_until get a
 * record with the new one (appended like a refresh's). */
static void ds_have(void *sink, const struct cfs_id *keys, size_t n, uint64_t lease_until,
                    bool *have, pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct job *j = NULL;

	for (size_t i = 0; i < n; i++) {
		const struct loc *at = find_loc(d, &keys[i]);
		have[i] = at != NULL;
		if (!at || at->lease >= lease_until)
			continue;
		if (!j) {
			j = xcalloc(1, sizeof(*j));
			j->recs = xmalloc(n * REC_BYTES + 1);
		}
		struct loc l = *at;
		l.lease = lease_until;
		rec_encode(j->recs + j->nrecs++ * REC_BYTES, &keys[i], &l);
	}
	if (!j) {
		complete_later(d, done, arg, 0);
		return;
	}
	j->done = done;
	j->arg = arg;
	enqueue(d, j);
}

static uint64_t ds_lease_granted(void *sink)
{
	return UINT64_MAX; /* a local store keeps what it is asked to */
}

/* ---- reading */

/* What is known of pack number `pack`, the table grown to hold it. */
static struct pack_info *pack_info(struct dirstore *d, uint32_t pack)
{
	if (pack >= d->npacks) {
		uint32_t n = pack + 16;
		d->packs = xrealloc(d->packs, n * sizeof(*d->packs));
		for (uint32_t i = d->npacks; i < n; i++)
			d->packs[i] = (struct pack_info){ .fd = -1, .size = -1 };
		d->npacks = n;
	}
	return &d->packs[pack];
}

static int pack_read_fd(struct dirstore *d, uint32_t pack)
{
	struct pack_info *pi = pack_info(d, pack);
	if (pi->fd < 0) {
		char name[32];
		pack_name(pack, name);
		if ((pi->fd = openat(d->packs_fd, name, O_RDONLY | O_CLOEXEC)) < 0)
			return -errno;
	}
	return pi->fd;
}

static void ds_put_root(void *sink, const struct cfs_id *key, const uint8_t *p, size_t len,
                        uint64_t lease_until, pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct sfsro_root new_root, old_root;
	struct cfs_id want;
	char path[4200];
	uint8_t *old;
	size_t old_len;
	int r;

	/* store a root only if it verifies, sits under its own key and is
	 * newer than (or identical in sequence to) the one held */
	if ((r = sfsro_root_decode(p, len, &new_root)) < 0)
		goto out;
	sfsro_root_key(&new_root.pk, &want);
	if (!cfs_id_eq(&want, key)) {
		r = -EBADMSG;
		goto out;
	}
	root_path(d, key, path, sizeof(path));
	if (read_file(path, &old, &old_len) == 0) {
		int ok = sfsro_root_decode(old, old_len, &old_root);
		free(old);
		if (ok == 0 && old_root.seq > new_root.seq) {
			r = -ESTALE;
			goto out;
		}
	}
	r = write_root(d, path, p, len);
out:
	complete_later(d, done, arg, r);
}

/* The source side: content-hash blocks by key, and roots by root key. */
static int ds_get(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	struct dirstore *d = ctx;
	const struct loc *l = find_loc(d, key);
	char path[4200];
	ssize_t n;
	int fd;

	if (!l) {
		root_path(d, key, path, sizeof(path));
		return read_file(path, ret, ret_len);
	}
	if ((fd = pack_read_fd(d, l->pack)) < 0)
		return fd;
	*ret = xmalloc(l->len + 1);
	n = pread(fd, *ret, l->len, (off_t)l->off);
	if (n != (ssize_t)l->len) {
		int r = n < 0 ? -errno : -EIO;
		free(*ret);
		return r;
	}
	*ret_len = l->len;
	return 0;
}

/* An asynchronous read, answered from the loop like every other call. */
struct read_req {
	pub_get_fn done;
	void *arg;
	uint8_t *p;
	size_t len;
};

static void read_answer(void *arg, int status)
{
	struct read_req *q = arg;
	q->done(q->arg, status, q->p, q->len);
	free(q->p);
	free(q);
}

static int ds_get_later(void *sink, const struct cfs_id *key, pub_get_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct read_req *q = xcalloc(1, sizeof(*q));

	q->done = done;
	q->arg = arg;
	int r = ds_get(d, key, &q->p, &q->len);
	if (r < 0)
		q->p = NULL;
	complete_later(d, read_answer, q, r);
	return 0;
}

static const struct sfsro_source *ds_source(void *sink)
{
	return &((struct dirstore *)sink)->src;
}

static void on_idle_closed(uv_handle_t *h)
{
	struct dirstore *d = h->data;
	free(d->path);
	free(d);
}

static void finalize(struct dirstore *d)
{
	while (d->head) { /* answers nobody waits for any more */
		struct completion *c = d->head;
		d->head = c->next;
		free(c);
	}
	for (uint32_t i = 0; i < d->npacks; i++)
		if (d->packs[i].fd >= 0)
			close(d->packs[i].fd);
	if (d->pack_fd >= 0)
		close(d->pack_fd);
	close(d->index_fd);
	close(d->packs_fd);
	close(d->lock_fd); /* releases the lock */
	free(d->packs);
	free(d->locs);
	cfs_idmap_free(&d->map);
	uv_close((uv_handle_t *)&d->idle, on_idle_closed);
}

static void ds_free(void *sink)
{
	struct dirstore *d = sink;
	d->closing = true;
	if (!d->jobs) /* else the last job's completion finishes the close */
		finalize(d);
}

static const struct pub_sink_ops dirstore_ops = {
	.have = ds_have,
	.put = ds_put,
	.put_root = ds_put_root,
	.refresh = ds_refresh,
	.lease_granted = ds_lease_granted,
	.get = ds_get_later,
	.source = ds_source,
	.free = ds_free,
};

/* ---- opening */

/* A pack's size as found at open, for checking index records (0 if it
 * is missing). */
static int64_t pack_size(struct dirstore *d, uint32_t pack)
{
	struct pack_info *pi = pack_info(d, pack);
	if (pi->size < 0) {
		char name[32];
		struct stat st;
		pack_name(pack, name);
		pi->size = fstatat(d->packs_fd, name, &st, 0) == 0 ? st.st_size : 0;
	}
	return pi->size;
}

/* Read the index into the map: every valid record, the last one per key.
 * A record may name only a pack below this process's own (d->pack). */
static int load_index(struct dirstore *d)
{
	uint8_t *buf = xmalloc(REC_BYTES * 1024);
	size_t ignored = 0, got = 0;
	struct cfs_id key;
	struct loc l;
	struct stat st;
	int r = 0;

	if (fstat(d->index_fd, &st) < 0) {
		free(buf);
		return -errno;
	}
	d->index_end = (uint64_t)st.st_size - (uint64_t)st.st_size % REC_BYTES;
	if (d->index_end != (uint64_t)st.st_size) {
		log_warn("%s/index: cutting a torn record at its end (an interrupted write)", d->path);
		if (ftruncate(d->index_fd, (off_t)d->index_end) < 0)
			r = -errno;
	}
	for (uint64_t off = 0; r == 0 && off < d->index_end; off += got) {
		ssize_t n = pread(d->index_fd, buf, REC_BYTES * 1024, (off_t)off);
		if (n <= 0) {
			r = n < 0 ? -errno : -EIO;
			break;
		}
		got = (size_t)n - (size_t)n % REC_BYTES;
		for (size_t i = 0; i < got; i += REC_BYTES) {
			if (!rec_decode(buf + i, &key, &l) || l.pack >= d->pack || l.off >= 1ull << 62 ||
			    l.off + l.len > (uint64_t)pack_size(d, l.pack)) {
				ignored++;
				continue;
			}
			set_loc(d, &key, &l);
		}
	}
	if (ignored)
		log_warn("%s/index: %zu records ignored (damaged, or naming bytes a pack does not hold)",
		         d->path, ignored);
	free(buf);
	return r;
}

/* The number after the highest pack in the store: this process's pack. */
static int first_free_pack(struct dirstore *d, uint32_t *ret)
{
	int fd = dup(d->packs_fd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	unsigned long max = 0;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(dir))) {
		char *end;
		unsigned long v = strtoul(de->d_name, &end, 10);
		if (end != de->d_name && strcmp(end, ".pack") == 0 && v > max)
			max = v;
	}
	closedir(dir);
	if (max >= PACK_NUMBER_MAX)
		return -EOVERFLOW;
	*ret = (uint32_t)max + 1;
	return 0;
}

static int open_in(const char *dir, const char *name, int flags, mode_t mode)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return open(path, flags | O_CLOEXEC, mode);
}

static int dirstore_open(struct dirstore *d)
{
	struct stat st;
	char sub[4200];
	int r;

	d->lock_fd = d->index_fd = d->packs_fd = d->pack_fd = -1;
	if (mkdir(d->path, 0755) < 0 && errno != EEXIST)
		return log_error_errno(-errno, "cannot use %s as a store", d->path);
	snprintf(sub, sizeof(sub), "%s/blocks", d->path);
	if (stat(sub, &st) == 0) {
		log_error("%s is a store in the old one-file-per-block layout; publish into a new "
		          "directory", d->path);
		return -EINVAL;
	}
	for (const char *s = "roots\0packs\0"; *s; s += strlen(s) + 1) {
		snprintf(sub, sizeof(sub), "%s/%s", d->path, s);
		if (mkdir(sub, 0755) < 0 && errno != EEXIST)
			return log_error_errno(-errno, "cannot use %s as a store", d->path);
	}
	if ((d->lock_fd = open_in(d->path, "lock", O_RDWR | O_CREAT, 0644)) < 0)
		return log_error_errno(-errno, "cannot use %s as a store", d->path);
	if (flock(d->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EWOULDBLOCK) {
			log_error("the store %s is in use by another process", d->path);
			return -EBUSY;
		}
		return log_error_errno(-errno, "cannot lock the store %s", d->path);
	}
	if ((d->packs_fd = open_in(d->path, "packs", O_RDONLY | O_DIRECTORY, 0)) < 0 ||
	    (d->index_fd = open_in(d->path, "index", O_RDWR | O_CREAT, 0644)) < 0)
		return log_error_errno(-errno, "cannot use %s as a store", d->path);
	if ((r = sync_dir(d->path)) < 0) /* the layout durable before anything is put */
		return log_error_errno(r, "cannot flush %s", d->path);
	if ((r = first_free_pack(d, &d->pack)) < 0 || (r = load_index(d)) < 0)
		return log_error_errno(r, "cannot read the store %s", d->path);
	return 0;
}

int pub_sink_open(uv_loop_t *loop, const char *spec, struct pub_sink *ret)
{
	struct dirstore *d;
	int r;

	static struct dhash_target t; /* large; one sink per process */
	memset(&t, 0, sizeof(t));
	if (strcmp(spec, "cfsd") == 0)
		return pub__cfsdsink_open(loop, &t, ret);
	if (strncmp(spec, "cfsd:", 5) == 0 && spec[5]) {
		if (snprintf(t.sock, sizeof(t.sock), "%s", spec + 5) >= (int)sizeof(t.sock))
			return log_error_errno(-ENAMETOOLONG, "store '%s': path too long", spec);
		return pub__cfsdsink_open(loop, &t, ret);
	}
	if (strncmp(spec, "ring:", 5) == 0 && spec[5]) {
		if (dhash_target_add(&t, spec + 5, "--to ring:") < 0)
			return -EINVAL;
		return pub__cfsdsink_open(loop, &t, ret);
	}
	if (strncmp(spec, "dir:", 4) != 0 || !spec[4]) {
		log_error("unknown store '%s': expected cfsd[:SOCKET], ring:HOST:PORT[,...] or dir:PATH",
		          spec);
		return -EINVAL;
	}
	if (strlen(spec) > 4000)
		return log_error_errno(-ENAMETOOLONG, "store path");
	d = xcalloc(1, sizeof(*d));
	d->path = xstrdup(spec + 4);
	d->loop = loop;
	if ((r = dirstore_open(d)) < 0) {
		int fds[] = { d->lock_fd, d->index_fd, d->packs_fd };
		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
		free(d->packs); /* sizes only: no pack is open for reading yet */
		free(d->locs);
		cfs_idmap_free(&d->map);
		free(d->path);
		free(d);
		return r;
	}
	uv_idle_init(loop, &d->idle);
	d->idle.data = d;
	d->src = (struct sfsro_source){ ds_get, d };
	ret->ops = &dirstore_ops;
	ret->impl = d;
	return 0;
}

void pub_sink_close(struct pub_sink *s)
{
	if (s->impl)
		s->ops->free(s->impl);
	s->impl = NULL;
}
