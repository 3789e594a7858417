/*
 * cfsd — the volunteer's server daemon, and the local control protocol
 * that tools (cfsctl, cfs-mount, cfs-cat, cfs-publish) use to reach it.
 *
 * A daemon keeps its state in one data directory: a lock file that makes a
 * second daemon on the same directory refuse to start, the block store
 * (blocks/, LevelDB) and the UNIX control socket (CLIENT_SOCKET_NAME, mode 0600, or
 * 0660 for a --socket-group). Requests on the socket are framed
 * messages of common/cfs.h (CFS_MSG_CTL_*), answered one reply per request.
 *
 * What the daemon serves today: the Chord ring (chord/: every ring message
 * over UDP), the block store (dhash/: STORE, FETCH, HAVE, REFRESH in
 * DATA/blocks), CTL_STATUS (with the ring tables and store counters),
 * CTL_LOOKUP, CTL_GET, CTL_PUT, CTL_HAVE, CTL_REFRESH, CTL_KEYS, pins
 * (CTL_PIN, CTL_UNPIN, CTL_PINS: cfsd/pin.h, DATA/pins, DATA/pinned) and
 * the operator's denylist (CTL_DENY: cfsd/deny.h, DATA/denylist). See
 * docs/OPERATIONS.md.
 */
#ifndef CFS_CFSD_H
#define CFS_CFSD_H

#include <stddef.h>
#include <stdint.h>

#include "common/cfs.h"

#define CFSD_DEFAULT_PORT 4460
#define CFSD_LOCK_NAME "cfsd.lock"

/* The default data directory: $CFS_DATA_DIR, else /var/lib/cfs for root,
 * else $XDG_DATA_HOME/cfs or ~/.local/share/cfs. -ENAMETOOLONG if it does
 * not fit in n bytes. */
/* peers.c: the peers remembered across restarts, DATA/peers. Load: the
 * count remembered (0 on a first start); save: the count written, or a
 * negative errno (logged). */
struct chord;
int cfsd_peers_load(struct chord *c, const char *data_dir);
int cfsd_peers_save(struct chord *c, const char *data_dir);

/* portmap.c: map UDP port on the default gateway (NAT-PMP, then
 * UPnP-IGD) to the same external port for lifetime_s, waiting at most
 * wait_ms per protocol; the public IP in ret_pub, the protocol in
 * *ret_how. 0, -ENETUNREACH (no gateway), or another negative errno. */
int cfsd_portmap(uint16_t port, uint32_t lifetime_s, uint32_t wait_ms, char *ret_pub, size_t publen,
                 const char **ret_how);

int cfsd_default_data_dir(char *buf, size_t n);
/* DIR/cfsd.sock (CLIENT_SOCKET_NAME: the one name every tool uses). */
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

#endif
