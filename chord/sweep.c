/*
 * Sweeps: a member fills the gaps of its learned table on purpose, one
 * successor list at a time (the pace, the gap rule and why: internal.h,
 * CHORD_SWEEP_MS). Every sweep_ms the learned table names the node before
 * its widest gap (chord__learned_gap, no I/O), which is asked GET_SUCCS in
 * the background class; every node its answer names is learned as a
 * lookup answer's are (chord__learn_node: checked before it is used).
 */
#include <stdlib.h>

#include "chord/internal.h"

#define SWEEP_TIMEOUT_MS 2000

static void sweep_tick(uv_timer_t *t);

static void on_succs(void *arg, int status, const struct cfs_msg *reply,
                     const struct cfs_rpc_result *res)
{
	chord_t *c = arg;

	if (status < 0 || c->freeing || c->client)
		return;
	uint64_t now = cfs_now_us();
	for (uint32_t i = 0; i < reply->n_nodes && i < CFS_MSG_MAX_NODES; i++)
		chord__learn_node(c, &reply->nodes[i], now);
	chord__auth_learn_pump(c, now);
}

static void sweep_once(chord_t *c)
{
	bool joined = false;

	for (uint32_t i = 0; i < c->nv && !joined; i++)
		joined = c->v[i].joined;
	double n = chord_estimate_n(c);
	/* Hints still wait for their checks: a sweep now would only add to
	 * them (the checks' budget, not the sweeps, paces the learning). */
	if (!joined || c->client || c->leaving || c->frozen || c->learned.cap == 0 || n < 2 ||
	    c->learned.nqueue > 0)
		return;
	struct cfs_node to;
	uint64_t now = cfs_now_us();
	if (!chord__learned_gap(&c->learned, &c->v[0].self.id, CHORD_SWEEP_SPACINGS / n, now, &to))
		return;
	chord__msg_init(c, NULL, CFS_MSG_GET_SUCCS, &to);
	(void)chord__call_background(c, &to, &c->msg, SWEEP_TIMEOUT_MS, on_succs, c);
}

static void sweep_tick(uv_timer_t *t)
{
	chord_t *c = t->data;

	sweep_once(c);
	uv_timer_start(t, sweep_tick, chord__jitter_ms(c, c->cfg.sweep_ms), 0);
}

void chord__sweep_start(chord_t *c)
{
	if (c->cfg.sweep_ms && !c->client)
		uv_timer_start(&c->sweep_timer, sweep_tick, chord__jitter_ms(c, c->cfg.sweep_ms), 0);
}

void chord__sweep_stop(chord_t *c)
{
	uv_timer_stop(&c->sweep_timer);
}
