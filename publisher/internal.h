/* publisher/ internals: the sinks behind pub_sink_open. */
#ifndef CFS_PUBLISHER_INTERNAL_H
#define CFS_PUBLISHER_INTERNAL_H

#include "dhash/dhash.h"
#include "publisher/publisher.h"

/* The DHT store: the local daemon, or a plain ring client (t is resolved
 * with dhash_target_resolve first: an empty t means the default rule). */
int pub__cfsdsink_open(uv_loop_t *loop, struct dhash_target *t, struct pub_sink *ret) CFS_WUR;

#endif
