/* Churn schedules (tests/testbed/churn.c): reproducible, round-trip through
 * their trace form, and the statistics the steady churn promises. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"
#include "tests/testbed/churn.h"

static struct churn_schedule parse_ok(const char *text, uint64_t seed)
{
	struct churn_schedule s;
	char err[256];
	int r = churn_parse(text, strlen(text), seed, &s, err, sizeof(err));

	cr_assert_eq(r, 0, "parse failed: %s", err);
	return s;
}

static bool same_events(const struct churn_schedule *a, const struct churn_schedule *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->ev[i].t_ms != b->ev[i].t_ms || a->ev[i].node != b->ev[i].node ||
		    a->ev[i].kind != b->ev[i].kind)
			return false;
	return true;
}

/* Events must be in time order, a slot joins once and leaves or fails only
 * while alive: what the testbed relies on. */
static void assert_consistent(const struct churn_schedule *s)
{
	uint8_t *st = calloc(s->slots ? s->slots : 1, 1);   /* 0 new, 1 alive, 2 left, 3 failed */

	for (size_t i = 0; i < s->n; i++) {
		const struct churn_event *e = &s->ev[i];
		cr_assert(i == 0 || e->t_ms >= s->ev[i - 1].t_ms, "event %zu out of order", i);
		cr_assert_lt(e->node, s->slots);
		if (e->kind == CHURN_JOIN) {
			cr_assert_eq(st[e->node], 0, "slot %u joins twice", e->node);
			st[e->node] = 1;
		} else if (e->kind == CHURN_BACK) {
			cr_assert_eq(st[e->node], 3, "slot %u comes back without having failed", e->node);
			st[e->node] = 1;
		} else {
			cr_assert_eq(st[e->node], 1, "slot %u stops while not alive", e->node);
			st[e->node] = e->kind == CHURN_FAIL ? 3 : 2;
		}
	}
	cr_assert(s->n == 0 || s->ev[s->n - 1].t_ms <= s->end_ms);
	free(st);
}

static const char MIXED[] =
	"# a bit of everything\n"
	"at 0 join 100 over 30\n"
	"at 60 churn for 600 every 5 lifetime 60\n"
	"at 120 fail 20%\n"
	"at 240 leave 10\n"
	"at 300 join 50\n"
	"at 400 fail 50 %\n"
	"at 700 end\n";

Test(churn, same_seed_same_schedule)
{
	struct churn_schedule a = parse_ok(MIXED, 1), b = parse_ok(MIXED, 1);
	struct churn_schedule c = parse_ok(MIXED, 2);

	assert_consistent(&a);
	cr_assert(a.n > 300, "only %zu events", a.n);
	cr_assert(same_events(&a, &b));
	cr_assert_eq(a.slots, b.slots);
	cr_assert_eq(a.end_ms, 700000);
	cr_assert_eq(a.seed, 1);
	cr_assert_not(same_events(&a, &c), "seeds 1 and 2 gave the same schedule");
	churn_free(&a);
	churn_free(&b);
	churn_free(&c);

	/* 'seed N' overrides the argument */
	char text[sizeof(MIXED) + 16];
	snprintf(text, sizeof(text), "seed 2\n%s", MIXED);
	a = parse_ok(text, 1);
	c = parse_ok(MIXED, 2);
	cr_assert_eq(a.seed, 2);
	cr_assert(same_events(&a, &c));
	churn_free(&a);
	churn_free(&c);
}

Test(churn, write_parse_round_trip)
{
	/* speedup 3 makes times that are not whole seconds */
	char text[sizeof(MIXED) + 16], *buf = NULL;
	size_t len = 0;

	snprintf(text, sizeof(text), "speedup 3\n%s", MIXED);
	struct churn_schedule a = parse_ok(text, 99);
	FILE *f = open_memstream(&buf, &len);
	cr_assert_eq(churn_write(&a, f), 0);
	fclose(f);

	struct churn_schedule b = parse_ok(buf, 12345);   /* the trace's seed wins */
	cr_assert(same_events(&a, &b));
	cr_assert_eq(a.slots, b.slots);
	cr_assert_eq(a.end_ms, b.end_ms);
	cr_assert_eq(a.seed, b.seed);
	cr_assert_eq(b.speedup, 1.0);

	/* and writing it again gives the same text but for the speedup note */
	char *buf2 = NULL;
	size_t len2 = 0;
	f = open_memstream(&buf2, &len2);
	cr_assert_eq(churn_write(&b, f), 0);
	fclose(f);
	cr_assert_str_eq(strchr(buf, '\n'), strchr(buf2, '\n'));
	free(buf);
	free(buf2);
	churn_free(&a);
	churn_free(&b);
}

Test(churn, join_ramp_evenly_spaced)
{
	struct churn_schedule s = parse_ok("at 0 join 100 over 60\n", 5);
	const uint64_t gap = 60000 / 100;

	cr_assert_eq(s.n, 100);
	cr_assert_eq(s.slots, 100);
	for (size_t i = 0; i < s.n; i++) {
		cr_assert_eq(s.ev[i].kind, CHURN_JOIN);
		cr_assert_eq(s.ev[i].node, i);
		cr_assert_eq(s.ev[i].t_ms, i * gap);
		cr_assert_leq(s.ev[i].t_ms, 60000);
	}
	cr_assert_eq(s.end_ms, 99 * gap);
	churn_free(&s);
}

Test(churn, fail_half_kills_distinct_live)
{
	struct churn_schedule s = parse_ok("at 0 join 200\nat 10 fail 50%\n", 11);
	bool seen[200] = { false };
	size_t fails = 0;

	assert_consistent(&s);
	for (size_t i = 0; i < s.n; i++) {
		if (s.ev[i].kind != CHURN_FAIL)
			continue;
		cr_assert_eq(s.ev[i].t_ms, 10000);
		cr_assert_lt(s.ev[i].node, 200);
		cr_assert_not(seen[s.ev[i].node], "slot %u failed twice", s.ev[i].node);
		seen[s.ev[i].node] = true;
		fails++;
	}
	cr_assert_eq(fails, 200 / 2);
	cr_assert_eq(churn_alive_at(&s, 9999), 200);
	cr_assert_eq(churn_alive_at(&s, 10000), 200 - fails);
	churn_free(&s);
}

Test(churn, leave_more_than_alive_takes_all)
{
	struct churn_schedule s = parse_ok("at 0 join 5\nat 1 leave 10\n"
	                                   "at 2 join 3\nat 3 fail all\nat 4 fail 7\n", 0);

	assert_consistent(&s);
	cr_assert_eq(s.n, 5 + 5 + 3 + 3);
	cr_assert_eq(churn_alive_at(&s, 1000), 0);
	cr_assert_eq(churn_alive_at(&s, 2000), 3);
	cr_assert_eq(churn_alive_at(&s, 3000), 0);
	churn_free(&s);
}

Test(churn, trace_slots_are_not_reused)
{
	/* slot 0 is joined by a trace line at 5 s: the generated joins at 0 s
	 * step over it */
	struct churn_schedule s = parse_ok("5 join 0\nat 0 join 3\n6 fail 0\n7 leave 2\n", 0);

	assert_consistent(&s);
	cr_assert_eq(s.n, 6);
	cr_assert_eq(s.slots, 4);
	cr_assert_eq(s.ev[0].node, 1);
	cr_assert_eq(s.ev[2].node, 3);
	cr_assert_eq(s.ev[3].node, 0);
	cr_assert_eq(s.ev[3].t_ms, 5000);
	cr_assert_eq(churn_alive_at(&s, 7000), 2);
	churn_free(&s);

	/* nor once the trace's slot has come and gone (a fuzzer's find) */
	s = parse_ok("1 join 0\n2 leave 0\nat 3 join 2\n", 0);
	assert_consistent(&s);
	cr_assert_eq(s.ev[2].node, 1);
	cr_assert_eq(s.ev[3].node, 2);
	churn_free(&s);
}

/* Tapestry's churn: Poisson joins with mean gap A, exponential lifetimes of
 * mean L, measured from the events. The base population never churns, and
 * the dynamic one averages L / A (Little's law: 12 for both presets, which
 * is Tapestry's 830 → 858 peak). */
static void check_steady(const char *text, uint64_t seed, double a_s, double l_s,
                         double from_s, double d_s)
{
	struct churn_schedule s = parse_ok(text, seed);
	uint64_t *born = calloc(s.slots, sizeof(*born));
	uint64_t from = (uint64_t)(from_s * 1000), stop = (uint64_t)((from_s + d_s) * 1000);
	uint64_t half = stop / 2, prev = from, tl = half;
	double gaps = 0, lives = 0, area = 0;
	size_t joins = 0, deaths = 0, base = 0;
	uint32_t dyn = 0;

	assert_consistent(&s);
	for (size_t i = 0; i < s.n; i++) {
		const struct churn_event *e = &s.ev[i];
		if (e->t_ms < from) {
			base++;                     /* the static base joining */
			continue;
		}
		cr_assert_geq(e->node, base, "base slot %u churned", e->node);
		if (e->t_ms > half) {           /* time-average over the second half */
			area += (double)dyn * (double)(e->t_ms - (tl > half ? tl : half));
			tl = e->t_ms;
		}
		if (e->kind == CHURN_JOIN) {
			gaps += (double)(e->t_ms - prev);
			prev = e->t_ms;
			born[e->node] = e->t_ms;
			joins++;
			dyn++;
		} else {
			cr_assert_eq(e->kind, CHURN_FAIL);
			cr_assert_lt(e->t_ms, stop);
			lives += (double)(e->t_ms - born[e->node]);
			deaths++;
			dyn--;
		}
	}
	area += (double)dyn * (double)(stop - tl);
	double mean_gap = gaps / joins / 1000, mean_life = lives / deaths / 1000;
	double mean_dyn = area / (double)(stop - half);
	cr_log_info("seed %lu: %zu joins, %zu deaths, mean gap %.2f s (A %.0f), mean lifetime "
	            "%.1f s (L %.0f), mean dynamic nodes %.2f (L/A %.0f), %u left at the end",
	            (unsigned long)seed, joins, deaths, mean_gap, a_s, mean_life, l_s,
	            mean_dyn, l_s / a_s, dyn);
	cr_assert(fabs(mean_gap - a_s) < 0.10 * a_s, "mean gap %.2f s, want %.0f", mean_gap, a_s);
	cr_assert(fabs(mean_life - l_s) < 0.15 * l_s, "mean life %.1f s, want %.0f", mean_life, l_s);
	cr_assert(fabs(mean_dyn - l_s / a_s) < 0.15 * l_s / a_s, "mean dynamic %.2f", mean_dyn);
	cr_assert_eq(churn_alive_at(&s, stop), base + dyn);
	free(born);
	churn_free(&s);
}

Test(churn, steady_churn_statistics)
{
	check_steady("at 0 join 50\nat 10 churn for 200000 every 20 lifetime 240\n", 2024,
	             20, 240, 10, 200000);
	check_steady("at 0 join 50\nat 10 churn1 for 200000\n", 7, 20, 240, 10, 200000);
	check_steady("at 0 join 50\nat 10 churn2 for 100000\n", 8, 10, 120, 10, 100000);
	check_steady("at 0 join 830\nat 10 churn for 50000 every 5 lifetime 60\n", 9,
	             5, 60, 10, 50000);   /* Tapestry's PlanetLab churn, Fig. 23 */
}

Test(churn, presets_expand)
{
	struct churn_schedule a = parse_ok("at 5 churn2 for 3000\n", 3);
	struct churn_schedule b = parse_ok("at 5 churn for 3000 every 10 lifetime 120\n", 3);

	cr_assert(a.n > 0);
	cr_assert(same_events(&a, &b));
	churn_free(&a);
	churn_free(&b);
}

/* Every time in the script, gaps and lifetimes too, is divided: slot by
 * slot, each event comes at half the time (to the ms rounding). */
Test(churn, speedup_halves_every_time)
{
	static const char text[] =
		"at 0 join 100 over 30\nat 120 fail 20%\n130 leave 3\n"
		"at 200 churn1 for 3000\nat 3500 end\n";
	char fast[sizeof(text) + 16];
	snprintf(fast, sizeof(fast), "speedup 2\n%s", text);
	struct churn_schedule a = parse_ok(text, 8), b = parse_ok(fast, 8);
	uint64_t *ta = calloc(2 * a.slots, sizeof(*ta)), *tb = calloc(2 * a.slots, sizeof(*tb));

	cr_assert_eq(a.n, b.n);
	cr_assert_eq(a.slots, b.slots);
	cr_assert_eq(b.end_ms, a.end_ms / 2);
	cr_assert_eq(b.speedup, 2.0);
	for (size_t i = 0; i < a.n; i++) {
		ta[2 * a.ev[i].node + (a.ev[i].kind != CHURN_JOIN)] = a.ev[i].t_ms + 1;
		tb[2 * b.ev[i].node + (b.ev[i].kind != CHURN_JOIN)] = b.ev[i].t_ms + 1;
	}
	for (uint32_t i = 0; i < 2 * a.slots; i++) {
		cr_assert_eq(ta[i] == 0, tb[i] == 0, "slot %u differs", i / 2);
		if (ta[i])
			cr_assert(llabs((long long)(2 * (tb[i] - 1)) - (long long)(ta[i] - 1)) <= 1,
			          "slot %u: %lu ms vs %lu ms", i / 2,
			          (unsigned long)(ta[i] - 1), (unsigned long)(tb[i] - 1));
	}
	free(ta);
	free(tb);
	churn_free(&a);
	churn_free(&b);
}

Test(churn, alive_across_massive_failure)
{
	struct churn_schedule s = parse_ok(
		"at 0 join 100 over 30\nat 120 fail 20%\nat 240 fail 50%\nat 360 end\n", 4);
	uint32_t after1 = 100 - 100 * 20 / 100, after2 = after1 - after1 * 50 / 100;

	assert_consistent(&s);
	cr_assert_eq(churn_alive_at(&s, 0), 1);
	cr_assert_eq(churn_alive_at(&s, 15000), 51);  /* joins at 0, 0.3, ..., 15 s */
	cr_assert_eq(churn_alive_at(&s, 119999), 100);
	cr_assert_eq(churn_alive_at(&s, 120000), after1);
	cr_assert_eq(churn_alive_at(&s, 239999), after1);
	cr_assert_eq(churn_alive_at(&s, 240000), after2);
	cr_assert_eq(churn_alive_at(&s, UINT64_MAX), after2);
	cr_assert_eq(s.end_ms, 360000);
	churn_free(&s);
}

static char *slurp(const char *name)
{
	char path[512];
	const char *slash = strrchr(__FILE__, '/');
	int k = slash ? (int)(slash - __FILE__) : 0;

	/* __FILE__ is tests/unit/test_churn.c from the top of the tree */
	snprintf(path, sizeof(path), "%.*s%s../testbed/%s", k, __FILE__, slash ? "/" : "", name);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "cannot open %s", path);
	char *buf = calloc(1, 65536);
	size_t n = fread(buf, 1, 65535, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

/* The evaluation's example scripts parse and do what their comments say,
 * run as cfs-testbed runs them: "at 0 join 100" (its --nodes) first. */
static char *with_base(const char *file)
{
	char *body = slurp(file);
	char *text = calloc(1, strlen(body) + 32);
	sprintf(text, "at 0 join 100\n%s", body);
	free(body);
	return text;
}

Test(churn, example_scripts)
{
	static const struct {
		const char *file;
		uint32_t before, after, at_end; /* alive at 59 s, 61 s, the end */
	} ex[] = {
		{ "massive-failure.txt", 100, 80, 40 },
		{ "flash-crowd.txt", 100, 200, 200 },
	};
	for (size_t i = 0; i < CFS_ARRAY_SIZE(ex); i++) {
		char *text = with_base(ex[i].file);
		struct churn_schedule s = parse_ok(text, 1);
		assert_consistent(&s);
		cr_assert_eq(churn_alive_at(&s, 59000), ex[i].before, "%s", ex[i].file);
		cr_assert_eq(churn_alive_at(&s, 61000), ex[i].after, "%s", ex[i].file);
		cr_assert_eq(churn_alive_at(&s, s.end_ms), ex[i].at_end, "%s", ex[i].file);
		churn_free(&s);
		free(text);
	}
	const char *churny[] = { "churn1.txt", "churn2.txt" };
	for (size_t i = 0; i < 2; i++) {
		char *text = with_base(churny[i]);
		struct churn_schedule s = parse_ok(text, 1);
		assert_consistent(&s);
		cr_assert_eq(churn_alive_at(&s, 0), 100);
		for (size_t j = 0; j < s.n; j++)    /* the base's 100 never churn */
			cr_assert(s.ev[j].kind == CHURN_JOIN || s.ev[j].node >= 100);
		cr_assert(s.n > 100 + 540 / 20, "%s: %zu events", churny[i], s.n);
		churn_free(&s);
		free(text);
	}
}

/* Transient failures: every node alive at the start alternates between
 * failing and coming back, up the fraction U / (U + W) of the time from
 * the start on (it starts in that steady state), and all are back at the
 * end; nodes that join later do not flap; the trace reads back the same. */
Test(churn, flap_holds_availability)
{
	static const struct {
		const char *text;
		double a;
	} runs[] = {
		{ "at 0 join 200\nat 10 flap for 2000 up 30 down 30\nat 2030 join 5\nat 2040 end\n", 0.5 },
		{ "at 0 join 200\nat 10 flap for 2000 up 90 down 10\nat 2030 join 5\nat 2040 end\n", 0.9 },
	};

	for (size_t k = 0; k < CFS_ARRAY_SIZE(runs); k++) {
		struct churn_schedule s = parse_ok(runs[k].text, 7), back;
		double sum = 0, first = 0;
		uint32_t samples = 0, backs = 0;

		assert_consistent(&s);
		for (size_t i = 0; i < s.n; i++) {
			backs += s.ev[i].kind == CHURN_BACK;
			cr_assert(s.ev[i].kind != CHURN_JOIN || s.ev[i].t_ms == 0 || s.ev[i].t_ms == 2030000);
		}
		cr_assert_gt(backs, 200 * 2000 / (runs[k].a * 1000) / 2, "run %zu: %u returns", k, backs);
		for (uint64_t t = 10000; t < 2010000; t += 1000, samples++)
			sum += churn_alive_at(&s, t) / 200.0;
		first = churn_alive_at(&s, 10000) / 200.0;
		cr_assert(fabs(sum / samples - runs[k].a) < 0.03, "run %zu: up %.3f of the time, want %.2f", k,
		          sum / samples, runs[k].a);
		cr_assert(fabs(first - runs[k].a) < 0.1, "run %zu: %.3f up at the start", k, first);
		cr_assert_eq(churn_alive_at(&s, 2010000), 200, "all back at the end");
		cr_assert_eq(churn_alive_at(&s, 2040000), 205);

		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		cr_assert_eq(churn_write(&s, f), 0);
		fclose(f);
		back = parse_ok(buf, 99);
		cr_assert(same_events(&s, &back), "run %zu: the trace reads back the same", k);
		free(buf);
		churn_free(&back);
		churn_free(&s);
	}
}

Test(churn, errors_name_their_line)
{
	static const struct {
		const char *text;
		unsigned line;
	} bad[] = {
		{ "at 0 join 5\nat 1 frobnicate 3\n", 2 },
		{ "at 0 join 5\n\nflurb\n", 3 },
		{ "at -1 join 5\n", 1 },
		{ "at 0 join 5\nat ten join 5\n", 2 },
		{ "at 1e3 join 5\n", 1 },
		{ "at 0 join 5\n# comment\nat 1 fail 100.5%\n", 3 },
		{ "at 0 join 5 now\n", 1 },
		{ "at 0 join 100001\n", 1 },
		{ "at 0 join 0\n", 1 },
		{ "0 join 1\n5 fail 2\n", 2 },
		{ "0 join 1\n1 leave 1\n2 leave 1\n", 3 },
		{ "0 join 3\n1 join 3\n", 2 },
		{ "at 0 join 5\n1 join 2\n", 0 },   /* fine: slot 2 is not the generator's */
		{ "at 0 churn for 100000000 every 1 lifetime 5\n", 1 },
		{ "at 0 churn for 100 every 0 lifetime 5\n", 1 },
		{ "at 0 churn3 for 100\n", 1 },
		{ "at 0 join 5\nat 10 end\nat 20 join 1\n", 3 },
		{ "at 0 end\nat 0 end\n", 2 },
		{ "speedup 0\n", 1 },
		{ "seed -3\n", 1 },
		{ "at 0 join 1\r\nat 1 fail x%\r\n", 2 },
		{ "at 0 join 1\nat 1\x01 fail 1\n", 2 },
		{ "0 join 0\n1 back 0\n", 2 },
		{ "0 join 0\n1 leave 0\n2 back 0\n", 3 },
		{ "0 join 0\n1 fail 0\n2 back 0\n3 back 0\n", 4 },
		{ "0 join 0\n1 fail 0\n2 back 0\n", 0 },
		{ "at 0 join 5\nat 1 back 3\n", 2 },
		{ "at 0 join 5\nat 1 flap for 10 up 0 down 1\n", 2 },
		{ "at 0 join 5\nat 1 flap for 10 up 5\n", 2 },
		{ "at 0 join 5\nat 1 flap for 10 up 5 down 5 now\n", 2 },
		{ "at 0 join 5\nat 1 flap for 10 up 5 down 5\nat 5 end\n", 2 },
	};
	char err[256];
	struct churn_schedule s;

	for (size_t i = 0; i < CFS_ARRAY_SIZE(bad); i++) {
		int r = churn_parse(bad[i].text, strlen(bad[i].text), 0, &s, err, sizeof(err));
		if (bad[i].line == 0) {
			cr_assert_eq(r, 0, "case %zu: %s", i, err);
			churn_free(&s);
			continue;
		}
		char want[32];
		snprintf(want, sizeof(want), "line %u: ", bad[i].line);
		cr_assert_eq(r, -EINVAL, "case %zu accepted", i);
		cr_assert(strncmp(err, want, strlen(want)) == 0 && strlen(err) > strlen(want),
		          "case %zu: '%s', want '%s...'", i, err, want);
		cr_assert_null(s.ev);
		cr_assert_eq(s.n, 0);
	}
}

Test(churn, caps)
{
	char err[256];
	struct churn_schedule s;
	char *text = malloc(4096);
	size_t k = 0;

	/* a line over 1 KiB */
	k += (size_t)sprintf(text, "at 0 join 1\n#");
	memset(text + k, 'x', CHURN_MAX_LINE);
	k += CHURN_MAX_LINE;
	k += (size_t)sprintf(text + k, "\nat 1 join 1\n");
	cr_assert_eq(churn_parse(text, k, 0, &s, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "line 2: longer than 1024 bytes");

	/* more than 1,000,000 events: the eleventh 'join 100000' overflows */
	k = 0;
	for (int i = 0; i < 11; i++)
		k += (size_t)sprintf(text + k, "at %d join %u\n", i, CHURN_MAX_JOIN);
	cr_assert_eq(churn_parse(text, k, 0, &s, err, sizeof(err)), -EINVAL);
	cr_assert_str_eq(err, "line 11: more than 1000000 events");
	cr_assert_null(s.ev);

	/* no room for the message is fine too */
	cr_assert_eq(churn_parse("x", 1, 0, &s, NULL, 0), -EINVAL);
	free(text);
}
