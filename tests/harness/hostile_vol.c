/*
 * cfs-hostile-vol OUTDIR WIDE_HEIGHT DEEP_LEVELS: hand-build a hostile
 * volume, correctly signed, for tests/integration/t_hostile_volume.sh.
 *
 * Every block is well formed on its own; the volume lies only in how
 * blocks name each other:
 *   /ok     an honest 20,000-byte file (three data blocks);
 *   /wide   a directory of WIDE_HEIGHT index levels over one leaf, where
 *           every index item of every level names the same child block: a
 *           naive listing has (items per index block)^WIDE_HEIGHT x (leaf
 *           entries) entries, from WIDE_HEIGHT + 1 blocks;
 *   /deep   DEEP_LEVELS directories, each with entries "a" and "b" naming
 *           the next: 2^DEEP_LEVELS paths from DEEP_LEVELS + 1 blocks.
 * An ancestor cycle cannot be built: a block would have to contain its own
 * BLAKE2b-256 (through its descendants' keys).
 *
 * Writes OUTDIR/blocks/NNNN (one file per content-hash block) and
 * OUTDIR/root (the signed root, for `cfsctl put --root`); prints the
 * volume's name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sfsro-format/sfsro.h"

#define BSIZE 8192

static const char *outdir;
static unsigned nblocks;

static void write_file(const char *path, const uint8_t *p, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		exit(1);
	}
}

static int emit(void *arg, const struct cfs_id *key, const uint8_t *p, size_t len)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/blocks/%04u", outdir, nblocks++);
	write_file(path, p, len);
	return 0;
}

static void emit_dir(const struct sfsro_dir *d, struct cfs_id *ret_key)
{
	static uint8_t buf[SFSRO_BLOCK_SIZE_MAX];
	size_t len;

	if (sfsro_dir_encode(d, buf, sizeof(buf), &len) < 0) {
		fprintf(stderr, "a directory block does not encode\n");
		exit(1);
	}
	cfs_hash(ret_key, buf, len);
	emit(NULL, ret_key, buf, len);
}

static struct sfsro_entry entry(const char *name, uint8_t type, uint64_t size, const struct cfs_id *key)
{
	struct sfsro_entry e = { .name = { (const uint8_t *)name, strlen(name) }, .type = type,
	                         .size = size, .mode = type == SFSRO_T_DIR ? 0755 : 0644,
	                         .mtime_s = 1690000000 };
	if (key)
		e.key = *key;
	if (type == SFSRO_T_SYMLINK) {
		e.mode = 0777;
		e.target = (struct cfs_bytes){ (const uint8_t *)"ok", 2 };
	}
	return e;
}

/* One leaf full of symlinks (cheap for any reader to check), then index
 * levels whose every item names the level below. The first item's name is
 * the child's first name, as an honest index has it; the rest only need to
 * increase. */
static void build_wide(uint32_t height, struct cfs_id *ret_key, uint64_t *ret_naive)
{
	static char names[2048][16];
	struct sfsro_entry ents[2048];
	struct sfsro_dir_child kids[2048];
	struct sfsro_dir d = { 0 };
	size_t used = 0;
	uint32_t n = 0;

	while (n < 2048) {
		snprintf(names[n], sizeof(names[n]), "e%06u", n);
		ents[n] = entry(names[n], SFSRO_T_SYMLINK, 2, NULL);
		if (used + sfsro_entry_size(&ents[n]) > BSIZE - 64)
			break;
		used += sfsro_entry_size(&ents[n++]);
	}
	d.n = n;
	d.entries = ents;
	emit_dir(&d, ret_key);
	*ret_naive = n;
	for (uint32_t h = 1; h <= height; h++) {
		uint32_t k = 0;
		for (; k < 2048 && 16 + (k + 1) * (2 + 16 + 34) < BSIZE; k++) {
			if (k == 0)
				snprintf(names[k], sizeof(names[k]), "e%06u", 0u);
			else
				snprintf(names[k], sizeof(names[k]), "e%06u.%05u", 0u, k);
			kids[k].first = (struct cfs_bytes){ (const uint8_t *)names[k], strlen(names[k]) };
			kids[k].key = *ret_key;
		}
		d = (struct sfsro_dir){ .height = h, .n = k, .children = kids };
		emit_dir(&d, ret_key);
		*ret_naive *= k;
	}
}

static void build_deep(uint32_t levels, struct cfs_id *ret_key)
{
	struct sfsro_dir d = { 0 };
	struct sfsro_entry ents[2];

	emit_dir(&d, ret_key); /* the empty bottom */
	for (uint32_t i = 0; i < levels; i++) {
		ents[0] = entry("a", SFSRO_T_DIR, 2, ret_key);
		ents[1] = entry("b", SFSRO_T_DIR, 2, ret_key);
		d = (struct sfsro_dir){ .n = 2, .entries = ents };
		emit_dir(&d, ret_key);
	}
}

static void build_ok(struct cfs_id *ret_key)
{
	static uint8_t data[20000], buf[BSIZE + 64];
	struct cfs_id keys[3];
	size_t len;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)('a' + i % 26);
	for (int b = 0; b < 3; b++) {
		size_t off = (size_t)b * BSIZE, n = sizeof(data) - off < BSIZE ? sizeof(data) - off : BSIZE;
		if (sfsro_data_encode(data + off, n, buf, sizeof(buf), &len) < 0)
			exit(1);
		cfs_hash(&keys[b], buf, len);
		emit(NULL, &keys[b], buf, len);
	}
	struct sfsro_inode ino = { .size = sizeof(data), .mode = 0644, .mtime_s = 1690000000,
	                           .bsize = BSIZE, .fanout = sfsro_fanout(BSIZE) };
	if (sfsro_build_file(&ino, keys, 3, emit, NULL, ret_key) < 0)
		exit(1);
}

int main(int argc, char **argv)
{
	struct cfs_id wide, deep, ok, top;
	struct cfs_pubkey pk;
	struct cfs_seckey sk;
	uint64_t naive;
	char path[4200], name[CFS_NAME_LEN + 1];
	static uint8_t buf[1024];
	size_t len;

	if (argc != 4) {
		fprintf(stderr, "usage: cfs-hostile-vol OUTDIR WIDE_HEIGHT DEEP_LEVELS\n");
		return 2;
	}
	outdir = argv[1];
	uint32_t wh = (uint32_t)atoi(argv[2]), dl = (uint32_t)atoi(argv[3]);
	if (cfs_crypto_init() < 0 || wh < 1 || wh > SFSRO_HEIGHT_MAX)
		return 2;
	snprintf(path, sizeof(path), "%s/blocks", outdir);
	if (cfs_mkdir_p(path, 0755) < 0)
		return 1;
	build_ok(&ok);
	build_wide(wh, &wide, &naive);
	build_deep(dl, &deep);
	struct sfsro_entry ents[3] = { entry("deep", SFSRO_T_DIR, 2, &deep),
	                               entry("ok", SFSRO_T_FILE, 20000, &ok),
	                               entry("wide", SFSRO_T_DIR, naive, &wide) };
	struct sfsro_dir d = { .n = 3, .entries = ents };
	emit_dir(&d, &top);

	cfs_sign_keypair(&pk, &sk);
	struct sfsro_root r = { .pk = pk, .seq = 1, .issued = cfs_wall_s(),
	                        .valid_until = cfs_wall_s() + 86400, .root_dir = top,
	                        .dir_mode = 0755, .mtime_s = 1690000000 };
	if (sfsro_root_encode(&r, &sk, buf, sizeof(buf), &len) < 0)
		return 1;
	cfs_seckey_wipe(&sk);
	snprintf(path, sizeof(path), "%s/root", outdir);
	write_file(path, buf, len);
	cfs_name_encode(name, pk.b);
	printf("%s\n", name);
	fprintf(stderr, "%u blocks; /wide lists %lu entries naively\n", nblocks, (unsigned long)naive);
	return 0;
}
