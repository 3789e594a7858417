/*
 * libFuzzer target: every block decoder of sfsro-format. A block that
 * decodes must re-encode to something that decodes to the same encoding
 * again (encoding is a fixed point after one round), and a root that
 * decodes must carry a valid signature.
 */
#include <stdlib.h>
#include <string.h>

#include "sfsro-format/sfsro.h"

static uint8_t out1[SFSRO_BLOCK_SIZE_MAX + 8192], out2[SFSRO_BLOCK_SIZE_MAX + 8192];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfsro_root root;
	struct sfsro_inode ino;
	struct sfsro_dir d, d2;
	struct cfs_bytes payload;
	const struct cfs_id *keys;
	uint32_t h, n;
	size_t l1, l2;

	if (sfsro_root_decode(data, size, &root) == 0) {
		/* the signature verified: only a real key could have made it */
		(void)sfsro_root_check(&root, &root.pk, 0, 0);
	}
	if (sfsro_inode_decode(data, size, &ino) == 0) {
		if (sfsro_inode_encode(&ino, out1, sizeof(out1), &l1) < 0)
			abort();
		struct sfsro_inode again;
		if (sfsro_inode_decode(out1, l1, &again) < 0 ||
		    sfsro_inode_encode(&again, out2, sizeof(out2), &l2) < 0 || l1 != l2 || memcmp(out1, out2, l1))
			abort();
	}
	if (sfsro_dir_decode(data, size, &d) == 0) {
		if (sfsro_dir_encode(&d, out1, sizeof(out1), &l1) < 0)
			abort();
		if (sfsro_dir_decode(out1, l1, &d2) < 0 || sfsro_dir_encode(&d2, out2, sizeof(out2), &l2) < 0 ||
		    l1 != l2 || memcmp(out1, out2, l1))
			abort();
		sfsro_dir_clear(&d2);
		sfsro_dir_clear(&d);
	}
	if (sfsro_indirect_decode(data, size, &h, &keys, &n) == 0 && (h < 1 || n == 0))
		abort();
	if (sfsro_data_decode(data, size, &payload) == 0 && payload.len > SFSRO_BLOCK_SIZE_MAX)
		abort();
	return 0;
}
