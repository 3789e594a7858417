/* sfsro-format: the walker against hostile directories — an index that
 * names one child many times is -EPROTO after reading each block at most
 * once, never a listing that multiplies. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfsro-format/sfsro.h"

/* A tiny store that counts the gets of each block. */
#define SLOTS 64
static struct blk { struct cfs_id key; uint8_t *p; size_t len; unsigned gets; } blocks[SLOTS];
static unsigned nblocks;

static struct cfs_id put_dir(const struct sfsro_dir *d)
{
	uint8_t buf[SFSRO_BLOCK_SIZE_MAX];
	size_t len;

	cr_assert(sfsro_dir_encode(d, buf, sizeof(buf), &len) == 0);
	cr_assert(nblocks < SLOTS);
	struct blk *b = &blocks[nblocks++];
	cfs_hash(&b->key, buf, len);
	b->p = xmemdup(buf, len);
	b->len = len;
	b->gets = 0;
	return b->key;
}

static int get(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	for (unsigned i = 0; i < nblocks; i++)
		if (cfs_id_eq(&blocks[i].key, key)) {
			blocks[i].gets++;
			*ret = xmemdup(blocks[i].p, blocks[i].len);
			*ret_len = blocks[i].len;
			return 0;
		}
	return -ENOENT;
}

static const struct sfsro_source src = { get, NULL };

static void setup(void)
{
	cr_assert(cfs_crypto_init() == 0);
	nblocks = 0;
}

static void teardown(void)
{
	for (unsigned i = 0; i < nblocks; i++)
		free(blocks[i].p);
}

TestSuite(sfsro_hostile, .init = setup, .fini = teardown, .timeout = 30);

static char names[256][16];

static struct cfs_bytes nm(const char *s)
{
	return (struct cfs_bytes){ (const uint8_t *)s, strlen(s) };
}

/* A leaf of n symlinks named PREFIX000..; its key. */
static struct cfs_id leaf(const char *prefix, uint32_t n)
{
	struct sfsro_entry e[64];
	static char lnames[4][64][16];
	static unsigned which;
	unsigned w = which++ % 4;

	for (uint32_t i = 0; i < n; i++) {
		snprintf(lnames[w][i], sizeof(lnames[w][i]), "%s%03u", prefix, i);
		e[i] = (struct sfsro_entry){ .name = nm(lnames[w][i]), .type = SFSRO_T_SYMLINK, .size = 1,
		                             .mode = 0777, .target = nm("x") };
	}
	struct sfsro_dir d = { .height = 0, .n = n, .entries = e };
	return put_dir(&d);
}

/* An index of height h with n items, every one naming child; the first
 * item carries first (the child's first name, as an honest index would). */
static struct cfs_id same_child_index(uint32_t h, uint32_t n, const struct cfs_id *child, const char *first)
{
	struct sfsro_dir_child c[256];

	for (uint32_t i = 0; i < n; i++) {
		if (i == 0)
			snprintf(names[i], sizeof(names[i]), "%s", first);
		else
			snprintf(names[i], sizeof(names[i]), "%s.%03u", first, i);
		c[i] = (struct sfsro_dir_child){ nm(names[i]), *child };
	}
	struct sfsro_dir d = { .height = h, .n = n, .children = c };
	return put_dir(&d);
}

static int count(void *arg, const struct sfsro_entry *e)
{
	(*(uint64_t *)arg)++;
	return 0;
}

static unsigned max_gets(void)
{
	unsigned m = 0;
	for (unsigned i = 0; i < nblocks; i++)
		m = blocks[i].gets > m ? blocks[i].gets : m;
	return m;
}

Test(sfsro_hostile, index_naming_one_child_many_times)
{
	/* 3 blocks that a naive walk lists as 100 x 100 x 50 entries */
	struct cfs_id l = leaf("e", 50);
	struct cfs_id i1 = same_child_index(1, 100, &l, "e000");
	struct cfs_id top = same_child_index(2, 100, &i1, "e000");
	struct sfsro_node node;
	uint64_t n = 0;

	cr_assert_eq(sfsro_walk_readdir(&src, &top, count, &n), -EPROTO);
	cr_assert_leq(n, 50, "no entry is listed twice: %lu", (unsigned long)n);
	cr_assert_leq(max_gets(), 1, "each block read at most once");
	for (unsigned i = 0; i < nblocks; i++)
		blocks[i].gets = 0;
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"e000", 4, &node), -EPROTO);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"e007", 4, &node), -EPROTO);
	cr_assert_leq(max_gets(), 2, "a lookup reads a block once (two lookups here)");
}

Test(sfsro_hostile, leaf_named_twice_with_right_first_names)
{
	/* index [a -> L, b -> L]: L begins with "a", so the second item lies */
	struct cfs_id l = leaf("a", 3);
	struct sfsro_dir_child c[2] = { { nm("a000"), l }, { nm("b000"), l } };
	struct sfsro_dir d = { .height = 1, .n = 2, .children = c };
	struct cfs_id top = put_dir(&d);
	struct sfsro_node node;
	uint64_t n = 0;

	cr_assert_eq(sfsro_walk_readdir(&src, &top, count, &n), -EPROTO);
	cr_assert_leq(n, 3);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"b000", 4, &node), -EPROTO);
}

Test(sfsro_hostile, child_outside_its_range)
{
	/* index [a -> La, b -> Lc]: the second leaf starts at "c", not "b" */
	struct cfs_id la = leaf("a", 2), lc = leaf("c", 2);
	struct sfsro_dir_child c[2] = { { nm("a000"), la }, { nm("b000"), lc } };
	struct sfsro_dir d = { .height = 1, .n = 2, .children = c };
	struct cfs_id top = put_dir(&d);
	struct sfsro_node node;
	uint64_t n = 0;

	cr_assert_eq(sfsro_walk_readdir(&src, &top, count, &n), -EPROTO);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"a001", 4, &node), 0,
	             "the honest first child still answers");
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"c000", 4, &node), -EPROTO);
}

Test(sfsro_hostile, honest_index_walks)
{
	struct cfs_id la = leaf("a", 20), lb = leaf("b", 20);
	struct sfsro_dir_child c[2] = { { nm("a000"), la }, { nm("b000"), lb } };
	struct sfsro_dir d = { .height = 1, .n = 2, .children = c };
	struct cfs_id top = put_dir(&d);
	struct sfsro_node node;
	uint64_t n = 0;

	cr_assert_eq(sfsro_walk_readdir(&src, &top, count, &n), 0);
	cr_assert_eq(n, 40);
	cr_assert_eq(max_gets(), 1);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"b019", 4, &node), 0);
	cr_assert_eq(sfsro_walk_lookup(&src, &top, (const uint8_t *)"a020", 4, &node), -ENOENT);
}
