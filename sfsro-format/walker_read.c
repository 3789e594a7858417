/*
 * The volume walker's listings, reads and visits (walker.c has the
 * invariants, the root, lookups and the API): each keeps only what it needs
 * to go on — a listing its leaf and the index blocks above it, a read one
 * slot per data block of its range, a visit the keys met and a window of
 * blocks asked for.
 */
#include "sfsro-format/internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ readdir */

void sfsro__w_rdir_drop(struct rdir *rd)
{
	sfsro_dir_clear(&rd->d);
	free(rd->leaf);
	rd->leaf = NULL;
	for (uint32_t i = 0; i < rd->depth; i++)
		free(rd->path[i].bytes);
	rd->depth = 0;
}

/* Back to the top: the listing starts again. */
void sfsro__w_rdir_rewind(sfsro_walker_t *w)
{
	struct rdir *rd = &w->rd;

	sfsro__w_rdir_drop(rd);
	rd->state = D_DOWN;
	rd->next_height = UINT32_MAX;
	rd->has_hi = false;
	rd->has_last = false;
	rd->has_hint = false;
	rd->base = 0;
	sfsro__w_want_set(&w->one, &rd->top, SFSRO_B_DIR, 0);
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
	sfsro__w_want_set(&w->one, &d->children[i].key, SFSRO_B_DIR, 0);
	/* the leaf after this one, fetched while this one is listed */
	rd->has_hint = d->height == 1 && i + 1 < d->n;
	if (rd->has_hint)
		rd->hint = d->children[i + 1].key;
}

void sfsro__w_rdir_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct rdir *rd = &w->rd;
	bool top = rd->next_height == UINT32_MAX;
	struct sfsro_dir d;

	uint8_t *copy = xmemdup(p, len ? len : 1); /* kept: a leaf's entries, an index's bounds */

	if (sfsro__w_dir_take(w, key, copy, len, rd->next_height, top ? NULL : &rd->lo,
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
		sfsro__w_refuse(w, key, -EPROTO, "directory block",
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
		sfsro__w_name_set(&rd->last, &rd->d.entries[rd->d.n - 1].name);
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
			sfsro__w_fail(w, -EPROTO);
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

int sfsro__w_rdir_step(sfsro_walker_t *w, struct sfsro_step *ret)
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
			return sfsro__w_want_step(&w->one, ret);
		if (rd->pos < rd->base) {
			sfsro__w_rdir_rewind(w);
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

void sfsro__w_inode_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct rdop *r = &w->r;
	struct sfsro_inode ino;
	int st;

	w->one.state = A_NONE;
	if (sfsro_inode_decode(p, len, &ino) < 0) {
		sfsro__w_refuse(w, key, -EPROTO, "inode block", "is malformed");
		return;
	}
	r->size = ino.size;
	r->bsize = ino.bsize;
	r->fanout = ino.fanout;
	if (r->kind == R_INODE) {
		*r->ret_bytes = xmemdup(p, len ? len : 1);
		*r->ret_len = len;
		if (sfsro_inode_decode(*r->ret_bytes, len, r->ret_ino) < 0) /* decoded just now */
			sfsro__w_fail(w, -EPROTO);
		w->done = true;
		return;
	}
	if ((st = read_slots(w, &ino)) < 0) {
		sfsro__w_fail(w, st);
	} else if (st > 0) {
		w->done = true;
	} else if (r->kind == R_LOCATE && r->slots[0].h == 0) { /* the inode names data blocks */
		*r->ret_key = r->slots[0].key;
		w->done = true;
	}
}

/* Every slot waiting for key moves on with its bytes. */
int sfsro__w_read_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
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
			sfsro__w_refuse(w, key, st, "block", x->h ? "of a file is not the indirect block its parent implies"
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
int sfsro__w_read_step(sfsro_walker_t *w, struct sfsro_step *ret)
{
	struct rdop *r = &w->r;
	bool waiting = false;

	if (w->one.state != A_NONE)
		return sfsro__w_want_step(&w->one, ret);
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
int sfsro__w_visit_step(sfsro_walker_t *w, struct sfsro_step *ret)
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

int sfsro__w_visit_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct visit *v = &w->v;

	for (int i = 0; i < VISIT_WINDOW; i++) {
		if (v->slot[i].state != A_ASKED || !cfs_id_eq(&v->slot[i].it.key, key))
			continue;
		if (sfsro_blockset_expand(&v->set, &v->slot[i].it, p, len) < 0)
			sfsro__w_refuse(w, key, -EPROTO, "block", "does not decode as what its parent names");
		v->slot[i].state = A_FED;
		return 1;
	}
	return 0;
}

