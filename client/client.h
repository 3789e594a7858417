/*
 * client — how a program reaches the ring: one API for get, put, have,
 * refresh and locate, with two backends chosen in one place
 * (client_target_open):
 *
 *  - the local daemon: the requests go as control messages
 *    (CFS_MSG_CTL_*) over cfsd's UNIX socket and the daemon's own DHash
 *    client does the work (client/daemon.c);
 *  - a plain ring client, no daemon: its own UDP transport, a chord client
 *    (not a ring member) and a DHash client over it (client/plain.c).
 *
 * Which one a program uses follows one rule (client_target_resolve):
 * the command line, a daemon at the default socket, $CFS_BOOTSTRAP, the
 * client configuration file.
 *
 * Contract:
 *  - Every request gets exactly one callback, on the loop, never inside
 *    the call that started it; one that has none within the handle's
 *    timeout fails with -ETIMEDOUT, and client_free cancels the rest
 *    (-ECANCELED).
 *  - Both backends answer alike: a get returns only bytes that verify
 *    under the key; a have of n keys is dhash_have_many's answer, a
 *    refresh dhash_refresh_many's.
 *  - This layer does not retry. A request is one call to the backend
 *    with one deadline: the DHash get machine (dhash/get_sm.c) is the
 *    layer that tries a block read again, through the daemon or here. A
 *    lost daemon connection fails what was pending on it; the next
 *    request connects again.
 *
 * Depends on dhash/, chord/ and common/. Used by the programs: cfs-mount
 * and cfs-cat (cfs-fuse/), cfs-publish and cfs-fsck (publisher/), cfsctl
 * (cfsd/ctl.c: client_call, the control protocol's one client).
 */
#ifndef CFS_CLIENT_H
#define CFS_CLIENT_H

#include "dhash/dhash.h"

/* The daemon's control socket is DATA/cfsd.sock, whoever runs it: the one
 * name every tool uses. The system daemon's data directory (the service's,
 * and root's default) is CLIENT_SYSTEM_DIR; its socket is shared with the
 * members of the group cfs (cfsd --socket-group). */
#define CLIENT_SOCKET_NAME "cfsd.sock"
#define CLIENT_SYSTEM_DIR "/var/lib/cfs"
#define CLIENT_TIMEOUT_MS 30000

/* ---- where the ring is (target.c) */

/* The daemon's default data directory: $CFS_DATA_DIR (or its short form
 * $CFS_DATA), else /var/lib/cfs
 * for root, else $XDG_DATA_HOME/cfs or ~/.local/share/cfs. */
int client_default_data_dir(char *buf, size_t n) CFS_WUR;
/* The socket a client tool talks to when told none: $CFS_DATA_DIR's (or
 * $CFS_DATA's) when
 * set; else the user's own daemon's (the default data directory's) when
 * it answers; else the system daemon's (CLIENT_SYSTEM_DIR) when it answers
 * or refuses this user (so the error can say why); else the user's own.
 * -ENAMETOOLONG if it does not fit. */
int client_default_socket(char *buf, size_t n) CFS_WUR;
/* Log that this user may not use the daemon socket at sock, naming the
 * group that may (the one owning its directory) and how to join it.
 * Returns -EACCES. */
int client_socket_denied(const char *sock);

#define CLIENT_BOOT_MAX 16
struct client_target {
	char sock[4096];          /* the local cfsd's control socket ... */
	struct cfs_addr boot[CLIENT_BOOT_MAX]; /* ... or, when nboot > 0, a plain
	                           * ring client's bootstrap addresses */
	size_t nboot;
	uint64_t cache_push_bytes_per_s; /* a plain client's upload bound on cache
	                           * pushes (dhash_config; 0: none) */
};
/* Add the addresses in list (separated by commas or blanks); from names
 * the source in the error logged (-EINVAL). */
int client_target_add(struct client_target *t, const char *list, const char *from) CFS_WUR;
/* Fill in what the command line left open (sock empty, nboot 0): the
 * default daemon socket when a cfsd answers there, else $CFS_BOOTSTRAP,
 * else the client configuration file's `bootstrap ADDR` lines
 * ($XDG_CONFIG_HOME/cfs/client.conf, /etc/cfs/client.conf), else the
 * default socket. Errors are logged. */
int client_target_resolve(struct client_target *t) CFS_WUR;
/* "cfsd at SOCKET" or "the ring through ADDR", for messages. */
const char *client_target_name(const struct client_target *t, char *buf, size_t n);

/* ---- the handle (client.c) */

typedef struct client client_t;

/* A client of what t names: a plain ring client through t->boot when
 * nboot > 0, else the daemon at t->sock. A request unanswered after
 * timeout_ms (0: CLIENT_TIMEOUT_MS) fails with -ETIMEDOUT. The daemon is
 * connected to on first use and again after the connection ends; when it
 * is not there, requests fail with -ECONNREFUSED (client_call's with the
 * socket's errno: -ENOENT, -ECONNREFUSED, -EACCES). */
int client_target_open(uv_loop_t *loop, const struct client_target *t, uint32_t timeout_ms,
                       client_t **ret) CFS_WUR;
/* client_target_open of the daemon at sock. */
int client_new(uv_loop_t *loop, const char *sock, uint32_t timeout_ms, client_t **ret) CFS_WUR;
/* Cancel what is pending (callbacks run with -ECANCELED) and free; a plain
 * client keeps its ring contacts first (client_keep_contacts). Accepts
 * NULL. */
void client_free(client_t *c);
/* Is it a plain ring client? */
bool client_is_plain(const client_t *c);
/* Requests started and not yet answered. */
uint32_t client_pending(const client_t *c);

/* As dhash_get: only bytes that verify under key are returned. */
int client_get(client_t *c, const struct cfs_id *key, dhash_get_cb cb, void *arg) CFS_WUR;
/* As client_get, for a volume's root key: a plain client runs
 * dhash_get_root; through cfsd, whose round trips are known, a get. */
int client_get_root(client_t *c, const struct cfs_id *key, dhash_get_cb cb, void *arg) CFS_WUR;
/* As client_get_root, and early(arg, r) at most once before cb: the
 * first root that verifies under key, one server's word
 * (dhash_get_root_early). A plain client runs it itself; through cfsd it
 * is a ctl_get_root whose interim reply is the daemon's early root (asked
 * for once the connection's ping says the daemon speaks it; an older
 * daemon gets a ctl_get and answers once, at its read quorum: early never
 * runs). */
int client_get_root_early(client_t *c, const struct cfs_id *key, dhash_get_cb early,
                          dhash_get_cb cb, void *arg) CFS_WUR;
int client_put(client_t *c, uint32_t kind, const uint8_t *p, size_t len, uint64_t lease_until,
               dhash_put_cb cb, void *arg) CFS_WUR;
/* dhash_get_coded and dhash_put_coded (m of n fragments, the volume's
 * code). Through the daemon, a coded get's block is checked by cfsd (it
 * decodes and checks the block against the key's H(block)): a coded key
 * cannot be checked from the block alone. A put's key is computed here
 * and the daemon's answer must name it. */
int client_get_coded(client_t *c, const struct cfs_id *key, uint32_t m, uint32_t n, dhash_get_cb cb,
                     void *arg) CFS_WUR;
int client_put_coded(client_t *c, uint32_t m, uint32_t n, const uint8_t *p, size_t len,
                     uint64_t lease_until, dhash_put_cb cb, void *arg) CFS_WUR;
/* Which of keys (1..CFS_MSG_MAX_KEYS) their servers store: dhash_have_many. */
int client_have(client_t *c, const struct cfs_id *keys, uint32_t n, dhash_bits_cb cb,
                void *arg) CFS_WUR;
/* Extend keys' leases on their replicas (dhash_refresh_many); bit i: some
 * replica had key i. */
int client_refresh(client_t *c, const struct cfs_id *keys, uint32_t n, uint64_t lease_until,
                   dhash_bits_cb cb, void *arg) CFS_WUR;
/* The same for coded keys, m-of-n each (dhash_refresh_coded_many): every
 * holder's fragment renewed; bit i: m holders had key i. A daemon that
 * predates it drops the connection (-ECONNRESET). */
int client_refresh_coded(client_t *c, const struct cfs_id *keys, uint32_t n, uint32_t m,
                         uint32_t code_n, uint64_t lease_until, dhash_bits_cb cb,
                         void *arg) CFS_WUR;
/* dhash_locate through the daemon (or the plain client's own). */
int client_locate(client_t *c, const struct cfs_id *key, dhash_locate_cb cb, void *arg) CFS_WUR;
/* dhash_repair_coded the same way (cfs-fsck --replicas --repair). A
 * daemon that predates it drops the connection. */
int client_repair_coded(client_t *c, const struct cfs_id *key, uint32_t m, uint32_t n,
                        const uint8_t *p, size_t len, const struct cfs_node *holders,
                        uint32_t nholders, uint32_t mask, uint64_t lease_until, dhash_put_cb cb,
                        void *arg) CFS_WUR;
/* dhash_locate_coded the same way. A daemon that predates it answers
 * -EOPNOTSUPP. */
int client_locate_coded(client_t *c, const struct cfs_id *key, uint32_t m, uint32_t n,
                        dhash_locate_cb cb, void *arg) CFS_WUR;

/* Any control request (CFS_MSG_CTL_*, e.g. a status or a lookup), for
 * cfsctl. cb gets the daemon's reply (status: the reply's own, reply set),
 * or reply NULL and why none came: -ENOENT / -ECONNREFUSED (no daemon),
 * -ETIMEDOUT, -EPROTO (a malformed reply), -ECONNRESET, -ECANCELED. req is
 * encoded (and its borrowed bytes copied) before the call returns; its
 * reqid is set here. -EOPNOTSUPP on a plain client. */
typedef void (*client_ctl_cb)(void *arg, int status, const struct cfs_msg *reply);
int client_call(client_t *c, const struct cfs_msg *req, client_ctl_cb cb, void *arg) CFS_WUR;

/* ---- a plain client's own (plain.c) */

/* Its DHash client's counters (NULL through a daemon). */
const struct dhash_client_stats *client_dhash_stats(const client_t *c);
/* Its gets that skipped their lookup (chord_lookups_remembered); 0
 * through a daemon. */
uint64_t client_lookups_remembered(const client_t *c);
/* This machine's wall clock minus the median of the ring servers' heard
 * lately (a plain client hears their clocks; through cfsd: -ENODATA). */
int client_clock_skew(client_t *c, int64_t *ret_skew_ms, uint32_t *ret_servers);
/* Write the ring members it met where its next run reads them
 * ($XDG_CACHE_HOME/cfs; client_free does it too). Nothing through a
 * daemon. */
void client_keep_contacts(client_t *c);

#endif
