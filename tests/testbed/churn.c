/*
 * Churn schedules: parse a SPLAY-style script, then resolve it by simulating
 * the population in time order.
 *
 * Parsing turns each line into a directive (struct dir) and checks what can
 * be checked without time: words, numbers, caps. Resolving runs a small
 * discrete-event simulation: every directive starts as one action at its
 * 'at' time in a heap ordered by (time, line, insertion); a ramp or a
 * steady churn re-arms itself one action at a time, so the heap stays small
 * and the work is bounded by the events made. Random choices (which live
 * nodes fail, gaps, lifetimes) are drawn when their action runs, so they see
 * the population of that moment, and the order of draws, hence the schedule,
 * depends only on the text and the seed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"
#include "tests/testbed/churn.h"

/* Slots are dense: every slot has its join event, so there are never more
 * slots than events. */
#define CHURN_MAX_SLOTS CHURN_MAX_EVENTS
/* Numbers in a script, and times once resolved (about 31,000 years):
 * enough for any run, small enough that doubles hold them to the ms. */
#define CHURN_MAX_NUM   1e12
#define CHURN_MAX_MS    1e15
#define CHURN_MAX_WORDS 16

/* Tapestry (IEEE JSAC 2004) V.C, Figs. 21-22: "In the first churn, insertion uses
 * a Poisson distribution with average interarrival time of 20 s and failure
 * uses an exponential distribution with mean node lifetime of 4 min. The
 * second churn ... 10 s and 2 min." */
#define CHURN1_EVERY 20.0
#define CHURN1_LIFE  240.0
#define CHURN2_EVERY 10.0
#define CHURN2_LIFE  120.0

enum dir_what { D_JOIN, D_PICK, D_ALL, D_CHURN, D_FLAP, D_END, D_TRACE };

/* One line of the script; times in seconds as written (before speedup). */
struct dir {
	uint32_t line;
	uint8_t what;       /* enum dir_what */
	uint8_t kind;       /* D_PICK, D_ALL, D_TRACE: the event's churn_kind */
	bool frac;          /* D_PICK: x is a percentage, else n a count */
	uint32_t n;         /* D_JOIN, D_PICK: count; D_TRACE: slot */
	double x;           /* D_PICK: percentage */
	double t, d;        /* at, and over (D_JOIN) or for (D_CHURN, D_FLAP) */
	double every, life; /* D_CHURN; D_FLAP: mean down and up times */
};

struct script {
	struct dir *d;
	size_t n, cap;
	uint64_t seed;
	double speedup;
	bool has_seed, has_speedup;
	char *err;
	size_t errlen;
};

static int bad(char *err, size_t errlen, uint32_t line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Every error is "line N: why" and -EINVAL. */
static int bad(char *err, size_t errlen, uint32_t line, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (!err || errlen == 0)
		return -EINVAL;
	k = snprintf(err, errlen, "line %u: ", line);
	if (k >= 0 && (size_t)k < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* ------------------------------------------------------------ words */

/* A plain decimal: digits with at most one '.', no sign, no exponent, so
 * that "-1", "1e3", "0x10", "nan" and "inf" are all refused. */
static bool parse_num(const char *s, double *ret)
{
	size_t digits = 0, dots = 0;

	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.' && dots++ == 0)
			continue;
		else
			return false;
	}
	if (digits == 0)
		return false;
	*ret = strtod(s, NULL);
	return *ret <= CHURN_MAX_NUM;
}

static bool parse_uint(const char *s, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return true;
}

static int word_kind(const char *w)
{
	if (strcmp(w, "join") == 0)
		return CHURN_JOIN;
	if (strcmp(w, "leave") == 0)
		return CHURN_LEAVE;
	if (strcmp(w, "fail") == 0)
		return CHURN_FAIL;
	if (strcmp(w, "back") == 0)
		return CHURN_BACK;
	return -1;
}

/* ------------------------------------------------------------ lines */

static struct dir *script_add(struct script *sc, uint32_t line, uint8_t what)
{
	struct dir *d;

	if (sc->n == sc->cap) {
		sc->cap = sc->cap ? 2 * sc->cap : 64;
		sc->d = xrealloc(sc->d, sc->cap * sizeof(*sc->d));
	}
	d = &sc->d[sc->n++];
	memset(d, 0, sizeof(*d));
	d->line = line;
	d->what = what;
	return d;
}

#define BAD(...) bad(sc->err, sc->errlen, line, __VA_ARGS__)

/* "leave|fail  N | F% | F % | all" after "at T". */
static int parse_pick(struct script *sc, uint32_t line, char **w, int nw, struct dir *d)
{
	char *pct;
	uint64_t n;

	if (nw < 1)
		return BAD("%s what? (N, F%% or all)", d->kind == CHURN_LEAVE ? "leave" : "fail");
	if (strcmp(w[0], "all") == 0) {
		d->what = D_ALL;
		return nw == 1 ? 0 : BAD("unexpected '%s'", w[1]);
	}
	pct = strchr(w[0], '%');
	if (pct || (nw >= 2 && strcmp(w[1], "%") == 0)) {
		int used = pct ? 1 : 2;     /* "50%" or "50 %" */

		if (pct && pct[1])
			return BAD("bad fraction '%s'", w[0]);
		if (pct)
			*pct = 0;
		if (!parse_num(w[0], &d->x))
			return BAD("bad fraction '%s%%'", w[0]);
		if (d->x > 100)
			return BAD("fraction %s%% is over 100%%", w[0]);
		d->frac = true;
		return nw == used ? 0 : BAD("unexpected '%s'", w[used]);
	}
	if (!parse_uint(w[0], CHURN_MAX_EVENTS, &n) || n == 0)
		return BAD("bad count '%s' (1 to %u, or F%%)", w[0], CHURN_MAX_EVENTS);
	d->n = (uint32_t)n;
	return nw == 1 ? 0 : BAD("unexpected '%s'", w[1]);
}

/* "join N [over D]" after "at T". */
static int parse_join(struct script *sc, uint32_t line, char **w, int nw, struct dir *d)
{
	uint64_t n;

	if (nw < 1 || !parse_uint(w[0], CHURN_MAX_JOIN, &n) || n == 0)
		return BAD("join needs a count from 1 to %u", CHURN_MAX_JOIN);
	d->n = (uint32_t)n;
	if (nw == 1)
		return 0;
	if (strcmp(w[1], "over") != 0)
		return BAD("unexpected '%s'", w[1]);
	if (nw < 3 || !parse_num(w[2], &d->d))
		return BAD("over needs a duration in seconds");
	return nw == 3 ? 0 : BAD("unexpected '%s'", w[3]);
}

/* "churn for D every A lifetime L", "churn1 for D", "churn2 for D". */
static int parse_churn(struct script *sc, uint32_t line, char **w, int nw, struct dir *d)
{
	bool preset = strcmp(w[0], "churn") != 0;

	if (nw < 3 || strcmp(w[1], "for") != 0 || !parse_num(w[2], &d->d))
		return BAD("%s needs 'for D' (seconds)", w[0]);
	if (preset) {
		d->every = w[0][5] == '1' ? CHURN1_EVERY : CHURN2_EVERY;
		d->life = w[0][5] == '1' ? CHURN1_LIFE : CHURN2_LIFE;
		return nw == 3 ? 0 : BAD("unexpected '%s'", w[3]);
	}
	if (nw < 7 || strcmp(w[3], "every") != 0 || !parse_num(w[4], &d->every) ||
	    strcmp(w[5], "lifetime") != 0 || !parse_num(w[6], &d->life))
		return BAD("churn needs 'for D every A lifetime L' (seconds)");
	if (d->every <= 0 || d->life <= 0)
		return BAD("churn needs every and lifetime above 0");
	if (nw > 7)
		return BAD("unexpected '%s'", w[7]);
	/* Joins alone are about D/A, and each may fail: 2 D/A events. */
	if (d->d / d->every > CHURN_MAX_EVENTS / 2)
		return BAD("churn of %g s every %g s makes over %u events",
		           d->d, d->every, CHURN_MAX_EVENTS);
	return 0;
}

/* "flap for D up U down W". */
static int parse_flap(struct script *sc, uint32_t line, char **w, int nw, struct dir *d)
{
	if (nw < 7 || strcmp(w[1], "for") != 0 || !parse_num(w[2], &d->d) || strcmp(w[3], "up") != 0 ||
	    !parse_num(w[4], &d->life) || strcmp(w[5], "down") != 0 || !parse_num(w[6], &d->every))
		return BAD("flap needs 'for D up U down W' (seconds)");
	if (d->life <= 0 || d->every <= 0)
		return BAD("flap needs up and down above 0");
	if (nw > 7)
		return BAD("unexpected '%s'", w[7]);
	return 0;
}

/* "at T ...": the synthetic directives. */
static int parse_at(struct script *sc, uint32_t line, char **w, int nw)
{
	struct dir *d;
	double t;
	int kind;

	if (nw < 2 || !parse_num(w[1], &t))
		return BAD("at needs a time in seconds, not '%s'", nw < 2 ? "" : w[1]);
	if (nw < 3)
		return BAD("at %s what?", w[1]);
	w += 2, nw -= 2;
	kind = word_kind(w[0]);
	if (kind == CHURN_JOIN) {
		d = script_add(sc, line, D_JOIN);
		d->t = t;
		return parse_join(sc, line, w + 1, nw - 1, d);
	}
	if (kind == CHURN_BACK)
		return BAD("back is for a trace line ('T back SLOT'); flap makes them");
	if (kind >= 0) {
		d = script_add(sc, line, D_PICK);
		d->t = t;
		d->kind = (uint8_t)kind;
		return parse_pick(sc, line, w + 1, nw - 1, d);
	}
	if (strcmp(w[0], "churn") == 0 || strcmp(w[0], "churn1") == 0 ||
	    strcmp(w[0], "churn2") == 0) {
		d = script_add(sc, line, D_CHURN);
		d->t = t;
		return parse_churn(sc, line, w, nw, d);
	}
	if (strcmp(w[0], "flap") == 0) {
		d = script_add(sc, line, D_FLAP);
		d->t = t;
		return parse_flap(sc, line, w, nw, d);
	}
	if (strcmp(w[0], "end") == 0) {
		for (size_t i = 0; i < sc->n; i++)
			if (sc->d[i].what == D_END)
				return BAD("a second 'end' (the first is line %u)", sc->d[i].line);
		d = script_add(sc, line, D_END);
		d->t = t;
		return nw == 1 ? 0 : BAD("unexpected '%s'", w[1]);
	}
	return BAD("unknown word '%s'", w[0]);
}

/* "T join|leave|fail|back SLOT": one line of an explicit trace. */
static int parse_trace(struct script *sc, uint32_t line, char **w, int nw)
{
	struct dir *d;
	uint64_t slot;
	double t;
	int kind;

	if (!parse_num(w[0], &t))
		return BAD("unknown word '%s'", w[0]);
	if (nw < 2 || (kind = word_kind(w[1])) < 0)
		return BAD("a trace line is 'T join|leave|fail|back SLOT'");
	if (nw < 3 || !parse_uint(w[2], CHURN_MAX_SLOTS - 1, &slot))
		return BAD("bad slot '%s' (0 to %u)", nw < 3 ? "" : w[2], CHURN_MAX_SLOTS - 1);
	if (nw > 3)
		return BAD("unexpected '%s'", w[3]);
	d = script_add(sc, line, D_TRACE);
	d->t = t;
	d->kind = (uint8_t)kind;
	d->n = (uint32_t)slot;
	return 0;
}

static int parse_words(struct script *sc, uint32_t line, char **w, int nw)
{
	uint64_t seed;
	double x;

	if (strcmp(w[0], "at") == 0)
		return parse_at(sc, line, w, nw);
	if (strcmp(w[0], "seed") == 0) {
		if (sc->has_seed)
			return BAD("a second 'seed'");
		if (nw != 2 || !parse_uint(w[1], UINT64_MAX, &seed))
			return BAD("seed needs one unsigned integer");
		sc->seed = seed;
		sc->has_seed = true;
		return 0;
	}
	if (strcmp(w[0], "speedup") == 0) {
		if (sc->has_speedup)
			return BAD("a second 'speedup'");
		if (nw != 2 || !parse_num(w[1], &x) || x < 1e-6 || x > 1e6)
			return BAD("speedup needs a factor from 0.000001 to 1000000");
		sc->speedup = x;
		sc->has_speedup = true;
		return 0;
	}
	return parse_trace(sc, line, w, nw);
}

/* Split one line (at most CHURN_MAX_LINE bytes, no newline) into words,
 * dropping a '#' comment, and parse it. */
static int parse_line(struct script *sc, uint32_t line, const char *p, size_t len)
{
	char buf[CHURN_MAX_LINE + 1], *w[CHURN_MAX_WORDS];
	int nw = 0;

	if (len > CHURN_MAX_LINE)
		return BAD("longer than %u bytes", CHURN_MAX_LINE);
	if (sc->n >= CHURN_MAX_EVENTS)
		return BAD("more than %u directives", CHURN_MAX_EVENTS);
	memcpy(buf, p, len);
	buf[len] = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c == '#') {
			buf[i] = 0;
			break;
		}
		if (c == '\t' || c == '\r')
			buf[i] = ' ';
		else if (c < 0x20 || c == 0x7f)
			return BAD("control character 0x%02x", c);
	}
	for (char *s = buf; *s;) {
		while (*s == ' ')
			*s++ = 0;
		if (!*s)
			break;
		if (nw == CHURN_MAX_WORDS)
			return BAD("too many words");
		w[nw++] = s;
		while (*s && *s != ' ')
			s++;
	}
	return nw == 0 ? 0 : parse_words(sc, line, w, nw);
}

#undef BAD

/* ------------------------------------------------------------ resolving */

enum act_what { A_START, A_RAMP, A_ARRIVE, A_DEATH, A_FLAP_DOWN, A_FLAP_BACK };

/* Something to do at t_ms. exact_ms keeps a churn's arrival time unrounded
 * so that rounding does not accumulate over thousands of gaps. */
struct act {
	uint64_t t_ms;
	uint64_t seq;
	uint32_t dir;       /* index into the script: ties go by line */
	uint32_t arg;       /* A_RAMP: which join; A_DEATH, A_FLAP_*: the slot */
	double exact_ms;
	uint8_t what;       /* enum act_what */
};

/* S_DOWN: failed, and may come back; S_GONE: left. */
enum slot_state { S_FREE, S_RESERVED, S_ALIVE, S_DOWN, S_GONE };

struct gen {
	const struct script *sc;
	struct churn_schedule *s;
	struct cfs_rng rng;
	/* pending actions, a binary min-heap */
	struct act *heap;
	size_t nheap, capheap;
	uint64_t seq;
	/* slots: state and, while alive, the index in live[] */
	uint8_t *state;
	uint32_t *pos;
	uint32_t capslot, next_slot;
	uint32_t *live, nlive, caplive;
	size_t capev;
	bool has_end;
	uint64_t end_ms;
};

static bool act_before(const struct act *a, const struct act *b)
{
	if (a->t_ms != b->t_ms)
		return a->t_ms < b->t_ms;
	if (a->dir != b->dir)
		return a->dir < b->dir;
	return a->seq < b->seq;
}

static void heap_push(struct gen *g, struct act a)
{
	size_t i;

	if (g->nheap == g->capheap) {
		g->capheap = g->capheap ? 2 * g->capheap : 64;
		g->heap = xrealloc(g->heap, g->capheap * sizeof(*g->heap));
	}
	a.seq = g->seq++;
	for (i = g->nheap++; i > 0; i = (i - 1) / 2) {
		struct act *up = &g->heap[(i - 1) / 2];
		if (!act_before(&a, up))
			break;
		g->heap[i] = *up;
	}
	g->heap[i] = a;
}

static struct act heap_pop(struct gen *g)
{
	struct act top = g->heap[0], last = g->heap[--g->nheap];
	size_t i = 0, c;

	while ((c = 2 * i + 1) < g->nheap) {
		if (c + 1 < g->nheap && act_before(&g->heap[c + 1], &g->heap[c]))
			c++;
		if (!act_before(&g->heap[c], &last))
			break;
		g->heap[i] = g->heap[c];
		i = c;
	}
	if (g->nheap)
		g->heap[i] = last;
	return top;
}

static uint64_t round_u64(double x)
{
	return (uint64_t)(x + 0.5);
}

/* Seconds as written to ms on the run's clock. */
static double to_ms(const struct gen *g, double sec)
{
	return sec * 1000.0 / g->sc->speedup;
}

static void push_at(struct gen *g, uint8_t what, uint32_t dir, uint32_t arg, double ms)
{
	heap_push(g, (struct act){ .t_ms = round_u64(ms), .dir = dir, .arg = arg,
	                           .exact_ms = ms, .what = what });
}

/* Exponential with the given mean: the gaps of a Poisson process and the
 * lifetimes of Tapestry's churn. 1 - u is in (0, 1], so the log is finite. */
static double rng_exp(struct gen *g, double mean)
{
	return -log1p(-cfs_rng_double(&g->rng)) * mean;
}

static void slot_grow(struct gen *g, uint32_t slot)
{
	uint32_t cap = g->capslot;

	if (slot < cap)
		return;
	while (cap <= slot)
		cap = cap ? 2 * cap : 1024;
	g->state = xrealloc(g->state, cap);
	g->pos = xrealloc(g->pos, (size_t)cap * sizeof(*g->pos));
	memset(g->state + g->capslot, S_FREE, cap - g->capslot);
	g->capslot = cap;
}

static int no_room(const struct gen *g, const struct act *a)
{
	if (g->s->n < CHURN_MAX_EVENTS)
		return 0;
	return bad(g->sc->err, g->sc->errlen, g->sc->d[a->dir].line,
	           "more than %u events", CHURN_MAX_EVENTS);
}

static int emit(struct gen *g, const struct act *a, uint32_t slot, uint8_t kind)
{
	const struct dir *d = &g->sc->d[a->dir];
	struct churn_schedule *s = g->s;

	if (no_room(g, a))
		return -EINVAL;
	if (g->has_end && a->t_ms > g->end_ms)
		return bad(g->sc->err, g->sc->errlen, d->line,
		           "an event at %.3f s, after the end at %.3f s",
		           a->t_ms / 1000.0, g->end_ms / 1000.0);
	if (s->n == g->capev) {
		g->capev = g->capev ? 2 * g->capev : 256;
		s->ev = xrealloc(s->ev, g->capev * sizeof(*s->ev));
	}
	s->ev[s->n++] = (struct churn_event){ .t_ms = a->t_ms, .node = slot, .kind = kind };
	if (slot >= s->slots)
		s->slots = slot + 1;
	return 0;
}

/* A join, or a failed slot's return (kind CHURN_BACK). */
static int node_join(struct gen *g, const struct act *a, uint32_t slot, uint8_t kind)
{
	if (g->nlive == g->caplive) {
		g->caplive = g->caplive ? 2 * g->caplive : 1024;
		g->live = xrealloc(g->live, (size_t)g->caplive * sizeof(*g->live));
	}
	g->state[slot] = S_ALIVE;
	g->pos[slot] = g->nlive;
	g->live[g->nlive++] = slot;
	return emit(g, a, slot, kind);
}

/* Remove slot from live[] by moving the last one into its place; a
 * failed one may come back, one that left may not. */
static void node_gone(struct gen *g, uint32_t slot, uint8_t kind)
{
	uint32_t i = g->pos[slot], last = g->live[--g->nlive];

	g->live[i] = last;
	g->pos[last] = i;
	g->state[slot] = kind == CHURN_FAIL ? S_DOWN : S_GONE;
}

/* A fresh slot for a generated join, stepping over the slots that explicit
 * trace lines join (whether they have yet or not). */
static int join_fresh(struct gen *g, const struct act *a, uint32_t *ret_slot)
{
	if (no_room(g, a))
		return -EINVAL;
	while (g->next_slot < g->capslot && g->state[g->next_slot] != S_FREE)
		g->next_slot++;
	if (g->next_slot >= CHURN_MAX_SLOTS)
		return bad(g->sc->err, g->sc->errlen, g->sc->d[a->dir].line,
		           "more than %u node slots", CHURN_MAX_SLOTS);
	slot_grow(g, g->next_slot);
	*ret_slot = g->next_slot++;
	return node_join(g, a, *ret_slot, CHURN_JOIN);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Leave or fail k random live nodes (all of them when fewer are alive).
 * They are emitted by slot so that a trace reads in order; which ones is
 * the random part. */
static int pick_live(struct gen *g, const struct act *a, uint64_t k, uint8_t kind)
{
	uint32_t *out, m;
	int r = 0;

	m = k < g->nlive ? (uint32_t)k : g->nlive;
	if (m == 0)
		return 0;
	out = xmalloc((size_t)m * sizeof(*out));
	for (uint32_t i = 0; i < m; i++) {
		uint32_t j = (uint32_t)(cfs_rng_double(&g->rng) * g->nlive);
		out[i] = g->live[j];
		node_gone(g, out[i], kind);
	}
	qsort(out, m, sizeof(*out), cmp_u32);
	for (uint32_t i = 0; i < m && r == 0; i++)
		r = emit(g, a, out[i], kind);
	free(out);
	return r;
}

static int run_trace(struct gen *g, const struct act *a, const struct dir *d)
{
	if (d->kind == CHURN_JOIN)
		return node_join(g, a, d->n, CHURN_JOIN);   /* reserved before the run */
	if (d->kind == CHURN_BACK) {
		if (d->n >= g->capslot || g->state[d->n] != S_DOWN)
			return bad(g->sc->err, g->sc->errlen, d->line,
			           "slot %u has not failed at %.3f s", d->n, a->t_ms / 1000.0);
		return node_join(g, a, d->n, CHURN_BACK);
	}
	if (d->n >= g->capslot || g->state[d->n] != S_ALIVE)
		return bad(g->sc->err, g->sc->errlen, d->line,
		           "slot %u is not alive at %.3f s", d->n, a->t_ms / 1000.0);
	node_gone(g, d->n, d->kind);
	return emit(g, a, d->n, d->kind);
}

/* A churn's arrival: join, then maybe its death, then the next arrival.
 * Both draws happen here, in this order, whatever else is going on.
 *
 * Only the nodes this directive joins get lifetimes; the nodes alive before
 * it (the ramp, say) never churn. That is what Tapestry did (V.C): "we
 * measure the success rate of requests on a set of stable nodes while
 * constantly churning a set of dynamic nodes ... The SOSS simulations start
 * with a stable set of 830 nodes and peaks at 858 nodes during churn". The
 * stable set keeps the population from drifting to zero and the workload's
 * clients on nodes that stay; the dynamic set averages L/A nodes (Little's
 * law: 12 for both presets, so 830 + 12 plus Poisson noise peaks near 858).
 * A lifetime that runs past T+D is not cut short: that node stays, as the
 * churn has stopped. Departures are crashes, as in Tapestry ("randomly kills
 * nodes"); a graceful variant is a 'leave' directive away. */
static int run_arrive(struct gen *g, const struct act *a, const struct dir *d)
{
	double stop = to_ms(g, d->t + d->d);
	double death = a->exact_ms + rng_exp(g, to_ms(g, d->life));
	double next = a->exact_ms + rng_exp(g, to_ms(g, d->every));
	uint32_t slot;
	int r;

	r = join_fresh(g, a, &slot);
	if (r < 0)
		return r;
	if (death < stop)
		push_at(g, A_DEATH, a->dir, slot, death);
	if (next < stop)
		push_at(g, A_ARRIVE, a->dir, 0, next);
	return 0;
}

/* The ramp's i-th join of n, evenly over [T, T+D): at T + i D / n. */
static int run_ramp(struct gen *g, const struct act *a, const struct dir *d)
{
	uint32_t i = a->arg, slot;
	int r = join_fresh(g, a, &slot);

	if (r == 0 && i + 1 < d->n)
		push_at(g, A_RAMP, a->dir, i + 1,
		        to_ms(g, d->t) + to_ms(g, d->d) * (i + 1) / d->n);
	return r;
}

/* Flapping (transient failures): a node up fails after an exponential
 * time of mean U, a node down comes back after one of mean W; nothing is
 * scheduled past T+D, and a node down then comes back at T+D. A node that
 * something else stopped meanwhile (its state is not the expected one)
 * stops flapping. */
static int flap_down(struct gen *g, const struct act *a, const struct dir *d)
{
	double stop = to_ms(g, d->t + d->d), back;

	if (g->state[a->arg] != S_ALIVE)
		return 0;
	node_gone(g, a->arg, CHURN_FAIL);
	back = a->exact_ms + rng_exp(g, to_ms(g, d->every));
	push_at(g, A_FLAP_BACK, a->dir, a->arg, back < stop ? back : stop);
	return emit(g, a, a->arg, CHURN_FAIL);
}

static int flap_back(struct gen *g, const struct act *a, const struct dir *d)
{
	double stop = to_ms(g, d->t + d->d), down;

	if (g->state[a->arg] != S_DOWN)
		return 0;
	down = a->exact_ms + rng_exp(g, to_ms(g, d->life));
	if (down < stop)
		push_at(g, A_FLAP_DOWN, a->dir, a->arg, down);
	return node_join(g, a, a->arg, CHURN_BACK);
}

/* The start of a flap: each node alive now, by slot, is down with
 * probability 1 - a (then back after a down time) or up until its first
 * failure; two draws a node, in that order. */
static int run_flap(struct gen *g, const struct act *a, const struct dir *d)
{
	double stop = to_ms(g, d->t + d->d), up = d->life / (d->life + d->every);
	uint32_t n = g->nlive, *nodes = xmalloc(((size_t)n + 1) * sizeof(*nodes));
	int r = 0;

	memcpy(nodes, g->live, (size_t)n * sizeof(*nodes));
	qsort(nodes, n, sizeof(*nodes), cmp_u32);
	for (uint32_t i = 0; i < n && r == 0; i++) {
		bool down = cfs_rng_double(&g->rng) >= up;
		double next = a->exact_ms + rng_exp(g, to_ms(g, down ? d->every : d->life));
		if (down) {
			node_gone(g, nodes[i], CHURN_FAIL);
			push_at(g, A_FLAP_BACK, a->dir, nodes[i], next < stop ? next : stop);
			r = emit(g, a, nodes[i], CHURN_FAIL);
		} else if (next < stop) {
			push_at(g, A_FLAP_DOWN, a->dir, nodes[i], next);
		}
	}
	free(nodes);
	return r;
}

static int run_start(struct gen *g, const struct act *a, const struct dir *d)
{
	double first;
	uint32_t slot;
	int r = 0;

	switch (d->what) {
	case D_JOIN:
		if (d->d > 0)
			return run_ramp(g, a, d);
		for (uint32_t i = 0; i < d->n && r == 0; i++)
			r = join_fresh(g, a, &slot);
		return r;
	case D_PICK:
		return pick_live(g, a, d->frac ? round_u64(d->x * g->nlive / 100.0) : d->n,
		                 d->kind);
	case D_ALL:
		return pick_live(g, a, g->nlive, d->kind);
	case D_CHURN:
		first = a->exact_ms + rng_exp(g, to_ms(g, d->every));
		if (first < to_ms(g, d->t + d->d))
			push_at(g, A_ARRIVE, a->dir, 0, first);
		return 0;
	case D_FLAP:
		return run_flap(g, a, d);
	case D_TRACE:
		return run_trace(g, a, d);
	default:
		return 0;
	}
}

static int run_act(struct gen *g, const struct act *a)
{
	const struct dir *d = &g->sc->d[a->dir];

	switch (a->what) {
	case A_START:
		return run_start(g, a, d);
	case A_RAMP:
		return run_ramp(g, a, d);
	case A_ARRIVE:
		return run_arrive(g, a, d);
	case A_DEATH:
		/* gone already: a mass failure or 'leave all' took it */
		if (g->state[a->arg] != S_ALIVE)
			return 0;
		node_gone(g, a->arg, CHURN_FAIL);
		return emit(g, a, a->arg, CHURN_FAIL);
	case A_FLAP_DOWN:
		return flap_down(g, a, d);
	case A_FLAP_BACK:
		return flap_back(g, a, d);
	}
	return 0;
}

/* Before the run: times within range, the end, and the slots explicit trace
 * lines join (each only once), so generated joins step over them. */
static int prepare(struct gen *g)
{
	const struct script *sc = g->sc;

	for (size_t i = 0; i < sc->n; i++) {
		const struct dir *d = &sc->d[i];
		double t = to_ms(g, d->t);

		if (to_ms(g, d->t + d->d) > CHURN_MAX_MS)
			return bad(sc->err, sc->errlen, d->line, "time too large");
		if (d->what == D_END) {
			g->has_end = true;
			g->end_ms = round_u64(t);
			continue;
		}
		if (d->what == D_TRACE && d->kind == CHURN_JOIN) {
			slot_grow(g, d->n);
			if (g->state[d->n] != S_FREE)
				return bad(sc->err, sc->errlen, d->line,
				           "slot %u is already used", d->n);
			g->state[d->n] = S_RESERVED;
		}
		push_at(g, A_START, (uint32_t)i, 0, t);
	}
	return 0;
}

static int resolve(const struct script *sc, struct churn_schedule *s)
{
	struct gen g = { .sc = sc, .s = s };
	int r;

	cfs_rng_seed(&g.rng, sc->seed);
	r = prepare(&g);
	while (r == 0 && g.nheap > 0) {
		struct act a = heap_pop(&g);
		r = run_act(&g, &a);
	}
	if (r == 0)
		s->end_ms = g.has_end ? g.end_ms : s->n ? s->ev[s->n - 1].t_ms : 0;
	free(g.heap);
	free(g.state);
	free(g.pos);
	free(g.live);
	return r;
}

/* ------------------------------------------------------------ public */

int churn_parse(const char *text, size_t len, uint64_t seed,
                struct churn_schedule *ret, char *err, size_t errlen)
{
	struct script sc = { .seed = seed, .speedup = 1.0, .err = err, .errlen = errlen };
	const char *p = text, *end = text + len;
	uint32_t line = 0;
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	ret->speedup = 1.0;
	if (err && errlen)
		err[0] = 0;
	while (p < end && r == 0) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		r = parse_line(&sc, ++line, p, (size_t)(eol - p));
		p = eol + 1;
	}
	if (r == 0) {
		ret->seed = sc.seed;
		ret->speedup = sc.speedup;
		r = resolve(&sc, ret);
	}
	free(sc.d);
	if (r < 0) {
		churn_free(ret);
		ret->seed = sc.seed;
	}
	return r;
}

void churn_free(struct churn_schedule *s)
{
	if (!s)
		return;
	free(s->ev);
	s->ev = NULL;
	s->n = 0;
	s->slots = 0;
	s->end_ms = 0;
}

int churn_write(const struct churn_schedule *s, FILE *f)
{
	static const char *const word[] = { "join", "leave", "fail", "back" };

	fprintf(f, "# CFS churn trace: %zu events on %u node slots", s->n, s->slots);
	if (s->speedup != 1.0)
		fprintf(f, ", times already divided by speedup %g", s->speedup);
	fprintf(f, "\nseed %" PRIu64 "\n", s->seed);
	for (size_t i = 0; i < s->n; i++) {
		const struct churn_event *e = &s->ev[i];
		fprintf(f, "%" PRIu64 ".%03u %s %u\n", e->t_ms / 1000,
		        (unsigned)(e->t_ms % 1000), word[e->kind % 4], e->node);
	}
	fprintf(f, "at %" PRIu64 ".%03u end\n", s->end_ms / 1000, (unsigned)(s->end_ms % 1000));
	return ferror(f) ? -EIO : 0;
}

uint32_t churn_alive_at(const struct churn_schedule *s, uint64_t t_ms)
{
	uint32_t alive = 0;

	for (size_t i = 0; i < s->n && s->ev[i].t_ms <= t_ms; i++) {
		if (s->ev[i].kind == CHURN_JOIN || s->ev[i].kind == CHURN_BACK)
			alive++;
		else
			alive--;
	}
	return alive;
}
