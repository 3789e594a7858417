/*
 * cfs-gateway's open volumes (gwvol.c): one reader per volume and version
 * — a cfsfuse_t whose root is that version's — sharing the gateway's ring
 * client and verified block cache, so that requests after the first skip
 * the root fetch.
 *
 *  - The newest version (seq 0) is fetched again once its root is older
 *    than max_age, in the background: requests meanwhile use the root
 *    there is. It is bound by the rollback rule of a mount: the highest
 *    sequence served is kept in STATE_DIR/<volume>.seq, and an older root
 *    is refused (-ESTALE).
 *  - A fetch that fails before any root came drops the entry (the next
 *    request asks again); one that fails later keeps the root it had.
 *  - At most max entries no request holds are kept, the least recently
 *    used dropped.
 *
 * Internal to cfs-fuse/ (cfs_gateway.c).
 */
#ifndef CFS_CFSFUSE_GWVOL_H
#define CFS_CFSFUSE_GWVOL_H

#include "cfs-fuse/internal.h"

/* Something waiting for a volume's root, embedded in its owner
 * (container_of gets the owner back). */
struct fs_gw_waiter;
typedef void (*fs_gw_vol_cb)(struct fs_gw_waiter *w, int status);
struct fs_gw_waiter {
	fs_gw_vol_cb cb;
	struct fs_gw_waiter *next;
};

struct fs_gw_vols;
struct fs_gw_vol {
	struct fs_gw_vols *vols;
	cfsfuse_t *fs;             /* fs->root is the version's root, once ready */
	bool ready, fetching, linked;
	int err;                   /* why the first fetch failed */
	uint8_t *raw;              /* the signed root as fetched */
	size_t raw_len;
	uint64_t fetched_ms;
	uint32_t refs;             /* holders, and the fetch out */
	struct fs_gw_waiter *waiters;
	struct fs_gw_vol *prev, *next;
};

/* Borrowed for the life of the cache: o, dh or local, blocks, state_dir. */
struct fs_gw_vols_config {
	uv_loop_t *loop;
	const struct cfsfuse_options *o;
	client_t *dh;              /* the ring, or */
	struct fs_local *local;    /* a dir: store */
	struct fs_blocks *blocks;
	uint32_t max;              /* entries kept when unused */
	uint64_t max_age_ms;       /* the newest root's age before it is fetched again */
	const char *state_dir;
};
struct fs_gw_vols *fs__gw_vols_new(const struct fs_gw_vols_config *c);
/* The entry for vol@seq (seq 0: the newest), held: fs__gw_vol_unref. When
 * ready, its root is there and w is not used; while fetching, w->cb runs
 * once the fetch ends, with 0 or why not; neither: the fetch failed at
 * once, with err. */
struct fs_gw_vol *fs__gw_vol_get(struct fs_gw_vols *vs, const uint8_t vol[static 32], uint64_t seq,
                                 struct fs_gw_waiter *w);
/* Drop a hold; accepts NULL. */
void fs__gw_vol_unref(struct fs_gw_vol *v);

#endif
