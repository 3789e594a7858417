/*
 * Building the block trees of files and directories. Deterministic: the
 * same entries, sizes and keys always give the same blocks, so a republish
 * of an unchanged tree finds every block already stored.
 */
#include "sfsro-format/internal.h"

#include <stdlib.h>
#include <string.h>

/* Room a block's own header and array framing take (upper bound). */
#define HDR_ROOM 48

static int emit_block(sfsro_emit_fn emit, void *arg, const uint8_t *p, size_t len, struct cfs_id *ret_key)
{
	cfs_hash(ret_key, p, len);
	return emit(arg, ret_key, p, len);
}

int sfsro_build_file(struct sfsro_inode *ino, const struct cfs_id *data_keys, uint64_t nblocks,
                     sfsro_emit_fn emit, void *arg, struct cfs_id *ret_key)
{
	uint8_t *buf = xmalloc(SFSRO_BLOCK_SIZE_MAX + 1024);
	struct cfs_id *level = NULL;
	uint64_t n = nblocks;
	size_t len;
	int r = 0;

	ino->fanout = sfsro_fanout(ino->bsize);
	ino->height = 0;
	if (ino->size <= SFSRO_INLINE_MAX) {
		ino->keys = NULL;
		ino->nkeys = 0;
	} else {
		const struct cfs_id *cur = data_keys;
		/* group keys into indirect blocks until the top fits the inode */
		while (n > ino->fanout) {
			uint64_t m = n / ino->fanout + (n % ino->fanout != 0);
			struct cfs_id *next = xmalloc(m * sizeof(*next));
			for (uint64_t i = 0; i < m && r == 0; i++) {
				uint64_t first = i * ino->fanout;
				uint32_t cnt = (uint32_t)(n - first < ino->fanout ? n - first : ino->fanout);
				if ((r = sfsro_indirect_encode(ino->height + 1, cur + first, cnt, buf,
				                               SFSRO_BLOCK_SIZE_MAX + 1024, &len)) == 0)
					r = emit_block(emit, arg, buf, len, &next[i]);
			}
			free(level);
			level = next;
			cur = next;
			n = m;
			ino->height++;
			if (r < 0)
				goto out;
		}
		ino->keys = cur;
		ino->nkeys = (uint32_t)n;
	}
	if ((r = sfsro_inode_encode(ino, buf, SFSRO_BLOCK_SIZE_MAX + 1024, &len)) == 0)
		r = emit_block(emit, arg, buf, len, ret_key);
out:
	ino->keys = NULL; /* pointed into memory freed here */
	free(level);
	free(buf);
	return r;
}

static int cmp_entries(const void *a, const void *b)
{
	const struct sfsro_entry *x = a, *y = b;
	return sfsro_name_cmp(&x->name, &y->name);
}

void sfsro_sort_entries(struct sfsro_entry *entries, size_t n)
{
	if (n) /* qsort must not see NULL, even for nothing */
		qsort(entries, n, sizeof(*entries), cmp_entries);
}

int sfsro_build_dir(const struct sfsro_entry *entries, uint32_t n, uint32_t bsize,
                    sfsro_emit_fn emit, void *arg, struct cfs_id *ret_key)
{
	uint8_t *buf = xmalloc(SFSRO_BLOCK_SIZE_MAX + 8192);
	size_t cap = SFSRO_BLOCK_SIZE_MAX + 8192, len;
	struct sfsro_dir_child *kids = xcalloc(n ? n : 1, sizeof(*kids)), *up;
	uint32_t nkids = 0, height = 0;
	int r = 0;

	/* leaves: as many entries as fit in bsize, at least one each */
	for (uint32_t i = 0; i < n || (n == 0 && nkids == 0);) {
		uint32_t j = i;
		size_t used = HDR_ROOM;
		while (j < n && (j == i || used + sfsro_entry_size(&entries[j]) <= bsize))
			used += sfsro_entry_size(&entries[j++]);
		struct sfsro_dir d = { .height = 0, .n = j - i, .entries = (struct sfsro_entry *)entries + i };
		if ((r = sfsro_dir_encode(&d, buf, cap, &len)) < 0 ||
		    (r = emit_block(emit, arg, buf, len, &kids[nkids].key)) < 0)
			goto out;
		if (n)
			kids[nkids].first = entries[i].name;
		nkids++;
		i = j;
		if (n == 0)
			break;
	}
	/* index levels: [first name, key] items, until one block remains */
	while (nkids > 1) {
		uint32_t m = 0;
		height++;
		up = xcalloc(nkids, sizeof(*up));
		for (uint32_t i = 0; i < nkids;) {
			uint32_t j = i;
			size_t used = HDR_ROOM;
			while (j < nkids && (j == i || used + 40 + kids[j].first.len <= bsize))
				used += 40 + kids[j++].first.len;
			struct sfsro_dir d = { .height = height, .n = j - i, .children = kids + i };
			if ((r = sfsro_dir_encode(&d, buf, cap, &len)) < 0 ||
			    (r = emit_block(emit, arg, buf, len, &up[m].key)) < 0) {
				free(up);
				goto out;
			}
			up[m++].first = kids[i].first;
			i = j;
		}
		free(kids);
		kids = up;
		nkids = m;
	}
	*ret_key = kids[0].key;
out:
	free(kids);
	free(buf);
	return r;
}
