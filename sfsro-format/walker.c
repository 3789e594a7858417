/*
 * The volume walker: every read of a volume as one resumable state machine
 * that does no I/O (after casync's ca_sync_step). sfsro.h has the
 * contract; this paragraph has the invariants.
 *
 * CFS 3 / SFSRO: a volume is a tree of content-hash blocks under a signed
 * root, so a reader that checks each block against the key its parent
 * gives it — and the root against the publisher's key — needs to trust no
 * server. The walker does that check on every block it is fed, and then
 * checks what the hash cannot: that a block is what its parent says it
 * is. A directory block sits at the height and in the key range its index
 * item gives it (a child's first name is its item's name, its last below
 * the next item's), an indirect block at the height its parent implies.
 * Honest volumes always agree (sfsro_build_dir, sfsro_build_file); a
 * hostile index that names one child a million times does not, and is
 * -EPROTO at the first repeat, so no walk multiplies a few blocks into
 * millions of entries. Heights only go down, so no descent is longer than
 * SFSRO_HEIGHT_MAX + 1 blocks; a visit keeps every key it met, so it meets
 * each block once whatever points at it (a cycle, which would need a hash
 * fixed point or a lying cache, included).
 *
 * Each operation keeps what it needs to go on and nothing else: a lookup
 * one block's range; a listing its leaf and the index blocks above it; a
 * read one slot per data block of its range (each a descent, fed in any
 * order, one fetch per distinct key); a visit the set of keys met and a
 * small window of blocks asked for.
 */
#include "sfsro-format/internal.h"

#include <stdlib.h>
#include <string.h>

#define VISIT_WINDOW 16           /* structural blocks asked for at once by a visit */
#define PATH_BYTES_MAX 4096       /* a path to resolve (PATH_MAX) */

enum op { OP_NONE, OP_ROOT, OP_LOOKUP, OP_READDIR, OP_READ, OP_VISIT };
/* A block wanted: not yet asked for, asked for (waiting), fed (a visit's,
 * to report). */
enum ask { A_NONE, A_ASK, A_ASKED, A_FED };
enum read_kind { R_READ, R_INODE, R_LOCATE };
enum dstate { D_DOWN, D_LEAF, D_END };

/* A name kept beyond the block it came from. */
struct name_buf {
	uint8_t b[SFSRO_NAME_MAX];
	struct cfs_bytes n;
};

struct want {
	struct cfs_id key;
	uint8_t btype, height, state;
};

struct lookup {
	struct sfsro_node *ret;
	char *path;               /* a path op: its own copy; NULL for one name */
	const char *at;           /* the components still to resolve */
	struct name_buf name;     /* the one looked for in this directory */
	uint32_t height;          /* of the block wanted (UINT32_MAX: a top) */
	struct name_buf lo, hi;   /* its range (a top has none) */
	bool has_hi;
};

/* An index block on the way down to the leaf being listed. */
struct rlevel {
	uint8_t *bytes;           /* kept: its children's names bound the blocks below */
	size_t len;
	uint32_t i;               /* the child being read */
	struct cfs_bytes hi;      /* the block's own upper bound ... */
	bool has_hi;              /* ... if any */
};

/* An open listing: the index blocks from the top to the current leaf,
 * each with the child being read, and that leaf. */
struct rdir {
	struct cfs_id top;
	enum dstate state;
	struct rlevel path[SFSRO_HEIGHT_MAX + 1];
	uint32_t depth;
	uint32_t next_height;     /* D_DOWN: the block wanted's height (UINT32_MAX: the top) */
	struct cfs_bytes lo, hi;  /* and its range, borrowed from path[] */
	bool has_hi;
	struct name_buf last;     /* the last name of the leaves before */
	bool has_last;
	struct cfs_id hint;       /* the leaf after the one wanted */
	bool has_hint;
	uint8_t *leaf;            /* D_LEAF: its bytes, decoded in d */
	struct sfsro_dir d;
	uint64_t base;            /* the index of d's first entry */
	uint64_t pos;             /* the next entry to hand out */
};

/* The descent to one data block. */
struct rslot {
	struct cfs_id key;        /* the block to read next ... */
	uint32_t h;               /* ... its height (0: data) */
	uint8_t state;
	uint64_t b;               /* the data block's number in the file */
	uint64_t span;            /* data blocks under one key at height h */
	uint64_t rem;             /* b's position under key */
};

struct rdop {
	enum read_kind kind;
	uint64_t off;
	uint8_t *buf;
	size_t len;
	size_t *ret_n;
	struct sfsro_inode *ret_ino;
	uint8_t **ret_bytes;
	size_t *ret_len;
	struct cfs_id *ret_key;
	uint64_t size;            /* the inode's, once fed */
	uint32_t bsize, fanout;
	struct rslot *slots;
	uint32_t nslots, left;    /* slots, and those not done */
};

struct visit {
	struct sfsro_blockset set;
	struct {
		struct sfsro_bitem it;
		uint8_t state;
	} slot[VISIT_WINDOW];
};

struct sfsro_walker {
	enum op op;
	int error;                /* sticky */
	bool done;
	struct want one;          /* the one block a root, lookup, listing or read waits for */
	struct {
		struct cfs_pubkey pk;
		uint64_t min_seq, now;
		struct sfsro_root *ret;
	} root;
	struct lookup lk;
	struct rdir rd;
	struct rdop r;
	struct visit v;
};

/* ------------------------------------------------------------ common */

static void name_set(struct name_buf *nb, const struct cfs_bytes *from)
{
	memcpy(nb->b, from->p, from->len);
	nb->n = (struct cfs_bytes){ nb->b, from->len };
}

static void node_copy(struct sfsro_node *n, const struct sfsro_entry *e)
{
	n->e = *e;
	memcpy(n->name, e->name.p, e->name.len);
	n->name[e->name.len] = 0;
	n->e.name.p = n->name;
	memcpy(n->target, e->target.p, e->target.len);
	n->target[e->target.len] = 0;
	n->e.target.p = n->target;
}

static const struct cfs_bytes *first_name(const struct sfsro_dir *d, uint32_t i)
{
	return d->height ? &d->children[i].first : &d->entries[i].name;
}

/* The walk is over with r (the first error stays). */
static void fail(sfsro_walker_t *w, int r)
{
	if (!w->error)
		w->error = r;
}

/* Log why block key is refused, and end the walk with r. */
static void refuse(sfsro_walker_t *w, const struct cfs_id *key, int r, const char *what, const char *why)
{
	char h[9];
	log_warn("%s %s %s", what, cfs_id_short(key, h), why);
	fail(w, r);
}

static void want_set(struct want *x, const struct cfs_id *key, uint8_t btype, uint8_t height)
{
	*x = (struct want){ *key, btype, height, A_ASK };
}

/* The step of an operation waiting for the one block: ask once, then wait. */
static int want_step(struct want *x, struct sfsro_step *ret)
{
	if (x->state != A_ASK)
		return SFSRO_WALK_WAIT;
	x->state = A_ASKED;
	ret->key = x->key;
	ret->btype = x->btype;
	ret->height = x->height;
	return SFSRO_WALK_NEED;
}

static bool want_is(const struct want *x, const struct cfs_id *key)
{
	return x->state == A_ASKED && cfs_id_eq(&x->key, key);
}

/* Decode the directory block key of height want_height (UINT32_MAX: any)
 * whose first name is lo (NULL: a top) and every name below hi (NULL:
 * unbounded); refuse it (and 0 entries in d) if it is not that. */
static int dir_take(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len,
                    uint32_t want_height, const struct cfs_bytes *lo, const struct cfs_bytes *hi,
                    struct sfsro_dir *d)
{
	if (sfsro_dir_decode(p, len, d) < 0) {
		refuse(w, key, -EPROTO, "directory block", "is malformed");
		return -EPROTO;
	}
	if (want_height != UINT32_MAX && d->height != want_height) {
		sfsro_dir_clear(d);
		refuse(w, key, -EPROTO, "directory block", "is at the wrong height");
		return -EPROTO;
	}
	if (!sfsro_dir_in_range(d, lo, hi)) {
		sfsro_dir_clear(d);
		refuse(w, key, -EPROTO, "directory block",
		       "is not where its index puts it (named twice, or out of order)");
		return -EPROTO;
	}
	return 0;
}

/* ------------------------------------------------------------ root */

static void root_fed(sfsro_walker_t *w, const uint8_t *p, size_t len)
{
	int r = sfsro_root_decode(p, len, w->root.ret);

	if (r == 0) /* CFS 5.5: the root is accepted only signed by the volume's key, and fresh */
		r = sfsro_root_check(w->root.ret, &w->root.pk, w->root.min_seq, w->root.now);
	if (r < 0)
		fail(w, r);
	else
		w->done = true;
}

/* ------------------------------------------------------------ lookup */

/* Take the next component of a path into lk->name: false when none is
 * left. */
static bool next_component(sfsro_walker_t *w)
{
	struct lookup *lk = &w->lk;

	while (*lk->at == '/')
		lk->at++;
	if (!*lk->at)
		return false;
	size_t n = strcspn(lk->at, "/");
	if (n > SFSRO_NAME_MAX) {
		fail(w, -ENAMETOOLONG);
		return true;
	}
	memcpy(lk->name.b, lk->at, n);
	lk->name.n = (struct cfs_bytes){ lk->name.b, n };
	lk->at += n;
	return true;
}

/* Look for lk->name in the directory whose top block is key. */
static void lookup_dir(sfsro_walker_t *w, const struct cfs_id *key)
{
	w->lk.height = UINT32_MAX;
	w->lk.has_hi = false;
	want_set(&w->one, key, SFSRO_B_DIR, 0);
}

/* The entry named is found: done, or on to the next component. */
static void lookup_found(sfsro_walker_t *w, const struct sfsro_entry *e)
{
	struct lookup *lk = &w->lk;

	node_copy(lk->ret, e);
	if (!lk->path || !next_component(w)) {
		w->done = true;
		return;
	}
	if (e->type != SFSRO_T_DIR)
		fail(w, -ENOTDIR);
	else
		lookup_dir(w, &e->key);
}

/* CFS 3 / SFSRO: one block per level of the directory's B-tree, the child
 * whose first name is the last not above the name wanted. */
static void lookup_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct lookup *lk = &w->lk;
	bool top = lk->height == UINT32_MAX;
	struct sfsro_dir d;

	if (dir_take(w, key, p, len, lk->height, top ? NULL : &lk->lo.n, lk->has_hi ? &lk->hi.n : NULL,
	             &d) < 0)
		return;
	uint32_t at = 0, end = d.n;
	while (at < end) { /* binary search: the first item above the name */
		uint32_t mid = at + (end - at) / 2;
		if (sfsro_name_cmp(&lk->name.n, first_name(&d, mid)) >= 0)
			at = mid + 1;
		else
			end = mid;
	}
	if (at == 0 || (d.height == 0 && sfsro_name_cmp(&lk->name.n, &d.entries[at - 1].name) != 0)) {
		fail(w, -ENOENT);
	} else if (d.height == 0) {
		lookup_found(w, &d.entries[at - 1]);
	} else {
		want_set(&w->one, &d.children[at - 1].key, SFSRO_B_DIR, 0);
		lk->height = d.height - 1;
		name_set(&lk->lo, &d.children[at - 1].first);
		lk->has_hi = at < d.n;
		if (lk->has_hi)
			name_set(&lk->hi, &d.children[at].first);
	}
	sfsro_dir_clear(&d);
}

/* ------------------------------------------------------------ readdir */

static void rdir_drop(struct rdir *rd)
{
	sfsro_dir_clear(&rd->d);
	free(rd->leaf);
	rd->leaf = NULL;
	for (uint32_t i = 0; i < rd->depth; i++)
		free(rd->path[i].bytes);
	rd->depth = 0;
}

/* Back to the top: the listing starts again. */
static void rdir_rewind(sfsro_walker_t *w)
{
	struct rdir *rd = &w->rd;

	rdir_drop(rd);
	rd->state = D_DOWN;
	rd->next_height = UINT32_MAX;
	rd->has_hi = false;
	rd->has_last = false;
	rd->has_hint = false;
	rd->base = 0;
	want_set(&w->one, &rd->top, SFSRO_B_DIR, 0);
}

/* CFS 3 / SFSRO: a directory is a B-tree of blocks, listed leaf by leaf
 * in name order. Go down to child i of the index block at the bottom of
 * the path (d, its decoding): its range is bounded by its item and the
 * next one, or by the index block's own bound after the last item. */
static void rdir_child(sfsro_walker_t *w, const struct sfsro_dir *d, uint32_t i)
{
	struct rdir *rd = &w->rd;
	struct rlevel *up = &rd->path[rd->depth - 1];

	up->i = i;
	rd->next_height = d->height - 1;
	rd->lo = d->children[i].first;
	rd->has_hi = i + 1 < d->n || up->has_hi;
	rd->hi = i + 1 < d->n ? d->children[i + 1].first : up->hi;
	rd->state = D_DOWN;
	want_set(&w->one, &d->children[i].key, SFSRO_B_DIR, 0);
	/* the leaf after this one, fetched while this one is listed */
	rd->has_hint = d->height == 1 && i + 1 < d->n;
	if (rd->has_hint)
		rd->hint = d->children[i + 1].key;
}

static void rdir_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct rdir *rd = &w->rd;
	bool top = rd->next_height == UINT32_MAX;
	struct sfsro_dir d;

	uint8_t *copy = xmemdup(p, len ? len : 1); /* kept: a leaf's entries, an index's bounds */

	if (dir_take(w, key, copy, len, rd->next_height, top ? NULL : &rd->lo,
	             rd->has_hi ? &rd->hi : NULL, &d) < 0) {
		free(copy);
		return;
	}
	if (d.height > 0) {
		struct rlevel *at = &rd->path[rd->depth++];
		at->bytes = copy;
		at->len = len;
		at->has_hi = rd->has_hi;
		at->hi = rd->hi;
		rdir_child(w, &d, 0);
		sfsro_dir_clear(&d);
		return;
	}
	if (rd->has_last && d.n > 0 && sfsro_name_cmp(&d.entries[0].name, &rd->last.n) <= 0) {
		sfsro_dir_clear(&d);
		free(copy);
		refuse(w, key, -EPROTO, "directory block",
		       "is not where its index puts it (named twice, or out of order)");
		return;
	}
	rd->leaf = copy;
	rd->d = d;
	rd->state = D_LEAF;
}

/* The current leaf is listed: on to the next child of the nearest index
 * block above that has one, or the end. The index blocks were verified
 * when they were fed, and are kept: no I/O. */
static void rdir_leaf_done(sfsro_walker_t *w)
{
	struct rdir *rd = &w->rd;

	if (rd->d.n > 0) {
		name_set(&rd->last, &rd->d.entries[rd->d.n - 1].name);
		rd->has_last = true;
	}
	rd->base += rd->d.n;
	sfsro_dir_clear(&rd->d);
	free(rd->leaf);
	rd->leaf = NULL;
	while (rd->depth > 0) {
		struct rlevel *up = &rd->path[rd->depth - 1];
		struct sfsro_dir d;
		if (sfsro_dir_decode(up->bytes, up->len, &d) < 0) {
			fail(w, -EPROTO);
			return;
		}
		if (up->i + 1 < d.n) {
			rdir_child(w, &d, up->i + 1);
			sfsro_dir_clear(&d);
			return;
		}
		sfsro_dir_clear(&d);
		free(up->bytes);
		rd->depth--;
	}
	rd->state = D_END;
}

static int rdir_step(sfsro_walker_t *w, struct sfsro_step *ret)
{
	struct rdir *rd = &w->rd;

	for (;;) {
		if (w->error)
			return w->error;
		if (rd->has_hint) {
			rd->has_hint = false;
			ret->key = rd->hint;
			ret->btype = SFSRO_B_DIR;
			return SFSRO_WALK_HINT;
		}
		if (rd->state == D_DOWN)
			return want_step(&w->one, ret);
		if (rd->pos < rd->base) {
			rdir_rewind(w);
			continue;
		}
		if (rd->state == D_END)
			return SFSRO_WALK_DONE;
		if (rd->pos >= rd->base + rd->d.n) {
			rdir_leaf_done(w);
			continue;
		}
		ret->entry = &rd->d.entries[rd->pos - rd->base];
		ret->index = rd->pos++;
		return SFSRO_WALK_ENTRY;
	}
}

/* ------------------------------------------------------------ read */

/* Start slot x's descent to data block b from the inode's keys. */
static int rslot_init(struct rslot *x, const struct sfsro_inode *ino, uint64_t b)
{
	uint64_t span = 1;

	for (uint32_t h = 0; h < ino->height; h++) {
		if (span > UINT64_MAX / ino->fanout)
			return -EPROTO;
		span *= ino->fanout;
	}
	if (b / span >= ino->nkeys)
		return -EPROTO;
	*x = (struct rslot){ .key = ino->keys[b / span], .h = ino->height, .state = A_ASK, .b = b,
	                     .span = span, .rem = b % span };
	return 0;
}

/* CFS 3: go one level down from the indirect block x was waiting for. */
static int rslot_down(struct rslot *x, uint32_t fanout, const uint8_t *p, size_t len)
{
	const struct cfs_id *keys;
	uint32_t got_h, n;

	if (sfsro_indirect_decode(p, len, &got_h, &keys, &n) < 0 || got_h != x->h)
		return -EPROTO; /* not an indirect block, or not at the height its parent implies */
	x->span /= fanout;
	if (x->rem / x->span >= n)
		return -EPROTO;
	x->key = keys[x->rem / x->span];
	x->rem %= x->span;
	x->h--;
	x->state = A_ASK;
	return 0;
}

/* Copy what the read wants of data block x->b. */
static int rslot_copy(struct rdop *r, struct rslot *x, const uint8_t *p, size_t len)
{
	uint64_t start = x->b * r->bsize;
	uint64_t want = r->size - start < r->bsize ? r->size - start : r->bsize;
	struct cfs_bytes data;

	if (sfsro_data_decode(p, len, &data) < 0 || data.len != want)
		return -EPROTO; /* every block but the last is full */
	uint64_t from = r->off > start ? r->off : start;
	uint64_t to = r->off + r->len < start + want ? r->off + r->len : start + want;
	memcpy(r->buf + (from - r->off), data.p + (from - start), (size_t)(to - from));
	x->state = A_NONE;
	r->left--;
	return 0;
}

/* The slots of a read: one per data block of the range. */
static int read_slots(sfsro_walker_t *w, const struct sfsro_inode *ino)
{
	struct rdop *r = &w->r;
	uint64_t first, last;

	if (r->kind == R_LOCATE) {
		first = last = r->off;
	} else {
		if (r->off >= ino->size || r->len == 0) {
			*r->ret_n = 0;
			return 1;
		}
		if (r->len > ino->size - r->off)
			r->len = (size_t)(ino->size - r->off);
		*r->ret_n = r->len;
		if (ino->size <= SFSRO_INLINE_MAX) {
			memcpy(r->buf, ino->inline_data.p + r->off, r->len);
			return 1;
		}
		first = r->off / ino->bsize;
		last = (r->off + r->len - 1) / ino->bsize;
	}
	if (ino->nkeys == 0)
		return -EINVAL; /* locate in an inline file */
	r->nslots = r->left = (uint32_t)(last - first + 1);
	r->slots = xcalloc(r->nslots, sizeof(*r->slots));
	for (uint32_t i = 0; i < r->nslots; i++)
		if (rslot_init(&r->slots[i], ino, first + i) < 0)
			return -EPROTO;
	return 0;
}

static void inode_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct rdop *r = &w->r;
	struct sfsro_inode ino;
	int st;

	w->one.state = A_NONE;
	if (sfsro_inode_decode(p, len, &ino) < 0) {
		refuse(w, key, -EPROTO, "inode block", "is malformed");
		return;
	}
	r->size = ino.size;
	r->bsize = ino.bsize;
	r->fanout = ino.fanout;
	if (r->kind == R_INODE) {
		*r->ret_bytes = xmemdup(p, len ? len : 1);
		*r->ret_len = len;
		if (sfsro_inode_decode(*r->ret_bytes, len, r->ret_ino) < 0) /* decoded just now */
			fail(w, -EPROTO);
		w->done = true;
		return;
	}
	if ((st = read_slots(w, &ino)) < 0) {
		fail(w, st);
	} else if (st > 0) {
		w->done = true;
	} else if (r->kind == R_LOCATE && r->slots[0].h == 0) { /* the inode names data blocks */
		*r->ret_key = r->slots[0].key;
		w->done = true;
	}
}

/* Every slot waiting for key moves on with its bytes. */
static int read_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct rdop *r = &w->r;
	int taken = 0;

	for (uint32_t i = 0; i < r->nslots && !w->error; i++) {
		struct rslot *x = &r->slots[i];
		if (x->state != A_ASKED || !cfs_id_eq(&x->key, key))
			continue;
		taken = 1;
		int st = x->h ? rslot_down(x, r->fanout, p, len) : rslot_copy(r, x, p, len);
		if (st < 0)
			refuse(w, key, st, "block", x->h ? "of a file is not the indirect block its parent implies"
			                                 : "of a file is not a data block of the right size");
		else if (r->kind == R_LOCATE && x->h == 0) {
			*r->ret_key = x->key;
			w->done = true;
		}
	}
	return taken;
}

/* Ask for the next block a slot needs — once per key: slots that need one
 * already asked for wait for the same feed. */
static int read_step(sfsro_walker_t *w, struct sfsro_step *ret)
{
	struct rdop *r = &w->r;
	bool waiting = false;

	if (w->one.state != A_NONE)
		return want_step(&w->one, ret);
	for (uint32_t i = 0; i < r->nslots; i++) {
		struct rslot *x = &r->slots[i];
		if (x->state == A_ASK) {
			x->state = A_ASKED;
			bool asked = false;
			for (uint32_t j = 0; j < r->nslots && !asked; j++)
				asked = j != i && r->slots[j].state == A_ASKED && cfs_id_eq(&r->slots[j].key, &x->key);
			if (!asked) {
				ret->key = x->key;
				ret->btype = x->h ? SFSRO_B_INDIRECT : SFSRO_B_DATA;
				ret->height = (uint8_t)x->h;
				return SFSRO_WALK_NEED;
			}
		}
		waiting |= x->state == A_ASKED;
	}
	if (waiting)
		return SFSRO_WALK_WAIT;
	return SFSRO_WALK_DONE; /* every slot copied its block */
}

/* ------------------------------------------------------------ visit */

/* CFS 5.3: a root's lease covers every block it references, so a refresh
 * (and fsck --replicas) needs each of them once. Blocks met are reported
 * once their bytes were verified and expanded (a structural block), or
 * when met (a data block: named, never fetched). Up to VISIT_WINDOW
 * structural blocks are asked for at once. */
static int visit_step(sfsro_walker_t *w, struct sfsro_step *ret)
{
	struct visit *v = &w->v;
	int free_slot = -1;
	bool waiting = false;

	for (int i = 0; i < VISIT_WINDOW; i++) {
		if (v->slot[i].state == A_FED) {
			v->slot[i].state = A_NONE;
			ret->key = v->slot[i].it.key;
			ret->btype = v->slot[i].it.btype;
			ret->height = v->slot[i].it.height;
			return SFSRO_WALK_BLOCK;
		}
		if (v->slot[i].state == A_NONE && free_slot < 0)
			free_slot = i;
		waiting |= v->slot[i].state == A_ASKED;
	}
	struct sfsro_bitem it;
	if (free_slot < 0)
		return SFSRO_WALK_WAIT;
	if (!sfsro_blockset_pop(&v->set, &it))
		return waiting ? SFSRO_WALK_WAIT : SFSRO_WALK_DONE;
	ret->key = it.key;
	ret->btype = it.btype;
	ret->height = it.height;
	if (it.btype == SFSRO_B_DATA)
		return SFSRO_WALK_BLOCK;
	v->slot[free_slot].it = it;
	v->slot[free_slot].state = A_ASKED;
	return SFSRO_WALK_NEED;
}

static int visit_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct visit *v = &w->v;

	for (int i = 0; i < VISIT_WINDOW; i++) {
		if (v->slot[i].state != A_ASKED || !cfs_id_eq(&v->slot[i].it.key, key))
			continue;
		if (sfsro_blockset_expand(&v->set, &v->slot[i].it, p, len) < 0)
			refuse(w, key, -EPROTO, "block", "does not decode as what its parent names");
		v->slot[i].state = A_FED;
		return 1;
	}
	return 0;
}

/* ------------------------------------------------------------ the API */

sfsro_walker_t *sfsro_walker_new(void)
{
	return xcalloc(1, sizeof(sfsro_walker_t));
}

/* Drop the operation under way, and what it holds. */
static void reset(sfsro_walker_t *w, enum op op)
{
	free(w->lk.path);
	rdir_drop(&w->rd);
	free(w->r.slots);
	sfsro_blockset_free(&w->v.set);
	memset(w, 0, sizeof(*w));
	w->op = op;
}

void sfsro_walker_free(sfsro_walker_t *w)
{
	if (!w)
		return;
	reset(w, OP_NONE);
	free(w);
}

void sfsro_walker_root(sfsro_walker_t *w, const struct cfs_pubkey *pk, uint64_t min_seq,
                       uint64_t now, struct sfsro_root *ret)
{
	struct cfs_id key;

	reset(w, OP_ROOT);
	w->root.pk = *pk;
	w->root.min_seq = min_seq;
	w->root.now = now;
	w->root.ret = ret;
	sfsro_root_key(pk, &key);
	want_set(&w->one, &key, SFSRO_B_ROOT, 0);
}

void sfsro_walker_lookup(sfsro_walker_t *w, const struct cfs_id *dir_key, const uint8_t *name,
                         size_t len, struct sfsro_node *ret)
{
	reset(w, OP_LOOKUP);
	w->lk.ret = ret;
	if (len == 0 || len > SFSRO_NAME_MAX) {
		fail(w, len ? -ENAMETOOLONG : -ENOENT);
		return;
	}
	memcpy(w->lk.name.b, name, len);
	w->lk.name.n = (struct cfs_bytes){ w->lk.name.b, len };
	lookup_dir(w, dir_key);
}

void sfsro_walker_path(sfsro_walker_t *w, const struct sfsro_root *root, const char *path,
                       struct sfsro_node *ret)
{
	reset(w, OP_LOOKUP);
	w->lk.ret = ret;
	sfsro_walk_rootnode(root, ret);
	if (strlen(path) >= PATH_BYTES_MAX) {
		fail(w, -ENAMETOOLONG);
		return;
	}
	w->lk.path = xstrdup(path);
	w->lk.at = w->lk.path;
	if (!next_component(w))
		w->done = true;
	else
		lookup_dir(w, &root->root_dir);
}

void sfsro_walker_readdir(sfsro_walker_t *w, const struct cfs_id *dir_key)
{
	reset(w, OP_READDIR);
	w->rd.top = *dir_key;
	rdir_rewind(w);
}

void sfsro_walker_seek(sfsro_walker_t *w, uint64_t index)
{
	w->rd.pos = index;
}

void sfsro_walker_read(sfsro_walker_t *w, const struct cfs_id *ino_key, uint64_t off, uint8_t *buf,
                       size_t len, size_t *ret_n)
{
	reset(w, OP_READ);
	w->r = (struct rdop){ .kind = R_READ, .off = off, .buf = buf, .len = len, .ret_n = ret_n };
	*ret_n = 0;
	want_set(&w->one, ino_key, SFSRO_B_INODE, 0);
}

void sfsro_walker_inode(sfsro_walker_t *w, const struct cfs_id *ino_key, struct sfsro_inode *ret,
                        uint8_t **ret_bytes, size_t *ret_len)
{
	reset(w, OP_READ);
	w->r = (struct rdop){ .kind = R_INODE, .ret_ino = ret, .ret_bytes = ret_bytes, .ret_len = ret_len };
	*ret_bytes = NULL;
	*ret_len = 0;
	want_set(&w->one, ino_key, SFSRO_B_INODE, 0);
}

void sfsro_walker_locate(sfsro_walker_t *w, const struct cfs_id *ino_key, uint64_t b,
                         struct cfs_id *ret)
{
	reset(w, OP_READ);
	w->r = (struct rdop){ .kind = R_LOCATE, .off = b, .ret_key = ret };
	want_set(&w->one, ino_key, SFSRO_B_INODE, 0);
}

void sfsro_walker_visit(sfsro_walker_t *w, const struct cfs_id *top)
{
	reset(w, OP_VISIT);
	sfsro_blockset_push(&w->v.set, top, SFSRO_B_DIR, 0);
}

int sfsro_walker_step(sfsro_walker_t *w, struct sfsro_step *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (w->error)
		return w->error;
	if (w->done)
		return SFSRO_WALK_DONE;
	switch (w->op) {
	case OP_ROOT:
	case OP_LOOKUP: return want_step(&w->one, ret);
	case OP_READDIR: return rdir_step(w, ret);
	case OP_READ: return read_step(w, ret);
	case OP_VISIT: return visit_step(w, ret);
	default: return -EINVAL;
	}
}

/* Which operation waits for key: 0 none, 1 the one block, 2 a slot. */
static int wants(const sfsro_walker_t *w, const struct cfs_id *key)
{
	if (want_is(&w->one, key))
		return 1;
	if (w->op == OP_READ)
		for (uint32_t i = 0; i < w->r.nslots; i++)
			if (w->r.slots[i].state == A_ASKED && cfs_id_eq(&w->r.slots[i].key, key))
				return 2;
	if (w->op == OP_VISIT)
		for (int i = 0; i < VISIT_WINDOW; i++)
			if (w->v.slot[i].state == A_ASKED && cfs_id_eq(&w->v.slot[i].it.key, key))
				return 2;
	return 0;
}

int sfsro_walker_feed(sfsro_walker_t *w, const struct cfs_id *key, int status, const uint8_t *p,
                      size_t len, unsigned flags)
{
	int which = w->done ? 0 : wants(w, key);

	if (!which)
		return -ENOENT;
	if (w->error)
		return 0; /* the walk is over: late answers change nothing */
	if (status < 0) {
		fail(w, status);
		return 0;
	}
	if (w->op == OP_ROOT) { /* signed, not hashed: its key names the volume */
		w->one.state = A_NONE;
		root_fed(w, p, len);
		return 0;
	}
	if (!(flags & SFSRO_FEED_VERIFIED) && sfsro_verify_hash(key, p, len) < 0) {
		refuse(w, key, -EBADMSG, "block", "does not match its key");
		return 0;
	}
	if (which == 1) {
		w->one.state = A_NONE;
		if (w->op == OP_LOOKUP)
			lookup_fed(w, key, p, len);
		else if (w->op == OP_READDIR)
			rdir_fed(w, key, p, len);
		else
			inode_fed(w, key, p, len);
	} else if (w->op == OP_READ) {
		(void)read_fed(w, key, p, len);
	} else {
		(void)visit_fed(w, key, p, len);
	}
	return 0;
}
