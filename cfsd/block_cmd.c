/*
 * cfsctl put and get: blocks through the local daemon's DHash client,
 * pipelined over one control connection.
 *
 *   put FILE...   one block per file ('-' reads stdin); --root for signed
 *                 roots; --random N --size S adds N random blocks. Prints
 *                 "KEY NAME" per stored block, "NAME error MESSAGE" else.
 *   get KEY       the block's verified bytes to stdout (or --output FILE);
 *   get --check KEY... ('-' reads keys from stdin): "KEY ok LENGTH"
 *                 or "KEY error MESSAGE" per key.
 *   refresh KEY... ('-' reads stdin): extend each block's lease on its
 *                 replicas (CTL_REFRESH, 1,024 keys a request); "KEY ok"
 *                 when some replica had it, "KEY missing" else.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cfsd/cfsctl.h"
#include "dhash/dhash.h"

struct cfsctl_put_opts {
	bool root;                /* the files are signed roots */
	uint64_t lease_until;     /* 0: the daemon's default */
	unsigned random_n;        /* also put this many random blocks ... */
	size_t random_size;       /* ... of this many bytes */
	uint64_t seed;            /* for the random blocks (0: random) */
};

enum { O_ROOT = 1001, O_LEASE_DAYS, O_SIZE, O_SEED, O_CHECK, O_CODE };

/* --lease-days D as an absolute lease end. */
static uint64_t lease_days(const char *optarg)
{
	uint64_t secs;

	if (cfs_parse_days(optarg, &secs) < 0)
		cfsctl_usage("--lease-days wants a number of days above 0, at most 3650, not '%s'", optarg);
	return (uint64_t)time(NULL) + secs;
}

struct blk {
	char *name;
	uint8_t *p;
	size_t len;
};

struct puts {
	struct blk *b;
	const struct cfsctl_put_opts *o;
	unsigned errors;
};

static int read_all(FILE *f, uint8_t **ret, size_t *ret_len)
{
	size_t cap = 65536, n = 0, k;
	uint8_t *p = xmalloc(cap);

	while ((k = fread(p + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n > CFS_BLOCK_MAX) {
			free(p);
			return -EMSGSIZE;
		}
		if (n == cap)
			p = xrealloc(p, cap *= 2);
	}
	if (ferror(f)) {
		free(p);
		return -EIO;
	}
	*ret = p;
	*ret_len = n;
	return 0;
}

static void put_build(void *arg, size_t i, struct cfs_msg *m)
{
	struct puts *P = arg;

	cfs_msg_init(m, CFS_MSG_CTL_PUT);
	m->kind = P->o->root && P->b[i].name ? DHASH_KIND_ROOT : DHASH_KIND_CHASH;
	m->lease_until = P->o->lease_until;
	m->data = (struct cfs_bytes){ P->b[i].p, P->b[i].len };
}

static void put_reply(void *arg, size_t i, const struct cfs_msg *m)
{
	struct puts *P = arg;
	char k[65];
	const char *name = P->b[i].name ? P->b[i].name : "random";

	if (m->status < 0 || m->type != CFS_MSG_CTL_PUT) {
		printf("%s error %s\n", name, dhash_strerror(m->status < 0 ? m->status : -EPROTO));
		P->errors++;
	} else {
		printf("%s %s\n", cfs_id_hex(&m->key, k), name);
	}
	free(P->b[i].p);
	P->b[i].p = NULL;
}

static int put_blocks(const char *sock, const struct cfsctl_put_opts *o, char **files, int nfiles)
{
	size_t n = (size_t)nfiles + o->random_n;
	struct puts P = { .b = xcalloc(n ? n : 1, sizeof(struct blk)), .o = o };
	struct cfs_rng rng;
	int r;

	cfs_rng_seed(&rng, o->seed ? o->seed : cfs_now_us());
	for (int i = 0; i < nfiles; i++) {
		FILE *f = strcmp(files[i], "-") == 0 ? stdin : fopen(files[i], "rb");
		if (!f) {
			fprintf(stderr, "cfsctl: cannot read %s: %s\n", files[i], strerror(errno));
			return 2;
		}
		r = read_all(f, &P.b[i].p, &P.b[i].len);
		if (f != stdin)
			fclose(f);
		if (r < 0) {
			fprintf(stderr, "cfsctl: %s: %s\n", files[i],
			        r == -EMSGSIZE ? "larger than a block" : strerror(-r));
			return 2;
		}
		P.b[i].name = files[i];
	}
	for (size_t i = (size_t)nfiles; i < n; i++) {
		P.b[i].len = o->random_size;
		P.b[i].p = xmalloc(o->random_size ? o->random_size : 1);
		for (size_t j = 0; j < o->random_size; j += 8) {
			uint64_t x = cfs_rng_next(&rng);
			memcpy(P.b[i].p + j, &x, o->random_size - j < 8 ? o->random_size - j : 8);
		}
	}
	r = cfsd_ctl_pipeline(sock, n, 64, put_build, put_reply, &P);
	cfsd_ctl_report(sock, "puts", r);
	for (size_t i = 0; i < n; i++)
		free(P.b[i].p);
	free(P.b);
	return r < 0 ? 1 : P.errors ? 3 : 0;
}

struct get_opts {
	bool check;
	const char *output;
	uint32_t code_m, code_n;
};

struct gets {
	struct cfs_id *keys;
	bool check;
	uint32_t code_m, code_n; /* a coded get (--code M/N); 0: a whole block */
	FILE *out;
	unsigned errors;
};

static void get_build(void *arg, size_t i, struct cfs_msg *m)
{
	struct gets *G = arg;

	cfs_msg_init(m, G->code_m ? CFS_MSG_CTL_GET_CODED : CFS_MSG_CTL_GET);
	m->key = G->keys[i];
	if (G->code_m)
		m->count = G->code_m << 8 | G->code_n;
}

static void get_reply(void *arg, size_t i, const struct cfs_msg *m)
{
	struct gets *G = arg;
	char k[65];

	cfs_id_hex(&G->keys[i], k);
	if (m->status < 0 || m->type != (G->code_m ? CFS_MSG_CTL_GET_CODED : CFS_MSG_CTL_GET)) {
		int st = m->status < 0 ? m->status : -EPROTO;
		if (G->check)
			printf("%s error %s\n", k, dhash_strerror(st));
		else
			fprintf(stderr, "cfsctl: get %s: %s\n", k, dhash_strerror(st));
		G->errors++;
		return;
	}
	if (G->check)
		printf("%s ok %zu\n", k, m->data.len);
	else if (fwrite(m->data.p, 1, m->data.len, G->out) != m->data.len)
		G->errors++;
}

static int get_blocks(const char *sock, const struct get_opts *o, char **args, int nargs)
{
	struct gets G = { .check = o->check, .code_m = o->code_m, .code_n = o->code_n, .out = stdout };
	const char *out = o->output;
	bool check = o->check;
	size_t n;
	int r;

	if (cfsctl_read_keys(args, nargs, 0, &G.keys, &n) < 0)
		return 2;
	if (!check && n != 1) {
		fprintf(stderr, "cfsctl: get without --check takes exactly one key\n");
		free(G.keys);
		return 2;
	}
	if (out && !(G.out = fopen(out, "wb"))) {
		fprintf(stderr, "cfsctl: cannot write %s: %s\n", out, strerror(errno));
		free(G.keys);
		return 1;
	}
	r = cfsd_ctl_pipeline(sock, n, 64, get_build, get_reply, &G);
	cfsd_ctl_report(sock, "gets", r);
	if (out && fclose(G.out) != 0)
		G.errors++;
	free(G.keys);
	return r < 0 ? 1 : G.errors ? 3 : 0;
}

struct refreshes {
	struct cfs_id *keys;
	size_t n;
	uint64_t lease_until;
	unsigned missing;
};

static void refresh_build(void *arg, size_t i, struct cfs_msg *m)
{
	struct refreshes *R = arg;
	size_t first = i * CFS_MSG_MAX_KEYS;

	cfs_msg_init(m, CFS_MSG_CTL_REFRESH);
	m->keys = R->keys + first;
	m->n_keys = (uint32_t)(R->n - first < CFS_MSG_MAX_KEYS ? R->n - first : CFS_MSG_MAX_KEYS);
	m->lease_until = R->lease_until;
}

static void refresh_reply(void *arg, size_t i, const struct cfs_msg *m)
{
	struct refreshes *R = arg;
	size_t first = i * CFS_MSG_MAX_KEYS;
	size_t n = R->n - first < CFS_MSG_MAX_KEYS ? R->n - first : CFS_MSG_MAX_KEYS;
	char k[65];

	for (size_t j = 0; j < n; j++) {
		cfs_id_hex(&R->keys[first + j], k);
		if (m->status < 0 || m->type != CFS_MSG_CTL_REFRESH) {
			printf("%s error %s\n", k, dhash_strerror(m->status < 0 ? m->status : -EPROTO));
			R->missing++;
		} else if (j / 8 < m->data.len && (m->data.p[j / 8] >> (j % 8) & 1)) {
			printf("%s ok\n", k);
		} else {
			printf("%s missing\n", k);
			R->missing++;
		}
	}
}

static int refresh_blocks(const char *sock, uint64_t lease_until, char **args, int nargs)
{
	struct refreshes R = { .lease_until = lease_until };
	int r;

	if (cfsctl_read_keys(args, nargs, 0, &R.keys, &R.n) < 0)
		return 2;
	r = cfsd_ctl_pipeline(sock, (R.n + CFS_MSG_MAX_KEYS - 1) / CFS_MSG_MAX_KEYS, 4, refresh_build,
	                      refresh_reply, &R);
	cfsd_ctl_report(sock, "refreshes", r);
	free(R.keys);
	return r < 0 ? 1 : R.missing ? 3 : 0;
}

/* ------------------------------------------------------------ commands */

static void put_opt(void *arg, int c, const char *optarg)
{
	struct cfsctl_put_opts *o = arg;

	switch (c) {
	case O_ROOT: o->root = true; break;
	case O_LEASE_DAYS: o->lease_until = lease_days(optarg); break;
	case 'r': o->random_n = cfsctl_uint("--random", optarg, 10000000); break;
	case O_SIZE: o->random_size = cfsctl_uint("--size", optarg, 60 * 1024); break;
	case O_SEED: o->seed = cfsctl_uint("--seed", optarg, 4000000000u); break;
	}
}

/* put [--root] [--lease-days D] [--random N --size S [--seed X]] [FILE... | -] */
int cfsctl_put_main(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "root", no_argument, NULL, O_ROOT },
		{ "lease-days", required_argument, NULL, O_LEASE_DAYS },
		{ "random", required_argument, NULL, 'r' },
		{ "size", required_argument, NULL, O_SIZE },
		{ "seed", required_argument, NULL, O_SEED },
		{ 0 },
	};
	struct cfsctl_put_opts o = { .random_size = 8192 };
	int i = cfsctl_getopt(g, argc, argv, "", opts, put_opt, &o);

	if (i == argc && !o.random_n)
		cfsctl_usage("put wants files, '-' or --random N");
	return put_blocks(cfsctl_sock(g), &o, argv + i, argc - i);
}

static void get_opt(void *arg, int c, const char *optarg)
{
	struct get_opts *o = arg;
	unsigned m, n;
	char end;

	if (c == O_CHECK) {
		o->check = true;
	} else if (c == O_CODE) {
		if (sscanf(optarg, "%u/%u%c", &m, &n, &end) != 2 || !dhash_code_valid(m, n))
			cfsctl_usage("--code wants M/N with 1 <= M < N <= 32, M <= 16");
		o->code_m = m;
		o->code_n = n;
	} else {
		o->output = optarg;
	}
}

/* get [--check] [--code M/N] [--output FILE] KEY... | - */
int cfsctl_get_main(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "check", no_argument, NULL, O_CHECK },
		{ "code", required_argument, NULL, O_CODE },
		{ "output", required_argument, NULL, 'o' },
		{ 0 },
	};
	struct get_opts o = { 0 };
	int i = cfsctl_getopt(g, argc, argv, "", opts, get_opt, &o);

	if (i == argc)
		cfsctl_usage("get wants keys or '-'");
	return get_blocks(cfsctl_sock(g), &o, argv + i, argc - i);
}

static void refresh_opt(void *arg, int c, const char *optarg)
{
	*(uint64_t *)arg = lease_days(optarg);
}

/* refresh [--lease-days D] KEY... | -  (default: 30 days from now) */
int cfsctl_refresh_main(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "lease-days", required_argument, NULL, O_LEASE_DAYS },
		{ 0 },
	};
	uint64_t lease_until = 0;
	int i = cfsctl_getopt(g, argc, argv, "", opts, refresh_opt, &lease_until);

	if (i == argc)
		cfsctl_usage("refresh wants keys or '-'");
	if (!lease_until)
		lease_until = (uint64_t)time(NULL) + 30ull * 86400u;
	return refresh_blocks(cfsctl_sock(g), lease_until, argv + i, argc - i);
}
