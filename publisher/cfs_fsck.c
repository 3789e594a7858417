/*
 * cfs-fsck — check a published volume end to end.
 *
 *   cfs-fsck [--from STORE] [--list] [--quiet] VOLUME
 *   cfs-fsck [--from STORE] --replicas [--repair] VOLUME
 *
 * The exit code tells a damaged volume from one that could not be checked
 * (restic and borg do the same), so that a cron job or a
 * monitoring probe raises the right alarm:
 *
 *   0  the volume is whole: every block present and verified (--replicas:
 *      every block on all k of its servers, a coded data block's n
 *      fragments on its n holders, after --repair when it is now);
 *   1  the volume is damaged: blocks missing or corrupt, each reported by
 *      path and key on stderr, or a root that is not there or does not
 *      verify (--replicas: blocks below k, or below n);
 *   2  the volume could not be checked: wrong arguments, no such store,
 *      the store did not answer (for some blocks: they are reported as
 *      "unreadable"), or --replicas on a store that is not a ring.
 *
 * A summary line on stderr says which, and is left out only with
 * --quiet and a whole volume.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "publisher/publisher.h"

enum { EXIT_WHOLE = 0, EXIT_DAMAGED = 1, EXIT_UNCHECKED = 2 };

#define USAGE "usage: cfs-fsck [--from STORE | -d DIR] [--list | --replicas [--repair]] [--quiet] VOLUME"
#define bad_usage(...) cfs_usage_error(USAGE, __VA_ARGS__)

static const char help_text[] =
	USAGE "\n\n"
	"Verify every block of VOLUME from its signed root; report what is missing\n"
	"or corrupt by path and key. --list prints every entry with its attributes\n"
	"and content hash. VOLUME@SEQ checks that version.\n\n"
	"      --from STORE  cfsd (the ring through the local daemon; the default),\n"
	"                    cfsd:SOCKET, ring:HOST:PORT[,...], or dir:PATH (an\n"
	"                    existing store: it is never created)\n"
	"  -d, --data DIR    through the cfsd whose data directory is DIR: the same as\n"
	"                    --from cfsd:DIR/cfsd.sock\n"
	"      --list        print every entry: TYPE MODE SIZE MTIME BLAKE2B PATH\n"
	"      --replicas    for every block, which of its k servers hold a good\n"
	"                    copy (one line per block: KEY GOOD/K and the others;\n"
	"                    a coded data block: KEY GOOD/M/N, fragments on holders)\n"
	"      --repair      with --replicas: store the blocks below k again from a\n"
	"                    good copy (a coded block's missing fragments, rebuilt\n"
	"                    from M), then report them once more\n"
	"  -q, --quiet       no summary line when the volume is whole\n"
	"  -h, --help        show this help\n"
	"  -V, --version     show the version\n\n"
	"Exit status: 0 the volume is whole; 1 the volume is damaged (missing or\n"
	"corrupt blocks, no root, or a root that does not verify; --replicas: blocks\n"
	"below k); 2 it could not be checked (wrong arguments, no such store, the\n"
	"store did not answer, --replicas on a store that is not a ring).\n";

/* An error that says the store was not reached, not that the volume is bad. */
static bool store_unreachable(int r)
{
	return r == -ECONNREFUSED || r == -EHOSTUNREACH || r == -ETIMEDOUT || r == -ECONNRESET ||
	       r == -ENOTCONN || r == -EPIPE || r == -EACCES || r == -EADDRNOTAVAIL ||
	       r == -ECANCELED || r == -EDEADLK;
}

/* The advice after a store that did not answer: this program's option. */
static void advise_store(const char *store, int r)
{
	if (pub_sink_said_unreachable())
		return; /* its one line said what to do */
	log_error("no check was made of the volume: '%s' did not answer (%s); give another store "
	          "with --from (cfsd:SOCKET, ring:HOST:PORT or dir:PATH) or -d DIR", store,
	          strerror(-r));
}

static int replicas_main(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
                         bool repair, const char *store)
{
	struct pub_replica_stats rs;
	int r = pub_replicas(loop, sink, pk, seq, repair, stdout, &rs);

	pub_sink_close(sink);
	cfs_loop_run(loop); /* the sink closes */
	if (r == -EOPNOTSUPP)
		return EXIT_UNCHECKED; /* pub_replicas said why */
	if (r < 0 && r != -EBADMSG) {
		if (pub_sink_said_unreachable())
			return EXIT_UNCHECKED;
		if (store_unreachable(r))
			advise_store(store, r);
		else
			log_error_errno(r, "the replicas could not be checked");
		return EXIT_UNCHECKED;
	}
	fprintf(stderr, "cfs-fsck: %s: %lu blocks on k = %u servers each: %lu at k, %lu below k, "
	        "%lu on none, %lu unknown\n", r < 0 ? "REPLICAS BELOW k" : "every block at k",
	        (unsigned long)rs.blocks, rs.k, (unsigned long)rs.at_k, (unsigned long)rs.below_k,
	        (unsigned long)rs.at_zero, (unsigned long)rs.unknown);
	if (rs.code_m)
		fprintf(stderr, "cfs-fsck: of those, %lu data blocks as rs:%u/%u fragments: %lu at n, "
		        "%lu below n, %lu below m (unreadable)\n", (unsigned long)rs.coded, rs.code_m,
		        rs.code_n, (unsigned long)rs.coded_at_n, (unsigned long)rs.below_n,
		        (unsigned long)rs.below_m);
	if (repair)
		fprintf(stderr, "cfs-fsck: %lu blocks stored again\n", (unsigned long)rs.repaired);
	return r < 0 ? EXIT_DAMAGED : EXIT_WHOLE;
}

int main(int argc, char **argv)
{
	enum { O_LIST = 1000, O_REPLICAS, O_REPAIR };
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' },
		{ "data", required_argument, NULL, 'd' },
		{ "list", no_argument, NULL, O_LIST },
		{ "replicas", no_argument, NULL, O_REPLICAS },
		{ "repair", no_argument, NULL, O_REPAIR },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	const char *store = getenv("CFS_STORE"), *why = "";
	bool list = false, replicas = false, repair = false, quiet = false, from_given = false;
	char data_store[4200] = "";
	struct cfs_pubkey pk;
	uint64_t seq = 0;
	struct pub_sink sink;
	struct pub_fsck_stats st;
	int c, r;

	cfs_log_init(argv[0], CFS_LOG_WARN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:qhV", opts, NULL)) != -1) {
		switch (c) {
		case 'f': store = optarg; from_given = true; break;
		case 'd':
			if (pub_store_of_data_dir(data_store, sizeof(data_store), optarg) < 0)
				bad_usage("--data path too long");
			break;
		case O_LIST: list = true; break;
		case O_REPLICAS: replicas = true; break;
		case O_REPAIR: replicas = repair = true; break;
		case 'q': quiet = true; break;
		case 'h': fputs(help_text, stdout); return 0;
		case 'V': printf("cfs-fsck %s\n", CFS_VERSION); return 0;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		default: bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		bad_usage("give exactly one VOLUME");
	if (cfs_volume_spec_parse(argv[optind], pk.b, &seq, NULL, &why) < 0)
		bad_usage("'%s' is not a volume name: %s", argv[optind], why);
	if (list && replicas)
		bad_usage("--list and --replicas do not go together");
	if (data_store[0]) {
		if (from_given)
			bad_usage("--data and --from both name the store: give one");
		store = data_store;
	}
	if (!store)
		store = "cfsd";
	if (cfs_crypto_init() < 0)
		return EXIT_UNCHECKED;
	uv_loop_t *loop = uv_default_loop();
	pub_sink_set_advice("no check was made of the volume; give another store with --from "
	                    "(cfsd:SOCKET, ring:HOST:PORT or dir:PATH) or -d DIR");
	if ((r = pub_sink_open_existing(loop, store, &sink)) < 0) {
		log_error("no check was made of the volume: the store '%s' cannot be used", store);
		return EXIT_UNCHECKED;
	}
	if (replicas)
		return replicas_main(loop, &sink, &pk, seq, repair, store);
	r = pub_fsck(loop, &sink, &pk, seq, stdout, stderr, list, &st);
	pub_sink_close(&sink);
	cfs_loop_run(loop); /* the sink closes */
	if (r < 0 && st.files + st.dirs == 0) { /* stopped at the root: nothing was checked */
		if (r == -ENOENT) {
			log_error("DAMAGED or absent: the store '%s' has no root for volume %s (it was "
			          "never published there, or its root is lost)", store, argv[optind]);
			return EXIT_DAMAGED;
		}
		if (store_unreachable(r)) {
			advise_store(store, r);
			return EXIT_UNCHECKED;
		}
		log_error_errno(r, "DAMAGED: the volume's root cannot be used");
		return EXIT_DAMAGED;
	}
	const char *verdict = r == -EBADMSG ? "DAMAGED" : r < 0 ? "NOT FULLY CHECKED" : "whole";
	if (r < 0 || !quiet)
		fprintf(stderr, "cfs-fsck: volume %s: %lu files, %lu directories, %lu links, %.1f MB; "
		        "%lu missing, %lu corrupt, %lu unreadable\n", verdict, (unsigned long)st.files,
		        (unsigned long)st.dirs, (unsigned long)st.symlinks, (double)st.bytes / 1e6,
		        (unsigned long)st.missing, (unsigned long)st.corrupt, (unsigned long)st.unreadable);
	if (r == -EBADMSG)
		return EXIT_DAMAGED;
	if (r < 0) {
		advise_store(store, r);
		return EXIT_UNCHECKED;
	}
	return EXIT_WHOLE;
}
