/*
 * cfs-cat — read one file of a volume to stdout with the mount's own client
 * code (block cache, verified walks), without FUSE: the baseline a mount is
 * measured against, and the CFS Figure 6 experiment (whole-file download
 * speed against the number of blocks in flight).
 *
 *   cfs-cat [--cfsd SOCKET | --data DIR | --bootstrap H:P | --from dir:PATH] [-w N] VOLUME PATH
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfs-fuse/internal.h"

struct cat;

struct cat_chunk {
	struct cat *c;
	uint8_t *p;
	size_t n;
	bool done;
	int status;
};

struct cat {
	cfsfuse_t *fs;
	struct fhandle *h;
	uint32_t window, bsize;
	uint64_t size, next_off, written;
	struct cat_chunk *ring;       /* window slots, by block number mod window */
	uint64_t first;           /* block number of the oldest slot */
	int status;
	bool finished;
};

static void cat_finish(struct cat *c, int status)
{
	if (!c->status)
		c->status = status;
	c->finished = true;
}

static void read_more(struct cat *c);

static void chunk_done(cfsfuse_t *fs, void *arg, int status, const uint8_t *p, size_t n)
{
	struct cat_chunk *k = arg;

	k->done = true;
	k->status = status;
	if (status == 0) {
		k->p = xmemdup(p, n ? n : 1);
		k->n = n;
	}
	read_more(k->c);
}

/* Write finished chunks in order, start new ones up to the window. */
static void read_more(struct cat *c)
{
	for (;;) {
		struct cat_chunk *k = &c->ring[c->first % c->window];
		if (c->first * c->bsize >= c->size)
			break;
		if (!k->done)
			break;
		if (k->status < 0) {
			cat_finish(c, k->status);
			return;
		}
		if (fwrite(k->p, 1, k->n, stdout) != k->n) {
			cat_finish(c, -EIO);
			return;
		}
		c->written += k->n;
		free(k->p);
		memset(k, 0, sizeof(*k));
		c->first++;
	}
	if (c->written >= c->size) {
		cat_finish(c, 0);
		return;
	}
	while (c->next_off < c->size && c->next_off / c->bsize < c->first + c->window) {
		struct cat_chunk *k = &c->ring[(c->next_off / c->bsize) % c->window];
		uint64_t off = c->next_off;
		c->next_off += c->bsize;
		memset(k, 0, sizeof(*k));
		k->c = c;
		fs__file_read(c->fs, c->h, off, c->bsize, chunk_done, k);
	}
}

static void opened(cfsfuse_t *fs, void *arg, int status, struct fhandle *h)
{
	struct cat *c = arg;

	if (status < 0) {
		cat_finish(c, status);
		return;
	}
	c->h = h;
	c->size = h->inode.size;
	c->bsize = h->inode.bsize ? h->inode.bsize : SFSRO_BLOCK_SIZE_DEFAULT;
	c->ring = xcalloc(c->window, sizeof(*c->ring));
	if (c->size == 0) {
		cat_finish(c, 0);
		return;
	}
	read_more(c);
}

static void looked_up(cfsfuse_t *fs, void *arg, int status, const struct sfsro_entry *e)
{
	struct cat *c = arg;

	if (status < 0)
		cat_finish(c, status);
	else if (e->type != SFSRO_T_FILE)
		cat_finish(c, e->type == SFSRO_T_DIR ? -EISDIR : -EINVAL);
	else
		fs__file_open(fs, 0, &e->key, opened, c);
}

#define USAGE "usage: cfs-cat [--cfsd SOCKET | --data DIR | --bootstrap H:P | --from dir:PATH] [-w N] VOLUME PATH"

/* The options: the daemon or ring to use, the window; then VOLUME PATH.
 * Short options only where their letter means the same in every tool
 * (-d, -w, -h, -V); the rest are long only. */
static uint32_t parse_args(int argc, char **argv, struct client_target *tgt, cfsfuse_t *fs)
{
	static const struct option opts[] = {
		{ "cfsd", required_argument, NULL, CFSFUSE_O_CFSD },
		{ "data", required_argument, NULL, 'd' },
		{ "bootstrap", required_argument, NULL, CFSFUSE_O_BOOTSTRAP },
		{ "from", required_argument, NULL, CFSFUSE_O_FROM },
		{ "expired", required_argument, NULL, CFSFUSE_O_EXPIRED },
		{ "window", required_argument, NULL, 'w' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *why = "";
	unsigned long window = 24;
	char *end;
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":d:w:hV", opts, NULL)) != -1) {
		if (cfsfuse_reader_opt(opt, optarg, USAGE, tgt, &fs->o))
			continue;
		switch (opt) {
		case 'w':
			window = strtoul(optarg, &end, 10);
			if (!*optarg || *end || window < 1 || window > 4096)
				cfs_usage_error(USAGE, "--window wants 1..4096 blocks");
			break;
		case 'V':
			printf("cfs-cat %s\n", CFS_VERSION);
			exit(0);
		case 'h':
			puts(USAGE "\n\n"
			     "Write one file of VOLUME (VOLUME@SEQ: that version) to stdout, verified,\n"
			     "with N blocks in flight, through the local cfsd, as a plain ring client\n"
			     "or from a dir: store on this machine; no FUSE, nothing is mounted.\n"
			     "\n"
			     "      --cfsd SOCKET     the local cfsd's control socket\n"
			     "  -d, --data DIR        ... or the data directory of that cfsd (default\n"
			     "                        $CFS_DATA_DIR, /var/lib/cfs for root)\n"
			     "      --bootstrap H:P   read as a plain ring client, no local cfsd (repeatable;\n"
			     "                        default: the local cfsd when one runs, else\n"
			     "                        $CFS_BOOTSTRAP, else ~/.config/cfs/client.conf)\n"
			     "      --from dir:PATH   read from the dir: store at PATH (no ring)\n"
			     "      --expired WHAT    a root past its valid-until: refuse (default), or\n"
			     "                        allow: read it anyway, with a warning naming its date\n"
			     "  -w, --window N        blocks in flight, 1..4096 (default 24, as cfs-mount)\n"
			     "  -V, --version         show the version\n"
			     "  -h, --help            show this help");
			exit(0);
		case ':':
			cfs_usage_error(USAGE, "option '%s' needs a value", argv[optind - 1]);
		default:
			cfs_usage_error(USAGE, "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 2)
		cfs_usage_error(USAGE, "give a VOLUME and a PATH");
	if (cfs_volume_spec_parse(argv[optind], fs->vol.b, &fs->o.version, NULL, &why) < 0)
		cfs_usage_error(USAGE, "'%s' is not a volume name: %s", argv[optind], why);
	if (fs->o.from_dir && (tgt->sock[0] || tgt->nboot))
		cfs_usage_error(USAGE, "--from reads a local store: no --cfsd, --data or --bootstrap");
	if (!fs->o.from_dir && client_target_resolve(tgt) < 0)
		exit(2);
	return (uint32_t)window;
}

int main(int argc, char **argv)
{
	static struct client_target tgt;
	struct cat c = { 0 };
	cfsfuse_t *fs = xcalloc(1, sizeof(*fs));

	cfs_log_init(argv[0], CFS_LOG_WARN);
	cfsfuse_options_default(&fs->o);
	fs->doing = "read"; /* messages say "cannot read volume", not "mount" */
	uint32_t window = parse_args(argc, argv, &tgt, fs);
	if (cfs_crypto_init() < 0)
		return 1;
	fs->o.target = &tgt;
	fs->o.max_fetches = (uint32_t)window; /* the window is the only limit */
	cfs_name_encode(fs->volname, fs->vol.b);
	fs->loop = uv_default_loop();
	if (fs__root_initial(fs) < 0)
		return 1;
	if (fs__source_open(fs) < 0)
		return 1;
	fs->blocks = fs__blocks_new(fs->loop, fs->dh, fs->local, &fs->o, NULL);
	c.fs = fs;
	c.window = (uint32_t)window;
	fs__path_lookup(fs, argv[optind + 1], looked_up, &c);
	if (cfs_loop_run_until(fs->loop, &c.finished) < 0)
		cat_finish(&c, -EIO);
	fflush(stdout);
	if (fs->dh)
		client_keep_contacts(fs->dh);
	if (c.status < 0) {
		log_error("%s: %s", argv[optind + 1], strerror(-c.status));
		return 1;
	}
	return 0;
}
