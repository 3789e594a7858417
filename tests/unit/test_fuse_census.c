/* cfs-fuse: the census behind statfs, over hand-made directory blocks in a
 * dir: store: files, links and directories counted from the entries, file
 * sizes in 8 KiB blocks rounded up per file, a directory that cannot be
 * listed counted as unreadable without stopping the count, and a newer
 * root counted anew. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockstore/blockstore.h"
#include "cfs-fuse/internal.h"

static char dir[64];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-census.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(cfs_crypto_init(), 0);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(fuse_census, .init = setup, .fini = teardown);

static struct sfsro_entry entry(const char *name, uint8_t type, uint64_t size, const struct cfs_id *key)
{
	struct sfsro_entry e = { .type = type, .size = size, .mode = 0644 };

	e.name.p = (const uint8_t *)name;
	e.name.len = strlen(name);
	if (key)
		e.key = *key;
	else
		memset(&e.key, 0x5a, sizeof(e.key)); /* an inode the census never reads */
	if (type == SFSRO_T_SYMLINK) {
		e.target.p = (const uint8_t *)"b";
		e.target.len = 1;
	}
	return e;
}

/* Encode a one-block directory (entries in name order) into the store. */
static void put_dir(bstore_t *bs, struct sfsro_entry *es, uint32_t n, struct cfs_id *ret)
{
	struct sfsro_dir d = { .height = 0, .n = n, .entries = es };
	uint8_t buf[4096];
	size_t len;

	cr_assert_eq(sfsro_dir_encode(&d, buf, sizeof(buf), &len), 0);
	cfs_hash(ret, buf, len);
	struct bstore_op op = { .type = BSTORE_PUT, .key = *ret,
	                        .meta = { .kind = DHASH_KIND_CHASH, .len = (uint32_t)len }, .data = buf };
	cr_assert_eq(bstore_apply(bs, &op, 1), 0);
}

static void count(cfsfuse_t *fs, struct fs_totals *t)
{
	bool complete = false;

	fs__census_start(fs->census);
	for (int i = 0; i < 10000 && !complete; i++) {
		uv_run(fs->loop, UV_RUN_NOWAIT);
		fs__census_totals(fs->census, t, &complete);
	}
	cr_assert(complete, "the census did not end");
}

Test(fuse_census, counts_entries_bytes_and_blocks)
{
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "dir: store" };
	struct cfs_id sub, top, gone;
	struct fs_totals t;
	uv_loop_t loop;
	bstore_t *bs;

	/* /a (10000 bytes), /d/{b (5 bytes), l -> b}, /gone (a directory
	 * whose block is not in the store) */
	memset(&gone, 0x77, sizeof(gone));
	cr_assert_eq(bstore_open(dir, &cfg, &bs), 0);
	struct sfsro_entry sub_es[] = { entry("b", SFSRO_T_FILE, 5, NULL), entry("l", SFSRO_T_SYMLINK, 1, NULL) };
	put_dir(bs, sub_es, 2, &sub);
	struct sfsro_entry top_es[] = { entry("a", SFSRO_T_FILE, 10000, NULL), entry("d", SFSRO_T_DIR, 2, &sub),
	                                entry("gone", SFSRO_T_DIR, 1, &gone) };
	put_dir(bs, top_es, 3, &top);
	bstore_close(bs);

	cfsfuse_t *fs = xcalloc(1, sizeof(*fs));
	cr_assert_eq(uv_loop_init(&loop), 0);
	fs->loop = &loop;
	/* cfsfuse_options_default's values (it lives with the FUSE ops) */
	fs->o.cache_bytes = 64u << 20;
	fs->o.fetch_timeout_ms = 10000;
	fs->o.max_fetches = 24;
	cr_assert_eq(fs__local_open(&loop, dir, &fs->local), 0);
	fs->blocks = fs__blocks_new(&loop, NULL, fs->local, &fs->o, NULL);
	fs->census = fs__census_new(fs);
	fs->root.seq = 1;
	fs->root.root_dir = top;

	count(fs, &t);
	cr_assert_eq(t.files, 3, "files %lu", (unsigned long)t.files);       /* a, b, l */
	cr_assert_eq(t.dirs, 3, "dirs %lu", (unsigned long)t.dirs);          /* /, d, gone */
	cr_assert_eq(t.unreadable, 1);
	cr_assert_eq(t.bytes, 10005);
	/* in blocks of the default size, each file rounded up: a link has none */
	cr_assert_eq(t.blocks, (10000 + SFSRO_BLOCK_SIZE_DEFAULT - 1) / SFSRO_BLOCK_SIZE_DEFAULT + 1);

	/* a newer root, /d's block: counted anew */
	fs->root.seq = 2;
	fs->root.root_dir = sub;
	count(fs, &t);
	cr_assert_eq(t.files, 2);
	cr_assert_eq(t.dirs, 1);
	cr_assert_eq(t.bytes, 5);
	cr_assert_eq(t.unreadable, 0);

	fs__census_close(fs->census);
	fs__blocks_free(fs->blocks);
	fs__local_free(fs->local);
	uv_run(&loop, UV_RUN_DEFAULT);
	fs__census_free(fs->census);
	cr_assert_eq(uv_loop_close(&loop), 0);
	free(fs);
}
