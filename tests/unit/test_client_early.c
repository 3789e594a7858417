/* client_get_root_early through cfsd: the machine of client/rootget_sm.c
 * driven directly, then the daemon backend against fake daemons on the
 * same loop (one that sends an interim root, an older one that does not know
 * ctl_get_root and answers a ping with -EOPNOTSUPP). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/internal.h"
#include "sfsro-format/sfsro.h"

/* ------------------------------------------------------------ the machine */

TestSuite(client_rg);

Test(client_rg, early_then_final)
{
	struct client__rg g = { 0 };

	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_UNKNOWN), CLIENT_RG_ASK);
	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_ASKING), CLIENT_RG_NONE, "one ping");
	cr_assert_eq(client__speaks_of(0), CLIENT_SPEAKS_YES);
	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_wire(&g), CFS_MSG_CTL_GET_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, CFS_GET_ROOT_R_INTERIM, true),
	             CLIENT_RG_EARLY);
	cr_assert_eq(g.state, CLIENT_RG_SENT_ROOT, "still waiting for the quorum");
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, 0, true), CLIENT_RG_ANSWER);
	cr_assert_eq(g.state, CLIENT_RG_DONE);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, 0, true), CLIENT_RG_NONE,
	             "nothing after the end");
}

Test(client_rg, final_only_from_an_old_daemon)
{
	struct client__rg g = { 0 };

	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_UNKNOWN), CLIENT_RG_ASK);
	cr_assert_eq(client__speaks_of(-EOPNOTSUPP), CLIENT_SPEAKS_NO);
	cr_assert_eq(client__speaks_of(-EIO), CLIENT_SPEAKS_NO);
	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_NO), CLIENT_RG_SEND_GET);
	cr_assert_eq(client__rg_wire(&g), CFS_MSG_CTL_GET);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET, 0, 0, true), CLIENT_RG_ANSWER);
	cr_assert_not(g.early_given);
}

Test(client_rg, final_only_from_a_new_daemon)
{
	struct client__rg g = { 0 };

	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, 0, true), CLIENT_RG_ANSWER);
	cr_assert_not(g.early_given);
}

Test(client_rg, early_then_error)
{
	struct client__rg g = { 0 };

	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, CFS_GET_ROOT_R_INTERIM, true),
	             CLIENT_RG_EARLY);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, -ETIMEDOUT, 0, true), CLIENT_RG_FAIL);
	cr_assert_eq(g.status, -ETIMEDOUT);
	cr_assert_eq(g.state, CLIENT_RG_DONE);
}

Test(client_rg, error_only)
{
	struct client__rg g = { 0 }, old = { 0 };

	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, -ENOENT, 0, false), CLIENT_RG_FAIL);
	cr_assert_eq(g.status, -ENOENT);
	cr_assert_not(g.early_given);
	cr_assert_eq(client__rg_start(&old, CLIENT_SPEAKS_NO), CLIENT_RG_SEND_GET);
	cr_assert_eq(client__rg_reply(&old, CFS_MSG_CTL_GET, -ENOENT, 0, false), CLIENT_RG_FAIL);
	cr_assert_eq(old.status, -ENOENT);
}

Test(client_rg, what_breaks_the_protocol_fails)
{
	struct client__rg g = { 0 };

	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, CFS_GET_ROOT_R_INTERIM, true),
	             CLIENT_RG_EARLY);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, CFS_GET_ROOT_R_INTERIM, true),
	             CLIENT_RG_FAIL, "one interim reply per request");
	cr_assert_eq(g.status, -EPROTO);

	g = (struct client__rg){ 0 };
	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET, 0, 0, true), CLIENT_RG_FAIL);
	cr_assert_eq(g.status, -EPROTO, "the reply of another request type");

	g = (struct client__rg){ 0 };
	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_YES), CLIENT_RG_SEND_ROOT);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET_ROOT, 0, CFS_GET_ROOT_R_INTERIM, false),
	             CLIENT_RG_FAIL);
	cr_assert_eq(g.status, -EBADMSG, "an interim root that does not verify");

	g = (struct client__rg){ 0 };
	cr_assert_eq(client__rg_start(&g, CLIENT_SPEAKS_NO), CLIENT_RG_SEND_GET);
	cr_assert_eq(client__rg_reply(&g, CFS_MSG_CTL_GET, 0, CFS_GET_ROOT_R_INTERIM, true),
	             CLIENT_RG_ANSWER, "a ctl_get has no interim reply");
}

/* ------------------------------------------------------------ fake daemons */

enum mode {
	NEW,          /* ping: 0; interim root (seq 3), then the quorum's (seq 5) */
	NEW_FINAL,    /* ping: 0; the quorum's root only */
	NEW_ERROR,    /* ping: 0; interim root, then -ENOENT */
	NEW_ERROR_ONLY, /* ping: 0; -ENOENT only */
	OLD,          /* ping: -EOPNOTSUPP; ctl_get: root seq 5; ctl_get_root closes */
};

static uv_loop_t loop;
static char dir[64], path[128];
static cfs_listener_t *lst;
static enum mode mode;
static uint8_t root3[512], root5[512];
static size_t len3, len5;
static struct cfs_id key;
static unsigned pings, gets, get_roots;

static size_t make_root(uint64_t seq, uint8_t *buf, size_t cap)
{
	struct cfs_pubkey pk;
	struct cfs_seckey sk;
	uint8_t s[32];
	size_t len;

	memset(s, 9, sizeof(s));
	cfs_sign_seed_keypair(s, &pk, &sk);
	struct sfsro_root r = { .pk = pk, .seq = seq, .issued = 1, .valid_until = UINT64_MAX,
	                        .dir_mode = 0755 };
	cr_assert(sfsro_root_encode(&r, &sk, buf, cap, &len) == 0);
	sfsro_root_key(&pk, &key);
	return len;
}

static void send_root(cfs_stream_t *s, uint8_t type, uint64_t reqid, uint32_t flags,
                      const uint8_t *p, size_t len, int status)
{
	struct cfs_msg rep;

	cfs_msg_init(&rep, (enum cfs_msg_type)type);
	rep.is_reply = true;
	rep.reqid = reqid;
	rep.status = status;
	if (status == 0) {
		rep.flags = flags;
		rep.kind = DHASH_KIND_ROOT;
		rep.data = (struct cfs_bytes){ p, len };
	}
	cr_assert(cfs_stream_write_msg(s, &rep) == 0);
}

static void srv_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	static struct cfs_msg req;
	const uint8_t interim = CFS_GET_ROOT_R_INTERIM;

	cr_assert(cfs_msg_decode(f, len, &req, NULL) == 0);
	cr_assert(!req.is_reply);
	switch (req.type) {
	case CFS_MSG_PING:
		pings++;
		send_root(s, CFS_MSG_PING, req.reqid, 0, NULL, 0, mode == OLD ? -EOPNOTSUPP : 0);
		return;
	case CFS_MSG_CTL_GET:
		gets++;
		cr_assert(cfs_id_eq(&req.key, &key));
		send_root(s, CFS_MSG_CTL_GET, req.reqid, 0, root5, len5, 0);
		return;
	case CFS_MSG_CTL_GET_ROOT:
		get_roots++;
		cr_assert(cfs_id_eq(&req.key, &key));
		cr_assert_eq(req.flags, CFS_GET_ROOT_F_EARLY);
		if (mode == OLD) { /* an older daemon does not decode it: it hangs up */
			cfs_stream_close(s);
			return;
		}
		if (mode == NEW || mode == NEW_ERROR)
			send_root(s, CFS_MSG_CTL_GET_ROOT, req.reqid, interim, root3, len3, 0);
		if (mode == NEW_ERROR || mode == NEW_ERROR_ONLY)
			send_root(s, CFS_MSG_CTL_GET_ROOT, req.reqid, 0, NULL, 0, -ENOENT);
		else
			send_root(s, CFS_MSG_CTL_GET_ROOT, req.reqid, 0, root5, len5, 0);
		return;
	default:
		cr_assert_fail("unexpected request type %u", req.type);
	}
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
	strcpy(dir, "/tmp/cfs-early-XXXXXX");
	cr_assert(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cfsd.sock", dir);
	cr_assert(cfs_listener_new(&loop, path, 0600, on_accept, NULL, &lst) == 0);
	len3 = make_root(3, root3, sizeof(root3));
	len5 = make_root(5, root5, sizeof(root5));
	pings = gets = get_roots = 0;
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
	int early_calls, calls, status;
	uint64_t early_seq, seq;
	bool early_after_final;
};

static uint64_t seq_of(const struct dhash_get_result *r)
{
	uint64_t seq = 0;
	cr_assert(dhash_verify(r->kind, &key, r->data, r->len, &seq) == 0);
	return seq;
}

static void on_early(void *arg, const struct dhash_get_result *r)
{
	struct got *g = arg;

	g->early_calls++;
	g->early_after_final |= g->calls > 0;
	cr_assert_eq(r->status, 0);
	g->early_seq = seq_of(r);
}

static void on_got(void *arg, const struct dhash_get_result *r)
{
	struct got *g = arg;

	g->calls++;
	g->status = r->status;
	if (r->status == 0)
		g->seq = seq_of(r);
}

/* Two early gets on one connection (one ping for both), then one on a
 * connection of its own after the first ended. */
static void run(enum mode m, struct got *a, struct got *b)
{
	client_t *l;

	mode = m;
	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert(client_get_root_early(l, &key, on_early, on_got, a) == 0);
	cr_assert(client_get_root_early(l, &key, on_early, on_got, b) == 0);
	for (int i = 0; i < 1000 && a->calls + b->calls < 2; i++)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(a->calls, 1);
	cr_assert_eq(b->calls, 1);
	cr_assert_not(a->early_after_final || b->early_after_final);
	client_free(l);
}

TestSuite(client_early, .init = setup, .fini = teardown);

Test(client_early, early_then_final)
{
	struct got a = { 0 }, b = { 0 };

	run(NEW, &a, &b);
	cr_assert_eq(pings, 1, "asked once per connection");
	cr_assert_eq(get_roots, 2);
	cr_assert_eq(gets, 0);
	cr_assert_eq(a.early_calls, 1);
	cr_assert_eq(a.early_seq, 3, "the first root that verifies");
	cr_assert_eq(a.status, 0);
	cr_assert_eq(a.seq, 5, "the read quorum's");
	cr_assert_eq(b.early_calls, 1);
	cr_assert_eq(b.seq, 5);
}

Test(client_early, final_only_from_an_old_daemon)
{
	struct got a = { 0 }, b = { 0 };

	run(OLD, &a, &b);
	cr_assert_eq(pings, 1);
	cr_assert_eq(get_roots, 0, "never sent what an older daemon would hang up on");
	cr_assert_eq(gets, 2);
	cr_assert_eq(a.early_calls + b.early_calls, 0);
	cr_assert_eq(a.status, 0);
	cr_assert_eq(a.seq, 5);
	cr_assert_eq(b.seq, 5);
}

Test(client_early, final_only_from_a_new_daemon)
{
	struct got a = { 0 }, b = { 0 };

	run(NEW_FINAL, &a, &b);
	cr_assert_eq(a.early_calls + b.early_calls, 0);
	cr_assert_eq(a.seq, 5);
	cr_assert_eq(b.seq, 5);
}

Test(client_early, early_then_error)
{
	struct got a = { 0 }, b = { 0 };

	run(NEW_ERROR, &a, &b);
	cr_assert_eq(a.early_calls, 1);
	cr_assert_eq(a.early_seq, 3);
	cr_assert_eq(a.status, -ENOENT);
	cr_assert_eq(b.status, -ENOENT);
}

Test(client_early, error_only)
{
	struct got a = { 0 }, b = { 0 };

	run(NEW_ERROR_ONLY, &a, &b);
	cr_assert_eq(a.early_calls + b.early_calls, 0);
	cr_assert_eq(a.status, -ENOENT);
	cr_assert_eq(b.status, -ENOENT);
}

/* A plain get beside an early one waits for nothing: it is written at
 * once, the early one after the ping's answer. */
Test(client_early, other_requests_do_not_wait)
{
	client_t *l;
	struct got a = { 0 }, b = { 0 };

	mode = OLD;
	cr_assert(client_new(&loop, path, 2000, &l) == 0);
	cr_assert(client_get(l, &key, on_got, &b) == 0);
	cr_assert(client_get_root_early(l, &key, on_early, on_got, &a) == 0);
	for (int i = 0; i < 1000 && a.calls + b.calls < 2; i++)
		uv_run(&loop, UV_RUN_ONCE);
	cr_assert_eq(b.seq, 5);
	cr_assert_eq(a.seq, 5);
	cr_assert_eq(gets, 2);
	client_free(l);
}
