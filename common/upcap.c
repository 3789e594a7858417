/*
 * The upload cap: a token bucket of bytes at the cap's rate, holding at
 * most 20 ms of it (at least 64 KiB, a GSO batch's worth). Pieces take
 * from it; the background class leaves half the bucket to the
 * foreground. Whole datagrams (requests, small answers, acknowledgements)
 * are sent at once and charged, so pieces make up for them; the bucket
 * owes at most a second of the rate.
 *
 * Acknowledgements of a heavy upload to us could then hold every answer
 * back for as long as it lasts. So the foreground also has a share of a
 * tenth of the rate of its own, which every piece sent drains: it fills
 * only while pieces do not flow, and then lets answers through at that
 * rate. While pieces flow it stays empty and adds nothing to the cap.
 *
 * The other way round, answers that keep the bucket below the reserve
 * would hold replica maintenance and repair back for as long as readers
 * keep the server busy, and copies lost meanwhile would stay lost. So
 * the background has a least share too, a tenth of the rate, which its
 * own pieces drain: within it a background piece goes whatever the
 * reserve, taking the bucket into debt (at most one bucket deep) that
 * the foreground then waits out. A busy server's foreground gets nine
 * tenths of the cap while the background has work, and the sum stays at
 * the cap.
 */
#include "common/upcap.h"

#define UP_SHARE 10           /* the foreground's share: a tenth of the rate */
#define UP_BG_SHARE 10        /* the background's least share: a tenth */
#define UP_SHARE_MAX 65536.0  /* ... each holding at most this many bytes */

void cfs__upcap_init(struct cfs__upcap *u, uint64_t rate)
{
	*u = (struct cfs__upcap){ .rate = rate };
}

double cfs__upcap_burst(const struct cfs__upcap *u)
{
	double b = (double)u->rate / 50.0;
	return b > 65536.0 ? b : 65536.0;
}

static void refill(struct cfs__upcap *u, uint64_t now)
{
	double rate = (double)u->rate;

	if (!u->started) {
		u->tokens = cfs__upcap_burst(u);
		u->started = true;
	} else if (now > u->at_us) {
		double dt = (double)(now - u->at_us) * 1e-6;
		u->tokens += dt * rate;
		if (u->tokens > cfs__upcap_burst(u))
			u->tokens = cfs__upcap_burst(u);
		u->share += dt * rate / UP_SHARE;
		if (u->share > UP_SHARE_MAX)
			u->share = UP_SHARE_MAX;
		u->bg_share += dt * rate / UP_BG_SHARE;
		if (u->bg_share > UP_SHARE_MAX)
			u->bg_share = UP_SHARE_MAX;
	} else {
		return; /* an older time: what it would add was added */
	}
	u->at_us = now;
}

/* Take b bytes (the debt bounded at a second of the rate); returns what
 * was taken. */
static double spend(struct cfs__upcap *u, double b)
{
	double before = u->tokens;

	u->tokens -= b;
	if (u->tokens < -(double)u->rate)
		u->tokens = -(double)u->rate;
	return before > u->tokens ? before - u->tokens : 0;
}

bool cfs__upcap_take(struct cfs__upcap *u, uint32_t b, bool bg, uint64_t now, uint64_t *ret_wait_us,
                     struct cfs__up_debit *ret_debit)
{
	double rate = (double)u->rate;

	*ret_debit = (struct cfs__up_debit){ 0 };
	if (!u->rate)
		return true;
	refill(u, now);
	double burst = cfs__upcap_burst(u), need = (double)b + (bg ? burst / 2 : 0);
	bool go = u->tokens >= need;
	if (!go && !bg)
		go = u->share >= b;
	else if (!go)
		go = u->bg_share >= b && u->tokens > -burst;
	if (go) {
		ret_debit->tokens = spend(u, b);
		ret_debit->share = u->share > b ? b : u->share;
		u->share -= ret_debit->share;
		if (bg) {
			ret_debit->bg_share = u->bg_share > b ? b : u->bg_share;
			u->bg_share -= ret_debit->bg_share;
		}
		return true;
	}
	double w = (need - u->tokens) * 1e6 / rate, ws;
	if (!bg) {
		ws = ((double)b - u->share) * 1e6 * UP_SHARE / rate;
	} else { /* the share's bytes, and a debt within one bucket */
		ws = ((double)b - u->bg_share) * 1e6 * UP_BG_SHARE / rate;
		double wd = (-burst - u->tokens + 1) * 1e6 / rate;
		if (wd > ws)
			ws = wd;
	}
	if (ws < w)
		w = ws;
	*ret_wait_us = w > 1000 ? (uint64_t)w : 1000;
	return false;
}

void cfs__upcap_give_back(struct cfs__upcap *u, const struct cfs__up_debit *d)
{
	double burst = cfs__upcap_burst(u);

	if (!u->rate)
		return;
	u->tokens += d->tokens;
	if (u->tokens > burst)
		u->tokens = burst;
	u->share += d->share;
	if (u->share > UP_SHARE_MAX)
		u->share = UP_SHARE_MAX;
	u->bg_share += d->bg_share;
	if (u->bg_share > UP_SHARE_MAX)
		u->bg_share = UP_SHARE_MAX;
}

void cfs__upcap_charge(struct cfs__upcap *u, size_t len, uint64_t now)
{
	if (!u->rate)
		return;
	refill(u, now);
	spend(u, (double)len);
}
