/* Messages as pieces through real sockets on loopback: messages longer than one
 * safe datagram arrive whole as pieces (with loss from the network model
 * too), an address that has not proven itself gets no more than three
 * times what it sent, and reassembly is bounded and forgets the stale. */
#include <criterion/criterion.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/xfer.h"

static uv_loop_t loop;
static cfs_transport_t *srv, *cli;
static struct cfs_addr srv_addr;
static uint8_t *blob;
static size_t blob_len, got_len;
static bool got_match, done;
static int last_status;
static struct cfs_netmodel_simple lossy;

/* FETCH -> blob_len bytes of blob; STORE -> how many bytes came. */
static void serve(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct cfs_msg *m = malloc(sizeof(*m));

	(void)arg;
	cfs_msg_init(m, (enum cfs_msg_type)req->type);
	if (req->type == CFS_MSG_FETCH) {
		m->data = (struct cfs_bytes){ blob, blob_len };
	} else {
		got_len = req->data.len;
		got_match = req->data.len == blob_len && memcmp(req->data.p, blob, blob_len) == 0;
	}
	cr_assert(cfs_transport_reply(srv, from, m) == 0);
	free(m);
}

static uint32_t reasm_total_max; /* 0: the default */
static uint32_t validation_slots; /* 0: the default */

static void start(size_t len, uint32_t reasm_idle_ms)
{
	struct cfs_transport_config c;

	cr_assert(cfs_crypto_init() == 0);
	uv_loop_init(&loop);
	cfs_transport_config_default(&c);
	c.host = "127.0.0.1";
	c.reasm_idle_ms = reasm_idle_ms;
	if (reasm_total_max)
		c.reasm_total_max = reasm_total_max;
	c.validation_slots = validation_slots;
	cr_assert(cfs_transport_new(&loop, &c, serve, NULL, &srv) == 0);
	cr_assert(cfs_transport_new(&loop, &c, NULL, NULL, &cli) == 0);
	cr_assert(cfs_transport_local_addr(srv, &srv_addr) == 0);
	blob_len = len;
	blob = malloc(len);
	for (size_t i = 0; i < len; i++)
		blob[i] = (uint8_t)(i * 31 + i / 977);
}

static void stop(void)
{
	cfs_transport_close(cli);
	cfs_transport_close(srv);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert(uv_loop_close(&loop) == 0, "every handle was closed");
	free(blob);
}

TestSuite(transport_pieces, .timeout = 60);

static void on_fetch(void *arg, int status, const struct cfs_msg *reply,
                     const struct cfs_rpc_result *res)
{
	(void)arg;
	(void)res;
	last_status = status;
	got_match = status == 0 && reply->data.len == blob_len &&
	            memcmp(reply->data.p, blob, blob_len) == 0;
	done = true;
}

static bool pad_calls; /* cfs_call_opts.pad for call() */

static int call(enum cfs_msg_type type, bool with_blob)
{
	struct cfs_msg *m = malloc(sizeof(*m));

	cfs_msg_init(m, type);
	if (with_blob)
		m->data = (struct cfs_bytes){ blob, blob_len };
	done = false;
	got_match = false;
	cr_assert(cfs_transport_call(cli, &srv_addr, m,
	                             &(struct cfs_call_opts){ .timeout_ms = 5000, .pad = pad_calls },
	                             on_fetch, NULL) == 0);
	free(m);
	while (!done)
		uv_run(&loop, UV_RUN_ONCE);
	return last_status;
}

Test(transport_pieces, a_large_reply_after_the_address_is_proven)
{
	struct cfs_transport_stats s, c;

	start(128 * 1024, 0);
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	cr_assert(got_match, "the reply's bytes differ");
	cfs_transport_get_stats(srv, &s);
	cfs_transport_get_stats(cli, &c);
	cr_assert_eq(s.retries_sent, 1, "the first answer to a stranger is a token");
	cr_assert_eq(s.validated, 1);
	cr_assert_eq(c.retries_in, 1);
	cr_assert_eq(s.xfers_out, 1);
	cr_assert_eq(c.xfers_in, 1);
	cr_assert_geq(s.pieces_out, (uint64_t)cfs_xfer_npieces(blob_len));
	cr_assert_eq(c.replies, 1);
	/* once proven, no token */
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	cr_assert(got_match);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.retries_sent, 1);
	cr_assert_eq(s.xfers_out, 2);
	stop();
}

/* A request padded to a stranger (cfs_call_opts.pad): its answer in one
 * datagram, longer than three times the request alone (a lookup's), comes
 * at once, with no token first; the padding goes once, not before every
 * request. (An answer in pieces goes only to a proven address.) */
Test(transport_pieces, padding_lets_a_strangers_answer_through_at_once)
{
	struct cfs_transport_stats s, c;

	start(900, 0);
	pad_calls = true;
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	cr_assert(got_match);
	cfs_transport_get_stats(srv, &s);
	cfs_transport_get_stats(cli, &c);
	cr_assert_eq(s.retries_sent, 0, "a padded request's answer needs no token");
	cr_assert_eq(c.padding_out, 1);
	cr_assert_eq(s.padding_in, 1);
	cr_assert_eq(s.malformed, 0, "padding is not malformed");
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	cfs_transport_get_stats(cli, &c);
	cr_assert_eq(c.padding_out, 1, "padding goes once a period");
	pad_calls = false;
	stop();

	/* the same answer to an unpadded request: a token first; once the
	 * token was shown, the server holds us proven: no padding */
	start(900, 0);
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.retries_sent, 1, "an unpadded request's answer waits for a token");
	cr_assert_eq(s.padding_in, 0);
	pad_calls = true;
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	pad_calls = false;
	cfs_transport_get_stats(cli, &c);
	cr_assert_eq(c.padding_out, 0, "no padding to a server shown a token");
	stop();
}

Test(transport_pieces, a_large_request_arrives_whole)
{
	struct cfs_transport_stats s;

	start(100 * 1024 + 3, 0);
	got_len = 0;
	cr_assert_eq(call(CFS_MSG_STORE, true), 0);
	cr_assert_eq(got_len, blob_len);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.xfers_in, 1);
	cr_assert_eq(s.retries_sent, 0, "a small answer to a large request needs no token");
	stop();
}

Test(transport_pieces, pieces_lost_on_the_way_are_resent)
{
	struct cfs_transport_stats s, c;

	start(120 * 1024, 0);
	cfs_netmodel_simple_init(&lossy, 0.05, 0, 7);
	struct cfs_netmodel m = cfs_netmodel_simple_ops(&lossy);
	cfs_transport_set_model(srv, &m);
	for (int i = 0; i < 5; i++) {
		/* the 5 % also hits the token and the request: the call may time out */
		int r = call(CFS_MSG_FETCH, false);
		cr_assert(r == 0 || r == -ETIMEDOUT, "call %d ended %d", i, r);
		if (r == 0)
			cr_assert(got_match, "call %d: the reply's bytes differ", i);
	}
	cfs_transport_get_stats(srv, &s);
	cfs_transport_get_stats(cli, &c);
	cr_assert_gt(s.model_dropped, 0);
	cr_assert_gt(s.pieces_resent, 0, "nothing resent after %llu drops",
	             (unsigned long long)s.model_dropped);
	cr_assert_geq(c.xfers_in, 3, "only %llu of 5 replies came whole", (unsigned long long)c.xfers_in);
	stop();
}

/* A raw socket: what comes back to an address that never answers. */
static int raw_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };

	cr_assert(fd >= 0);
	cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	return fd;
}

/* A raw socket and its address, for the transport to call. */
static int raw_socket_at(struct cfs_addr *ret)
{
	int fd = raw_socket();
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);

	cr_assert(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	cr_assert(cfs_addr_from_ip(ret, "127.0.0.1", ntohs(sa.sin_port)) == 0);
	return fd;
}

/* A version hello (common/version.c): one datagram beside the first call
 * to an address not known to speak the newest version; not counted. */
static bool is_hello(const uint8_t *b, size_t n)
{
	struct cfs_msg m;

	return cfs_msg_decode(b, n, &m, NULL) == 0 && m.type == CFS_MSG_HELLO;
}

static size_t drain_raw(int fd, int ms, uint8_t *first, size_t *first_len)
{
	size_t total = 0;
	uint8_t b[65536];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (int i = 0; i < ms; i++) {
		uv_run(&loop, UV_RUN_NOWAIT);
		while (poll(&p, 1, 0) == 1) {
			ssize_t n = recv(fd, b, sizeof(b), 0);
			if (n <= 0)
				break;
			if (is_hello(b, (size_t)n))
				continue;
			if (total == 0 && first) {
				memcpy(first, b, (size_t)n);
				*first_len = (size_t)n;
			}
			total += (size_t)n;
		}
		usleep(1000);
	}
	return total;
}

Test(transport_pieces, a_stranger_gets_at_most_three_times_what_it_sent)
{
	struct cfs_msg *m = malloc(sizeof(*m));
	uint8_t req[CFS_DGRAM_SAFE], first[65536];
	size_t len, first_len = 0;
	int fd;

	start(60 * 1024, 0);
	fd = raw_socket();
	cfs_msg_init(m, CFS_MSG_FETCH);
	m->reqid = 42;
	cr_assert(cfs_msg_encode(m, req, sizeof(req), &len) == 0);
	free(m);
	cr_assert(sendto(fd, req, len, 0, &srv_addr.sa, cfs_addr_len(&srv_addr)) == (ssize_t)len);
	size_t back = drain_raw(fd, 300, first, &first_len);
	cr_assert_gt(back, 0, "no answer at all");
	cr_assert_leq(back, 3 * len, "%zu bytes back for %zu sent", back, len);
	cr_assert_eq(first[0], XFER_RETRY, "the answer is a token");
	/* the token proves the address: then the block comes */
	uint64_t rid;
	uint8_t tok[XFER_TOKEN_BYTES], v[XFER_VALIDATE_LEN];
	cr_assert(cfs_xfer_retry_decode(first, first_len, &rid, tok) == 0 && rid == 42);
	cr_assert(sendto(fd, v, cfs_xfer_validate_encode(v, tok), 0, &srv_addr.sa,
	                 cfs_addr_len(&srv_addr)) > 0);
	cr_assert(sendto(fd, req, len, 0, &srv_addr.sa, cfs_addr_len(&srv_addr)) == (ssize_t)len);
	back = drain_raw(fd, 300, first, &first_len);
	cr_assert_geq(back, XFER_INIT_CWND, "the proven address got %zu bytes", back);
	cr_assert_eq(first[0], XFER_PIECE, "the block comes in pieces (as many as a window: no acks)");
	/* a forged token proves nothing */
	struct cfs_transport_stats s;
	tok[0] ^= 1;
	cr_assert(sendto(fd, v, cfs_xfer_validate_encode(v, tok), 0, &srv_addr.sa,
	                 cfs_addr_len(&srv_addr)) > 0);
	drain_raw(fd, 50, NULL, NULL);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.bad_tokens, 1);
	cr_assert_eq(s.validated, 1);
	close(fd);
	stop();
}

Test(transport_pieces, reassembly_is_bounded_and_forgets_the_stale)
{
	uint8_t msg[10 * XFER_PIECE_DATA], b[CFS_DGRAM_SAFE];
	struct cfs_transport_stats s, c;
	struct cfs_addr cli_addr;
	int fd;

	start(1, 200);
	fd = raw_socket();
	memset(msg, 7, sizeof(msg));
	/* one piece of a request, then nothing */
	size_t n = cfs_xfer_piece_encode(b, 0, 9, msg, sizeof(msg), 0, 0);
	cr_assert(sendto(fd, b, n, 0, &srv_addr.sa, cfs_addr_len(&srv_addr)) == (ssize_t)n);
	/* a reply's piece nobody asked for */
	cr_assert(cfs_transport_local_addr(cli, &cli_addr) == 0);
	n = cfs_xfer_piece_encode(b, XF_REPLY, 9, msg, sizeof(msg), 0, 0);
	cr_assert(sendto(fd, b, n, 0, &cli_addr.sa, cfs_addr_len(&cli_addr)) == (ssize_t)n);
	size_t acks = drain_raw(fd, 600, NULL, NULL);
	cfs_transport_get_stats(srv, &s);
	cfs_transport_get_stats(cli, &c);
	cr_assert_eq(s.pieces_in, 1);
	cr_assert_gt(acks, 0, "the piece was not acked");
	cr_assert_eq(s.reasm_expired, 1, "a stale reassembly was kept");
	cr_assert_eq(c.reasm_dropped, 1, "a reply's piece for no call was taken");
	close(fd);
	stop();
}

/* Lone pieces claiming long messages (21 bytes that would reserve 196 KB
 * each) give way to a transfer that is arriving. */
Test(transport_pieces, lone_pieces_do_not_crowd_out_real_transfers)
{
	static uint8_t msg[CFS_MSG_MAX];
	uint8_t b[CFS_DGRAM_SAFE];
	struct cfs_transport_stats s;
	int fd;

	reasm_total_max = 1 << 20;
	start(100 * 1024, 0);
	reasm_total_max = 0;
	fd = raw_socket();
	unsigned last = cfs_xfer_npieces(CFS_MSG_MAX) - 1;
	for (uint64_t id = 1; id <= 40; id++) {
		size_t n = cfs_xfer_piece_encode(b, 0, id, msg, CFS_MSG_MAX, 0, (uint16_t)last);
		cr_assert(sendto(fd, b, n, 0, &srv_addr.sa, cfs_addr_len(&srv_addr)) == (ssize_t)n);
	}
	drain_raw(fd, 100, NULL, NULL);
	got_len = 0;
	cr_assert_eq(call(CFS_MSG_STORE, true), 0, "a real 100 KiB request was crowded out");
	cr_assert_eq(got_len, blob_len);
	cfs_transport_get_stats(srv, &s);
	cr_assert_gt(s.reasm_evicted, 0);
	close(fd);
	stop();
}

/* A peer repeating one piece of its answer does not keep the call alive:
 * only new pieces move its deadline. */
Test(transport_pieces, a_repeated_piece_does_not_keep_a_call_alive)
{
	static uint8_t msg[10 * XFER_PIECE_DATA];
	uint8_t b[CFS_DGRAM_SAFE], req[CFS_DGRAM_SAFE];
	struct cfs_addr raw_addr;
	struct cfs_msg *m = malloc(sizeof(*m));
	int fd;

	start(1, 0);
	fd = raw_socket_at(&raw_addr);
	cfs_msg_init(m, CFS_MSG_FETCH);
	done = false;
	uint64_t t0 = cfs_now_us();
	cr_assert(cfs_transport_call(cli, &raw_addr, m, &(struct cfs_call_opts){ .timeout_ms = 300 },
	                             on_fetch, NULL) == 0);
	free(m);
	ssize_t n = 0;
	while (n <= 0) {
		uv_run(&loop, UV_RUN_NOWAIT);
		n = recv(fd, req, sizeof(req), MSG_DONTWAIT);
	}
	struct cfs_msg *rq = malloc(sizeof(*rq));
	cr_assert(cfs_msg_decode(req, (size_t)n, rq, NULL) == 0);
	struct cfs_addr cli_addr;
	cr_assert(cfs_transport_local_addr(cli, &cli_addr) == 0);
	size_t pl = cfs_xfer_piece_encode(b, XF_REPLY, rq->reqid, msg, sizeof(msg), 0, 0);
	free(rq);
	for (int i = 0; !done && i < 3000; i++) {
		if (i % 100 == 0)
			cr_assert(sendto(fd, b, pl, 0, &cli_addr.sa, cfs_addr_len(&cli_addr)) == (ssize_t)pl);
		uv_run(&loop, UV_RUN_NOWAIT);
		usleep(1000);
	}
	cr_assert(done, "the call outlived 3 s of one repeated piece");
	cr_assert_eq(last_status, -ETIMEDOUT);
	cr_assert_lt(cfs_now_us() - t0, 1000000u, "ended after %llu ms",
	             (unsigned long long)((cfs_now_us() - t0) / 1000));
	close(fd);
	stop();
}

/* A third transport that answers anything with an empty reply. */
static cfs_transport_t *peer;

static void serve_empty(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct cfs_msg *m = malloc(sizeof(*m));

	(void)arg;
	cfs_msg_init(m, (enum cfs_msg_type)req->type);
	cr_assert(cfs_transport_reply(peer, from, m) == 0);
	free(m);
}

static void ping(cfs_transport_t *from, const struct cfs_addr *to)
{
	struct cfs_msg *m = malloc(sizeof(*m));

	cfs_msg_init(m, CFS_MSG_PING);
	done = false;
	cr_assert(cfs_transport_call(from, to, m, &(struct cfs_call_opts){ .timeout_ms = 2000 },
	                             on_fetch, NULL) == 0);
	while (!done)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(last_status, 0);
	free(m);
}

/* The validation table is full of proven peers (one slot here; 4,096 by
 * default, and a node talking to thousands of peers fills it): a stranger
 * that finds no slot still gets what answers it within 3x (short replies,
 * acks of a request in pieces, a token), and the token proves it. Before,
 * it got nothing at all, and a live node looked dead to it for good
 * (t_ring_failure's wrong answers). Both ends have one slot, and a third
 * transport, proven at both (each called it), holds it. */
Test(transport_pieces, a_stranger_without_a_slot_still_gets_answers)
{
	struct cfs_transport_config pc;
	struct cfs_transport_stats s;
	struct cfs_addr peer_addr;

	validation_slots = 1;
	start(100 * 1024 + 3, 0);
	validation_slots = 0;
	cfs_transport_config_default(&pc);
	pc.host = "127.0.0.1";
	cr_assert(cfs_transport_new(&loop, &pc, serve_empty, NULL, &peer) == 0);
	cr_assert(cfs_transport_local_addr(peer, &peer_addr) == 0);
	ping(srv, &peer_addr);
	ping(cli, &peer_addr);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.validated, 0, "proven by its answers, not by a token");

	/* a request in pieces: the server acks each within 3x of the piece */
	got_len = 0;
	cr_assert_eq(call(CFS_MSG_STORE, true), 0, "a request in pieces from a stranger with no slot");
	cr_assert_eq(got_len, blob_len);
	ping(cli, &peer_addr); /* the server's answer proved it to the client: undo */

	size_t full = blob_len;
	blob_len = 16;
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0, "a small answer reaches a stranger with no slot");
	cr_assert(got_match);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.retries_sent, 0, "an answer within 3x of its request needs no token");
	ping(cli, &peer_addr);

	/* an answer in pieces: a token first; the client, with no slot for
	 * the server, acks its pieces (they echo the call's ID: proof) */
	blob_len = full;
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0, "a large answer after the token");
	cr_assert(got_match);
	cfs_transport_get_stats(srv, &s);
	cr_assert_eq(s.retries_sent, 1);
	cr_assert_eq(s.validated, 1, "the token proved the stranger (the slot changed hands)");
	cfs_transport_close(peer);
	stop();
}

/* A request is sent again only to a destination that has answered us:
 * an address that never did (a forged LOOKUP_FWD's "originator", a dead
 * node) gets the one datagram. Once it has answered, a lost request is
 * sent again within its timeout. */
Test(transport_pieces, requests_are_sent_again_only_to_proven_destinations)
{
	struct cfs_transport_stats c;
	uint8_t first[CFS_DGRAM_SAFE];
	size_t first_len = 0;
	struct cfs_addr raw_addr;
	struct cfs_msg *m = malloc(sizeof(*m));
	int fd;

	start(1, 0);
	fd = raw_socket_at(&raw_addr);
	cfs_msg_init(m, CFS_MSG_PING);
	done = false;
	cr_assert(cfs_transport_call(cli, &raw_addr, m, &(struct cfs_call_opts){ .timeout_ms = 400 },
	                             on_fetch, NULL) == 0);
	size_t back = drain_raw(fd, 500, first, &first_len);
	cr_assert(done && last_status == -ETIMEDOUT);
	cr_assert_eq(back, first_len, "one datagram to an address that never answered (%zu bytes, "
	             "the first %zu)", back, first_len);
	cfs_transport_get_stats(cli, &c);
	cr_assert_eq(c.retransmits, 0);

	/* the server answers once, then loses requests: they are sent again */
	cr_assert_eq(call(CFS_MSG_FETCH, false), 0);
	cfs_netmodel_simple_init(&lossy, 0.2, 0, 7);
	struct cfs_netmodel nm = cfs_netmodel_simple_ops(&lossy);
	cfs_transport_set_model(cli, &nm);
	for (int i = 0; i < 10; i++) /* all four copies lost: 0.2^4, 1 in 625 */
		cr_assert_eq(call(CFS_MSG_FETCH, false), 0, "a lost request is sent again");
	cfs_transport_get_stats(cli, &c);
	cr_assert_gt(c.retransmits, 0);
	close(fd);
	free(m);
	stop();
}
