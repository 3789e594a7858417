/*
 * common/transport_int.h — what common/transport.c (calls, replies,
 * timeouts, the STP window) and common/link.c (per-peer links: messages
 * as pieces, their acks and windows, address validation) share. Internal
 * to common/.
 */
#ifndef CFS_COMMON_TRANSPORT_INT_H
#define CFS_COMMON_TRANSPORT_INT_H

#include "common/cfs.h"
#include "common/heap.h"
#include "common/rpc.h"
#include "common/udp.h"
#include "common/upcap.h"
#include "common/xfer.h"

/* RFC 6298 2.2-2.3, per destination: its smoothed round trip and mean
 * deviation, from the replies to calls with a computed RTO. */
struct peer_est {
	double srtt_us, rttvar_us;
};

struct delayed {
	uint64_t due_us;
	size_t heap_idx;
	struct cfs_addr dst;
	size_t len;
	uint8_t data[];
};

/* One peer we exchange pieces with: its window and its transfers. */
struct link {
	struct cfs_addr addr;
	struct xfer_cc cc;
	struct xfer_out **out;   /* outgoing transfers, oldest first */
	unsigned nout, cap_out;
	unsigned nin;            /* messages being reassembled from it */
	size_t in_bytes;
	uint64_t due_us;         /* its next timer (UINT64_MAX: none) */
	size_t heap_idx;         /* in links_heap; SIZE_MAX: not there */
	uint64_t last_used_us;
	bool blocked;            /* the socket buffer was full */
	size_t reply_bytes;      /* held by answers to it (at most OUT_PEER_BYTES) */
	unsigned nreply;         /* ... in so many transfers (at most OUT_PEER_COUNT) */
	uint64_t acked_us;       /* its last ack of anything, 0 never */
	/* it owes an ack since then: its last ack, when pieces were still
	 * in flight after it, or the first piece sent after that (0: it
	 * owes none) */
	uint64_t owed_since_us;
};

/* What we know of an address's proof of ownership (anti-amplification). */
struct vslot {
	struct peer_key key;
	bool used;
	uint64_t valid_until_us;  /* validated until then */
	uint64_t in, out;         /* bytes from and to it while not validated */
	uint64_t last_us;         /* last heard from */
};
#define VSLOTS 4096 /* the default of cfg.validation_slots */

struct cfs_transport {
	uv_loop_t *loop;
	struct cfs__upcap up; /* the upload cap (cfg.upload_bytes_per_s) */
	struct cfs_udp sock;
	uv_poll_t poll;
	int poll_events;
	uv_timer_t timer;
	uv_idle_t idle;   /* keeps the poll from blocking during a grace */
	uv_check_t check; /* runs after each poll: ends the grace */
	int grace_polls;  /* polls left before overdue calls expire */
	uint64_t grace_before_us; /* calls due before this expire then */
	uint64_t grace_rx;        /* bytes_in at the last grace poll */
	uint32_t grace_drains;    /* grace polls that read something */
	int handles_open;
	bool closing;
	struct cfs_transport_config cfg;
	cfs_request_cb on_request;
	void *arg;

	struct cfs__rpc rpc;    /* the calls (common/rpc.c) */
	bool rpc_draining;      /* its actions are being carried out */
	struct heap delay_heap, links_heap;
	uint64_t timer_due_us; /* UINT64_MAX: idle */

	bool has_model;
	struct cfs_netmodel model;

	const struct cfs_coord *coord; /* stamped on everything sent */

	struct cfs_transport_stats st;

	struct cfs_htab vers;  /* struct peer_key -> struct peer_ver (version.c) */

	/* pieces (common/link.c) */
	struct cfs_htab links;     /* struct peer_key -> struct link * */
	struct cfs_htab ins;       /* struct in_key -> struct xfer_in * */
	size_t in_bytes;           /* being reassembled, every peer */
	size_t out_bytes;          /* held by outgoing transfers */
	uint64_t xfer_inflight;    /* bytes in flight, every peer */
	uint64_t in_sweep_us;      /* next look for stale reassemblies */
	struct ack_due *ack_due;   /* reassemblies owed an ack after this read batch */
	unsigned nack_due, cap_ack_due;
	unsigned done_next;
	struct vslot *vslots;      /* cfg.validation_slots entries */
	uint8_t token_key[32];
	uint8_t vslot_key[16];     /* SipHash key placing addresses in vslots */
	size_t in_reply_bytes;     /* being reassembled for our own calls */
	unsigned nin_requests;     /* requests being reassembled */
	struct cfs_htab done_map;  /* struct in_key -> struct done_in: completed lately */
	struct in_key *done_ring;  /* the order they completed in (DONE_MAX) */
	struct backlog *bl_head, *bl_tail; /* whole datagrams the full socket refused */
	size_t bl_bytes;
	bool sock_blocked;         /* pieces wait for the socket to take more */
	bool bound_waiting;        /* pieces wait for the process-wide bound */
	bool up_blocked;           /* a piece waited for the upload cap (link_service) */
};

/* version.c: which version each peer speaks, and its clock */
void cfs__ver_init(cfs_transport_t *t);
void cfs__ver_free(cfs_transport_t *t);
/* A message decoded from `from` (at our wall time wall_ms). */
void cfs__ver_heard(cfs_transport_t *t, const struct cfs_addr *from, const struct cfs_msg *m,
                    uint64_t now_us, uint64_t wall_ms);
/* The version to send dst; *ret_probe: send cfs__ver_probe too. */
uint8_t cfs__ver_for(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t now_us, bool *ret_probe);
void cfs__ver_probe(cfs_transport_t *t, const struct cfs_addr *dst);
/* Is this reply the answer to our probe of from? */
bool cfs__ver_probe_answer(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid);

/* transport.c */
void cfs__arm_timer(cfs_transport_t *t);
/* Send one datagram (through the network model when there is one). */
void cfs__transmit(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len);
/* The upload cap (common/upcap.h). up_take: may b bytes of pieces go now
 * (background only above a reserve kept for the foreground)? If so,
 * *ret_debit is what they took; if not, *wait_us says when.
 * up_charge: whole datagrams, sent regardless, counted. */
bool cfs__up_take(cfs_transport_t *t, uint32_t b, bool bg, uint64_t now, uint64_t *wait_us,
                  struct cfs__up_debit *ret_debit);
void cfs__up_charge(cfs_transport_t *t, size_t len);
/* A piece that took its bytes and then did not go: what it took comes back. */
void cfs__up_give_back(cfs_transport_t *t, const struct cfs__up_debit *d);
/* A piece through the network model: cfs__transmit without the charge. */
void cfs__transmit_piece(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len);
/* A whole message arrived (from a datagram or a completed reassembly). */
void cfs__on_message(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *p, size_t len,
                    bool low_priority);
/* Is call reqid to from in flight (its reply awaited)? */
bool cfs__call_awaits(const cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid);
/* Progress on call reqid's request or reply: its deadline moves on. */
void cfs__call_touch(cfs_transport_t *t, uint64_t reqid);
/* Pieces could not all be sent: call cfs__on_writable when they can. */
void cfs__want_writable(cfs_transport_t *t);
/* An answered call's address is proven (it echoed our random reqid). */
void cfs__validated(cfs_transport_t *t, const struct cfs_addr *a);

/* link.c */
int cfs__links_init(cfs_transport_t *t);
void cfs__links_free(cfs_transport_t *t);
/* Send an encoded message of any size: whole, or as pieces (copied). */
int cfs__send_msg(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len,
                 uint64_t reqid, bool is_reply, bool low_priority);
/* Has the address proven itself (no bound on answers to it)? */
bool cfs__proven(cfs_transport_t *t, const struct cfs_addr *a);
/* May len bytes go to an unproven dst, answering in_len bytes? Counted. */
bool cfs__answer_take(cfs_transport_t *t, const struct cfs_addr *dst, size_t len, size_t in_len);
/* Answer a request of in_len bytes with a token to echo (budget allowing). */
void cfs__send_retry(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t reqid, size_t in_len);
/* Datagrams that are not whole messages. */
void cfs__on_frame(cfs_transport_t *t, const struct cfs_addr *from, enum xfer_kind kind,
                   const uint8_t *p, size_t len);
/* Bytes from an address: its budget grows. */
void cfs__note_in(cfs_transport_t *t, const struct cfs_addr *from, size_t len);
/* After a read batch: send the acks it owes. */
void cfs__flush_acks(cfs_transport_t *t);
/* Links whose timers are due; stale reassemblies. */
void cfs__links_timer(cfs_transport_t *t, uint64_t now);
uint64_t cfs__links_due(const cfs_transport_t *t);
/* The socket can take more: send what waited. */
void cfs__on_writable(cfs_transport_t *t);
/* Drop every transfer (close). */
void cfs__links_close(cfs_transport_t *t);
void cfs__links_stats(const cfs_transport_t *t, struct cfs_transport_stats *st);
/* Call reqid to dst ended: stop sending its request's pieces. */
void cfs__cancel_send(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t reqid);
/* A request from (from, reqid) whose answer is still going out in pieces:
 * a copy sent again is not answered twice. */
bool cfs__answering(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid);
/* A peer withheld its answer to our call reqid until we show token. */
void cfs__on_retry(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid,
                  const uint8_t token[static XFER_TOKEN_BYTES]);

#endif
