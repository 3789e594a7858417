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

struct big {
	struct cfs_id key;
	bool found;
};

static bool find_big(void *arg, const struct cfs_id *key, const struct bstore_meta *m)
{
	struct big *b = arg;

	if (m->len > 8192)
		*b = (struct big){ *key, true };
	return !b->found;
}

/* The first block over 8 KiB, or -ENOENT. */
static int first_big(bstore_t *s, struct cfs_id *ret)
{
	struct big b = { .found = false };

	bstore_each(s, find_big, &b);
	*ret = b.key;
	return b.found ? 0 : -ENOENT;
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

/* keys / count / roots / frags: one record, by the command's letter. */
struct listing {
	bstore_t *s;
	char cmd;
};

static bool list_one(void *arg, const struct cfs_id *key, const struct bstore_meta *m)
{
	struct listing *l = arg;
	char hex[65];

	if (l->cmd == 'k' && m->kind == DHASH_KIND_CHASH)
		printf("%s %u %lu\n", cfs_id_hex(key, hex), m->len, (unsigned long)m->lease_until);
	if (l->cmd == 'f' && m->kind == DHASH_KIND_FRAG)
		print_frag(l->s, key, m);
	if (l->cmd == 'r' && m->kind == DHASH_KIND_ROOT)
		print_root(l->s, key, m);
	return true;
}

int main(int argc, char **argv)
{
	struct bstore_config cfg = { .mode = BSTORE_DURABLE, .what = "store" };
	struct cfs_id key;
	bstore_t *s;
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
		struct listing l = { s, cmd[0] };
		uint64_t total = bstore_each(s, list_one, &l);
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
