/*
 * Every block under a directory, each once, without I/O: a stack of the
 * blocks still to visit and the set of keys met. The caller reads each
 * structural block (directory, inode, indirect) it pops and hands the
 * bytes back to expand, which pushes the keys they name; data blocks are
 * only named. The publisher's refresh and fsck --replicas drive it
 * synchronously (publisher/blocks.c), a daemon's pins asynchronously
 * (cfsd/pin_walk.c). A hostile volume — one block named from many places,
 * a chain a million directories deep — costs one visit per distinct block
 * and no C stack.
 */
#include "sfsro-format/internal.h"

#include <stdlib.h>

bool sfsro_blockset_push(struct sfsro_blockset *s, const struct cfs_id *key, uint8_t btype,
                         uint8_t height)
{
	if (cfs_idmap_get(&s->seen, key, NULL))
		return false;
	cfs_idmap_put(&s->seen, key, 0);
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 64;
		s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
	}
	s->v[s->n++] = (struct sfsro_bitem){ *key, btype, height };
	s->pushed++;
	return true;
}

bool sfsro_blockset_pop(struct sfsro_blockset *s, struct sfsro_bitem *ret)
{
	if (s->n == 0)
		return false;
	*ret = s->v[--s->n];
	return true;
}

int sfsro_blockset_expand(struct sfsro_blockset *s, const struct sfsro_bitem *it, const uint8_t *p,
                          size_t len)
{
	int r;

	if (it->btype == SFSRO_B_DIR) {
		struct sfsro_dir d;
		if ((r = sfsro_dir_decode(p, len, &d)) < 0)
			return r;
		for (uint32_t i = 0; i < d.n; i++) {
			if (d.height)
				sfsro_blockset_push(s, &d.children[i].key, SFSRO_B_DIR, 0);
			else if (d.entries[i].type == SFSRO_T_FILE)
				sfsro_blockset_push(s, &d.entries[i].key, SFSRO_B_INODE, 0);
			else if (d.entries[i].type == SFSRO_T_DIR)
				sfsro_blockset_push(s, &d.entries[i].key, SFSRO_B_DIR, 0);
		}
		sfsro_dir_clear(&d);
	} else if (it->btype == SFSRO_B_INODE) {
		struct sfsro_inode ino;
		if ((r = sfsro_inode_decode(p, len, &ino)) < 0)
			return r;
		for (uint32_t i = 0; i < ino.nkeys; i++)
			sfsro_blockset_push(s, &ino.keys[i], ino.height ? SFSRO_B_INDIRECT : SFSRO_B_DATA,
			                    (uint8_t)ino.height);
	} else if (it->btype == SFSRO_B_INDIRECT) {
		const struct cfs_id *keys;
		uint32_t h, n;
		if ((r = sfsro_indirect_decode(p, len, &h, &keys, &n)) < 0)
			return r;
		if (h != it->height || h == 0)
			return -EPROTO; /* not the height its inode or parent gave it */
		for (uint32_t i = 0; i < n; i++)
			sfsro_blockset_push(s, &keys[i], h > 1 ? SFSRO_B_INDIRECT : SFSRO_B_DATA,
			                    (uint8_t)(h - 1));
	}
	return 0;
}

void sfsro_blockset_free(struct sfsro_blockset *s)
{
	free(s->v);
	cfs_idmap_free(&s->seen);
	*s = (struct sfsro_blockset){ 0 };
}
