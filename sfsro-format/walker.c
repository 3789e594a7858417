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

/* ------------------------------------------------------------ common */

void sfsro__w_name_set(struct name_buf *nb, const struct cfs_bytes *from)
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
void sfsro__w_fail(sfsro_walker_t *w, int r)
{
	if (!w->error)
		w->error = r;
}

/* Log why block key is refused, and end the walk with r. */
void sfsro__w_refuse(sfsro_walker_t *w, const struct cfs_id *key, int r, const char *what, const char *why)
{
	char h[9];
	log_warn("%s %s %s", what, cfs_id_short(key, h), why);
	sfsro__w_fail(w, r);
}

void sfsro__w_want_set(struct want *x, const struct cfs_id *key, uint8_t btype, uint8_t height)
{
	*x = (struct want){ *key, btype, height, A_ASK };
}

/* The step of an operation waiting for the one block: ask once, then wait. */
int sfsro__w_want_step(struct want *x, struct sfsro_step *ret)
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
int sfsro__w_dir_take(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len,
                    uint32_t want_height, const struct cfs_bytes *lo, const struct cfs_bytes *hi,
                    struct sfsro_dir *d)
{
	if (sfsro_dir_decode(p, len, d) < 0) {
		sfsro__w_refuse(w, key, -EPROTO, "directory block", "is malformed");
		return -EPROTO;
	}
	if (want_height != UINT32_MAX && d->height != want_height) {
		sfsro_dir_clear(d);
		sfsro__w_refuse(w, key, -EPROTO, "directory block", "is at the wrong height");
		return -EPROTO;
	}
	if (!sfsro_dir_in_range(d, lo, hi)) {
		sfsro_dir_clear(d);
		sfsro__w_refuse(w, key, -EPROTO, "directory block",
		       "is not where its index puts it (named twice, or out of order)");
		return -EPROTO;
	}
	return 0;
}

/* ------------------------------------------------------------ root */

static void root_fed(sfsro_walker_t *w, const uint8_t *p, size_t len)
{
	int r = sfsro_root_decode(p, len, w->root.ret);

	if (r == 0 && w->root.version) /* asked for by number: that one, of that volume */
		r = sfsro_root_check(w->root.ret, &w->root.pk, 0, 0) < 0 ? -EKEYREJECTED
		    : w->root.ret->seq != w->root.version ? -EBADMSG : 0;
	else if (r == 0) /* CFS 5.5: the root is accepted only signed by the volume's key, and fresh */
		r = sfsro_root_check(w->root.ret, &w->root.pk, w->root.min_seq, w->root.now);
	if (r < 0)
		sfsro__w_fail(w, r);
	else
		w->done = true;
}

/* ------------------------------------------------------------ lookup */

/* Take the next component of a path into lk->name: false when none is
 * left. */
static bool next_component(sfsro_walker_t *w)
{
	struct sfsro__lookup *lk = &w->lk;

	while (*lk->at == '/')
		lk->at++;
	if (!*lk->at)
		return false;
	size_t n = strcspn(lk->at, "/");
	if (n > SFSRO_NAME_MAX) {
		sfsro__w_fail(w, -ENAMETOOLONG);
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
	sfsro__w_want_set(&w->one, key, SFSRO_B_DIR, 0);
}

/* The entry named is found: done, or on to the next component. */
static void lookup_found(sfsro_walker_t *w, const struct sfsro_entry *e)
{
	struct sfsro__lookup *lk = &w->lk;

	node_copy(lk->ret, e);
	if (!lk->path || !next_component(w)) {
		w->done = true;
		return;
	}
	if (e->type != SFSRO_T_DIR)
		sfsro__w_fail(w, -ENOTDIR);
	else
		lookup_dir(w, &e->key);
}

/* CFS 3 / SFSRO: one block per level of the directory's B-tree, the child
 * whose first name is the last not above the name wanted. */
static void lookup_fed(sfsro_walker_t *w, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	struct sfsro__lookup *lk = &w->lk;
	bool top = lk->height == UINT32_MAX;
	struct sfsro_dir d;

	if (sfsro__w_dir_take(w, key, p, len, lk->height, top ? NULL : &lk->lo.n, lk->has_hi ? &lk->hi.n : NULL,
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
		sfsro__w_fail(w, -ENOENT);
	} else if (d.height == 0) {
		lookup_found(w, &d.entries[at - 1]);
	} else {
		sfsro__w_want_set(&w->one, &d.children[at - 1].key, SFSRO_B_DIR, 0);
		lk->height = d.height - 1;
		sfsro__w_name_set(&lk->lo, &d.children[at - 1].first);
		lk->has_hi = at < d.n;
		if (lk->has_hi)
			sfsro__w_name_set(&lk->hi, &d.children[at].first);
	}
	sfsro_dir_clear(&d);
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
	sfsro__w_rdir_drop(&w->rd);
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
	w->root.version = 0;
	sfsro_root_key(pk, &key);
	sfsro__w_want_set(&w->one, &key, SFSRO_B_ROOT, 0);
}

void sfsro_walker_root_version(sfsro_walker_t *w, const struct cfs_pubkey *pk, uint64_t seq,
                               struct sfsro_root *ret)
{
	struct cfs_id key;

	sfsro_walker_root(w, pk, 0, 0, ret);
	if (!seq)
		return;
	w->root.version = seq;
	sfsro_root_version_key(pk, seq, &key);
	sfsro__w_want_set(&w->one, &key, SFSRO_B_ROOT, 0);
}

void sfsro_walker_lookup(sfsro_walker_t *w, const struct cfs_id *dir_key, const uint8_t *name,
                         size_t len, struct sfsro_node *ret)
{
	reset(w, OP_LOOKUP);
	w->lk.ret = ret;
	if (len == 0 || len > SFSRO_NAME_MAX) {
		sfsro__w_fail(w, len ? -ENAMETOOLONG : -ENOENT);
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
		sfsro__w_fail(w, -ENAMETOOLONG);
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
	sfsro__w_rdir_rewind(w);
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
	sfsro__w_want_set(&w->one, ino_key, SFSRO_B_INODE, 0);
}

void sfsro_walker_inode(sfsro_walker_t *w, const struct cfs_id *ino_key, struct sfsro_inode *ret,
                        uint8_t **ret_bytes, size_t *ret_len)
{
	reset(w, OP_READ);
	w->r = (struct rdop){ .kind = R_INODE, .ret_ino = ret, .ret_bytes = ret_bytes, .ret_len = ret_len };
	*ret_bytes = NULL;
	*ret_len = 0;
	sfsro__w_want_set(&w->one, ino_key, SFSRO_B_INODE, 0);
}

void sfsro_walker_locate(sfsro_walker_t *w, const struct cfs_id *ino_key, uint64_t b,
                         struct cfs_id *ret)
{
	reset(w, OP_READ);
	w->r = (struct rdop){ .kind = R_LOCATE, .off = b, .ret_key = ret };
	sfsro__w_want_set(&w->one, ino_key, SFSRO_B_INODE, 0);
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
	case OP_LOOKUP: return sfsro__w_want_step(&w->one, ret);
	case OP_READDIR: return sfsro__w_rdir_step(w, ret);
	case OP_READ: return sfsro__w_read_step(w, ret);
	case OP_VISIT: return sfsro__w_visit_step(w, ret);
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
		sfsro__w_fail(w, status);
		return 0;
	}
	if (w->op == OP_ROOT) { /* signed, not hashed: its key names the volume */
		w->one.state = A_NONE;
		root_fed(w, p, len);
		return 0;
	}
	if (!(flags & SFSRO_FEED_VERIFIED) && sfsro_verify_hash(key, p, len) < 0) {
		sfsro__w_refuse(w, key, -EBADMSG, "block", "does not match its key");
		return 0;
	}
	if (which == 1) {
		w->one.state = A_NONE;
		if (w->op == OP_LOOKUP)
			lookup_fed(w, key, p, len);
		else if (w->op == OP_READDIR)
			sfsro__w_rdir_fed(w, key, p, len);
		else
			sfsro__w_inode_fed(w, key, p, len);
	} else if (w->op == OP_READ) {
		(void)sfsro__w_read_fed(w, key, p, len);
	} else {
		(void)sfsro__w_visit_fed(w, key, p, len);
	}
	return 0;
}
