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
	                 "top         alpha 18446744073710 s, beta 7, gamma 1.50\n"
	                 "object      name q\"x\n"
	                 "more        ok yes\n"
	                 "object      inner 3 B\n");
	free(b.p);
}

/* Human units: three significant digits, the unit that keeps the number
 * below 1024 (bytes) or 1000 (times); durations in their two largest units. */
Test(status, human_units)
{
	char h[CFS_HUMAN_LEN];

	cr_assert_str_eq(cfs_human_bytes(h, 0), "0 B");
	cr_assert_str_eq(cfs_human_bytes(h, 1023), "1023 B");
	cr_assert_str_eq(cfs_human_bytes(h, 1024), "1.00 KiB");
	cr_assert_str_eq(cfs_human_bytes(h, 1536), "1.50 KiB");
	cr_assert_str_eq(cfs_human_bytes(h, 12.5 * 1024 * 1024), "12.5 MiB");
	cr_assert_str_eq(cfs_human_bytes(h, 300.0 * 1024 * 1024 * 1024), "300 GiB");
	cr_assert_str_eq(cfs_human_bytes(h, 18446744073709551615.0), "16384 PiB");
	cr_assert_str_eq(cfs_human_us(h, 850), "850 us");
	cr_assert_str_eq(cfs_human_us(h, 1250), "1.25 ms");
	cr_assert_str_eq(cfs_human_us(h, 132400), "132 ms");
	cr_assert_str_eq(cfs_human_us(h, 2500000), "2.50 s");
	cr_assert_str_eq(cfs_human_duration(h, 42), "42s");
	cr_assert_str_eq(cfs_human_duration(h, 302), "5m 2s");
	cr_assert_str_eq(cfs_human_duration(h, 3 * 3600 + 20 * 60 + 7), "3h 20m");
	cr_assert_str_eq(cfs_human_duration(h, 4 * 86400 + 7 * 3600 + 59), "4d 7h");
}

/* A unit-less entry named like a byte count is one; JSON stays raw. */
struct rate_snap { uint64_t bytes_in; double rate; uint64_t up; };
Test(status, units_in_text_raw_in_json)
{
	static const struct cfs_stat t[] = {
		CFS_STAT_BEGIN(NULL, "traffic"),
		CFS_STAT(U64, struct rate_snap, bytes_in, "bytes_in", "in", NULL),
		CFS_STAT_D(struct rate_snap, rate, 1, "in_bytes_per_s", "rate", "bytes/s"),
		CFS_STAT(U64, struct rate_snap, up, "uptime_s", "up", "s"),
		CFS_STAT_CLOSE,
	};
	struct rate_snap v = { 5u << 20, 2048.0, 90061 };
	struct cfs_sbuf b = { 0 };

	cfs_stat_render(&b, false, t, CFS_ARRAY_SIZE(t), &v, NULL);
	cr_assert_str_eq(b.p, "traffic     in 5.00 MiB, rate 2.00 KiB/s, up 1d 1h\n");
	b.len = 0;
	cfs_stat_render(&b, true, t, CFS_ARRAY_SIZE(t), &v, NULL);
	cr_assert_str_eq(b.p, "\"bytes_in\":5242880,\"in_bytes_per_s\":2048.0,\"uptime_s\":90061");
	free(b.p);
}
