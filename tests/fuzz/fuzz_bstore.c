/*
 * libFuzzer target: the storage engine's decoders. The first byte picks:
 *   0  the index record decoder (bstore__rec_decode)
 *   1  the pack entry parser (bstore__entry_parse)
 *   2  a whole pack: a store holding three blocks has its first pack
 *      replaced by the input (behind a valid pack header); opening it
 *      must never crash, every read must give the block's bytes or an
 *      error, and compaction (the pack scanner) must end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockstore/internal.h"

static char dir[64];

static void cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static void fuzz_pack(const uint8_t *data, size_t size)
{
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .pack_max = 1 << 20 };
	struct bstore_op ops[3];
	uint8_t blocks[3][600];
	char path[128];
	bstore_t *s;

	cleanup();
	if (bstore_open(dir, &cfg, &s) < 0)
		abort();
	for (int i = 0; i < 3; i++) {
		memset(blocks[i], 'a' + i, sizeof(blocks[i]));
		ops[i] = (struct bstore_op){ .type = BSTORE_PUT, .data = blocks[i] };
		ops[i].meta.len = sizeof(blocks[i]);
		ops[i].meta.kind = 1;
		cfs_hash(&ops[i].key, blocks[i], sizeof(blocks[i]));
	}
	if (bstore_apply(s, ops, 3) < 0)
		abort();
	bstore_close(s);
	snprintf(path, sizeof(path), "%s/packs/00000001.pack", dir);
	FILE *f = fopen(path, "r+");
	if (!f || fseek(f, BSTORE__PACK_HDR, SEEK_SET) < 0 || fwrite(data, 1, size, f) != size ||
	    ftruncate(fileno(f), (off_t)(BSTORE__PACK_HDR + size)) < 0)
		abort();
	fclose(f);
	if (bstore_open(dir, &cfg, &s) < 0)
		return;
	for (int i = 0; i < 3; i++) {
		struct bstore_meta m;
		uint8_t *p = NULL;
		if (bstore_get(s, &ops[i].key, &m, &p) == 0) {
			if (m.len != sizeof(blocks[i]))
				abort();
			free(p);
		}
	}
	struct bstore_op del = { .type = BSTORE_DEL, .key = ops[1].key };
	(void)bstore_apply(s, &del, 1);
	for (int n = 0; n < 100 && bstore_compact_step(s, 1 << 20); n++)
		;
	bstore_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/dev/shm/cfs-fuzz-bstore.%d", (int)getpid());
		cfs_log_set_level(CFS_LOG_ERROR);
		atexit(cleanup);
	}
	if (size < 1)
		return 0;
	if (data[0] == 0) {
		struct bstore__rec r;
		(void)bstore__rec_decode(data + 1, size - 1, &r);
	} else if (data[0] == 1) {
		struct cfs_id k;
		struct bstore_meta m;
		int r = bstore__entry_parse(data + 1, size - 1, &k, &m);
		if (r == 1 && m.len + BSTORE__ENTRY_HDR > size - 1)
			abort();
	} else if (data[0] == 2 && size < 70000) {
		fuzz_pack(data + 1, size - 1);
	}
	return 0;
}
