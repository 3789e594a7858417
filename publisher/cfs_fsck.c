/*
 * cfs-fsck — check a published volume end to end.
 *
 *   cfs-fsck [--from STORE] [--list] VOLUME
 *   cfs-fsck [--from STORE] --replicas [--repair] VOLUME
 *
 * Exit 0: every block is present and verifies. Exit 1: something is
 * missing or corrupt (each reported by path and key on stderr) or the root
 * cannot be used. Exit 2: wrong arguments. With --replicas: exit 0 when
 * every block is on all k of its servers (after --repair, when it is now),
 * else 1.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "publisher/publisher.h"

#define bad_usage(...) cfs_usage_error("usage: cfs-fsck [--from STORE] [--list | --replicas [--repair]] VOLUME", __VA_ARGS__)

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "from", required_argument, NULL, 'f' },
		{ "list", no_argument, NULL, 'l' },
		{ "replicas", no_argument, NULL, 'R' },
		{ "repair", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *store = getenv("CFS_STORE"), *why = "";
	bool list = false, replicas = false, repair = false;
	struct cfs_pubkey pk;
	struct pub_sink sink;
	struct pub_fsck_stats st;
	int c, r;

	cfs_log_init(argv[0], CFS_LOG_WARN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":f:lhRP", opts, NULL)) != -1) {
		switch (c) {
		case 'f': store = optarg; break;
		case 'l': list = true; break;
		case 'R': replicas = true; break;
		case 'P': replicas = repair = true; break;
		case 'h':
			printf("usage: cfs-fsck [--from STORE] [--list | --replicas [--repair]] VOLUME\n\n"
			       "Verify every block of VOLUME from its signed root; report what is missing\n"
			       "or corrupt by path and key. --list prints every entry with its attributes\n"
			       "and content hash. Exit 0 if the volume is whole.\n\n"
			       "  -f, --from STORE  cfsd (the ring through the local daemon; the default),\n"
			       "                    cfsd:SOCKET, ring:HOST:PORT[,...], or dir:PATH\n"
			       "      --replicas    for every block, which of its k servers hold a good\n"
			       "                    copy (one line per block: KEY GOOD/K and the others);\n"
			       "                    exit 0 only if every block is on all k\n"
			       "      --repair      with --replicas: store the blocks below k again from a\n"
			       "                    good copy, then report them once more\n");
			return 0;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		default: bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind != 1)
		bad_usage("give exactly one VOLUME");
	if (cfs_name_decode(pk.b, argv[optind], &why) < 0)
		bad_usage("'%s' is not a volume name: %s", argv[optind], why);
	if (!store)
		store = "cfsd";
	if (cfs_crypto_init() < 0)
		return 1;
	uv_loop_t *loop = uv_default_loop();
	if (list && replicas)
		bad_usage("--list and --replicas do not go together");
	if (pub_sink_open(loop, store, &sink) < 0)
		return 1;
	if (replicas) {
		struct pub_replica_stats rs;
		r = pub_replicas(loop, &sink, &pk, repair, stdout, &rs);
		pub_sink_close(&sink);
		cfs_loop_run(loop); /* the sink closes */
		if (r == -EOPNOTSUPP)
			return 1;
		fprintf(stderr, "cfs-fsck: %lu blocks on k = %u servers each: %lu at k, %lu below k, "
		        "%lu on none, %lu unknown\n", (unsigned long)rs.blocks, rs.k,
		        (unsigned long)rs.at_k, (unsigned long)rs.below_k, (unsigned long)rs.at_zero,
		        (unsigned long)rs.unknown);
		if (repair)
			fprintf(stderr, "cfs-fsck: %lu blocks stored again\n", (unsigned long)rs.repaired);
		return r < 0 ? 1 : 0;
	}
	r = pub_fsck(loop, &sink, &pk, stdout, stderr, list, &st);
	pub_sink_close(&sink);
	cfs_loop_run(loop); /* the sink closes */
	fprintf(stderr, "cfs-fsck: %lu files, %lu directories, %lu links, %.1f MB; %lu missing, %lu corrupt\n",
	        (unsigned long)st.files, (unsigned long)st.dirs, (unsigned long)st.symlinks,
	        (double)st.bytes / 1e6, (unsigned long)st.missing, (unsigned long)st.corrupt);
	return r < 0 ? 1 : 0;
}
