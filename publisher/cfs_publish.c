/*
 * cfs-publish — publish a directory tree as a signed, verifiable volume.
 *
 *   cfs-publish --keygen [FILE]
 *   cfs-publish [--key FILE] [--to STORE] [--block-size N] [--redundancy R] [--valid DAYS]
 *               [--dry-run] DIR
 *   cfs-publish [--key FILE] [--to STORE] [--valid DAYS] --refresh VOLUME
 *   cfs-publish --from dir:PATH [--to STORE] VOLUME
 *
 * On success the volume name (and nothing else) goes to stdout. --from
 * pushes a volume already published (offline, into a dir: store) into
 * another store, the ring by default: only the blocks it lacks are sent,
 * then the signed root as stored, so no key is needed.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "publisher/publisher.h"

static const char usage_text[] =
	"usage: cfs-publish --keygen [FILE]\n"
	"       cfs-publish [options] DIR\n"
	"       cfs-publish [options] --refresh VOLUME\n"
	"       cfs-publish --from dir:PATH [--to STORE] VOLUME\n"
	"\n"
	"Publish DIR as the next version of your volume, or make a key, or extend\n"
	"the leases of a published volume, or push a volume published offline into\n"
	"the ring. Prints the volume name on stdout.\n"
	"\n"
	"  -k, --key FILE        secret key (default $XDG_CONFIG_HOME/cfs/publish.key)\n"
	"  -t, --to STORE        where blocks go: cfsd (the ring, through the local\n"
	"                        daemon, else $CFS_BOOTSTRAP; the default), cfsd:SOCKET,\n"
	"                        ring:HOST:PORT[,...] (no daemon), or dir:PATH\n"
	"  -d, --data DIR        through the cfsd whose data directory is DIR: the same\n"
	"                        as --to cfsd:DIR/cfsd.sock\n"
	"      --block-size N    data block size in bytes, 1024..131072 (default 65536)\n"
	"      --redundancy R    how data blocks are kept: copies (whole, on k servers;\n"
	"                        the default) or rs:M/N (N fragments on N servers, any M\n"
	"                        of which rebuild a block; 1 <= M < N <= 32, M <= 16;\n"
	"                        ring stores only)\n"
	"      --valid DAYS      root valid for DAYS days (default 30; a decimal such as\n"
	"                        0.5 is allowed), and every block leased as long; never\n"
	"                        beyond the leases the servers grant\n"
	"      --state-dir DIR   where the last sequence signed per volume is kept\n"
	"                        (default $XDG_STATE_HOME/cfs/published)\n"
	"  -n, --dry-run         ask the store, send nothing, report what would be sent\n"
	"  -r, --refresh VOLUME  re-sign VOLUME's root and extend every block's lease\n"
	"      --from dir:PATH   push VOLUME (its public name, as cfs-mount takes it) as\n"
	"                        published in the store at PATH into the --to store:\n"
	"                        every block is read and verified, only those the store\n"
	"                        lacks are sent (those it has are leased again), then\n"
	"                        the signed root unchanged: no key is needed, and the\n"
	"                        root's validity stays as signed (--refresh in PATH to\n"
	"                        extend it first). Prints the blocks and bytes sent and\n"
	"                        those already present\n"
	"  -q, --quiet           no progress bar and no summary: only errors (and the\n"
	"                        volume name on stdout)\n"
	"  -h, --help            show this help\n"
	"  -V, --version         show the version\n"
	"\n"
	"On a terminal a progress bar shows the files and bytes stored of the totals\n"
	"(counted by a walk of DIR first), a percentage and an ETA from the rate the\n"
	"store takes them. Ctrl-C stops a publish before its root is signed: it says\n"
	"what was left undone, and the volume stays as it was (exit 130).\n"
	"Exit status: 0 published; 1 failed (the previous root stands); 2 wrong\n"
	"arguments; 130 interrupted.\n";

#define bad_usage(...) cfs_usage_error("usage: cfs-publish [--key FILE] [--to STORE] [--block-size N] [--redundancy R] [--dry-run] [--quiet] DIR | --keygen [FILE] | --refresh VOLUME | --from dir:PATH VOLUME", __VA_ARGS__)

/* An error that says the store was not reached (the sink said which). */
static bool store_unreachable(int r)
{
	return r == -ECONNREFUSED || r == -EHOSTUNREACH;
}

/* The advice after a store that did not answer, with this program's
 * options (the sink, shared with cfs-fsck, names none). */
#define STORE_ADVICE "start cfsd, or give --to cfsd:SOCKET or --to ring:HOST:PORT, or " \
	"publish offline with --to dir:PATH; nothing was published"

/* --redundancy: "copies", or "rs:M/N" with a code sfsro_code_valid takes. */
static int parse_redundancy(const char *s, struct pub_options *opt)
{
	unsigned m, n;
	int end = 0;

	if (!strcmp(s, "copies")) {
		opt->code_m = opt->code_n = 0;
		return 0;
	}
	if (sscanf(s, "rs:%u/%u%n", &m, &n, &end) != 2 || s[end] || !sfsro_code_valid(m, n))
		return -EINVAL;
	opt->code_m = (uint8_t)m;
	opt->code_n = (uint8_t)n;
	return 0;
}

static void advise_store(const char *opt)
{
	if (!pub_sink_said_unreachable()) /* else its one line said this already */
		log_error("start cfsd, or give %s cfsd:SOCKET or %s ring:HOST:PORT, or publish "
		          "offline with %s dir:PATH", opt, opt, opt);
}

/* --from: push the volume named by argument vol from the store from into
 * the store to; the exit code. */
static int push_main(const char *from, const char *to, const char *vol)
{
	struct pub_sink src = { 0 }, dst = { 0 };
	struct pub_push_stats st;
	struct cfs_pubkey pk;
	const char *why = "";
	char name[CFS_NAME_LEN + 1];
	int r;

	if (cfs_name_decode(pk.b, vol, &why) < 0)
		bad_usage("'%s' is not a volume name: %s", vol, why);
	if (strcmp(from, to) == 0)
		bad_usage("--from and --to name the same store");
	if (strncmp(from, "dir:", 4) != 0 || !from[4])
		bad_usage("--from wants dir:PATH, a store published into offline, not '%s'", from);
	if (cfs_crypto_init() < 0)
		return 1;
	uv_loop_t *loop = uv_default_loop();
	pub_sink_set_advice(STORE_ADVICE);
	if (pub_sink_open_existing(loop, from, &src) < 0)
		return 1;
	if ((r = pub_sink_open(loop, to, &dst)) < 0) {
		if (store_unreachable(r))
			advise_store("--to");
		pub_sink_close(&src);
		cfs_loop_run(loop);
		return 1;
	}
	r = pub_push(loop, &src, &dst, &pk, &st);
	pub_sink_close(&src);
	pub_sink_close(&dst);
	cfs_loop_run(loop); /* the sinks close */
	if (r < 0) {
		if (pub_sink_said_unreachable() || st.reported)
			return 1; /* one line said it all */
		if (store_unreachable(r))
			advise_store("--to");
		log_error("push failed; the destination's previous root (if any) is unchanged");
		return 1;
	}
	char until[64] = "";
	time_t vt = (time_t)st.valid_until;
	strftime(until, sizeof(until), "%Y-%m-%d %H:%M UTC", gmtime(&vt));
	log_info("pushed %lu blocks (%.1f MB) in %.2f s: %lu sent (%lu bytes), %lu already present "
	         "(%lu bytes); root sequence %lu %s, valid until %s", (unsigned long)st.blocks,
	         (double)st.bytes / 1e6, st.seconds, (unsigned long)st.blocks_sent,
	         (unsigned long)st.bytes_sent, (unsigned long)st.blocks_present,
	         (unsigned long)st.bytes_present, (unsigned long)st.seq,
	         st.root_sent ? "sent" : "already present", until);
	cfs_name_encode(name, pk.b);
	puts(name);
	return 0;
}

int main(int argc, char **argv)
{
	/* Long only: -b is cfsd's --bind, -v its --vnodes (one meaning per
	 * letter across the tools). */
	enum { O_KEYGEN = 1000, O_BLOCK_SIZE, O_VALID, O_STATE_DIR, O_REDUNDANCY };
	static const struct option opts[] = {
		{ "keygen", no_argument, NULL, O_KEYGEN },
		{ "key", required_argument, NULL, 'k' },
		{ "to", required_argument, NULL, 't' },
		{ "data", required_argument, NULL, 'd' },
		{ "block-size", required_argument, NULL, O_BLOCK_SIZE },
		{ "redundancy", required_argument, NULL, O_REDUNDANCY },
		{ "valid", required_argument, NULL, O_VALID },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "state-dir", required_argument, NULL, O_STATE_DIR },
		{ "refresh", required_argument, NULL, 'r' },
		{ "from", required_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct pub_options opt = { .block_size = SFSRO_BLOCK_SIZE_DEFAULT, .valid_s = 30 * 86400 };
	char key_path[4096] = "", name[CFS_NAME_LEN + 1], *end, data_store[4200] = "";
	bool to_given = false;
	const char *store = getenv("CFS_STORE"), *refresh = NULL, *from = NULL;
	bool keygen = false, quiet = false;
	struct cfs_pubkey pk, want;
	struct cfs_seckey sk;
	struct pub_sink sink = { 0 };
	struct pub_stats st;
	unsigned long v;
	int c, r;

	cfs_log_init(argv[0], CFS_LOG_INFO);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":k:t:d:nr:qhV", opts, NULL)) != -1) {
		switch (c) {
		case O_KEYGEN: keygen = true; break;
		case 'k': snprintf(key_path, sizeof(key_path), "%s", optarg); break;
		case 't': store = optarg; to_given = true; break;
		case 'd':
			if (pub_store_of_data_dir(data_store, sizeof(data_store), optarg) < 0)
				bad_usage("--data path too long");
			break;
		case O_BLOCK_SIZE:
			v = strtoul(optarg, &end, 10);
			if (*end || v < SFSRO_BLOCK_SIZE_MIN || v > SFSRO_BLOCK_SIZE_MAX)
				bad_usage("--block-size wants %d..%d bytes, not '%s'", SFSRO_BLOCK_SIZE_MIN,
				          SFSRO_BLOCK_SIZE_MAX, optarg);
			opt.block_size = (uint32_t)v;
			break;
		case O_REDUNDANCY:
			if (parse_redundancy(optarg, &opt) < 0)
				bad_usage("--redundancy wants copies or rs:M/N with 1 <= M < N <= 32, M <= 16, "
				          "not '%s'", optarg);
			break;
		case O_VALID:
			if (cfs_parse_days(optarg, &opt.valid_s) < 0)
				bad_usage("--valid wants a number of days above 0, at most 3650 (0.5: twelve "
				          "hours), not '%s'", optarg);
			break;
		case O_STATE_DIR: opt.state_dir = optarg; break;
		case 'n': opt.dry_run = true; break;
		case 'r': refresh = optarg; break;
		case 'f': from = optarg; break;
		case 'q': quiet = true; break;
		case 'h': fputs(usage_text, stdout); return 0;
		case 'V': printf("cfs-publish %s\n", CFS_VERSION); return 0;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		default: bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (data_store[0]) {
		if (to_given)
			bad_usage("--data and --to both name where blocks go: give one");
		store = data_store;
	}
	if (cfs_crypto_init() < 0)
		return 1;
	if (from) {
		if (keygen || refresh || opt.dry_run)
			bad_usage("--from does not go with --keygen, --refresh or --dry-run");
		if (argc - optind != 1)
			bad_usage("--from takes exactly one VOLUME to push");
		return push_main(from, store ? store : "cfsd", argv[optind]);
	}
	if (keygen) {
		if (argc - optind > 1)
			bad_usage("--keygen takes at most one FILE");
		if (optind < argc)
			snprintf(key_path, sizeof(key_path), "%s", argv[optind]);
		else if (!key_path[0] && pub_default_key_path(key_path, sizeof(key_path)) < 0)
			return 1;
		if (pub_key_generate(key_path, &pk) < 0)
			return 1;
		cfs_name_encode(name, pk.b);
		if (!quiet)
			fprintf(stderr, "cfs-publish: new key in %s (keep it secret; mode 0600)\n", key_path);
		puts(name);
		return 0;
	}
	if (refresh ? optind != argc : argc - optind != 1)
		bad_usage(refresh ? "--refresh takes no DIR" : "give exactly one DIR to publish");
	if (!store)
		store = "cfsd";
	if (!key_path[0] && pub_default_key_path(key_path, sizeof(key_path)) < 0)
		return 1;
	if (pub_key_load(key_path, &pk, &sk) < 0)
		return 1;
	cfs_name_encode(name, pk.b);
	if (refresh) {
		const char *why = "";
		if (cfs_name_decode(want.b, refresh, &why) < 0)
			bad_usage("'%s' is not a volume name: %s", refresh, why);
		if (memcmp(want.b, pk.b, sizeof(pk.b)) != 0) {
			log_error("volume %s is not the one of key %s (%s)", refresh, key_path, name);
			return 1;
		}
	}
	opt.progress = !quiet && isatty(STDERR_FILENO);
	if (quiet)
		cfs_log_set_level(CFS_LOG_WARN);

	uv_loop_t *loop = uv_default_loop();
	pub_sink_set_advice(STORE_ADVICE);
	if ((r = pub_sink_open(loop, store, &sink)) < 0) {
		if (store_unreachable(r))
			advise_store("--to");
		return 1;
	}
	r = refresh ? pub_refresh(loop, &sink, &pk, &sk, &opt, &st)
	            : pub_publish(loop, &sink, argv[optind], &pk, &sk, &opt, &st);
	cfs_seckey_wipe(&sk);
	pub_sink_close(&sink);
	cfs_loop_run(loop); /* the sink closes */
	if (r == -EINTR)
		return 130; /* pub_publish said what was left undone */
	if (r < 0) {
		if (pub_sink_said_unreachable() || st.blocks_failed)
			return 1; /* one line said what and what to do */
		if (store_unreachable(r))
			advise_store("--to");
		log_error("%s failed; the previously published root (if any) is unchanged",
		          refresh ? "refresh" : "publishing");
		return 1;
	}
	char until[64] = "";
	time_t vt = (time_t)st.valid_until;
	if (st.valid_until)
		strftime(until, sizeof(until), "%Y-%m-%d %H:%M UTC", gmtime(&vt));
	if (refresh)
		log_info("refreshed %lu blocks; root sequence %lu, valid until %s", (unsigned long)st.blocks,
		         (unsigned long)st.seq, until);
	else
		log_info("%s%lu files, %lu dirs, %lu links, %.1f MB in %.2f s (%.1f MB/s); %lu blocks, %lu %s "
		         "(%.1f MB), %lu renewed; root sequence %lu, valid until %s",
		         opt.dry_run ? "dry run: " : "", (unsigned long)st.files, (unsigned long)st.dirs,
		         (unsigned long)st.symlinks, (double)st.bytes / 1e6, st.seconds,
		         st.seconds > 0 ? (double)st.bytes / 1e6 / st.seconds : 0, (unsigned long)st.blocks,
		         (unsigned long)st.blocks_sent, opt.dry_run ? "would be sent" : "sent",
		         (double)st.bytes_sent / 1e6, (unsigned long)st.blocks_renewed,
		         (unsigned long)st.seq, opt.dry_run ? "-" : until);
	if (!opt.dry_run)
		puts(name);
	return 0;
}
