/*
 * blockstore internals: the state behind bstore_t, shared by store.c (the
 * packs, the index, reads, group commits), open.c (open, recovery, close),
 * iter.c (walks of the index), compact.c (compaction, cache eviction) and
 * format.c (the byte layouts, no I/O).
 */
#ifndef CFS_BLOCKSTORE_INTERNAL_H
#define CFS_BLOCKSTORE_INTERNAL_H

#include <leveldb/c.h>
#include <pthread.h>

#include "blockstore/blockstore.h"

#define BSTORE__PACK_HDR 16
#define BSTORE__P_REC 'K'
#define BSTORE__P_LEASE 'L'
#define BSTORE__P_HEAD 'H'  /* the active pack and its end as of an index write */

struct bstore__pack {
	uint32_t num;
	int fd;                   /* for reading, opened on first use; -1 */
	uint64_t size;            /* bytes in the file */
	uint64_t live;            /* bytes of the entries records name */
	bool stuck;               /* compaction could not empty it: leave it */
};

/* A block copied forward by the compactor, repointed at the next flush. */
struct bstore__moved {
	struct cfs_id key;
	uint32_t from_pack;
	uint64_t from_off, to_off;
	uint32_t entry_len;       /* header included */
};

struct bstore {
	pthread_mutex_t mu;
	struct bstore_config cfg;
	char *dir, *db_dir, *pack_dir;
	leveldb_t *db;
	leveldb_options_t *opt;
	leveldb_filterpolicy_t *bloom;
	leveldb_readoptions_t *ro;
	leveldb_writeoptions_t *wo;   /* synchronous in a durable store */
	leveldb_writeoptions_t *wo_async;
	struct bstore__pack *packs;   /* in number order */
	size_t npacks, cap_packs;
	uint32_t nopen;               /* read descriptors open */
	uint32_t active;              /* the pack appended to (0: none yet) */
	uint32_t next_pack;           /* the next pack's number: never one used before */
	bool unsynced;                /* index writes not flushed since the last flushed one */
	int active_fd;
	uint64_t tick;                /* cache: the youngest use */
	int failed;                   /* a failed index write: no writes until reopened */
	int append_failed;            /* the last pack append failed (a full disk): its error */
	uint64_t retry_ms;
	/* compaction */
	uint32_t victim;
	uint64_t scan_off;
	struct bstore__moved *moved;
	size_t nmoved, cap_moved;
	uint8_t *copy_buf;
	size_t copy_len, copy_cap;
	struct bstore_stats st;
};

/* format.c */
void bstore__entry_header(uint8_t out[BSTORE__ENTRY_HDR], const struct cfs_id *key,
                          const struct bstore_meta *meta);
void bstore__pack_header(uint8_t out[BSTORE__PACK_HDR], uint32_t num);
bool bstore__pack_header_ok(const uint8_t *p, size_t len, uint32_t num);
void bstore__rec_key(uint8_t out[1 + CFS_ID_BYTES], const struct cfs_id *key);
void bstore__lease_key(uint8_t out[9 + CFS_ID_BYTES], uint64_t until, const struct cfs_id *key);

/* store.c, for compact.c, open.c and iter.c (the mutex held) */
struct bstore__pack *bstore__pack_find(bstore_t *s, uint32_t num);
int bstore__pack_fd(bstore_t *s, struct bstore__pack *p);
int bstore__rec_read(bstore_t *s, const struct cfs_id *key, struct bstore__rec *ret);
/* Append n iovecs to the active pack (a new one when it is full or
 * absent): *ret_pack and *ret_off tell where they start. Flushed in a
 * durable store. Nothing is appended on error. */
int bstore__append(bstore_t *s, const struct iovec *iov, int n, uint64_t total,
                   uint32_t *ret_pack, uint64_t *ret_off);
/* Write a batch to the index, with the head (where the appends end);
 * flushed when sync in a durable store. */
int bstore__index_write(bstore_t *s, leveldb_writebatch_t *b, bool sync, const char *what);
int bstore__writable(bstore_t *s);
void bstore__pack_unlink(bstore_t *s, struct bstore__pack *p);
void bstore__active_close(bstore_t *s);
uint64_t bstore__dead(const struct bstore__pack *p);
void bstore__pack_path(const bstore_t *s, uint32_t num, char *buf, size_t n);
/* A pack found at open, in number order. */
struct bstore__pack *bstore__pack_add(bstore_t *s, uint32_t num, uint64_t size);
/* Close every read descriptor. */
void bstore__close_reads(bstore_t *s);
/* Log LevelDB's error err (freed) for what; -ENOSPC or -EIO. */
int bstore__db_error(bstore_t *s, char *err, const char *what);

/* open.c: open the index (at_start in a durable store: replay what the
 * packs hold past its head), then count each pack's live bytes. */
int bstore__db_open(bstore_t *s, bool at_start);
/* LevelDB's in-memory environment, one for the process (memenv.cc); NULL
 * if this LevelDB's C API cannot be given one. */
leveldb_env_t *bstore__mem_env(void);

/* compact.c */
/* Cache: drop old packs until need more bytes fit under the bound. */
void bstore__make_room(bstore_t *s, uint64_t need);
void bstore__compact_free(bstore_t *s);

#endif
