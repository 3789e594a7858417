/*
 * The lookup state machines, without I/O: the originator's lookup
 * (struct chord__lksm) and a recursive lookup's forwarding hop (struct
 * chord__fwdsm). Events go in (a reply to ask #i, a send the transport
 * refused, a LOOKUP_DONE, the recursive deadline); actions come out on the
 * machine's queue (send FIND_NEXT / LOOKUP_FWD / PING / ALERT, drop a
 * finger, arm the deadline, finish). What the machines need of the node —
 * its tables, its block store, its estimates — comes in through struct
 * chord__lk_env, so a unit test fakes the node and scripts the network.
 * lookup.c is the libuv driver that carries the actions out.
 *
 * Ownership: a machine owns its path, asks and queue (freed by
 * chord__lksm_release / chord__fwdsm_release). A popped action's pointers
 * (nodes) point into the machine and live until its next event.
 */
#ifndef CFS_CHORD_LOOKUP_SM_H
#define CFS_CHORD_LOOKUP_SM_H

#include "chord/chord.h"

#define CHORD__LK_NCAND 16        /* next-hop candidates kept per hop */
#define CHORD__LK_MAX_DEPTH 48    /* path length before giving up */
#define CHORD__LK_MAX_FAILED 64   /* failed nodes remembered */
#define CHORD__LK_MAX_RPCS 96     /* FIND_NEXTs before giving up */
#define CHORD__LK_MAX_FWD_HOPS 64 /* a forwarded query this old is hostile */
#define CHORD__LK_FWD_TRIES 3     /* next hops a forwarding hop tries */
#define CHORD__LK_DEADLINE_MS 1500 /* recursive: then fall back to iterative */
/* Castro et al. 2002 §4.1, the routing-failure test: an answer whose
 * successors are spread more than GAMMA times as thinly as the ring-size
 * estimate says (mean gap key → succ[0] → … → succ[n-1] against 1/N̂) is
 * rejected. Their γ of 2-3 assumes a good N̂; ours comes from 16 gaps of
 * one successor list (CFS 6.1), often 1.5-2 × off, and γ = 3 rejected
 * 0.5 % of honest 7-successor answers in simulation, γ = 6 about 1 in
 * 10^5 (tests/unit/test_chord_lookup.c, honest_rings_pass). A short list
 * is given the benefit of DENSITY_MIN_N gaps. */
#define CHORD__LK_GAMMA 6.0
#define CHORD__LK_DENSITY_MIN_N 4

/* The node as the machines see it. ctx is passed back to every call. */
struct chord__lk_ops {
	/* CFS 4.4: is n's ID the hash of its address and index? */
	bool (*node_id_ok)(void *ctx, const struct cfs_node *n);
	/* Is id one of this process's virtual servers? */
	bool (*is_local)(void *ctx, const struct cfs_id *id);
	/* chord__table_step at the local virtual server closest before key (its
	 * node in *ret_self): true with key's successors, false with next
	 * hops (see chord__table_step in internal.h). */
	bool (*local_step)(void *ctx, const struct cfs_id *key, uint32_t nsucc, bool to_pred,
	                   struct cfs_node *out, uint32_t *n_out, uint32_t *n_cand, uint32_t cap,
	                   struct cfs_node *ret_self);
	/* Does this process hold key's block? */
	bool (*has_block)(void *ctx, const struct cfs_id *key);
	/* Next-hop selection inputs: the RTT to a node (measured, else
	 * predicted; 0 unknown), N and d̄ (CFS 4.3). */
	uint64_t (*predict_rtt_us)(void *ctx, const struct cfs_node *to);
	double (*estimate_n)(void *ctx);
	double (*avg_rtt_ms)(void *ctx);
	/* Optional (NULL: none / no cap): is id a suspect (suspect.c), and
	 * the length r of our successor lists. */
	bool (*is_suspect)(void *ctx, const struct cfs_id *id);
	uint32_t (*succ_max)(void *ctx);
};

struct chord__lk_env {
	const struct chord__lk_ops *ops;
	void *ctx;
};

/* Index of the best next hop among cand[0..n) for key seen from cur, by
 * rule sel (enum chord_select); -1 when none makes progress. skip[i] true
 * = excluded (skip may be NULL). */
int chord__lk_select(const struct chord__lk_env *env, uint32_t sel, const struct cfs_id *cur,
                     const struct cfs_id *key, const struct cfs_node *cand, uint32_t n,
                     const bool *skip);

/* ------------------------------------------------------------ actions */

enum chord__lk_act_type {
	CHORD__LKA_FIND,      /* FIND_NEXT(key, nsucc, flags) to `to` (to.addr only: !has_to) */
	CHORD__LKA_FWD,       /* LOOKUP_FWD(key, lookup id, hops 1, nsucc, flags) to `to` */
	CHORD__LKA_PING,      /* PING to `to` (CFS_LOOKUP_F_VERIFY) */
	CHORD__LKA_ALERT,     /* ALERT(id) to `to`; no answer is awaited */
	CHORD__LKA_DROP,      /* `id` failed as a hop: drop it as a finger (or contact) */
	CHORD__LKA_REMOVE,    /* `id` failed as a successor: remove it from every table */
	CHORD__LKA_DEADLINE,  /* (re)arm the recursive deadline, `ms` from now */
	CHORD__LKA_FINISH,    /* the lookup ended with `status`; the result is sm->res */
	/* the forwarding hop's */
	CHORD__LKA_FWD_NEXT,  /* LOOKUP_FWD(the query, `hops`) on to `to` */
	CHORD__LKA_ANSWER,    /* LOOKUP_DONE(`flags`, nodes[0..n), `hops`) to the originator `to` */
	CHORD__LKA_END,       /* the forwarding hop is over: free it */
	/* `id` (`to`, when has_to) answered what the checks reject (`why`):
	 * a suspect; appended here to keep the list above stable */
	CHORD__LKA_SUSPECT,
	/* `id` gave a full answer with too short a successor list: refused
	 * and counted, and a plain client forgets the contact, but no suspect
	 * (a node that joined a moment ago has a short list) */
	CHORD__LKA_REFUSED,
};

struct chord__lk_act {
	enum chord__lk_act_type type;
	uint32_t ask;         /* FIND, FWD, PING, FWD_NEXT: the reply's event carries it back */
	bool has_to;
	struct cfs_node to;
	struct cfs_id id;     /* ALERT, DROP, REMOVE */
	uint32_t nsucc, flags, hops, ms;
	int status;           /* FINISH */
	const struct cfs_node *nodes; /* ANSWER */
	uint32_t n;
	const char *why;      /* SUSPECT: a static string */
};

/* The machines' actions queue in common's struct cfs_actq. */

/* Take the oldest action; false when none is left. */
static inline bool chord__lk_pop(struct cfs_actq *q, struct chord__lk_act *ret)
{
	return cfs_actq_pop(q, ret, sizeof(*ret));
}

/* Queue a cleared action of this type (the machines' side). */
static inline struct chord__lk_act *chord__lk_emit(struct cfs_actq *q, enum chord__lk_act_type type)
{
	struct chord__lk_act *a = cfs_actq_push(q, sizeof(*a));

	a->type = type;
	return a;
}

/* ------------------------------------------------------------ events */

/* A reply (FIND_NEXT, LOOKUP_FWD ack, PING) or a LOOKUP_DONE, decoded. */
struct chord__lk_reply {
	int status;           /* 0, or the RPC's negative errno (the rest is then unset) */
	bool has_from;        /* the sender named itself */
	struct cfs_node from; /* its id, vindex and coord as it says; addr: where it came from */
	uint32_t flags;       /* CFS_LOOKUP_F_DONE, _HAS_BLOCK, _PARTIAL */
	uint32_t count;       /* PARTIAL: nodes[0..count) are candidates */
	uint32_t hops;        /* LOOKUP_DONE: hops the query took */
	const struct cfs_node *nodes;
	uint32_t n;
};

/* ------------------------------------------------------------ the originator */

enum chord__lk_state {
	CHORD__LK_LOCAL,      /* made, not started */
	CHORD__LK_BOOTSTRAP,  /* asked an address whose node we do not know yet */
	CHORD__LK_ITERATING,  /* CFS Fig. 5: asking hops, the path as a stack */
	CHORD__LK_RECURSIVE,  /* DHash++ Fig. 10: forwarded, awaiting LOOKUP_DONE */
	CHORD__LK_VERIFYING,  /* pinging the answer's successors */
	CHORD__LK_DONE,
};

struct chord__lk_hop {
	struct cfs_node n;
	uint32_t ncand;
	struct cfs_node cand[CHORD__LK_NCAND];
	bool tried[CHORD__LK_NCAND];
};

/* One RPC the machine asked for: what it was, the step it was sent at,
 * the node asked and the hop that named it (alerted when it fails). */
struct chord__lk_ask {
	enum chord__lk_act_type type;
	uint32_t step;
	bool has_to, alert;
	struct cfs_node to, via;
	bool before_key;      /* `to` was chosen because it precedes the key */
};

struct chord__lksm {
	enum chord__lk_state state;
	struct chord__lk_env env;
	struct cfs_id key;
	struct chord_lookup_opts o;
	uint64_t id;              /* recursive: names the lookup in FWD and DONE */
	bool client_start;        /* path[0] is a plain client's pseudo-hop */
	bool to_pred;             /* CHORD_MODE_TO_PRED */
	uint32_t par;             /* iterative: requests in flight at most */
	uint32_t step, step_out;  /* changes of the path; asks of this step in flight */
	int depth, path_cap;
	struct chord__lk_hop *path; /* grown as the lookup goes deeper */
	uint32_t nfailed, nasked;
	struct cfs_id failed[CHORD__LK_MAX_FAILED];
	struct cfs_id asked[CHORD__LK_MAX_RPCS]; /* asked once: never again */
	uint32_t verify_idx;
	/* The key's first successors as told by the hop path[part_depth]
	 * that offered predecessors instead (CFS_LOOKUP_F_PARTIAL): the
	 * answer when none of those predecessors answers. */
	int part_depth;
	uint32_t npart;
	struct cfs_node part[CHORD__LK_NCAND];
	struct cfs_node done_from; /* recursive: the hop that answered */
	bool has_done_from;
	struct chord__lk_ask *asks;
	uint32_t nasks, asks_cap;
	struct cfs_actq q;
	struct chord_lookup_result res; /* latency_us is the driver's */
	/* Castro et al. 2002 §4.2, redundant routing, once: after an answer
	 * failed the checks the lookup starts again from our own tables,
	 * avoiding the first hop of the path that led to the liar. */
	bool restarted, has_avoid;
	struct cfs_id avoid;
	struct cfs_id rec_first;  /* recursive: the first hop forwarded to */
};

/* Why an answer naming nodes[0..n) as key's successors is not to be
 * believed, or NULL when it passes (Castro et al. 2002 §4.1 and CFS 4.4):
 * forged IDs, not in ring order after the key, the key not between the
 * answering node `from` and nodes[0] (from_before_key: from was asked
 * because it precedes the key, so it cannot be the key's successor), with
 * full, fewer than half of min(want, r, N̂ - 1), or sparser than the
 * ring-size estimate by more than CHORD__LK_GAMMA. */
const char *chord__lk_check(const struct chord__lk_env *env, const struct cfs_id *key,
                            const struct cfs_node *from, bool from_before_key,
                            const struct cfs_node *nodes, uint32_t n, uint32_t want, bool full);
/* chord__lk_check's answer for a full answer with too few successors: the
 * answer is refused, but its node is no suspect (a node that just joined
 * has a short list). */
extern const char chord__lk_too_few[];
/* Its answer for a node asked because it precedes the key that claims the
 * key: a SUSPECT action, but the driver makes the node a suspect only when
 * it keeps doing so (chord__suspects_strike): an honest node makes the
 * same claim for the moment its new predecessor has not told it yet. */
extern const char chord__lk_claims_preceding[];

/* Set up a lookup of key (nsucc clamped, parallelism from the mode). id
 * names a recursive lookup (random). No action yet. */
void chord__lksm_init(struct chord__lksm *sm, const struct chord__lk_env *env,
                      const struct cfs_id *key, const struct chord_lookup_opts *o, uint64_t id);
/* Free what the machine holds (not sm itself). */
void chord__lksm_release(struct chord__lksm *sm);
/* Start from the local tables: answer, forward (recursive) or iterate. */
void chord__lksm_start(struct chord__lksm *sm);
/* Start by asking an address (joining, a client's bootstrap). */
void chord__lksm_start_addr(struct chord__lksm *sm, const struct cfs_addr *a);
/* Start as a plain client from its known nodes (nearest the key first). */
void chord__lksm_start_client(struct chord__lksm *sm, const struct cfs_node *cand, uint32_t n);
/* The reply (or failure) of ask #ask. */
void chord__lksm_reply(struct chord__lksm *sm, uint32_t ask, const struct chord__lk_reply *r);
/* The transport refused to send ask #ask (r < 0): no reply will come. */
void chord__lksm_send_failed(struct chord__lksm *sm, uint32_t ask, int r);
/* Is this LOOKUP_DONE (lookup id, key) for sm? */
bool chord__lksm_awaits_done(const struct chord__lksm *sm, uint64_t id, const struct cfs_id *key);
/* A LOOKUP_DONE for sm arrived (from.addr: its source address). */
void chord__lksm_done_msg(struct chord__lksm *sm, const struct chord__lk_reply *d);
/* The recursive deadline passed. */
void chord__lksm_deadline(struct chord__lksm *sm);
/* End now with -ECANCELED (no-op when done). */
void chord__lksm_cancel(struct chord__lksm *sm);

/* ------------------------------------------------------------ a forwarding hop */

/* A LOOKUP_FWD as it reached us. */
struct chord__fwd_query {
	struct cfs_id key;
	uint64_t lookup_id;
	struct cfs_node origin;
	uint32_t hops, nsucc, flags;
};

struct chord__fwdsm {
	struct chord__lk_env env;
	struct cfs_node self;     /* the virtual server forwarding */
	struct chord__fwd_query qry;
	bool ended;
	struct cfs_node cand[CHORD__LK_NCAND];
	bool tried[CHORD__LK_NCAND];
	uint32_t ncand, tries;
	struct cfs_node part[CHORD__LK_NCAND]; /* our partial answer, if any */
	uint32_t npart;
	struct cfs_node out[CFS_MSG_MAX_NODES]; /* the answer we send */
	uint32_t nout;
	struct cfs_actq q;
};

/* Is a LOOKUP_FWD believable: not too old, from an originator whose ID
 * hashes from its address? */
bool chord__fwd_acceptable(const struct chord__lk_env *env, const struct chord__fwd_query *q);
/* Take the query, with the local step's outcome at self (done, has the
 * block, out[0..n) of which the first ncand are next hops). */
void chord__fwdsm_start(struct chord__fwdsm *f, const struct chord__lk_env *env,
                        const struct cfs_node *self, const struct chord__fwd_query *q, bool done,
                        bool has, const struct cfs_node *out, uint32_t n, uint32_t ncand);
/* The next hop (ask = FWD_NEXT's) acknowledged (0) or failed. */
void chord__fwdsm_ack(struct chord__fwdsm *f, uint32_t ask, int status);
/* The transport refused the FWD_NEXT. */
void chord__fwdsm_send_failed(struct chord__fwdsm *f, uint32_t ask, int r);
void chord__fwdsm_release(struct chord__fwdsm *f);

#endif
