/*
 * make bench-code: erasure coding of 64 KiB data blocks on one core
 * (sfsro-format/coded.c over ISA-L), beside the baseline every block pays
 * today: hashing it (BLAKE2b, what a replicated block costs to check).
 * Prints MB/s of block bytes for encode (fragments and their hash tree),
 * verify (every fragment checked alone), and decode from the m fragments
 * a reader would least like: every data fragment lost, parity only, and
 * every data fragment there (the systematic fast path).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sfsro-format/sfsro.h"

#define BLOCK 65536

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double seconds_per_run(void)
{
	const char *e = getenv("BENCH_SECONDS");

	return e ? atof(e) : 1.0;
}

int main(void)
{
	static const uint32_t codes[][2] = { { 4, 12 }, { 7, 14 }, { 8, 24 }, { 8, 32 }, { 16, 32 } };
	static uint8_t block[BLOCK], out[BLOCK];
	uint8_t *frag[SFSRO_CODE_N_MAX];
	const uint8_t *in[SFSRO_CODE_N_MAX];
	size_t lens[SFSRO_CODE_N_MAX], got;
	struct cfs_id key, h;
	double t0, secs = seconds_per_run();
	uint64_t n;

	cfs_log_init("bench-code", CFS_LOG_ERROR);
	for (size_t i = 0; i < BLOCK; i++)
		block[i] = (uint8_t)(i * 131 + 17);
	for (n = 0, t0 = now_s(); now_s() - t0 < secs; n++)
		cfs_hash(&h, block, BLOCK);
	printf("baseline: BLAKE2b of a 64 KiB block: %.0f MB/s\n", n * (double)BLOCK / (now_s() - t0) / 1e6);
	printf("%-8s %10s %10s %14s %14s %9s\n", "code", "encode", "verify", "decode parity", "decode data",
	       "storage");
	for (size_t c = 0; c < sizeof(codes) / sizeof(codes[0]); c++) {
		uint32_t m = codes[c][0], k = codes[c][1];
		size_t fl = sfsro_frag_len(BLOCK, m, k);
		double enc, ver, dpar, ddat;
		for (uint32_t i = 0; i < k; i++)
			frag[i] = malloc(fl);
		for (n = 0, t0 = now_s(); now_s() - t0 < secs; n++)
			if (sfsro_code_encode(block, BLOCK, m, k, &key, frag) < 0)
				return 1;
		enc = n * (double)BLOCK / (now_s() - t0) / 1e6;
		for (n = 0, t0 = now_s(); now_s() - t0 < secs; n++)
			for (uint32_t i = 0; i < k; i++)
				if (sfsro_frag_verify(&key, frag[i], fl, NULL) < 0)
					return 1;
		ver = n * (double)BLOCK / (now_s() - t0) / 1e6;
		/* parity only: the last m fragments */
		for (uint32_t i = 0; i < m; i++) {
			in[i] = frag[k - m + i];
			lens[i] = fl;
		}
		for (n = 0, t0 = now_s(); now_s() - t0 < secs; n++)
			if (sfsro_code_decode(&key, in, lens, m, out, BLOCK, &got) < 0 || got != BLOCK)
				return 1;
		dpar = n * (double)BLOCK / (now_s() - t0) / 1e6;
		for (uint32_t i = 0; i < m; i++)
			in[i] = frag[i];
		for (n = 0, t0 = now_s(); now_s() - t0 < secs; n++)
			if (sfsro_code_decode(&key, in, lens, m, out, BLOCK, &got) < 0)
				return 1;
		ddat = n * (double)BLOCK / (now_s() - t0) / 1e6;
		if (memcmp(out, block, BLOCK))
			return 1;
		char name[16];
		snprintf(name, sizeof(name), "rs:%u/%u", m, k);
		printf("%-8s %7.0f MB/s %5.0f MB/s %9.0f MB/s %9.0f MB/s %8.2fx\n", name, enc, ver, dpar, ddat,
		       (double)fl * k / BLOCK);
		for (uint32_t i = 0; i < k; i++)
			free(frag[i]);
	}
	printf("copies:6 stores 6.00x; MB/s are of block bytes on one core\n");
	return 0;
}
