/* Lookup modes: the text form (algorithm, next-hop rule, iterative
 * parallelism, routing to the predecessor), its round trip, and the check
 * cfsd applies to a mode that arrives in a control request. */
#include <criterion/criterion.h>
#include <string.h>

#include "chord/chord.h"

static uint32_t parse_ok(const char *s)
{
	uint32_t m = 0xdeadbeef;

	cr_assert_eq(chord_mode_parse(s, &m), 0, "'%s' should parse", s);
	cr_assert(chord_mode_ok(m), "'%s' parsed to a mode chord_mode_ok refuses: %#x", s, m);
	return m;
}

Test(chord_mode, plain_forms)
{
	cr_assert_eq(parse_ok("iterative"), CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY));
	cr_assert_eq(parse_ok("recursive"), CHORD_MODE(CHORD_RECURSIVE, CHORD_GREEDY));
	cr_assert_eq(parse_ok("recursive,nonlinear"), CHORD_MODE(CHORD_RECURSIVE, CHORD_NONLINEAR));
	cr_assert_eq(parse_ok("iterative,cost"), CHORD_MODE(CHORD_ITERATIVE, CHORD_CFS_COST));
}

Test(chord_mode, parallelism_and_pred)
{
	uint32_t m = parse_ok("iterative,p3");
	cr_assert_eq(CHORD_MODE_PAR(m), 3);
	cr_assert_eq(CHORD_MODE_SELECT(m), CHORD_GREEDY);
	cr_assert_eq(m & CHORD_MODE_TO_PRED, 0);

	m = parse_ok("iterative,pred,p2,nonlinear"); /* any order */
	cr_assert_eq(CHORD_MODE_PAR(m), 2);
	cr_assert_eq(CHORD_MODE_SELECT(m), CHORD_NONLINEAR);
	cr_assert_neq(m & CHORD_MODE_TO_PRED, 0);

	m = parse_ok("recursive,pred");
	cr_assert_eq(CHORD_MODE_ALGO(m), CHORD_RECURSIVE);
	cr_assert_neq(m & CHORD_MODE_TO_PRED, 0);

	/* p1 is the default and is not kept as a separate value. */
	cr_assert_eq(parse_ok("iterative,p1"), parse_ok("iterative"));
}

Test(chord_mode, refused)
{
	static const char *const bad[] = {
		"", "iter", "iterative,", ",greedy", "iterative,greedy,greedy", "iterative,pred,pred",
		"iterative,p0", "iterative,p9", "iterative,p", "iterative,p10", "iterative,p2,p3",
		"recursive,p2", /* parallelism is for iterative lookups */
		"iterative,Greedy", "iterative greedy", "recursive,cost,extra",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t m = 7;
		cr_assert_eq(chord_mode_parse(bad[i], &m), -EINVAL, "'%s' should be refused", bad[i]);
		cr_assert_eq(m, 7, "'%s': the result was written on failure", bad[i]);
	}
}

/* Every mode's name parses back to the same mode. */
Test(chord_mode, name_round_trip)
{
	for (uint32_t a = 0; a <= CHORD_RECURSIVE; a++)
		for (uint32_t s = 0; s <= CHORD_NONLINEAR; s++)
			for (uint32_t p = 0; p <= CHORD_PAR_MAX; p++)
				for (uint32_t pred = 0; pred < 2; pred++) {
					if (p > 1 && a == CHORD_RECURSIVE)
						continue;
					uint32_t m = CHORD_MODE_WITH_PAR(CHORD_MODE(a, s), p > 1 ? p : 0) |
					             (pred ? CHORD_MODE_TO_PRED : 0), back = 0;
					char buf[48];
					cr_assert(chord_mode_ok(m));
					chord_mode_name(m, buf);
					cr_assert_eq(chord_mode_parse(buf, &back), 0, "'%s'", buf);
					cr_assert_eq(back, m, "'%s': %#x != %#x", buf, back, m);
				}
}

Test(chord_mode, ok_refuses_unknown_bits)
{
	cr_assert_not(chord_mode_ok(CHORD_MODE(2, 0)));
	cr_assert_not(chord_mode_ok(CHORD_MODE(0, 3)));
	cr_assert_not(chord_mode_ok(CHORD_MODE_WITH_PAR(CHORD_MODE(0, 0), CHORD_PAR_MAX + 1)));
	cr_assert_not(chord_mode_ok(CHORD_MODE_WITH_PAR(CHORD_MODE(CHORD_RECURSIVE, 0), 2)));
	cr_assert_not(chord_mode_ok(0x2000u));
	cr_assert_not(chord_mode_ok(0x80000000u));
}
