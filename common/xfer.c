/*
 * Datagram kinds, and messages as pieces: frames, one transfer's sending
 * and receiving state machines, and the per-peer congestion controller.
 * See common/xfer.h for the rules; docs/PROTOCOL.md for the wire.
 *
 * Why pieces at all: a block sent as one UDP datagram leaves a 1,500-byte
 * link as up to 42 IP fragments, and losing any of them loses the block
 * (measured: 3 % packet loss lost 72 % of 60 KiB datagrams); many paths
 * drop fragments outright. A piece is one datagram of at most
 * CFS_DGRAM_SAFE bytes, sent with the don't-fragment bit, acknowledged and
 * resent on its own.
 */
#include "common/xfer.h"

#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ datagram kinds */

enum xfer_kind cfs_xfer_kind(const uint8_t *p, size_t len)
{
	if (len == 0)
		return XFER_KIND_MALFORMED;
	if ((p[0] & 0xf0) == 0x90) /* a msgpack fixarray: a whole message */
		return XFER_KIND_MESSAGE;
	switch (p[0]) {
	case XFER_BACKGROUND_PREFIX:
		return len > 1 && (p[1] & 0xf0) == 0x90 ? XFER_KIND_MESSAGE_BG : XFER_KIND_MALFORMED;
	case XFER_PIECE:
		return XFER_KIND_PIECE;
	case XFER_ACK:
		return XFER_KIND_ACK;
	case XFER_RETRY:
		return XFER_KIND_RETRY;
	case XFER_VALIDATE:
		return XFER_KIND_VALIDATE;
	case XFER_PADDING:
		return XFER_KIND_PADDING;
	default:
		return XFER_KIND_MALFORMED;
	}
}

void cfs__peer_key(struct peer_key *k, const struct cfs_addr *a)
{
	memset(k, 0, sizeof(*k));
	k->family = a->sa.sa_family;
	if (a->sa.sa_family == AF_INET6) {
		memcpy(k->ip, &a->in6.sin6_addr, 16);
		k->port = a->in6.sin6_port;
	} else {
		memcpy(k->ip, &a->in4.sin_addr, 4);
		k->port = a->in4.sin_port;
	}
}

/* ------------------------------------------------------------ frames */

int cfs_xfer_piece_decode(const uint8_t *p, size_t len, struct xfer_piece *ret, const char **why)
{
	if (len < XFER_PIECE_HDR + 1 || len > CFS_DGRAM_SAFE || p[0] != XFER_PIECE) {
		*why = "piece: bad length";
		return -EPROTO;
	}
	ret->flags = p[1];
	ret->reqid = cfs_get_be64(p + 2);
	ret->msg_len = cfs_get_be32(p + 10);
	ret->pn = cfs_get_be32(p + 14);
	ret->index = cfs_get_be16(p + 18);
	ret->data = p + XFER_PIECE_HDR;
	ret->len = len - XFER_PIECE_HDR;
	if (ret->flags & ~(XF_REPLY | XF_BACKGROUND)) {
		*why = "piece: unknown flags";
		return -EPROTO;
	}
	if (ret->msg_len <= CFS_DGRAM_SAFE || ret->msg_len > CFS_MSG_MAX) {
		*why = "piece: message length out of range";
		return -EPROTO;
	}
	if (ret->index >= cfs_xfer_npieces(ret->msg_len)) {
		*why = "piece: index past the last piece";
		return -EPROTO;
	}
	size_t off = (size_t)ret->index * XFER_PIECE_DATA;
	size_t want = ret->msg_len - off < XFER_PIECE_DATA ? ret->msg_len - off : XFER_PIECE_DATA;
	if (ret->len != want) {
		*why = "piece: wrong payload length";
		return -EPROTO;
	}
	return 0;
}

size_t cfs_xfer_piece_encode(uint8_t *out, uint8_t flags, uint64_t reqid, const uint8_t *msg,
                         uint32_t msg_len, uint32_t pn, uint16_t index)
{
	size_t off = (size_t)index * XFER_PIECE_DATA;
	size_t n = msg_len - off < XFER_PIECE_DATA ? msg_len - off : XFER_PIECE_DATA;

	out[0] = XFER_PIECE;
	out[1] = flags;
	cfs_put_be64(out + 2, reqid);
	cfs_put_be32(out + 10, msg_len);
	cfs_put_be32(out + 14, pn);
	cfs_put_be16(out + 18, index);
	memcpy(out + XFER_PIECE_HDR, msg + off, n);
	return XFER_PIECE_HDR + n;
}

int cfs_xfer_ack_decode(const uint8_t *p, size_t len, struct xfer_ack *ret, const char **why)
{
	if (len < XFER_ACK_HDR || p[0] != XFER_ACK) {
		*why = "ack: too short";
		return -EPROTO;
	}
	ret->flags = p[1];
	ret->reqid = cfs_get_be64(p + 2);
	ret->largest_pn = cfs_get_be32(p + 10);
	ret->ack_delay_us = (uint32_t)cfs_get_be16(p + 14) * 16;
	ret->first_missing = cfs_get_be16(p + 16);
	ret->nbitmap = p[18];
	if (ret->flags & ~(XF_REPLY | XF_COMPLETE)) {
		*why = "ack: unknown flags";
		return -EPROTO;
	}
	if (ret->nbitmap > XFER_ACK_BITMAP_MAX || len != XFER_ACK_HDR + (size_t)ret->nbitmap) {
		*why = "ack: bad bitmap length";
		return -EPROTO;
	}
	if (ret->first_missing > XFER_PIECES_MAX) {
		*why = "ack: first missing piece out of range";
		return -EPROTO;
	}
	memcpy(ret->bitmap, p + XFER_ACK_HDR, ret->nbitmap);
	return 0;
}

size_t cfs_xfer_ack_encode(uint8_t *out, const struct xfer_ack *a)
{
	uint32_t d = a->ack_delay_us / 16;

	out[0] = XFER_ACK;
	out[1] = a->flags;
	cfs_put_be64(out + 2, a->reqid);
	cfs_put_be32(out + 10, a->largest_pn);
	cfs_put_be16(out + 14, (uint16_t)(d > UINT16_MAX ? UINT16_MAX : d));
	cfs_put_be16(out + 16, a->first_missing);
	out[18] = a->nbitmap;
	memcpy(out + XFER_ACK_HDR, a->bitmap, a->nbitmap);
	return XFER_ACK_HDR + a->nbitmap;
}

int cfs_xfer_retry_decode(const uint8_t *p, size_t len, uint64_t *ret_reqid,
                      uint8_t token[static XFER_TOKEN_BYTES])
{
	if (len != XFER_RETRY_LEN || p[0] != XFER_RETRY || p[1] != 0)
		return -EPROTO;
	*ret_reqid = cfs_get_be64(p + 2);
	memcpy(token, p + 10, XFER_TOKEN_BYTES);
	return 0;
}

size_t cfs_xfer_retry_encode(uint8_t out[static XFER_RETRY_LEN], uint64_t reqid,
                         const uint8_t token[static XFER_TOKEN_BYTES])
{
	out[0] = XFER_RETRY;
	out[1] = 0;
	cfs_put_be64(out + 2, reqid);
	memcpy(out + 10, token, XFER_TOKEN_BYTES);
	return XFER_RETRY_LEN;
}

int cfs_xfer_validate_decode(const uint8_t *p, size_t len, uint8_t token[static XFER_TOKEN_BYTES])
{
	if (len != XFER_VALIDATE_LEN || p[0] != XFER_VALIDATE)
		return -EPROTO;
	memcpy(token, p + 1, XFER_TOKEN_BYTES);
	return 0;
}

size_t cfs_xfer_validate_encode(uint8_t out[static XFER_VALIDATE_LEN],
                            const uint8_t token[static XFER_TOKEN_BYTES])
{
	out[0] = XFER_VALIDATE;
	memcpy(out + 1, token, XFER_TOKEN_BYTES);
	return XFER_VALIDATE_LEN;
}

void cfs_xfer_token(uint8_t out[static XFER_TOKEN_BYTES], const uint8_t key[static 32],
                const struct cfs_addr *a, uint64_t epoch)
{
	crypto_generichash_state st;
	const uint8_t *ip;
	size_t n = cfs_addr_ip_bytes(a, &ip);
	uint8_t tail[10];

	cfs_put_be16(tail, cfs_addr_port(a));
	cfs_put_be64(tail + 2, epoch);
	crypto_generichash_init(&st, key, 32, XFER_TOKEN_BYTES);
	crypto_generichash_update(&st, ip, n);
	crypto_generichash_update(&st, tail, sizeof(tail));
	crypto_generichash_final(&st, out, XFER_TOKEN_BYTES);
}

/* ------------------------------------------------------------ congestion */

#define MAX_ACK_DELAY_US 1000 /* receivers ack at the end of every read batch */
#define PACE_SLACK_US 1000    /* the event loop's timer granularity */
#define GRANULARITY_US 1000

void cfs_xfer_cc_init(struct xfer_cc *cc, uint32_t ledbat_target_us)
{
	memset(cc, 0, sizeof(*cc));
	cc->cwnd = XFER_INIT_CWND;
	cc->bg_cwnd = XFER_INIT_CWND;
	cc->ssthresh = UINT32_MAX;
	cc->ledbat_target_us = ledbat_target_us ? ledbat_target_us : XFER_LEDBAT_TARGET_US;
}

/* RFC 9002 5.3. */
void cfs_xfer_cc_rtt(struct xfer_cc *cc, uint64_t rtt_us, uint64_t ack_delay_us)
{
	double rtt = (double)rtt_us;

	cc->latest_rtt_us = rtt;
	if (!cc->has_rtt) {
		cc->has_rtt = true;
		cc->min_rtt_us = rtt;
		cc->srtt_us = rtt;
		cc->rttvar_us = rtt / 2;
		return;
	}
	if (rtt < cc->min_rtt_us)
		cc->min_rtt_us = rtt;
	if (rtt >= cc->min_rtt_us + (double)ack_delay_us)
		rtt -= (double)ack_delay_us;
	cc->rttvar_us = 0.75 * cc->rttvar_us + 0.25 * fabs(cc->srtt_us - rtt);
	cc->srtt_us = 0.875 * cc->srtt_us + 0.125 * rtt;
}

/* Pacing rate in bytes per microsecond; 0: not yet known (no pacing). */
static double pace_rate(const struct xfer_cc *cc)
{
	if (!cc->has_rtt || cc->srtt_us < 1)
		return 0;
	return 1.25 * (double)cc->cwnd / cc->srtt_us;
}

bool cfs_xfer_cc_can_send(const struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t now,
                      uint64_t *ret_wait_us)
{
	*ret_wait_us = 0;
	if (cc->in_flight + bytes > cc->cwnd && cc->in_flight > 0)
		return false;
	if (bg && cc->bg_in_flight + bytes > cc->bg_cwnd && cc->bg_in_flight > 0)
		return false;
	/* The loop's timers tick in milliseconds: a piece due within one
	 * goes now (a wait would cost a whole tick, and on a fast path the
	 * pacing would set the rate instead of the window) */
	if (cc->pace_next_us > now + PACE_SLACK_US) {
		*ret_wait_us = cc->pace_next_us - now;
		return false;
	}
	return true;
}

void cfs_xfer_cc_sent(struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t now)
{
	double rate = pace_rate(cc);

	cc->in_flight += bytes;
	if (bg)
		cc->bg_in_flight += bytes;
	if (rate > 0) {
		/* a burst of the initial window after idle, then the rate */
		uint64_t burst = (uint64_t)((double)XFER_INIT_CWND / rate);
		uint64_t base = cc->pace_next_us + burst > now ? cc->pace_next_us : now - burst;
		cc->pace_next_us = base + (uint64_t)((double)bytes / rate);
	}
}

static void take_out(struct xfer_cc *cc, uint32_t bytes, bool bg)
{
	cc->in_flight = cc->in_flight > bytes ? cc->in_flight - bytes : 0;
	if (bg)
		cc->bg_in_flight = cc->bg_in_flight > bytes ? cc->bg_in_flight - bytes : 0;
}

/* RFC 6817 2.4.2, with the round trip above its minimum as the queueing
 * delay; never above the foreground window. */
static void ledbat_acked(struct xfer_cc *cc, uint32_t bytes)
{
	double qd = cc->has_rtt ? cc->latest_rtt_us - cc->min_rtt_us : 0;
	double target = (double)cc->ledbat_target_us;
	double off = (target - qd) / target;
	double w = (double)cc->bg_cwnd + off * (double)bytes * CFS_DGRAM_SAFE / (double)cc->bg_cwnd;

	if (w < XFER_MIN_CWND)
		w = XFER_MIN_CWND;
	if (w > cc->cwnd)
		w = cc->cwnd;
	cc->bg_cwnd = (uint32_t)w;
}

void cfs_xfer_cc_acked(struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t sent_us)
{
	take_out(cc, bytes, bg);
	if (bg)
		ledbat_acked(cc, bytes);
	if (sent_us <= cc->recovery_start_us)
		return; /* RFC 9002 7.3.2: no growth in recovery */
	if (cc->cwnd < cc->ssthresh)
		cc->cwnd += bytes;
	else
		cc->cwnd += (uint32_t)((uint64_t)CFS_DGRAM_SAFE * bytes / cc->cwnd);
	if (cc->cwnd > (64u << 20))
		cc->cwnd = 64u << 20;
}

void cfs_xfer_cc_lost(struct xfer_cc *cc, uint32_t bytes, bool bg, uint64_t sent_us, uint64_t now)
{
	take_out(cc, bytes, bg);
	if (sent_us <= cc->recovery_start_us)
		return; /* one reduction per round trip of losses, both windows */
	cc->recovery_start_us = now;
	cc->bg_cwnd /= 2;
	if (cc->bg_cwnd < XFER_MIN_CWND)
		cc->bg_cwnd = XFER_MIN_CWND;
	cc->ssthresh = cc->cwnd / 2;
	if (cc->ssthresh < XFER_MIN_CWND)
		cc->ssthresh = XFER_MIN_CWND;
	cc->cwnd = cc->ssthresh;
}

void cfs_xfer_cc_forget(struct xfer_cc *cc, uint32_t bytes, bool bg)
{
	take_out(cc, bytes, bg);
}

uint64_t cfs_xfer_cc_pto_us(const struct xfer_cc *cc)
{
	if (!cc->has_rtt)
		return 200000; /* RFC 9002's initial RTT is 333 ms; a LAN answers far sooner */
	double v = 4 * cc->rttvar_us;
	return (uint64_t)(cc->srtt_us + (v > GRANULARITY_US ? v : GRANULARITY_US)) + MAX_ACK_DELAY_US;
}

uint64_t cfs_xfer_cc_loss_delay_us(const struct xfer_cc *cc)
{
	double r = cc->srtt_us > cc->latest_rtt_us ? cc->srtt_us : cc->latest_rtt_us;
	double d = 9.0 / 8.0 * r;
	return d > GRANULARITY_US ? (uint64_t)d : GRANULARITY_US;
}

/* ------------------------------------------------------------ sending */

struct xfer_out *cfs_xfer_out_new(uint64_t reqid, uint8_t flags, uint8_t *msg, size_t len,
                              uint64_t now)
{
	unsigned n = cfs_xfer_npieces(len);
	struct xfer_out *x = xcalloc(1, sizeof(*x) + n * sizeof(x->slot[0]));

	x->reqid = reqid;
	x->flags = flags;
	x->msg = msg;
	x->len = (uint32_t)len;
	x->npieces = (uint16_t)n;
	x->created_us = now;
	x->last_ack_us = now;
	return x;
}

void cfs_xfer_out_free(struct xfer_out *x)
{
	if (!x)
		return;
	free(x->msg);
	free(x);
}

uint32_t cfs_xfer_out_piece_len(const struct xfer_out *x, uint16_t idx)
{
	size_t off = (size_t)idx * XFER_PIECE_DATA;
	size_t n = x->len - off < XFER_PIECE_DATA ? x->len - off : XFER_PIECE_DATA;
	return (uint32_t)(XFER_PIECE_HDR + n);
}

unsigned cfs_xfer_out_peek(const struct xfer_out *x, uint16_t *idx, unsigned max)
{
	unsigned n = 0;
	bool last = false;
	uint16_t end = (uint16_t)(x->npieces - 1);

	for (uint16_t i = 0; x->nlost && i < x->next_new && n < max; i++)
		if (x->slot[i].state == XP_LOST) {
			if (i == end)
				last = true;
			else
				idx[n++] = i;
		}
	for (uint16_t i = x->next_new; i < x->npieces && n + last < max; i++) {
		if (i == end)
			last = true;
		else
			idx[n++] = i;
	}
	if (last && n < max)
		idx[n++] = end;
	return n;
}

uint32_t cfs_xfer_out_sent(struct xfer_out *x, uint16_t idx, uint64_t now)
{
	struct xfer_slot *s = &x->slot[idx];
	uint32_t pn = x->next_pn++;

	if (s->state == XP_LOST)
		x->nlost--;
	if (pn == 0)
		x->last_ack_us = now; /* the stall clock starts with the first piece */
	if (idx >= x->next_new)
		x->next_new = (uint16_t)(idx + 1);
	s->state = XP_INFLIGHT;
	s->pn = pn;
	s->sent_us = now;
	s->counted = true;
	x->pn_sent_us[pn % XFER_PN_RING] = now;
	x->last_send_us = now;
	return pn;
}

static bool ack_holds(const struct xfer_ack *a, unsigned i)
{
	if (i < a->first_missing)
		return true;
	unsigned b = i - a->first_missing;
	return b / 8 < a->nbitmap && (a->bitmap[b / 8] >> (b % 8) & 1);
}

/* Mark piece i lost (it will be sent again). */
static void declare_lost(struct xfer_out *x, struct xfer_slot *s, uint16_t i,
                         struct xfer_ack_result *r)
{
	s->state = XP_LOST;
	x->nlost++;
	if (s->counted) {
		r->lost_bytes += cfs_xfer_out_piece_len(x, i);
		if (s->sent_us > r->lost_sent_us)
			r->lost_sent_us = s->sent_us;
		s->counted = false;
	}
}

/* RFC 9002 6.1: in flight, sent before the largest acked transmission, and
 * three numbers older or older than the loss delay. */
static void detect_losses(struct xfer_out *x, uint64_t now, uint64_t loss_delay_us,
                          struct xfer_ack_result *r)
{
	if (!x->any_acked)
		return;
	for (uint16_t i = 0; i < x->next_new; i++) {
		struct xfer_slot *s = &x->slot[i];
		if (s->state != XP_INFLIGHT || s->pn >= x->largest_acked_pn)
			continue;
		if (x->largest_acked_pn - s->pn >= 3 || s->sent_us + loss_delay_us <= now)
			declare_lost(x, s, i, r);
	}
}

/* Tell the window what an ack or a timer found. */
static void account(struct xfer_cc *cc, const struct xfer_out *x, const struct xfer_ack_result *r,
                    uint64_t now)
{
	bool bg = cfs_xfer_out_bg(x);

	if (r->acked_bytes)
		cfs_xfer_cc_acked(cc, r->acked_bytes, bg, r->acked_sent_us);
	if (r->lost_bytes)
		cfs_xfer_cc_lost(cc, r->lost_bytes, bg, r->lost_sent_us, now);
	if (r->probe_bytes)
		cfs_xfer_cc_forget(cc, r->probe_bytes, bg);
}

void cfs_xfer_out_on_ack(struct xfer_out *x, const struct xfer_ack *a, uint64_t now,
                     struct xfer_cc *cc, struct xfer_ack_result *r)
{
	memset(r, 0, sizeof(*r));
	if (a->largest_pn < x->next_pn && (!x->any_acked || a->largest_pn > x->largest_acked_pn)) {
		if (a->largest_pn + XFER_PN_RING >= x->next_pn) {
			uint64_t sent = x->pn_sent_us[a->largest_pn % XFER_PN_RING];
			r->rtt_us = now > sent ? now - sent : 1;
			cfs_xfer_cc_rtt(cc, r->rtt_us, a->ack_delay_us); /* before losses: RFC 9002 6.1.2 */
		}
		x->largest_acked_pn = a->largest_pn;
		x->any_acked = true;
	}
	for (uint16_t i = 0; i < x->next_new; i++) {
		struct xfer_slot *s = &x->slot[i];
		if (s->state == XP_ACKED || s->state == XP_UNSENT || !ack_holds(a, i))
			continue;
		if (s->state == XP_LOST)
			x->nlost--;
		if (s->counted) {
			r->acked_bytes += cfs_xfer_out_piece_len(x, i);
			if (s->sent_us > r->acked_sent_us)
				r->acked_sent_us = s->sent_us;
		}
		s->state = XP_ACKED;
		s->counted = false;
		x->nacked++;
		r->progress = true;
	}
	if (r->progress) {
		x->pto_count = 0;
		x->last_ack_us = now;
	}
	detect_losses(x, now, cfs_xfer_cc_loss_delay_us(cc), r);
	account(cc, x, r, now);
	r->complete = cfs_xfer_out_done(x);
}

/* The oldest piece in flight, or -1. */
static int oldest_inflight(const struct xfer_out *x)
{
	int best = -1;

	for (uint16_t i = 0; i < x->next_new; i++)
		if (x->slot[i].state == XP_INFLIGHT &&
		    (best < 0 || x->slot[i].pn < x->slot[best].pn))
			best = i;
	return best;
}

bool cfs_xfer_out_waits_on_us(const struct xfer_out *x, uint64_t owed_since_us, uint64_t now)
{
	if (oldest_inflight(x) >= 0)
		return false;
	return owed_since_us == 0 || now < owed_since_us + XFER_STALL_US;
}

static uint64_t loss_time(const struct xfer_out *x, uint64_t loss_delay_us)
{
	uint64_t t = UINT64_MAX;

	if (!x->any_acked)
		return t;
	for (uint16_t i = 0; i < x->next_new; i++) {
		const struct xfer_slot *s = &x->slot[i];
		if (s->state == XP_INFLIGHT && s->pn < x->largest_acked_pn &&
		    s->sent_us + loss_delay_us < t)
			t = s->sent_us + loss_delay_us;
	}
	return t;
}

/* The probe timeout after pto_count of them in a row (doubling, capped). */
static uint64_t pto_due(const struct xfer_out *x, uint64_t pto_us)
{
	unsigned shift = x->pto_count < XFER_PTO_SHIFT_MAX ? x->pto_count : XFER_PTO_SHIFT_MAX;
	return x->last_send_us + (pto_us << shift);
}

uint64_t cfs_xfer_out_deadline(const struct xfer_out *x, const struct xfer_cc *cc)
{
	uint64_t pto_us = cfs_xfer_cc_pto_us(cc);
	uint64_t t = loss_time(x, cfs_xfer_cc_loss_delay_us(cc));

	if (oldest_inflight(x) >= 0 && pto_due(x, pto_us) < t)
		t = pto_due(x, pto_us);
	if (x->last_ack_us + XFER_STALL_US < t) /* nothing sendable, nothing acked */
		t = x->last_ack_us + XFER_STALL_US;
	return t;
}

int cfs_xfer_out_on_timer(struct xfer_out *x, uint64_t now, struct xfer_cc *cc,
                      struct xfer_ack_result *r)
{
	uint64_t pto_us = cfs_xfer_cc_pto_us(cc), loss_delay_us = cfs_xfer_cc_loss_delay_us(cc);

	memset(r, 0, sizeof(*r));
	if (now >= x->last_ack_us + XFER_STALL_US)
		return -ETIMEDOUT;
	if (loss_time(x, loss_delay_us) <= now) {
		detect_losses(x, now, loss_delay_us, r);
		account(cc, x, r, now);
		return 0;
	}
	if (oldest_inflight(x) < 0 || pto_due(x, pto_us) > now)
		return 0;
	x->pto_count++;
	/* RFC 9002 6.2.4: probe with up to two pieces. They are resent as
	 * lost ones are, but their bytes leave the window without a
	 * reduction: a probe timeout is not a congestion event (7.6). */
	for (int k = 0; k < 2; k++) {
		int i = oldest_inflight(x);
		if (i < 0)
			break;
		struct xfer_slot *s = &x->slot[i];
		s->state = XP_LOST;
		x->nlost++;
		if (s->counted) {
			r->probe_bytes += cfs_xfer_out_piece_len(x, (uint16_t)i);
			s->counted = false;
		}
	}
	account(cc, x, r, now);
	return 0;
}

uint32_t cfs_xfer_out_counted(const struct xfer_out *x)
{
	uint32_t n = 0;

	for (uint16_t i = 0; i < x->next_new; i++)
		if (x->slot[i].counted)
			n += cfs_xfer_out_piece_len(x, i);
	return n;
}

/* ------------------------------------------------------------ receiving */

struct xfer_in *cfs_xfer_in_new(const struct xfer_piece *p, uint64_t now)
{
	struct xfer_in *x = xcalloc(1, sizeof(*x));

	x->reqid = p->reqid;
	x->flags = p->flags & XF_REPLY;
	x->len = p->msg_len;
	x->npieces = (uint16_t)cfs_xfer_npieces(p->msg_len);
	x->buf = xmalloc(p->msg_len);
	x->last_rx_us = now;
	return x;
}

void cfs_xfer_in_free(struct xfer_in *x)
{
	if (!x)
		return;
	free(x->buf);
	free(x);
}

int cfs_xfer_in_piece(struct xfer_in *x, const struct xfer_piece *p, uint64_t now)
{
	if (p->msg_len != x->len)
		return -EPROTO;
	x->last_rx_us = now;
	x->ack_pending = true;
	if (p->pn >= x->largest_pn || x->nheld == 0) {
		x->largest_pn = p->pn;
		x->largest_pn_us = now;
	}
	if (x->held[p->index / 8] >> (p->index % 8) & 1)
		return 1;
	x->held[p->index / 8] |= (uint8_t)(1u << (p->index % 8));
	memcpy(x->buf + (size_t)p->index * XFER_PIECE_DATA, p->data, p->len);
	x->nheld++;
	while (x->first_missing < x->npieces &&
	       (x->held[x->first_missing / 8] >> (x->first_missing % 8) & 1))
		x->first_missing++;
	return 0;
}

void cfs_xfer_in_ack(struct xfer_in *x, uint64_t now, struct xfer_ack *a)
{
	memset(a, 0, offsetof(struct xfer_ack, bitmap));
	a->flags = (uint8_t)(x->flags | (cfs_xfer_in_complete(x) ? XF_COMPLETE : 0));
	a->reqid = x->reqid;
	a->largest_pn = x->largest_pn;
	a->ack_delay_us = (uint32_t)(now - x->largest_pn_us);
	a->first_missing = x->first_missing;
	if (!cfs_xfer_in_complete(x)) {
		unsigned span = x->npieces - x->first_missing;
		a->nbitmap = (uint8_t)((span + 7) / 8 > XFER_ACK_BITMAP_MAX ? XFER_ACK_BITMAP_MAX
		                                                          : (span + 7) / 8);
		memset(a->bitmap, 0, a->nbitmap);
		for (unsigned b = 0; b < (unsigned)a->nbitmap * 8 && x->first_missing + b < x->npieces; b++) {
			unsigned i = x->first_missing + b;
			if (x->held[i / 8] >> (i % 8) & 1)
				a->bitmap[b / 8] |= (uint8_t)(1u << (b % 8));
		}
	}
	x->ack_pending = false;
}
