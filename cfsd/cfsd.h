/*
 * cfsd — the volunteer's server daemon, and the local control protocol
 * that tools (cfsctl, cfs-mount, cfs-cat, cfs-publish) use to reach it.
 *
 * A daemon keeps its state in one data directory: a lock file that makes a
 * second daemon on the same directory refuse to start, the block store
 * (blocks/, LevelDB) and the UNIX control socket (cfsd.sock, mode 0600). Requests on the socket are framed
 * messages of common/cfs.h (CFS_MSG_CTL_*), answered one reply per request.
 *
 * What the daemon serves today: the Chord ring (chord/: every ring message
 * over UDP), the block store (dhash/: STORE, FETCH, HAVE, REFRESH in
 * DATA/blocks), CTL_STATUS (with the ring tables and store counters),
 * CTL_LOOKUP, CTL_GET, CTL_PUT, CTL_HAVE, CTL_REFRESH, CTL_KEYS, and pins
 * (CTL_PIN, CTL_UNPIN, CTL_PINS: cfsd/pin.h, DATA/pins, DATA/pinned). See
 * docs/OPERATIONS.md.
 */
#ifndef CFS_CFSD_H
#define CFS_CFSD_H

#include <stddef.h>

#include "common/cfs.h"

#define CFSD_DEFAULT_PORT 4460
#define CFSD_SOCKET_NAME "cfsd.sock"
#define CFSD_LOCK_NAME "cfsd.lock"

/* The default data directory: $CFS_DATA_DIR, else /var/lib/cfs for root,
 * else $XDG_DATA_HOME/cfs or ~/.local/share/cfs. -ENAMETOOLONG if it does
 * not fit in n bytes. */
int cfsd_default_data_dir(char *buf, size_t n);
/* DIR/cfsd.sock. */
int cfsd_socket_path(const char *data_dir, char *buf, size_t n);

/* Called with the daemon's reply (status 0, reply set) or a failure (a
 * negative errno, reply NULL). The reply lives only during the call. */
typedef void (*cfsd_ctl_reply_fn)(void *arg, int status, const struct cfs_msg *reply);
/* Send req over the control socket at path and wait (at most timeout_ms)
 * for the reply, running a private event loop. Returns the status given to
 * fn: -ECONNREFUSED / -ENOENT when no daemon listens, -ETIMEDOUT. */
int cfsd_ctl_call(const char *path, const struct cfs_msg *req, unsigned timeout_ms,
                  cfsd_ctl_reply_fn fn, void *arg);

/* Send n requests over one control connection, at most window unanswered:
 * build(arg, i, m) fills request i (its ID is set after), reply(arg, i, m)
 * gets its reply. Returns 0 once every reply came, else the connection's
 * failure (-ENOENT / -ECONNREFUSED: no daemon; -EPROTO: a bad reply). */
typedef void (*cfsd_pipe_build_fn)(void *arg, size_t i, struct cfs_msg *m);
typedef void (*cfsd_pipe_reply_fn)(void *arg, size_t i, const struct cfs_msg *reply);
int cfsd_ctl_pipeline(const char *sock, size_t n, unsigned window, cfsd_pipe_build_fn build,
                      cfsd_pipe_reply_fn reply, void *arg);
/* A message naming the daemon at sock when r says it is not there. */
void cfsd_ctl_report(const char *sock, const char *what, int r);

/* cfsctl lookup (cfsd/lookup_cmd.c): look up the keys in args ('-' reads
 * stdin) and random_n random keys through the daemon at sock, printing one
 * line per key. Returns the exit code: 0, 1 (no daemon / failure), 2 (bad
 * key), 3 (some lookups failed). */
int cfsctl_lookup(const char *sock, uint32_t mode, uint32_t nsucc, uint32_t flags,
                  char **args, int nargs, unsigned random_n);
/* Read KEY arguments ('-': one per line from stdin) and n random keys into
 * a malloc'd array. -EINVAL (reported) for a bad key. */
int cfsctl_read_keys(char **args, int nargs, unsigned random_n, struct cfs_id **ret, size_t *ret_n);

/* cfsctl put / get (cfsd/block_cmd.c); same exit codes as lookup. */
struct cfsctl_put_opts {
	bool root;                /* the files are signed roots */
	uint64_t lease_until;     /* 0: the daemon's default */
	unsigned random_n;        /* also put this many random blocks ... */
	size_t random_size;       /* ... of this many bytes */
	uint64_t seed;            /* for the random blocks (0: random) */
};
int cfsctl_put(const char *sock, const struct cfsctl_put_opts *o, char **files, int nfiles);
/* One key and no --check: its bytes to stdout (or out). Else one line per
 * key: KEY ok LENGTH | KEY error MESSAGE. */
int cfsctl_get(const char *sock, bool check, const char *out, char **args, int nargs);
/* Extend the lease of each key's replicas to lease_until: "KEY ok" or
 * "KEY missing" (no replica had it) per key; exit 3 if any was missing. */
int cfsctl_refresh(const char *sock, uint64_t lease_until, char **args, int nargs);

#endif
