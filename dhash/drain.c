/*
 * The drain (dhash_server_drain): before a server leaves, each of its
 * virtual servers compares what it holds with the servers that hold it
 * once it is gone, and pushes what they lack. A drain waits for the
 * round at work to end, then runs as sync sessions (sync.c) that push
 * what the peer lacks and fetch nothing, and reports once to its
 * caller, never from inside dhash_server_drain.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

static void job_add(dhash_server_t *s, const struct sync_job *j)
{
	if (s->sync_n == s->sync_cap) {
		s->sync_cap = s->sync_cap ? 2 * s->sync_cap : 16;
		s->sync_jobs = xrealloc(s->sync_jobs, s->sync_cap * sizeof(*s->sync_jobs));
	}
	s->sync_jobs[s->sync_n++] = *j;
}

void dhash__drain_held(const struct cfs_id *selves, const bool *joined, uint32_t n, uint32_t vi,
                       struct cfs_id *ret_lo)
{
	const struct cfs_id *me = &selves[vi];
	bool found = false;
	struct cfs_id best_d;

	*ret_lo = *me;
	for (uint32_t i = 0; i < n; i++) {
		struct cfs_id d;
		if (i == vi || !joined[i])
			continue; /* one not in the ring holds nothing: its keys are ours */
		cfs_id_sub(&d, me, &selves[i]); /* how far it is behind us */
		if (!found || cfs_id_cmp(&d, &best_d) < 0) {
			best_d = d;
			*ret_lo = selves[i];
			found = true;
		}
	}
}

/* dhash__drain_held for virtual server vi of c. */
static void held_range(chord_t *c, uint32_t vi, struct cfs_id *lo)
{
	struct cfs_id selves[CHORD_VNODES_MAX];
	bool joined[CHORD_VNODES_MAX];
	uint32_t n = chord_vnode_count(c);

	for (uint32_t i = 0; i < n; i++) {
		selves[i] = chord_vnode_self(c, i)->id;
		joined[i] = chord_vnode_joined(c, i);
	}
	dhash__drain_held(selves, joined, n, vi, lo);
}

/*
 * Who holds what once we are gone. A key K of our range (lo, me] is held
 * now by its first k servers from K: those before us in [K, me), us, and
 * then our successors. Once we leave, the first successor after those
 * becomes a holder, and only that one: with m servers in [K, me), our
 * successor T_j (the j-th server after us at another address) holds K
 * next when m + j < k. Going back from us through our predecessors
 * p_1, p_2, ..., T_j's share therefore ends at the predecessor p at which
 * the servers counted (T_0 .. T_{j-1}, then p_1 .. p) reach k: T_j is
 * handed (p, me], and of that it lacks only the keys of the last band,
 * which the comparison finds (what it holds already is not sent).
 *
 * Predecessors come from chord_vnode_preds, the nodes this process has
 * met. Where they run out before the count reaches k, or reach the start
 * of the held range, the held range is the bound: more copies rather
 * than a block left short. A predecessor at T_j's own address (a ring of
 * k servers or fewer, whose lists wrap) puts T_j before the key as well:
 * it holds the rest of the range, and is handed all of it.
 */
uint32_t dhash__drain_plan(const struct cfs_node *self, const struct cfs_id *held_lo,
                           const struct cfs_node *preds, uint32_t npreds,
                           const struct cfs_node *const *succs, uint32_t nsuccs, uint32_t k,
                           struct dhash__drain_target *ret)
{
	const struct cfs_node *to[CHORD_SUCC_MAX];
	uint32_t nt = 0;
	bool whole = cfs_id_eq(held_lo, &self->id);

	if (k > CHORD_SUCC_MAX)
		k = CHORD_SUCC_MAX; /* more than any successor list holds */
	for (uint32_t i = 0; i < nsuccs && nt < k; i++) {
		bool dup = cfs_addr_same_ip(&succs[i]->addr, &self->addr);
		for (uint32_t j = 0; j < nt && !dup; j++)
			dup = cfs_addr_same_ip(&to[j]->addr, &succs[i]->addr);
		if (!dup)
			to[nt++] = succs[i];
	}
	for (uint32_t j = 0; j < nt; j++) {
		const struct cfs_node *seen[CHORD_SUCC_MAX];
		uint32_t nseen = j;
		ret[j] = (struct dhash__drain_target){ *to[j], *held_lo };
		for (uint32_t i = 0; i < j; i++)
			seen[i] = to[i];
		for (uint32_t i = 0; i < npreds && nseen < k; i++) {
			const struct cfs_node *p = &preds[i];
			bool dup = cfs_addr_same_ip(&p->addr, &self->addr);
			if (!whole && !cfs_id_in_oo(&p->id, held_lo, &self->id))
				break; /* the held range ends first */
			if (cfs_addr_same_ip(&p->addr, &to[j]->addr))
				break; /* it comes before the key too: all of the range */
			for (uint32_t x = 0; x < nseen && !dup; x++)
				dup = cfs_addr_same_ip(&seen[x]->addr, &p->addr);
			if (dup)
				continue;
			seen[nseen++] = p;
			if (nseen == k)
				ret[j].lo = p->id;
		}
	}
	return nt;
}

static void drain_begin(dhash_server_t *s)
{
	uint32_t nv = chord_vnode_count(s->chord);

	s->drain_waiting = false;
	s->draining = true;
	s->drain_failed0 = s->sync.push_failed;
	s->drain_taken = s->drain_dropped = 0;
	s->drain_cut = 0;
	s->sync_n = s->sync_next = 0;
	s->drain_servers = 0;
	for (uint32_t i = 0; i < nv; i++) {
		const struct cfs_node *succs[CHORD_SUCC_MAX];
		struct cfs_node preds[CHORD_SUCC_MAX];
		struct dhash__drain_target to[CHORD_SUCC_MAX];
		struct cfs_id held;
		if (!chord_vnode_joined(s->chord, i))
			continue;
		const struct cfs_node *self = chord_vnode_self(s->chord, i);
		const struct cfs_id *me = &self->id;
		held_range(s->chord, i, &held);
		uint32_t np = chord_vnode_preds(s->chord, i, preds, CHORD_SUCC_MAX);
		uint32_t ns = chord_vnode_succs(s->chord, i, succs);
		uint32_t n = dhash__drain_plan(self, &held, preds, np, succs, ns, s->cfg.replicas, to);
		for (uint32_t j = 0; j < n; j++) {
			if (!cfs_id_eq(&to[j].lo, me)) {
				job_add(s, &(struct sync_job){ to[j].peer, to[j].lo, *me, *me, true });
				continue;
			}
			/* the whole circle, which a SYNC request cannot name: two halves */
			struct cfs_id mid;
			cfs_id_add_pow2(&mid, me, CFS_ID_BITS - 1);
			job_add(s, &(struct sync_job){ to[j].peer, *me, mid, *me, true });
			job_add(s, &(struct sync_job){ to[j].peer, mid, *me, *me, true });
		}
		s->drain_servers += n;
	}
	s->drain_jobs = (uint32_t)s->sync_n;
	log_info("drain: comparing what this server holds with %u server%s before it leaves",
	         s->drain_servers, s->drain_servers == 1 ? "" : "s");
}

/* No session and no job left: start the drain's sessions, or report it. */
void dhash__drain_next(dhash_server_t *s)
{
	if (s->drain_waiting) {
		drain_begin(s);
		if (s->sync_n) {
			dhash__sync_next_session(s);
			return;
		}
	}
	dhash__drain_end(s, 0);
}

/* Report the drain to its caller, once. */
void dhash__drain_end(dhash_server_t *s, int status)
{
	dhash_drain_cb cb = s->drain_cb;
	struct dhash_drain_result r = { .status = status, .pushed = s->drain_taken,
	                                .failed = s->sync.push_failed - s->drain_failed0 + s->drain_dropped,
	                                .servers = s->drain_servers, .comparisons = s->drain_jobs,
	                                .cut_short = s->drain_cut };

	s->drain_waiting = s->draining = false;
	s->drain_cb = NULL;
	if (status == 0 && (r.failed || r.cut_short))
		log_warn("drain: %llu copies pushed, %llu failed, to %u servers; %u of %u comparisons cut "
		         "short (a server stopped answering): blocks may be left short of k",
		         (unsigned long long)r.pushed, (unsigned long long)r.failed, r.servers, r.cut_short,
		         r.comparisons);
	else if (status == 0)
		log_info("drain: %llu copies pushed, %llu failed, to %u servers",
		         (unsigned long long)r.pushed, (unsigned long long)r.failed, r.servers);
	if (cb)
		cb(s->drain_arg, &r);
}

/* The sync timer, stopped for good by the drain, starts it from the loop:
 * the caller of dhash_server_drain is never called back from inside it
 * (a server with nothing to compare would report at once). */
static void on_drain_start(uv_timer_t *t)
{
	dhash__sync_next_session(t->data); /* at once when no round is at work, else when it ends */
}

int dhash_server_drain(dhash_server_t *s, dhash_drain_cb cb, void *arg)
{
	if (s->drain_waiting || s->draining)
		return -EBUSY;
	s->drain_cb = cb;
	s->drain_arg = arg;
	s->drain_waiting = true;
	uv_timer_stop(&s->sync_timer);
	uv_timer_start(&s->sync_timer, on_drain_start, 0, 0);
	return 0;
}
