/*
 * cfsctl lookup: many lookups through the local daemon over one control
 * connection, pipelined (up to 64 in flight), one line of output per key:
 *
 *   KEY SUCCESSOR-ID SUCCESSOR-ADDR RPCS TIMEOUTS
 *
 * or "KEY error MESSAGE". Keys come from the command line, from standard
 * input ("-"), or are drawn at random (--random N).
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/cfsctl.h"
#include "chord/chord.h"
#include "client/client.h"
#include "dhash/dhash.h"

struct lookup_batch {
	struct cfs_id *keys;
	uint32_t mode, nsucc, flags;
	unsigned errors;
};

int cfsctl_read_keys(char **args, int nargs, unsigned random_n, struct cfs_id **ret, size_t *ret_n)
{
	struct cfs_id *keys = NULL;
	size_t n = 0, cap = 0;

	for (int i = 0; i < nargs; i++) {
		char line[256];
		bool from_stdin = strcmp(args[i], "-") == 0;
		while (from_stdin ? fgets(line, sizeof(line), stdin) != NULL : true) {
			const char *t = args[i];
			if (from_stdin) {
				line[strcspn(line, " \t\r\n")] = 0;
				if (!line[0])
					continue;
				t = line;
			}
			if (n == cap)
				keys = xrealloc(keys, (cap = cap * 2 + 64) * sizeof(*keys));
			if (cfs_id_from_hex(&keys[n], t) < 0) {
				fprintf(stderr, "cfsctl: '%s' is not a key (64 hex digits)\n", t);
				free(keys);
				return -EINVAL;
			}
			n++;
			if (!from_stdin)
				break;
		}
	}
	for (unsigned i = 0; i < random_n; i++) {
		if (n == cap)
			keys = xrealloc(keys, (cap = cap * 2 + 64) * sizeof(*keys));
		randombytes_buf(keys[n++].b, CFS_ID_BYTES);
	}
	*ret = keys;
	*ret_n = n;
	return 0;
}

void cfsd_ctl_report(const char *sock, const char *what, int r)
{
	if (r == -EACCES)
		(void)client_socket_denied(sock);
	else if (r == -ENOENT || r == -ECONNREFUSED)
		fprintf(stderr, "cfsctl: no cfsd is running on %s\n", sock);
	else if (r < 0)
		fprintf(stderr, "cfsctl: %s through %s failed: %s\n", what, sock, strerror(-r));
}

static void build(void *arg, size_t i, struct cfs_msg *m)
{
	struct lookup_batch *b = arg;

	cfs_msg_init(m, CFS_MSG_CTL_LOOKUP);
	m->key = b->keys[i];
	m->mode = b->mode;
	m->nsucc = b->nsucc;
	m->flags = b->flags;
}

static void reply(void *arg, size_t i, const struct cfs_msg *m)
{
	struct lookup_batch *b = arg;
	char k[65], id[65], a[CFS_ADDR_STRLEN];

	cfs_id_hex(&b->keys[i], k);
	if (m->status < 0 || m->type != CFS_MSG_CTL_LOOKUP || m->n_nodes == 0) {
		printf("%s error %s\n", k, m->status < 0 ? strerror(-m->status) : "no answer");
		b->errors++;
	} else {
		printf("%s %s %s %u %u\n", k, cfs_id_hex(&m->nodes[0].id, id),
		       cfs_addr_str(&m->nodes[0].addr, a), m->count, m->timeouts);
	}
}

struct lookup_opts {
	uint32_t mode, nsucc, flags;
	unsigned random_n;
};

static void lookup_opt(void *arg, int c, const char *optarg)
{
	struct lookup_opts *o = arg;

	switch (c) {
	case 'm':
		if (chord_mode_parse(optarg, &o->mode) < 0)
			cfsctl_usage("--mode wants iterative or recursive[,greedy|,cost|,nonlinear][,pN][,pred], not '%s'", optarg);
		break;
	case 'n':
		o->nsucc = cfsctl_uint("--nsucc", optarg, CFS_MSG_MAX_NODES);
		break;
	case 'v':
		o->flags |= CFS_LOOKUP_F_VERIFY;
		break;
	case 'r':
		o->random_n = cfsctl_uint("--random", optarg, 10000000);
		break;
	}
}

/* lookup [--mode M] [--nsucc N] [--verify] [--random N] [KEY... | -]: the
 * keys, and random ones, through the daemon; one line per key. */
int cfsctl_lookup_main(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "nsucc", required_argument, NULL, 'n' },
		{ "verify", no_argument, NULL, 'v' },
		{ "random", required_argument, NULL, 'r' },
		{ 0 },
	};
	struct lookup_opts o = { .nsucc = 1 };
	int i = cfsctl_getopt(g, argc, argv, "m:", opts, lookup_opt, &o);
	struct lookup_batch b = { .mode = o.mode, .nsucc = o.nsucc, .flags = o.flags };
	size_t n;

	if (i == argc && !o.random_n)
		cfsctl_usage("lookup wants keys, '-' or --random N");
	const char *sock = cfsctl_sock(g);
	if (cfsctl_read_keys(argv + i, argc - i, o.random_n, &b.keys, &n) < 0)
		return 2;
	int r = cfsd_ctl_pipeline(sock, n, 64, build, reply, &b);
	cfsd_ctl_report(sock, "lookups", r);
	free(b.keys);
	return r < 0 ? 1 : b.errors ? 3 : 0;
}
