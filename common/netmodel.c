/*
 * The network models, for evaluation only (DESIGN §7): a simple one (loss
 * and a fixed delay) and the wide-area one.
 *
 * Nothing here is shared between nodes: where an address sits is a pure
 * function of hash(seed, IP, port), so cfsd processes started separately
 * (and the many nodes of cfs-ring) agree on every RTT and on who is slow.
 * The transport calls the sender's on_send for each datagram; it drops
 * with probability loss, or holds the datagram for half the modelled RTT
 * plus, when the sender is slow, a long-tailed extra delay.
 *
 * The synthetic space. DHash++ ran its simulations on the King data set
 * (Fig. 3: median RTT 134 ms, mean 154 ms, a long tail). We get that shape
 * from a plane of a few weighted "continents" (most pairs are within one
 * or between two neighbouring ones, which makes the body of the
 * distribution; the far pairs make the tail) and, as in Vivaldi's height
 * model, a per-node access-link height added to every path through the
 * node, log-normal so a few nodes sit behind very slow links:
 *
 *	RTT(a, b) = scale · (|xa − xb| + ha + hb)
 *
 * The table is in "base" milliseconds; WAN_BASE_MEDIAN_MS is the median
 * RTT of that table over random pairs (measured: see the constant), so
 * scale = median_rtt_ms / WAN_BASE_MEDIAN_MS puts the median where asked
 * and keeps the shape. tests/unit/test_netmodel.c checks both.
 */
#include "common/cfs.h"

#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SPEC_MAX 4096
#define NUM_MAX 24                     /* characters in one number */
#define MATRIX_VALUE_MAX_MS 60000.0    /* one minute: no real path is slower */
#define MATRIX_FILE_MAX (256u << 20)
#define SLOW_SIGMA 1.5                 /* log-normal shape of the slow delay */
#define SLOW_CAP_US 60000000u          /* far past any RTO; see slow_extra_us */

/* A region of the plane: share of the addresses, centre, spread (base ms). */
struct continent {
	double weight, x, y, sigma;
};

/*
 * Loosely the King hosts: mostly North America and Europe, then East Asia,
 * South America, Oceania and the rest. The distances between centres are
 * the typical RTTs between the regions (transatlantic ~90 ms, transpacific
 * ~130 ms, Europe–Asia and anything–Oceania 200 ms and more).
 */
static const struct continent continents[] = {
	{ 0.40,    0,    0, 20 },   /* North America */
	{ 0.27,   90,   10, 15 },   /* Europe */
	{ 0.15,  -85,  100, 20 },   /* East Asia */
	{ 0.08,   45, -110, 18 },   /* South America */
	{ 0.05, -155,   60, 15 },   /* Oceania */
	{ 0.05,  175,  100, 25 },   /* Africa, South and West Asia */
};

/* Access heights: log-normal, median HEIGHT_MEDIAN base ms, shape
 * HEIGHT_SIGMA: most links add a few ms, about 2 % over 100 ms
 * (modems, satellites, loaded hosts), which makes King's long tail. */
#define HEIGHT_MEDIAN 5.0
#define HEIGHT_SIGMA 1.4

/*
 * The median RTT of the table above over random address pairs: 132.85 base
 * ms over 10^6 pairs (any seed: 132.7–133.0). Scaled to the default 130
 * ms the distribution is: mean 140, p10 41, p25 78, p50 130, p75 189, p90
 * 250, p99 365, p99.9 645 ms (p99/p50 = 2.8). King (DHash++ Fig. 3):
 * median 134, mean 154.
 */
#define WAN_BASE_MEDIAN_MS 132.85

/* Where one address sits. */
struct place {
	double x, y, h;  /* base ms */
	double u_slow;   /* uniform in [0, 1): slow when below w->slow */
	uint64_t row;    /* matrix row, before the modulus */
	uint8_t key[18]; /* canonical IP and port, for equality */
	size_t keylen;
};

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* ------------------------------------------------------------ places */

/* The bytes that name an address: an IPv4-mapped IPv6 address is its IPv4
 * address, so a dual-stack socket's view of a peer agrees with the peer's. */
static size_t addr_key(const struct cfs_addr *a, uint8_t out[static 18])
{
	const uint8_t *ip;
	size_t n = cfs_addr_ip_bytes(a, &ip);
	uint16_t port = cfs_addr_port(a);
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	if (n == 16 && memcmp(ip, mapped, 12) == 0) {
		ip += 12;
		n = 4;
	}
	memcpy(out, ip, n);
	cfs_put_be16(out + n, port);
	return n + 2;
}

/* Uniform in (0, 1]: safe under log(). */
static double open_unit(struct cfs_rng *r)
{
	return 1.0 - cfs_rng_double(r);
}

/* One standard normal (Box–Muller); the partner value is not kept, so the
 * stream stays a plain function of the state. */
static double std_normal(struct cfs_rng *r)
{
	double u = open_unit(r), v = cfs_rng_double(r);
	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static const struct continent *pick_continent(double u)
{
	size_t i;

	for (i = 0; i + 1 < CFS_ARRAY_SIZE(continents); i++) {
		if (u < continents[i].weight)
			break;
		u -= continents[i].weight;
	}
	return &continents[i];
}

/*
 * hash(seed, address) seeds a private stream, and each property takes its
 * own draws in a fixed order, so slowness, row and position are
 * independent and never change when another property's code does.
 */
static void locate(const struct cfs_wan *w, const struct cfs_addr *a, struct place *ret)
{
	uint8_t buf[8 + 8 + 18];
	struct cfs_id id;
	struct cfs_rng r;
	uint64_t s = 0;

	ret->keylen = addr_key(a, ret->key);
	memcpy(buf, "cfs-wan", 8);
	for (int i = 0; i < 8; i++)
		buf[8 + i] = (uint8_t)(w->seed >> (8 * i));
	memcpy(buf + 16, ret->key, ret->keylen);
	cfs_hash(&id, buf, 16 + ret->keylen);
	for (int i = 0; i < 8; i++)
		s |= (uint64_t)id.b[i] << (8 * i);
	cfs_rng_seed(&r, s);

	ret->u_slow = cfs_rng_double(&r);
	ret->row = cfs_rng_next(&r);
	const struct continent *c = pick_continent(cfs_rng_double(&r));
	ret->x = c->x + c->sigma * std_normal(&r);
	ret->y = c->y + c->sigma * std_normal(&r);
	ret->h = HEIGHT_MEDIAN * exp(HEIGHT_SIGMA * std_normal(&r));
}

static bool same_addr(const struct place *a, const struct place *b)
{
	return a->keylen == b->keylen && memcmp(a->key, b->key, a->keylen) == 0;
}

uint64_t cfs_wan_rtt_us(const struct cfs_wan *w, const struct cfs_addr *a,
                        const struct cfs_addr *b)
{
	struct place pa, pb;

	locate(w, a, &pa);
	locate(w, b, &pb);
	if (same_addr(&pa, &pb))
		return 0;
	if (w->matrix) {
		uint32_t n = w->matrix->n, ra = (uint32_t)(pa.row % n), rb = (uint32_t)(pb.row % n);
		return ra == rb ? CFS_WAN_LAN_RTT_US : w->matrix->rtt_us[(size_t)ra * n + rb];
	}
	/* The heights summed first: a + b == b + a exactly, so RTT(a, b) ==
	 * RTT(b, a) to the last bit. */
	double d = hypot(pa.x - pb.x, pa.y - pb.y) + (pa.h + pb.h);
	return (uint64_t)llround(d * (w->median_rtt_ms / WAN_BASE_MEDIAN_MS) * 1000.0);
}

bool cfs_wan_is_slow(const struct cfs_wan *w, const struct cfs_addr *a)
{
	struct place p;

	if (w->slow <= 0)
		return false;
	locate(w, a, &p);
	return p.u_slow < w->slow;
}

uint32_t cfs_wan_row(const struct cfs_wan *w, const struct cfs_addr *a)
{
	struct place p;

	if (!w->matrix)
		return 0;
	locate(w, a, &p);
	return (uint32_t)(p.row % w->matrix->n);
}

/* ------------------------------------------------------------ sending */

/* The simple model (cfs_netmodel_simple): loss and one delay for every
 * datagram, whoever it goes to. */
static bool simple_on_send(void *ctx, const struct cfs_addr *to, size_t len, uint64_t *ret_delay_us)
{
	struct cfs_netmodel_simple *s = ctx;
	if (s->loss > 0 && cfs_rng_double(&s->rng) < s->loss)
		return true;
	*ret_delay_us = s->delay_us;
	return false;
}

void cfs_netmodel_simple_init(struct cfs_netmodel_simple *s, double loss,
                              uint64_t delay_us, uint64_t seed)
{
	s->loss = loss;
	s->delay_us = delay_us;
	cfs_rng_seed(&s->rng, seed);
}

struct cfs_netmodel cfs_netmodel_simple_ops(struct cfs_netmodel_simple *s)
{
	return (struct cfs_netmodel){ .on_send = simple_on_send, .ctx = s };
}

/*
 * A slow sender's extra delay, drawn afresh for every datagram. OpenDHT's
 * slow nodes (Rhea et al. §2) are loaded PlanetLab hosts: usually a few
 * tens of ms late, now and then seconds (pings "well over a second",
 * computations of 18 ms on one host taking 9.3 s on another, disk reads
 * of tens of seconds). A log-normal with shape 1.5 has that body and tail
 * (median 0.32 × mean, p90 2.2 × mean, p99 10.6 × mean: 5 s at the default
 * 500 ms mean), yet a finite variance, so a run's mean is slow_ms and its
 * percentiles are stable from run to run; a Pareto with that tail would
 * have an infinite variance. The default mean of 500 ms is the paper's own
 * bar for a slow operation (Fig. 7: 235 of 259 hosts cross it within 50
 * hours). Capped at a minute, far past any RTO (5 s), where the outcome —
 * a timeout — no longer changes; at the default mean the cap lowers it by
 * about 0.3 %.
 */
static uint64_t slow_extra_us(const struct cfs_wan *w, struct cfs_rng *r)
{
	double mu = log(w->slow_ms * 1000.0) - SLOW_SIGMA * SLOW_SIGMA / 2;
	double us = exp(mu + SLOW_SIGMA * std_normal(r));

	return us >= SLOW_CAP_US ? SLOW_CAP_US : (uint64_t)us;
}

/* Only the sender's slowness counts here: a slow node is slow to answer
 * and to forward, and its peers' own sends carry theirs. */
static bool wan_on_send(void *ctx, const struct cfs_addr *to, size_t len, uint64_t *ret_delay_us)
{
	struct cfs_wan_node *n = ctx;
	const struct cfs_wan *w = n->wan;
	uint64_t d;

	if (w->loss > 0 && cfs_rng_double(&n->rng) < w->loss)
		return true;
	d = cfs_wan_rtt_us(w, &n->self, to) / 2;
	if (w->slow_ms > 0 && cfs_wan_is_slow(w, &n->self))
		d += slow_extra_us(w, &n->rng);
	*ret_delay_us = d;
	return false;
}

void cfs_wan_node_init(struct cfs_wan_node *n, const struct cfs_wan *w,
                       const struct cfs_addr *self, uint64_t seed)
{
	struct place p;

	n->wan = w;
	n->self = *self;
	locate(w, self, &p);
	cfs_rng_seed(&n->rng, seed ^ p.row);
}

struct cfs_netmodel cfs_wan_ops(struct cfs_wan_node *n)
{
	return (struct cfs_netmodel){ .on_send = wan_on_send, .ctx = n };
}

/* ------------------------------------------------------------ numbers */

/* A plain decimal: digits with at most one '.', at least one digit; no
 * sign, exponent, "inf" or "nan", so every accepted string means what it
 * looks like. */
static bool parse_decimal(const char *p, size_t len, double *ret)
{
	double v = 0, scale = 1;
	bool dot = false, digit = false;

	if (len == 0 || len > NUM_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '.' && !dot) {
			dot = true;
		} else if (p[i] >= '0' && p[i] <= '9') {
			digit = true;
			if (dot)
				v += (p[i] - '0') * (scale /= 10);
			else
				v = v * 10 + (p[i] - '0');
		} else {
			return false;
		}
	}
	*ret = v;
	return digit;
}

static bool parse_u64(const char *p, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	if (len == 0 || len > 20)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9' || v > (UINT64_MAX - (uint64_t)(p[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(p[i] - '0');
	}
	*ret = v;
	return true;
}

/* Up to 16 bytes of untrusted text, printable, for an error message. */
static const char *quote(char out[static 24], const char *p, size_t len)
{
	size_t n = len < 16 ? len : 16, i;

	for (i = 0; i < n; i++)
		out[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
	strcpy(out + i, len > n ? "..." : "");
	return out;
}

/* ------------------------------------------------------------ matrix */

void cfs_wan_matrix_free(struct cfs_wan_matrix *m)
{
	if (!m)
		return;
	free(m->rtt_us);
	free(m);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* The values on one line (comment already cut): count, or parse into out. */
static int row_values(const char *p, const char *end, uint32_t *out, unsigned line,
                      char *err, size_t errlen)
{
	int n = 0;
	char q[24];

	for (;;) {
		while (p < end && is_blank(*p))
			p++;
		if (p == end)
			return n;
		const char *t = p;
		double ms;
		while (p < end && !is_blank(*p))
			p++;
		if (out) {
			if (!parse_decimal(t, (size_t)(p - t), &ms))
				return fail(err, errlen, "line %u: '%s' is not a number of milliseconds",
				            line, quote(q, t, (size_t)(p - t)));
			if (ms > MATRIX_VALUE_MAX_MS)
				return fail(err, errlen, "line %u: %s ms is over the limit of %.0f ms",
				            line, quote(q, t, (size_t)(p - t)), MATRIX_VALUE_MAX_MS);
			out[n] = (uint32_t)llround(ms * 1000.0);
		}
		if (++n > CFS_WAN_MATRIX_MAX)
			return fail(err, errlen, "line %u: more than %u values", line, CFS_WAN_MATRIX_MAX);
	}
}

/* The symmetric mean of each pair (measured matrices are nearly symmetric,
 * and the model's RTT must be exactly so) and the median for the logs. */
static void finish_matrix(struct cfs_wan_matrix *m)
{
	struct cfs_hist *h = xmalloc(sizeof(*h));
	uint32_t n = m->n;

	cfs_hist_reset(h);
	for (uint32_t i = 0; i < n; i++) {
		m->rtt_us[(size_t)i * n + i] = 0;
		for (uint32_t j = i + 1; j < n; j++) {
			uint32_t *a = &m->rtt_us[(size_t)i * n + j], *b = &m->rtt_us[(size_t)j * n + i];
			*a = *b = (uint32_t)(((uint64_t)*a + *b + 1) / 2);
			cfs_hist_add(h, *a);
		}
	}
	m->median_us = (uint32_t)cfs_hist_quantile(h, 0.5);
	free(h);
}

/* One non-empty line of count values: the first sets the width. */
static int add_row(struct cfs_wan_matrix *m, uint32_t *rows, uint32_t *cap, const char *p,
                   const char *end, uint32_t count, unsigned line, char *err, size_t errlen)
{
	if (m->n == 0)
		m->n = count;
	if (count != m->n)
		return fail(err, errlen, "line %u: %u values, but the first row has %u", line, count, m->n);
	if (*rows == m->n)
		return fail(err, errlen, "line %u: more rows than the %u columns; the matrix must be square",
		            line, m->n);
	if (*rows == *cap) {
		*cap = *cap ? (*cap * 2 < m->n ? *cap * 2 : m->n) : (m->n < 16 ? m->n : 16);
		m->rtt_us = xrealloc(m->rtt_us, (size_t)*cap * m->n * sizeof(uint32_t));
	}
	return row_values(p, end, &m->rtt_us[(size_t)(*rows)++ * m->n], line, err, errlen);
}

/*
 * Rows are stored as they come, the table growing by doubling up to n
 * rows, so memory follows the input rather than the first row's promise.
 */
int cfs_wan_matrix_parse(const char *text, size_t len, struct cfs_wan_matrix **ret,
                         char *err, size_t errlen)
{
	struct cfs_wan_matrix *m = xcalloc(1, sizeof(*m));
	const char *p = text, *end = text + len;
	uint32_t rows = 0, cap = 0;
	unsigned line = 0;
	int r = 0;

	while (p < end && r >= 0) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *stop;
		if (!eol)
			eol = end;
		stop = memchr(p, '#', (size_t)(eol - p));
		if (!stop)
			stop = eol;
		line++;
		r = row_values(p, stop, NULL, line, err, errlen);
		if (r > 0)
			r = add_row(m, &rows, &cap, p, stop, (uint32_t)r, line, err, errlen);
		p = eol < end ? eol + 1 : end;
	}
	if (r >= 0 && rows == 0)
		r = fail(err, errlen, "no rows: the matrix is empty");
	else if (r >= 0 && rows != m->n)
		r = fail(err, errlen, "%u rows of %u values; the matrix must be square", rows, m->n);
	if (r < 0) {
		cfs_wan_matrix_free(m);
		return r;
	}
	finish_matrix(m);
	*ret = m;
	return 0;
}

static int read_file(const char *path, char **ret, size_t *ret_len, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = 0;
	struct stat st;
	size_t got = 0;
	char *buf;

	if (fd < 0) {
		r = -errno;
		fail(err, errlen, "cannot open %s: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MATRIX_FILE_MAX) {
		r = fail(err, errlen, "%s: not a regular file of at most %u MiB", path,
		         MATRIX_FILE_MAX >> 20);
		close(fd);
		return r;
	}
	buf = xmalloc((size_t)st.st_size + 1);
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = n < 0 ? -errno : 0;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	if (r < 0) {
		free(buf);
		fail(err, errlen, "cannot read %s: %s", path, strerror(-r));
		return r;
	}
	*ret = buf;
	*ret_len = got;
	return 0;
}

int cfs_wan_matrix_load(const char *path, struct cfs_wan_matrix **ret, char *err, size_t errlen)
{
	char why[256], *text = NULL;
	size_t len = 0;
	int r = read_file(path, &text, &len, err, errlen);

	if (r < 0)
		return r;
	r = cfs_wan_matrix_parse(text, len, ret, why, sizeof(why));
	free(text);
	if (r < 0)
		fail(err, errlen, "%s: %s", path, why);
	return r;
}

/* ------------------------------------------------------------ spec */

void cfs_wan_free(struct cfs_wan *w)
{
	cfs_wan_matrix_free(w->matrix);
	w->matrix = NULL;
}

/* A fraction in [0, 1] or a count of ms in [lo, hi]. */
static int parse_range(const char *key, const char *v, size_t len, double lo, double hi,
                       double *ret, char *err, size_t errlen)
{
	char q[24];

	if (!parse_decimal(v, len, ret))
		return fail(err, errlen, "%s wants a plain decimal number, not '%s'", key, quote(q, v, len));
	if (*ret < lo || *ret > hi)
		return fail(err, errlen, "%s=%s is out of range: it must be from %g to %g",
		            key, quote(q, v, len), lo, hi);
	return 0;
}

static const char *const keys[] = { "seed", "median-rtt", "loss", "slow", "slow-ms", "matrix" };

/* One "key=value" item of the spec into *w; seen marks the keys given. */
static int parse_item(struct cfs_wan *w, const char *p, size_t len, unsigned *seen,
                      char *err, size_t errlen)
{
	const char *eq = memchr(p, '=', len), *v;
	size_t klen, vlen, k;
	char q[24];

	if (!eq)
		return fail(err, errlen, "'%s' is not key=value", quote(q, p, len));
	klen = (size_t)(eq - p);
	v = eq + 1;
	vlen = len - klen - 1;
	for (k = 0; k < CFS_ARRAY_SIZE(keys); k++)
		if (strlen(keys[k]) == klen && memcmp(keys[k], p, klen) == 0)
			break;
	if (k == CFS_ARRAY_SIZE(keys))
		return fail(err, errlen, "unknown key '%s' (known: seed, median-rtt, loss, slow, "
		            "slow-ms, matrix)", quote(q, p, klen));
	if (*seen & (1u << k))
		return fail(err, errlen, "%s is given twice", keys[k]);
	*seen |= 1u << k;
	switch (k) {
	case 0:
		if (!parse_u64(v, vlen, &w->seed))
			return fail(err, errlen, "seed wants a whole number, not '%s'", quote(q, v, vlen));
		return 0;
	case 1: return parse_range("median-rtt", v, vlen, 1, 10000, &w->median_rtt_ms, err, errlen);
	case 2: return parse_range("loss", v, vlen, 0, 1, &w->loss, err, errlen);
	case 3: return parse_range("slow", v, vlen, 0, 1, &w->slow, err, errlen);
	case 4: return parse_range("slow-ms", v, vlen, 0, 60000, &w->slow_ms, err, errlen);
	default:
		if (vlen == 0 || vlen >= sizeof(w->matrix_path))
			return fail(err, errlen, "matrix wants a path of 1 to %zu characters",
			            sizeof(w->matrix_path) - 1);
		memcpy(w->matrix_path, v, vlen);
		w->matrix_path[vlen] = 0;
		return 0;
	}
}

/* The matrix is loaded last, once everything else has parsed, so that a
 * failure never leaves a loaded matrix behind. */
int cfs_wan_parse(const char *spec, struct cfs_wan *ret, char *err, size_t errlen)
{
	struct cfs_wan w = {
		.seed = 1,
		.median_rtt_ms = CFS_WAN_MEDIAN_MS_DEFAULT,
		.slow_ms = CFS_WAN_SLOW_MS_DEFAULT,
	};
	size_t len = strlen(spec);
	unsigned seen = 0;
	int r;

	if (len > SPEC_MAX)
		return fail(err, errlen, "the model spec is over %u characters", SPEC_MAX);
	for (const char *p = spec; len > 0 && p <= spec + len;) {
		const char *c = memchr(p, ',', (size_t)(spec + len - p));
		size_t n = c ? (size_t)(c - p) : (size_t)(spec + len - p);
		if (n == 0)
			return fail(err, errlen, "empty item in the model spec (two commas, or one at an end)");
		if ((r = parse_item(&w, p, n, &seen, err, errlen)) < 0)
			return r;
		p += n + 1;
	}
	if ((seen & (1u << 1)) && (seen & (1u << 5)))
		return fail(err, errlen, "median-rtt and matrix exclude each other: the matrix gives the RTTs");
	if (w.matrix_path[0] && cfs_wan_matrix_load(w.matrix_path, &w.matrix, err, errlen) < 0)
		return -EINVAL;
	*ret = w;
	return 0;
}

void cfs_wan_describe(const struct cfs_wan *w, char *buf, size_t n)
{
	char where[CFS_WAN_PATH_MAX + 128];

	if (w->matrix)
		snprintf(where, sizeof(where), "latency matrix %s (%u rows, median RTT about %.0f ms, "
		         "%.0f ms within a row)", w->matrix_path, w->matrix->n,
		         w->matrix->median_us / 1000.0, CFS_WAN_LAN_RTT_US / 1000.0);
	else
		snprintf(where, sizeof(where), "synthetic coordinates (%zu continents, access "
		         "heights), median RTT %.0f ms", CFS_ARRAY_SIZE(continents), w->median_rtt_ms);
	snprintf(buf, n, "%s; seed %llu; loss %g; slow nodes %g (log-normal extra delay "
	         "per datagram, mean %.0f ms, sigma %.1f)", where, (unsigned long long)w->seed,
	         w->loss, w->slow, w->slow_ms, SLOW_SIGMA);
}
