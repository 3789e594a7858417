/*
 * The index space of one IP (PROTOCOL.md "Node IDs", CFS 4.4). A virtual server's ID
 * is H(IP ‖ index) with the index below CFS_VNODE_INDEX_MAX, the port not
 * hashed: every process on one address draws from the same 64 indexes, so
 * the address holds at most 64 ring positions whatever ports it binds.
 *
 * A joining virtual server looks its own ID up through the bootstrap
 * before it takes a place (maint.c, join). If the ring already has that ID
 * at another address — which, IDs being checked against addresses, can
 * only be another process on our IP — the index is taken: the server moves
 * to the lowest index neither taken nor used by this process and tries
 * again. Every answer also shows which indexes other processes on our IP
 * hold (the nodes it names there, their IDs checked by the lookup), so a
 * move skips those rather than finding them taken one lookup at a time. When none is left, the process cannot have its V servers and the
 * join fails with -ENOSPC (cfsd then refuses to run).
 *
 * No server joins before every server's index is known free: a node
 * offered to the tables enters every virtual server's (table.c), and an
 * unjoined server with an empty list joins on the first it gets, skipping
 * its own join lookup and so this check.
 *
 * No I/O here: the decisions are unit-tested on hand-made answers.
 */
#include <string.h>

#include "chord/internal.h"

_Static_assert(CFS_VNODE_INDEX_MAX <= 64, "the taken set is a 64-bit mask");
_Static_assert(CHORD_VNODES_MAX <= CFS_VNODE_INDEX_MAX, "one process fits in one IP's indexes");

bool chord__index_taken(const struct cfs_node *self, const struct cfs_node *succ, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (cfs_id_eq(&succ[i].id, &self->id) && !cfs_addr_eq(&succ[i].addr, &self->addr))
			return true;
	return false;
}

uint64_t chord__index_others(const struct cfs_addr *self, const struct cfs_node *nodes, uint32_t n)
{
	uint64_t taken = 0;

	for (uint32_t i = 0; i < n; i++)
		if (nodes[i].vindex < CFS_VNODE_INDEX_MAX && cfs_addr_same_ip(&nodes[i].addr, self) &&
		    !cfs_addr_eq(&nodes[i].addr, self))
			taken |= UINT64_C(1) << nodes[i].vindex;
	return taken;
}

bool chord__index_all_ok(const chord_t *c)
{
	for (uint32_t i = 0; i < c->nv; i++)
		if (!c->v[i].index_ok)
			return false;
	return true;
}

int chord__index_pick(uint64_t busy)
{
	for (uint32_t i = 0; i < CFS_VNODE_INDEX_MAX; i++)
		if (!(busy & (UINT64_C(1) << i)))
			return (int)i;
	return -ENOSPC;
}

int chord__index_move(chord_t *c, struct chord__vnode *v)
{
	uint64_t busy;
	uint32_t old = v->self.vindex;
	char a[CFS_ADDR_STRLEN], s[9];
	int i;

	c->index_taken |= UINT64_C(1) << old;
	busy = c->index_taken;
	for (uint32_t k = 0; k < c->nv; k++)
		busy |= UINT64_C(1) << c->v[k].self.vindex;
	if ((i = chord__index_pick(busy)) < 0) {
		cfs_addr_str(&c->addr, a);
		*strrchr(a, ':') = 0; /* the IP: the port does not count */
		return log_error_errno(-ENOSPC, "all %d virtual-server indexes of IP %s are taken "
		                       "by other processes there or by this one: one IP holds at most "
		                       "%d ring positions; run with fewer --vnodes or on another address",
		                       CFS_VNODE_INDEX_MAX, a, CFS_VNODE_INDEX_MAX);
	}
	v->self.vindex = (uint32_t)i;
	v->index_ok = false; /* the new index is checked by the next join lookup */
	cfs_node_id(&v->self.id, &v->self.addr, v->self.vindex);
	c->index_moves++;
	log_info("vnode %u: index %u of this IP is taken by another process; using index %d (ID %s)",
	         v->index, old, i, cfs_id_short(&v->self.id, s));
	return 0;
}
