/*
 * cfsctl history VOLUME: the versions of a volume still on the ring.
 *
 * The newest root comes from the root key; every older version from its
 * version key (sfsro_root_version_key), newest first, until --limit
 * versions were listed or HISTORY_GAP sequence numbers in a row had none
 * (a publish that failed leaves a gap; a version whose lease ended is
 * gone). Each version's size is the sum of its files' sizes, read from its
 * directory blocks alone; a directory met in an earlier version (the same
 * key: the same subtree) is not read again, so versions that only renewed
 * the root (cfs-publish --refresh) cost one fetch each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cfsd/cfsctl.h"
#include "client/client.h"
#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

#define HISTORY_GAP 16
#define HISTORY_LIMIT_DEFAULT 20

/* A synchronous block source over the client: each get runs the loop. */
struct hsrc {
	uv_loop_t *loop;
	client_t *c;
	uint32_t want_kind;       /* 0: any */
};

struct hget {
	bool done;
	int status;
	uint32_t kind;
	uint8_t *p;
	size_t len;
};

static void hget_done(void *arg, const struct dhash_get_result *r)
{
	struct hget *g = arg;

	g->done = true;
	g->status = r->status;
	g->kind = r->kind;
	if (r->status == 0) {
		g->p = xmemdup(r->data, r->len ? r->len : 1);
		g->len = r->len;
	}
}

static int hsrc_get(void *ctx, const struct cfs_id *key, uint8_t **ret, size_t *ret_len)
{
	struct hsrc *s = ctx;
	struct hget g = { 0 };
	int r = client_get(s->c, key, hget_done, &g);

	if (r == 0 && (r = cfs_loop_run_until(s->loop, &g.done)) == 0)
		r = g.status;
	if (r == 0 && s->want_kind && g.kind != s->want_kind)
		r = -EBADMSG;
	if (r < 0) {
		free(g.p);
		return r;
	}
	*ret = g.p;
	*ret_len = g.len;
	return 0;
}

/* Subtree sizes by directory key, shared by every version listed. */
struct sizes {
	struct cfs_idmap map;     /* key -> index into v */
	struct { uint64_t bytes, files; } *v;
	size_t n;
};

struct dsum {
	const struct sfsro_source *src;
	struct sizes *memo;
	uint64_t bytes, files;
	int status;
};

static int dir_size(const struct sfsro_source *src, struct sizes *memo, const struct cfs_id *key,
                    uint64_t *bytes, uint64_t *files);

static int sum_entry(void *arg, const struct sfsro_entry *e)
{
	struct dsum *d = arg;
	uint64_t b = 0, f = 0;
	int r;

	if (e->type == SFSRO_T_FILE) {
		d->bytes += e->size;
		d->files++;
	} else if (e->type == SFSRO_T_DIR) {
		if ((r = dir_size(d->src, d->memo, &e->key, &b, &f)) < 0)
			return r;
		d->bytes += b;
		d->files += f;
	}
	return 0;
}

static int dir_size(const struct sfsro_source *src, struct sizes *memo, const struct cfs_id *key,
                    uint64_t *bytes, uint64_t *files)
{
	struct dsum d = { src, memo, 0, 0, 0 };
	uint32_t ix;
	int r;

	if (cfs_idmap_get(&memo->map, key, &ix)) {
		*bytes = memo->v[ix].bytes;
		*files = memo->v[ix].files;
		return 0;
	}
	if ((r = sfsro_walk_readdir(src, key, sum_entry, &d)) < 0)
		return r;
	memo->v = xrealloc(memo->v, (memo->n + 1) * sizeof(*memo->v));
	memo->v[memo->n].bytes = d.bytes;
	memo->v[memo->n].files = d.files;
	cfs_idmap_put(&memo->map, key, (uint32_t)memo->n++);
	*bytes = d.bytes;
	*files = d.files;
	return 0;
}

struct hist_opts {
	bool json;
	unsigned limit;
};

static void hist_opt(void *arg, int c, const char *optarg)
{
	struct hist_opts *o = arg;

	if (c == 'j')
		o->json = true;
	else if (c == 'n')
		o->limit = !strcmp(optarg, "all") ? 0 : cfsctl_uint("--limit", optarg, 1000000);
}

static void when(char *buf, size_t n, uint64_t s)
{
	time_t t = (time_t)s;
	struct tm tm;
	strftime(buf, n, "%Y-%m-%d %H:%M", gmtime_r(&t, &tm));
}

static void print_version(const struct hist_opts *o, bool first, const struct sfsro_root *root,
                          int size_status, uint64_t bytes, uint64_t files)
{
	char issued[32], until[32], b[32], f[32];

	if (o->json) {
		printf("%s\n  {\"seq\": %lu, \"issued\": %lu, \"valid_until\": %lu, \"expired\": %s, ",
		       first ? "" : ",", (unsigned long)root->seq, (unsigned long)root->issued,
		       (unsigned long)root->valid_until,
		       root->valid_until < cfs_wall_s() ? "true" : "false");
		if (size_status == 0)
			printf("\"bytes\": %lu, \"files\": %lu, \"complete\": true}", (unsigned long)bytes,
			       (unsigned long)files);
		else
			printf("\"complete\": false}");
		return;
	}
	when(issued, sizeof(issued), root->issued);
	when(until, sizeof(until), root->valid_until);
	snprintf(b, sizeof(b), "%.1f MB", (double)bytes / 1e6);
	snprintf(f, sizeof(f), "%lu", (unsigned long)files);
	printf("%8lu  %s  %s%s  %10s  %7s%s\n", (unsigned long)root->seq, issued, until,
	       root->valid_until < cfs_wall_s() ? "*" : " ", size_status == 0 ? b : "-",
	       size_status == 0 ? f : "-", size_status == 0 ? "" : "  some directories are gone");
}

int cfsctl_history_main(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "limit", required_argument, NULL, 'n' },
		{ 0 },
	};
	struct hist_opts o = { .limit = HISTORY_LIMIT_DEFAULT };
	int i = cfsctl_getopt(g, argc, argv, "n:", opts, hist_opt, &o);
	struct cfs_pubkey pk;
	struct sfsro_root newest, root;
	struct sizes memo = { 0 };
	uint64_t seq_only;
	const char *why;
	char name[CFS_NAME_LEN + 1];
	int r;

	if (argc - i != 1)
		cfsctl_usage("history wants one VOLUME");
	if (cfs_volume_spec_parse(argv[i], pk.b, &seq_only, NULL, &why) < 0 || seq_only)
		cfsctl_usage("history wants a volume name (52 base32 characters), not '%s'%s%s", argv[i],
		             seq_only ? "" : ": ", seq_only ? "" : why);
	cfs_name_encode(name, pk.b);

	uv_loop_t *loop = uv_default_loop();
	struct hsrc hs = { .loop = loop };
	const struct sfsro_source src = { hsrc_get, &hs };
	const char *sock = cfsctl_sock(g);
	if ((r = client_new(loop, sock, 0, &hs.c)) < 0) {
		fprintf(stderr, "cfsctl: history: %s\n", strerror(-r));
		return 1;
	}
	/* The newest, as a reader that follows the volume accepts it, but
	 * expired or not: an archive has a history too. */
	hs.want_kind = DHASH_KIND_ROOT;
	r = sfsro_walk_root(&src, &pk, 0, 0, &newest);
	if (r == -ECONNREFUSED || r == -ENOENT) {
		if (r == -ENOENT)
			fprintf(stderr, "cfsctl: no server has a root for volume %s\n", name);
		else
			cfsd_ctl_report(sock, "history", r);
		r = 1;
		goto out;
	}
	if (r < 0) {
		fprintf(stderr, "cfsctl: the root of %s: %s\n", name, dhash_strerror(r));
		r = 1;
		goto out;
	}
	if (o.json)
		printf("{\"volume\": \"%s\", \"newest\": %lu, \"versions\": [", name,
		       (unsigned long)newest.seq);
	else
		printf("%8s  %-16s  %-17s  %10s  %7s\n", "SEQ", "PUBLISHED (UTC)", "VALID UNTIL", "SIZE",
		       "FILES");
	unsigned listed = 0, gap = 0;
	for (uint64_t seq = newest.seq; seq >= 1 && (!o.limit || listed < o.limit); seq--) {
		uint64_t bytes = 0, files = 0;
		if (seq == newest.seq) {
			root = newest;
		} else {
			hs.want_kind = DHASH_KIND_VERSION;
			if ((r = sfsro_walk_root_version(&src, &pk, seq, &root)) < 0) {
				if (++gap >= HISTORY_GAP)
					break;
				continue;
			}
		}
		gap = 0;
		hs.want_kind = DHASH_KIND_CHASH;
		int st = dir_size(&src, &memo, &root.root_dir, &bytes, &files);
		print_version(&o, listed == 0, &root, st, bytes, files);
		listed++;
	}
	if (o.json)
		printf("\n]}\n");
	else
		printf("%u version%s listed (* : past its valid-until; read it as %s@SEQ)\n", listed,
		       listed == 1 ? "" : "s", name);
	r = 0;
out:
	client_free(hs.c);
	cfs_loop_run(loop);
	cfs_idmap_free(&memo.map);
	free(memo.v);
	return r;
}
