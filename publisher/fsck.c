/*
 * cfs-fsck's core: walk a whole volume from its signed root, verifying
 * every block, and report what is missing or corrupt by path and key.
 * With a listing, every entry is printed with its attributes and the
 * BLAKE2b-256 of its content, so a published tree can be compared with its
 * source (tests/integration/tree-listing.py prints the same for a directory).
 *
 * Each block is checked once per run, however many paths lead to it: a
 * volume is a DAG, and a hostile one can name a directory twice from each
 * of 25 directories (2^25 paths from 26 blocks). Directories and file
 * inodes already seen are kept by key: a file's content hash is reused, and
 * a directory met again is listed as itself but not below (a note on err
 * names where its contents were listed). A directory that contains itself
 * (a cycle, which needs a BLAKE2b fixed point) is corrupt.
 */
#include "publisher/publisher.h"

#include <stdlib.h>
#include <string.h>

#define READ_CHUNK (1u << 20)

/* A file inode checked once: its content hash and length, or the error. */
struct fseen {
	struct cfs_id hash;
	uint64_t len;
	int r;
};

/* A directory met before: where it was first listed; done once walked
 * (not done: it is an ancestor of the path being walked). */
struct dseen {
	char *path;
	bool done;
};

struct fsck {
	const struct sfsro_source *src;
	FILE *out, *err;
	bool list;
	struct pub_fsck_stats *st;
	uint8_t *buf;
	struct cfs_idmap files, dirs; /* key -> index in fseen, dseen */
	struct fseen *fseen;
	struct dseen *dseen;
	uint32_t nfseen, ndseen;
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

/* why: the reason to print, else strerror(-r). */
static void problem(struct fsck *k, const struct cfs_id *key, int r, const char *why)
{
	char h[65];
	if (r == -ENOENT)
		k->st->missing++;
	else
		k->st->corrupt++;
	fprintf(k->err, "%s: ", r == -ENOENT ? "missing" : "corrupt");
	print_path(k->err, k->path[0] ? k->path : "/");
	fprintf(k->err, " (block under %s: %s)\n", cfs_id_hex(key, h), why ? why : strerror(-r));
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

static void check_dir(struct fsck *k, const struct cfs_id *key);

/* Read the file once per inode key; later paths reuse the hash. */
static const struct fseen *check_file(struct fsck *k, const struct cfs_id *key)
{
	struct cfs_hasher hs;
	uint32_t i;
	size_t n;
	int r;

	if (cfs_idmap_get(&k->files, key, &i))
		return &k->fseen[i];
	struct fseen f = { 0 };
	cfs_hasher_init(&hs);
	while ((r = sfsro_walk_read(k->src, key, f.len, k->buf, READ_CHUNK, &n)) == 0 && n > 0) {
		cfs_hasher_update(&hs, k->buf, n);
		f.len += n;
	}
	f.r = r;
	cfs_hasher_final(&hs, &f.hash);
	k->st->bytes += f.len;
	if (k->nfseen % 1024 == 0)
		k->fseen = xrealloc(k->fseen, (k->nfseen + 1024) * sizeof(*k->fseen));
	k->fseen[k->nfseen] = f;
	cfs_idmap_put(&k->files, key, k->nfseen);
	return &k->fseen[k->nfseen++];
}

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
		const struct fseen *f = check_file(k, &e->key);
		k->st->files++;
		r = f->r;
		if (r == 0 && f->len != e->size)
			r = -EPROTO; /* the entry and the inode disagree */
		if (r < 0)
			problem(k, &e->key, r, NULL);
		else
			list_entry(k, 'f', e, cfs_id_hex(&f->hash, hex));
	}
	k->path[base] = 0;
	return 0; /* keep going: report everything */
}

/* Walk a directory the first time its key is met; after that, only say
 * where it was listed (a non-empty one), or that it is its own ancestor. */
static void check_dir(struct fsck *k, const struct cfs_id *key)
{
	uint32_t i;
	int r;

	if (cfs_idmap_get(&k->dirs, key, &i)) {
		if (!k->dseen[i].done) {
			problem(k, key, -ELOOP, "the directory contains itself");
		} else if (k->list && k->dseen[i].path) {
			fprintf(k->err, "shared: ");
			print_path(k->err, k->path);
			fprintf(k->err, " (the directory listed at ");
			print_path(k->err, k->dseen[i].path[0] ? k->dseen[i].path : "/");
			fprintf(k->err, ")\n");
		}
		return;
	}
	if (k->ndseen % 1024 == 0)
		k->dseen = xrealloc(k->dseen, (k->ndseen + 1024) * sizeof(*k->dseen));
	i = k->ndseen++;
	k->dseen[i] = (struct dseen){ NULL, false };
	cfs_idmap_put(&k->dirs, key, i);
	uint64_t before = k->st->files + k->st->dirs + k->st->symlinks;
	if ((r = sfsro_walk_readdir(k->src, key, on_entry, k)) < 0)
		problem(k, key, r, NULL);
	k->dseen[i].done = true;
	/* an empty directory has nothing to point back to */
	if (k->list && k->st->files + k->st->dirs + k->st->symlinks > before)
		k->dseen[i].path = xstrdup(k->path);
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
	for (uint32_t i = 0; i < k.ndseen; i++)
		free(k.dseen[i].path);
	free(k.dseen);
	free(k.fseen);
	cfs_idmap_free(&k.files);
	cfs_idmap_free(&k.dirs);
	return ret->missing || ret->corrupt ? -EBADMSG : 0;
}
