/*
 * cfs-mount — mount a volume read-only through FUSE.
 *
 *   cfs-mount [options] VOLUME [MOUNTPOINT]
 *   cfs-mount [options] --from dir:PATH VOLUME [MOUNTPOINT]
 *
 * Without MOUNTPOINT: /cfs/VOLUME for root, $XDG_RUNTIME_DIR/cfs/VOLUME
 * otherwise (created, and removed again when the mount fails or ends).
 * The mountpoint is printed on stdout once mounted.
 *
 * mount(8)'s conventions: every long option can be given as -o NAME=VALUE
 * (so that mount.cfs and an fstab line can pass them), mount(8)'s own
 * words (_netdev, noauto, nofail, x-*, ...) are accepted and ignored, the
 * rest of -o goes to FUSE, and the mount is read-only whatever is asked.
 */
#include <dirent.h>
#include <getopt.h>
#include <limits.h>
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
	"against the volume's signed root. VOLUME@SEQ mounts that version, fixed;\n"
	"VOLUME or VOLUME@latest the newest, followed as it changes. Unmount with\n"
	"fusermount3 -u MOUNTPOINT (umount as root) or by sending SIGTERM.\n"
	"\n"
	"  -f, --foreground      stay in the foreground (logs on stderr; in the\n"
	"                        background the log goes to syslog)\n"
	"  -o OPT[,OPT...]       any long option below as NAME=VALUE (bootstrap=H:P,\n"
	"                        cache-mb=N, ...; cache_mb too), mount(8)'s own words\n"
	"                        (_netdev, noauto, nofail, defaults, user, x-*: ignored),\n"
	"                        else FUSE mount options (allow_other, ...). Always\n"
	"                        read-only: rw is ignored\n"
	"      --cfsd SOCKET     the local cfsd's control socket\n"
	"  -d, --data DIR        ... or the data directory of that cfsd\n"
	"                        (default $CFS_DATA_DIR, /var/lib/cfs for root)\n"
	"      --cache-mb N      in-memory block cache (default 64)\n"
	"      --disk-cache-mb N keep up to N MiB of blocks on disk too, so that a\n"
	"                        remount starts warm (default 0: off); with it, a\n"
	"                        remount starts from the last root kept, at once,\n"
	"                        and reads what it read before without the ring\n"
	"      --cache-dir DIR   where (one directory per volume; default\n"
	"                        /var/cache/cfs as root, else $XDG_CACHE_HOME/cfs\n"
	"                        or ~/.cache/cfs)\n"
	"      --prefetch N      largest prefetch window in blocks (default 64; 0 off)\n"
	"      --prefetch-init N prefetch window at the start (default 4)\n"
	"      --update SECONDS  check for a newer root this often (default 60; 0 never)\n"
	"      --timeout MS      one block fetch (default 10000)\n"
	"      --retries N       further tries of a failed fetch before EIO (default 2)\n"
	"      --max-fetches N   block fetches outstanding at once to begin with (default\n"
	"                        24; grows with the bandwidth-delay product of the path)\n"
	"      --state-dir DIR   where the highest root sequence seen and the last\n"
	"                        root are kept (default /var/lib/cfs/mounts as root,\n"
	"                        else $XDG_STATE_HOME/cfs)\n"
	"      --bootstrap H:P   reach the ring as a plain client, no local cfsd\n"
	"                        (repeatable; default: the local cfsd when one runs,\n"
	"                        else $CFS_BOOTSTRAP, else ~/.config/cfs/client.conf)\n"
	"      --cache-push-mb-per-s MB  as a plain client, upload at most this much of\n"
	"                        the copies a read pushes to the ring's caches\n"
	"                        (default 0: no bound; they always yield to reads)\n"
	"      --from dir:PATH   read the volume from the dir: store at PATH (as\n"
	"                        cfs-publish --to dir:PATH wrote it): no ring, no cfsd;\n"
	"                        verified as from the ring. The store stays locked\n"
	"                        while mounted\n"
	"      --debug           log every FUSE request (libfuse's -d; -d is --data,\n"
	"                        as in every CFS tool)\n"
	"      --nonempty        mount over a directory that is not empty (its\n"
	"                        contents are hidden while mounted; refused without)\n"
	"      --expired WHAT    a root past its valid-until: refuse (default), or\n"
	"                        allow: read it anyway, with a warning naming its date\n"
	"  -V, --version         show the version\n"
	"  -h, --help            show this help\n"
	"\n"
	"Mounts under /cfs get allow_other (readable by every user, with the\n"
	"published permission bits); a user other than root needs user_allow_other\n"
	"in /etc/fuse.conf for allow_other. A volume already mounted at MOUNTPOINT\n"
	"is not mounted there again.\n";

#define bad_usage(...) cfs_usage_error("usage: cfs-mount [options] VOLUME [MOUNTPOINT]", __VA_ARGS__)

enum { O_CFSD = 256, O_DATA, O_CACHE, O_PREFETCH, O_PREFETCH_INIT, O_UPDATE, O_TIMEOUT,
       O_RETRIES, O_MAX_FETCHES, O_STATE, O_BOOTSTRAP, O_DISK_CACHE, O_CACHE_DIR, O_FROM,
       O_PUSH_RATE, O_DEBUG, O_NONEMPTY, O_EXPIRED };
static const struct option opts[] = {
	{ "foreground", no_argument, NULL, 'f' },
	{ "cfsd", required_argument, NULL, O_CFSD },
	{ "data", required_argument, NULL, 'd' },
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
	{ "cache-push-mb-per-s", required_argument, NULL, O_PUSH_RATE },
	{ "debug", no_argument, NULL, O_DEBUG },
	{ "nonempty", no_argument, NULL, O_NONEMPTY },
	{ "expired", required_argument, NULL, O_EXPIRED },
	{ "version", no_argument, NULL, 'V' },
	{ "help", no_argument, NULL, 'h' },
	{ 0 },
};

/* What the options set, before the checks that need several of them. */
static struct {
	struct cfsfuse_options o;
	struct client_target tgt;
	char cache_dir[4096], state_dir[4096], from[4096];
	char fuse_opts[4096];     /* the -o words for FUSE, comma-separated */
	uint64_t disk_mb;
	bool allow_other;         /* asked for in -o */
	bool nonempty;            /* mount over a directory that is not empty */
} A;

static unsigned long number(const char *opt, const char *s, unsigned long max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v > max)
		bad_usage("%s wants a number up to %lu, not '%s'", opt, max, s);
	return v;
}

static void copy_path(char *dst, size_t n, const char *src, const char *what)
{
	if (snprintf(dst, n, "%s", src) >= (int)n)
		bad_usage("%s path too long", what);
}

/* One option, from the command line or from -o (name as in opts). */
static void apply(int c, const char *name, const char *val)
{
	struct cfsfuse_options *o = &A.o;

	switch (c) {
	case 'f': o->foreground = true; break;
	case O_DEBUG: o->debug = true; o->foreground = true; break;
	case O_CFSD: copy_path(A.tgt.sock, sizeof(A.tgt.sock), val, "--cfsd"); break;
	case 'd':
		if (snprintf(A.tgt.sock, sizeof(A.tgt.sock), "%s/%s", val, CLIENT_SOCKET_NAME) >=
		    (int)sizeof(A.tgt.sock))
			bad_usage("--data path too long");
		break;
	case O_DISK_CACHE: A.disk_mb = number("--disk-cache-mb", val, 1ul << 24); break;
	case O_CACHE_DIR: copy_path(A.cache_dir, sizeof(A.cache_dir), val, "--cache-dir"); break;
	case O_CACHE: o->cache_bytes = (size_t)number("--cache-mb", val, 1u << 20) << 20; break;
	case O_PREFETCH: o->prefetch_max = (uint32_t)number("--prefetch", val, 4096); break;
	case O_PREFETCH_INIT: o->prefetch_init = (uint32_t)number("--prefetch-init", val, 4096); break;
	case O_UPDATE: o->update_s = (uint32_t)number("--update", val, 86400 * 365); break;
	case O_TIMEOUT: o->fetch_timeout_ms = (uint32_t)number("--timeout", val, 3600000); break;
	case O_RETRIES: o->retries = (uint32_t)number("--retries", val, 100); break;
	case O_MAX_FETCHES:
		if (!(o->max_fetches = (uint32_t)number("--max-fetches", val, 4096)))
			bad_usage("--max-fetches wants at least 1");
		break;
	case O_STATE:
		copy_path(A.state_dir, sizeof(A.state_dir), val, "--state-dir");
		o->state_dir = A.state_dir;
		break;
	case O_BOOTSTRAP:
		if (client_target_add(&A.tgt, val, "--bootstrap") < 0)
			exit(2);
		break;
	case O_PUSH_RATE:
		A.tgt.cache_push_bytes_per_s = (uint64_t)number("--cache-push-mb-per-s", val, 1000000) * 1000000;
		break;
	case O_FROM:
		if (strncmp(val, "dir:", 4) != 0 || !val[4])
			bad_usage("--from wants dir:PATH, not '%s'", val);
		copy_path(A.from, sizeof(A.from), val + 4, "--from");
		break;
	case O_NONEMPTY: A.nonempty = true; break;
	case O_EXPIRED: {
		int v = cfsfuse_expired_arg(val);
		if (v < 0)
			bad_usage("--expired wants allow or refuse, not '%s'", val);
		o->allow_expired = v;
		break;
	}
	case 'V': printf("cfs-mount %s\n", CFS_VERSION); exit(0);
	case 'h': fputs(usage_text, stdout); exit(0);
	default: bad_usage("option '%s' is not for -o", name);
	}
}

static void add_fuse_opt(const char *w)
{
	size_t n = strlen(A.fuse_opts);

	if (snprintf(A.fuse_opts + n, sizeof(A.fuse_opts) - n, "%s%s", n ? "," : "", w) >=
	    (int)(sizeof(A.fuse_opts) - n))
		bad_usage("too many -o options");
}

/* mount(8)'s and fstab's words for mount(8) itself, not for the file
 * system; and rw, which a read-only volume does not take. */
static bool is_mount8_word(const char *w)
{
	static const char *const words[] = { "_netdev", "noauto", "auto", "user", "nouser", "users",
	                                     "owner", "group", "defaults", "nofail", "rw", "ro" };
	for (size_t i = 0; i < CFS_ARRAY_SIZE(words); i++)
		if (strcmp(w, words[i]) == 0)
			return true;
	return strncmp(w, "x-", 2) == 0 || strncmp(w, "comment=", 8) == 0;
}

/* -o a,b=c,...: our long options by name (with _ for -), mount(8)'s words
 * dropped, the rest for FUSE. A value cannot hold a comma: give a list of
 * bootstrap addresses as several bootstrap= words. */
static void parse_o(const char *arg)
{
	char *copy = xstrdup(arg), *save = NULL;

	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		char name[64], *eq = strchr(w, '=');
		size_t nl = eq ? (size_t)(eq - w) : strlen(w);
		const struct option *op = NULL;

		if (is_mount8_word(w)) {
			if (strcmp(w, "rw") == 0)
				log_info("-o rw ignored: a volume is mounted read-only");
			continue;
		}
		if (nl < sizeof(name)) {
			memcpy(name, w, nl);
			name[nl] = 0;
			for (char *p = name; *p; p++)
				*p = *p == '_' ? '-' : *p;
			for (op = opts; op->name && strcmp(op->name, name) != 0; op++)
				;
		}
		if (!op || !op->name) {
			if (strcmp(w, "allow_other") == 0)
				A.allow_other = true;
			add_fuse_opt(w);
			continue;
		}
		if (op->val == 'h' || op->val == 'V')
			bad_usage("-o %s: give --%s", w, op->name);
		if (op->has_arg == required_argument && (!eq || !eq[1]))
			bad_usage("-o %s wants a value: -o %s=...", name, name);
		if (op->has_arg == no_argument && eq)
			bad_usage("-o %s takes no value", name);
		apply(op->val, name, eq ? eq + 1 : NULL);
	}
	free(copy);
}

/* Whether /etc/fuse.conf lets users other than root ask for allow_other. */
static bool fuse_conf_allows_other(void)
{
	char line[512];
	bool yes = false;
	FILE *f = fopen("/etc/fuse.conf", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char word[64];
		if (sscanf(line, " %63[^# \t\n]", word) == 1 && strcmp(word, "user_allow_other") == 0)
			yes = true;
	}
	fclose(f);
	return yes;
}

struct mounted_there {
	const char *real;
	bool found;
};

static bool mount_is(void *arg, const char *mnt, const char *src)
{
	struct mounted_there *m = arg;

	m->found = strcmp(mnt, m->real) == 0;
	return !m->found;
}

/* Whether this volume is mounted at mnt already (cfs_mounts_each). */
static bool is_mounted_there(const char *mnt, const char *volume)
{
	char real[PATH_MAX];
	struct mounted_there m = { real, false };

	if (!realpath(mnt, real))
		return false;
	return cfs_mounts_each(volume, mount_is, &m) > 0 && m.found;
}

/* The directories made for a default mountpoint, outermost first, to be
 * removed again (if empty) when the mount fails or ends. */
static char made[8][4096];
static int nmade;

static void make_mountpoint(const char *mnt)
{
	char tmp[4096];

	snprintf(tmp, sizeof(tmp), "%s", mnt);
	for (char *p = tmp + 1;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = 0;
			if (mkdir(tmp, 0755) == 0 && nmade < (int)CFS_ARRAY_SIZE(made))
				snprintf(made[nmade++], sizeof(made[0]), "%s", tmp);
			*p = c;
			if (!c)
				break;
		}
	}
}

static void remove_made(void)
{
	while (nmade > 0)
		(void)rmdir(made[--nmade]);
}

/* An empty directory, or one that cannot be read (then mounting says
 * why): anything else is hidden by a mount over it. */
static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;

	if (!d)
		return true;
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

static bool under_cfs(const char *mnt)
{
	return strncmp(mnt, "/cfs/", 5) == 0 && mnt[5];
}

/* The options, then the checks that need several of them together, the
 * mountpoint and its conventions (/cfs, allow_other, one mount of a volume
 * per place); long because each check is short and they read in order. */
int main(int argc, char **argv)
{
	char mnt[4096], *fuse_argv[2];
	int fuse_argc = 0, c, rc;
	const char *why = "";
	struct cfs_pubkey vol;
	struct cfsfuse_options *o = &A.o;

	cfs_log_init(argv[0], CFS_LOG_INFO);
	cfsfuse_options_default(o);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":fo:d:Vh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': parse_o(optarg); break;
		case ':': bad_usage("option '%s' needs a value", argv[optind - 1]);
		case '?': bad_usage("unknown option '%s'", argv[optind - 1]);
		default: apply(c, argv[optind - 1], optarg);
		}
	}
	if (argc - optind < 1 || argc - optind > 2)
		bad_usage("give a VOLUME and at most one MOUNTPOINT");
	if (cfs_volume_spec_parse(argv[optind], vol.b, &o->version, NULL, &why) < 0)
		bad_usage("'%s' is not a volume name: %s", argv[optind], why);
	if (o->prefetch_init > o->prefetch_max && o->prefetch_max)
		bad_usage("--prefetch-init %u is above --prefetch %u", o->prefetch_init, o->prefetch_max);
	if (o->cache_bytes < (1u << 20))
		bad_usage("--cache-mb wants at least 1");
	if (A.tgt.sock[0] && A.tgt.nboot)
		bad_usage("give either --cfsd / --data or --bootstrap, not both");
	if (A.from[0] && (A.tgt.sock[0] || A.tgt.nboot || A.disk_mb))
		bad_usage("--from reads a local store: no --cfsd, --data, --bootstrap or --disk-cache-mb");
	if (A.from[0])
		o->from_dir = A.from;
	else if (client_target_resolve(&A.tgt) < 0)
		return 2;
	o->target = &A.tgt;
	if (A.disk_mb) {
		if (!A.cache_dir[0] && cfs_user_dir(A.cache_dir, sizeof(A.cache_dir), "/var/cache/cfs",
		                                    "XDG_CACHE_HOME", ".cache") < 0)
			bad_usage("no --cache-dir given and neither $XDG_CACHE_HOME nor $HOME is set");
		o->disk_cache = A.cache_dir;
		o->disk_cache_bytes = A.disk_mb << 20;
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
	}
	/* Mounted, the process works from / (libfuse's fuse_daemonize changes
	 * there, -f or not): paths from the command line are made absolute
	 * first, or the control socket and state files would not be found. */
	if (cfs_abs_path(A.tgt.sock, sizeof(A.tgt.sock)) < 0 || cfs_abs_path(mnt, sizeof(mnt)) < 0 ||
	    (o->state_dir && cfs_abs_path(A.state_dir, sizeof(A.state_dir)) < 0) ||
	    cfs_abs_path(A.cache_dir, sizeof(A.cache_dir)) < 0 || cfs_abs_path(A.from, sizeof(A.from)) < 0)
		bad_usage("a path is too long once made absolute");

	/* /cfs is the system's place for volumes: readable by every user,
	 * with the published permission bits checked by the kernel
	 * (default_permissions, always on). */
	if (under_cfs(mnt) && !A.allow_other) {
		if (geteuid() == 0 || fuse_conf_allows_other()) {
			add_fuse_opt("allow_other");
			A.allow_other = true;
		} else {
			log_warn("%s is only readable by you: allow_other needs user_allow_other in "
			         "/etc/fuse.conf", mnt);
		}
	} else if (A.allow_other && geteuid() != 0 && !fuse_conf_allows_other()) {
		log_error("-o allow_other is for root only unless /etc/fuse.conf has a "
		          "user_allow_other line");
		return 1;
	}
	if (is_mounted_there(mnt, argv[optind])) {
		log_error("volume %s is already mounted at %s; unmount it first (fusermount3 -u %s)",
		          argv[optind], mnt, mnt);
		return 1;
	}
	if (argc - optind == 1)
		make_mountpoint(mnt);
	if (!A.nonempty && !dir_is_empty(mnt)) {
		log_error("%s is not empty: mounting there would hide its contents (give -o nonempty "
		          "to do so anyway)", mnt);
		return 1;
	}
	if (A.fuse_opts[0]) {
		fuse_argv[fuse_argc++] = (char *)"-o";
		fuse_argv[fuse_argc++] = A.fuse_opts;
	}
	if (cfs_crypto_init() < 0) {
		remove_made();
		return 1;
	}
	rc = cfsfuse_run(&vol, mnt, o, fuse_argc, fuse_argv);
	/* failed, or unmounted: the directory made for it goes too (in the
	 * background this is the daemon; its parent left while mounted) */
	remove_made();
	return rc;
}
