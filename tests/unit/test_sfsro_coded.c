/* sfsro-format: erasure-coded data blocks (coded.c): encode, every erasure
 * pattern of small codes decoded, fragments checked one by one. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sfsro-format/sfsro.h"

TestSuite(sfsro_coded);

struct coded {
	uint32_t m, n;
	size_t len, flen;
	uint8_t *block;
	uint8_t *frag[SFSRO_CODE_N_MAX];
	struct cfs_id key;
};

static void encode(struct coded *c, uint32_t m, uint32_t n, size_t len, uint32_t seed)
{
	c->m = m;
	c->n = n;
	c->len = len;
	c->flen = sfsro_frag_len((uint32_t)len, m, n);
	c->block = malloc(len);
	srand(seed);
	for (size_t i = 0; i < len; i++)
		c->block[i] = (uint8_t)rand();
	for (uint32_t i = 0; i < n; i++)
		c->frag[i] = malloc(c->flen);
	cr_assert_eq(sfsro_code_encode(c->block, len, m, n, &c->key, c->frag), 0);
}

static void release(struct coded *c)
{
	free(c->block);
	for (uint32_t i = 0; i < c->n; i++)
		free(c->frag[i]);
}

/* Decode from the fragments in mask; 0 and the block, or the error. */
static int decode_mask(const struct coded *c, uint32_t mask)
{
	const uint8_t *f[SFSRO_CODE_N_MAX];
	size_t lens[SFSRO_CODE_N_MAX], got = 0;
	uint32_t k = 0;
	uint8_t *out = malloc(c->len);

	for (uint32_t i = 0; i < c->n; i++)
		if (mask & (1u << i)) {
			f[k] = c->frag[i];
			lens[k++] = c->flen;
		}
	int r = sfsro_code_decode(&c->key, f, lens, k, out, c->len, &got);
	if (r == 0) {
		cr_assert_eq(got, c->len);
		cr_assert_eq(memcmp(out, c->block, c->len), 0, "pattern %#x decoded other bytes", mask);
	}
	free(out);
	return r;
}

Test(sfsro_coded, every_erasure_pattern_of_small_codes)
{
	static const uint32_t codes[][2] = { { 1, 2 }, { 2, 3 }, { 2, 4 }, { 3, 5 }, { 4, 6 }, { 4, 8 }, { 4, 12 } };
	static const size_t lens[] = { 1, 3, 1000, 4097, 65536 };
	uint32_t patterns = 0;

	for (size_t ci = 0; ci < sizeof(codes) / sizeof(codes[0]); ci++)
		for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
			struct coded c;
			uint32_t m = codes[ci][0], n = codes[ci][1];
			encode(&c, m, n, lens[li], (uint32_t)(ci * 10 + li));
			for (uint32_t mask = 0; mask < (1u << n); mask++) {
				int have = __builtin_popcount(mask);
				if (have < (int)m) {
					cr_assert_eq(decode_mask(&c, mask), -ENODATA);
					continue;
				}
				cr_assert_eq(decode_mask(&c, mask), 0, "m=%u n=%u len=%zu mask=%#x", m, n,
				             lens[li], mask);
				patterns++;
			}
			release(&c);
		}
	cr_assert_gt(patterns, 1000);
}

Test(sfsro_coded, wide_codes_from_random_fragments)
{
	static const uint32_t codes[][2] = { { 8, 24 }, { 8, 32 }, { 16, 32 }, { 7, 14 } };

	srand(7);
	for (size_t ci = 0; ci < 4; ci++) {
		struct coded c;
		uint32_t m = codes[ci][0], n = codes[ci][1];
		encode(&c, m, n, 65536, (uint32_t)ci);
		for (int t = 0; t < 200; t++) {
			uint32_t mask = 0;
			while ((uint32_t)__builtin_popcount(mask) < m)
				mask |= 1u << (rand() % (int)n);
			cr_assert_eq(decode_mask(&c, mask), 0);
		}
		release(&c);
	}
}

/* The code is systematic: the first m fragments are the block. */
Test(sfsro_coded, data_fragments_are_the_block)
{
	struct coded c;
	struct sfsro_frag f;

	encode(&c, 4, 12, 10000, 3);
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_eq(sfsro_frag_verify(&c.key, c.frag[i], c.flen, &f), 0);
		cr_assert_eq(f.index, i);
		cr_assert_eq(f.data_len, 2500);
		cr_assert_eq(memcmp(f.data, c.block + i * 2500, 2500), 0);
	}
	release(&c);
}

/* Every fragment names its block's key by itself (what a server storing
 * one without being told the key, or dhash_block_key, computes). */
Test(sfsro_coded, each_fragment_names_the_key)
{
	struct coded c;
	struct cfs_id k;
	struct sfsro_frag f;

	encode(&c, 3, 7, 4000, 5);
	for (uint32_t i = 0; i < 7; i++) {
		cr_assert_eq(sfsro_frag_key(c.frag[i], c.flen, &k, &f), 0);
		cr_assert(cfs_id_eq(&k, &c.key));
		cr_assert_eq(f.index, i);
	}
	cr_assert_eq(sfsro_frag_key(c.frag[0], c.flen - 1, &k, NULL), -EPROTO);
	c.frag[2][SFSRO_FRAG_HDR] ^= 1;
	cr_assert_eq(sfsro_frag_key(c.frag[2], c.flen, &k, NULL), 0);
	cr_assert(!cfs_id_eq(&k, &c.key), "a changed byte names another key");
	release(&c);
}

Test(sfsro_coded, a_bad_fragment_is_caught_alone)
{
	struct coded c;
	struct cfs_id other;

	encode(&c, 4, 12, 5000, 4);
	for (uint32_t i = 0; i < 12; i++)
		cr_assert_eq(sfsro_frag_verify(&c.key, c.frag[i], c.flen, NULL), 0);
	/* every byte of a fragment matters: header, data, proof */
	for (size_t at = 0; at < c.flen; at += 7) {
		c.frag[5][at] ^= 0x40;
		int r = sfsro_frag_verify(&c.key, c.frag[5], c.flen, NULL);
		cr_assert(r == -EBADMSG || r == -EPROTO, "byte %zu flipped: %d", at, r);
		c.frag[5][at] ^= 0x40;
	}
	cr_assert_eq(sfsro_frag_verify(&c.key, c.frag[5], c.flen - 1, NULL), -EPROTO);
	/* another block's key */
	other = c.key;
	other.b[0] ^= 1;
	cr_assert_eq(sfsro_frag_verify(&other, c.frag[5], c.flen, NULL), -EBADMSG);
	/* a fragment moved to another index does not pass as that one */
	c.frag[6][3] = 7;
	cr_assert_eq(sfsro_frag_verify(&c.key, c.frag[6], c.flen, NULL), -EBADMSG);
	c.frag[6][3] = 6;
	release(&c);
}

/* A hostile holder costs one fragment: with one more good one the block
 * comes back; with exactly m and one bad, the decode fails, never wrong. */
Test(sfsro_coded, decode_skips_bad_fragments)
{
	struct coded c;

	encode(&c, 4, 12, 65536, 5);
	c.frag[1][SFSRO_FRAG_HDR + 10] ^= 1;
	cr_assert_eq(decode_mask(&c, 0x1f), 0);           /* 0..4: 1 is bad, 4 others */
	cr_assert_eq(decode_mask(&c, 0x0f), -EBADMSG);    /* 0..3 with 1 bad */
	release(&c);
}

Test(sfsro_coded, codes_outside_the_limits)
{
	uint8_t block[16] = { 1 }, buf[4096], *f[SFSRO_CODE_N_MAX];
	struct cfs_id k;

	for (int i = 0; i < SFSRO_CODE_N_MAX; i++)
		f[i] = buf;
	cr_assert_eq(sfsro_code_encode(block, 16, 0, 4, &k, f), -EINVAL);
	cr_assert_eq(sfsro_code_encode(block, 16, 4, 4, &k, f), -EINVAL);
	cr_assert_eq(sfsro_code_encode(block, 16, 4, 33, &k, f), -EINVAL);
	cr_assert_eq(sfsro_code_encode(block, 16, 17, 32, &k, f), -EINVAL);
	cr_assert_eq(sfsro_code_encode(block, 0, 2, 4, &k, f), -EINVAL);
	cr_assert(sfsro_code_valid(8, 32));
	cr_assert_not(sfsro_code_valid(16, 16));
}

/* A data block of the largest payload (128 KiB and its framing) can be
 * coded, and its widest fragment fits a STORE; one byte more cannot. */
Test(sfsro_coded, the_largest_data_block)
{
	static uint8_t payload[SFSRO_BLOCK_SIZE_MAX], block[SFSRO_CODED_BLOCK_MAX + 1];
	size_t len;
	struct coded c;

	memset(payload, 0x5c, sizeof(payload));
	cr_assert_eq(sfsro_data_encode(payload, sizeof(payload), block, sizeof(block), &len), 0);
	cr_assert_gt(len, SFSRO_BLOCK_SIZE_MAX);
	cr_assert_leq(len, SFSRO_CODED_BLOCK_MAX);
	cr_assert_leq(sfsro_frag_len(SFSRO_CODED_BLOCK_MAX, 1, SFSRO_CODE_N_MAX), CFS_BLOCK_MAX);
	encode(&c, 4, 12, len, 9);
	cr_assert_eq(decode_mask(&c, 0xff0), 0, "rebuilt from parity alone");
	release(&c);
	uint8_t *f[SFSRO_CODE_N_MAX] = { 0 };
	struct cfs_id k;
	cr_assert_eq(sfsro_code_encode(block, SFSRO_CODED_BLOCK_MAX + 1, 4, 12, &k, f), -EINVAL);
}
