/*
 * libFuzzer target: the churn script parser of the evaluation testbed. A
 * script that parses must give time-ordered events in which a slot joins
 * once and stops only while alive, and (when small) must come back
 * identical through its written trace; one that does not must say why.
 * The parser's own caps (1,000,000 events, 'join N' up to 100,000, churn
 * periods bounded by D/A) keep every input to a fraction of a second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testbed/churn.h"

/* Past this many events the round trip is skipped: its text would be tens
 * of megabytes and the fuzzer would crawl. */
#define ROUND_TRIP_MAX 10000

static void check_events(const struct churn_schedule *s)
{
	uint8_t *st = calloc(s->slots ? s->slots : 1, 1);   /* 0 new, 1 alive, 2 gone */

	for (size_t i = 0; i < s->n; i++) {
		const struct churn_event *e = &s->ev[i];
		if (e->node >= s->slots || e->kind > CHURN_FAIL || e->t_ms > s->end_ms)
			abort();
		if (i > 0 && e->t_ms < s->ev[i - 1].t_ms)
			abort();
		if (st[e->node] != (e->kind == CHURN_JOIN ? 0 : 1))
			abort();
		st[e->node] = e->kind == CHURN_JOIN ? 1 : 2;
	}
	free(st);
}

static void check_round_trip(const struct churn_schedule *s)
{
	struct churn_schedule b;
	char *buf = NULL, err[256];
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f || churn_write(s, f) != 0)
		abort();
	fclose(f);
	if (churn_parse(buf, len, 0, &b, err, sizeof(err)) != 0)
		abort();
	if (b.n != s->n || b.slots != s->slots || b.end_ms != s->end_ms || b.seed != s->seed)
		abort();
	for (size_t i = 0; i < s->n; i++)
		if (b.ev[i].t_ms != s->ev[i].t_ms || b.ev[i].node != s->ev[i].node ||
		    b.ev[i].kind != s->ev[i].kind)
			abort();
	churn_free(&b);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct churn_schedule s;
	char err[256];

	if (churn_parse((const char *)data, size, 1, &s, err, sizeof(err)) == 0) {
		check_events(&s);
		if (s.n <= ROUND_TRIP_MAX)
			check_round_trip(&s);
	} else if (strncmp(err, "line ", 5) != 0 || s.ev || s.n) {
		abort();
	}
	churn_free(&s);
	return 0;
}
