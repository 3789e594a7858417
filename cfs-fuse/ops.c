/*
 * The FUSE operations, and the loop that runs them.
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
#define READS_PER_WAKEUP 64

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
			fs__blk_fetch_data(fs->blocks, &key, true, prefetch_done, fs);
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
/* ... and on the volume's top directory only */
static const char xattr_names_top[] = "user.cfs.stats\0";

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
	              "\"files\": %lu, \"dirs\": %lu, \"bytes\": %lu, \"census_complete\": %s}",
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
	              (unsigned long)t.dirs, (unsigned long)t.bytes, complete ? "true" : "false");
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

static const struct fuse_lowlevel_ops ops = {
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

/* ------------------------------------------------------------ the loop */

static void on_closed(uv_handle_t *h)
{
}

static void fs_stop(cfsfuse_t *fs)
{
	if (fs->stopping)
		return;
	fs->stopping = true;
	uv_poll_stop(&fs->poll);
	uv_close((uv_handle_t *)&fs->poll, on_closed);
	uv_close((uv_handle_t *)&fs->sigterm, on_closed);
	uv_close((uv_handle_t *)&fs->sigint, on_closed);
	uv_close((uv_handle_t *)&fs->update_timer, on_closed);
	fs__census_close(fs->census);
	fs__dirpf_close(fs->dirpf);
	client_free(fs->dh);
	fs->dh = NULL;
	fs__local_free(fs->local);
	fs->local = NULL;
	fs__root_update_answer(fs, -ESHUTDOWN);
}

/* Give the mount a 1 MiB read-ahead (the kernel's default for FUSE is
 * 128 KiB): root can raise its backing device's setting in sysfs. The
 * device number comes from mountinfo, since a stat of the mountpoint would
 * wait for this very process to answer. */
static void raise_readahead(const char *mountpoint)
{
	char real[4096], line[8192], dev[32] = "", path[128];
	FILE *f;

	if (geteuid() != 0 || !realpath(mountpoint, real) || !(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char d[32], mp[4096];
		if (sscanf(line, "%*s %*s %31s %*s %4095s", d, mp) == 2 && strcmp(mp, real) == 0)
			snprintf(dev, sizeof(dev), "%s", d); /* the last one is on top */
	}
	fclose(f);
	if (!dev[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1024", 4) != 4)
			log_debug("could not raise read-ahead at %s", path);
		close(fd);
	}
}

static void on_fuse(uv_poll_t *p, int status, int events)
{
	cfsfuse_t *fs = p->data;

	for (int i = 0; i < READS_PER_WAKEUP && !fs->stopping; i++) {
		int r = fuse_session_receive_buf(fs->se, &fs->buf);
		if (r == -EINTR)
			continue;
		if (r == -EAGAIN)
			return;
		if (r <= 0 || fuse_session_exited(fs->se)) {
			if (r < 0)
				log_error_errno(r, "reading /dev/fuse");
			log_info("%s was unmounted", fs->volname);
			fs_stop(fs);
			return;
		}
		fuse_session_process_buf(fs->se, &fs->buf);
		if (fs->inited && !fs->readahead_set) {
			/* the INIT reply has just set the kernel's value */
			fs->readahead_set = true;
			raise_readahead(fs->mountpoint);
		}
	}
}

static void on_signal(uv_signal_t *s, int signum)
{
	cfsfuse_t *fs = s->data;

	log_info("signal %d: unmounting", signum);
	fuse_session_unmount(fs->se);
	fs_stop(fs);
}

/* The volume's block cache on disk, when asked for; a mount goes on
 * without one it cannot open (another mount of the volume holds it). */
static dhash_cache_t *open_disk_cache(cfsfuse_t *fs)
{
	char dir[4096];
	dhash_cache_t *c;

	if (!fs->o.disk_cache || !fs->o.disk_cache_bytes)
		return NULL;
	if (snprintf(dir, sizeof(dir), "%s/%s", fs->o.disk_cache, fs->volname) >= (int)sizeof(dir)) {
		log_warn("disk cache path too long; going on without one");
		return NULL;
	}
	int r = dhash_cache_open(dir, fs->o.disk_cache_bytes, &c);
	if (r < 0) {
		log_warn("cannot use the disk cache %s (%s); going on without one", dir,
		         r == -EBUSY ? "another mount of this volume uses it" : strerror(-r));
		return NULL;
	}
	uint64_t blocks, bytes, evicted;
	dhash_cache_totals(c, &blocks, &bytes, &evicted);
	log_info("disk cache %s: %lu blocks, %lu MiB (bound %lu MiB)", dir, (unsigned long)blocks,
	         (unsigned long)(bytes >> 20), (unsigned long)(fs->o.disk_cache_bytes >> 20));
	return c;
}

int cfsfuse_expired_arg(const char *val)
{
	return !strcmp(val, "allow") ? 1 : !strcmp(val, "refuse") ? 0 : -1;
}

void cfsfuse_options_default(struct cfsfuse_options *o)
{
	memset(o, 0, sizeof(*o));
	o->cache_bytes = 64u << 20;
	o->fetch_timeout_ms = 10000;
	o->retries = 2;
	o->max_fetches = 24;
	o->disk_cache_bytes = 1ull << 30;
	o->prefetch_init = 4;
	o->prefetch_max = 64;
	o->update_s = 60;
}

/* Listen to the kernel, the signals and the root's update timer. */
static void start_serving(cfsfuse_t *fs)
{
	int fd = fuse_session_fd(fs->se);
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	uv_poll_init(fs->loop, &fs->poll, fd);
	fs->poll.data = fs;
	uv_poll_start(&fs->poll, UV_READABLE, on_fuse);
	uv_signal_init(fs->loop, &fs->sigterm);
	uv_signal_init(fs->loop, &fs->sigint);
	fs->sigterm.data = fs->sigint.data = fs;
	uv_signal_start(&fs->sigterm, on_signal, SIGTERM);
	uv_signal_start(&fs->sigint, on_signal, SIGINT);
	uv_timer_init(fs->loop, &fs->update_timer);
	fs->update_timer.data = fs;
	fs__inval_start(fs);
	fs__root_start_updates(fs);
	fs__census_start(fs->census);
}

/* Mount, then serve until a signal. The root is fetched before anything is
 * mounted (a volume that cannot be found leaves no mount behind) on the
 * same loop that serves later, which fuse_daemonize's fork hands to the
 * child; the labels at the end unwind in the reverse order of setting up. */
int cfsfuse_run(const struct cfs_pubkey *vol, const char *mountpoint,
                const struct cfsfuse_options *o, int fuse_argc, char **fuse_argv)
{
	cfsfuse_t *fs = xcalloc(1, sizeof(*fs));
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char opts[512];
	int rc = 1;

	fs->o = *o;
	fs->vol = *vol;
	cfs_name_encode(fs->volname, vol->b);
	fs->window = o->prefetch_init ? o->prefetch_init : 1;
	fs->loop = uv_default_loop();
	if (fs__root_initial(fs) < 0)
		goto out_free;

	snprintf(opts, sizeof(opts), "default_permissions,fsname=cfs:%.16s,subtype=cfs", fs->volname);
	fuse_opt_add_arg(&args, "cfs-mount");
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, opts);
	if (o->debug)
		fuse_opt_add_arg(&args, "-d");
	for (int i = 0; i < fuse_argc; i++)
		fuse_opt_add_arg(&args, fuse_argv[i]);
	/* last, so that no "rw" given before can undo it: libfuse applies the
	 * mount flags in order */
	fuse_opt_add_arg(&args, "-o");
	fuse_opt_add_arg(&args, "ro");
	if (!(fs->se = fuse_session_new(&args, &ops, sizeof(ops), fs))) {
		log_error("bad FUSE options");
		goto out_args;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		log_error("cannot mount at %s (is /dev/fuse there, the directory empty and ours?)",
		          mountpoint);
		goto out_session;
	}
	fs->mountpoint = mountpoint;
	printf("%s\n", mountpoint);
	fflush(stdout);
	log_info("mounted volume %s (sequence %lu) at %s", fs->volname, (unsigned long)fs->root.seq,
	         mountpoint);
	if (fuse_daemonize(o->foreground) != 0)
		goto out_unmount;
	if (!o->foreground)
		fs__log_to_syslog("cfs-mount");
	/* the root was fetched on this loop before the fork, and its ring
	 * client (a UDP socket, timers, FETCHes to replicas beyond the
	 * root's read quorum still out) lives on it: the child takes the
	 * loop's kernel state over and goes on where the parent stopped */
	if (!o->foreground && uv_loop_fork(fs->loop) != 0)
		log_warn("cannot reinitialise the event loop after daemonizing");

	if (fs__source_open(fs) < 0)
		goto out_unmount;
	/* a local store is a disk already: no cache of it on disk */
	fs->blocks = fs__blocks_new(fs->loop, fs->dh, fs->local, o,
	                            fs->local ? NULL : open_disk_cache(fs));
	fs__blocks_set_root(fs->blocks, &fs->root);
	fs->nodes = fs__nodes_new();
	fs->census = fs__census_new(fs);
	fs->dirpf = fs__dirpf_new(fs);
	struct fnode *root = fs__node_get(fs->nodes, 1);
	root->key = fs->root.root_dir;
	root->mode = fs->root.dir_mode;
	root->mtime_s = fs->root.mtime_s;
	root->mtime_ns = fs->root.mtime_ns;
	root->seq = fs->root.seq;

	start_serving(fs);
	cfs_loop_run(fs->loop);
	rc = 0;

	fs__inval_stop(fs);
	fs__census_free(fs->census);
	fs__dirpf_close(fs->dirpf);
	fs__blocks_free(fs->blocks);
	fs__dirpf_free(fs->dirpf);
	fs__nodes_free(fs->nodes);
	free(fs->buf.mem);
	uv_loop_close(fs->loop);
out_unmount:
	fuse_session_unmount(fs->se);
out_session:
	fuse_session_destroy(fs->se);
out_args:
	fuse_opt_free_args(&args);
out_free:
	if (fs->dh && !fs->stopping) { /* the first root's client, never served from */
		client_free(fs->dh);
		cfs_loop_run(fs->loop);
	}
	free(fs);
	return rc;
}
