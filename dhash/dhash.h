/*
 * dhash — the block store on the ring (CFS section 5, DHash++ 4–5).
 *
 * Contract: put_h (content-hash blocks), put_s (signed roots), get and
 * refresh, asynchronous and batched. Servers verify every block before
 * storing it (LevelDB, durable before the put is acknowledged), keep k
 * replicas on the key's successors and repair them by Merkle-style range
 * digests, cache along lookup paths in a bounded LRU that never counts as
 * a replica, expire unrefreshed leases and enforce per-IP quotas.
 *
 * Depends on chord/ and common/. Its API is added with the DHash issue
 * (#5); this folder exports nothing yet.
 */
#ifndef CFS_DHASH_H
#define CFS_DHASH_H

#include "chord/chord.h"

#endif
