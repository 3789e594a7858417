/*
 * cfs-testbed — the evaluation testbed (DESIGN §10, SPLAY's role): a ring
 * of N whole DHash nodes on this machine, many per process, optionally
 * under the wide-area network model, driven through a churn schedule while
 * a workload runs; every operation and every churn event is recorded.
 *
 *   1. The schedule is resolved (--nodes N adds "at 0 join N" to the
 *      script), the same seed always giving the same one.
 *   2. The nodes that join at time 0 are started in generations that at
 *      most double the ring, each generation waited on until every
 *      successor, predecessor and finger table is right.
 *   3. The workload's blocks are put.
 *   4. The clock starts: the schedule's events are applied as their times
 *      come, gets run at the workload's rate; or, for the hot-block, file
 *      and placement workloads, the experiment runs.
 *   5. Everything stops — on the schedule's end, --duration, or SIGINT /
 *      SIGTERM — and the data directories are removed.
 *
 * Output: a human account on stderr; JSON objects (one per phase) on
 * stdout; with --out DIR, DIR/ops.csv (one line per operation, see
 * workload.c) and DIR/events.csv (t_ms,event,node,alive).
 */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "blockstore/blockstore.h"
#include "tests/testbed/testbed.h"

static const char usage[] =
	"usage: cfs-testbed [--nodes N] [--churn SCRIPT] [--speedup X] [--seed S] [--duration SEC]\n"
	"                   [--netmodel SPEC] [--vnodes V | --vnodes-list V1,V2,...] [--replicas K]\n"
	"                   [--successors R] [--pns X] [--learned L] [--guess G] [--sweep-ms MS]\n"
	"                   [--warm]\n"
	"                   [--mode MODE] [--ring-order] [--code M/N] [--frag-repair-ms MS]\n"
	"                   [--hedge-ms MS|auto]\n"
	"                   [--caching] [--stabilize-ms MS] [--fix-ms MS] [--freeze]\n"
	"                   [--workload gets|hot|file|placement|none] [--blocks B] [--block-size BYTES]\n"
	"                   [--rate GETS_PER_S] [--gateways G] [--readers R] [--fetches F]\n"
	"                   [--windows W1,W2,...] [--repeat R]\n"
	"                   [--out DIR] [--dir DATADIR] [--index-in-memory] [--base-port P]\n"
	"                   [--converge-timeout SEC]\n"
	"                   [--print-schedule]\n"
	"Starts a ring of DHash nodes in this process, replays the churn schedule,\n"
	"runs the workload and records every operation. See docs/TESTBED.md.\n";

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "cfs-testbed: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n%s", usage);
	exit(2);
}

static double num(const char *s, const char *opt, double lo, double hi)
{
	char *end;
	double v = strtod(s, &end);

	if (!*s || *end || v < lo || v > hi) {
		char m[128];
		snprintf(m, sizeof(m), "%s wants a number in [%g, %g], not '%%s'", opt, lo, hi);
		die_usage(m, s);
	}
	return v;
}

static uint32_t num_list(const char *s, const char *opt, uint32_t *ret, uint32_t max)
{
	uint32_t n = 0;
	char buf[256], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == max)
			die_usage("too many values in '%s'", s);
		ret[n++] = (uint32_t)num(t, opt, 1, 4096);
	}
	if (!n)
		die_usage("an empty list: '%s'", s);
	return n;
}

static char *read_file(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "r");
	size_t cap = 4096, len = 0;
	char *p;

	if (!f) {
		fprintf(stderr, "cfs-testbed: cannot read %s: %s\n", path, strerror(errno));
		exit(2);
	}
	p = xmalloc(cap);
	for (size_t k; (k = fread(p + len, 1, cap - len, f)) > 0;) {
		len += k;
		if (len == cap)
			p = realloc(p, cap *= 2);
		if (!p)
			abort();
	}
	fclose(f);
	*ret_len = len;
	return p;
}

static void on_signal(uv_signal_t *h, int sig)
{
	if (TB.interrupted)
		_exit(130); /* a second signal: the data directories stay */
	fprintf(stderr, "cfs-testbed: %s: stopping every node\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
	TB.interrupted = true;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	return remove(path) < 0 ? -1 : 0;
}

/* ------------------------------------------------------------ the schedule */

static struct churn_schedule sched;
static size_t next_ev;

static void event_apply(const struct churn_event *e)
{
	static const char *names[] = { "join", "leave", "fail", "back" };

	if (e->kind == CHURN_JOIN || e->kind == CHURN_BACK)
		(void)tb_node_start(e->node);
	else
		tb_node_stop(e->node, e->kind == CHURN_LEAVE);
	if (TB.events)
		fprintf(TB.events, "%llu,%s,%u,%u\n", (unsigned long long)tb_now_ms(), names[e->kind],
		        e->node, TB.nalive);
}

/* Start the nodes that join at time 0, in generations that at most
 * double the ring; true when the ring came out right. */
static bool build(double timeout_s)
{
	uint64_t t = cfs_now_us();
	bool ok = true;
	uint32_t asked = 0;

	for (size_t i = 0; i < sched.n && sched.ev[i].t_ms == 0; i++)
		asked += sched.ev[i].kind == CHURN_JOIN;
	while (next_ev < sched.n && sched.ev[next_ev].t_ms == 0 && !TB.interrupted) {
		uint32_t gen = TB.nalive ? TB.nalive : 1;
		for (; gen && next_ev < sched.n && sched.ev[next_ev].t_ms == 0; gen--)
			event_apply(&sched.ev[next_ev++]);
		ok = tb_wait_ring(false, timeout_s);
		fprintf(stderr, "cfs-testbed: %u nodes linked %s after %.1f s\n", TB.nalive,
		        ok ? "correctly" : "NOT correctly", (double)(cfs_now_us() - t) / 1e6);
		if (!ok)
			break;
	}
	/* Fingers filled while the ring was a fraction of its size point at
	 * valid but distant nodes: one more full pass (as cfs-ring does). */
	for (uint32_t i = 0; i < TB.nslots && ok; i++)
		if (TB.n[i].alive)
			chord_refresh_fingers(TB.n[i].chord);
	ok = ok && tb_wait_ring(true, timeout_s);
	fprintf(stderr, "cfs-testbed: %u nodes %s after %.1f s\n", TB.nalive,
	        ok ? "correct" : "NOT correct", (double)(cfs_now_us() - t) / 1e6);
	if (TB.nalive < asked) {
		fprintf(stderr, "cfs-testbed: only %u of the %u nodes asked for started (see above)\n",
		        TB.nalive, asked);
		ok = false;
	}
	printf("{\"phase\":\"build\",\"nodes\":%u,\"asked\":%u,\"seconds\":%.1f,\"converged\":%s,"
	       "\"wrong\":%u,\"kib_per_node\":%.1f}\n",
	       TB.nalive, asked, (double)(cfs_now_us() - t) / 1e6, ok ? "true" : "false", tb_ring_wrong(true),
	       TB.nalive ? (double)cfs_rss_kib() / TB.nalive : 0);
	fflush(stdout);
	return ok;
}

static bool clock_done;
static uint64_t end_ms;

static void on_clock(uv_timer_t *t)
{
	uint64_t now = tb_now_ms();

	while (next_ev < sched.n && sched.ev[next_ev].t_ms <= now)
		event_apply(&sched.ev[next_ev++]);
	if (now >= end_ms || TB.interrupted)
		clock_done = true;
}

/* ------------------------------------------------------------ main */

enum { O_NODES = 1000, O_CHURN, O_SEED, O_DURATION, O_NETMODEL, O_VNODES, O_VNODES_LIST,
       O_REPLICAS, O_SUCC, O_PNS, O_MODE, O_RING_ORDER, O_HEDGE, O_CACHING, O_STAB, O_FIX,
       O_WORKLOAD, O_BLOCKS, O_BSIZE, O_RATE, O_FETCHES, O_WINDOWS, O_REPEAT, O_OUT, O_DIR,
       O_PORT, O_CONVERGE, O_PRINT, O_SPEEDUP, O_FREEZE, O_GATEWAYS, O_LEARNED,
       O_READERS, O_GUESS, O_SWEEP, O_CODE, O_WARM, O_FRAG_REPAIR, O_MEM_INDEX };

static const struct option opts[] = {
	{ "nodes", 1, NULL, O_NODES }, { "churn", 1, NULL, O_CHURN }, { "seed", 1, NULL, O_SEED },
	{ "duration", 1, NULL, O_DURATION }, { "netmodel", 1, NULL, O_NETMODEL },
	{ "vnodes", 1, NULL, O_VNODES }, { "vnodes-list", 1, NULL, O_VNODES_LIST },
	{ "replicas", 1, NULL, O_REPLICAS }, { "successors", 1, NULL, O_SUCC },
	{ "pns", 1, NULL, O_PNS }, { "mode", 1, NULL, O_MODE }, { "ring-order", 0, NULL, O_RING_ORDER },
	{ "hedge-ms", 1, NULL, O_HEDGE }, { "caching", 0, NULL, O_CACHING },
	{ "stabilize-ms", 1, NULL, O_STAB }, { "fix-ms", 1, NULL, O_FIX },
	{ "workload", 1, NULL, O_WORKLOAD }, { "blocks", 1, NULL, O_BLOCKS },
	{ "block-size", 1, NULL, O_BSIZE }, { "rate", 1, NULL, O_RATE },
	{ "fetches", 1, NULL, O_FETCHES }, { "windows", 1, NULL, O_WINDOWS },
	{ "repeat", 1, NULL, O_REPEAT }, { "out", 1, NULL, O_OUT }, { "dir", 1, NULL, O_DIR },
	{ "base-port", 1, NULL, O_PORT }, { "converge-timeout", 1, NULL, O_CONVERGE },
	{ "freeze", 0, NULL, O_FREEZE }, { "gateways", 1, NULL, O_GATEWAYS },
	{ "learned", 1, NULL, O_LEARNED }, { "warm", 0, NULL, O_WARM }, { "readers", 1, NULL, O_READERS }, { "guess", 1, NULL, O_GUESS },
	{ "sweep-ms", 1, NULL, O_SWEEP }, { "code", 1, NULL, O_CODE },
	{ "frag-repair-ms", 1, NULL, O_FRAG_REPAIR }, { "index-in-memory", 0, NULL, O_MEM_INDEX },
	{ "print-schedule", 0, NULL, O_PRINT }, { "speedup", 1, NULL, O_SPEEDUP }, { "help", 0, NULL, 'h' }, { NULL, 0, NULL, 0 },
};

struct settings {
	uint32_t nodes;
	const char *churn, *out, *netmodel;
	double duration, converge, speedup;
	bool warm, mem_index;
	bool print;
	struct tb_workload w;
};

static void parse_args(int argc, char **argv, struct settings *st)
{
	int c;
	bool hedge_given = false;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case O_NODES: st->nodes = (uint32_t)num(optarg, "--nodes", 0, 100000); break;
		case O_CHURN: st->churn = optarg; break;
		case O_SEED: TB.seed = (uint64_t)num(optarg, "--seed", 0, 1e15); break;
		case O_SPEEDUP: st->speedup = num(optarg, "--speedup", 0.001, 1000); break;
		case O_DURATION: st->duration = num(optarg, "--duration", 0, 1e6); break;
		case O_NETMODEL: st->netmodel = optarg; break;
		case O_VNODES: TB.cc.vnodes = (uint32_t)num(optarg, "--vnodes", 1, CHORD_VNODES_MAX); break;
		case O_VNODES_LIST:
			TB.nvnodes_list = num_list(optarg, "--vnodes-list", TB.vnodes_list, 16);
			break;
		case O_REPLICAS: TB.dc.replicas = (uint32_t)num(optarg, "--replicas", 1, 16); break;
		case O_SUCC: TB.cc.nsucc = (uint32_t)num(optarg, "--successors", 1, CHORD_SUCC_MAX); break;
		case O_PNS: TB.cc.pns = (uint32_t)num(optarg, "--pns", 1, 64); break;
		case O_SWEEP:
			TB.cc.sweep_ms = (uint32_t)num(optarg, "--sweep-ms", 0, 3600000);
			break;
		case O_CODE: {
			unsigned m, n;
			char extra;
			if (sscanf(optarg, "%u/%u%c", &m, &n, &extra) != 2 || !dhash_code_valid(m, n))
				die_usage("--code wants M/N with 1 <= M < N <= 32, M <= 16, not '%s'", optarg);
			TB.code_m = m;
			TB.code_n = n;
			break;
		}
		case O_FRAG_REPAIR:
			TB.frag_repair_ms = (uint32_t)num(optarg, "--frag-repair-ms", 0, 86400000);
			break;
		case O_GUESS:
			TB.cc.guess_spacings = (uint32_t)num(optarg, "--guess", 0, CHORD_GUESS_MAX);
			break;
		case O_WARM: st->warm = true; break;
		case O_MEM_INDEX: st->mem_index = true; break;
		case O_LEARNED:
			TB.cc.learned_max = (uint32_t)num(optarg, "--learned", 0, CHORD_LEARNED_MAX);
			break;
		case O_MODE:
			if (!strcmp(optarg, "cfsd")) { /* what a daemon runs by default */
				struct dhash_config d;
				dhash_config_default(&d);
				TB.dc.lookup_mode = d.lookup_mode;
				if (!hedge_given)
					TB.dc.hedge_ms = d.hedge_ms;
			} else if (chord_mode_parse(optarg, &TB.dc.lookup_mode) < 0) {
				die_usage("unknown lookup mode '%s'", optarg);
			}
			break;
		case O_RING_ORDER: TB.dc.ring_order = true; break;
		case O_HEDGE:
			TB.dc.hedge_ms = !strcmp(optarg, "auto") ? DHASH_HEDGE_AUTO
			                                         : (uint32_t)num(optarg, "--hedge-ms", 0, 60000);
			hedge_given = true;
			break;
		case O_CACHING: TB.caching = true; break;
		case O_FREEZE: TB.frozen = true; break;
		case O_GATEWAYS: st->w.gateways = (uint32_t)num(optarg, "--gateways", 1, TB_GATEWAYS_MAX); break;
		case O_READERS: st->w.readers = (uint32_t)num(optarg, "--readers", 0, TB_READERS_MAX); break;
		case O_STAB: TB.cc.stabilize_ms = (uint32_t)num(optarg, "--stabilize-ms", 10, 600000); break;
		case O_FIX: TB.cc.fix_fingers_ms = (uint32_t)num(optarg, "--fix-ms", 10, 600000); break;
		case O_WORKLOAD:
			if (strcmp(optarg, "gets") && strcmp(optarg, "hot") && strcmp(optarg, "file") &&
			    strcmp(optarg, "placement") && strcmp(optarg, "none"))
				die_usage("unknown workload '%s'", optarg);
			st->w.kind = optarg;
			break;
		case O_BLOCKS: st->w.blocks = (uint32_t)num(optarg, "--blocks", 0, 10000000); break;
		case O_BSIZE: st->w.block_size = (uint32_t)num(optarg, "--block-size", 8, 60000); break;
		case O_RATE: st->w.rate = num(optarg, "--rate", 0, 100000); break;
		case O_FETCHES: st->w.fetches = (uint32_t)num(optarg, "--fetches", 1, 1000000); break;
		case O_WINDOWS: st->w.nwindows = num_list(optarg, "--windows", st->w.windows, 16); break;
		case O_REPEAT: st->w.repeat = (uint32_t)num(optarg, "--repeat", 1, 1000); break;
		case O_OUT: st->out = optarg; break;
		case O_DIR: TB.dir = optarg; break;
		case O_PORT: TB.base_port = (uint16_t)num(optarg, "--base-port", 1024, 65535); break;
		case O_CONVERGE: st->converge = num(optarg, "--converge-timeout", 1, 1e5); break;
		case O_PRINT: st->print = true; break;
		case 'h': fputs(usage, stdout); exit(0);
		default: die_usage("bad arguments%s", "");
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);
	if (TB.dc.replicas > TB.cc.nsucc)
		die_usage("--replicas exceeds --successors%s", "");
	if (!st->nodes && !st->churn)
		die_usage("give --nodes N, --churn SCRIPT or both%s", "");
	if (TB.frozen) {
		TB.dc.sync_ms = 0; /* no replica maintenance either (the ring is static) */
		TB.frag_repair_ms = 0;
	}
}

static void load_schedule(const struct settings *st)
{
	char err[256], head[64];
	size_t flen = 0, hlen;
	char *file = st->churn ? read_file(st->churn, &flen) : NULL;

	hlen = st->nodes ? (size_t)snprintf(head, sizeof(head), "at 0 join %u\n", st->nodes) : 0;
	if (st->speedup > 0)
		hlen += (size_t)snprintf(head + hlen, sizeof(head) - hlen, "speedup %g\n", st->speedup);
	char *text = xmalloc(hlen + flen + 1);
	memcpy(text, head, hlen);
	if (flen)
		memcpy(text + hlen, file, flen);
	if (churn_parse(text, hlen + flen, TB.seed, &sched, err, sizeof(err)) < 0) {
		/* Line numbers count the --nodes line too when there is one. */
		fprintf(stderr, "cfs-testbed: %s: %s%s\n", st->churn ? st->churn : "--nodes", err,
		        hlen ? " (counting --nodes and --speedup as the first lines)" : "");
		exit(2);
	}
	free(text);
	free(file);
	TB.seed = sched.seed;
	/* A frozen ring cannot take joins or graceful leaves, but crashes need
	 * no maintenance: CFS Figs. 13-15 fail servers and fetch before Chord
	 * repairs anything. */
	for (size_t i = 0; TB.frozen && i < sched.n; i++)
		if (sched.ev[i].kind != CHURN_FAIL && !(sched.ev[i].kind == CHURN_JOIN && sched.ev[i].t_ms == 0)) {
			char at[32];
			snprintf(at, sizeof(at), "%llu", (unsigned long long)sched.ev[i].t_ms);
			die_usage("--freeze stops ring maintenance: a churn script may then only fail nodes "
			          "after time 0 (the event at %s ms is not a fail)", at);
		}
}

static void open_outputs(const char *out)
{
	char p[600];

	if (!out)
		return;
	if (cfs_mkdir_p(out, 0755) < 0) {
		fprintf(stderr, "cfs-testbed: cannot create %s\n", out);
		exit(1);
	}
	snprintf(p, sizeof(p), "%s/ops.csv", out);
	TB.ops = fopen(p, "w");
	snprintf(p, sizeof(p), "%s/events.csv", out);
	TB.events = fopen(p, "w");
	if (!TB.ops || !TB.events) {
		fprintf(stderr, "cfs-testbed: cannot write in %s\n", out);
		exit(1);
	}
	fprintf(TB.ops, "t_ms,op,node,status,latency_ms,lookup_ms,rpcs,timeouts,alive,arg,oracle_ms,replicas_alive\n");
	fprintf(TB.events, "t_ms,event,node,alive\n");
}

/* Every node holds a socket and four LevelDB files open (LOCK, LOG,
 * MANIFEST, the write-ahead log), and once it holds blocks the pack it
 * appends to and one it reads: seven descriptors, thirteen with --caching;
 * with --index-in-memory three and five. Thousands of nodes need more
 * than the usual limit. Root may raise the hard limit too. */
static void raise_fd_limit(uint32_t nodes, bool mem_index)
{
	struct rlimit rl;
	rlim_t per = mem_index ? 3 : 7;
	rlim_t want = (rlim_t)nodes * (TB.caching ? 2 * per - 1 : per) + 64; /* one socket */

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
		return;
	if (rl.rlim_max < want) {
		struct rlimit up = { want, want };
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			return;
	}
	rl.rlim_cur = rl.rlim_max;
	(void)setrlimit(RLIMIT_NOFILE, &rl);
	if (rl.rlim_cur < want)
		fprintf(stderr, "cfs-testbed: warning: %llu file descriptors allowed, %u nodes may need %llu%s\n",
		        (unsigned long long)rl.rlim_cur, nodes, (unsigned long long)want,
		        mem_index ? "" : " (--index-in-memory needs fewer)");
}

static int by_id(const void *a, const void *b)
{
	return cfs_id_cmp(&((const struct cfs_node *)a)->id, &((const struct cfs_node *)b)->id);
}

/* --warm: every member's learned table starts with every other member
 * (each vnode), as if the ring had run for hours and each member had
 * checked all the others; what churn changes after time 0 is learned the
 * usual way, and every message after time 0 is counted. */
static void warm_start(void)
{
	size_t cap = 0, n = 0;
	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].alive)
			cap += chord_vnode_count(TB.n[i].chord);
	struct cfs_node *all = xcalloc(cap ? cap : 1, sizeof(all[0]));
	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].alive)
			for (uint32_t v = 0; v < chord_vnode_count(TB.n[i].chord); v++)
				all[n++] = *chord_vnode_self(TB.n[i].chord, v);
	qsort(all, n, sizeof(all[0]), by_id);
	uint64_t entered = 0, kept = 0;
	uint32_t members = 0;
	for (uint32_t i = 0; i < TB.nslots; i++)
		if (TB.n[i].alive) {
			entered += chord_learned_seed(TB.n[i].chord, all, (uint32_t)n);
			kept += chord_learned_count(TB.n[i].chord);
			members++;
		}
	/* entered: new to the tables (the build and the puts taught the
	 * rest); learned_mean: the tables' mean size after */
	printf("{\"phase\":\"warm\",\"members\":%u,\"vnodes\":%zu,\"entered_per_member\":%.1f,"
	       "\"learned_mean\":%.1f}\n",
	       members, n, members ? (double)entered / members : 0.0, members ? (double)kept / members : 0.0);
	fflush(stdout);
	free(all);
}

int main(int argc, char **argv)
{
	struct settings st = { .converge = 300,
	                       .w = { .kind = "gets", .block_size = 8192, .fetches = 100, .repeat = 1 } };
	char tmpdir[] = "/dev/shm/cfs-testbed.XXXXXX";
	uv_signal_t sigint, sigterm;
	uv_timer_t clock;
	int status = 0;

	cfs_log_init("cfs-testbed", CFS_LOG_WARN);
	chord_config_default(&TB.cc);
	dhash_config_default(&TB.dc);
	/* the papers' baseline, so that the evaluation's rows differ from it
	 * only in what they switch on; --mode cfsd is the daemon's default */
	TB.dc.lookup_mode = CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY);
	TB.dc.hedge_ms = 0;
	TB.dc.sync_ms = 5000;
	TB.frag_repair_ms = CFSD_FREPAIR_MS_DEFAULT;
	TB.base_port = 20000;
	TB.seed = 1;
	parse_args(argc, argv, &st);
	if (!st.w.nwindows)
		st.w.windows[st.w.nwindows++] = 1;
	load_schedule(&st);
	if (st.print) {
		int r = churn_write(&sched, stdout);
		churn_free(&sched);
		return r < 0 ? 1 : 0;
	}
	if (st.netmodel) {
		char err[256];
		if (cfs_wan_parse(st.netmodel, &TB.wan, err, sizeof(err)) < 0)
			die_usage("--netmodel: %s", err);
		TB.has_wan = true;
		/* The ring is built and filled without slow nodes: they are part
		 * of the experiment, not of the set-up (a ring whose maintenance
		 * replies take seconds converges slowly, which is not what the
		 * slow-node experiments measure). They slow down at time 0. */
		TB.wan_setup = TB.wan;
		TB.wan_setup.slow = 0;
		cfs_wan_describe(&TB.wan, err, sizeof(err));
		fprintf(stderr, "cfs-testbed: network model: %s\n", err);
	}
	if ((uint64_t)TB.base_port + sched.slots > 65535)
		die_usage("the schedule needs more ports than remain above --base-port%s", "");
	if (cfs_crypto_init() < 0)
		return 1;
	if (st.mem_index)
		bstore_keep_indexes_in_memory();
	raise_fd_limit(sched.slots, st.mem_index);
	if (!TB.dir) {
		if (!mkdtemp(tmpdir)) {
			fprintf(stderr, "cfs-testbed: cannot create %s: %s\n", tmpdir, strerror(errno));
			return 1;
		}
		TB.dir = tmpdir;
	}
	open_outputs(st.out);

	TB.loop = uv_default_loop();
	cfs_rng_seed(&TB.rng, TB.seed);
	TB.nslots = sched.slots;
	TB.n = xcalloc(TB.nslots ? TB.nslots : 1, sizeof(TB.n[0]));
	uint32_t maxv = TB.cc.vnodes;
	for (uint32_t i = 0; i < TB.nvnodes_list; i++)
		maxv = TB.vnodes_list[i] > maxv ? TB.vnodes_list[i] : maxv;
	TB.ids = xcalloc((size_t)(TB.nslots ? TB.nslots : 1) * maxv, sizeof(TB.ids[0]));
	uv_signal_init(TB.loop, &sigint);
	uv_signal_init(TB.loop, &sigterm);
	uv_signal_start(&sigint, on_signal, SIGINT);
	uv_signal_start(&sigterm, on_signal, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	fprintf(stderr, "cfs-testbed: %zu events on %u slots, seed %llu, data in %s\n", sched.n,
	        sched.slots, (unsigned long long)TB.seed, TB.dir);

	if (!build(st.converge) || tb_workload_prepare(&st.w) < 0)
		status = 1;
	else if (st.warm)
		warm_start();
	/* Time 0. */
	TB.t0_us = cfs_now_us();
	for (uint32_t i = 0; i < TB.nslots; i++)
		TB.n[i].wan.wan = &TB.wan;
	end_ms = sched.end_ms;
	if (st.duration > 0)
		end_ms = (uint64_t)(st.duration * 1000);
	if (TB.frozen)
		for (uint32_t i = 0; i < TB.nslots; i++)
			if (TB.n[i].alive)
				chord_freeze(TB.n[i].chord, true);
	if (!status && !TB.interrupted) {
		tb_workload_start(&st.w);
		if (tb_workload_run(&st.w) < 0)
			status = 1;
		uv_timer_init(TB.loop, &clock);
		uv_timer_start(&clock, on_clock, 10, 10);
		while (!clock_done && end_ms > 0)
			uv_run(TB.loop, UV_RUN_ONCE);
		uv_close((uv_handle_t *)&clock, NULL);
		tb_workload_stop();
		tb_workload_summary(stdout);
	}
	/* t_ms includes the wait for the gets still in flight; end_ms is
	 * where the schedule ended, speedup how much faster than its script. */
	printf("{\"phase\":\"end\",\"t_ms\":%llu,\"end_ms\":%llu,\"speedup\":%g,\"alive\":%u,"
	       "\"rss_kib\":%llu,\"interrupted\":%s}\n",
	       (unsigned long long)tb_now_ms(), (unsigned long long)end_ms, sched.speedup, TB.nalive,
	       (unsigned long long)cfs_rss_kib(), TB.interrupted ? "true" : "false");
	fflush(stdout);
	tb_nodes_stop_all();
	uv_close((uv_handle_t *)&sigint, NULL);
	uv_close((uv_handle_t *)&sigterm, NULL);
	uv_run(TB.loop, UV_RUN_DEFAULT);
	if (TB.ops)
		fclose(TB.ops);
	if (TB.events)
		fclose(TB.events);
	if (TB.dir == tmpdir)
		nftw(tmpdir, rm_one, 64, FTW_DEPTH | FTW_PHYS);
	churn_free(&sched);
	if (TB.has_wan)
		cfs_wan_free(&TB.wan);
	free(TB.n);
	free(TB.ids);
	if (TB.interrupted)
		return 130;
	return status;
}
