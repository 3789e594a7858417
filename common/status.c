/*
 * The one status renderer (see cfs_stat in cfs.h): a table walked once per
 * report, as JSON members or as text lines.
 */
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
		value(b, false, e, snap);
		if (e->unit)
			cfs_sb_printf(b, " %s", e->unit);
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
