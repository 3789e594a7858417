/* client_call: any control request through the one control-socket
 * client, against a fake daemon on the same loop. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

static uv_loop_t loop;
static char dir[64], path[128];
static cfs_listener_t *lst;
static unsigned served;

/* The fake daemon: STATUS answers "report N", KEYS an error status, PINS
 * a reply of the wrong type, LOOKUP nothing at all. */
static void srv_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	static struct cfs_msg req, rep;
	char text[64];

	cr_assert(cfs_msg_decode(f, len, &req, NULL) == 0);
	cr_assert(!req.is_reply);
	served++;
	cfs_msg_init(&rep, (enum cfs_msg_type)req.type);
	rep.is_reply = true;
	rep.reqid = req.reqid;
	switch (req.type) {
	case CFS_MSG_CTL_STATUS:
		snprintf(text, sizeof(text), "report %u", req.flags);
		rep.data = (struct cfs_bytes){ (const uint8_t *)text, strlen(text) };
		break;
	case CFS_MSG_CTL_KEYS:
		rep.status = -ENOENT;
		break;
	case CFS_MSG_CTL_PINS:
		rep.type = CFS_MSG_CTL_STATUS;
		break;
	case CFS_MSG_CTL_GET_CODED: /* the block: its code, as text */
		snprintf(text, sizeof(text), "coded %u/%u", req.count >> 8, req.count & 0xff);
		rep.kind = DHASH_KIND_CHASH;
		rep.data = (struct cfs_bytes){ (const uint8_t *)text, strlen(text) };
		break;
	case CFS_MSG_CTL_PUT_CODED: /* the coded key, unless the block says "lie" */
		cr_assert(dhash_coded_key(req.data.p, req.data.len, req.count >> 8, req.count & 0xff,
		                          &rep.key) == 0);
		rep.key.b[0] ^= req.data.len >= 3 && !memcmp(req.data.p, "lie", 3);
		rep.lease_until = 77;
		break;
	case CFS_MSG_CTL_LOCATE_CODED: /* key 0xee: a daemon that predates it */
		if (req.key.b[0] == 0xee) {
			cfs_stream_close(s);
			return;
		}
		rep.n_nodes = 3; /* holder i in state i - 1: bad, missing, good */
		for (uint32_t i = 0; i < 3; i++) {
			char ip[32];
			snprintf(ip, sizeof(ip), "10.0.0.%u", i + 1);
			cr_assert(cfs_addr_from_ip(&rep.nodes[i].addr, ip, 4000) == 0);
			text[i] = (char)(int8_t)(i - 1);
		}
		rep.data = (struct cfs_bytes){ (const uint8_t *)text, 3 };
		break;
	case CFS_MSG_CTL_REPAIR_CODED: /* the block encodes to the key: the holders, mask in lease */
		cr_assert(dhash_coded_key(req.data.p, req.data.len, req.count >> 8, req.count & 0xff,
		                          &rep.key) == 0);
		cr_assert(cfs_id_eq(&rep.key, &req.key));
		rep.lease_until = (uint64_t)req.n_nodes << 32 | req.flags;
		break;
	default:
		return;
	}
	cr_assert(cfs_stream_write_msg(s, &rep) == 0);
}

static void srv_end(void *arg, cfs_stream_t *s, int status)
{
	cfs_stream_close(s);
}

static void on_accept(void *arg, cfs_stream_t *s)
{
	cfs_stream_start(s, srv_frame, srv_end, NULL);
}

static void setup(void)
{
	uv_loop_init(&loop);
	strcpy(dir, "/tmp/cfs-local-XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cfsd.sock", dir);
	cr_assert(cfs_listener_new(&loop, path, 0600, on_accept, NULL, &lst) == 0);
}

static void teardown(void)
{
	if (lst)
		cfs_listener_close(lst);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	rmdir(dir);
}

struct got {
	int calls, status;
	bool had_reply;
	char text[64];
};

static void on_reply(void *arg, int status, const struct cfs_msg *reply)
{
	struct got *g = arg;

	g->calls++;
	g->status = status;
	g->had_reply = reply != NULL;
	if (reply)
		snprintf(g->text, sizeof(g->text), "%.*s", (int)reply->data.len, reply->data.p);
}

static void run_until(struct got *g, int n)
{
	for (int i = 0; i < 1000 && (g ? g->calls < n : 0); i++)
		uv_run(&loop, UV_RUN_ONCE);
}

static int call(client_t *l, enum cfs_msg_type type, uint32_t flags, struct got *g)
{
	struct cfs_msg *m = xmalloc(sizeof(*m));
	cfs_msg_init(m, type);
	m->flags = flags;
	int r = client_call(l, m, on_reply, g);
	memset(m, 0xa5, sizeof(*m)); /* the request was copied */
	free(m);
	return r;
}

TestSuite(client, .init = setup, .fini = teardown);

Test(client, call_gets_the_reply)
{
	client_t *l;
	struct got g[20] = { 0 };

	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	for (int i = 0; i < 20; i++) {
		cr_assert(call(l, CFS_MSG_CTL_STATUS, (uint32_t)i, &g[i]) == 0);
		cr_assert_eq(g[i].calls, 0, "never called back inside the call");
	}
	cr_assert_eq(client_pending(l), 20);
	for (int i = 0; i < 20; i++) {
		char want[32];
		run_until(&g[i], 1);
		snprintf(want, sizeof(want), "report %d", i);
		cr_assert_eq(g[i].calls, 1);
		cr_assert_eq(g[i].status, 0);
		cr_assert(g[i].had_reply);
		cr_assert_str_eq(g[i].text, want, "reply %d matched to its request", i);
	}
	cr_assert_eq(client_pending(l), 0);
	client_free(l);
}

Test(client, error_status_comes_with_the_reply)
{
	client_t *l;
	struct got g = { 0 };

	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert(call(l, CFS_MSG_CTL_KEYS, 0, &g) == 0);
	run_until(&g, 1);
	cr_assert_eq(g.status, -ENOENT);
	cr_assert(g.had_reply, "the daemon's own refusal carries its reply");
	client_free(l);
}

Test(client, wrong_type_is_a_protocol_error)
{
	client_t *l;
	struct got g = { 0 }, after = { 0 };

	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert(call(l, CFS_MSG_CTL_PINS, 0, &g) == 0);
	run_until(&g, 1);
	cr_assert_eq(g.status, -EPROTO);
	cr_assert(!g.had_reply);
	/* The next request connects again. */
	cr_assert(call(l, CFS_MSG_CTL_STATUS, 7, &after) == 0);
	run_until(&after, 1);
	cr_assert_eq(after.status, 0);
	cr_assert_str_eq(after.text, "report 7");
	client_free(l);
}

Test(client, unanswered_request_times_out)
{
	client_t *l;
	struct got g = { 0 };
	uint64_t t0 = cfs_now_ms();

	cr_assert(client_new(&loop, path, 300, &l) == 0);
	cr_assert(call(l, CFS_MSG_CTL_LOOKUP, 0, &g) == 0);
	run_until(&g, 1);
	cr_assert_eq(g.status, -ETIMEDOUT);
	cr_assert(!g.had_reply);
	cr_assert_geq(cfs_now_ms() - t0, 300);
	client_free(l);
}

Test(client, no_daemon_gives_the_socket_errno)
{
	client_t *l;
	struct got g = { 0 };
	char none[200];

	snprintf(none, sizeof(none), "%s/none.sock", dir);
	cr_assert(client_new(&loop, none, 2000, &l) == 0);
	cr_assert(call(l, CFS_MSG_CTL_STATUS, 0, &g) == 0);
	run_until(&g, 1);
	cr_assert_eq(g.status, -ENOENT, "a raw caller sees ENOENT, got %d", g.status);
	cr_assert_eq(served, 0);
	client_free(l);
}

Test(client, free_cancels_pending_calls)
{
	client_t *l;
	struct got g = { 0 };

	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert(call(l, CFS_MSG_CTL_LOOKUP, 0, &g) == 0);
	client_free(l);
	cr_assert_eq(g.calls, 1);
	cr_assert_eq(g.status, -ECANCELED);
	cr_assert(!g.had_reply);
}

/* The coded get and put through the daemon: m and n travel in count, the
 * put's key is computed here and the daemon's must match it. */
struct coded_got {
	int calls, status;
	char text[64];
	struct cfs_id key;
	uint64_t lease;
};

static void coded_block(void *arg, const struct dhash_get_result *r)
{
	struct coded_got *g = arg;

	g->calls++;
	g->status = r->status;
	if (r->status == 0)
		snprintf(g->text, sizeof(g->text), "%.*s", (int)r->len, r->data);
}

static void coded_put(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	struct coded_got *g = arg;

	g->calls++;
	g->status = status;
	g->key = *key;
	g->lease = lease;
}

Test(client, coded_get_and_put_through_the_daemon)
{
	client_t *l;
	struct coded_got g = { 0 }, p = { 0 }, lie = { 0 };
	struct cfs_id key = { { 7 } }, want;
	const char *block = "a block of a coded volume", *liar = "lie about my key";

	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert_eq(client_get_coded(l, &key, 4, 3, coded_block, &g), -EINVAL, "no such code");
	cr_assert(client_get_coded(l, &key, 4, 12, coded_block, &g) == 0);
	cr_assert(client_put_coded(l, 3, 7, (const uint8_t *)block, strlen(block), 0, coded_put, &p) == 0);
	cr_assert(client_put_coded(l, 3, 7, (const uint8_t *)liar, strlen(liar), 0, coded_put, &lie) == 0);
	for (int i = 0; i < 1000 && g.calls + p.calls + lie.calls < 3; i++)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(g.status, 0);
	cr_assert_str_eq(g.text, "coded 4/12");
	cr_assert_eq(p.status, 0);
	cr_assert(dhash_coded_key((const uint8_t *)block, strlen(block), 3, 7, &want) == 0);
	cr_assert(cfs_id_eq(&p.key, &want));
	cr_assert_eq(p.lease, 77);
	cr_assert_eq(lie.status, -EPROTO, "a key other than ours");
	client_free(l);
}

struct loc_got {
	int calls;
	struct dhash_locate_result r;
};

static void coded_located(void *arg, const struct dhash_locate_result *r)
{
	struct loc_got *g = arg;

	g->calls++;
	g->r = *r;
}

Test(client, coded_locate_and_repair_through_the_daemon)
{
	client_t *l;
	struct loc_got g = { 0 };
	struct coded_got p = { 0 };
	struct cfs_id key = { { 7 } };
	struct cfs_node holders[8] = { 0 };
	const char *block = "a block of a coded volume";

	for (uint32_t i = 0; i < 8; i++)
		cr_assert(cfs_addr_from_ip(&holders[i].addr, "10.0.0.9", 4000 + i) == 0);
	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert_eq(client_locate_coded(l, &key, 4, 3, coded_located, &g), -EINVAL, "no such code");
	cr_assert(client_locate_coded(l, &key, 4, 8, coded_located, &g) == 0);
	cr_assert(dhash_coded_key((const uint8_t *)block, strlen(block), 4, 8, &key) == 0);
	cr_assert(client_repair_coded(l, &key, 4, 8, (const uint8_t *)block, strlen(block), holders, 8,
	                              0x24, 0, coded_put, &p) == 0);
	for (int i = 0; i < 1000 && g.calls + p.calls < 2; i++)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(g.r.status, 0);
	cr_assert_eq(g.r.n, 3);
	cr_assert_eq(g.r.state[0], DHASH_COPY_BAD);
	cr_assert_eq(g.r.state[1], DHASH_COPY_MISSING);
	cr_assert_eq(g.r.state[2], DHASH_COPY_GOOD);
	cr_assert_eq(g.r.good, 1);
	cr_assert_eq(p.status, 0);
	cr_assert_eq(p.lease, (uint64_t)8 << 32 | 0x24, "the holders and the mask crossed");
	client_free(l);
}

/* A daemon that cannot decode the request closes the connection: the
 * locate fails at once, not at the timeout. */
Test(client, coded_locate_of_an_older_daemon_fails_at_once)
{
	client_t *l;
	struct loc_got g = { 0 };
	struct cfs_id key = { { 0xee } };

	cr_assert(client_new(&loop, path, 60000, &l) == 0);
	uint64_t t0 = cfs_now_us();
	cr_assert(client_locate_coded(l, &key, 4, 8, coded_located, &g) == 0);
	for (int i = 0; i < 1000 && g.calls < 1; i++)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(g.calls, 1);
	cr_assert_eq(g.r.status, -ECONNRESET);
	cr_assert_lt(cfs_now_us() - t0, 5000000);
	client_free(l);
}
