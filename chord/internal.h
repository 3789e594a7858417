/* chord's private structures, shared by the files of this folder only. */
#ifndef CFS_CHORD_INTERNAL_H
#define CFS_CHORD_INTERNAL_H

#include "chord/chord.h"

/* Fingers are kept for bits 192..255 only: in any ring of fewer than 2^64
 * virtual servers the lower fingers are the successor itself. */
#define FINGER_BASE 192
#define NFINGERS (CFS_ID_BITS - FINGER_BASE)

/* A table entry: a node plus what we measured of it. */
struct tnode {
	struct cfs_node n;
	uint32_t rtt_us;          /* last measured round trip, 0 unknown */
	uint8_t misses;           /* consecutive failed probes */
	bool valid;
};

struct chord__vnode {
	chord_t *c;
	uint32_t index;
	struct cfs_node self;
	bool joined;
	struct tnode pred;        /* valid when known */
	uint64_t pred_heard_us;
	/* The predecessor itself named us its successor (its GET_PRED or
	 * NOTIFY came from it): only then do we answer for (pred, self]. A
	 * predecessor taken from hearsay (any node met while we had none,
	 * as after a restart) may lie far before the true one, and keys
	 * between would be answered with our own list, not their holders. */
	bool pred_sure;
	uint32_t nsuccs;          /* 0: alone, the successor is self */
	struct tnode succ[CHORD_SUCC_MAX];
	struct tnode finger[NFINGERS];
	uv_timer_t stab_timer, fix_timer;
	bool stab_busy, fix_busy, pred_probe_busy, join_busy, fingers_done;
	bool list_changed;        /* the last round changed the successor list */
	/* The successor list was refilled from fingers after all successors
	 * died (chord__table_remove): it may skip live nodes, so lookups do not
	 * answer from it until the successor names us its predecessor. */
	bool succ_unsure;
	/* The successor's list named us, and the successor names us its
	 * predecessor: the ring is shorter than r, our list holds all of it
	 * and wraps back to us after its last entry. */
	bool wraps;
	uint64_t stab_ms;         /* loop time of the last round (chord__maint_kick) */
	int next_finger;          /* the finger fix_fingers refreshes next */
	uint32_t join_attempts;
	bool index_ok;            /* a join lookup found its index free (index.c) */
};

/* Authentication cache (CFS 4.4), keyed by node ID. */
enum auth_state { AUTH_NONE, AUTH_PENDING, AUTH_OK, AUTH_FAILED, AUTH_DEAD };
struct auth_ent {
	struct cfs_id id;
	struct cfs_node node;
	uint8_t state;            /* enum auth_state */
	uint64_t until_us;        /* state expires */
	bool rechecking;          /* asked again: AUTH_OK whose ID another address claims,
	                             or AUTH_DEAD heard from or named again */
	uint64_t gen;             /* of its newest check or verdict (chord_t's auth_gen) */
};

struct chord__lookup;

/* cookie.c: stateless LEAVE cookies. */
#define CHORD_COOKIE_KEY_BYTES 32
#define CHORD_COOKIE_PERIOD_US (60ull * 1000000) /* key lifetime; cookies live 1-2 periods */
struct chord__cookie_jar {
	uint8_t key[2][CHORD_COOKIE_KEY_BYTES]; /* this period's, the previous one's */
	uint64_t epoch;                         /* period number of key[0] */
};
enum chord__leave_verdict {
	LEAVE_APPLY,      /* a valid cookie from a node in our tables at that address */
	LEAVE_STRANGER,   /* the sender is in none of our tables (at that address): nothing to do */
	LEAVE_NO_COOKIE,  /* answer with a cookie, change nothing */
	LEAVE_BAD_COOKIE, /* wrong, expired, or made for another sender: likewise */
};

/* ratelimit.c: token buckets bounding AUTH calls per source and overall. */
struct chord__bucket {
	double tokens;
	uint64_t at_us;           /* last take; 0: new (full) */
};
struct chord__rl_params {
	double src_rate, src_burst; /* AUTH calls per second one source address may cause */
	double all_rate, all_burst; /* ... that everyone together may cause */
	uint32_t sources;           /* source addresses remembered (the table's bound) */
};
struct chord__rl_src {
	uint8_t key[17];          /* IP length, IP (IPv6: its /64) */
	struct chord__bucket b;
	uint64_t used_us;
};
struct chord__ratelimit {
	struct chord__rl_params p;
	struct chord__bucket all;
	struct chord__rl_src *src; /* p.sources entries */
	uint32_t nsrc;
	uint64_t dropped_src, dropped_all, evicted;
};

/* Suspects (suspect.c): nodes whose lookup answers failed the checks or
 * that did not serve a block they claimed; bounded, each entry expires. */
#define CHORD__SUSPECTS_MAX 64
struct chord__suspect {
	struct cfs_id id;
	uint64_t until_us;
	const char *why;
};
/* A node that claimed a key it precedes is a suspect only when it did so
 * again more than CHORD__CLAIM_GRACE_US after the first time (an honest
 * node claims its new predecessor's keys until that one notifies it, one
 * stabilization round); a first claim older than CHORD__CLAIM_WINDOW_US
 * is forgotten. Once a suspect, a node's next claim within the window
 * makes it one again at once. */
#define CHORD__CLAIM_GRACE_US (20 * 1000000ull)
#define CHORD__CLAIM_WINDOW_US (600 * 1000000ull)
struct chord__strike {
	struct cfs_id id;
	uint64_t first_us;
};
struct chord__suspects {
	struct chord__suspect e[CHORD__SUSPECTS_MAX];
	uint32_t n;
	uint64_t ttl_us;
	uint64_t reported;        /* suspects reported, ever */
	struct chord__strike strike[CHORD__SUSPECTS_MAX];
	uint32_t nstrike;
};

/* LOOKUP_FWDs remembered: a copy comes within its call's timeout (750 ms
 * at most), and this covers over 1,300 queries a second */
#define CHORD__FWD_SEEN 1024

/* learned.c: nodes met in traffic, sorted by ID, at most cap. */
struct chord__lnode {
	struct cfs_node n;
	uint64_t seen_us;         /* last offered */
	uint64_t added_us;        /* first offered */
	/* Entered from a lookup answer after an AUTH of its own (a hint),
	 * not from our tables: a first hop of our own lookups only, never
	 * named to others nor taken for a predecessor. */
	bool hint;
};
/*
 * The nodes lookup answers name that our tables have not authenticated
 * are checked before they enter, each by an AUTH of its own (a nonce
 * echoed from the address the answer gave): at most
 * CHORD_LEARN_AUTH_RATE a second after a burst of CHORD_LEARN_AUTH_BURST,
 * CHORD_LEARN_AUTH_INFLIGHT at a time, the CHORD__LEARN_QUEUE named last
 * waiting. A node that fails the check, or that failed as a hop, is not
 * checked again for CHORD_LEARN_BAD_US. None of this touches the
 * authentication cache (auth.c), so a check made to learn a node is never
 * taken for one made for the successor lists, fingers or predecessor.
 * About 300 bytes an AUTH, both ways: some 4.8 KB a second at most, spent
 * only while our lookups' answers name nodes we do not know (a reader's
 * daemon). Measured on 1,000 testbed nodes, 60 s of gets: at 16 a second
 * the readers knew 684 members against 330 at 2 a second, get p50 fell
 * from 115 to 82 ms, and the whole ring sent 0.09 AUTHs a node and second.
 */
#define CHORD_LEARN_AUTH_RATE 16.0
#define CHORD_LEARN_AUTH_BURST 32.0
#define CHORD_LEARN_AUTH_INFLIGHT 4
#define CHORD__LEARN_QUEUE 64
/*
 * A member also fills its learned table on purpose, at a slow fixed pace
 * (sweep.c; Accordion's exploration, D1HT's aim of knowing every member):
 * every CHORD_SWEEP_MS it asks the node before the widest gap between
 * its entries — wider than CHORD_SWEEP_SPACINGS mean node spacings, so
 * likely to hide members — for its successor list, and what the list
 * names is learned as lookup answers are (checked by an AUTH within the
 * budget above); no sweep starts while hints wait for their checks, so
 * that budget paces the learning. A gap's start asked in the last CHORD_SWEEP_AGAIN_US is
 * not asked again (the gap may hold no node), so a table that knows
 * the ring costs a few sweeps a minute.
 */
#define CHORD_SWEEP_SPACINGS 3.0
#define CHORD_SWEEP_AGAIN_US (300ull * 1000000)
#define CHORD__LEARN_SWEPT 128
#define CHORD__LEARN_BAD 128
#define CHORD_LEARN_BAD_US (300ull * 1000000)
struct chord__lbad {
	struct cfs_id id;
	uint64_t until_us;
};
struct chord__learned {
	struct chord__lnode *e;   /* cap entries, allocated on the first add */
	uint32_t n, cap;
	uint64_t evicted;
	/* hints: named by answers, waiting for their AUTH, or in flight */
	struct cfs_node queue[CHORD__LEARN_QUEUE];
	uint32_t nqueue;
	struct cfs_node flight[CHORD_LEARN_AUTH_INFLIGHT];
	uint32_t nflight;
	struct chord__lbad bad[CHORD__LEARN_BAD];
	uint32_t nbad;
	struct chord__bucket budget;
	uint64_t probes, probes_ok, probes_failed, hints_dropped;
	/* sweeps (sweep.c): the gaps' starts asked lately */
	struct chord__lbad swept[CHORD__LEARN_SWEPT];
	uint32_t nswept;
	uint64_t sweeps;
};
void chord__learned_init(struct chord__learned *l, uint32_t cap);
/* The start of the widest gap between consecutive entries wider than
 * min_gap (a fraction of the ring), not containing self and whose start
 * was not asked since now - CHORD_SWEEP_AGAIN_US: into *ret, noted as
 * asked now. false: no such gap. */
bool chord__learned_gap(struct chord__learned *l, const struct cfs_id *self, double min_gap,
                        uint64_t now_us, struct cfs_node *ret);
/* sweep.c: the timer that asks one gap's start each sweep_ms. */
void chord__sweep_start(chord_t *c);
void chord__sweep_stop(chord_t *c);
/* lookup.c: learn n, met in an answer: added if our tables authenticated
 * it, else a hint to check. */
void chord__learn_node(chord_t *c, const struct cfs_node *n, uint64_t now);
void chord__learned_free(struct chord__learned *l);
/* Enter n (not there yet) as if its check had just passed and it had been
 * known for CHORD_LEARNED_QUARANTINE_US: a hint, usable as a first hop. */
void chord__learned_seed(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us);
/* Add n, or refresh it (address, coordinate, time) if its ID is there;
 * full, the entry offered longest ago goes. n comes from our tables: an
 * entry that was a hint is one no longer. */
void chord__learned_add(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us);
bool chord__learned_remove(struct chord__learned *l, const struct cfs_id *id);
/* id failed (a lookup hop that did not answer): remove it, and check no
 * answer's mention of it for CHORD_LEARN_BAD_US. */
void chord__learned_forget(struct chord__learned *l, const struct cfs_id *id, uint64_t now_us);
const struct chord__lnode *chord__learned_find(const struct chord__learned *l, const struct cfs_id *id);
/* Up to cap entries in (from, key) — from NULL: anywhere but key — the
 * nearest before key first, of those first offered at or before
 * added_before_us (UINT64_MAX: any) and last offered at or after
 * seen_after_us (0: any); hints only with hints. */
uint32_t chord__learned_preceding(const struct chord__learned *l, const struct cfs_id *from,
                                  const struct cfs_id *key, uint64_t added_before_us,
                                  uint64_t seen_after_us, bool hints, struct cfs_node *out,
                                  uint32_t cap);
/* A member's lookup with CHORD_LOOKUP_F_REMEMBERED answered with no
 * message: the learned nodes within guess_spacings mean spacings after the
 * key, into res (checked), when our own tables do not cover the key and
 * we hold no copy of its block. false: look it up. */
bool chord__lookup_guess(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                         struct chord_lookup_result *res, uint64_t now);
/* Up to cap entries after key (never key itself), nearest first, no
 * farther from it than span (a fraction of the circle), with the same
 * filters as chord__learned_preceding. */
uint32_t chord__learned_following(const struct chord__learned *l, const struct cfs_id *key,
                                  double span, uint64_t added_before_us, uint64_t seen_after_us,
                                  bool hints, struct cfs_node *out, uint32_t cap);
/* A lookup answer named n (its ID hashes from its address), which our
 * tables have not authenticated: refresh its entry if it is there at that
 * address, else queue its check (the newest named first; full, the
 * oldest waiting goes) unless it is queued, in flight or failed lately. */
void chord__learned_hint(struct chord__learned *l, const struct cfs_node *n, uint64_t now_us);
/* The next hint to send an AUTH, if the budget allows one now: true with
 * it in *ret (now in flight until chord__learned_checked). */
bool chord__learned_next_check(struct chord__learned *l, uint64_t now_us, struct cfs_node *ret);
/* n's AUTH ended: answered right (ok, with the coordinate it gave), n
 * enters as a hint; else it is kept out for CHORD_LEARN_BAD_US. */
void chord__learned_checked(struct chord__learned *l, const struct cfs_node *n, bool ok,
                            uint64_t now_us);
/* A member uses a learned node as a next hop only once it has known it
 * this long: a node that has just joined may not have its tables right,
 * and an answer from them would make it a suspect (D1HT's quarantine, for
 * the asker's sake). */
#define CHORD_LEARNED_QUARANTINE_US (60ull * 1000000)
/* ... and only while something has offered it again within this time
 * (its authentication, renewed every ten minutes while it is in use, an
 * answer naming it): a member that left is no next hop for long, even
 * where no lookup of ours runs into it. */
#define CHORD_LEARNED_FRESH_US (1200ull * 1000000)

struct chord {
	uv_loop_t *loop;
	cfs_transport_t *tr;
	struct chord_config cfg;
	struct cfs_addr addr;
	struct cfs_rng rng;
	bool started, frozen, leaving, freeing, released;
	uint64_t inflight;        /* chord_call RPCs not yet ended */
	int handles;              /* uv handles not yet closed */
	uint32_t nv;
	struct chord__vnode *v;          /* nv entries */
	struct cfs_addr *boot;    /* join targets */
	size_t nboot, boot_next;
	/* lookup.c: the wait for an address's first answer (a join target,
	 * a plain client's bootstrap): asks of addresses that timed out since
	 * the last answer, and the doublings that answer asked for */
	uint32_t addr_silent, addr_wait_shift;
	/* merge.c: peers remembered across partitions and restarts (most
	 * recently seen first), and the ring check that looks outside our loop */
	struct cfs_addr peers[CHORD_PEERS_MAX];
	uint32_t npeers, merge_next, merge_vi;
	bool merge_busy;
	uv_timer_t merge_timer;
	uv_timer_t sweep_timer;   /* sweep.c */
	uint64_t merge_checks, merge_found;
	bool founded;             /* cfg.first: no join target answered, a ring of our own */
	/* reach.c: can members reach us (dial-backs)? */
	uv_timer_t reach_timer;
	int reach_state;          /* CHORD_REACH_* */
	bool reach_busy;          /* a round's requests are out */
	uint8_t reach_nonce[CFS_NONCE_BYTES];
	uint32_t reach_answers_round, reach_dialbacks_round;
	struct cfs_addr reach_seen; /* where members last saw us come from */
	bool reach_seen_valid;
	uint64_t reach_checks, reach_dialed, reach_refused;
	uint32_t reach_no_rounds; /* "no" verdicts in a row */

	struct chord__learned learned;

	/* Vivaldi */
	struct cfs_coord coord;
	double coord_err;

	/* auth cache */
	struct cfs_htab auth;     /* node ID -> struct auth_ent */
	size_t auth_sweep_at;     /* drop expired entries at this count */
	uint64_t auth_sent, auth_ok, auth_failed, id_mismatch, auth_revived;
	uint64_t auth_gen;        /* numbers checks and verdicts: an answer counts for its own */

	/* lookups in progress (for cancellation and recursive answers) */
	struct chord__lookup *lookups;
	struct chord__lookup *finished;  /* ended, callback not yet made */
	uv_timer_t lk_timer;      /* runs callbacks and recursive deadlines */
	bool lk_timer_armed;
	double avg_rtt_ms;        /* d̄ of CFS 4.3: mean RTT of our RPCs */
	uint64_t lookups_done, lookups_failed, lookup_rpcs, lookup_timeouts;
	uint64_t fwd_handled, find_next_handled, alerts_in, hostile_dropped;
	/* request IDs of the LOOKUP_FWDs taken lately: a copy the transport
	 * resent is acknowledged, not forwarded again (IDs are random 64-bit
	 * numbers, so nobody off the path can name someone else's) */
	uint64_t fwd_seen[CHORD__FWD_SEEN];
	uint32_t fwd_seen_next;
	uint64_t fwd_copies;

	chord_has_block_fn has_block;
	void *has_block_arg;

	/* a plain client (chord_client_new): not a member, no maintenance */
	bool client;
	uint32_t probes;          /* plain client: contact PINGs in flight */
	struct cfs_node *unproven; /* plain client: loaded contacts, to be pinged */
	uint32_t nunproven, unproven_next;
	struct chord__arc *arcs;  /* plain client: answers remembered (client.c) */
	uint32_t narcs, arc_next;
	uint64_t lookups_remembered;

	struct cfs_msg msg;       /* scratch for building requests/replies */

	/* Authenticated leaves and bounded authentication work. */
	struct chord__cookie_jar cookies;
	struct chord__ratelimit auth_rl;
	uint32_t auth_inflight;   /* AUTH calls not yet ended (<= CHORD_AUTH_INFLIGHT_MAX) */
	uint64_t auth_dropped;    /* checks not made: over the rate or in-flight budget */
	uint64_t auth_dup;        /* IDs refused: held by a live node at another address */
	uint64_t leave_no_cookie, leave_bad_cookie, leave_stranger, leave_applied;
	struct chord__suspects susp;
	uint64_t lookup_checks_failed; /* lookup answers the checks rejected */
	/* index.c: indexes of our IP other processes hold (bit i: index i) */
	uint64_t index_taken;
	uint64_t index_moves;     /* virtual servers that moved to a free index */
	bool index_full;          /* none was left: joining stopped (cfg.on_fatal) */
};

/* client.c */
void chord__become_client(chord_t *c);

/* reach.c */
void chord__reach_start(chord_t *c);
void chord__reach_stop(chord_t *c);
void chord__reach_handle(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                         const struct cfs_reply_to *from);
void chord__reach_dialback(chord_t *c, const struct cfs_msg *req);

/* merge.c */
void chord__merge_start(chord_t *c);
void chord__merge_stop(chord_t *c);
void chord__merge_check(chord_t *c);
/* n was offered to the tables: when we are alone, look for our ring through it. */
void chord__merge_learned(chord_t *c, const struct cfs_node *n);
bool chord__merge_contact(chord_t *c, const struct chord__vnode *v, struct cfs_addr *ret);

/* lookup.c: the wait for an address's first answer, and what an answer
 * (or its timeout) after waited_us teaches it. */
uint32_t chord__addr_wait_ms(const chord_t *c);
void chord__addr_heard(chord_t *c, int status, uint64_t waited_us);

/* chord.c */
int chord__call_addr(chord_t *c, const struct cfs_addr *a, struct cfs_msg *req,
                     uint32_t timeout_ms, cfs_reply_cb cb, void *arg);
/* A lookup's ask, to node `to` (or, when NULL, to address a): its answer
 * names a dozen nodes, so a plain client pads its request to a peer that
 * may not hold its address proven (cfs_call_opts.pad). */
int chord__call_ask(chord_t *c, const struct cfs_addr *a, const struct cfs_node *to,
                    struct cfs_msg *req, uint32_t timeout_ms, cfs_reply_cb cb, void *arg);
void chord__reply_simple(chord_t *c, const struct cfs_reply_to *from, struct cfs_msg *m);
uint64_t chord__jitter_ms(chord_t *c, uint32_t mean_ms);
/* chord_call as background work (cfs_call_opts.background): outside the
 * transport's window, never moving it. */
int chord__call_background(chord_t *c, const struct cfs_node *to, struct cfs_msg *req,
                           uint32_t timeout_ms, cfs_reply_cb cb, void *arg);
/* Is n's ID the hash of its address and index (CFS 4.4)? */
bool chord__node_id_ok(chord_t *c, const struct cfs_node *n);
/* Is n one of this process's virtual servers? */
struct chord__vnode *chord__local(const chord_t *c, const struct cfs_id *id);
/* Message addressed to id (or the first vnode when id is NULL). */
void chord__msg_init(chord_t *c, struct chord__vnode *v, enum cfs_msg_type type, const struct cfs_node *to);

/* vivaldi.c */
void chord__vivaldi_update(chord_t *c, const struct cfs_coord *remote, uint64_t rtt_us);
double chord__vivaldi_predict_ms(const struct cfs_coord *a, const struct cfs_coord *b);

/* auth.c */
void chord__auth_init(chord_t *c, uint64_t now);
void chord__auth_free(chord_t *c);
/* AUTH_OK, AUTH_FAILED/AUTH_DEAD (never use), or AUTH_PENDING (asked; the
 * node is offered to the tables once it answers). Local nodes are AUTH_OK. */
enum auth_state chord__auth_check(chord_t *c, const struct cfs_node *n, uint64_t now);
/* The node did not answer: keep it out of tables for a while. */
void chord__auth_mark_dead(chord_t *c, const struct cfs_id *id, uint64_t now);
/* n sent us its stabilization (NOTIFY or GET_PRED: a joined virtual
 * server's) from its own address:
 * if we hold it dead, ask it again now (it comes back into the tables
 * when it answers). */
void chord__auth_heard(chord_t *c, const struct cfs_node *n, uint64_t now);
/* Our successor names n its predecessor: if we hold n dead and the
 * verdict is a second old or more, ask it again. */
void chord__auth_vouched(chord_t *c, const struct cfs_node *n, uint64_t now);
/* The cached verdict, without asking: an entry holds through its until_us
 * (AUTH_PENDING until its check ends), then reads AUTH_NONE. */
enum auth_state chord__auth_peek(const chord_t *c, const struct cfs_id *id, uint64_t now);
size_t chord__auth_count(const chord_t *c);
/*
 * Budgets of authentication work: a source
 * address may cause CHORD_AUTH_SRC_RATE AUTH calls a second (bursts of
 * CHORD_AUTH_SRC_BURST), everyone together CHORD_AUTH_ALL_RATE, with at
 * most CHORD_AUTH_INFLIGHT_MAX in flight; CHORD_AUTH_SOURCES addresses are
 * remembered. Honest churn needs a few per second.
 */
#define CHORD_AUTH_SRC_RATE 10.0
#define CHORD_AUTH_SRC_BURST 20.0
#define CHORD_AUTH_ALL_RATE 100.0
#define CHORD_AUTH_ALL_BURST 200.0
#define CHORD_AUTH_SOURCES 256
#define CHORD_AUTH_INFLIGHT_MAX 32
/*
 * chord__auth_check for a node that src (an address that sent it to us;
 * NULL: our own maintenance) offered: the AUTH call, if one is needed, is
 * charged to src's budget and the overall one. AUTH_NONE when the budget
 * is spent (dropped, counted, not queued: ask again later). AUTH_FAILED for
 * an ID held by a live authenticated node at another address.
 */
enum auth_state chord__auth_check_from(chord_t *c, const struct cfs_node *n, const struct cfs_addr *src,
                                       uint64_t now);
/* Send the AUTHs of the learned table's hints that its budget allows now
 * (chord__learned_next_check); each answer goes to chord__learned_checked
 * alone, never to the cache above nor to the tables. */
void chord__auth_learn_pump(chord_t *c, uint64_t now);

/* cookie.c */
void chord__cookie_init(struct chord__cookie_jar *j, uint64_t now_us);
void chord__cookie_wipe(struct chord__cookie_jar *j);
/* The cookie for sender (its ID, index and the address the datagram came
 * from) in now's period. */
void chord__cookie_make(struct chord__cookie_jar *j, uint64_t now_us, const struct cfs_node *sender,
                        uint8_t out[static CFS_NONCE_BYTES]);
/* Was cookie made for sender in now's period or the one before? */
bool chord__cookie_ok(struct chord__cookie_jar *j, uint64_t now_us, const struct cfs_node *sender,
                      const uint8_t cookie[static CFS_NONCE_BYTES]) CFS_WUR;
/* What to do with a LEAVE from sender carrying nonce; known: sender is in
 * our tables at the address it sent from. */
enum chord__leave_verdict chord__leave_judge(struct chord__cookie_jar *j, uint64_t now_us,
                                             const struct cfs_node *sender, bool known,
                                             const uint8_t nonce[static CFS_NONCE_BYTES]) CFS_WUR;

/* ratelimit.c */
double chord__bucket_level(const struct chord__bucket *b, uint64_t now_us, double rate, double burst);
/* Take one token if there is one. */
bool chord__bucket_take(struct chord__bucket *b, uint64_t now_us, double rate, double burst);
void chord__rl_init(struct chord__ratelimit *r, const struct chord__rl_params *p);
void chord__rl_free(struct chord__ratelimit *r);
/* Charge one AUTH call to src (may be NULL) and to the total: 0, or
 * -EAGAIN (src over its budget) / -EBUSY (total over budget), counted. */
int chord__rl_admit(struct chord__ratelimit *r, uint64_t now_us, const struct cfs_addr *src) CFS_WUR;

/* table.c */
const struct cfs_node *chord__vn_succ(const struct chord__vnode *v);
/* Offer an authenticated node to every virtual server's tables. */
void chord__table_consider(chord_t *c, const struct cfs_node *n, uint64_t now);
/* Offer a node: authenticate first if needed (then it is considered). */
void chord__table_offer(chord_t *c, const struct cfs_node *n, uint64_t now);
/* Remove a node from every table, mark it dead. */
void chord__table_remove(chord_t *c, const struct cfs_id *id, uint64_t now);
/* A finger that failed to answer: forget it (fix-fingers refills it). */
void chord__table_drop_finger(chord_t *c, const struct cfs_id *id);
/* A node's CFS 4.4 verdict, a check started if none is cached
 * (chord__auth_check behind a context, so that a test can script it). */
typedef enum auth_state (*chord__auth_fn)(void *ctx, const struct cfs_node *n, uint64_t now);
/* Rebuild v's successor list as [first] + list (a successor's own list),
 * each newcomer judged by auth(auth_ctx, ...). */
void chord__table_set_succs(struct chord__vnode *v, const struct cfs_node *first,
                            const struct cfs_node *list, uint32_t n, chord__auth_fn auth,
                            void *auth_ctx, uint64_t now);
/* The measured RTT to id if any table has it, else 0. */
void chord__table_note_rtt(chord_t *c, const struct cfs_id *id, uint32_t rtt_us);
bool chord__table_contains(const chord_t *c, const struct cfs_id *id);
/*
 * One lookup step at v (the body of FIND_NEXT): true with the key's
 * successors in out (DONE), or false with next-hop candidates preceding
 * key, best first, drawn from every local virtual server's tables, in
 * out[0..*n_cand). When v's successor list covers the key but holds fewer
 * than nsucc successors after it, the candidates are the key's nearer
 * predecessors (they know more) and out[*n_cand..*n_out) are the
 * successors v does know: the answer to fall back on when none of those
 * predecessors is alive. With to_pred, only the key's predecessor answers
 * (classic Chord): a covering successor list leads to it. own: the step of
 * a lookup of ours, which may start at a hint (learned.c); a step served
 * to others names none.
 */
bool chord__table_step(chord_t *c, struct chord__vnode *v, const struct cfs_id *key, uint32_t nsucc,
                bool to_pred, bool wrap_ok, bool own, struct cfs_node *out, uint32_t *n_out,
                uint32_t *n_cand, uint32_t cap, uint64_t now);
/* The local virtual server that most closely precedes key (or is it). */
struct chord__vnode *chord__table_closest_local(chord_t *c, const struct cfs_id *key);
double chord__table_estimate_n(const struct chord__vnode *v);

/* maint.c */
void chord__maint_start(chord_t *c);
void chord__maint_stop(chord_t *c);
void chord__maint_refresh_fingers(chord_t *c);
/* Run v's stabilisation soon (its successor changed). */
void chord__maint_kick(struct chord__vnode *v);
/* The next address to join through: a bootstrap address, then a
 * remembered peer, in turn (only when there is one: nboot + npeers > 0). */
const struct cfs_addr *chord__join_target(const chord_t *c);
void chord__maint_handle(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                         const struct cfs_reply_to *from);
void chord__maint_leave(chord_t *c, void (*done)(void *), void *arg);
/* A LEAVE from sender that passed its cookie check: drop it and offer
 * what it names (its predecessor if it was ours, its successors), each
 * check charged to its address. */
void chord__maint_leave_apply(chord_t *c, struct chord__vnode *v, const struct cfs_node *sender,
                              const struct cfs_msg *req, uint64_t now);

/* lookup.c */
void chord__lookup_handle_find_next(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                             const struct cfs_reply_to *from);
void chord__lookup_handle_fwd(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                       const struct cfs_reply_to *from);
void chord__lookup_handle_done(chord_t *c, const struct cfs_msg *req, const struct cfs_reply_to *from);
void chord__lookup_cancel_all(chord_t *c);
/* A lookup that starts at an address rather than a table (joining). */
int chord__lookup_start(chord_t *c, struct chord__vnode *from, const struct cfs_addr *first,
                 const struct cfs_id *key, const struct chord_lookup_opts *o,
                 chord_lookup_cb cb, void *arg);
/* The pseudo-hop of a client's lookup: up to cap known nodes, nearest
 * predecessor of key first; 0 when none are known. */
/* Contacts met in this run (not merely loaded from a file). */
uint32_t chord__client_met(const chord_t *c);
/*
 * A plain client's answers remembered: the successor list a checked lookup
 * answer gave for key, a run of consecutive ring members from key's
 * successor on. A later key inside the run has its successors there too,
 * so a get may skip its lookup (CHORD_LOOKUP_F_REMEMBERED). A run may go
 * stale (a server joined inside it, or left): a wrong guess costs the get
 * a miss and a real lookup, never a wrong block, so runs are kept for
 * CHORD__ARC_TTL_US only and never used for puts or roots.
 */
#define CHORD__ARCS_MAX 64
#define CHORD__ARC_TTL_US (120 * 1000000ull)
struct chord__arc {
	struct cfs_id key;
	uint64_t at_us;
	uint32_t n;
	struct cfs_node succ[CFS_MSG_MAX_NODES];
};
/* The successors of key from the freshest run in arcs[0..n) that covers
 * it with at least min(want, CHORD__ARC_MIN) of them after it, younger
 * than CHORD__ARC_TTL_US at now_us; at most want into out. 0: none. */
#define CHORD__ARC_MIN 4
uint32_t chord__arcs_find(const struct chord__arc *arcs, uint32_t n, const struct cfs_id *key,
                          uint64_t now_us, uint32_t want, struct cfs_node *out);
uint32_t chord__client_candidates(const chord_t *c, const struct cfs_id *key, struct cfs_node *out,
                           uint32_t cap);
/* The lookup state machines (no I/O) are in lookup_sm.h. */

/* suspect.c: the table on its own (now_us given, for tests), and c's. */
void chord__suspects_init(struct chord__suspects *s, uint64_t ttl_us);
/* Add or renew id until now + ttl; when full, the entry expiring first
 * makes room. true when id was not a suspect yet. */
bool chord__suspects_add(struct chord__suspects *s, const struct cfs_id *id, const char *why,
                         uint64_t now_us);
bool chord__suspects_has(const struct chord__suspects *s, const struct cfs_id *id, uint64_t now_us);
/* id claimed a key it precedes at now_us: true when that makes it a
 * suspect (CHORD__CLAIM_GRACE_US). Bounded: when full, the oldest first
 * claim makes room. */
bool chord__suspects_strike(struct chord__suspects *s, const struct cfs_id *id, uint64_t now_us);
/* Suspects not yet expired. */
uint32_t chord__suspects_count(const struct chord__suspects *s, uint64_t now_us);
bool chord__suspect_is(const chord_t *c, const struct cfs_id *id, uint64_t now);
/* chord_suspect for a node that claimed a key it precedes: a suspect only
 * on its second claim past the grace (chord__suspects_strike); true when
 * it became one. */
bool chord__suspect_claim(chord_t *c, const struct cfs_id *id, const char *why, uint64_t now);

/* client.c */
/* A lookup answered without a message (res): its callback from the timer,
 * as any lookup's, never from inside this call. */
int chord__lookup_answered(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                            const struct chord_lookup_result *res, chord_lookup_cb cb, void *arg);
/* A contact a save may keep: its index in the learned table, when it was
 * last met, its measured round trip (0: none). */
struct chord__saved {
	uint32_t idx;
	uint64_t seen_us, rtt_us;
};
/* Order v for a save and return how many it keeps (at most keep, the
 * most recently met): the measured first, nearest first, then the rest,
 * the most recently met first. */
uint32_t chord__client_save_order(struct chord__saved *v, uint32_t n, uint32_t keep);
/* The mode a plain client's lookup runs in, for the caller's mode and the
 * client's contacts, delays_known of them with a measured round trip:
 * iterative, the caller's next-hop rule, CLIENT_PAR asks in flight (or
 * the caller's count, if larger) while at most half the delays are known,
 * else one. */
uint32_t chord__client_mode(uint32_t mode, uint32_t contacts, uint32_t delays_known);
int chord__client_lookup(chord_t *c, const struct cfs_id *key, const struct chord_lookup_opts *o,
                  chord_lookup_cb cb, void *arg);
/* Remember a node a lookup showed alive (clients only). */
void chord__client_learn(chord_t *c, const struct cfs_node *n);
/* A contact that did not answer. */
void chord__client_forget(chord_t *c, const struct cfs_id *id);

/* index.c: one IP's index space (PROTOCOL.md "Node IDs") */
/* Does a join lookup's answer for self's own ID name that ID at another
 * address (another process on our IP holds the index)? */
bool chord__index_taken(const struct cfs_node *self, const struct cfs_node *succ, uint32_t n);
/* The indexes (bit i: index i) of the nodes in nodes[] at self's IP but
 * another port: other processes on our IP hold them. */
uint64_t chord__index_others(const struct cfs_addr *self, const struct cfs_node *nodes, uint32_t n);
/* Has every virtual server's join lookup found its index free? */
bool chord__index_all_ok(const chord_t *c);
/* The lowest index whose bit is clear in busy, or -ENOSPC. */
int chord__index_pick(uint64_t busy);
/* v's index is taken: mark it so and give v the lowest index neither taken
 * nor used by this process (new ID). -ENOSPC, logged, when none is left. */
int chord__index_move(chord_t *c, struct chord__vnode *v);

#endif
