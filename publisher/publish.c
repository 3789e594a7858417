/*
 * Publishing: walk a tree bottom-up in a fixed order, cut files into data
 * blocks, build inodes and directories with sfsro-format, and push every
 * block through the sink in batches — ask which it has, send the rest, with
 * up to BATCHES_IN_FLIGHT batches out while the walk goes on — before the
 * root is signed and stored. Any error before that point leaves
 * the previously published root untouched.
 *
 * Leases follow publishing (CFS 5.3): every block the new root references
 * gets a lease until the root's valid-until — a new block with its put, a
 * stored one renewed by the "have" that found it — and the root is valid
 * no longer than the least lease the servers granted. Sequences are never
 * reused: the last one signed for a volume is kept on disk and the next
 * is above it and above every replica's. Those rules, and signing and
 * storing the root, are in root.c (publish_int.h is what the two share).
 */
#include "publisher/publish_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BATCHES_IN_FLIGHT 4 /* the sink stores these while the walk goes on */
#define PUB_FAILED_MAX 1000 /* blocks not stored before a publish gives up */
#define DATA_HEADER_MAX 64  /* a data block's encoding beyond its payload */

void pub__on_done(void *arg, int status)
{
	struct pub *p = arg;
	p->status = status;
	p->done = true;
}

/* Run the loop until the sink answers (the publisher is the top of its
 * program: it waits here, never inside a callback). */
int pub__wait_sink(struct pub *p)
{
	int r = cfs_loop_run_until(p->loop, &p->done);
	p->done = false;
	return r < 0 ? r : p->status;
}

/* The bar (common/progress.c): files and bytes the store has taken of
 * the totals, the rate the store takes them from its first answer on (the
 * root's read and the tree's walk before it are no part of it). Reading
 * runs ahead of storing by the batches in flight, so the read bytes would
 * promise an ETA too early (13 s for a 60 s publish). final: erase it,
 * for the summary line that follows. */
static void draw_progress(struct pub *p, bool final)
{
	if (final)
		cfs_progress_clear(&p->bar);
	else
		cfs_progress_draw(&p->bar, cfs_now_us());
}

/* A batch answered (batcher's ended): its files and content are done
 * for the bar, and the counts are the publish's. A block the store did
 * not take was counted and the walk goes on, so that the publisher can
 * say how many failed (not placed on a majority of their servers); no
 * root is signed over them. Past PUB_FAILED_MAX the run stops. */
static int batch_ended(void *arg, uint64_t files, uint64_t content, int r)
{
	struct pub *p = arg;
	struct pub__batcher *bt = &p->bt;

	p->st->blocks_sent = bt->blocks_sent;
	p->st->bytes_sent = bt->bytes_sent;
	p->st->blocks_failed = bt->blocks_failed;
	p->st->blocks_renewed = p->opt->dry_run ? 0 : bt->blocks_present;
	if (r == 0) {
		if (!p->bar.rate_us) { /* the root's read and the tree's walk are behind */
			p->bar.rate_us = cfs_now_us();
			p->bar.rate_bytes = p->bar.done_bytes;
		}
		p->bar.done_files += files;
		p->bar.done_bytes += content;
	}
	if (r == 0 && bt->blocks_failed >= PUB_FAILED_MAX)
		r = bt->put_error;
	return r;
}

/* Queue a block for the sink, taking ownership of its bytes; content:
 * the file bytes it carries, for the progress. */
static int emit_owned(struct pub *p, const struct cfs_id *key, uint8_t *bytes, size_t len,
                      uint64_t content, bool data)
{
	struct pub__batcher *bt = &p->bt;

	if (bt->error || cfs_idmap_get(&p->stored, key, NULL)) {
		free(bytes); /* the same block twice: stored once */
		if (!bt->error)
			p->bar.done_bytes += content;
		return bt->error;
	}
	cfs_idmap_put(&p->stored, key, 0);
	pub__batch_tag(bt, 0, content);
	p->st->blocks++;
	int r = pub__batch_add(bt, &(struct pub_block){ .key = *key, .p = bytes, .len = len,
	                                              .code_m = data ? p->opt->code_m : 0,
	                                              .code_n = data ? p->opt->code_n : 0 });
	if (!bt->cur) /* a batch went out */
		draw_progress(p, false);
	return r;
}

/* The tree builders' sink: their buffers are theirs, so copy. */
static int emit(void *arg, const struct cfs_id *key, const uint8_t *bytes, size_t len)
{
	struct pub *p = arg;
	if (cfs_idmap_get(&p->stored, key, NULL))
		return p->bt.error;
	return emit_owned(p, key, xmemdup(bytes, len), len, 0, false);
}

/* A file's blocks are all queued: it is done when the batch holding its
 * last one (its inode) is answered. inline_bytes: its content, when the
 * inode carries it. */
static void file_queued(struct pub *p, uint64_t inline_bytes)
{
	pub__batch_tag(&p->bt, 1, inline_bytes);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
	       a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
	       a->st_ctim.tv_nsec == b->st_ctim.tv_nsec && a->st_ino == b->st_ino;
}

static int read_full(int fd, uint8_t *buf, size_t want, size_t *ret)
{
	size_t got = 0;
	while (got < want) {
		ssize_t n = read(fd, buf + got, want - got);
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	*ret = got;
	return 0;
}

/* Publish one regular file; *ret_key gets its inode's key. */
static int publish_file(struct pub *p, int dirfd, const char *name, const char *path, struct cfs_id *ret_key)
{
	struct stat before, after;
	struct sfsro_inode ino = { 0 };
	struct cfs_id *keys = NULL;
	uint64_t nblocks = 0, cap = 0, left;
	uint32_t bs = p->opt->block_size;
	size_t got = 0, len;
	int fd, r = 0;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(-errno, "cannot read %s", path);
	if (fstat(fd, &before) < 0) {
		r = log_error_errno(-errno, "cannot stat %s", path);
		goto out;
	}
	ino.size = (uint64_t)before.st_size;
	ino.mode = before.st_mode & 07777;
	ino.mtime_s = before.st_mtim.tv_sec;
	ino.mtime_ns = (uint32_t)before.st_mtim.tv_nsec;
	ino.bsize = bs;
	for (left = ino.size; r == 0;) {
		size_t want = left < bs ? (size_t)left : bs;
		if ((r = read_full(fd, p->chunk, want ? want : 1, &got)) < 0) {
			log_error_errno(r, "cannot read %s", path);
			break;
		}
		if (got != want) { /* shorter or longer than it was */
			r = -ESTALE;
			break;
		}
		if (want == 0)
			break;
		p->st->bytes += got;
		left -= got;
		if (ino.size <= SFSRO_INLINE_MAX) {
			ino.inline_data = (struct cfs_bytes){ xmemdup(p->chunk, got), got };
			continue;
		}
		uint8_t *enc = xmalloc(got + DATA_HEADER_MAX);
		if ((r = sfsro_data_encode(p->chunk, got, enc, got + DATA_HEADER_MAX, &len)) < 0) {
			free(enc);
			break;
		}
		if (nblocks == cap) {
			cap = cap ? 2 * cap : 64;
			keys = xrealloc(keys, cap * sizeof(*keys));
		}
		/* a coded volume's data block is named by its coded key */
		if (p->opt->code_m &&
		    (r = dhash_coded_key(enc, len, p->opt->code_m, p->opt->code_n, &keys[nblocks])) < 0) {
			free(enc);
			break;
		}
		if (!p->opt->code_m)
			cfs_hash(&keys[nblocks], enc, len);
		if ((r = emit_owned(p, &keys[nblocks], enc, len, got, true)) < 0) /* enc is its now */
			break;
		nblocks++;
	}
	if (r == 0 && (fstat(fd, &after) < 0 || !same_file(&before, &after)))
		r = -ESTALE;
	if (r == -ESTALE)
		log_error("%s changed while it was being read; publish again when it is stable", path);
	if (r == 0)
		r = sfsro_build_file(&ino, keys, nblocks, emit, p, ret_key);
	if (r == 0)
		file_queued(p, ino.size <= SFSRO_INLINE_MAX ? ino.size : 0);
	draw_progress(p, false);
out:
	free((void *)ino.inline_data.p);
	free(keys);
	close(fd);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b); /* bytewise, as unsigned char */
}

/* Publish the directory open as fd (at path); ret gets its top block key
 * and entry count. */
static int publish_dir(struct pub *p, int fd, const char *path, struct sfsro_entry *ret)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	char **names = NULL, *sub = NULL;
	struct sfsro_entry *e = NULL;
	size_t n = 0, cap = 0, ne = 0;
	int r = 0;

	if (!d) {
		close(fd);
		return log_error_errno(-errno, "cannot read directory %s", path);
	}
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			names = xrealloc(names, cap * sizeof(*names));
		}
		names[n++] = xstrdup(de->d_name);
	}
	if (errno) {
		r = log_error_errno(-errno, "cannot read directory %s", path);
		goto out;
	}
	if (n) /* an empty directory: names is NULL */
		qsort(names, n, sizeof(*names), cmp_names);
	e = xcalloc(n ? n : 1, sizeof(*e));
	for (size_t i = 0; i < n && r == 0; i++) {
		struct sfsro_entry *en = &e[ne];
		struct stat st;
		const char *why;
		size_t nl = strlen(names[i]);

		free(sub);
		sub = xmalloc(strlen(path) + nl + 2);
		sprintf(sub, "%s/%s", path, names[i]);
		if (sfsro_check_name((const uint8_t *)names[i], nl, &why) < 0) {
			log_error("cannot publish %s: %s", sub, why);
			r = -EINVAL;
			break;
		}
		if (fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = log_error_errno(-errno, "cannot stat %s", sub);
			break;
		}
		*en = (struct sfsro_entry){ .name = { (const uint8_t *)names[i], nl }, .mode = st.st_mode & 07777,
		                            .mtime_s = st.st_mtim.tv_sec, .mtime_ns = (uint32_t)st.st_mtim.tv_nsec };
		if (S_ISREG(st.st_mode)) { /* hard links publish as regular files */
			en->type = SFSRO_T_FILE;
			en->size = (uint64_t)st.st_size;
			if ((r = publish_file(p, fd, names[i], sub, &en->key)) == 0) {
				p->st->files++;
				ne++;
			}
		} else if (S_ISDIR(st.st_mode)) {
			int cfd = openat(fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				r = log_error_errno(-errno, "cannot open directory %s", sub);
				break;
			}
			struct sfsro_entry child;
			if ((r = publish_dir(p, cfd, sub, &child)) == 0) {
				en->type = SFSRO_T_DIR;
				en->key = child.key;
				en->size = child.size;
				p->st->dirs++;
				ne++;
			}
		} else if (S_ISLNK(st.st_mode)) {
			char *target = xmalloc(SFSRO_SYMLINK_MAX + 2);
			ssize_t tl = readlinkat(fd, names[i], target, SFSRO_SYMLINK_MAX + 1);
			if (tl < 0 || tl > SFSRO_SYMLINK_MAX) {
				r = tl < 0 ? log_error_errno(-errno, "cannot read link %s", sub)
				           : (log_error("link target of %s is longer than %d bytes", sub, SFSRO_SYMLINK_MAX), -EINVAL);
				free(target);
				break;
			}
			en->type = SFSRO_T_SYMLINK;
			en->size = (uint64_t)tl;
			en->target = (struct cfs_bytes){ (const uint8_t *)target, (size_t)tl };
			p->st->symlinks++;
			ne++;
		} else {
			log_warn("skipping %s: sockets, devices and FIFOs are not published", sub);
			p->st->skipped++;
		}
	}
	if (r == 0)
		r = sfsro_build_dir(e, (uint32_t)ne, p->opt->block_size, emit, p, &ret->key);
	ret->size = ne;
out:
	for (size_t i = 0; i < ne; i++)
		if (e[i].type == SFSRO_T_SYMLINK)
			free((void *)e[i].target.p);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(sub);
	free(e);
	closedir(d);
	return r;
}

/* The regular files below fd and their bytes, for the progress and for
 * what an interrupted publish left undone: a stat of every entry before
 * the publish reads them (a tree that changes meanwhile only makes the
 * totals approximate; the percentage is capped at 100). */
static void count_tree(int fd, uint64_t *files, uint64_t *bytes)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	struct stat st;

	if (!d) {
		close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISREG(st.st_mode)) {
				*files += 1;
				*bytes += (uint64_t)st.st_size;
			} else if (S_ISDIR(st.st_mode)) {
				int c = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (c >= 0)
					count_tree(c, files, bytes);
			}
		}
	closedir(d);
}

static void pub_init(struct pub *p, uv_loop_t *loop, struct pub_sink *sink,
                     const struct pub_options *opt, struct pub_stats *st)
{
	memset(p, 0, sizeof(*p));
	memset(st, 0, sizeof(*st));
	p->loop = loop;
	p->sink = sink;
	p->opt = opt;
	p->st = st;
	p->bar.on = opt->progress;
	p->chunk = xmalloc(SFSRO_BLOCK_SIZE_MAX);
	p->start_us = cfs_now_us();
	p->lease_until = cfs_wall_s() + opt->valid_s;
	p->bt = (struct pub__batcher){ .loop = loop, .sink = sink, .lease_until = p->lease_until,
	                               .dry_run = opt->dry_run, .max_in_flight = BATCHES_IN_FLIGHT,
	                               .ended = batch_ended, .arg = p };
}

/* Ctrl-C: the first stops the walk (the batches out are still
 * answered, so that what was stored is counted) and pub_publish says what
 * was left undone; once the root is on its way it is let finish. A second
 * one stops at once. */
static void on_sigint(uv_signal_t *h, int signum)
{
	struct pub *p = h->data;

	if (p->interrupted) {
		fprintf(stderr, "\ncfs-publish: interrupted again: stopping at once%s\n",
		        p->root_phase ? "; the new root may or may not have been stored"
		                      : "; the root was not updated");
		_exit(130);
	}
	p->interrupted = true;
	if (p->root_phase) {
		fprintf(stderr, "\ncfs-publish: interrupted while the signed root is being stored: "
		        "finishing that (Ctrl-C again to stop at once)\n");
		return;
	}
	if (!p->bt.error)
		p->bt.error = -EINTR;
	p->bt.woke = true;
}

static void free_signal(uv_handle_t *h)
{
	free(h);
}

/* Catch Ctrl-C for the publish; unref'd, so that it keeps no wait alive. */
static void catch_sigint(struct pub *p)
{
	p->sigint = xmalloc(sizeof(*p->sigint));
	uv_signal_init(p->loop, p->sigint);
	p->sigint->data = p;
	uv_unref((uv_handle_t *)p->sigint);
	if (uv_signal_start(p->sigint, on_sigint, SIGINT) < 0) {
		uv_close((uv_handle_t *)p->sigint, free_signal);
		p->sigint = NULL;
	}
}

/* What an interrupted publish did not do, in one line. */
static void report_interrupted(struct pub *p)
{
	char a[16], b[16];
	uint64_t files = p->bar.done_files < p->bar.total_files ? p->bar.done_files : p->bar.total_files;
	uint64_t bytes = p->bar.done_bytes < p->bar.total_bytes ? p->bar.done_bytes : p->bar.total_bytes;

	draw_progress(p, true);
	log_error("interrupted: left undone: %lu of %lu files (%s of %s) not published; the root "
	          "was not updated: the volume stays as it was (the %lu blocks stored are kept: "
	          "publishing again sends only the rest)",
	          (unsigned long)(p->bar.total_files - files), (unsigned long)p->bar.total_files,
	          cfs_decimal_bytes(p->bar.total_bytes - bytes, a), cfs_decimal_bytes(p->bar.total_bytes, b),
	          (unsigned long)p->st->blocks_sent);
}

static void pub_fini(struct pub *p)
{
	pub__batch_abandon(&p->bt); /* after an error: the sink still holds batches */
	if (p->sigint) { /* closed by the caller's last loop run */
		uv_signal_stop(p->sigint);
		uv_close((uv_handle_t *)p->sigint, free_signal);
		p->sigint = NULL;
	}
	cfs_idmap_free(&p->stored);
	free(p->chunk);
	p->st->seconds = (double)(cfs_now_us() - p->start_us) / 1e6;
}

int pub_publish(uv_loop_t *loop, struct pub_sink *sink, const char *dir,
                const struct cfs_pubkey *pk, const struct cfs_seckey *sk,
                const struct pub_options *opt, struct pub_stats *ret_stats)
{
	struct pub *p = xmalloc(sizeof(*p));
	struct sfsro_root root = { .pk = *pk };
	struct sfsro_entry top;
	struct stat st;
	int fd, r;

	if (opt->block_size < SFSRO_BLOCK_SIZE_MIN || opt->block_size > SFSRO_BLOCK_SIZE_MAX)
		return log_error_errno(-EINVAL, "block size must be %d to %d bytes",
		                       SFSRO_BLOCK_SIZE_MIN, SFSRO_BLOCK_SIZE_MAX);
	if ((opt->code_m || opt->code_n) && !sfsro_code_valid(opt->code_m, opt->code_n))
		return log_error_errno(-EINVAL, "no such code: rs:%u/%u", opt->code_m, opt->code_n);
	if (opt->code_m && !sink->ops->locate)
		return log_error_errno(-EOPNOTSUPP, "a coded volume (rs:%u/%u) can only be published "
		                       "to the ring, not to a dir: store", opt->code_m, opt->code_n);
	root.code_m = opt->code_m;
	root.code_n = opt->code_n;
	pub_init(p, loop, sink, opt, ret_stats);
	catch_sigint(p);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = log_error_errno(-errno, "cannot open directory %s", dir);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	uint64_t current;
	if ((r = pub__store_seq(p, pk, &current)) < 0 || (r = pub__next_seq(p, pk, current, &root.seq)) < 0) {
		close(fd);
		goto out;
	}
	int c = dup(fd); /* the totals, for the bar and for an interrupt's report */
	if (c >= 0)
		count_tree(c, &p->bar.total_files, &p->bar.total_bytes);
	lseek(fd, 0, SEEK_SET);
	if (p->interrupted) { /* during the root's read */
		close(fd);
		r = -EINTR;
		goto out;
	}
	root.dir_mode = st.st_mode & 07777;
	root.mtime_s = st.st_mtim.tv_sec;
	root.mtime_ns = (uint32_t)st.st_mtim.tv_nsec;
	r = publish_dir(p, fd, dir, &top);
	if (r == 0)
		r = pub__batch_drain(&p->bt);
	if (p->interrupted)
		r = -EINTR;
	if (p->st->blocks_failed) {
		char h[65];
		log_error("%lu of %lu blocks sent could not be stored%s (the first, %.16s: %s); nothing "
		          "was published: the root was not signed, the previous one (if any) stands",
		          (unsigned long)p->st->blocks_failed,
		          (unsigned long)(p->st->blocks_failed + p->st->blocks_sent),
		          p->st->blocks_failed >= PUB_FAILED_MAX ? " (stopped there)" : "",
		          cfs_id_hex(&p->bt.put_failed, h), dhash_strerror(p->bt.put_error));
		r = r < 0 ? r : p->bt.put_error;
	}
	if (r < 0)
		goto out;
	p->st->dirs++;
	root.root_dir = top.key;
	r = pub__sign_and_store(p, &root, sk);
	draw_progress(p, true);
out:
	pub_fini(p);
	if (r == -EINTR)
		report_interrupted(p);
	free(p);
	return r;
}

/* ---- refresh: every reachable block, then a re-signed root */

/* Keys to renew, in batches: one for whole blocks, one for a coded
 * volume's data blocks (renewed on all n holders of each). */
struct refresh_batch {
	struct cfs_id keys[CFS_MSG_MAX_KEYS];
	size_t n;
	uint8_t code_m, code_n;
};

struct refresher {
	struct pub *p;
	struct refresh_batch whole, coded;
	uint64_t lease_until;
	int status;
};

static int refresh_flush(struct refresher *rf, struct refresh_batch *b)
{
	if (b->n == 0)
		return 0;
	rf->p->sink->ops->refresh(rf->p->sink->impl, b->keys, b->n, b->code_m, b->code_n,
	                          rf->lease_until, pub__on_done, rf->p);
	int r = pub__wait_sink(rf->p);
	rf->p->st->blocks_sent += b->n;
	b->n = 0;
	return r < 0 ? log_error_errno(r, "refreshing leases failed") : 0;
}

static int refresh_block(void *arg, const struct cfs_id *key, uint8_t btype)
{
	struct refresher *rf = arg;
	struct refresh_batch *b = rf->coded.code_m && btype == SFSRO_B_DATA ? &rf->coded : &rf->whole;

	if (cfs_idmap_get(&rf->p->stored, key, NULL))
		return 0;
	cfs_idmap_put(&rf->p->stored, key, 0);
	rf->p->st->blocks++;
	b->keys[b->n++] = *key;
	return b->n == CFS_MSG_MAX_KEYS ? refresh_flush(rf, b) : 0;
}

int pub_refresh(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk,
                const struct cfs_seckey *sk, const struct pub_options *opt,
                struct pub_stats *ret_stats)
{
	struct pub *p = xmalloc(sizeof(*p));
	struct refresher *rf = xcalloc(1, sizeof(*rf));
	struct sfsro_root root;
	int r;

	pub_init(p, loop, sink, opt, ret_stats);
	rf->p = p;
	rf->lease_until = p->lease_until;
	/* an expired root may be refreshed: that is what refresh is for */
	if ((r = pub__read_root(loop, sink, pk, 0, &root)) < 0) {
		log_error_errno(r, "cannot read the volume's current root");
		goto out;
	}
	rf->coded.code_m = root.code_m; /* its data blocks: fragments on n holders */
	rf->coded.code_n = root.code_n;
	if ((r = pub__walk_blocks(loop, sink, &root.root_dir, refresh_block, rf)) < 0 ||
	    (r = refresh_flush(rf, &rf->whole)) < 0 || (r = refresh_flush(rf, &rf->coded)) < 0)
		goto out;
	if ((r = pub__next_seq(p, pk, root.seq, &root.seq)) < 0)
		goto out;
	r = pub__sign_and_store(p, &root, sk);
out:
	pub_fini(p);
	free(rf);
	free(p);
	return r;
}
