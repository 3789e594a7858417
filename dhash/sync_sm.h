/*
 * Replica maintenance's rules (sync.c), pure: how a range is cut into
 * parts, when a range is split by digest rather than listed, which of two
 * roots is newer, and how long a peer's refusal of a push is believed.
 * Nothing here does I/O or reads the clock.
 */
#ifndef CFS_DHASH_SYNC_SM_H
#define CFS_DHASH_SYNC_SM_H

#include "dhash/internal.h"

#define DHASH_SYNC_PART_BITS 6
#define DHASH_SYNC_PARTS (1u << DHASH_SYNC_PART_BITS)
#define DHASH_SYNC_LEAF_KEYS 64   /* a differing part with at most this many keys here is listed */
#define DHASH_SYNC_DEPTH_MAX 3
#define DHASH_SYNC_PAGE_KEYS 1024

struct dhash__sync_range {
	struct cfs_id lo, hi;     /* (lo, hi] */
	uint32_t depth;
	bool differs;             /* a part whose digests differ: compare its roots */
};

/* The end of part i of r in DHASH_SYNC_PARTS parts. */
void dhash__sync_part_end(const struct dhash__sync_range *r, uint32_t i, struct cfs_id *ret);
/* Is r, where we hold n keys (counted up to LEAF_KEYS + 1), roots among
 * them or not, split by digest (true) or listed (false)? */
bool dhash__sync_splits(const struct dhash__sync_range *r, uint32_t n, bool roots);
/* A key both hold: 1 when the peer's is the newer root (take it), -1 when
 * ours is (send it), 0 otherwise. */
int dhash__sync_root_cmp(uint8_t mine_kind, uint64_t mine_seq, uint8_t their_kind, uint64_t their_seq);

/* A peer's refusals of our pushes as denied there: a table of (key, peer)
 * pairs, made empty by dhash__sync_refused_init. Note one at now_ms;
 * the first wait is first_ms, doubling after each refusal up to a day,
 * bounded in count. */
void dhash__sync_refused_init(struct cfs_htab *t);
void dhash__sync_refuse(struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                        uint64_t now_ms, uint64_t first_ms);
/* Is key not to be pushed to peer at now_ms? t may be NULL. */
bool dhash__sync_is_refused(const struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                            uint64_t now_ms);

#endif
