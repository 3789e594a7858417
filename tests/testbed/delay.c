/*
 * The wide-area delay line's logic: the matrix parser and the heap of held
 * packets (see delay.h).
 */
#include "tests/testbed/delay.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void say(char *err, size_t errlen, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "line %u: ", line);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < errlen)
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* A plain non-negative decimal with at most DIGITS places, as an integer in
 * units of 10^-DIGITS; no sign, no exponent. -1 when malformed or over MAX. */
static int parse_dec(const char *s, unsigned digits, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	unsigned places = 0;
	bool dot = false, any = false;

	for (; *s; s++) {
		if (*s == '.' && !dot) {
			dot = true;
			continue;
		}
		if (*s < '0' || *s > '9')
			return -1;
		if (dot && ++places > digits)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
		any = true;
		if (v > max * 1000000)   /* far past any bound: stop before overflow */
			return -1;
	}
	if (!any)
		return -1;
	for (; places < digits; places++)
		v *= 10;
	if (v > max)
		return -1;
	*out = v;
	return 0;
}

static bool region_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 31)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      *s == '-' || *s == '_' || *s == '.'))
			return false;
	return true;
}

/* The index of region NAME, added if new; -1 when the table is full. */
static int region_of(struct delay_matrix *m, const char *name)
{
	for (unsigned i = 0; i < m->nregions; i++)
		if (!strcmp(m->region[i], name))
			return (int)i;
	if (m->nregions == DELAY_MAX_REGIONS)
		return -1;
	snprintf(m->region[m->nregions], sizeof(m->region[0]), "%s", name);
	return (int)m->nregions++;
}

static int node_cmp(const void *a, const void *b)
{
	const struct delay_node *x = a, *y = b;

	return x->ip < y->ip ? -1 : x->ip > y->ip;
}

/* One line's words (at most 5), split on blanks; the count, or 6 when there
 * are more. */
static unsigned split(char *s, char *w[5])
{
	unsigned n = 0;

	for (char *t = strtok(s, " \t\r"); t; t = strtok(NULL, " \t\r")) {
		if (n == 5)
			return 6;
		w[n++] = t;
	}
	return n;
}

static int parse_line(struct delay_matrix *m, char *s, unsigned line, char *err, size_t errlen)
{
	char *w[5];
	unsigned n = split(s, w);

	if (n == 0)
		return 0;
	if (!strcmp(w[0], "node") && n == 3) {
		struct in_addr a;
		int r;
		if (inet_pton(AF_INET, w[1], &a) != 1)
			return say(err, errlen, line, "'%s' is not an IPv4 address", w[1]), -1;
		if (!region_name_ok(w[2]))
			return say(err, errlen, line, "bad region name"), -1;
		if (m->nnodes == DELAY_MAX_NODES)
			return say(err, errlen, line, "more than %u nodes", DELAY_MAX_NODES), -1;
		if ((r = region_of(m, w[2])) < 0)
			return say(err, errlen, line, "more than %u regions", DELAY_MAX_REGIONS), -1;
		m->node[m->nnodes++] = (struct delay_node){ .ip = ntohl(a.s_addr), .region = (uint8_t)r };
		return 0;
	}
	if (!strcmp(w[0], "rtt") && (n == 4 || n == 5)) {
		uint64_t us, ppm = 0;
		int a, b;
		if (!region_name_ok(w[1]) || !region_name_ok(w[2]))
			return say(err, errlen, line, "bad region name"), -1;
		if (parse_dec(w[3], 3, (uint64_t)DELAY_MAX_RTT_MS * 1000, &us) < 0)
			return say(err, errlen, line, "rtt '%s' is not a decimal from 0 to %u ms",
			           w[3], DELAY_MAX_RTT_MS), -1;
		if (n == 5 && parse_dec(w[4], 4, 1000000, &ppm) < 0)
			return say(err, errlen, line, "loss '%s' is not a percentage from 0 to 100", w[4]), -1;
		if ((a = region_of(m, w[1])) < 0 || (b = region_of(m, w[2])) < 0)
			return say(err, errlen, line, "more than %u regions", DELAY_MAX_REGIONS), -1;
		m->oneway_us[a][b] = m->oneway_us[b][a] = (uint32_t)(us / 2);
		m->loss_ppm[a][b] = m->loss_ppm[b][a] = (uint32_t)ppm;
		return 0;
	}
	return say(err, errlen, line, "expected 'node IPV4 REGION' or 'rtt REGION REGION MS [LOSS%%]'"), -1;
}

int delay_parse(const char *text, size_t len, struct delay_matrix *m, char *err, size_t errlen)
{
	char buf[DELAY_MAX_LINE + 1];
	unsigned line = 0;
	size_t i = 0;

	memset(m, 0, sizeof(*m));
	while (i < len) {
		size_t e = i;
		while (e < len && text[e] != '\n')
			e++;
		line++;
		if (e - i > DELAY_MAX_LINE)
			return say(err, errlen, line, "longer than %u bytes", DELAY_MAX_LINE), -1;
		memcpy(buf, text + i, e - i);
		buf[e - i] = '\0';
		if (memchr(buf, '\0', e - i))
			return say(err, errlen, line, "a NUL byte"), -1;
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = '\0';
		if (parse_line(m, buf, line, err, errlen) < 0)
			return -1;
		i = e + 1;
	}
	qsort(m->node, m->nnodes, sizeof(m->node[0]), node_cmp);
	for (unsigned k = 1; k < m->nnodes; k++)
		if (m->node[k].ip == m->node[k - 1].ip) {
			struct in_addr a = { .s_addr = htonl(m->node[k].ip) };
			char s[INET_ADDRSTRLEN];
			inet_ntop(AF_INET, &a, s, sizeof(s));
			snprintf(err, errlen, "%s has two node lines", s);
			return -1;
		}
	return 0;
}

static int region_at(const struct delay_matrix *m, uint32_t ip)
{
	struct delay_node key = { .ip = ip };
	const struct delay_node *n = bsearch(&key, m->node, m->nnodes, sizeof(key), node_cmp);

	return n ? n->region : -1;
}

void delay_pair(const struct delay_matrix *m, uint32_t src, uint32_t dst,
                uint32_t *oneway_us, uint32_t *loss_ppm)
{
	int a = region_at(m, src), b = region_at(m, dst);

	*oneway_us = a < 0 || b < 0 ? 0 : m->oneway_us[a][b];
	*loss_ppm = a < 0 || b < 0 ? 0 : m->loss_ppm[a][b];
}

/* ---------------------------------------------------------------- the heap */

void delay_line_init(struct delay_line *l)
{
	memset(l, 0, sizeof(*l));
}

void delay_line_free(struct delay_line *l)
{
	free(l->h);
	memset(l, 0, sizeof(*l));
}

static bool before(const struct delay_held *a, const struct delay_held *b)
{
	return a->release_us < b->release_us || (a->release_us == b->release_us && a->seq < b->seq);
}

int delay_line_push(struct delay_line *l, uint32_t id, uint64_t release_us)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		struct delay_held *h = realloc(l->h, cap * sizeof(*h));
		if (!h)
			return -1;
		l->h = h;
		l->cap = cap;
	}
	size_t i = l->n++;
	struct delay_held x = { .release_us = release_us, .seq = l->seq++, .id = id };
	while (i > 0 && before(&x, &l->h[(i - 1) / 2])) {
		l->h[i] = l->h[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	l->h[i] = x;
	return 0;
}

uint64_t delay_line_next(const struct delay_line *l)
{
	return l->n ? l->h[0].release_us : UINT64_MAX;
}

bool delay_line_pop_due(struct delay_line *l, uint64_t now_us, uint32_t *id)
{
	if (!l->n || l->h[0].release_us > now_us)
		return false;
	*id = l->h[0].id;
	struct delay_held x = l->h[--l->n];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= l->n)
			break;
		if (c + 1 < l->n && before(&l->h[c + 1], &l->h[c]))
			c++;
		if (!before(&l->h[c], &x))
			break;
		l->h[i] = l->h[c];
		i = c;
	}
	if (l->n)
		l->h[i] = x;
	return true;
}
