/* blockstore: the engine on a real directory (packs and a LevelDB index). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blockstore/internal.h"

static char dir[64];
static bstore_t *bs;
static const struct bstore_config durable = { .mode = BSTORE_DURABLE, .pack_max = 64 << 10 };

/* A fresh directory for a store, in buf (64 bytes). */
static void fresh_dir(char *buf)
{
	snprintf(buf, 64, "/tmp/cfs-unit-bstore.XXXXXX"); /* mkdtemp's template */
	cr_assert_not_null(mkdtemp(buf));
}

static void setup(void)
{
	fresh_dir(dir);
	cfs_log_set_level(CFS_LOG_ERROR);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
}

static void teardown(void)
{
	char cmd[128];
	bstore_close(bs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(bstore, .init = setup, .fini = teardown);

/* Block i: 1000 + i bytes, its key their hash. */
static uint8_t *block(int i, struct cfs_id *key, uint32_t *len)
{
	*len = 1000 + (uint32_t)i;
	uint8_t *p = xmalloc(*len);
	for (uint32_t j = 0; j < *len; j++)
		p[j] = (uint8_t)(i * 31 + j);
	cfs_hash(key, p, *len);
	return p;
}

static int put_range(bstore_t *s, int lo, int hi, uint64_t lease)
{
	int n = hi - lo, r;
	struct bstore_op *ops = xcalloc((size_t)n, sizeof(*ops));
	uint8_t **data = xcalloc((size_t)n, sizeof(*data));

	for (int i = 0; i < n; i++) {
		ops[i].type = BSTORE_PUT;
		data[i] = block(lo + i, &ops[i].key, &ops[i].meta.len);
		ops[i].data = data[i];
		ops[i].meta.kind = 1;
		ops[i].meta.lease_until = lease;
	}
	r = bstore_apply(s, ops, (size_t)n);
	for (int i = 0; i < n; i++)
		free(data[i]);
	free(data);
	free(ops);
	return r;
}

static void del_range(bstore_t *s, int lo, int hi)
{
	for (int i = lo; i < hi; i++) {
		struct bstore_op op = { .type = BSTORE_DEL };
		uint32_t len;
		free(block(i, &op.key, &len));
		cr_assert_eq(bstore_apply(s, &op, 1), 0);
		cr_assert_eq(op.status, 0);
	}
}

/* Every block in [lo, hi) reads back whole, or none does (present). */
static void expect_range(bstore_t *s, int lo, int hi, bool present)
{
	for (int i = lo; i < hi; i++) {
		struct cfs_id key;
		uint32_t len;
		uint8_t *want = block(i, &key, &len), *got = NULL;
		struct bstore_meta m;
		int r = bstore_get(s, &key, &m, &got);
		if (present) {
			cr_assert_eq(r, 0, "block %d: %d", i, r);
			cr_assert_eq(m.len, len);
			cr_assert_eq(memcmp(got, want, len), 0, "block %d differs", i);
		} else {
			cr_assert_eq(r, -ENOENT, "block %d: %d", i, r);
		}
		free(got);
		free(want);
	}
}

static void reopen(const struct bstore_config *c)
{
	bstore_close(bs);
	cr_assert_eq(bstore_open(dir, c, &bs), 0);
}

static char *pack_file(uint32_t num)
{
	static char p[128];
	snprintf(p, sizeof(p), "%s/packs/%08u.pack", dir, num);
	return p;
}

Test(bstore, put_get_and_reopen)
{
	struct bstore_stats st;

	cr_assert_eq(put_range(bs, 0, 10, 100), 0);
	expect_range(bs, 0, 10, true);
	reopen(&durable);
	expect_range(bs, 0, 10, true);
	expect_range(bs, 10, 12, false);
	bstore_stats(bs, &st);
	cr_assert_eq(st.blocks, 10);
	cr_assert_eq(st.live_bytes, 10 * 1000 + 45);
	cr_assert_eq(st.dead_bytes, 0);
	/* each block's bytes are in a pack, not in the index */
	cr_assert_geq(st.disk_bytes, st.live_bytes);
}

Test(bstore, set_and_del_and_replace)
{
	struct bstore_op op = { .type = BSTORE_SET };
	struct bstore_meta m;
	struct bstore_stats st;
	uint32_t len;

	cr_assert_eq(put_range(bs, 0, 3, 100), 0);
	free(block(1, &op.key, &len));
	op.meta.kind = 1;
	op.meta.lease_until = 500;
	op.meta.seq = 7;
	cr_assert_eq(bstore_apply(bs, &op, 1), 0);
	cr_assert_eq(bstore_get(bs, &op.key, &m, NULL), 0);
	cr_assert_eq(m.lease_until, 500);
	cr_assert_eq(m.seq, 7);
	cr_assert_eq(m.len, len, "a SET keeps the bytes");
	expect_range(bs, 1, 2, true);
	/* a SET of an absent key is refused alone */
	struct bstore_op miss[2] = { { .type = BSTORE_SET }, { .type = BSTORE_DEL } };
	miss[0].key.b[0] = 0xee;
	miss[1].key = op.key;
	cr_assert_eq(bstore_apply(bs, miss, 2), 0);
	cr_assert_eq(miss[0].status, -ENOENT);
	cr_assert_eq(miss[1].status, 0);
	expect_range(bs, 1, 2, false);
	bstore_stats(bs, &st);
	cr_assert_eq(st.blocks, 2);
	cr_assert_eq(st.dead_bytes, BSTORE__ENTRY_HDR + 1001);
	/* a PUT of a present key replaces it: the old bytes are dead */
	cr_assert_eq(put_range(bs, 0, 1, 100), 0);
	bstore_stats(bs, &st);
	cr_assert_eq(st.blocks, 2);
	cr_assert_eq(st.dead_bytes, 2 * BSTORE__ENTRY_HDR + 1001 + 1000);
}

Test(bstore, leases_are_indexed_in_order)
{
	struct cfs_id keys[8];
	uint64_t ends[8];

	cr_assert_eq(put_range(bs, 0, 2, 300), 0);
	cr_assert_eq(put_range(bs, 2, 4, 100), 0);
	cr_assert_eq(put_range(bs, 4, 5, 200), 0);
	cr_assert_eq(bstore_expiring(bs, 150, NULL, NULL, 8), 2);
	cr_assert_eq(bstore_expiring(bs, 1000, keys, ends, 8), 5);
	cr_assert_eq(ends[0], 100);
	cr_assert_eq(ends[2], 200);
	cr_assert_eq(ends[4], 300);
	/* a SET moves a key's lease entry */
	struct bstore_op op = { .type = BSTORE_SET, .key = keys[0] };
	op.meta.lease_until = 400;
	cr_assert_eq(bstore_apply(bs, &op, 1), 0);
	cr_assert_eq(bstore_expiring(bs, 150, NULL, NULL, 8), 1);
	cr_assert_eq(bstore_expiring(bs, 1000, NULL, NULL, 8), 5);
}

Test(bstore, scan_and_list_in_key_order)
{
	struct cfs_id keys[64], lo = { { 0 } }, hi;
	struct bstore_meta metas[64];
	uint32_t n;
	bool more;

	memset(hi.b, 0xff, sizeof(hi.b));
	cr_assert_eq(put_range(bs, 0, 20, 100), 0);
	cr_assert_eq(bstore_scan(bs, &lo, &hi, keys, metas, 64, &n), 0);
	cr_assert_eq(n, 20);
	for (uint32_t i = 1; i < n; i++)
		cr_assert_lt(cfs_id_cmp(&keys[i - 1], &keys[i]), 0);
	cr_assert_geq(metas[0].len, 1000);
	/* (keys[15], keys[4]] wraps: keys 16..19 then 0..4 */
	struct cfs_id from = keys[15], to = keys[4], all[20];
	memcpy(all, keys, sizeof(all));
	cr_assert_eq(bstore_scan(bs, &from, &to, keys, NULL, 64, &n), 0);
	cr_assert_eq(n, 9);
	cr_assert(cfs_id_eq(&keys[0], &all[16]));
	cr_assert(cfs_id_eq(&keys[8], &all[4]));
	cr_assert_eq(bstore_list(bs, NULL, keys, NULL, 8, &more), 8);
	cr_assert(more);
	cr_assert_eq(bstore_list(bs, &keys[7], keys, NULL, 64, &more), 12);
	cr_assert(!more);
}

struct seen {
	struct cfs_id keys[3000];
	uint64_t n, stop_at;
};

static bool see(void *arg, const struct cfs_id *key, const struct bstore_meta *m)
{
	struct seen *v = arg;

	cr_assert_geq(m->len, 1000);
	v->keys[v->n++] = *key;
	return v->n != v->stop_at;
}

/* each pages through bstore_list (1,024 a page): 2,500 records cross two
 * page ends, each once, in order; false from the callback stops it. */
Test(bstore, each_visits_every_record_once_in_order_and_stops)
{
	static struct seen v;

	cr_assert_eq(put_range(bs, 0, 2500, 100), 0);
	cr_assert_eq(bstore_each(bs, see, &v), 2500);
	cr_assert_eq(v.n, 2500);
	for (uint64_t i = 1; i < v.n; i++)
		cr_assert_lt(cfs_id_cmp(&v.keys[i - 1], &v.keys[i]), 0);
	v = (struct seen){ .stop_at = 1025 };
	cr_assert_eq(bstore_each(bs, see, &v), 1025);
	cr_assert_eq(v.n, 1025);
}

Test(bstore, compaction_reclaims_dead_bytes_and_keeps_live_ones)
{
	struct bstore_stats before, after;

	/* 64 KiB packs: 200 blocks fill a few */
	cr_assert_eq(put_range(bs, 0, 100, 100), 0);
	cr_assert_eq(put_range(bs, 100, 200, 100), 0);
	for (int i = 0; i < 200; i += 50)
		cr_assert_eq(put_range(bs, 200 + i, 250 + i, 100), 0);
	del_range(bs, 0, 180); /* the first packs are mostly dead */
	bstore_stats(bs, &before);
	cr_assert_gt(before.dead_bytes, 150000);
	int steps = 0;
	while (bstore_compact_step(bs, 32 << 10) && steps < 1000)
		steps++;
	cr_assert_lt(steps, 1000);
	bstore_stats(bs, &after);
	cr_assert_gt(after.compactions, 0);
	cr_assert_lt(after.dead_bytes, before.dead_bytes / 4, "dead %lu -> %lu",
	             (unsigned long)before.dead_bytes, (unsigned long)after.dead_bytes);
	cr_assert_lt(after.disk_bytes, before.disk_bytes);
	cr_assert_eq(after.blocks, 220);
	expect_range(bs, 180, 400, true);
	expect_range(bs, 0, 180, false);
	reopen(&durable);
	expect_range(bs, 180, 400, true);
	bstore_stats(bs, &after);
	cr_assert_eq(after.blocks, 220);
}

Test(bstore, compaction_leaves_a_block_replaced_meanwhile)
{
	struct bstore_stats st;

	cr_assert_eq(put_range(bs, 0, 60, 100), 0);
	cr_assert_eq(put_range(bs, 60, 120, 100), 0); /* a second pack: the first is not active */
	del_range(bs, 0, 50);
	cr_assert(bstore_compact_step(bs, 4000)); /* a little of the first pack */
	cr_assert_eq(put_range(bs, 55, 60, 900), 0); /* replaced while the pack is read */
	while (bstore_compact_step(bs, 1 << 20))
		;
	expect_range(bs, 50, 120, true);
	struct cfs_id key;
	struct bstore_meta m;
	uint32_t len;
	free(block(57, &key, &len));
	cr_assert_eq(bstore_get(bs, &key, &m, NULL), 0);
	cr_assert_eq(m.lease_until, 900);
	bstore_stats(bs, &st);
	cr_assert_eq(st.blocks, 70);
}

Test(bstore, a_torn_tail_is_cut_and_a_record_past_the_end_dropped)
{
	struct bstore_stats st;
	struct stat sb;

	cr_assert_eq(put_range(bs, 0, 5, 100), 0);
	bstore_close(bs);
	bs = NULL;
	/* a crash during the next commit: half an entry after the last one */
	cr_assert_eq(stat(pack_file(1), &sb), 0);
	off_t end = sb.st_size;
	int fd = open(pack_file(1), O_WRONLY | O_APPEND);
	uint8_t junk[700] = { 'C', 'F', 'S', 'B' };
	cr_assert_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
	cr_assert_eq(stat(pack_file(1), &sb), 0);
	cr_assert_eq(sb.st_size, end, "the torn tail is cut");
	bstore_stats(bs, &st);
	cr_assert_eq(st.torn_cut, 700);
	expect_range(bs, 0, 5, true);
	bstore_close(bs);
	bs = NULL;
	/* a pack cut short in the middle of the last block */
	cr_assert_eq(truncate(pack_file(1), end - 10), 0);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
	bstore_stats(bs, &st);
	cr_assert_eq(st.records_dropped, 1);
	cr_assert_eq(st.blocks, 4);
	expect_range(bs, 0, 4, true);
	expect_range(bs, 4, 5, false);
}

Test(bstore, a_damaged_entry_is_reported_never_served)
{
	struct cfs_id key;
	struct bstore_meta m;
	uint8_t *got = NULL;
	uint32_t len;

	cr_assert_eq(put_range(bs, 0, 3, 100), 0);
	/* flip a byte in the header of the second entry */
	int fd = open(pack_file(1), O_RDWR);
	uint8_t b;
	off_t at = BSTORE__PACK_HDR + BSTORE__ENTRY_HDR + 1000 + 20;
	cr_assert_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x40;
	cr_assert_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
	free(block(1, &key, &len));
	cr_assert_eq(bstore_get(bs, &key, &m, &got), -EUCLEAN);
	cr_assert_null(got);
	expect_range(bs, 0, 1, true);
	expect_range(bs, 2, 3, true);
	struct bstore_op del = { .type = BSTORE_DEL, .key = key };
	cr_assert_eq(bstore_apply(bs, &del, 1), 0);
	cr_assert_eq(bstore_get(bs, &key, &m, NULL), -ENOENT);
}

Test(bstore, another_format_is_refused)
{
	char path[128];

	bstore_close(bs);
	bs = NULL;
	snprintf(path, sizeof(path), "%s/FORMAT", dir);
	cr_assert_eq(cfs_write_file_atomic(path, "cfs-blockstore 9\n", 17, 0644), 0);
	cr_assert_eq(bstore_open(dir, &durable, &bs), -EPROTO);
	cr_assert_null(bs);
	/* an old store: LevelDB files at the top */
	char old[80];
	snprintf(old, sizeof(old), "%s/old", dir);
	cr_assert_eq(mkdir(old, 0700), 0);
	snprintf(path, sizeof(path), "%s/CURRENT", old);
	cr_assert_eq(cfs_write_file_atomic(path, "MANIFEST-000001\n", 16, 0644), 0);
	cr_assert_eq(bstore_open(old, &durable, &bs), -EPROTO);
	/* ... which a cache just discards */
	struct bstore_config cache = { .mode = BSTORE_CACHE, .cap_bytes = 1 << 20 };
	cr_assert_eq(bstore_open(old, &cache, &bs), 0);
	cr_assert_neq(access(path, F_OK), 0);
	bstore_close(bs);
	snprintf(path, sizeof(path), "%s/FORMAT", dir);
	cr_assert_eq(cfs_write_file_atomic(path, "cfs-blockstore 1\n", 17, 0644), 0);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
}

Test(bstore, a_second_process_is_refused)
{
	bstore_t *other = NULL;
	cr_assert_eq(bstore_open(dir, &durable, &other), -EBUSY);
}

Test(bstore, a_cache_holds_its_bound_on_disk_and_keeps_hot_blocks)
{
	struct bstore_config c = { .mode = BSTORE_CACHE, .cap_bytes = 40 << 10 };
	struct bstore_stats st;
	char sub[96];
	bstore_t *ca;

	snprintf(sub, sizeof(sub), "%s/cache", dir);
	cr_assert_eq(bstore_open(sub, &c, &ca), 0);
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(put_range(ca, i, i + 1, 0), 0);
		if (i >= 1) /* block 0 is used all the time */
			expect_range(ca, 0, 1, true);
		bstore_stats(ca, &st);
		cr_assert_leq(st.disk_bytes, c.cap_bytes, "%lu on disk at %d", (unsigned long)st.disk_bytes, i);
	}
	cr_assert_gt(st.evicted, 100);
	expect_range(ca, 0, 1, true);
	expect_range(ca, 199, 200, true);
	expect_range(ca, 1, 2, false);
	bstore_trim(ca, 8 << 10);
	bstore_stats(ca, &st);
	cr_assert_leq(st.disk_bytes, 8 << 10);
	bstore_close(ca);
}

Test(bstore, the_record_codec_round_trips_and_refuses_junk)
{
	struct bstore__rec r = { .pack = 3, .off = 4096, .tick = 9 }, back;
	uint8_t v[BSTORE__REC_BYTES];

	r.meta = (struct bstore_meta){ .kind = 2, .seq = 5, .lease_until = 77, .len = 8192 };
	r.meta.owner[15] = 1;
	bstore__rec_encode(v, &r);
	cr_assert_eq(bstore__rec_decode(v, sizeof(v), &back), 0);
	cr_assert_eq(memcmp(&back.meta, &r.meta, sizeof(r.meta)), 0);
	cr_assert_eq(back.pack, 3);
	cr_assert_eq(back.off, 4096);
	cr_assert_eq(back.tick, 9);
	cr_assert_eq(bstore__rec_decode(v, sizeof(v) - 1, &back), -EINVAL);
	v[0] = 2;
	cr_assert_eq(bstore__rec_decode(v, sizeof(v), &back), -EINVAL);

	uint8_t e[BSTORE__ENTRY_HDR + 10];
	struct cfs_id k = { { 7 } }, kk;
	struct bstore_meta m = { .kind = 1, .seq = 3, .lease_until = 99, .len = 10 }, mm;
	m.owner[3] = 4;
	bstore__entry_header(e, &k, &m);
	cr_assert_eq(bstore__entry_parse(e, sizeof(e), &kk, &mm), 1);
	cr_assert(cfs_id_eq(&k, &kk));
	cr_assert_eq(memcmp(&m, &mm, sizeof(m)), 0);
	cr_assert_eq(bstore__entry_parse(e, sizeof(e) - 1, &kk, &mm), 0, "cut short");
	e[9] ^= 1;
	cr_assert_eq(bstore__entry_parse(e, sizeof(e), &kk, &mm), -EINVAL);
}

/* Puts are acknowledged once their entries are flushed, their records
 * written but not flushed. A crash of the machine that loses those
 * records (here: the index put back to a copy taken before them) loses
 * no put: the next open indexes them again from the packs, and a block
 * dropped before (a flushed write) stays dropped. */
Test(bstore, puts_whose_records_were_lost_are_indexed_again)
{
	char cmd[256];
	struct bstore_stats st;

	cr_assert_eq(put_range(bs, 0, 10, 100), 0);
	del_range(bs, 0, 2);   /* flushed, with the head past blocks 0..9 */
	reopen(&durable);
	snprintf(cmd, sizeof(cmd), "cp -a %s/db %s/db.before", dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(put_range(bs, 10, 30, 100), 0); /* not flushed in the index */
	cr_assert_eq(put_range(bs, 5, 6, 500), 0);   /* a longer lease for one, likewise */
	bstore_close(bs);
	bs = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s/db && mv %s/db.before %s/db", dir, dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
	bstore_stats(bs, &st);
	cr_assert_eq(st.replayed, 21);
	cr_assert_eq(st.blocks, 28);
	expect_range(bs, 2, 30, true);
	expect_range(bs, 0, 2, false);
	struct cfs_id key;
	struct bstore_meta m;
	uint32_t len;
	free(block(5, &key, &len));
	cr_assert_eq(bstore_get(bs, &key, &m, NULL), 0);
	cr_assert_eq(m.lease_until, 500);
	cr_assert_eq(bstore_expiring(bs, 200, NULL, NULL, 100), 27, "the lease index follows");
	reopen(&durable); /* the head moved: nothing again */
	bstore_stats(bs, &st);
	cr_assert_eq(st.replayed, 0);
	cr_assert_eq(st.blocks, 28);
}

/* A pack number used again after the head's pack was deleted would let
 * the flushed head (the old pack's end) skip the new pack's first bytes
 * in a replay, and an acknowledged put would be lost in a machine crash. */
Test(bstore, a_pack_number_is_never_used_twice)
{
	char cmd[256];
	cr_assert_eq(put_range(bs, 0, 1, 100), 0);   /* pack 1 at 16 */
	del_range(bs, 0, 1);                         /* flushed: head (1, 1096) */
	reopen(&durable);                            /* cut_tails deletes pack 1 */
	cr_assert_eq(access(pack_file(1), F_OK), -1);
	snprintf(cmd, sizeof(cmd), "cp -a %s/db %s/db.before", dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(put_range(bs, 1, 2, 100), 0);   /* acknowledged: in pack 2, flushed */
	cr_assert_neq(access(pack_file(1), F_OK), 0, "the number was used again");
	bstore_close(bs);
	bs = NULL;
	/* the machine crashes: the index's unflushed writes are lost */
	snprintf(cmd, sizeof(cmd), "rm -rf %s/db && mv %s/db.before %s/db", dir, dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
	expect_range(bs, 1, 2, true); 
}

/* the same via compaction deleting the newest pack (live 0) while
 * no pack is active yet in this process. */
Test(bstore, nor_after_compaction_deleted_the_newest)
{
	char cmd[256];
	cr_assert_eq(put_range(bs, 0, 10, 100), 0);
	reopen(&durable);
	del_range(bs, 0, 10);                        /* pack 1 all dead; head (1, end) */
	while (bstore_compact_step(bs, 1 << 20))
		;
	cr_assert_eq(access(pack_file(1), F_OK), -1, "compaction deleted pack 1");
	snprintf(cmd, sizeof(cmd), "cp -a %s/db %s/db.before", dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(put_range(bs, 20, 25, 100), 0); /* acknowledged, into pack 2 */
	bstore_close(bs);
	bs = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s/db && mv %s/db.before %s/db", dir, dir, dir);
	cr_assert_eq(system(cmd), 0);
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
	expect_range(bs, 20, 25, true);
}

/* Trimming a cache below its young blocks ends: blocks copied forward by
 * this call are not copied again. */
Test(bstore, a_cache_trimmed_below_its_young_blocks_empties, .timeout = 5)
{
	struct bstore_config c = { .mode = BSTORE_CACHE, .cap_bytes = 1 << 20 };
	char sub[96];
	bstore_t *ca;

	snprintf(sub, sizeof(sub), "%s/cache", dir);
	cr_assert_eq(bstore_open(sub, &c, &ca), 0);
	cr_assert_eq(put_range(ca, 0, 1, 0), 0);
	bstore_trim(ca, 0);
	struct bstore_stats st;
	bstore_stats(ca, &st);
	cr_assert_eq(st.disk_bytes, 0);
	bstore_close(ca);
}

/* A cache bound under two blocks: the second put returns. */
Test(bstore, a_cache_smaller_than_two_blocks_takes_puts, .timeout = 5)
{
	struct bstore_config c = { .mode = BSTORE_CACHE, .cap_bytes = 2000 };
	char sub[96];
	bstore_t *ca;

	snprintf(sub, sizeof(sub), "%s/cache", dir);
	cr_assert_eq(bstore_open(sub, &c, &ca), 0);
	cr_assert_eq(put_range(ca, 0, 1, 0), 0);
	cr_assert_eq(put_range(ca, 1, 2, 0), 0);
	struct bstore_stats st;
	bstore_stats(ca, &st);
	cr_assert_leq(st.disk_bytes, c.cap_bytes);
	bstore_close(ca);
}

/* A cache put that replaces a block the same apply's eviction drops counts
 * the block's removal once. */
Test(bstore, a_cache_put_replacing_an_evicted_block_counts_once)
{
	struct bstore_config c = { .mode = BSTORE_CACHE, .cap_bytes = 4500 };
	struct bstore_stats st;
	char sub[96];
	bstore_t *ca;

	snprintf(sub, sizeof(sub), "%s/cache", dir);
	cr_assert_eq(bstore_open(sub, &c, &ca), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(put_range(ca, i, i + 1, 0), 0);
	bstore_stats(ca, &st);
	uint64_t before = st.blocks;
	/* block 0 (old, in the oldest pack) put again with another length */
	struct bstore_op op = { .type = BSTORE_PUT };
	uint32_t len;
	uint8_t *p = block(0, &op.key, &len);
	op.data = p;
	op.meta.len = len - 10;
	cr_assert_eq(bstore_apply(ca, &op, 1), 0);
	free(p);
	bstore_stats(ca, &st);
	cr_assert_leq(st.blocks, before);
	uint32_t n = 0; bool more;
	struct cfs_id keys[64];
	n = bstore_list(ca, NULL, keys, NULL, 64, &more);
	cr_assert_eq(st.blocks, n, "stats say %lu blocks, the index holds %u", (unsigned long)st.blocks, n);
	bstore_close(ca);
}

/* Descriptors this process holds open. */
static int open_fds(void)
{
	int n = 0;
	char p[32];
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		n += access(p, F_OK) == 0;
	}
	return n;
}

/* The testbed's thousands of stores in one process: with the indexes in
 * memory a store holds only its packs' descriptors, where one with its
 * index on disk holds LevelDB's four, and a store closed and opened again
 * finds its blocks. (Each test runs in a process of its own, so the
 * process-wide switch reaches no other test.) */
Test(bstore_mem, an_index_in_memory_holds_no_descriptor_and_is_found_again)
{
	char on_disk[64], cmd[160];
	bstore_t *d;

	cfs_log_set_level(CFS_LOG_ERROR);
	fresh_dir(on_disk);
	fresh_dir(dir);
	int base = open_fds();
	cr_assert_eq(bstore_open(on_disk, &durable, &d), 0);
	int disk_index = open_fds() - base;
	bstore_close(d);
	cr_assert_geq(disk_index, 4, "an index on disk held %d descriptors", disk_index);

	bstore_keep_indexes_in_memory();
	base = open_fds();
	cr_assert_eq(bstore_open(dir, &durable, &bs), 0);
	cr_assert_eq(open_fds() - base, 0, "an index in memory holds descriptors");
	cr_assert_eq(put_range(bs, 0, 10, 100), 0);
	expect_range(bs, 0, 10, true);
	/* the pack written and one read: nothing for the index */
	cr_assert_leq(open_fds() - base, 2);
	snprintf(cmd, sizeof(cmd), "test -z \"$(ls %s/db)\"", dir);
	cr_assert_eq(system(cmd), 0, "the index wrote files in %s/db", dir);
	reopen(&durable);
	expect_range(bs, 0, 10, true);
	expect_range(bs, 10, 12, false);
	bstore_close(bs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir, on_disk);
	cr_assert_eq(system(cmd), 0);
}
