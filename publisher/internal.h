/* publisher/ internals: the sinks behind pub_sink_open. */
#ifndef CFS_PUBLISHER_INTERNAL_H
#define CFS_PUBLISHER_INTERNAL_H

#include "client/client.h"
#include "dhash/dhash.h"
#include "publisher/publisher.h"

/* The DHT store: the local daemon, or a plain ring client (t is resolved
 * with client_target_resolve first: an empty t means the default rule). */
int pub__cfsdsink_open(uv_loop_t *loop, struct client_target *t, struct pub_sink *ret) CFS_WUR;

/* ---- walks (blocks.c): the volume walker driven synchronously over a
 * sink's asynchronous gets. The loop runs (cfs_loop_run_until) while
 * blocks come: call these from the top of a program, never from a loop
 * callback. */
struct pub_walk {
	uv_loop_t *loop;
	struct pub_sink *sink;
	sfsro_walker_t *w;        /* start an operation on it, then call next */
	uint32_t inflight;        /* gets not answered yet */
	bool woke;
	bool failed;              /* a get failed: the first one's key */
	struct cfs_id failed_key;
	uint8_t code_m, code_n;   /* a coded volume's: data blocks read as fragments
	                           * (sink's get_coded; 0: whole). Set after init. */
};
void pub__walk_init(struct pub_walk *pw, uv_loop_t *loop, struct pub_sink *sink);
/* Step the walker, fetching what it asks for, until it has an ENTRY or a
 * BLOCK (borrowed until the next call) or ends: then DONE or a negative
 * errno, and no get is in flight any more. */
int pub__walk_next(struct pub_walk *pw, struct sfsro_step *ret) CFS_WUR;
/* Wait for every get in flight (before starting another operation on
 * pw->w after leaving one half way). */
void pub__walk_drain(struct pub_walk *pw);
/* Drain, and free the walker. */
void pub__walk_fini(struct pub_walk *pw);

/* Read and accept pk's root, whatever its sequence and expiry. */
int pub__read_root(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
                   struct sfsro_root *ret) CFS_WUR;
/* Call fn once for every block under root_dir (the root directory block
 * included, the signed root not), reading and verifying the blocks that
 * name others. Stops at the first error, fn's or a read's (logged). */
typedef int (*pub_block_fn)(void *arg, const struct cfs_id *key, uint8_t btype);
int pub__walk_blocks(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_id *root_dir,
                     pub_block_fn fn, void *arg) CFS_WUR;
/* Read one block, verified (root: a signed root; else by its hash), into
 * a malloc'd *ret. */
int pub__get_block(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_id *key, bool root,
                   uint8_t **ret, size_t *ret_len) CFS_WUR;
/* Read one coded data block (m of its n fragments, decoded and checked
 * against key by the ring's reader) into a malloc'd *ret. */
int pub__get_coded(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_id *key, uint32_t m,
                   uint32_t n, uint8_t **ret, size_t *ret_len) CFS_WUR;

#endif
