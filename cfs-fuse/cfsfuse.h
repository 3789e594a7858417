/*
 * cfs-fuse — cfs-mount: a read-only FUSE file system (libfuse3 low-level
 * API) for one volume, driven from the same libuv loop as the DHash
 * client. Every block is verified against the signed root before a byte
 * of it is returned; long kernel cache timeouts, keep_cache, an adaptive
 * prefetch window, and atomic switches to newer roots.
 *
 * Contract:
 *  - One loop, one thread: FUSE requests are read from /dev/fuse when the
 *    loop says it is readable and answered from block-fetch callbacks. The
 *    only other thread sends kernel cache invalidations (which may block on
 *    kernel locks held by requests this thread has yet to answer).
 *  - Blocks come from the local cfsd or, without one, a plain ring client
 *    (client_*, client_target_open), or from a dir: store on the local
 *    disk (from_dir: no ring at all); each is checked against its key (the
 *    hash chain from the signed root) before use.
 *  - A block no replica can give after the bounded retries makes that one
 *    operation fail with EIO (logged with key and path); nothing hangs.
 *    The DHash get tries the replicas; the block cache asks a failed
 *    fetch again `retries` times, after a pause (blocks.c says why);
 *    nothing between them retries.
 *  - The highest root sequence seen for a volume is kept on disk; an older
 *    or expired root is refused, at mount and on every later check.
 *    The last root accepted is kept beside it: with a disk cache, a mount
 *    starts from it (checked again by the same rules) without waiting for
 *    the ring, serves from its caches while the ring cannot be reached,
 *    and checks for a newer root at once in the background.
 *
 * The only module that includes fuse_lowlevel.h. Depends on client/ (and
 * dhash/ under it) and sfsro-format/.
 */
#ifndef CFS_CFSFUSE_H
#define CFS_CFSFUSE_H

#include "client/client.h"
#include "sfsro-format/sfsro.h"

struct cfsfuse_options {
	const struct client_target *target; /* the local cfsd, or a plain ring client's bootstrap */
	const char *state_dir;    /* highest root sequence seen and last root, per volume */
	size_t cache_bytes;       /* in-memory block cache (default 64 MiB) */
	const char *disk_cache;   /* a block cache on disk, one per volume under it (NULL: none) */
	uint64_t disk_cache_bytes;/* its bound (default 1 GiB) */
	uint32_t fetch_timeout_ms;/* one fetch through cfsd (default 10 s) */
	uint32_t retries;         /* further tries of a failed fetch (default 2) */
	uint32_t max_fetches;     /* block fetches outstanding at cfsd at once (default 24) */
	uint32_t prefetch_init;   /* prefetch window at the start, in blocks (default 4) */
	uint32_t prefetch_max;    /* its cap (default 64; 0 turns prefetch off) */
	uint32_t update_s;        /* check for a newer root every this many s (default 60; 0: never) */
	bool foreground;
	bool debug;               /* libfuse's request log */
	const char *from_dir;     /* read the dir: store at this path, not the ring
	                           * (target unused; no disk cache) */
	bool allow_expired;       /* read a root past its valid-until (a warning says so) */
	uint64_t version;         /* 0: the newest, followed; else this version (VOLUME@SEQ), fixed */
};
/* "allow" or "refuse" (the default) for --expired: 1, 0, or -1. */
int cfsfuse_expired_arg(const char *val);
/* The options the readers without FUSE share (cfs-cat, cfs-get,
 * cfs-gateway): their getopt values, and a program's own start at
 * CFSFUSE_O_NEXT. */
enum { CFSFUSE_O_CFSD = 256, CFSFUSE_O_BOOTSTRAP, CFSFUSE_O_FROM, CFSFUSE_O_EXPIRED, CFSFUSE_O_NEXT };
/* Take opt (with its argument) when it is one of those or -d/--data:
 * true; false for any other. A bad value exits 2 with usage. */
bool cfsfuse_reader_opt(int opt, const char *arg, const char *usage, struct client_target *tgt,
                        struct cfsfuse_options *o);
void cfsfuse_options_default(struct cfsfuse_options *o);

struct cfsfuse_stats {
	uint64_t hits, misses;    /* block cache */
	uint64_t fetches, fetch_failures, retries, prefetches;
	uint64_t dir_prefetches;  /* blocks fetched ahead for listed directories */
	uint64_t bytes_fetched;
	uint64_t cached_bytes, cached_blocks;
	uint64_t disk_hits, disk_bytes, disk_blocks;
	uint64_t reads, read_bytes, eio;
	uint64_t nodes, root_seq, root_switches;
	uint64_t fetch_limit;     /* the bound on fetches in flight now */
};

/* Mount vol at mountpoint (printed on stdout once mounted) and serve it until it is unmounted (fusermount3
 * -u, umount) or the process gets SIGTERM / SIGINT. fuse_argv holds extra
 * FUSE options ("-o", "allow_other", ...). Returns the exit code: 0 after
 * a clean unmount, 1 when the volume could not be mounted. */
int cfsfuse_run(const struct cfs_pubkey *vol, const char *mountpoint,
                const struct cfsfuse_options *o, int fuse_argc, char **fuse_argv);

#endif
