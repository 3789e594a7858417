/* The one status renderer: a table walked as JSON members and text lines. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

struct snap {
	uint64_t a;
	uint32_t b;
	double c;
	const char *name;
	bool ok;
	uint64_t inner;
};

#define S(kind, field, name, label, unit) CFS_STAT(kind, struct snap, field, name, label, unit)
static const struct cfs_stat table[] = {
	CFS_STAT_BEGIN(NULL, "top"),
	S(U64, a, "a", "alpha", "us"),
	S(U32, b, "b", "beta", NULL),
	CFS_STAT_D(struct snap, c, 2, "c", "gamma", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("obj", "object"),
	S(STR, name, "name", "name", NULL),
	CFS_STAT_BEGIN(NULL, "more"),
	S(BOOL, ok, "ok", "ok", NULL),
	CFS_STAT_CLOSE,
	S(U64, inner, "inner", "inner", "bytes"),
	CFS_STAT_CLOSE,
};
#undef S

static const struct snap snap = { 18446744073709551615ull, 7, 1.5, "q\"x", true, 3 };

Test(status, json_members_in_one_object)
{
	struct cfs_sbuf b = { 0 };
	bool first = true;

	cfs_sb_printf(&b, "{");
	cfs_stat_render(&b, true, table, CFS_ARRAY_SIZE(table), &snap, &first);
	cfs_sb_printf(&b, "}");
	cr_assert_str_eq(b.p, "{\"a\":18446744073709551615,\"b\":7,\"c\":1.50,"
	                 "\"obj\":{\"name\":\"q\\\"x\",\"ok\":true,\"inner\":3}}");
	cr_assert(!first);
	free(b.p);
}

Test(status, json_after_other_members_starts_with_a_comma)
{
	struct cfs_sbuf b = { 0 };
	bool first = false;

	cfs_stat_render(&b, true, table + 5, 3, &snap, &first); /* "obj" up to its nested group */
	cr_assert_str_eq(b.p, ",\"obj\":{\"name\":\"q\\\"x\"");
	free(b.p);
}

Test(status, text_lines_under_headings)
{
	struct cfs_sbuf b = { 0 };

	cfs_stat_render(&b, false, table, CFS_ARRAY_SIZE(table), &snap, NULL);
	cr_assert_str_eq(b.p,
	                 "top         alpha 18446744073709551615 us, beta 7, gamma 1.50\n"
	                 "object      name q\"x\n"
	                 "more        ok yes\n"
	                 "object      inner 3 bytes\n");
	free(b.p);
}
