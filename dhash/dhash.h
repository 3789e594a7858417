/*
 * dhash — the block store on the ring (CFS section 5, DHash++ 4–5).
 *
 * Contract:
 *  - Whole blocks of three kinds, and fragments (kind FRAG, below). A
 *    content-hash block is stored under the BLAKE2b hash of its bytes; a signed root under H(tag ‖ public key), and only
 *    when its signature verifies and its sequence number is not below the
 *    stored one's (an identical duplicate is accepted). Servers check every
 *    block before storing it; clients check every block they fetch.
 *  - A server keeps its blocks in one LevelDB database in its data
 *    directory and acknowledges a store only after a synchronous write.
 *  - A put goes to the key's successor, which stores it and then pushes
 *    copies to the next k-1 distinct servers on its successor list.
 *  - A get looks the key up (k successors), fetches from the replica with
 *    the lowest predicted latency, on a timeout or a bad block tries the
 *    next, and returns only bytes that verify. The get is the one layer
 *    that tries a block read again (the replicas in turn, a hedge, one
 *    more lookup: get_sm.c): the transport below never sends a call that
 *    failed again, and client/ above passes a failed get on as it is.
 *  - Every block carries a lease (wall-clock expiry); refresh extends it,
 *    a collector deletes expired blocks. There is no delete call on the
 *    ring; a server's operator may deny keys on that server alone
 *    (dhash_server_deny).
 *
 * Depends on chord/, sfsro-format/ (to check roots) and common/. Everything
 * runs on the caller's libuv loop; callbacks never run inside the call
 * that started them.
 */
#ifndef CFS_DHASH_H
#define CFS_DHASH_H

#include "chord/chord.h"

/* CHASH: keyed by its hash. ROOT: a volume's newest signed root, replaced
 * by higher sequences. VERSION: one signed root kept under its version key
 * (sfsro_root_version_key), never replaced. FRAG: one fragment of an
 * erasure-coded block under the block's coded key (docs/FORMAT.md, "Coded
 * blocks"): each of the key's n holders keeps a different one, so a
 * server keeps the first it is sent (a later STORE of the key is answered
 * ok and changes nothing), never pushes it as a replica, and replica
 * maintenance neither sends nor fetches it. */
enum dhash_kind {
	DHASH_KIND_CHASH = 1,
	DHASH_KIND_ROOT = 2,
	DHASH_KIND_VERSION = 3,
	DHASH_KIND_FRAG = 4,
};

/* STORE flags. */
#define DHASH_STORE_F_PRIMARY 0x1u /* from a client: replicate after storing */
#define DHASH_STORE_F_CACHE 0x2u   /* a copy for the server's cache, not a replica */
/* STORE reply flags. */
#define DHASH_STORE_R_CHALLENGE 0x1u /* nothing stored: send again with the reply's nonce */
/* Where a get pushes a copy of the block it fetched (CFS 5.2 caching). */
enum dhash_cache_push {
	DHASH_PUSH_PATH = 0,      /* every server on the lookup path (the default) */
	DHASH_PUSH_LAST,          /* only the last hop before the key's successors */
	DHASH_PUSH_NONE,
};

#define DHASH_REPLICAS_DEFAULT 6
#define DHASH_CAPACITY_DEFAULT (10ull << 30) /* 10 GiB; the quota is a tenth */
#define DHASH_LEASE_DEFAULT_S (30u * 24 * 3600)
#define DHASH_MAX_LEASE_DEFAULT_S (90u * 24 * 3600)
#define DHASH_MAX_SKEW_DEFAULT_S 600
#define DHASH_SCRUB_DEFAULT_MS (7ull * 24 * 3600 * 1000) /* a full pass a week */

struct dhash_config {
	uint32_t replicas;        /* k (default 6; the successor list must be >= k) */
	uint64_t lease_s;         /* lease of a put that names none (default 30 days) */
	uint64_t max_lease_s;     /* the longest lease this server grants, whatever a
	                           * STORE or REFRESH asks (default 90 days) */
	uint32_t expire_ms;       /* lease collector period (default 60 s) */
	uint32_t max_skew_s;      /* our clock may differ from the median of the peers'
	                           * by this much before lease expiry is suspended
	                           * (default DHASH_MAX_SKEW_DEFAULT_S) */
	uint32_t sync_ms;         /* replica maintenance period (default 20 s; 0: never) */
	uint64_t scrub_ms;        /* a scrub pass rereads and verifies every stored block
	                           * within this (default 7 days; 0: no scrub) ... */
	uint64_t scrub_bytes_per_s; /* ... at this rate (0: the capacity, or the store
	                           * when larger, over scrub_ms) */
	uint32_t lookup_mode;     /* CHORD_MODE(...) for gets and puts (default iterative) */
	uint32_t hedge_ms;        /* a get's second FETCH, to the next replica, when the
	                           * first has not answered after this long (0: never;
	                           * DHASH_HEDGE_AUTO, the default: dhash_hedge_auto_ms
	                           * of the server asked, within DHASH_HEDGE_SHARE) */
	uint64_t capacity_bytes;  /* what STOREs may fill the store to (0: no bound) */
	uint64_t quota_bytes;     /* per client IP, of blocks it put here (0: none);
	                           * a client's STOREs need the nonce (CFS 5.4) */
	const char *cache_dir;    /* the server's cache of others' blocks (NULL: none) */
	uint64_t cache_bytes;     /* its bound (default 64 MiB) */
	uint32_t cache_push;      /* enum dhash_cache_push, for gets */
	uint64_t cache_push_bytes_per_s; /* upload bound on those copies, which go in
	                           * the background class (0: no bound) */
	uint64_t compact_bytes_per_s; /* the compactor's I/O bound, read and written
	                           * (default 8 MB/s; 0: no compaction) */
	uint32_t compact_live_pct; /* it rewrites a pack whose live share is below
	                           * this (default 50) */
	bool background;          /* a client's: its FETCHes, STOREs and HAVEs go in the
	                           * background class (chord_call_low), yielding to
	                           * reads and publishes under LEDBAT and the upload
	                           * cap: a repairer's client */
	bool corrupt_fetches;     /* tests only: serve every block with a byte flipped */
	bool ring_order;          /* tests only: a get asks the successors in ring order,
	                           * not by predicted latency */
};
void dhash_config_default(struct dhash_config *c);

/* Hedged gets by default (OpenDHT 3.2; the delay after DHash++ 5.2.2's
 * retransmit timer): a FETCH unanswered after twice the round trip to its
 * server (measured, else predicted) plus 15 ms, at least DHASH_HEDGE_MIN_MS,
 * is joined by one to the next candidate. So that a loaded or lossy path
 * cannot double the traffic, these hedges are at most DHASH_HEDGE_SHARE of
 * the FETCHes sent (a burst of DHASH_HEDGE_BURST); a fixed hedge_ms has no
 * such bound. */
#define DHASH_HEDGE_AUTO UINT32_MAX
#define DHASH_HEDGE_MIN_MS 30
#define DHASH_HEDGE_MAX_MS 2000
#define DHASH_HEDGE_UNKNOWN_MS 500 /* no round trip known or predicted */
#define DHASH_HEDGE_SHARE 0.05
#define DHASH_HEDGE_BURST 10.0
uint32_t dhash_hedge_auto_ms(uint64_t rtt_us);

/* ---- blocks */

/* The key a block is stored under: the hash of its bytes, or the root key
 * of the public key a signed root names. -EBADMSG / -EKEYREJECTED if p is
 * not a block of that kind, -EINVAL for an unknown kind. */
int dhash_block_key(uint32_t kind, const uint8_t *p, size_t len, struct cfs_id *ret) CFS_WUR;
/* Check that p may be stored under key: -EBADMSG (not the hash of the
 * bytes, or a root under another key), -EKEYREJECTED (a root whose
 * signature does not verify), -EINVAL (unknown kind). *ret_seq gets a
 * root's sequence number (0 for a content-hash block). */
int dhash_verify(uint32_t kind, const struct cfs_id *key, const uint8_t *p, size_t len,
                 uint64_t *ret_seq) CFS_WUR;
/* A short name for a store error, e.g. "wrong hash" for -EBADMSG. */
const char *dhash_strerror(int status);

/* ---- the server (inside cfsd) */

typedef struct dhash_server dhash_server_t;

/* Open (creating) the block store in dir and serve it on c's transport. */
int dhash_server_new(uv_loop_t *loop, chord_t *c, const char *dir,
                     const struct dhash_config *cfg, dhash_server_t **ret) CFS_WUR;
void dhash_server_free(dhash_server_t *s);
/* Handle a STORE / FETCH / HAVE / REFRESH request; false if not ours. */
bool dhash_handle_request(dhash_server_t *s, const struct cfs_msg *req,
                          const struct cfs_reply_to *from);
/* Blocks, bytes, counters, as text or as a JSON object (appended to b). */
void dhash_server_status(dhash_server_t *s, struct cfs_sbuf *b, bool json);
/* Bytes of stored blocks (replicas and pins; the cache has its own bound)
 * and the capacity they may fill (0: no bound). */
void dhash_server_usage(dhash_server_t *s, uint64_t *ret_bytes, uint64_t *ret_capacity);
/* Replication debt: copies found missing (on a replica server, to push,
 * or here, to fetch) in the last whole sync round and in the one at work. */
void dhash_server_debt(dhash_server_t *s, uint64_t *ret_last, uint64_t *ret_round);
/* Block bytes replica maintenance moved since the server started: copies
 * pushed to replica servers and fetched from them. */
void dhash_server_sync_bytes(dhash_server_t *s, uint64_t *ret_pushed, uint64_t *ret_fetched);
/* Before leaving the ring (cfsctl leave --drain): push every block this
 * server holds to the servers that hold its key once this one is gone:
 * for each virtual server, the range from our previous joined virtual
 * server to it, compared with each of its first k successors at another
 * address over the part of the range that successor holds next (so no
 * server is sent a copy it would not hold), Merkle-style like replica
 * maintenance but only pushing what it lacks. Maintenance
 * rounds stop for good (the server is about to leave); a round at work
 * ends first. cb gets what the drain did (struct dhash_drain_result).
 * -EBUSY while a drain runs. */
struct dhash_drain_result {
	int status;               /* 0, or -ECANCELED: the server closed first */
	uint64_t pushed;          /* copies the servers took */
	uint64_t failed;          /* copies not handed over: sends that failed or
	                           * were refused, and those queued by a comparison
	                           * cut short */
	uint32_t servers;         /* servers compared with */
	uint32_t comparisons;     /* (range, server) comparisons, ... */
	uint32_t cut_short;       /* ... and those cut short (their server stopped
	                           * answering): what they had not compared yet was
	                           * not handed over, and is in no count */
};
/* cb is called once, always from the loop (never inside
 * dhash_server_drain), or with -ECANCELED from dhash_server_free. */
typedef void (*dhash_drain_cb)(void *arg, const struct dhash_drain_result *r);
int dhash_server_drain(dhash_server_t *s, dhash_drain_cb cb, void *arg);
/* A page of the stored keys in key order: up to max, from the first or
 * after `after`; *ret_more tells whether more follow. */
uint32_t dhash_server_keys(dhash_server_t *s, const struct cfs_id *after, struct cfs_id *keys,
                           uint32_t max, bool *ret_more);
/* A fragment this server keeps: its key, and its header's code and index. */
struct dhash_frag_ref {
	struct cfs_id key;
	uint8_t m, n, index;
	uint64_t lease_until;     /* its lease here (wall-clock seconds) */
};
/* The fragments (kind FRAG) kept here, in key order after `after` (NULL:
 * from the first): up to max of them, looking at no more than scan
 * records; *ret_last is the last key looked at (where the next call goes
 * on), *ret_more whether records follow it. */
uint32_t dhash_server_frags(dhash_server_t *s, const struct cfs_id *after, uint32_t scan,
                            struct dhash_frag_ref *out, uint32_t max, struct cfs_id *ret_last,
                            bool *ret_more);
/* Run the lease collector now (tests, and the periodic timer). */
void dhash_server_expire(dhash_server_t *s);

/* The operator's denylist, handed in by the daemon (which keeps it on
 * disk). A denied key is refused in every role: a STORE of it (a client's,
 * a replica's push, a cache copy) is answered DHASH_DENIED; a FETCH is
 * answered -ENOENT, as by a server that holds no copy; a lookup hop does
 * not claim it; replica maintenance neither fetches it from a peer nor
 * sends it. A put whose first server answers DHASH_DENIED goes on to the
 * next, since the refusal is that server's own. */
#define DHASH_DENIED (-EKEYREVOKED)
/* Deny n keys, deleting every copy held here (stored or cached); returns
 * how many copies were deleted. */
uint32_t dhash_server_deny(dhash_server_t *s, const struct cfs_id *keys, uint32_t n);
/* Lift the denial of key; its block comes back only by replication. */
void dhash_server_allow(dhash_server_t *s, const struct cfs_id *key);
/* Is key denied here? */
bool dhash_server_is_denied(const dhash_server_t *s, const struct cfs_id *key);
/* How many keys are denied. */
uint64_t dhash_server_denied_count(const dhash_server_t *s);

/* ---- the client (over a chord_t, a ring member's or a plain client's) */

typedef struct dhash_client dhash_client_t;

struct dhash_get_result {
	int status;               /* 0, -ENOENT (no replica has it), -EHOSTUNREACH, ... */
	uint32_t kind;
	const uint8_t *data;      /* valid during the callback */
	size_t len;
	uint32_t rpcs;            /* lookup and fetch RPCs */
	uint32_t timeouts;
	uint32_t bad_replies;     /* replicas that sent bytes that do not verify */
	uint64_t latency_us;
	uint64_t lookup_us;       /* of latency_us, the part spent looking the key up */
};
typedef void (*dhash_get_cb)(void *arg, const struct dhash_get_result *r);
/* status 0 once the key's successor acknowledged a durable write; lease is
 * the expiry it granted (servers cap what they grant, dhash_config's
 * max_lease_s). */
typedef void (*dhash_put_cb)(void *arg, int status, const struct cfs_id *key, uint64_t lease);
/* have: found is 1 when the key's successor stores the block. refresh:
 * found counts the replicas whose lease was extended (status 0 when at
 * least one replica answered), lease is the least any of them granted
 * (0 when none had the block). */
typedef void (*dhash_key_cb)(void *arg, int status, const struct cfs_id *key, uint32_t found,
                             uint64_t lease);

struct dhash_client_stats {
	uint64_t gets, gets_failed, puts, puts_failed;
	uint64_t get_rpcs;        /* lookup and fetch RPCs of every get */
	uint64_t bad_replies;     /* fetched bytes that did not verify (server skipped) */
	uint64_t fetch_timeouts;
	uint64_t relookups;       /* gets looked up again after every candidate failed */
	uint64_t puts_moved;      /* puts begun again elsewhere: a second lookup named
	                           * other servers than the primary's copies went to */
	uint64_t hedges;          /* hedged FETCHes sent (hedge_ms) */
	uint64_t hedge_wins;      /* gets answered by a hedged FETCH */
	uint64_t hedges_skipped;  /* automatic hedges not sent: over DHASH_HEDGE_SHARE */
	uint64_t cache_pushes;    /* copies sent to lookup-path caches after gets */
	uint64_t cache_pushes_skipped; /* ... not sent: over cache_push_bytes_per_s */
	uint64_t coded_gets, coded_gets_failed, coded_puts, coded_puts_failed;
	struct cfs_hist get_us;   /* get latency */
};

int dhash_client_new(chord_t *c, const struct dhash_config *cfg, dhash_client_t **ret) CFS_WUR;
const struct dhash_client_stats *dhash_client_stats(const dhash_client_t *d);
/* Cancel what is in flight (callbacks run with -ECANCELED) and free. */
void dhash_client_free(dhash_client_t *d);
int dhash_get(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb cb, void *arg) CFS_WUR;
/* A get of a key known to be a signed root's: the k replicas are asked at
 * once instead of the nearest first (a root answer asks the others
 * anyway), so a client that knows no round trips yet waits for the
 * nearest read quorum, not for a far first guess and then the quorum. */
int dhash_get_root(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb cb, void *arg) CFS_WUR;
/* dhash_get_root, and before its answer early(arg, r), at most once: the
 * first root that verifies under key (any sequence; one server's word,
 * not a read quorum's), so that a caller with its own floor (a mount's
 * recorded sequence) can start with it while the quorum is asked. early
 * runs from the loop and must not free d; cb still runs exactly once. */
int dhash_get_root_early(dhash_client_t *d, const struct cfs_id *key, dhash_get_cb early,
                         dhash_get_cb cb, void *arg) CFS_WUR;
/* lease_until 0: now + the configured lease. */
int dhash_put(dhash_client_t *d, uint32_t kind, const uint8_t *p, size_t len,
              uint64_t lease_until, dhash_put_cb cb, void *arg) CFS_WUR;
/* Does the key's successor store it? (A publisher asks before it sends.) */
int dhash_have(dhash_client_t *d, const struct cfs_id *key, dhash_key_cb cb, void *arg) CFS_WUR;
/* Extend the key's lease on its k replicas to lease_until (0: now + the
 * configured lease). */
int dhash_refresh(dhash_client_t *d, const struct cfs_id *key, uint64_t lease_until,
                  dhash_key_cb cb, void *arg) CFS_WUR;
/* bits[i / 8] >> (i % 8) & 1 answers key i (valid during the call); for
 * a refresh, lease is the least lease granted to any key found (0: none). */
typedef void (*dhash_bits_cb)(void *arg, int status, const uint8_t *bits, uint32_t n,
                              uint64_t lease);
/* dhash_have of n keys (1..CFS_MSG_MAX_KEYS) at once: the one answer to
 * "have these keys", the daemon's (CTL_HAVE) and a plain client's. Status
 * 0 once every key got an answer: bit i set when a majority of key i's
 * servers hold it, clear when they said it is absent. When some key got
 * no answer (nobody reached, its lookup failed, -ECANCELED), the batch
 * fails with the error of the lowest-numbered such key and no bitmap: an
 * unanswered key never reads as absent. lease is 0. */
int dhash_have_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n, dhash_bits_cb cb,
                    void *arg) CFS_WUR;
/* dhash_refresh of n keys at once: each key looked up, then one REFRESH
 * per server naming all the keys it holds replicas of. Bit i: some replica
 * had key i. Fails (-ETIMEDOUT, a lookup's error) when some key reached
 * none of its servers. */
int dhash_refresh_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n,
                       uint64_t lease_until, dhash_bits_cb cb, void *arg) CFS_WUR;

/* ---- erasure-coded blocks (DHash++ 4.4; docs/FORMAT.md "Coded blocks")
 *
 * A block as n fragments, any m of which rebuild it, fragment i stored
 * (kind FRAG) on the i-th of the key's first n successors at distinct IP
 * addresses. No server replicates a fragment and replica maintenance
 * leaves them alone: a lost fragment stays lost (cfs-fsck --replicas
 * names its holder), which the n - m spare fragments absorb. The coded
 * key commits to m and n but does not reveal them: the caller knows them
 * from the volume's signed root. */

/* Is m-of-n a code this build stores (1 <= m < n <= 32, m <= 16)? */
bool dhash_code_valid(uint32_t m, uint32_t n);
/* The coded key p is stored under with an m-of-n code (-EINVAL: no such
 * code, an empty or oversized block). */
int dhash_coded_key(const uint8_t *p, size_t len, uint32_t m, uint32_t n, struct cfs_id *ret) CFS_WUR;
/* Acknowledgements that make a coded put a success: m + ceil((n-m)/2),
 * the data fragments and half the parity (8 of 12 for 4-of-12). */
uint32_t dhash_coded_happy(uint32_t m, uint32_t n);
/* Encode p (sfsro_code_encode) and store fragment i on the key's i-th
 * successor; cb gets the coded key, status 0 once dhash_coded_happy of
 * them acknowledged (lease: the least granted), -EREMOTEIO (or the
 * servers' refusal) when fewer did, -EHOSTUNREACH when the ring names
 * fewer servers than that. -EINVAL: a code outside sfsro_code_valid. */
int dhash_put_coded(dhash_client_t *d, uint32_t m, uint32_t n, const uint8_t *p, size_t len,
                    uint64_t lease_until, dhash_put_cb cb, void *arg) CFS_WUR;
/* Repair a coded block: encode p (which must encode to key: -EBADMSG)
 * and store fragment i on holders[i] for every bit i of mask (i below
 * nholders), the holders a dhash_locate_coded found without theirs (a
 * STORE addressed to that node, as a put's). cb: status 0 once every one
 * acknowledged (lease: the least granted). A holder that keeps a
 * fragment of the key already answers ok and keeps it (kind FRAG). */
int dhash_repair_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                       const uint8_t *p, size_t len, const struct cfs_node *holders,
                       uint32_t nholders, uint32_t mask, uint64_t lease_until, dhash_put_cb cb,
                       void *arg) CFS_WUR;
/* dhash_refresh_many for coded keys (every key m-of-n): one REFRESH per
 * holder naming the keys it is among the first n distinct successors of,
 * so that every fragment's lease is extended, not only the first k. Bit
 * i: at least m holders had key i's fragment (the block can be read).
 * -EINVAL: no such code. */
int dhash_refresh_coded_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n, uint32_t m,
                             uint32_t code_n, uint64_t lease_until, dhash_bits_cb cb,
                             void *arg) CFS_WUR;
/* Fetch the key's block: look up its n holders, FETCH fragments from the
 * m nearest (predicted round trip) and DHASH_CODED_EXTRA more at once,
 * verify each as it comes (a bad one: its server is suspected and the next
 * holder asked), decode from the first m good ones and check the block
 * against the hash the key names. Holders all asked with fewer than m good
 * fragments, the get walks on along the ring (up to DHASH_CODED_WALKS more
 * lookups, just past the last successor seen): a lookup answer can stop
 * short of n, and after joins or failures fragments stand further along. r->kind is
 * DHASH_KIND_CHASH, r->data the block. -EBADMSG also when the fragments
 * decode to another block. */
#define DHASH_CODED_EXTRA 2
#define DHASH_CODED_WALKS 2
int dhash_get_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                    dhash_get_cb cb, void *arg) CFS_WUR;

/* Where are key's copies? Its k responsible servers (the distinct
 * successors), each asked for the block and its answer verified. A copy
 * from a server's cache is not a replica (MISSING), a root below another
 * replica's sequence is STALE. */
enum dhash_copy_state {
	DHASH_COPY_SILENT = -3,   /* no answer */
	DHASH_COPY_STALE = -2,    /* a root older than another replica's */
	DHASH_COPY_BAD = -1,      /* bytes that do not verify */
	DHASH_COPY_MISSING = 0,
	DHASH_COPY_GOOD = 1,
	DHASH_COPY_PRESENT = 2,   /* a probe's: the server says it keeps the key */
};
struct dhash_locate_result {
	int status;               /* 0, or the lookup's failure */
	uint32_t n;               /* servers responsible (up to k) */
	struct cfs_node nodes[CFS_MSG_MAX_NODES];
	int8_t state[CFS_MSG_MAX_NODES]; /* enum dhash_copy_state, per node */
	uint32_t good;
};
typedef void (*dhash_locate_cb)(void *arg, const struct dhash_locate_result *r);
int dhash_locate(dhash_client_t *d, const struct cfs_id *key, dhash_locate_cb cb, void *arg) CFS_WUR;
/* A coded holder's fragment that verifies but carries another index than
 * the holder's position (the membership changed since the put, and
 * fragments moved along): its state is DHASH_COPY_OTHER(index). */
#define DHASH_COPY_OTHER_BASE 32
#define DHASH_COPY_OTHER(index) ((int8_t)(DHASH_COPY_OTHER_BASE + (index)))
/* The index of the good fragment a coded holder at position holds (GOOD:
 * its own, OTHER: the one its state names), or -1. */
int dhash_copy_index(int8_t state, uint32_t position);
/* The distinct fragment indices a coded locate's holders hold good: what
 * r->good counts for a coded block. */
uint32_t dhash_locate_coded_good(const struct dhash_locate_result *r);
#define DHASH_CODED_SPARES 2 /* holders past n a coded locate also asks */
/* A coded block's count, as Carbonite counts: the holders dhash_locate_coded
 * would ask, each sent a HAVE of the key instead of a FETCH, so nothing is
 * read or verified and the fragments' indices are not known. A holder that
 * says it keeps the key is DHASH_COPY_PRESENT; r->good counts them. About
 * a hundred bytes a holder where a locate moves its fragment: enough to
 * skip a repair, never to make one (two holders may keep one index). */
int dhash_probe_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                      dhash_locate_cb cb, void *arg) CFS_WUR;
/* Where a repair of a coded block located as r (n fragments) stores what
 * is missing: each index no holder has, on a holder among the first n
 * that has no fragment of the key (MISSING), in ring order. to[i] is set
 * for every i below n (a real node: the masked ones are the stores); the
 * mask of indices to store is returned (0: none missing, or nobody to
 * store on). */
uint32_t dhash_coded_assign(const struct dhash_locate_result *r, uint32_t n, struct cfs_node *to);
/* The same for a coded block (m-of-n): its n holders (the key's first n
 * successors at distinct IPs) and DHASH_CODED_SPARES more (a fragment
 * pushed outward by joins still counts), holder i asked for what it holds
 * under the key; GOOD when that is a fragment that verifies alone against
 * the key with index i, OTHER(j) when it verifies with index j, BAD when
 * it does not verify, MISSING, SILENT; r->good counts distinct indices.
 * r->n may be below n in a ring of fewer IPs. -EINVAL: no such code. */
int dhash_locate_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                       dhash_locate_cb cb, void *arg) CFS_WUR;

/* ---- a block cache on disk (a server's cached copies, a mount's warm
 * cache): the storage engine in its own directory, bounded in bytes on
 * disk, the oldest out first (blocks used recently are kept); not
 * synchronous. Callers verify what they get back. */

typedef struct dhash_cache dhash_cache_t;

/* Open (creating) the cache in dir. -EBUSY when another process has it. */
int dhash_cache_open(const char *dir, uint64_t cap_bytes, dhash_cache_t **ret) CFS_WUR;
void dhash_cache_close(dhash_cache_t *c);
/* 0 with a malloc'd copy in *data, -ENOENT, or -EIO. */
int dhash_cache_get(dhash_cache_t *c, const struct cfs_id *key, uint8_t *kind, uint8_t **data,
                    size_t *len) CFS_WUR;
/* Add a block; the oldest make room. -EFBIG above the bound. A block
 * cached already (same key and length: content-hash keys name their bytes)
 * is not written again, only made young when it has aged. */
int dhash_cache_put(dhash_cache_t *c, const struct cfs_id *key, uint8_t kind, const uint8_t *p,
                    size_t len);
/* Evict the oldest blocks until at most bytes are cached (the bound
 * stays: this makes room now, e.g. for a server's replicas). */
void dhash_cache_trim(dhash_cache_t *c, uint64_t bytes);
/* Forget a block (one that no longer verifies): 0 or -ENOENT, -EIO. */
int dhash_cache_del(dhash_cache_t *c, const struct cfs_id *key);
/* Is the block there? (No recency change.) */
bool dhash_cache_has(dhash_cache_t *c, const struct cfs_id *key);
void dhash_cache_totals(const dhash_cache_t *c, uint64_t *blocks, uint64_t *bytes,
                        uint64_t *evicted);
/* Bytes of its packs on disk (the bound holds these), and of those dead. */
void dhash_cache_disk(const dhash_cache_t *c, uint64_t *disk, uint64_t *dead);

#endif
