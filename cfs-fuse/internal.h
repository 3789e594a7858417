/* cfs-fuse/ internals: the block cache, the node table, the file reader. */
#ifndef CFS_CFSFUSE_INTERNAL_H
#define CFS_CFSFUSE_INTERNAL_H

#include "cfs-fuse/cfsfuse.h"

/* ---- blocks (blocks.c): a bounded LRU of verified blocks, and fetches */

/* A verified content-hash block in the cache. Its bytes stay valid until
 * the next call into the cache that can evict (a fetch completing, or a
 * peek that brings a block in from the disk cache). */
struct fblk {
	struct cfs_id key;
	uint8_t *p;
	size_t len;
	struct fblk *lprev, *lnext; /* LRU, most recent at the head */
};

/* status 0 with b, or a negative errno after the bounded retries. */
typedef void (*fs_blk_cb)(void *arg, int status, const struct fblk *b);

/* ---- a local store (localsrc.c): the dir: store at a path, read in
 * this process. Gets answer as client_get's: later, from the loop,
 * only bytes that verify under their key (kind set), -ENOENT, -EBADMSG
 * for bytes that do not verify, -EIO. */
struct fs_local;
/* -ENOENT (logged) when there is no store at path: one is never made. */
int fs__local_open(uv_loop_t *loop, const char *path, struct fs_local **ret) CFS_WUR;
/* -ECANCELED once the store is being freed (then cb never runs). */
int fs__local_get(struct fs_local *l, const struct cfs_id *key, dhash_get_cb cb, void *arg) CFS_WUR;
/* Gets pending end with -ECANCELED, here; the store closes; the loop
 * frees the rest. Accepts NULL. */
void fs__local_free(struct fs_local *l);

/* ---- the last verified root on disk (rootcache.c): pure, but for files */

/* A signed root is under 700 bytes; a file over this is not one. */
#define FS_ROOT_FILE_MAX 4096
/* Replace the file at path by a verified, accepted root's exact bytes
 * (atomically, mode 0600). -EFBIG over FS_ROOT_FILE_MAX. */
int fs__rootcache_store(const char *path, const uint8_t *p, size_t len) CFS_WUR;
/* The bytes kept at path, for the caller to free: -ENOENT when there are
 * none, -EFBIG over FS_ROOT_FILE_MAX, else -errno. */
int fs__rootcache_read(const char *path, uint8_t **ret_p, size_t *ret_len) CFS_WUR;
/* Accept p as vol's root by the ring's rules: -EBADMSG (signature),
 * -EPROTO (not a root), -EKEYREJECTED (another key), -ESTALE (sequence
 * below min_seq), -EKEYEXPIRED (valid-until before now; now 0: not
 * checked). ret holds what was decoded, also on the last three. */
int fs__rootcache_accept(const uint8_t *p, size_t len, const struct cfs_pubkey *vol,
                         uint64_t min_seq, uint64_t now, struct sfsro_root *ret) CFS_WUR;
/* Why a kept root was refused (r from the two above; rr as accept left
 * it), one line without a full stop, in buf. */
const char *fs__rootcache_why(int r, const struct sfsro_root *rr, uint64_t min_seq, char *buf,
                              size_t n);

/* ---- the bound on fetches in flight (pipe.c): the path's bandwidth-delay
 * product, grown from --max-fetches while the delivered rate grows */

struct fs_pipe {
	uint32_t limit, base;     /* the bound now, and where it started */
	uint32_t prev_limit;      /* before the last doubling */
	uint64_t max_bytes;       /* limit times the bytes of a fetch stays below */
	bool round_open, round_limited, full;
	uint64_t round_start_us, round_bytes;
	uint32_t round_done, round_len;
	double best_rate;         /* bytes/s of the best round */
	uint32_t flat;            /* limited rounds since the rate last grew */
	uint32_t rounds;
};
void fs__pipe_init(struct fs_pipe *p, uint32_t base, uint64_t max_bytes);
/* A fetch started; active: the fetches in flight, it included. */
void fs__pipe_start(struct fs_pipe *p, uint32_t active);
/* A fetch ended, with bytes delivered (0: it failed). */
void fs__pipe_done(struct fs_pipe *p, size_t bytes, uint64_t now_us);

struct fs_blocks;
/* Blocks come from local when it is set, else through dh. disk: a cache
 * on disk behind the one in memory, or NULL; closed by free. */
struct fs_blocks *fs__blocks_new(uv_loop_t *loop, client_t *dh, struct fs_local *local,
                                 const struct cfsfuse_options *o, dhash_cache_t *disk);
void fs__blocks_free(struct fs_blocks *bs);
/* The cached block (from memory, else from the disk cache), moved to the
 * front of the LRU; NULL if not cached. */
const struct fblk *fs__blk_peek(struct fs_blocks *bs, const struct cfs_id *key);
/* Fetch key (joining a fetch in flight for it): cb runs later, never
 * inside this call. prefetch: a guess, counted apart, not retried. */
void fs__blk_fetch(struct fs_blocks *bs, const struct cfs_id *key, bool prefetch, fs_blk_cb cb,
                   void *arg);
/* A prefetch for a listed directory: behind every other fetch, only while
 * fewer than --max-fetches are out, and no part of the bound's measure. */
void fs__blk_fetch_bg(struct fs_blocks *bs, const struct cfs_id *key, fs_blk_cb cb, void *arg);
/* A content-hash block fetched outside the cache (verified under key by
 * the client that got it): into the memory cache. */
void fs__blk_seed(struct fs_blocks *bs, const struct cfs_id *key, const uint8_t *p, size_t len);
/* The same for a file's data block of the version root: a coded volume's
 * (the root names a code) is fetched as fragments (client_get_coded). The
 * code is the caller's, so one block layer serves volumes of both kinds
 * (cfs-gateway's). */
void fs__blk_fetch_data(struct fs_blocks *bs, const struct sfsro_root *root, const struct cfs_id *key,
                        bool prefetch, fs_blk_cb cb, void *arg);
void fs__blk_fetch_data_bg(struct fs_blocks *bs, const struct sfsro_root *root,
                           const struct cfs_id *key, fs_blk_cb cb, void *arg);
void fs__blocks_stats(const struct fs_blocks *bs, struct cfsfuse_stats *st);
/* The bound on fetches in flight over its start (--max-fetches): the
 * prefetch window's bound grows with it. */
double fs__blocks_pipe_scale(const struct fs_blocks *bs);

/* ---- the node table (nodes.c): FUSE inode numbers for directory entries */

struct fnode {
	uint64_t ino;
	uint64_t nlookup;
	uint64_t parent;
	uint8_t *name;            /* NUL-terminated copy */
	size_t name_len;
	uint8_t type;
	uint64_t size;
	uint32_t mode;
	int64_t mtime_s;
	uint32_t mtime_ns;
	struct cfs_id key;        /* inode (file), top directory block (dir) */
	char *target;             /* symlink target */
	bool detached;            /* replaced by a newer version of the file */
	uint64_t seq;             /* root version this entry was found in */
	struct fnode *inext, *nnext; /* hash chains: by ino, by (parent, name) */
};

struct fs_nodes;
struct fs_nodes *fs__nodes_new(void);
void fs__nodes_free(struct fs_nodes *t);
struct fnode *fs__node_get(struct fs_nodes *t, uint64_t ino);
/* The node for entry e under parent, created if new, its attributes set
 * from e; nlookup is not changed. */
struct fnode *fs__node_enter(struct fs_nodes *t, uint64_t parent, const struct sfsro_entry *e,
                             uint64_t seq);
/* Drop n lookups; the node is freed at zero (never the root). */
void fs__node_forget(struct fs_nodes *t, uint64_t ino, uint64_t n);
/* Call fn for every node (not the root). */
void fs__nodes_each(struct fs_nodes *t, void (*fn)(void *arg, struct fnode *n), void *arg);
uint64_t fs__nodes_count(const struct fs_nodes *t);

/* ---- the mount (ops.c, run.c, walk.c, root.c) */

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <pthread.h>

/* CFS_IOC_UPDATE asks waiting at most */
#define FS_UPDATE_WAITERS_MAX 16

/*
 * The CFS_IOC_UPDATE asks and the root checks that answer them (updq.c;
 * root.c runs the checks). An ask is answered by a check that started
 * after it: one that comes while a check runs (a check that may have
 * fetched the root before the publish the asker has just made) sets
 * recheck and waits for the next check, which starts when the running
 * one ends. No I/O: root.c starts the checks and answers the asks.
 */
struct fs_updq {
	fuse_req_t req[FS_UPDATE_WAITERS_MAX];
	uint64_t seq_before[FS_UPDATE_WAITERS_MAX]; /* the version when each asked */
	uint32_t n;               /* asks waiting, oldest first */
	uint32_t ncur;            /* ... the first ncur of them for the check running */
	bool checking;            /* a check runs */
	bool recheck;             /* asks came during it: another check after it */
};
enum { FS_UPDQ_START, FS_UPDQ_WAIT, FS_UPDQ_FULL };
/* An ask (the mounted version is seq): FS_UPDQ_START when no check runs
 * (start one: fs__updq_begin), FS_UPDQ_WAIT when it waits for the check
 * after the one that runs, FS_UPDQ_FULL when too many wait (not queued). */
int fs__updq_add(struct fs_updq *q, fuse_req_t req, uint64_t seq);
/* A check starts: it answers every ask waiting now. false (and nothing
 * changes) when one runs already. */
bool fs__updq_begin(struct fs_updq *q);
/* The running check ended: the asks it answers, *ret_n of them, into out
 * and seq_out (FS_UPDATE_WAITERS_MAX entries each). Returns true when asks
 * came meanwhile: start the next check now (fs__updq_begin). */
bool fs__updq_end(struct fs_updq *q, fuse_req_t *out, uint64_t *seq_out, uint32_t *ret_n);
/* Every ask, answered or not (the mount stops); nothing runs afterwards. */
uint32_t fs__updq_take_all(struct fs_updq *q, fuse_req_t *out, uint64_t *seq_out);

/* The first root's two answers (root.c, docs/MOUNTING.md): a plain
 * client's early root (one server's, accepted by the usual rules) and its
 * read quorum's. Which one a mount that has not started yet starts with:
 * FS_FIRST_QUORUM when the quorum's was accepted (final_status 0) and is
 * not older than the early one; else FS_FIRST_EARLY when there is an
 * early one; else FS_FIRST_NONE (final_status is the error). */
enum { FS_FIRST_NONE, FS_FIRST_EARLY, FS_FIRST_QUORUM };
int fs__first_pick(bool have_early, uint64_t early_seq, int final_status, uint64_t final_seq);
/* A mount serving sequence cur: does an accepted answer of sequence seq
 * (status 0) move it? Only forward. */
bool fs__first_moves(uint64_t cur, int status, uint64_t seq);

/* An open file: its own copy of the inode block, so a newer root does not
 * change what an open file reads. */
struct fhandle {
	uint64_t ino;
	struct cfs_id key;
	uint8_t *iblock;
	size_t iblock_len;
	struct sfsro_inode inode;
	uint64_t next_off;        /* where a sequential reader goes next */
	uint64_t prefetched;      /* data blocks below this were prefetched */
	sfsro_walker_t *locator;  /* finds data keys for prefetches (made on first use) */
};

/* Kernel cache invalidations, sent from their own thread. */
struct inval {
	uint64_t parent, ino;
	char *name;               /* NULL: invalidate the inode only */
	struct inval *next;
};

typedef struct cfsfuse {
	uv_loop_t *loop;
	struct cfsfuse_options o;
	struct cfs_pubkey vol;
	char volname[CFS_NAME_LEN + 1];
	char seq_path[4200];      /* where the highest seen sequence is kept */
	char root_path[4200];     /* ... and the last verified root's bytes (rootcache.c) */
	client_t *dh;
	struct fs_local *local;   /* o.from_dir: the store blocks come from */
	struct fs_blocks *blocks;
	struct fs_nodes *nodes;
	struct sfsro_root root;   /* the mounted version */
	uint64_t max_seq;         /* highest sequence ever accepted */
	uint64_t expired_until;   /* the last root refused as expired: its valid-until (0: none) */
	uint64_t expired_warned_seq; /* an expired root read anyway (allow_expired): warned once */
	uint64_t root_kept_seq;   /* the sequence of the root in root_path (0: none written) */
	bool root_from_cache;     /* mounted from root_path, not from a fetch */
	bool offline;             /* the last root check reached nobody (or none has answered
	                           * a mount started from root_path yet) */
	bool reach_known;         /* a root check has ended since mounting */
	struct fuse_session *se;
	struct fuse_buf buf;
	uv_poll_t poll;
	uv_signal_t sigterm, sigint;
	uv_timer_t update_timer;
	struct fs_updq upd;       /* CFS_IOC_UPDATE asks, and whether a check runs */
	const char *mountpoint;
	bool stopping, inited, readahead_set;
	double window;            /* prefetch window, blocks (AIMD) */
	struct cfsfuse_stats st;
	/* the invalidation thread */
	pthread_t inval_thread;
	pthread_mutex_t inval_lock;
	pthread_cond_t inval_cond;
	struct inval *inval_head, **inval_tail;
	struct inval *negatives;  /* names answered "absent" under this root */
	uint32_t nnegatives;
	bool inval_stop, inval_started;
	struct fs_census *census; /* the volume's totals, for statfs */
	struct fs_dirpf *dirpf;   /* listed directories' small files, ahead of their readers */
	const char *doing;        /* "mount" (NULL) or "read": what failed, in messages */
	bool first_early;         /* a mount (cfsfuse_run): a plain client's first root may
	                           * come in two steps, and the top directory is asked for at
	                           * once; cfs-cat and cfs-get wait for the read quorum */
	struct cfs_id rootdir_key; /* the top directory's block, asked for at start */
	uint8_t *rootdir_bytes;   /* ... when it came before the block cache was made */
	size_t rootdir_len;
	bool rootdir_pending;
	struct fs_start_times {   /* where a mount's start went (user.cfs.stats), µs since
	                           * cfsfuse_run began; 0: not (yet) reached */
		uint64_t t0;          /* cfsfuse_run began (cfs_now_us) */
		uint64_t early;       /* a plain client's first verified root was accepted */
		uint64_t root;        /* the first root's get ended (its read quorum) */
		uint64_t root_lookup; /* of the root's get: the part spent looking its key up */
		uint32_t root_rpcs;   /* ... and its RPCs */
		uint64_t mounted;     /* the kernel mount was made */
		uint64_t opendir;     /* the first opendir of the top directory came */
		uint64_t readdir;     /* ... and the first readdir of it was answered */
	} start;
} cfsfuse_t;
/* A start-up step's time: now, in µs since fs->start.t0, at least 1. */
uint64_t fs__start_mark(const cfsfuse_t *fs);

/* walk.c: directories and files from blocks, asynchronously: the
 * sfsro-format walker, fed from the block cache and its fetches. A block
 * that cannot be fetched, or that the walker refuses, is -EIO (logged
 * with its key); -ECANCELED when the mount is going away. */
/* Find name in the directory of node dir; done(arg, status, entry) with an
 * entry valid during the call. */
typedef void (*fs_lookup_cb)(cfsfuse_t *fs, void *arg, int status, const struct sfsro_entry *e);
void fs__dir_lookup(cfsfuse_t *fs, const struct cfs_id *dir_key, const char *name,
                    fs_lookup_cb cb, void *arg);
/* Resolve path from the mounted root (as sfsro_walker_path). */
void fs__path_lookup(cfsfuse_t *fs, const char *path, fs_lookup_cb cb, void *arg);
/* An open directory (walk.c), read a leaf block at a time. */
struct fs_dir;
/* One entry, borrowed for the call, at index (0: the first after . and
 * ..); false to stop before it (the reply is full). */
typedef bool (*fs_dir_entry_fn)(void *arg, const struct sfsro_entry *e, uint64_t index);
/* The end of an open or a read: status 0 or a negative errno. An open
 * passes its new handle, to be freed by the callee (fs__dir_free) on error
 * too; a read passes NULL. */
typedef void (*fs_dir_done_fn)(cfsfuse_t *fs, void *arg, int status, struct fs_dir *h);
/* Open the directory whose top block is top: its first leaf is read, so a
 * bad directory is an error here already. */
void fs__dir_open(cfsfuse_t *fs, uint64_t ino, const struct cfs_id *top, fs_dir_done_fn done, void *arg);
/* Hand entries from index on to add until it says stop or the directory
 * ends, then done. An error (EIO: logged with the block's key) stays with
 * the handle. One read at a time per handle (-EBUSY). */
void fs__dir_read(cfsfuse_t *fs, struct fs_dir *h, uint64_t index, fs_dir_entry_fn add,
                  fs_dir_done_fn done, void *arg);
/* The root sequence the directory was opened under. */
uint64_t fs__dir_seq(const struct fs_dir *h);
void fs__dir_free(struct fs_dir *h);
/* Fetch and decode an inode block into a new handle. */
typedef void (*fs_open_cb)(cfsfuse_t *fs, void *arg, int status, struct fhandle *h);
void fs__file_open(cfsfuse_t *fs, uint64_t ino, const struct cfs_id *key, fs_open_cb cb, void *arg);
void fs__fhandle_free(struct fhandle *h);
/* Read size bytes at off; cb gets the bytes (short at the end of file). */
typedef void (*fs_read_cb)(cfsfuse_t *fs, void *arg, int status, const uint8_t *p, size_t n);
void fs__file_read(cfsfuse_t *fs, struct fhandle *h, uint64_t off, size_t size, fs_read_cb cb,
                   void *arg);
/* The key of data block b of h's file if every indirect block above it is
 * cached; else prefetch the first one missing (cb when it arrives) and
 * return false. */
bool fs__data_key_cached(cfsfuse_t *fs, struct fhandle *h, uint64_t b, struct cfs_id *ret,
                         fs_blk_cb cb, void *arg);

/* root.c: fetching and checking roots, updates, invalidations. */
/* Fetch the volume's root on fs->loop, running it until the answer comes:
 * from the top of the program, before anything else uses the loop. */
int fs__root_initial(cfsfuse_t *fs) CFS_WUR;
/* Decode and accept a root fetched for fs->vol (the walker's rules, above
 * fs->max_seq and not expired). */
int fs__root_check(cfsfuse_t *fs, const struct dhash_get_result *g, struct sfsro_root *ret) CFS_WUR;
void fs__root_start_updates(cfsfuse_t *fs);
/* CFS_IOC_UPDATE: check for a newer root now (after the check already
 * out, if one is) and answer req when it ends; EBUSY with too many
 * waiting. */
void fs__root_update_now(cfsfuse_t *fs, fuse_req_t req);
/* Answer every waiting CFS_IOC_UPDATE with status (the mount stops). */
void fs__root_update_answer(cfsfuse_t *fs, int status);
/* Open where blocks come from, after the root was fetched (and after a
 * fork): fs->local with o.from_dir, else fs->dh. */
int fs__source_open(cfsfuse_t *fs) CFS_WUR;
void fs__inval_start(cfsfuse_t *fs);
/* Remember a negative entry, to invalidate it at the next root switch;
 * false when too many are remembered (then cache it only briefly). */
bool fs__negative_add(cfsfuse_t *fs, uint64_t parent, const char *name);
void fs__inval_stop(cfsfuse_t *fs);

/* rootcache.c: the last verified root of the volume, kept on disk. */
/* Start from the root kept at fs->root_path (0: fs->root set, offline
 * until a check answers); -ENOENT when none is kept, another negative
 * errno (logged in one line) when it is refused: then fetch one. */
int fs__root_from_cache(cfsfuse_t *fs) CFS_WUR;
/* Warn, once per root, that r is read although expired (o.allow_expired). */
void fs__root_warn_expired(cfsfuse_t *fs, const struct sfsro_root *r);

/* ops.c: the FUSE operations, which run.c's session runs. */
extern const struct fuse_lowlevel_ops fs__ops;

/* census.c: the volume's totals, counted in the background by listing
 * every directory of the mounted version (statfs reports them). */
struct fs_totals {
	uint64_t files;           /* entries that are not directories */
	uint64_t dirs;            /* directories, the root included */
	uint64_t bytes;           /* the files' sizes */
	uint64_t blocks;          /* the same in SFSRO_BLOCK_SIZE_DEFAULT blocks, each file rounded up */
	uint64_t unreadable;      /* directories that could not be listed */
};
struct fs_census;
struct fs_census *fs__census_new(cfsfuse_t *fs);
/* Count fs->root's version (again), dropping a count under way. */
void fs__census_start(struct fs_census *c);
/* The last complete count, else the one under way; complete: whether
 * that is the whole count of the mounted version. */
void fs__census_totals(const struct fs_census *c, struct fs_totals *ret, bool *ret_complete);
/* Stop counting and close the timer (the loop finishes closing it). */
void fs__census_close(struct fs_census *c);
/* After close and after the loop has run: frees. Accepts NULL. */
void fs__census_free(struct fs_census *c);

/* dirpf.c: a listed directory's small files (inode and data blocks) and
 * subdirectory blocks are prefetched, bounded (see there). */
struct fs_dirpf;
struct fs_dirpf *fs__dirpf_new(cfsfuse_t *fs);
/* An entry a reader has just been handed by readdir. */
void fs__dirpf_entry(struct fs_dirpf *pf, const struct sfsro_entry *e);
/* No more fetches from now on (before the block cache is freed). */
void fs__dirpf_close(struct fs_dirpf *pf);
/* After the block cache is freed. Accepts NULL. */
void fs__dirpf_free(struct fs_dirpf *pf);

/* getplan.c: cfs-get's rules, no I/O but the read of a local file. */
#include <sys/stat.h>
/* Can name be created in a directory: not empty, ".", "..", no '/' or NUL. */
bool fs__get_name_is_safe(const uint8_t *name, size_t len);
enum { FS_GET_COPY, FS_GET_SKIP, FS_GET_CHECK };
/* What to do for file entry e when lstat found st at its place (NULL:
 * nothing): COPY, SKIP (a regular file of its size and mtime), or, with
 * check, CHECK (the same, to be confirmed by its content key). */
int fs__get_decide(const struct stat *st, const struct sfsro_entry *e, bool check);
#define FS_GET_TEMP_LEN 64
/* The temporary name of the n-th file process pid writes. */
void fs__get_temp_name(char buf[static FS_GET_TEMP_LEN], long pid, uint64_t n);
/* Is name one fs__get_temp_name makes (a leftover of an interrupted run)? */
bool fs__get_is_temp_name(const char *name);
/* Where a single file or link named name goes for DEST dest: dest/name
 * when dest is a directory or ends in '/', else dest itself; -EINVAL for
 * an empty dest, -ENAMETOOLONG when it does not fit n. */
int fs__get_dest_path(const char *dest, bool dest_is_dir, const char *name, char *buf, size_t n);
/* The inode key the local file fd would have if published with like's
 * size, mode, mtime and block size; -ESTALE if it is shorter than size. */
int fs__get_local_key(int fd, const struct sfsro_inode *like, struct cfs_id *ret) CFS_WUR;

/* logsink.c: from now on, everything written to stderr (this program's
 * log lines and libfuse's) goes to syslog, with the priority its level
 * names. For a mount in the background, whose stderr is /dev/null. */
void fs__log_to_syslog(const char *ident);

#endif
