/*
 * cfsd — the CFS server daemon.
 *
 * One libuv loop drives everything: the UDP transport, the control socket
 * and the signal handlers. Start-up takes the data directory's lock before
 * binding anything, so two daemons never share a directory; a port that is
 * taken is reported by number. SIGTERM and SIGINT close the listener (the
 * socket file goes away), cancel what is in flight and exit 0.
 *
 * As a system service (tools/systemd/cfsd.service) it refuses settings that
 * would make a silent, useless server (a loopback address advertised from
 * every interface; a new ring on a routable address nobody asked for),
 * reports readiness to systemd itself (sd_notify's datagram, no libsystemd),
 * shares its control socket with a group (--socket-group) and treats SIGHUP
 * as "reload": the log level from the config file, the rest logged as
 * waiting for a restart.
 */
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "cfsd/cfsd.h"
#include "cfsd/deny.h"
#include "cfsd/metrics.h"
#include "cfsd/pin.h"
#include "cfsd/serve.h"
#include "chord/chord.h"
#include "dhash/dhash.h"

struct daemon {
	cfsd_serve_t *serve;      /* the control socket's requests (serve.c) */
	bool quota_given;         /* --quota-mb was set; else a tenth of the capacity */
	bool lease_given;         /* --lease-days was set; else at most --max-lease-days */
	uv_loop_t *loop;
	cfs_transport_t *tr;
	chord_t *chord;
	struct chord_config cc;
	dhash_server_t *dhash;
	dhash_client_t *client;
	struct dhash_config dc;
	uint64_t upload_bytes_per_s; /* --max-upload-mb-per-s (0: no cap) */
	cfsd_pinner_t *pinner;    /* cfsctl pin: volumes this daemon keeps alive */
	cfsd_denylist_t *deny;    /* cfsctl deny: content this daemon refuses (DATA/denylist) */
	uint32_t pin_ms;          /* --pin-ms (0: the default) */
	struct cfs_addr boot[16];
	size_t nboot;
	const char *advertise;
	bool stopping;
	int exit_status;          /* 1 after a fatal ring error (on_ring_fatal) */
	uv_timer_t fatal_timer;
	uv_timer_t peers_timer;   /* DATA/peers checked every 5 s, written when changed */
	uv_timer_t ready_timer;   /* READY=1 for systemd once every virtual server joined */
	bool ready_sent;
	bool peers_loaded;        /* DATA/peers was read: it may be written */
	bool map_port;            /* --map-port: ask the home router to forward our port */
	bool portmap_on;          /* a mapping was made: renewed by portmap_timer */
	uv_timer_t portmap_timer;
	uint16_t port;
	cfs_listener_t *ctl;
	uv_signal_t sigterm, sigint, sighup;
	/* service: --first, --socket-group, SIGHUP (see "service" below) */
	bool first;
	const char *sock_group;
	const char *config;       /* --config, re-read on SIGHUP */
	bool level_given;         /* --log-level on the command line: SIGHUP keeps it */
	char *config_rest;        /* the config's settings but log-level, as read */
	struct cfs_addr addr;
	char data_dir[512], sock_path[600];
	int lock_fd;
	uint64_t started_us;
	bool has_wan;             /* --netmodel: evaluation only */
	struct cfs_wan wan;
	struct cfs_wan_node wan_node;
	cfsd_metrics_t *metrics;  /* rates, neighbours, --metrics (cfsd/metrics.c) */
	const char *metrics_addr; /* --metrics IP:PORT, NULL: no endpoint */
};

static void notify(const char *state);

static const char usage_text[] =
	"usage: cfsd [options]\n"
	"\n"
	"Run a CFS server: join the Chord ring, answer peers over UDP and local\n"
	"tools (cfsctl, cfs-mount, cfs-publish) over a UNIX socket.\n"
	"\n"
	"  -p, --port PORT         UDP port to serve on (default 4460)\n"
	"  -b, --bind ADDR         IP address to bind (default :: — IPv6 and IPv4)\n"
	"  -a, --addr IP           the address peers reach this server at, hashed into\n"
	"                          its node IDs (default: --bind when it names one\n"
	"                          address, else 127.0.0.1 — refused with the default\n"
	"                          --bind, which listens on every interface)\n"
	"  -B, --bootstrap H:P     join the ring through this server (repeatable)\n"
	"      --first             start a new ring when no --bootstrap address and no\n"
	"                          remembered peer answers: needed when no --bootstrap\n"
	"                          is given, unless the server's address is a loopback one\n"
	"      --vnodes V          virtual servers to run (default 1, at most 64)\n"
	"      --successors R      successor list length (default 16, at most 32)\n"
	"      --stabilize-ms MS   mean stabilisation period (default 1000)\n"
	"      --map-port MODE     auto (the default): on a private IPv4 address with no\n"
	"                          --addr, ask the router (NAT-PMP, then UPnP-IGD) to\n"
	"                          forward this UDP port and tell peers its public address;\n"
	"                          off: never\n"
	"      --unreachable MODE  when members cannot reach this server (their dial-backs\n"
	"                          do not arrive): client (the default) runs it as a\n"
	"                          client-only node that reads, publishes and pins but\n"
	"                          holds no part of the ring; member keeps it a member\n"
	"      --ring-check-ms MS  mean period of the ring check, a lookup of our own ID\n"
	"                          from a peer outside our successor list that finds\n"
	"                          and joins other loops after a partition (default\n"
	"                          30000; 0: never)\n"
	"      --pns X             proximity samples per finger (default 16)\n"
	"      --learned-nodes N   ring members met in traffic kept so that lookups start\n"
	"                          next to their keys, one round trip in a ring of up to\n"
	"                          about N servers (default 4096, at most 65536; 0: none)\n"
	"      --replicas K        copies of every block, on its K successors (default 6;\n"
	"                          at most --successors)\n"
	"      --lease-days D      lease of a block put without one, in days (default 30;\n"
	"                          a decimal such as 0.5 is allowed)\n"
	"      --max-lease-days D  the longest lease this server grants, whatever a put or\n"
	"                          refresh asks (default 90; publishers sign roots no\n"
	"                          longer than the leases they got)\n"
	"      --expire-ms MS      lease collector period (default 60000)\n"
	"      --max-clock-skew-s S  lease expiry is suspended while this machine's\n"
	"                          clock differs from the median of its peers' by more\n"
	"                          (default 600)\n"
	"      --hedge-ms MS       a get also asks the next replica when the first has not\n"
	"                          answered within MS (OpenDHT's hedged request); auto (the\n"
	"                          default): twice the round trip to it plus 15 ms, for at\n"
	"                          most 5 % of the FETCHes; 0: never\n"
	"      --lookup-mode M     how this server's gets and puts find a key's servers:\n"
	"                          iterative or recursive, then ,greedy ,cost or ,nonlinear\n"
	"                          (next hops by ID or by predicted delay), ,pN (N asks at\n"
	"                          once, iterative) and ,pred (route to the predecessor)\n"
	"                          (default iterative,nonlinear,p2)\n"
	"      --capacity-mb MB    what replicas and cached copies together may fill this\n"
	"                          server to; cached copies make room first (default\n"
	"                          10240; 0: no bound)\n"
	"      --quota-mb MB       what one client IP may store here (default a tenth of\n"
	"                          the capacity; 0: no quota); a client's puts need the\n"
	"                          nonce this server sends its address (CFS 5.4)\n"
	"      --cache-mb MB       bound of the cache of others' blocks fetched through this\n"
	"                          server or pushed to it by gets (DIR/cache; default 64; 0: off)\n"
	"      --cache-push WHERE  after a get, copy the block to the lookup path's caches:\n"
	"                          path (every hop, the default), last (the hop nearest the\n"
	"                          key) or none\n"
	"      --cache-push-mb-per-s MB  upload bound on those copies, which also yield to\n"
	"                          other traffic (default 0: no bound)\n"
	"      --max-upload-mb-per-s MB  cap on everything this server sends: answers,\n"
	"                          replicas, repair, cache pushes (MB/s, a decimal such as\n"
	"                          0.5 allowed; the background class waits behind the rest\n"
	"                          but keeps a tenth; default 0: no cap)\n"
	"      --pin-ms MS         a round of every pin this often: renew the leases of the\n"
	"                          pinned volumes' blocks, put back what went missing\n"
	"                          (default a quarter of --lease-days, at most an hour)\n"
	"      --sync-ms MS        replica maintenance period: compare each range with its\n"
	"                          replicas, push and fetch what differs (default 20000; 0: off)\n"
	"      --scrub-days D      reread and verify every stored block within D days,\n"
	"                          dropping bad copies for repair to restore (default 7:\n"
	"                          the capacity in a week; 0: off)\n"
	"      --scrub-mb-per-s MB the scrub's read rate instead (default: from --scrub-days)\n"
	"      --compact-mb-per-s MB  the compactor's disk rate, read and written, reclaiming\n"
	"                          dead bytes of expired and dropped blocks (default 8; 0: off)\n"
	"      --compact-live-percent P  it rewrites a pack whose live share is below P\n"
	"                          (default 50)\n"
	"      --metrics IP:PORT   serve Prometheus metrics at http://IP:PORT/metrics (off by\n"
	"                          default; [IPv6]:PORT for IPv6)\n"
	"      --netmodel SPEC     evaluation only: delay, drop and slow down every datagram\n"
	"                          sent as a wide-area model says; SPEC is key=value,...\n"
	"                          of seed=N, median-rtt=MS (default 130), loss=FRAC,\n"
	"                          slow=FRAC, slow-ms=MS, matrix=FILE (off by default)\n"
	"      --test-ring-order   for tests: a get asks the key's successors in ring order,\n"
	"                          not nearest first\n"
	"      --test-clock-offset-s S  for tests: run this daemon's wall clock S seconds\n"
	"                          ahead (negative: behind) of the machine's\n"
	"      --test-corrupt-fetches  for tests: serve every block with a byte flipped\n"
	"                          (a misbehaving server; clients must skip it)\n"
	"  -d, --data DIR          data directory (default: $CFS_DATA_DIR, /var/lib/cfs\n"
	"                          as root, else $XDG_DATA_HOME/cfs)\n"
	"  -s, --socket PATH       control socket (default DIR/cfsd.sock)\n"
	"      --socket-group G    make the control socket mode 0660, group G, so that\n"
	"                          G's members reach the daemon (the service: cfs)\n"
	"  -c, --config FILE       read options from FILE first: one \"name = value\" per\n"
	"                          line (the long option names), '#' starts a comment;\n"
	"                          the command line wins\n"
	"  -l, --log-level LVL     error, warn, info (default) or debug\n"
	"      --check             check the settings (config file and command line)\n"
	"                          and exit: 0 if cfsd would start with them, else 2\n"
	"  -h, --help              show this help\n"
	"  -V, --version           show the version\n"
	"\n"
	"The data directory holds the lock that keeps a second cfsd off it, the block\n"
	"store (DIR/blocks: pack files and a LevelDB index), the cache (DIR/cache), the\n"
	"pins (DIR/pins) and the pinned volumes' blocks (DIR/pinned), and the control\n"
	"socket that cfsctl talks to. SIGTERM or SIGINT makes the daemon tell its ring\n"
	"neighbours it is leaving, then exit 0. SIGHUP rereads the config file's\n"
	"log-level; other settings wait for a restart (logged).\n";

#define bad_usage(...) cfs_usage_error("usage: cfsd [--port PORT] [--bind ADDR] [--addr IP] [--bootstrap HOST:PORT] [--vnodes V] [--data DIR] [--config FILE] ... (cfsd --help for more)", __VA_ARGS__)

/* ------------------------------------------------------------ status */

/* The daemon's own part of the report, described once (cfs_stat): what
 * the process, its transport, its DHash client and its control socket
 * count. The ring and the block server describe theirs. */
struct status_snap {
	const char *version, *address, *data_dir;
	uint32_t pid, port;
	uint64_t uptime_s;
	struct cfs_transport_stats st;
	uint64_t rtt_p50, rtt_p90, rtt_p99;
	struct dhash_client_stats cs;
	uint64_t get_p50, get_p99;
	uint64_t ctl_requests, ctl_malformed;
};

#define S(kind, field, name, label, unit) CFS_STAT(kind, struct status_snap, field, name, label, unit)
static const struct cfs_stat status_head[] = {
	CFS_STAT_BEGIN(NULL, "cfsd"),
	S(STR, version, "version", "version", NULL),
	S(U32, pid, "pid", "pid", NULL),
	S(STR, address, "address", "address", NULL),
	S(U32, port, "port", "port", NULL),
	S(STR, data_dir, "data_dir", "data dir", NULL),
	S(U64, uptime_s, "uptime_s", "up", "s"),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("rpc", "rpc out"),
	S(U64, st.calls, "calls", "calls", NULL),
	S(U64, st.replies, "replies", "replies", NULL),
	S(U64, st.timeouts, "timeouts", "timeouts", NULL),
	S(U64, st.cancelled, "cancelled", "cancelled", NULL),
	S(U64, st.unmatched, "unmatched", "unmatched replies", NULL),
	S(U64, st.late_replies, "late_replies", "late replies", NULL),
	S(U64, st.late_by_us_max, "late_by_us_max", "latest by", "us"),
	S(U64, st.retransmits, "retransmits", "requests sent again", NULL),
	S(U64, st.dup_requests, "dup_requests", "copies of requests being answered", NULL),
	S(U64, st.version_probes, "version_probes", "hellos sent", NULL),
	S(U64, st.hellos_in, "hellos_in", "hellos answered", NULL),
	S(U64, st.peers_newer, "peers_newer", "peers found speaking the newest version", NULL),
	S(U64, st.send_errors, "send_errors", "send errors", NULL),
	S(U64, st.model_dropped, "model_dropped", "dropped by the network model", NULL),
	S(U32, st.inflight, "inflight", "in flight", NULL),
	S(U32, st.queued, "queued", "queued", NULL),
	CFS_STAT_D(struct status_snap, st.window, 2, "window", "window", NULL),
	CFS_STAT_BEGIN(NULL, "rpc rtt"),
	CFS_STAT_D(struct status_snap, st.srtt_us, 0, "srtt_us", "srtt", "us"),
	S(U64, rtt_p50, "rtt_p50_us", "p50", "us"),
	S(U64, rtt_p90, "rtt_p90_us", "p90", "us"),
	S(U64, rtt_p99, "rtt_p99_us", "p99", "us"),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN(NULL, "rpc in"),
	S(U64, st.requests_in, "requests_in", "requests", NULL),
	S(U64, st.replies_out, "replies_out", "replies sent", NULL),
	S(U64, st.malformed, "malformed", "malformed dropped", NULL),
	S(U64, st.bytes_in, "bytes_in", "bytes in", NULL),
	S(U64, st.bytes_out, "bytes_out", "bytes out", NULL),
	S(U64, st.datagrams_out, "datagrams_out", "datagrams out", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("pieces", "pieces"),
	S(U64, st.xfers_out, "xfers_out", "messages sent as pieces", NULL),
	S(U64, st.xfers_in, "xfers_in", "received as pieces", NULL),
	S(U64, st.xfers_abandoned, "xfers_abandoned", "abandoned", NULL),
	S(U64, st.pieces_out, "pieces_out", "pieces out", NULL),
	S(U64, st.pieces_resent, "pieces_resent", "resent", NULL),
	S(U64, st.pieces_in, "pieces_in", "pieces in", NULL),
	S(U64, st.pieces_dup, "pieces_dup", "duplicates", NULL),
	S(U64, st.acks_out, "acks_out", "acks out", NULL),
	S(U64, st.acks_in, "acks_in", "acks in", NULL),
	S(U64, st.gso_sends, "gso_sends", "batched sends", NULL),
	S(U64, st.answers_refused, "answers_refused", "answers over a peer's bound", NULL),
	S(U64, st.answers_dropped_silent, "answers_dropped_silent", "answers dropped for a silent peer", NULL),
	S(U64, st.reasm_dropped, "reasm_dropped", "refused", NULL),
	S(U64, st.reasm_expired, "reasm_expired", "expired", NULL),
	S(U64, st.reasm_evicted, "reasm_evicted", "evicted for room", NULL),
	S(U32, st.links, "links", "peers", NULL),
	S(U64, st.cwnd_bytes, "cwnd_bytes", "windows", "B"),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("validation", "address validation"),
	S(U64, st.retries_sent, "retries_sent", "answers withheld for a token", NULL),
	S(U64, st.retries_in, "retries_in", "tokens asked of us", NULL),
	S(U64, st.validated, "validated", "addresses proven by token", NULL),
	S(U64, st.bad_tokens, "bad_tokens", "bad tokens", NULL),
	S(U64, st.budget_held, "budget_held", "pieces held by the 3x budget", NULL),
	S(U64, st.upload_held, "upload_held", "waits for the upload cap", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_CLOSE,
};

static const struct cfs_stat status_tail[] = {
	CFS_STAT_BEGIN("client", "client"),
	S(U64, cs.gets, "gets", "gets", NULL),
	S(U64, cs.gets_failed, "gets_failed", "failed", NULL),
	S(U64, cs.puts, "puts", "puts", NULL),
	S(U64, cs.puts_failed, "puts_failed", "failed", NULL),
	S(U64, cs.puts_moved, "puts_moved", "moved", NULL),
	S(U64, cs.get_rpcs, "get_rpcs", "get RPCs", NULL),
	S(U64, cs.bad_replies, "bad_replies", "bad replies", NULL),
	S(U64, cs.fetch_timeouts, "fetch_timeouts", "fetch timeouts", NULL),
	S(U64, cs.relookups, "relookups", "relookups", NULL),
	S(U64, cs.hedges, "hedges", "hedges", NULL),
	S(U64, cs.hedge_wins, "hedge_wins", "won", NULL),
	S(U64, cs.hedges_skipped, "hedges_skipped", "over budget", NULL),
	S(U64, cs.cache_pushes, "cache_pushes", "cache pushes", NULL),
	S(U64, cs.cache_pushes_skipped, "cache_pushes_skipped", "over the upload bound", NULL),
	S(U64, get_p50, "get_p50_us", "get p50", "us"),
	S(U64, get_p99, "get_p99_us", "p99", "us"),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("control", "control"),
	S(U64, ctl_requests, "requests", "requests", NULL),
	S(U64, ctl_malformed, "malformed", "malformed", NULL),
	CFS_STAT_CLOSE,
};
#undef S

/* cfsctl health's line: healthy when every virtual server has joined
 * with a full successor list, the stored blocks are below the capacity
 * and the data directory's disk is not full. */
#define HEALTH_DISK_MIN (64ull << 20)
static void health_report(struct daemon *d, struct cfs_sbuf *b)
{
	struct cfs_sbuf why = { 0 };
	uint64_t used, cap;
	struct statvfs fs;

	for (uint32_t i = 0; i < chord_vnode_count(d->chord); i++) {
		if (!chord_vnode_joined(d->chord, i))
			cfs_sb_printf(&why, "%svirtual server %u has not joined the ring", why.len ? "; " : "", i);
		else if (!chord_vnode_succs_full(d->chord, i))
			cfs_sb_printf(&why, "%svirtual server %u's successor list is short", why.len ? "; " : "", i);
	}
	if (chord_is_client(d->chord))
		cfs_sb_printf(&why, "%sclient-only: members cannot reach this server", why.len ? "; " : "");
	dhash_server_usage(d->dhash, &used, &cap);
	if (cap && used + (1u << 20) > cap) /* within a MiB of it: puts are refused */
		cfs_sb_printf(&why, "%sthe store is full (%.1f of %.1f MiB)", why.len ? "; " : "",
		              (double)used / (1 << 20), (double)cap / (1 << 20));
	if (statvfs(d->data_dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < HEALTH_DISK_MIN)
		cfs_sb_printf(&why, "%sthe disk of %s has less than %llu MiB free", why.len ? "; " : "",
		              d->data_dir, (unsigned long long)(HEALTH_DISK_MIN >> 20));
	uint32_t nv = chord_vnode_count(d->chord);
	if (why.len)
		cfs_sb_printf(b, "unhealthy: %s\n", why.p);
	else if (cap)
		cfs_sb_printf(b, "healthy: %u virtual server%s joined with full successor lists; %.1f of %.1f MiB stored\n",
		              nv, nv == 1 ? "" : "s", (double)used / (1 << 20), (double)cap / (1 << 20));
	else
		cfs_sb_printf(b, "healthy: %u virtual server%s joined with full successor lists; %.1f MiB stored\n",
		              nv, nv == 1 ? "" : "s", (double)used / (1 << 20));
	free(why.p);
}

/* The text report's first three lines: health, the ring as this daemon
 * sees it, and its store: what an operator looks for first. */
static void status_summary(struct daemon *d, struct cfs_sbuf *b)
{
	const struct cfs_node *list[CHORD_SUCC_MAX];
	uint32_t nv = chord_vnode_count(d->chord), fewest = UINT32_MAX;
	uint64_t used, cap, debt_last, debt_round;
	char h1[CFS_HUMAN_LEN], h2[CFS_HUMAN_LEN];

	cfs_sb_printf(b, "%-11s ", "health");
	health_report(d, b);
	bool full = true;
	for (uint32_t i = 0; i < nv; i++) {
		uint32_t n = chord_vnode_succs(d->chord, i, list);
		if (n < fewest)
			fewest = n;
		full &= chord_vnode_succs_full(d->chord, i);
	}
	cfs_sb_printf(b, "%-11s about %.0f virtual servers (estimated from the successor lists); "
	              "successor lists %s, the shortest %u of %u\n", "ring size", chord_estimate_n(d->chord),
	              !full ? "short" : fewest < d->cc.nsucc ? "full (the whole ring)" : "full",
	              nv ? fewest : 0, d->cc.nsucc);
	dhash_server_usage(d->dhash, &used, &cap);
	dhash_server_debt(d->dhash, &debt_last, &debt_round);
	if (cap)
		cfs_sb_printf(b, "%-11s %s of %s (%.0f %%)", "stored", cfs_human_bytes(h1, (double)used),
		              cfs_human_bytes(h2, (double)cap), 100.0 * (double)used / (double)cap);
	else
		cfs_sb_printf(b, "%-11s %s, no capacity set", "stored", cfs_human_bytes(h1, (double)used));
	cfs_sb_printf(b, "; replication debt: %llu copies missing in the last whole round, %llu in this one\n",
	              (unsigned long long)debt_last, (unsigned long long)debt_round);
}

static void status_report(void *arg, struct cfs_sbuf *b, uint32_t flags)
{
	struct daemon *d = arg;
	struct status_snap *s;
	char a[CFS_ADDR_STRLEN];
	bool first = true, json = flags & CFS_STATUS_F_JSON;

	if (flags & CFS_STATUS_F_HEALTH) {
		health_report(d, b);
		return;
	}
	s = xcalloc(1, sizeof(*s)); /* two histograms: not on the stack */

	cfs_transport_get_stats(d->tr, &s->st);
	s->version = CFS_VERSION;
	s->pid = (uint32_t)getpid();
	s->address = cfs_addr_str(&d->addr, a);
	s->port = cfs_addr_port(&d->addr);
	s->data_dir = d->data_dir;
	s->uptime_s = (cfs_now_us() - d->started_us) / 1000000u;
	s->rtt_p50 = cfs_hist_quantile(&s->st.rtt_us, 0.5);
	s->rtt_p90 = cfs_hist_quantile(&s->st.rtt_us, 0.9);
	s->rtt_p99 = cfs_hist_quantile(&s->st.rtt_us, 0.99);
	s->cs = *dhash_client_stats(d->client);
	s->get_p50 = cfs_hist_quantile(&s->cs.get_us, 0.5);
	s->get_p99 = cfs_hist_quantile(&s->cs.get_us, 0.99);
	s->ctl_requests = cfsd_serve_requests(d->serve, false);
	s->ctl_malformed = cfsd_serve_requests(d->serve, true);
	if (json) {
		cfs_sb_printf(b, "{");
		cfs_stat_render(b, true, status_head, CFS_ARRAY_SIZE(status_head), s, &first);
		cfsd_metrics_status(d->metrics, b, true);
		cfs_sb_printf(b, ",\"ring\":");
		chord_status(d->chord, b, true);
		cfs_sb_printf(b, ",\"dhash\":");
		dhash_server_status(d->dhash, b, true);
		cfs_stat_render(b, true, status_tail, CFS_ARRAY_SIZE(status_tail), s, &first);
		cfs_sb_printf(b, "}\n");
	} else {
		status_summary(d, b);
		cfs_stat_render(b, false, status_head, CFS_ARRAY_SIZE(status_head), s, NULL);
		cfsd_metrics_status(d->metrics, b, false); /* rates and neighbours: what people look for first */
		cfs_stat_render(b, false, status_tail, CFS_ARRAY_SIZE(status_tail), s, NULL);
		dhash_server_status(d->dhash, b, false);
		chord_status(d->chord, b, false);
	}
	free(s);
}

static void status_json(void *arg, struct cfs_sbuf *b)
{
	struct daemon *d = arg;

	status_report(d, b, CFS_STATUS_F_JSON);
}

/* ------------------------------------------------------------ UDP requests */

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct daemon *d = arg;
	if (chord_handle_request(d->chord, req, from))
		return;
	if (dhash_handle_request(d->dhash, req, from))
		return;
	(void)cfs_transport_reply_error(d->tr, from, -EOPNOTSUPP);
}

/* ------------------------------------------------------------ lifetime */

/* Pins wait for this: a daemon that is still joining would take itself for
 * every key's successor. */
static bool ring_joined(void *arg)
{
	struct daemon *d = arg;
	return d->nboot == 0 || chord_vnode_joined(d->chord, 0) || chord_is_client(d->chord);
}

/* The daemon's pieces, top first: their operations come back cancelled
 * while the client closes. */
static void free_pieces(struct daemon *d)
{
	cfsd_pinner_free(d->pinner);
	dhash_client_free(d->client);
	dhash_server_free(d->dhash);
	cfsd_denylist_free(d->deny);
	chord_free(d->chord);
	cfs_transport_close(d->tr);
}

static void stop_rest(void *arg)
{
	struct daemon *d = arg;

	cfsd_serve_close_all(d->serve);
	free_pieces(d);
	log_info("left the ring");
}

static void shut_down(struct daemon *d)
{
	d->stopping = true;
	notify("STOPPING=1");
	cfsd_metrics_close(d->metrics);
	cfs_listener_close(d->ctl);
	d->ctl = NULL;
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sighup, NULL);
	uv_close((uv_handle_t *)&d->fatal_timer, NULL);
	uv_close((uv_handle_t *)&d->peers_timer, NULL);
	uv_close((uv_handle_t *)&d->ready_timer, NULL);
	if (d->portmap_on)
		uv_close((uv_handle_t *)&d->portmap_timer, NULL);
	if (d->peers_loaded)
		(void)cfsd_peers_save(d->chord, d->data_dir); /* the tables before we leave them */
	chord_leave(d->chord, stop_rest, d);
}

static void on_signal(uv_signal_t *h, int sig)
{
	struct daemon *d = h->data;
	if (d->stopping) {
		log_warn("%s again: stopping without waiting for the neighbours",
		         sig == SIGTERM ? "SIGTERM" : "SIGINT");
		_exit(1);
	}
	log_info("%s: telling the ring neighbours, then shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	shut_down(d);
}

static void peers_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;
	(void)cfsd_peers_save(d->chord, d->data_dir);
}

static void fatal_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;
	if (!d->stopping)
		shut_down(d);
}

/* cfsctl leave: as SIGTERM, once the answer had time to reach cfsctl. */
static void leave_soon(void *arg)
{
	struct daemon *d = arg;
	if (d->stopping)
		return;
	log_info("cfsctl leave: telling the ring neighbours, then shutting down");
	uv_timer_start(&d->fatal_timer, fatal_tick, 200, 0);
}

/* The ring cannot be joined (every index of our IP is taken, PROTOCOL.md "Node IDs";
 * chord logged why): refuse to run rather than serve with fewer virtual
 * servers than asked. Called from inside chord, so the stop waits a turn. */
static void on_ring_fatal(void *arg, int status)
{
	struct daemon *d = arg;
	log_error("cannot join the ring: %s; shutting down", strerror(-status));
	d->exit_status = 1;
	uv_timer_start(&d->fatal_timer, fatal_tick, 0, 0);
}

/* Take DIR/cfsd.lock for the life of the process (flock: released by the
 * kernel however the process ends, so a crash never leaves it stuck). */
static int lock_data_dir(struct daemon *d)
{
	char path[600], pid[32];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", d->data_dir, CFSD_LOCK_NAME);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return log_error_errno(-errno, "cannot open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		ssize_t n = read(fd, pid, sizeof(pid) - 1);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		if (r == -EWOULDBLOCK) {
			log_error("data directory %s is in use by another cfsd%s%s%s", d->data_dir,
			          *pid ? " (pid " : "", pid, *pid ? ")" : "");
			return -EBUSY;
		}
		return log_error_errno(r, "cannot lock %s", path);
	}
	if (ftruncate(fd, 0) == 0) {
		int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
		if (write(fd, pid, (size_t)n) != n)
			log_warn("cannot record the pid in %s", path);
	}
	d->lock_fd = fd;
	return 0;
}

enum { OPT_FIRST = 1070, OPT_SOCKET_GROUP, OPT_CHECK, OPT_METRICS, OPT_PUSH_RATE, OPT_LOOKUP_MODE,
       OPT_LEARNED, OPT_UPLOAD };

static const struct option opts[] = {
	{ "port", required_argument, NULL, 'p' },
	{ "bind", required_argument, NULL, 'b' },
	{ "addr", required_argument, NULL, 'a' },
	{ "bootstrap", required_argument, NULL, 'B' },
	{ "vnodes", required_argument, NULL, 'v' },
	{ "successors", required_argument, NULL, 'r' },
	{ "stabilize-ms", required_argument, NULL, 1001 },
	{ "ring-check-ms", required_argument, NULL, 1006 },
	{ "unreachable", required_argument, NULL, 1009 },
	{ "map-port", required_argument, NULL, 1010 },
	{ "pns", required_argument, NULL, 1002 },
	{ "learned-nodes", required_argument, NULL, OPT_LEARNED },
	{ "replicas", required_argument, NULL, 'k' },
	{ "lease-days", required_argument, NULL, 1003 },
	{ "expire-ms", required_argument, NULL, 1004 },
	{ "sync-ms", required_argument, NULL, 1013 },
	{ "scrub-days", required_argument, NULL, 1060 },
	{ "scrub-mb-per-s", required_argument, NULL, 1061 },
	{ "compact-mb-per-s", required_argument, NULL, 1062 },
	{ "compact-live-percent", required_argument, NULL, 1063 },
	{ "pin-ms", required_argument, NULL, 1050 },
	{ "hedge-ms", required_argument, NULL, 1014 },
	{ "lookup-mode", required_argument, NULL, OPT_LOOKUP_MODE },
	{ "cache-mb", required_argument, NULL, 1015 },
	{ "capacity-mb", required_argument, NULL, 1017 },
	{ "quota-mb", required_argument, NULL, 1018 },
	{ "cache-push", required_argument, NULL, 1016 },
	{ "cache-push-mb-per-s", required_argument, NULL, OPT_PUSH_RATE },
	{ "max-upload-mb-per-s", required_argument, NULL, OPT_UPLOAD },
	{ "max-lease-days", required_argument, NULL, 1040 },
	{ "test-corrupt-fetches", no_argument, NULL, 1005 },
	{ "test-clock-offset-s", required_argument, NULL, 1007 },
	{ "max-clock-skew-s", required_argument, NULL, 1008 },
	{ "test-ring-order", no_argument, NULL, 1019 },
	{ "netmodel", required_argument, NULL, 1020 },
	{ "metrics", required_argument, NULL, OPT_METRICS },
	{ "data", required_argument, NULL, 'd' },
	{ "socket", required_argument, NULL, 's' },
	{ "config", required_argument, NULL, 'c' },
	{ "log-level", required_argument, NULL, 'l' },
	{ "first", no_argument, NULL, OPT_FIRST },
	{ "socket-group", required_argument, NULL, OPT_SOCKET_GROUP },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ 0 },
};
#define SHORT_OPTS ":p:b:a:B:d:s:c:l:hV"

struct settings {
	struct daemon *d;         /* where the settings go */
	unsigned long port;
	const char *bind_host, *sock, *config;
	enum cfs_log_level level;
};

/* A flag: on the command line (val NULL) it is set; in the config file
 * it says true or false. */
static bool flag_value(const char *opt, const char *val)
{
	if (!val || !strcmp(val, "true") || !strcmp(val, "yes") || !strcmp(val, "1"))
		return true;
	if (!strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "0"))
		return false;
	bad_usage("%s wants true or false, not '%s'", opt, val);
}

static const char *level_name(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	return names[cfs_log_get_level()];
}

static unsigned long parse_num(const char *opt, const char *v, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long n = strtoul(v, &end, 10);

	if (!*v || *end || n < lo || n > hi)
		bad_usage("%s wants a number from %lu to %lu, not '%s'", opt, lo, hi, v);
	return n;
}

/* Apply one option (from the command line or the config file). */
static void apply(struct settings *st, int c, const char *val)
{
	struct daemon *d = st->d;
	struct cfs_addr tmp;

	switch (c) {
	case 'p': st->port = parse_num("--port", val, 1, 65535); break;
	case 'b':
		if (cfs_addr_from_ip(&tmp, val, 1) < 0)
			bad_usage("--bind wants an IP address, not '%s'", val);
		st->bind_host = val;
		break;
	case 'a':
		if (cfs_addr_from_ip(&tmp, val, 1) < 0)
			bad_usage("--addr wants an IP address, not '%s'", val);
		d->advertise = val;
		break;
	case 'B':
		if (d->nboot >= CFS_ARRAY_SIZE(d->boot))
			bad_usage("at most %zu --bootstrap servers", CFS_ARRAY_SIZE(d->boot));
		if (cfs_addr_parse(&d->boot[d->nboot], val) < 0)
			bad_usage("--bootstrap wants HOST:PORT, not '%s'", val);
		d->nboot++;
		break;
	case 'v': d->cc.vnodes = (uint32_t)parse_num("--vnodes", val, 1, CHORD_VNODES_MAX); break;
	case 'r': d->cc.nsucc = (uint32_t)parse_num("--successors", val, 1, CHORD_SUCC_MAX); break;
	case 1001: d->cc.stabilize_ms = (uint32_t)parse_num("--stabilize-ms", val, 10, 600000); break;
	case 1002: d->cc.pns = (uint32_t)parse_num("--pns", val, 1, CHORD_SUCC_MAX); break;
	case OPT_LEARNED:
		d->cc.learned_max = (uint32_t)parse_num("--learned-nodes", val, 0, CHORD_LEARNED_MAX);
		break;
	case 'k': d->dc.replicas = (uint32_t)parse_num("--replicas", val, 1, CHORD_SUCC_MAX); break;
	case 1003: {
		uint64_t secs;
		if (cfs_parse_days(val, &secs) < 0)
			bad_usage("--lease-days wants a number of days above 0, at most 3650 (0.5: twelve hours), not '%s'", val);
		d->dc.lease_s = secs;
		d->lease_given = true;
		break;
	}
	case 1040: {
		uint64_t secs;
		if (cfs_parse_days(val, &secs) < 0)
			bad_usage("--max-lease-days wants a number of days above 0, at most 3650, not '%s'", val);
		d->dc.max_lease_s = secs;
		break;
	}
	case 1010:
		if (!strcmp(val, "auto"))
			d->map_port = true;
		else if (!strcmp(val, "off"))
			d->map_port = false;
		else
			bad_usage("--map-port wants auto or off, not '%s'", val);
		break;
	case 1009:
		if (!strcmp(val, "client"))
			d->cc.unreachable_client = true;
		else if (!strcmp(val, "member"))
			d->cc.unreachable_client = false;
		else
			bad_usage("--unreachable wants client or member, not '%s'", val);
		break;
	case 1006: {
		uint32_t ms = (uint32_t)parse_num("--ring-check-ms", val, 0, 86400000);
		d->cc.merge_ms = ms ? ms : CHORD_MERGE_OFF;
		break;
	}
	case 1004: d->dc.expire_ms = (uint32_t)parse_num("--expire-ms", val, 100, 86400000); break;
	case 1013: d->dc.sync_ms = (uint32_t)parse_num("--sync-ms", val, 0, 86400000); break;
	case 1060: {
		uint64_t secs = 0;
		if (strcmp(val, "0") != 0 && cfs_parse_days(val, &secs) < 0)
			bad_usage("--scrub-days wants a number of days, at most 3650 (0: no scrub), not '%s'", val);
		d->dc.scrub_ms = secs * 1000;
		break;
	}
	case 1061: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6)
			bad_usage("--scrub-mb-per-s wants a rate in MB/s (0: from --scrub-days), not '%s'", val);
		d->dc.scrub_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case 1062: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6)
			bad_usage("--compact-mb-per-s wants a rate in MB/s (0: no compaction), not '%s'", val);
		d->dc.compact_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case OPT_UPLOAD: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6 || (mb > 0 && mb < 0.1))
			bad_usage("--max-upload-mb-per-s wants a rate in MB/s, at least 0.1 (0: no cap), not '%s'", val);
		d->upload_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case OPT_PUSH_RATE: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6)
			bad_usage("--cache-push-mb-per-s wants a rate in MB/s (0: no bound), not '%s'", val);
		d->dc.cache_push_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case 1063: d->dc.compact_live_pct = (uint32_t)parse_num("--compact-live-percent", val, 1, 99); break;
	case 1050: d->pin_ms = (uint32_t)parse_num("--pin-ms", val, 100, 86400000); break;
	case 1014: {
		char *end;
		unsigned long ms = strtoul(val, &end, 10);
		if (strcmp(val, "auto") == 0)
			ms = DHASH_HEDGE_AUTO;
		else if (!*val || *end || ms > 60000)
			bad_usage("--hedge-ms wants auto or a delay in ms from 0 to 60000, not '%s'", val);
		d->dc.hedge_ms = (uint32_t)ms;
		break;
	}
	case OPT_LOOKUP_MODE:
		if (chord_mode_parse(val, &d->dc.lookup_mode) < 0)
			bad_usage("--lookup-mode wants iterative or recursive[,greedy|,cost|,nonlinear][,pN]"
			          "[,pred], not '%s'", val);
		break;
	case 1015: d->dc.cache_bytes = (uint64_t)parse_num("--cache-mb", val, 0, 1ul << 20) << 20; break;
	case 1017: d->dc.capacity_bytes = (uint64_t)parse_num("--capacity-mb", val, 0, 1ul << 30) << 20; break;
	case 1018:
		d->dc.quota_bytes = (uint64_t)parse_num("--quota-mb", val, 0, 1ul << 30) << 20;
		d->quota_given = true;
		break;
	case 1016:
		if (!strcmp(val, "path"))
			d->dc.cache_push = DHASH_PUSH_PATH;
		else if (!strcmp(val, "last"))
			d->dc.cache_push = DHASH_PUSH_LAST;
		else if (!strcmp(val, "none"))
			d->dc.cache_push = DHASH_PUSH_NONE;
		else
			bad_usage("--cache-push wants path, last or none, not '%s'", val);
		break;
	case 1007: {
		char *end;
		long long off = strtoll(val, &end, 10);
		if (!*val || *end || off < -3153600000LL || off > 3153600000LL)
			bad_usage("--test-clock-offset-s wants whole seconds (negative: behind)");
		cfs_wall_set_offset_s(off);
		break;
	}
	case 1008: d->dc.max_skew_s = (uint32_t)parse_num("--max-clock-skew-s", val, 1, 31536000); break;
	case 1005: d->dc.corrupt_fetches = flag_value("test-corrupt-fetches", val); break;
	case 1019: d->dc.ring_order = flag_value("test-ring-order", val); break;
	case OPT_FIRST: d->first = flag_value("first", val); break;
	case OPT_SOCKET_GROUP: d->sock_group = val; break;
	case 1020: {
		/* The config file and the command line may both name one. */
		struct cfs_wan w;
		char err[512];
		if (cfs_wan_parse(val, &w, err, sizeof(err)) < 0)
			bad_usage("--netmodel: %s", err);
		cfs_wan_free(&d->wan);
		d->wan = w;
		d->has_wan = true;
		break;
	}
	case OPT_METRICS: d->metrics_addr = val; break;
	case 'd':
		if (strlen(val) >= sizeof(d->data_dir) - 32)
			bad_usage("--data path is too long");
		strcpy(d->data_dir, val);
		break;
	case 's': st->sock = val; break;
	case 'c': st->config = val; break;
	case 'l':
		if (cfs_log_parse_level(val, &st->level) < 0)
			bad_usage("--log-level wants error, warn, info or debug, not '%s'", val);
		break;
	}
}

/*
 * --netmodel: every datagram this daemon sends passes the wide-area model
 * as sent from d->addr, the address peers know us by and send to, so each
 * daemon's view of a pair is the one its peer has (an unspecified bind
 * address such as :: would name no place).
 */
static void install_netmodel(struct daemon *d)
{
	char desc[512];
	struct cfs_netmodel m;

	if (!d->has_wan)
		return;
	cfs_wan_node_init(&d->wan_node, &d->wan, &d->addr, d->wan.seed);
	m = cfs_wan_ops(&d->wan_node);
	cfs_transport_set_model(d->tr, &m);
	cfs_wan_describe(&d->wan, desc, sizeof(desc));
	log_warn("evaluation only: every datagram sent is delayed or dropped by a network model: %s%s",
	         desc, cfs_wan_is_slow(&d->wan, &d->addr) ? "; this server is one of the slow" : "");
}

/* One line of a config file, trimmed in place: 1 with ret_name and
 * ret_val set, 0 for a blank or comment line, -EINVAL without an '='. */
static int config_line(char *p, char **ret_name, char **ret_val)
{
	char *eq, *e;

	p[strcspn(p, "#\n")] = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	if (!(eq = strchr(p, '=')))
		return -EINVAL;
	*eq = 0;
	for (e = eq - 1; e >= p && (*e == ' ' || *e == '\t'); e--)
		*e = 0;
	*ret_name = p;
	p = eq + 1;
	while (*p == ' ' || *p == '\t')
		p++;
	for (e = p + strlen(p) - 1; e >= p && (*e == ' ' || *e == '\t' || *e == '\r'); e--)
		*e = 0;
	*ret_val = p;
	return 1;
}

/* "name = value" lines; the values are kept for the life of the process.
 * Flags (--first) take true or false. What is not log-level is kept in
 * d->config_rest, for SIGHUP to tell what changed. */
static void read_config(struct settings *st, const char *path)
{
	struct daemon *d = st->d;
	FILE *f = fopen(path, "re");
	struct cfs_sbuf rest = { 0 };
	char line[1024], *name, *val;
	unsigned lineno = 0;
	int r;

	if (!f)
		bad_usage("cannot read config file %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if ((r = config_line(line, &name, &val)) == 0)
			continue;
		if (r < 0)
			bad_usage("%s:%u: expected 'name = value'", path, lineno);
		const struct option *o = opts;
		while (o->name && strcmp(o->name, name) != 0)
			o++;
		if (!o->name || o->val == 'c' || o->val == 'h' || o->val == 'V' || o->val == OPT_CHECK)
			bad_usage("%s:%u: unknown setting '%s'", path, lineno, name);
		if (o->val != 'l')
			cfs_sb_printf(&rest, "%s=%s\n", name, val);
		apply(st, o->val, xstrdup(val));
	}
	fclose(f);
	d->config_rest = rest.p ? rest.p : xstrdup("");
}

/* ------------------------------------------------------------ service */

/*
 * Start-up checks that need no socket, shared by --check and a real start.
 * A loopback address advertised while listening on every interface is the
 * default config's trap: peers elsewhere would be told to reach 127.0.0.1.
 * A new ring is never started by accident on an address others can reach:
 * that takes --first (a loopback ring cannot be joined from elsewhere, so
 * tests and the demo need no flag).
 */
static bool ip_is_loopback(const struct cfs_addr *a)
{
	const uint8_t *ip;
	size_t n = cfs_addr_ip_bytes(a, &ip);
	static const uint8_t v6_loop[16] = { [15] = 1 };
	static const uint8_t v4_mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (n == 4)
		return ip[0] == 127;
	return memcmp(ip, v6_loop, 16) == 0 || (memcmp(ip, v4_mapped, 12) == 0 && ip[12] == 127);
}

/* RFC 1918 and RFC 6598 (carrier-grade NAT) IPv4: behind a router. */
static bool ip_is_private4(const struct cfs_addr *a)
{
	const uint8_t *ip;

	if (cfs_addr_ip_bytes(a, &ip) != 4)
		return false;
	return ip[0] == 10 || (ip[0] == 172 && (ip[1] & 0xf0) == 16) || (ip[0] == 192 && ip[1] == 168) ||
	       (ip[0] == 100 && (ip[1] & 0xc0) == 64);
}

#define PORTMAP_LIFETIME_S 3600
#define PORTMAP_WAIT_MS 1500

/* Behind a home router (a private address, no --addr given): ask the
 * router to forward our port, and tell peers its public address. Renewed
 * at half the lifetime; a new public address needs a restart (our node
 * IDs hash it). */
static void portmap_renew(uv_timer_t *t)
{
	struct daemon *d = t->data;
	char pub[64];
	const char *how = "";

	if (cfsd_portmap(d->port, PORTMAP_LIFETIME_S, PORTMAP_WAIT_MS, pub, sizeof(pub), &how) < 0)
		log_warn("the port mapping on the router could not be renewed; members may lose this server");
	else if (strcmp(pub, d->advertise))
		log_warn("the router's public address is now %s, not %s: restart cfsd to take it", pub,
		         d->advertise);
}

static void try_portmap(const struct settings *st)
{
	struct daemon *d = st->d;
	static char pub[64];
	const char *how = "";
	struct cfs_addr a;

	if (!d->map_port || d->advertise || !st->bind_host || cfs_addr_from_ip(&a, st->bind_host, 1) < 0 ||
	    !ip_is_private4(&a))
		return;
	int r = cfsd_portmap(d->port, PORTMAP_LIFETIME_S, PORTMAP_WAIT_MS, pub, sizeof(pub), &how);
	if (r == -ENETUNREACH)
		return; /* no default gateway: no router to ask */
	if (r < 0) {
		log_info("no port mapping on the router (NAT-PMP, UPnP-IGD): %s", strerror(-r));
		return;
	}
	log_info("the router forwards UDP port %u (%s): members reach this server at %s:%u", d->port, how, pub,
	         d->port);
	d->advertise = pub;
	uv_timer_init(d->loop, &d->portmap_timer);
	d->portmap_timer.data = d;
	uv_timer_start(&d->portmap_timer, portmap_renew, PORTMAP_LIFETIME_S * 500ull, PORTMAP_LIFETIME_S * 500ull);
	d->portmap_on = true;
}

static const char *advertised(const struct settings *st)
{
	struct daemon *d = st->d;
	if (d->advertise)
		return d->advertise;
	if (st->bind_host && strcmp(st->bind_host, "::") && strcmp(st->bind_host, "0.0.0.0"))
		return st->bind_host;
	return "127.0.0.1";
}

static void check_addresses(const struct settings *st)
{
	struct daemon *d = st->d;
	const char *adv = advertised(st), *bind = st->bind_host ? st->bind_host : "::";
	struct cfs_addr a;
	bool every = !strcmp(bind, "::") || !strcmp(bind, "0.0.0.0");

	if (cfs_addr_from_ip(&a, adv, 1) < 0)
		exit(2);
	if (every && ip_is_loopback(&a)) {
		log_error("cfsd would listen on every interface (bind %s) but tell its peers it is at "
		          "%s, where no other machine reaches it: set \"addr = IP\" in the config file "
		          "(--addr IP), the address peers reach this server at, or \"bind = 127.0.0.1\" "
		          "(--bind) for a ring on this machine only", bind, adv);
		exit(2);
	}
	if (!d->first && d->nboot == 0 && !ip_is_loopback(&a)) {
		log_error("no ring to join: set \"bootstrap = HOST:PORT\" in the config file "
		          "(--bootstrap) to join one through a member, or \"first = true\" (--first) "
		          "to start a new ring at %s", adv);
		exit(2);
	}
}

/* READY=1 once every virtual server has joined the ring. */
static void ready_tick(uv_timer_t *t)
{
	struct daemon *d = t->data;
	char ready[CFS_ADDR_STRLEN + 64], a[CFS_ADDR_STRLEN];

	for (uint32_t i = 0; i < chord_vnode_count(d->chord); i++)
		if (!chord_vnode_joined(d->chord, i))
			return;
	uv_timer_stop(t);
	if (d->ready_sent)
		return;
	d->ready_sent = true;
	snprintf(ready, sizeof(ready), "READY=1\nSTATUS=serving on %s, a member of the ring",
	         cfs_addr_str(&d->addr, a));
	notify(ready);
}

/* sd_notify(3)'s protocol without libsystemd: one datagram to the
 * AF_UNIX socket named by $NOTIFY_SOCKET ('@': the abstract namespace).
 * Quiet when there is none (not run by systemd with Type=notify). */
static void notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;
	int fd;

	if (!path || !*path || (path[0] != '/' && path[0] != '@') ||
	    (n = strlen(path)) >= sizeof(sa.sun_path))
		return;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = 0;
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa,
	           (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
		log_warn_errno(-errno, "cannot tell systemd %s through %s", state, path);
	close(fd);
}

/* --socket-group: members of the group reach the daemon (mode 0660). The
 * listener made the socket 0600; its group changes first, then its mode. */
static int share_socket(struct daemon *d)
{
	struct group *g;

	if (!d->sock_group)
		return 0;
	if (!(g = getgrnam(d->sock_group)))
		return log_error_errno(-ENOENT, "--socket-group %s: no such group (make install "
		                       "creates cfs)", d->sock_group);
	if (chown(d->sock_path, (uid_t)-1, g->gr_gid) < 0 || chmod(d->sock_path, 0660) < 0)
		return log_error_errno(-errno, "cannot give the control socket %s to the group %s",
		                       d->sock_path, d->sock_group);
	return 0;
}

/* SIGHUP: reread the config file. The log level applies now (unless the
 * command line gave one); any other change is reported as waiting for a
 * restart, for a ring position or a store bound changed under a running
 * daemon would need more care than a reload deserves. Nothing here exits. */
static void on_sighup(uv_signal_t *h, int sig)
{
	struct daemon *d = h->data;
	struct cfs_sbuf rest = { 0 };
	char line[1024], *name, *val, level[16] = "";
	enum cfs_log_level l;
	unsigned lineno = 0;
	FILE *f;

	if (!d->config) {
		log_info("SIGHUP: no config file (--config) to reload; nothing changed");
		return;
	}
	if (!(f = fopen(d->config, "re"))) {
		log_warn_errno(-errno, "SIGHUP: cannot read %s; nothing changed", d->config);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		int r = config_line(line, &name, &val);
		lineno++;
		if (r < 0)
			log_warn("SIGHUP: %s:%u: expected 'name = value'; line ignored", d->config, lineno);
		else if (r > 0 && !strcmp(name, "log-level"))
			snprintf(level, sizeof(level), "%s", val);
		else if (r > 0)
			cfs_sb_printf(&rest, "%s=%s\n", name, val);
	}
	fclose(f);
	if (d->level_given)
		log_info("SIGHUP: log level stays %s (given on the command line)", level_name());
	else if (level[0] && cfs_log_parse_level(level, &l) < 0)
		log_warn("SIGHUP: %s: log-level wants error, warn, info or debug, not '%s'; "
		         "it stays %s", d->config, level, level_name());
	else {
		cfs_log_set_level(level[0] ? l : CFS_LOG_INFO);
		log_info("SIGHUP: reloaded %s: log level %s", d->config, level_name());
	}
	if (strcmp(rest.p ? rest.p : "", d->config_rest ? d->config_rest : ""))
		log_warn("SIGHUP: settings other than log-level changed in %s: they take effect "
		         "when cfsd restarts", d->config);
	free(rest.p);
}

int main(int argc, char **argv)
{
	struct daemon *d = xcalloc(1, sizeof(*d));
	struct settings st = { .d = d, .port = CFSD_DEFAULT_PORT, .level = CFS_LOG_INFO };
	struct cfs_transport_config tc;
	struct cfs_addr self;
	char a[CFS_ADDR_STRLEN];
	bool check = false;
	int c, r;

	cfs_log_init(argv[0], CFS_LOG_INFO);
	chord_config_default(&d->cc);
	d->cc.reach_ms = CHORD_REACH_MS; /* a daemon checks that members can reach it */
	d->cc.unreachable_client = true;
	d->map_port = true;
	d->map_port = true;
	dhash_config_default(&d->dc);
	opterr = 0;
	/* First pass: only --config, --help and --version, and argument errors. */
	while ((c = getopt_long(argc, argv, SHORT_OPTS, opts, NULL)) != -1) {
		switch (c) {
		case 'c': st.config = optarg; break;
		case OPT_CHECK: check = true; break;
		case 'h': fputs(usage_text, stdout); return 0;
		case 'V': printf("cfsd %s\n", CFS_VERSION); return 0;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		case '?': bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (st.config)
		read_config(&st, st.config);
	optind = 0;
	while ((c = getopt_long(argc, argv, SHORT_OPTS, opts, NULL)) != -1) {
		apply(&st, c, optarg);
		d->level_given |= c == 'l';
	}
	d->level_given |= getenv("CFS_LOG_LEVEL") && *getenv("CFS_LOG_LEVEL");
	d->config = st.config;
	cfs_log_init(argv[0], st.level);
	if (cfs_crypto_init() < 0)
		return 1;
	if (!d->quota_given)
		d->dc.quota_bytes = d->dc.capacity_bytes / 10;
	if (d->dc.replicas > d->cc.nsucc)
		bad_usage("--replicas %u exceeds --successors %u: the successor list must "
		          "name every replica", d->dc.replicas, d->cc.nsucc);
	if (d->dc.lease_s > d->dc.max_lease_s && !d->lease_given)
		d->dc.lease_s = d->dc.max_lease_s;
	if (d->dc.lease_s > d->dc.max_lease_s)
		bad_usage("--lease-days exceeds --max-lease-days (%.4g days): this server would "
		          "grant less than its own default", (double)d->dc.max_lease_s / 86400);
	check_addresses(&st);

	if (!d->data_dir[0] && cfsd_default_data_dir(d->data_dir, sizeof(d->data_dir) - 32) < 0)
		bad_usage("the default data directory path is too long; use --data");
	if (check) {
		printf("cfsd: the settings are valid: port %lu, bind %s, address %s, %s, data %s\n",
		       st.port, st.bind_host ? st.bind_host : "::", advertised(&st),
		       d->nboot ? "joining a ring" : "starting a new ring", d->data_dir);
		return 0;
	}
	if ((r = cfs_mkdir_p(d->data_dir, 0700)) < 0) {
		log_error_errno(r, "cannot create data directory %s", d->data_dir);
		return 1;
	}
	if (lock_data_dir(d) < 0)
		return 1;
	if (st.sock)
		snprintf(d->sock_path, sizeof(d->sock_path), "%s", st.sock);
	else
		cfsd_socket_path(d->data_dir, d->sock_path, sizeof(d->sock_path));

	d->loop = uv_default_loop();
	d->started_us = cfs_now_us();
	cfs_transport_config_default(&tc);
	tc.host = st.bind_host;
	tc.port = (uint16_t)st.port;
	tc.upload_bytes_per_s = d->upload_bytes_per_s;
	if ((r = cfs_transport_new(d->loop, &tc, on_request, d, &d->tr)) < 0) {
		if (r == UV_EADDRINUSE)
			log_error("UDP port %lu is in use by another process; choose one with --port", st.port);
		else
			log_error("cannot serve on UDP port %lu: %s", st.port, uv_strerror(r));
		return 1;
	}
	cfs_transport_local_addr(d->tr, &d->addr);
	d->port = cfs_addr_port(&d->addr);
	try_portmap(&st);
	/* The address hashed into our IDs is the one peers reach us at. */
	d->advertise = advertised(&st);
	if (cfs_addr_from_ip(&self, d->advertise, cfs_addr_port(&d->addr)) < 0)
		return 1;
	d->addr = self;
	install_netmodel(d);
	d->cc.on_fatal = on_ring_fatal;
	d->cc.fatal_arg = d;
	/* A new ring is founded at once with no join target; with remembered
	 * peers, only once none of them answers. */
	d->cc.first = d->first || d->nboot == 0;
	if ((r = chord_new(d->loop, d->tr, &self, &d->cc, &d->chord)) < 0)
		return 1;
	char blocks[600];
	static char cache[600];
	snprintf(blocks, sizeof(blocks), "%s/blocks", d->data_dir);
	snprintf(cache, sizeof(cache), "%s/cache", d->data_dir);
	d->dc.cache_dir = cache;
	if ((r = dhash_server_new(d->loop, d->chord, blocks, &d->dc, &d->dhash)) < 0 ||
	    (r = dhash_client_new(d->chord, &d->dc, &d->client)) < 0) {
		log_error_errno(r, "cannot open the block store %s", blocks);
		dhash_server_free(d->dhash);
		chord_free(d->chord);
		cfs_transport_close(d->tr);
		cfs_loop_run(d->loop);
		return 1;
	}
	/* Pins renew well before a lease ends: a quarter of it, at most an
	 * hour, so a missed round or two costs nothing. */
	struct cfsd_pin_config pc = {
		.round_ms = d->pin_ms ? d->pin_ms
		            : (uint32_t)(d->dc.lease_s * 250 < CFSD_PIN_ROUND_MAX_MS
		                         ? d->dc.lease_s * 250 : CFSD_PIN_ROUND_MAX_MS),
		.lease_s = d->dc.lease_s,
		.store_bytes = d->dc.capacity_bytes ? d->dc.capacity_bytes : UINT64_MAX / 2,
		.ring_ready = ring_joined,
		.ring_ready_arg = d,
	};
	if (pc.round_ms < 100)
		pc.round_ms = 100;
	/* The denylist before any request is served: the server refuses its
	 * keys from the first STORE on. */
	char deny_path[600];
	snprintf(deny_path, sizeof(deny_path), "%s/%s", d->data_dir, CFSD_DENY_FILE);
	d->deny = cfsd_denylist_new(deny_path, CFSD_DENY_MAX);
	bool deny_ok = cfsd_denylist_load(d->deny) == 0;
	if (deny_ok && cfsd_denylist_keys(d->deny)) {
		uint32_t n;
		struct cfs_id *keys = cfsd_denylist_all_keys(d->deny, &n);
		uint32_t deleted = dhash_server_deny(d->dhash, keys, n);
		free(keys);
		log_info("denylist: %u keys denied (%s)%s", n, deny_path,
		         deleted ? "; copies found here deleted" : "");
	}
	if (deny_ok && cfsd_pinner_new(d->loop, d->client, d->data_dir, &pc, &d->pinner) == 0)
		d->serve = cfsd_serve_new(&(struct cfsd_serve_env){
			.chord = d->chord, .dhash = d->dhash, .client = d->client, .pinner = d->pinner,
			.deny = d->deny, .status = status_report, .leave = leave_soon, .arg = d });
	if (!d->pinner ||
	    cfs_listener_new(d->loop, d->sock_path, 0600, cfsd_serve_accept, d->serve, &d->ctl) < 0 ||
	    share_socket(d) < 0) {
		cfs_listener_close(d->ctl);
		free_pieces(d);
		cfs_loop_run(d->loop);
		return 1;
	}
	uv_signal_init(d->loop, &d->sigterm);
	uv_signal_init(d->loop, &d->sigint);
	uv_signal_init(d->loop, &d->sighup);
	uv_timer_init(d->loop, &d->fatal_timer);
	uv_timer_init(d->loop, &d->peers_timer);
	uv_timer_init(d->loop, &d->ready_timer);
	d->sigterm.data = d->sigint.data = d->sighup.data = d;
	d->fatal_timer.data = d->peers_timer.data = d->ready_timer.data = d;
	uv_signal_start(&d->sigterm, on_signal, SIGTERM);
	uv_signal_start(&d->sigint, on_signal, SIGINT);
	uv_signal_start(&d->sighup, on_sighup, SIGHUP);
	signal(SIGPIPE, SIG_IGN);

	d->metrics = cfsd_metrics_new(d->loop, d->tr, d->chord, status_json, d);
	if (d->metrics_addr && cfsd_metrics_listen(d->metrics, d->metrics_addr) < 0) {
		d->exit_status = 1;
		shut_down(d);
	} else {
		int remembered = cfsd_peers_load(d->chord, d->data_dir);
		bool joining = d->nboot > 0 || remembered > 0;
		d->peers_loaded = true; /* from now on the file is ours to rewrite */
		uv_timer_start(&d->peers_timer, peers_tick, 5000, 5000);
		chord_start(d->chord, d->boot, d->nboot);
		log_info("serving on %s with %u virtual server%s, %s; data %s, control %s",
		         cfs_addr_str(&d->addr, a), d->cc.vnodes, d->cc.vnodes == 1 ? "" : "s",
		         joining ? "joining a ring" : "starting a new ring", d->data_dir, d->sock_path);
		/* Ready once every virtual server has joined (at once for a new
		 * ring): a unit ordered after cfsd then finds a member. Until
		 * then systemd shows that it is joining. */
		char joining_st[CFS_ADDR_STRLEN + 64];
		snprintf(joining_st, sizeof(joining_st), "STATUS=serving on %s, joining a ring",
		         cfs_addr_str(&d->addr, a));
		notify(joining_st);
		uv_timer_start(&d->ready_timer, ready_tick, 0, 100);
	}
	cfs_loop_run(d->loop);
	uv_loop_close(d->loop);
	close(d->lock_fd);
	cfs_wan_free(&d->wan);
	free(d->config_rest);
	cfsd_serve_free(d->serve);
	log_info("stopped");
	int status = d->exit_status;
	free(d);
	return status;
}
