/*
 * The node table: one FUSE inode number per (parent, name) the kernel has
 * looked up, counted as FUSE counts lookups and dropped when forgotten.
 * Keying by path rather than by block key keeps two identical files (one
 * inode block) apart. A directory keeps its number across root versions;
 * a file keeps it while its content does, and a changed file gets a new
 * number (the old node leaves the name index and lives until forgotten).
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

#define ROOT_INO 1

struct fs_nodes {
	struct fnode **by_ino, **by_name;
	size_t nbuckets, count;
	uint64_t next_ino;
};

static size_t ino_bucket(uint64_t ino, size_t n)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) & (n - 1);
}

static size_t name_bucket(uint64_t parent, const uint8_t *name, size_t len, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ parent;
	for (size_t i = 0; i < len; i++)
		h = (h ^ name[i]) * 0x100000001b3ull;
	return (size_t)(h ^ (h >> 29)) & (n - 1);
}

static void link_node(struct fs_nodes *t, struct fnode *n)
{
	size_t i = ino_bucket(n->ino, t->nbuckets), j = name_bucket(n->parent, n->name, n->name_len, t->nbuckets);
	n->inext = t->by_ino[i];
	t->by_ino[i] = n;
	if (!n->detached) {
		n->nnext = t->by_name[j];
		t->by_name[j] = n;
	}
}

static void grow(struct fs_nodes *t)
{
	struct fnode **old = t->by_ino;
	size_t oldn = t->nbuckets;

	t->nbuckets *= 2;
	t->by_ino = xcalloc(t->nbuckets, sizeof(*t->by_ino));
	free(t->by_name);
	t->by_name = xcalloc(t->nbuckets, sizeof(*t->by_name));
	for (size_t i = 0; i < oldn; i++)
		for (struct fnode *n = old[i], *next; n; n = next) {
			next = n->inext;
			link_node(t, n);
		}
	free(old);
}

struct fs_nodes *fs__nodes_new(void)
{
	struct fs_nodes *t = xcalloc(1, sizeof(*t));
	struct fnode *root = xcalloc(1, sizeof(*root));

	t->nbuckets = 1024;
	t->by_ino = xcalloc(t->nbuckets, sizeof(*t->by_ino));
	t->by_name = xcalloc(t->nbuckets, sizeof(*t->by_name));
	t->next_ino = ROOT_INO + 1;
	root->ino = ROOT_INO;
	root->type = SFSRO_T_DIR;
	root->name = (uint8_t *)xstrdup("");
	link_node(t, root);
	t->count = 1;
	return t;
}

struct fnode *fs__node_get(struct fs_nodes *t, uint64_t ino)
{
	for (struct fnode *n = t->by_ino[ino_bucket(ino, t->nbuckets)]; n; n = n->inext)
		if (n->ino == ino)
			return n;
	return NULL;
}

static void set_attrs(struct fnode *n, const struct sfsro_entry *e, uint64_t seq)
{
	n->type = e->type;
	n->size = e->size;
	n->mode = e->mode;
	n->mtime_s = e->mtime_s;
	n->mtime_ns = e->mtime_ns;
	n->key = e->key;
	n->seq = seq;
	free(n->target);
	n->target = NULL;
	if (e->type == SFSRO_T_SYMLINK) {
		n->target = xmalloc(e->target.len + 1);
		memcpy(n->target, e->target.p, e->target.len);
		n->target[e->target.len] = 0;
	}
}

struct fnode *fs__node_enter(struct fs_nodes *t, uint64_t parent, const struct sfsro_entry *e,
                             uint64_t seq)
{
	size_t j = name_bucket(parent, e->name.p, e->name.len, t->nbuckets);

	for (struct fnode **pp = &t->by_name[j]; *pp; pp = &(*pp)->nnext) {
		struct fnode *n = *pp;
		if (n->parent != parent || n->name_len != e->name.len ||
		    memcmp(n->name, e->name.p, e->name.len) != 0)
			continue;
		/* A directory keeps its number across versions (its listing is
		 * invalidated); a file whose content changed gets a new one, so
		 * the kernel's pages of the old content stay with the old
		 * number, which files opened before keep reading. */
		if (n->type == e->type && (e->type != SFSRO_T_FILE || cfs_id_eq(&n->key, &e->key))) {
			set_attrs(n, e, seq);
			return n;
		}
		*pp = n->nnext;
		n->nnext = NULL;
		n->detached = true;
		break;
	}
	if (t->count >= t->nbuckets)
		grow(t);
	struct fnode *n = xcalloc(1, sizeof(*n));
	n->ino = t->next_ino++;
	n->parent = parent;
	n->name = xmalloc(e->name.len + 1);
	memcpy(n->name, e->name.p, e->name.len);
	n->name[e->name.len] = 0;
	n->name_len = e->name.len;
	set_attrs(n, e, seq);
	link_node(t, n);
	t->count++;
	return n;
}

static void unlink_node(struct fs_nodes *t, struct fnode *n)
{
	struct fnode **pp = &t->by_ino[ino_bucket(n->ino, t->nbuckets)];
	while (*pp != n)
		pp = &(*pp)->inext;
	*pp = n->inext;
	if (!n->detached) {
		pp = &t->by_name[name_bucket(n->parent, n->name, n->name_len, t->nbuckets)];
		while (*pp != n)
			pp = &(*pp)->nnext;
		*pp = n->nnext;
	}
	t->count--;
}

static void node_free(struct fnode *n)
{
	free(n->name);
	free(n->target);
	free(n);
}

void fs__node_forget(struct fs_nodes *t, uint64_t ino, uint64_t count)
{
	struct fnode *n = fs__node_get(t, ino);

	if (!n || ino == ROOT_INO)
		return;
	n->nlookup = count >= n->nlookup ? 0 : n->nlookup - count;
	if (n->nlookup == 0) {
		unlink_node(t, n);
		node_free(n);
	}
}

void fs__nodes_each(struct fs_nodes *t, void (*fn)(void *arg, struct fnode *n), void *arg)
{
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct fnode *n = t->by_ino[i]; n; n = n->inext)
			if (n->ino != ROOT_INO)
				fn(arg, n);
}

uint64_t fs__nodes_count(const struct fs_nodes *t)
{
	return t->count;
}

void fs__nodes_free(struct fs_nodes *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nbuckets; i++)
		for (struct fnode *n = t->by_ino[i], *next; n; n = next) {
			next = n->inext;
			node_free(n);
		}
	free(t->by_ino);
	free(t->by_name);
	free(t);
}
