/* publisher/ internals: the sinks behind pub_sink_open. */
#ifndef CFS_PUBLISHER_INTERNAL_H
#define CFS_PUBLISHER_INTERNAL_H

#include "dhash/dhash.h"
#include "publisher/publisher.h"

/* The DHT store: the local daemon, or a plain ring client (t is resolved
 * with dhash_target_resolve first: an empty t means the default rule). */
int pub__cfsdsink_open(uv_loop_t *loop, struct dhash_target *t, struct pub_sink *ret) CFS_WUR;

/* Call fn once for every block under root_dir (the root directory block
 * included, the signed root not), reading and verifying the blocks that
 * name others. Stops at the first error, fn's or a read's (logged). */
typedef int (*pub_block_fn)(void *arg, const struct cfs_id *key);
int pub__walk_blocks(const struct sfsro_source *src, const struct cfs_id *root_dir,
                     pub_block_fn fn, void *arg) CFS_WUR;

#endif
