/*
 * chord — the ring (CFS section 4, DHash++ section 2).
 *
 * Contract: given a key, find its successor on the identifier circle.
 *
 * One chord_t runs V virtual servers on one transport (one UDP socket).
 * Their IDs are H(IP ‖ index), the index below CFS_VNODE_INDEX_MAX (CFS
 * 4.4; the port is not hashed, so processes sharing an IP share its indexes
 * and a joining virtual server takes a free one); a node enters a table
 * only after its ID matches its address and it has echoed a nonce sent to
 * that address. Each virtual server keeps a successor list of r entries, a
 * predecessor and a finger table filled with proximity neighbour selection
 * (PNS(x), DHash++ 4.3), stabilises on jittered timers and drops a neighbour
 * after consecutive missed probes. The virtual servers of one process read
 * each other's tables (lookups take shortcuts).
 *
 * Lookups are iterative (CFS Fig. 5, with backtracking and alerts) or
 * recursive (DHash++ Fig. 10, answer straight to the originator, falling
 * back to iterative), and choose each next hop greedily, by the CFS 4.3
 * cost C = d_i + d̄·H(n_i), or by OpenDHT's nonlinear delay scaling, with
 * latencies predicted from Vivaldi coordinates piggybacked on every message.
 *
 * Depends on common/ only. Everything runs on the caller's libuv loop;
 * callbacks are never made from inside the call that started them.
 */
#ifndef CFS_CHORD_H
#define CFS_CHORD_H

#include "common/cfs.h"

typedef struct chord chord_t;

#define CHORD_SUCC_MAX 32     /* longest successor list (r) */
#define CHORD_VNODES_MAX 64   /* virtual servers per process */

struct chord_config {
	uint32_t vnodes;          /* V (default 1) */
	uint32_t nsucc;           /* r (default 16, at most CHORD_SUCC_MAX) */
	uint32_t stabilize_ms;    /* mean stabilisation period (default 1000, ±50 % jitter) */
	uint32_t fix_fingers_ms;  /* mean period between finger refreshes (default 500) */
	uint32_t probe_timeout_ms;/* timeout of maintenance RPCs (default 750) */
	uint32_t fail_probes;     /* consecutive misses that make a neighbour dead (default 3) */
	uint32_t pns;             /* PNS(x) samples per finger (default 16; 1 = plain Chord) */
	uint64_t seed;            /* jitter RNG seed (0: from the clock) */
	/* How long a node whose lookup answer failed the checks, or that
	 * claimed a block it did not serve, stays a suspect (skipped as a
	 * next hop); 0: CHORD_SUSPECT_MS_DEFAULT. */
	uint32_t suspect_ms;
	/* Called once, later, when the ring cannot be joined: -ENOSPC, every
	 * index of this IP is taken (PROTOCOL.md "Node IDs"). NULL: only logged. */
	void (*on_fatal)(void *arg, int status);
	void *fatal_arg;
	/* Mean period of the ring check, a lookup of our own ID from outside
	 * our successor list that finds and joins other loops (default
	 * 30000; CHORD_MERGE_OFF disables it). */
	uint32_t merge_ms;
	/* Found a ring of our own when no bootstrap address or remembered
	 * peer answers a join (without it, joining is retried for ever). A
	 * start with neither founds one at once. */
	bool first;
	/* Period of the reachability check, members dialling us back (0: no
	 * check; cfsd uses CHORD_REACH_MS). */
	uint32_t reach_ms;
	/* Run as a plain client of the ring (not a member, never a hole in
	 * it) once two reachability checks in a row find members cannot
	 * reach us; false: stay a member and only say so. */
	bool unreachable_client;
	/* Nodes met in traffic kept for lookups to start near their keys
	 * (chord/learned.c; default CHORD_LEARNED_DEFAULT; 0: none). */
	uint32_t learned_max;
	/* A member's gets of blocks that verify by their content skip the
	 * lookup when the learned table holds nodes no farther after the key
	 * than this many mean node spacings (likely among its successors):
	 * they are asked first, and a wrong guess costs a full lookup
	 * (default CHORD_GUESS_DEFAULT; 0: always look up). */
	uint32_t guess_spacings;
	/* A member asks one node for its successor list every this many ms
	 * to fill the gaps of its learned table (chord/sweep.c; default
	 * CHORD_SWEEP_MS_DEFAULT; 0: learn from traffic only). */
	uint32_t sweep_ms;
};
#define CHORD_SWEEP_MS_DEFAULT 1000
#define CHORD_GUESS_DEFAULT 5
#define CHORD_GUESS_MAX 16
#define CHORD_LEARNED_DEFAULT 4096
#define CHORD_LEARNED_MAX 65536
#define CHORD_REACH_MS 600000
/* What the reachability check found (chord_reach_name). */
enum { CHORD_REACH_UNKNOWN = 0, CHORD_REACH_YES = 1, CHORD_REACH_NO = 2 };
const char *chord_reach_name(int state);
#define CHORD_MERGE_OFF UINT32_MAX
/* Remembered peers kept at most (chord_remember, chord_peers). */
#define CHORD_PEERS_MAX 128
#define CHORD_SUSPECT_MS_DEFAULT 300000
void chord_config_default(struct chord_config *c);

/* Lookup modes: an algorithm and a next-hop rule, combined. */
enum chord_algo { CHORD_ITERATIVE = 0, CHORD_RECURSIVE = 1 };
enum chord_select { CHORD_GREEDY = 0, CHORD_CFS_COST = 1, CHORD_NONLINEAR = 2 };
#define CHORD_MODE(algo, sel) ((uint32_t)(algo) | ((uint32_t)(sel) << 4))
#define CHORD_MODE_ALGO(m) ((m) & 0xfu)
#define CHORD_MODE_SELECT(m) (((m) >> 4) & 0xfu)
/* Iterative lookups with up to p RPCs in flight (OpenDHT 3.2.2, after
 * Kademlia): the first useful answer moves the lookup on. 0 means 1. */
#define CHORD_MODE_PAR(m) (((m) >> 8) & 0xfu)
#define CHORD_MODE_WITH_PAR(m, p) (((m) & ~0xf00u) | ((uint32_t)(p) << 8))
#define CHORD_PAR_MAX 8
/* Route to the key's predecessor, as classic Chord does, instead of
 * answering early at a node whose successor list already covers the key
 * (DHash++ 4.5, Figure 10; the early answer is the default). */
#define CHORD_MODE_TO_PRED 0x1000u
#define CHORD_MODE_KNOWN 0x1fffu
/* "iterative" | "recursive", then optionally ",greedy" | ",cost" |
 * ",nonlinear", ",pN" (N in 1..CHORD_PAR_MAX, iterative only) and ",pred"
 * in any order. -EINVAL otherwise. */
int chord_mode_parse(const char *s, uint32_t *ret) CFS_WUR;
/* The text form chord_mode_parse accepts; buf holds 48 bytes. */
const char *chord_mode_name(uint32_t mode, char buf[static 48]);
/* Whether a mode (e.g. from a control request) is one of the above. */
bool chord_mode_ok(uint32_t mode);

struct chord_lookup_opts {
	uint32_t mode;            /* CHORD_MODE(...) */
	uint32_t nsucc;           /* successors wanted (1..CFS_MSG_MAX_NODES) */
	uint32_t flags;           /* CFS_LOOKUP_F_CHECK_BLOCK, CFS_LOOKUP_F_VERIFY,
	                           * CHORD_LOOKUP_F_REMEMBERED */
};
/* Local only, never sent: the lookup may be answered without a message
 * (for gets of blocks that verify by their own content: the answer may be
 * stale or a guess). A plain client answers from the successor lists
 * earlier lookups were given, when one covers the key; a member whose own
 * tables do not cover the key answers with the learned nodes just after
 * it (guess_spacings). */
#define CHORD_LOOKUP_F_REMEMBERED 0x10000u

#define CHORD_PATH_MAX 16
struct chord_lookup_result {
	int status;               /* 0, -EHOSTUNREACH (no live route), -ECANCELED */
	uint32_t rpcs;            /* lookup RPCs sent (recursive: hops) */
	uint32_t timeouts;        /* ... that timed out */
	uint32_t hops;
	uint64_t latency_us;
	bool has_block;           /* a hop said it holds the key's block */
	struct cfs_node holder;   /* ... that hop */
	uint32_t n;               /* successors of the key, nearest first */
	struct cfs_node succ[CFS_MSG_MAX_NODES];
	/* Other processes' nodes the lookup went through, nearest the key
	 * last (at most the last CHORD_PATH_MAX; recursive lookups know only
	 * the hop that answered). DHash caches fetched blocks on them. */
	uint32_t npath;
	struct cfs_node path[CHORD_PATH_MAX];
	/* succ[0..n) passed the answer checks (the key between the answering
	 * node and succ[0], ring order, enough successors, the density of
	 * Castro et al. 2002), or came from our own tables: found
	 * independently of any one hop's say-so. false for a hop's block
	 * claim (HAS_BLOCK without DONE), whose succ[] are next hops. */
	bool checked;
	uint32_t checks_failed;   /* answers rejected on the way (suspects) */
};
typedef void (*chord_lookup_cb)(void *arg, const struct chord_lookup_result *r);

/* Does this process hold key's block (stored or cached)? DHash installs it;
 * lookups with CFS_LOOKUP_F_CHECK_BLOCK ask it at every hop. */
typedef bool (*chord_has_block_fn)(void *arg, const struct cfs_id *key);

/*
 * Make the ring state for one process. self is the address others reach
 * this process at (its IP is hashed into the IDs). The transport is the
 * caller's; route incoming requests through chord_handle_request.
 */
int chord_new(uv_loop_t *loop, cfs_transport_t *t, const struct cfs_addr *self,
              const struct chord_config *c, chord_t **ret) CFS_WUR;
/*
 * A plain client of the ring, not a member (a mount or a publisher without
 * a local cfsd): lookups are iterative, from the known node nearest the key
 * (learned from earlier answers) or else from one of the n bootstrap
 * addresses; nobody adds it to a table and it serves no ring requests
 * (chord_handle_request returns false). Needs no chord_start.
 */
int chord_client_new(uv_loop_t *loop, cfs_transport_t *t, const struct cfs_addr *boot, size_t n,
                     chord_t **ret) CFS_WUR;
/* Is c a plain client (made one, or a member that the ring could not
 * reach and that runs as a client since)? */
bool chord_is_client(const chord_t *c);
/* The learned table: nodes kept now, and AUTHs sent to check the nodes
 * lookup answers named before they enter it. */
uint32_t chord_learned_count(const chord_t *c);
uint64_t chord_learn_auths(const chord_t *c);
/* Successor lists asked to fill the learned table (sweeps) since start. */
uint64_t chord_learn_sweeps(const chord_t *c);
/* Enter count nodes into the learned table as if each had passed its
 * AUTH check long ago (a first hop of our own lookups at once, never
 * named to others); our own IDs and nodes already there are skipped, and
 * the table's bound holds. For a table known from an earlier run, and
 * the testbed's warm start. Returns how many entered. */
uint32_t chord_learned_seed(chord_t *c, const struct cfs_node *n, uint32_t count);
/* A plain client's lookups answered from remembered answers
 * (CHORD_LOOKUP_F_REMEMBERED), ever. */
uint64_t chord_lookups_remembered(const chord_t *c);
/* A plain client's contacts, kept for its next run: the most recently met
 * (at most 512) written to path, atomically; read back by load, which
 * pings them in the background and returns how many it took, or -errno. */
int chord_client_save(const chord_t *c, const char *path) CFS_WUR;
/* One line of that file, "ADDRESS INDEX": the node, its ID the hash of
 * both; -EINVAL for anything else (a comment, a bad address or index). */
int chord_contact_parse(const char *line, struct cfs_node *ret);
int chord_client_load(chord_t *c, const char *path);
/* The ring members a plain client knows. */
uint32_t chord_client_contacts(const chord_t *c);
/* ... at how many distinct IP addresses: a lower bound on the ring's
 * servers, which a plain client's lookup checks and quorums use (the
 * contacts come from answers, so a liar can raise it: its lookups and
 * puts then fail, nothing is acknowledged on its word). */
uint32_t chord_client_addresses(const chord_t *c);
/* Create a new ring (n == 0) or join through any of the n addresses,
 * retrying until one answers. Maintenance starts here. */
void chord_start(chord_t *c, const struct cfs_addr *bootstrap, size_t n);
/* Remember a peer's address from an earlier run (before chord_start:
 * join targets after the bootstrap addresses; and ring-check contacts). */
void chord_remember(chord_t *c, const struct cfs_addr *a);
/* The peers to remember for the next run, most recently seen first:
 * every address in the tables now, then those remembered before. */
uint32_t chord_peers(chord_t *c, struct cfs_addr *ret, uint32_t max);
/* Leave: tell every predecessor and successor (graceful), stop timers,
 * end pending lookups with -ECANCELED. done is called once, after the
 * neighbours answered or timed out (at once when there is nobody to tell). */
void chord_leave(chord_t *c, void (*done)(void *arg), void *arg);
/* Free everything (after chord_leave's done, or for a crash-like stop:
 * timers are stopped and nobody is told). The transport is not closed. */
void chord_free(chord_t *c);

/* Handle a ring request (types PING..LOOKUP_DONE). false when the type is
 * not chord's: the caller routes it elsewhere. */
bool chord_handle_request(chord_t *c, const struct cfs_msg *req, const struct cfs_reply_to *from);

/* Find key's successors. 0 means cb will be called once, later. */
int chord_lookup(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                 chord_lookup_cb cb, void *arg) CFS_WUR;

/* An RPC to another ring member that keeps Vivaldi and the neighbour
 * latencies up to date (DHash's calls go through here). A fixed
 * timeout_ms (0: the transport's RTO) is stretched to three of the
 * node's round trips when that is longer (chord.c, fixed_timeout_ms). */
int chord_call(chord_t *c, const struct cfs_node *to, struct cfs_msg *req, uint32_t timeout_ms,
               cfs_reply_cb cb, void *arg);
/* The same in the background class: the request's pieces and
 * the answer's yield to reads and publishes (repair, sync, cache pushes). */
int chord_call_low(chord_t *c, const struct cfs_node *to, struct cfs_msg *req,
                   uint32_t timeout_ms, cfs_reply_cb cb, void *arg);

void chord_set_has_block(chord_t *c, chord_has_block_fn fn, void *arg);
/* Stop (true) or resume maintenance timers; for experiments that need a
 * ring frozen between a failure and the next stabilisation. */
void chord_freeze(chord_t *c, bool frozen);
/* Refresh every finger now, back to back, instead of one per period
 * (chord_vnode_settled is false until the pass ends): for a ring that grew
 * much since the last pass, whose fingers are valid but no longer close. */
void chord_refresh_fingers(chord_t *c);
/* Bring every virtual server's next stabilization round forward to now
 * (no sooner than 10 ms after its last). A successor list learns one more
 * node per round, so a harness building a ring, which waits for whole
 * lists, calls this between its checks instead of waiting out the period. */
void chord_stabilize_now(chord_t *c);

/* --- inspection */
/* The transport c sends on (DHash serves its requests on the same socket). */
cfs_transport_t *chord_transport(const chord_t *c);
uint32_t chord_vnode_count(const chord_t *c);
/* Virtual server i's own node, its first successor (itself when alone)
 * and whether it has joined. */
const struct cfs_node *chord_vnode_self(const chord_t *c, uint32_t i);
const struct cfs_node *chord_vnode_succ(const chord_t *c, uint32_t i);
/* Its successor list (up to CHORD_SUCC_MAX entries); returns the count. */
uint32_t chord_vnode_succs(const chord_t *c, uint32_t i, const struct cfs_node *ret[]);
/* Its predecessor, NULL when unknown. */
const struct cfs_node *chord_vnode_pred(const chord_t *c, uint32_t i);
/* The nodes this process knows before it on the circle, nearest first, up
 * to max into ret (copies; none of our own virtual servers): its
 * predecessor, the entries of every table here, and nodes learned from
 * traffic lately. Beyond the predecessor the list may skip nodes no table
 * holds; it names only nodes met. */
uint32_t chord_vnode_preds(const chord_t *c, uint32_t i, struct cfs_node *ret, uint32_t max);
bool chord_vnode_joined(const chord_t *c, uint32_t i);
/* Is virtual server i's successor list as long as it should be: the
 * configured length, or the whole ring when the ring is shorter (the list
 * came back round to us), and not in doubt after a loss? */
bool chord_vnode_succs_full(const chord_t *c, uint32_t i);
/* Joined and through its first full pass of finger refreshes. */
bool chord_vnode_settled(const chord_t *c, uint32_t i);
/* N ≈ r / f, f the fraction of the circle that the successor lists cover
 * (CFS 6.1), in virtual servers. */
double chord_estimate_n(const chord_t *c);
/* The distinct IP addresses of the whole ring (this one among them) when
 * the ring is shorter than the successor list and every table holds all
 * of it; 0 when the ring is larger or not yet known. */
uint32_t chord_ring_addresses(const chord_t *c);
const struct cfs_coord *chord_coord(const chord_t *c);
/* Predicted round trip to a coordinate, in microseconds. */
uint64_t chord_predict_rtt_us(const chord_t *c, const struct cfs_coord *to);
/* The round trip to n (µs) a choice between servers should go by: the one
 * measured to its address when there is one (a young Vivaldi coordinate,
 * ours or its, can be off by a continent), else the Vivaldi prediction;
 * 0 when neither is known. */
uint64_t chord_rtt_us(const chord_t *c, const struct cfs_node *n);
/* Is id one of this process's tables' dead or failed-authentication entries
 * (for tests), or present in any table? */
bool chord_knows(const chord_t *c, const struct cfs_id *id);
/* Report id as a suspect (a lying or failing ring member, e.g. a hop that
 * claimed key's block and did not serve it): for suspect_ms lookups skip it
 * as a next hop. Our own virtual servers are never suspects. why is a
 * static string, logged. */
void chord_suspect(chord_t *c, const struct cfs_id *id, const char *why);
/* Is id a suspect now? */
bool chord_is_suspect(const chord_t *c, const struct cfs_id *id);
/* The virtual servers, tables, estimate and lookup counters, as text or as
 * a JSON object (appended to b). */
void chord_status(const chord_t *c, struct cfs_sbuf *b, bool json);

/* --- store admission (admit.c) */
/* Is id an authenticated ring member (in a table, or its nonce echoed at
 * from within the last ten minutes) that sends from the address from? */
bool chord_is_member(const chord_t *c, const struct cfs_id *id, const struct cfs_addr *from);
/* chord_is_member for n; when n is unknown, start authenticating it (its ID
 * must hash from its address) so that a later request passes. */
bool chord_member_check(chord_t *c, const struct cfs_node *n);
/* Is an authentication of id under way (its answer not yet in)? */
bool chord_member_pending(const chord_t *c, const struct cfs_id *id);
/* Could sender, in this process's view, be placing a replica of key here:
 * sender at or just after key, one of our virtual servers after it, both
 * within about 2k + 8 successor gaps of key (gaps of a ring size the
 * estimate is unlikely to overstate, chord_ring_size_floor)? */
bool chord_plausible_holder(const chord_t *c, const struct cfs_id *sender, const struct cfs_id *key,
                            uint32_t k);
/* A ring size the estimate est (from m successor gaps) is unlikely to
 * overstate: est times the lower 1e-4 quantile of Gamma(m)/m. */
double chord_ring_size_floor(double est, uint32_t m);
/* The same test as a pure function of a view: our nself virtual servers'
 * IDs and the estimate est_n of the ring's size in virtual servers. */
bool chord_holder_plausible(const struct cfs_id *key, const struct cfs_id *sender,
                            const struct cfs_id *selves, uint32_t nself, double est_n, uint32_t k);

#endif
