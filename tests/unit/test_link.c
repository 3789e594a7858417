/* The links (common/link.h), scripted with a fake clock: no socket, no
 * loop. Each test feeds datagrams and sends, plays the driver's part
 * (take what is to be transmitted, say how much the socket took, take the
 * events) and checks what comes out. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/link.h"

#define MS 1000ull
#define T0 (1000 * MS)

static struct cfs__links L;
static struct cfs_transport_stats ST;
static struct cfs_transport_config CFG;
static struct cfs_addr A, B;

/* What the driver saw go out. */
struct out {
	unsigned dgrams, acks, complete_acks, retries, validates, pieces, batches;
	uint8_t last_retry[XFER_RETRY_LEN];
	size_t bytes;
};

static void setup(void)
{
	memset(&ST, 0, sizeof(ST));
	cfs_transport_config_default(&CFG);
	cfs__links_init(&L, &CFG, &ST);
	cr_assert(cfs_addr_parse(&A, "10.0.0.1:4460") == 0);
	cr_assert(cfs_addr_parse(&B, "10.0.0.2:4460") == 0);
}

static void teardown(void)
{
	cfs__links_free(&L);
}

TestSuite(link, .init = setup, .fini = teardown);

/* Take everything there is to transmit; the socket takes at most `room`
 * pieces of each batch (whole datagrams always go). */
static void transmit(struct out *o, uint64_t now, unsigned room)
{
	struct cfs__tx tx;

	while (cfs__links_poll_transmit(&L, now, &tx)) {
		o->bytes += tx.len;
		if (tx.npieces) {
			unsigned sent = tx.npieces < room ? tx.npieces : room;
			o->batches++;
			o->pieces += sent;
			cfs__links_transmitted(&L, sent, false, now);
			continue;
		}
		o->dgrams++;
		switch (cfs_xfer_kind(tx.p, tx.len)) {
		case XFER_KIND_ACK:
			o->acks++;
			o->complete_acks += (tx.p[1] & XF_COMPLETE) != 0;
			break;
		case XFER_KIND_RETRY:
			o->retries++;
			memcpy(o->last_retry, tx.p, XFER_RETRY_LEN);
			break;
		case XFER_KIND_VALIDATE:
			o->validates++;
			break;
		default:
			break;
		}
	}
}

/* A message of len bytes, its bytes a pattern of seed. */
static uint8_t *message(size_t len, unsigned seed)
{
	uint8_t *m = malloc(len);
	for (size_t i = 0; i < len; i++)
		m[i] = (uint8_t)(i * 31 + seed);
	return m;
}

/* Piece idx of msg arriving from `from` (as the driver hands it over:
 * counted in, then the frame). */
static void piece_in(const struct cfs_addr *from, uint8_t flags, uint64_t reqid,
                     const uint8_t *msg, size_t len, uint32_t pn, uint16_t idx, uint64_t now)
{
	uint8_t b[CFS_DGRAM_SAFE];
	size_t n = cfs_xfer_piece_encode(b, flags, reqid, msg, (uint32_t)len, pn, idx);

	cfs__links_note_in(&L, from, n, now);
	cfs__links_datagram(&L, from, cfs_xfer_kind(b, n), b, n, now);
}

/* The events queued: messages (the last one's bytes kept in *ret_msg,
 * the caller's to free), tokens asked, calls alive. */
static unsigned events(unsigned *ret_alive, uint8_t **ret_msg, size_t *ret_len)
{
	struct cfs__link_event e;
	unsigned msgs = 0;

	while (cfs__links_poll_event(&L, &e)) {
		if (e.type == CFS__LINK_MESSAGE) {
			msgs++;
			if (ret_msg) {
				free(*ret_msg);
				*ret_msg = e.msg;
				*ret_len = e.len;
			} else {
				free(e.msg);
			}
		} else if (e.type == CFS__LINK_ALIVE && ret_alive) {
			(*ret_alive)++;
		}
	}
	return msgs;
}

/* Pieces of a request arriving out of order are reassembled into the
 * message as sent; acks are owed per read batch until the last piece,
 * whose ack (complete) goes at once. */
Test(link, pieces_out_of_order_are_reassembled)
{
	const size_t len = 5000; /* 5 pieces */
	uint8_t *msg = message(len, 3), *got = NULL;
	const uint16_t order[] = { 4, 2, 0, 3, 1 };
	struct out o = { 0 };
	size_t got_len = 0;

	cr_assert_eq(cfs_xfer_npieces(len), 5);
	for (unsigned i = 0; i < 4; i++)
		piece_in(&A, 0, 77, msg, len, i + 1, order[i], T0 + i * MS);
	cr_assert_eq(events(NULL, &got, &got_len), 0, "nothing whole yet");
	cfs__links_flush_acks(&L, T0 + 4 * MS);
	transmit(&o, T0 + 4 * MS, 64);
	cr_assert_eq(o.acks, 1, "one ack for the read batch");
	cr_assert_eq(o.complete_acks, 0);

	piece_in(&A, 0, 77, msg, len, 5, order[4], T0 + 5 * MS);
	transmit(&o, T0 + 5 * MS, 64);
	cr_assert_eq(o.complete_acks, 1, "the last piece is acked at once");
	cr_assert_eq(events(NULL, &got, &got_len), 1);
	cr_assert_eq(got_len, len);
	cr_assert(memcmp(got, msg, len) == 0, "reassembled bytes differ");
	cr_assert_eq(ST.pieces_in, 5);
	cr_assert_eq(ST.xfers_in, 1);
	cr_assert_eq(ST.pieces_dup, 0);
	free(got);
	free(msg);
}

/* A piece that comes twice is held once; a piece of a message already
 * whole draws the final ack again (ours was lost) and no second message. */
Test(link, a_duplicate_piece_is_taken_once)
{
	const size_t len = 3000; /* 3 pieces */
	uint8_t *msg = message(len, 9);
	struct out o = { 0 };

	piece_in(&A, 0, 5, msg, len, 1, 0, T0);
	piece_in(&A, 0, 5, msg, len, 2, 0, T0 + MS);
	cr_assert_eq(ST.pieces_dup, 1);
	piece_in(&A, 0, 5, msg, len, 3, 1, T0 + 2 * MS);
	piece_in(&A, 0, 5, msg, len, 4, 2, T0 + 3 * MS);
	cr_assert_eq(events(NULL, NULL, NULL), 1);
	transmit(&o, T0 + 3 * MS, 64);
	cr_assert_eq(o.complete_acks, 1);

	piece_in(&A, 0, 5, msg, len, 5, 2, T0 + 10 * MS);
	transmit(&o, T0 + 10 * MS, 64);
	cr_assert_eq(o.complete_acks, 2, "the final ack again");
	cr_assert_eq(events(NULL, NULL, NULL), 0, "no second message");
	cr_assert_eq(ST.pieces_dup, 2);
	cr_assert_eq(ST.xfers_in, 1);
	free(msg);
}

/* Pieces of a reply are taken only while our request to that address
 * awaits it: none before we asked, none from another address, none once
 * the call has ended. The first one proves the address (it echoed our
 * random request ID), and new pieces keep the call alive. */
Test(link, reply_pieces_only_for_a_call_awaiting_them)
{
	const size_t len = 4000;
	uint8_t *msg = message(len, 1), req[40] = { 0x93 };
	struct out o = { 0 };
	unsigned alive = 0;

	piece_in(&A, XF_REPLY, 11, msg, len, 1, 0, T0);
	cr_assert_eq(ST.reasm_dropped, 1, "no call asked");
	cr_assert_eq(cfs__links_send(&L, &A, req, sizeof(req), 11, false, false, T0), 0);
	transmit(&o, T0, 64);
	cr_assert_eq(o.dgrams, 1, "a short request goes whole");
	piece_in(&B, XF_REPLY, 11, msg, len, 1, 0, T0 + MS);
	cr_assert_eq(ST.reasm_dropped, 2, "from another address");
	cr_assert_not(cfs__links_proven(&L, &A, T0 + MS));
	for (uint16_t i = 0; i < 4; i++)
		piece_in(&A, XF_REPLY, 11, msg, len, i + 2, i, T0 + (2 + i) * MS);
	cr_assert(cfs__links_proven(&L, &A, T0 + 6 * MS));
	cr_assert_eq(events(&alive, NULL, NULL), 1);
	cr_assert_eq(alive, 4, "each new piece keeps the call alive");

	cfs__links_send(&L, &A, req, sizeof(req), 12, false, false, T0 + 7 * MS);
	cfs__links_call_end(&L, &A, 12);
	piece_in(&A, XF_REPLY, 12, msg, len, 9, 0, T0 + 8 * MS);
	cr_assert_eq(ST.reasm_dropped, 3, "the call has ended");
	free(msg);
}

/* An address that has not proven itself gets at most three times what it
 * sent us (RFC 9000 8.1), acks and answers alike; it proves itself with
 * the token it was given, and then the bound is gone. */
Test(link, a_stranger_gets_at_most_three_times_what_it_sent)
{
	uint8_t small[400] = { 0x93 };
	uint8_t *big = message(6000, 2);
	struct out o = { 0 };

	cfs__links_note_in(&L, &B, 100, T0);
	cr_assert_not(cfs__links_proven(&L, &B, T0));
	cr_assert_eq(cfs__links_send(&L, &B, small, sizeof(small), 1, true, false, T0), 0);
	transmit(&o, T0, 64);
	cr_assert_eq(o.dgrams, 0, "400 bytes for 100: withheld");
	cr_assert(cfs__links_answer_take(&L, &B, 250, 100, T0));
	cr_assert_not(cfs__links_answer_take(&L, &B, 51, 100, T0), "300 at most");

	/* an answer in pieces is held by the budget, piece by piece */
	cfs__links_note_in(&L, &B, 1000, T0 + MS);
	cr_assert_eq(cfs__links_send(&L, &B, big, 6000, 2, true, false, T0 + MS), 0);
	transmit(&o, T0 + MS, 64);
	cr_assert_eq(o.pieces, 2, "3 x 1,100 - 250 bytes: two pieces");
	cr_assert_gt(ST.budget_held, 0);

	/* the token: B sends it back and is proven */
	cfs__links_note_in(&L, &B, 100, T0 + 2 * MS);
	cfs__links_send_retry(&L, &B, 3, 100, T0 + 2 * MS);
	transmit(&o, T0 + 2 * MS, 64);
	cr_assert_eq(o.retries, 1);
	uint8_t v[XFER_VALIDATE_LEN], tok[XFER_TOKEN_BYTES];
	uint64_t id;
	cr_assert(cfs_xfer_retry_decode(o.last_retry, XFER_RETRY_LEN, &id, tok) == 0);
	cr_assert_eq(id, 3);
	tok[0] ^= 1;
	size_t n = cfs_xfer_validate_encode(v, tok);
	cfs__links_datagram(&L, &B, cfs_xfer_kind(v, n), v, n, T0 + 3 * MS);
	cr_assert_eq(ST.bad_tokens, 1);
	cr_assert_not(cfs__links_proven(&L, &B, T0 + 3 * MS));
	tok[0] ^= 1;
	n = cfs_xfer_validate_encode(v, tok);
	cfs__links_datagram(&L, &B, cfs_xfer_kind(v, n), v, n, T0 + 3 * MS);
	cr_assert_eq(ST.validated, 1);
	cr_assert(cfs__links_proven(&L, &B, T0 + 3 * MS));
	cr_assert(cfs__links_answer_take(&L, &B, 100000, 0, T0 + 3 * MS));
	free(big);
}

/* Pieces the socket does not take are taken out of the window again and
 * wait for it to drain; then they go, and the window bounds the rest. */
Test(link, a_full_socket_takes_pieces_back)
{
	uint8_t *big = message(20000, 4); /* 17 pieces */
	struct out o = { 0 };

	cfs__links_validated(&L, &A, T0);
	cr_assert_eq(cfs__links_send(&L, &A, big, 20000, 21, false, false, T0), 0);
	transmit(&o, T0, 4);
	cr_assert_eq(o.batches, 1);
	cr_assert_eq(o.pieces, 4, "the socket took 4 of the first batch");
	transmit(&o, T0, 64);
	cr_assert_eq(o.batches, 1, "nothing more until the socket drains");

	cfs__links_writable(&L);
	transmit(&o, T0 + MS, 64);
	cr_assert_eq(o.pieces, XFER_INIT_CWND / CFS_DGRAM_SAFE, "the initial window: %u pieces",
	             o.pieces);
	cr_assert_eq(ST.pieces_out, o.pieces);
	cr_assert_lt(cfs__links_deadline(&L), UINT64_MAX, "a probe timeout is armed");
	free(big);
}

/* With nothing acknowledged, the probe timeout sends the oldest pieces
 * again; a peer that never answers has its transfer abandoned. */
Test(link, a_silent_peer_is_probed_then_given_up)
{
	uint8_t *big = message(3000, 5);
	struct out o = { 0 };
	uint64_t now = T0;

	cfs__links_validated(&L, &A, now);
	cfs__links_send(&L, &A, big, 3000, 31, false, false, now);
	transmit(&o, now, 64);
	cr_assert_eq(o.pieces, 3);
	for (int i = 0; i < 40 && cfs__links_deadline(&L) != UINT64_MAX; i++) {
		now = cfs__links_deadline(&L);
		cfs__links_timeout(&L, now);
		transmit(&o, now, 64);
	}
	cr_assert_gt(ST.pieces_resent, 0, "probes resend pieces");
	cr_assert_eq(ST.xfers_abandoned, 1);
	cr_assert_geq(now - T0, XFER_STALL_US);
	free(big);
}
