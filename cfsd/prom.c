/*
 * cfsd's Prometheus text (cfsd_metrics_from_json, cfsd/metrics.h): the
 * status report's JSON, flattened. A short table names the series
 * operators alert on (counters as cfs_*_total, gauges in base units:
 * seconds, bytes); every other number is exported as
 * cfs_status{path="dhash.sync.pushed"}. The JSON is our own, but the
 * flattener checks every byte and gives up with -EPROTO rather than
 * guess. No I/O: metrics.c serves the text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/metrics.h"

#define JSON_DEPTH_MAX 8
#define PATH_MAX_LEN 160

/* The named series: a JSON path of the status report, its name, type,
 * a factor to base units, and help. */
struct series {
	const char *path, *name;
	bool counter;
	double scale;
	const char *help;
};

static const struct series named[] = {
	{ "uptime_s", "cfs_uptime_seconds", false, 1, "Seconds since this cfsd started." },
	{ "rpc.calls", "cfs_rpc_out_total", true, 1, "RPCs this server sent (calls made)." },
	{ "rpc.replies", "cfs_rpc_out_replies_total", true, 1, "RPCs sent that got a reply." },
	{ "rpc.timeouts", "cfs_rpc_out_timeouts_total", true, 1, "RPCs sent that timed out." },
	{ "rpc.requests_in", "cfs_rpc_in_total", true, 1, "RPC requests received from peers and clients." },
	{ "rpc.replies_out", "cfs_rpc_in_replies_total", true, 1, "Replies sent to requests received." },
	{ "rpc.malformed", "cfs_rpc_in_malformed_total", true, 1, "Datagrams dropped as malformed." },
	{ "rpc.bytes_in", "cfs_network_in_bytes_total", true, 1, "UDP payload bytes received." },
	{ "rpc.bytes_out", "cfs_network_out_bytes_total", true, 1, "UDP payload bytes sent." },
	{ "rpc.datagrams_out", "cfs_network_out_datagrams_total", true, 1, "UDP datagrams sent." },
	{ "rpc.inflight", "cfs_rpc_out_in_flight", false, 1, "RPCs sent and not yet ended." },
	{ "rpc.srtt_us", "cfs_rpc_srtt_seconds", false, 1e-6, "Smoothed round trip over all RPCs." },
	{ "ring.virtual_servers", "cfs_ring_virtual_servers", false, 1, "Virtual servers this cfsd runs." },
	{ "ring.estimated_n", "cfs_ring_estimated_size", false, 1, "Ring size estimate, in virtual servers." },
	{ "ring.lookups.done", "cfs_lookups_total", true, 1, "Lookups this server started and finished." },
	{ "ring.lookups.failed", "cfs_lookups_failed_total", true, 1, "Lookups that found no live route." },
	{ "dhash.blocks", "cfs_store_blocks", false, 1, "Blocks stored here (replicas)." },
	{ "dhash.bytes", "cfs_store_bytes", false, 1, "Bytes of the blocks stored here." },
	{ "dhash.capacity", "cfs_store_capacity_bytes", false, 1, "What replicas and cache may fill (0: no bound)." },
	{ "dhash.stores", "cfs_store_accepted_total", true, 1, "Blocks accepted by STORE." },
	{ "dhash.refused_total", "cfs_store_refused_total", true, 1, "STOREs refused." },
	{ "dhash.fetches", "cfs_fetches_served_total", true, 1, "FETCH requests served." },
	{ "dhash.fetch_misses", "cfs_fetch_misses_total", true, 1, "FETCHes for blocks not held here." },
	{ "client.gets", "cfs_client_gets_total", true, 1, "Blocks fetched through this server." },
	{ "client.gets_failed", "cfs_client_gets_failed_total", true, 1, "Gets that failed." },
	{ "client.puts", "cfs_client_puts_total", true, 1, "Blocks put through this server." },
	{ "client.puts_failed", "cfs_client_puts_failed_total", true, 1, "Puts that failed." },
	{ "control.requests", "cfs_control_requests_total", true, 1, "Requests on the control socket." },
	{ "traffic.in_bytes_per_s", "cfs_traffic_in_bytes_per_second", false, 1,
	  "Bytes received per second over the last window (cfsctl status)." },
	{ "traffic.out_bytes_per_s", "cfs_traffic_out_bytes_per_second", false, 1,
	  "Bytes sent per second over the last window." },
};

/* A tiny reader of our own JSON: numbers and booleans become (path, value)
 * leaves; strings, nulls and arrays are skipped. */
struct jr {
	const char *p;
	void (*leaf)(void *arg, const char *path, double v);
	void *arg;
	int depth;
};

static void ws(struct jr *j)
{
	while (*j->p == ' ' || *j->p == '\n' || *j->p == '\t' || *j->p == '\r')
		j->p++;
}

static int skip_string(struct jr *j, char *key, size_t cap)
{
	size_t n = 0;

	if (*j->p != '"')
		return -EPROTO;
	for (j->p++; *j->p != '"'; j->p++) {
		if (!*j->p)
			return -EPROTO;
		if (*j->p == '\\' && !*++j->p)
			return -EPROTO;
		if (key && n + 1 < cap)
			key[n++] = *j->p;
	}
	j->p++;
	if (key)
		key[n] = 0;
	return 0;
}

static int value(struct jr *j, char *path, size_t plen, bool emit);

static int members(struct jr *j, char *path, size_t plen, bool emit)
{
	char key[64];
	int r;

	j->p++; /* '{' */
	ws(j);
	if (*j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		ws(j);
		if ((r = skip_string(j, key, sizeof(key))) < 0)
			return r;
		ws(j);
		if (*j->p != ':') /* never past the terminating NUL */
			return -EPROTO;
		j->p++;
		size_t n = plen;
		int w = snprintf(path + plen, PATH_MAX_LEN - plen, "%s%s", plen ? "." : "", key);
		if (w < 0 || plen + (size_t)w >= PATH_MAX_LEN)
			return -EPROTO;
		if ((r = value(j, path, plen + (size_t)w, emit)) < 0)
			return r;
		path[n] = 0;
		ws(j);
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p != '}')
			return -EPROTO;
		j->p++;
		return 0;
	}
}

static int value(struct jr *j, char *path, size_t plen, bool emit)
{
	int r;

	ws(j);
	if (++j->depth > JSON_DEPTH_MAX)
		return -EPROTO;
	if (*j->p == '{') {
		r = members(j, path, plen, emit);
	} else if (*j->p == '[') {
		j->p++;
		ws(j);
		r = 0;
		if (*j->p == ']')
			j->p++;
		else
			for (;;) {
				if ((r = value(j, path, plen, false)) < 0)
					break;
				ws(j);
				if (*j->p == ',') {
					j->p++;
					continue;
				}
				r = *j->p == ']' ? 0 : -EPROTO;
				if (r == 0)
					j->p++;
				break;
			}
	} else if (*j->p == '"') {
		r = skip_string(j, NULL, 0);
	} else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
		bool t = *j->p == 't';
		j->p += t ? 4 : 5;
		if (emit)
			j->leaf(j->arg, path, t);
		r = 0;
	} else if (!strncmp(j->p, "null", 4)) {
		j->p += 4;
		r = 0;
	} else {
		char *end;
		double v = strtod(j->p, &end);
		r = end == j->p ? -EPROTO : 0;
		j->p = end;
		if (!r && emit)
			j->leaf(j->arg, path, v);
	}
	j->depth--;
	return r;
}

static int json_walk(const char *json, void (*leaf)(void *arg, const char *path, double v), void *arg)
{
	struct jr j = { json, leaf, arg, 0 };
	char path[PATH_MAX_LEN] = "";

	ws(&j);
	if (*j.p != '{')
		return -EPROTO;
	int r = value(&j, path, 0, true);
	ws(&j);
	return r < 0 ? r : *j.p ? -EPROTO : 0;
}

struct prom {
	struct cfs_sbuf *out;
	double vals[CFS_ARRAY_SIZE(named)];
	bool have[CFS_ARRAY_SIZE(named)];
	bool any_other;
};

/* Whole numbers exactly (counters), others to nine digits. */
static void sample_value(struct cfs_sbuf *b, double v)
{
	if (v < 9007199254740992.0 && v > -9007199254740992.0 && v == (double)(int64_t)v)
		cfs_sb_printf(b, "%.0f\n", v);
	else
		cfs_sb_printf(b, "%.9g\n", v);
}

static void prom_named_leaf(void *arg, const char *path, double v)
{
	struct prom *p = arg;

	for (size_t i = 0; i < CFS_ARRAY_SIZE(named); i++)
		if (!strcmp(named[i].path, path)) {
			p->vals[i] = v * named[i].scale;
			p->have[i] = true;
		}
}

static void prom_other_leaf(void *arg, const char *path, double v)
{
	struct prom *p = arg;

	for (size_t i = 0; i < CFS_ARRAY_SIZE(named); i++)
		if (!strcmp(named[i].path, path))
			return;
	if (!p->any_other) {
		cfs_sb_printf(p->out, "# HELP cfs_status Every other number of cfsctl status --json, "
		              "by its JSON path (counters and gauges alike).\n# TYPE cfs_status gauge\n");
		p->any_other = true;
	}
	cfs_sb_printf(p->out, "cfs_status{path=\"%s\"} ", path);
	sample_value(p->out, v);
}

int cfsd_metrics_from_json(const char *json, struct cfs_sbuf *out)
{
	struct prom p = { .out = out };
	int r;

	if ((r = json_walk(json, prom_named_leaf, &p)) < 0)
		return r;
	for (size_t i = 0; i < CFS_ARRAY_SIZE(named); i++) {
		if (!p.have[i])
			continue;
		cfs_sb_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s ", named[i].name, named[i].help,
		              named[i].name, named[i].counter ? "counter" : "gauge", named[i].name);
		sample_value(out, p.vals[i]);
	}
	return json_walk(json, prom_other_leaf, &p);
}
