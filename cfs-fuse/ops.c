/*
 * The FUSE operations (the loop that runs them is in run.c).
 *
 * /dev/fuse is polled by the libuv loop that also carries the DHash
 * client: a readable device means requests, each handled by starting an
 * asynchronous walk and answered from its callback. A root version's tree
 * never changes, so the kernel is told to keep entries, attributes, pages
 * and directory listings for a long time; a newer root invalidates them
 * (root.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

#define CACHE_TIMEOUT_S 86400.0

static cfsfuse_t *FS(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_attr(const struct fnode *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_mode = (n->type == SFSRO_T_DIR ? S_IFDIR : n->type == SFSRO_T_SYMLINK ? S_IFLNK : S_IFREG) |
	              (n->mode & 07777);
	st->st_nlink = n->type == SFSRO_T_DIR ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = n->type == SFSRO_T_SYMLINK && n->target ? (off_t)strlen(n->target) : (off_t)n->size;
	st->st_blksize = 65536;
	st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	st->st_mtim.tv_sec = n->mtime_s;
	st->st_mtim.tv_nsec = n->mtime_ns;
	st->st_atim = st->st_ctim = st->st_mtim;
}

static void fill_entry(const struct fnode *n, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = n->ino;
	e->generation = 1;
	e->attr_timeout = CACHE_TIMEOUT_S;
	e->entry_timeout = CACHE_TIMEOUT_S;
	fill_attr(n, &e->attr);
}

static int reply_errno(fuse_req_t req, int status)
{
	return fuse_reply_err(req, status < 0 ? -status : EIO);
}

/* ------------------------------------------------------------ init */

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	cfsfuse_t *fs = userdata;

	fs->inited = true;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA; /* pages change only with the root */
	conn->time_gran = 1;
}

/* ------------------------------------------------------------ lookup */

struct lookup_ctx {
	fuse_req_t req;
	uint64_t parent;
	char name[];
};

static void lookup_done(cfsfuse_t *fs, void *arg, int status, const struct sfsro_entry *e)
{
	struct lookup_ctx *c = arg;
	struct fuse_entry_param ep;

	if (status == -ENOENT) {
		/* A negative entry: the kernel remembers the name is absent,
		 * and we remember to withdraw that when a newer root comes. */
		memset(&ep, 0, sizeof(ep));
		ep.entry_timeout = fs__negative_add(fs, c->parent, c->name) ? CACHE_TIMEOUT_S : 1.0;
		fuse_reply_entry(c->req, &ep);
	} else if (status < 0) {
		fs->st.eio += status == -EIO;
		reply_errno(c->req, status);
	} else {
		struct fnode *n = fs__node_enter(fs->nodes, c->parent, e, fs->root.seq);
		n->nlookup++;
		fill_entry(n, &ep);
		fuse_reply_entry(c->req, &ep);
	}
	free(c);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	cfsfuse_t *fs = FS(req);
	struct fnode *p = fs__node_get(fs->nodes, parent);
	struct lookup_ctx *c;

	if (!p) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (p->type != SFSRO_T_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (strlen(name) > SFSRO_NAME_MAX) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	c = xcalloc(1, sizeof(*c) + strlen(name) + 1);
	c->req = req;
	c->parent = parent;
	strcpy(c->name, name);
	fs__dir_lookup(fs, &p->key, name, lookup_done, c);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	fs__node_forget(FS(req)->nodes, ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		fs__node_forget(FS(req)->nodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fnode *n = fs__node_get(FS(req)->nodes, ino);
	struct stat st;

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	fill_attr(n, &st);
	fuse_reply_attr(req, &st, CACHE_TIMEOUT_S);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct fnode *n = fs__node_get(FS(req)->nodes, ino);

	if (!n || n->type != SFSRO_T_SYMLINK || !n->target)
		fuse_reply_err(req, n ? EINVAL : ESTALE);
	else
		fuse_reply_readlink(req, n->target);
}

/* ------------------------------------------------------------ directories */

struct open_ctx {
	fuse_req_t req;
	uint64_t ino;
	struct fuse_file_info fi;
};

static void opendir_done(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct open_ctx *c = arg;

	if (status < 0) {
		fs->st.eio += status == -EIO;
		reply_errno(c->req, status);
		fs__dir_free(h);
	} else {
		c->fi.fh = (uint64_t)(uintptr_t)h;
		c->fi.keep_cache = 1;
		c->fi.cache_readdir = 1;
		if (fuse_reply_open(c->req, &c->fi) < 0)
			fs__dir_free(h); /* interrupted: no releasedir will come */
	}
	free(c);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	cfsfuse_t *fs = FS(req);
	struct fnode *n = fs__node_get(fs->nodes, ino);

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (n->type != SFSRO_T_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	struct open_ctx *c = xcalloc(1, sizeof(*c));
	c->req = req;
	c->ino = ino;
	c->fi = *fi;
	if (ino == 1 && !fs->start.opendir)
		fs->start.opendir = fs__start_mark(fs);
	fs__dir_open(fs, ino, &n->key, opendir_done, c);
}

/* A readdir reply being filled: . and .. here, the entries as the open
 * directory hands them out a leaf at a time (walk.c). */
struct readdir_ctx {
	cfsfuse_t *fs;
	fuse_req_t req;
	uint64_t ino, seq;
	bool plus;
	size_t size, used;
	char buf[];
};

/* Add one entry at offset off - 1; false if it does not fit. */
static bool add_dirent(struct readdir_ctx *c, const char *name, const struct sfsro_entry *e, off_t off)
{
	struct fuse_entry_param ep;
	struct stat st;
	struct fnode *n = NULL, *self;
	size_t add;

	memset(&ep, 0, sizeof(ep));
	if (!e) {
		self = fs__node_get(c->fs->nodes, c->ino);
		ep.attr.st_ino = off == 1 || !self ? c->ino : self->parent ? self->parent : c->ino;
		ep.attr.st_mode = S_IFDIR;
	} else {
		/* Plain readdir makes a node too (not counted as a lookup):
		 * d_ino must not be 0, which readers take for a deleted entry,
		 * and should match what stat says. */
		n = fs__node_enter(c->fs->nodes, c->ino, e, c->seq);
		fill_entry(n, &ep);
	}
	st = ep.attr;
	add = c->plus ? fuse_add_direntry_plus(c->req, c->buf + c->used, c->size - c->used, name, &ep, off)
	              : fuse_add_direntry(c->req, c->buf + c->used, c->size - c->used, name, &st, off);
	if (add > c->size - c->used) {
		/* did not fit: a node made for it stays unreferenced */
		if (c->plus && n && n->nlookup == 0)
			fs__node_forget(c->fs->nodes, n->ino, 0);
		return false;
	}
	if (c->plus && n)
		n->nlookup++;
	c->used += add;
	return true;
}

static bool readdir_entry(void *arg, const struct sfsro_entry *e, uint64_t index)
{
	struct readdir_ctx *c = arg;
	char name[SFSRO_NAME_MAX + 1];

	memcpy(name, e->name.p, e->name.len);
	name[e->name.len] = 0;
	if (!add_dirent(c, name, e, (off_t)index + 3))
		return false;
	fs__dirpf_entry(c->fs->dirpf, e);
	return true;
}

static void readdir_done(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct readdir_ctx *c = arg;

	/* entries already added go out; the error comes with the next call */
	if (status < 0 && c->used == 0) {
		fs->st.eio += status == -EIO;
		reply_errno(c->req, status);
	} else {
		fuse_reply_buf(c->req, c->buf, c->used);
		if (c->ino == 1 && !fs->start.readdir)
			fs->start.readdir = fs__start_mark(fs);
	}
	free(c);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi, bool plus)
{
	cfsfuse_t *fs = FS(req);
	struct fs_dir *h = (struct fs_dir *)(uintptr_t)fi->fh;
	struct readdir_ctx *c = xcalloc(1, sizeof(*c) + size);

	*c = (struct readdir_ctx){ fs, req, ino, fs__dir_seq(h), plus, size, 0 };
	for (; off >= 0 && off < 2; off++)
		if (!add_dirent(c, off == 0 ? "." : "..", NULL, off + 1)) {
			readdir_done(fs, c, 0, NULL);
			return;
		}
	fs__dir_read(fs, h, (uint64_t)off - 2, readdir_entry, readdir_done, c);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs__dir_free((struct fs_dir *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* ------------------------------------------------------------ files */

static void open_done(cfsfuse_t *fs, void *arg, int status, struct fhandle *h)
{
	struct open_ctx *c = arg;

	if (status < 0) {
		fs->st.eio += status == -EIO;
		reply_errno(c->req, status);
	} else {
		c->fi.fh = (uint64_t)(uintptr_t)h;
		/* An inode number's content never changes (nodes.c). */
		c->fi.keep_cache = 1;
		if (fuse_reply_open(c->req, &c->fi) < 0)
			fs__fhandle_free(h);
	}
	free(c);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	cfsfuse_t *fs = FS(req);
	struct fnode *n = fs__node_get(fs->nodes, ino);

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (n->type != SFSRO_T_FILE) {
		fuse_reply_err(req, n->type == SFSRO_T_DIR ? EISDIR : ELOOP);
		return;
	}
	struct open_ctx *c = xcalloc(1, sizeof(*c));
	c->req = req;
	c->ino = ino;
	c->fi = *fi;
	fs__file_open(fs, ino, &n->key, open_done, c);
}

static void prefetch_done(void *arg, int status, const struct fblk *b)
{
	cfsfuse_t *fs = arg;

	/* AIMD, like a congestion window (CFS 8): grow while fetches come
	 * back, halve when one does not. Its bound, --prefetch, grows as the
	 * bound on fetches in flight does: with the path's bandwidth-delay
	 * product (pipe.c). */
	double cap = fs->o.prefetch_max * fs__blocks_pipe_scale(fs->blocks);

	if (status == 0)
		fs->window += 1.0;
	else if (status != -ECANCELED)
		fs->window /= 2;
	if (fs->window > cap)
		fs->window = cap;
	if (fs->window < 1)
		fs->window = 1;
}

/* After a sequential read, keep `window` blocks in flight ahead of it. */
static void prefetch(cfsfuse_t *fs, struct fhandle *h, uint64_t end)
{
	const struct sfsro_inode *ino = &h->inode;

	if (!fs->o.prefetch_max || ino->inline_data.len || ino->size <= SFSRO_INLINE_MAX)
		return;
	uint64_t nblocks = (ino->size + ino->bsize - 1) / ino->bsize;
	uint64_t from = (end + ino->bsize - 1) / ino->bsize;
	uint64_t to = from + (uint64_t)fs->window;

	if (h->prefetched > from)
		from = h->prefetched;
	if (to > nblocks)
		to = nblocks;
	for (uint64_t b = from; b < to; b++) {
		struct cfs_id key;
		if (!fs__data_key_cached(fs, h, b, &key, prefetch_done, fs))
			break;
		if (!fs__blk_peek(fs->blocks, &key))
			fs__blk_fetch_data(fs->blocks, &fs->root, &key, true, prefetch_done, fs);
		h->prefetched = b + 1;
	}
}

struct read_ctx {
	fuse_req_t req;
};

static void read_done(cfsfuse_t *fs, void *arg, int status, const uint8_t *p, size_t n)
{
	struct read_ctx *c = arg;

	if (status < 0) {
		fs->st.eio += status == -EIO;
		reply_errno(c->req, status);
	} else {
		fs->st.read_bytes += n;
		fuse_reply_buf(c->req, (const char *)p, n);
	}
	free(c);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	cfsfuse_t *fs = FS(req);
	struct fhandle *h = (struct fhandle *)(uintptr_t)fi->fh;
	struct read_ctx *c = xcalloc(1, sizeof(*c));
	bool sequential = (uint64_t)off == h->next_off || off == 0;

	fs->st.reads++;
	c->req = req;
	h->next_off = (uint64_t)off + size;
	fs__file_read(fs, h, (uint64_t)off, size, read_done, c);
	if (sequential)
		prefetch(fs, h, (uint64_t)off + size);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fs__fhandle_free((struct fhandle *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

/* Sizes and counts from the census (census.c): blocks in units of the
 * default block size, no block and no inode free (nothing can be added),
 * but f_ffree "unknown" (all ones) rather than 0: df -i and monitoring
 * read files - ffree as inodes used and files/ffree as a fill level, and
 * a read-only volume is not "100 % of its inodes used" — df shows "-".
 * ST_RDONLY comes from the mount itself (always ro, cfsfuse_run). */
static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	cfsfuse_t *fs = FS(req);
	struct fs_totals t;
	struct statvfs sv;
	bool complete;

	fs__census_totals(fs->census, &t, &complete);
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = SFSRO_BLOCK_SIZE_DEFAULT;
	sv.f_frsize = SFSRO_BLOCK_SIZE_DEFAULT;
	sv.f_blocks = t.blocks;
	sv.f_namemax = SFSRO_NAME_MAX;
	sv.f_files = t.files + t.dirs;
	sv.f_ffree = sv.f_favail = (fsfilcnt_t)-1;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* Every request that would change the volume: the mount is read-only
 * (the kernel refuses these itself on a ro mount; this answers anything
 * that gets through, never ENOSYS). */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                      const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                         struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

/* ------------------------------------------------------------ xattrs */

static const char xattr_names[] = "user.cfs.key\0user.cfs.seq\0user.cfs.volume\0";
/* ... and on the volume's top directory only: the mount's own state */
static const char xattr_names_top[] = "user.cfs.stats\0user.cfs.offline\0user.cfs.root_age\0";

static void stats_json(cfsfuse_t *fs, struct cfs_sbuf *b)
{
	struct cfsfuse_stats st = fs->st;
	struct fs_totals t;
	bool complete;

	const struct dhash_client_stats *cs = fs->dh ? client_dhash_stats(fs->dh) : NULL;

	fs__blocks_stats(fs->blocks, &st);
	fs__census_totals(fs->census, &t, &complete);
	cfs_sb_printf(b, "{\"hits\": %lu, \"misses\": %lu, \"fetches\": %lu, \"fetch_failures\": %lu, "
	              "\"retries\": %lu, \"prefetches\": %lu, \"dir_prefetches\": %lu, \"bytes_fetched\": %lu, \"cached_bytes\": %lu, "
	              "\"cached_blocks\": %lu, \"disk_hits\": %lu, \"disk_bytes\": %lu, "
	              "\"disk_blocks\": %lu, \"reads\": %lu, \"read_bytes\": %lu, \"eio\": %lu, "
	              "\"nodes\": %lu, \"root_seq\": %lu, \"root_switches\": %lu, \"window\": %.1f, "
	              "\"fetch_limit\": %lu, \"hedges\": %lu, \"hedges_skipped\": %lu, "
	              "\"lookups_remembered\": %lu, "
	              "\"files\": %lu, \"dirs\": %lu, \"bytes\": %lu, \"census_complete\": %s, "
	              "\"start_ms\": {\"early_root\": %.1f, \"root\": %.1f, \"root_lookup\": %.1f, \"root_rpcs\": %u, "
	              "\"mounted\": %.1f, \"opendir\": %.1f, \"readdir\": %.1f}}",
	              (unsigned long)st.hits, (unsigned long)st.misses, (unsigned long)st.fetches,
	              (unsigned long)st.fetch_failures, (unsigned long)st.retries,
	              (unsigned long)st.prefetches, (unsigned long)st.dir_prefetches,
	              (unsigned long)st.bytes_fetched,
	              (unsigned long)st.cached_bytes, (unsigned long)st.cached_blocks,
	              (unsigned long)st.disk_hits, (unsigned long)st.disk_bytes,
	              (unsigned long)st.disk_blocks, (unsigned long)st.reads, (unsigned long)st.read_bytes, (unsigned long)st.eio,
	              (unsigned long)fs__nodes_count(fs->nodes), (unsigned long)fs->root.seq,
	              (unsigned long)st.root_switches, fs->window, (unsigned long)st.fetch_limit,
	              (unsigned long)(cs ? cs->hedges : 0), (unsigned long)(cs ? cs->hedges_skipped : 0),
	              (unsigned long)(fs->dh ? client_lookups_remembered(fs->dh) : 0),
	              (unsigned long)t.files,
	              (unsigned long)t.dirs, (unsigned long)t.bytes, complete ? "true" : "false",
	              fs->start.early / 1e3, fs->start.root / 1e3, fs->start.root_lookup / 1e3, fs->start.root_rpcs,
	              fs->start.mounted / 1e3, fs->start.opendir / 1e3, fs->start.readdir / 1e3);
}

/* CFS_IOC_UPDATE on the root directory (cfsctl update): check for a newer
 * root now and answer when the check ends. No other ioctl is known. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi,
                     unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	if (cmd != (unsigned int)CFS_IOC_UPDATE || (flags & FUSE_IOCTL_COMPAT)) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (ino != 1 || out_bufsz < sizeof(struct cfs_update_reply)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	fs__root_update_now(FS(req), req);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	cfsfuse_t *fs = FS(req);
	struct fnode *n = fs__node_get(fs->nodes, ino);
	struct cfs_sbuf b = { 0 };
	char hex[65];

	if (!n) {
		fuse_reply_err(req, ESTALE);
		return;
	}
	if (strcmp(name, "user.cfs.key") == 0)
		cfs_sb_printf(&b, "%s", cfs_id_hex(&n->key, hex));
	else if (strcmp(name, "user.cfs.seq") == 0)
		cfs_sb_printf(&b, "%lu", (unsigned long)(ino == 1 ? fs->root.seq : n->seq));
	else if (strcmp(name, "user.cfs.volume") == 0)
		cfs_sb_printf(&b, "%s", fs->volname);
	else if (strcmp(name, "user.cfs.stats") == 0 && ino == 1)
		stats_json(fs, &b);
	else if (strcmp(name, "user.cfs.offline") == 0 && ino == 1)
		cfs_sb_printf(&b, "%d", fs->offline ? 1 : 0);
	else if (strcmp(name, "user.cfs.root_age") == 0 && ino == 1) {
		/* seconds since the mounted root was signed: how old the
		 * version read is, online or not (the clocks may differ) */
		uint64_t now = cfs_wall_s();
		cfs_sb_printf(&b, "%lu", (unsigned long)(now > fs->root.issued ? now - fs->root.issued : 0));
	}
	if (!b.p) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	if (size == 0)
		fuse_reply_xattr(req, b.len);
	else if (size < b.len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, b.p, b.len);
	free(b.p);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char names[sizeof(xattr_names) + sizeof(xattr_names_top)];
	size_t n = sizeof(xattr_names) - 1;

	memcpy(names, xattr_names, n);
	if (ino == 1) {
		memcpy(names + n, xattr_names_top, sizeof(xattr_names_top) - 1);
		n += sizeof(xattr_names_top) - 1;
	}
	if (size == 0)
		fuse_reply_xattr(req, n);
	else if (size < n)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, names, n);
}

const struct fuse_lowlevel_ops fs__ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.write = op_write,
	.create = op_create,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.getxattr = op_getxattr,
	.ioctl = op_ioctl,
	.listxattr = op_listxattr,
};
