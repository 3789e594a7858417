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
 * Directory listings may complete inside the call that starts them (their
 * blocks cached), so the walk is a loop kicked from every callback rather
 * than a recursion: a volume of many cached directories costs no stack.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/internal.h"

struct fs_census {
	cfsfuse_t *fs;
	struct cfs_id *todo;      /* directories still to list */
	size_t ntodo, cap;
	struct fs_totals partial; /* of the version being counted */
	struct fs_totals done;    /* the last complete count */
	struct fs_dir *h;         /* the directory being listed */
	uint64_t seq;             /* the version being counted */
	bool busy;                /* a listing is out */
	bool restart;             /* a newer root came while one was out */
	bool stopped, in_step, again, have_done, running;
};

static void census_kick(struct fs_census *c);

static void push(struct fs_census *c, const struct cfs_id *key)
{
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
	if (c->ntodo == 0) {
		c->done = c->partial;
		c->have_done = true;
		c->running = false;
		log_info("volume %s (sequence %lu): %lu files, %lu directories, %lu MiB",
		         c->fs->volname, (unsigned long)c->seq, (unsigned long)c->done.files,
		         (unsigned long)c->done.dirs, (unsigned long)(c->done.bytes >> 20));
		return;
	}
	struct cfs_id key = c->todo[--c->ntodo];
	c->busy = true;
	fs__dir_open(c->fs, 0, &key, opened, c);
}

static void census_kick(struct fs_census *c)
{
	if (c->in_step) {
		c->again = true;
		return;
	}
	c->in_step = true;
	do {
		c->again = false;
		census_step(c);
	} while (c->again);
	c->in_step = false;
}

struct fs_census *fs__census_new(cfsfuse_t *fs)
{
	struct fs_census *c = xcalloc(1, sizeof(*c));

	c->fs = fs;
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
	*ret_complete = c->have_done && !c->running;
}

void fs__census_free(struct fs_census *c)
{
	if (!c)
		return;
	fs__dir_free(c->h);
	free(c->todo);
	free(c);
}
