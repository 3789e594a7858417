/* dhash/ internals: the block store (on blockstore/), the server, the client. */
#ifndef CFS_DHASH_INTERNAL_H
#define CFS_DHASH_INTERNAL_H

#include "blockstore/blockstore.h"
#include "dhash/dhash.h"

typedef struct dhash_store dhash_store_t;

/* Timeout of a STORE: a peer's synchronous write, not only the path. */
#define DHASH_STORE_TIMEOUT_MS 3000

/* One stored block. data is malloc'd by dhash_store_get. */
struct dhash_rec {
	uint8_t kind;
	uint64_t lease_until;     /* wall-clock seconds */
	uint64_t seq;             /* a root's sequence number */
	uint8_t owner[16];        /* the IP (v4-mapped) its space is charged to; 0: nobody */
	uint8_t *data;
	size_t len;
};

/* -EBUSY if another process has the store open, -EPROTO for another
 * format. compact_live_pct: the compactor rewrites a pack whose live share
 * is below it (0: the engine's default). */
int dhash_store_open(const char *dir, uint32_t compact_live_pct, dhash_store_t **ret);
void dhash_store_close(dhash_store_t *s);
/* 0 with a copy in *ret, -ENOENT, or -EIO. */
int dhash_store_get(dhash_store_t *s, const struct cfs_id *key, struct dhash_rec *ret);
/* Bytes of stored blocks charged to owner (an IP, 16 bytes v4-mapped). */
uint64_t dhash_store_usage(const dhash_store_t *s, const uint8_t owner[16]);
bool dhash_store_has(dhash_store_t *s, const struct cfs_id *key);
/* Durable (synchronous) write; never shortens a stored lease. -ENOSPC when
 * the disk is full, -EIO on other store errors. */
int dhash_store_put(dhash_store_t *s, const struct cfs_id *key, const struct dhash_rec *rec);
/* Many puts in one synchronous batch (group commit): status[i] per record;
 * returns the batch's write error, if any (then every written record has it). */
int dhash_store_put_many(dhash_store_t *s, const struct cfs_id *keys, const struct dhash_rec *recs,
                         size_t n, int *status);
/* The same for n keys in one synchronous write (a REFRESH): found[i] tells
 * whether key i is stored; an error is the store's (then nothing moved). */
int dhash_store_extend_many(dhash_store_t *s, const struct cfs_id *keys, uint32_t n,
                            uint64_t lease_until, bool *found);
/* The same, and each key extended is charged to owner (16 bytes; NULL: the
 * charge stays) if owner's usage stays within quota (0: no bound); a key
 * that does not fit is not extended and not found; *ret_over (may be NULL)
 * counts them. */
int dhash_store_extend_charged(dhash_store_t *s, const struct cfs_id *keys, uint32_t n,
                               uint64_t lease_until, const uint8_t *owner, uint64_t quota,
                               bool *found, uint32_t *ret_over);
/* Extend key's lease to lease_until (never shortening): -ENOENT if absent. */
int dhash_store_extend(dhash_store_t *s, const struct cfs_id *key, uint64_t lease_until);
/* Blocks whose lease ends at or before until (counting stops at max). */
uint64_t dhash_store_expiring(dhash_store_t *s, uint64_t until, uint64_t max);
/* Delete up to max blocks whose lease ended at or before now. */
int dhash_store_expire(dhash_store_t *s, uint64_t now, uint32_t max, uint32_t *ret_n);
/* Up to max stored keys in (from, to] on the circle, in key order from. */
int dhash_store_scan(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                     struct cfs_id *keys, uint32_t max, uint32_t *ret_n);
/* The same, with each record's kind and sequence number in kinds and seqs
 * (either may be NULL; 0 for a record too short to say). */
int dhash_store_scan_info(dhash_store_t *s, const struct cfs_id *from, const struct cfs_id *to,
                          struct cfs_id *keys, uint8_t *kinds, uint64_t *seqs, uint32_t max,
                          uint32_t *ret_n);
/* Delete key's record whatever its state (a copy that no longer verifies,
 * or one too damaged to read): 0, -ENOENT, or a store error. */
int dhash_store_drop(dhash_store_t *s, const struct cfs_id *key);
/* Are writes refused since one failed (until the database reopens, tried
 * before each write once the disk has room)? *ret_recoveries counts the
 * reopens that made the store writable again. */
bool dhash_store_failed(dhash_store_t *s, uint64_t *ret_recoveries);
/* Up to max stored keys in key order, from the first or after `after`;
 * *ret_more tells whether more follow. */
/* dhash_store_list with each key's metadata (metas: max entries). */
uint32_t dhash_store_list_meta(dhash_store_t *s, const struct cfs_id *after, struct cfs_id *keys,
                               struct bstore_meta *metas, uint32_t max, bool *ret_more);
uint32_t dhash_store_list(dhash_store_t *s, const struct cfs_id *after, struct cfs_id *keys,
                          uint32_t max, bool *ret_more);
void dhash_store_totals(dhash_store_t *s, uint64_t *blocks, uint64_t *bytes);
/* The engine's figures: live and dead bytes, compaction's progress. */
void dhash_store_stats(dhash_store_t *s, struct bstore_stats *ret);
/* Up to budget bytes of compaction work; true while more remains. */
bool dhash_store_compact(dhash_store_t *s, uint64_t budget);

/* The servers that hold copies besides vnode vi's process: the first k-1
 * distinct addresses on its successor list, other than its own. */
int dhash_replica_targets(chord_t *c, uint32_t vi, uint32_t k, const struct cfs_node **ret);

/* The client's pieces other files of dhash/ use (locate.c); hold keeps
 * dhash_client_free from releasing it until the matching release. */
chord_t *dhash__client_chord(const dhash_client_t *d);
uint32_t dhash__client_replicas(const dhash_client_t *d);
uint32_t dhash__client_mode(const dhash_client_t *d);
/* chord_call, or chord_call_low for a background client. */
int dhash__client_call(dhash_client_t *d, const struct cfs_node *to, struct cfs_msg *m,
                       uint32_t timeout_ms, cfs_reply_cb cb, void *arg);
uint64_t dhash__client_lease(const dhash_client_t *d);
bool dhash__client_closing(const dhash_client_t *d);
void dhash__client_hold(dhash_client_t *d);
/* The nonce a server at a challenged us with (CFS 5.4), into out (zeros
 * when none); keep one for a's address. */
void dhash__client_nonce(dhash_client_t *d, const struct cfs_addr *a, uint8_t out[CFS_NONCE_BYTES]);
void dhash__client_keep_nonce(dhash_client_t *d, const struct cfs_addr *a, const uint8_t *nonce);
void dhash__client_release(dhash_client_t *d);
/* The client's counters, for the drivers outside client.c to add to. */
struct dhash_client_stats *dhash__client_stats_mut(dhash_client_t *d);

/* ---- the server's state (server.c, sync.c) */

struct sync_job {
	struct cfs_node peer;
	struct cfs_id lo, hi;
	struct cfs_id name;       /* the virtual server the requests name (hi, but in a drain) */
	bool drain;               /* dhash_server_drain's: pushes only */
};

struct dhash_sync_stats {
	uint64_t rounds, sessions, digests, listings, listed_keys;
	uint64_t pushed, pushed_bytes, push_failed;
	uint64_t fetched, fetched_bytes, fetch_failed, fetch_bad;
	uint64_t served_digests, served_listings;
	/* Replication debt: copies found missing on a replica server (to
	 * push) or here (to fetch), in the round at work and the last whole one. */
	uint64_t debt_round, debt_last;
	/* roots held on both sides whose sequence numbers were compared, and
	 * the newer ones taken from a peer or sent to it */
	uint64_t roots_checked, roots_fetched, roots_pushed;
	/* keys a peer holds that are denied here: neither fetched nor counted
	 * as debt (deny.c); copies a peer refused as denied there, and those
	 * not pushed to it again for that */
	uint64_t denied_skipped, push_denied, push_denied_skipped;
	/* fragments (kind FRAG) held here or sent by a peer: each holder's
	 * is its own, so maintenance neither pushes nor takes them */
	uint64_t frag_skipped;
};

/* The scrub (scrub.c): every stored block reread and verified, at a bounded
 * rate, and the copies that fail dropped wherever a read finds them. */
struct dhash_scrub {
	uv_timer_t timer;
	uint64_t rate;            /* bytes a second */
	uint64_t last_ms;         /* loop time of the last slice */
	int64_t credit;           /* bytes that may be read now (negative: a debt) */
	uint64_t pass_start_ms, next_pass_ms, last_pass_ms;
	struct cfs_id at;         /* the last key checked this pass ... */
	bool started;             /* ... when this pass has checked one */
	bool in_pass;
	struct cfs_id batch[32];  /* keys listed ahead of the cursor */
	uint32_t nbatch, ibatch;
	bool batch_last;          /* the listing reached the last key */
	uint64_t passes, pass_blocks, pass_bytes, blocks, bytes;
	/* copies that failed to verify, by the read that found them, and
	 * those dropped from the store */
	uint64_t bad_scrub, bad_push, bad_fetch, dropped;
};

/* A content-hash STORE checked and waiting for the group commit. */
struct dhash__pending {
	struct cfs_reply_to from;
	struct cfs_id key;
	struct dhash_rec rec;     /* rec.data is ours */
	uint32_t flags;
};

/* A ring of fewer distinct addresses than k keeps every block on each of
 * them: said once in the log when it is so, and when it is no longer. */
uint32_t dhash__note_ring_size(dhash_server_t *s);

struct dhash_server {
	uv_loop_t *loop;
	chord_t *chord;
	dhash_store_t *store;
	struct dhash_config cfg;
	uv_timer_t expire_timer;
	uint32_t ring_servers_said; /* the ring size last logged as below k, 0 none */
	/* our wall clock against the peers' (dhash__clock_ok) */
	int64_t skew_ms;
	uint32_t skew_peers;
	bool clock_off;           /* beyond max_skew_s: lease expiry suspended */
	uint64_t expiry_skipped;  /* collector rounds skipped for it */
	uv_check_t commit;        /* after each poll: write what arrived, then answer */
	struct dhash__pending *q;
	size_t nq;
	struct cfs_msg reply;     /* large: not on the stack */
	struct cfs_msg push;
	uint64_t stores, stores_dup, refused[9], fetches, fetch_misses, haves, refreshes;
	uint64_t pushed, push_failed, expired, store_errors, commits;
	uint64_t frag_kept;       /* STOREs of a fragment held already: the first kept */
	/* copies of others' blocks (CFS 5.2), never counted as replicas */
	dhash_cache_t *cache;
	uint64_t cache_stores, cache_hits, path_hits;
	/* replica maintenance (sync.c) */
	uv_timer_t sync_timer;
	struct sync_session *sessions;
	struct sync_job *sync_jobs; /* this round's sessions, started in turn */
	size_t sync_n, sync_next, sync_cap;
	struct dhash_sync_stats sync;
	/* dhash_server_drain: waiting for a round to end, then its sessions */
	dhash_drain_cb drain_cb;
	void *drain_arg;
	bool drain_waiting, draining;
	uint32_t drain_servers, drain_jobs;
	uint64_t drain_failed0;   /* sync.push_failed when the drain began */
	uint64_t drain_taken;     /* pushes the servers took */
	uint64_t drain_dropped;   /* pushes queued by sessions cut short, never sent */
	uint32_t drain_cut;       /* sessions cut short */
	struct cfs_htab sync_refused; /* (key, peer ID) -> loop ms until which it is not pushed */
	bool sync_refused_init;
	struct dhash_scrub scrub;
	int closing_handles;      /* dhash_server_free: close callbacks still due */
	/* quotas (quota.c) */
	uint8_t quota_secret[32];
	uint64_t challenges;
	/* store admission: replica copies admitted, and refused
	 * from non-members and from members far from the key; REFRESH keys
	 * not extended because the refresher's quota was full */
	uint64_t admit_ok, admit_stranger, admit_far, refresh_over_quota;
	/* park.c: replica copies waiting for their sender's authentication */
	uv_timer_t park_timer;
	struct dhash__parked *parked;
	uint32_t nparked;
	size_t parked_bytes;
	uint64_t admit_parked;    /* copies that waited */
	/* deny.c: the keys the operator refuses (cfsd hands them in) */
	struct cfs_htab deny;
	bool deny_init;
	uint64_t deny_dropped;    /* copies deleted when their keys were denied */
	uint64_t fetch_denied;    /* FETCHes of denied keys, answered -ENOENT */
	/* the compactor of the replica store, a slice per tick */
	uv_timer_t compact_timer;
	uint64_t compact_idle_until; /* nothing to do: look again then (monotonic ms) */
};

uint64_t dhash__wall_now(void);

/* park.c: a replica's copy from a member whose authentication is under
 * way waits for the answer (at most DHASH_PARK_MS, bounded in count and
 * bytes) instead of being refused: the first copy a primary pushes to a
 * replica that has not met it yet is then kept, not left to sync. */
void dhash__park_init(dhash_server_t *s);
/* Answer what waits with -EPERM and close the timer (one closing handle). */
void dhash__park_close(dhash_server_t *s, uv_close_cb cb);
/* true: req waits; false: no room, or its sender is not being checked. */
bool dhash__park(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from);
/* server.c: a STORE, from the top (park.c calls it again once the
 * sender's authentication is in). */
void dhash__handle_store(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from);
/* The lease granted for a request of `asked` (0: the default), capped at
 * now + cfg.max_lease_s. */
uint64_t dhash__grant_lease(const dhash_server_t *s, uint64_t asked, const struct cfs_addr *from);
bool dhash__clock_ok(dhash_server_t *s);
uint64_t dhash__lease_from(const dhash_server_t *s, const struct cfs_addr *from, uint64_t lease);

/* Name vnode vi as m's sender (has_from): a replica's copy is admitted by it. */
void dhash__msg_from(const dhash_server_t *s, uint32_t vi, struct cfs_msg *m);
/* May req, a STORE without DHASH_STORE_F_PRIMARY, be stored here? 0, or
 * -EPERM (counted) unless it comes from an authenticated member that is
 * plausibly placing a copy of its own key (chord_plausible_holder). */
int dhash__admit_replica(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from);

/* deny.c: is this block a version of a denied volume (kind VERSION, its
 * volume's root key denied)? Other kinds: false. */
bool dhash__deny_covers(const dhash_server_t *s, uint32_t kind, const uint8_t *p, size_t len);
/* deny.c: release the set (dhash_server_free). */
void dhash__deny_free(dhash_server_t *s);

/* ---- quotas (quota.c) */
void dhash__quota_init(dhash_server_t *s);
/* The 16-byte owner (v4-mapped IP) a sender's stores are charged to. */
void dhash__quota_owner(const struct cfs_addr *a, uint8_t out[16]);
/* Does nonce prove that the sender receives at from? */
bool dhash__quota_confirmed(dhash_server_t *s, const struct cfs_addr *from, const uint8_t *nonce);
/* Room for a cached copy of len bytes within the capacity (older cached
 * copies go first); false when the replicas alone leave none. */
bool dhash__quota_cache_room(dhash_server_t *s, size_t len);
/* Answer a STORE or REFRESH (type) with a challenge: nothing done, send
 * again with this nonce. */
void dhash__quota_challenge(dhash_server_t *s, const struct cfs_reply_to *from, enum cfs_msg_type type);
/* May rec (new to the batch, after batch_bytes of new blocks of which
 * batch_owner_bytes are its owner's) be stored? 0, -ENOSPC (capacity) or
 * -EDQUOT (its owner's quota). */
int dhash__quota_admit(dhash_server_t *s, const struct cfs_id *key, const struct dhash_rec *rec,
                uint64_t batch_bytes, uint64_t batch_owner_bytes);

/* ---- replica maintenance (sync.c) */
void dhash__sync_start(dhash_server_t *s);
/* Cancel the sessions in flight (their callbacks free them later). */
void dhash__sync_stop(dhash_server_t *s);
/* Run one round now: every local range against each replica server. */
void dhash__sync_round(dhash_server_t *s);
/* SYNC_DIGEST and SYNC_KEYS requests. */
void dhash__sync_handle_digest(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from);
void dhash__sync_handle_keys(dhash_server_t *s, const struct cfs_msg *req, const struct cfs_reply_to *from);
/* The range a virtual server hands on in a drain: the keys in
 * (*ret_lo, selves[vi]], from the nearest of this process's other joined
 * virtual servers before it (n of them, joined[i] telling which have
 * joined); the whole circle (*ret_lo == selves[vi]) when no other has. */
void dhash__drain_held(const struct cfs_id *selves, const bool *joined, uint32_t n, uint32_t vi,
                       struct cfs_id *ret_lo);
/* One server a drain hands keys to: those in (lo, the drained virtual
 * server] (lo equal to it: the whole circle). */
struct dhash__drain_target {
	struct cfs_node peer;
	struct cfs_id lo;
};
/* A drain's plan for virtual server self, whose held range starts at
 * held_lo (dhash__drain_held), given the nodes known before it (preds,
 * nearest first: chord_vnode_preds) and its successor list: each of its
 * first k successors at other addresses, with the part of the range it
 * holds once self is gone (drain.c says how). Returns how many (<= k). */
uint32_t dhash__drain_plan(const struct cfs_node *self, const struct cfs_id *held_lo,
                           const struct cfs_node *preds, uint32_t npreds,
                           const struct cfs_node *const *succs, uint32_t nsuccs, uint32_t k,
                           struct dhash__drain_target *ret);
/* sync.c: start the round's (or the drain's) next sessions, up to
 * SESSIONS at once; when none is left in a drain, dhash__drain_next. */
void dhash__sync_next_session(dhash_server_t *s);
/* drain.c: no session and no job left: start the drain's sessions, or
 * report it; report it to its caller, once (-ECANCELED: the server
 * closes). */
void dhash__drain_next(dhash_server_t *s);
void dhash__drain_end(dhash_server_t *s, int status);
/* Release what sync keeps past dhash__sync_stop (the close of the server). */
void dhash__sync_free(dhash_server_t *s);
void dhash__sync_status(dhash_server_t *s, struct cfs_sbuf *b, bool json);

/* ---- the scrub and every read that serves a copy to others (scrub.c) */
enum scrub_reader { SCRUB_BY_SCRUB, SCRUB_BY_PUSH, SCRUB_BY_FETCH };
/* Read key's stored block and verify it (dhash_verify): 0 with the record
 * in *ret (data malloc'd), -ENOENT when absent or when the copy did not
 * verify (it is then logged, counted under by and dropped, so that replica
 * maintenance fetches a good copy from a peer), or a store error. */
int dhash__scrub_read(dhash_server_t *s, const struct cfs_id *key, struct dhash_rec *ret,
               enum scrub_reader by);
void dhash__scrub_start(dhash_server_t *s);
void dhash__scrub_stop(dhash_server_t *s);
/* Do one slice of the scrub now (the timer's work; tests call it). */
void dhash__scrub_slice(dhash_server_t *s);
/* The scrub's progress; JSON as ,"scrub":{...} (after another member). */
void dhash__scrub_status(dhash_server_t *s, struct cfs_sbuf *b, bool json);

#endif
