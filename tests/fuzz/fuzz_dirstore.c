/*
 * libFuzzer target: the directory store's index decoder. The input becomes
 * PATH/index beside one 64 KiB pack (records whose last byte is odd get a
 * valid check); opening the store must never crash,
 * must cut a torn tail, and every block it then claims to have must read
 * back at the length its record gives, from inside the pack.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "publisher/publisher.h"

static char dir[64];

static void cleanup(void)
{
	static const char *const files[] = { "index", "lock", "packs/000001.pack", "packs", "roots" };
	char path[128];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (unlink(path) < 0)
			rmdir(path);
	}
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uv_loop_t loop;
	char path[128];
	struct pub_sink sink;
	FILE *f;

	if (!dir[0]) {
		snprintf(dir, sizeof(dir), "/dev/shm/cfs-fuzz-dirstore.%d", (int)getpid());
		cfs_log_set_level(CFS_LOG_ERROR);
		atexit(cleanup);
		uv_loop_init(&loop);
		if (cfs_mkdir_p(dir, 0755) < 0)
			abort();
		snprintf(path, sizeof(path), "%s/packs", dir);
		if (cfs_mkdir_p(path, 0755) < 0)
			abort();
		snprintf(path, sizeof(path), "%s/packs/000001.pack", dir);
		if (!(f = fopen(path, "w")) || ftruncate(fileno(f), 65536) < 0)
			abort();
		fclose(f);
	}
	snprintf(path, sizeof(path), "%s/index", dir);
	if (!(f = fopen(path, "w")))
		abort();
	/* A random check never matches: give the records whose last byte is
	 * odd a correct one, so that what lies behind the check is fuzzed too. */
	uint8_t *idx = malloc(size + 1);
	memcpy(idx, data, size);
	for (size_t off = 0; off + 64 <= size; off += 64)
		if (idx[off + 63] & 1) {
			struct cfs_id check;
			cfs_hash(&check, idx + off, 56);
			memcpy(idx + off + 56, check.b, 8);
		}
	fwrite(idx, 1, size, f);
	free(idx);
	fclose(f);
	snprintf(path, sizeof(path), "dir:%s", dir);
	if (pub_sink_open(&loop, path, &sink) < 0)
		return 0;
	const struct sfsro_source *src = sink.ops->source(sink.impl);
	for (size_t off = 0; off + 64 <= size; off += 64) { /* the keys the records name */
		struct cfs_id key;
		uint8_t *b;
		size_t len;
		memcpy(key.b, data + off, 32);
		int r = src->get(src->ctx, &key, &b, &len);
		if (r == 0) {
			if (len > CFS_BLOCK_MAX)
				abort();
			free(b);
		} else if (r != -ENOENT) {
			abort(); /* an accepted record always reads back whole */
		}
	}
	pub_sink_close(&sink);
	uv_run(&loop, UV_RUN_DEFAULT);
	return 0;
}
