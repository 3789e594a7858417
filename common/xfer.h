/*
 * common/xfer.h — the kinds of datagram, and messages larger than one
 * safe datagram: the frames that carry them (pieces, acknowledgements,
 * address validation), the sending and receiving state machines of one
 * transfer, and the per-peer congestion controller. No sockets and no
 * clock here: every function takes the time and returns what to do, so
 * a unit test can script a lost piece, a reordered ack or a peer that
 * stops.
 *
 * Internal to common/: the links (common/link.c) use it, the transport
 * classifies datagrams with it; tests include it.
 * The wire layout is in docs/PROTOCOL.md ("Datagrams and pieces").
 */
#ifndef CFS_COMMON_XFER_H
#define CFS_COMMON_XFER_H

#include "common/cfs.h"

/* ------------------------------------------------------------ datagram kinds */

/*
 * Every datagram the transport sends or takes, by its first byte: a
 * whole message starts with a msgpack fixarray byte (0x90-0x9f); a whole
 * request in the background class with XFER_BACKGROUND_PREFIX, then the
 * message (its answer comes back in the background class too); the
 * frames below with their own bytes, none of them a fixarray byte or the
 * prefix.
 */
#define XFER_BACKGROUND_PREFIX 0x42 /* 'B' */
/* A datagram of padding, read no further: it only counts in the bytes its
 * receiver has had from the sender (link_valid.c, cfs__links_pad). */
#define XFER_PADDING 0x5a /* 'Z' */
#define XFER_PIECE    0x50 /* 'P' */
#define XFER_ACK      0x41 /* 'A' */
#define XFER_RETRY    0x59 /* 'Y': prove your address with this token */
#define XFER_VALIDATE 0x56 /* 'V': the token, proving the address */

enum xfer_kind {
	XFER_KIND_MALFORMED,  /* empty, or a first byte of no kind */
	XFER_KIND_MESSAGE,    /* a whole message */
	XFER_KIND_MESSAGE_BG, /* XFER_BACKGROUND_PREFIX and a whole message */
	XFER_KIND_PIECE,
	XFER_KIND_ACK,
	XFER_KIND_RETRY,
	XFER_KIND_VALIDATE,
	XFER_KIND_PADDING,
};

/* The kind of a datagram of len bytes (its frame is not decoded here). */
enum xfer_kind cfs_xfer_kind(const uint8_t *p, size_t len);

/* A peer's address as the key of a table (links, estimates, versions):
 * every byte set, so that keys compare with memcmp and hash as bytes. */
struct peer_key {
	uint8_t ip[16];
	uint16_t port, family;
};
void cfs__peer_key(struct peer_key *k, const struct cfs_addr *a);

#define XF_REPLY      0x01 /* piece and ack: of a reply (else of a request) */
#define XF_BACKGROUND 0x02 /* piece: background class */
#define XF_COMPLETE   0x02 /* ack: every piece is held */

#define XFER_PIECE_HDR 20
#define XFER_PIECE_DATA (CFS_DGRAM_SAFE - XFER_PIECE_HDR)
#define XFER_PIECES_MAX ((CFS_MSG_MAX + XFER_PIECE_DATA - 1) / XFER_PIECE_DATA)
#define XFER_ACK_HDR 19
#define XFER_ACK_BITMAP_MAX 64
#define XFER_TOKEN_BYTES 16
#define XFER_RETRY_LEN (10 + XFER_TOKEN_BYTES)
#define XFER_VALIDATE_LEN (1 + XFER_TOKEN_BYTES)

/* The pieces a message of len bytes travels as. */
static inline unsigned cfs_xfer_npieces(size_t len)
{
	return (unsigned)((len + XFER_PIECE_DATA - 1) / XFER_PIECE_DATA);
}

/* ------------------------------------------------------------ frames */

struct xfer_piece {
	uint8_t flags;
	uint64_t reqid;
	uint32_t msg_len, pn;
	uint16_t index;
	const uint8_t *data; /* borrowed from the datagram */
	size_t len;
};

/* Decode a piece; -EPROTO with *why for a wrong length, a message length
 * outside (CFS_DGRAM_SAFE, CFS_MSG_MAX], an index past the last piece, or
 * unknown flags. */
int cfs_xfer_piece_decode(const uint8_t *p, size_t len, struct xfer_piece *ret,
                      const char **why) CFS_WUR;
/* Write piece index of msg (msg_len bytes) into out (CFS_DGRAM_SAFE bytes);
 * returns the datagram's length. */
size_t cfs_xfer_piece_encode(uint8_t *out, uint8_t flags, uint64_t reqid, const uint8_t *msg,
                         uint32_t msg_len, uint32_t pn, uint16_t index);

struct xfer_ack {
	uint8_t flags;
	uint64_t reqid;
	uint32_t largest_pn;
	uint32_t ack_delay_us;
	uint16_t first_missing;
	uint8_t nbitmap; /* bytes */
	uint8_t bitmap[XFER_ACK_BITMAP_MAX];
};
int cfs_xfer_ack_decode(const uint8_t *p, size_t len, struct xfer_ack *ret, const char **why) CFS_WUR;
/* out holds XFER_ACK_HDR + XFER_ACK_BITMAP_MAX bytes; returns the length. */
size_t cfs_xfer_ack_encode(uint8_t *out, const struct xfer_ack *a);

int cfs_xfer_retry_decode(const uint8_t *p, size_t len, uint64_t *ret_reqid,
                      uint8_t token[static XFER_TOKEN_BYTES]) CFS_WUR;
size_t cfs_xfer_retry_encode(uint8_t out[static XFER_RETRY_LEN], uint64_t reqid,
                         const uint8_t token[static XFER_TOKEN_BYTES]);
int cfs_xfer_validate_decode(const uint8_t *p, size_t len, uint8_t token[static XFER_TOKEN_BYTES]) CFS_WUR;
size_t cfs_xfer_validate_encode(uint8_t out[static XFER_VALIDATE_LEN],
                            const uint8_t token[static XFER_TOKEN_BYTES]);

/* The address token: a keyed BLAKE2b of the address and a coarse epoch. */
void cfs_xfer_token(uint8_t out[static XFER_TOKEN_BYTES], const uint8_t key[static 32],
                const struct cfs_addr *a, uint64_t epoch);

/* ------------------------------------------------------------ congestion */

/*
 * One peer's congestion controller (RFC 9002 section 7, in bytes): slow
 * start and congestion avoidance, one halving per recovery period, a
 * minimum of two pieces, pacing at 1.25·cwnd/srtt with a burst of the
 * initial window. Background transfers (repair, sync, cache pushes) also
 * answer to a LEDBAT window (RFC 6817) driven by queueing delay, which
 * this measures as the round trip above the smallest one seen (no one-way
 * timestamps on the wire); they never exceed the foreground window.
 */
struct xfer_cc {
	uint32_t cwnd, ssthresh;
	uint32_t in_flight;                  /* every class */
	uint32_t bg_cwnd, bg_in_flight;      /* background class */
	uint64_t recovery_start_us;          /* losses of pieces sent before this are one event */
	double srtt_us, rttvar_us, min_rtt_us, latest_rtt_us;
	bool has_rtt;
	uint64_t pace_next_us;               /* the next piece may leave then */
	uint32_t ledbat_target_us;
};

#define XFER_INIT_CWND (10 * CFS_DGRAM_SAFE)
#define XFER_MIN_CWND (2 * CFS_DGRAM_SAFE)
#define XFER_LEDBAT_TARGET_US 25000

void cfs_xfer_cc_init(struct xfer_cc *cc, uint32_t ledbat_target_us);
/* A round-trip sample (ack delay already taken out by the caller). */
void cfs_xfer_cc_rtt(struct xfer_cc *cc, uint64_t rtt_us, uint64_t ack_delay_us);
/* May a piece of bytes go now? Else *ret_wait_us says for how long pacing
 * holds it (0: the window is full; an ack must come first). */
bool cfs_xfer_cc_can_send(const struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t now,
                      uint64_t *ret_wait_us);
void cfs_xfer_cc_sent(struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t now);
void cfs_xfer_cc_acked(struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t sent_us);
/* bytes declared lost, the newest of them sent at sent_us. */
void cfs_xfer_cc_lost(struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t sent_us, uint64_t now);
/* bytes no longer in flight for another reason (a transfer abandoned). */
void cfs_xfer_cc_forget(struct xfer_cc *cc, uint32_t bytes, bool bg);
/* The probe timeout (RFC 9002 6.2.1, max_ack_delay included). */
uint64_t cfs_xfer_cc_pto_us(const struct xfer_cc *cc);
/* How long after a later piece was acked an unacked one counts as lost
 * (RFC 9002 6.1.2: 9/8 of the larger of srtt and the latest RTT, ≥ 1 ms). */
uint64_t cfs_xfer_cc_loss_delay_us(const struct xfer_cc *cc);

/* ------------------------------------------------------------ sending */

enum xfer_piece_state { XP_UNSENT, XP_INFLIGHT, XP_LOST, XP_ACKED };

struct xfer_slot {
	uint32_t pn;       /* of its latest transmission */
	uint64_t sent_us;
	uint8_t state;     /* enum xfer_piece_state */
	bool counted;      /* its bytes count in the window */
};

#define XFER_PN_RING 512 /* send times kept per packet number, for RTT samples */
#define XFER_PTO_SHIFT_MAX 8 /* the probe timeout doubles up to 256 times its base */
/* A transfer with nothing acked for this long is abandoned: its peer is
 * gone, or its caller gave up (the call timed out; replies are not taken
 * for calls that ended). A busy peer's loop can stall for a second. */
#define XFER_STALL_US (5ull * 1000000)

/*
 * One message on its way out, as pieces. Pieces are sent lost-first, then
 * in order; each transmission gets a new packet number, so an ack names
 * exactly the transmission it saw (no retransmission ambiguity) and a
 * piece is lost when a piece sent three numbers later was acked, or when
 * one sent later was acked and this one is older than the loss delay
 * (RFC 9002 6.1). A probe timeout with no ack resends the oldest pieces
 * in flight (up to two), the timeout doubling each time; XFER_STALL_US
 * with nothing acked abandons the transfer.
 */
struct xfer_out {
	uint64_t reqid;
	uint8_t flags;      /* XF_REPLY, XF_BACKGROUND */
	uint8_t *msg;       /* owned */
	uint32_t len;
	uint16_t npieces, next_new, nacked, nlost;
	uint32_t next_pn;
	uint32_t largest_acked_pn;
	bool any_acked;
	uint8_t pto_count;
	uint64_t last_send_us, last_ack_us, created_us;
	uint64_t pn_sent_us[XFER_PN_RING];
	struct xfer_slot slot[];
};

/* What an ack did. */
struct xfer_ack_result {
	uint32_t acked_bytes;     /* newly acked and counted in the window */
	uint64_t acked_sent_us;   /* the newest of them was sent then */
	uint32_t lost_bytes;      /* newly declared lost */
	uint64_t lost_sent_us;    /* the newest of them was sent then */
	uint64_t rtt_us;          /* a round-trip sample, 0 if none */
	uint32_t probe_bytes;     /* resent on a probe timeout: out of the window, no reduction */
	bool progress;            /* something newly acked */
	bool complete;            /* every piece acked */
};

/* A transfer of msg (len bytes, > CFS_DGRAM_SAFE), which it takes over. */
struct xfer_out *cfs_xfer_out_new(uint64_t reqid, uint8_t flags, uint8_t *msg, size_t len,
                              uint64_t now);
void cfs_xfer_out_free(struct xfer_out *x);
/* The pieces to send next, lost ones first: up to max indexes into idx,
 * the message's last piece (the only short one) always last. */
unsigned cfs_xfer_out_peek(const struct xfer_out *x, uint16_t *idx, unsigned max);
/* Piece idx was handed to the socket now; returns its packet number. */
uint32_t cfs_xfer_out_sent(struct xfer_out *x, uint16_t idx, uint64_t now);
/* The bytes of piece idx as sent (a full piece but the last). */
uint32_t cfs_xfer_out_piece_len(const struct xfer_out *x, uint16_t idx);
/* An ack: the round-trip sample, the pieces it holds and the losses it
 * reveals, all told to cc (the peer's window); r says what happened. */
void cfs_xfer_out_on_ack(struct xfer_out *x, const struct xfer_ack *a, uint64_t now,
                     struct xfer_cc *cc, struct xfer_ack_result *r);
/* Time-threshold losses and probe timeouts due at now, told to cc.
 * Returns -ETIMEDOUT when the transfer should be abandoned (XFER_STALL_US
 * since the last ack, or since it started) (the caller
 * then takes cfs_xfer_out_counted() out of the window). */
int cfs_xfer_out_on_timer(struct xfer_out *x, uint64_t now, struct xfer_cc *cc,
                      struct xfer_ack_result *r);
/* When xfer_out_on_timer next has something to do (UINT64_MAX: never). */
uint64_t cfs_xfer_out_deadline(const struct xfer_out *x, const struct xfer_cc *cc);
/* Is x waiting on us alone (our upload cap), not on its peer? Nothing of
 * it is in flight, and its peer owes no acknowledgement (owed_since_us
 * 0), or has owed one for less than XFER_STALL_US (owed_since_us: its
 * last ack, or the first piece sent to it after that, of any transfer).
 * Only then may its stall clock be held back: a transfer whose peer
 * stopped answering is abandoned as any other. */
bool cfs_xfer_out_waits_on_us(const struct xfer_out *x, uint64_t owed_since_us, uint64_t now);
/* Bytes of x still counted in the window (for an abandoned transfer). */
uint32_t cfs_xfer_out_counted(const struct xfer_out *x);
static inline bool cfs_xfer_out_done(const struct xfer_out *x) { return x->nacked == x->npieces; }
static inline bool cfs_xfer_out_bg(const struct xfer_out *x) { return x->flags & XF_BACKGROUND; }

/* ------------------------------------------------------------ receiving */

/* One message being reassembled. */
struct xfer_in {
	uint64_t reqid;
	uint8_t flags;        /* XF_REPLY of the message */
	uint32_t len;
	uint16_t npieces, nheld, first_missing;
	uint32_t largest_pn;
	uint64_t largest_pn_us;  /* when it arrived */
	uint64_t last_rx_us;
	bool ack_pending;
	uint8_t held[(XFER_PIECES_MAX + 7) / 8];
	uint8_t *buf;         /* len bytes */
};

struct xfer_in *cfs_xfer_in_new(const struct xfer_piece *p, uint64_t now);
void cfs_xfer_in_free(struct xfer_in *x);
/* Take a piece: 0 new, 1 a duplicate, -EPROTO when it contradicts the
 * transfer (another length). */
int cfs_xfer_in_piece(struct xfer_in *x, const struct xfer_piece *p, uint64_t now) CFS_WUR;
static inline bool cfs_xfer_in_complete(const struct xfer_in *x) { return x->nheld == x->npieces; }
/* The ack to send now. */
void cfs_xfer_in_ack(struct xfer_in *x, uint64_t now, struct xfer_ack *a);

#endif
