/*
 * hash-rate: the single-core BLAKE2b-256 ceiling for publishing — hash every
 * file under DIR in BLOCK-byte pieces (as publishing hashes data blocks),
 * with the files already in the page cache, and print MB/s.
 *
 *   hash-rate DIR [BLOCK]
 */
#define _XOPEN_SOURCE 700
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/cfs.h"

static size_t block = 8192;
static uint8_t *buf;
static uint64_t bytes, hash_us;

static int visit(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	if (flag != FTW_F)
		return 0;
	int fd = open(path, O_RDONLY);
	ssize_t n;
	struct cfs_id h;
	if (fd < 0)
		return 0;
	while ((n = read(fd, buf, block)) > 0) {
		uint64_t t = cfs_now_us();
		cfs_hash(&h, buf, (size_t)n);
		hash_us += cfs_now_us() - t;
		bytes += (uint64_t)n;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: hash-rate DIR [BLOCK]\n");
		return 2;
	}
	if (argc == 3)
		block = strtoul(argv[2], NULL, 10);
	if (cfs_crypto_init() < 0 || !block)
		return 1;
	buf = malloc(block);
	nftw(argv[1], visit, 64, FTW_PHYS);
	printf("%.1f\n", hash_us ? (double)bytes / (double)hash_us : 0.0); /* bytes/us = MB/s */
	return 0;
}
