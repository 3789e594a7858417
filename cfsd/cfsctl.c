/*
 * cfsctl — operate a cfsd.
 *
 *   cfsctl [--data DIR | --socket PATH] status [--json]
 *   cfsctl [--data DIR | --socket PATH] peers
 *   cfsctl [--data DIR | --socket PATH] keys
 *   cfsctl ping HOST:PORT [--count N] [--timeout MS]
 *   cfsctl [--data DIR | --socket PATH] lookup [--mode M] [--nsucc N] [--verify]
 *          [--random N] [KEY... | -]
 *   cfsctl [--data DIR | --socket PATH] put [--root] [--lease-days D]
 *          [--random N --size S [--seed X]] [FILE... | -]
 *   cfsctl [--data DIR | --socket PATH] get [--check] [--code M/N] [--output FILE] KEY... | -
 *   cfsctl [--data DIR | --socket PATH] pin [--versions N] VOLUME | unpin VOLUME
 *   cfsctl [--data DIR | --socket PATH] pins [--json]
 *   cfsctl [--data DIR | --socket PATH] history [--limit N|all] [--json] VOLUME
 *   cfsctl update VOLUME | MOUNTPOINT
 *   cfsctl [--data DIR | --socket PATH] leave [--drain]
 *   cfsctl [--data DIR | --socket PATH] deny [--remove] VOLUME|KEY | deny --list
 *
 * status asks the local daemon over its control socket; ping sends UDP
 * PINGs from a throw-away endpoint, as any peer on the ring would.
 *
 * The commands are a table: main() reads what comes before the command
 * (--data, --socket, --help) and hands the rest to the command, which
 * parses its own options (cfsctl_getopt).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cfsd/cfsctl.h"
#include "cfsd/deny.h"
#include "cfsd/pin.h"
#include "client/client.h"
#include "dhash/dhash.h"

#ifndef CFS_VERSION
#define CFS_VERSION "0.1.0" /* as cfsd's */
#endif

static const char usage_text[] =
	"usage: cfsctl [--data DIR | --socket PATH] status [--json]\n"
	"       cfsctl [--data DIR | --socket PATH] health\n"
	"       cfsctl [--data DIR | --socket PATH] peers\n"
	"       cfsctl [--data DIR | --socket PATH] keys\n"
	"       cfsctl ping HOST:PORT [--count N] [--timeout MS]\n"
	"       cfsctl [--data DIR | --socket PATH] lookup [--mode M] [--nsucc N] [--verify]\n"
	"              [--random N] [KEY... | -]\n"
	"       cfsctl [--data DIR | --socket PATH] put [--root] [--lease-days D]\n"
	"              [--random N --size S [--seed X]] [FILE... | -]\n"
	"       cfsctl [--data DIR | --socket PATH] get [--check] [--code M/N] [--output FILE]\n"
	"              KEY... | -\n"
	"       cfsctl [--data DIR | --socket PATH] refresh [--lease-days D] KEY... | -\n"
	"       cfsctl [--data DIR | --socket PATH] pin [--versions N] VOLUME | unpin VOLUME\n"
	"       cfsctl [--data DIR | --socket PATH] pins [--json]\n"
	"       cfsctl [--data DIR | --socket PATH] history [--limit N|all] [--json] VOLUME\n"
	"       cfsctl update VOLUME | MOUNTPOINT\n"
	"       cfsctl [--data DIR | --socket PATH] leave [--drain]\n"
	"       cfsctl [--data DIR | --socket PATH] deny [--remove] VOLUME|KEY | deny --list\n"
	"\n"
	"  status     report the local cfsd in human units: a three-line summary\n"
	"             (health, ring size and successor lists, store use and\n"
	"             replication debt), address, uptime, traffic\n"
	"             rates (bytes and RPCs a second, in and out, over the last 10 s),\n"
	"             the ring neighbours with their round-trip times, RPC counts,\n"
	"             timeouts, latency percentiles, the store, the ring tables; then\n"
	"             each cfs mount here as it reports itself (version, root age,\n"
	"             online or OFFLINE);\n"
	"             --json: the same as one object, in raw numbers\n"
	"  health     one line, and exit 0 only when the local cfsd is healthy: every\n"
	"             virtual server joined with a full successor list, the store\n"
	"             below its capacity, its disk not full; else exit 1 and why\n"
	"  peers      the ring neighbours of the local cfsd: virtual server, role\n"
	"             (pred, succ N), ID, address, last and smoothed round trip, when\n"
	"             it last answered\n"
	"  keys       list every block key the local cfsd stores, one per line\n"
	"  ping       send UDP pings to a cfsd (any host) and print round-trip times\n"
	"  lookup     find the successors of keys (64 hex digits each; '-' reads them\n"
	"             from standard input) through the local cfsd; prints per key:\n"
	"             KEY SUCCESSOR-ID SUCCESSOR-ADDRESS RPCS TIMEOUTS\n"
	"  put        store each FILE as one block (at most 60 KiB) on the ring through\n"
	"             the local cfsd; prints KEY FILE per block, FILE error MESSAGE if\n"
	"             refused\n"
	"  get        fetch a block, verified, to standard output; with --check, one\n"
	"             line per key: KEY ok LENGTH or KEY error MESSAGE\n"
	"  refresh    extend the lease of each block on its replicas (to --lease-days\n"
	"             from now, default 30); one line per key: KEY ok or KEY missing\n"
	"  pin        make the local cfsd keep a volume alive, this version and later\n"
	"             ones: every round (cfsd --pin-ms) it renews the lease of every\n"
	"             block the root reaches and puts back, from its own copy, blocks\n"
	"             no replica holds; kept across restarts (DIR/pins)\n"
	"             (--versions N: also the N-1 versions before the newest, each\n"
	"             one's signed root and blocks; pinning again changes N)\n"
	"  unpin      stop keeping a volume\n"
	"  pins       list the pins: volume, root sequence seen, blocks, the last\n"
	"             round's time and counts (renewed, re-stored, missing, errors)\n"
	"             and when the next one starts\n"
	"  history    the versions of a volume the ring still holds, newest first:\n"
	"             sequence, when published, valid until, size and files (read\n"
	"             from its directories); --limit N (default 20, or all)\n"
	"  update     make every mount of VOLUME here (or the one at MOUNTPOINT) check\n"
	"             for a newer version now, not at its next --update round; one\n"
	"             line per mount: its version, and the one before if it moved\n"
	"  leave      make the local cfsd leave the ring and exit, as SIGTERM does;\n"
	"             --drain first pushes every block it holds to the servers that\n"
	"             hold it once it is gone, so the ring needs no repair after it\n"
	"             (exit 3 when some copies were not handed over: it leaves anyway)\n"
	"  deny       make the local cfsd refuse to store or serve a block (KEY, 64\n"
	"             hex digits) or a whole volume (VOLUME: its root and every block\n"
	"             its newest root reaches, found by walking it); its copies here\n"
	"             are deleted; kept across restarts (DIR/denylist); this daemon\n"
	"             only, the rest of the ring still serves the content\n"
	"\n"
	"  -m, --mode M         iterative or recursive, optionally followed by\n"
	"                       ,greedy ,cost or ,nonlinear (default iterative,greedy),\n"
	"                       ,pN (iterative: N requests in flight, 1-8) and ,pred\n"
	"                       (route to the key's predecessor: no early answer)\n"
	"      --nsucc N        successors wanted (default 1)\n"
	"      --verify         ping the answer until a live successor replies\n"
	"      --random N       also look up (or put) N random keys (blocks)\n"
	"      --root           put: the files are signed roots (cfs-publish output)\n"
	"      --lease-days D   put, refresh: lease of the blocks, in days (0.5: twelve\n"
	"                       hours; put's default: the daemon's)\n"
	"      --size S         put: bytes per random block (default 8192)\n"
	"      --seed X         put: seed for the random blocks\n"
	"      --check          get: report each key instead of printing bytes\n"
	"      --code M/N       get: the keys are coded blocks (rs:M/N): fetch M of their\n"
	"                       N fragments and decode (default: whole blocks)\n"
	"      --output FILE    get: write the bytes to FILE\n"
	"      --drain          leave: hand every held block on first\n"
	"      --versions N     pin: keep the newest N versions, 1..1000 (default 1)\n"
	"  -n, --limit N        history: list at most N versions (default 20; all: no\n"
	"                       bound)\n"
	"      --remove         deny: lift the denial of VOLUME or KEY (its blocks come\n"
	"                       back only by the ring's replication)\n"
	"      --list           deny: print the denied volumes and keys\n"
	"\n"
	"  -d, --data DIR       the daemon's data directory (default: your own cfsd's,\n"
	"                       else the system daemon's, /var/lib/cfs)\n"
	"  -s, --socket PATH    the daemon's control socket (default DIR/cfsd.sock)\n"
	"  -j, --json           status, pins, history: one JSON object, for scripts\n"
	"      --count N        pings to send (default 3)\n"
	"      --timeout MS     per-ping timeout (default 1000)\n"
	"  -h, --help           show this help\n"
	"  -V, --version        show the version\n";

static const char short_usage[] =
	"usage: cfsctl [--data DIR | --socket PATH] status [--json] | ping HOST:PORT | "
	"lookup [--mode M] [KEY... | -] | put FILE... | get KEY | pin VOLUME | pins | "
	"deny [--remove] VOLUME|KEY | deny --list (cfsctl --help for more)";

void cfsctl_usage(const char *fmt, ...)
{
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	cfs_usage_error(short_usage, "%s", why);
}

void cfsctl_help(void)
{
	fputs(usage_text, stdout);
}

#define bad_usage(...) cfsctl_usage(__VA_ARGS__)

/* ------------------------------------------------------------ options */

int cfsctl_getopt(struct cfsctl *g, int argc, char **argv, const char *shortopts,
                  const struct option *opts, cfsctl_opt_fn fn, void *arg)
{
	static const struct option common[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
	};
	struct option all[32];
	char so[64];
	size_t n = 0;
	int c;

	for (; opts && opts[n].name; n++)
		all[n] = opts[n];
	for (size_t i = 0; i < CFS_ARRAY_SIZE(common); i++)
		all[n++] = common[i];
	all[n] = (struct option){ 0 };
	/* A leading '+' (stop at the first operand) must open the string. */
	bool stop = shortopts[0] == '+';
	snprintf(so, sizeof(so), "%s:d:s:hV%s", stop ? "+" : "", shortopts + stop);
	opterr = 0;
	optind = 0; /* GNU: start afresh on this argv */
	while ((c = getopt_long(argc, argv, so, all, NULL)) != -1) {
		switch (c) {
		case 'd':
			snprintf(g->data_dir, sizeof(g->data_dir), "%s", optarg);
			break;
		case 's':
			snprintf(g->sock, sizeof(g->sock), "%s", optarg);
			break;
		case 'h':
			cfsctl_help();
			exit(0);
		case 'V':
			printf("cfsctl %s\n", CFS_VERSION);
			exit(0);
		case ':':
			bad_usage("option '%s' needs a value", argv[optind - 1]);
		case '?':
			bad_usage("unknown option '%s'", argv[optind - 1]);
		default:
			fn(arg, c, optarg);
		}
	}
	return optind;
}

const char *cfsctl_sock(struct cfsctl *g)
{
	/* No --socket: --data's, else the one every tool finds (client/target.c). */
	if (!g->sock[0]) {
		if (!g->data_dir[0] && client_default_socket(g->sock, sizeof(g->sock)) < 0)
			bad_usage("the default socket path is too long");
		if (g->data_dir[0] && cfsd_socket_path(g->data_dir, g->sock, sizeof(g->sock)) < 0)
			bad_usage("--data path is too long");
	}
	return g->sock;
}

unsigned cfsctl_uint(const char *opt, const char *s, unsigned max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v == 0 || v > max)
		bad_usage("%s wants a number from 1 to %u, not '%s'", opt, max, s);
	return (unsigned)v;
}

/* --json, for status and pins. */
static const struct option json_opts[] = { { "json", no_argument, NULL, 'j' }, { 0 } };

static void json_opt(void *arg, int c, const char *optarg)
{
	*(uint32_t *)arg = CFS_STATUS_F_JSON;
}

/* Parse a command that takes only --json (or nothing) and exactly nargs
 * operands; returns the index of the first. */
static int simple_args(struct cfsctl *g, int argc, char **argv, bool json, int nargs,
                       uint32_t *flags)
{
	int i = cfsctl_getopt(g, argc, argv, json ? "j" : "", json ? json_opts : NULL, json_opt, flags);

	if (nargs == 0 && i != argc)
		bad_usage("%s takes no arguments", argv[0]);
	if (nargs == 1 && i + 1 != argc)
		bad_usage("%s takes one VOLUME", argv[0]);
	return i;
}

/* ------------------------------------------------------------ commands */

static void print_status(void *arg, int status, const struct cfs_msg *reply)
{
	if (status == 0)
		fwrite(reply->data.p, 1, reply->data.len, stdout);
}

/* One user.cfs.* attribute of a mount's root as text ("" when absent). */
static void mount_attr(const char *mnt, const char *name, char *buf, size_t n)
{
	ssize_t len = getxattr(mnt, name, buf, n - 1);

	buf[len > 0 ? (size_t)len : 0] = 0;
}

/* An age in seconds, in the largest unit that keeps it readable. */
static void human_age(char *buf, size_t n, double s)
{
	if (s < 120)
		snprintf(buf, n, "%.0f s", s);
	else if (s < 7200)
		snprintf(buf, n, "%.0f min", s / 60);
	else if (s < 172800)
		snprintf(buf, n, "%.0f h", s / 3600);
	else
		snprintf(buf, n, "%.0f days", s / 86400);
}

/* cfsctl status's last lines: each cfs mount in this mount namespace, as
 * it reports itself (the daemon does not know the mounts, and may be the
 * very thing that is down). */
static bool status_mount(void *arg, const char *mnt, const char *src)
{
	char seq[32], age[32], off[8], ages[32] = "?";
	unsigned *n = arg;

	mount_attr(mnt, "user.cfs.seq", seq, sizeof(seq));
	mount_attr(mnt, "user.cfs.root_age", age, sizeof(age));
	mount_attr(mnt, "user.cfs.offline", off, sizeof(off));
	if (age[0])
		human_age(ages, sizeof(ages), strtod(age, NULL));
	if ((*n)++ == 0)
		printf("\nmounts here, as each reports itself:\n");
	printf("  %s (%s): version %s, signed %s ago, %s\n", mnt, src, seq[0] ? seq : "?", ages,
	       !strcmp(off, "1") ? "OFFLINE: its last root check reached nobody; serving its caches"
	       : off[0] ? "online" : "state unknown (an older cfs-mount)");
	return true;
}

static int cmd_status(struct cfsctl *g, int argc, char **argv)
{
	uint32_t flags = 0;
	struct cfs_msg *req;
	int r;

	simple_args(g, argc, argv, true, 0, &flags);
	const char *sock = cfsctl_sock(g);
	req = xmalloc(sizeof(*req));

	cfs_msg_init(req, CFS_MSG_CTL_STATUS);
	req->flags = flags;
	r = cfsd_ctl_call(sock, req, 5000, print_status, NULL);
	free(req);
	cfsd_ctl_report(sock, "status", r);
	if (!(flags & CFS_STATUS_F_JSON)) {
		unsigned n = 0;
		fflush(stdout);
		(void)cfs_mounts_each(NULL, status_mount, &n);
	}
	return r < 0 ? 1 : 0;
}

static void print_health(void *arg, int status, const struct cfs_msg *reply)
{
	int *healthy = arg;

	if (status < 0)
		return;
	if (reply->data.len >= 8 && memcmp(reply->data.p, "healthy:", 8) == 0)
		*healthy = 1;
	else if (reply->data.len < 10 || memcmp(reply->data.p, "unhealthy:", 10) != 0) {
		fprintf(stderr, "cfsctl: this cfsd does not report its health (an older version?)\n");
		return;
	}
	fwrite(reply->data.p, 1, reply->data.len, stdout);
}

static int cmd_health(struct cfsctl *g, int argc, char **argv)
{
	int healthy = 0, r;
	struct cfs_msg *req;

	simple_args(g, argc, argv, false, 0, NULL);
	const char *sock = cfsctl_sock(g);
	req = xmalloc(sizeof(*req));
	cfs_msg_init(req, CFS_MSG_CTL_STATUS);
	req->flags = CFS_STATUS_F_HEALTH;
	r = cfsd_ctl_call(sock, req, 5000, print_health, &healthy);
	free(req);
	cfsd_ctl_report(sock, "health", r);
	return r == 0 && healthy ? 0 : 1;
}

/* The neighbours table of the text report: from its heading line to the
 * first line that is not indented under it (cfsd/metrics.c writes it). */
static void print_peers(void *arg, int status, const struct cfs_msg *reply)
{
	const char *p = reply ? (const char *)reply->data.p : NULL, *end = p ? p + reply->data.len : NULL;
	bool in = false;

	if (status < 0)
		return;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		if (!in && len >= 10 && !strncmp(p, "neighbours", 10))
			in = true;
		else if (in && p[0] != ' ')
			break;
		if (in)
			fwrite(p, 1, len, stdout);
		p += len;
	}
	*(bool *)arg = in;
}

static int cmd_peers(struct cfsctl *g, int argc, char **argv)
{
	struct cfs_msg *req;
	bool found = false;
	int r;

	simple_args(g, argc, argv, false, 0, NULL);
	const char *sock = cfsctl_sock(g);
	req = xmalloc(sizeof(*req));
	cfs_msg_init(req, CFS_MSG_CTL_STATUS);
	r = cfsd_ctl_call(sock, req, 5000, print_peers, &found);
	free(req);
	cfsd_ctl_report(sock, "peers", r);
	if (r == 0 && !found) {
		fprintf(stderr, "cfsctl: this cfsd reports no neighbours table (an older version?)\n");
		return 1;
	}
	return r < 0 ? 1 : 0;
}

struct key_page {
	struct cfs_id last;
	bool more, any;
};

static void print_keys(void *arg, int status, const struct cfs_msg *reply)
{
	struct key_page *p = arg;
	char hex[65];

	p->more = false;
	if (status < 0)
		return;
	for (uint32_t i = 0; i < reply->n_keys; i++)
		printf("%s\n", cfs_id_hex(&reply->keys[i], hex));
	if (reply->n_keys) {
		p->last = reply->keys[reply->n_keys - 1];
		p->any = true;
		p->more = (reply->flags & CFS_KEYS_F_MORE) != 0;
	}
}

static void print_pin(void *arg, int status, const struct cfs_msg *reply)
{
	if (status == 0 && reply->data.len)
		fwrite(reply->data.p, 1, reply->data.len, stdout);
}

static void versions_opt(void *arg, int c, const char *optarg)
{
	*(uint32_t *)arg = cfsctl_uint("--versions", optarg, CFSD_PIN_VERSIONS_MAX);
}

/* pin [--versions N] / unpin VOLUME, or pins: one request each. */
static int cmd_pin(struct cfsctl *g, int argc, char **argv)
{
	static const struct option pin_opts[] = { { "versions", required_argument, NULL, 'n' },
		                                  { 0 } };
	const char *cmd = argv[0], *volume = NULL, *why;
	bool is_pins = !strcmp(cmd, "pins"), is_pin = !strcmp(cmd, "pin");
	uint32_t flags = 0, versions = 0;
	struct cfs_msg *req;
	int r, i;

	if (is_pin) {
		i = cfsctl_getopt(g, argc, argv, "", pin_opts, versions_opt, &versions);
		if (i + 1 != argc)
			bad_usage("pin takes one VOLUME");
	} else {
		i = simple_args(g, argc, argv, is_pins, is_pins ? 0 : 1, &flags);
	}
	if (!is_pins)
		volume = argv[i];
	const char *sock = cfsctl_sock(g);
	req = xmalloc(sizeof(*req));

	/* One version is the pin every daemon understands; more is a newer
	 * request, sent only when asked for. */
	cfs_msg_init(req, is_pins ? CFS_MSG_CTL_PINS
	                  : is_pin ? (versions > 1 ? CFS_MSG_CTL_PIN_VERSIONS : CFS_MSG_CTL_PIN)
	                           : CFS_MSG_CTL_UNPIN);
	req->flags = flags;
	req->count = versions;
	if (volume && cfs_name_decode(req->key.b, volume, &why) < 0)
		bad_usage("%s wants a volume name (52 base32 characters), not '%s': %s", cmd, volume, why);
	r = cfsd_ctl_call(sock, req, 5000, print_pin, NULL);
	free(req);
	if (r == -EEXIST) {
		printf("%s is pinned already\n", volume);
		return 0;
	}
	/* -ENOENT is also "no socket": the daemon said it only if one is there. */
	if (r == -ENOENT && volume && access(sock, F_OK) == 0) {
		fprintf(stderr, "cfsctl: %s is not pinned\n", volume);
		return 3;
	}
	cfsd_ctl_report(sock, cmd, r);
	if (r == 0 && volume && versions > 1)
		printf("%s pinned, with its newest %u versions\n", volume, versions);
	else if (r == 0 && volume)
		printf("%s %s\n", volume, is_pin ? "pinned" : "unpinned");
	return r < 0 ? 1 : 0;
}

/* deny VOLUME|KEY, deny --remove VOLUME|KEY, deny --list: one request. */
struct deny_opts {
	bool remove, list;
};

static void deny_opt(void *arg, int c, const char *optarg)
{
	struct deny_opts *o = arg;

	if (c == 'r')
		o->remove = true;
	else
		o->list = true;
}

struct deny_answer {
	uint32_t flags;
};

static void print_deny(void *arg, int status, const struct cfs_msg *reply)
{
	struct deny_answer *a = arg;

	if (status < 0)
		return;
	a->flags = reply->flags;
	/* a walk that stopped short is an error: its one line to stderr */
	fwrite(reply->data.p, 1, reply->data.len, reply->flags & CFS_DENY_R_PARTIAL ? stderr : stdout);
}

static int cmd_deny(struct cfsctl *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "remove", no_argument, NULL, 'r' },
		{ "list", no_argument, NULL, 'l' },
		{ 0 },
	};
	struct deny_opts o = { 0 };
	struct deny_answer a = { 0 };
	const char *what = NULL, *why;
	struct cfs_msg *req;
	int r, i = cfsctl_getopt(g, argc, argv, "", opts, deny_opt, &o);

	if (o.list && (o.remove || i != argc))
		bad_usage("deny --list takes no VOLUME or KEY");
	if (!o.list && i + 1 != argc)
		bad_usage("deny takes one VOLUME or KEY");
	req = xmalloc(sizeof(*req));
	cfs_msg_init(req, CFS_MSG_CTL_DENY);
	if (o.list) {
		req->flags = CFS_DENY_F_LIST;
	} else {
		what = argv[i];
		if (strlen(what) == 64) {
			if (cfs_id_from_hex(&req->key, what) < 0)
				bad_usage("deny wants a KEY of 64 hex digits, not '%s'", what);
		} else if (cfs_name_decode(req->key.b, what, &why) < 0) {
			bad_usage("deny wants a VOLUME (52 base32 characters) or a KEY (64 hex digits), "
			          "not '%s': %s", what, why);
		} else {
			req->flags = CFS_DENY_F_VOLUME;
		}
		if (o.remove)
			req->flags |= CFS_DENY_F_REMOVE;
	}
	const char *sock = cfsctl_sock(g);
	/* a volume's walk reads its blocks' tree from the ring: no deadline
	 * of our own beyond the daemon's per-get ones */
	r = cfsd_ctl_call(sock, req, o.list || o.remove ? 5000 : UINT32_MAX, print_deny, &a);
	free(req);
	/* -ENOENT is also "no socket": the daemon said it only if one is there. */
	if (r == -ENOENT && what && access(sock, F_OK) == 0) {
		fprintf(stderr, "cfsctl: %s is not denied\n", what);
		return 3;
	}
	if (r == -ENOSPC) {
		fprintf(stderr, "cfsctl: the denylist is full (at most %u entries): nothing was denied; "
		        "lift some with cfsctl deny --remove\n", CFSD_DENY_MAX);
		return 1;
	}
	if (r == -EIO) {
		fprintf(stderr, "cfsctl: the daemon cannot write its denylist (see its log): nothing "
		        "changed\n");
		return 1;
	}
	cfsd_ctl_report(sock, "deny", r);
	if (r == 0 && (a.flags & CFS_DENY_R_PARTIAL))
		return 1;
	return r < 0 ? 1 : 0;
}

/* Every stored key, a page (CTL_KEYS) at a time. */
static int cmd_keys(struct cfsctl *g, int argc, char **argv)
{
	struct key_page p = { 0 };
	struct cfs_msg *req;
	int r;

	simple_args(g, argc, argv, false, 0, NULL);
	const char *sock = cfsctl_sock(g);
	req = xmalloc(sizeof(*req));

	do {
		cfs_msg_init(req, CFS_MSG_CTL_KEYS);
		if (p.any) {
			req->flags = CFS_KEYS_F_AFTER;
			req->key = p.last;
		}
		r = cfsd_ctl_call(sock, req, 5000, print_keys, &p);
	} while (r == 0 && p.more);
	free(req);
	cfsd_ctl_report(sock, "keys", r);
	return r < 0 ? 1 : 0;
}

/* leave [--drain]: the daemon answers, then leaves the ring and exits. */
static const struct option leave_opts[] = { { "drain", no_argument, NULL, 'D' }, { 0 } };

static void print_leave(void *arg, int status, const struct cfs_msg *reply)
{
	if (status < 0)
		return;
	fwrite(reply->data.p, 1, reply->data.len, stdout);
	*(uint32_t *)arg = reply->flags;
}

static void leave_opt(void *arg, int c, const char *optarg)
{
	*(uint32_t *)arg |= CFS_CTL_LEAVE_F_DRAIN;
}

static int cmd_leave(struct cfsctl *g, int argc, char **argv)
{
	uint32_t flags = 0;
	int i = cfsctl_getopt(g, argc, argv, "", leave_opts, leave_opt, &flags);

	if (i != argc)
		bad_usage("leave takes no arguments");
	const char *sock = cfsctl_sock(g);
	struct cfs_msg *req = xmalloc(sizeof(*req));
	cfs_msg_init(req, CFS_MSG_CTL_LEAVE);
	req->flags = flags;
	/* a drain compares and pushes everything the daemon holds: give it an hour */
	uint32_t got = 0;
	int r = cfsd_ctl_call(sock, req, 3600u * 1000u, print_leave, &got);
	free(req);
	cfsd_ctl_report(sock, "leave", r);
	if (r < 0)
		return 1;
	if (got & CFS_CTL_LEAVE_F_INCOMPLETE) {
		fprintf(stderr, "cfsctl: the drain did not hand every copy over: the ring repairs the rest\n");
		return 3;
	}
	return 0;
}

/* update: each mount asked through CFS_IOC_UPDATE on its root directory;
 * the mount answers once its check for a newer root has ended. */
struct update_run {
	int asked, failed;
};

static bool update_one(void *arg, const char *mnt, const char *src)
{
	struct update_run *u = arg;
	struct cfs_update_reply r = { 0 };
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	u->asked++;
	if (fd < 0 || ioctl(fd, CFS_IOC_UPDATE, &r) < 0) {
		printf("%s: %s\n", mnt,
		       errno == ENOTTY ? "not a cfs mount (or one too old to be asked)" : strerror(errno));
		u->failed++;
	} else if (r.status < 0) {
		printf("%s: version %llu; the check failed: %s\n", mnt, (unsigned long long)r.seq_now,
		       strerror(-r.status));
		u->failed++;
	} else if (r.seq_now != r.seq_before) {
		printf("%s: version %llu (was %llu)\n", mnt, (unsigned long long)r.seq_now,
		       (unsigned long long)r.seq_before);
	} else {
		printf("%s: version %llu, the newest\n", mnt, (unsigned long long)r.seq_now);
	}
	if (fd >= 0)
		close(fd);
	return true;
}

static int cmd_update(struct cfsctl *g, int argc, char **argv)
{
	struct update_run u = { 0 };
	uint8_t raw[32];
	const char *why;
	struct stat st;
	int i = simple_args(g, argc, argv, false, 1, NULL);
	const char *what = argv[i];

	if (stat(what, &st) == 0 && S_ISDIR(st.st_mode)) {
		update_one(&u, what, NULL);
	} else if (cfs_name_decode(raw, what, &why) < 0) {
		bad_usage("update wants a VOLUME or the directory it is mounted on; '%s' is neither (%s)",
		          what, why);
	} else {
		int n = cfs_mounts_each(what, update_one, &u);
		if (n < 0) {
			fprintf(stderr, "cfsctl: cannot read the mount table: %s\n", strerror(-n));
			return 1;
		}
		if (n == 0) {
			fprintf(stderr, "cfsctl: %s is not mounted here\n", what);
			return 1;
		}
	}
	return u.failed ? 1 : 0;
}

static const struct {
	const char *name;
	int (*main)(struct cfsctl *g, int argc, char **argv);
} commands[] = {
	{ "status", cmd_status },
	{ "health", cmd_health },
	{ "peers", cmd_peers },
	{ "keys", cmd_keys },
	{ "ping", cfsctl_ping_main },
	{ "lookup", cfsctl_lookup_main },
	{ "put", cfsctl_put_main },
	{ "get", cfsctl_get_main },
	{ "refresh", cfsctl_refresh_main },
	{ "history", cfsctl_history_main },
	{ "pin", cmd_pin },
	{ "unpin", cmd_pin },
	{ "pins", cmd_pin },
	{ "update", cmd_update },
	{ "leave", cmd_leave },
	{ "deny", cmd_deny },
};

int main(int argc, char **argv)
{
	struct cfsctl g = { 0 };
	int i;

	cfs_log_init(argv[0], CFS_LOG_WARN);
	/* What comes before the command: "+" stops at the command's name. */
	i = cfsctl_getopt(&g, argc, argv, "+", NULL, NULL, NULL);
	if (i >= argc)
		bad_usage("no command given");
	for (size_t k = 0; k < CFS_ARRAY_SIZE(commands); k++) {
		if (strcmp(argv[i], commands[k].name) != 0)
			continue;
		if (cfs_crypto_init() < 0)
			return 1;
		return commands[k].main(&g, argc - i, argv + i);
	}
	bad_usage("unknown command '%s'", argv[i]);
}
