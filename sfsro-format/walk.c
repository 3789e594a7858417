/*
 * Walking a volume from a synchronous block source: each call is a loop
 * over the walker (walker.c), which asks for blocks, verifies them and
 * holds every rule; these loops only fetch what it asks for. For tests
 * and tools whose store answers at once (a local directory store).
 */
#include "sfsro-format/internal.h"

#include <stdlib.h>
#include <string.h>

/* Step w, feeding it from src, until it ends or has an entry for fn (a
 * nonzero return from fn ends the walk with it). */
static int drive(const struct sfsro_source *src, sfsro_walker_t *w,
                 int (*fn)(void *arg, const struct sfsro_entry *e), void *arg)
{
	struct sfsro_step s;
	int r;

	while ((r = sfsro_walker_step(w, &s)) > 0) {
		if (r == SFSRO_WALK_NEED) {
			uint8_t *p = NULL;
			size_t len = 0;
			int st = src->get(src->ctx, &s.key, &p, &len);
			(void)sfsro_walker_feed(w, &s.key, st, p, len, 0);
			free(st < 0 ? NULL : p);
		} else if (r == SFSRO_WALK_ENTRY && fn && (r = fn(arg, s.entry)) != 0) {
			break;
		}
		/* a HINT needs nothing from a synchronous source; WAIT cannot
		 * happen, as every block asked for is fed at once */
	}
	sfsro_walker_free(w);
	return r;
}

int sfsro_walk_root(const struct sfsro_source *src, const struct cfs_pubkey *pk,
                    uint64_t min_seq, uint64_t now, struct sfsro_root *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();

	sfsro_walker_root(w, pk, min_seq, now, ret);
	return drive(src, w, NULL, NULL);
}

int sfsro_walk_root_version(const struct sfsro_source *src, const struct cfs_pubkey *pk,
                            uint64_t seq, struct sfsro_root *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();

	sfsro_walker_root_version(w, pk, seq, ret);
	return drive(src, w, NULL, NULL);
}

void sfsro_walk_rootnode(const struct sfsro_root *root, struct sfsro_node *ret)
{
	memset(&ret->e, 0, sizeof(ret->e));
	ret->name[0] = '/';
	ret->name[1] = 0;
	ret->e.name = (struct cfs_bytes){ ret->name, 1 };
	ret->e.type = SFSRO_T_DIR;
	ret->e.mode = root->dir_mode;
	ret->e.mtime_s = root->mtime_s;
	ret->e.mtime_ns = root->mtime_ns;
	ret->e.key = root->root_dir;
	ret->target[0] = 0;
	ret->e.target.p = ret->target;
}

int sfsro_walk_lookup(const struct sfsro_source *src, const struct cfs_id *dir_key,
                      const uint8_t *name, size_t len, struct sfsro_node *ret)
{
	sfsro_walker_t *w = sfsro_walker_new();

	sfsro_walker_lookup(w, dir_key, name, len, ret);
	return drive(src, w, NULL, NULL);
}

int sfsro_walk_path(const struct sfsro_source *src, const struct sfsro_root *root,
                    const char *path, struct sfsro_node *ret)
{
	if (*path != '/')
		return -EINVAL;
	sfsro_walker_t *w = sfsro_walker_new();
	sfsro_walker_path(w, root, path, ret);
	return drive(src, w, NULL, NULL);
}

int sfsro_walk_readdir(const struct sfsro_source *src, const struct cfs_id *dir_key,
                       int (*fn)(void *arg, const struct sfsro_entry *e), void *arg)
{
	sfsro_walker_t *w = sfsro_walker_new();

	sfsro_walker_readdir(w, dir_key);
	return drive(src, w, fn, arg);
}

int sfsro_walk_read(const struct sfsro_source *src, const struct cfs_id *ino_key,
                    uint64_t off, uint8_t *buf, size_t len, size_t *ret_n)
{
	sfsro_walker_t *w = sfsro_walker_new();
	int r;

	sfsro_walker_read(w, ino_key, off, buf, len, ret_n);
	if ((r = drive(src, w, NULL, NULL)) < 0)
		*ret_n = 0;
	return r;
}
