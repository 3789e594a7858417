/*
 * cfs-ring — many independent Chord nodes in one process, for rings larger
 * than this machine can run as daemons (the cluster harness's
 * many-nodes-per-process mode; tests/harness/cluster.sh runs daemons).
 *
 * Each node has its own UDP socket on loopback, its own chord_t and its own
 * tables: nodes share nothing but the event loop. The program builds the
 * ring through the real join protocol, waits until every successor pointer
 * is the true successor (from the sorted list of IDs) and every node has
 * filled its fingers, then runs random lookups from random nodes, checks
 * each answer against the truth, and prints RPCs per lookup, timeouts and
 * memory per node. --kill kills a fraction of the nodes at once (no
 * goodbye), optionally with maintenance frozen first so that the lookups run
 * before stabilisation can repair anything (CFS Theorem 1, Fig. 13-15).
 *
 * A virtual server counts as correct when its predecessor and its whole
 * successor list are the true ones. After a kill, a lookup whose key sits
 * behind r or more consecutive killed nodes is counted apart: no live node
 * knows its successor until stabilisation runs, so failing it is the
 * expected outcome, not a routing fault. For uniformly random keys and a
 * fraction f killed, that happens with probability f^r (1 + r (1 - f))
 * (the arc a key falls in grows with the dead run before its successor),
 * more than the f^r of a block losing all r replicas.
 *
 * Exit status: 1 when a lookup of the converged ring failed or answered
 * wrong, or a lookup after the kill answered wrong; failed lookups after
 * the kill are what that experiment measures, not an error. Output: a
 * human summary on stderr, one JSON object per phase on stdout.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "chord/chord.h"

struct node {
	cfs_transport_t *tr;
	chord_t *chord;
	bool alive;
	struct cfs_wan_node wan; /* --netmodel: this node's sends */
};

static struct {
	uv_loop_t *loop;
	struct node *n;
	uint32_t nn, vnodes, stabilize_ms, pns, nsucc;
	uint16_t base_port;
	struct cfs_rng rng;
	/* live vnode IDs, sorted */
	struct cfs_id *ids;
	size_t nids;
	/* every vnode ID before the kill, sorted: tells which keys no live
	 * node's successor list reaches (CFS Theorem 1's failure event) */
	struct cfs_id *all;
	size_t nall;
	/* lookup phase */
	uint32_t mode, flags, total, issued, done, inflight, window;
	uint64_t wrong, failed, unreachable, failed_unreachable;
	uint64_t rpcs, rpcs_sq, timeouts, hops, lat_sum;
	struct cfs_hist lat;
	uint32_t *per_lookup_rpcs;
	bool has_wan;
	struct cfs_wan wan;
} S;

static const char usage[] =
	"usage: cfs-ring --nodes N [--vnodes V] [--base-port P] [--stabilize-ms MS] [--fix-ms MS] [--pns X]\n"
	"                [--successors R]\n"
	"                [--lookups L] [--mode MODE]... [--kill FRAC [--freeze]] [--seed S]\n"
	"                [--converge-timeout S] [--netmodel SPEC]\n"
	"--netmodel: evaluation only, every node's sends pass the wide-area model SPEC\n"
	"(key=value,... of seed=N, median-rtt=MS, loss=FRAC, slow=FRAC, slow-ms=MS, matrix=FILE)\n";

/* Node i's own loopback IP: IDs hash the IP and an index, not the port
 * (PROTOCOL.md "Node IDs"), so nodes sharing one IP would share its 64 indexes. */
static const char *node_ip(uint32_t i, char buf[static 32])
{
	snprintf(buf, 32, "127.79.%u.%u", i / 250, i % 250 + 1);
	return buf;
}

static void die_usage(const char *why)
{
	fprintf(stderr, "cfs-ring: %s\n%s", why, usage);
	exit(2);
}

static int id_cmp(const void *a, const void *b)
{
	return cfs_id_cmp(a, b);
}

static void collect_ids(void)
{
	S.nids = 0;
	for (uint32_t i = 0; i < S.nn; i++)
		if (S.n[i].alive)
			for (uint32_t v = 0; v < S.vnodes; v++)
				S.ids[S.nids++] = chord_vnode_self(S.n[i].chord, v)->id;
	qsort(S.ids, S.nids, sizeof(S.ids[0]), id_cmp);
}

/* First index in the sorted array v[0..n) whose ID is >= id. */
static size_t lower_bound(const struct cfs_id *v, size_t n, const struct cfs_id *id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (cfs_id_cmp(&v[mid], id) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The true successor of key among the live IDs. */
static const struct cfs_id *true_succ(const struct cfs_id *key)
{
	size_t i = lower_bound(S.ids, S.nids, key);
	return &S.ids[i == S.nids ? 0 : i];
}

/*
 * After a kill with maintenance frozen, a key is out of reach when the
 * killed nodes just before its live successor S number at least r: then S
 * is in no live node's successor list, and no live node can say that S
 * succeeds the key (the event CFS Theorem 1 bounds by 0.5^r per key).
 */
static bool unreachable(const struct cfs_id *key)
{
	if (!S.nall || S.nids < 2)
		return false;
	size_t si = lower_bound(S.ids, S.nids, key) % S.nids;
	const struct cfs_id *succ = &S.ids[si], *pred = &S.ids[(si + S.nids - 1) % S.nids];
	size_t a = lower_bound(S.all, S.nall, pred), b = lower_bound(S.all, S.nall, succ);
	size_t dead_between = (b + S.nall - a - 1) % S.nall;
	return dead_between >= S.nsucc;
}

static void true_next(const struct cfs_id *id, struct cfs_id *ret)
{
	struct cfs_id k;
	struct cfs_id one = { 0 };

	one.b[CFS_ID_BYTES - 1] = 1;
	cfs_id_add(&k, id, &one);
	*ret = *true_succ(&k);
}

static void true_prev(const struct cfs_id *id, struct cfs_id *ret)
{
	size_t lo = lower_bound(S.ids, S.nids, id);
	*ret = S.ids[lo == 0 ? S.nids - 1 : lo - 1];
}

/* How many virtual servers have a wrong successor or predecessor, how many
 * a wrong successor list, and how many are not settled (fingers not yet
 * filled). */
static void ring_check(uint32_t *ret_links, uint32_t *ret_lists, uint32_t *ret_unsettled)
{
	uint32_t wrong = 0, unsettled = 0, bad_lists = 0;

	for (uint32_t i = 0; i < S.nn; i++) {
		if (!S.n[i].alive)
			continue;
		for (uint32_t v = 0; v < S.vnodes; v++) {
			struct cfs_id want;
			true_next(&chord_vnode_self(S.n[i].chord, v)->id, &want);
			const struct cfs_node *p = chord_vnode_pred(S.n[i].chord, v);
			struct cfs_id pw;
			true_prev(&chord_vnode_self(S.n[i].chord, v)->id, &pw);
			if (!chord_vnode_joined(S.n[i].chord, v) ||
			    !cfs_id_eq(&chord_vnode_succ(S.n[i].chord, v)->id, &want) ||
			    !p || !cfs_id_eq(&p->id, &pw))
				wrong++;
			if (!chord_vnode_settled(S.n[i].chord, v))
				unsettled++;
			/* The whole successor list must be right: lookups trust it. */
			const struct cfs_node *succ[CHORD_SUCC_MAX];
			uint32_t ns = chord_vnode_succs(S.n[i].chord, v, succ);
			uint32_t want_len = S.nids - 1 < S.nsucc ? (uint32_t)S.nids - 1 : S.nsucc;
			struct cfs_id prev = chord_vnode_self(S.n[i].chord, v)->id, t;
			bool bad = ns != want_len;
			for (uint32_t k = 0; k < ns && !bad; k++) {
				true_next(&prev, &t);
				bad = !cfs_id_eq(&t, &succ[k]->id);
				prev = t;
			}
			bad_lists += bad;
			if (bad && i < 3 && getenv("CFS_RING_DEBUG")) {
				uint32_t k = 0;
				prev = chord_vnode_self(S.n[i].chord, v)->id;
				for (; k < ns; k++) {
					true_next(&prev, &t);
					if (!cfs_id_eq(&t, &succ[k]->id))
						break;
					prev = t;
				}
				fprintf(stderr, "    node %u: list %u of %u, first wrong entry %u\n", i, ns, want_len, k);
			}
		}
	}
	*ret_links = wrong;
	*ret_lists = bad_lists;
	*ret_unsettled = unsettled;
}

/* Live nodes missing from the successor lists of live virtual servers:
 * entries that lie within a list's span but are not in it (a node dropped
 * after a spurious timeout, which frozen maintenance never puts back). */
static uint32_t live_missing(void)
{
	uint32_t missing = 0;

	for (uint32_t i = 0; i < S.nn; i++) {
		if (!S.n[i].alive)
			continue;
		for (uint32_t v = 0; v < S.vnodes; v++) {
			const struct cfs_node *succ[CHORD_SUCC_MAX];
			uint32_t ns = chord_vnode_succs(S.n[i].chord, v, succ);
			struct cfs_id self = chord_vnode_self(S.n[i].chord, v)->id, t = self, span;
			if (ns == 0)
				continue;
			cfs_id_distance(&span, &self, &succ[ns - 1]->id);
			for (;;) {
				struct cfs_id d;
				true_next(&t, &t);
				cfs_id_distance(&d, &self, &t);
				if (cfs_id_eq(&t, &self) || cfs_id_cmp(&d, &span) > 0)
					break;
				bool found = false;
				for (uint32_t k = 0; k < ns && !found; k++)
					found = cfs_id_eq(&succ[k]->id, &t);
				if (!found && getenv("CFS_RING_DEBUG")) {
					char a[9], b[9];
					fprintf(stderr, "    %s lacks live %s\n", cfs_id_short(&self, a),
					        cfs_id_short(&t, b));
				}
				missing += !found;
			}
		}
	}
	return missing;
}

/* ------------------------------------------------------------ running the loop */

static uint32_t last_wrong, last_unsettled;
static bool stop_flag;
static void on_deadline(uv_timer_t *t) { stop_flag = true; }

/* Run the loop until pred() holds (checked every 100 ms) or timeout_s. */
static bool run_until(bool (*pred)(void), double timeout_s)
{
	uv_timer_t t;
	uint64_t end = cfs_now_us() + (uint64_t)(timeout_s * 1e6);

	uv_timer_init(S.loop, &t);
	while (cfs_now_us() < end) {
		if (pred()) {
			uv_close((uv_handle_t *)&t, NULL);
			uv_run(S.loop, UV_RUN_NOWAIT);
			return true;
		}
		stop_flag = false;
		if (getenv("CFS_RING_DEBUG")) {
			uint64_t to = 0, calls = 0, q = 0;
			for (uint32_t i = 0; i < S.nn; i++) {
				struct cfs_transport_stats st;
				if (!S.n[i].alive)
					continue;
				cfs_transport_get_stats(S.n[i].tr, &st);
				to += st.timeouts;
				calls += st.calls;
				q += st.queued;
			}
			fprintf(stderr, "  %.1f s: %u wrong, %u unsettled; %lu calls, %lu timeouts, %lu queued\n",
			        (double)(cfs_now_us() + (uint64_t)(timeout_s * 1e6) - end) / 1e6, last_wrong,
			        last_unsettled, (unsigned long)calls, (unsigned long)to, (unsigned long)q);
		}
		uv_timer_start(&t, on_deadline, 100, 0);
		while (!stop_flag)
			uv_run(S.loop, UV_RUN_ONCE);
	}
	uv_close((uv_handle_t *)&t, NULL);
	uv_run(S.loop, UV_RUN_NOWAIT);
	return pred();
}

static bool ring_ok(void)
{
	uint32_t lists;

	ring_check(&last_wrong, &lists, &last_unsettled);
	last_wrong += lists;
	return last_wrong == 0 && last_unsettled == 0;
}

/* Every member's successor and predecessor are right (lists may lag). */
static bool links_ok(void)
{
	uint32_t lists;

	ring_check(&last_wrong, &lists, &last_unsettled);
	return last_wrong == 0;
}

/* ------------------------------------------------------------ lookups */

struct pending {
	struct cfs_id key;
	uint32_t idx;
};

static void issue(void);

static void lookup_done(void *arg, const struct chord_lookup_result *r)
{
	struct pending *p = arg;

	S.inflight--;
	S.done++;
	bool out_of_reach = unreachable(&p->key);
	S.unreachable += out_of_reach;
	if (r->status < 0 || r->n == 0) {
		if (out_of_reach)
			S.failed_unreachable++;
		else
			S.failed++;
		if (getenv("CFS_LOOKUP_TRACE")) {
			char k[9], a[9];
			fprintf(stderr, "TRACE truth key %s succ %s live:", cfs_id_short(&p->key, k), cfs_id_short(true_succ(&p->key), a));
			for (uint32_t i = 0; i < S.nids; i++)
				fprintf(stderr, " %s", cfs_id_short(&S.ids[i], a));
			fprintf(stderr, "\n");
		}
	} else if (!cfs_id_eq(&r->succ[0].id, true_succ(&p->key))) {
		S.wrong++;
		if (getenv("CFS_RING_DEBUG")) {
			char a[9], b[9], k[9];
			fprintf(stderr, "wrong: key %s answer %s truth %s rpcs %u hops %u%s\n",
			        cfs_id_short(&p->key, k), cfs_id_short(&r->succ[0].id, a),
			        cfs_id_short(true_succ(&p->key), b), r->rpcs, r->hops,
			        out_of_reach ? " (out of reach)" : "");
		}
	}
	S.rpcs += r->rpcs;
	S.rpcs_sq += (uint64_t)r->rpcs * r->rpcs;
	S.timeouts += r->timeouts;
	S.hops += r->hops;
	cfs_hist_add(&S.lat, r->latency_us);
	free(p);
	issue();
}

static void issue(void)
{
	while (S.issued < S.total && S.inflight < S.window) {
		uint32_t i;
		do
			i = (uint32_t)(cfs_rng_next(&S.rng) % S.nn);
		while (!S.n[i].alive);
		struct pending *p = xcalloc(1, sizeof(*p));
		for (int b = 0; b < CFS_ID_BYTES; b += 8) {
			uint64_t x = cfs_rng_next(&S.rng);
			memcpy(p->key.b + b, &x, 8);
		}
		struct chord_lookup_opts o = { .mode = S.mode, .nsucc = 1, .flags = S.flags };
		S.issued++;
		S.inflight++;
		if (chord_lookup(S.n[i].chord, &p->key, &o, lookup_done, p) < 0) {
			S.inflight--;
			S.done++;
			S.failed++;
			free(p);
		}
	}
}

static bool lookups_finished(void)
{
	return S.done >= S.total;
}

static void run_lookups(const char *phase, uint32_t count)
{
	char mname[48];
	uint64_t t0 = cfs_now_us();

	S.total = count;
	S.issued = S.done = 0;
	S.wrong = S.failed = S.unreachable = S.failed_unreachable = 0;
	S.rpcs = S.rpcs_sq = S.timeouts = S.hops = 0;
	cfs_hist_reset(&S.lat);
	issue();
	run_until(lookups_finished, 600);
	double n = S.done ? S.done : 1, mean = (double)S.rpcs / n;
	double sd = sqrt(fmax(0, (double)S.rpcs_sq / n - mean * mean));
	double secs = (double)(cfs_now_us() - t0) / 1e6;
	chord_mode_name(S.mode, mname);
	struct cfs_transport_stats sum = { 0 };
	for (uint32_t i = 0; i < S.nn; i++) {
		struct cfs_transport_stats st;
		if (!S.n[i].alive)
			continue;
		cfs_transport_get_stats(S.n[i].tr, &st);
		sum.calls += st.calls;
		sum.timeouts += st.timeouts;
		sum.late_replies += st.late_replies;
		sum.retransmits += st.retransmits;
		sum.dup_requests += st.dup_requests;
	}
	fprintf(stderr, "cfs-ring: %s: so far on the live nodes: %lu calls, %lu timeouts (%lu answered late), "
	        "%lu requests sent again, %lu copies dropped; %u live nodes missing from lists\n", phase, (unsigned long)sum.calls,
	        (unsigned long)sum.timeouts, (unsigned long)sum.late_replies,
	        (unsigned long)sum.retransmits, (unsigned long)sum.dup_requests, live_missing());
	fprintf(stderr, "cfs-ring: %s: %u lookups (%s) from %zu live vnodes: %lu wrong, %lu failed "
	        "(+%lu of %lu keys behind >= r dead nodes); RPCs/lookup %.2f ± %.2f (½·log2 N = %.2f); timeouts/lookup %.3f; "
	        "latency p50 %lu us p99 %lu us; %.1f s\n",
	        phase, S.done, mname, S.nids, (unsigned long)S.wrong, (unsigned long)S.failed,
	        (unsigned long)S.failed_unreachable, (unsigned long)S.unreachable, mean, sd,
	        0.5 * log2((double)S.nids), (double)S.timeouts / n,
	        (unsigned long)cfs_hist_quantile(&S.lat, 0.5), (unsigned long)cfs_hist_quantile(&S.lat, 0.99),
	        secs);
	printf("{\"phase\":\"%s\",\"mode\":\"%s\",\"nodes\":%u,\"vnodes\":%u,\"live_ids\":%zu,"
	       "\"lookups\":%u,\"wrong\":%lu,\"failed\":%lu,\"unreachable_keys\":%lu,"
	       "\"failed_unreachable\":%lu,\"rpcs_mean\":%.3f,\"rpcs_sd\":%.3f,"
	       "\"half_log2_n\":%.3f,\"timeouts_per_lookup\":%.4f,\"latency_p50_us\":%lu,"
	       "\"latency_p99_us\":%lu,\"seconds\":%.2f}\n",
	       phase, mname, S.nn, S.vnodes, S.nids, S.done, (unsigned long)S.wrong,
	       (unsigned long)S.failed, (unsigned long)S.unreachable,
	       (unsigned long)S.failed_unreachable, mean, sd, 0.5 * log2((double)S.nids), (double)S.timeouts / n,
	       (unsigned long)cfs_hist_quantile(&S.lat, 0.5), (unsigned long)cfs_hist_quantile(&S.lat, 0.99),
	       secs);
	fflush(stdout);
}

/* ------------------------------------------------------------ main */

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct node *n = arg;

	if (!n->alive || !chord_handle_request(n->chord, req, from))
		(void)cfs_transport_reply_error(n->tr, from, -EOPNOTSUPP);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "nodes", required_argument, NULL, 'n' },
		{ "vnodes", required_argument, NULL, 'v' },
		{ "base-port", required_argument, NULL, 'p' },
		{ "stabilize-ms", required_argument, NULL, 's' },
		{ "fix-ms", required_argument, NULL, 'F' },
		{ "pns", required_argument, NULL, 'x' },
		{ "lookups", required_argument, NULL, 'l' },
		{ "mode", required_argument, NULL, 'm' },
		{ "kill", required_argument, NULL, 'k' },
		{ "freeze", no_argument, NULL, 'f' },
		{ "seed", required_argument, NULL, 'S' },
		{ "converge-timeout", required_argument, NULL, 't' },
		{ "netmodel", required_argument, NULL, 1000 },
		{ "successors", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint32_t lookups = 10000, modes[8], nmodes = 0;
	double kill = 0, converge_s = 300;
	uint32_t fix_ms = 0;
	bool freeze = false;
	uint64_t seed = 1;
	int c;

	S.nn = 0;
	S.vnodes = 1;
	S.base_port = 21000;
	S.stabilize_ms = 1000;
	S.pns = 16;
	S.nsucc = 16;
	S.window = 64;
	cfs_log_init("cfs-ring", getenv("CFS_RING_DEBUG") ? CFS_LOG_DEBUG : CFS_LOG_WARN);
	while ((c = getopt_long(argc, argv, "n:v:p:s:F:x:l:m:k:fS:t:r:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n': S.nn = (uint32_t)atoi(optarg); break;
		case 'v': S.vnodes = (uint32_t)atoi(optarg); break;
		case 'p': S.base_port = (uint16_t)atoi(optarg); break;
		case 's': S.stabilize_ms = (uint32_t)atoi(optarg); break;
		case 'F': fix_ms = (uint32_t)atoi(optarg); break;
		case 'x': S.pns = (uint32_t)atoi(optarg); break;
		case 'r':
			S.nsucc = (uint32_t)atoi(optarg);
			if (S.nsucc < 1 || S.nsucc > CHORD_SUCC_MAX)
				die_usage("--successors wants 1..32");
			break;
		case 'l': lookups = (uint32_t)atoi(optarg); break;
		case 'm':
			if (nmodes >= 8 || chord_mode_parse(optarg, &modes[nmodes]) < 0)
				die_usage("--mode wants iterative|recursive[,greedy|cost|nonlinear]");
			nmodes++;
			break;
		case 'k': kill = atof(optarg); break;
		case 'f': freeze = true; break;
		case 'S': seed = strtoull(optarg, NULL, 10); break;
		case 't': converge_s = atof(optarg); break;
		case 1000: {
			char err[512], why[600];
			if (S.has_wan)
				die_usage("--netmodel is given twice");
			if (cfs_wan_parse(optarg, &S.wan, err, sizeof(err)) < 0) {
				snprintf(why, sizeof(why), "--netmodel: %s", err);
				die_usage(why);
			}
			S.has_wan = true;
			break;
		}
		case 'h': fputs(usage, stdout); return 0;
		default: die_usage("bad option");
		}
	}
	if (S.nn < 1 || S.nn > 20000 || S.vnodes < 1 || S.vnodes > CHORD_VNODES_MAX ||
	    kill < 0 || kill >= 1 || (uint32_t)S.base_port + S.nn > 65535)
		die_usage("--nodes 1..20000, --vnodes 1..64, --kill in [0, 1), ports must fit");
	if (!nmodes)
		modes[nmodes++] = CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY);
	if (cfs_crypto_init() < 0)
		return 1;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)S.nn + 64) {
		rl.rlim_cur = rl.rlim_max;
		if (rl.rlim_cur < (rlim_t)S.nn + 64)
			rl.rlim_cur = rl.rlim_max = (rlim_t)S.nn + 1024;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			perror("cfs-ring: raising the open-file limit");
	}
	cfs_rng_seed(&S.rng, seed);
	S.loop = uv_default_loop();
	S.n = xcalloc(S.nn, sizeof(*S.n));
	S.ids = xcalloc((size_t)S.nn * S.vnodes, sizeof(*S.ids));

	uint64_t rss0 = cfs_rss_kib(), t0 = cfs_now_us();
	struct chord_config cc;
	chord_config_default(&cc);
	cc.vnodes = S.vnodes;
	cc.stabilize_ms = S.stabilize_ms;
	if (fix_ms)
		cc.fix_fingers_ms = fix_ms;
	cc.pns = S.pns;
	cc.nsucc = S.nsucc;
	/* Chord's routing as the papers measure it (CFS Fig. 9): the learned
	 * table fills from the lookups' own traffic only, not by sweeps. */
	cc.sweep_ms = 0;
	if (S.has_wan) {
		char desc[512];
		cfs_wan_describe(&S.wan, desc, sizeof(desc));
		fprintf(stderr, "cfs-ring: network model: %s\n", desc);
	}
	for (uint32_t i = 0; i < S.nn; i++) {
		struct cfs_transport_config tc;
		struct cfs_addr self;
		char ip[32];
		cfs_transport_config_default(&tc);
		tc.host = node_ip(i, ip);
		tc.port = (uint16_t)(S.base_port + i);
		if (cfs_transport_new(S.loop, &tc, on_request, &S.n[i], &S.n[i].tr) < 0) {
			fprintf(stderr, "cfs-ring: cannot bind %s:%u\n", ip, tc.port);
			return 1;
		}
		if (cfs_addr_from_ip(&self, ip, tc.port) < 0)
			return 1;
		if (S.has_wan) {
			/* Each node sends as itself: its own place, its own slowness. */
			cfs_wan_node_init(&S.n[i].wan, &S.wan, &self, seed);
			struct cfs_netmodel m = cfs_wan_ops(&S.n[i].wan);
			cfs_transport_set_model(S.n[i].tr, &m);
		}
		cc.seed = seed * 1000003u + i;
		if (chord_new(S.loop, S.n[i].tr, &self, &cc, &S.n[i].chord) < 0)
			return 1;
	}
	/*
	 * Node 0 starts the ring; the others join through a random member, in
	 * generations that at most double the ring, each waiting until every
	 * member's successor and predecessor are right. Thousands of nodes
	 * joining a ring of a few at once would all find the same few
	 * successors, and stabilisation untangles such a pile one node per
	 * round (1,024 nodes took 140 s that way, 4,096 did not finish).
	 */
	S.n[0].alive = true;
	collect_ids();
	chord_start(S.n[0].chord, NULL, 0);
	bool ok = true;
	for (uint32_t in = 1; in < S.nn && ok;) {
		uint32_t end = in * 2 < S.nn ? in * 2 : S.nn;
		for (uint32_t i = in; i < end; i++) {
			struct cfs_addr b;
			char ip[32];
			uint32_t j = (uint32_t)(cfs_rng_next(&S.rng) % in);
			if (cfs_addr_from_ip(&b, node_ip(j, ip), (uint16_t)(S.base_port + j)) < 0)
				return 1;
			chord_start(S.n[i].chord, &b, 1);
			S.n[i].alive = true;
		}
		in = end;
		collect_ids();
		ok = run_until(links_ok, converge_s);
		if (getenv("CFS_RING_DEBUG"))
			fprintf(stderr, "cfs-ring: %u members linked after %.1f s\n", in,
			        (double)(cfs_now_us() - t0) / 1e6);
	}
	ok = ok && run_until(ring_ok, converge_s);
	/* Fingers filled while the ring was a fraction of its size point at
	 * valid but distant nodes: one more full pass, as after a long run. */
	for (uint32_t i = 0; i < S.nn && ok; i++)
		chord_refresh_fingers(S.n[i].chord);
	ok = ok && run_until(ring_ok, converge_s);
	double conv_s = (double)(cfs_now_us() - t0) / 1e6;
	uint64_t rss1 = cfs_rss_kib();
	fprintf(stderr, "cfs-ring: %u nodes × %u vnodes: ring %s after %.1f s (%u virtual servers with a wrong predecessor or successor list, "
	        "%u unsettled); memory %.1f KiB per node beyond the base\n", S.nn, S.vnodes,
	        ok ? "correct" : "NOT correct", conv_s, last_wrong, last_unsettled,
	        (double)(rss1 - rss0) / S.nn);
	printf("{\"phase\":\"build\",\"nodes\":%u,\"vnodes\":%u,\"converged\":%s,\"seconds\":%.2f,"
	       "\"wrong_successors\":%u,\"kib_per_node\":%.1f}\n", S.nn, S.vnodes,
	       ok ? "true" : "false", conv_s, last_wrong, (double)(rss1 - rss0) / S.nn);
	fflush(stdout);
	if (!ok)
		return 1;

	for (uint32_t m = 0; m < nmodes; m++) {
		S.mode = modes[m];
		run_lookups("stable", lookups);
	}
	int rc = S.wrong || S.failed ? 1 : 0;
	if (kill > 0) {
		if (freeze)
			for (uint32_t i = 0; i < S.nn; i++)
				chord_freeze(S.n[i].chord, true);
		S.all = xmalloc(S.nids * sizeof(S.all[0]));
		memcpy(S.all, S.ids, S.nids * sizeof(S.all[0]));
		S.nall = S.nids;
		uint32_t want = (uint32_t)(kill * S.nn), killed = 0;
		while (killed < want) {
			uint32_t i = (uint32_t)(cfs_rng_next(&S.rng) % S.nn);
			if (!S.n[i].alive || i == 0)
				continue;
			chord_free(S.n[i].chord);
			cfs_transport_close(S.n[i].tr);
			S.n[i].alive = false;
			killed++;
		}
		collect_ids();
		fprintf(stderr, "cfs-ring: killed %u of %u nodes at once%s\n", killed, S.nn,
		        freeze ? ", maintenance frozen on the survivors" : "");
		S.flags = CFS_LOOKUP_F_VERIFY;
		for (uint32_t m = 0; m < nmodes; m++) {
			S.mode = modes[m];
			run_lookups("after-kill", lookups);
			if (S.wrong)
				rc = 1;
		}
	}
	for (uint32_t i = 0; i < S.nn; i++)
		if (S.n[i].alive) {
			chord_free(S.n[i].chord);
			cfs_transport_close(S.n[i].tr);
		}
	uv_run(S.loop, UV_RUN_DEFAULT);
	free(S.all);
	cfs_wan_free(&S.wan);
	return rc;
}
