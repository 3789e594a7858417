/*
 * The transport's calls, without I/O (common/rpc.h).
 *
 * A call is a struct in a hash table keyed by its request ID, and (once
 * sent) in a min-heap keyed by its deadline. A call ends exactly once: by
 * a matching reply (same ID, type and source address), by its timeout, or
 * by cancellation (-ECANCELED). A short request is sent again a few times
 * within its timeout (below); a call that times out is the caller's to
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
 * (late_replies) and taught to the estimator (late_reply). With the
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
 * A request or reply longer than one datagram travels as pieces (the
 * links below, common/link.c); the call's deadline moves on with every
 * sign of progress the driver reports (cfs__rpc_touch), and the peer's
 * progress on a call counts for the calls sent to it after that one,
 * which wait behind it (behind_progress). A peer that
 * withholds its answer until we prove our address gives us a token; the
 * call shows it and asks again (cfs__rpc_retry, at most twice).
 */
#include "common/rpc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SILENT_MAX 64
#define LATE_MAX 1024  /* timed-out calls remembered for their late replies */
#define PEERS_MAX 4096 /* destinations with a round-trip estimate or progress */
/* However long its pieces keep coming, a call ends within this. */
#define CALL_LIFE_MAX_US (60ull * 1000000)

/* RFC 6298 2.2-2.3, per destination: its smoothed round trip and mean
 * deviation, from the replies to calls with a computed RTO (0, 0: none
 * yet); and the peer's last progress on a call (a piece of its reply, its
 * request's pieces acknowledged) and that call's send_seq: a call sent
 * after it waits behind it in the peer's queue (behind_progress). */
struct peer_est {
	double srtt_us, rttvar_us;
	uint64_t progress_us, progress_seq;
};

static uint64_t call_key(const void *p) { return ((const struct cfs__call *)p)->deadline_us; }
static void call_set_idx(void *p, size_t i) { ((struct cfs__call *)p)->heap_idx = i; }
static uint64_t rexmit_key(const void *p) { return ((const struct cfs__call *)p)->rexmit_us; }
static void rexmit_set_idx(void *p, size_t i) { ((struct cfs__call *)p)->rx_idx = i; }

void cfs__rpc_init(struct cfs__rpc *r, const struct cfs_transport_config *cfg,
                   struct cfs_transport_stats *st)
{
	memset(r, 0, sizeof(*r));
	r->cfg = *cfg;
	r->st = st;
	st->window = cfg->window_init;
	cfs_htab_init(&r->calls, sizeof(uint64_t), sizeof(struct cfs__call *));
	cfs_htab_init(&r->peers, sizeof(struct peer_key), sizeof(struct peer_est));
	r->calls_heap = (struct cfs__heap){ .key = call_key, .set_idx = call_set_idx };
	r->rexmit_heap = (struct cfs__heap){ .key = rexmit_key, .set_idx = rexmit_set_idx };
}

void cfs__rpc_free(struct cfs__rpc *r)
{
	cfs__heap_free(&r->calls_heap);
	cfs__heap_free(&r->rexmit_heap);
	cfs_htab_free(&r->calls);
	cfs_htab_free(&r->peers);
	cfs_actq_free(&r->acts);
	free(r->silent);
	free(r->late);
}

void cfs__call_free(struct cfs__call *c)
{
	if (!c)
		return;
	free(c->pkt);
	free(c);
}

static struct cfs__rpc_act *act_push(struct cfs__rpc *r, enum cfs__rpc_act_type type, struct cfs__call *c)
{
	struct cfs__rpc_act *a = cfs_actq_push(&r->acts, sizeof(*a));
	a->type = (uint8_t)type;
	a->call = c;
	return a;
}

bool cfs__rpc_poll(struct cfs__rpc *r, struct cfs__rpc_act *ret)
{
	return cfs_actq_pop(&r->acts, ret, sizeof(*ret));
}

/* ------------------------------------------------------------ call table */

static struct cfs__call *table_find(const struct cfs__rpc *r, uint64_t id)
{
	struct cfs__call **c = cfs_htab_get(&r->calls, &id);
	return c ? *c : NULL;
}

static void table_take(struct cfs__rpc *r, uint64_t id)
{
	cfs_htab_del(&r->calls, &id, NULL);
}

bool cfs__rpc_has(const struct cfs__rpc *r, uint64_t reqid)
{
	return table_find(r, reqid) != NULL;
}

/* A call in flight (sent, not ended), or NULL. */
static struct cfs__call *call_find(const struct cfs__rpc *r, uint64_t reqid)
{
	struct cfs__call *c = table_find(r, reqid);
	return c && c->heap_idx != SIZE_MAX ? c : NULL;
}

bool cfs__rpc_awaits(const struct cfs__rpc *r, const struct cfs_addr *from, uint64_t reqid)
{
	const struct cfs__call *c = call_find(r, reqid);
	return c && cfs_addr_eq(&c->dst, from);
}

uint64_t cfs__rpc_call_due(const struct cfs__rpc *r)
{
	return cfs__heap_min(&r->calls_heap);
}

uint64_t cfs__rpc_resend_due(const struct cfs__rpc *r)
{
	return cfs__heap_min(&r->rexmit_heap);
}

/* ------------------------------------------------------------ estimates */

uint64_t cfs_stp_rto_us(uint64_t predicted_us, double alpha_us)
{
	return predicted_us + (uint64_t)(6.0 * alpha_us) + 15000u;
}

static int silent_find(const struct cfs__rpc *r, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < r->nsilent; i++)
		if (cfs_addr_eq(&r->silent[i], a))
			return (int)i;
	return -1;
}

/* A timeout to a: true when a was not silent already (it is now). */
static bool silent_note(struct cfs__rpc *r, const struct cfs_addr *a)
{
	if (silent_find(r, a) >= 0)
		return false;
	if (!r->silent)
		r->silent = xcalloc(SILENT_MAX, sizeof(r->silent[0]));
	if (r->nsilent < SILENT_MAX) {
		r->silent[r->nsilent++] = *a;
	} else {
		r->silent[r->silent_next] = *a;
		r->silent_next = (r->silent_next + 1) % SILENT_MAX;
	}
	return true;
}

static void silent_clear(struct cfs__rpc *r, const struct cfs_addr *a)
{
	int i = r->nsilent ? silent_find(r, a) : -1;

	if (i < 0)
		return;
	r->silent[i] = r->silent[--r->nsilent];
	if (r->silent_next >= r->nsilent)
		r->silent_next = 0;
}

static const struct peer_est *peer_find(const struct cfs__rpc *r, const struct cfs_addr *a)
{
	struct peer_key k;

	cfs__peer_key(&k, a);
	return cfs_htab_get(&r->peers, &k);
}

uint64_t cfs__rpc_peer_srtt(const struct cfs__rpc *r, const struct cfs_addr *a)
{
	const struct peer_est *pe = peer_find(r, a);

	return pe && pe->srtt_us > 0 ? (uint64_t)pe->srtt_us : 0;
}

/* a's entry, a new one zeroed. The table is bounded: when full it is
 * emptied and learnt again. */
static struct peer_est *peer_entry(struct cfs__rpc *r, const struct cfs_addr *a)
{
	struct peer_key k;
	bool added;

	cfs__peer_key(&k, a);
	/* one hash operation while the table has room: this runs for every
	 * piece of an answer (cfs__rpc_touch) */
	if (cfs_htab_count(&r->peers) >= PEERS_MAX && !cfs_htab_get(&r->peers, &k))
		cfs_htab_clear(&r->peers);
	struct peer_est *pe = cfs_htab_put(&r->peers, &k, &added);
	if (added)
		memset(pe, 0, sizeof(*pe));
	return pe;
}

/* A round trip to a measured (RFC 6298 2.3; the first one 2.2). */
static void peer_sample(struct cfs__rpc *r, const struct cfs_addr *a, uint64_t rtt)
{
	struct peer_est *pe = peer_entry(r, a);

	if (pe->srtt_us <= 0) {
		pe->srtt_us = (double)rtt;
		pe->rttvar_us = (double)rtt / 2;
		return;
	}
	pe->rttvar_us += (fabs(pe->srtt_us - (double)rtt) - pe->rttvar_us) / 4;
	pe->srtt_us += ((double)rtt - pe->srtt_us) / 8;
}

/* One round trip measured (predicted_us: what the call was sent with). */
static void rtt_sample(struct cfs__rpc *r, uint64_t rtt, uint64_t predicted_us)
{
	struct cfs_transport_stats *st = r->st;
	double err = fabs((double)rtt - (double)predicted_us);

	if (!r->have_srtt) {
		st->srtt_us = (double)rtt;
		st->rtt_err_us = predicted_us ? err : (double)rtt / 2;
		r->have_srtt = true;
	} else {
		st->srtt_us += ((double)rtt - st->srtt_us) / 8;
		if (predicted_us)
			st->rtt_err_us += (err - st->rtt_err_us) / 10;
	}
	cfs_hist_add(&st->rtt_us, rtt);
}

static unsigned window_limit(const struct cfs__rpc *r)
{
	return (unsigned)(3.0 * r->st->window);
}

/* ------------------------------------------------------------ sending */

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

void cfs__rpc_sent(struct cfs__rpc *r, struct cfs__call *c, bool proven, uint64_t now)
{
	const struct peer_est *pe = peer_find(r, &c->dst);
	uint64_t ri;

	if (pe && pe->srtt_us <= 0)
		pe = NULL;
	if (c->pkt_len > CFS_DGRAM_SAFE || c->outside || c->rexmits >= REXMIT_MAX || !proven ||
	    c->rx_idx != SIZE_MAX)
		return;
	if (pe)
		ri = (uint64_t)(pe->srtt_us + 4 * pe->rttvar_us);
	else
		ri = r->have_srtt ? (uint64_t)(2 * r->st->srtt_us) : 100000;
	if (ri < REXMIT_MIN_US)
		ri = REXMIT_MIN_US;
	ri <<= c->rexmits;
	if (now + ri >= c->deadline_us)
		return;
	c->rexmit_us = now + ri;
	cfs__heap_push(&r->rexmit_heap, c);
}

void cfs__rpc_resend(struct cfs__rpc *r, uint64_t now)
{
	while (r->rexmit_heap.n) {
		struct cfs__call *c = r->rexmit_heap.v[0];
		if (c->rexmit_us > now)
			break;
		cfs__heap_remove(&r->rexmit_heap, 0);
		c->rexmits++;
		r->st->retransmits++;
		act_push(r, CFS__RPC_SEND, c)->arm_resend = true;
	}
}

/* The call's RTO: fixed, or eq. (2) against the destination's own
 * estimate and the floor and cap; then it goes. */
static void call_send(struct cfs__rpc *r, struct cfs__call *c, uint64_t now)
{
	const struct cfs_transport_config *cfg = &r->cfg;
	uint64_t rto;

	if (c->fixed_timeout_ms) {
		rto = (uint64_t)c->fixed_timeout_ms * 1000u;
	} else {
		if (!c->predicted_us && r->have_srtt)
			c->predicted_us = (uint64_t)r->st->srtt_us;
		rto = c->predicted_us ? cfs_stp_rto_us(c->predicted_us, r->st->rtt_err_us)
		                      : (uint64_t)cfg->timeout_ms * 1000u;
		const struct peer_est *pe = peer_find(r, &c->dst);
		if (pe && pe->srtt_us + 4 * pe->rttvar_us > (double)rto)
			rto = (uint64_t)(pe->srtt_us + 4 * pe->rttvar_us);
		if (rto < (uint64_t)cfg->timeout_min_ms * 1000u)
			rto = (uint64_t)cfg->timeout_min_ms * 1000u;
		if (rto > (uint64_t)cfg->timeout_max_ms * 1000u)
			rto = (uint64_t)cfg->timeout_max_ms * 1000u;
	}
	c->sent_us = now;
	c->send_seq = ++r->send_seq;
	c->rto_us = rto;
	c->deadline_us = now + rto;
	cfs__heap_push(&r->calls_heap, c);
	if (!c->outside)
		r->st->inflight++;
	/* pkt is kept: a retry (address validation) sends it again */
	act_push(r, CFS__RPC_SEND, c)->arm_resend = true;
}

void cfs__rpc_start(struct cfs__rpc *r, struct cfs__call *c, uint64_t now)
{
	c->heap_idx = SIZE_MAX;
	c->rx_idx = SIZE_MAX;
	c->qnext = NULL;
	*(struct cfs__call **)cfs_htab_put(&r->calls, &c->reqid, NULL) = c;
	r->st->calls++;
	c->outside = c->background || (r->nsilent && silent_find(r, &c->dst) >= 0);
	if (c->outside || (r->st->inflight < window_limit(r) && !r->q_head)) {
		call_send(r, c, now);
		return;
	}
	if (r->q_tail)
		r->q_tail->qnext = c;
	else
		r->q_head = c;
	r->q_tail = c;
	r->st->queued++;
}

/* Send waiting calls while the window has room. A call to an address
 * that went silent while the call waited leaves the queue at once, outside
 * the window, as it would have gone had it been made now. */
void cfs__rpc_pump(struct cfs__rpc *r, uint64_t now)
{
	while (r->q_head) {
		struct cfs__call *c = r->q_head;
		if (r->nsilent && silent_find(r, &c->dst) >= 0)
			c->outside = true;
		else if (r->st->inflight >= window_limit(r))
			break;
		r->q_head = c->qnext;
		if (!r->q_head)
			r->q_tail = NULL;
		r->st->queued--;
		call_send(r, c, now);
	}
}

/* A peer answered our call with a token instead (it has not seen us
 * prove our address): show the token, then ask again. Twice at most. */
void cfs__rpc_retry(struct cfs__rpc *r, const struct cfs_addr *from, uint64_t reqid,
                    const uint8_t token[static XFER_TOKEN_BYTES], uint64_t now)
{
	struct cfs__call *c = call_find(r, reqid);

	r->st->retries_in++;
	if (!c || !cfs_addr_eq(&c->dst, from) || c->retries >= 2)
		return;
	c->retries++;
	memcpy(act_push(r, CFS__RPC_VALIDATE, c)->token, token, XFER_TOKEN_BYTES);
	cfs__rpc_touch(r, reqid, false, now);
	act_push(r, CFS__RPC_SEND, c);
}

void cfs__rpc_touch(struct cfs__rpc *r, uint64_t reqid, bool by_peer, uint64_t now)
{
	struct cfs__call *c = call_find(r, reqid);

	if (!c)
		return;
	if (by_peer) {
		struct peer_est *pe = peer_entry(r, &c->dst);
		pe->progress_us = now;
		pe->progress_seq = c->send_seq;
	}
	uint64_t d = now + c->rto_us;
	if (d > c->sent_us + CALL_LIFE_MAX_US)
		d = c->sent_us + CALL_LIFE_MAX_US;
	if (d <= c->deadline_us)
		return;
	cfs__heap_remove(&r->calls_heap, c->heap_idx);
	c->deadline_us = d;
	cfs__heap_push(&r->calls_heap, c);
}

/* ------------------------------------------------------------ ending calls */

/* c has left the table: out of the heaps and the window; the driver
 * forgets its pieces, then tells its caller. */
static void call_finish(struct cfs__rpc *r, struct cfs__call *c, int status, const struct cfs_msg *reply,
                        uint64_t rtt_us)
{
	if (c->rx_idx != SIZE_MAX)
		cfs__heap_remove(&r->rexmit_heap, c->rx_idx);
	if (c->heap_idx != SIZE_MAX) {
		cfs__heap_remove(&r->calls_heap, c->heap_idx);
		if (!c->outside)
			r->st->inflight--;
		act_push(r, CFS__RPC_ENDED, c);
	}
	struct cfs__rpc_act *a = act_push(r, CFS__RPC_DONE, c);
	a->status = status;
	a->reply = reply;
	a->rtt_us = rtt_us;
}

/* a has just gone silent: its calls in flight give their window slots
 * back, so that calls to live peers are not held behind them until their
 * timeouts (with many calls out to a peer that froze, a get to a live
 * replica once waited seconds in the queue). */
static void silent_release(struct cfs__rpc *r, const struct cfs_addr *a)
{
	for (size_t i = 0; i < r->calls_heap.n; i++) {
		struct cfs__call *c = r->calls_heap.v[i];
		if (!c->outside && cfs_addr_eq(&c->dst, a)) {
			c->outside = true;
			r->st->inflight--;
		}
	}
}

/* Remember a call that timed out (window_before: w before its timeout
 * halved it, 0 if it did not), overwriting the oldest. */
static void late_note(struct cfs__rpc *r, const struct cfs__call *c, double window_before)
{
	if (!r->late)
		r->late = xcalloc(LATE_MAX, sizeof(r->late[0]));
	r->late[r->late_next] = (struct timed_out){
		.reqid = c->reqid, .sent_us = c->sent_us, .deadline_us = c->deadline_us,
		.predicted_us = c->predicted_us, .dst = c->dst,
		.type = c->type, .has_to = c->has_to, .to_id = c->to_id, .window_before = window_before,
		.fixed = c->fixed_timeout_ms != 0, .resent = c->rexmits || c->retries,
	};
	r->late_next = (r->late_next + 1) % LATE_MAX;
}

/*
 * A peer sends the answers it owes one after another (common/link.c: a
 * link's transfers in the order they began), so a call whose answer is
 * long waits behind the calls sent before it, and its first piece may
 * come more than its RTO after it was sent while the peer is busy with
 * theirs. Progress by a peer on a call is progress on the calls sent to
 * it after that one: when such a call is due, its deadline moves to its
 * RTO after the peer's last progress, within the call's longest life.
 * A call sent before the one that progressed is not waiting behind it,
 * and times out as ever (a request the peer lost or skipped). The
 * call's resends are not scheduled again: they were for its request's
 * loss, and a peer answering the calls before it is alive.
 */
static bool behind_progress(struct cfs__rpc *r, struct cfs__call *c, uint64_t before_us)
{
	const struct peer_est *pe = peer_find(r, &c->dst);

	if (!pe || !pe->progress_seq || pe->progress_seq > c->send_seq || pe->progress_us < c->sent_us)
		return false;
	uint64_t d = pe->progress_us + c->rto_us;
	if (d > c->sent_us + CALL_LIFE_MAX_US)
		d = c->sent_us + CALL_LIFE_MAX_US;
	if (d <= c->deadline_us || d <= before_us)
		return false;
	cfs__heap_remove(&r->calls_heap, c->heap_idx);
	c->deadline_us = d;
	cfs__heap_push(&r->calls_heap, c);
	r->st->timeouts_deferred++;
	return true;
}

bool cfs__rpc_expire(struct cfs__rpc *r, uint64_t before_us)
{
	struct cfs_transport_stats *st = r->st;

	if (!r->calls_heap.n)
		return false;
	struct cfs__call *c = r->calls_heap.v[0];
	if (c->deadline_us > before_us)
		return false;
	if (behind_progress(r, c, before_us))
		return true;
	double before = st->window;
	table_take(r, c->reqid);
	st->timeouts++;
	if (!c->background && silent_note(r, &c->dst)) {
		st->window = st->window / 2 < 1.0 ? 1.0 : st->window / 2;
		silent_release(r, &c->dst);
	}
	late_note(r, c, st->window < before ? before : 0);
	call_finish(r, c, -ETIMEDOUT, NULL, 0);
	return true;
}

void cfs__rpc_cancel_all(struct cfs__rpc *r)
{
	size_t n = cfs_htab_count(&r->calls), pos = 0;
	struct cfs__call **all = xmalloc((n ? n : 1) * sizeof(*all));
	void *v;

	for (size_t i = 0; cfs_htab_next(&r->calls, &pos, NULL, &v); i++)
		all[i] = *(struct cfs__call **)v;
	cfs_htab_clear(&r->calls);
	for (size_t i = 0; i < n; i++) {
		r->st->cancelled++;
		call_finish(r, all[i], -ECANCELED, NULL, 0);
	}
	free(all);
	r->q_head = r->q_tail = NULL;
}

/* ------------------------------------------------------------ replies */

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
static bool late_reply(struct cfs__rpc *r, const struct cfs_addr *from, const struct cfs_msg *m,
                       uint64_t now)
{
	struct cfs_transport_stats *st = r->st;
	struct timed_out *l = NULL;

	for (uint32_t i = 0; r->late && i < LATE_MAX && !l; i++)
		if (r->late[i].reqid && r->late[i].reqid == m->reqid)
			l = &r->late[i];
	if (!l || l->type != m->type || !cfs_addr_eq(&l->dst, from) ||
	    (l->has_to && (!m->has_from || !cfs_id_eq(&m->from_id, &l->to_id))))
		return false;
	uint64_t rtt = now - l->sent_us;
	st->late_replies++;
	st->late_by_us_max = now - l->deadline_us > st->late_by_us_max ? now - l->deadline_us
	                                                              : st->late_by_us_max;
	if (!l->resent) { /* Karn, as in cfs__rpc_reply */
		rtt_sample(r, rtt, l->predicted_us);
		if (!l->fixed)
			peer_sample(r, from, rtt);
	}
	silent_clear(r, from);
	if (l->window_before > st->window)
		st->window = l->window_before;
	log_debug("late %s reply from %s: %llu ms after the call, %llu ms after its timeout",
	          cfs_msg_type_name(m->type), cfs_addr_str(from, (char[CFS_ADDR_STRLEN]){ 0 }),
	          (unsigned long long)(rtt / 1000), (unsigned long long)((now - l->deadline_us) / 1000));
	l->reqid = 0;
	return true;
}

void cfs__rpc_stray(struct cfs__rpc *r, const struct cfs_addr *from, const struct cfs_msg *m,
                    uint64_t now)
{
	r->st->unmatched++;
	if (late_reply(r, from, m, now))
		return;
	log_debug("unmatched %s reply from %s", cfs_msg_type_name(m->type),
	          cfs_addr_str(from, (char[CFS_ADDR_STRLEN]){ 0 }));
}

int cfs__rpc_reply(struct cfs__rpc *r, const struct cfs_addr *from, const struct cfs_msg *m,
                   uint64_t now)
{
	struct cfs_transport_stats *st = r->st;
	struct cfs__call *c = table_find(r, m->reqid);

	if (!c)
		return -ENOENT;
	/* A reply must match the call's ID, type and destination address and,
	 * when the call was addressed to a node, name that node; anything else
	 * is late (timed out already) or forged, and is dropped. */
	if (c->heap_idx == SIZE_MAX || c->type != m->type || !cfs_addr_eq(&c->dst, from) ||
	    (c->has_to && (!m->has_from || !cfs_id_eq(&m->from_id, &c->to_id)))) {
		st->unmatched++;
		log_debug("unmatched %s reply from %s", cfs_msg_type_name(m->type),
		          cfs_addr_str(from, (char[CFS_ADDR_STRLEN]){ 0 }));
		return 0;
	}
	table_take(r, c->reqid);
	uint64_t rtt = now - c->sent_us;
	if (!c->rexmits && !c->retries) { /* Karn: whose copy was answered is unknown */
		rtt_sample(r, rtt, c->predicted_us);
		if (!c->fixed_timeout_ms) /* a long request's wait is not its peer's round trip */
			peer_sample(r, from, rtt);
	}
	st->replies++;
	silent_clear(r, from);
	if (!c->background)
		st->window += 1.0 / st->window;
	if (st->window > r->cfg.window_max)
		st->window = r->cfg.window_max;
	call_finish(r, c, m->status, m, rtt);
	return 1;
}

/* ------------------------------------------------------------ the grace */

bool cfs__grace_start(struct cfs__grace *g, const struct cfs__rpc *r, uint64_t now,
                      uint64_t bytes_in)
{
	if (g->polls > 0 || cfs__rpc_call_due(r) > now)
		return false;
	*g = (struct cfs__grace){
		.polls = CFS__GRACE_POLLS, .before_us = now, .rx = bytes_in, .drains = 0,
	};
	return true;
}

bool cfs__grace_poll(struct cfs__grace *g, uint64_t bytes_in)
{
	if (g->polls <= 0)
		return false;
	if (bytes_in != g->rx && g->drains < CFS__GRACE_DRAIN_MAX) {
		g->rx = bytes_in;
		g->drains++;
		return false;
	}
	return --g->polls == 0;
}

/* ------------------------------------------------------------ the configuration */

void cfs__config_fill(struct cfs_transport_config *c)
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
		c->validation_slots = 4096 /* validation slots */;
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
	cfs__config_fill(c);
}
