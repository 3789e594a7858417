/* The wide-area network model: spec and matrix parsing, the shape of the
 * synthetic RTT distribution, slow nodes and loss, measured here. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfs.h"

static void init(void) { cr_assert(cfs_crypto_init() == 0); }

TestSuite(netmodel, .init = init);

static struct cfs_wan parse_ok(const char *spec)
{
	struct cfs_wan w;
	char err[256] = "";

	cr_assert_eq(cfs_wan_parse(spec, &w, err, sizeof(err)), 0, "'%s': %s", spec, err);
	return w;
}

/* The spec fails, and its message contains want. */
static void parse_bad(const char *spec, const char *want)
{
	struct cfs_wan w = { .seed = 77 };
	char err[256] = "";

	cr_assert_eq(cfs_wan_parse(spec, &w, err, sizeof(err)), -EINVAL, "'%s' parsed", spec);
	cr_assert(strstr(err, want), "'%s': message '%s' lacks '%s'", spec, err, want);
	cr_assert_eq(w.seed, 77, "a failed parse changed the result");
}

static void matrix_bad(const char *text, const char *want)
{
	struct cfs_wan_matrix *m = NULL;
	char err[256] = "";

	cr_assert_eq(cfs_wan_matrix_parse(text, strlen(text), &m, err, sizeof(err)), -EINVAL,
	             "'%s' parsed", text);
	cr_assert_null(m);
	cr_assert(strstr(err, want), "message '%s' lacks '%s'", err, want);
}

/* A random IPv4 address and port. */
static void rand_addr(struct cfs_rng *r, struct cfs_addr *ret)
{
	uint64_t x = cfs_rng_next(r);
	char ip[32];

	snprintf(ip, sizeof(ip), "%u.%u.%u.%u", (unsigned)(x >> 56), (unsigned)(x >> 48) & 255,
	         (unsigned)(x >> 40) & 255, (unsigned)(x >> 32) & 255);
	cr_assert_eq(cfs_addr_from_ip(ret, ip, (uint16_t)(1 + x % 65535)), 0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* RTTs of n random pairs, sorted. */
static uint64_t *sample_rtts(const struct cfs_wan *w, size_t n, uint64_t seed)
{
	uint64_t *v = malloc(n * sizeof(*v));
	struct cfs_rng r;

	cfs_rng_seed(&r, seed);
	for (size_t i = 0; i < n; i++) {
		struct cfs_addr a, b;
		rand_addr(&r, &a);
		rand_addr(&r, &b);
		v[i] = cfs_wan_rtt_us(w, &a, &b);
	}
	qsort(v, n, sizeof(*v), cmp_u64);
	return v;
}

Test(netmodel, spec_defaults_and_values)
{
	struct cfs_wan w = parse_ok("");
	cr_assert_eq(w.seed, 1);
	cr_assert_float_eq(w.median_rtt_ms, 130, 1e-9);
	cr_assert_float_eq(w.loss, 0, 1e-12);
	cr_assert_float_eq(w.slow, 0, 1e-12);
	cr_assert_float_eq(w.slow_ms, CFS_WAN_SLOW_MS_DEFAULT, 1e-9);
	cr_assert_null(w.matrix);

	w = parse_ok("seed=18446744073709551615,median-rtt=60.5,loss=.25,slow=0.05,slow-ms=200");
	cr_assert_eq(w.seed, UINT64_MAX);
	cr_assert_float_eq(w.median_rtt_ms, 60.5, 1e-9);
	cr_assert_float_eq(w.loss, 0.25, 1e-12);
	cr_assert_float_eq(w.slow, 0.05, 1e-12);
	cr_assert_float_eq(w.slow_ms, 200, 1e-9);
}

Test(netmodel, spec_errors)
{
	parse_bad("bogus=1", "unknown key 'bogus'");
	parse_bad("seed=1,bogus=1", "unknown key 'bogus'");
	parse_bad("loss", "'loss' is not key=value");
	parse_bad("loss=abc", "loss wants a plain decimal number, not 'abc'");
	parse_bad("median-rtt=1e3", "not '1e3'");
	parse_bad("median-rtt=", "median-rtt wants a plain decimal number");
	parse_bad("slow=-0.1", "not '-0.1'");
	parse_bad("slow-ms=nan", "not 'nan'");
	parse_bad("seed=-1", "seed wants a whole number");
	parse_bad("seed=18446744073709551616", "seed wants a whole number");
	parse_bad("loss=1.5", "loss=1.5 is out of range: it must be from 0 to 1");
	parse_bad("slow=2", "slow=2 is out of range");
	parse_bad("median-rtt=0", "out of range");
	parse_bad("loss=0.1,loss=0.2", "loss is given twice");
	parse_bad("loss=0.1,", "empty item");
	parse_bad(",loss=0.1", "empty item");
	parse_bad("loss=0.1,,seed=2", "empty item");
	parse_bad("matrix=", "matrix wants a path");
	parse_bad("median-rtt=100,matrix=/nonexistent", "exclude each other");
	parse_bad("matrix=/nonexistent/king.txt", "cannot open /nonexistent/king.txt");
	parse_bad("matrix=/tmp", "/tmp: not a regular file");
}

Test(netmodel, matrix_errors)
{
	matrix_bad("", "empty");
	matrix_bad("# only a comment\n\n", "empty");
	matrix_bad("0 1 2\n1 0 3\n", "2 rows of 3 values; the matrix must be square");
	matrix_bad("0 1\n1 0\n2 2\n", "line 3: more rows than the 2 columns");
	matrix_bad("0 1 2\n1 0\n2 3 0\n", "line 2: 2 values, but the first row has 3");
	matrix_bad("# King subset\n0 10\n10 x\n", "line 3: 'x' is not a number of milliseconds");
	matrix_bad("0 10\n\n10 -5\n", "line 3: '-5' is not");
	matrix_bad("0 1e3\n1 0\n", "line 1: '1e3'");
	matrix_bad("0 10\n10 0\x01\n", "line 2: '0?' is not");
	matrix_bad("0 70000\n70000 0\n", "line 1: 70000 ms is over the limit");
}

Test(netmodel, matrix_parse_symmetrises)
{
	const char *text = "# three hosts\r\n"
	                   "0   100 200.5  # a trailing comment\r\n"
	                   "\t110 0 30\n"
	                   "\n"
	                   "200.5 30 0";
	struct cfs_wan_matrix *m = NULL;
	char err[256] = "";

	cr_assert_eq(cfs_wan_matrix_parse(text, strlen(text), &m, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(m->n, 3);
	cr_assert_eq(m->rtt_us[0 * 3 + 1], 105000); /* (100 + 110) / 2 */
	cr_assert_eq(m->rtt_us[1 * 3 + 0], 105000);
	cr_assert_eq(m->rtt_us[0 * 3 + 2], 200500);
	cr_assert_eq(m->rtt_us[2 * 3 + 1], 30000);
	cr_assert_eq(m->rtt_us[1 * 3 + 1], 0);
	cr_assert(m->median_us >= 105000 && m->median_us <= 105000 * 1.07, "median %u", m->median_us);
	cfs_wan_matrix_free(m);
	cfs_wan_matrix_free(NULL);
}

Test(netmodel, deterministic_by_seed)
{
	struct cfs_wan a = parse_ok("seed=5"), b = parse_ok("seed=5"), c = parse_ok("seed=6");
	struct cfs_rng r;
	int differ = 0, slow_differ = 0;

	a.slow = b.slow = c.slow = 0.5;
	cfs_rng_seed(&r, 3);
	for (int i = 0; i < 1000; i++) {
		struct cfs_addr x, y;
		rand_addr(&r, &x);
		rand_addr(&r, &y);
		uint64_t rtt = cfs_wan_rtt_us(&a, &x, &y);
		cr_assert_eq(rtt, cfs_wan_rtt_us(&b, &x, &y));
		cr_assert_eq(rtt, cfs_wan_rtt_us(&a, &x, &y));
		cr_assert_eq(cfs_wan_is_slow(&a, &x), cfs_wan_is_slow(&b, &x));
		differ += rtt != cfs_wan_rtt_us(&c, &x, &y);
		slow_differ += cfs_wan_is_slow(&a, &x) != cfs_wan_is_slow(&c, &x);
	}
	cr_assert(differ > 990, "only %d of 1000 RTTs changed with the seed", differ);
	cr_assert(slow_differ > 400, "only %d of 1000 slow flags changed with the seed", slow_differ);
}

Test(netmodel, symmetric_and_zero_to_self)
{
	struct cfs_wan w = parse_ok("");
	struct cfs_addr x, y, v4, mapped, v6;
	struct cfs_rng r;

	cfs_rng_seed(&r, 4);
	for (int i = 0; i < 2000; i++) {
		rand_addr(&r, &x);
		rand_addr(&r, &y);
		cr_assert_eq(cfs_wan_rtt_us(&w, &x, &y), cfs_wan_rtt_us(&w, &y, &x));
		cr_assert_eq(cfs_wan_rtt_us(&w, &x, &x), 0);
		cr_assert_gt(cfs_wan_rtt_us(&w, &x, &y), 0);
	}
	/* A dual-stack socket sees an IPv4 peer as ::ffff:a.b.c.d: same place. */
	cr_assert_eq(cfs_addr_from_ip(&v4, "192.0.2.7", 4460), 0);
	cr_assert_eq(cfs_addr_from_ip(&mapped, "::ffff:192.0.2.7", 4460), 0);
	cr_assert_eq(cfs_addr_from_ip(&v6, "2001:db8::7", 4460), 0);
	cr_assert_eq(cfs_wan_rtt_us(&w, &v4, &mapped), 0);
	cr_assert_eq(cfs_wan_rtt_us(&w, &v4, &v6), cfs_wan_rtt_us(&w, &mapped, &v6));
	cr_assert_gt(cfs_wan_rtt_us(&w, &v4, &v6), 0);
	/* Another port on one host is another node. */
	cr_assert_eq(cfs_addr_from_ip(&x, "127.0.0.1", 21000), 0);
	cr_assert_eq(cfs_addr_from_ip(&y, "127.0.0.1", 21001), 0);
	cr_assert_gt(cfs_wan_rtt_us(&w, &x, &y), 0);
}

/* The median of 20,000 random pairs within 10 % of median-rtt, and the tail
 * long (King-like): p99 more than twice p50. */
static void check_shape(const char *spec, double median_ms)
{
	struct cfs_wan w = parse_ok(spec);
	size_t n = 20000;
	uint64_t *v = sample_rtts(&w, n, 11);
	double p50 = v[n / 2] / 1000.0, p90 = v[n * 9 / 10] / 1000.0, p99 = v[n * 99 / 100] / 1000.0;

	cr_log_info("%s: p50 %.1f p90 %.1f p99 %.1f ms", spec, p50, p90, p99);
	cr_assert(p50 > 0.9 * median_ms && p50 < 1.1 * median_ms, "%s: median %.1f ms", spec, p50);
	cr_assert(p99 > 2 * p50, "%s: p99 %.1f ms is not over twice p50 %.1f ms", spec, p99, p50);
	cr_assert(p90 > p50 * 1.5, "%s: p90 %.1f ms", spec, p90);
	free(v);
}

Test(netmodel, median_and_tail)
{
	check_shape("", 130);
	check_shape("median-rtt=60", 60);
	check_shape("median-rtt=60,seed=99", 60);
}

Test(netmodel, slow_fraction)
{
	struct cfs_wan w = parse_ok("slow=0.05,seed=3");
	struct cfs_rng r;
	int slow = 0, n = 10000;

	cfs_rng_seed(&r, 12);
	for (int i = 0; i < n; i++) {
		struct cfs_addr a;
		rand_addr(&r, &a);
		slow += cfs_wan_is_slow(&w, &a);
	}
	cr_assert(fabs((double)slow / n - 0.05) < 0.03, "%d of %d slow", slow, n);
	cr_assert(slow > 0);
	w.slow = 0;
	cr_assert_not(cfs_wan_is_slow(&w, &(struct cfs_addr){ .in4 = { .sin_family = AF_INET } }));
}

/* The first address (by port on 10.0.0.1) whose slowness is want. */
static void find_addr(const struct cfs_wan *w, bool want, struct cfs_addr *ret)
{
	for (uint16_t port = 1; port < 65535; port++) {
		cr_assert_eq(cfs_addr_from_ip(ret, "10.0.0.1", port), 0);
		if (cfs_wan_is_slow(w, ret) == want)
			return;
	}
	cr_assert_fail("no address found");
}

Test(netmodel, loss_rate)
{
	struct cfs_wan w = parse_ok("loss=0.1");
	struct cfs_wan_node node;
	struct cfs_addr self, to;
	struct cfs_netmodel m;
	int dropped = 0, n = 100000;

	find_addr(&w, false, &self);
	cr_assert_eq(cfs_addr_from_ip(&to, "10.9.9.9", 4460), 0);
	cfs_wan_node_init(&node, &w, &self, 1);
	m = cfs_wan_ops(&node);
	uint64_t half = cfs_wan_rtt_us(&w, &self, &to) / 2;
	for (int i = 0; i < n; i++) {
		uint64_t d = 0;
		if (m.on_send(m.ctx, &to, 100, &d))
			dropped++;
		else
			cr_assert_eq(d, half, "a fast sender's delay is half the RTT");
	}
	cr_assert(fabs((double)dropped / n - 0.1) < 0.01, "%d of %d dropped", dropped, n);
}

/* A slow sender adds a per-datagram extra of mean slow-ms with a long tail;
 * a fast one adds nothing. */
Test(netmodel, slow_sender_delay)
{
	struct cfs_wan w = parse_ok("slow=0.1,slow-ms=200");
	struct cfs_wan_node slow, fast;
	struct cfs_addr s, f, to;
	struct cfs_netmodel ms, mf;
	size_t n = 100000;
	uint64_t *extra = malloc(n * sizeof(*extra));
	double sum = 0;

	find_addr(&w, true, &s);
	find_addr(&w, false, &f);
	cr_assert_eq(cfs_addr_from_ip(&to, "10.9.9.9", 4460), 0);
	cfs_wan_node_init(&slow, &w, &s, 7);
	cfs_wan_node_init(&fast, &w, &f, 7);
	ms = cfs_wan_ops(&slow);
	mf = cfs_wan_ops(&fast);
	uint64_t half = cfs_wan_rtt_us(&w, &s, &to) / 2;
	for (size_t i = 0; i < n; i++) {
		uint64_t d = 0;
		cr_assert_not(ms.on_send(ms.ctx, &to, 100, &d));
		cr_assert_geq(d, half);
		extra[i] = d - half;
		sum += (double)extra[i];
		cr_assert_not(mf.on_send(mf.ctx, &to, 100, &d));
		cr_assert_eq(d, cfs_wan_rtt_us(&w, &f, &to) / 2);
	}
	qsort(extra, n, sizeof(*extra), cmp_u64);
	double mean_ms = sum / n / 1000.0, p50 = extra[n / 2] / 1000.0, p99 = extra[n * 99 / 100] / 1000.0;
	cr_log_info("slow extra: mean %.1f p50 %.1f p99 %.1f ms", mean_ms, p50, p99);
	cr_assert(fabs(mean_ms - 200) < 200 * 0.05, "mean extra %.1f ms, want 200", mean_ms);
	cr_assert(p99 > 5 * p50, "the extra delay's tail is short: p50 %.1f p99 %.1f ms", p50, p99);
	free(extra);
}

Test(netmodel, matrix_rows_used)
{
	const char *text = "0 50 90\n50 0 170\n90 170 0\n";
	struct cfs_wan w = parse_ok("seed=2");
	uint32_t hits[3] = { 0 }, want[3][3] = { { 1000, 50000, 90000 },
	                                         { 50000, 1000, 170000 },
	                                         { 90000, 170000, 1000 } };
	struct cfs_addr addrs[300];
	char err[256] = "";

	cr_assert_eq(cfs_wan_matrix_parse(text, strlen(text), &w.matrix, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 300; i++) {
		cr_assert_eq(cfs_addr_from_ip(&addrs[i], "10.1.2.3", (uint16_t)(5000 + i)), 0);
		uint32_t row = cfs_wan_row(&w, &addrs[i]);
		cr_assert_lt(row, 3);
		hits[row]++;
	}
	for (int k = 0; k < 3; k++)
		cr_assert(hits[k] > 60, "row %d has %u of 300 addresses", k, hits[k]);
	for (int i = 0; i < 300; i++) {
		for (int j = i; j < i + 20 && j < 300; j++) {
			uint32_t ri = cfs_wan_row(&w, &addrs[i]), rj = cfs_wan_row(&w, &addrs[j]);
			uint64_t rtt = cfs_wan_rtt_us(&w, &addrs[i], &addrs[j]);
			cr_assert_eq(rtt, i == j ? 0 : want[ri][rj], "%d,%d: rows %u,%u rtt %lu", i, j, ri,
			             rj, (unsigned long)rtt);
		}
	}
	cfs_wan_free(&w);
	cr_assert_null(w.matrix);
}

Test(netmodel, matrix_file_and_describe)
{
	char path[] = "/tmp/cfs-unit-matrix.XXXXXX", spec[128], d[512], err[256] = "";
	int fd = mkstemp(path);
	const char text[] = "# 2 hosts\n0 80\n80 0\n";
	struct cfs_wan w;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	snprintf(spec, sizeof(spec), "matrix=%s,loss=0.01", path);
	w = parse_ok(spec);
	cr_assert_not_null(w.matrix);
	cr_assert_eq(w.matrix->n, 2);
	cfs_wan_describe(&w, d, sizeof(d));
	cr_assert(strstr(d, path) && strstr(d, "2 rows") && strstr(d, "loss 0.01"), "%s", d);
	cfs_wan_free(&w);

	fd = open(path, O_WRONLY | O_TRUNC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "0 80\n80 zz\n", 11), 11);
	close(fd);
	cr_assert_eq(cfs_wan_parse(spec, &w, err, sizeof(err)), -EINVAL);
	cr_assert(strstr(err, path) && strstr(err, "line 2: 'zz'"), "%s", err);
	unlink(path);

	w = parse_ok("");
	cfs_wan_describe(&w, d, sizeof(d));
	cr_assert(strstr(d, "synthetic") && strstr(d, "median RTT 130 ms") && strstr(d, "seed 1"), "%s", d);
}

/* ------------------------------------------------------------ through the transport */

struct pinger {
	int status, done;
	uint64_t rtt_us;
};

static void on_pong(void *arg, int status, const struct cfs_msg *reply,
                    const struct cfs_rpc_result *res)
{
	struct pinger *p = arg;

	p->status = status;
	p->rtt_us = res ? res->rtt_us : 0;
	p->done++;
}

static void answer(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct cfs_msg m;

	cfs_msg_init(&m, req->type);
	cr_assert_eq(cfs_transport_reply(*(cfs_transport_t **)arg, from, &m), 0);
}

/* Both ends send through their own model node: a ping's measured RTT is
 * the modelled RTT (half each way) plus loopback's few microseconds. */
Test(netmodel, delays_pings_through_the_transport)
{
	struct cfs_wan w = parse_ok("median-rtt=100,seed=4");
	struct cfs_transport_config c;
	cfs_transport_t *srv, *cli;
	struct cfs_addr sa, ca;
	struct cfs_wan_node sn, cn;
	struct cfs_netmodel m;
	uv_loop_t loop;

	uv_loop_init(&loop);
	cfs_transport_config_default(&c);
	c.host = "127.0.0.1";
	cr_assert_eq(cfs_transport_new(&loop, &c, answer, &srv, &srv), 0);
	cr_assert_eq(cfs_transport_new(&loop, &c, NULL, NULL, &cli), 0);
	cr_assert_eq(cfs_transport_local_addr(srv, &sa), 0);
	cr_assert_eq(cfs_transport_local_addr(cli, &ca), 0);
	cfs_wan_node_init(&sn, &w, &sa, 1);
	cfs_wan_node_init(&cn, &w, &ca, 1);
	m = cfs_wan_ops(&sn);
	cfs_transport_set_model(srv, &m);
	m = cfs_wan_ops(&cn);
	cfs_transport_set_model(cli, &m);

	uint64_t model = cfs_wan_rtt_us(&w, &ca, &sa);
	for (int i = 0; i < 3; i++) {
		struct pinger p = { 0 };
		struct cfs_msg req;
		cfs_msg_init(&req, CFS_MSG_PING);
		cr_assert_eq(cfs_transport_call(cli, &sa, &req, &(struct cfs_call_opts){ .timeout_ms = 5000 },
		                                on_pong, &p), 0);
		while (!p.done)
			uv_run(&loop, UV_RUN_ONCE);
		cr_assert_eq(p.status, 0);
		cr_log_info("ping %d: measured %lu us, modelled %lu us", i, (unsigned long)p.rtt_us,
		            (unsigned long)model);
		cr_assert(p.rtt_us + 2000 >= model && p.rtt_us <= model + 30000,
		          "measured %lu us, modelled %lu us", (unsigned long)p.rtt_us, (unsigned long)model);
	}
	cfs_transport_close(cli);
	cfs_transport_close(srv);
	uv_run(&loop, UV_RUN_DEFAULT);
	cr_assert_eq(uv_loop_close(&loop), 0);
}
