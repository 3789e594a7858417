/* cfs-fuse: the block cache in memory (its LRU, byte bound and counts),
 * filled from a real disk cache in a temp dir; no DHash client, no loop. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

static char dir[64];
static dhash_cache_t *disk;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-fblocks.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(dhash_cache_open(dir, 1 << 20, &disk), 0);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Block i: i, then (i + j) % 251 up to len bytes, under their hash. */
static void block(int i, uint8_t *buf, size_t len, struct cfs_id *key)
{
	for (size_t j = 0; j < len; j++)
		buf[j] = (uint8_t)((i + (int)j) % 251);
	memcpy(buf, &i, sizeof(i));
	cfs_hash(key, buf, len);
}

static struct cfs_id put(int i, size_t len)
{
	uint8_t buf[4000];
	struct cfs_id k;

	block(i, buf, len, &k);
	cr_assert_eq(dhash_cache_put(disk, &k, DHASH_KIND_CHASH, buf, len), 0);
	return k;
}

static struct fs_blocks *blocks(size_t cache_bytes)
{
	/* Not cfsfuse_options_default: that would link ops.c, and libfuse. */
	struct cfsfuse_options o = { .cache_bytes = cache_bytes, .retries = 2, .max_fetches = 24 };

	return fs__blocks_new(NULL, NULL, NULL, &o, disk); /* frees disk */
}

static void check(struct fs_blocks *bs, uint64_t hits, uint64_t disk_hits, uint64_t nblocks,
                  uint64_t bytes)
{
	struct cfsfuse_stats st = { 0 };

	fs__blocks_stats(bs, &st);
	cr_assert_eq(st.hits, hits, "hits %lu", (unsigned long)st.hits);
	cr_assert_eq(st.disk_hits, disk_hits, "disk hits %lu", (unsigned long)st.disk_hits);
	cr_assert_eq(st.cached_blocks, nblocks, "blocks %lu", (unsigned long)st.cached_blocks);
	cr_assert_eq(st.cached_bytes, bytes, "bytes %lu", (unsigned long)st.cached_bytes);
}

TestSuite(fuse_blocks, .init = setup, .fini = teardown);

Test(fuse_blocks, least_recently_used_goes_first)
{
	struct cfs_id k0 = put(0, 1000), k1 = put(1, 1000), k2 = put(2, 1000);
	struct fs_blocks *bs = blocks(2500);

	cr_assert_not_null(fs__blk_peek(bs, &k0));
	cr_assert_not_null(fs__blk_peek(bs, &k1));
	check(bs, 0, 2, 2, 2000);
	cr_assert_not_null(fs__blk_peek(bs, &k0), "0 is now the youngest");
	check(bs, 1, 2, 2, 2000);
	cr_assert_not_null(fs__blk_peek(bs, &k2), "brings 2 in, pushes 1 out");
	check(bs, 1, 3, 2, 2000);
	cr_assert_not_null(fs__blk_peek(bs, &k0));
	check(bs, 2, 3, 2, 2000);
	const struct fblk *b = fs__blk_peek(bs, &k1);
	cr_assert_not_null(b, "1 comes back from the disk and pushes 2 out");
	cr_assert(cfs_id_eq(&b->key, &k1));
	cr_assert_eq(b->len, 1000);
	check(bs, 2, 4, 2, 2000);
	cr_assert_not_null(fs__blk_peek(bs, &k0));
	cr_assert_not_null(fs__blk_peek(bs, &k1));
	check(bs, 4, 4, 2, 2000);
	fs__blocks_free(bs);
}

Test(fuse_blocks, a_block_over_the_bound_stays_alone)
{
	struct cfs_id k0 = put(0, 1000), k1 = put(1, 1000), big = put(2, 3000);
	struct fs_blocks *bs = blocks(2500);

	cr_assert_not_null(fs__blk_peek(bs, &k0));
	cr_assert_not_null(fs__blk_peek(bs, &k1));
	const struct fblk *b = fs__blk_peek(bs, &big);
	cr_assert_not_null(b);
	cr_assert_eq(b->len, 3000);
	check(bs, 0, 3, 1, 3000);
	cr_assert_not_null(fs__blk_peek(bs, &k0), "and goes when the next one comes");
	check(bs, 0, 4, 1, 1000);
	fs__blocks_free(bs);
}

Test(fuse_blocks, many_blocks_survive_growth)
{
	enum { N = 300 };
	struct cfs_id k[N];
	uint8_t buf[100];
	struct fs_blocks *bs;

	for (int i = 0; i < N; i++)
		k[i] = put(i, 100);
	bs = blocks(1 << 20);
	for (int i = 0; i < N; i++)
		cr_assert_not_null(fs__blk_peek(bs, &k[i]));
	check(bs, 0, N, N, N * 100);
	for (int i = N - 1; i >= 0; i--) {
		const struct fblk *b = fs__blk_peek(bs, &k[i]);
		struct cfs_id key;
		cr_assert_not_null(b, "block %d", i);
		block(i, buf, sizeof(buf), &key);
		cr_assert(cfs_id_eq(&b->key, &key));
		cr_assert_eq(b->len, sizeof(buf));
		cr_assert_eq(memcmp(b->p, buf, sizeof(buf)), 0, "block %d changed", i);
	}
	check(bs, N, N, N, N * 100);
	fs__blocks_free(bs);
}

Test(fuse_blocks, a_block_that_does_not_verify_is_dropped_from_disk)
{
	uint8_t buf[1000];
	struct cfs_id k, other;
	struct fs_blocks *bs;

	block(0, buf, sizeof(buf), &k);
	block(1, buf, sizeof(buf), &other);
	cr_assert_eq(dhash_cache_put(disk, &k, DHASH_KIND_CHASH, buf, sizeof(buf)), 0);
	bs = blocks(1 << 20);
	cr_assert_null(fs__blk_peek(bs, &k), "block 1's bytes under block 0's key");
	check(bs, 0, 0, 0, 0);
	uint8_t kind, *p;
	size_t len;
	cr_assert_eq(dhash_cache_get(disk, &k, &kind, &p, &len), -ENOENT, "gone from the disk too");
	fs__blocks_free(bs);
}
