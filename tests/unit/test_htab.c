/* The one hash table: puts, gets, deletes (backward shift), walks, filters. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

Test(htab, empty_table_holds_nothing)
{
	struct cfs_htab t;
	uint64_t k = 7;
	size_t pos = 0;

	cfs_htab_init(&t, sizeof(k), sizeof(uint32_t));
	cr_assert_null(cfs_htab_get(&t, &k));
	cr_assert(!cfs_htab_del(&t, &k, NULL));
	cr_assert(!cfs_htab_next(&t, &pos, NULL, NULL));
	cr_assert_eq(cfs_htab_count(&t), 0);
	cfs_htab_free(&t);
}

Test(htab, put_get_replace)
{
	struct cfs_htab t;
	bool added;

	cfs_htab_init(&t, sizeof(uint64_t), sizeof(uint64_t));
	for (uint64_t k = 0; k < 5000; k++) {
		uint64_t *v = cfs_htab_put(&t, &k, &added);
		cr_assert(added);
		cr_assert_eq(*v, 0, "a new value starts zeroed");
		cr_assert_eq((uintptr_t)v % 8, 0, "values are aligned");
		*v = k * 3;
	}
	cr_assert_eq(cfs_htab_count(&t), 5000);
	for (uint64_t k = 0; k < 5000; k++) {
		uint64_t *v = cfs_htab_get(&t, &k);
		cr_assert_not_null(v, "key %lu", (unsigned long)k);
		cr_assert_eq(*v, k * 3);
	}
	uint64_t k = 42;
	*(uint64_t *)cfs_htab_put(&t, &k, &added) = 1;
	cr_assert(!added, "a second put finds the entry");
	cr_assert_eq(*(uint64_t *)cfs_htab_get(&t, &k), 1);
	cr_assert_eq(cfs_htab_count(&t), 5000);
	k = 5000;
	cr_assert_null(cfs_htab_get(&t, &k));
	cr_assert_leq(4 * t.n, 3 * t.cap, "at most 3/4 full");
	cfs_htab_free(&t);
}

/* Deleting in a crowded table: every survivor is still found (the
 * backward shift never strands an entry behind a hole). */
Test(htab, delete_keeps_probe_runs_whole)
{
	struct cfs_htab t;
	enum { N = 20000 };
	static bool in[N];
	struct cfs_rng rng;

	cfs_rng_seed(&rng, 5);
	cfs_htab_init(&t, sizeof(uint32_t), sizeof(uint32_t));
	for (uint32_t round = 0; round < 200000; round++) {
		uint32_t k = (uint32_t)(cfs_rng_next(&rng) % N);
		if (in[k]) {
			uint32_t v = 0;
			cr_assert(cfs_htab_del(&t, &k, &v));
			cr_assert_eq(v, k + 1, "del hands back the value");
			in[k] = false;
		} else {
			*(uint32_t *)cfs_htab_put(&t, &k, NULL) = k + 1;
			in[k] = true;
		}
	}
	size_t n = 0;
	for (uint32_t k = 0; k < N; k++) {
		uint32_t *v = cfs_htab_get(&t, &k);
		cr_assert_eq(v != NULL, in[k], "key %u", k);
		if (v)
			cr_assert_eq(*v, k + 1);
		n += in[k];
	}
	cr_assert_eq(cfs_htab_count(&t), n);
	cfs_htab_free(&t);
}

Test(htab, walk_sees_each_entry_once)
{
	struct cfs_htab t;
	uint8_t seen[300] = { 0 };
	size_t pos = 0;
	const void *k;
	void *v;

	cfs_htab_init(&t, 3, 2); /* odd sizes: 3-byte keys, 2-byte values */
	for (unsigned i = 0; i < 300; i++) {
		uint8_t key[3] = { (uint8_t)i, (uint8_t)(i >> 8), 0xaa };
		*(uint16_t *)cfs_htab_put(&t, key, NULL) = (uint16_t)i;
	}
	while (cfs_htab_next(&t, &pos, &k, &v)) {
		uint16_t i = *(uint16_t *)v;
		cr_assert_lt(i, 300);
		cr_assert_eq(((const uint8_t *)k)[0], (uint8_t)i);
		seen[i]++;
	}
	for (unsigned i = 0; i < 300; i++)
		cr_assert_eq(seen[i], 1, "entry %u seen %u times", i, seen[i]);
	cfs_htab_clear(&t);
	pos = 0;
	cr_assert(!cfs_htab_next(&t, &pos, NULL, NULL));
	cr_assert_eq(cfs_htab_count(&t), 0);
	cfs_htab_free(&t);
}

static bool keep_even(void *ctx, const void *key, void *val)
{
	(*(unsigned *)ctx)++;
	return *(const uint64_t *)key % 2 == 0;
}

Test(htab, filter_drops_what_keep_refuses)
{
	struct cfs_htab t;
	unsigned asked = 0;

	cfs_htab_init(&t, sizeof(uint64_t), sizeof(struct cfs_id));
	for (uint64_t k = 0; k < 1000; k++)
		cfs_hash(cfs_htab_put(&t, &k, NULL), &k, sizeof(k));
	cr_assert_eq(cfs_htab_filter(&t, keep_even, &asked), 500);
	cr_assert_eq(asked, 1000);
	cr_assert_eq(cfs_htab_count(&t), 500);
	for (uint64_t k = 0; k < 1000; k++) {
		struct cfs_id *v = cfs_htab_get(&t, &k), want;
		cr_assert_eq(v != NULL, k % 2 == 0);
		cfs_hash(&want, &k, sizeof(k));
		if (v)
			cr_assert(cfs_id_eq(v, &want), "values survive the filter");
	}
	cfs_htab_free(&t);
	cr_assert_eq(cfs_htab_filter(&t, keep_even, &asked), 0, "an empty table filters to nothing");
}

Test(htab, hash_depends_on_every_byte)
{
	uint8_t a[40] = { 0 }, b[40] = { 0 };

	cr_assert_eq(cfs_hash64(a, 40), cfs_hash64(b, 40));
	for (int i = 0; i < 40; i++) {
		b[i] = 1;
		cr_assert_neq(cfs_hash64(a, 40), cfs_hash64(b, 40), "byte %d", i);
		b[i] = 0;
	}
	cr_assert_neq(cfs_hash64(a, 39), cfs_hash64(a, 40), "the length counts");
}
