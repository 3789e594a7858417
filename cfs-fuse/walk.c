/*
 * Directories and files, read from verified blocks without blocking: each
 * operation is one state struct that runs as far as the cache lets it and
 * parks on a fetch when it needs a block it does not have.
 *
 * A directory is a B-tree of directory blocks (sfsro-format): a lookup
 * follows the one child whose first name is not above the name wanted; an
 * open directory is read a leaf at a time. A file's data blocks are found
 * through its inode and indirect blocks; one read resolves each of its
 * blocks independently, so they are fetched in parallel.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

/* ------------------------------------------------------------ directories */

/*
 * Every directory block must sit in the key range its index gives it: its
 * first name is its index item's name, and every name in it is below the
 * next item's. Honest directories (sfsro_build_dir) always do; an index
 * naming one child many times, which would list millions of entries from
 * a few blocks, cannot, so no walk reads a block of a directory twice and
 * the lie is EIO at the first repeated child. A cycle inside a directory
 * is refused by the height check (a child is one level lower).
 */

static const struct cfs_bytes *first_name(const struct sfsro_dir *d, uint32_t i)
{
	return d->height ? &d->children[i].first : &d->entries[i].name;
}

static void name_set(struct name_buf *nb, const struct cfs_bytes *from)
{
	memcpy(nb->b, from->p, from->len);
	nb->n = (struct cfs_bytes){ nb->b, from->len };
}

/* Decode the directory block b, of height want_height (UINT32_MAX: any)
 * whose first name is lo and every name below hi (NULL: unbounded), or
 * log why not with its key: 0 or -EIO. */
static int dir_decode(const struct fblk *b, uint32_t want_height, const struct cfs_bytes *lo,
                      const struct cfs_bytes *hi, struct sfsro_dir *d)
{
	const char *why = "malformed";
	char k[9];
	int r = sfsro_dir_decode(b->p, b->len, d);

	if (r == 0 && want_height != UINT32_MAX && d->height != want_height)
		r = -EPROTO;
	if (r == 0 && !sfsro_dir_in_range(d, lo, hi))
		r = -EPROTO;
	if (r == 0)
		return 0;
	if (sfsro_dir_decode(b->p, b->len, d) == 0) { /* decodes: its place is wrong */
		why = d->height != want_height && want_height != UINT32_MAX
		          ? "at the wrong height"
		          : "not where its index puts it (named twice, or out of order)";
	}
	sfsro_dir_clear(d);
	log_error("directory block %s is %s", cfs_id_short(&b->key, k), why);
	return -EIO;
}

/* A lookup: one block per level, by binary search. */
struct dlookup {
	cfsfuse_t *fs;
	struct cfs_bytes want;    /* the name (owned) */
	struct cfs_id key;        /* the block to read next ... */
	uint32_t height;          /* ... its height (UINT32_MAX: the top) ... */
	struct name_buf lo, hi;   /* ... and its range (the top has none) */
	bool has_hi;
	fs_lookup_cb cb;
	void *arg;
};

static void dlookup_end(struct dlookup *w, int status, const struct sfsro_entry *e)
{
	w->cb(w->fs, w->arg, status, e);
	free((void *)w->want.p);
	free(w);
}

/* One block: 1 to go on to w->key, 0 when the lookup has ended. */
static int dlookup_block(struct dlookup *w, const struct fblk *b)
{
	struct sfsro_dir d;
	bool top = w->height == UINT32_MAX;

	if (dir_decode(b, w->height, top ? NULL : &w->lo.n, w->has_hi ? &w->hi.n : NULL, &d) < 0) {
		dlookup_end(w, -EIO, NULL);
		return 0;
	}
	/* the last item whose name is <= the one wanted */
	uint32_t lo = 0, hi = d.n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (sfsro_name_cmp(&w->want, first_name(&d, mid)) >= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int r = -ENOENT;
	if (lo > 0 && d.height == 0 && sfsro_name_cmp(&w->want, &d.entries[lo - 1].name) == 0) {
		dlookup_end(w, 0, &d.entries[lo - 1]);
		r = 0;
	} else if (lo > 0 && d.height > 0) {
		w->key = d.children[lo - 1].key;
		w->height = d.height - 1;
		name_set(&w->lo, &d.children[lo - 1].first);
		if (lo < d.n) {
			name_set(&w->hi, &d.children[lo].first);
			w->has_hi = true;
		}
		r = 1;
	}
	sfsro_dir_clear(&d);
	if (r < 0)
		dlookup_end(w, r, NULL);
	return r < 0 ? 0 : r;
}

static void dlookup_step(struct dlookup *w, const struct fblk *got);

static void dlookup_got(void *arg, int status, const struct fblk *b)
{
	struct dlookup *w = arg;

	if (status < 0)
		dlookup_end(w, status == -ECANCELED ? status : -EIO, NULL);
	else
		dlookup_step(w, b);
}

/* Run until a block is missing (then park on its fetch) or the lookup
 * ends. got: the block just fetched for w->key. */
static void dlookup_step(struct dlookup *w, const struct fblk *got)
{
	for (;;) {
		const struct fblk *b = got ? got : fs__blk_peek(w->fs->blocks, &w->key);
		got = NULL;
		if (!b) {
			fs__blk_fetch(w->fs->blocks, &w->key, false, dlookup_got, w);
			return;
		}
		if (dlookup_block(w, b) == 0)
			return;
	}
}

void fs__dir_lookup(cfsfuse_t *fs, const struct cfs_id *dir_key, const char *name,
                    fs_lookup_cb cb, void *arg)
{
	struct dlookup *w = xcalloc(1, sizeof(*w));

	w->fs = fs;
	w->want = (struct cfs_bytes){ (const uint8_t *)xstrdup(name), strlen(name) };
	w->key = *dir_key;
	w->height = UINT32_MAX;
	w->cb = cb;
	w->arg = arg;
	dlookup_step(w, NULL);
}

/*
 * An open directory is read one leaf block at a time, in name order: the
 * handle keeps the path from the top to the current leaf (each index
 * block's key and the child taken) and its own copy of that leaf, so
 * memory per open directory is one leaf whatever the directory's size.
 * The next leaf comes from re-reading the path's index blocks (cached, or
 * fetched again: their keys fix their bytes). Entry j is at offset j + 3
 * (after . and ..); reading on from where the last readdir stopped costs
 * nothing, a seek backwards starts again from the top and skips leaves.
 */
enum { D_START, D_DOWN, D_UP, D_LEAF, D_END };

struct fs_dir {
	uint64_t ino, seq;
	struct cfs_id top;
	struct {
		struct cfs_id key;
		uint32_t i;           /* the child being read */
	} path[SFSRO_HEIGHT_MAX + 1];
	uint32_t depth;
	int state;
	struct cfs_id next;       /* D_DOWN: the block to read, its height and first name */
	uint32_t next_height;
	struct name_buf lo;
	struct name_buf hi[SFSRO_HEIGHT_MAX + 2]; /* by depth: the bound of the block there */
	bool has_hi[SFSRO_HEIGHT_MAX + 2];
	struct name_buf last;     /* the last name of the leaves before */
	bool has_last;
	uint8_t *leaf;            /* D_LEAF: the leaf's bytes, decoded in d */
	struct sfsro_dir d;
	uint64_t base;            /* the directory index of d's first entry */
	int error;                /* sticky */
	bool busy;
};

/* A readdir (or the opendir that loads the first leaf) in progress. */
struct dread {
	cfsfuse_t *fs;
	struct fs_dir *h;
	uint64_t index;           /* the next entry wanted */
	bool opening;
	fs_dir_entry_fn add;
	fs_dir_done_fn done;
	void *arg;
};

static void leaf_drop(struct fs_dir *h)
{
	sfsro_dir_clear(&h->d);
	free(h->leaf);
	h->leaf = NULL;
}

static void dir_rewind(struct fs_dir *h)
{
	leaf_drop(h);
	h->state = D_START;
	h->depth = 0;
	h->base = 0;
	h->has_last = false;
}

static void prefetched(void *arg, int status, const struct fblk *b)
{
}

/* Go down to child i of the index block d (read from key). */
static void take_child(cfsfuse_t *fs, struct fs_dir *h, const struct cfs_id *key, const struct sfsro_dir *d,
                       uint32_t i)
{
	uint32_t p = h->depth;

	h->path[p].key = *key;
	h->path[p].i = i;
	h->depth++;
	h->has_hi[p + 1] = i + 1 < d->n || h->has_hi[p];
	if (i + 1 < d->n)
		name_set(&h->hi[p + 1], &d->children[i + 1].first);
	else if (h->has_hi[p])
		name_set(&h->hi[p + 1], &h->hi[p].n);
	h->next = d->children[i].key;
	h->next_height = d->height - 1;
	name_set(&h->lo, &d->children[i].first);
	h->state = D_DOWN;
	/* the leaf after this one, fetched while this one is listed */
	if (d->height == 1 && i + 1 < d->n && !fs__blk_peek(fs->blocks, &d->children[i + 1].key))
		fs__blk_fetch(fs->blocks, &d->children[i + 1].key, true, prefetched, NULL);
}

/* The block that D_DOWN or D_UP needs. */
static const struct cfs_id *dir_wants(const struct fs_dir *h)
{
	return h->state == D_DOWN ? &h->next : &h->path[h->depth - 1].key;
}

/* One step of the walk to the next leaf, with the block it wants. */
static void dir_block(cfsfuse_t *fs, struct fs_dir *h, const struct fblk *b)
{
	struct sfsro_dir d;
	bool top = h->state == D_DOWN && h->depth == 0;

	if (h->state == D_UP) {
		/* read before, and verified then: only the next child is new */
		if (sfsro_dir_decode(b->p, b->len, &d) < 0 || d.height == 0) {
			char k[9];
			log_error("directory block %s is malformed", cfs_id_short(&b->key, k));
			sfsro_dir_clear(&d);
			h->error = -EIO;
			return;
		}
		uint32_t i = h->path[h->depth - 1].i + 1;
		h->depth--;
		if (i < d.n)
			take_child(fs, h, &b->key, &d, i);
		else if (h->depth == 0)
			h->state = D_END;
		sfsro_dir_clear(&d);
		return;
	}
	uint8_t *copy = xmemdup(b->p, b->len ? b->len : 1);
	struct fblk own = *b;
	own.p = copy;
	const struct cfs_bytes *hi = h->has_hi[h->depth] ? &h->hi[h->depth].n : NULL;
	if ((h->error = dir_decode(&own, top ? UINT32_MAX : h->next_height, top ? NULL : &h->lo.n, hi, &d)) < 0) {
		free(copy);
		return;
	}
	if (d.height > 0) {
		take_child(fs, h, &b->key, &d, 0);
		sfsro_dir_clear(&d);
		free(copy);
		return;
	}
	if (h->has_last && d.n > 0 && sfsro_name_cmp(&d.entries[0].name, &h->last.n) <= 0) {
		char k[9];
		log_error("directory block %s is not where its index puts it (named twice, or out of order)",
		          cfs_id_short(&b->key, k));
		h->error = -EIO;
		sfsro_dir_clear(&d);
		free(copy);
		return;
	}
	h->leaf = copy;
	h->d = d;
	h->state = D_LEAF;
}

/* The current leaf is listed: on to the next. */
static void leaf_done(struct fs_dir *h)
{
	if (h->d.n > 0) {
		name_set(&h->last, &h->d.entries[h->d.n - 1].name);
		h->has_last = true;
	}
	h->base += h->d.n;
	leaf_drop(h);
	h->state = h->depth ? D_UP : D_END;
}

static void dread_end(struct dread *rd, int status)
{
	rd->h->busy = false;
	rd->done(rd->fs, rd->arg, status, rd->opening ? rd->h : NULL);
	free(rd);
}

static void dread_run(struct dread *rd, const struct fblk *got);

static void dread_got(void *arg, int status, const struct fblk *b)
{
	struct dread *rd = arg;

	if (status < 0) {
		char k[9];
		log_error("directory block %s: %s", cfs_id_short(dir_wants(rd->h), k), strerror(-status));
		rd->h->error = status == -ECANCELED ? status : -EIO;
		dread_end(rd, rd->h->error);
		return;
	}
	dread_run(rd, b);
}

/* Hand out entries from rd->index on until add says stop or the directory
 * ends, reading leaves as needed; park on a fetch when a block is missing.
 * got: the block just fetched for what the walk wants. */
static void dread_run(struct dread *rd, const struct fblk *got)
{
	struct fs_dir *h = rd->h;

	for (;;) {
		if (h->error) {
			dread_end(rd, h->error);
			return;
		}
		if (h->state == D_LEAF || h->state == D_END) {
			if (rd->index < h->base) {
				dir_rewind(h);
				continue;
			}
			if (rd->opening || h->state == D_END) {
				dread_end(rd, 0);
				return;
			}
			if (rd->index >= h->base + h->d.n) {
				leaf_done(h);
				continue;
			}
			if (!rd->add(rd->arg, &h->d.entries[rd->index - h->base], rd->index)) {
				dread_end(rd, 0);
				return;
			}
			rd->index++;
			continue;
		}
		if (h->state == D_START) {
			h->next = h->top;
			h->state = D_DOWN;
		}
		const struct fblk *b = got ? got : fs__blk_peek(rd->fs->blocks, dir_wants(h));
		got = NULL;
		if (!b) {
			fs__blk_fetch(rd->fs->blocks, dir_wants(h), false, dread_got, rd);
			return;
		}
		dir_block(rd->fs, h, b);
	}
}

static void dread_start(cfsfuse_t *fs, struct fs_dir *h, uint64_t index, bool opening, fs_dir_entry_fn add,
                        fs_dir_done_fn done, void *arg)
{
	struct dread *rd = xcalloc(1, sizeof(*rd));

	*rd = (struct dread){ fs, h, index, opening, add, done, arg };
	h->busy = true;
	dread_run(rd, NULL);
}

void fs__dir_open(cfsfuse_t *fs, uint64_t ino, const struct cfs_id *top, fs_dir_done_fn done, void *arg)
{
	struct fs_dir *h = xcalloc(1, sizeof(*h));

	h->ino = ino;
	h->seq = fs->root.seq;
	h->top = *top;
	h->state = D_START;
	dread_start(fs, h, 0, true, NULL, done, arg);
}

void fs__dir_read(cfsfuse_t *fs, struct fs_dir *h, uint64_t index, fs_dir_entry_fn add,
                  fs_dir_done_fn done, void *arg)
{
	if (h->busy) { /* the kernel sends one at a time per open directory */
		done(fs, arg, -EBUSY, NULL);
		return;
	}
	dread_start(fs, h, index, false, add, done, arg);
}

uint64_t fs__dir_seq(const struct fs_dir *h)
{
	return h->seq;
}

void fs__dir_free(struct fs_dir *h)
{
	if (!h)
		return;
	leaf_drop(h);
	free(h);
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
