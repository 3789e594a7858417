/*
 * cfs-get — copy a tree or one file out of a volume without FUSE, every
 * block verified, with the mount's own client code (block cache, verified
 * walks) as cfs-cat uses it.
 *
 *   cfs-get [--cfsd SOCKET | --data DIR | --bootstrap H:P | --from dir:PATH]
 *           [-w N] [--jobs N] [--check] VOLUME[@SEQ][/PATH] DEST
 *
 * Two phases. First every directory below PATH is listed (several at
 * once), so the progress bar has its totals and the files can be taken
 * directory by directory. Then the directories are made, links made, and
 * the files copied: up to --jobs files at once, up to --window blocks in
 * flight over all of them, a file's blocks written where they belong as
 * they land. Each file is written under a temporary name in its directory
 * and renamed into place once complete, with its mode and mtime, so a run
 * that is killed leaves no partial file under a real name; the next run
 * removes the temporary files left over and skips every file already
 * there with its size and mtime (--check: and its content, by the key
 * cfs-publish would give it). Directories get their mode and mtime last,
 * deepest first, once nothing more is written into them.
 *
 * Nothing is written outside DEST: every directory is opened one name at
 * a time from DEST's own descriptor without following links (O_NOFOLLOW),
 * every name is created relative to its directory's descriptor, and a
 * name with '/' or that is "." or ".." is refused.
 *
 * Why one file of over 800 lines: it is one program's one job, a chain of
 * callbacks over one copy's state (the listing, the queue of files, the
 * blocks in flight, the progress bar, the directories to finish). The
 * reading it does is the mount's library's (cfs-fuse/internal.h); what is
 * left here is the copy itself, and split it would be names shared across
 * files for one struct.
 */
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

#define LISTINGS_MAX 8    /* directories listed at once */
#define JOBS_MAX 256

struct gdir {
	struct gdir *parent;
	char *rel;                /* below DEST, '/'-separated ("" for DEST itself) */
	struct cfs_id key;        /* top directory block */
	uint32_t mode;
	int64_t mtime_s;
	uint32_t mtime_ns;
	struct fs_dir *h;         /* while listed */
	char **temp_like;         /* entries named like our temporary files: never removed */
	uint32_t ntemp_like;
	uint64_t files_left;      /* files and links not yet done: fd is closed at 0 */
	int fd;                   /* -1 when closed */
	bool made, failed;
	bool set_attrs;           /* its mode and mtime are the volume's (not the user's DEST parent) */
	size_t idx;               /* in g->dirs: parents come first */
};

struct gfile {
	struct gdir *dir;
	char *name;
	uint8_t type;
	uint64_t size;
	uint32_t mode;
	int64_t mtime_s;
	uint32_t mtime_ns;
	struct cfs_id key;
	char *target;             /* a link's */
};

struct get;

/* One file being copied: its slot is reused, never freed mid-run, so a
 * callback that lands during pump() finds it valid. */
struct get_job {
	struct get *g;
	struct gfile *f;
	struct fhandle *h;
	uint64_t seq;             /* start order: the oldest is served first */
	uint64_t next_off, bsize;
	uint32_t inflight;
	int fd;
	int status;               /* the first error */
	uint32_t local_mode;      /* of the file found in place (checking) */
	bool in_use, checking;
	char tmp[FS_GET_TEMP_LEN];
};

struct get_chunk {
	struct get_job *j;
	uint64_t off;
};

struct get {
	cfsfuse_t *fs;
	const char *dest;
	uint32_t window, njobs;
	bool check;
	int root_fd;
	struct gdir **dirs;
	size_t ndirs, cap_dirs, next_list;
	uint32_t listing;
	bool list_busy, list_again, listed;
	struct gfile *files;
	size_t nfiles, cap_files, next_file;
	struct get_job *jobs;
	uint32_t active, reads;
	uint64_t job_seq, temp_seq;
	bool pumping, again, finished;
	uint64_t copied, skipped, failed, dirs_made, dirs_failed, bytes_copied;
	struct cfs_progress bar;
	uint64_t start_us;
};

/* DEST/rel/name for a message: control bytes as \xHH, so that a name
 * with a newline still makes one line per failure. */
static char *path_of(const struct get *g, const struct gdir *d, const char *name)
{
	size_t n = strlen(g->dest) + strlen(d->rel) + (name ? strlen(name) : 0) + 3;
	char *p = xmalloc(n), *q = xmalloc(4 * n), *o = q;

	snprintf(p, n, "%s%s%s%s%s", g->dest, d->rel[0] ? "/" : "", d->rel, name ? "/" : "", name ? name : "");
	for (const unsigned char *c = (const unsigned char *)p; *c; c++)
		o += *c < 0x20 || *c == 0x7f ? sprintf(o, "\\x%02x", *c) : sprintf(o, "%c", *c);
	*o = 0;
	free(p);
	return q;
}

/* One line per failure: what, where, why; counted with the files and
 * links (name given) or with the directories (name NULL). */
static void fail_at(struct get *g, const struct gdir *d, const char *name, const char *what, int r)
{
	char *p = path_of(g, d, name);
	log_error("%s: %s%s%s", p, what ? what : "", what ? ": " : "", strerror(-r));
	free(p);
	if (name)
		g->failed++;
	else
		g->dirs_failed++;
}

/* ------------------------------------------------------------ phase 1: list */

static struct gdir *dir_add(struct get *g, struct gdir *parent, const char *rel, const struct sfsro_entry *e)
{
	struct gdir *d = xcalloc(1, sizeof(*d));

	d->parent = parent;
	d->rel = xstrdup(rel);
	d->key = e->key;
	d->mode = e->mode;
	d->mtime_s = e->mtime_s;
	d->mtime_ns = e->mtime_ns;
	d->fd = -1;
	d->set_attrs = true;
	d->idx = g->ndirs;
	if (g->ndirs == g->cap_dirs) {
		g->cap_dirs = g->cap_dirs ? 2 * g->cap_dirs : 64;
		g->dirs = xrealloc(g->dirs, g->cap_dirs * sizeof(*g->dirs));
	}
	g->dirs[g->ndirs++] = d;
	return d;
}

static void file_add(struct get *g, struct gdir *d, const char *name, const struct sfsro_entry *e)
{
	if (g->nfiles == g->cap_files) {
		g->cap_files = g->cap_files ? 2 * g->cap_files : 256;
		g->files = xrealloc(g->files, g->cap_files * sizeof(*g->files));
	}
	struct gfile *f = &g->files[g->nfiles++];
	*f = (struct gfile){ .dir = d, .name = xstrdup(name), .type = e->type, .size = e->size,
	                     .mode = e->mode, .mtime_s = e->mtime_s, .mtime_ns = e->mtime_ns,
	                     .key = e->key };
	if (e->type == SFSRO_T_SYMLINK) {
		f->target = xmalloc(e->target.len + 1);
		memcpy(f->target, e->target.p, e->target.len);
		f->target[e->target.len] = 0;
	} else {
		g->bar.total_files++;
		g->bar.total_bytes += e->size;
	}
	d->files_left++;
}

static void list_more(struct get *g);

struct lctx {
	struct get *g;
	struct gdir *d;
};

static bool entry_add(void *arg, const struct sfsro_entry *e, uint64_t index)
{
	struct lctx *c = arg;
	struct get *g = c->g;
	struct gdir *d = c->d;
	char name[SFSRO_NAME_MAX + 1];

	if (!fs__get_name_is_safe(e->name.p, e->name.len)) {
		char *p = path_of(g, d, NULL);
		log_error("%s: entry '%.*s' refused: not a name that can be created in a directory", p,
		          (int)e->name.len, (const char *)e->name.p);
		free(p);
		g->failed++;
		return true;
	}
	memcpy(name, e->name.p, e->name.len);
	name[e->name.len] = 0;
	if (fs__get_is_temp_name(name)) {
		d->temp_like = xrealloc(d->temp_like, (d->ntemp_like + 1) * sizeof(*d->temp_like));
		d->temp_like[d->ntemp_like++] = xstrdup(name);
	}
	if (e->type == SFSRO_T_DIR) {
		size_t n = strlen(d->rel) + e->name.len + 2;
		char *rel = xmalloc(n);
		snprintf(rel, n, "%s%s%s", d->rel, d->rel[0] ? "/" : "", name);
		dir_add(g, d, rel, e);
		free(rel);
	} else if (e->type == SFSRO_T_FILE || e->type == SFSRO_T_SYMLINK) {
		file_add(g, d, name, e);
	}
	return true;
}

static void list_done(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct lctx *c = arg;
	struct get *g = c->g;
	struct gdir *d = c->d;

	if (status < 0) {
		fail_at(g, d, NULL, "cannot list the directory", status);
		d->failed = true;
	}
	fs__dir_free(d->h);
	d->h = NULL;
	free(c);
	g->listing--;
	cfs_progress_draw(&g->bar, cfs_now_us());
	list_more(g);
}

static void list_opened(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct lctx *c = arg;

	c->d->h = h;
	if (status < 0) {
		list_done(fs, c, status, NULL);
		return;
	}
	fs__dir_read(fs, h, 0, entry_add, list_done, c);
}

/* Start listings up to LISTINGS_MAX; listed once none is left. A listing
 * can end inside the call that starts it (its blocks cached: identical
 * directories share them), hence the guard instead of recursion. */
static void list_more(struct get *g)
{
	if (g->list_busy) {
		g->list_again = true;
		return;
	}
	g->list_busy = true;
	do {
		g->list_again = false;
		while (g->listing < LISTINGS_MAX && g->next_list < g->ndirs) {
			struct lctx *c = xmalloc(sizeof(*c));
			*c = (struct lctx){ g, g->dirs[g->next_list++] };
			g->listing++;
			fs__dir_open(g->fs, 0, &c->d->key, list_opened, c);
		}
	} while (g->list_again);
	g->list_busy = false;
	if (!g->listing && g->next_list == g->ndirs)
		g->listed = true;
}

/* ------------------------------------------------------------ directories here */

/* Open rel below root, one name at a time, following no link: a link
 * where a directory should be (planted in DEST before or during the run)
 * is ELOOP or ENOTDIR, never a way out. */
static int open_beneath(int root, const char *rel)
{
	char *copy = xstrdup(rel), *save = NULL;
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 0);

	if (fd < 0) {
		free(copy);
		return -errno;
	}
	for (char *c = strtok_r(copy, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		close(fd);
		if (nfd < 0) {
			free(copy);
			return -e;
		}
		fd = nfd;
	}
	free(copy);
	return fd;
}

static int dir_fd(struct get *g, struct gdir *d)
{
	if (d->fd < 0 && !d->failed) {
		int fd = open_beneath(g->root_fd, d->rel);
		if (fd < 0) {
			fail_at(g, d, NULL, "cannot open the directory", fd);
			d->failed = true;
			return fd;
		}
		d->fd = fd;
	}
	return d->failed ? -EIO : d->fd;
}

/* One file or link of d done: close d's descriptor after its last. */
static void dir_release(struct gdir *d)
{
	if (d->files_left && --d->files_left == 0 && d->fd >= 0) {
		close(d->fd);
		d->fd = -1;
	}
}

static bool is_temp_like(const struct gdir *d, const char *name)
{
	for (uint32_t i = 0; i < d->ntemp_like; i++)
		if (strcmp(d->temp_like[i], name) == 0)
			return true;
	return false;
}

/* Remove the temporary files an interrupted run left in d (never a name
 * the volume itself has there). */
static void remove_leftovers(struct gdir *d, int fd)
{
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	DIR *dir = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;

	if (!dir) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(dir)))
		if (fs__get_is_temp_name(de->d_name) && !is_temp_like(d, de->d_name))
			(void)unlinkat(fd, de->d_name, 0);
	closedir(dir);
}

/* Make (or find) d as a real directory we can write into. A directory
 * from an earlier run may carry its final mode (0555): it is opened up
 * for us until the end. Its parent is opened for this alone (a
 * descriptor per directory at once would run out on a wide tree). */
static void dir_make(struct get *g, struct gdir *d)
{
	struct stat st;
	int fd;

	if (d->parent) {
		const char *name = strrchr(d->rel, '/') ? strrchr(d->rel, '/') + 1 : d->rel;
		int pfd;
		if (d->parent->failed) {
			d->failed = true; /* said once, for the parent */
			return;
		}
		if ((pfd = open_beneath(g->root_fd, d->parent->rel)) < 0) {
			fail_at(g, d->parent, NULL, "cannot open the directory", pfd);
			d->parent->failed = d->failed = true;
			return;
		}
		if (mkdirat(pfd, name, 0700) < 0 && errno != EEXIST)
			fd = -errno;
		else if ((fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			fd = -errno;
		close(pfd);
		if (fd < 0) {
			fail_at(g, d, NULL, "cannot make the directory", fd);
			d->failed = true;
			return;
		}
	} else if ((fd = fcntl(g->root_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		fail_at(g, d, NULL, "cannot open the directory", -errno);
		d->failed = true;
		return;
	}
	if (d->set_attrs && fstat(fd, &st) == 0 && (st.st_mode & 0700) != 0700)
		(void)fchmod(fd, (st.st_mode & 07777) | 0700);
	remove_leftovers(d, fd);
	d->made = true;
	g->dirs_made += d->set_attrs;
	close(fd);
}

/* Deepest first (every directory comes after its parent in g->dirs), so
 * a parent's mtime is set after the last change inside it. */
static void dirs_finish(struct get *g)
{
	for (size_t i = g->ndirs; i-- > 0;) {
		struct gdir *d = g->dirs[i];
		if (!d->made || !d->set_attrs)
			continue;
		int fd = open_beneath(g->root_fd, d->rel);
		struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { d->mtime_s, d->mtime_ns } };
		if (fd < 0 || fchmod(fd, d->mode & 0777) < 0 || futimens(fd, ts) < 0)
			fail_at(g, d, NULL, "cannot set the directory's mode and mtime", fd < 0 ? fd : -errno);
		if (fd >= 0)
			close(fd);
	}
}

/* ------------------------------------------------------------ phase 2: copy */

static void pump(struct get *g);

static void file_done(struct get *g, struct gfile *f)
{
	dir_release(f->dir);
	cfs_progress_draw(&g->bar, cfs_now_us());
}

/* A temporary name in fd's directory, created empty (O_EXCL: a name
 * taken, even by the volume's own entry, is passed over). */
static int temp_create(struct get *g, int dfd, char tmp[static FS_GET_TEMP_LEN], bool link,
                       const char *target)
{
	for (int tries = 0; tries < 100; tries++) {
		fs__get_temp_name(tmp, (long)getpid(), g->temp_seq++);
		int fd = link ? symlinkat(target, dfd, tmp)
		              : openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd < 0 ? -errno : fd;
	}
	return -EEXIST;
}

/* Put tmp in place as name, with mode (files) and mtime: the rename is
 * the last step, so name is the old file or the whole new one. */
static int temp_commit(int dfd, int fd, const char *tmp, const char *name, const struct gfile *f)
{
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { f->mtime_s, f->mtime_ns } };
	int r = 0;

	if (fd >= 0) {
		if (fchmod(fd, f->mode & 0777) < 0 || futimens(fd, ts) < 0)
			r = -errno;
		if (close(fd) < 0 && !r)
			r = -errno;
	} else if (utimensat(dfd, tmp, ts, AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
	}
	if (!r && renameat(dfd, tmp, dfd, name) < 0)
		r = -errno;
	if (r)
		(void)unlinkat(dfd, tmp, 0);
	return r;
}

/* A link: made at once, no block to fetch (its target is in the entry). */
static void copy_link(struct get *g, struct gfile *f, int dfd)
{
	char tmp[FS_GET_TEMP_LEN], cur[SFSRO_SYMLINK_MAX + 2];
	struct stat st;
	ssize_t n;
	int r;

	if (fstatat(dfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode) &&
	    st.st_mtim.tv_sec == f->mtime_s && (uint32_t)st.st_mtim.tv_nsec == f->mtime_ns &&
	    (n = readlinkat(dfd, f->name, cur, sizeof(cur) - 1)) >= 0 && (size_t)n == strlen(f->target) &&
	    memcmp(cur, f->target, (size_t)n) == 0) {
		g->skipped++;
		return;
	}
	if ((r = temp_create(g, dfd, tmp, true, f->target)) < 0 ||
	    (r = temp_commit(dfd, -1, tmp, f->name, f)) < 0) {
		fail_at(g, f->dir, f->name, "cannot make the link", r);
		return;
	}
	g->copied++;
}

/* A file skipped is done for the bar's percentage, but no part of its
 * rate: the mark moves by its bytes, so a resumed run's ETA is that of
 * the bytes still to fetch. */
static void count_skipped(struct get *g, const struct gfile *f)
{
	g->skipped++;
	g->bar.done_files++;
	g->bar.done_bytes += f->size;
	g->bar.rate_bytes += f->size;
}

/* The mode is no part of the skip test: a file skipped gets it set. */
static void fix_mode(int dfd, const struct gfile *f, uint32_t local_mode)
{
	if ((local_mode & 0777) != (f->mode & 0777))
		(void)fchmodat(dfd, f->name, f->mode & 0777, 0);
}

static void skip_file(struct get *g, struct gfile *f, int dfd, uint32_t local_mode)
{
	fix_mode(dfd, f, local_mode);
	count_skipped(g, f);
}

static void job_end(struct get_job *j, int r)
{
	struct get *g = j->g;
	struct gfile *f = j->f;

	if (r == 0 && j->fd >= 0) {
		r = temp_commit(f->dir->fd, j->fd, j->tmp, f->name, f);
		j->fd = -1;
	}
	if (j->fd >= 0) {
		close(j->fd);
		(void)unlinkat(f->dir->fd, j->tmp, 0);
	}
	if (r < 0) {
		fail_at(g, f->dir, f->name, NULL, r);
	} else if (r == 1) {
		count_skipped(g, f);
	} else {
		g->copied++;
		g->bar.done_files++;
	}
	fs__fhandle_free(j->h);
	j->h = NULL;
	j->in_use = false;
	g->active--;
	file_done(g, f);
}

static void chunk_done(cfsfuse_t *fs, void *arg, int status, const uint8_t *p, size_t n)
{
	struct get_chunk *c = arg;
	struct get_job *j = c->j;
	struct get *g = j->g;

	g->reads--;
	j->inflight--;
	if (status == 0 && !j->status) {
		for (size_t w = 0; w < n;) {
			ssize_t k = pwrite(j->fd, p + w, n - w, (off_t)(c->off + w));
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				status = -errno;
				break;
			}
			w += (size_t)k;
		}
		if (status == 0) {
			g->bar.done_bytes += n;
			g->bytes_copied += n;
			cfs_progress_draw(&g->bar, cfs_now_us());
		}
	}
	if (status < 0 && !j->status)
		j->status = status;
	free(c);
	if (!j->inflight && (j->status || j->next_off >= j->f->size))
		job_end(j, j->status);
	pump(g);
}

/* The temporary file is made once the inode is in: a file that cannot
 * be fetched at all leaves nothing behind. */
static int job_begin_copy(struct get_job *j)
{
	int fd = temp_create(j->g, j->f->dir->fd, j->tmp, false, NULL);

	if (fd < 0)
		return fd;
	j->fd = fd;
	return 0;
}

/* --check: the local file's key, as cfs-publish would make it with the
 * volume's block size, mode and mtime, against the verified entry's. */
static bool same_content(struct get_job *j)
{
	int fd = openat(j->f->dir->fd, j->f->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct cfs_id key;
	bool same;

	if (fd < 0)
		return false;
	same = fs__get_local_key(fd, &j->h->inode, &key) == 0 && cfs_id_eq(&key, &j->f->key);
	close(fd);
	return same;
}

static void job_opened(cfsfuse_t *fs, void *arg, int status, struct fhandle *h)
{
	struct get_job *j = arg;
	struct get *g = j->g;
	int r = status;

	g->reads--;
	j->h = h;
	if (r == 0 && h->inode.size != j->f->size)
		r = -EIO; /* the directory and the inode disagree: a broken volume */
	if (r == 0 && j->checking && same_content(j)) {
		fix_mode(j->f->dir->fd, j->f, j->local_mode);
		job_end(j, 1); /* counted as skipped */
		pump(g);
		return;
	}
	if (r == 0)
		r = job_begin_copy(j);
	if (r == 0)
		j->bsize = h->inode.bsize ? h->inode.bsize : SFSRO_BLOCK_SIZE_DEFAULT;
	if (r < 0)
		job_end(j, r);
	pump(g);
}

/* Start f: skip it, make a link, or take a job slot and open its inode
 * (one read of the window). */
static void file_start(struct get *g, struct gfile *f)
{
	struct sfsro_entry e = { .size = f->size, .mtime_s = f->mtime_s, .mtime_ns = f->mtime_ns };
	int dfd = f->dir->failed ? -EIO : dir_fd(g, f->dir);
	struct get_job *j = NULL;
	struct stat st;
	int what;

	if (dfd < 0) {
		g->failed++; /* its directory's failure is reported once */
		file_done(g, f);
		return;
	}
	if (f->type == SFSRO_T_SYMLINK) {
		copy_link(g, f, dfd);
		file_done(g, f);
		return;
	}
	what = fs__get_decide(fstatat(dfd, f->name, &st, AT_SYMLINK_NOFOLLOW) == 0 ? &st : NULL, &e, g->check);
	if (what == FS_GET_SKIP || (what == FS_GET_CHECK && f->size == 0)) {
		skip_file(g, f, dfd, st.st_mode);
		file_done(g, f);
		return;
	}
	for (uint32_t i = 0; i < g->njobs && !j; i++)
		if (!g->jobs[i].in_use)
			j = &g->jobs[i];
	*j = (struct get_job){ .g = g, .f = f, .seq = g->job_seq++, .fd = -1, .in_use = true,
	                   .checking = what == FS_GET_CHECK, .local_mode = st.st_mode };
	g->active++;
	if (f->size == 0) {
		int r = job_begin_copy(j);
		job_end(j, r < 0 ? r : 0);
		return;
	}
	g->reads++;
	fs__file_open(g->fs, 0, &f->key, job_opened, j);
}

/* Serve the oldest jobs first: their blocks up to the window, so a file
 * finishes (and its descriptor closes) before many others begin; then
 * start files while slots and the window allow. Callbacks can land
 * inside the calls made here (blocks in the cache), so a call from one
 * only asks for another round. */
static void pump(struct get *g)
{
	if (g->pumping) {
		g->again = true;
		return;
	}
	g->pumping = true;
	do {
		g->again = false;
		for (;;) {
			struct get_job *j = NULL;
			for (uint32_t i = 0; i < g->njobs; i++) {
				struct get_job *c = &g->jobs[i];
				if (c->in_use && c->fd >= 0 && !c->status && c->next_off < c->f->size &&
				    (!j || c->seq < j->seq))
					j = c;
			}
			if (!j || g->reads >= g->window)
				break;
			while (j->in_use && !j->status && j->next_off < j->f->size && g->reads < g->window) {
				struct get_chunk *c = xmalloc(sizeof(*c));
				*c = (struct get_chunk){ j, j->next_off };
				j->next_off += j->bsize;
				j->inflight++;
				g->reads++;
				fs__file_read(g->fs, j->h, c->off, (size_t)j->bsize, chunk_done, c);
			}
		}
		while (g->next_file < g->nfiles && g->active < g->njobs && g->reads < g->window)
			file_start(g, &g->files[g->next_file++]);
	} while (g->again);
	g->pumping = false;
	if (g->next_file == g->nfiles && !g->active)
		g->finished = true;
}

/* ------------------------------------------------------------ the program */

#define USAGE "usage: cfs-get [--cfsd SOCKET | --data DIR | --bootstrap H:P | --from dir:PATH] [-w N] [--jobs N] [--check] [--quiet | --progress] VOLUME[@SEQ][/PATH] DEST"

struct get_args {
	const char *spec, *path, *dest;
	uint32_t window, jobs;
	bool check, quiet, progress;
};

/* The options: cfs-cat's for the daemon or ring and the window; then how
 * many files at once, --check, and the bar's. Short options only where
 * their letter means the same in every tool (-d, -w, -q, -h, -V). */
static void parse_args(int argc, char **argv, struct client_target *tgt, cfsfuse_t *fs, struct get_args *a)
{
	enum { O_JOBS = CFSFUSE_O_NEXT, O_CHECK, O_PROGRESS };
	static const struct option opts[] = {
		{ "cfsd", required_argument, NULL, CFSFUSE_O_CFSD },
		{ "data", required_argument, NULL, 'd' },
		{ "bootstrap", required_argument, NULL, CFSFUSE_O_BOOTSTRAP },
		{ "from", required_argument, NULL, CFSFUSE_O_FROM },
		{ "expired", required_argument, NULL, CFSFUSE_O_EXPIRED },
		{ "window", required_argument, NULL, 'w' },
		{ "jobs", required_argument, NULL, O_JOBS },
		{ "check", no_argument, NULL, O_CHECK },
		{ "quiet", no_argument, NULL, 'q' },
		{ "progress", no_argument, NULL, O_PROGRESS },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	unsigned long v;
	const char *why = "";
	char *end;
	int opt;

	a->window = 24;
	a->jobs = 8;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":d:w:qhV", opts, NULL)) != -1) {
		if (cfsfuse_reader_opt(opt, optarg, USAGE, tgt, &fs->o))
			continue;
		switch (opt) {
		case 'w':
			v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > 4096)
				cfs_usage_error(USAGE, "--window wants 1..4096 blocks");
			a->window = (uint32_t)v;
			break;
		case O_JOBS:
			v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > JOBS_MAX)
				cfs_usage_error(USAGE, "--jobs wants 1..%d files", JOBS_MAX);
			a->jobs = (uint32_t)v;
			break;
		case O_CHECK: a->check = true; break;
		case 'q': a->quiet = true; break;
		case O_PROGRESS: a->progress = true; break;
		case 'V':
			printf("cfs-get %s\n", CFS_VERSION);
			exit(0);
		case 'h':
			puts(USAGE "\n\n"
			     "Copy PATH of VOLUME (the whole volume without one; @SEQ: that version) into\n"
			     "DEST, every block verified, without FUSE: a directory's contents go into\n"
			     "the directory DEST (made if missing); a file or link goes into DEST when\n"
			     "DEST is a directory or ends in '/', else is written as DEST. Files, links\n"
			     "(never followed), directories, permission bits and mtimes are recreated.\n"
			     "\n"
			     "      --cfsd SOCKET     the local cfsd's control socket\n"
			     "  -d, --data DIR        ... or the data directory of that cfsd (default\n"
			     "                        $CFS_DATA_DIR, /var/lib/cfs for root)\n"
			     "      --bootstrap H:P   read as a plain ring client, no local cfsd (repeatable;\n"
			     "                        default: the local cfsd when one runs, else\n"
			     "                        $CFS_BOOTSTRAP, else ~/.config/cfs/client.conf)\n"
			     "      --from dir:PATH   read from the dir: store at PATH (no ring)\n"
			     "      --expired WHAT    a root past its valid-until: refuse (default), or\n"
			     "                        allow: read it anyway, with a warning naming its date\n"
			     "  -w, --window N        blocks in flight over all files, 1..4096 (default 24)\n"
			     "      --jobs N          files copied at once, 1..256 (default 8)\n"
			     "      --check           a file already in DEST with the size and mtime of the\n"
			     "                        volume's is read and kept only if its content key (as\n"
			     "                        cfs-publish computes it) is the volume's; without\n"
			     "                        --check size and mtime are enough to skip it\n"
			     "  -q, --quiet           no progress bar and no summary: only errors\n"
			     "      --progress        draw the progress bar even when stderr is not a terminal\n"
			     "  -V, --version         show the version\n"
			     "  -h, --help            show this help\n"
			     "\n"
			     "Each file is written under a temporary name (.cfs-get-PID-N.part) in its\n"
			     "directory and renamed into place once whole: an interrupted run leaves no\n"
			     "partial file under a real name, and running it again removes the temporary\n"
			     "files and copies only what is missing or differs.\n"
			     "Exit status: 0 everything copied (or already there); 1 some entries failed\n"
			     "(one line each, then the summary) or the volume could not be read; 2 wrong\n"
			     "arguments.");
			exit(0);
		case ':':
			cfs_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
		default:
			cfs_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		cfs_usage_error(USAGE, "give a VOLUME[/PATH] and a DEST");
	a->spec = argv[optind];
	a->dest = argv[optind + 1];
	if (cfs_volume_spec_parse(a->spec, fs->vol.b, &fs->o.version, &a->path, &why) < 0)
		cfs_usage_error(USAGE, "'%s' is not a volume name: %s", a->spec, why);
	if (!a->dest[0])
		cfs_usage_error(USAGE, "DEST is empty");
	if (fs->o.from_dir && (tgt->sock[0] || tgt->nboot))
		cfs_usage_error(USAGE, "--from reads a local store: no --cfsd, --data or --bootstrap");
	if (!fs->o.from_dir && client_target_resolve(tgt) < 0)
		exit(2);
}

struct get_lookup {
	struct sfsro_node node;
	int status;
	bool done;
};

static void looked_up(cfsfuse_t *fs, void *arg, int status, const struct sfsro_entry *e)
{
	struct get_lookup *lk = arg;

	lk->status = status;
	if (status == 0) {
		lk->node.e = *e;
		memcpy(lk->node.name, e->name.p, e->name.len);
		lk->node.name[e->name.len] = 0;
		lk->node.e.name.p = lk->node.name;
		memcpy(lk->node.target, e->target.p, e->target.len);
		lk->node.target[e->target.len] = 0;
		lk->node.e.target.p = lk->node.target;
	}
	lk->done = true;
}

/* A tree: its directories listed into g, DEST made and opened. */
static int setup_tree(struct get *g, const struct sfsro_entry *e)
{
	int r = cfs_mkdir_p(g->dest, 0700);

	if (r < 0)
		return log_error_errno(r, "%s: cannot make the directory", g->dest);
	if ((g->root_fd = open(g->dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return log_error_errno(-errno, "%s", g->dest);
	dir_add(g, NULL, "", e);
	list_more(g);
	if (cfs_loop_run_until(g->fs->loop, &g->listed) < 0)
		return log_error_errno(-EIO, "listing the volume stopped");
	return 0;
}

/* One file or link: where it goes (cp's rule), in the directory that
 * holds it, whose own mode and mtime are the user's. */
static int setup_one(struct get *g, const struct sfsro_entry *e, const char *name)
{
	struct stat st;
	char path[4096], *slash, *parent;
	int r = fs__get_dest_path(g->dest, stat(g->dest, &st) == 0 && S_ISDIR(st.st_mode), name, path,
	                          sizeof(path));

	if (r < 0)
		return log_error_errno(r, "%s", g->dest);
	slash = strrchr(path, '/');
	parent = xstrdup(slash ? (slash == path ? "/" : path) : ".");
	if (slash && slash != path)
		parent[slash - path] = 0;
	if ((g->root_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = log_error_errno(-errno, "%s", parent);
		free(parent);
		return r;
	}
	g->dest = parent; /* messages name parent/name */
	struct gdir *d = dir_add(g, NULL, "", e);
	d->set_attrs = false;
	file_add(g, d, slash ? slash + 1 : path, e);
	g->listed = true;
	return 0;
}

static int cmp_files(const void *a, const void *b)
{
	const struct gfile *x = a, *y = b;
	if (x->dir->idx != y->dir->idx)
		return x->dir->idx < y->dir->idx ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The steps in order, each waiting for the last on the loop: the root
 * (fs__root_initial), the path, the listing, the directories, the
 * copies, the directories' attributes, the summary. Kept in one place so
 * the order (attributes only after the last write) reads top to bottom. */
int main(int argc, char **argv)
{
	static struct client_target tgt;
	struct get g = { .root_fd = -1 };
	struct get_lookup lk = { 0 };
	struct get_args a = { 0 };
	cfsfuse_t *fs = xcalloc(1, sizeof(*fs));
	char b1[16];
	int r;

	cfs_log_init(argv[0], CFS_LOG_INFO);
	cfsfuse_options_default(&fs->o);
	fs->doing = "read"; /* messages say "cannot read volume", not "mount" */
	parse_args(argc, argv, &tgt, fs, &a);
	if (a.quiet)
		cfs_log_set_level(CFS_LOG_WARN);
	if (cfs_crypto_init() < 0)
		return 1;
	fs->o.target = &tgt;
	fs->o.max_fetches = a.window; /* the window is the only limit */
	cfs_name_encode(fs->volname, fs->vol.b);
	fs->loop = uv_default_loop();
	if (fs__root_initial(fs) < 0 || fs__source_open(fs) < 0)
		return 1;
	fs->blocks = fs__blocks_new(fs->loop, fs->dh, fs->local, &fs->o, NULL);
	g.fs = fs;
	g.dest = a.dest;
	g.window = a.window;
	g.njobs = a.jobs;
	g.check = a.check;
	g.jobs = xcalloc(a.jobs, sizeof(*g.jobs));
	g.bar.on = !a.quiet && (a.progress || isatty(STDERR_FILENO));
	g.start_us = cfs_now_us();

	fs__path_lookup(fs, a.path[0] ? a.path : "/", looked_up, &lk);
	if (cfs_loop_run_until(fs->loop, &lk.done) < 0)
		lk.status = -EIO;
	if (lk.status < 0) {
		log_error("%s: %s", a.spec, strerror(-lk.status));
		return 1;
	}
	if (lk.node.e.type == SFSRO_T_DIR)
		r = setup_tree(&g, &lk.node.e);
	else
		r = setup_one(&g, &lk.node.e, (const char *)lk.node.name);
	if (r < 0)
		return 1;

	qsort(g.files, g.nfiles, sizeof(*g.files), cmp_files);
	for (size_t i = 0; i < g.ndirs; i++)
		dir_make(&g, g.dirs[i]);
	g.bar.rate_us = cfs_now_us();
	pump(&g);
	if (!g.finished && cfs_loop_run_until(fs->loop, &g.finished) < 0)
		log_error("the copy stopped before the end");
	dirs_finish(&g);
	if (fs->dh)
		client_keep_contacts(fs->dh);

	cfs_progress_clear(&g.bar);
	double secs = (double)(cfs_now_us() - g.start_us) / 1e6;
	log_info("%lu copied, %lu skipped, %lu failed of %lu files and links; %lu directories, %lu "
	         "failed; %s in %.1f s (%.1f MB/s)", (unsigned long)g.copied, (unsigned long)g.skipped,
	         (unsigned long)g.failed, (unsigned long)g.nfiles, (unsigned long)g.dirs_made,
	         (unsigned long)g.dirs_failed, cfs_decimal_bytes(g.bytes_copied, b1), secs,
	         secs > 0 ? (double)g.bytes_copied / 1e6 / secs : 0);
	return g.failed || g.dirs_failed || !g.finished ? 1 : 0;
}
