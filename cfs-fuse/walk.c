/*
 * Directories and files, read from verified blocks without blocking: the
 * thin libuv driver of the sfsro-format walker, which holds every rule of
 * the walk (the B-tree lookup, the listing a leaf at a time, the descent
 * through indirect blocks, and every check on what a block may be). The
 * driver answers each block the walker asks for from the cache at once,
 * or starts a fetch and steps on — a read asks for all of its blocks
 * before any lands, so they are fetched in parallel — and when the walker
 * waits, it parks until a fetch's callback feeds it and steps it again.
 *
 * Blocks in the cache were verified against their keys when they came
 * (blocks.c), so they are fed as verified; the walker checks the rest.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

/* ------------------------------------------------------------ the driver */

/* One walk: the walker, a block the caller holds (an open file's own
 * inode), the fetches out for it, and what to do when one lands. */
struct fwalk {
	cfsfuse_t *fs;
	sfsro_walker_t *w;
	const struct cfs_id *own_key; /* or NULL */
	const uint8_t *own_p;
	size_t own_len;
	uint32_t fetching;
	void (*resume)(struct fwalk *fw);
};

struct fetch_ctx {
	struct fwalk *fw;
	struct cfs_id key;
};

/* The walker's errors as the mount answers them: a block that is not
 * what it should be is EIO, like one that cannot be fetched. */
static int fs_status(int r)
{
	return r == -EPROTO || r == -EBADMSG ? -EIO : r;
}

/* Feed key from the caller's own block or the cache: false if neither
 * has it. */
static bool feed_cached(cfsfuse_t *fs, sfsro_walker_t *w, const struct cfs_id *key,
                        const struct cfs_id *own_key, const uint8_t *own_p, size_t own_len)
{
	const struct fblk *b;

	if (own_key && cfs_id_eq(key, own_key)) {
		(void)sfsro_walker_feed(w, key, 0, own_p, own_len, SFSRO_FEED_VERIFIED);
		return true;
	}
	if (!(b = fs__blk_peek(fs->blocks, key)))
		return false;
	(void)sfsro_walker_feed(w, key, 0, b->p, b->len, SFSRO_FEED_VERIFIED);
	return true;
}

static void fetched(void *arg, int status, const struct fblk *b)
{
	struct fetch_ctx *c = arg;
	struct fwalk *fw = c->fw;
	char k[9];

	fw->fetching--;
	if (status < 0) {
		if (status != -ECANCELED)
			log_error("block %s: %s", cfs_id_short(&c->key, k), strerror(-status));
		(void)sfsro_walker_feed(fw->w, &c->key, status == -ECANCELED ? status : -EIO, NULL, 0, 0);
	} else {
		(void)sfsro_walker_feed(fw->w, &c->key, 0, b->p, b->len, SFSRO_FEED_VERIFIED);
	}
	free(c);
	fw->resume(fw);
}

static void prefetched(void *arg, int status, const struct fblk *b)
{
}

/* Step the walker as far as the cache lets it: WAIT while fetches are
 * out (resume runs when one lands), else the result for the owner — an
 * ENTRY, DONE or an error. An end waits for every fetch out: their
 * callbacks point at fw. */
static int fwalk_run(struct fwalk *fw, struct sfsro_step *s)
{
	for (;;) {
		int r = sfsro_walker_step(fw->w, s);
		if (r == SFSRO_WALK_NEED) {
			if (feed_cached(fw->fs, fw->w, &s->key, fw->own_key, fw->own_p, fw->own_len))
				continue;
			struct fetch_ctx *c = xmalloc(sizeof(*c));
			*c = (struct fetch_ctx){ fw, s->key };
			fw->fetching++;
			if (s->btype == SFSRO_B_DATA)
				fs__blk_fetch_data(fw->fs->blocks, &fw->fs->root, &s->key, false, fetched, c);
			else
				fs__blk_fetch(fw->fs->blocks, &s->key, false, fetched, c);
		} else if (r == SFSRO_WALK_HINT) {
			if (!fs__blk_peek(fw->fs->blocks, &s->key) && s->btype == SFSRO_B_DATA)
				fs__blk_fetch_data(fw->fs->blocks, &fw->fs->root, &s->key, true, prefetched, NULL);
			else if (!fs__blk_peek(fw->fs->blocks, &s->key))
				fs__blk_fetch(fw->fs->blocks, &s->key, true, prefetched, NULL);
		} else if (r == SFSRO_WALK_WAIT || (r <= 0 && fw->fetching)) {
			return SFSRO_WALK_WAIT;
		} else {
			return r < 0 ? fs_status(r) : r;
		}
	}
}

/* ------------------------------------------------------------ lookups */

struct dlookup {
	struct fwalk fw;
	struct sfsro_node node;
	fs_lookup_cb cb;
	void *arg;
};

static void dlookup_resume(struct fwalk *fw)
{
	struct dlookup *q = container_of(fw, struct dlookup, fw);
	struct sfsro_step s;
	int r = fwalk_run(fw, &s);

	if (r == SFSRO_WALK_WAIT)
		return;
	q->cb(fw->fs, q->arg, r, r == SFSRO_WALK_DONE ? &q->node.e : NULL);
	sfsro_walker_free(fw->w);
	free(q);
}

static struct dlookup *dlookup_new(cfsfuse_t *fs, fs_lookup_cb cb, void *arg)
{
	struct dlookup *q = xcalloc(1, sizeof(*q));

	q->fw = (struct fwalk){ .fs = fs, .w = sfsro_walker_new(), .resume = dlookup_resume };
	q->cb = cb;
	q->arg = arg;
	return q;
}

void fs__dir_lookup(cfsfuse_t *fs, const struct cfs_id *dir_key, const char *name,
                    fs_lookup_cb cb, void *arg)
{
	struct dlookup *q = dlookup_new(fs, cb, arg);

	sfsro_walker_lookup(q->fw.w, dir_key, (const uint8_t *)name, strlen(name), &q->node);
	dlookup_resume(&q->fw);
}

void fs__path_lookup(cfsfuse_t *fs, const char *path, fs_lookup_cb cb, void *arg)
{
	struct dlookup *q = dlookup_new(fs, cb, arg);

	sfsro_walker_path(q->fw.w, &fs->root, path, &q->node);
	dlookup_resume(&q->fw);
}

/* ------------------------------------------------------------ directories */

/* An open directory: a listing walker kept between readdirs, so reading
 * on from where the last one stopped costs nothing (sfsro_walker_seek). */
struct fs_dir {
	uint64_t ino, seq;
	sfsro_walker_t *w;
	bool busy;
};

/* A readdir, or the opendir that reads the first leaf. */
struct dread {
	struct fwalk fw;
	struct fs_dir *h;
	bool opening;
	fs_dir_entry_fn add;
	fs_dir_done_fn done;
	void *arg;
};

static void dread_resume(struct fwalk *fw)
{
	struct dread *rd = container_of(fw, struct dread, fw);
	struct sfsro_step s;
	int r;

	while ((r = fwalk_run(fw, &s)) == SFSRO_WALK_ENTRY) {
		/* an open ends once the first leaf is in; a full reply before
		 * the entry it could not take, which the next readdir asks for */
		if (rd->opening || !rd->add(rd->arg, s.entry, s.index)) {
			sfsro_walker_seek(rd->h->w, s.index);
			r = SFSRO_WALK_DONE;
			break;
		}
	}
	if (r == SFSRO_WALK_WAIT)
		return;
	rd->h->busy = false;
	rd->done(fw->fs, rd->arg, r, rd->opening ? rd->h : NULL);
	free(rd);
}

static void dread_start(cfsfuse_t *fs, struct fs_dir *h, bool opening, fs_dir_entry_fn add,
                        fs_dir_done_fn done, void *arg)
{
	struct dread *rd = xcalloc(1, sizeof(*rd));

	rd->fw = (struct fwalk){ .fs = fs, .w = h->w, .resume = dread_resume };
	rd->h = h;
	rd->opening = opening;
	rd->add = add;
	rd->done = done;
	rd->arg = arg;
	h->busy = true;
	dread_resume(&rd->fw);
}

void fs__dir_open(cfsfuse_t *fs, uint64_t ino, const struct cfs_id *top, fs_dir_done_fn done, void *arg)
{
	struct fs_dir *h = xcalloc(1, sizeof(*h));

	h->ino = ino;
	h->seq = fs->root.seq;
	h->w = sfsro_walker_new();
	sfsro_walker_readdir(h->w, top);
	dread_start(fs, h, true, NULL, done, arg);
}

void fs__dir_read(cfsfuse_t *fs, struct fs_dir *h, uint64_t index, fs_dir_entry_fn add,
                  fs_dir_done_fn done, void *arg)
{
	if (h->busy) { /* the kernel sends one at a time per open directory */
		done(fs, arg, -EBUSY, NULL);
		return;
	}
	sfsro_walker_seek(h->w, index);
	dread_start(fs, h, false, add, done, arg);
}

uint64_t fs__dir_seq(const struct fs_dir *h)
{
	return h->seq;
}

void fs__dir_free(struct fs_dir *h)
{
	if (!h)
		return;
	sfsro_walker_free(h->w);
	free(h);
}

/* ------------------------------------------------------------ files */

struct opener {
	struct fwalk fw;
	uint64_t ino;
	struct cfs_id key;
	struct sfsro_inode inode;
	uint8_t *bytes;
	size_t len;
	fs_open_cb cb;
	void *arg;
};

static void open_resume(struct fwalk *fw)
{
	struct opener *op = container_of(fw, struct opener, fw);
	struct fhandle *h = NULL;
	struct sfsro_step s;
	int r = fwalk_run(fw, &s);

	if (r == SFSRO_WALK_WAIT)
		return;
	if (r == SFSRO_WALK_DONE) {
		h = xcalloc(1, sizeof(*h));
		h->ino = op->ino;
		h->key = op->key;
		h->iblock = op->bytes; /* the handle's own copy: a newer root changes nothing */
		h->iblock_len = op->len;
		h->inode = op->inode;
	} else {
		free(op->bytes);
	}
	op->cb(fw->fs, op->arg, r, h);
	sfsro_walker_free(fw->w);
	free(op);
}

void fs__file_open(cfsfuse_t *fs, uint64_t ino, const struct cfs_id *key, fs_open_cb cb, void *arg)
{
	struct opener *op = xcalloc(1, sizeof(*op));

	op->fw = (struct fwalk){ .fs = fs, .w = sfsro_walker_new(), .resume = open_resume };
	op->ino = ino;
	op->key = *key;
	op->cb = cb;
	op->arg = arg;
	sfsro_walker_inode(op->fw.w, key, &op->inode, &op->bytes, &op->len);
	open_resume(&op->fw);
}

void fs__fhandle_free(struct fhandle *h)
{
	if (!h)
		return;
	sfsro_walker_free(h->locator);
	free(h->iblock);
	free(h);
}

struct fread {
	struct fwalk fw;
	uint8_t *buf;
	size_t n;
	fs_read_cb cb;
	void *arg;
};

static void read_resume(struct fwalk *fw)
{
	struct fread *rd = container_of(fw, struct fread, fw);
	struct sfsro_step s;
	int r = fwalk_run(fw, &s);

	if (r == SFSRO_WALK_WAIT)
		return;
	rd->cb(fw->fs, rd->arg, r, r == SFSRO_WALK_DONE ? rd->buf : NULL, r == SFSRO_WALK_DONE ? rd->n : 0);
	sfsro_walker_free(fw->w);
	free(rd->buf);
	free(rd);
}

void fs__file_read(cfsfuse_t *fs, struct fhandle *h, uint64_t off, size_t size, fs_read_cb cb,
                   void *arg)
{
	if (off >= h->inode.size || size == 0) {
		cb(fs, arg, 0, NULL, 0);
		return;
	}
	if (size > h->inode.size - off)
		size = (size_t)(h->inode.size - off);
	struct fread *rd = xcalloc(1, sizeof(*rd));
	rd->fw = (struct fwalk){ .fs = fs, .w = sfsro_walker_new(), .own_key = &h->key,
	                         .own_p = h->iblock, .own_len = h->iblock_len, .resume = read_resume };
	rd->buf = xmalloc(size);
	rd->cb = cb;
	rd->arg = arg;
	sfsro_walker_read(rd->fw.w, &h->key, off, rd->buf, size, &rd->n);
	read_resume(&rd->fw);
}

bool fs__data_key_cached(cfsfuse_t *fs, struct fhandle *h, uint64_t b, struct cfs_id *ret,
                         fs_blk_cb cb, void *arg)
{
	struct sfsro_step s;
	int r;

	if (!h->locator)
		h->locator = sfsro_walker_new();
	sfsro_walker_locate(h->locator, &h->key, b, ret);
	while ((r = sfsro_walker_step(h->locator, &s)) == SFSRO_WALK_NEED) {
		if (!feed_cached(fs, h->locator, &s.key, &h->key, h->iblock, h->iblock_len)) {
			if (s.btype == SFSRO_B_DATA)
				fs__blk_fetch_data(fs->blocks, &fs->root, &s.key, true, cb, arg);
			else
				fs__blk_fetch(fs->blocks, &s.key, true, cb, arg);
			return false;
		}
	}
	return r == SFSRO_WALK_DONE;
}
