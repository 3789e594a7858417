/* The calls' machine (common/rpc.h), scripted with a fake clock: no
 * socket, no loop. Each test starts calls, plays the driver's part (take
 * the actions, say whether a destination is proven, feed replies and the
 * time) and checks what the machine asks for. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/rpc.h"

#define MS 1000ull
#define T0 (1000 * MS)

static struct cfs__rpc R;
static struct cfs_transport_stats ST;
static struct cfs_transport_config CFG;
static struct cfs_addr A, B;

/* What the driver did with the actions it took. */
struct seen {
	unsigned sends, resend_arms, validates, ended, done;
	int status;                /* of the last DONE */
	uint64_t rtt_us;           /* of the last DONE */
	struct cfs__call *last_send;
	bool had_reply;
};

static void setup(void)
{
	memset(&ST, 0, sizeof(ST));
	cfs_transport_config_default(&CFG);
	cfs__rpc_init(&R, &CFG, &ST);
	cr_assert(cfs_addr_parse(&A, "10.0.0.1:4460") == 0);
	cr_assert(cfs_addr_parse(&B, "10.0.0.2:4460") == 0);
}

static void teardown(void)
{
	struct cfs__rpc_act a;

	cfs__rpc_cancel_all(&R);
	while (cfs__rpc_poll(&R, &a))
		if (a.type == CFS__RPC_DONE)
			cfs__call_free(a.call);
	cfs__rpc_free(&R);
}

TestSuite(rpc, .init = setup, .fini = teardown);

static uint64_t next_id = 1;

/* A call of type PING to dst (pkt_len bytes of request), the options
 * given; started at now. */
static struct cfs__call *call_to(const struct cfs_addr *dst, size_t pkt_len, uint32_t fixed_ms,
                            bool background, uint64_t now)
{
	struct cfs__call *c = calloc(1, sizeof(*c));

	c->reqid = next_id++;
	c->dst = *dst;
	c->type = CFS_MSG_PING;
	c->pkt = calloc(1, pkt_len);
	c->pkt_len = pkt_len;
	c->fixed_timeout_ms = fixed_ms;
	c->background = background;
	cfs__rpc_start(&R, c, now);
	return c;
}

/* Take every action queued, as the driver would: a SEND that asks is
 * answered with `proven`; a DONE frees its call. */
static void take(struct seen *s, bool proven, uint64_t now)
{
	struct cfs__rpc_act a;

	while (cfs__rpc_poll(&R, &a)) {
		switch (a.type) {
		case CFS__RPC_SEND:
			s->sends++;
			s->last_send = a.call;
			if (a.arm_resend) {
				s->resend_arms++;
				cfs__rpc_sent(&R, a.call, proven, now);
			}
			break;
		case CFS__RPC_VALIDATE:
			s->validates++;
			break;
		case CFS__RPC_ENDED:
			s->ended++;
			break;
		case CFS__RPC_DONE:
			s->done++;
			s->status = a.status;
			s->rtt_us = a.rtt_us;
			s->had_reply = a.reply != NULL;
			cfs__call_free(a.call);
			break;
		}
	}
}

/* The reply to reqid from `from`, as decoded. */
static void reply_msg(struct cfs_msg *m, uint64_t reqid)
{
	cfs_msg_init(m, CFS_MSG_PING);
	m->is_reply = true;
	m->reqid = reqid;
}

/* A call whose reply is lost goes again after the peer's round trip (no
 * estimate yet: 100 ms), and once more after twice that; the reply to a
 * copy ends it, and teaches no round trip (Karn). */
Test(rpc, a_lost_reply_is_sent_again)
{
	struct seen s = { 0 };
	struct cfs_msg m;

	struct cfs__call *c = call_to(&A, 100, 0, false, T0);
	uint64_t id = c->reqid;
	take(&s, true, T0);
	cr_assert_eq(s.sends, 1);
	cr_assert_eq(cfs__rpc_resend_due(&R), T0 + 100 * MS);
	cr_assert_eq(cfs__rpc_call_due(&R), T0 + CFG.timeout_ms * MS, "no estimate: the default RTO");

	cfs__rpc_resend(&R, T0 + 99 * MS);
	take(&s, true, T0 + 99 * MS);
	cr_assert_eq(s.sends, 1, "not before its time");
	cfs__rpc_resend(&R, T0 + 100 * MS);
	take(&s, true, T0 + 100 * MS);
	cr_assert_eq(s.sends, 2);
	cr_assert_eq(ST.retransmits, 1);
	cr_assert_eq(cfs__rpc_resend_due(&R), T0 + 300 * MS, "the interval doubles");

	reply_msg(&m, id);
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + 150 * MS), 1);
	take(&s, true, T0 + 150 * MS);
	cr_assert_eq(s.done, 1);
	cr_assert_eq(s.status, 0);
	cr_assert(s.had_reply);
	cr_assert_eq(s.ended, 1, "its pieces and its awaited reply are forgotten");
	cr_assert_eq(s.rtt_us, 150 * MS);
	cr_assert_eq(ST.rtt_us.count, 0, "a resent call teaches no round trip");
	cr_assert_eq(cfs__rpc_resend_due(&R), UINT64_MAX);
	cr_assert_eq(cfs__rpc_call_due(&R), UINT64_MAX);
}

/* Resends go only to a proven address, only for a whole request, at most
 * three times, and never past the call's deadline. */
Test(rpc, resends_are_bounded)
{
	struct seen s = { 0 };

	call_to(&A, 100, 0, false, T0);
	take(&s, false, T0);
	cr_assert_eq(cfs__rpc_resend_due(&R), UINT64_MAX, "an unproven destination");
	call_to(&A, CFS_DGRAM_SAFE + 1, 0, false, T0);
	take(&s, true, T0);
	cr_assert_eq(cfs__rpc_resend_due(&R), UINT64_MAX, "pieces have their own recovery");

	call_to(&B, 100, 2000, false, T0);
	take(&s, true, T0);
	uint64_t at[4] = { 0 };
	for (int i = 0; i < 4 && cfs__rpc_resend_due(&R) != UINT64_MAX; i++) {
		uint64_t now = cfs__rpc_resend_due(&R);
		at[i] = now - T0;
		cfs__rpc_resend(&R, now);
		take(&s, true, now);
	}
	cr_assert_eq(at[0], 100 * MS);
	cr_assert_eq(at[1], 300 * MS);
	cr_assert_eq(at[2], 700 * MS);
	cr_assert_eq(at[3], 0, "three resends at most");
	cr_assert_eq(ST.retransmits, 3);
}

/* The RTO follows the destination: after a slow answer (300 ms) a call to
 * it gets the larger of eq. (2) and its own SRTT + 4 RTTVAR; a fixed
 * timeout is kept as it is and teaches no estimate. */
Test(rpc, the_rto_grows_with_the_peer)
{
	struct seen s = { 0 };
	struct cfs_msg m;

	struct cfs__call *c = call_to(&A, 100, 0, false, T0);
	uint64_t id = c->reqid;
	take(&s, false, T0);
	reply_msg(&m, id);
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + 300 * MS), 1);
	take(&s, false, T0 + 300 * MS);
	cr_assert_eq(ST.rtt_us.count, 1);
	cr_assert_float_eq(ST.srtt_us, 300000.0, 1e-6);
	cr_assert(cfs__rpc_peer_srtt(&R, &A) == 300 * MS);

	uint64_t now = T0 + 400 * MS;
	c = call_to(&A, 100, 0, false, now);
	take(&s, false, now);
	/* eq. (2): v = srtt 300 ms, alpha = 150 ms (the first sample's half):
	 * 300 + 900 + 15 ms; the peer's own: 300 + 4 · 150 = 900 ms */
	uint64_t eq2 = cfs_stp_rto_us(300 * MS, 150 * MS);
	cr_assert_eq(eq2, 1215 * MS);
	cr_assert_eq(c->rto_us, eq2);
	cr_assert_eq(cfs__rpc_call_due(&R), now + eq2);

	/* B answers fast, many times: eq. (2) shrinks, A's own estimate
	 * stays, and a call to A gets A's (300 + 4 · 150 ms) */
	for (int i = 0; i < 20; i++) {
		now += 20 * MS;
		c = call_to(&B, 100, 0, false, now);
		id = c->reqid;
		take(&s, false, now);
		reply_msg(&m, id);
		cr_assert_eq(cfs__rpc_reply(&R, &B, &m, now + 10 * MS), 1);
		take(&s, false, now + 10 * MS);
	}
	c = call_to(&A, 100, 0, false, now + 20 * MS);
	cr_assert_lt(cfs_stp_rto_us((uint64_t)ST.srtt_us, ST.rtt_err_us), 900 * MS);
	cr_assert_eq(c->rto_us, 900 * MS, "A's own estimate: %llu us", (unsigned long long)c->rto_us);
	c = call_to(&B, 100, 0, false, now + 20 * MS);
	uint64_t rto_b = cfs_stp_rto_us((uint64_t)ST.srtt_us, ST.rtt_err_us);
	if (rto_b < CFG.timeout_min_ms * MS)
		rto_b = CFG.timeout_min_ms * MS;
	cr_assert_eq(c->rto_us, rto_b, "a fast peer: eq. (2) or the floor, %llu us",
	             (unsigned long long)c->rto_us);
	c = call_to(&A, 100, 50, false, now + 20 * MS);
	cr_assert_eq(c->rto_us, 50 * MS, "a fixed timeout is kept, under the floor too");
	take(&s, false, now + 20 * MS);
}

/* A call that times out halves the window (its destination goes silent)
 * and is remembered: its reply, when it comes, is counted late, teaches
 * the estimators and gives the window back. The caller was told once. */
Test(rpc, a_late_reply_is_counted)
{
	struct seen s = { 0 };
	struct cfs_msg m;

	struct cfs__call *c = call_to(&A, 100, 300, false, T0);
	uint64_t id = c->reqid;
	take(&s, true, T0);
	cr_assert_eq(ST.inflight, 1);
	cr_assert_not(cfs__rpc_expire(&R, T0 + 299 * MS), "not before its deadline");
	cr_assert(cfs__rpc_expire(&R, T0 + 300 * MS));
	take(&s, true, T0 + 300 * MS);
	cr_assert_eq(s.done, 1);
	cr_assert_eq(s.status, -ETIMEDOUT);
	cr_assert_not(s.had_reply);
	cr_assert_eq(ST.timeouts, 1);
	cr_assert_eq(ST.inflight, 0);
	cr_assert_float_eq(ST.window, CFG.window_init / 2, 1e-9);

	reply_msg(&m, id);
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + 450 * MS), -ENOENT, "no call has its ID");
	cfs__rpc_stray(&R, &A, &m, T0 + 450 * MS);
	take(&s, true, T0 + 450 * MS);
	cr_assert_eq(s.done, 1, "the caller is not told again");
	cr_assert_eq(ST.unmatched, 1);
	cr_assert_eq(ST.late_replies, 1);
	cr_assert_eq(ST.late_by_us_max, 150 * MS);
	cr_assert_float_eq(ST.window, CFG.window_init, 1e-9, "the window is given back");
	cr_assert_eq(ST.rtt_us.count, 1, "its round trip is a sample");
	cr_assert_eq(cfs__rpc_peer_srtt(&R, &A), 0, "a fixed timeout teaches the peer nothing");

	cfs__rpc_stray(&R, &A, &m, T0 + 460 * MS);
	cr_assert_eq(ST.late_replies, 1, "only the first reply is late");
	cr_assert_eq(ST.unmatched, 2);
}

/* At most 3w calls are out; the rest wait in order and go as replies
 * free the window. A background call goes at once, outside it. */
Test(rpc, the_window_holds_calls_back)
{
	struct seen s = { 0 };
	struct cfs_msg m;
	struct cfs__call *c[6];

	cfs__rpc_free(&R);
	CFG.window_init = 1;
	cfs__rpc_init(&R, &CFG, &ST);
	for (int i = 0; i < 5; i++)
		c[i] = call_to(&A, 100, 0, false, T0);
	uint64_t id0 = c[0]->reqid, id3 = c[3]->reqid;
	take(&s, false, T0);
	cr_assert_eq(s.sends, 3, "3w = 3 calls out");
	cr_assert_eq(ST.inflight, 3);
	cr_assert_eq(ST.queued, 2);
	c[5] = call_to(&B, 100, 0, true, T0);
	take(&s, false, T0);
	cr_assert_eq(s.sends, 4, "a background call goes outside the window");
	cr_assert_eq(ST.inflight, 3);

	reply_msg(&m, id0);
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + 10 * MS), 1);
	take(&s, false, T0 + 10 * MS);
	cr_assert_float_eq(ST.window, 2.0, 1e-9, "w grows by 1/w");
	cr_assert_eq(s.sends, 4, "waiting calls go when the driver pumps");
	cfs__rpc_pump(&R, T0 + 10 * MS);
	take(&s, false, T0 + 10 * MS);
	cr_assert_eq(s.sends, 6, "3w = 6: both waiting calls go");
	cr_assert_eq(s.last_send->reqid, c[4]->reqid, "in order");
	cr_assert_eq(ST.queued, 0);
	cr_assert_eq(ST.inflight, 4);
	cr_assert(cfs__rpc_has(&R, id3));
}

/* A reply must come from the call's address, of its type, and name the
 * node it was addressed to; anything else is dropped and counted. */
Test(rpc, a_reply_must_match_its_call)
{
	struct seen s = { 0 };
	struct cfs_msg m;

	struct cfs__call *c = call_to(&A, 100, 0, false, T0);
	c->has_to = true;
	memset(c->to_id.b, 7, sizeof(c->to_id.b));
	uint64_t id = c->reqid;
	take(&s, false, T0);
	reply_msg(&m, id);
	cr_assert_eq(cfs__rpc_reply(&R, &B, &m, T0 + MS), 0, "from another address");
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + MS), 0, "naming no node");
	m.has_from = true;
	memset(m.from_id.b, 8, sizeof(m.from_id.b));
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + MS), 0, "naming another node");
	cr_assert_eq(ST.unmatched, 3);
	memset(m.from_id.b, 7, sizeof(m.from_id.b));
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + MS), 1);
	take(&s, false, T0 + MS);
	cr_assert_eq(s.done, 1);
}

/* A peer that withholds its answer for a token: the token is shown, the
 * request goes again (no resend is armed by it), twice at most; a token
 * from another address is ignored. */
Test(rpc, a_token_is_shown_then_the_request_again)
{
	struct seen s = { 0 };
	uint8_t tok[XFER_TOKEN_BYTES] = { 1, 2, 3 };

	struct cfs__call *c = call_to(&A, 100, 0, false, T0);
	take(&s, false, T0);
	cfs__rpc_retry(&R, &B, c->reqid, tok, T0 + MS);
	take(&s, false, T0 + MS);
	cr_assert_eq(s.validates, 0, "not from the call's address");
	for (int i = 0; i < 3; i++) {
		cfs__rpc_retry(&R, &A, c->reqid, tok, T0 + (2 + i) * MS);
		take(&s, false, T0 + (2 + i) * MS);
	}
	cr_assert_eq(s.validates, 2);
	cr_assert_eq(s.sends, 3);
	cr_assert_eq(s.resend_arms, 1, "only the first send arms a resend");
	cr_assert_eq(ST.retries_in, 4);
}

/* Progress on a call (its request's pieces acknowledged, a piece of its
 * reply) moves its deadline to now + RTO, but never past a minute after
 * it was sent. */
Test(rpc, progress_keeps_a_call_alive)
{
	struct seen s = { 0 };

	struct cfs__call *c = call_to(&A, 100, 0, false, T0);
	take(&s, false, T0);
	uint64_t rto = c->rto_us;
	cfs__rpc_touch(&R, c->reqid, true, T0 + 500 * MS);
	cr_assert_eq(cfs__rpc_call_due(&R), T0 + 500 * MS + rto);
	cfs__rpc_touch(&R, c->reqid, true, T0 + 59 * 1000 * MS);
	cr_assert_eq(cfs__rpc_call_due(&R), T0 + 60 * 1000 * MS);
	cfs__rpc_touch(&R, 12345, true, T0); /* no such call: nothing */
}

/* A peer answers one call after another: progress on a call to it keeps
 * the calls sent to it later alive (they wait behind it), to their RTO
 * after the peer's last progress; a call sent before the one that
 * progressed, or to another peer, times out as ever. */
Test(rpc, progress_on_an_earlier_call_defers_a_later_ones_timeout)
{
	struct seen s = { 0 };

	struct cfs__call *early = call_to(&A, 100, 0, false, T0);
	struct cfs__call *first = call_to(&A, 100, 0, false, T0 + 1 * MS);
	struct cfs__call *behind = call_to(&A, 100, 0, false, T0 + 2 * MS);
	struct cfs__call *other = call_to(&B, 100, 0, false, T0 + 2 * MS);
	take(&s, false, T0 + 2 * MS);
	uint64_t rto = behind->rto_us, early_id = early->reqid, behind_id = behind->reqid;
	cr_assert_eq(rto, other->rto_us);

	/* the peer sends pieces of `first`'s answer, and again later */
	cfs__rpc_touch(&R, first->reqid, true, T0 + 100 * MS);
	cfs__rpc_touch(&R, first->reqid, true, T0 + rto);
	/* at `early`'s deadline: it was sent before `first`, so it ends */
	cr_assert(cfs__rpc_expire(&R, T0 + rto));
	take(&s, false, T0 + rto);
	cr_assert_eq(s.done, 1);
	cr_assert_eq(s.status, -ETIMEDOUT);
	cr_assert_not(cfs__rpc_has(&R, early_id));
	/* `behind`'s and `other`'s deadlines: `behind` is deferred, `other`
	 * ends */
	unsigned done = s.done;
	while (cfs__rpc_expire(&R, T0 + 2 * MS + rto))
		take(&s, false, T0 + 2 * MS + rto);
	cr_assert_eq(s.done, done + 1, "only the call to the other peer timed out");
	cr_assert(cfs__rpc_has(&R, behind_id));
	cr_assert_eq(ST.timeouts_deferred, 1);
	cr_assert_eq(behind->deadline_us, T0 + rto + rto, "an RTO after the last progress");
	/* the peer goes quiet: `behind` ends an RTO after its last progress */
	cr_assert_not(cfs__rpc_expire(&R, T0 + 2 * rto - 1));
	cfs__rpc_touch(&R, first->reqid, true, T0 + 2 * rto - 1); /* first is alive still */
	struct cfs_msg m;
	reply_msg(&m, first->reqid);
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, T0 + 2 * rto - 1), 1);
	take(&s, false, T0 + 2 * rto - 1);
	cr_assert_eq(s.done, done + 2);
	cr_assert_eq(cfs__rpc_call_due(&R), T0 + 2 * rto, "deferred when due, not before");
	cr_assert(cfs__rpc_expire(&R, T0 + 2 * rto));
	take(&s, false, T0 + 2 * rto);
	cr_assert_eq(s.done, done + 2);
	cr_assert_eq(cfs__rpc_call_due(&R), T0 + 3 * rto - 1);
	while (cfs__rpc_expire(&R, T0 + 3 * rto - 1))
		take(&s, false, T0 + 3 * rto - 1);
	cr_assert_eq(s.done, done + 3);
	cr_assert_eq(s.status, -ETIMEDOUT);
	cr_assert_not(cfs__rpc_has(&R, behind_id));
}

/* Only the peer's progress counts for the calls behind: our own upload
 * cap holding a call keeps that call alive, not the others; a call sent
 * after the peer's last progress is not deferred; a deferral ends a
 * minute after the call was sent; and a peer known only by its progress
 * has no round trip until a reply measures one. */
Test(rpc, what_defers_a_timeout_and_how_far)
{
	struct seen s = { 0 };

	struct cfs__call *held = call_to(&A, 100, 0, false, T0);
	struct cfs__call *next = call_to(&A, 100, 0, false, T0);
	take(&s, false, T0);
	uint64_t rto = next->rto_us;
	cfs__rpc_touch(&R, held->reqid, false, T0 + 100 * MS);
	cr_assert_eq(cfs__rpc_peer_srtt(&R, &A), 0);
	cr_assert(cfs__rpc_expire(&R, T0 + rto));
	take(&s, false, T0 + rto);
	cr_assert_eq(s.done, 1, "next timed out: the cap is not the peer");
	cr_assert_eq(ST.timeouts_deferred, 0);

	/* a call sent after the peer's last progress: no deferral */
	cfs__rpc_touch(&R, held->reqid, true, T0 + rto + 1 * MS);
	struct cfs__call *late = call_to(&A, 100, 0, false, T0 + rto + 2 * MS);
	take(&s, false, T0 + rto + 2 * MS);
	uint64_t late_due = late->deadline_us;
	while (cfs__rpc_expire(&R, late_due))
		take(&s, false, late_due);
	cr_assert_eq(s.done, 3, "held and late both ended");
	cr_assert_eq(ST.timeouts_deferred, 0);

	/* the peer keeps answering an earlier call: a later one lives at
	 * most a minute */
	struct cfs__call *a = call_to(&B, 100, 0, false, T0);
	struct cfs__call *b = call_to(&B, 100, 0, false, T0);
	take(&s, false, T0);
	uint64_t t = T0, bid = b->reqid;
	for (unsigned i = 0; cfs__rpc_has(&R, bid) && i < 100000; i++) {
		t += 100 * MS;
		if (cfs__rpc_has(&R, a->reqid))
			cfs__rpc_touch(&R, a->reqid, true, t);
		while (cfs__rpc_expire(&R, t))
			take(&s, false, t);
	}
	cr_assert_not(cfs__rpc_has(&R, bid));
	cr_assert_geq(t, T0 + 60 * 1000 * MS);
	cr_assert_lt(t, T0 + 60 * 1000 * MS + 200 * MS);

	/* a reply teaches a round trip from nothing, not blended with 0 */
	struct cfs__call *c = call_to(&A, 100, 0, false, t);
	take(&s, true, t);
	struct cfs_msg m;
	reply_msg(&m, c->reqid);
	cr_assert_eq(cfs__rpc_reply(&R, &A, &m, t + 40 * MS), 1);
	take(&s, true, t + 40 * MS);
	cr_assert_eq(cfs__rpc_peer_srtt(&R, &A), 40 * MS);
}

/* The grace before overdue calls expire: none starts before a call is
 * due; once started, it ends after CFS__GRACE_POLLS polls that read
 * nothing, polls that read something not counting (up to
 * CFS__GRACE_DRAIN_MAX of them); then the overdue call expires. */
Test(rpc, overdue_calls_wait_out_a_grace_of_polls)
{
	struct seen s = { 0 };
	struct cfs__grace g = { 0 };
	uint64_t rx = 5000;

	call_to(&A, 100, 200, false, T0);
	take(&s, true, T0);
	uint64_t due = cfs__rpc_call_due(&R);
	cr_assert_lt(due, UINT64_MAX);
	cr_assert_not(cfs__grace_start(&g, &R, due - 1, rx), "nothing due yet");
	cr_assert_not(cfs__grace_poll(&g, rx), "no grace running");
	cr_assert(cfs__grace_start(&g, &R, due, rx));
	cr_assert_eq(g.before_us, due);
	cr_assert_not(cfs__grace_start(&g, &R, due + 1, rx), "one at a time");

	/* polls that read something do not count */
	unsigned reading = 10, polls = 0;
	for (unsigned i = 0; i < reading; i++, polls++)
		cr_assert_not(cfs__grace_poll(&g, rx += 1400));
	bool over = false;
	while (!over && polls < 1000) {
		over = cfs__grace_poll(&g, rx);
		polls++;
	}
	cr_assert(over);
	cr_assert_eq(polls, reading + CFS__GRACE_POLLS);
	cr_assert_eq(g.polls, 0);

	cr_assert(cfs__rpc_expire(&R, g.before_us));
	take(&s, true, due);
	cr_assert_eq(s.done, 1);
	cr_assert_eq(s.status, -ETIMEDOUT);
	cr_assert_not(cfs__rpc_expire(&R, g.before_us));
}

/* A loop that reads on every poll still ends the grace: after
 * CFS__GRACE_DRAIN_MAX reading polls, polls count whatever they read. */
Test(rpc, a_grace_ends_under_a_steady_stream)
{
	struct seen s = { 0 };
	struct cfs__grace g = { 0 };
	uint64_t rx = 0;
	unsigned polls = 0;

	call_to(&A, 100, 200, false, T0);
	take(&s, true, T0);
	cr_assert(cfs__grace_start(&g, &R, cfs__rpc_call_due(&R), rx));
	while (polls < 10000) {
		polls++;
		if (cfs__grace_poll(&g, rx += 1400))
			break;
	}
	cr_assert_eq(polls, CFS__GRACE_DRAIN_MAX + CFS__GRACE_POLLS);
}

/* A configuration left at zero gets every default; one given keeps its
 * values, and a window_max below window_init is raised to it. */
Test(rpc, config_fill_defaults_and_consistency)
{
	struct cfs_transport_config z, d, c;

	memset(&z, 0, sizeof(z));
	cfs__config_fill(&z);
	cfs_transport_config_default(&d);
	cr_assert_eq(z.window_init, 1);
	cr_assert_eq(z.window_max, z.window_init);
	cr_assert_eq(z.timeout_ms, d.timeout_ms);
	cr_assert_eq(z.timeout_max_ms, d.timeout_max_ms);
	cr_assert_eq(z.xfer_inflight_max, d.xfer_inflight_max);
	cr_assert_eq(z.reasm_peer_max, d.reasm_peer_max);
	cr_assert_eq(z.reasm_total_max, d.reasm_total_max);
	cr_assert_eq(z.validation_slots, d.validation_slots);
	cr_assert_eq(z.reasm_idle_ms, d.reasm_idle_ms);
	cr_assert_eq(z.ledbat_target_ms, d.ledbat_target_ms);
	cr_assert_gt(d.window_max, d.window_init);
	cr_assert_gt(d.validation_slots, 0);

	c = d;
	c.window_init = 40;
	c.window_max = 8;
	c.timeout_ms = 777;
	cfs__config_fill(&c);
	cr_assert_eq(c.window_max, 40);
	cr_assert_eq(c.timeout_ms, 777);
}
