/*
 * The DHash client's operations as state machines that do no I/O.
 *
 * Each multi-step operation (a get, a put, a have or refresh, a
 * refresh of many keys, a locate) is a struct with its state in an enum
 * and event functions: a lookup's result arrived, a reply (or a timeout)
 * from candidate i, a send could not even start, the hedge timer fired.
 * An event never sends anything: it queues actions (look the key up,
 * FETCH from candidate i, STORE to it, arm the hedge timer, push a copy to
 * a cache, finish with this status) that the driver (client.c, refresh.c,
 * locate.c) takes off with dhash__*_next() and carries out in order. Unit
 * tests feed events and read the actions, with no socket and no loop.
 *
 * A send the driver could not start (chord_call failed at once) is
 * reported back at once, before the next action is taken, with the
 * matching *_on_send_failed(): the machine then counts that send as never
 * made, exactly as if it had not asked for it. Every machine counts the
 * sends it asked for as in flight until a reply or a send failure comes
 * back for each, also after it finished; the driver frees the operation
 * once *_idle() says it is finished and nothing is out.
 *
 * Bytes in events (reply data, nonces) are borrowed for the call; an
 * action that carries bytes (a FINISH with the block, a CACHE_PUSH) points
 * either into the event being handled or into the machine, and is valid
 * until the driver returns from the callback that fed the event.
 */
#ifndef CFS_DHASH_CLIENT_SM_H
#define CFS_DHASH_CLIENT_SM_H

#include "dhash/internal.h"
#include "sfsro-format/sfsro.h"

#define DHASH_GET_SPARES 4          /* successors asked beyond k, for stale lists */
/* A coded get's holders whose predicted round trips differ by less than
 * this (the same whole millisecond) keep ring order: fragment i is on the
 * i-th holder, so on a LAN the data fragments come first and the block
 * needs no decoding (coded_sm.c). */
#define DHASH_CODED_RTT_TIE_US 1000
#define DHASH_RETRY_TIMEOUT_MS 1000 /* a second try of a silent server */
/* Replicas predicted within 20 % + 5 ms of the nearest are as near: the
 * least busy of them is asked first (get_sm.c, order_candidates), when the
 * nearest is DHASH_NEAR_SPREAD_MIN_US away or more. Nearer, as on a LAN,
 * the nearest answers sooner than a spread saves: on loopback (16
 * daemons, two cores) spreading cut cold 8 KiB reads from 127 to 75 MB/s,
 * and a plain client's from 135 to 99 (docs/INTERNALS.md). */
#define DHASH_NEAR_TIE_PCT 20
#define DHASH_NEAR_TIE_US 5000
#define DHASH_NEAR_SPREAD_MIN_US 5000
#define DHASH_REFRESH_CHUNK 256     /* keys per REFRESH of refresh_many: 8 KiB */
/* A transient timeout must not fail a put or a have. When every
 * responsible server was silent, the round goes again with twice the
 * timeout: STOREs once more (6 s), HAVEs twice (1 s, then 2 s). */
#define DHASH_STORE_RETRIES 1
#define DHASH_HAVE_RETRIES 2

enum dhash__act_type {
	DHASH_ACT_LOOKUP = 1,     /* chord_lookup for nsucc successors with flags; i: the
	                           * key's index (refresh_many), else the op's key */
	DHASH_ACT_FETCH,          /* FETCH the key from cand[i] (hedge: a hedged one) */
	DHASH_ACT_STORE,          /* STORE the block to cand[i], F_PRIMARY, with the
	                           * nonce this client keeps for its address */
	DHASH_ACT_KEEP_NONCE,     /* remember nonce as addr's (CFS 5.4 challenge) */
	DHASH_ACT_HAVE,           /* HAVE of the key to cand[i] */
	DHASH_ACT_REFRESH,        /* REFRESH of the key to cand[i]; refresh_many: call i */
	DHASH_ACT_CACHE_PUSH,     /* STORE F_CACHE of data to path[i] (best effort) */
	DHASH_ACT_ARM_HEDGE,      /* (re)start the one-shot hedge timer for timeout_ms
	                           * (DHASH_HEDGE_AUTO: the driver's choice for cand[i]) */
	DHASH_ACT_STOP_HEDGE,
	DHASH_ACT_FINISH,         /* report status (and the rest below); always last */
	/* (get) cand[i] claimed to hold the block and did not serve one that
	 * verifies: report it to chord as a suspect (chord_suspect) */
	DHASH_ACT_SUSPECT,
};

struct dhash__act {
	enum dhash__act_type type;
	uint32_t i;               /* a candidate, path entry, key or call, by type */
	uint32_t timeout_ms;      /* sends: 0 = the transport's prediction; ARM_HEDGE */
	bool hedge;               /* FETCH: sent because an earlier one was slow */
	uint32_t nsucc, flags;    /* LOOKUP */
	int status;               /* FINISH */
	uint32_t kind;            /* FINISH of a get: the block's kind */
	const uint8_t *data;      /* FINISH (get: the block; refresh_many: bits), CACHE_PUSH */
	size_t len;
	uint32_t found;           /* FINISH of a have / refresh */
	uint64_t lease;           /* FINISH of a put / have / refresh / refresh_many */
	struct cfs_addr addr;     /* KEEP_NONCE */
	uint8_t nonce[CFS_NONCE_BYTES];
};

/* Queue a cleared action of this type on a machine's queue (common's
 * struct cfs_actq: first in, first out; the driver takes them off with
 * cfs_actq_pop through dhash__*_next). */
static inline struct dhash__act *dhash__act_push(struct cfs_actq *q, enum dhash__act_type type)
{
	struct dhash__act *a = cfs_actq_push(q, sizeof(*a));

	a->type = type;
	return a;
}

/* One reply, as the machines read it; status 0 or the reply's error, or
 * -ETIMEDOUT / -ECANCELED (the driver passes -ECANCELED for every reply
 * once the client is closing). Fields other than status only when 0. */
struct dhash__reply {
	int status;
	uint32_t kind;
	uint32_t flags;
	const uint8_t *data;
	size_t len;
	uint64_t lease_until;
	const uint8_t *nonce;     /* CFS_NONCE_BYTES */
	const struct cfs_addr *from;
};

/* An RPC's reply as an event: status, and the reply's fields when 0. */
struct dhash__reply dhash__reply_of(int status, const struct cfs_msg *m,
                                    const struct cfs_rpc_result *res);

/* dhash_verify, or a test's stand-in. */
typedef int (*dhash__verify_fn)(uint32_t kind, const struct cfs_id *key, const uint8_t *p,
                                size_t len, uint64_t *ret_seq);

/* ---- get (get_sm.c) */

enum dhash__get_state {
	DHASH_GET_LOOKUP,         /* the key's successors being looked up */
	DHASH_GET_FETCH,          /* candidates asked in turn (and hedged) */
	DHASH_GET_ROOT,           /* a root came back: every candidate asked, newest kept */
	DHASH_GET_DONE,
};

struct dhash__get {
	enum dhash__get_state state;
	struct cfs_id key;
	uint32_t replicas, hedge_ms, cache_push;
	bool ring_order;
	bool all_first;           /* ask every first try at once (dhash_get_root) */
	dhash__verify_fn verify;
	/* candidates, in the order they are tried; cand[nfirst..] are second
	 * tries of the silent */
	struct cfs_node cand[CFS_MSG_MAX_NODES];
	uint32_t ncand, next_cand, nfirst;
	uint32_t npath;           /* the lookup path (caches to push to) */
	struct cfs_node path[CHORD_PATH_MAX];
	uint32_t inflight;        /* FETCHes out */
	bool relooked;            /* the second lookup, after every candidate failed */
	int miss;                 /* the error if every candidate fails (dhash__get_miss) */
	uint8_t *best;            /* root mode: the newest root so far (malloc'd) */
	size_t best_len;
	uint64_t best_seq;
	/* root mode's read quorum: the IPs of the key's first k successors
	 * (one vote each, as a put counts them), which of them sent a root
	 * that verifies, and how many did; the get may end once nvotes
	 * reaches dhash__root_quorum(nresp) */
	struct cfs_addr resp_ip[CFS_MSG_MAX_NODES];
	bool voted[CFS_MSG_MAX_NODES];
	uint32_t nresp, nvotes;
	/* of those, which said they have no such block, and how many */
	bool absent[CFS_MSG_MAX_NODES];
	uint32_t nabsent;
	/* for the result and the client's counters */
	uint32_t rpcs, timeouts, bad, fetch_timeouts, hedges, hedge_wins, relookups;
	uint64_t lookup_us;
	struct cfs_actq q;
	/* cand[0] is a hop that claimed the block (CFS 5.2): believed only
	 * once served; holder_only: the lookup's other nodes were that hop's
	 * next hops, not checked successors, so they are not tried */
	bool holder, holder_only;
	uint32_t suspects;        /* holders reported */
};

/* Root mode: how many of a key's n responsible servers (distinct IPs) must
 * have sent roots before the newest among them is the volume's newest. A
 * root put is acknowledged by a majority, floor(n/2)+1, so any
 * n - floor(n/2) of them include one that took it; one more, so that the
 * two sets share two servers and one liar among them (an old root, signed
 * and valid) cannot hide the newest; never more than n (4 of 6). No "no
 * such block" answer votes: a server that has not synced the key yet is
 * no evidence. */
uint32_t dhash__root_quorum(uint32_t n);
/* Start a get of key (queues the LOOKUP). */
void dhash__get_init(struct dhash__get *g, const struct cfs_id *key, const struct dhash_config *cfg);
void dhash__get_fini(struct dhash__get *g);
/* A client's FETCHes out per server (busy.c); zeroed to start. */
#define DHASH_BUSY_MAX 64
struct dhash__busy_entry {
	struct cfs_addr addr;
	uint32_t out;  /* 0: a free entry */
};
struct dhash__busy {
	struct dhash__busy_entry e[DHASH_BUSY_MAX];
	uint32_t n;
};
void dhash__busy_add(struct dhash__busy *b, const struct cfs_addr *a);
void dhash__busy_drop(struct dhash__busy *b, const struct cfs_addr *a);
uint32_t dhash__busy_of(struct dhash__busy *b, const struct cfs_addr *a);

/* The lookup ended; rtt_us[i] is the predicted round trip to r->succ[i]. */
void dhash__get_on_lookup(struct dhash__get *g, const struct chord_lookup_result *r,
                          const uint64_t *rtt_us);
/* The same, and busy[i]: this client's fetches out to r->succ[i]; among
 * replicas within DHASH_NEAR_TIE_PCT % + _US of the nearest, the least
 * busy first. */
void dhash__get_on_lookup_busy(struct dhash__get *g, const struct chord_lookup_result *r,
                               const uint64_t *rtt_us, const uint32_t *busy);
/* The second lookup could not be started (chord_lookup failed at once). */
void dhash__get_on_lookup_failed(struct dhash__get *g, int err);
/* The FETCH to cand[ci] (hedge: a hedged one) ended. */
void dhash__get_on_fetch(struct dhash__get *g, uint32_t ci, bool hedge,
                         const struct dhash__reply *rep);
void dhash__get_on_send_failed(struct dhash__get *g, uint32_t ci, bool hedge);
void dhash__get_on_hedge(struct dhash__get *g);
/* Would the hedge timer send a FETCH now (a first try out, a candidate
 * left)? Else it is a stale timer. */
bool dhash__get_can_hedge(const struct dhash__get *g);
bool dhash__get_next(struct dhash__get *g, struct dhash__act *ret);
/* Finished, and no FETCH still out. */
bool dhash__get_idle(const struct dhash__get *g);
/* The error precedence when every candidate failed: the error to keep
 * after one more failure with status, given the one kept so far. */
int dhash__get_miss(int kept, int status);

/* ---- put (put_sm.c) */

/* A put is acknowledged when a majority of the key's responsible servers
 * (the first k distinct ones the lookup named, or all of them on a ring
 * with fewer) confirm they hold the block. */
enum dhash__put_state { DHASH_PUT_LOOKUP, DHASH_PUT_STORE, DHASH_PUT_DONE,
	DHASH_PUT_CONFIRM,        /* the primary took it: HAVE to the others */
	DHASH_PUT_RESTORE,        /* STOREs of our own to those that lack it */
	DHASH_PUT_RELOOK,         /* the key looked up again before those */
};

/* What the put knows of each responsible server. */
enum dhash__put_cand {
	DHASH_PC_NONE = 0,        /* not asked */
	DHASH_PC_STORING,         /* a STORE out */
	DHASH_PC_ASKING,          /* a HAVE out */
	DHASH_PC_HOLDS,           /* acknowledged a STORE, or said yes to HAVE */
	DHASH_PC_LACKS,           /* said no to HAVE */
	DHASH_PC_SILENT,          /* timed out, or could not be sent to */
	DHASH_PC_REFUSED,         /* refused our STORE */
};

/* Confirmations for a majority of n servers: floor(n/2)+1, 0 for none. */
uint32_t dhash__majority(uint32_t n);

struct dhash__put {
	enum dhash__put_state state;
	uint32_t replicas;
	uint64_t lease_until;     /* asked for */
	struct cfs_node cand[CFS_MSG_MAX_NODES];
	uint32_t ncand, next_cand;
	bool challenged;          /* answered a server's nonce challenge once */
	int miss;
	uint32_t rpcs, timeouts;
	struct cfs_actq q;
	/* the quorum: cand[0..ncand) are the responsible servers, distinct */
	bool store_all;           /* a root: STORE to every one at once (HAVE
	                           * cannot tell an old root from the new) */
	uint32_t need;            /* confirmations for a majority */
	uint32_t confirmed, inflight;
	uint8_t cst[CFS_MSG_MAX_NODES];      /* enum dhash__put_cand */
	uint8_t challenged_at[CFS_MSG_MAX_NODES];
	uint64_t granted;         /* the least lease a STORE ack named */
	uint32_t haves, restores; /* HAVEs sent; STOREs of our own after a "no" */
	uint32_t primary;         /* the candidate that acknowledged the first STORE */
	bool suspect;             /* ... and none of the others held the block */
	bool relooked;            /* the key was looked up a second time */
	uint32_t moved;           /* ... and the put started over elsewhere */
	/* Distinct server addresses the caller knows the ring has (its own
	 * view; 0 or 1: unknown): the majority is never of fewer. */
	uint32_t min_servers;
	/* Rounds of STOREs sent again after every server was silent */
	uint32_t store_retries;
};

/* lease_until: the lease asked for; set store_all after it for a root. */
void dhash__put_init(struct dhash__put *p, uint32_t replicas, uint64_t lease_until);
void dhash__put_fini(struct dhash__put *p);
void dhash__put_on_lookup(struct dhash__put *p, const struct chord_lookup_result *r);
/* The STORE to cand[ci] ended. */
void dhash__put_on_store(struct dhash__put *p, uint32_t ci, const struct dhash__reply *rep);
/* The HAVE to cand[ci] ended. */
void dhash__put_on_have(struct dhash__put *p, uint32_t ci, const struct dhash__reply *rep);
/* The STORE or HAVE (type) to cand[ci] could not be sent. */
void dhash__put_on_send_failed(struct dhash__put *p, uint32_t ci, enum dhash__act_type type);
bool dhash__put_next(struct dhash__put *p, struct dhash__act *ret);
/* Finished, and no STORE or HAVE still out. */
bool dhash__put_idle(const struct dhash__put *p);

/* ---- have and refresh of one key (put_sm.c) */

enum dhash__probe_state { DHASH_PROBE_LOOKUP, DHASH_PROBE_ASK, DHASH_PROBE_RETRY, DHASH_PROBE_DONE };

struct dhash__probe {
	enum dhash__probe_state state;
	bool refresh;             /* REFRESH to every replica, else HAVE to one */
	uint32_t replicas;
	uint64_t lease_until;
	struct cfs_node cand[CFS_MSG_MAX_NODES];
	uint32_t ncand, next_cand;
	uint32_t waiting;         /* probes out */
	uint32_t found, answered;
	uint64_t granted;         /* refresh: the least lease granted */
	uint32_t rpcs, timeouts;
	struct cfs_actq q;
	/* refresh: cand[i] answered a nonce challenge once (CFS 5.4) */
	bool challenged[CFS_MSG_MAX_NODES];
	/* have: "present" only when a majority of cand[0..ncand) say yes */
	uint32_t need, nos;
	uint32_t min_servers;     /* as in struct dhash__put */
	uint32_t retries;         /* have: rounds asked again after all were silent */
	uint32_t have_timeouts;   /* have: HAVEs that timed out (not the lookup's) */
};

void dhash__probe_init(struct dhash__probe *pr, bool refresh, uint32_t replicas,
                       uint64_t lease_until);
void dhash__probe_fini(struct dhash__probe *pr);
void dhash__probe_on_lookup(struct dhash__probe *pr, const struct chord_lookup_result *r);
void dhash__probe_on_reply(struct dhash__probe *pr, const struct dhash__reply *rep);
void dhash__probe_on_send_failed(struct dhash__probe *pr);
bool dhash__probe_next(struct dhash__probe *pr, struct dhash__act *ret);
/* Finished, and no HAVE or REFRESH still out. */
bool dhash__probe_idle(const struct dhash__probe *pr);

/* ---- have of many keys (have.c): the one rule for a batch's answer
 * (dhash_have_many states it). Keys end in any order; the answer does
 * not depend on the order. */

struct dhash__haves {
	uint32_t n, left;         /* keys, and keys not ended yet */
	int err;                  /* the error of the lowest-numbered key that got no
	                           * answer (0: every key answered so far) */
	uint32_t err_at;
	uint8_t *bits;            /* (n + 7) / 8 bytes: bit i, key i is present */
};

/* n >= 1 keys, none ended. */
void dhash__haves_init(struct dhash__haves *h, uint32_t n);
void dhash__haves_fini(struct dhash__haves *h);
/* Key i's have ended: status 0 with found (present) or not (absent), or
 * a negative errno (no answer). True once every key has ended. */
bool dhash__haves_on_key(struct dhash__haves *h, uint32_t i, int status, uint32_t found);

/* ---- refresh of many keys (refresh_sm.c) */

enum dhash__rmany_state { DHASH_RMANY_LOOKUP, DHASH_RMANY_REFRESH, DHASH_RMANY_DONE };

struct dhash__rgroup {            /* one server and the keys it renews */
	struct cfs_node node;
	uint32_t *idx, n, cap;
};

struct dhash__rcall {             /* one REFRESH: a chunk of a group's keys */
	uint32_t g, off, cnt;
	bool retried;
	bool challenged;          /* sent again once with the server's nonce (CFS 5.4) */
};

struct dhash__rmany {
	enum dhash__rmany_state state;
	struct cfs_id *keys;
	uint32_t n, replicas;
	uint32_t need;                /* holders that must have a key for its bit (1;
	                               * a coded key's m) */
	uint64_t lease_until;
	struct cfs_fanin lookups, calls; /* out; lookups: their first error */
	struct dhash__rgroup *g;
	uint32_t ng, capg;
	struct dhash__rcall *c;
	uint32_t nc;
	uint8_t *found, *answered;    /* per key: servers that had it, some server answered */
	uint8_t *bits;                /* the answer, at the end */
	uint64_t granted;
	struct cfs_actq q;
};

/* n >= 1 keys (copied). Queues one LOOKUP per key. */
void dhash__rmany_init(struct dhash__rmany *rm, const struct cfs_id *keys, uint32_t n,
                       uint32_t replicas, uint64_t lease_until);
/* A key's bit needs need servers that had it (a coded key: m of its n
 * holders, replicas = n), not one. Before the first event. */
void dhash__rmany_need(struct dhash__rmany *rm, uint32_t need);
void dhash__rmany_fini(struct dhash__rmany *rm);
/* Key i's lookup ended (r), or could not start (r NULL, err). */
void dhash__rmany_on_lookup(struct dhash__rmany *rm, uint32_t i,
                            const struct chord_lookup_result *r, int err);
/* REFRESH call ci ended (rep), or could not start (rep NULL). */
void dhash__rmany_on_reply(struct dhash__rmany *rm, uint32_t ci, const struct dhash__reply *rep);
bool dhash__rmany_next(struct dhash__rmany *rm, struct dhash__act *ret);
/* Call ci's server, and its keys into out (DHASH_REFRESH_CHUNK); the count. */
const struct cfs_node *dhash__rmany_call_node(const struct dhash__rmany *rm, uint32_t ci);
uint32_t dhash__rmany_call_keys(const struct dhash__rmany *rm, uint32_t ci, struct cfs_id *out);

/* ---- coded put and get (coded_sm.c): a block as n fragments (kind FRAG)
 * on the key's first n successors at distinct IPs, fragment i on the i-th */

enum dhash__coded_state { DHASH_CODED_LOOKUP, DHASH_CODED_RUN, DHASH_CODED_DONE };

struct dhash__cput {
	enum dhash__coded_state state;
	uint32_t m, n, happy;
	uint64_t lease_until;     /* asked for */
	struct cfs_node cand[SFSRO_CODE_N_MAX]; /* cand[i] is sent fragment i */
	uint32_t ncand;
	uint8_t cst[SFSRO_CODE_N_MAX];          /* enum dhash__put_cand */
	uint8_t challenged_at[SFSRO_CODE_N_MAX];
	uint32_t acked, inflight, rpcs, timeouts;
	int miss;
	bool reported;            /* FINISH queued; a success still sees its STOREs through */
	uint64_t granted;         /* the least lease an ack named */
	struct cfs_actq q;
};

/* Queues the LOOKUP. happy: acknowledgements that make the put a success
 * (dhash_coded_happy). */
void dhash__cput_init(struct dhash__cput *p, uint32_t m, uint32_t n, uint64_t lease_until);
/* A repair: no LOOKUP; fragment i (for each bit i of mask below nholders)
 * is stored on holders[i], the holder a locate found without it. The put
 * succeeds when every one of them acknowledged. */
void dhash__cput_init_repair(struct dhash__cput *p, uint32_t m, uint32_t n, uint64_t lease_until,
                             const struct cfs_node *holders, uint32_t nholders, uint32_t mask);
void dhash__cput_fini(struct dhash__cput *p);
void dhash__cput_on_lookup(struct dhash__cput *p, const struct chord_lookup_result *r);
/* The STORE of fragment ci to cand[ci] ended (rep), or was never sent (NULL). */
void dhash__cput_on_store(struct dhash__cput *p, uint32_t ci, const struct dhash__reply *rep);
bool dhash__cput_next(struct dhash__cput *p, struct dhash__act *ret);
/* Reported and no STORE out: the driver may free it. */
bool dhash__cput_idle(const struct dhash__cput *p);

struct dhash__cget {
	enum dhash__coded_state state;
	struct cfs_id key;
	uint32_t m, n;
	/* the holders, nearest first; then those each walk found */
	struct cfs_node cand[CFS_MSG_MAX_NODES];
	uint32_t ncand, next_cand;
	uint32_t inflight;
	struct cfs_id walk_key;   /* just past the last successor seen, in ring order */
	uint32_t walks;           /* LOOKUPs after the first */
	bool walking;             /* one of them is out */
	uint8_t *frag[SFSRO_CODE_N_MAX];        /* good fragments by index (malloc'd) */
	size_t flen[SFSRO_CODE_N_MAX];
	uint32_t have;
	uint8_t *block;           /* the decoded block (malloc'd), FINISH points here */
	size_t block_len;
	int miss;                 /* dhash__get_miss's choice */
	uint32_t rpcs, timeouts, bad, dups;
	uint64_t lookup_us;
	struct cfs_actq q;
};

/* Queues the LOOKUP; m and n as the key was made with. A later LOOKUP
 * (a walk) is of walk_key. */
void dhash__cget_init(struct dhash__cget *g, const struct cfs_id *key, uint32_t m, uint32_t n);
void dhash__cget_fini(struct dhash__cget *g);
/* rtt_us[i]: the predicted round trip to r->succ[i] (0: unknown). */
void dhash__cget_on_lookup(struct dhash__cget *g, const struct chord_lookup_result *r,
                           const uint64_t *rtt_us);
/* The FETCH to cand[ci] ended (rep), or was never sent (NULL). */
void dhash__cget_on_fetch(struct dhash__cget *g, uint32_t ci, const struct dhash__reply *rep);
bool dhash__cget_next(struct dhash__cget *g, struct dhash__act *ret);
bool dhash__cget_idle(const struct dhash__cget *g);

/* ---- locate (locate_sm.c) */

enum dhash__locate_state { DHASH_LOCATE_LOOKUP, DHASH_LOCATE_FETCH, DHASH_LOCATE_DONE };

struct dhash__locate {
	enum dhash__locate_state state;
	struct cfs_id key;
	uint32_t replicas;
	uint32_t code_n;          /* a coded block's n (0: a whole block on k servers) */
	bool probe;               /* HAVEs, not FETCHes (dhash_probe_coded) */
	dhash__verify_fn verify;
	struct cfs_fanin fetches; /* out */
	uint64_t seq[CFS_MSG_MAX_NODES]; /* roots: each good copy's sequence */
	struct dhash_locate_result r;    /* FETCH i goes to r.nodes[i] */
	struct cfs_actq q;
};

void dhash__locate_init(struct dhash__locate *lc, const struct cfs_id *key, uint32_t replicas);
/* A coded block's locate: holder i (the key's i-th successor at a
 * distinct IP) is asked for fragment i. */
void dhash__locate_init_coded(struct dhash__locate *lc, const struct cfs_id *key, uint32_t n);
void dhash__locate_fini(struct dhash__locate *lc);
void dhash__locate_on_lookup(struct dhash__locate *lc, const struct chord_lookup_result *r);
/* FETCH i ended (rep), or could not start (rep NULL). */
void dhash__locate_on_fetch(struct dhash__locate *lc, uint32_t i, const struct dhash__reply *rep);
/* A probe's HAVE i ended: status (0, or the call's error) and, when 0,
 * whether the server said it keeps the key. */
void dhash__locate_on_have(struct dhash__locate *lc, uint32_t i, int status, bool found);
bool dhash__locate_next(struct dhash__locate *lc, struct dhash__act *ret);

#endif
