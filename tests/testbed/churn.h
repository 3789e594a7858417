/*
 * Churn schedules for the evaluation testbed, after SPLAY's churn manager
 * (SPLAY 3.2, 5.5): a short script of phases — a join ramp, steady churn, a
 * massive failure, a flash crowd — or an explicit trace, resolved ahead of
 * time into a sorted list of join/leave/fail events on node slots.
 *
 * The generator simulates the population, so "fail 50%" names concrete live
 * slots, chosen with a cfs_rng: the same text and seed give the same events.
 * A joining node always gets a fresh slot (slots are never reused), so the
 * testbed starts slot i on its join and stops it (gracefully for a leave, by
 * crash for a fail) on its leave or fail.
 *
 * The language, one directive per line, '#' starts a comment, times in
 * seconds (decimals allowed, at most 3 are kept: times resolve to ms):
 *
 *   seed N                         overrides the seed argument
 *   speedup X                      every time and duration in the script,
 *                                  wherever the line is, divided by X > 0
 *   at T join N [over D]           N fresh nodes at T, or evenly over [T, T+D)
 *   at T leave N | leave F%        graceful leave of random live nodes (all
 *                                  of them if fewer; F% of the live ones,
 *                                  rounded to nearest, F from 0 to 100)
 *   at T fail N  | fail F%         crash of random live nodes, the same way
 *   at T leave all | fail all
 *   at T churn for D every A lifetime L
 *                                  Poisson joins, mean gap A, during [T, T+D);
 *                                  each such node crashes after an exponential
 *                                  lifetime of mean L if before T+D, else
 *                                  stays. Nodes alive before never churn: the
 *                                  static base of Tapestry's experiments (see
 *                                  run_arrive in churn.c)
 *   at T churn1 for D              Tapestry's churn 1: every 20 lifetime 240
 *   at T churn2 for D              Tapestry's churn 2: every 10 lifetime 120
 *   at T flap for D up U down W    transient failures (Carbonite): every node
 *                                  alive at T alternates during [T, T+D)
 *                                  between up, for an exponential time of
 *                                  mean U, and crashed, for one of mean W,
 *                                  coming back with what it stored ('back');
 *                                  so each is up with probability
 *                                  a = U / (U + W). Each starts in that
 *                                  steady state: down at T with probability
 *                                  1 - a. At T+D the ones down come back
 *   at T end                       the run's end; no event may come later
 *   T join|leave|fail|back SLOT    an explicit trace line (what churn_write
 *                                  emits); a slot joins once, leaves or
 *                                  fails only while alive, and comes back
 *                                  only after it failed
 *
 * Directives may come in any order and overlap in time; events at one
 * millisecond keep the order of the lines that made them. A flapping node
 * that another directive stops (a mass failure, a leave) stops flapping:
 * a failed one stays down. Refused, with the
 * line: unknown words, times that are not plain non-negative decimals, F
 * over 100, a trace line that stops a slot not alive then or joins a slot
 * joined before, 'join N' over CHURN_MAX_JOIN, a churn whose D/A would make
 * over CHURN_MAX_EVENTS events, more than CHURN_MAX_EVENTS events, a line
 * over CHURN_MAX_LINE bytes, an event after the 'end'.
 */
#ifndef CFS_TESTBED_CHURN_H
#define CFS_TESTBED_CHURN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Hard caps, so that a short script cannot make unbounded work. */
#define CHURN_MAX_EVENTS 1000000u
#define CHURN_MAX_JOIN   100000u   /* N of one 'join N' */
#define CHURN_MAX_LINE   1024u     /* bytes, without the newline */

/* BACK: a slot that failed starts again on its old data (same address,
 * same IDs, its store as the crash left it). */
enum churn_kind { CHURN_JOIN, CHURN_LEAVE, CHURN_FAIL, CHURN_BACK };

struct churn_event {
	uint64_t t_ms;
	uint32_t node;      /* slot */
	uint8_t kind;       /* enum churn_kind */
};

struct churn_schedule {
	struct churn_event *ev;   /* sorted by t_ms; owned, churn_free frees */
	size_t n;
	uint32_t slots;           /* one past the highest slot used */
	uint64_t end_ms;          /* of the 'end' directive, else the last event */
	uint64_t seed;            /* the one used: the argument or 'seed N' */
	double speedup;           /* 1 unless 'speedup X' */
};

/* Resolve the script text[0..len) into *ret: 0, or -EINVAL with "line N: why"
 * in err (errlen bytes, may be 0) and *ret left empty. */
int churn_parse(const char *text, size_t len, uint64_t seed,
                struct churn_schedule *ret, char *err, size_t errlen);

/* Free what churn_parse allocated; s may be NULL or already freed. */
void churn_free(struct churn_schedule *s);

/* Write s as an explicit trace (seed, one line per event, end) that
 * churn_parse reads back to the identical events, slots, end and seed.
 * Times are written already divided by the speedup. 0 or -EIO. */
int churn_write(const struct churn_schedule *s, FILE *f);

/* The number of live nodes once every event at or before t_ms happened. */
uint32_t churn_alive_at(const struct churn_schedule *s, uint64_t t_ms);

#endif
