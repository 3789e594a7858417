/*
 * blockstore — one storage engine for every block store: the replica
 * store and the block cache of cfsd, the disk cache of cfs-mount and the
 * offline dir: store (WiscKey, FAST 2016; Bitcask).
 *
 *  - Block bytes are appended to pack files, each byte written once.
 *    LevelDB holds only small records: key -> (pack, offset, length, kind,
 *    sequence, lease, owner, recency), and the lease index.
 *  - A batch of operations (bstore_apply) is one group commit: in a
 *    durable store the pack is flushed (fdatasync) before one synchronous
 *    LevelDB write names its bytes, so an acknowledged put survives
 *    kill -9 and a crash never leaves a record pointing at unwritten bytes.
 *  - Replaced, dropped and expired blocks leave dead bytes; a compactor
 *    (bstore_compact_step, driven by the caller at a bounded rate) copies
 *    the live blocks of a mostly dead pack forward, flushes them, repoints
 *    the index and only then deletes the old pack.
 *  - A cache store is bounded in bytes on disk: it drops its oldest pack
 *    (keeping the blocks used recently) to make room.
 *  - The directory records its format version (FORMAT); another version is
 *    refused with a message saying what to do.
 * The engine knows nothing of block kinds: callers verify what they read.
 * Every call may come from any one thread at a time or several (a mutex).
 * docs/STORAGE.md has the on-disk format and its crash-safety argument.
 */
#ifndef CFS_BLOCKSTORE_H
#define CFS_BLOCKSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cfs.h"

#define BSTORE_FORMAT_VERSION 1
#define BSTORE_BLOCK_MAX (1u << 20) /* the largest block an entry may hold */

typedef struct bstore bstore_t;

enum bstore_mode {
	BSTORE_DURABLE = 0, /* every apply flushes (replicas, dir:) */
	BSTORE_CACHE = 1,   /* no flushes; bounded in bytes on disk; recency kept */
};

struct bstore_config {
	enum bstore_mode mode;
	const char *what;         /* for log lines: "block store", "block cache", ... */
	uint64_t cap_bytes;       /* cache: bound on its pack files (live + dead) */
	uint64_t pack_max;        /* a pack is closed at this size (0: default) */
	uint32_t compact_live_pct; /* rewrite a pack whose live share is below (0: 50) */
	bool no_lease_index;      /* no lease index (caches) */
};

/* What the index says about a block. */
struct bstore_meta {
	uint8_t kind;
	uint64_t seq;
	uint64_t lease_until;     /* the caller's unit; 0 with no lease index */
	uint8_t owner[16];
	uint32_t len;             /* set by the store */
};

enum bstore_op_type { BSTORE_PUT = 1, BSTORE_SET, BSTORE_DEL };

/* One operation of a batch. PUT appends data (meta.len bytes) and points
 * key at it; SET replaces key's meta, keeping its bytes (-ENOENT if
 * absent); DEL forgets key (its bytes become dead). */
struct bstore_op {
	enum bstore_op_type type;
	struct cfs_id key;
	struct bstore_meta meta;
	const uint8_t *data;
	int status;               /* set by bstore_apply */
};

struct bstore_stats {
	uint64_t blocks, live_bytes;  /* blocks and their bytes */
	uint64_t disk_bytes;          /* every pack file's size */
	uint64_t dead_bytes;          /* in packs, named by no record */
	uint32_t packs;
	uint64_t commits, flushes;    /* applies, fdatasyncs of packs */
	uint64_t written_bytes;       /* appended to packs, compaction included */
	uint64_t compactions;         /* packs rewritten and deleted */
	uint64_t compact_copied, compact_reclaimed; /* bytes copied forward, freed */
	uint32_t compacting_pack;     /* 0: idle */
	uint64_t compacting_done, compacting_size; /* its progress */
	uint64_t evicted;             /* cache: blocks dropped for room */
	uint64_t torn_cut, records_dropped; /* found at open */
	uint64_t replayed;            /* puts indexed again at open from their packs */
	uint64_t damaged;             /* reads that found a bad pack entry */
	uint64_t recoveries;          /* reopens after a failed index write */
	bool failed;                  /* writes refused until the index reopens */
};

/* Keep the index of every store opened from now on in memory (LevelDB's
 * in-memory environment, one for the process), the packs on disk: an
 * index then holds no file descriptor, for a harness that runs thousands
 * of stores in one process. The indexes end with the process and are
 * never freed before it ends; nothing locks them, so a directory opened
 * twice is not refused (-EBUSY) as it is on disk. */
void bstore_keep_indexes_in_memory(void);

/* Open (creating) the store in dir. -EBUSY when another process has it,
 * -EPROTO when dir holds another format (logged with what to do). */
int bstore_open(const char *dir, const struct bstore_config *cfg, bstore_t **ret) CFS_WUR;
void bstore_close(bstore_t *s);

/* Key's meta, and with data != NULL its bytes (*data malloc'd, meta->len
 * of them). 0, -ENOENT, -EUCLEAN (the entry is damaged: drop it), -EIO. A
 * cache store marks the block used. */
int bstore_get(bstore_t *s, const struct cfs_id *key, struct bstore_meta *meta, uint8_t **data) CFS_WUR;
bool bstore_has(bstore_t *s, const struct cfs_id *key);

/* Apply n operations as one group commit. Returns 0 or the batch's error
 * (-ENOSPC, -EIO, ...), in which case nothing of it is applied and every
 * op's status has it; otherwise each op's status is 0 or its own error
 * (-ENOENT for a SET or DEL of an absent key, which are skipped). The same
 * key twice in one batch: the later op wins. */
int bstore_apply(bstore_t *s, struct bstore_op *ops, size_t n) CFS_WUR;

/* Up to max keys in (from, to] on the circle, in key order (wrapping),
 * with their meta when metas != NULL. */
int bstore_scan(bstore_t *s, const struct cfs_id *from, const struct cfs_id *to,
                struct cfs_id *keys, struct bstore_meta *metas, uint32_t max, uint32_t *ret_n) CFS_WUR;
/* Keys after `after` (NULL: from the first) in key order, up to max;
 * *ret_more when more follow. */
uint32_t bstore_list(bstore_t *s, const struct cfs_id *after, struct cfs_id *keys,
                     struct bstore_meta *metas, uint32_t max, bool *ret_more);
/* Every record in key order, a page at a time (bstore_list), each handed
 * to fn until it returns false. Returns how many fn was given. The lock
 * is not held while fn runs, so fn may use the store; records added or
 * removed meanwhile may or may not be seen. */
typedef bool (*bstore_each_fn)(void *arg, const struct cfs_id *key, const struct bstore_meta *meta);
uint64_t bstore_each(bstore_t *s, bstore_each_fn fn, void *arg);
/* The lease index in order: up to max entries whose lease ends at or
 * before until; keys and ends may be NULL (then only counted). */
uint64_t bstore_expiring(bstore_t *s, uint64_t until, struct cfs_id *keys, uint64_t *ends, uint64_t max);

/* Forget the lease entry (until, key) when it is not key's own (a key
 * gone, or damaged): what bstore_expiring listed stays listed otherwise. */
void bstore_drop_lease(bstore_t *s, const struct cfs_id *key, uint64_t until);

/* Do at most budget bytes of compaction work; true while work remains.
 * Callers bound the I/O rate by the budget they give per call. */
bool bstore_compact_step(bstore_t *s, uint64_t budget);
/* Cache: drop old packs until at most bytes are on disk. */
void bstore_trim(bstore_t *s, uint64_t bytes);

void bstore_stats(bstore_t *s, struct bstore_stats *ret);
const char *bstore_dir(const bstore_t *s);

/* ---- internals exposed for the fuzzers and unit tests */
#define BSTORE__REC_BYTES 58
#define BSTORE__ENTRY_HDR 80
struct bstore__rec {
	uint32_t pack;
	uint64_t off;             /* of the entry's header in the pack */
	struct bstore_meta meta;
	uint64_t tick;            /* cache recency */
};
void bstore__rec_encode(uint8_t out[BSTORE__REC_BYTES], const struct bstore__rec *r);
/* 0, or -EINVAL for a value that is no record. */
int bstore__rec_decode(const uint8_t *p, size_t len, struct bstore__rec *ret) CFS_WUR;
/* The pack entry at p[0..len): 1 with its key and meta (the entry is
 * BSTORE__ENTRY_HDR + meta.len bytes, all present), 0 when the header is
 * valid but its bytes are cut short (a torn tail), -EINVAL when p holds no
 * entry header. */
int bstore__entry_parse(const uint8_t *p, size_t len, struct cfs_id *ret_key,
                        struct bstore_meta *ret_meta) CFS_WUR;

#endif
