/*
 * common/link.h — the transport's links, without I/O: per peer, messages
 * longer than one datagram as pieces (their windows, acks, reassembly and
 * its bounds), and the proof of address that bounds what goes to a
 * stranger (RFC 9000 8.1).
 *
 * It sends nothing and reads no clock. Its inputs are the datagrams that
 * came in (cfs__links_datagram, cfs__links_note_in), the messages to send
 * (cfs__links_send and friends), the end of a call (cfs__links_call_end)
 * and the time, which every entry point takes. Its outputs are polled:
 * the datagrams to transmit (cfs__links_poll_transmit; pieces then say
 * with cfs__links_transmitted how many the socket took), the events for
 * the layer above (cfs__links_poll_event: a message reassembled, a token
 * to show, progress on a call) and its next deadline
 * (cfs__links_deadline, then cfs__links_timeout). The driver
 * (common/transport.c) moves them; tests/unit/test_link.c scripts them
 * with a fake clock. Internal to common/.
 */
#ifndef CFS_COMMON_LINK_H
#define CFS_COMMON_LINK_H

#include "common/cfs.h"
#include "common/heap.h"
#include "common/upcap.h"
#include "common/xfer.h"

#define LINK_BATCH 64 /* pieces handed out at once (one GSO send) */

/* A datagram, or a batch of pieces, to transmit. */
struct cfs__tx {
	struct cfs_addr dst;
	const uint8_t *p;   /* len bytes, valid until the next call into the links */
	size_t len;
	/* 0: one whole datagram, already counted: send it as it is. Else
	 * npieces pieces back to back, lens[i] bytes each, every one but the
	 * last CFS_DGRAM_SAFE: report with cfs__links_transmitted. */
	unsigned npieces;
	const size_t *lens;
};

enum cfs__link_event_type {
	/* A message reassembled from pieces: msg, len bytes, the taker's to
	 * free(); low_priority: it came in the background class. */
	CFS__LINK_MESSAGE,
	/* from withheld its answer to our call reqid until we show token. */
	CFS__LINK_RETRY,
	/* Progress on our call reqid: its request's pieces acknowledged, a
	 * new piece of its reply (by_peer), or its pieces held by our own
	 * upload cap (not by_peer). */
	CFS__LINK_ALIVE,
};

struct cfs__link_event {
	uint8_t type;          /* enum cfs__link_event_type */
	bool low_priority;
	bool by_peer;          /* ALIVE: the peer's doing, not our upload cap's */
	struct cfs_addr from;
	uint64_t reqid;
	uint8_t *msg;
	size_t len;
	uint8_t token[XFER_TOKEN_BYTES];
};

struct cfs__link;
struct vslot;
struct in_key;
struct ack_due;

/* A whole datagram waiting in the queue of cfs__links_poll_transmit. */
struct link_dgram {
	struct cfs_addr dst;
	size_t len;
	uint8_t data[CFS_DGRAM_SAFE];
};

/* The service of one link, handed out batch by batch (link.c). */
struct link_svc {
	struct cfs__link *l;        /* being served; NULL: none */
	int pass;              /* 0: foreground transfers, 1: background */
	unsigned j;            /* its transfer being served */
	int next;              /* after the batch: the same transfer, the next, or stop */
	uint64_t pace;         /* pacing holds the link until then (0: it does not) */
	struct xfer_out *x;    /* the batch handed out: of this transfer */
	unsigned n, k;         /* k of the n pieces x had to send */
	bool held;             /* x is held by its answer's budget */
	uint16_t idx[LINK_BATCH];
	size_t lens[LINK_BATCH];
	struct cfs__up_debit debit[LINK_BATCH]; /* what each piece took of the upload cap */
};

struct cfs__links {
	struct cfs_transport_config cfg; /* with its defaults filled in */
	struct cfs_transport_stats *st;  /* the counters it adds to */
	struct cfs__upcap up;            /* the upload cap (cfg.upload_bytes_per_s) */
	struct cfs_htab links;     /* struct peer_key -> struct cfs__link * */
	struct cfs__heap links_heap;    /* links by their next timer */
	struct cfs_htab ins;       /* struct in_key -> struct xfer_in * */
	struct cfs_htab awaited;   /* struct in_key: replies to our requests, awaited */
	size_t in_bytes;           /* being reassembled, every peer */
	size_t out_bytes;          /* held by outgoing transfers */
	uint64_t xfer_inflight;    /* bytes in flight, every peer */
	uint64_t in_sweep_us;      /* next look for stale reassemblies */
	struct ack_due *ack_due;   /* reassemblies owed an ack after this read batch */
	unsigned nack_due, cap_ack_due;
	struct vslot *vslots;      /* cfg.validation_slots entries */
	uint8_t token_key[32];
	uint8_t vslot_key[16];     /* SipHash key placing addresses in vslots */
	size_t in_reply_bytes;     /* being reassembled for our own calls */
	unsigned nin_requests;     /* requests being reassembled */
	struct cfs_htab done_map;  /* struct in_key -> struct done_in: completed lately */
	struct in_key *done_ring;  /* the order they completed in (DONE_MAX) */
	unsigned done_next;
	bool sock_blocked;         /* pieces wait for cfs__links_writable */
	bool bound_waiting;        /* pieces wait for the process-wide bound */
	bool up_blocked;           /* a piece waited for the upload cap (this service) */

	/* What cfs__links_poll_transmit hands out next, in this order: */
	struct cfs_actq whole;     /* struct link_dgram: whole datagrams, as queued */
	struct cfs__link *ready_head, *ready_tail; /* links to serve (sends, acks, cancels) */
	struct link_svc svc;       /* the link being served */
	uint64_t timer_now;        /* cfs__links_timeout(now) not yet done: its now */
	bool timer_pending;
	bool check_bound;          /* then: serve all if the bound has room again */
	bool all_active;           /* serving every link with transfers, from all_pos */
	size_t all_pos;
	struct link_dgram tx;      /* the whole datagram handed out */
	struct cfs_actq events;    /* struct cfs__link_event */
};

/* cfg: defaults filled in; st: the counters it adds to. */
void cfs__links_init(struct cfs__links *lk, const struct cfs_transport_config *cfg,
                     struct cfs_transport_stats *st);
/* Drop every transfer, reassembly and queued output (the transport closes). */
void cfs__links_close(struct cfs__links *lk);
/* Close, and release the memory. */
void cfs__links_free(struct cfs__links *lk);

/* Bytes from an address (every datagram): its answer budget grows. */
void cfs__links_note_in(struct cfs__links *lk, const struct cfs_addr *from, size_t len,
                        uint64_t now);
/* A datagram of a frame kind (piece, ack, retry, validate). */
void cfs__links_datagram(struct cfs__links *lk, const struct cfs_addr *from, enum xfer_kind kind,
                         const uint8_t *p, size_t len, uint64_t now);
/* After a read batch: the acks it owes. */
void cfs__links_flush_acks(struct cfs__links *lk, uint64_t now);
/* Send an encoded message of any size (copied): whole, or as pieces. A
 * request's reply is awaited (its pieces taken) until cfs__links_call_end.
 * 0, -EMSGSIZE, or -ENOBUFS when the bounds on what is held refuse it. */
int cfs__links_send(struct cfs__links *lk, const struct cfs_addr *dst, const uint8_t *p, size_t len,
                    uint64_t reqid, bool is_reply, bool low_priority, uint64_t now);
/* One whole datagram as it is, counted against the upload cap (a hello,
 * an answer cfs__links_answer_take allowed). */
void cfs__links_send_raw(struct cfs__links *lk, const struct cfs_addr *dst, const uint8_t *p,
                         size_t len, uint64_t now);
/* Answer a request of in_len bytes with a token to echo (budget allowing). */
void cfs__links_send_retry(struct cfs__links *lk, const struct cfs_addr *dst, uint64_t reqid,
                           size_t in_len, uint64_t now);
/* Show dst the token it gave us (a VALIDATE frame). */
void cfs__links_validate(struct cfs__links *lk, const struct cfs_addr *dst,
                         const uint8_t token[static XFER_TOKEN_BYTES], uint64_t now);
/* A request whose answer may be long goes to dst next: a datagram of
 * padding first, unless dst holds us proven or has had padding lately
 * (link_valid.c). True if one was queued. */
bool cfs__links_pad(struct cfs__links *lk, const struct cfs_addr *dst, uint64_t now);
/* Our call reqid to dst ended: stop sending its request's pieces, and
 * take no more pieces of its reply. */
void cfs__links_call_end(struct cfs__links *lk, const struct cfs_addr *dst, uint64_t reqid);
/* Timers due at now (probe timeouts, losses, pacing, stale reassemblies). */
void cfs__links_timeout(struct cfs__links *lk, uint64_t now);
/* The socket takes datagrams again after a batch it refused. */
void cfs__links_writable(struct cfs__links *lk);

/* Has a proven its address (no bound on answers to it)? */
bool cfs__links_proven(struct cfs__links *lk, const struct cfs_addr *a, uint64_t now);
/* a echoed one of our random request IDs: it is proven. */
void cfs__links_validated(struct cfs__links *lk, const struct cfs_addr *a, uint64_t now);
/* May len bytes go to an unproven dst, answering in_len bytes? Counted. */
bool cfs__links_answer_take(struct cfs__links *lk, const struct cfs_addr *dst, size_t len,
                            size_t in_len, uint64_t now);
/* Is our answer to (from, reqid) still going out in pieces? */
bool cfs__links_answering(struct cfs__links *lk, const struct cfs_addr *from, uint64_t reqid);

/* The next datagram or batch to transmit; false when nothing may go now. */
bool cfs__links_poll_transmit(struct cfs__links *lk, uint64_t now, struct cfs__tx *ret);
/* The batch of pieces last handed out: the socket took the first sent;
 * failed: an error lost them all (they count as sent, and lost). Fewer
 * than all, not failed: the socket is full until cfs__links_writable. */
void cfs__links_transmitted(struct cfs__links *lk, unsigned sent, bool failed, uint64_t now);
/* The next event; false when none is queued. */
bool cfs__links_poll_event(struct cfs__links *lk, struct cfs__link_event *ret);
/* When cfs__links_timeout is next due (UINT64_MAX: never). */
uint64_t cfs__links_deadline(const struct cfs__links *lk);
/* The windows' sum and the number of links, into st. */
void cfs__links_stats(const struct cfs__links *lk, struct cfs_transport_stats *st);

#endif
