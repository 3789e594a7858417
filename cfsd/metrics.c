/*
 * cfsd's operator view: rates, neighbours, the Prometheus endpoint (see
 * cfsd/metrics.h for what each promises).
 *
 * The endpoint renders the same JSON that `cfsctl status --json` prints,
 * so the two cannot disagree: a short table names the series operators
 * alert on (counters as cfs_*_total, gauges in base units: seconds,
 * bytes), and every other number of the report is exported as
 * cfs_status{path="dhash.sync.pushed"}, so nothing the status shows is
 * missing from the scrape. The JSON is our own, written a few lines up the
 * call stack; the flattener still checks every byte and gives up with
 * -EPROTO rather than guess. The flattener and the series table are in
 * prom.c; this file keeps the state, the neighbours and the endpoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/metrics.h"

#define PEERS_MAX 64
#define PROBE_TIMEOUT_MS 2000

/* ------------------------------------------------------------ state */

struct sample {
	uint64_t at_us, bytes_in, bytes_out, rpcs_in, rpcs_out;
};

struct peer {
	struct cfs_node node;     /* the last table entry seen at this address */
	char role[24];            /* "pred", "succ 3", of its first virtual server */
	uint32_t vnode;
	double srtt_us;           /* 0: never answered */
	uint64_t rtt_us;          /* the last answer's */
	uint64_t min_rtt_us;      /* the least answer's: the path's own delay */
	uint64_t heard_us;        /* when it last answered (0: never) */
	uint32_t misses;          /* probes unanswered since */
	bool probing, current;
};

struct metrics_client {
	uv_tcp_t tcp;
	uv_timer_t idle;
	cfsd_metrics_t *m;
	char req[CFSD_METRICS_REQ_MAX];
	size_t len;
	bool answered;
	struct cfs_addr peer;     /* the client's address (port 0 when unknown) */
	uint64_t since_ms;        /* accepted at (loop time) */
	int closes;               /* handles still to close */
	uv_write_t w;
	char *out;
	struct metrics_client *next, **pprev; /* cfsd_metrics.conns */
};

struct cfsd_metrics {
	uv_loop_t *loop;
	cfs_transport_t *tr;
	chord_t *chord;
	cfsd_status_json_fn status;
	void *status_arg;
	uv_timer_t tick;
	uint64_t ticks;
	struct sample s[CFSD_RATE_WINDOW_S + 1];
	uint32_t ns, head;        /* samples kept, the newest */
	struct peer peers[PEERS_MAX];
	uint32_t npeers;
	uv_tcp_t server;
	bool listening, closing;
	uint32_t clients;
	struct metrics_client *conns;
	uint64_t scrapes, refused, evicted;
	int pending;              /* probes in flight + handles open */
	struct cfs_msg ping;
};

static void maybe_free(cfsd_metrics_t *m)
{
	if (m->closing && m->pending == 0)
		free(m);
}

static void on_handle_closed(uv_handle_t *h)
{
	cfsd_metrics_t *m = h->data;

	m->pending--;
	maybe_free(m);
}

/* ------------------------------------------------------------ rates */

static void sample_now(cfsd_metrics_t *m)
{
	struct cfs_transport_stats *st = xmalloc(sizeof(*st)); /* a histogram: not on the stack */

	cfs_transport_get_stats(m->tr, st);
	m->head = (m->head + 1) % (CFSD_RATE_WINDOW_S + 1);
	m->s[m->head] = (struct sample){ cfs_now_us(), st->bytes_in, st->bytes_out, st->requests_in,
	                                 st->calls };
	if (m->ns < CFSD_RATE_WINDOW_S + 1)
		m->ns++;
	free(st);
}

struct rates {
	double in_bytes, out_bytes, in_rpcs, out_rpcs; /* per second */
	double window_s;
	uint64_t bytes_in, bytes_out, rpcs_in, rpcs_out; /* totals */
};

static void rates_get(const cfsd_metrics_t *m, struct rates *r)
{
	const struct sample *a = &m->s[(m->head + CFSD_RATE_WINDOW_S + 2 - m->ns) % (CFSD_RATE_WINDOW_S + 1)];
	const struct sample *z = &m->s[m->head];
	double dt = (double)(z->at_us - a->at_us) / 1e6;

	*r = (struct rates){ .window_s = dt, .bytes_in = z->bytes_in, .bytes_out = z->bytes_out,
	                     .rpcs_in = z->rpcs_in, .rpcs_out = z->rpcs_out };
	if (m->ns < 2 || dt <= 0)
		return;
	r->in_bytes = (double)(z->bytes_in - a->bytes_in) / dt;
	r->out_bytes = (double)(z->bytes_out - a->bytes_out) / dt;
	r->in_rpcs = (double)(z->rpcs_in - a->rpcs_in) / dt;
	r->out_rpcs = (double)(z->rpcs_out - a->rpcs_out) / dt;
}

/* ------------------------------------------------------------ neighbours */

static struct peer *peer_at(cfsd_metrics_t *m, const struct cfs_addr *a)
{
	for (uint32_t i = 0; i < m->npeers; i++)
		if (cfs_addr_eq(&m->peers[i].node.addr, a))
			return &m->peers[i];
	return NULL;
}

/* The neighbour set now: each virtual server's predecessor, then its
 * successors; one entry per address (the first role it was seen in). */
static void neighbours_refresh(cfsd_metrics_t *m)
{
	const struct cfs_node *list[CHORD_SUCC_MAX];
	uint32_t nv = chord_vnode_count(m->chord);

	for (uint32_t i = 0; i < m->npeers; i++)
		m->peers[i].current = false;
	for (uint32_t v = 0; v < nv; v++) {
		const struct cfs_node *self = chord_vnode_self(m->chord, v);
		const struct cfs_node *pred = chord_vnode_pred(m->chord, v);
		uint32_t n = chord_vnode_succs(m->chord, v, list);
		for (int64_t j = -1; j < (int64_t)n; j++) {
			const struct cfs_node *x = j < 0 ? pred : list[j];
			if (!x || cfs_addr_eq(&x->addr, &self->addr))
				continue;
			struct peer *p = peer_at(m, &x->addr);
			if (!p) {
				/* A full table keeps the neighbours it has; the
				 * rest wait for a slot (64 is far above 1 + r). */
				uint32_t k;
				for (k = 0; k < m->npeers && (m->peers[k].current || m->peers[k].probing); k++)
					;
				if (k == PEERS_MAX)
					continue;
				if (k == m->npeers)
					m->npeers++;
				p = &m->peers[k];
				*p = (struct peer){ 0 };
			} else if (p->current) {
				continue;
			}
			p->node = *x;
			p->vnode = v;
			if (j < 0)
				snprintf(p->role, sizeof(p->role), "pred");
			else
				snprintf(p->role, sizeof(p->role), "succ %u", (unsigned)j);
			p->current = true;
		}
	}
	/* Forget who left the tables, once no probe of theirs is out. */
	uint32_t w = 0;
	for (uint32_t i = 0; i < m->npeers; i++)
		if (m->peers[i].current || m->peers[i].probing)
			m->peers[w++] = m->peers[i];
	m->npeers = w;
}

struct probe {
	cfsd_metrics_t *m;
	struct cfs_addr addr;
};

static void on_probe(void *arg, int status, const struct cfs_msg *reply,
                     const struct cfs_rpc_result *res)
{
	struct probe *pr = arg;
	cfsd_metrics_t *m = pr->m;
	struct peer *p;

	m->pending--;
	if (!m->closing && status != -ECANCELED && (p = peer_at(m, &pr->addr))) {
		p->probing = false;
		if (status == 0 && res->rtt_us) {
			double rtt = (double)res->rtt_us;
			/* RFC 6298 2.3's gain, as the transport's own estimate */
			p->srtt_us = p->srtt_us > 0 ? p->srtt_us + (rtt - p->srtt_us) / 8 : rtt;
			p->rtt_us = res->rtt_us;
			if (!p->min_rtt_us || res->rtt_us < p->min_rtt_us)
				p->min_rtt_us = res->rtt_us;
			p->heard_us = cfs_now_us();
			p->misses = 0;
		} else {
			p->misses++;
		}
	}
	free(pr);
	maybe_free(m);
}

static void probe_round(cfsd_metrics_t *m)
{
	neighbours_refresh(m);
	for (uint32_t i = 0; i < m->npeers; i++) {
		struct peer *p = &m->peers[i];
		if (!p->current || p->probing)
			continue;
		struct probe *pr = xmalloc(sizeof(*pr));
		*pr = (struct probe){ m, p->node.addr };
		cfs_msg_init(&m->ping, CFS_MSG_PING);
		if (chord_call(m->chord, &p->node, &m->ping, PROBE_TIMEOUT_MS, on_probe, pr) < 0) {
			free(pr);
			continue;
		}
		p->probing = true;
		m->pending++;
	}
}

static void on_tick(uv_timer_t *t)
{
	cfsd_metrics_t *m = t->data;

	sample_now(m);
	if (m->ticks++ % (CFSD_PROBE_MS / 1000) == 0)
		probe_round(m);
}

/* ------------------------------------------------------------ status */

static void neighbours_text(cfsd_metrics_t *m, struct cfs_sbuf *b)
{
	uint64_t now = cfs_now_us();
	char a[CFS_ADDR_STRLEN], id[9], h1[CFS_HUMAN_LEN], h2[CFS_HUMAN_LEN], h3[CFS_HUMAN_LEN];

	if (m->npeers == 0) {
		cfs_sb_printf(b, "%-11s none yet (alone, or still joining)\n", "neighbours");
		return;
	}
	cfs_sb_printf(b, "%-11s %-5s %-8s %-8s %-24s %9s %9s %11s\n", "neighbours", "vnode", "role",
	              "id", "address", "rtt", "srtt", "last heard");
	for (uint32_t i = 0; i < m->npeers; i++) {
		const struct peer *p = &m->peers[i];
		if (!p->current)
			continue;
		const char *heard = p->heard_us ? cfs_human_duration(h3, (now - p->heard_us) / 1000000)
		                    : p->misses ? "never" : "-";
		cfs_sb_printf(b, "%-11s %-5u %-8s %-8s %-24s %9s %9s %7s%s", "", p->vnode, p->role,
		              cfs_id_short(&p->node.id, id), cfs_addr_str(&p->node.addr, a),
		              p->heard_us ? cfs_human_us(h1, (double)p->rtt_us) : "-",
		              p->heard_us ? cfs_human_us(h2, p->srtt_us) : "-", heard,
		              p->heard_us ? " ago" : "");
		if (p->misses)
			cfs_sb_printf(b, "  (%u unanswered)", p->misses);
		cfs_sb_printf(b, "\n");
	}
}

static void neighbours_json(cfsd_metrics_t *m, struct cfs_sbuf *b)
{
	uint64_t now = cfs_now_us();
	char a[CFS_ADDR_STRLEN], hex[65];
	bool first = true;

	cfs_sb_printf(b, ",\"neighbours\":[");
	for (uint32_t i = 0; i < m->npeers; i++) {
		const struct peer *p = &m->peers[i];
		if (!p->current)
			continue;
		cfs_sb_printf(b, "%s{\"vnode\":%u,\"role\":", first ? "" : ",", p->vnode);
		cfs_sb_json_str(b, p->role);
		cfs_sb_printf(b, ",\"id\":\"%s\",\"addr\":", cfs_id_hex(&p->node.id, hex));
		cfs_sb_json_str(b, cfs_addr_str(&p->node.addr, a));
		cfs_sb_printf(b, ",\"rtt_us\":%llu,\"min_rtt_us\":%llu,\"srtt_us\":%.0f,\"heard_ms_ago\":%lld,\"misses\":%u}",
		              (unsigned long long)p->rtt_us, (unsigned long long)p->min_rtt_us, p->srtt_us,
		              p->heard_us ? (long long)((now - p->heard_us) / 1000) : -1LL, p->misses);
		first = false;
	}
	cfs_sb_printf(b, "]");
}

struct traffic_snap {
	struct rates r;
	uint32_t window;
};

#define T(field, name, label, unit) \
	CFS_STAT_D(struct traffic_snap, r.field, 1, name, label, unit)
static const struct cfs_stat traffic_stats[] = {
	CFS_STAT_BEGIN("traffic", "traffic"),
	CFS_STAT(U32, struct traffic_snap, window, "window_s", "over the last", "s"),
	T(in_bytes, "in_bytes_per_s", "in", "bytes/s"),
	T(out_bytes, "out_bytes_per_s", "out", "bytes/s"),
	T(in_rpcs, "in_rpcs_per_s", "RPCs in", "/s"),
	T(out_rpcs, "out_rpcs_per_s", "RPCs out", "/s"),
	CFS_STAT_CLOSE,
};
#undef T

void cfsd_metrics_status(cfsd_metrics_t *m, struct cfs_sbuf *b, bool json)
{
	struct traffic_snap t;
	bool first = false;

	rates_get(m, &t.r);
	t.window = (uint32_t)(t.r.window_s + 0.5);
	cfs_stat_render(b, json, traffic_stats, CFS_ARRAY_SIZE(traffic_stats), &t, &first);
	if (json)
		neighbours_json(m, b);
	else
		neighbours_text(m, b);
}

/* ------------------------------------------------------------ Prometheus */

/* The neighbours' series; the rest of the text is made in prom.c. */
static void prom_neighbours(cfsd_metrics_t *m, struct cfs_sbuf *b)
{
	char a[CFS_ADDR_STRLEN];
	uint64_t now = cfs_now_us();

	cfs_sb_printf(b, "# HELP cfs_neighbour_rtt_seconds Smoothed round trip to a ring neighbour "
	              "(cfsd's own PING every %u s).\n# TYPE cfs_neighbour_rtt_seconds gauge\n",
	              CFSD_PROBE_MS / 1000);
	for (uint32_t i = 0; i < m->npeers; i++)
		if (m->peers[i].current && m->peers[i].heard_us)
			cfs_sb_printf(b, "cfs_neighbour_rtt_seconds{vnode=\"%u\",role=\"%s\",addr=\"%s\"} %.6f\n",
			              m->peers[i].vnode, m->peers[i].role,
			              cfs_addr_str(&m->peers[i].node.addr, a), m->peers[i].srtt_us / 1e6);
	cfs_sb_printf(b, "# HELP cfs_neighbour_last_heard_seconds Seconds since a ring neighbour last "
	              "answered.\n# TYPE cfs_neighbour_last_heard_seconds gauge\n");
	for (uint32_t i = 0; i < m->npeers; i++)
		if (m->peers[i].current && m->peers[i].heard_us)
			cfs_sb_printf(b, "cfs_neighbour_last_heard_seconds{vnode=\"%u\",role=\"%s\",addr=\"%s\"} %.3f\n",
			              m->peers[i].vnode, m->peers[i].role,
			              cfs_addr_str(&m->peers[i].node.addr, a),
			              (double)(now - m->peers[i].heard_us) / 1e6);
	cfs_sb_printf(b, "# HELP cfs_metrics_scrapes_total Answers to GET /metrics.\n"
	              "# TYPE cfs_metrics_scrapes_total counter\ncfs_metrics_scrapes_total %llu\n",
	              (unsigned long long)m->scrapes);
	cfs_sb_printf(b, "# HELP cfs_metrics_connections_closed_total Connections closed unanswered "
	              "to make room for newer ones (slow or idle clients).\n"
	              "# TYPE cfs_metrics_connections_closed_total counter\n"
	              "cfs_metrics_connections_closed_total %llu\n",
	              (unsigned long long)m->evicted);
}

/* ------------------------------------------------------------ HTTP */

static void client_closed(uv_handle_t *h)
{
	struct metrics_client *cl = h->data;
	cfsd_metrics_t *m = cl->m;

	m->pending--;
	if (--cl->closes == 0) {
		m->clients--;
		if ((*cl->pprev = cl->next))
			cl->next->pprev = cl->pprev;
		free(cl->out);
		free(cl);
	}
	maybe_free(m);
}

static void client_close(struct metrics_client *cl)
{
	if (uv_is_closing((uv_handle_t *)&cl->tcp))
		return;
	uv_close((uv_handle_t *)&cl->tcp, client_closed);
	uv_close((uv_handle_t *)&cl->idle, client_closed);
}

static void on_written(uv_write_t *w, int status)
{
	client_close(w->data);
}

static void respond(struct metrics_client *cl, const char *code, const char *type, const char *body,
                    size_t len)
{
	struct cfs_sbuf b = { 0 };

	cl->answered = true;
	uv_read_stop((uv_stream_t *)&cl->tcp);
	cfs_sb_printf(&b, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	              "Connection: close\r\n\r\n", code, type, len);
	cfs_sb_printf(&b, "%.*s", (int)len, body);
	cl->out = b.p;
	uv_buf_t buf = uv_buf_init(b.p, (unsigned)b.len);
	cl->w.data = cl;
	if (uv_write(&cl->w, (uv_stream_t *)&cl->tcp, &buf, 1, on_written) < 0)
		client_close(cl);
}

static void answer(struct metrics_client *cl)
{
	cfsd_metrics_t *m = cl->m;
	char method[8] = "", target[64] = "";
	static const char nf[] = "not found: this server has only /metrics\n";

	/* "GET /metrics HTTP/1.1": a query string is allowed and ignored */
	if (sscanf(cl->req, "%7s %63s HTTP/1.", method, target) != 2 || strcmp(method, "GET") != 0 ||
	    (strcmp(target, "/metrics") != 0 && strncmp(target, "/metrics?", 9) != 0)) {
		respond(cl, "404 Not Found", "text/plain; charset=utf-8", nf, sizeof(nf) - 1);
		return;
	}
	struct cfs_sbuf json = { 0 }, out = { 0 };
	m->scrapes++;
	m->status(m->status_arg, &json);
	if (cfsd_metrics_from_json(json.p, &out) < 0) {
		static const char ie[] = "the status report did not parse\n";
		log_warn("metrics: the status report did not parse");
		respond(cl, "500 Internal Server Error", "text/plain; charset=utf-8", ie, sizeof(ie) - 1);
	} else {
		prom_neighbours(m, &out);
		respond(cl, "200 OK", "text/plain; version=0.0.4; charset=utf-8", out.p, out.len);
	}
	free(json.p);
	free(out.p);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct metrics_client *cl = h->data;

	*buf = uv_buf_init(cl->req + cl->len, (unsigned)(sizeof(cl->req) - 1 - cl->len));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct metrics_client *cl = s->data;
	static const char big[] = "request head too large\n";

	if (n < 0) {
		client_close(cl);
		return;
	}
	cl->len += (size_t)n;
	cl->req[cl->len] = 0;
	if (strstr(cl->req, "\r\n\r\n") || strstr(cl->req, "\n\n"))
		answer(cl);
	else if (cl->len >= sizeof(cl->req) - 1)
		respond(cl, "431 Request Header Fields Too Large", "text/plain; charset=utf-8", big,
		        sizeof(big) - 1);
}

static void on_idle(uv_timer_t *t)
{
	client_close(t->data);
}

/* Make room for a new connection (conns is newest first). An address
 * holding CFSD_METRICS_PER_IP connections loses its oldest one still
 * sending its request after CFSD_METRICS_GRACE_MS, or, with none that old,
 * the newcomer is refused: one address cannot crowd out the others. Past
 * CFSD_METRICS_CLIENTS in all, the oldest such connection of any address
 * is closed; with none that old, up to 4 x CFSD_METRICS_CLIENTS are kept.
 * Younger connections are clients at work. False: refuse the newcomer. */
static bool make_room(cfsd_metrics_t *m, const struct metrics_client *nw)
{
	struct metrics_client *old_ip = NULL, *old = NULL;
	uint32_t from_ip = 0, live = 0;
	uint64_t now = uv_now(m->loop);

	for (struct metrics_client *cl = m->conns; cl; cl = cl->next) {
		if (cl == nw || uv_is_closing((uv_handle_t *)&cl->tcp))
			continue;
		live++;
		bool same = cfs_addr_same_ip(&cl->peer, &nw->peer);
		from_ip += same;
		if (!cl->answered && now - cl->since_ms >= CFSD_METRICS_GRACE_MS) {
			old = cl;
			if (same)
				old_ip = cl;
		}
	}
	struct metrics_client *victim = from_ip >= CFSD_METRICS_PER_IP ? old_ip
	                        : live >= CFSD_METRICS_CLIENTS ? old : NULL;
	if (victim) {
		m->evicted++;
		client_close(victim);
		return true;
	}
	return from_ip < CFSD_METRICS_PER_IP && live < 4 * CFSD_METRICS_CLIENTS;
}

static void on_connection(uv_stream_t *server, int status)
{
	cfsd_metrics_t *m = server->data;
	struct metrics_client *cl;

	if (status < 0 || m->closing)
		return;
	cl = xcalloc(1, sizeof(*cl));
	cl->m = m;
	uv_tcp_init(m->loop, &cl->tcp);
	uv_timer_init(m->loop, &cl->idle);
	cl->tcp.data = cl->idle.data = cl;
	cl->closes = 2;
	m->pending += 2;
	m->clients++;
	if ((cl->next = m->conns))
		m->conns->pprev = &cl->next;
	cl->pprev = &m->conns;
	m->conns = cl;
	if (uv_accept(server, (uv_stream_t *)&cl->tcp) < 0) {
		m->refused++;
		client_close(cl);
		return;
	}
	int alen = (int)sizeof(cl->peer);
	if (uv_tcp_getpeername(&cl->tcp, &cl->peer.sa, &alen) < 0)
		memset(&cl->peer, 0, sizeof(cl->peer));
	cl->since_ms = uv_now(m->loop);
	if (!make_room(m, cl)) {
		m->refused++;
		client_close(cl);
		return;
	}
	uv_timer_start(&cl->idle, on_idle, CFSD_METRICS_IDLE_MS, 0);
	if (uv_read_start((uv_stream_t *)&cl->tcp, on_alloc, on_read) < 0)
		client_close(cl);
}

int cfsd_metrics_listen(cfsd_metrics_t *m, const char *addr_port)
{
	struct cfs_addr a;
	int r;

	if (cfs_addr_parse(&a, addr_port) < 0 || cfs_addr_port(&a) == 0)
		return log_error_errno(-EINVAL, "--metrics wants IP:PORT ([IPv6]:PORT), not '%s'", addr_port);
	uv_tcp_init(m->loop, &m->server);
	m->server.data = m;
	m->pending++;
	m->listening = true;
	if ((r = uv_tcp_bind(&m->server, &a.sa, 0)) < 0 ||
	    (r = uv_listen((uv_stream_t *)&m->server, 128, on_connection)) < 0)
		return log_error_errno(r, "cannot serve metrics on TCP %s: %s", addr_port, uv_strerror(r));
	log_info("metrics: serving Prometheus text on http://%s/metrics", addr_port);
	return 0;
}

/* ------------------------------------------------------------ lifetime */

cfsd_metrics_t *cfsd_metrics_new(uv_loop_t *loop, cfs_transport_t *t, chord_t *c,
                                 cfsd_status_json_fn status, void *status_arg)
{
	cfsd_metrics_t *m = xcalloc(1, sizeof(*m));

	m->loop = loop;
	m->tr = t;
	m->chord = c;
	m->status = status;
	m->status_arg = status_arg;
	uv_timer_init(loop, &m->tick);
	m->tick.data = m;
	m->pending++;
	sample_now(m);
	uv_timer_start(&m->tick, on_tick, 1000, 1000);
	return m;
}

void cfsd_metrics_close(cfsd_metrics_t *m)
{
	if (!m || m->closing)
		return;
	m->closing = true;
	m->pending++; /* hold m while closing */
	uv_close((uv_handle_t *)&m->tick, on_handle_closed);
	if (m->listening)
		uv_close((uv_handle_t *)&m->server, on_handle_closed);
	for (struct metrics_client *cl = m->conns; cl; cl = cl->next)
		client_close(cl); /* a write in flight ends with ECANCELED */
	/* Probes end when chord_free cancels them. */
	m->pending--;
	maybe_free(m);
}
