/*
 * The volume's totals for statfs: how many files and directories it has
 * and how many bytes its files hold. A signed root names only the top
 * directory, so the totals are counted by listing every directory of the
 * mounted version, in the background, one directory at a time (entries
 * carry sizes and types, so no inode or data block is read). Until a
 * count ends, statfs reports the last complete count (of an older
 * version), or the partial one when there is none yet; a newer root
 * starts a new count.
 *
 * Bounded work per wake-up: each directory is started from a zero timer,
 * so the loop serves FUSE requests between two directories even when
 * every block is cached. Bounded in all: a signed volume can still name
 * one directory block from many entries, a DAG whose walk grows
 * exponentially with its depth, so a count stops (incomplete, with a
 * warning) after CENSUS_MAX_DIRS listings or with CENSUS_MAX_TODO
 * directories waiting; what it counted so far is what statfs reports.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

#define CENSUS_MAX_DIRS (1u << 22)
#define CENSUS_MAX_TODO (1u << 20)

struct fs_census {
	cfsfuse_t *fs;
	struct cfs_id *todo;      /* directories still to list */
	size_t ntodo, cap;
	struct fs_totals partial; /* of the version being counted */
	struct fs_totals done;    /* the last complete count */
	struct fs_dir *h;         /* the directory being listed */
	uv_timer_t timer;         /* starts the next listing from the loop */
	uint64_t listed;          /* listings of this count */
	uint64_t seq;             /* the version being counted */
	bool busy;                /* a listing is out */
	bool restart;             /* a newer root came while one was out */
	bool stopped, closed, have_done, running, too_big;
};

static void census_kick(struct fs_census *c);

static void push(struct fs_census *c, const struct cfs_id *key)
{
	if (c->ntodo >= CENSUS_MAX_TODO) {
		c->too_big = true;
		return;
	}
	if (c->ntodo == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		c->todo = xrealloc(c->todo, c->cap * sizeof(*c->todo));
	}
	c->todo[c->ntodo++] = *key;
}

static void reset(struct fs_census *c)
{
	c->ntodo = 0;
	memset(&c->partial, 0, sizeof(c->partial));
	c->partial.dirs = 1; /* the root */
	c->seq = c->fs->root.seq;
	push(c, &c->fs->root.root_dir);
	c->running = true;
	c->restart = false;
	c->too_big = false;
	c->listed = 0;
}

static bool count_entry(void *arg, const struct sfsro_entry *e, uint64_t index)
{
	struct fs_census *c = arg;

	if (e->type == SFSRO_T_DIR) {
		c->partial.dirs++;
		push(c, &e->key);
	} else {
		c->partial.files++;
		if (e->type == SFSRO_T_FILE) {
			c->partial.bytes += e->size;
			c->partial.blocks += (e->size + SFSRO_BLOCK_SIZE_DEFAULT - 1) / SFSRO_BLOCK_SIZE_DEFAULT;
		}
	}
	return true;
}

/* A listing ended (or failed): the next one, from the loop in census_kick. */
static void listed(cfsfuse_t *fs, void *arg, int status, struct fs_dir *unused)
{
	struct fs_census *c = arg;
	fs__dir_free(c->h);
	c->h = NULL;
	c->busy = false;
	if (status == -ECANCELED) {
		c->stopped = true;
		return;
	}
	if (status < 0 && !c->restart) {
		/* one unreadable directory: counted without what is below it */
		c->partial.unreadable++;
		log_debug("census of %s: a directory could not be listed (%s); counting on",
		          fs->volname, strerror(-status));
	}
	census_kick(c);
}

static void opened(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h)
{
	struct fs_census *c = arg;

	c->h = h;
	if (status < 0 || c->restart) {
		listed(fs, c, status, NULL);
		return;
	}
	fs__dir_read(fs, h, 0, count_entry, listed, c);
}

/* Start the next listing, or end the count. */
static void census_step(struct fs_census *c)
{
	if (c->stopped || c->busy || c->fs->stopping)
		return;
	if (c->restart)
		reset(c);
	if (!c->running)
		return;
	if (c->listed >= CENSUS_MAX_DIRS)
		c->too_big = true;
	if (c->ntodo == 0 || c->too_big) {
		c->done = c->partial;
		c->have_done = true;
		c->running = false;
		if (c->too_big)
			log_warn("volume %s (sequence %lu): too many directories to count; statfs "
			         "reports the %lu files and %lu directories counted", c->fs->volname,
			         (unsigned long)c->seq, (unsigned long)c->done.files,
			         (unsigned long)c->done.dirs);
		else
			log_info("volume %s (sequence %lu): %lu files, %lu directories, %lu MiB%s",
			         c->fs->volname, (unsigned long)c->seq, (unsigned long)c->done.files,
			         (unsigned long)c->done.dirs, (unsigned long)(c->done.bytes >> 20),
			         c->done.unreadable ? " (some directories could not be listed)" : "");
		return;
	}
	struct cfs_id key = c->todo[--c->ntodo];
	c->busy = true;
	c->listed++;
	fs__dir_open(c->fs, 0, &key, opened, c);
}

static void on_timer(uv_timer_t *t)
{
	census_step(container_of(t, struct fs_census, timer));
}

/* The next step, from the loop: never inside a listing's callback. */
static void census_kick(struct fs_census *c)
{
	if (!c->stopped && !c->closed)
		uv_timer_start(&c->timer, on_timer, 0, 0);
}

struct fs_census *fs__census_new(cfsfuse_t *fs)
{
	struct fs_census *c = xcalloc(1, sizeof(*c));

	c->fs = fs;
	uv_timer_init(fs->loop, &c->timer);
	return c;
}

void fs__census_start(struct fs_census *c)
{
	c->restart = true;
	census_kick(c);
}

void fs__census_totals(const struct fs_census *c, struct fs_totals *ret, bool *ret_complete)
{
	*ret = c->have_done ? c->done : c->partial;
	*ret_complete = c->have_done && !c->running && !c->too_big;
}

void fs__census_close(struct fs_census *c)
{
	if (!c || c->closed)
		return;
	c->closed = true;
	c->stopped = true;
	uv_close((uv_handle_t *)&c->timer, NULL);
}

void fs__census_free(struct fs_census *c)
{
	if (!c)
		return;
	fs__dir_free(c->h);
	free(c->todo);
	free(c);
}
