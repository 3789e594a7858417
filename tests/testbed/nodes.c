/*
 * The testbed's nodes: a whole cfsd each (transport, chord_t, DHash server
 * with its own LevelDB store, DHash client), many per process on one event
 * loop. A node's slot fixes its address — its own loopback IP
 * 127.78.(slot / 250).(slot % 250 + 1), port base + slot (tb_slot_addr) —
 * and its data directory, so the same schedule gives the same ring. Each
 * node has its own IP because IDs hash the IP and an index, not the port
 * (PROTOCOL.md "Node IDs"): nodes sharing one IP would share its 64 indexes.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/testbed/testbed.h"

struct tb TB;

const char *tb_slot_ip(uint32_t slot, char buf[static 32])
{
	snprintf(buf, 32, "127.78.%u.%u", slot / 250, slot % 250 + 1);
	return buf;
}

int tb_slot_addr(uint32_t slot, struct cfs_addr *ret)
{
	char ip[32];

	return cfs_addr_from_ip(ret, tb_slot_ip(slot, ip), (uint16_t)(TB.base_port + slot));
}

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct tb_node *n = arg;

	if (!n->alive)
		return;
	if (chord_handle_request(n->chord, req, from))
		return;
	if (dhash_handle_request(n->dh, req, from))
		return;
	(void)cfs_transport_reply_error(n->tr, from, -EOPNOTSUPP);
}

static int vid_cmp(const void *a, const void *b)
{
	return cfs_id_cmp(&((const struct tb_vid *)a)->id, &((const struct tb_vid *)b)->id);
}

static void ids_refresh(void)
{
	if (!TB.ids_stale)
		return;
	TB.nids = 0;
	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].alive && !TB.n[i].leaving)
			for (uint32_t v = 0; v < chord_vnode_count(TB.n[i].chord); v++)
				TB.ids[TB.nids++] = (struct tb_vid){ chord_vnode_self(TB.n[i].chord, v)->id, i };
	if (TB.nids)
		qsort(TB.ids, TB.nids, sizeof(TB.ids[0]), vid_cmp);
	TB.ids_stale = false;
}

static size_t lower_bound(const struct tb_vid *v, size_t n, const struct cfs_id *id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cfs_id_cmp(&v[mid].id, id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct cfs_id *tb_true_succ(const struct cfs_id *key)
{
	ids_refresh();
	if (!TB.nids)
		return NULL;
	size_t i = lower_bound(TB.ids, TB.nids, key);
	return &TB.ids[i == TB.nids ? 0 : i].id;
}

uint32_t tb_owner(const struct cfs_id *id)
{
	ids_refresh();
	size_t i = lower_bound(TB.ids, TB.nids, id);
	return i < TB.nids && cfs_id_eq(&TB.ids[i].id, id) ? TB.ids[i].slot : UINT32_MAX;
}

/* The key's replica set now: its first k (at most) distinct live
 * successors' slots into slots[]; returns how many. */
static uint32_t replica_slots(const struct cfs_id *key, uint32_t k, uint32_t *slots)
{
	uint32_t n = 0;

	ids_refresh();
	if (!TB.nids)
		return 0;
	size_t i = lower_bound(TB.ids, TB.nids, key);
	for (size_t step = 0; step < TB.nids && n < k; step++) {
		uint32_t slot = TB.ids[(i + step) % TB.nids].slot;
		bool dup = false;
		for (uint32_t j = 0; j < n; j++)
			dup |= slots[j] == slot;
		if (!dup)
			slots[n++] = slot;
	}
	return n;
}

uint64_t tb_oracle_us(const struct tb_node *from, const struct cfs_id *key, uint32_t k)
{
	uint32_t slots[CFS_MSG_MAX_NODES];
	struct cfs_addr a, b;
	uint64_t best = UINT64_MAX;

	if (!TB.has_wan || tb_slot_addr(from->slot, &a) < 0)
		return 0;
	k = replica_slots(key, k < CFS_MSG_MAX_NODES ? k : CFS_MSG_MAX_NODES, slots);
	for (uint32_t j = 0; j < k; j++)
		if (tb_slot_addr(slots[j], &b) == 0) {
			uint64_t rtt = cfs_wan_rtt_us(&TB.wan, &a, &b);
			best = rtt < best ? rtt : best;
		}
	return best == UINT64_MAX ? 0 : best;
}

/* A coded get's oracle: it needs m fragments, so the RTT to the m-th
 * nearest of the key's n holders (DHash++ Fig. 9). */
uint64_t tb_oracle_coded_us(const struct tb_node *from, const struct cfs_id *key, uint32_t m, uint32_t n)
{
	uint32_t slots[CFS_MSG_MAX_NODES];
	uint64_t rtt[CFS_MSG_MAX_NODES];
	struct cfs_addr a, b;
	uint32_t k = 0;

	if (!TB.has_wan || tb_slot_addr(from->slot, &a) < 0)
		return 0;
	n = replica_slots(key, n < CFS_MSG_MAX_NODES ? n : CFS_MSG_MAX_NODES, slots);
	for (uint32_t j = 0; j < n; j++)
		if (tb_slot_addr(slots[j], &b) == 0) {
			uint64_t x = cfs_wan_rtt_us(&TB.wan, &a, &b), i = k++;
			for (; i > 0 && rtt[i - 1] > x; i--)
				rtt[i] = rtt[i - 1];
			rtt[i] = x;
		}
	return k >= m ? rtt[m - 1] : 0;
}

/* A node's data directory: DIR/SLOT. */
static void node_dir(uint32_t slot, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%u", TB.dir, slot);
}

int tb_node_start(uint32_t slot)
{
	struct tb_node *n = &TB.n[slot];
	struct cfs_transport_config tc;
	struct cfs_addr self, boot[3];
	struct chord_config cc = TB.cc;

	if (TB.vnodes_list[0])
		cc.vnodes = TB.vnodes_list[slot % TB.nvnodes_list];
	char dir[512], blocks[600];
	int r;

	if (n->alive || n->tr)
		return -EEXIST;
	memset(n, 0, sizeof(*n));
	n->slot = slot;
	n->port = (uint16_t)(TB.base_port + slot);
	char ip[32];
	cfs_transport_config_default(&tc);
	tc.host = tb_slot_ip(slot, ip);
	tc.port = n->port;
	if ((r = cfs_transport_new(TB.loop, &tc, on_request, n, &n->tr)) < 0) {
		fprintf(stderr, "cfs-testbed: node %u: UDP %s:%u: %s\n", slot, ip, n->port, uv_strerror(r));
		return r;
	}
	if ((r = tb_slot_addr(slot, &self)) < 0)
		return r;
	if (TB.has_wan) {
		cfs_wan_node_init(&n->wan, TB.t0_us ? &TB.wan : &TB.wan_setup, &self,
		                  TB.seed * 1000003u + slot);
		struct cfs_netmodel m = cfs_wan_ops(&n->wan);
		cfs_transport_set_model(n->tr, &m);
	}
	cc.seed = TB.seed * 7919u + slot + 1;
	if ((r = chord_new(TB.loop, n->tr, &self, &cc, &n->chord)) < 0)
		goto fail;
	node_dir(slot, dir, sizeof(dir));
	if ((r = cfs_mkdir_p(dir, 0700)) < 0)
		goto fail;
	snprintf(blocks, sizeof(blocks), "%s/blocks", dir);
	struct dhash_config dc = TB.dc;
	if (TB.caching) {
		/* The server keeps the pointer: each node's path is its own. */
		snprintf(n->cache_dir, sizeof(n->cache_dir), "%s/cache", dir);
		dc.cache_dir = n->cache_dir;
	} else {
		dc.cache_dir = NULL;
	}
	if ((r = dhash_server_new(TB.loop, n->chord, blocks, &dc, &n->dh)) < 0 ||
	    (r = dhash_client_new(n->chord, &dc, &n->cl)) < 0) {
		fprintf(stderr, "cfs-testbed: node %u: block store %s: %s\n", slot, blocks, strerror(-r));
		goto fail;
	}
	struct dhash_config rdc = dc;
	rdc.background = true;
	if (TB.frag_repair_ms && dhash_client_new(n->chord, &rdc, &n->rcl) == 0)
		n->fr = cfsd_frepair_new(TB.loop, n->chord, n->dh, n->rcl, TB.frag_repair_ms,
		                         CFSD_FREPAIR_KEYS_DEFAULT);
	/* Join through up to three live nodes (a crashed one is skipped by
	 * chord_start's retries). */
	size_t nb = 0;
	for (uint32_t tries = 0; tries < 256 && nb < 3 && TB.nalive; tries++) {
		struct tb_node *b = tb_random_node();
		if (b && b != n && chord_vnode_joined(b->chord, 0) &&
		    tb_slot_addr(b->slot, &boot[nb]) == 0)
			nb++;
	}
	n->alive = true;
	n->joined_ms = tb_now_ms();
	TB.nalive++;
	TB.ids_stale = true;
	chord_start(n->chord, boot, nb);
	return 0;
fail:
	if (n->dh)
		dhash_server_free(n->dh);
	if (n->chord)
		chord_free(n->chord);
	cfs_transport_close(n->tr);
	memset(n, 0, sizeof(*n));
	return r;
}

/* One node's share of tb_repair_bytes. */
static uint64_t node_repair_bytes(const struct tb_node *n)
{
	uint64_t pushed = 0, fetched = 0, fr = 0;

	if (n->dh)
		dhash_server_sync_bytes(n->dh, &pushed, &fetched);
	if (n->fr)
		fr = cfsd_frepair_stats(n->fr)->bytes_read + cfsd_frepair_stats(n->fr)->bytes_stored;
	return pushed + fetched + fr;
}

uint64_t tb_repair_bytes(void)
{
	uint64_t sum = TB.repair_bytes_gone;

	for (uint32_t i = 0; i < TB.nslots; i++)
		sum += node_repair_bytes(&TB.n[i]);
	return sum;
}

static void node_free(struct tb_node *n)
{
	if (n->tr) {
		struct cfs_transport_stats st;
		cfs_transport_get_stats(n->tr, &st);
		TB.dgrams_gone += st.datagrams_out;
		TB.bytes_gone += st.bytes_out;
	}
	if (n->chord) {
		TB.learn_auths_gone += chord_learn_auths(n->chord);
		TB.learn_sweeps_gone += chord_learn_sweeps(n->chord);
	}
	TB.repair_bytes_gone += node_repair_bytes(n);
	cfsd_frepair_free(n->fr);
	n->fr = NULL;
	dhash_client_free(n->rcl);
	n->rcl = NULL;
	dhash_client_free(n->cl);
	dhash_server_free(n->dh);
	chord_free(n->chord);
	cfs_transport_close(n->tr);
	n->cl = NULL;
	n->dh = NULL;
	n->chord = NULL;
	n->tr = NULL;
	n->alive = false;
	n->leaving = false;
}

static void left(void *arg)
{
	node_free(arg);
}

void tb_node_stop(uint32_t slot, bool graceful)
{
	struct tb_node *n = &TB.n[slot];

	if (!n->alive || n->leaving)
		return;
	TB.nalive--;
	TB.ids_stale = true;
	if (graceful) {
		n->leaving = true;
		chord_leave(n->chord, left, n);
	} else {
		node_free(n);
	}
}

void tb_nodes_stop_all(void)
{
	for (uint32_t i = 0; i < TB.nslots; i++)
		tb_node_stop(i, false);
	/* Nodes in the middle of a graceful leave: free them now. */
	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].leaving)
			node_free(&TB.n[i]);
	uv_run(TB.loop, UV_RUN_NOWAIT);
}

struct tb_node *tb_random_node(void)
{
	if (!TB.nalive)
		return NULL;
	for (;;) {
		struct tb_node *n = &TB.n[cfs_rng_next(&TB.rng) % TB.nslots];
		if (n->alive && !n->leaving)
			return n;
	}
}

static void true_next(const struct cfs_id *id, struct cfs_id *ret)
{
	struct cfs_id k, one = { 0 };

	one.b[CFS_ID_BYTES - 1] = 1;
	cfs_id_add(&k, id, &one);
	*ret = *tb_true_succ(&k);
}

/* Is the whole successor list the true one? Puts place replicas by it and
 * a frozen ring keeps it as it is. */
static bool succs_right(const chord_t *c, uint32_t v)
{
	const struct cfs_node *succ[CHORD_SUCC_MAX];
	uint32_t ns = chord_vnode_succs(c, v, succ);
	uint32_t want = TB.nids - 1 < TB.cc.nsucc ? (uint32_t)TB.nids - 1 : TB.cc.nsucc;
	struct cfs_id prev = chord_vnode_self(c, v)->id, t;

	if (ns != want)
		return false;
	for (uint32_t k = 0; k < ns; k++) {
		true_next(&prev, &t);
		if (!cfs_id_eq(&t, &succ[k]->id))
			return false;
		prev = t;
	}
	return true;
}

uint32_t tb_ring_wrong(bool settled)
{
	uint32_t wrong = 0;

	ids_refresh();
	if (TB.nids == 1) /* alone: its own successor, no predecessor */
		for (uint32_t i = 0; i < TB.nslots; i++)
			if (TB.n[i].alive && !TB.n[i].leaving)
				return !chord_vnode_joined(TB.n[i].chord, 0);
	for (uint32_t i = 0; i < TB.nslots; i++) {
		struct tb_node *n = &TB.n[i];
		if (!n->alive || n->leaving)
			continue;
		for (uint32_t v = 0; v < chord_vnode_count(n->chord); v++) {
			const struct cfs_id *self = &chord_vnode_self(n->chord, v)->id;
			const struct cfs_node *p = chord_vnode_pred(n->chord, v);
			struct cfs_id want;
			true_next(self, &want);
			size_t lo = lower_bound(TB.ids, TB.nids, self);
			const struct cfs_id *pw = &TB.ids[lo == 0 ? TB.nids - 1 : lo - 1].id;
			if (!chord_vnode_joined(n->chord, v) || (settled && !chord_vnode_settled(n->chord, v)) ||
			    !cfs_id_eq(&chord_vnode_succ(n->chord, v)->id, &want) || !p ||
			    !cfs_id_eq(&p->id, pw) || (settled && !succs_right(n->chord, v)))
				wrong++;
		}
	}
	return wrong;
}

uint64_t tb_now_ms(void)
{
	return TB.t0_us ? (cfs_now_us() - TB.t0_us) / 1000 : 0;
}

static bool tick_flag;
static void on_tick(uv_timer_t *t)
{
	tick_flag = true;
}

void tb_run_ms(uint64_t ms)
{
	uv_timer_t t;

	uv_timer_init(TB.loop, &t);
	tick_flag = false;
	uv_timer_start(&t, on_tick, ms, 0);
	while (!tick_flag && !TB.interrupted)
		uv_run(TB.loop, UV_RUN_ONCE);
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(TB.loop, UV_RUN_NOWAIT);
}

bool tb_wait_ring(bool settled, double timeout_s)
{
	uint64_t end = cfs_now_us() + (uint64_t)(timeout_s * 1e6);

	while (!TB.interrupted) {
		if (tb_ring_wrong(settled) == 0)
			return true;
		if (cfs_now_us() >= end)
			return false;
		/* Lists fill one node per stabilization round: run the rounds
		 * back to back rather than a period apart. */
		for (uint32_t i = 0; i < TB.nslots; i++)
			if (TB.n[i].alive && !TB.n[i].leaving)
				chord_stabilize_now(TB.n[i].chord);
		tb_run_ms(200);
	}
	return false;
}
