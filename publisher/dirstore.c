/*
 * The local directory store ("dir:PATH"): a block sink and block source on
 * the file system, for offline publishing and for tests.
 *
 *   PATH/blocks/ab/abcdef…   one file per content-hash block, named by key
 *   PATH/roots/<root key>    the current signed root of a volume
 *
 * Writes go to temporary files that are flushed (one syncfs per batch)
 * before they are renamed into place, and the renames are flushed before a
 * put is acknowledged: a crash never leaves a partial block under a key,
 * and an acknowledged block survives it. A block file's mtime is
 * its lease expiry (refresh moves it forward). Completions are delivered
 * from the loop (an idle handle), never inside the call that started them.
 */
#define _GNU_SOURCE
#include "publisher/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct completion {
	pub_done_fn done;
	void *arg;
	int status;
	struct completion *next;
};

struct dirstore {
	char *path;
	uv_idle_t idle;
	struct completion *head, *tail;
	struct sfsro_source src;
};

static void on_idle(uv_idle_t *h)
{
	struct dirstore *d = h->data;
	struct completion *c = d->head;

	d->head = d->tail = NULL;
	uv_idle_stop(&d->idle);
	while (c) {
		struct completion *next = c->next;
		c->done(c->arg, c->status);
		free(c);
		c = next;
	}
}

static void complete_later(struct dirstore *d, pub_done_fn done, void *arg, int status)
{
	struct completion *c = xcalloc(1, sizeof(*c));
	c->done = done;
	c->arg = arg;
	c->status = status;
	if (d->tail)
		d->tail->next = c;
	else
		d->head = c;
	d->tail = c;
	uv_idle_start(&d->idle, on_idle);
}

static void block_path(const struct dirstore *d, const struct cfs_id *key, char *buf, size_t n)
{
	char h[65];
	cfs_id_hex(key, h);
	snprintf(buf, n, "%s/blocks/%.2s/%s", d->path, h, h);
}

static void root_path(const struct dirstore *d, const struct cfs_id *key, char *buf, size_t n)
{
	char h[65];
	snprintf(buf, n, "%s/roots/%s", d->path, cfs_id_hex(key, h));
}

/* Write bytes to path's temporary name (path.tmp.PID); no sync here. */
static int write_tmp(const char *path, const uint8_t *p, size_t len)
{
	char tmp[4200];
	int fd, r = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 && errno == ENOENT) { /* the fan-out directory is new */
		char dir[4200];
		snprintf(dir, sizeof(dir), "%s", path);
		*strrchr(dir, '/') = 0;
		mkdir(dir, 0755);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	}
	if (fd < 0)
		return -errno;
	while (len > 0 && r == 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0)
			r = -errno;
		else {
			p += n;
			len -= (size_t)n;
		}
	}
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

/* Move path's temporary file into place (or drop it on error). */
static int commit_tmp(const char *path, int status)
{
	char tmp[4200];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	if (status == 0 && rename(tmp, path) < 0)
		status = -errno;
	if (status < 0)
		unlink(tmp);
	return status;
}

/* Flush the store's file system: data before renames, renames before the
 * acknowledgement. One syncfs per batch instead of an fsync per block. */
static int sync_store(const struct dirstore *d)
{
	int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;
	if (fd < 0)
		return -errno;
	if (syncfs(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* Write one file atomically and durably. */
static int write_atomic(const struct dirstore *d, const char *path, const uint8_t *p, size_t len)
{
	int r = write_tmp(path, p, len);
	if (r == 0)
		r = sync_store(d);
	r = commit_tmp(path, r);
	return r < 0 ? r : sync_store(d);
}

static int read_file(const char *path, uint8_t **ret, size_t *ret_len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size > CFS_BLOCK_MAX) {
		close(fd);
		return -EFBIG;
	}
	*ret = xmalloc((size_t)st.st_size + 1);
	n = read(fd, *ret, (size_t)st.st_size);
	close(fd);
	if (n != st.st_size) {
		free(*ret);
		return -EIO;
	}
	*ret_len = (size_t)n;
	return 0;
}

static void ds_have(void *sink, const struct cfs_id *keys, size_t n, bool *have,
                    pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	char path[4200];
	for (size_t i = 0; i < n; i++) {
		block_path(d, &keys[i], path, sizeof(path));
		have[i] = access(path, F_OK) == 0;
	}
	complete_later(d, done, arg, 0);
}

static void ds_put(void *sink, struct pub_block *blocks, size_t n, pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	char path[4200];
	int r;

	for (size_t i = 0; i < n; i++) {
		/* a store verifies what it stores, as a DHash server does */
		if ((blocks[i].status = sfsro_verify_hash(&blocks[i].key, blocks[i].p, blocks[i].len)) < 0)
			continue;
		block_path(d, &blocks[i].key, path, sizeof(path));
		blocks[i].status = write_tmp(path, blocks[i].p, blocks[i].len);
	}
	r = sync_store(d); /* contents durable before any name points at them */
	for (size_t i = 0; i < n; i++) {
		if (blocks[i].status < 0)
			continue;
		block_path(d, &blocks[i].key, path, sizeof(path));
		blocks[i].status = commit_tmp(path, r);
	}
	if ((r = sync_store(d)) < 0) /* the renames durable before the acknowledgement */
		for (size_t i = 0; i < n; i++)
			if (blocks[i].status == 0)
				blocks[i].status = r;
	complete_later(d, done, arg, 0);
}

static void ds_put_root(void *sink, const struct cfs_id *key, const uint8_t *p, size_t len,
                        pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct sfsro_root new_root, old_root;
	struct cfs_id want;
	char path[4200];
	uint8_t *old;
	size_t old_len;
	int r;

	/* store a root only if it verifies, sits under its own key and is
	 * newer than (or identical in sequence to) the one held */
	if ((r = sfsro_root_decode(p, len, &new_root)) < 0)
		goto out;
	sfsro_root_key(&new_root.pk, &want);
	if (!cfs_id_eq(&want, key)) {
		r = -EBADMSG;
		goto out;
	}
	root_path(d, key, path, sizeof(path));
	if (read_file(path, &old, &old_len) == 0) {
		int ok = sfsro_root_decode(old, old_len, &old_root);
		free(old);
		if (ok == 0 && old_root.seq > new_root.seq) {
			r = -ESTALE;
			goto out;
		}
	}
	r = write_atomic(d, path, p, len);
out:
	complete_later(d, done, arg, r);
}

static void ds_refresh(void *sink, const struct cfs_id *keys, size_t n, uint64_t lease_until,
                       pub_done_fn done, void *arg)
{
	struct dirstore *d = sink;
	struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = (time_t)lease_until } };
	char path[4200];
	int r = 0;

	for (size_t i = 0; i < n && r == 0; i++) {
		block_path(d, &keys[i], path, sizeof(path));
		if (utimensat(AT_FDCWD, path, ts, 0) < 0)
			r = -errno;
	}
	complete_later(d, done, arg, r);
}

/* The source side: content-hash blocks by key, and roots by root key. */
static int ds_get(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	struct dirstore *d = ctx;
	char path[4200];
	int r;

	block_path(d, key, path, sizeof(path));
	if ((r = read_file(path, ret, ret_len)) != -ENOENT)
		return r;
	root_path(d, key, path, sizeof(path));
	return read_file(path, ret, ret_len);
}

static const struct sfsro_source *ds_source(void *sink)
{
	return &((struct dirstore *)sink)->src;
}

static void on_idle_closed(uv_handle_t *h)
{
	struct dirstore *d = h->data;
	free(d->path);
	free(d);
}

static void ds_free(void *sink)
{
	struct dirstore *d = sink;
	uv_close((uv_handle_t *)&d->idle, on_idle_closed);
}

static const struct pub_sink_ops dirstore_ops = {
	.have = ds_have,
	.put = ds_put,
	.put_root = ds_put_root,
	.refresh = ds_refresh,
	.source = ds_source,
	.free = ds_free,
};

int pub_sink_open(uv_loop_t *loop, const char *spec, struct pub_sink *ret)
{
	struct dirstore *d;
	char sub[4200];

	if (strcmp(spec, "cfsd") == 0)
		return pub__cfsdsink_open(loop, NULL, ret);
	if (strncmp(spec, "cfsd:", 5) == 0 && spec[5])
		return pub__cfsdsink_open(loop, spec + 5, ret);
	if (strncmp(spec, "dir:", 4) != 0 || !spec[4]) {
		log_error("unknown store '%s': expected cfsd[:SOCKET] or dir:PATH", spec);
		return -EINVAL;
	}
	if (strlen(spec) > 4000)
		return log_error_errno(-ENAMETOOLONG, "store path");
	d = xcalloc(1, sizeof(*d));
	d->path = xstrdup(spec + 4);
	mkdir(d->path, 0755);
	snprintf(sub, sizeof(sub), "%s/blocks", d->path);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/roots", d->path);
	if (mkdir(sub, 0755) < 0 && errno != EEXIST) {
		int r = log_error_errno(-errno, "cannot use %s as a store", d->path);
		free(d->path);
		free(d);
		return r;
	}
	uv_idle_init(loop, &d->idle);
	d->idle.data = d;
	d->src = (struct sfsro_source){ ds_get, d };
	ret->ops = &dirstore_ops;
	ret->impl = d;
	return 0;
}

void pub_sink_close(struct pub_sink *s)
{
	if (s->impl)
		s->ops->free(s->impl);
	s->impl = NULL;
}
