/*
 * cfs-storetool: look inside a store of the storage engine (a dir: store,
 * or a stopped cfsd's replica store), for tests.
 *
 *   cfs-storetool keys DIR           one line per content-hash block: key len lease, by key
 *   cfs-storetool roots DIR          one line per root: key sequence BLAKE2b(bytes)
 *   cfs-storetool count DIR          how many blocks (roots included)
 *   cfs-storetool get DIR KEY        KEY's bytes, to standard output
 *   cfs-storetool where DIR KEY      the pack file and the offset of KEY's bytes
 *   cfs-storetool flip DIR [KEY]     flip one bit in the middle of a block's bytes
 *                                    (KEY, or the first block over 8 KiB); prints the key
 *   cfs-storetool drop DIR KEY       forget KEY (a lost block)
 *   cfs-storetool hold DIR SECONDS   keep the store open (another process's use)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blockstore/internal.h"
#include "dhash/dhash.h"

/* frags: KEY LEN INDEX of each fragment (kind 4) stored. */
static void print_frag(bstore_t *s, const struct cfs_id *key, const struct bstore_meta *m)
{
	struct bstore_meta got;
	uint8_t *p;
	char hex[65];

	if (bstore_get(s, key, &got, &p) < 0)
		return;
	printf("%s %u %d\n", cfs_id_hex(key, hex), m->len, got.len > 3 ? p[3] : -1);
	free(p);
}

static int usage(void)
{
	fprintf(stderr, "usage: cfs-storetool keys|frags|roots|count|get|where|flip|drop|hold DIR [KEY|SECONDS]\n");
	return 2;
}

/* The first block over 8 KiB, or -ENOENT. */
static int first_big(bstore_t *s, struct cfs_id *ret)
{
	struct cfs_id keys[1024], after;
	struct bstore_meta metas[1024];
	bool more = true, first = true;

	while (more) {
		uint32_t n = bstore_list(s, first ? NULL : &after, keys, metas, 1024, &more);
		for (uint32_t i = 0; i < n; i++)
			if (metas[i].len > 8192) {
				*ret = keys[i];
				return 0;
			}
		if (!n)
			break;
		after = keys[n - 1];
		first = false;
	}
	return -ENOENT;
}

static int flip(bstore_t *s, const char *dir, const struct cfs_id *key)
{
	struct bstore__rec rec;
	char path[4200], hex[65];
	uint8_t b;

	if (bstore__rec_read(s, key, &rec) < 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/packs/%08u.pack", dir, rec.pack);
	int fd = open(path, O_RDWR);
	off_t at = (off_t)(rec.off + BSTORE__ENTRY_HDR + rec.meta.len / 2);
	if (fd < 0 || pread(fd, &b, 1, at) != 1)
		return -EIO;
	b ^= 0x10;
	if (pwrite(fd, &b, 1, at) != 1)
		return -EIO;
	close(fd);
	printf("%s\n", cfs_id_hex(key, hex));
	return 0;
}

static void print_root(bstore_t *s, const struct cfs_id *key, const struct bstore_meta *m)
{
	struct bstore_meta got;
	struct cfs_id h;
	uint8_t *p;
	char hex[65], hh[65];

	if (bstore_get(s, key, &got, &p) < 0)
		return;
	cfs_hash(&h, p, got.len);
	printf("%s %lu %s\n", cfs_id_hex(key, hex), (unsigned long)m->seq, cfs_id_hex(&h, hh));
	free(p);
}

int main(int argc, char **argv)
{
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "store" };
	struct cfs_id key, after;
	bstore_t *s;
	char hex[65];
	int r = 0;

	if (argc < 3)
		return usage();
	const char *cmd = argv[1], *dir = argv[2];
	bool has_key = argc > 3 && cfs_id_from_hex(&key, argv[3]) == 0;
	if ((!strcmp(cmd, "where") || !strcmp(cmd, "drop") || !strcmp(cmd, "get")) && !has_key)
		return usage();
	if (bstore_open(dir, &cfg, &s) < 0)
		return 1;
	if (!strcmp(cmd, "keys") || !strcmp(cmd, "count") || !strcmp(cmd, "roots") || !strcmp(cmd, "frags")) {
		struct cfs_id keys[1024];
		struct bstore_meta metas[1024];
		bool more = true, first = true;
		uint64_t total = 0;
		while (more) {
			uint32_t n = bstore_list(s, first ? NULL : &after, keys, metas, 1024, &more);
			for (uint32_t i = 0; i < n; i++) {
				if (cmd[0] == 'k' && metas[i].kind == DHASH_KIND_CHASH)
					printf("%s %u %lu\n", cfs_id_hex(&keys[i], hex), metas[i].len,
					       (unsigned long)metas[i].lease_until);
				if (cmd[0] == 'f' && metas[i].kind == DHASH_KIND_FRAG)
					print_frag(s, &keys[i], &metas[i]);
				if (cmd[0] == 'r' && metas[i].kind == DHASH_KIND_ROOT)
					print_root(s, &keys[i], &metas[i]);
			}
			total += n;
			if (!n)
				break;
			after = keys[n - 1];
			first = false;
		}
		if (cmd[0] == 'c')
			printf("%lu\n", (unsigned long)total);
	} else if (!strcmp(cmd, "get")) {
		struct bstore_meta m;
		uint8_t *p;
		r = bstore_get(s, &key, &m, &p);
		if (r == 0) {
			if (fwrite(p, 1, m.len, stdout) != m.len)
				r = -EIO;
			free(p);
		}
	} else if (!strcmp(cmd, "where")) {
		struct bstore__rec rec;
		r = bstore__rec_read(s, &key, &rec);
		if (r == 0)
			printf("%s/packs/%08u.pack %lu %u\n", dir, rec.pack,
			       (unsigned long)(rec.off + BSTORE__ENTRY_HDR), rec.meta.len);
	} else if (!strcmp(cmd, "flip")) {
		r = has_key ? 0 : first_big(s, &key);
		if (r == 0)
			r = flip(s, dir, &key);
	} else if (!strcmp(cmd, "drop")) {
		struct bstore_op op = { .type = BSTORE_DEL, .key = key };
		r = bstore_apply(s, &op, 1);
		if (r == 0)
			r = op.status;
	} else if (!strcmp(cmd, "hold") && argc > 3) {
		printf("held\n");
		fflush(stdout);
		sleep((unsigned)atoi(argv[3]));
	} else {
		r = -EINVAL;
	}
	bstore_close(s);
	if (r < 0)
		fprintf(stderr, "cfs-storetool %s: %s\n", cmd, strerror(-r));
	return r < 0;
}
