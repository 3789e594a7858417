/*
 * Every block of a volume, each once: the walk under a refresh and under
 * cfs-fsck --replicas, a synchronous driver of sfsro's blockset. Directory,
 * inode and indirect blocks are read (and verified) to find their
 * children; data blocks are only named.
 */
#include <stdlib.h>

#include "publisher/internal.h"

int pub__walk_blocks(const struct sfsro_source *src, const struct cfs_id *root_dir,
                     pub_block_fn fn, void *arg)
{
	struct sfsro_blockset s = { 0 };
	struct sfsro_bitem it;
	char h[65];
	int r = 0;

	sfsro_blockset_push(&s, root_dir, SFSRO_B_DIR, 0);
	while (r == 0 && sfsro_blockset_pop(&s, &it)) {
		if (it.btype != SFSRO_B_DATA) {
			uint8_t *b;
			size_t len;
			if ((r = src->get(src->ctx, &it.key, &b, &len)) < 0) {
				log_error_errno(r, "cannot read block %s", cfs_id_hex(&it.key, h));
				break;
			}
			if ((r = sfsro_verify_hash(&it.key, b, len)) < 0)
				log_error_errno(r, "block %s does not verify", cfs_id_hex(&it.key, h));
			else if ((r = sfsro_blockset_expand(&s, &it, b, len)) < 0)
				log_error_errno(r, "block %s does not decode", cfs_id_hex(&it.key, h));
			free(b);
			if (r < 0)
				break;
		}
		r = fn(arg, &it.key);
	}
	sfsro_blockset_free(&s);
	return r;
}
