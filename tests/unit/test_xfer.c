/* A message as pieces (common/xfer.h), without sockets: a scripted link
 * carries pieces one way and acks the other, with a one-way delay, and
 * drops, reorders or duplicates what a test tells it to. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/xfer.h"

#define MAXQ 4096

struct dgram {
	uint64_t at, seq;
	bool is_ack;
	size_t len;
	uint8_t b[CFS_DGRAM_SAFE];
};

struct sim {
	uint64_t now, delay_us;
	struct xfer_out *xo;
	struct xfer_in *xi;
	struct xfer_cc cc;
	uint8_t *msg;
	size_t len;
	struct dgram q[MAXQ];
	unsigned nq;
	uint64_t seq;
	unsigned pieces_sent, acks_sent, losses, timeouts;
	/* scripted faults, by the order of transmission */
	bool (*drop_piece)(struct sim *s, unsigned nth, uint16_t idx);
	bool (*drop_ack)(struct sim *s, unsigned nth);
	bool reverse;      /* deliver each burst of pieces in reverse order */
	bool duplicate;    /* every piece arrives twice */
	bool dead;         /* the receiver has stopped */
	int result;        /* 1 complete, -ETIMEDOUT abandoned */
	unsigned dropped;
	unsigned burst_max;
};

static void push(struct sim *s, uint64_t at, bool is_ack, const uint8_t *b, size_t len)
{
	cr_assert(s->nq < MAXQ);
	struct dgram *d = &s->q[s->nq++];
	d->at = at;
	d->seq = s->seq++;
	d->is_ack = is_ack;
	d->len = len;
	memcpy(d->b, b, len);
}

static void sim_init(struct sim *s, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->now = 1000000;
	s->delay_us = 5000;
	s->len = len;
	s->msg = malloc(len);
	for (size_t i = 0; i < len; i++)
		s->msg[i] = (uint8_t)(i * 7 + i / 251);
	uint8_t *copy = malloc(len);
	memcpy(copy, s->msg, len);
	s->xo = cfs_xfer_out_new(0x1234, XF_REPLY, copy, len, s->now);
	cfs_xfer_cc_init(&s->cc, 0);
}

static void sim_free(struct sim *s)
{
	cfs_xfer_out_free(s->xo);
	cfs_xfer_in_free(s->xi);
	free(s->msg);
}

/* Send what the window and pacing allow now. */
static void sender_send(struct sim *s)
{
	uint16_t idx[64];
	unsigned burst = 0;
	uint64_t at = s->now + s->delay_us;
	unsigned n = cfs_xfer_out_peek(s->xo, idx, 64);

	for (unsigned k = 0; k < n; k++) {
		uint32_t bytes = cfs_xfer_out_piece_len(s->xo, idx[k]);
		uint64_t wait;
		if (!cfs_xfer_cc_can_send(&s->cc, bytes, false, s->now, &wait))
			break;
		uint32_t pn = cfs_xfer_out_sent(s->xo, idx[k], s->now);
		cfs_xfer_cc_sent(&s->cc, bytes, false, s->now);
		uint8_t b[CFS_DGRAM_SAFE];
		size_t len = cfs_xfer_piece_encode(b, XF_REPLY, 0x1234, s->msg, (uint32_t)s->len, pn, idx[k]);
		unsigned nth = s->pieces_sent++;
		burst++;
		if (s->drop_piece && s->drop_piece(s, nth, idx[k]))
			continue;
		push(s, s->reverse ? at + (uint64_t)(n - k) : at, false, b, len);
		if (s->duplicate)
			push(s, at + 1, false, b, len);
	}
	if (burst > s->burst_max)
		s->burst_max = burst;
}

static void receiver_take(struct sim *s, const struct dgram *d)
{
	struct xfer_piece p;
	const char *why;

	if (s->dead)
		return;
	cr_assert(cfs_xfer_piece_decode(d->b, d->len, &p, &why) == 0, "%s", why);
	if (!s->xi)
		s->xi = cfs_xfer_in_new(&p, s->now);
	cr_assert(cfs_xfer_in_piece(s->xi, &p, s->now) >= 0);
	struct xfer_ack a;
	uint8_t b[XFER_ACK_HDR + XFER_ACK_BITMAP_MAX];
	cfs_xfer_in_ack(s->xi, s->now, &a);
	size_t len = cfs_xfer_ack_encode(b, &a);
	if (s->drop_ack && s->drop_ack(s, s->acks_sent++))
		return;
	push(s, s->now + s->delay_us, true, b, len);
}

static void sender_take(struct sim *s, const struct dgram *d)
{
	struct xfer_ack a;
	struct xfer_ack_result r;
	const char *why;

	cr_assert(cfs_xfer_ack_decode(d->b, d->len, &a, &why) == 0, "%s", why);
	cfs_xfer_out_on_ack(s->xo, &a, s->now, &s->cc, &r);
	if (r.lost_bytes)
		s->losses++;
	if (r.complete)
		s->result = 1;
}

/* Run until complete, abandoned or out of time. */
static void sim_run(struct sim *s, uint64_t limit_us)
{
	uint64_t end = s->now + limit_us;

	sender_send(s);
	while (!s->result && s->now < end) {
		uint64_t next = cfs_xfer_out_deadline(s->xo, &s->cc);
		unsigned first = MAXQ;
		for (unsigned i = 0; i < s->nq; i++)
			if (first == MAXQ || s->q[i].at < s->q[first].at ||
			    (s->q[i].at == s->q[first].at && s->q[i].seq < s->q[first].seq))
				first = i;
		if (s->cc.pace_next_us > s->now && s->cc.pace_next_us < next)
			next = s->cc.pace_next_us;
		if (first < MAXQ && s->q[first].at <= next) {
			struct dgram d = s->q[first];
			s->q[first] = s->q[--s->nq];
			s->now = d.at > s->now ? d.at : s->now;
			if (d.is_ack)
				sender_take(s, &d);
			else
				receiver_take(s, &d);
		} else if (next != UINT64_MAX) {
			s->now = next > s->now ? next : s->now + 1;
			struct xfer_ack_result r;
			int rc = cfs_xfer_out_on_timer(s->xo, s->now, &s->cc, &r);
			if (r.lost_bytes)
				s->losses++;
			if (rc == -ETIMEDOUT) {
				s->result = -ETIMEDOUT;
				break;
			}
			s->timeouts++;
		} else {
			break;
		}
		if (!s->result)
			sender_send(s);
	}
}

static void assert_delivered(struct sim *s)
{
	cr_assert_eq(s->result, 1, "transfer ended %d after %u pieces", s->result, s->pieces_sent);
	cr_assert(s->xi && cfs_xfer_in_complete(s->xi));
	cr_assert_eq(s->xi->len, s->len);
	cr_assert(memcmp(s->xi->buf, s->msg, s->len) == 0, "reassembled bytes differ");
	cr_assert_eq(s->cc.in_flight, 0, "window still counts %u bytes", s->cc.in_flight);
}

/* Every datagram is told apart by its first byte: a whole message, one
 * in the background class, each frame; anything else is malformed. */
Test(xfer, datagram_kinds)
{
	uint8_t b[4] = { 0x93, 0, 0, 0 };

	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_MESSAGE);
	cr_assert_eq(cfs_xfer_kind(b, 0), XFER_KIND_MALFORMED);
	b[0] = XFER_BACKGROUND_PREFIX;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_MALFORMED, "a prefix before no message");
	b[1] = 0x9a;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_MESSAGE_BG);
	cr_assert_eq(cfs_xfer_kind(b, 1), XFER_KIND_MALFORMED);
	b[0] = XFER_PADDING;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_PADDING);
	cr_assert_eq(cfs_xfer_kind(b, 1), XFER_KIND_PADDING);
	b[0] = XFER_PIECE;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_PIECE);
	b[0] = XFER_ACK;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_ACK);
	b[0] = XFER_RETRY;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_RETRY);
	b[0] = XFER_VALIDATE;
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_VALIDATE);
	b[0] = 0x80; /* a msgpack fixmap: no envelope starts so */
	cr_assert_eq(cfs_xfer_kind(b, 4), XFER_KIND_MALFORMED);
}

Test(xfer, frames_round_trip)
{
	uint8_t msg[3000], b[CFS_DGRAM_SAFE];
	struct xfer_piece p;
	const char *why;

	for (unsigned i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	size_t n = cfs_xfer_piece_encode(b, XF_REPLY | XF_BACKGROUND, 77, msg, sizeof(msg), 9, 2);
	cr_assert_eq(n, XFER_PIECE_HDR + sizeof(msg) - 2 * XFER_PIECE_DATA);
	cr_assert(cfs_xfer_piece_decode(b, n, &p, &why) == 0);
	cr_assert(p.reqid == 77 && p.pn == 9 && p.index == 2 && p.msg_len == sizeof(msg));
	cr_assert(memcmp(p.data, msg + 2 * XFER_PIECE_DATA, p.len) == 0);
	cr_assert(cfs_xfer_piece_decode(b, n - 1, &p, &why) == -EPROTO, "short last piece accepted");
	b[19] = 3; /* index past the end */
	cr_assert(cfs_xfer_piece_decode(b, n, &p, &why) == -EPROTO);
	n = cfs_xfer_piece_encode(b, 0, 77, msg, sizeof(msg), 0, 0);
	cr_assert_eq(n, CFS_DGRAM_SAFE, "a full piece fills the safe datagram");
	cfs_put_be32(b + 10, CFS_DGRAM_SAFE); /* would have fit whole */
	cr_assert(cfs_xfer_piece_decode(b, n, &p, &why) == -EPROTO);
	cfs_put_be32(b + 10, CFS_MSG_MAX + 1);
	cr_assert(cfs_xfer_piece_decode(b, n, &p, &why) == -EPROTO);

	struct xfer_ack a = { .flags = XF_REPLY, .reqid = 5, .largest_pn = 40, .ack_delay_us = 320,
	                      .first_missing = 3, .nbitmap = 2, .bitmap = { 0x06, 0x80 } }, a2;
	uint8_t ab[XFER_ACK_HDR + XFER_ACK_BITMAP_MAX];
	n = cfs_xfer_ack_encode(ab, &a);
	cr_assert_eq(n, XFER_ACK_HDR + 2);
	cr_assert(cfs_xfer_ack_decode(ab, n, &a2, &why) == 0);
	cr_assert(a2.reqid == 5 && a2.largest_pn == 40 && a2.ack_delay_us == 320 &&
	          a2.first_missing == 3 && a2.nbitmap == 2 && a2.bitmap[1] == 0x80);
	cr_assert(cfs_xfer_ack_decode(ab, n + 1, &a2, &why) == -EPROTO);
	ab[18] = XFER_ACK_BITMAP_MAX + 1;
	cr_assert(cfs_xfer_ack_decode(ab, XFER_ACK_HDR + XFER_ACK_BITMAP_MAX + 1, &a2, &why) == -EPROTO);

	uint8_t tok[XFER_TOKEN_BYTES] = { 1, 2, 3 }, tok2[XFER_TOKEN_BYTES], rb[XFER_RETRY_LEN];
	uint64_t rid;
	cr_assert_eq(cfs_xfer_retry_encode(rb, 99, tok), XFER_RETRY_LEN);
	cr_assert(cfs_xfer_retry_decode(rb, XFER_RETRY_LEN, &rid, tok2) == 0 && rid == 99);
	cr_assert(memcmp(tok, tok2, sizeof(tok)) == 0);
	uint8_t vb[XFER_VALIDATE_LEN];
	cr_assert_eq(cfs_xfer_validate_encode(vb, tok), XFER_VALIDATE_LEN);
	cr_assert(cfs_xfer_validate_decode(vb, XFER_VALIDATE_LEN, tok2) == 0);
	cr_assert(cfs_xfer_validate_decode(vb, XFER_VALIDATE_LEN - 1, tok2) == -EPROTO);
}

Test(xfer, token_binds_address_and_epoch)
{
	uint8_t key[32] = { 9 }, t1[XFER_TOKEN_BYTES], t2[XFER_TOKEN_BYTES];
	struct cfs_addr a, b;

	cr_assert(cfs_addr_from_ip(&a, "10.0.0.1", 4000) == 0);
	cr_assert(cfs_addr_from_ip(&b, "10.0.0.1", 4001) == 0);
	cfs_xfer_token(t1, key, &a, 7);
	cfs_xfer_token(t2, key, &a, 7);
	cr_assert(memcmp(t1, t2, sizeof(t1)) == 0);
	cfs_xfer_token(t2, key, &b, 7);
	cr_assert(memcmp(t1, t2, sizeof(t1)) != 0, "another port, the same token");
	cfs_xfer_token(t2, key, &a, 8);
	cr_assert(memcmp(t1, t2, sizeof(t1)) != 0, "another epoch, the same token");
}

Test(xfer, lossless)
{
	struct sim s;

	sim_init(&s, 64 * 1024 + 17);
	sim_run(&s, 10000000);
	assert_delivered(&s);
	cr_assert_eq(s.pieces_sent, cfs_xfer_npieces(s.len), "no piece sent twice without a loss");
	cr_assert_eq(s.losses, 0);
	cr_assert(s.cc.cwnd > XFER_INIT_CWND, "slow start grew the window");
	sim_free(&s);
}

static bool drop_first(struct sim *s, unsigned nth, uint16_t idx)
{
	(void)s;
	return nth == 0 && idx == 0;
}

static bool drop_middle(struct sim *s, unsigned nth, uint16_t idx)
{
	(void)nth;
	return idx == 20 && s->dropped++ == 0;
}

static bool drop_last(struct sim *s, unsigned nth, uint16_t idx)
{
	(void)nth;
	return idx == s->xo->npieces - 1 && s->dropped++ == 0;
}

Test(xfer, lost_first_middle_last_piece)
{
	bool (*drops[])(struct sim *, unsigned, uint16_t) = { drop_first, drop_middle, drop_last };

	for (unsigned k = 0; k < 3; k++) {
		struct sim s;
		sim_init(&s, 40 * XFER_PIECE_DATA + 100);
		s.drop_piece = drops[k];
		sim_run(&s, 10000000);
		assert_delivered(&s);
		cr_assert_eq(s.pieces_sent, s.xo->npieces + 1, "case %u: %u pieces sent for one loss",
		             k, s.pieces_sent);
		sim_free(&s);
	}
}

static bool drop_last_ack(struct sim *s, unsigned nth)
{
	return s->xi && cfs_xfer_in_complete(s->xi) && nth < 100 && s->timeouts == 0;
}

Test(xfer, lost_acks_resent_on_probe_timeout)
{
	struct sim s;

	sim_init(&s, 10 * XFER_PIECE_DATA);
	s.drop_ack = drop_last_ack;
	sim_run(&s, 10000000);
	assert_delivered(&s);
	cr_assert(s.timeouts >= 1, "no probe timeout");
	cr_assert(s.pieces_sent > (unsigned)s.xo->npieces, "nothing resent after the final ack was lost");
	sim_free(&s);
}

Test(xfer, reordered_and_duplicated)
{
	struct sim s;

	sim_init(&s, 30 * XFER_PIECE_DATA + 5);
	s.reverse = true;
	s.duplicate = true;
	sim_run(&s, 10000000);
	assert_delivered(&s);
	sim_free(&s);
}

static bool drop_every_fifth(struct sim *s, unsigned nth, uint16_t idx)
{
	(void)s;
	(void)idx;
	return nth % 5 == 3;
}

Test(xfer, heavy_loss_still_completes)
{
	struct sim s;

	sim_init(&s, CFS_MSG_MAX);
	s.drop_piece = drop_every_fifth;
	sim_run(&s, 60000000);
	assert_delivered(&s);
	cr_assert(s.cc.cwnd < 64u << 20 && s.cc.ssthresh != UINT32_MAX, "loss never reduced the window");
	sim_free(&s);
}

Test(xfer, peer_that_stops_is_abandoned)
{
	struct sim s;

	sim_init(&s, 20 * XFER_PIECE_DATA);
	uint64_t start = s.now;
	s.dead = true;
	sim_run(&s, 600000000);
	cr_assert_eq(s.result, -ETIMEDOUT);
	cr_assert(s.now - start >= XFER_STALL_US && s.now - start < XFER_STALL_US + 1000000,
	          "abandoned after %llu us", (unsigned long long)(s.now - start));
	cr_assert(s.timeouts >= 3, "only %u probe timeouts", s.timeouts);
	cr_assert(s.pieces_sent <= (unsigned)s.xo->npieces + 2 * s.timeouts,
	          "%u pieces sent to a silent peer", s.pieces_sent);
	cfs_xfer_cc_forget(&s.cc, cfs_xfer_out_counted(s.xo), false);
	cr_assert_eq(s.cc.in_flight, 0);
	sim_free(&s);
}

/* A shallow bottleneck: once the round trip is known, pieces leave at the
 * pacing rate, never as a burst of the whole window. */
Test(xfer, pacing_spreads_a_window)
{
	struct xfer_cc cc;
	uint64_t now = 1000000, wait;
	unsigned burst = 0;

	cfs_xfer_cc_init(&cc, 0);
	cfs_xfer_cc_rtt(&cc, 10000, 0); /* 10 ms */
	cc.cwnd = 100 * CFS_DGRAM_SAFE;
	while (cfs_xfer_cc_can_send(&cc, CFS_DGRAM_SAFE, false, now, &wait)) {
		cfs_xfer_cc_sent(&cc, CFS_DGRAM_SAFE, false, now);
		burst++;
	}
	cr_assert(wait > 0, "stopped by the window, not by pacing");
	/* the initial window, and what the rate allows in a timer tick (1 ms) */
	double rate = 1.25 * cc.cwnd / 10000.0;
	unsigned most = (unsigned)((XFER_INIT_CWND + rate * 1000) / CFS_DGRAM_SAFE) + 1;
	cr_assert(burst <= most, "a burst of %u pieces at once (at most %u)", burst, most);
	cr_assert(burst < 50, "half the window went at once");
	/* the rest of the window goes out over most of a round trip */
	uint64_t start = now;
	while (cc.in_flight + CFS_DGRAM_SAFE <= cc.cwnd) {
		if (!cfs_xfer_cc_can_send(&cc, CFS_DGRAM_SAFE, false, now, &wait)) {
			cr_assert(wait > 0);
			now += wait;
			continue;
		}
		cfs_xfer_cc_sent(&cc, CFS_DGRAM_SAFE, false, now);
	}
	double spread = (double)(now - start);
	cr_assert(spread > 4000 && spread < 9000, "window spread over %.0f us", spread);
}

Test(xfer, one_reduction_per_round_trip)
{
	struct xfer_cc cc;

	cfs_xfer_cc_init(&cc, 0);
	cc.cwnd = 100000;
	cc.in_flight = 50000;
	cfs_xfer_cc_lost(&cc, 1200, false, 2000, 3000);
	cr_assert_eq(cc.cwnd, 50000);
	cfs_xfer_cc_lost(&cc, 1200, false, 2500, 3100); /* sent before the first loss was seen */
	cr_assert_eq(cc.cwnd, 50000);
	cfs_xfer_cc_lost(&cc, 1200, false, 3200, 4000);
	cr_assert_eq(cc.cwnd, 25000);
	cfs_xfer_cc_acked(&cc, 1200, false, 3500); /* sent in recovery: no growth */
	cr_assert_eq(cc.cwnd, 25000);
	cfs_xfer_cc_acked(&cc, 1200, false, 4500);
	cr_assert(cc.cwnd > 25000 && cc.cwnd < 25000 + 1200, "avoidance grows by about a piece per window");
}

/* LEDBAT: background yields when the round trip climbs over the target
 * above its minimum, grows while it does not. */
Test(xfer, background_yields_to_queueing_delay)
{
	struct xfer_cc cc;

	cfs_xfer_cc_init(&cc, 25000);
	cc.cwnd = 200 * CFS_DGRAM_SAFE;
	cfs_xfer_cc_rtt(&cc, 2000, 0);
	uint32_t w0 = cc.bg_cwnd;
	for (int i = 0; i < 50; i++) {
		cfs_xfer_cc_sent(&cc, CFS_DGRAM_SAFE, true, 0);
		cfs_xfer_cc_acked(&cc, CFS_DGRAM_SAFE, true, 0);
	}
	cr_assert(cc.bg_cwnd > w0, "background did not grow on an empty queue");
	uint32_t w1 = cc.bg_cwnd;
	for (int i = 0; i < 20; i++)
		cfs_xfer_cc_rtt(&cc, 2000 + 60000, 0); /* 60 ms of queue */
	for (int i = 0; i < 50; i++) {
		cfs_xfer_cc_sent(&cc, CFS_DGRAM_SAFE, true, 0);
		cfs_xfer_cc_acked(&cc, CFS_DGRAM_SAFE, true, 0);
	}
	cr_assert(cc.bg_cwnd < w1, "background grew (%u -> %u) against a queue", w1, cc.bg_cwnd);
	cr_assert(cc.bg_cwnd >= XFER_MIN_CWND);
	uint64_t wait;
	cc.in_flight = cc.bg_in_flight = cc.bg_cwnd;
	cr_assert(!cfs_xfer_cc_can_send(&cc, CFS_DGRAM_SAFE, true, 0, &wait), "background window ignored");
	cr_assert(cfs_xfer_cc_can_send(&cc, CFS_DGRAM_SAFE, false, 0, &wait) || wait > 0,
	          "foreground held by the background window");
}

Test(xfer, receiver_bitmap_names_held_pieces)
{
	uint8_t msg[20 * XFER_PIECE_DATA], b[CFS_DGRAM_SAFE];
	struct xfer_piece p;
	const char *why;
	struct xfer_in *x = NULL;

	memset(msg, 0xab, sizeof(msg));
	uint16_t order[] = { 0, 1, 3, 7, 19 };
	for (unsigned k = 0; k < 5; k++) {
		size_t n = cfs_xfer_piece_encode(b, 0, 3, msg, sizeof(msg), k, order[k]);
		cr_assert(cfs_xfer_piece_decode(b, n, &p, &why) == 0);
		if (!x)
			x = cfs_xfer_in_new(&p, 0);
		cr_assert(cfs_xfer_in_piece(x, &p, 10) == 0);
	}
	cr_assert(cfs_xfer_in_piece(x, &p, 11) == 1, "a duplicate counted as new");
	struct xfer_ack a;
	cfs_xfer_in_ack(x, 20, &a);
	cr_assert_eq(a.first_missing, 2);
	cr_assert(!(a.flags & XF_COMPLETE));
	/* bits from piece 2: 3 -> bit 1, 7 -> bit 5, 19 -> bit 17 */
	cr_assert_eq(a.bitmap[0], 0x22);
	cr_assert_eq(a.bitmap[2], 0x02);
	p.msg_len = sizeof(msg) + 1;
	cr_assert(cfs_xfer_in_piece(x, &p, 12) == -EPROTO, "another length accepted");
	cfs_xfer_in_free(x);
}

/* A transfer held by our own upload cap is kept alive only while it waits
 * on us: nothing of it in flight, and a peer that owes no acknowledgement
 * or has owed one for less than XFER_STALL_US. */
Test(xfer, waits_on_us_only_without_the_peer)
{
	size_t len = 20 * XFER_PIECE_DATA;
	struct xfer_out *x = cfs_xfer_out_new(5, 0, xcalloc(1, len), len, 1000);
	struct xfer_cc cc;
	struct xfer_ack_result r;
	uint64_t now = 1000;

	cfs_xfer_cc_init(&cc, XFER_LEDBAT_TARGET_US);
	cr_assert(cfs_xfer_out_waits_on_us(x, 0, now), "nothing sent yet: it waits on us");
	cr_assert(cfs_xfer_out_waits_on_us(x, now, now + XFER_STALL_US - 1));
	cr_assert(!cfs_xfer_out_waits_on_us(x, now, now + XFER_STALL_US),
	          "a peer that owes other transfers' acks for XFER_STALL_US is not waited for");
	cfs_xfer_out_sent(x, 0, now);
	cfs_xfer_out_sent(x, 1, now);
	cr_assert(!cfs_xfer_out_waits_on_us(x, now, now), "pieces in flight: it waits on the peer");

	/* both acknowledged: the rest waits for the cap, however long, while
	 * the peer owes nothing */
	struct xfer_ack a = { .reqid = 5, .largest_pn = 1, .first_missing = 2 };
	now += 20000;
	cfs_xfer_out_on_ack(x, &a, now, &cc, &r);
	cr_assert(r.progress);
	cr_assert(cfs_xfer_out_waits_on_us(x, 0, now + 10 * XFER_STALL_US));

	/* sent again, never acknowledged: probe timeouts mark the pieces lost
	 * (none in flight), yet the silent peer is what the transfer waits on */
	cfs_xfer_out_sent(x, 2, now);
	uint64_t owed = now;
	for (int i = 0; i < 6; i++) {
		now = cfs_xfer_out_deadline(x, &cc);
		if (cfs_xfer_out_on_timer(x, now, &cc, &r) < 0)
			break;
	}
	cr_assert(x->nlost > 0);
	cr_assert(cfs_xfer_out_waits_on_us(x, owed, owed + 1000));
	cr_assert(!cfs_xfer_out_waits_on_us(x, owed, owed + XFER_STALL_US));
	cfs_xfer_out_free(x);
}
