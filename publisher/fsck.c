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
#include "publisher/internal.h"

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

/* A directory being listed: the walks form a stack, the path's. */
struct frame {
	struct pub_walk pw;
	struct cfs_id key;
	uint32_t seen;            /* its index in dseen */
	size_t parent_len;        /* the path's length without its name */
	uint64_t before;          /* entries counted before it */
};

struct fsck {
	uv_loop_t *loop;
	struct pub_sink *sink;
	FILE *out, *err;
	bool list;
	struct pub_fsck_stats *st;
	uint8_t *buf;
	struct pub_walk reader;   /* file contents */
	struct cfs_idmap files, dirs; /* key -> index in fseen, dseen */
	struct fseen *fseen;
	struct dseen *dseen;
	uint32_t nfseen, ndseen;
	struct frame *stack;
	uint32_t depth, cap;
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

/* Could the block not be read at all (the store did not answer), rather
 * than read and found wanting? Such a block says nothing about the volume:
 * the check is incomplete, not failed. */
static bool is_unreadable(int r)
{
	return r == -ETIMEDOUT || r == -EHOSTUNREACH || r == -ECONNREFUSED || r == -ECONNRESET ||
	       r == -ENOTCONN || r == -EPIPE || r == -ECANCELED;
}

/* why: the reason to print, else strerror(-r). */
static void problem(struct fsck *k, const struct cfs_id *key, int r, const char *why)
{
	const char *what = r == -ENOENT ? "missing" : is_unreadable(r) ? "unreadable" : "corrupt";
	char h[65];

	if (r == -ENOENT)
		k->st->missing++;
	else if (is_unreadable(r))
		k->st->unreadable++;
	else
		k->st->corrupt++;
	fprintf(k->err, "%s: ", what);
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

static void enter_dir(struct fsck *k, const struct cfs_id *key, size_t parent_len);

/* Read the file once per inode key; later paths reuse the hash. */
static const struct fseen *check_file(struct fsck *k, const struct cfs_id *key)
{
	struct cfs_hasher hs;
	struct sfsro_step s;
	uint32_t i;
	size_t n;
	int r;

	if (cfs_idmap_get(&k->files, key, &i))
		return &k->fseen[i];
	struct fseen f = { 0 };
	cfs_hasher_init(&hs);
	for (;;) {
		sfsro_walker_read(k->reader.w, key, f.len, k->buf, READ_CHUNK, &n);
		if ((r = pub__walk_next(&k->reader, &s)) < 0 || n == 0)
			break;
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

/* One entry of the directory on top of the stack (e borrowed from its
 * walk, which does not move while the entry is handled). A directory is
 * pushed, to be listed next. */
static int on_entry(struct fsck *k, const struct sfsro_entry *e)
{
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
		enter_dir(k, &e->key, base); /* the path stays until it is listed */
		return 0;
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

static uint64_t entries(const struct fsck *k)
{
	return k->st->files + k->st->dirs + k->st->symlinks;
}

/* Start listing a directory the first time its key is met (k->path is
 * its path); after that, only say where it was listed (a non-empty one),
 * or that it is its own ancestor. */
static void enter_dir(struct fsck *k, const struct cfs_id *key, size_t parent_len)
{
	uint32_t i;

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
		k->path[parent_len] = 0;
		return;
	}
	if (k->ndseen % 1024 == 0)
		k->dseen = xrealloc(k->dseen, (k->ndseen + 1024) * sizeof(*k->dseen));
	i = k->ndseen++;
	k->dseen[i] = (struct dseen){ NULL, false };
	cfs_idmap_put(&k->dirs, key, i);
	if (k->depth == k->cap) {
		k->cap = k->cap ? 2 * k->cap : 16;
		k->stack = xrealloc(k->stack, k->cap * sizeof(*k->stack));
	}
	struct frame *f = &k->stack[k->depth++];
	*f = (struct frame){ .key = *key, .seen = i, .parent_len = parent_len, .before = entries(k) };
	pub__walk_init(&f->pw, k->loop, k->sink);
	sfsro_walker_readdir(f->pw.w, key);
}

/* The directory on top of the stack is listed (r: DONE, or the error
 * that stopped its listing). */
static void leave_dir(struct fsck *k, int r)
{
	struct frame *f = &k->stack[k->depth - 1];

	if (r < 0)
		problem(k, &f->key, r, NULL);
	k->dseen[f->seen].done = true;
	/* an empty directory has nothing to point back to */
	if (k->list && entries(k) > f->before)
		k->dseen[f->seen].path = xstrdup(k->path);
	pub__walk_fini(&f->pw);
	k->path[f->parent_len] = 0;
	k->depth--;
}

/* Depth first, each directory once: the stack of listings replaces a
 * recursion as deep as the volume (which a hostile one makes deep). */
static void check_tree(struct fsck *k, const struct cfs_id *top)
{
	struct sfsro_step s;
	int r;

	enter_dir(k, top, 0);
	while (k->depth) {
		struct frame *f = &k->stack[k->depth - 1];
		if ((r = pub__walk_next(&f->pw, &s)) == SFSRO_WALK_ENTRY && (r = on_entry(k, s.entry)) == 0)
			continue;
		leave_dir(k, r);
	}
}

int pub_fsck(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
             FILE *out, FILE *err, bool list, struct pub_fsck_stats *ret)
{
	struct fsck k = { .loop = loop, .sink = sink, .out = out, .err = err, .list = list, .st = ret };
	struct sfsro_root root;
	struct sfsro_node rootnode;
	int r;

	memset(ret, 0, sizeof(*ret));
	/* seq 0 and time 0: fsck checks the signature, not freshness */
	if ((r = pub__read_root(loop, sink, pk, seq, &root)) < 0)
		return r; /* the caller says what it means: no check, or no volume */
	k.buf = xmalloc(READ_CHUNK);
	pub__walk_init(&k.reader, loop, sink);
	k.reader.code_m = root.code_m; /* its data blocks decoded from m fragments */
	k.reader.code_n = root.code_n;
	sfsro_walk_rootnode(&root, &rootnode);
	rootnode.e.size = 0;
	ret->dirs++;
	list_entry(&k, 'd', &rootnode.e, "-");
	check_tree(&k, &root.root_dir);
	pub__walk_fini(&k.reader);
	free(k.buf);
	free(k.stack);
	for (uint32_t i = 0; i < k.ndseen; i++)
		free(k.dseen[i].path);
	free(k.dseen);
	free(k.fseen);
	cfs_idmap_free(&k.files);
	cfs_idmap_free(&k.dirs);
	if (ret->missing || ret->corrupt)
		return -EBADMSG;
	return ret->unreadable ? -ETIMEDOUT : 0;
}
