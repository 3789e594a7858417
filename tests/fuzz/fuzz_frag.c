/*
 * libFuzzer target: the coded-block fragment decoder (sfsro-format/coded.c).
 * The input is parsed as a fragment as it is, and also applied as edits
 * (offset, value pairs) to the 12 real fragments of a fixed 4-of-12 block,
 * which then go through the checks and the decoder: an edited fragment
 * must never verify, and a decode must give the block or an error, never
 * other bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "sfsro-format/sfsro.h"

#define M 4
#define N 12
#define LEN 3001

static uint8_t block[LEN], *good[N], *edit[N], out[LEN];
static size_t flen;
static struct cfs_id key;

static void init(void)
{
	for (size_t i = 0; i < LEN; i++)
		block[i] = (uint8_t)(i * 31 + 7);
	flen = sfsro_frag_len(LEN, M, N);
	for (int i = 0; i < N; i++) {
		good[i] = malloc(flen);
		edit[i] = malloc(flen);
	}
	if (sfsro_code_encode(block, LEN, M, N, &key, good) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sfsro_frag f;
	const uint8_t *in[N];
	size_t lens[N], got;
	bool changed[N] = { false };

	if (!flen)
		init();
	if (sfsro_frag_parse(data, size, &f) == 0 &&
	    (f.data_len != sfsro_frag_data_len(f.block_len, f.m) || f.index >= f.n))
		abort();
	(void)!sfsro_frag_verify(&key, data, size, NULL);
	/* the key it names verifies it, as a server storing kind 4 checks */
	struct cfs_id named;
	if (sfsro_frag_key(data, size, &named, NULL) == 0 && sfsro_frag_verify(&named, data, size, NULL) != 0)
		abort();

	for (int i = 0; i < N; i++)
		memcpy(edit[i], good[i], flen);
	for (size_t at = 0; at + 3 <= size; at += 3) {
		size_t pos = ((size_t)data[at] << 8 | data[at + 1]) % (flen * N);
		edit[pos / flen][pos % flen] = data[at + 2];
	}
	for (int i = 0; i < N; i++) {
		changed[i] = memcmp(edit[i], good[i], flen) != 0;
		int r = sfsro_frag_verify(&key, edit[i], flen, NULL);
		if (changed[i] && r == 0)
			abort(); /* an edited fragment passed as the key's */
		if (!changed[i] && r != 0)
			abort();
		in[i] = edit[i];
		lens[i] = flen;
	}
	/* the first M + (size % 3) fragments, edited or not */
	uint32_t k = M + (uint32_t)(size % 3);
	int r = sfsro_code_decode(&key, in, lens, k, out, sizeof(out), &got);
	if (r == 0 && (got != LEN || memcmp(out, block, LEN)))
		abort();
	return 0;
}
