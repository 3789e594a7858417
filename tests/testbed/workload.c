/*
 * The testbed's workloads. Every operation is one line of ops.csv:
 *   t_ms,op,node,status,latency_ms,lookup_ms,rpcs,timeouts,alive,arg,oracle_ms
 * (t_ms when it ended, on the schedule's clock; alive: live nodes then;
 * arg: the fetch's sequence number, or the download's window; oracle_ms:
 * under the network model, one round trip to the nearest replica).
 *
 *  gets       blocks put before time 0, then gets of random ones from
 *             random live nodes at a fixed rate while the schedule runs
 *             (the success rate over time under churn: Tapestry Fig.
 *             19-22, SPLAY Fig. 10; get latency: DHash++, OpenDHT)
 *  hot        one block, then successive fetches from random nodes, one
 *             at a time (CFS Fig. 11: caching along the lookup path)
 *  file       a file of blocks downloaded whole from one node with w
 *             blocks in flight, for each window w (CFS Fig. 6)
 *  placement  blocks put, then each physical node's share of the key
 *             space and the blocks it stores (CFS Fig. 10 and 12)
 *
 * Blocks are content-hash blocks of random bytes: a get succeeds only with
 * bytes that hash to the key (the client verifies), so success is checked.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/testbed/testbed.h"

static struct {
	struct cfs_id *keys;
	uint32_t nkeys;
	/* puts */
	uint32_t put_next, put_inflight, put_ok, put_failed;
	bool *put_done;           /* by key index: acknowledged */
	uint32_t *holders;        /* frozen ring: key i is stored on slots [i*HELD_MAX, +nheld[i]) */
	uint8_t *nheld;
	uint32_t block_size;
	/* gets at a rate */
	uv_timer_t timer;
	bool running;
	double rate, owed;
	uint32_t inflight;
	uint64_t gets, gets_ok;
	struct cfs_hist lat_us, lookup_us, oracle_us;
	uint64_t rpcs, timeouts;
	uint32_t gateways;
	bool count_msgs;          /* maintenance frozen: every datagram is a get's */
	uint64_t dgrams0, bytes0; /* sent by all nodes when the gets began */
	uint64_t start_us, stop_us;
	uint64_t dgrams1, bytes1; /* ... when they stopped */
	uint64_t repair0, repair1; /* tb_repair_bytes when the gets began and stopped */
	/* the truth, sampled every TRUTH_EVERY ticks: blocks whose copies (or m
	 * distinct fragments) are on live nodes */
	uint32_t *by_key;         /* key indices in key order */
	uint32_t *seen;           /* a sample's fragment indices (or copies) by key */
	uint64_t truth_samples, truth_unreadable, ticks;
	uint32_t reader[TB_READERS_MAX], nreaders; /* slots */
	double node_s;            /* live nodes × seconds while the gets ran */
	double auths0;            /* chord_learn_auths of every node when the gets began */
	double sweeps0;           /* and chord_learn_sweeps */
	uint64_t node_s_at;
	/* a serial chain (hot) or a window (file) */
	uint32_t seq, total, window, chain_inflight, chain_done, chain_failed;
	struct tb_node *from;
	uint64_t chain_rpcs, chain_bytes;
	bool chain_end;
} W;

/* One line of ops.csv, written when the operation ends; its time is when
 * it was issued (the end less its latency), so that gets issued at a
 * steady rate fill every bucket of a plot over time however long some of
 * them take. replicas_alive: of the block's replicas when it was put, how
 * many are alive (frozen rings only, where nothing moves a replica); -1
 * otherwise. */
static void record(const char *op, const struct tb_node *n, int status,
                   const struct dhash_get_result *r, uint64_t arg, uint64_t oracle_us,
                   int replicas_alive)
{
	uint64_t now = tb_now_ms(), took = r ? r->latency_us / 1000 : 0;

	if (!TB.ops)
		return;
	fprintf(TB.ops, "%llu,%s,%u,%d,%.3f,%.3f,%u,%u,%u,%llu,%.3f,%d\n",
	        (unsigned long long)(now > took ? now - took : 0),
	        op, n ? n->slot : 0, status, r ? (double)r->latency_us / 1000 : 0,
	        r ? (double)r->lookup_us / 1000 : 0, r ? r->rpcs : 0, r ? r->timeouts : 0, TB.nalive,
	        (unsigned long long)arg, (double)oracle_us / 1000, replicas_alive);
}

/* Frozen ring: which nodes hold each acknowledged block, read from their
 * stores (a put that timed out at the key's successor lands further on,
 * so the placement is not always the first k successors). At most
 * HELD_MAX holders per block are noted (a 24-fragment code has 24). */
#define HELD_MAX 32u

static int key_idx_cmp(const void *a, const void *b)
{
	return cfs_id_cmp(&W.keys[*(const uint32_t *)a], &W.keys[*(const uint32_t *)b]);
}

static void note_holders(void)
{
	uint32_t *order = xmalloc(W.nkeys * sizeof(order[0]));
	struct cfs_id page[256], last;

	for (uint32_t i = 0; i < W.nkeys; i++)
		order[i] = i;
	qsort(order, W.nkeys, sizeof(order[0]), key_idx_cmp);
	W.holders = xcalloc((size_t)W.nkeys * HELD_MAX, sizeof(W.holders[0]));
	W.nheld = xcalloc(W.nkeys, 1);
	for (uint32_t slot = 0; slot < TB.nslots; slot++) {
		bool more = TB.n[slot].alive;
		const struct cfs_id *after = NULL;
		while (more) {
			uint32_t n = dhash_server_keys(TB.n[slot].dh, after, page, 256, &more);
			for (uint32_t j = 0; j < n; j++) {
				size_t lo = 0, hi = W.nkeys;
				while (lo < hi) {
					size_t mid = (lo + hi) / 2;
					if (cfs_id_cmp(&W.keys[order[mid]], &page[j]) < 0)
						lo = mid + 1;
					else
						hi = mid;
				}
				uint32_t i = lo < W.nkeys ? order[lo] : 0;
				if (lo < W.nkeys && cfs_id_eq(&W.keys[i], &page[j]) && W.nheld[i] < HELD_MAX)
					W.holders[(size_t)i * HELD_MAX + W.nheld[i]++] = slot;
			}
			if (!n)
				break;
			last = page[n - 1]; /* not a pointer into the page the next call fills */
			after = &last;
		}
	}
	free(order);
}

static int replicas_alive(uint32_t i)
{
	int n = 0;

	if (!W.holders)
		return -1;
	for (uint32_t j = 0; j < W.nheld[i]; j++)
		n += TB.n[W.holders[(size_t)i * HELD_MAX + j]].alive;
	return n;
}

/* ------------------------------------------------------------ puts */

static void put_issue(void);

static void put_done(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	W.put_inflight--;
	if (status == 0) {
		W.put_ok++;
		W.put_done[(uintptr_t)arg] = true;
	} else {
		W.put_failed++;
	}
	put_issue();
}

static void put_issue(void)
{
	uint8_t *p = xmalloc(W.block_size);

	while (W.put_next < W.nkeys && W.put_inflight < 32) {
		struct tb_node *n = tb_random_node();
		if (!n)
			break;
		for (uint32_t i = 0; i + 8 <= W.block_size; i += 8) {
			uint64_t x = cfs_rng_next(&TB.rng);
			memcpy(p + i, &x, 8);
		}
		void *arg = (void *)(uintptr_t)W.put_next;
		if (TB.code_m ? dhash_coded_key(p, W.block_size, TB.code_m, TB.code_n, &W.keys[W.put_next]) < 0 ||
		                dhash_put_coded(n->cl, TB.code_m, TB.code_n, p, W.block_size, 0, put_done, arg) < 0
		              : dhash_block_key(DHASH_KIND_CHASH, p, W.block_size, &W.keys[W.put_next]) < 0 ||
		                dhash_put(n->cl, DHASH_KIND_CHASH, p, W.block_size, 0, put_done, arg) < 0) {
			W.put_failed++;
			W.put_next++;
			continue;
		}
		W.put_next++;
		W.put_inflight++;
	}
	free(p);
}

int tb_workload_prepare(const struct tb_workload *w)
{
	uint64_t t = cfs_now_us();

	W.nkeys = w->blocks;
	W.block_size = w->block_size;
	cfs_hist_reset(&W.lat_us);
	cfs_hist_reset(&W.lookup_us);
	cfs_hist_reset(&W.oracle_us);
	if (!W.nkeys)
		return 0;
	W.keys = xcalloc(W.nkeys, sizeof(W.keys[0]));
	W.put_done = xcalloc(W.nkeys, sizeof(W.put_done[0]));
	put_issue();
	while ((W.put_inflight || W.put_next < W.nkeys) && !TB.interrupted) {
		tb_run_ms(100);
		put_issue();
	}
	fprintf(stderr, "cfs-testbed: put %u blocks of %u bytes in %.1f s (%u failed)\n", W.put_ok,
	        W.block_size, (double)(cfs_now_us() - t) / 1e6, W.put_failed);
	/* Gets ask only for blocks whose put was acknowledged; more than a
	 * few failed puts mean the ring is not fit to measure. */
	uint32_t k = 0;
	for (uint32_t i = 0; i < W.nkeys; i++)
		if (W.put_done[i])
			W.keys[k++] = W.keys[i];
	W.nkeys = k;
	free(W.put_done);
	if (TB.frozen)
		note_holders();
	printf("{\"phase\":\"put\",\"blocks\":%u,\"failed\":%u,\"seconds\":%.1f}\n", W.put_ok,
	       W.put_failed, (double)(cfs_now_us() - t) / 1e6);
	if (!W.nkeys || W.put_failed > (W.put_ok + W.put_failed) / 10)
		return -EIO;
	return TB.interrupted ? -EINTR : 0;
}

/* ------------------------------------------------------------ gets at a rate */

/* One get, issued to one or more gateways at once (OpenDHT 3.2.3): the
 * first that succeeds answers it; it fails when all of them have. */
struct rate_get {
	struct tb_node *n;        /* the first gateway: the record's node */
	uint64_t oracle_us;       /* from the nearest gateway */
	int replicas_alive;
	uint32_t pending;
	bool recorded;
};

struct gw_get {
	struct rate_get *g;
	struct tb_node *n;
};

static void get_release(struct rate_get *g)
{
	if (--g->pending == 0) {
		W.inflight--;
		free(g);
	}
}

static void rate_get_done(void *arg, const struct dhash_get_result *r)
{
	struct gw_get gw = *(struct gw_get *)arg;
	struct rate_get *g = gw.g;

	free(arg);
	if (r->status != -ECANCELED) {
		W.rpcs += r->rpcs; /* every gateway's cost counts */
		W.timeouts += r->timeouts;
		/* The first success answers the get; a failure only once no
		 * other gateway is still asked (pending 1: this one; the issuing
		 * hold is gone, callbacks never run inside dhash_get). */
		if (!g->recorded && (r->status == 0 || g->pending == 1)) {
			g->recorded = true;
			if (g->oracle_us)
				cfs_hist_add(&W.oracle_us, g->oracle_us);
			W.gets++;
			if (r->status == 0) {
				W.gets_ok++;
				cfs_hist_add(&W.lat_us, r->latency_us);
				cfs_hist_add(&W.lookup_us, r->lookup_us);
			}
			record("get", g->n, r->status, r, 0, g->oracle_us, g->replicas_alive);
		}
	}
	get_release(g);
}

/* Up to W.gateways distinct live nodes. */
/* A gateway: a random live node, or a random live one of the readers. */
static struct tb_node *pick_one(void)
{
	if (!W.nreaders)
		return tb_random_node();
	for (uint32_t tries = 0; tries < 4 * W.nreaders; tries++) {
		struct tb_node *x = &TB.n[W.reader[cfs_rng_next(&TB.rng) % W.nreaders]];
		if (x->alive)
			return x;
	}
	return NULL;
}

static uint32_t pick_gateways(struct tb_node **gw)
{
	uint32_t n = 0;

	for (uint32_t tries = 0; n < W.gateways && tries < 8 * W.gateways; tries++) {
		struct tb_node *x = pick_one();
		bool dup = false;
		if (!x)
			break;
		for (uint32_t i = 0; i < n; i++)
			dup |= gw[i] == x;
		if (!dup)
			gw[n++] = x;
	}
	return n;
}

/* Live nodes × seconds so far: the denominator of bytes sent per node. */
static void node_s_note(void)
{
	uint64_t now = cfs_now_us();
	W.node_s += (double)TB.nalive * (double)(now - W.node_s_at) / 1e6;
	W.node_s_at = now;
}

/* The index of key in W.keys, or UINT32_MAX. */
static uint32_t key_index(const struct cfs_id *key)
{
	size_t lo = 0, hi = W.nkeys;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cfs_id_cmp(&W.keys[W.by_key[mid]], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < W.nkeys && cfs_id_eq(&W.keys[W.by_key[lo]], key) ? W.by_key[lo] : UINT32_MAX;
}

/* One sample of the truth: read every live node's store and count the
 * blocks that could be read now, whatever lookups and gets make of it: a
 * whole block with a copy on a live node, a coded one with m distinct
 * fragment indices on live nodes. What the failed gets are set against. */
#define TRUTH_EVERY 100u /* ticks of 10 ms */
static void truth_sample(void)
{
	struct dhash_frag_ref refs[256];
	struct cfs_id page[256], last;

	if (!W.by_key) {
		W.by_key = xmalloc(W.nkeys * sizeof(W.by_key[0]));
		for (uint32_t i = 0; i < W.nkeys; i++)
			W.by_key[i] = i;
		qsort(W.by_key, W.nkeys, sizeof(W.by_key[0]), key_idx_cmp);
		W.seen = xmalloc(W.nkeys * sizeof(W.seen[0]));
	}
	memset(W.seen, 0, W.nkeys * sizeof(W.seen[0]));
	for (uint32_t slot = 0; slot < TB.nslots; slot++) {
		bool more = TB.n[slot].alive && !TB.n[slot].leaving;
		const struct cfs_id *after = NULL;
		while (more) {
			uint32_t n = TB.code_m ? dhash_server_frags(TB.n[slot].dh, after, 4096, refs, 256, &last, &more)
			                       : dhash_server_keys(TB.n[slot].dh, after, page, 256, &more);
			for (uint32_t j = 0; j < n; j++) {
				uint32_t i = key_index(TB.code_m ? &refs[j].key : &page[j]);
				if (i != UINT32_MAX)
					W.seen[i] |= TB.code_m ? 1u << (refs[j].index & 31) : 1u;
			}
			if (!TB.code_m && n)
				last = page[n - 1];
			after = &last;
		}
	}
	for (uint32_t i = 0; i < W.nkeys; i++)
		W.truth_unreadable += (uint32_t)__builtin_popcount(W.seen[i]) < (TB.code_m ? TB.code_m : 1);
	W.truth_samples++;
}

static void on_rate_tick(uv_timer_t *t)
{
	if (W.ticks++ % TRUTH_EVERY == 0)
		truth_sample();
	node_s_note();
	W.owed += W.rate / 100;
	while (W.owed >= 1) {
		W.owed -= 1;
		struct tb_node *gw[TB_GATEWAYS_MAX];
		uint32_t ngw = pick_gateways(gw);
		if (!ngw || !W.nkeys)
			return;
		uint32_t ki = (uint32_t)(cfs_rng_next(&TB.rng) % W.nkeys);
		const struct cfs_id *key = &W.keys[ki];
		struct rate_get *g = xcalloc(1, sizeof(*g));
		g->n = gw[0];
		g->replicas_alive = replicas_alive(ki);
		for (uint32_t i = 0; i < ngw; i++) {
			uint64_t o = TB.code_m ? tb_oracle_coded_us(gw[i], key, TB.code_m, TB.code_n)
			                       : tb_oracle_us(gw[i], key, TB.dc.replicas);
			if (i == 0 || o < g->oracle_us)
				g->oracle_us = o;
		}
		W.inflight++;
		g->pending = 1; /* held while the gateways are asked */
		for (uint32_t i = 0; i < ngw; i++) {
			struct gw_get *a = xmalloc(sizeof(*a));
			*a = (struct gw_get){ g, gw[i] };
			if ((TB.code_m ? dhash_get_coded(gw[i]->cl, key, TB.code_m, TB.code_n, rate_get_done, a)
			               : dhash_get(gw[i]->cl, key, rate_get_done, a)) == 0)
				g->pending++;
			else
				free(a);
		}
		if (g->pending == 1 && !g->recorded) {
			record("get", g->n, -EAGAIN, NULL, 0, g->oracle_us, g->replicas_alive);
			g->recorded = true;
		}
		get_release(g); /* drop the hold */
	}
}

/* Datagrams and bytes sent by every node, live or stopped. */
static void sent_totals(uint64_t *dgrams, uint64_t *bytes)
{
	*dgrams = TB.dgrams_gone;
	*bytes = TB.bytes_gone;
	for (uint32_t i = 0; i < TB.nslots; i++) {
		struct cfs_transport_stats st;
		if (!TB.n[i].tr)
			continue;
		cfs_transport_get_stats(TB.n[i].tr, &st);
		*dgrams += st.datagrams_out;
		*bytes += st.bytes_out;
	}
}

/* AUTHs sent by every node, live or stopped, to check the nodes lookup
 * answers named (the learned tables' own traffic). */
static double learn_auths(void)
{
	double a = (double)TB.learn_auths_gone;

	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].chord)
			a += (double)chord_learn_auths(TB.n[i].chord);
	return a;
}

/* Successor lists every node asked, live or stopped, to fill its table. */
static double learn_sweeps(void)
{
	double a = (double)TB.learn_sweeps_gone;

	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].chord)
			a += (double)chord_learn_sweeps(TB.n[i].chord);
	return a;
}

void tb_workload_start(const struct tb_workload *w)
{
	if (strcmp(w->kind, "gets") || w->rate <= 0)
		return;
	W.rate = w->rate;
	W.gateways = w->gateways ? w->gateways : 1;
	W.count_msgs = TB.frozen;
	sent_totals(&W.dgrams0, &W.bytes0);
	W.repair0 = tb_repair_bytes();
	W.start_us = W.node_s_at = cfs_now_us();
	W.auths0 = learn_auths();
	W.sweeps0 = learn_sweeps();
	for (uint32_t i = 0; i < w->readers && i < TB_READERS_MAX; i++) {
		struct tb_node *x = tb_random_node();
		bool dup = false;
		for (uint32_t j = 0; x && j < W.nreaders; j++)
			dup |= W.reader[j] == x->slot;
		if (x && !dup)
			W.reader[W.nreaders++] = x->slot;
	}
	uv_timer_init(TB.loop, &W.timer);
	uv_timer_start(&W.timer, on_rate_tick, 10, 10);
	W.running = true;
}

void tb_workload_stop(void)
{
	if (!W.running)
		return;
	uv_close((uv_handle_t *)&W.timer, NULL);
	W.running = false;
	node_s_note();
	W.stop_us = cfs_now_us();
	sent_totals(&W.dgrams1, &W.bytes1);
	W.repair1 = tb_repair_bytes();
	/* Let the gets in flight end (bounded), so that their messages and
	 * their results are both counted. */
	uint64_t until = cfs_now_us() + 15 * 1000000ull;
	while (W.inflight > 0 && cfs_now_us() < until && !TB.interrupted)
		tb_run_ms(50);
}

void tb_workload_summary(FILE *f)
{
	uint64_t dgrams = 0, bytes = 0;
	char cost[128] = "";

	if (W.count_msgs && W.gets) {
		sent_totals(&dgrams, &bytes);
		snprintf(cost, sizeof(cost), ",\"msgs_per_get\":%.2f,\"bytes_per_get\":%.0f",
		         (double)(dgrams - W.dgrams0) / (double)W.gets,
		         (double)(bytes - W.bytes0) / (double)W.gets);
	}
	/* Everything every node sent while the gets ran (gets, maintenance,
	 * authentication), per live node and second, and of it the block
	 * bytes moved to repair (tb_repair_bytes); the learned tables' mean
	 * size at the end, over the live nodes and over the readers; the AUTHs
	 * sent to fill them, per node and second (counted to the end). */
	char load[448] = "";
	if (W.node_s > 0) {
		double all = 0, rd = 0, guessed = 0;
		uint32_t nall = 0, nrd = 0;
		for (uint32_t i = 0; i < TB.nslots; i++) {
			if (!TB.n[i].chord || !TB.n[i].alive)
				continue;
			all += chord_learned_count(TB.n[i].chord);
			nall++;
		}
		for (uint32_t j = 0; j < W.nreaders; j++)
			if (TB.n[W.reader[j]].alive && TB.n[W.reader[j]].chord) {
				rd += chord_learned_count(TB.n[W.reader[j]].chord);
				guessed += (double)chord_lookups_remembered(TB.n[W.reader[j]].chord);
				nrd++;
			}
		snprintf(load, sizeof(load),
		         ",\"sent_bytes_per_node_s\":%.1f,\"repair_bytes_per_node_s\":%.1f,\"readers\":%u,\"learned_mean\":%.1f,"
		         "\"learned_readers_mean\":%.1f,\"learn_auths_per_node_s\":%.3f,"
		         "\"guessed_readers\":%.0f,\"learn_sweeps_per_node_s\":%.3f",
		         (double)(W.bytes1 - W.bytes0) / W.node_s,
		         (double)(W.repair1 - W.repair0) / W.node_s, W.nreaders, nall ? all / nall : 0,
		         nrd ? rd / nrd : 0, (learn_auths() - W.auths0) / W.node_s, guessed,
		         (learn_sweeps() - W.sweeps0) / W.node_s);
	}
	/* Gets still unanswered 15 s after the end count as failed (and are in
	 * no per-get mean: those are over the answered gets). */
	fprintf(f, "{\"phase\":\"gets\",\"gets\":%llu,\"ok\":%llu,\"failed\":%llu,\"unfinished\":%u,"
	        "\"p50_ms\":%.2f,\"p90_ms\":%.2f,\"p99_ms\":%.2f,\"mean_ms\":%.2f,"
	        "\"lookup_p50_ms\":%.2f,\"rpcs_per_get\":%.3f,\"timeouts_per_get\":%.3f,"
	        "\"oracle_p50_ms\":%.2f,\"oracle_p99_ms\":%.2f,\"oracle_mean_ms\":%.2f,"
	        "\"gateways\":%u,\"truth_unreadable_pct\":%.3f%s%s}\n",
	        (unsigned long long)(W.gets + W.inflight), (unsigned long long)W.gets_ok,
	        (unsigned long long)(W.gets + W.inflight - W.gets_ok), W.inflight,
	        (double)cfs_hist_quantile(&W.lat_us, 0.5) / 1000,
	        (double)cfs_hist_quantile(&W.lat_us, 0.9) / 1000,
	        (double)cfs_hist_quantile(&W.lat_us, 0.99) / 1000,
	        cfs_hist_mean(&W.lat_us) / 1000,
	        (double)cfs_hist_quantile(&W.lookup_us, 0.5) / 1000,
	        W.gets ? (double)W.rpcs / (double)W.gets : 0,
	        W.gets ? (double)W.timeouts / (double)W.gets : 0,
	        (double)cfs_hist_quantile(&W.oracle_us, 0.5) / 1000,
	        (double)cfs_hist_quantile(&W.oracle_us, 0.99) / 1000, cfs_hist_mean(&W.oracle_us) / 1000,
	        W.gateways ? W.gateways : 1,
	        W.truth_samples ? 100.0 * (double)W.truth_unreadable / ((double)W.truth_samples * W.nkeys) : 0,
	        cost, load);
}

/* ------------------------------------------------------------ hot block */

static void hot_next(void);

static void hot_done(void *arg, const struct dhash_get_result *r)
{
	struct tb_node *n = arg;

	W.chain_inflight--;
	if (r->status == -ECANCELED)
		return;
	record("hot", n, r->status, r, W.seq, 0, -1);
	W.chain_rpcs += r->rpcs;
	W.chain_failed += r->status != 0;
	W.seq++;
	hot_next();
}

static void hot_next(void)
{
	if (W.seq >= W.total) {
		W.chain_end = true;
		return;
	}
	struct tb_node *n = tb_random_node();
	if (!n || dhash_get(n->cl, &W.keys[0], hot_done, n) < 0) {
		W.chain_end = true;
		return;
	}
	W.chain_inflight++;
}

/* ------------------------------------------------------------ whole file */

static void file_issue(void);

static void file_done(void *arg, const struct dhash_get_result *r)
{
	W.chain_inflight--;
	if (r->status == -ECANCELED)
		return;
	W.chain_done++;
	W.chain_failed += r->status != 0;
	W.chain_bytes += r->status == 0 ? r->len : 0;
	W.chain_rpcs += r->rpcs;
	file_issue();
}

static void file_issue(void)
{
	while (W.seq < W.total && W.chain_inflight < W.window) {
		if (dhash_get(W.from->cl, &W.keys[W.seq], file_done, NULL) < 0) {
			W.chain_failed++;
			W.chain_done++;
		} else {
			W.chain_inflight++;
		}
		W.seq++;
	}
	if (W.chain_done == W.total)
		W.chain_end = true;
}

static int file_run(const struct tb_workload *w)
{
	printf("{\"phase\":\"file\",\"blocks\":%u,\"block_size\":%u,\"rows\":[", W.nkeys, W.block_size);
	for (uint32_t i = 0; i < w->nwindows && !TB.interrupted; i++) {
		for (uint32_t rep = 0; rep < w->repeat && !TB.interrupted; rep++) {
			memset(&W.seq, 0, sizeof(W) - offsetof(typeof(W), seq));
			W.total = W.nkeys;
			W.window = w->windows[i];
			W.from = tb_random_node();
			uint64_t t = cfs_now_us();
			file_issue();
			while (!W.chain_end && !TB.interrupted)
				tb_run_ms(5);
			double s = (double)(cfs_now_us() - t) / 1e6;
			double kbs = (double)W.chain_bytes / 1000 / s;
			struct dhash_get_result r = { .latency_us = (uint64_t)(s * 1e6), .rpcs = (uint32_t)W.chain_rpcs };
			record("file", W.from, -(int)W.chain_failed, &r, W.window, 0, -1);
			printf("%s{\"window\":%u,\"node\":%u,\"seconds\":%.3f,\"kbytes_per_s\":%.1f,\"failed\":%u}",
			       i + rep ? "," : "", W.window, W.from->slot, s, kbs, W.chain_failed);
			fprintf(stderr, "cfs-testbed: window %2u: %.1f KB/s (%u failed)\n", W.window, kbs,
			        W.chain_failed);
		}
	}
	printf("]}\n");
	return 0;
}

/* ------------------------------------------------------------ placement */

/* Blocks stored by one node: its server's keys, counted page by page. */
static uint64_t stored_blocks(struct tb_node *n)
{
	struct cfs_id keys[512], after;
	uint64_t total = 0;
	bool more = true, first = true;

	while (more) {
		uint32_t k = dhash_server_keys(n->dh, first ? NULL : &after, keys, 512, &more);
		if (!k)
			break;
		total += k;
		after = keys[k - 1];
		first = false;
	}
	return total;
}

static int placement_run(void)
{
	static const struct cfs_id zero;
	double *share = xcalloc(TB.nslots, sizeof(*share));

	/* Each virtual server owns the arc from the live ID before it. */
	tb_true_succ(&zero); /* brings TB.ids up to date */
	for (size_t j = 0; j < TB.nids; j++) {
		struct cfs_id d;
		uint32_t o = TB.ids[j].slot;
		cfs_id_sub(&d, &TB.ids[j].id, &TB.ids[j ? j - 1 : TB.nids - 1].id);
		if (o != UINT32_MAX)
			share[o] += TB.nids == 1 ? 1.0 : cfs_id_to_unit(&d);
	}
	printf("{\"phase\":\"placement\",\"blocks\":%u,\"rows\":[", W.nkeys);
	bool comma = false;
	for (uint32_t i = 0; i < TB.nslots; i++) {
		if (!TB.n[i].alive)
			continue;
		printf("%s{\"node\":%u,\"vnodes\":%u,\"share\":%.6f,\"stored\":%llu}", comma ? "," : "", i,
		       chord_vnode_count(TB.n[i].chord), share[i],
		       (unsigned long long)stored_blocks(&TB.n[i]));
		comma = true;
	}
	printf("]}\n");
	free(share);
	return 0;
}

int tb_workload_run(const struct tb_workload *w)
{
	if (!strcmp(w->kind, "hot")) {
		memset(&W.seq, 0, sizeof(W) - offsetof(typeof(W), seq));
		W.total = w->fetches;
		hot_next();
		while (!W.chain_end && !TB.interrupted)
			tb_run_ms(5);
		printf("{\"phase\":\"hot\",\"fetches\":%u,\"failed\":%u,\"rpcs_mean\":%.3f}\n", W.seq,
		       W.chain_failed, W.seq ? (double)W.chain_rpcs / W.seq : 0);
		return W.chain_failed ? -EIO : 0;
	}
	if (!strcmp(w->kind, "file"))
		return file_run(w);
	if (!strcmp(w->kind, "placement"))
		return placement_run();
	return 0;
}
