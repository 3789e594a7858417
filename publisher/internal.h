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

/* Blocks to a sink in batches (batch.c), for the publisher and the push
 * alike: each batch is asked which of its blocks the sink holds (which
 * renews their leases), the others are put, and up to max_in_flight
 * batches are out while the caller reads on. A batch is sent at
 * PUB__BATCH_BLOCKS blocks or PUB__BATCH_BYTES bytes. The caller waits
 * only in add, submit and drain, at the top of its program. */
#define PUB__BATCH_BLOCKS 256
#define PUB__BATCH_BYTES (4u << 20)
struct pub__batch;
struct pub__batcher {
	uv_loop_t *loop;
	struct pub_sink *sink;
	uint64_t lease_until;      /* asked for every block */
	bool dry_run;              /* ask with no lease, put nothing: count what would be sent */
	unsigned max_in_flight;
	/* Called as each batch is answered (r < 0: it failed as a whole)
	 * with its tag, before the batch is counted done; returns r, or an
	 * error that stops the run. */
	int (*ended)(void *arg, uint64_t tag_files, uint64_t tag_bytes, int r);
	void *arg;
	/* counts, over every batch answered */
	uint64_t blocks_sent, bytes_sent;       /* the sink lacked them (dry run: would lack) */
	uint64_t blocks_present, bytes_present; /* it had them */
	uint64_t blocks_failed;    /* put and refused */
	int put_error;             /* the first refusal: why, */
	struct cfs_id put_failed;  /* and which block */
	int error;                 /* the first batch that failed, or what ended said */
	/* state */
	struct pub__batch *cur;    /* being filled */
	unsigned in_flight;        /* batches the sink has not answered */
	bool woke;                 /* a batch was answered */
};
/* Queue a block, taking its bytes (freed once its batch is answered);
 * sends the batch when it is full. Returns the first error of any batch. */
int pub__batch_add(struct pub__batcher *bt, const struct pub_block *b);
/* Add to the tag of the batch being filled (the next one if none is):
 * ended gets it back once that batch is answered. */
void pub__batch_tag(struct pub__batcher *bt, uint64_t files, uint64_t bytes);
/* Send the batch being filled; wait only while too many are out. */
int pub__batch_submit(struct pub__batcher *bt);
/* Send what is left and wait for every answer. */
int pub__batch_drain(struct pub__batcher *bt);
/* After an error: drop the batch being filled, wait out those still out. */
void pub__batch_abandon(struct pub__batcher *bt);

#endif
