/*
 * common/rpc.h — the transport's calls, without I/O: the table of calls
 * in flight keyed by request ID, the STP window and its queue, each
 * call's RTO and the per-destination round-trip estimates, the resends
 * of a whole request within its timeout, and the calls that timed out
 * kept to recognise their late replies.
 *
 * It sends nothing and reads no clock. Every entry point takes the time
 * (now, microseconds on cfs_now_us's clock) and queues actions, which
 * the driver (common/transport.c) takes with cfs__rpc_poll and carries
 * out in order: send a request, show an address token, forget a call's
 * pieces, tell a caller how its call ended. It never calls a caller's
 * callback itself. tests/unit/test_rpc.c scripts it with a fake clock.
 * Internal to common/.
 */
#ifndef CFS_COMMON_RPC_H
#define CFS_COMMON_RPC_H

#include "common/cfs.h"
#include "common/heap.h"
#include "common/xfer.h"

/* One call. The driver fills the fields up to `pkt_len` (and the options)
 * and hands it over with cfs__rpc_start; the rest is the machine's. It is
 * the driver's again with its CFS__RPC_DONE action, to free with
 * cfs__call_free. */
struct cfs__call {
	uint64_t reqid;
	struct cfs_addr dst;
	cfs_reply_cb cb;     /* the driver's: never called here */
	void *arg;
	uint8_t type;
	bool has_to;         /* addressed to a node: its reply must name it */
	struct cfs_id to_id;
	uint8_t *pkt;        /* the encoded request (owned), kept to send again */
	size_t pkt_len;
	uint32_t fixed_timeout_ms; /* cfs_call_opts.timeout_ms */
	uint64_t predicted_us;     /* cfs_call_opts.predicted_rtt_us */
	bool background;     /* cfs_call_opts.background: never moves the window */
	bool low_priority;   /* cfs_call_opts.low_priority: background class */
	bool pad;            /* cfs_call_opts.pad */

	uint64_t deadline_us, sent_us, rto_us;
	uint64_t send_seq;   /* the order calls were sent in (cfs__rpc_expire) */
	bool outside;        /* to a silent destination: not in the window */
	uint8_t retries;     /* address validations asked of us so far */
	uint8_t rexmits;     /* times its (whole) request was sent again */
	uint64_t rexmit_us;  /* when it is next sent again */
	size_t rx_idx;       /* in rexmit_heap; SIZE_MAX: not there */
	size_t heap_idx;     /* in calls_heap; SIZE_MAX: not yet sent */
	struct cfs__call *qnext;  /* wait queue */
};

void cfs__call_free(struct cfs__call *c);

/* What the driver is to do, in the order queued. */
enum cfs__rpc_act_type {
	/* Send call's request (pkt). If arm_resend, then say with
	 * cfs__rpc_sent whether its destination has proven its address. */
	CFS__RPC_SEND,
	/* Send call's destination a VALIDATE frame with token, before its
	 * request goes again (the SEND that follows). */
	CFS__RPC_VALIDATE,
	/* A call that was sent has ended: its request's pieces are moot and
	 * its reply is awaited no longer. */
	CFS__RPC_ENDED,
	/* Tell the caller: call->cb(arg, status, reply, {rtt_us, &dst}), then
	 * cfs__call_free(call). reply is the message handed to
	 * cfs__rpc_reply, valid until the driver decodes another. */
	CFS__RPC_DONE,
};

struct cfs__rpc_act {
	uint8_t type;          /* enum cfs__rpc_act_type */
	bool arm_resend;       /* SEND */
	int status;            /* DONE: 0, the reply's status, -ETIMEDOUT, -ECANCELED */
	struct cfs__call *call;     /* valid until its DONE has been carried out */
	const struct cfs_msg *reply; /* DONE, or NULL */
	uint64_t rtt_us;       /* DONE */
	uint8_t token[XFER_TOKEN_BYTES]; /* VALIDATE */
};

/* A call that timed out, kept (in a ring of LATE_MAX) so that a reply
 * arriving after its timeout is known for what it is. */
struct timed_out {
	uint64_t reqid;           /* 0: an empty slot */
	uint64_t sent_us, deadline_us, predicted_us;
	struct cfs_addr dst;
	uint8_t type;
	bool has_to;
	struct cfs_id to_id;
	double window_before;     /* w before this timeout halved it; 0: it did not */
	bool fixed;               /* sent with a fixed timeout */
	bool resent;              /* sent more than once: its round trip is unknown */
};

struct cfs__rpc {
	struct cfs_transport_config cfg; /* with its defaults filled in */
	struct cfs_transport_stats *st;  /* the counters it adds to; window, inflight, srtt: its own */
	struct cfs_htab calls;           /* reqid -> struct cfs__call * */
	struct cfs__call *q_head, *q_tail;    /* waiting for the window */
	struct cfs__heap calls_heap, rexmit_heap;
	bool have_srtt;
	/* destinations whose last call timed out with no answer since;
	 * silent_next is the slot reused when the table is full */
	struct cfs_addr *silent; /* SILENT_MAX entries, allocated at the first timeout */
	uint32_t nsilent, silent_next;
	/* the last LATE_MAX calls that timed out (late_next: the slot next
	 * overwritten), allocated at the first timeout */
	struct timed_out *late;
	uint32_t late_next;
	struct cfs_htab peers;           /* struct peer_key -> struct peer_est */
	uint64_t send_seq;               /* calls sent so far */
	struct cfs_actq acts;            /* struct cfs__rpc_act */
};

/* cfg: defaults already filled in; st: counters it adds to (st->window
 * starts at cfg->window_init). */
void cfs__rpc_init(struct cfs__rpc *r, const struct cfs_transport_config *cfg,
                   struct cfs_transport_stats *st);
/* Release the tables (every call ended or cancelled first). */
void cfs__rpc_free(struct cfs__rpc *r);
/* Is reqid a call not yet ended (sent or waiting)? */
bool cfs__rpc_has(const struct cfs__rpc *r, uint64_t reqid);
/* Is call reqid to `from` in flight (sent, its reply awaited)? */
bool cfs__rpc_awaits(const struct cfs__rpc *r, const struct cfs_addr *from, uint64_t reqid);
/* Take c (its reqid unique): sent now (a SEND), outside the window when
 * it is background or to a silent destination, else queued behind it. */
void cfs__rpc_start(struct cfs__rpc *r, struct cfs__call *c, uint64_t now);
/* c's request went (a SEND with arm_resend): schedule it to go again if
 * it is whole and its destination has proven its address. */
void cfs__rpc_sent(struct cfs__rpc *r, struct cfs__call *c, bool proven, uint64_t now);
/* A reply m from `from`. 1: it ends its call (DONE queued); the driver
 * takes the address as proven. 0: dropped (no call of that kind to that
 * address), counted. -ENOENT: no call has its ID; the driver may claim
 * it, else hands it to cfs__rpc_stray. */
int cfs__rpc_reply(struct cfs__rpc *r, const struct cfs_addr *from, const struct cfs_msg *m,
                   uint64_t now);
/* A reply to no call: counted unmatched; late (the reply to a call that
 * timed out) teaches the estimators and gives the window back. */
void cfs__rpc_stray(struct cfs__rpc *r, const struct cfs_addr *from, const struct cfs_msg *m,
                    uint64_t now);
/* Progress on call reqid's request or reply: its deadline moves on.
 * by_peer: the peer's doing (a piece of its reply, our request's pieces
 * acknowledged), which also counts for the calls sent to it after this
 * one (cfs__rpc_expire); not by_peer: our own upload cap holds it. */
void cfs__rpc_touch(struct cfs__rpc *r, uint64_t reqid, bool by_peer, uint64_t now);
/* `from` withheld its answer to call reqid until we show token: a
 * VALIDATE and the request again (twice at most). */
void cfs__rpc_retry(struct cfs__rpc *r, const struct cfs_addr *from, uint64_t reqid,
                    const uint8_t token[static XFER_TOKEN_BYTES], uint64_t now);
/* Send waiting calls while the window has room (after a reply or a
 * timeout has ended calls). */
void cfs__rpc_pump(struct cfs__rpc *r, uint64_t now);
/* Whole requests due to go again by now: SENDs. */
void cfs__rpc_resend(struct cfs__rpc *r, uint64_t now);
/* The earliest call whose deadline is at or before before_us: its
 * deadline moves on if it waits behind a call its peer has made progress
 * on since it was sent (see rpc.c, behind_progress), else it ends with
 * -ETIMEDOUT. False when there is no such call. */
bool cfs__rpc_expire(struct cfs__rpc *r, uint64_t before_us);
/* End every call, sent or waiting, with -ECANCELED. */
void cfs__rpc_cancel_all(struct cfs__rpc *r);
/* The next action; false when none is queued. */
bool cfs__rpc_poll(struct cfs__rpc *r, struct cfs__rpc_act *ret);
/* The earliest deadline of a call in flight, and of a resend
 * (UINT64_MAX: none). */
uint64_t cfs__rpc_call_due(const struct cfs__rpc *r);
uint64_t cfs__rpc_resend_due(const struct cfs__rpc *r);
/* The smoothed round trip to a, 0 when none was measured. */
uint64_t cfs__rpc_peer_srtt(const struct cfs__rpc *r, const struct cfs_addr *a);

/* Fill in the defaults of a transport's configuration (0: the default)
 * and make it consistent (window_max at least window_init). */
void cfs__config_fill(struct cfs_transport_config *c);

/*
 * The grace before overdue calls expire. A call is not declared lost the
 * moment its deadline passes: the loop may have been busy or the process
 * descheduled, with the reply (or, when peers share this loop, the
 * request) already waiting in a socket buffer. Overdue calls expire only
 * after CFS__GRACE_POLLS further non-blocking socket polls have read what
 * had arrived. Nor while datagrams are still coming in: a daemon that is
 * also a replica can have hundreds of pushed blocks queued ahead of a
 * reply (libuv reads at most 32 datagrams per poll), so a poll that read
 * something does not count, up to CFS__GRACE_DRAIN_MAX of them (with 32
 * datagrams a poll, more than an 8 MiB buffer of 8 KiB blocks).
 */
#define CFS__GRACE_POLLS 2
#define CFS__GRACE_DRAIN_MAX 64
struct cfs__grace {
	int polls;          /* polls left; 0: no grace running */
	uint64_t before_us; /* calls due before this expire at its end */
	uint64_t rx;        /* bytes received at the last poll */
	uint32_t drains;    /* polls that read something */
};
/* Start a grace at now (bytes_in: received so far) if calls are due by
 * now and none is running; true when one started. */
bool cfs__grace_start(struct cfs__grace *g, const struct cfs__rpc *r, uint64_t now,
                      uint64_t bytes_in);
/* A socket poll ended with bytes_in received so far; true when the grace
 * is over and calls due before g->before_us expire now. */
bool cfs__grace_poll(struct cfs__grace *g, uint64_t bytes_in);

#endif
