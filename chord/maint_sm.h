/*
 * A virtual server's maintenance round as a state machine without I/O
 * (Chord; CFS section 4): joining, stabilize / notify, predecessor probes,
 * fix-fingers with proximity neighbour selection (DHash++ 4.3). Events go
 * in (the stabilization and finger ticks, a GET_PRED reply or failure
 * from the successor, a predecessor probe's result, a finger lookup's
 * result, a join lookup's result); actions come out on the machine's
 * queue (ask the successor, notify it, probe the predecessor, look up a
 * finger's start or our own ID, drop a node, offer one to the tables,
 * found a ring, arm the next tick). maint.c is
 * the libuv driver that carries them out.
 *
 * The round's state is the virtual server's own (struct chord__vnode: its busy
 * flags, miss counts, successor list): the machine reads and writes it and
 * calls table.c's functions that do no I/O (chord__table_set_succs); what
 * reaches other virtual servers or the network (offering a node, dropping
 * one, a message) is an action. A machine lives for one event and what its
 * actions cause: the driver builds it on the stack, feeds the event,
 * carries the actions out in order and frees the queue.
 */
#ifndef CFS_CHORD_MAINT_SM_H
#define CFS_CHORD_MAINT_SM_H

#include "chord/internal.h"

enum chord__mt_act_type {
	CHORD__MTA_ASK_SUCC,   /* GET_PRED to `to`, the successor: its predecessor and list */
	CHORD__MTA_NOTIFY,     /* NOTIFY our successor as the tables name it when carried out
	                        * (an OFFER queued before may have changed it) */
	CHORD__MTA_PROBE_PRED, /* PING `to`, the predecessor */
	CHORD__MTA_DROP,       /* `to` missed `n` probes (last: status): out of every table */
	CHORD__MTA_PRED_LOST,  /* the predecessor `to` missed `n` probes: mark it dead */
	CHORD__MTA_OFFER,      /* offer `to` to the tables (authenticated first) */
	CHORD__MTA_CONSIDER,   /* `to`, authenticated, into every table */
	CHORD__MTA_JOINED,     /* the first round after a join, which took `n` attempts and
	                        * found successor `to`: say so */
	CHORD__MTA_LOOKUP_FINGER, /* look up `key`, finger `k`'s start (pns successors) */
	CHORD__MTA_ARM_FIX,    /* the next finger tick in `ms` (jittered when `jitter`) */
	CHORD__MTA_ARM_STAB,   /* the next stabilization tick, likewise */
	CHORD__MTA_LOOKUP_JOIN, /* look up our own ID (nsucc successors) through the next
	                        * join target */
	CHORD__MTA_JOIN_FAILED, /* the join lookup failed (status; 0: no successor in its
	                        * answer): say so, move on to the next join target */
	CHORD__MTA_NEXT_TARGET, /* move on to the next join target */
	CHORD__MTA_FOUND_RING, /* a ring of our own: every virtual server of the process
	                        * joined; `founded`: cfg.first, after `n` targets tried */
	CHORD__MTA_ADOPTED,    /* the join's answer is our successor list (`to` its first
	                        * node): run the next round soon */
};

struct chord__mt_act {
	enum chord__mt_act_type type;
	struct cfs_node to;
	int status;
	uint32_t n;
	struct cfs_id key;
	int k;
	uint32_t ms;
	bool jitter;
	bool founded;
};

struct chord__mtsm {
	struct chord__vnode *v;          /* read and written; v->c is read only */
	/* The node beyond v's own tables: CFS 4.4 verdicts (chord__auth_check
	 * in the driver, scripted in a test), ctx passed back. */
	chord__auth_fn auth;
	void *ctx;
	struct cfs_actq q;        /* struct chord__mt_act; the driver frees it */
	int guard;                /* fingers tried in this finger tick */
};

/* Take the oldest action; false when none is left. */
static inline bool chord__mt_pop(struct chord__mtsm *sm, struct chord__mt_act *ret)
{
	return cfs_actq_pop(&sm->q, ret, sizeof(*ret));
}

/* The stabilization tick at now: join (v not joined yet), or ask the
 * successor and probe a quiet predecessor; then arm the next tick. */
void chord__mtsm_tick(struct chord__mtsm *sm, uint64_t now);
/* The successor `to` answered GET_PRED (status 0, reply) or did not
 * (status < 0, reply NULL). Not for a cancelled call. */
void chord__mtsm_succ_reply(struct chord__mtsm *sm, const struct cfs_node *to, int status,
                            const struct cfs_msg *reply, uint64_t now);
/* The predecessor probe of `to` ended with status. Not for a cancelled call. */
void chord__mtsm_pred_reply(struct chord__mtsm *sm, const struct cfs_node *to, int status, uint64_t now);
/* Our join lookup ended: status (-ECANCELED: cancelled), the successors
 * of our own ID; held: the driver's index check (index.c) keeps the
 * answer back. */
void chord__mtsm_join_answer(struct chord__mtsm *sm, int status, const struct cfs_node *succ,
                             uint32_t n, bool held, uint64_t now);
/* The finger tick at now: refresh fingers until one needs a lookup, then
 * arm the next tick. */
void chord__mtsm_fix_tick(struct chord__mtsm *sm, uint64_t now);
/* Finger k's lookup ended: status, and the successors of its start. Not
 * for a cancelled lookup. */
void chord__mtsm_finger_answer(struct chord__mtsm *sm, int k, int status, const struct cfs_node *succ,
                               uint32_t n, uint64_t now);
/* The action of this type could not be sent: nothing is in flight (a
 * finger lookup: the tick goes on to the next finger). */
void chord__mtsm_unsent(struct chord__mtsm *sm, enum chord__mt_act_type type, uint64_t now);

#endif
