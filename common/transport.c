/*
 * The UDP RPC transport.
 *
 * One socket per process. A call is a struct in a hash table keyed by its
 * request ID, and (once sent) in a min-heap keyed by its deadline; a single
 * uv timer is armed for the earliest deadline of either heap (calls, and
 * datagrams held back by the network model). A call ends exactly once: by
 * a matching reply (same ID, type and source address), by its timeout, or
 * by close (-ECANCELED). A short request is sent again a few times within
 * its timeout (below); a call that times out is the caller's to
 * try elsewhere, as DHash++ 5.2.3 prescribes.
 *
 * Window control is STP (DHash++ 5.2.1): w grows by 1/w per reply and
 * halves per timeout; 3w calls may be in flight, the rest wait in FIFO
 * order and are sent as earlier ones end. Timeouts follow eq. (2):
 * RTO = v + 6·alpha + 15 ms, v the caller's latency prediction (or the
 * smoothed RTT when it has none), alpha the running mean of |rtt - v|,
 * but never less than timeout_min_ms (below).
 *
 * Eq. (2) models the network, and on a loaded machine the round
 * trip is mostly the time the peer's loop takes to get to the request (a
 * daemon in a LevelDB sync, sixteen daemons on two cores). Publishing a
 * 205 MB tree into a 16-daemon loopback ring timed out 248 calls (FIND_NEXT,
 * HAVE, REFRESH) with RTOs of 40-100 ms, and every one was answered, 56-146
 * ms after it was sent. So the RTO has a floor, as TCP's has (RFC 6298 2.4;
 * Linux: 200 ms), and replies that come after their timeout are counted
 * (late_replies) and taught to the estimator (late_reply()). With the
 * floor alone the same publish timed out 687 calls answered 0.2-1.3 s
 * late: a daemon's requests wait behind the replica pushes queued in its
 * 8 MiB socket buffer, and how long depends on the peer. So each
 * destination also has its own estimate (RFC 6298: SRTT + 4·RTTVAR, from
 * the calls with a computed RTO, late ones included), and a call's RTO is
 * the larger of that and eq. (2).
 *
 * A timeout is a congestion signal only the first time a destination goes
 * quiet. Its address is then noted as silent (up to SILENT_MAX, the oldest
 * forgotten first) until anything answers from it: further timeouts to it
 * do not halve w again, and calls to it are sent at once outside the
 * window; its calls already out give their slots back, and those queued
 * are sent outside the window when their turn comes.
 * Otherwise, after a mass failure, probes to the dead (each held to its
 * full timeout) filled the 3w slots of a window that every one of their
 * timeouts had halved, and a get to a live replica waited seconds behind
 * them in the queue.
 *
 * Background calls (node authentication, whose targets anyone can name)
 * are always sent outside the window and neither grow nor halve it: a
 * flood of offered nodes at dead addresses once queued thousands of AUTH
 * calls ahead of client work and halved w at every timeout.
 *
 * No datagram is longer than CFS_DGRAM_SAFE. A request or reply
 * that encodes longer travels as pieces, acknowledged and resent one by
 * one under a per-peer window in bytes (common/link.c, common/xfer.c);
 * the call's deadline moves on with every sign of progress (an ack of its
 * request's pieces, a piece of its reply). A reply that would send an
 * address that never proved itself more than three times what it sent
 * us is withheld, and the asker given a token to prove it with; the call
 * sends the token and asks again (retries, at most two).
 */
#include "common/transport_int.h"

#include <arpa/inet.h>
#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TIMER_BATCH 4096 /* expirations handled per wake-up */
#define SILENT_MAX 64
#define LATE_MAX 1024 /* timed-out calls remembered for their late replies */
#define PEERS_MAX 4096 /* destinations with a round-trip estimate */

/*
 * Scratch space shared by every transport on the thread: a message is
 * decoded and handed to its callback before the next one is, and an
 * encoded message is copied or sent before the call returns, so one set
 * suffices. This keeps a transport small (rings of thousands of nodes run
 * in one process) and the large message struct off the stack.
 */
static __thread uint8_t sbuf[CFS_MSG_MAX];
static __thread struct cfs_msg rmsg;
static __thread struct cfs_msg smsg; /* the answer to a hello */

static uint64_t call_key(const void *p) { return ((const struct call *)p)->deadline_us; }
static uint64_t rexmit_key(const void *p) { return ((const struct call *)p)->rexmit_us; }
static void rexmit_set_idx(void *p, size_t i) { ((struct call *)p)->rx_idx = i; }
static void call_set_idx(void *p, size_t i) { ((struct call *)p)->heap_idx = i; }
static uint64_t delayed_key(const void *p) { return ((const struct delayed *)p)->due_us; }
static void delayed_set_idx(void *p, size_t i) { ((struct delayed *)p)->heap_idx = i; }

/* ------------------------------------------------------------ call table */

static void table_add(cfs_transport_t *t, struct call *c)
{
	*(struct call **)cfs_htab_put(&t->calls, &c->reqid, NULL) = c;
}

static struct call *table_find(const cfs_transport_t *t, uint64_t id)
{
	struct call **c = cfs_htab_get(&t->calls, &id);
	return c ? *c : NULL;
}

static struct call *table_take(cfs_transport_t *t, uint64_t id)
{
	struct call *c = NULL;

	cfs_htab_del(&t->calls, &id, &c);
	return c;
}

/* ------------------------------------------------------------ timer */

static void on_timer(uv_timer_t *h);

void cfs__arm_timer(cfs_transport_t *t)
{
	uint64_t due = UINT64_MAX, l;

	if (t->closing)
		return;
	if (t->grace_polls == 0) /* else on_check re-arms */
		due = cfs__heap_min(&t->calls_heap);
	if ((l = cfs__heap_min(&t->delay_heap)) < due)
		due = l;
	if ((l = cfs__links_due(t)) < due)
		due = l;
	if ((l = cfs__heap_min(&t->rexmit_heap)) < due)
		due = l;
	if (due == t->timer_due_us)
		return;
	t->timer_due_us = due;
	if (due == UINT64_MAX) {
		uv_timer_stop(&t->timer);
		return;
	}
	uint64_t now = cfs_now_us();
	uint64_t ms = due > now ? (due - now + 999) / 1000 : 0;
	uv_timer_start(&t->timer, on_timer, ms, 0);
}

/* ------------------------------------------------------------ sending */

/* A whole datagram the full socket refused, sent when it can take more. */
struct backlog {
	struct backlog *next;
	struct cfs_addr dst;
	size_t len;
	uint8_t data[];
};
#define BACKLOG_MAX (8u << 20)

static void poll_update(cfs_transport_t *t);

static void send_now(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len)
{
	ssize_t r = t->bl_head ? -EAGAIN : cfs_udp_send(&t->sock, dst, p, len, 0);

	if (r == -EAGAIN) {
		if (t->bl_bytes + len > BACKLOG_MAX) {
			t->st.send_errors++;
			return;
		}
		struct backlog *b = xmalloc(sizeof(*b) + len);
		b->next = NULL;
		b->dst = *dst;
		b->len = len;
		memcpy(b->data, p, len);
		if (t->bl_tail)
			t->bl_tail->next = b;
		else
			t->bl_head = b;
		t->bl_tail = b;
		t->bl_bytes += len;
		poll_update(t);
		return;
	}
	if (r < 0) {
		char a[CFS_ADDR_STRLEN];
		t->st.send_errors++;
		log_debug("send to %s failed: %s", cfs_addr_str(dst, a), strerror((int)-r));
		return;
	}
	t->st.bytes_out += len;
	t->st.datagrams_out++;
}

/* Send what the full socket refused; false while it still refuses. */
static bool flush_backlog(cfs_transport_t *t)
{
	while (t->bl_head) {
		struct backlog *b = t->bl_head;
		ssize_t r = cfs_udp_send(&t->sock, &b->dst, b->data, b->len, 0);
		if (r == -EAGAIN)
			return false;
		if (r < 0) {
			t->st.send_errors++;
		} else {
			t->st.bytes_out += b->len;
			t->st.datagrams_out++;
		}
		t->bl_head = b->next;
		if (!t->bl_head)
			t->bl_tail = NULL;
		t->bl_bytes -= b->len;
		free(b);
	}
	return true;
}

/* ------------------------------------------------------------ upload cap */

/* The bucket is common/upcap.c; the transport counts its waits, and
 * link_service keeps the transfers it holds alive. */
bool cfs__up_take(cfs_transport_t *t, uint32_t b, bool bg, uint64_t now, uint64_t *wait_us,
                  struct cfs__up_debit *ret_debit)
{
	if (cfs__upcap_take(&t->up, b, bg, now, wait_us, ret_debit))
		return true;
	t->st.upload_held++;
	t->up_blocked = true;
	return false;
}

void cfs__up_give_back(cfs_transport_t *t, const struct cfs__up_debit *d)
{
	cfs__upcap_give_back(&t->up, d);
}

void cfs__up_charge(cfs_transport_t *t, size_t len)
{
	cfs__upcap_charge(&t->up, len, cfs_now_us());
}

/* Every whole datagram leaves through here: the network model's one hook
 * (pieces too, when a model is installed: common/link.c, which has
 * charged them to the upload cap already). */
static void transmit(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len);

void cfs__transmit(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len)
{
	cfs__up_charge(t, len);
	transmit(t, dst, p, len);
}

void cfs__transmit_piece(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len)
{
	transmit(t, dst, p, len);
}

static void transmit(cfs_transport_t *t, const struct cfs_addr *dst, const uint8_t *p, size_t len)
{
	uint64_t delay = 0;

	if (t->has_model) {
		if (t->model.on_send(t->model.ctx, dst, len, &delay)) {
			t->st.model_dropped++;
			return;
		}
		if (delay > 0) {
			struct delayed *d = xmalloc(sizeof(*d) + len);
			d->due_us = cfs_now_us() + delay;
			d->dst = *dst;
			d->len = len;
			memcpy(d->data, p, len);
			cfs__heap_push(&t->delay_heap, d);
			cfs__arm_timer(t);
			return;
		}
	}
	send_now(t, dst, p, len);
}

uint64_t cfs_stp_rto_us(uint64_t predicted_us, double alpha_us)
{
	return predicted_us + (uint64_t)(6.0 * alpha_us) + 15000u;
}

static int silent_find(const cfs_transport_t *t, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < t->nsilent; i++)
		if (cfs_addr_eq(&t->silent[i], a))
			return (int)i;
	return -1;
}

/* A timeout to a: true when a was not silent already (it is now). */
static bool silent_note(cfs_transport_t *t, const struct cfs_addr *a)
{
	if (silent_find(t, a) >= 0)
		return false;
	if (!t->silent)
		t->silent = xcalloc(SILENT_MAX, sizeof(t->silent[0]));
	if (t->nsilent < SILENT_MAX) {
		t->silent[t->nsilent++] = *a;
	} else {
		t->silent[t->silent_next] = *a;
		t->silent_next = (t->silent_next + 1) % SILENT_MAX;
	}
	return true;
}

static void silent_clear(cfs_transport_t *t, const struct cfs_addr *a)
{
	int i = t->nsilent ? silent_find(t, a) : -1;

	if (i < 0)
		return;
	t->silent[i] = t->silent[--t->nsilent];
	if (t->silent_next >= t->nsilent)
		t->silent_next = 0;
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

static const struct peer_est *peer_find(const cfs_transport_t *t, const struct cfs_addr *a)
{
	struct peer_key k;

	cfs__peer_key(&k, a);
	return cfs_htab_get(&t->peers, &k);
}

uint64_t cfs_transport_peer_srtt_us(const cfs_transport_t *t, const struct cfs_addr *a)
{
	const struct peer_est *pe = peer_find(t, a);

	return pe && pe->srtt_us > 0 ? (uint64_t)pe->srtt_us : 0;
}

/* A round trip to a measured (RFC 6298 2.3; the first one 2.2). The table
 * is bounded: when full it is emptied and learnt again. */
static void peer_sample(cfs_transport_t *t, const struct cfs_addr *a, uint64_t rtt)
{
	struct peer_key k;
	bool added;

	cfs__peer_key(&k, a);
	if (!cfs_htab_get(&t->peers, &k) && cfs_htab_count(&t->peers) >= PEERS_MAX)
		cfs_htab_clear(&t->peers);
	struct peer_est *pe = cfs_htab_put(&t->peers, &k, &added);
	if (added) {
		pe->srtt_us = (double)rtt;
		pe->rttvar_us = (double)rtt / 2;
		return;
	}
	pe->rttvar_us += (fabs(pe->srtt_us - (double)rtt) - pe->rttvar_us) / 4;
	pe->srtt_us += ((double)rtt - pe->srtt_us) / 8;
}

static unsigned window_limit(const cfs_transport_t *t)
{
	return (unsigned)(3.0 * t->st.window);
}

/*
 * Without this a lost datagram costs a call its whole timeout (200 ms
 * at least, 750 ms for a lookup hop) before the caller tried elsewhere;
 * at 3 % loss on a real link reads crawled. A whole request (pieces have
 * their own recovery) with no answer after the peer's round trip plus
 * four deviations (RFC 6298's RTO without its floor; at least 20 ms) is
 * sent again, the interval doubling, at most three times and only within
 * its timeout, and only to a destination that has answered us before (a
 * request naming someone else as its origin, a LOOKUP_FWD's, must not
 * make us send four copies of a LOOKUP_DONE to an address that never
 * asked). The peer answers a copy as it did the first: requests are
 * idempotent (chord acknowledges a copy of a LOOKUP_FWD without forwarding
 * it again), one whose answer is still going out in pieces is not answered
 * twice, and a retransmitted call teaches no round trip (Karn).
 */
#define REXMIT_MAX 3
#define REXMIT_MIN_US 20000

static void rexmit_schedule(cfs_transport_t *t, struct call *c, uint64_t now)
{
	const struct peer_est *pe = peer_find(t, &c->dst);
	uint64_t ri;

	if (c->pkt_len > CFS_DGRAM_SAFE || c->outside || c->rexmits >= REXMIT_MAX ||
	    !cfs__proven(t, &c->dst))
		return;
	if (pe)
		ri = (uint64_t)(pe->srtt_us + 4 * pe->rttvar_us);
	else
		ri = t->have_srtt ? (uint64_t)(2 * t->st.srtt_us) : 100000;
	if (ri < REXMIT_MIN_US)
		ri = REXMIT_MIN_US;
	ri <<= c->rexmits;
	if (now + ri >= c->deadline_us)
		return;
	c->rexmit_us = now + ri;
	cfs__heap_push(&t->rexmit_heap, c);
}

static void rexmit_due(cfs_transport_t *t, uint64_t now)
{
	while (t->rexmit_heap.n && !t->closing) {
		struct call *c = t->rexmit_heap.v[0];
		if (c->rexmit_us > now)
			break;
		cfs__heap_remove(&t->rexmit_heap, 0);
		c->rexmits++;
		t->st.retransmits++;
		if (cfs__send_msg(t, &c->dst, c->pkt, c->pkt_len, c->reqid, false, c->low_priority) < 0)
			t->st.send_errors++;
		rexmit_schedule(t, c, now);
	}
}

static void call_send(cfs_transport_t *t, struct call *c)
{
	uint64_t now = cfs_now_us(), rto;

	if (c->fixed_timeout_ms) {
		rto = (uint64_t)c->fixed_timeout_ms * 1000u;
	} else {
		if (!c->predicted_us && t->have_srtt)
			c->predicted_us = (uint64_t)t->st.srtt_us;
		rto = c->predicted_us ? cfs_stp_rto_us(c->predicted_us, t->st.rtt_err_us)
		                      : (uint64_t)t->cfg.timeout_ms * 1000u;
		const struct peer_est *pe = peer_find(t, &c->dst);
		if (pe && pe->srtt_us + 4 * pe->rttvar_us > (double)rto)
			rto = (uint64_t)(pe->srtt_us + 4 * pe->rttvar_us);
		if (rto < (uint64_t)t->cfg.timeout_min_ms * 1000u)
			rto = (uint64_t)t->cfg.timeout_min_ms * 1000u;
		if (rto > (uint64_t)t->cfg.timeout_max_ms * 1000u)
			rto = (uint64_t)t->cfg.timeout_max_ms * 1000u;
	}
	c->sent_us = now;
	c->rto_us = rto;
	c->deadline_us = now + rto;
	cfs__heap_push(&t->calls_heap, c);
	if (!c->outside)
		t->st.inflight++;
	/* pkt is kept: a retry (address validation) sends it again */
	if (cfs__send_msg(t, &c->dst, c->pkt, c->pkt_len, c->reqid, false, c->low_priority) < 0)
		t->st.send_errors++;
	rexmit_schedule(t, c, now);
}

struct call *cfs__call_find(const cfs_transport_t *t, uint64_t reqid)
{
	struct call *c = table_find(t, reqid);
	return c && c->heap_idx != SIZE_MAX ? c : NULL;
}

/* A peer answered our call with a token instead (it has not seen us
 * prove our address): show the token, then ask again. Twice at most. */
void cfs__on_retry(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid,
                  const uint8_t token[static XFER_TOKEN_BYTES])
{
	struct call *c = cfs__call_find(t, reqid);
	uint8_t v[XFER_VALIDATE_LEN];

	t->st.retries_in++;
	if (!c || !cfs_addr_eq(&c->dst, from) || c->retries >= 2)
		return;
	c->retries++;
	cfs__transmit(t, from, v, cfs_xfer_validate_encode(v, token));
	cfs__call_touch(t, c);
	if (cfs__send_msg(t, &c->dst, c->pkt, c->pkt_len, c->reqid, false, c->low_priority) < 0)
		t->st.send_errors++;
}

/* However long its pieces keep coming, a call ends within this. */
#define CALL_LIFE_MAX_US (60ull * 1000000)

void cfs__call_touch(cfs_transport_t *t, struct call *c)
{
	uint64_t d = cfs_now_us() + c->rto_us;

	if (d > c->sent_us + CALL_LIFE_MAX_US)
		d = c->sent_us + CALL_LIFE_MAX_US;
	if (c->heap_idx == SIZE_MAX || d <= c->deadline_us)
		return;
	cfs__heap_remove(&t->calls_heap, c->heap_idx);
	c->deadline_us = d;
	cfs__heap_push(&t->calls_heap, c);
}

/* Send waiting calls while the window has room. A call to an address
 * that went silent while the call waited leaves the queue at once, outside
 * the window, as it would have gone had it been made now. */
static void pump(cfs_transport_t *t)
{
	while (t->q_head && !t->closing) {
		struct call *c = t->q_head;
		if (t->nsilent && silent_find(t, &c->dst) >= 0)
			c->outside = true;
		else if (t->st.inflight >= window_limit(t))
			break;
		t->q_head = c->qnext;
		if (!t->q_head)
			t->q_tail = NULL;
		t->st.queued--;
		call_send(t, c);
	}
	cfs__arm_timer(t);
}

/* a has just gone silent: its calls in flight give their window slots
 * back, so that calls to live peers are not held behind them until their
 * timeouts (with many calls out to a peer that froze, a get to a live
 * replica once waited seconds in the queue). */
static void silent_release(cfs_transport_t *t, const struct cfs_addr *a)
{
	for (size_t i = 0; i < t->calls_heap.n; i++) {
		struct call *c = t->calls_heap.v[i];
		if (!c->outside && cfs_addr_eq(&c->dst, a)) {
			c->outside = true;
			t->st.inflight--;
		}
	}
}

int cfs_transport_call(cfs_transport_t *t, const struct cfs_addr *dst, struct cfs_msg *req,
                       const struct cfs_call_opts *opts, cfs_reply_cb cb, void *arg)
{
	struct call *c;
	size_t len;
	int r;

	if (t->closing)
		return -ECANCELED;
	/* Sit and Morris 2002 §5 (and DNS's random query IDs): every call's
	 * ID is drawn afresh, so that a forged reply must guess 64 bits, not
	 * count; drawn again on the (unlikely) collision with one in flight */
	do
		randombytes_buf(&req->reqid, sizeof(req->reqid));
	while (table_find(t, req->reqid));
	req->is_reply = false;
	req->status = 0;
	if (t->coord)
		req->coord = *t->coord;
	bool probe;
	req->version = cfs__ver_for(t, dst, cfs_now_us(), &probe);
	req->clock_ms = req->version >= 5 ? cfs_wall_ms() : 0;
	if ((r = cfs_msg_encode(req, sbuf, sizeof(sbuf), &len)) < 0)
		return r;
	if (probe)
		cfs__ver_probe(t, dst);
	c = xcalloc(1, sizeof(*c));
	c->reqid = req->reqid;
	c->dst = *dst;
	c->cb = cb;
	c->arg = arg;
	c->type = req->type;
	c->has_to = req->has_to;
	c->to_id = req->to_id;
	c->heap_idx = SIZE_MAX;
	c->rx_idx = SIZE_MAX;
	c->pkt = xmemdup(sbuf, len);
	c->pkt_len = len;
	if (opts) {
		c->fixed_timeout_ms = opts->timeout_ms;
		c->predicted_us = opts->predicted_rtt_us;
		c->background = opts->background;
		c->low_priority = opts->low_priority;
	}
	table_add(t, c);
	t->st.calls++;
	c->outside = c->background || (t->nsilent && silent_find(t, dst) >= 0);
	if (c->outside || (t->st.inflight < window_limit(t) && !t->q_head)) {
		call_send(t, c);
		cfs__arm_timer(t);
	} else {
		if (t->q_tail)
			t->q_tail->qnext = c;
		else
			t->q_head = c;
		t->q_tail = c;
		t->st.queued++;
	}
	return 0;
}

static int send_reply(cfs_transport_t *t, const struct cfs_reply_to *to, struct cfs_msg *m)
{
	size_t len;
	int r;

	m->type = to->type;
	m->reqid = to->reqid;
	m->is_reply = true;
	if (to->has_to && (!m->has_from || !cfs_id_eq(&m->from_id, &to->to_id))) {
		/* the node the request was addressed to answers (handle_reply) */
		m->from_vindex = m->has_from ? m->from_vindex : 0;
		m->has_from = true;
		m->from_id = to->to_id;
	}
	if (t->coord)
		m->coord = *t->coord;
	m->version = to->version ? to->version : CFS_PROTO_VERSION_MIN;
	m->clock_ms = m->version >= 5 ? cfs_wall_ms() : 0;
	if ((r = cfs_msg_encode(m, sbuf, sizeof(sbuf), &len)) < 0)
		return r;
	t->st.replies_out++;
	/* QUIC's anti-amplification rule (RFC 9000 8.1): an address that has
	 * not proven it is the asker's gets at most 3x what it sent us, and
	 * no answer in pieces; anything else waits for its token (it asks
	 * again) */
	if (cfs__proven(t, &to->addr))
		return cfs__send_msg(t, &to->addr, sbuf, len, to->reqid, true, to->low_priority);
	/* pieces (and their resends) go only to a proven address */
	if (len > CFS_DGRAM_SAFE || !cfs__answer_take(t, &to->addr, len, to->in_len)) {
		cfs__send_retry(t, &to->addr, to->reqid, to->in_len);
		return 0;
	}
	cfs__transmit(t, &to->addr, sbuf, len);
	return 0;
}

int cfs_transport_reply(cfs_transport_t *t, const struct cfs_reply_to *to, struct cfs_msg *reply)
{
	if (t->closing)
		return -ECANCELED;
	reply->status = 0;
	return send_reply(t, to, reply);
}

int cfs_transport_send_fresh(cfs_transport_t *t, const struct cfs_addr *dst, struct cfs_msg *m)
{
	uint8_t buf[CFS_DGRAM_SAFE];
	size_t len;
	int fd, r;

	if (t->closing)
		return -ECANCELED;
	m->version = CFS_PROTO_VERSION;
	m->clock_ms = cfs_wall_ms();
	m->is_reply = false;
	randombytes_buf(&m->reqid, sizeof(m->reqid));
	if (t->coord)
		m->coord = *t->coord;
	if ((r = cfs_msg_encode(m, buf, sizeof(buf), &len)) < 0)
		return r;
	if ((fd = socket(dst->sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return -errno;
	r = sendto(fd, buf, len, 0, &dst->sa, cfs_addr_len(dst)) < 0 ? -errno : 0;
	close(fd);
	if (r == 0)
		t->st.bytes_out += len;
	return r;
}

int cfs_transport_reply_error(cfs_transport_t *t, const struct cfs_reply_to *to, int status)
{
	struct cfs_msg *m = xmalloc(sizeof(*m));
	int r;

	if (t->closing || status >= 0 || status < -4095) {
		free(m);
		return t->closing ? -ECANCELED : -EINVAL;
	}
	cfs_msg_init(m, (enum cfs_msg_type)to->type);
	m->status = status;
	r = send_reply(t, to, m);
	free(m);
	return r;
}

/* ------------------------------------------------------------ ending calls */

static void call_finish(cfs_transport_t *t, struct call *c, int status,
                        const struct cfs_msg *reply, uint64_t rtt_us)
{
	struct cfs_rpc_result res = { .rtt_us = rtt_us, .from = &c->dst };

	if (c->rx_idx != SIZE_MAX)
		cfs__heap_remove(&t->rexmit_heap, c->rx_idx);
	if (c->heap_idx != SIZE_MAX) {
		cfs__heap_remove(&t->calls_heap, c->heap_idx);
		if (!c->outside)
			t->st.inflight--;
		if (c->pkt_len > CFS_DGRAM_SAFE) /* its request's pieces are moot now */
			cfs__cancel_send(t, &c->dst, c->reqid);
	}
	c->cb(c->arg, status, reply, &res);
	free(c->pkt);
	free(c);
}

/* Remember a call that timed out (window_before: w before its timeout
 * halved it, 0 if it did not), overwriting the oldest. */
static void late_note(cfs_transport_t *t, const struct call *c, double window_before)
{
	if (!t->late)
		t->late = xcalloc(LATE_MAX, sizeof(t->late[0]));
	t->late[t->late_next] = (struct timed_out){
		.reqid = c->reqid, .sent_us = c->sent_us, .deadline_us = c->deadline_us,
		.predicted_us = c->predicted_us, .dst = c->dst,
		.type = c->type, .has_to = c->has_to, .to_id = c->to_id, .window_before = window_before,
		.fixed = c->fixed_timeout_ms != 0, .resent = c->rexmits || c->retries,
	};
	t->late_next = (t->late_next + 1) % LATE_MAX;
}

/*
 * A call is not declared lost the moment its deadline passes: the loop may
 * have been busy or the process descheduled, with the reply (or, when peers
 * share this loop, the request) already waiting in a socket buffer. Overdue
 * calls expire only after two further non-blocking polls have read what had
 * arrived; that costs microseconds on an idle loop and keeps a stalled one
 * from declaring live peers dead.
 */
#define GRACE_POLLS 2
/*
 * Nor while datagrams are still coming in. A daemon that is
 * also a replica can have hundreds of pushed blocks queued in its socket
 * buffer ahead of a reply (libuv reads at most 32 datagrams per poll), and
 * two polls then expired calls whose replies had arrived in time. A poll
 * that read something does not count, up to GRACE_DRAIN_MAX of them (with
 * 32 datagrams a poll, more than an 8 MiB buffer of 8 KiB blocks).
 */
#define GRACE_DRAIN_MAX 64

static void expire_overdue(cfs_transport_t *t)
{
	unsigned done = 0;

	while (t->calls_heap.n && done < TIMER_BATCH && !t->closing) {
		struct call *c = t->calls_heap.v[0];
		if (c->deadline_us > t->grace_before_us)
			break;
		double before = t->st.window;
		table_take(t, c->reqid);
		t->st.timeouts++;
		if (!c->background && silent_note(t, &c->dst)) {
			t->st.window = t->st.window / 2 < 1.0 ? 1.0 : t->st.window / 2;
			silent_release(t, &c->dst);
		}
		late_note(t, c, t->st.window < before ? before : 0);
		call_finish(t, c, -ETIMEDOUT, NULL, 0);
		done++;
	}
	if (t->closing)
		return;
	pump(t);
	cfs__arm_timer(t);
}

static void on_check(uv_check_t *h)
{
	cfs_transport_t *t = container_of(h, cfs_transport_t, check);

	if (t->st.bytes_in != t->grace_rx && t->grace_drains < GRACE_DRAIN_MAX) {
		t->grace_rx = t->st.bytes_in;
		t->grace_drains++;
		return;
	}
	if (--t->grace_polls > 0)
		return;
	uv_idle_stop(&t->idle);
	uv_check_stop(&t->check);
	t->timer_due_us = UINT64_MAX;
	expire_overdue(t);
}

static void on_idle(uv_idle_t *h)
{
	(void)h;
}

static void on_timer(uv_timer_t *h)
{
	cfs_transport_t *t = container_of(h, cfs_transport_t, timer);
	uint64_t now = cfs_now_us();
	unsigned done = 0;

	t->timer_due_us = UINT64_MAX;
	while (t->delay_heap.n && done < TIMER_BATCH && !t->closing) {
		struct delayed *d = t->delay_heap.v[0];
		if (d->due_us > now)
			break;
		cfs__heap_remove(&t->delay_heap, 0);
		send_now(t, &d->dst, d->data, d->len);
		free(d);
		done++;
	}
	if (t->closing)
		return;
	rexmit_due(t, now);
	if (t->closing)
		return;
	cfs__links_timer(t, now);
	if (t->closing)
		return;
	if (done == TIMER_BATCH) { /* more may be due: come back after I/O */
		t->timer_due_us = 0;
		uv_timer_start(&t->timer, on_timer, 0, 0);
	}
	if (t->grace_polls == 0 && t->calls_heap.n &&
	    ((struct call *)t->calls_heap.v[0])->deadline_us <= now) {
		t->grace_before_us = now;
		t->grace_polls = GRACE_POLLS;
		t->grace_rx = t->st.bytes_in;
		t->grace_drains = 0;
		uv_idle_start(&t->idle, on_idle);
		uv_check_start(&t->check, on_check);
		return;
	}
	if (done < TIMER_BATCH)
		cfs__arm_timer(t);
}

/* ------------------------------------------------------------ receiving */

/* One round trip measured (predicted_us: what the call was sent with). */
static void rtt_sample(cfs_transport_t *t, uint64_t rtt, uint64_t predicted_us)
{
	double err = fabs((double)rtt - (double)predicted_us);

	if (!t->have_srtt) {
		t->st.srtt_us = (double)rtt;
		t->st.rtt_err_us = predicted_us ? err : (double)rtt / 2;
		t->have_srtt = true;
	} else {
		t->st.srtt_us += ((double)rtt - t->st.srtt_us) / 8;
		if (predicted_us)
			t->st.rtt_err_us += (err - t->st.rtt_err_us) / 10;
	}
	cfs_hist_add(&t->st.rtt_us, rtt);
}

/*
 * A reply to a call that had already timed out: the timeout was spurious,
 * the destination alive and the RTO too tight for how busy it (or we) are.
 * A loaded machine sees hundreds of these per publish; were they dropped
 * unseen, so the estimator only ever learnt the round
 * trips short enough to beat the RTO and kept it tight. A late reply's
 * round trip is a true sample (request IDs are never reused) unless the
 * request was sent more than once (Karn), so it is fed to the estimator
 * like any other; the destination is no longer silent; and the
 * window its timeout halved is given back (the Eifel response, RFC 4015).
 * The caller was told -ETIMEDOUT already and is not told again.
 */
static bool late_reply(cfs_transport_t *t, const struct cfs_addr *from)
{
	const struct cfs_msg *m = &rmsg;
	struct timed_out *l = NULL;

	for (uint32_t i = 0; t->late && i < LATE_MAX && !l; i++)
		if (t->late[i].reqid && t->late[i].reqid == m->reqid)
			l = &t->late[i];
	if (!l || l->type != m->type || !cfs_addr_eq(&l->dst, from) ||
	    (l->has_to && (!m->has_from || !cfs_id_eq(&m->from_id, &l->to_id))))
		return false;
	uint64_t now = cfs_now_us();
	uint64_t rtt = now - l->sent_us;
	t->st.late_replies++;
	t->st.late_by_us_max = now - l->deadline_us > t->st.late_by_us_max ? now - l->deadline_us
	                                                                    : t->st.late_by_us_max;
	if (!l->resent) { /* Karn, as in handle_reply */
		rtt_sample(t, rtt, l->predicted_us);
		if (!l->fixed)
			peer_sample(t, from, rtt);
	}
	silent_clear(t, from);
	if (l->window_before > t->st.window)
		t->st.window = l->window_before;
	log_debug("late %s reply from %s: %llu ms after the call, %llu ms after its timeout",
	          cfs_msg_type_name(m->type), cfs_addr_str(from, (char[CFS_ADDR_STRLEN]){ 0 }),
	          (unsigned long long)(rtt / 1000), (unsigned long long)((now - l->deadline_us) / 1000));
	l->reqid = 0;
	return true;
}

static void handle_reply(cfs_transport_t *t, const struct cfs_addr *from)
{
	const struct cfs_msg *m = &rmsg;
	struct call *c;
	char a[CFS_ADDR_STRLEN];

	/* A reply must match the call's ID, type and destination address and,
	 * when the call was addressed to a node, name that node; anything else
	 * is late (timed out already) or forged, and is dropped. */
	c = table_find(t, m->reqid);
	if (!c || c->heap_idx == SIZE_MAX || c->type != m->type || !cfs_addr_eq(&c->dst, from) ||
	    (c->has_to && (!m->has_from || !cfs_id_eq(&m->from_id, &c->to_id)))) {
		if (!c && cfs__ver_probe_answer(t, from, m->reqid)) {
			cfs__ver_heard(t, from, m, cfs_now_us(), cfs_wall_ms());
			return; /* our hello's answer */
		}
		t->st.unmatched++;
		if (!c && late_reply(t, from))
			return;
		log_debug("unmatched %s reply from %s", cfs_msg_type_name(m->type), cfs_addr_str(from, a));
		return;
	}
	table_take(t, c->reqid);
	cfs__validated(t, from);
	cfs__ver_heard(t, from, m, cfs_now_us(), cfs_wall_ms());
	uint64_t rtt = cfs_now_us() - c->sent_us;
	if (!c->rexmits && !c->retries) { /* Karn: whose copy was answered is unknown */
		rtt_sample(t, rtt, c->predicted_us);
		if (!c->fixed_timeout_ms) /* a long request's wait is not its peer's round trip */
			peer_sample(t, from, rtt);
	}
	t->st.replies++;
	silent_clear(t, from);
	if (!c->background)
		t->st.window += 1.0 / t->st.window;
	if (t->st.window > t->cfg.window_max)
		t->st.window = t->cfg.window_max;
	call_finish(t, c, m->status, m, rtt);
	if (!t->closing)
		pump(t);
}

void cfs__on_message(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *p, size_t len,
                    bool low_priority)
{
	const char *why = "";
	char a[CFS_ADDR_STRLEN];
	int r = cfs_msg_decode(p, len, &rmsg, &why);

	if (r < 0) {
		t->st.malformed++;
		log_debug("dropped malformed message (%zu bytes) from %s: %s", len,
		          cfs_addr_str(from, a), why);
		return;
	}
	if (rmsg.is_reply) {
		handle_reply(t, from);
		return;
	}
	if (rmsg.type == CFS_MSG_HELLO) { /* which version we speak: answered here */
		struct cfs_reply_to rt = { .addr = *from, .reqid = rmsg.reqid, .type = rmsg.type,
		                           .in_len = len, .version = rmsg.version };
		cfs_msg_init(&smsg, CFS_MSG_HELLO);
		t->st.hellos_in++;
		(void)send_reply(t, &rt, &smsg);
		return;
	}
	if (cfs__answering(t, from, rmsg.reqid)) {
		t->st.dup_requests++;
		return;
	}
	t->st.requests_in++;
	if (t->on_request) {
		struct cfs_reply_to rt = { .addr = *from, .reqid = rmsg.reqid, .type = rmsg.type,
		                           .in_len = len, .version = rmsg.version,
		                           .has_to = rmsg.has_to, .to_id = rmsg.to_id,
		                           .low_priority = low_priority };
		t->on_request(t->arg, &rmsg, &rt);
	}
}

static void on_dgram(void *arg, const struct cfs_addr *from, const uint8_t *p, size_t len,
                     bool trunc)
{
	cfs_transport_t *t = arg;
	char a[CFS_ADDR_STRLEN];

	if (t->closing)
		return;
	t->st.bytes_in += len;
	cfs__note_in(t, from, len);
	if (trunc || len == 0 || len > CFS_DGRAM_SAFE) {
		t->st.malformed++;
		log_debug("dropped a %s datagram from %s", trunc || len ? "too large" : "empty",
		          cfs_addr_str(from, a));
		return;
	}
	enum xfer_kind kind = cfs_xfer_kind(p, len);
	if (kind == XFER_KIND_MESSAGE)
		cfs__on_message(t, from, p, len, false);
	else if (kind == XFER_KIND_MESSAGE_BG)
		cfs__on_message(t, from, p + 1, len - 1, true);
	else
		cfs__on_frame(t, from, kind, p, len);
}

/* Read until the socket is empty (bounded), then send the acks the batch
 * owes; a full socket that drained sends what waited. */
static void on_poll(uv_poll_t *h, int status, int events)
{
	cfs_transport_t *t = container_of(h, cfs_transport_t, poll);

	if (t->closing)
		return;
	if (status < 0) {
		log_debug("udp poll error: %s", uv_strerror(status));
		return;
	}
	if (events & UV_WRITABLE) {
		if (flush_backlog(t)) {
			t->sock_blocked = false;
			cfs__on_writable(t);
		}
		poll_update(t);
	}
	if (events & UV_READABLE) {
		int r = cfs_udp_drain(&t->sock, 32, on_dgram, t);
		if (r < 0 && r != -EAGAIN)
			log_debug("udp receive error: %s", strerror(-r));
		if (!t->closing)
			cfs__flush_acks(t);
	}
	if (!t->closing)
		cfs__arm_timer(t);
}

static void poll_update(cfs_transport_t *t)
{
	int want = UV_READABLE;

	if (t->closing)
		return;
	if (t->bl_head || t->sock_blocked)
		want |= UV_WRITABLE;
	if (want != t->poll_events) {
		t->poll_events = want;
		uv_poll_start(&t->poll, want, on_poll);
	}
}

void cfs__want_writable(cfs_transport_t *t)
{
	t->sock_blocked = true;
	poll_update(t);
}

/* ------------------------------------------------------------ lifetime */

/* Room for a full window of datagrams: with the default 208 KiB the kernel
 * drops a burst long before the windows are full. */
#define SOCKET_BUF (8 << 20)

static void on_handle_closed(uv_handle_t *h);

static void config_defaults(struct cfs_transport_config *c)
{
	if (c->window_init < 1)
		c->window_init = 1;
	if (c->window_max < c->window_init)
		c->window_max = c->window_init;
	if (!c->timeout_ms)
		c->timeout_ms = 1000;
	if (!c->timeout_max_ms)
		c->timeout_max_ms = 5000;
	if (!c->xfer_inflight_max)
		c->xfer_inflight_max = 4u << 20;
	if (!c->reasm_peer_max)
		c->reasm_peer_max = 8u << 20;
	if (!c->reasm_total_max)
		c->reasm_total_max = 64u << 20;
	if (!c->validation_slots)
		c->validation_slots = VSLOTS;
	if (!c->reasm_idle_ms)
		c->reasm_idle_ms = 10000;
	if (!c->ledbat_target_ms)
		c->ledbat_target_ms = 25;
}

void cfs_transport_config_default(struct cfs_transport_config *c)
{
	memset(c, 0, sizeof(*c));
	c->window_init = 4;
	c->window_max = 256;
	c->timeout_ms = 1000;
	c->timeout_max_ms = 5000;
	c->timeout_min_ms = CFS_RTO_MIN_MS;
	config_defaults(c);
}

int cfs_transport_new(uv_loop_t *loop, const struct cfs_transport_config *c,
                      cfs_request_cb on_request, void *arg, cfs_transport_t **ret)
{
	cfs_transport_t *t = xcalloc(1, sizeof(*t));
	int r;

	t->loop = loop;
	t->cfg = *c;
	config_defaults(&t->cfg);
	cfs__upcap_init(&t->up, t->cfg.upload_bytes_per_s);
	t->on_request = on_request;
	t->arg = arg;
	t->st.window = t->cfg.window_init;
	cfs_htab_init(&t->calls, sizeof(uint64_t), sizeof(struct call *));
	cfs_htab_init(&t->peers, sizeof(struct peer_key), sizeof(struct peer_est));
	cfs__ver_init(t);
	t->calls_heap = (struct heap){ .key = call_key, .set_idx = call_set_idx };
	t->rexmit_heap = (struct heap){ .key = rexmit_key, .set_idx = rexmit_set_idx };
	t->delay_heap = (struct heap){ .key = delayed_key, .set_idx = delayed_set_idx };
	t->timer_due_us = UINT64_MAX;
	if ((r = cfs_udp_open(&t->sock, c->host, c->port, SOCKET_BUF)) < 0) {
		cfs_htab_free(&t->calls);
		cfs_htab_free(&t->peers);
		cfs__ver_free(t);
		free(t);
		return r;
	}
	cfs__links_init(t);
	uv_poll_init(loop, &t->poll, t->sock.fd);
	uv_timer_init(loop, &t->timer);
	uv_idle_init(loop, &t->idle);
	uv_check_init(loop, &t->check);
	t->handles_open = 4;
	t->poll_events = UV_READABLE;
	if ((r = uv_poll_start(&t->poll, UV_READABLE, on_poll)) < 0) {
		cfs_transport_close(t);
		return r;
	}
	*ret = t;
	return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
	cfs_transport_t *t = h->data;
	if (--t->handles_open > 0)
		return;
	cfs_udp_close(&t->sock);
	cfs__links_free(t);
	cfs__heap_free(&t->calls_heap);
	cfs__heap_free(&t->delay_heap);
	cfs__heap_free(&t->rexmit_heap);
	cfs_htab_free(&t->calls);
	cfs_htab_free(&t->peers);
	cfs__ver_free(t);
	free(t->silent);
	free(t->late);
	free(t);
}

void cfs_transport_close(cfs_transport_t *t)
{
	if (!t || t->closing)
		return;
	t->closing = true;
	uv_poll_stop(&t->poll);
	uv_timer_stop(&t->timer);
	/* Cancel every call, sent or waiting; callbacks may not start new ones
	 * (cfs_transport_call refuses while closing). */
	size_t n = cfs_htab_count(&t->calls), pos = 0;
	struct call **all = xmalloc((n ? n : 1) * sizeof(*all));
	void *v;
	for (size_t i = 0; cfs_htab_next(&t->calls, &pos, NULL, &v); i++)
		all[i] = *(struct call **)v;
	cfs_htab_clear(&t->calls);
	for (size_t i = 0; i < n; i++) {
		t->st.cancelled++;
		call_finish(t, all[i], -ECANCELED, NULL, 0);
	}
	free(all);
	t->q_head = t->q_tail = NULL;
	while (t->delay_heap.n) {
		struct delayed *d = t->delay_heap.v[0];
		cfs__heap_remove(&t->delay_heap, 0);
		free(d);
	}
	while (t->bl_head) {
		struct backlog *b = t->bl_head;
		t->bl_head = b->next;
		free(b);
	}
	t->bl_tail = NULL;
	cfs__links_close(t);
	t->poll.data = t;
	t->timer.data = t;
	t->idle.data = t;
	t->check.data = t;
	uv_close((uv_handle_t *)&t->poll, on_handle_closed);
	uv_close((uv_handle_t *)&t->timer, on_handle_closed);
	uv_close((uv_handle_t *)&t->idle, on_handle_closed);
	uv_close((uv_handle_t *)&t->check, on_handle_closed);
}

int cfs_transport_local_addr(cfs_transport_t *t, struct cfs_addr *ret)
{
	return cfs_udp_local_addr(&t->sock, ret);
}

void cfs_transport_get_stats(cfs_transport_t *t, struct cfs_transport_stats *ret)
{
	*ret = t->st;
	cfs__links_stats(t, ret);
}

void cfs_transport_set_coord(cfs_transport_t *t, const struct cfs_coord *coord)
{
	t->coord = coord;
}

void cfs_transport_set_model(cfs_transport_t *t, const struct cfs_netmodel *m)
{
	t->has_model = m && m->on_send;
	if (t->has_model)
		t->model = *m;
}

uv_loop_t *cfs_transport_loop(const cfs_transport_t *t)
{
	return t->loop;
}
