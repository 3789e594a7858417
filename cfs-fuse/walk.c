/*
 * Directories and files, read from verified blocks without blocking: each
 * operation is one state struct that runs as far as the cache lets it and
 * parks on a fetch when it needs a block it does not have.
 *
 * A directory is a B-tree of directory blocks (sfsro-format): a lookup
 * follows the one child whose first name is not above the name wanted; a
 * listing visits every leaf in order. A file's data blocks are found
 * through its inode and indirect blocks; one read resolves each of its
 * blocks independently, so they are fetched in parallel.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

/* ------------------------------------------------------------ directories */

struct dkey {
	struct cfs_id key;
	uint32_t height;          /* UINT32_MAX: the top, any height */
};

struct dwalk {
	cfsfuse_t *fs;
	bool list;
	struct cfs_bytes want;    /* lookup: the name (owned) */
	struct dkey *stack;       /* blocks still to visit, the next on top */
	uint32_t nstack, cap;
	struct listing *l;
	fs_lookup_cb lookup_cb;
	fs_list_cb list_cb;
	void *arg;
};

static void push(struct dwalk *w, const struct cfs_id *key, uint32_t height)
{
	if (w->nstack == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 16;
		w->stack = xrealloc(w->stack, w->cap * sizeof(*w->stack));
	}
	w->stack[w->nstack++] = (struct dkey){ *key, height };
}

static void dwalk_end(struct dwalk *w, int status, const struct sfsro_entry *e)
{
	if (w->list) {
		if (status < 0) {
			fs__listing_free(w->l);
			w->l = NULL;
		}
		w->list_cb(w->fs, w->arg, status, w->l);
	} else {
		w->lookup_cb(w->fs, w->arg, status, e);
	}
	free((void *)w->want.p);
	free(w->stack);
	free(w);
}

static void listing_add(struct listing *l, const struct sfsro_entry *e)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	struct sfsro_entry *c = &l->v[l->n++];
	*c = *e;
	uint8_t *name = xmalloc(e->name.len + 1);
	memcpy(name, e->name.p, e->name.len);
	name[e->name.len] = 0;
	c->name.p = name;
	c->target = (struct cfs_bytes){ NULL, 0 };
	if (e->type == SFSRO_T_SYMLINK) {
		uint8_t *t = xmalloc(e->target.len + 1);
		memcpy(t, e->target.p, e->target.len);
		t[e->target.len] = 0;
		c->target = (struct cfs_bytes){ t, e->target.len };
	}
}

void fs__listing_free(struct listing *l)
{
	if (!l)
		return;
	for (uint32_t i = 0; i < l->n; i++) {
		free((void *)l->v[i].name.p);
		free((void *)l->v[i].target.p);
	}
	free(l->v);
	free(l);
}

/* One directory block: 1 to go on, 0 when the walk has ended (answered
 * and freed). */
static int dwalk_block(struct dwalk *w, const struct dkey *at, const struct fblk *b)
{
	struct sfsro_dir d;
	int r = sfsro_dir_decode(b->p, b->len, &d);

	if (r == 0 && at->height != UINT32_MAX && d.height != at->height)
		r = -EPROTO;
	if (r < 0) {
		char k[9];
		log_error("directory block %s is malformed", cfs_id_short(&b->key, k));
		dwalk_end(w, -EIO, NULL);
		return 0;
	}
	if (w->list) {
		if (d.height == 0)
			for (uint32_t i = 0; i < d.n; i++)
				listing_add(w->l, &d.entries[i]);
		else
			for (uint32_t i = d.n; i-- > 0;)
				push(w, &d.children[i].key, d.height - 1);
		sfsro_dir_clear(&d);
		if (w->nstack)
			return 1;
		dwalk_end(w, 0, NULL);
		return 0;
	}
	/* the last item whose name is <= the one wanted */
	uint32_t lo = 0, hi = d.n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct cfs_bytes *nm = d.height ? &d.children[mid].first : &d.entries[mid].name;
		if (sfsro_name_cmp(&w->want, nm) >= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	r = -ENOENT;
	if (lo > 0 && d.height == 0 && sfsro_name_cmp(&w->want, &d.entries[lo - 1].name) == 0) {
		dwalk_end(w, 0, &d.entries[lo - 1]);
		sfsro_dir_clear(&d);
		return 0;
	}
	if (lo > 0 && d.height > 0) {
		push(w, &d.children[lo - 1].key, d.height - 1);
		r = 1;
	}
	sfsro_dir_clear(&d);
	if (r < 0)
		dwalk_end(w, r, NULL);
	return r < 0 ? 0 : r;
}

static void dwalk_step(struct dwalk *w, const struct fblk *got);

static void dwalk_got(void *arg, int status, const struct fblk *b)
{
	struct dwalk *w = arg;

	if (status < 0)
		dwalk_end(w, status == -ECANCELED ? status : -EIO, NULL);
	else
		dwalk_step(w, b);
}

/* Run until a block is missing (then park on its fetch) or the walk ends.
 * got: the block just fetched for the top of the stack. */
static void dwalk_step(struct dwalk *w, const struct fblk *got)
{
	for (;;) {
		struct dkey at = w->stack[--w->nstack];
		const struct fblk *b = got ? got : fs__blk_peek(w->fs->blocks, &at.key);
		got = NULL;
		if (!b) {
			w->nstack++;
			fs__blk_fetch(w->fs->blocks, &at.key, false, dwalk_got, w);
			return;
		}
		if (dwalk_block(w, &at, b) == 0)
			return;
	}
}

void fs__dir_lookup(cfsfuse_t *fs, const struct cfs_id *dir_key, const char *name,
                    fs_lookup_cb cb, void *arg)
{
	struct dwalk *w = xcalloc(1, sizeof(*w));

	w->fs = fs;
	w->want = (struct cfs_bytes){ (const uint8_t *)xstrdup(name), strlen(name) };
	w->lookup_cb = cb;
	w->arg = arg;
	push(w, dir_key, UINT32_MAX);
	dwalk_step(w, NULL);
}

void fs__dir_list(cfsfuse_t *fs, const struct cfs_id *dir_key, fs_list_cb cb, void *arg)
{
	struct dwalk *w = xcalloc(1, sizeof(*w));

	w->fs = fs;
	w->list = true;
	w->l = xcalloc(1, sizeof(*w->l));
	w->list_cb = cb;
	w->arg = arg;
	push(w, dir_key, UINT32_MAX);
	dwalk_step(w, NULL);
}

/* ------------------------------------------------------------ open */

struct opener {
	cfsfuse_t *fs;
	uint64_t ino;
	struct cfs_id key;
	fs_open_cb cb;
	void *arg;
};

static void open_block(struct opener *op, const struct fblk *b)
{
	struct fhandle *h = xcalloc(1, sizeof(*h));

	h->ino = op->ino;
	h->key = op->key;
	h->iblock = xmemdup(b->p, b->len ? b->len : 1);
	if (sfsro_inode_decode(h->iblock, b->len, &h->inode) < 0) {
		char k[9];
		log_error("inode block %s is malformed", cfs_id_short(&op->key, k));
		fs__fhandle_free(h);
		op->cb(op->fs, op->arg, -EIO, NULL);
	} else {
		op->cb(op->fs, op->arg, 0, h);
	}
	free(op);
}

static void open_got(void *arg, int status, const struct fblk *b)
{
	struct opener *op = arg;

	if (status < 0) {
		op->cb(op->fs, op->arg, status == -ECANCELED ? status : -EIO, NULL);
		free(op);
		return;
	}
	open_block(op, b);
}

void fs__file_open(cfsfuse_t *fs, uint64_t ino, const struct cfs_id *key, fs_open_cb cb, void *arg)
{
	struct opener *op = xcalloc(1, sizeof(*op));
	const struct fblk *b;

	*op = (struct opener){ fs, ino, *key, cb, arg };
	if ((b = fs__blk_peek(fs->blocks, key)))
		open_block(op, b);
	else
		fs__blk_fetch(fs->blocks, key, false, open_got, op);
}

void fs__fhandle_free(struct fhandle *h)
{
	if (!h)
		return;
	free(h->iblock);
	free(h);
}

/* ------------------------------------------------------------ read */

struct rd;

/* The descent to one data block of a read. */
struct bref {
	struct rd *rd;
	uint64_t b;               /* data block number in the file */
	struct cfs_id cur;        /* the block to look at next ... */
	uint32_t h;               /* ... and its height (0: data) */
	uint64_t span;            /* data blocks under one key at height h */
	uint64_t rem;             /* b's position under cur */
};

struct rd {
	cfsfuse_t *fs;
	struct fhandle *h;
	uint64_t off;
	size_t size;
	uint8_t *buf;
	uint32_t pending;
	int status;
	fs_read_cb cb;
	void *arg;
	struct bref br[];
};

static void rd_done_one(struct rd *rd, int status)
{
	if (status < 0 && !rd->status)
		rd->status = status;
	if (--rd->pending)
		return;
	rd->cb(rd->fs, rd->arg, rd->status, rd->buf, rd->status ? 0 : rd->size);
	free(rd->buf);
	free(rd);
}

/* Start the descent to data block b: the key under the inode. */
static int bref_init(struct bref *x, const struct sfsro_inode *ino, uint64_t b)
{
	uint64_t span = 1;

	for (uint32_t i = 0; i < ino->height; i++)
		span *= ino->fanout;
	if (b / span >= ino->nkeys)
		return -EPROTO;
	x->b = b;
	x->h = ino->height;
	x->cur = ino->keys[b / span];
	x->rem = b % span;
	x->span = span;
	return 0;
}

/* Go one level down from the indirect block bl: 0, or -EPROTO. */
static int bref_down(struct bref *x, const struct fblk *bl, uint32_t fanout)
{
	const struct cfs_id *keys;
	uint32_t got_h, n;

	if (sfsro_indirect_decode(bl->p, bl->len, &got_h, &keys, &n) < 0 || got_h != x->h)
		return -EPROTO;
	x->span /= fanout;
	if (x->rem / x->span >= n)
		return -EPROTO;
	x->cur = keys[x->rem / x->span];
	x->rem %= x->span;
	x->h--;
	return 0;
}

/* Copy what the read wants of data block x->b from bl. */
static int bref_copy(struct bref *x, const struct fblk *bl)
{
	struct rd *rd = x->rd;
	const struct sfsro_inode *ino = &rd->h->inode;
	uint64_t start = x->b * ino->bsize;
	uint64_t want = ino->size - start < ino->bsize ? ino->size - start : ino->bsize;
	struct cfs_bytes data;

	if (sfsro_data_decode(bl->p, bl->len, &data) < 0 || data.len != want)
		return -EPROTO;
	uint64_t from = rd->off > start ? rd->off : start;
	uint64_t to = rd->off + rd->size < start + want ? rd->off + rd->size : start + want;
	memcpy(rd->buf + (from - rd->off), data.p + (from - start), (size_t)(to - from));
	return 0;
}

bool fs__data_key_cached(cfsfuse_t *fs, const struct sfsro_inode *ino, uint64_t b,
                         struct cfs_id *ret, fs_blk_cb cb, void *arg)
{
	struct bref x = { 0 };

	if (bref_init(&x, ino, b) < 0)
		return false;
	while (x.h > 0) {
		const struct fblk *bl = fs__blk_peek(fs->blocks, &x.cur);
		if (!bl) {
			fs__blk_fetch(fs->blocks, &x.cur, true, cb, arg);
			return false;
		}
		if (bref_down(&x, bl, ino->fanout) < 0)
			return false;
	}
	*ret = x.cur;
	return true;
}

static void bref_step(struct bref *x, const struct fblk *got);

static void bref_got(void *arg, int status, const struct fblk *b)
{
	struct bref *x = arg;

	if (status < 0)
		rd_done_one(x->rd, status == -ECANCELED ? status : -EIO);
	else
		bref_step(x, b);
}

static void bref_step(struct bref *x, const struct fblk *got)
{
	struct rd *rd = x->rd;

	for (;;) {
		const struct fblk *b = got ? got : fs__blk_peek(rd->fs->blocks, &x->cur);
		got = NULL;
		if (!b) {
			fs__blk_fetch(rd->fs->blocks, &x->cur, false, bref_got, x);
			return;
		}
		bool data = x->h == 0;
		int r = data ? bref_copy(x, b) : bref_down(x, b, rd->h->inode.fanout);
		if (r < 0) {
			char k[9], i[9];
			log_error("block %s of file %s is malformed", cfs_id_short(&b->key, k),
			          cfs_id_short(&rd->h->key, i));
			rd_done_one(rd, -EIO);
			return;
		}
		if (data) {
			rd_done_one(rd, 0);
			return;
		}
	}
}

void fs__file_read(cfsfuse_t *fs, struct fhandle *h, uint64_t off, size_t size, fs_read_cb cb,
                   void *arg)
{
	const struct sfsro_inode *ino = &h->inode;

	if (off >= ino->size || size == 0) {
		cb(fs, arg, 0, NULL, 0);
		return;
	}
	if (size > ino->size - off)
		size = (size_t)(ino->size - off);
	if (ino->inline_data.len || ino->size <= SFSRO_INLINE_MAX) {
		cb(fs, arg, 0, ino->inline_data.p + off, size);
		return;
	}
	uint64_t first = off / ino->bsize, last = (off + size - 1) / ino->bsize;
	uint32_t nb = (uint32_t)(last - first + 1);
	struct rd *rd = xcalloc(1, sizeof(*rd) + nb * sizeof(rd->br[0]));

	rd->fs = fs;
	rd->h = h;
	rd->off = off;
	rd->size = size;
	rd->buf = xmalloc(size);
	rd->cb = cb;
	rd->arg = arg;
	rd->pending = nb + 1; /* held until every descent has started */
	for (uint32_t i = 0; i < nb; i++) {
		struct bref *x = &rd->br[i];
		x->rd = rd;
		if (bref_init(x, ino, first + i) < 0)
			rd_done_one(rd, -EIO);
		else
			bref_step(x, NULL);
	}
	rd_done_one(rd, 0);
}
