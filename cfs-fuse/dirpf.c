/*
 * Small files ahead of their readers. When a directory is listed, the
 * inode blocks of its small files are fetched and, as each arrives, the
 * file's data blocks; the top blocks of its subdirectories too. Reading
 * every file of a directory one after another (find -exec cat, a build, a
 * web server walking a tree) then costs a few round trips in all, not two
 * per file: across an ocean that is the difference between seconds and a
 * minute for a few hundred files.
 *
 * Everything goes out as directory prefetches (fs__blk_fetch_bg: a queue
 * behind any block a reader waits for and any file's read-ahead, never
 * retried, at most --max-fetches out) and is bounded: only files
 * of at most DIRPF_FILE_MAX bytes; at most a quarter of the memory cache's
 * bytes wanted at once (so that prefetched blocks are still there when
 * their readers come); the entries that do not fit wait in a FIFO of at
 * most DIRPF_QUEUE_MAX, and entries beyond it are not prefetched (their
 * readers fetch them as before). A file whose inode is cached already is
 * skipped: listing a directory again costs nothing.
 *
 * Nothing here looks into the cache from inside a fetch's callback: the
 * fetched block is handed to every waiter in turn, and a look that brings
 * a block in from the disk cache may evict it under a later waiter. A
 * callback copies what it needs and leaves the rest to a zero timer.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

#define DIRPF_FILE_MAX (256u * 1024u)
#define DIRPF_QUEUE_MAX 4096u
#define DIRPF_KEYS_MAX 256u    /* data blocks of one file (a file of 256 KiB in 1 KiB blocks) */
#define DIRPF_DIR_COST 4096u   /* what a directory block is counted as */

struct dirpf_item {
	struct cfs_id key;
	uint64_t bytes;
	bool dir;
};

struct dirpf_job {
	struct fs_dirpf *pf;
	uint64_t bytes;
	uint32_t pending;         /* fetches out for this entry */
	struct cfs_id *keys;      /* an inode's data blocks, to fetch from the timer */
	uint32_t nkeys;
	struct dirpf_job *next;   /* on pf->ready */
};

struct fs_dirpf {
	cfsfuse_t *fs;
	struct dirpf_item *q;     /* a ring of DIRPF_QUEUE_MAX */
	size_t head, n;
	uint64_t used, budget;    /* bytes wanted now, and the bound */
	uint32_t jobs;
	struct dirpf_job *ready;  /* inodes that arrived, their data still to ask for */
	uv_timer_t timer;         /* runs the work callbacks may not do */
	bool closed;
};

static void on_timer(uv_timer_t *t);

struct fs_dirpf *fs__dirpf_new(cfsfuse_t *fs)
{
	struct fs_dirpf *pf = xcalloc(1, sizeof(*pf));

	pf->fs = fs;
	pf->q = xcalloc(DIRPF_QUEUE_MAX, sizeof(*pf->q));
	pf->budget = fs->o.cache_bytes / 4;
	if (pf->budget < DIRPF_FILE_MAX)
		pf->budget = DIRPF_FILE_MAX;
	uv_timer_init(fs->loop, &pf->timer);
	pf->timer.data = pf;
	return pf;
}

static void pump(struct fs_dirpf *pf);

static void later(struct fs_dirpf *pf)
{
	if (!pf->closed)
		uv_timer_start(&pf->timer, on_timer, 0, 0);
}

static void job_done(struct dirpf_job *j)
{
	struct fs_dirpf *pf = j->pf;

	if (--j->pending)
		return;
	pf->used -= j->bytes;
	pf->jobs--;
	free(j->keys);
	free(j);
	later(pf);
}

static void data_done(void *arg, int status, const struct fblk *b)
{
	job_done(arg);
}

/* An inode arrived: its data keys are copied out, asked for from the
 * timer. An inode larger than its directory entry said is left alone. */
static void inode_done(void *arg, int status, const struct fblk *b)
{
	struct dirpf_job *j = arg;
	struct fs_dirpf *pf = j->pf;
	struct sfsro_inode ino;

	if (status == 0 && !pf->closed && sfsro_inode_decode(b->p, b->len, &ino) == 0 &&
	    ino.height == 0 && !ino.inline_data.len && ino.nkeys <= DIRPF_KEYS_MAX &&
	    ino.size <= DIRPF_FILE_MAX && ino.size + DIRPF_DIR_COST <= j->bytes) {
		j->keys = xmemdup(ino.keys, ino.nkeys * sizeof(ino.keys[0]));
		j->nkeys = ino.nkeys;
		j->pending++;          /* held by the ready list */
		j->next = pf->ready;
		pf->ready = j;
		later(pf);
	}
	job_done(j);
}

static void dir_done(void *arg, int status, const struct fblk *b)
{
	job_done(arg);
}

/* Outside any fetch's callback: the data of the inodes that arrived, then
 * more entries from the queue. */
static void on_timer(uv_timer_t *t)
{
	struct fs_dirpf *pf = t->data;

	while (pf->ready) {
		struct dirpf_job *j = pf->ready;
		pf->ready = j->next;
		for (uint32_t i = 0; i < j->nkeys && !pf->closed; i++) {
			if (fs__blk_peek(pf->fs->blocks, &j->keys[i]))
				continue;
			j->pending++;
			pf->fs->st.dir_prefetches++;
			fs__blk_fetch_data_bg(pf->fs->blocks, &pf->fs->root, &j->keys[i], data_done, j);
		}
		job_done(j);           /* the ready list's hold */
	}
	pump(pf);
}

/* Start queued entries while the budget allows (one at least when nothing
 * is out, whatever its size); from the timer only. */
static void pump(struct fs_dirpf *pf)
{
	while (!pf->closed && pf->n && (pf->used == 0 || pf->used + pf->q[pf->head].bytes <= pf->budget)) {
		struct dirpf_item it = pf->q[pf->head];
		pf->head = (pf->head + 1) % DIRPF_QUEUE_MAX;
		pf->n--;
		if (fs__blk_peek(pf->fs->blocks, &it.key))
			continue;
		struct dirpf_job *j = xcalloc(1, sizeof(*j));
		*j = (struct dirpf_job){ .pf = pf, .bytes = it.bytes, .pending = 1 };
		pf->used += it.bytes;
		pf->jobs++;
		pf->fs->st.dir_prefetches++;
		fs__blk_fetch_bg(pf->fs->blocks, &it.key, it.dir ? dir_done : inode_done, j);
	}
}

void fs__dirpf_entry(struct fs_dirpf *pf, const struct sfsro_entry *e)
{
	struct dirpf_item it = { .key = e->key };

	if (!pf || pf->closed || !pf->fs->o.prefetch_max || pf->fs->local)
		return;
	if (e->type == SFSRO_T_DIR) {
		it.dir = true;
		it.bytes = DIRPF_DIR_COST;
	} else if (e->type == SFSRO_T_FILE && e->size <= DIRPF_FILE_MAX) {
		it.bytes = e->size + DIRPF_DIR_COST;   /* the data and the inode */
	} else {
		return;
	}
	if (pf->n == DIRPF_QUEUE_MAX)
		return;
	pf->q[(pf->head + pf->n) % DIRPF_QUEUE_MAX] = it;
	pf->n++;
	later(pf);   /* entries come from a directory block's fetch callback */
}

void fs__dirpf_close(struct fs_dirpf *pf)
{
	if (!pf || pf->closed)
		return;
	pf->closed = true;
	uv_close((uv_handle_t *)&pf->timer, NULL);
}

void fs__dirpf_free(struct fs_dirpf *pf)
{
	if (!pf)
		return;
	while (pf->ready) {            /* inodes whose data was never asked for */
		struct dirpf_job *j = pf->ready;
		pf->ready = j->next;
		free(j->keys);
		free(j);
	}
	free(pf->q);
	free(pf);
}
