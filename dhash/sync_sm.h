/*
 * One sync session (replica maintenance, sync.c) as a state machine that
 * does no I/O, and the rules it applies: sync_sm.c decides what to
 * compare, list, push and fetch; sync.c carries it out. The machine takes events (a digest reply with
 * its 64 part digests, a listing page, a transfer's end, a call that
 * could not be made, and the local store's answers, given as data) and
 * queues actions. Transfers wait in a queue of their own, taken by the
 * driver as its window allows.
 */
#ifndef CFS_DHASH_SYNC_SM_H
#define CFS_DHASH_SYNC_SM_H

#include "dhash/internal.h"

#define DHASH_SYNC_PART_BITS 6
#define DHASH_SYNC_PARTS (1u << DHASH_SYNC_PART_BITS)
#define DHASH_SYNC_LEAF_KEYS 64   /* a differing part with at most this many keys here is listed */
#define DHASH_SYNC_DEPTH_MAX 3
#define DHASH_SYNC_PAGE_KEYS 1024
#define DHASH_SYNC_BACKLOG 4096   /* transfers queued before comparing stops for a while */

struct dhash__sync_range {
	struct cfs_id lo, hi;     /* (lo, hi] */
	uint32_t depth;
	bool differs;             /* a part whose digests differ: compare its roots */
};

enum dhash__sync_act_type {
	DHASH_SYNC_SCAN,          /* count our keys in range (up to LEAF_KEYS + 1): on_scan */
	DHASH_SYNC_DIGEST,        /* SYNC_DIGEST for range: on_digest, or on_unsent */
	DHASH_SYNC_KEYS,          /* SYNC_KEYS for (key, range.hi]: on_keys, or on_unsent */
	DHASH_SYNC_LOCAL,         /* our keys in range with their kinds: on_local */
	DHASH_SYNC_PUSH,          /* transfers (take_xfer): STORE key at the peer, */
	DHASH_SYNC_FETCH,         /* FETCH key from it, */
	DHASH_SYNC_FETCH_ROOT,    /* FETCH a root both hold, to compare sequences (on_root) */
	DHASH_SYNC_FINISH,        /* the session is over: counts */
};

/* What a session did, for its log line and a drain's report. */
struct dhash__sync_counts {
	uint32_t digests, parts_differ, listings, listed, pushed, fetched;
	uint32_t dropped;         /* a drain's pushes queued and never sent (cut short) */
	bool cut_short;           /* some of the range went uncompared */
};

struct dhash__sync_act {
	enum dhash__sync_act_type type;
	struct dhash__sync_range range; /* SCAN, DIGEST, KEYS, LOCAL */
	struct cfs_id key;        /* KEYS: listed after it; transfers: the key */
	struct dhash__sync_counts counts; /* FINISH */
};

enum dhash__sync_state {
	DHASH_SYNC_IDLE,          /* no comparison under way: the next range, or done */
	DHASH_SYNC_SCANNING,      /* SCAN asked */
	DHASH_SYNC_DIGESTING,     /* SYNC_DIGEST in flight */
	DHASH_SYNC_LISTING,       /* SYNC_KEYS in flight */
	DHASH_SYNC_DIFFING,       /* LOCAL asked */
	DHASH_SYNC_DONE,
};

/* What the driver knows beside the store: the keys the operator denies
 * here (deny.c; NULL: none) and the peers' refusals (NULL: none). */
struct dhash__sync_view {
	const struct cfs_htab *deny;
	const struct cfs_htab *refused; /* dhash__sync_refuse's */
	uint64_t now_ms;
};

struct dhash__sync_sm {
	enum dhash__sync_state state;
	struct cfs_id peer;       /* its ID: refusals are per peer */
	bool drain;               /* a drain's: push what the peer lacks, fetch nothing */
	struct dhash__sync_range *ranges; /* ranges still to compare (a stack) */
	size_t nranges, cranges;
	struct dhash__sync_range cur; /* the range being compared */
	struct cfs_id *remote;    /* the peer's keys of cur listed so far */
	size_t nremote, cremote;
	struct cfs_actq q;        /* struct dhash__sync_act */
	struct cfs_actq xq;       /* transfers waiting for the driver's window */
	uint32_t xout;            /* transfers taken and not yet ended */
	struct dhash__sync_counts n;
	struct dhash_sync_stats *st; /* the server's counters, added to */
};

/* Start comparing (lo, hi] with peer; st is borrowed for the machine's life. */
void dhash__sync_sm_init(struct dhash__sync_sm *m, const struct cfs_id *peer, const struct cfs_id *lo,
                         const struct cfs_id *hi, bool drain, struct dhash_sync_stats *st);
void dhash__sync_sm_fini(struct dhash__sync_sm *m);
/* The next action other than a transfer. */
bool dhash__sync_sm_next(struct dhash__sync_sm *m, struct dhash__sync_act *ret);
/* The next transfer, when the driver has room for one; each one taken
 * ends with dhash__sync_sm_on_xfer. */
bool dhash__sync_sm_take_xfer(struct dhash__sync_sm *m, struct dhash__sync_act *ret);

/* Our keys in SCAN's range: n (at most LEAF_KEYS + 1 counted) and whether
 * a root is among them; status < 0 when the store could not be read. */
void dhash__sync_sm_on_scan(struct dhash__sync_sm *m, int status, uint32_t n, bool roots);
/* DIGEST's reply: status, the peer's digests (n of them), and ours of the
 * same range (dhash__sync_part_end's parts; may be NULL unless status is
 * 0 and n is DHASH_SYNC_PARTS). */
void dhash__sync_sm_on_digest(struct dhash__sync_sm *m, int status, const struct cfs_id *theirs,
                              uint32_t n, const struct cfs_id *mine);
/* A KEYS page: status, its keys, and whether more follow. */
void dhash__sync_sm_on_keys(struct dhash__sync_sm *m, int status, const struct cfs_id *keys,
                            uint32_t n, bool more);
/* The DIGEST or KEYS just asked for could not be sent. */
void dhash__sync_sm_on_unsent(struct dhash__sync_sm *m);
/* LOCAL's answer: our keys of the range (any order) with their kinds. */
void dhash__sync_sm_on_local(struct dhash__sync_sm *m, const struct cfs_id *keys, const uint8_t *kinds,
                             size_t n, const struct dhash__sync_view *v);
/* A fetched key we hold too (checked by the driver): 1 when the peer's
 * copy is the newer root and is to replace ours; -1 when ours is the
 * newer root, then queued for a push; 0 otherwise. */
int dhash__sync_sm_on_root(struct dhash__sync_sm *m, const struct cfs_id *key, uint8_t mine_kind,
                            uint64_t mine_seq, uint8_t their_kind, uint64_t their_seq);
/* A transfer taken ended: sent or not (gone here, expired, or the call
 * could not be made), and the call's status when sent. */
void dhash__sync_sm_on_xfer(struct dhash__sync_sm *m, enum dhash__sync_act_type op, bool sent, int status);

/* The end of part i of r in DHASH_SYNC_PARTS parts. */
void dhash__sync_part_end(const struct dhash__sync_range *r, uint32_t i, struct cfs_id *ret);
/* Is r, where we hold n keys (counted up to LEAF_KEYS + 1), roots among
 * them or not, split by digest (true) or listed (false)? */
bool dhash__sync_splits(const struct dhash__sync_range *r, uint32_t n, bool roots);
/* A key both hold: 1 when the peer's is the newer root (take it), -1 when
 * ours is (send it), 0 otherwise. */
int dhash__sync_root_cmp(uint8_t mine_kind, uint64_t mine_seq, uint8_t their_kind, uint64_t their_seq);

/* A peer's refusals of our pushes as denied there: a table of (key, peer)
 * pairs, made empty by dhash__sync_refused_init. Note one at now_ms; the first wait is first_ms, doubling after
 * each refusal up to a day, bounded in count. */
void dhash__sync_refused_init(struct cfs_htab *t);
void dhash__sync_refuse(struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                        uint64_t now_ms, uint64_t first_ms);
/* Is key not to be pushed to peer at now_ms? t may be NULL. */
bool dhash__sync_is_refused(const struct cfs_htab *t, const struct cfs_id *key, const struct cfs_id *peer,
                            uint64_t now_ms);

#endif
