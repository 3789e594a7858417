/*
 * The one status renderer (see cfs_stat in cfs.h): a table walked once per
 * report, as JSON members or as text lines. Text is for people, so byte
 * counts, rates and times are shown in human units (an operator
 * reading "bytes in 48213377" has to count digits); JSON keeps the raw
 * numbers for scripts and for the metrics endpoint.
 */
#include <stdio.h>
#include <string.h>

#include "common/cfs.h"

#define HEADING_WIDTH 11
#define DEPTH_MAX 8

static void value(struct cfs_sbuf *b, bool json, const struct cfs_stat *e, const void *snap)
{
	const char *p = (const char *)snap + e->off;

	switch (e->kind) {
	case CFS_STAT_U64: {
		uint64_t v;
		memcpy(&v, p, sizeof(v));
		cfs_sb_printf(b, "%llu", (unsigned long long)v);
		break;
	}
	case CFS_STAT_U32: {
		uint32_t v;
		memcpy(&v, p, sizeof(v));
		cfs_sb_printf(b, "%u", v);
		break;
	}
	case CFS_STAT_DBL: {
		double v;
		memcpy(&v, p, sizeof(v));
		cfs_sb_printf(b, "%.*f", e->prec, v);
		break;
	}
	case CFS_STAT_STR: {
		const char *v;
		memcpy(&v, p, sizeof(v));
		if (json)
			cfs_sb_json_str(b, v ? v : "");
		else
			cfs_sb_printf(b, "%s", v ? v : "-");
		break;
	}
	case CFS_STAT_BOOL: {
		bool v;
		memcpy(&v, p, sizeof(v));
		cfs_sb_printf(b, "%s", json ? (v ? "true" : "false") : (v ? "yes" : "no"));
		break;
	}
	}
}

const char *cfs_human_bytes(char buf[static CFS_HUMAN_LEN], double bytes)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, CFS_HUMAN_LEN, "%.0f B", bytes < 0 ? 0 : bytes);
		return buf;
	}
	while (bytes >= 1024 && u + 1 < (int)CFS_ARRAY_SIZE(units)) {
		bytes /= 1024;
		u++;
	}
	/* three significant digits: 1.23 MiB, 12.3 MiB, 123 MiB */
	snprintf(buf, CFS_HUMAN_LEN, "%.*f %s", bytes < 10 ? 2 : bytes < 100 ? 1 : 0, bytes, units[u]);
	return buf;
}

const char *cfs_human_us(char buf[static CFS_HUMAN_LEN], double us)
{
	if (us < 1000)
		snprintf(buf, CFS_HUMAN_LEN, "%.0f us", us < 0 ? 0 : us);
	else if (us < 1e6)
		snprintf(buf, CFS_HUMAN_LEN, "%.*f ms", us < 1e4 ? 2 : us < 1e5 ? 1 : 0, us / 1e3);
	else
		snprintf(buf, CFS_HUMAN_LEN, "%.*f s", us < 1e7 ? 2 : us < 1e8 ? 1 : 0, us / 1e6);
	return buf;
}

/* The two largest units: 42s, 5m 2s, 3h 20m, 4d 7h. */
const char *cfs_human_duration(char buf[static CFS_HUMAN_LEN], uint64_t s)
{
	if (s < 60)
		snprintf(buf, CFS_HUMAN_LEN, "%llus", (unsigned long long)s);
	else if (s < 3600)
		snprintf(buf, CFS_HUMAN_LEN, "%llum %llus", (unsigned long long)(s / 60),
		         (unsigned long long)(s % 60));
	else if (s < 86400)
		snprintf(buf, CFS_HUMAN_LEN, "%lluh %llum", (unsigned long long)(s / 3600),
		         (unsigned long long)(s % 3600 / 60));
	else
		snprintf(buf, CFS_HUMAN_LEN, "%llud %lluh", (unsigned long long)(s / 86400),
		         (unsigned long long)(s % 86400 / 3600));
	return buf;
}

enum human { H_NONE, H_BYTES, H_RATE, H_US, H_MS, H_S };

static enum human human_of(const struct cfs_stat *e)
{
	if (e->kind != CFS_STAT_U64 && e->kind != CFS_STAT_U32 && e->kind != CFS_STAT_DBL)
		return H_NONE;
	if (!e->unit)
		return e->name && strstr(e->name, "bytes") ? H_BYTES : H_NONE;
	return !strcmp(e->unit, "bytes") ? H_BYTES : !strcmp(e->unit, "bytes/s") ? H_RATE
	       : !strcmp(e->unit, "us") ? H_US : !strcmp(e->unit, "ms") ? H_MS
	       : !strcmp(e->unit, "s") ? H_S : H_NONE;
}

static double number(const struct cfs_stat *e, const void *snap)
{
	const char *p = (const char *)snap + e->off;
	uint64_t u64;
	uint32_t u32;
	double d;

	switch (e->kind) {
	case CFS_STAT_U64: memcpy(&u64, p, sizeof(u64)); return (double)u64;
	case CFS_STAT_U32: memcpy(&u32, p, sizeof(u32)); return u32;
	default: memcpy(&d, p, sizeof(d)); return d;
	}
}

/* A value and its unit, as text: in human units where the unit has them. */
static void text_value(struct cfs_sbuf *b, const struct cfs_stat *e, const void *snap)
{
	char h[CFS_HUMAN_LEN];

	switch (human_of(e)) {
	case H_BYTES: cfs_sb_printf(b, "%s", cfs_human_bytes(h, number(e, snap))); return;
	case H_RATE: cfs_sb_printf(b, "%s/s", cfs_human_bytes(h, number(e, snap))); return;
	case H_US: cfs_sb_printf(b, "%s", cfs_human_us(h, number(e, snap))); return;
	case H_MS: cfs_sb_printf(b, "%s", cfs_human_us(h, number(e, snap) * 1000)); return;
	case H_S: cfs_sb_printf(b, "%s", cfs_human_duration(h, (uint64_t)number(e, snap))); return;
	case H_NONE: break;
	}
	value(b, false, e, snap);
	if (e->unit)
		cfs_sb_printf(b, " %s", e->unit);
}

static void render_json(struct cfs_sbuf *b, const struct cfs_stat *t, size_t n, const void *snap,
                        bool *first)
{
	bool opened[DEPTH_MAX];
	int depth = 0;

	for (size_t i = 0; i < n; i++) {
		const struct cfs_stat *e = &t[i];
		if (e->kind == CFS_STAT_END) {
			if (depth > 0 && opened[--depth]) {
				cfs_sb_printf(b, "}");
				*first = false;
			}
			continue;
		}
		if (e->kind == CFS_STAT_GROUP && !e->name) {
			if (depth < DEPTH_MAX)
				opened[depth++] = false;
			continue;
		}
		cfs_sb_printf(b, "%s\"%s\":", *first ? "" : ",", e->name);
		*first = false;
		if (e->kind == CFS_STAT_GROUP) {
			cfs_sb_printf(b, "{");
			*first = true;
			if (depth < DEPTH_MAX)
				opened[depth++] = true;
			continue;
		}
		value(b, true, e, snap);
	}
}

/* Text: a group starts a line under its heading; a member that follows a
 * closed inner group starts another line under the outer heading. */
static void render_text(struct cfs_sbuf *b, const struct cfs_stat *t, size_t n, const void *snap)
{
	const char *heading[DEPTH_MAX] = { "" };
	int depth = 0;
	bool in_line = false, first = true;

	for (size_t i = 0; i < n; i++) {
		const struct cfs_stat *e = &t[i];
		if (e->kind == CFS_STAT_GROUP || e->kind == CFS_STAT_END) {
			if (in_line)
				cfs_sb_printf(b, "\n");
			in_line = false;
			if (e->kind == CFS_STAT_END && depth > 0)
				depth--;
			else if (e->kind == CFS_STAT_GROUP && depth + 1 < DEPTH_MAX)
				heading[++depth] = e->label ? e->label : e->name;
			continue;
		}
		if (!in_line) {
			cfs_sb_printf(b, "%-*s ", HEADING_WIDTH, heading[depth]);
			in_line = true;
			first = true;
		}
		cfs_sb_printf(b, "%s%s ", first ? "" : ", ", e->label ? e->label : e->name);
		first = false;
		text_value(b, e, snap);
	}
	if (in_line)
		cfs_sb_printf(b, "\n");
}

void cfs_stat_render(struct cfs_sbuf *b, bool json, const struct cfs_stat *table, size_t n,
                     const void *snap, bool *first)
{
	bool f = true;

	if (!first)
		first = &f;
	if (json)
		render_json(b, table, n, snap, first);
	else
		render_text(b, table, n, snap);
}
