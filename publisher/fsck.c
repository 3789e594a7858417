/*
 * cfs-fsck's core: walk a whole volume from its signed root, verifying
 * every block, and report what is missing or corrupt by path and key.
 * With a listing, every entry is printed with its attributes and the
 * BLAKE2b-256 of its content, so a published tree can be compared with its
 * source (tests/integration/tree-listing.py prints the same for a directory).
 */
#include "publisher/publisher.h"

#include <stdlib.h>
#include <string.h>

#define READ_CHUNK (1u << 20)

struct fsck {
	const struct sfsro_source *src;
	FILE *out, *err;
	bool list;
	struct pub_fsck_stats *st;
	uint8_t *buf;
	char path[8192];
};

/* Paths are printed with every byte outside printable ASCII, and the
 * backslash, as \xHH: one entry per line whatever the names hold. */
static void print_path(FILE *f, const char *p)
{
	for (; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c >= 0x7f || c == '\\')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

static void problem(struct fsck *k, const struct cfs_id *key, int r)
{
	char h[65];
	if (r == -ENOENT)
		k->st->missing++;
	else
		k->st->corrupt++;
	fprintf(k->err, "%s: ", r == -ENOENT ? "missing" : "corrupt");
	print_path(k->err, k->path[0] ? k->path : "/");
	fprintf(k->err, " (block under %s: %s)\n", cfs_id_hex(key, h), strerror(-r));
}

static void list_entry(struct fsck *k, char type, const struct sfsro_entry *e, const char *hash)
{
	if (!k->list)
		return;
	fprintf(k->out, "%c %04o %lu %ld.%09u %s ", type, e->mode, (unsigned long)e->size,
	        (long)e->mtime_s, e->mtime_ns, hash);
	print_path(k->out, k->path[0] ? k->path : "/");
	fputc('\n', k->out);
}

static int check_dir(struct fsck *k, const struct cfs_id *key);

static int on_entry(void *arg, const struct sfsro_entry *e)
{
	struct fsck *k = arg;
	size_t base = strlen(k->path);
	char hex[65] = "-";
	int r = 0;

	if (base + 1 + e->name.len >= sizeof(k->path))
		return -ENAMETOOLONG;
	k->path[base] = '/';
	memcpy(k->path + base + 1, e->name.p, e->name.len);
	k->path[base + 1 + e->name.len] = 0;

	if (e->type == SFSRO_T_DIR) {
		k->st->dirs++;
		list_entry(k, 'd', e, hex);
		check_dir(k, &e->key);
	} else if (e->type == SFSRO_T_SYMLINK) {
		struct cfs_id h;
		k->st->symlinks++;
		cfs_hash(&h, e->target.p, e->target.len);
		list_entry(k, 'l', e, cfs_id_hex(&h, hex));
	} else {
		struct cfs_hasher hs;
		struct cfs_id h;
		uint64_t off = 0;
		size_t n;
		k->st->files++;
		cfs_hasher_init(&hs);
		while ((r = sfsro_walk_read(k->src, &e->key, off, k->buf, READ_CHUNK, &n)) == 0 && n > 0) {
			cfs_hasher_update(&hs, k->buf, n);
			off += n;
		}
		if (r == 0 && off != e->size)
			r = -EPROTO; /* the entry and the inode disagree */
		k->st->bytes += off;
		if (r < 0) {
			problem(k, &e->key, r);
		} else {
			cfs_hasher_final(&hs, &h);
			list_entry(k, 'f', e, cfs_id_hex(&h, hex));
		}
	}
	k->path[base] = 0;
	return 0; /* keep going: report everything */
}

static int check_dir(struct fsck *k, const struct cfs_id *key)
{
	int r = sfsro_walk_readdir(k->src, key, on_entry, k);
	if (r < 0)
		problem(k, key, r);
	return 0;
}

int pub_fsck(const struct sfsro_source *src, const struct cfs_pubkey *pk, FILE *out, FILE *err,
             bool list, struct pub_fsck_stats *ret)
{
	struct fsck k = { .src = src, .out = out, .err = err, .list = list, .st = ret };
	struct sfsro_root root;
	struct sfsro_node rootnode;
	int r;

	memset(ret, 0, sizeof(*ret));
	/* seq 0 and time 0: fsck checks the signature, not freshness */
	if ((r = sfsro_walk_root(src, pk, 0, 0, &root)) < 0) {
		fprintf(err, "the volume's root cannot be used: %s\n", strerror(-r));
		return r;
	}
	k.buf = xmalloc(READ_CHUNK);
	sfsro_walk_rootnode(&root, &rootnode);
	rootnode.e.size = 0;
	ret->dirs++;
	list_entry(&k, 'd', &rootnode.e, "-");
	check_dir(&k, &root.root_dir);
	free(k.buf);
	return ret->missing || ret->corrupt ? -EBADMSG : 0;
}
