/* dhash: block checks and the LevelDB store (a real database in a temp dir). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

static char dir[64];
static dhash_store_t *st;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-store.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	cr_assert_eq(dhash_store_open(dir, 0, &st), 0);
}

static void teardown(void)
{
	char cmd[128];
	dhash_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static struct dhash_rec rec_of(const char *s, uint64_t lease, struct cfs_id *key)
{
	struct dhash_rec r = { .kind = DHASH_KIND_CHASH, .lease_until = lease,
	                       .data = (uint8_t *)s, .len = strlen(s) };
	cfs_hash(key, s, strlen(s));
	return r;
}

TestSuite(dhash_store, .init = setup, .fini = teardown);

Test(dhash_store, put_get_survives_reopen)
{
	struct cfs_id k;
	struct dhash_rec r = rec_of("hello block", 1000, &k), got;
	uint64_t blocks, bytes;

	cr_assert_eq(dhash_store_put(st, &k, &r), 0);
	dhash_store_close(st);
	cr_assert_eq(dhash_store_open(dir, 0, &st), 0);
	dhash_store_totals(st, &blocks, &bytes);
	cr_assert_eq(blocks, 1);
	cr_assert_eq(bytes, 11);
	cr_assert_eq(dhash_store_get(st, &k, &got), 0);
	cr_assert_eq(got.len, 11);
	cr_assert_eq(memcmp(got.data, "hello block", 11), 0);
	cr_assert_eq(got.lease_until, 1000);
	free(got.data);
}

Test(dhash_store, leases_extend_never_shorten_and_expire)
{
	struct cfs_id a, b;
	struct dhash_rec ra = rec_of("block a", 100, &a), rb = rec_of("block b", 100, &b), got;
	uint32_t n;

	cr_assert_eq(dhash_store_put(st, &a, &ra), 0);
	cr_assert_eq(dhash_store_put(st, &b, &rb), 0);
	cr_assert_eq(dhash_store_extend(st, &b, 500), 0);
	ra.lease_until = 50; /* a later put with a shorter lease keeps the longer */
	cr_assert_eq(dhash_store_put(st, &a, &ra), 0);
	cr_assert_eq(dhash_store_get(st, &a, &got), 0);
	cr_assert_eq(got.lease_until, 100);
	free(got.data);
	cr_assert_eq(dhash_store_expire(st, 200, 256, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_not(dhash_store_has(st, &a));
	cr_assert(dhash_store_has(st, &b));
	cr_assert_eq(dhash_store_extend(st, &a, 900), -ENOENT);
}

Test(dhash_store, extend_many_in_one_write)
{
	struct cfs_id k[4];
	struct dhash_rec r0 = rec_of("zero", 100, &k[0]), r1 = rec_of("one", 900, &k[1]), got;
	struct dhash_rec r3 = rec_of("three", 100, &k[3]);
	bool found[4];
	uint64_t blocks, bytes, blocks2, bytes2;
	uint32_t n;

	(void)rec_of("two: never stored", 1, &k[2]);
	cr_assert_eq(dhash_store_put(st, &k[0], &r0), 0);
	cr_assert_eq(dhash_store_put(st, &k[1], &r1), 0);
	cr_assert_eq(dhash_store_put(st, &k[3], &r3), 0);
	dhash_store_totals(st, &blocks, &bytes);
	cr_assert_eq(dhash_store_extend_many(st, k, 4, 500, found), 0);
	cr_assert(found[0] && found[1] && !found[2] && found[3]);
	cr_assert_eq(dhash_store_get(st, &k[0], &got), 0);
	cr_assert_eq(got.lease_until, 500);
	free(got.data);
	cr_assert_eq(dhash_store_get(st, &k[1], &got), 0);
	cr_assert_eq(got.lease_until, 900, "a longer lease is kept");
	free(got.data);
	dhash_store_totals(st, &blocks2, &bytes2);
	cr_assert(blocks2 == blocks && bytes2 == bytes, "renewing stores nothing new");
	/* the lease index moved too: nothing ends at 100 any more */
	cr_assert_eq(dhash_store_expire(st, 200, 256, &n), 0);
	cr_assert_eq(n, 0);
	cr_assert_eq(dhash_store_expire(st, 600, 256, &n), 0);
	cr_assert_eq(n, 2);
}

Test(dhash_store, group_commit_and_duplicates)
{
	struct cfs_id keys[3];
	struct dhash_rec recs[3] = { rec_of("one", 10, &keys[0]), rec_of("two", 10, &keys[1]),
	                             rec_of("one", 10, &keys[2]) };
	int status[3];
	uint64_t blocks, bytes;

	cr_assert_eq(dhash_store_put_many(st, keys, recs, 3, status), 0);
	cr_assert(status[0] == 0 && status[1] == 0 && status[2] == 0);
	dhash_store_totals(st, &blocks, &bytes);
	cr_assert_eq(blocks, 2);
	cr_assert_eq(bytes, 6);
}

Test(dhash_store, scan_wraps_the_circle)
{
	struct cfs_id k[4], lo, hi, out[8];
	uint32_t n;

	for (int i = 0; i < 4; i++) {
		memset(&k[i], 0, sizeof(k[i]));
		k[i].b[0] = (uint8_t)(0x10 + 0x40 * i); /* 10 50 90 d0 */
		struct dhash_rec r = { .kind = DHASH_KIND_CHASH, .lease_until = 1, .data = (uint8_t *)"x", .len = 1 };
		cr_assert_eq(dhash_store_put(st, &k[i], &r), 0);
	}
	memset(&lo, 0, sizeof(lo));
	memset(&hi, 0, sizeof(hi));
	lo.b[0] = 0x90; /* (90, 50]: d0, 10, 50 */
	hi.b[0] = 0x50;
	cr_assert_eq(dhash_store_scan(st, &lo, &hi, out, 8, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert(cfs_id_eq(&out[0], &k[3]) && cfs_id_eq(&out[1], &k[0]) && cfs_id_eq(&out[2], &k[1]));
}

Test(dhash_block, verify_refuses_with_distinct_errors)
{
	const char *s = "some bytes";
	struct cfs_id k, other;
	uint64_t seq;

	cr_assert_eq(dhash_block_key(DHASH_KIND_CHASH, (const uint8_t *)s, strlen(s), &k), 0);
	cr_assert_eq(dhash_verify(DHASH_KIND_CHASH, &k, (const uint8_t *)s, strlen(s), &seq), 0);
	other = k;
	other.b[5] ^= 1;
	cr_assert_eq(dhash_verify(DHASH_KIND_CHASH, &other, (const uint8_t *)s, strlen(s), &seq), -EBADMSG);
	cr_assert_eq(dhash_verify(DHASH_KIND_ROOT, &k, (const uint8_t *)s, strlen(s), &seq), -EKEYREJECTED);
	cr_assert_eq(dhash_verify(7, &k, (const uint8_t *)s, strlen(s), &seq), -EINVAL);
}

Test(dhash_store, drop_forgets_block_lease_and_bytes)
{
	struct cfs_id a, b;
	struct dhash_rec ra = rec_of("block a", 100, &a), rb = rec_of("block bb", 100, &b);
	uint64_t blocks, bytes;

	cr_assert_eq(dhash_store_put(st, &a, &ra), 0);
	cr_assert_eq(dhash_store_put(st, &b, &rb), 0);
	cr_assert_eq(dhash_store_drop(st, &a), 0);
	cr_assert_eq(dhash_store_drop(st, &a), -ENOENT);
	cr_assert_not(dhash_store_has(st, &a));
	dhash_store_totals(st, &blocks, &bytes);
	cr_assert_eq(blocks, 1);
	cr_assert_eq(bytes, 8);
	cr_assert_eq(dhash_store_expiring(st, 1000, 10), 1); /* only b's lease entry is left */
	cr_assert(!dhash_store_failed(st, NULL));
}

Test(dhash_store, scan_info_gives_kinds_and_sequences)
{
	struct cfs_id k[2], lo, hi, out[4];
	uint8_t kinds[4];
	uint64_t seqs[4];
	uint32_t n;

	for (int i = 0; i < 2; i++) {
		memset(&k[i], 0, sizeof(k[i]));
		k[i].b[0] = (uint8_t)(0x20 + 0x40 * i);
		struct dhash_rec r = { .kind = (uint8_t)(i ? DHASH_KIND_ROOT : DHASH_KIND_CHASH),
		                       .seq = i ? 7 : 0, .lease_until = 1, .data = (uint8_t *)"x", .len = 1 };
		cr_assert_eq(dhash_store_put(st, &k[i], &r), 0);
	}
	memset(&lo, 0, sizeof(lo));
	memset(&hi, 0, sizeof(hi));
	hi.b[0] = 0xf0;
	cr_assert_eq(dhash_store_scan_info(st, &lo, &hi, out, kinds, seqs, 4, &n), 0);
	cr_assert_eq(n, 2);
	cr_assert(kinds[0] == DHASH_KIND_CHASH && seqs[0] == 0);
	cr_assert(kinds[1] == DHASH_KIND_ROOT && seqs[1] == 7);
}

/* A server with only what the scrub uses: the store, the loop, counters. */
static dhash_server_t *scrub_server(void)
{
	dhash_server_t *s = calloc(1, sizeof(*s));
	s->store = st;
	s->loop = uv_default_loop();
	s->cfg.scrub_ms = 1000;
	return s;
}

Test(dhash_store, a_copy_that_does_not_verify_is_dropped_where_it_is_read)
{
	struct cfs_id good, bad;
	struct dhash_rec rg = rec_of("good bytes", 100, &good), rb = rec_of("rotten bytes", 100, &bad), got;
	dhash_server_t *s = scrub_server();

	rb.data = (uint8_t *)"rotten bytez"; /* stored under the hash of other bytes */
	cr_assert_eq(dhash_store_put(st, &good, &rg), 0);
	cr_assert_eq(dhash_store_put(st, &bad, &rb), 0);
	cr_assert_eq(dhash__scrub_read(s, &good, &got, SCRUB_BY_FETCH), 0);
	free(got.data);
	cr_assert_eq(dhash__scrub_read(s, &bad, &got, SCRUB_BY_PUSH), -ENOENT);
	cr_assert_eq(s->scrub.bad_push, 1);
	cr_assert_eq(s->scrub.dropped, 1);
	cr_assert_not(dhash_store_has(st, &bad));
	cr_assert(dhash_store_has(st, &good));
	free(s);
}

Test(dhash_store, a_scrub_slice_checks_every_block_and_drops_the_bad)
{
	struct cfs_id k[5];
	char text[5][24];
	dhash_server_t *s = scrub_server();

	for (int i = 0; i < 5; i++) {
		snprintf(text[i], sizeof(text[i]), "block %d", i);
		struct dhash_rec r = rec_of(text[i], 100, &k[i]);
		if (i == 3)
			r.data = (uint8_t *)"block X"; /* rot */
		cr_assert_eq(dhash_store_put(st, &k[i], &r), 0);
	}
	dhash__scrub_slice(s); /* the credit since time 0 is capped at one slice: enough here */
	cr_assert_eq(s->scrub.passes, 1);
	cr_assert_eq(s->scrub.blocks, 5);
	cr_assert_eq(s->scrub.bad_scrub, 1);
	cr_assert_eq(s->scrub.dropped, 1);
	cr_assert_not(dhash_store_has(st, &k[3]));
	dhash__scrub_slice(s); /* the next pass waits for its period */
	cr_assert_eq(s->scrub.blocks, 5);
	free(s);
}
