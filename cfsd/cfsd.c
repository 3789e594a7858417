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
 *
 * This file has the status report, the daemon's lifetime and main; the
 * options and the config file are in config.c, the checks and steps of
 * start-up in startup.c (daemon.h is what they share).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cfsd/daemon.h"

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
	struct cfsd_frepair_stats fr;
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
	S(U64, st.timeouts_deferred, "timeouts_deferred", "timeouts deferred behind earlier answers", NULL),
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
	S(U64, st.padding_out, "padding_out", "padding sent before long answers", NULL),
	S(U64, st.padding_in, "padding_in", "padding received", NULL),
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
	CFS_STAT_BEGIN("frag_repair", "fragment repair"),
	S(U64, fr.rounds, "rounds", "rounds", NULL),
	S(U64, fr.looked, "looked", "fragments looked at", NULL),
	S(U64, fr.checked, "checked", "keys counted", NULL),
	S(U64, fr.located, "located", "located fragment by fragment", NULL),
	S(U64, fr.enough, "enough", "at the threshold or above", NULL),
	S(U64, fr.repaired, "repaired", "repaired", NULL),
	S(U64, fr.stored, "stored", "fragments stored", NULL),
	S(U64, fr.bytes_read, "bytes_read", "fragment bytes read", "bytes"),
	S(U64, fr.bytes_stored, "bytes_stored", "stored", "bytes"),
	S(U64, fr.lost, "below_m", "below m", NULL),
	S(U64, fr.nowhere, "nowhere", "no holder to store on", NULL),
	S(U64, fr.failed, "failed", "failed", NULL),
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
	if (d->frepair)
		s->fr = *cfsd_frepair_stats(d->frepair);
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
	cfsd_frepair_free(d->frepair);
	d->frepair = NULL;
	dhash_client_free(d->repair_client);
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
	cfsd__notify("STOPPING=1");
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
	d->frepair_ms = CFSD_FREPAIR_MS_DEFAULT;
	d->frepair_keys = CFSD_FREPAIR_KEYS_DEFAULT;
	dhash_config_default(&d->dc);
	opterr = 0;
	/* First pass: only --config, --help and --version, and argument errors. */
	while ((c = getopt_long(argc, argv, SHORT_OPTS, cfsd__opts, NULL)) != -1) {
		switch (c) {
		case 'c': st.config = optarg; break;
		case OPT_CHECK: check = true; break;
		case 'h': fputs(cfsd__usage_text, stdout); return 0;
		case 'V': printf("cfsd %s\n", CFS_VERSION); return 0;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		case '?': bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (st.config)
		cfsd__read_config(&st, st.config);
	optind = 0;
	while ((c = getopt_long(argc, argv, SHORT_OPTS, cfsd__opts, NULL)) != -1) {
		cfsd__apply(&st, c, optarg);
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
	cfsd__check_addresses(&st);

	if (!d->data_dir[0] && cfsd_default_data_dir(d->data_dir, sizeof(d->data_dir) - 32) < 0)
		bad_usage("the default data directory path is too long; use --data");
	if (check) {
		printf("cfsd: the settings are valid: port %lu, bind %s, address %s, %s, data %s\n",
		       st.port, st.bind_host ? st.bind_host : "::", cfsd__advertised(&st),
		       d->nboot ? "joining a ring" : "starting a new ring", d->data_dir);
		return 0;
	}
	if ((r = cfs_mkdir_p(d->data_dir, 0700)) < 0) {
		log_error_errno(r, "cannot create data directory %s", d->data_dir);
		return 1;
	}
	if (cfsd__lock_data_dir(d) < 0)
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
	cfsd__try_portmap(&st);
	/* The address hashed into our IDs is the one peers reach us at. */
	d->advertise = cfsd__advertised(&st);
	if (cfs_addr_from_ip(&self, d->advertise, cfs_addr_port(&d->addr)) < 0)
		return 1;
	d->addr = self;
	cfsd__install_netmodel(d);
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
	/* the fragment repairer's client: its traffic in the background class */
	struct dhash_config rdc = d->dc;
	rdc.background = true;
	if ((r = dhash_server_new(d->loop, d->chord, blocks, &d->dc, &d->dhash)) < 0 ||
	    (r = dhash_client_new(d->chord, &d->dc, &d->client)) < 0 ||
	    (r = dhash_client_new(d->chord, &rdc, &d->repair_client)) < 0) {
		log_error_errno(r, "cannot open the block store %s", blocks);
		dhash_client_free(d->client);
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
	d->frepair = cfsd_frepair_new(d->loop, d->chord, d->dhash, d->repair_client, d->frepair_ms,
	                              d->frepair_keys);
	if (deny_ok && cfsd_pinner_new(d->loop, d->client, d->data_dir, &pc, &d->pinner) == 0)
		d->serve = cfsd_serve_new(&(struct cfsd_serve_env){
			.chord = d->chord, .dhash = d->dhash, .client = d->client, .pinner = d->pinner,
			.deny = d->deny, .status = status_report, .leave = leave_soon, .arg = d });
	if (!d->pinner ||
	    cfs_listener_new(d->loop, d->sock_path, 0600, cfsd_serve_accept, d->serve, &d->ctl) < 0 ||
	    cfsd__share_socket(d) < 0) {
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
	uv_signal_start(&d->sighup, cfsd__on_sighup, SIGHUP);
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
		cfsd__notify(joining_st);
		uv_timer_start(&d->ready_timer, cfsd__ready_tick, 0, 100);
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
