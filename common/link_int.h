/*
 * common/ internals: what the links' files share (link.c, the per-peer
 * links, their transfers and what they send; link_valid.c, the proof of
 * address; link_reasm.c, the reassembly of pieces and the acks it owes).
 * No I/O, like link.h. Internal to those three files.
 */
#ifndef CFS_COMMON_LINK_INT_H
#define CFS_COMMON_LINK_INT_H

#include "common/link.h"

#define DONE_MAX 4096         /* completed reassemblies remembered for re-acks */

/* One peer we exchange pieces with: its window and its transfers. */
struct cfs__link {
	struct cfs_addr addr;
	struct xfer_cc cc;
	struct xfer_out **out;   /* outgoing transfers, oldest first */
	unsigned nout, cap_out;
	unsigned nin;            /* messages being reassembled from it */
	size_t in_bytes;
	uint64_t due_us;         /* its next timer (UINT64_MAX: none) */
	size_t heap_idx;         /* in links_heap; SIZE_MAX: not there */
	uint64_t last_used_us;
	size_t reply_bytes;      /* held by answers to it (at most OUT_PEER_BYTES) */
	unsigned nreply;         /* ... in so many transfers (at most OUT_PEER_COUNT) */
	uint64_t acked_us;       /* its last ack of anything, 0 never */
	/* it owes an ack since then: its last ack, when pieces were still
	 * in flight after it, or the first piece sent after that (0: it
	 * owes none) */
	uint64_t owed_since_us;
	bool ready;              /* in the ready list */
	struct cfs__link *ready_next;
};

/* What we know of an address's proof of ownership (anti-amplification). */
struct vslot {
	struct peer_key key;
	bool used;
	uint64_t valid_until_us;  /* validated until then */
	uint64_t in, out;         /* bytes from and to it while not validated */
	uint64_t last_us;         /* last heard from */
	uint64_t shown_until_us;  /* we showed it a token: it holds us proven until about then */
	uint64_t padded_us;       /* when we last sent it padding (cfs__links_pad) */
};

struct in_key {
	struct peer_key peer;
	uint64_t reqid;
	uint8_t reply;
	uint8_t pad[7];
};

struct ack_due {
	struct in_key key;
	struct cfs_addr from;
	uint32_t piece_len;  /* the datagram that made the ack due */
};

struct done_in {
	uint16_t npieces;
	uint32_t largest_pn;
};

/* link.c */
void cfs__link_in_key(struct in_key *k, const struct cfs_addr *a, uint64_t reqid, bool reply);
/* Queue an event for cfs__links_poll_event; the caller fills the rest. */
struct cfs__link_event *cfs__link_event_push(struct cfs__links *lk, enum cfs__link_event_type type,
                                             const struct cfs_addr *from, uint64_t reqid);
void cfs__link_whole_push(struct cfs__links *lk, const struct cfs_addr *dst, const uint8_t *p,
                          size_t len, uint64_t now);
/* a's link; create: make one if there is none and room (else NULL). */
struct cfs__link *cfs__link_get(struct cfs__links *lk, const struct cfs_addr *a, bool create);

/* link_valid.c: a VALIDATE frame from an address (its token checked). */
void cfs__link_on_validate(struct cfs__links *lk, const struct cfs_addr *from, const uint8_t *p,
                           size_t len, uint64_t now);

/* link_reasm.c: a PIECE frame; reassemblies idle past reasm_idle_ms. */
void cfs__link_on_piece(struct cfs__links *lk, const struct cfs_addr *from, const uint8_t *b,
                        size_t len, uint64_t now);
void cfs__link_sweep_stale(struct cfs__links *lk, uint64_t now);

#endif
