/* The wide-area delay line's logic (tests/testbed/delay.c): the matrix
 * parser, per-pair delays and losses, and the release order of held
 * packets. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testbed/delay.h"

static uint32_t ip(const char *s)
{
	struct in_addr a;

	cr_assert_eq(inet_pton(AF_INET, s, &a), 1);
	return ntohl(a.s_addr);
}

static struct delay_matrix *parse_ok(const char *text)
{
	struct delay_matrix *m = malloc(sizeof(*m));
	char err[256];

	cr_assert_eq(delay_parse(text, strlen(text), m, err, sizeof(err)), 0, "parse failed: %s", err);
	return m;
}

static void parse_bad(const char *text, const char *want)
{
	struct delay_matrix *m = malloc(sizeof(*m));
	char err[256] = "";

	cr_assert_eq(delay_parse(text, strlen(text), m, err, sizeof(err)), -1, "accepted: %s", text);
	cr_assert(strstr(err, want), "error '%s' lacks '%s'", err, want);
	free(m);
}

Test(delay, pairs_get_half_their_rtt_both_ways)
{
	struct delay_matrix *m = parse_ok("# the world\n"
	                                  "node 198.18.0.1 us-east\n"
	                                  "node 198.18.0.2 eu   # a comment\n"
	                                  "node 198.18.0.3 eu\n"
	                                  "rtt us-east eu 80 0.5\n"
	                                  "rtt eu eu 10.5\n");
	uint32_t d, l;

	delay_pair(m, ip("198.18.0.1"), ip("198.18.0.2"), &d, &l);
	cr_assert_eq(d, 40000);
	cr_assert_eq(l, 5000);
	delay_pair(m, ip("198.18.0.3"), ip("198.18.0.1"), &d, &l);
	cr_assert_eq(d, 40000, "the reverse direction");
	delay_pair(m, ip("198.18.0.2"), ip("198.18.0.3"), &d, &l);
	cr_assert_eq(d, 5250);
	cr_assert_eq(l, 0);
	delay_pair(m, ip("198.18.0.1"), ip("198.18.0.1"), &d, &l);
	cr_assert_eq(d, 0, "no rtt line for us-east with itself");
	delay_pair(m, ip("198.18.0.9"), ip("198.18.0.2"), &d, &l);
	cr_assert_eq(d, 0, "an address with no node line");
	free(m);
}

Test(delay, a_later_rtt_line_replaces_an_earlier_one)
{
	struct delay_matrix *m = parse_ok("node 10.0.0.1 a\nnode 10.0.0.2 b\nrtt a b 100 50\nrtt b a 20\n");
	uint32_t d, l;

	delay_pair(m, ip("10.0.0.1"), ip("10.0.0.2"), &d, &l);
	cr_assert_eq(d, 10000);
	cr_assert_eq(l, 0);
	free(m);
}

Test(delay, bad_matrices_are_refused_with_their_line)
{
	parse_bad("node 1.2.3.4 a\nnode 1.2.3.x b\n", "line 2");
	parse_bad("node 1.2.3.4 a\nnode 1.2.3.4 b\n", "two node lines");
	parse_bad("rtt a b -5\n", "not a decimal");
	parse_bad("rtt a b 60001\n", "not a decimal");
	parse_bad("rtt a b 1e3\n", "not a decimal");
	parse_bad("rtt a b 10 101\n", "percentage");
	parse_bad("rtt a b 10.1234\n", "not a decimal");
	parse_bad("rtt a b\n", "expected");
	parse_bad("route a b 10\n", "expected");
	parse_bad("node 1.2.3.4 a/b\n", "region name");
	parse_bad("node 1.2.3.4 a b c d e f\n", "expected");

	char big[DELAY_MAX_LINE + 20];
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	parse_bad(big, "longer than");

	char *many = malloc(64 * 1024);
	size_t n = 0;
	for (unsigned i = 0; i <= DELAY_MAX_REGIONS; i++)
		n += (size_t)sprintf(many + n, "rtt r%u r%u 1\n", i, i);
	parse_bad(many, "regions");
	free(many);
}

Test(delay, held_packets_leave_by_release_time_then_arrival)
{
	struct delay_line l;
	uint32_t id;

	delay_line_init(&l);
	cr_assert_eq(delay_line_next(&l), UINT64_MAX);
	/* a far pair's packet first, then near ones; two at one time */
	delay_line_push(&l, 1, 1000 + 100000);
	delay_line_push(&l, 2, 1010 + 5000);
	delay_line_push(&l, 3, 1010 + 5000);
	delay_line_push(&l, 4, 1020 + 5000);
	cr_assert_eq(delay_line_next(&l), 6010);
	cr_assert_not(delay_line_pop_due(&l, 6009, &id), "nothing is due early");
	uint32_t want[] = { 2, 3, 4 };
	for (int i = 0; i < 3; i++) {
		cr_assert(delay_line_pop_due(&l, 50000, &id));
		cr_assert_eq(id, want[i]);
	}
	cr_assert_not(delay_line_pop_due(&l, 50000, &id));
	cr_assert(delay_line_pop_due(&l, 101000, &id));
	cr_assert_eq(id, 1);
	cr_assert_eq(delay_line_next(&l), UINT64_MAX);
	delay_line_free(&l);
}

Test(delay, a_flow_keeps_its_order_through_many_packets)
{
	struct delay_line l;
	uint32_t id, last[3] = { 0, 0, 0 };
	const uint64_t oneway[3] = { 5000, 40000, 100000 };
	unsigned got = 0;

	delay_line_init(&l);
	srand(7);
	for (uint32_t i = 1; i <= 30000; i++) {
		uint32_t flow = (uint32_t)rand() % 3;
		delay_line_push(&l, i * 4 + flow, i * 10 + oneway[flow]);
	}
	uint64_t prev = 0;
	while (delay_line_next(&l) != UINT64_MAX) {
		uint64_t t = delay_line_next(&l);
		cr_assert_geq(t, prev);
		prev = t;
		cr_assert(delay_line_pop_due(&l, t, &id));
		cr_assert_gt(id / 4, last[id % 4], "flow %u reordered", id % 4);
		last[id % 4] = id / 4;
		got++;
	}
	cr_assert_eq(got, 30000);
	delay_line_free(&l);
}
