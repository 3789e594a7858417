/*
 * Every block of a volume, each once: the walk under a refresh and under
 * cfs-fsck --replicas. Directory, inode and indirect blocks are read (and
 * verified) to find their children; data blocks are only named. The walk
 * keeps its own stack, not the C one, and a set of the keys it has met,
 * so a hostile volume (a directory named from many places, a cycle, a
 * chain a million directories deep) costs one visit per distinct block.
 */
#include <stdlib.h>

#include "publisher/internal.h"

#define KIND_DATA 0 /* a data block: named, not read */

struct item {
	struct cfs_id key;
	int kind; /* SFSRO_T_DIR, SFSRO_T_FILE, -height of an indirect block, KIND_DATA */
};

struct stack {
	struct item *v;
	size_t n, cap;
	struct cfs_idmap seen;
};

static void push(struct stack *s, const struct cfs_id *key, int kind)
{
	if (cfs_idmap_get(&s->seen, key, NULL))
		return;
	cfs_idmap_put(&s->seen, key, 0);
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 256;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = (struct item){ *key, kind };
}

/* Push the children named by block b of the given kind. */
static int children(struct stack *s, int kind, const uint8_t *b, size_t len)
{
	int r;

	if (kind == SFSRO_T_DIR) {
		struct sfsro_dir d;
		if ((r = sfsro_dir_decode(b, len, &d)) < 0)
			return r;
		for (uint32_t i = 0; i < d.n; i++) {
			if (d.height)
				push(s, &d.children[i].key, SFSRO_T_DIR);
			else if (d.entries[i].type != SFSRO_T_SYMLINK)
				push(s, &d.entries[i].key, d.entries[i].type);
		}
		sfsro_dir_clear(&d);
	} else if (kind == SFSRO_T_FILE) {
		struct sfsro_inode ino;
		if ((r = sfsro_inode_decode(b, len, &ino)) < 0)
			return r;
		for (uint32_t i = 0; i < ino.nkeys; i++)
			push(s, &ino.keys[i], ino.height ? -(int)ino.height : KIND_DATA);
	} else {
		uint32_t h, n;
		const struct cfs_id *keys;
		if ((r = sfsro_indirect_decode(b, len, &h, &keys, &n)) < 0)
			return r;
		for (uint32_t i = 0; i < n; i++)
			push(s, &keys[i], h > 1 ? -(int)(h - 1) : KIND_DATA);
	}
	return 0;
}

int pub__walk_blocks(const struct sfsro_source *src, const struct cfs_id *root_dir,
                     pub_block_fn fn, void *arg)
{
	struct stack s = { 0 };
	int r = 0;

	push(&s, root_dir, SFSRO_T_DIR);
	while (r == 0 && s.n > 0) {
		struct item it = s.v[--s.n];
		if (it.kind != KIND_DATA) {
			uint8_t *b;
			size_t len;
			if ((r = src->get(src->ctx, &it.key, &b, &len)) == 0 &&
			    (r = sfsro_verify_hash(&it.key, b, len)) < 0)
				free(b);
			if (r < 0) {
				char h[65];
				log_error_errno(r, "cannot read block %s", cfs_id_hex(&it.key, h));
				break;
			}
			r = children(&s, it.kind, b, len);
			free(b);
			if (r < 0) {
				char h[65];
				log_error_errno(r, "block %s does not decode", cfs_id_hex(&it.key, h));
				break;
			}
		}
		r = fn(arg, &it.key);
	}
	free(s.v);
	cfs_idmap_free(&s.seen);
	return r;
}
