/* chord/index.c: one IP's index space (PROTOCOL.md "Node IDs"). A joining virtual
 * server whose ID the ring already holds at another port of its IP moves
 * to a free index; when none is left the join fails. No socket: the join
 * lookup's answers are written by hand. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "chord/internal.h"

static chord_t *C;

static struct cfs_node node_at(const char *ip, uint16_t port, uint32_t vindex)
{
	struct cfs_node n = { .vindex = vindex };

	cr_assert_eq(cfs_addr_from_ip(&n.addr, ip, port), 0);
	cfs_node_id(&n.id, &n.addr, vindex);
	return n;
}

/* A process at 127.88.0.1:PORT with nv virtual servers, indexes 0..nv-1. */
static void process(uint16_t port, uint32_t nv)
{
	C = calloc(1, sizeof(*C));
	C->nv = nv;
	C->v = calloc(nv, sizeof(*C->v));
	cr_assert_eq(cfs_addr_from_ip(&C->addr, "127.88.0.1", port), 0);
	for (uint32_t i = 0; i < nv; i++) {
		C->v[i].c = C;
		C->v[i].index = i;
		C->v[i].self = node_at("127.88.0.1", port, i);
	}
}

static void teardown(void)
{
	free(C->v);
	free(C);
}

TestSuite(chord_index, .fini = teardown);

Test(chord_index, port_is_not_hashed)
{
	struct cfs_node a = node_at("127.88.0.1", 4000, 3), b = node_at("127.88.0.1", 4001, 3);
	struct cfs_node c = node_at("127.88.0.2", 4000, 3);

	process(4000, 1);
	cr_assert(cfs_id_eq(&a.id, &b.id), "two ports of one IP share index 3's ID");
	cr_assert(!cfs_id_eq(&a.id, &c.id));
}

Test(chord_index, taken_only_at_another_address)
{
	process(4000, 2);
	struct cfs_node other = node_at("127.88.0.1", 4001, 0); /* same ID, other port */
	struct cfs_node succ[3] = { node_at("127.9.0.1", 5000, 0), other, node_at("127.9.0.2", 5000, 0) };

	cr_assert(chord__index_taken(&C->v[0].self, succ, 3));
	cr_assert(!chord__index_taken(&C->v[1].self, succ, 3), "index 1 is not in the answer");
	succ[1] = C->v[0].self; /* ourselves, e.g. a restart on the same port */
	cr_assert(!chord__index_taken(&C->v[0].self, succ, 3));
	cr_assert(!chord__index_taken(&C->v[0].self, succ, 0));
}

Test(chord_index, pick_lowest_free)
{
	process(4000, 1);
	cr_assert_eq(chord__index_pick(0), 0);
	cr_assert_eq(chord__index_pick(0x7), 3);
	cr_assert_eq(chord__index_pick(~UINT64_C(0) ^ (UINT64_C(1) << 63)), 63);
	cr_assert_eq(chord__index_pick(~UINT64_C(0)), -ENOSPC);
}

/* A second process with V = 4 on an IP whose first process holds 0..3:
 * each of its servers learns its index is taken and moves to 4..7, never
 * onto an index it uses itself. */
Test(chord_index, second_process_moves_past_the_first)
{
	process(4001, 4);
	for (uint32_t i = 0; i < 4; i++)
		C->v[i].index_ok = i != 0; /* 1..3 found free once; 0 not yet */
	cr_assert(!chord__index_all_ok(C), "nobody joins before every index is checked");
	for (uint32_t i = 0; i < 4; i++) {
		struct cfs_node held = node_at("127.88.0.1", 4000, C->v[i].self.vindex);
		cr_assert(chord__index_taken(&C->v[i].self, &held, 1));
		cr_assert_eq(chord__index_move(C, &C->v[i]), 0);
	}
	for (uint32_t i = 0; i < 4; i++) {
		struct cfs_node want = node_at("127.88.0.1", 4001, 4 + i);
		cr_assert_eq(C->v[i].self.vindex, 4 + i);
		cr_assert(cfs_id_eq(&C->v[i].self.id, &want.id), "the ID follows the new index");
	}
	cr_assert_eq(C->index_moves, 4);
	for (uint32_t i = 0; i < 4; i++)
		cr_assert(!C->v[i].index_ok, "a moved server's new index is unchecked");
	cr_assert_eq(C->index_taken, 0xf);
}

/* 64 indexes per IP: a process that cannot find a free one fails. */
Test(chord_index, full_address_refuses)
{
	process(4002, 2);
	C->index_taken = ~UINT64_C(0) ^ 0x3 ^ (UINT64_C(1) << 40); /* only 40 left, and ours */
	cr_assert_eq(chord__index_move(C, &C->v[0]), 0);
	cr_assert_eq(C->v[0].self.vindex, 40);
	cr_assert_eq(chord__index_move(C, &C->v[1]), -ENOSPC, "index 1 taken, nothing free");
	cr_assert_eq(C->v[1].self.vindex, 1, "a failed move leaves the server as it was");
}

/* The decoder and chord refuse an index at or above the maximum. */
Test(chord_index, index_bound)
{
	struct cfs_node n = node_at("127.88.0.1", 4000, CFS_VNODE_INDEX_MAX - 1);

	process(4000, 1);
	cr_assert_eq(CFS_VNODE_INDEX_MAX, 64);
	cr_assert(chord__node_id_ok(C, &n));
	n = node_at("127.88.0.1", 4000, CFS_VNODE_INDEX_MAX);
	cr_assert(!chord__node_id_ok(C, &n), "index 64 is out of range even with a matching hash");
}

/* The nodes an answer names at our IP but another port tell which indexes
 * the other processes there hold; a move skips them all at once. */
Test(chord_index, answers_reveal_others_indexes)
{
	process(4001, 2);
	struct cfs_node ans[5] = {
		node_at("127.88.0.1", 4000, 0), node_at("127.88.0.1", 4000, 2),
		node_at("127.88.0.1", 4001, 1), /* ourselves */
		node_at("127.88.0.2", 4000, 3), /* another IP */
		node_at("127.88.0.1", 4005, 5),
	};
	C->index_taken = chord__index_others(&C->addr, ans, 5);
	cr_assert_eq(C->index_taken, (1u << 0) | (1u << 2) | (1u << 5));
	cr_assert_eq(chord__index_move(C, &C->v[0]), 0);
	cr_assert_eq(C->v[0].self.vindex, 3, "0, 1 ours, 2 and 5 others': 3 is the first free");
}
