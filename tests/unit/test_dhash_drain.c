/* A drain's ranges (dhash/sync.c), pure: which keys a leaving virtual
 * server holds for its process (dhash__drain_held), and which part of
 * them each successor holds once it is gone (dhash__drain_plan). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chord/internal.h" /* a successor put into the table by hand */
#include "dhash/internal.h"

/* Node x: ID x·2^248, address 10.0.0.x:4000 (ip: another last octet). */
static struct cfs_node nd(uint8_t x, uint8_t ip)
{
	struct cfs_node n = { 0 };
	char a[32];

	snprintf(a, sizeof(a), "10.0.0.%u", ip);
	cr_assert_eq(cfs_addr_from_ip(&n.addr, a, 4000), 0);
	n.id.b[0] = x;
	return n;
}

static struct cfs_id idx(uint8_t x)
{
	return (struct cfs_id){ { x } };
}

TestSuite(dhash_drain);

/* The held range runs back to the nearest other virtual server of the
 * process that has joined: one still joining holds nothing. */
Test(dhash_drain, held_range_counts_only_joined_vnodes)
{
	struct cfs_id selves[3] = { idx(10), idx(20), idx(30) }, lo;
	bool joined[3] = { true, false, true };

	dhash__drain_held(selves, joined, 3, 2, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[0]), "(20, 30]: 20 has not joined, (10, 30] is ours");
	dhash__drain_held(selves, joined, 3, 0, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[2]), "round the circle: (30, 10]");
	joined[1] = true;
	dhash__drain_held(selves, joined, 3, 2, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[1]));
	/* alone in the ring: the whole circle */
	joined[0] = joined[1] = false;
	dhash__drain_held(selves, joined, 3, 2, &lo);
	cr_assert(cfs_id_eq(&lo, &selves[2]));
}

/* A ring of ten servers at 10, 20, ..., 100, we at 50, k = 3: a key in
 * (40, 50] goes to 80 next (60 and 70 hold it already), (30, 40] to 70,
 * (20, 30] to 60. So each successor is handed the range it holds once we
 * are gone, and no server beyond the third is handed anything. */
static struct cfs_node ring[10];
static const struct cfs_node *succs[9];
static struct cfs_node preds[9];

static void ring10(void)
{
	for (int i = 0; i < 10; i++)
		ring[i] = nd((uint8_t)(10 * (i + 1)), (uint8_t)(i + 1));
	for (int i = 0; i < 9; i++) {
		succs[i] = &ring[(5 + i) % 10];     /* 60, 70, ..., 100, 10, ..., 40 */
		preds[i] = ring[(3 - i + 10) % 10]; /* 40, 30, 20, 10, 100, ..., 60 */
	}
}

static void assert_target(const struct dhash__drain_target *t, uint8_t peer, uint8_t lo)
{
	cr_assert_eq(t->peer.id.b[0], peer, "a target at %u, not %u", t->peer.id.b[0], peer);
	cr_assert_eq(t->lo.b[0], lo, "%u is handed (%u, 50], not (%u, 50]", peer, t->lo.b[0], lo);
}

Test(dhash_drain, each_successor_is_handed_what_it_holds_next)
{
	struct dhash__drain_target t[9];

	ring10();
	struct cfs_id whole = ring[4].id;
	cr_assert_eq(dhash__drain_plan(&ring[4], &whole, preds, 9, succs, 9, 3, t), 3);
	assert_target(&t[0], 60, 20);
	assert_target(&t[1], 70, 30);
	assert_target(&t[2], 80, 40);
}

/* Predecessors unknown past the first: the farther bands are bounded by
 * the held range (more copies, never a block short). */
Test(dhash_drain, unknown_predecessors_fall_back_to_the_held_range)
{
	struct dhash__drain_target t[9];
	struct cfs_id held = idx(35);

	ring10();
	struct cfs_id whole = ring[4].id;
	cr_assert_eq(dhash__drain_plan(&ring[4], &whole, preds, 1, succs, 9, 3, t), 3);
	assert_target(&t[0], 60, 50);
	assert_target(&t[1], 70, 50);
	assert_target(&t[2], 80, 40);
	/* another of our virtual servers at 35: nothing before it is ours */
	cr_assert_eq(dhash__drain_plan(&ring[4], &held, preds, 9, succs, 9, 3, t), 3);
	assert_target(&t[0], 60, 35);
	assert_target(&t[1], 70, 35);
	assert_target(&t[2], 80, 40);
}

/* One server per address: a second node at a successor's address (its
 * other virtual server) counts once, as does one at ours, on either side. */
Test(dhash_drain, one_server_per_address)
{
	struct dhash__drain_target t[9];
	struct cfs_node twin = nd(65, 6), mine = nd(45, 5);

	ring10();
	struct cfs_id whole = ring[4].id;
	const struct cfs_node *s2[5] = { succs[0], &twin, succs[1], succs[2], succs[3] };
	struct cfs_node p2[5] = { mine, preds[0], preds[1], preds[2], preds[3] };
	cr_assert_eq(dhash__drain_plan(&ring[4], &whole, p2, 5, s2, 5, 3, t), 3);
	assert_target(&t[0], 60, 20);
	assert_target(&t[1], 70, 30);
	assert_target(&t[2], 80, 40);
}

/* A ring of k servers or fewer: every server holds every key, and each
 * is handed the whole range. */
Test(dhash_drain, a_ring_of_k_hands_everything_to_everyone)
{
	struct dhash__drain_target t[3];
	struct cfs_node me = nd(50, 5), a = nd(60, 6), b = nd(70, 7);
	const struct cfs_node *s[2] = { &a, &b };
	struct cfs_node p[2] = { b, a };

	cr_assert_eq(dhash__drain_plan(&me, &me.id, p, 2, s, 2, 3, t), 2);
	assert_target(&t[0], 60, 50);
	assert_target(&t[1], 70, 50);
	/* k = 2: we hold (60, 50]; once we are gone the two left hold all */
	cr_assert_eq(dhash__drain_plan(&me, &me.id, p, 2, s, 2, 2, t), 2);
	assert_target(&t[0], 60, 50);
	assert_target(&t[1], 70, 50);
	/* k = 1: 60 alone holds (70, 50] next, and 70 nothing of ours */
	cr_assert_eq(dhash__drain_plan(&me, &me.id, p, 2, s, 2, 1, t), 1);
	assert_target(&t[0], 60, 70);
}

/* ------------------------------------------------------------ the callback */

/* A real server on a ring of its own (loopback, a store in a temp dir). */
static uv_loop_t loop;
static cfs_transport_t *tr;
static chord_t *chord;
static dhash_server_t *srv;
static char dir[64];

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	if (chord && chord_handle_request(chord, req, from))
		return;
	if (srv && dhash_handle_request(srv, req, from))
		return;
	(void)cfs_transport_reply_error(tr, from, -EOPNOTSUPP);
}

static void server_setup(void)
{
	struct cfs_transport_config tc;
	struct chord_config cc;
	struct dhash_config dc;
	struct cfs_addr a;
	char blocks[96];

	cfs_log_init("test", CFS_LOG_ERROR);
	cr_assert_eq(cfs_crypto_init(), 0);
	uv_loop_init(&loop);
	cfs_transport_config_default(&tc);
	tc.host = "127.0.0.1";
	cr_assert_eq(cfs_transport_new(&loop, &tc, on_request, NULL, &tr), 0);
	cr_assert_eq(cfs_transport_local_addr(tr, &a), 0);
	chord_config_default(&cc);
	cr_assert_eq(chord_new(&loop, tr, &a, &cc, &chord), 0);
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-drain.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(blocks, sizeof(blocks), "%s/blocks", dir);
	dhash_config_default(&dc);
	dc.sync_ms = 0;
	cr_assert_eq(dhash_server_new(&loop, chord, blocks, &dc, &srv), 0);
	chord_start(chord, NULL, 0);
}

static void server_teardown(void)
{
	char cmd[128];

	dhash_server_free(srv);
	srv = NULL;
	chord_free(chord);
	chord = NULL;
	cfs_transport_close(tr);
	cfs_loop_run(&loop);
	uv_loop_close(&loop);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(dhash_drain_cb, .init = server_setup, .fini = server_teardown);

struct drained {
	bool done;
	unsigned calls;
	struct dhash_drain_result r;
};

static void on_drained(void *arg, const struct dhash_drain_result *r)
{
	struct drained *d = arg;

	d->done = true;
	d->calls++;
	d->r = *r;
}

/* Alone in its ring the server has nobody to hand anything to: the drain
 * has nothing to do, and still reports from the loop, never from inside
 * the call that started it. */
Test(dhash_drain_cb, reported_from_the_loop)
{
	struct drained d = { 0 };

	cr_assert_eq(dhash_server_drain(srv, on_drained, &d), 0);
	cr_assert(!d.done, "the drain reported inside dhash_server_drain");
	cr_assert_eq(dhash_server_drain(srv, on_drained, &d), -EBUSY);
	cr_assert_eq(cfs_loop_run_until(&loop, &d.done), 0);
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.r.status, 0);
	cr_assert_eq(d.r.pushed + d.r.failed + d.r.servers, 0);
}

/* A server closed before its drain reported reports -ECANCELED, once. */
Test(dhash_drain_cb, cancelled_by_the_close)
{
	struct drained d = { 0 };

	cr_assert_eq(dhash_server_drain(srv, on_drained, &d), 0);
	dhash_server_free(srv);
	srv = NULL;
	cr_assert_eq(d.calls, 1);
	cr_assert_eq(d.r.status, -ECANCELED);
	server_teardown(); /* the loop runs until every handle closed */
	cr_assert_eq(d.calls, 1);
	server_setup();
}

/* A successor that never answers (a socket that is never read): the
 * drain's comparisons with it time out, are cut short, and say so, so
 * that nobody takes the drain for complete. */
Test(dhash_drain_cb, a_silent_server_cuts_the_comparisons_short, .timeout = 30)
{
	struct drained d = { 0 };
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct cfs_node dead = { 0 };

	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "127.0.0.2 is not this host's");
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	cr_assert_eq(cfs_addr_from_ip(&dead.addr, "127.0.0.2", ntohs(sa.sin_port)), 0);
	cfs_node_id(&dead.id, &dead.addr, 0);
	chord->v[0].succ[0] = (struct tnode){ .n = dead, .valid = true };
	chord->v[0].nsuccs = 1;
	chord->v[0].joined = true;

	cr_assert_eq(dhash_server_drain(srv, on_drained, &d), 0);
	cr_assert_eq(cfs_loop_run_until(&loop, &d.done), 0);
	close(fd);
	cr_assert_eq(d.r.status, 0);
	cr_assert_eq(d.r.servers, 1);
	cr_assert_eq(d.r.comparisons, 2, "the whole circle, in two halves");
	cr_assert_eq(d.r.cut_short, 2, "%u of %u comparisons cut short", d.r.cut_short, d.r.comparisons);
	cr_assert_eq(d.r.pushed, 0);
}
