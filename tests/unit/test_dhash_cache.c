/* dhash: the on-disk block cache (the storage engine in a temp dir). The
 * bound counts bytes on disk: a 1000-byte block takes ENTRY of them. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockstore/blockstore.h"
#include "dhash/dhash.h"

#define ENTRY (BSTORE__ENTRY_HDR + 1000 + 16) /* header, block, its own pack's header */

static char dir[64];
static dhash_cache_t *ca;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-cache.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(dhash_cache_open(dir, 10 * ENTRY, &ca), 0);
}

static void teardown(void)
{
	char cmd[128];
	dhash_cache_close(ca);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Block i: 1000 bytes of (i + j) % 251, under the hash of those bytes. */
static void block(int i, uint8_t buf[1000], struct cfs_id *key)
{
	for (int j = 0; j < 1000; j++)
		buf[j] = (uint8_t)((i + j) % 251);
	cfs_hash(key, buf, 1000);
}

static bool has(int i)
{
	uint8_t buf[1000], kind, *p;
	struct cfs_id k;
	size_t len;

	block(i, buf, &k);
	int r = dhash_cache_get(ca, &k, &kind, &p, &len);
	if (r == -ENOENT)
		return false;
	cr_assert_eq(r, 0);
	cr_assert_eq(kind, DHASH_KIND_CHASH);
	cr_assert_eq(len, 1000);
	cr_assert_eq(memcmp(p, buf, len), 0, "block %d came back changed", i);
	free(p);
	return true;
}

static void put(int i)
{
	uint8_t buf[1000];
	struct cfs_id k;

	block(i, buf, &k);
	cr_assert_eq(dhash_cache_put(ca, &k, DHASH_KIND_CHASH, buf, sizeof(buf)), 0);
}

TestSuite(dhash_cache, .init = setup, .fini = teardown);

Test(dhash_cache, get_put_and_reopen)
{
	uint64_t blocks, bytes, evicted;

	cr_assert_not(has(1));
	put(1);
	put(2);
	put(2); /* again: counted once */
	cr_assert(has(1));
	dhash_cache_close(ca);
	cr_assert_eq(dhash_cache_open(dir, 10 * ENTRY, &ca), 0);
	dhash_cache_totals(ca, &blocks, &bytes, &evicted);
	cr_assert_eq(blocks, 2);
	cr_assert_eq(bytes, 2000);
	cr_assert(has(1));
	cr_assert(has(2));
}

Test(dhash_cache, bounded_least_recently_used_out_first)
{
	uint64_t blocks, bytes, evicted;

	for (int i = 0; i < 10; i++)
		put(i);
	cr_assert(has(0)); /* old enough to be made young again */
	put(10);           /* 11 blocks > 10: the oldest goes, which is 1 */
	put(11);           /* ... then 2 */
	dhash_cache_totals(ca, &blocks, &bytes, &evicted);
	cr_assert_eq(blocks, 10);
	cr_assert_eq(bytes, 10000);
	cr_assert_eq(evicted, 2);
	cr_assert(has(0), "a block read recently was evicted");
	cr_assert_not(has(1));
	cr_assert_not(has(2));
	for (int i = 3; i < 12; i++)
		cr_assert(has(i), "block %d was evicted out of order", i);
}

Test(dhash_cache, a_lower_bound_at_open_shrinks)
{
	uint64_t blocks, bytes, evicted;

	for (int i = 0; i < 8; i++)
		put(i);
	dhash_cache_close(ca);
	cr_assert_eq(dhash_cache_open(dir, 3 * ENTRY, &ca), 0);
	dhash_cache_totals(ca, &blocks, &bytes, &evicted);
	cr_assert_eq(blocks, 3);
	cr_assert_eq(bytes, 3000);
	cr_assert(has(5) && has(6) && has(7));
	cr_assert_not(has(4));
}

Test(dhash_cache, refuses_a_block_larger_than_the_cache)
{
	static uint8_t big[20000];
	struct cfs_id k;

	cfs_hash(&k, big, sizeof(big));
	cr_assert_eq(dhash_cache_put(ca, &k, DHASH_KIND_CHASH, big, sizeof(big)), -EFBIG);
}

Test(dhash_cache, one_process_at_a_time)
{
	dhash_cache_t *other;
	cr_assert_eq(dhash_cache_open(dir, 10 * ENTRY, &other), -EBUSY);
}

/* has: answers without reading the bytes, and without making a block young. */
Test(dhash_cache, has_tells_without_refreshing)
{
	uint8_t buf[1000];
	struct cfs_id k0, k1;

	block(0, buf, &k0);
	block(1, buf, &k1);
	cr_assert_not(dhash_cache_has(ca, &k0));
	for (int i = 0; i < 10; i++)
		put(i);
	cr_assert(dhash_cache_has(ca, &k0));
	cr_assert(dhash_cache_has(ca, &k1));
	put(10); /* the oldest goes: block 0, though has() just asked for it */
	cr_assert_not(dhash_cache_has(ca, &k0));
	cr_assert(dhash_cache_has(ca, &k1));
}

/* A block put again is not rewritten (its key names its bytes); one that
 * went bad is deleted, after which a put stores the good bytes. */
Test(dhash_cache, a_second_put_keeps_the_bytes_and_del_forgets)
{
	uint8_t buf[1000], other[1000];
	uint64_t blocks, bytes, evicted;
	struct cfs_id k;
	uint8_t kind, *p;
	size_t len;

	block(3, buf, &k);
	cr_assert_eq(dhash_cache_put(ca, &k, DHASH_KIND_CHASH, buf, sizeof(buf)), 0);
	memset(other, 0x5a, sizeof(other)); /* what a put of rotten bytes would carry */
	cr_assert_eq(dhash_cache_put(ca, &k, DHASH_KIND_CHASH, other, sizeof(other)), 0);
	cr_assert_eq(dhash_cache_get(ca, &k, &kind, &p, &len), 0);
	cr_assert_eq(memcmp(p, buf, len), 0, "a second put rewrote the block");
	free(p);
	cr_assert_eq(dhash_cache_del(ca, &k), 0);
	cr_assert_not(dhash_cache_has(ca, &k));
	cr_assert_eq(dhash_cache_del(ca, &k), -ENOENT);
	dhash_cache_totals(ca, &blocks, &bytes, &evicted);
	cr_assert_eq(blocks, 0);
	cr_assert_eq(bytes, 0);
	put(3);
	cr_assert(has(3));
}
