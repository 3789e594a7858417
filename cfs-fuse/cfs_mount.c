/*
 * cfs-mount — mount a volume read-only through FUSE.
 *
 *   cfs-mount [options] VOLUME [MOUNTPOINT]
 *   cfs-mount [options] --from dir:PATH VOLUME [MOUNTPOINT]
 *
 * Without MOUNTPOINT: /cfs/VOLUME for root, $XDG_RUNTIME_DIR/cfs/VOLUME
 * otherwise (created). The mountpoint is printed on stdout once mounted.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfs-fuse/cfsfuse.h"

static const char usage_text[] =
	"usage: cfs-mount [options] VOLUME [MOUNTPOINT]\n"
	"\n"
	"Mount VOLUME (a publisher's volume name) read-only. Every block is checked\n"
	"against the volume's signed root. Unmount with fusermount3 -u MOUNTPOINT\n"
	"or by sending SIGTERM.\n"
	"\n"
	"  -f, --foreground      stay in the foreground (logs on stderr)\n"
	"  -o OPT[,OPT...]       FUSE mount options, e.g. allow_other\n"
	"      --cfsd SOCKET     the local cfsd's control socket\n"
	"      --data DIR        ... or the data directory of that cfsd\n"
	"                        (default $CFS_DATA_DIR, /var/lib/cfs for root)\n"
	"      --cache-mb N      in-memory block cache (default 64)\n"
	"      --disk-cache-mb N keep up to N MiB of blocks on disk too, so that a\n"
	"                        remount starts warm (default 0: off)\n"
	"      --cache-dir DIR   where (one directory per volume; default\n"
	"                        /var/cache/cfs as root, else $XDG_CACHE_HOME/cfs\n"
	"                        or ~/.cache/cfs)\n"
	"      --prefetch N      largest prefetch window in blocks (default 64; 0 off)\n"
	"      --prefetch-init N prefetch window at the start (default 4)\n"
	"      --update SECONDS  check for a newer root this often (default 60; 0 never)\n"
	"      --timeout MS      one block fetch (default 10000)\n"
	"      --retries N       further tries of a failed fetch before EIO (default 2)\n"
	"      --max-fetches N   block fetches outstanding at once (default 24)\n"
	"      --state-dir DIR   where the highest root sequence seen is kept\n"
	"      --bootstrap H:P   reach the ring as a plain client, no local cfsd\n"
	"                        (repeatable; default: the local cfsd when one runs,\n"
	"                        else $CFS_BOOTSTRAP, else ~/.config/cfs/client.conf)\n"
	"      --from dir:PATH   read the volume from the dir: store at PATH (as\n"
	"                        cfs-publish --to dir:PATH wrote it): no ring, no cfsd;\n"
	"                        verified as from the ring. The store stays locked\n"
	"                        while mounted\n"
	"  -d, --debug           log every FUSE request (libfuse's -d)\n"
	"  -h, --help            show this help\n";

#define bad_usage(...) cfs_usage_error("usage: cfs-mount [options] VOLUME [MOUNTPOINT]", __VA_ARGS__)

static unsigned long number(const char *opt, const char *s, unsigned long max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v > max)
		bad_usage("%s wants a number up to %lu, not '%s'", opt, max, s);
	return v;
}

/* The options, one getopt case each, then the checks that need several of
 * them together; long because the option table and its switch are flat,
 * which keeps each option's parsing next to its name. */
int main(int argc, char **argv)
{
	enum { O_CFSD = 256, O_DATA, O_CACHE, O_PREFETCH, O_PREFETCH_INIT, O_UPDATE, O_TIMEOUT,
	       O_RETRIES, O_MAX_FETCHES, O_STATE, O_BOOTSTRAP, O_DISK_CACHE, O_CACHE_DIR, O_FROM };
	static const struct option opts[] = {
		{ "foreground", no_argument, NULL, 'f' },
		{ "cfsd", required_argument, NULL, O_CFSD },
		{ "data", required_argument, NULL, O_DATA },
		{ "cache-mb", required_argument, NULL, O_CACHE },
		{ "disk-cache-mb", required_argument, NULL, O_DISK_CACHE },
		{ "cache-dir", required_argument, NULL, O_CACHE_DIR },
		{ "prefetch", required_argument, NULL, O_PREFETCH },
		{ "prefetch-init", required_argument, NULL, O_PREFETCH_INIT },
		{ "update", required_argument, NULL, O_UPDATE },
		{ "timeout", required_argument, NULL, O_TIMEOUT },
		{ "retries", required_argument, NULL, O_RETRIES },
		{ "max-fetches", required_argument, NULL, O_MAX_FETCHES },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "bootstrap", required_argument, NULL, O_BOOTSTRAP },
		{ "from", required_argument, NULL, O_FROM },
		{ "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cfsfuse_options o;
	static struct dhash_target tgt;
	char mnt[4096], cache_dir[4096] = "", state_dir[4096], from[4096] = "", *fuse_argv[64];
	uint64_t disk_mb = 0;
	int fuse_argc = 0, c;
	const char *why = "";
	struct cfs_pubkey vol;

	cfs_log_init(argv[0], CFS_LOG_INFO);
	cfsfuse_options_default(&o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":fo:dh", opts, NULL)) != -1) {
		switch (c) {
		case 'f': o.foreground = true; break;
		case 'd': o.debug = true; o.foreground = true; break;
		case 'o':
			if (fuse_argc + 2 > (int)CFS_ARRAY_SIZE(fuse_argv))
				bad_usage("too many -o options");
			fuse_argv[fuse_argc++] = (char *)"-o";
			fuse_argv[fuse_argc++] = optarg;
			break;
		case O_CFSD:
			if (snprintf(tgt.sock, sizeof(tgt.sock), "%s", optarg) >= (int)sizeof(tgt.sock))
				bad_usage("--cfsd path too long");
			break;
		case O_DATA:
			if (snprintf(tgt.sock, sizeof(tgt.sock), "%s/%s", optarg, DHASH_SOCKET_NAME) >=
			    (int)sizeof(tgt.sock))
				bad_usage("--data path too long");
			break;
		case O_DISK_CACHE: disk_mb = number("--disk-cache-mb", optarg, 1ul << 24); break;
		case O_CACHE_DIR:
			if (snprintf(cache_dir, sizeof(cache_dir), "%s", optarg) >= (int)sizeof(cache_dir))
				bad_usage("--cache-dir path too long");
			break;
		case O_CACHE: o.cache_bytes = (size_t)number("--cache-mb", optarg, 1u << 20) << 20; break;
		case O_PREFETCH: o.prefetch_max = (uint32_t)number("--prefetch", optarg, 4096); break;
		case O_PREFETCH_INIT: o.prefetch_init = (uint32_t)number("--prefetch-init", optarg, 4096); break;
		case O_UPDATE: o.update_s = (uint32_t)number("--update", optarg, 86400 * 365); break;
		case O_TIMEOUT: o.fetch_timeout_ms = (uint32_t)number("--timeout", optarg, 3600000); break;
		case O_RETRIES: o.retries = (uint32_t)number("--retries", optarg, 100); break;
		case O_MAX_FETCHES:
			if (!(o.max_fetches = (uint32_t)number("--max-fetches", optarg, 4096)))
				bad_usage("--max-fetches wants at least 1");
			break;
		case O_STATE:
			if (snprintf(state_dir, sizeof(state_dir), "%s", optarg) >= (int)sizeof(state_dir))
				bad_usage("--state-dir is too long");
			o.state_dir = state_dir;
			break;
		case O_BOOTSTRAP:
			if (dhash_target_add(&tgt, optarg, "--bootstrap") < 0)
				return 2;
			break;
		case O_FROM:
			if (strncmp(optarg, "dir:", 4) != 0 || !optarg[4])
				bad_usage("--from wants dir:PATH, not '%s'", optarg);
			if (snprintf(from, sizeof(from), "%s", optarg + 4) >= (int)sizeof(from))
				bad_usage("--from path too long");
			break;
		case 'h': fputs(usage_text, stdout); return 0;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		default: bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (argc - optind < 1 || argc - optind > 2)
		bad_usage("give a VOLUME and at most one MOUNTPOINT");
	if (cfs_name_decode(vol.b, argv[optind], &why) < 0)
		bad_usage("'%s' is not a volume name: %s", argv[optind], why);
	if (o.prefetch_init > o.prefetch_max && o.prefetch_max)
		bad_usage("--prefetch-init %u is above --prefetch %u", o.prefetch_init, o.prefetch_max);
	if (o.cache_bytes < (1u << 20))
		bad_usage("--cache-mb wants at least 1");
	if (tgt.sock[0] && tgt.nboot)
		bad_usage("give either --cfsd / --data or --bootstrap, not both");
	if (from[0] && (tgt.sock[0] || tgt.nboot || disk_mb))
		bad_usage("--from reads a local store: no --cfsd, --data, --bootstrap or --disk-cache-mb");
	if (from[0])
		o.from_dir = from;
	else if (dhash_target_resolve(&tgt) < 0)
		return 2;
	o.target = &tgt;
	if (disk_mb) {
		if (!cache_dir[0] && cfs_user_dir(cache_dir, sizeof(cache_dir), "/var/cache/cfs",
		                                  "XDG_CACHE_HOME", ".cache") < 0)
			bad_usage("no --cache-dir given and neither $XDG_CACHE_HOME nor $HOME is set");
		o.disk_cache = cache_dir;
		o.disk_cache_bytes = disk_mb << 20;
	}
	if (argc - optind == 2) {
		snprintf(mnt, sizeof(mnt), "%s", argv[optind + 1]);
	} else {
		const char *run = getenv("XDG_RUNTIME_DIR");
		if (geteuid() == 0)
			snprintf(mnt, sizeof(mnt), "/cfs/%s", argv[optind]);
		else if (run && *run)
			snprintf(mnt, sizeof(mnt), "%s/cfs/%s", run, argv[optind]);
		else
			bad_usage("no MOUNTPOINT given and $XDG_RUNTIME_DIR is not set");
		(void)cfs_mkdir_p(mnt, 0755); /* a failure shows when mounting */
	}
	/* Mounted, the process works from / (libfuse's fuse_daemonize changes
	 * there, -f or not): paths from the command line are made absolute
	 * first, or the control socket and state files would not be found. */
	if (cfs_abs_path(tgt.sock, sizeof(tgt.sock)) < 0 || cfs_abs_path(mnt, sizeof(mnt)) < 0 ||
	    (o.state_dir && cfs_abs_path(state_dir, sizeof(state_dir)) < 0) ||
	    cfs_abs_path(cache_dir, sizeof(cache_dir)) < 0 || cfs_abs_path(from, sizeof(from)) < 0)
		bad_usage("a path is too long once made absolute");
	if (cfs_crypto_init() < 0)
		return 1;
	return cfsfuse_run(&vol, mnt, &o, fuse_argc, fuse_argv);
}
