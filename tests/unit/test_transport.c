/* The UDP RPC transport between two endpoints on loopback. */
#include <inttypes.h>
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cfs.h"

struct server {
	cfs_transport_t *t;
	uint64_t served;
	bool delay_replies;   /* answer PINGs 300 ms late */
	uv_timer_t late;
	struct cfs_reply_to pending;
	bool has_pending;
	bool anon_reply;      /* answer without naming the node addressed */
	uint64_t reqids[64];  /* the first request IDs seen */
	uint32_t nreqids;
	uint8_t last_version; /* of the last request */
};

static void late_reply(uv_timer_t *h)
{
	struct server *s = h->data;
	struct cfs_msg m;
	cfs_msg_init(&m, CFS_MSG_PING);
	cr_assert(cfs_transport_reply(s->t, &s->pending, &m) == 0);
	s->has_pending = false;
}

static void serve(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct server *s = arg;
	struct cfs_msg m;

	s->served++;
	s->last_version = req->version;
	if (s->nreqids < 64)
		s->reqids[s->nreqids++] = req->reqid;
	if (s->anon_reply) { /* a forger, or a peer answering for another node */
		struct cfs_reply_to rt = *from;
		rt.has_to = false;
		cfs_msg_init(&m, req->type);
		cr_assert(cfs_transport_reply(s->t, &rt, &m) == 0);
		return;
	}
	if (req->type == CFS_MSG_FETCH) {
		cr_assert(cfs_transport_reply_error(s->t, from, -ENOENT) == 0);
		return;
	}
	if (s->delay_replies) {
		s->pending = *from;
		s->has_pending = true;
		uv_timer_start(&s->late, late_reply, 300, 0);
		return;
	}
	cfs_msg_init(&m, req->type);
	if (req->type == CFS_MSG_AUTH)
		memcpy(m.nonce, req->nonce, sizeof(m.nonce));
	cr_assert(cfs_transport_reply(s->t, from, &m) == 0);
}

static uv_loop_t loop;
static struct server srv;
static cfs_transport_t *cli;
static struct cfs_addr srv_addr;

static void setup(void)
{
	const char *host = "127.0.0.1";
	struct cfs_transport_config c;
	cr_assert(cfs_crypto_init() == 0);
	uv_loop_init(&loop);
	memset(&srv, 0, sizeof(srv));
	cfs_transport_config_default(&c);
	c.host = host;
	cr_assert(cfs_transport_new(&loop, &c, serve, &srv, &srv.t) == 0);
	cr_assert(cfs_transport_new(&loop, &c, NULL, NULL, &cli) == 0);
	cr_assert(cfs_transport_local_addr(srv.t, &srv_addr) == 0);
	uv_timer_init(&loop, &srv.late);
	srv.late.data = &srv;
}


static void teardown(void)
{
	if (cli)
		cfs_transport_close(cli);
	cfs_transport_close(srv.t);
	uv_close((uv_handle_t *)&srv.late, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert(uv_loop_close(&loop) == 0, "every handle was closed");
	cli = NULL;
}

TestSuite(transport, .init = setup, .fini = teardown, .timeout = 60);

/* ---- bookkeeping for many calls */

#define MANY 100000
struct tally {
	uint32_t *ended;      /* per call: how many times its callback ran */
	uint64_t ok, timeouts, other, outstanding;
	double min_window, last_window;
	bool window_shrank;
	uint32_t max_inflight;
};
static struct tally tl;

struct slot { uint32_t i; };

static void on_reply(void *arg, int status, const struct cfs_msg *reply,
                     const struct cfs_rpc_result *res)
{
	uint32_t i = (uint32_t)(uintptr_t)arg;
	struct cfs_transport_stats st;

	tl.ended[i]++;
	tl.outstanding--;
	if (status == 0) {
		cr_assert(reply && reply->type == CFS_MSG_PING && reply->is_reply);
		tl.ok++;
	} else if (status == -ETIMEDOUT) {
		cr_assert(reply == NULL);
		tl.timeouts++;
	} else {
		tl.other++;
	}
	cfs_transport_get_stats(cli, &st);
	if (st.window < tl.last_window)
		tl.window_shrank = true;
	tl.last_window = st.window;
	if (st.inflight > tl.max_inflight)
		tl.max_inflight = st.inflight;
}

static void run_calls(uint32_t n, const struct cfs_call_opts *opts)
{
	struct cfs_msg m;
	struct cfs_transport_stats st;

	tl = (struct tally){ .ended = calloc(n, sizeof(uint32_t)), .last_window = 1e9 };
	for (uint32_t i = 0; i < n; i++) {
		cfs_msg_init(&m, CFS_MSG_PING);
		cr_assert(cfs_transport_call(cli, &srv_addr, &m, opts, on_reply, (void *)(uintptr_t)i) == 0);
		tl.outstanding++;
	}
	cfs_transport_get_stats(cli, &st);
	cr_assert(st.inflight + st.queued == n);
	while (tl.outstanding > 0)
		uv_run(&loop, UV_RUN_ONCE);
	for (uint32_t i = 0; i < n; i++)
		cr_assert_eq(tl.ended[i], 1, "call %u ended %u times", i, tl.ended[i]);
	free(tl.ended);
}

Test(transport, hundred_thousand_rpcs_none_lost)
{
	struct cfs_call_opts opts = { .timeout_ms = 10000 };
	struct cfs_transport_stats st;

	run_calls(MANY, &opts);
	cr_assert_eq(tl.ok, MANY);
	cr_assert_eq(tl.timeouts, 0);
	cfs_transport_get_stats(cli, &st);
	/* a request queued at the busy server past its peer's round trip is
	 * sent again and answered again; the call ends once */
	cr_assert_eq(srv.served, MANY + st.retransmits, "served %lu, %llu copies sent again",
	             (unsigned long)srv.served, (unsigned long long)st.retransmits);
	cr_assert_eq(st.calls, MANY);
	cr_assert_eq(st.replies, MANY);
	cr_assert_eq(st.inflight, 0);
	cr_assert_eq(st.queued, 0);
	cr_assert(st.rtt_us.count <= MANY && st.rtt_us.count + st.retransmits >= MANY,
	          "a retransmitted call teaches no round trip (Karn)");
	cr_assert(st.window > 4, "the window opened: w = %.1f", st.window);
	cr_assert(tl.max_inflight <= (uint32_t)(3 * st.window) + 1);
}

/* 10 % loss each way: a lost request or reply is sent again on the
 * peer's round trip, so hardly a call times out; every call
 * still ends exactly once. */
Test(transport, drops_are_sent_again_or_time_out_once)
{
	struct cfs_netmodel_simple lossy_c, lossy_s;
	struct cfs_netmodel mc, ms;
	struct cfs_call_opts opts = { .timeout_ms = 150 };
	struct cfs_transport_stats st;

	cfs_netmodel_simple_init(&lossy_c, 0.1, 0, 1);
	cfs_netmodel_simple_init(&lossy_s, 0.1, 0, 2);
	mc = cfs_netmodel_simple_ops(&lossy_c);
	ms = cfs_netmodel_simple_ops(&lossy_s);
	cfs_transport_set_model(cli, &mc);
	cfs_transport_set_model(srv.t, &ms);

	run_calls(3000, &opts);
	cr_assert_eq(tl.ok + tl.timeouts, 3000);
	cr_assert_eq(tl.other, 0);
	/* ~19 % of first tries lose their request or their reply; four tries
	 * all fail for about 0.13 % */
	cr_assert(tl.timeouts < 60, "timeouts %lu", (unsigned long)tl.timeouts);
	cfs_transport_get_stats(cli, &st);
	cr_assert(st.retransmits > 300, "only %llu requests sent again",
	          (unsigned long long)st.retransmits);
	cr_assert_eq(st.timeouts, tl.timeouts);
	cr_assert(st.model_dropped > 0);
}

Test(transport, window_bounds_inflight)
{
	cfs_transport_close(cli);
	struct cfs_transport_config c;
	cfs_transport_config_default(&c);
	c.host = "127.0.0.1";
	c.window_init = 1;
	c.window_max = 1;
	cr_assert(cfs_transport_new(&loop, &c, NULL, NULL, &cli) == 0);
	run_calls(2000, &(struct cfs_call_opts){ .timeout_ms = 5000 });
	cr_assert_eq(tl.ok, 2000);
	cr_assert(tl.max_inflight <= 3, "3w with w = 1: %u in flight", tl.max_inflight);
}

static int last_status;
static bool done;
static uint64_t last_rtt;

static void on_one(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	last_status = status;
	last_rtt = res->rtt_us;
	if (status == 0 && reply->type == CFS_MSG_AUTH)
		cr_assert(memcmp(reply->nonce, arg, CFS_NONCE_BYTES) == 0, "nonce echoed");
	done = true;
}

static int call_one(enum cfs_msg_type type, const struct cfs_call_opts *opts)
{
	struct cfs_msg m;
	static uint8_t nonce[CFS_NONCE_BYTES] = "0123456789abcde";
	cfs_msg_init(&m, type);
	memcpy(m.nonce, nonce, sizeof(nonce));
	done = false;
	cr_assert(cfs_transport_call(cli, &srv_addr, &m, opts, on_one, nonce) == 0);
	cr_assert(!done, "never completes inside the call");
	while (!done)
		uv_run(&loop, UV_RUN_ONCE);
	return last_status;
}

Test(transport, error_status_and_echo)
{
	cr_assert_eq(call_one(CFS_MSG_FETCH, NULL), -ENOENT);
	cr_assert_eq(call_one(CFS_MSG_AUTH, NULL), 0);
	cr_assert(last_rtt > 0);
}

/* Two processes of this version: the first call goes at the older
 * version with a hello beside it; the hello's answer shows the newer
 * version spoken, and the next calls use it, with the sender's clock. */
Test(transport, newer_version_learnt_from_a_hello)
{
	struct cfs_transport_stats c, s;
	int64_t skew;
	uint32_t n;

	cr_assert_eq(cfs_transport_peer_version(cli, &srv_addr), CFS_PROTO_VERSION_MIN);
	cr_assert_eq(cfs_transport_clock_skew(cli, &skew, &n), -ENODATA);
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
	cr_assert_eq(srv.last_version, CFS_PROTO_VERSION_MIN, "the first call: the older version");
	for (int i = 0; i < 20 && cfs_transport_peer_version(cli, &srv_addr) != CFS_PROTO_VERSION; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	cr_assert_eq(cfs_transport_peer_version(cli, &srv_addr), CFS_PROTO_VERSION);
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
	cr_assert_eq(srv.last_version, CFS_PROTO_VERSION, "then the newer");
	cr_assert_eq(call_one(CFS_MSG_AUTH, NULL), 0);
	cfs_transport_get_stats(cli, &c);
	cfs_transport_get_stats(srv.t, &s);
	cr_assert_eq(c.version_probes, 1, "one hello");
	cr_assert_eq(s.hellos_in, 1);
	cr_assert_eq(c.unmatched, 0, "the hello's answer is no stray reply");
	cr_assert_eq(s.requests_in, 3, "the hello is not a request of the server's");
	/* one clock, both ends: no offset, no skew */
	cr_assert_eq(cfs_transport_peer_clock_offset_s(cli, &srv_addr), 0);
	cr_assert_eq(cfs_transport_clock_skew(cli, &skew, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert(skew > -1000 && skew < 1000, "skew %lld ms", (long long)skew);
}

/* A peer of the older version (a raw socket that answers every request
 * it can decode at version 4 and drops the rest, as the older code does):
 * it is spoken to in the older version, and every call succeeds. */
Test(transport, an_older_peer_is_spoken_to_in_its_version)
{
	struct cfs_addr raw_addr;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	socklen_t alen = sizeof(raw_addr);
	uint8_t b[2048], out[256];
	struct cfs_msg q, a;
	size_t olen;
	int dropped = 0;

	cr_assert(cfs_addr_from_ip(&raw_addr, "127.0.0.1", 0) == 0);
	cr_assert(bind(fd, &raw_addr.sa, cfs_addr_len(&raw_addr)) == 0);
	cr_assert(getsockname(fd, &raw_addr.sa, &alen) == 0);
	for (int k = 0; k < 3; k++) {
		cfs_msg_init(&q, CFS_MSG_PING);
		done = false;
		cr_assert(cfs_transport_call(cli, &raw_addr, &q, NULL, on_one, NULL) == 0);
		while (!done) {
			uv_run(&loop, UV_RUN_NOWAIT);
			struct sockaddr_storage from;
			socklen_t fl = sizeof(from);
			ssize_t len = recvfrom(fd, b, sizeof(b), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
			if (len <= 0)
				continue;
			if (cfs_msg_decode(b, (size_t)len, &q, NULL) < 0 || q.version != CFS_PROTO_VERSION_MIN) {
				dropped++; /* what an older peer cannot decode */
				continue;
			}
			cfs_msg_init(&a, q.type);
			a.is_reply = true;
			a.reqid = q.reqid;
			cr_assert(cfs_msg_encode(&a, out, sizeof(out), &olen) == 0);
			cr_assert(sendto(fd, out, olen, 0, (struct sockaddr *)&from, fl) == (ssize_t)olen);
		}
		cr_assert_eq(last_status, 0, "call %d to the older peer", k);
	}
	close(fd);
	cr_assert_eq(dropped, 1, "one hello, which the older peer dropped");
	cr_assert_eq(cfs_transport_peer_version(cli, &raw_addr), CFS_PROTO_VERSION_MIN);
}

Test(transport, late_reply_is_unmatched)
{
	struct cfs_transport_stats st;
	srv.delay_replies = true;
	cr_assert_eq(call_one(CFS_MSG_PING, &(struct cfs_call_opts){ .timeout_ms = 50 }), -ETIMEDOUT);
	while (srv.has_pending)
		uv_run(&loop, UV_RUN_ONCE);
	for (int i = 0; i < 20; i++) /* let the late reply arrive */
		uv_run(&loop, UV_RUN_NOWAIT), usleep(1000);
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.unmatched, 1);
	cr_assert_eq(st.timeouts, 1);
	cr_assert_eq(st.replies, 0);
}

Test(transport, computed_rto_and_model_delay)
{
	struct cfs_netmodel_simple slow;
	struct cfs_netmodel m;

	cr_assert_eq(cfs_stp_rto_us(100000, 5000), 100000 + 30000 + 15000);
	cfs_netmodel_simple_init(&slow, 0, 20000, 3);
	m = cfs_netmodel_simple_ops(&slow);
	cfs_transport_set_model(srv.t, &m);
	/* With no samples the default RTO (1 s) applies; then STP's formula. */
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
	cr_assert(last_rtt >= 20000, "the model delayed the reply: %lu us", (unsigned long)last_rtt);
	cr_assert_eq(call_one(CFS_MSG_PING, &(struct cfs_call_opts){ .predicted_rtt_us = 20000 }), 0);
	cfs_transport_set_model(srv.t, NULL);
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
	cr_assert(last_rtt < 20000);
}

static int cancelled;
static void on_cancel(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	cr_assert_eq(status, -ECANCELED);
	cancelled++;
}

Test(transport, close_cancels_pending)
{
	struct cfs_msg m;
	for (int i = 0; i < 50; i++) {
		cfs_msg_init(&m, CFS_MSG_PING);
		cr_assert(cfs_transport_call(cli, &srv_addr, &m, NULL, on_cancel, NULL) == 0);
	}
	cancelled = 0;
	cfs_transport_close(cli);
	cr_assert_eq(cancelled, 50);
	cfs_msg_init(&m, CFS_MSG_PING);
	cr_assert_eq(cfs_transport_call(cli, &srv_addr, &m, NULL, on_cancel, NULL), -ECANCELED);
	cli = NULL;
}

Test(transport, malformed_datagrams_counted_and_dropped)
{
	struct cfs_transport_stats st;
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	static const uint8_t junk[][6] = { { 0xdd, 0xff, 0xff, 0xff, 0xff, 0 }, { 0x93, 1, 2, 3, 0, 0 },
	                                   { 0xc1, 0, 0, 0, 0, 0 } };

	for (size_t i = 0; i < CFS_ARRAY_SIZE(junk); i++)
		cr_assert(sendto(fd, junk[i], sizeof(junk[i]), 0, &srv_addr.sa, cfs_addr_len(&srv_addr)) > 0);
	close(fd);
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0, "the server still answers");
	cfs_transport_get_stats(srv.t, &st);
	cr_assert_eq(st.malformed, 3);
	cr_assert_eq(st.requests_in, 1);
}

Test(transport, ipv6_loopback)
{
	struct cfs_transport_config c;
	cfs_transport_close(cli);
	cfs_transport_close(srv.t);
	uv_run(&loop, UV_RUN_NOWAIT);
	cfs_transport_config_default(&c);
	c.host = "::1";
	cr_assert(cfs_transport_new(&loop, &c, serve, &srv, &srv.t) == 0);
	cr_assert(cfs_transport_new(&loop, &c, NULL, NULL, &cli) == 0);
	cr_assert(cfs_transport_local_addr(srv.t, &srv_addr) == 0);
	cr_assert_eq(srv_addr.sa.sa_family, AF_INET6);
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
}

/* ---- a dead destination: one congestion signal, no window slots */

static uint32_t dead_left, live_done_with_dead_left;

static void on_dead(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	cr_assert_eq(status, -ETIMEDOUT, "dead call status %d", status);
	dead_left--;
}

static void on_live(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	cr_assert_eq(status, 0);
	live_done_with_dead_left = dead_left;
	done = true;
}

static void call_dead(const struct cfs_addr *dead, uint32_t n, uint32_t timeout_ms)
{
	struct cfs_msg m;
	for (uint32_t i = 0; i < n; i++) {
		cfs_msg_init(&m, CFS_MSG_PING);
		cr_assert(cfs_transport_call(cli, dead, &m, &(struct cfs_call_opts){ .timeout_ms = timeout_ms },
		                             on_dead, NULL) == 0);
		dead_left++;
	}
}

/* A bound socket nobody reads: a peer that never answers (its fd, to close). */
static int quiet_peer(struct cfs_addr *a)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	socklen_t len = sizeof(*a);

	cr_assert(cfs_addr_from_ip(a, "127.0.0.1", 0) == 0);
	cr_assert(bind(fd, &a->sa, cfs_addr_len(a)) == 0);
	cr_assert(getsockname(fd, &a->sa, &len) == 0);
	return fd;
}

Test(transport, silent_destination_halves_once_and_takes_no_slots)
{
	struct cfs_transport_stats st;
	struct cfs_addr dead;
	struct cfs_msg m;
	int fd = quiet_peer(&dead);

	cfs_transport_get_stats(cli, &st);
	double w0 = st.window;
	call_dead(&dead, 1, 50);
	while (dead_left)
		uv_run(&loop, UV_RUN_ONCE);
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.window, w0 / 2, "the first timeout halves w: %.2f -> %.2f", w0, st.window);

	/* Now silent: more calls to it are outside the window, and their
	 * timeouts do not halve it again. */
	call_dead(&dead, 40, 1500);
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.inflight, 0, "calls to a silent peer hold no window slot");
	cr_assert_eq(st.queued, 0);
	cfs_msg_init(&m, CFS_MSG_PING);
	done = false;
	cr_assert(cfs_transport_call(cli, &srv_addr, &m, NULL, on_live, NULL) == 0);
	while (dead_left)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert(done);
	cr_assert_eq(live_done_with_dead_left, 40, "the live call did not wait behind the dead ones");
	cfs_transport_get_stats(cli, &st);
	cr_assert(st.window >= w0 / 2, "41 timeouts to one dead peer halved w once: %.2f", st.window);

	/* A peer that answers is no longer silent: its next timeout counts. */
	srv.delay_replies = true;
	cr_assert_eq(call_one(CFS_MSG_PING, &(struct cfs_call_opts){ .timeout_ms = 50 }), -ETIMEDOUT);
	cfs_transport_get_stats(cli, &st);
	double w1 = st.window;
	while (srv.has_pending)
		uv_run(&loop, UV_RUN_ONCE);
	srv.delay_replies = false;
	cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
	srv.delay_replies = true;
	cfs_transport_get_stats(cli, &st);
	double w2 = st.window;
	cr_assert_eq(call_one(CFS_MSG_PING, &(struct cfs_call_opts){ .timeout_ms = 50 }), -ETIMEDOUT);
	cfs_transport_get_stats(cli, &st);
	cr_assert(w1 < w0 && st.window == (w2 / 2 < 1 ? 1 : w2 / 2),
	          "halved again after answering: %.2f -> %.2f", w2, st.window);
	while (srv.has_pending)
		uv_run(&loop, UV_RUN_ONCE);
	close(fd);
}

/* A peer that goes quiet with calls already out and queued to it (a server
 * frozen under a burst of gets): once its first call times out, the rest
 * give their window slots back and leave the queue, and a call to a live
 * peer queued behind them is sent at once, not after their timeouts. */
Test(transport, calls_to_a_peer_that_goes_silent_free_the_window)
{
	struct cfs_transport_stats st;
	struct cfs_addr dead;
	struct cfs_msg m;
	int fd = quiet_peer(&dead);

	call_dead(&dead, 1, 50);
	call_dead(&dead, 39, 3000);
	cfs_transport_get_stats(cli, &st);
	cr_assert(st.queued > 0, "the calls to the quiet peer fill the window (%u in flight)", st.inflight);
	cfs_msg_init(&m, CFS_MSG_PING);
	done = false;
	live_done_with_dead_left = 0;
	cr_assert(cfs_transport_call(cli, &srv_addr, &m, NULL, on_live, NULL) == 0);
	uint64_t t0 = cfs_now_us();
	while (!done)
		uv_run(&loop, UV_RUN_ONCE);
	uint64_t waited_ms = (cfs_now_us() - t0) / 1000;
	cr_assert_eq(live_done_with_dead_left, 39, "the live call waited for the quiet peer's timeouts");
	cr_assert(waited_ms < 1500, "the live call took %" PRIu64 " ms", waited_ms);
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.inflight, 0, "calls to a silent peer hold no window slot");
	cr_assert_eq(st.queued, 0);
	while (dead_left)
		uv_run(&loop, UV_RUN_ONCE);
	close(fd);
}

/* Background calls (node authentication): to many dead
 * addresses at once, they take no window slot, never halve the window, and
 * a client call does not wait behind them. */
Test(transport, background_calls_leave_the_window_alone)
{
	struct cfs_transport_stats st;
	struct cfs_msg m;
	int fds[40];

	cfs_transport_get_stats(cli, &st);
	double w0 = st.window;
	for (int i = 0; i < 40; i++) {
		struct cfs_addr dead;
		socklen_t len = sizeof(dead);
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
		cr_assert(cfs_addr_from_ip(&dead, "127.0.0.1", 0) == 0);
		cr_assert(bind(fds[i], &dead.sa, cfs_addr_len(&dead)) == 0);
		cr_assert(getsockname(fds[i], &dead.sa, &len) == 0);
		cfs_msg_init(&m, CFS_MSG_AUTH);
		cr_assert(cfs_transport_call(cli, &dead, &m,
		                             &(struct cfs_call_opts){ .timeout_ms = 300, .background = true },
		                             on_dead, NULL) == 0);
		dead_left++;
	}
	cfs_transport_get_stats(cli, &st);
	cr_assert_eq(st.inflight, 0, "background calls hold no window slot");
	cr_assert_eq(st.queued, 0);
	cfs_msg_init(&m, CFS_MSG_PING);
	done = false;
	cr_assert(cfs_transport_call(cli, &srv_addr, &m, NULL, on_live, NULL) == 0);
	while (dead_left)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert(done);
	cr_assert_eq(live_done_with_dead_left, 40, "the client call did not wait behind them");
	cfs_transport_get_stats(cli, &st);
	cr_assert(st.window >= w0, "40 background timeouts left w alone: %.2f -> %.2f", w0, st.window);
	for (int i = 0; i < 40; i++)
		close(fds[i]);
}

/* Request IDs drawn afresh per call, not counted up. */
Test(transport, request_ids_are_unpredictable)
{
	uint32_t steps = 0;

	for (int i = 0; i < 64; i++)
		cr_assert_eq(call_one(CFS_MSG_PING, NULL), 0);
	cr_assert_eq(srv.nreqids, 64);
	for (uint32_t i = 1; i < 64; i++) {
		steps += srv.reqids[i] - srv.reqids[i - 1] < 1024;
		for (uint32_t j = 0; j < i; j++)
			cr_assert_neq(srv.reqids[i], srv.reqids[j]);
	}
	cr_assert_eq(steps, 0, "%u IDs within 1024 of the previous one", steps);
}

static int call_to(const struct cfs_id *to)
{
	struct cfs_msg m;

	cfs_msg_init(&m, CFS_MSG_PING);
	if (to) {
		m.has_to = true;
		m.to_id = *to;
	}
	done = false;
	cr_assert(cfs_transport_call(cli, &srv_addr, &m, &(struct cfs_call_opts){ .timeout_ms = 100 },
	                             on_one, NULL) == 0);
	while (!done)
		uv_run(&loop, UV_RUN_ONCE);
	return last_status;
}

/* A call addressed to a node is answered only by a reply naming it. */
Test(transport, reply_must_name_the_node_addressed)
{
	struct cfs_id x = { { 7 } };
	struct cfs_transport_stats st;

	cr_assert_eq(call_to(&x), 0); /* the transport names it for the server */
	srv.anon_reply = true;
	cr_assert_eq(call_to(NULL), 0); /* nobody addressed: the address suffices */
	cfs_transport_get_stats(cli, &st);
	uint64_t again = st.retransmits;
	cr_assert_eq(call_to(&x), -ETIMEDOUT);
	cfs_transport_get_stats(cli, &st);
	/* every copy sent (again on the round trip) is answered
	 * anonymously, and none of the answers is taken */
	cr_assert_eq(st.unmatched, 1 + st.retransmits - again);
}
