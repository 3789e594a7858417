/*
 * cfsctl — operate a cfsd.
 *
 *   cfsctl [--data DIR | --socket PATH] status [--json]
 *   cfsctl [--data DIR | --socket PATH] keys
 *   cfsctl ping HOST:PORT [--count N] [--timeout MS]
 *   cfsctl [--data DIR | --socket PATH] lookup [--mode M] [--nsucc N] [--verify]
 *          [--random N] [KEY... | -]
 *   cfsctl [--data DIR | --socket PATH] put [--root] [--lease-days D]
 *          [--random N --size S [--seed X]] [FILE... | -]
 *   cfsctl [--data DIR | --socket PATH] get [--check] [--output FILE] KEY... | -
 *   cfsctl [--data DIR | --socket PATH] pin VOLUME | unpin VOLUME | pins [--json]
 *
 * status asks the local daemon over its control socket; ping sends UDP
 * PINGs from a throw-away endpoint, as any peer on the ring would.
 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cfsd/cfsd.h"
#include "chord/chord.h"

static const char usage_text[] =
	"usage: cfsctl [--data DIR | --socket PATH] status [--json]\n"
	"       cfsctl [--data DIR | --socket PATH] keys\n"
	"       cfsctl ping HOST:PORT [--count N] [--timeout MS]\n"
	"       cfsctl [--data DIR | --socket PATH] lookup [--mode M] [--nsucc N] [--verify]\n"
	"              [--random N] [KEY... | -]\n"
	"       cfsctl [--data DIR | --socket PATH] put [--root] [--lease-days D]\n"
	"              [--random N --size S [--seed X]] [FILE... | -]\n"
	"       cfsctl [--data DIR | --socket PATH] get [--check] [--output FILE] KEY... | -\n"
	"       cfsctl [--data DIR | --socket PATH] refresh [--lease-days D] KEY... | -\n"
	"       cfsctl [--data DIR | --socket PATH] pin VOLUME | unpin VOLUME | pins [--json]\n"
	"\n"
	"  status     report the local cfsd: address, virtual servers, predecessor,\n"
	"             successors, fingers (with measured latencies), ring-size estimate,\n"
	"             RPC counts, timeouts, latency percentiles\n"
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
	"  unpin      stop keeping a volume\n"
	"  pins       list the pins: volume, root sequence seen, blocks, the last\n"
	"             round's time and counts (renewed, re-stored, missing, errors)\n"
	"             and when the next one starts\n"
	"\n"
	"  -m, --mode M         iterative or recursive, optionally followed by\n"
	"                       ,greedy ,cost or ,nonlinear (default iterative,greedy),\n"
	"                       ,pN (iterative: N requests in flight, 1-8) and ,pred\n"
	"                       (route to the key's predecessor: no early answer)\n"
	"  -n, --nsucc N        successors wanted (default 1)\n"
	"  -v, --verify         ping the answer until a live successor replies\n"
	"  -r, --random N       also look up (or put) N random keys (blocks)\n"
	"      --root           put: the files are signed roots (cfs-publish output)\n"
	"      --lease-days D   put, refresh: lease of the blocks, in days (0.5: twelve\n"
	"                       hours; put's default: the daemon's)\n"
	"      --size S         put: bytes per random block (default 8192)\n"
	"      --seed X         put: seed for the random blocks\n"
	"      --check          get: report each key instead of printing bytes\n"
	"  -o, --output FILE    get: write the bytes to FILE\n"
	"\n"
	"  -d, --data DIR       the daemon's data directory (default as for cfsd)\n"
	"  -s, --socket PATH    the daemon's control socket (default DIR/cfsd.sock)\n"
	"  -j, --json           status, pins: one JSON object, for scripts\n"
	"  -c, --count N        pings to send (default 3)\n"
	"  -t, --timeout MS     per-ping timeout (default 1000)\n"
	"  -h, --help           show this help\n";

#define bad_usage(...) cfs_usage_error("usage: cfsctl [--data DIR | --socket PATH] status [--json] | ping HOST:PORT | lookup [--mode M] [KEY... | -] | put FILE... | get KEY | pin VOLUME | pins (cfsctl --help for more)", __VA_ARGS__)

static void print_status(void *arg, int status, const struct cfs_msg *reply)
{
	if (status == 0)
		fwrite(reply->data.p, 1, reply->data.len, stdout);
}

static int cmd_status(const char *sock, uint32_t flags)
{
	struct cfs_msg *req = xmalloc(sizeof(*req));
	int r;

	cfs_msg_init(req, CFS_MSG_CTL_STATUS);
	req->flags = flags;
	r = cfsd_ctl_call(sock, req, 5000, print_status, NULL);
	free(req);
	cfsd_ctl_report(sock, "status", r);
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

/* pin / unpin VOLUME, or pins: one request each. */
static int cmd_pin(const char *sock, const char *cmd, const char *volume, uint32_t flags)
{
	struct cfs_msg *req = xmalloc(sizeof(*req));
	const char *why;
	int r;

	cfs_msg_init(req, !strcmp(cmd, "pins") ? CFS_MSG_CTL_PINS
	                  : !strcmp(cmd, "pin") ? CFS_MSG_CTL_PIN : CFS_MSG_CTL_UNPIN);
	req->flags = flags;
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
	if (r == 0 && volume)
		printf("%s %s\n", volume, !strcmp(cmd, "pin") ? "pinned" : "unpinned");
	return r < 0 ? 1 : 0;
}

/* Every stored key, a page (CTL_KEYS) at a time. */
static int cmd_keys(const char *sock)
{
	struct cfs_msg *req = xmalloc(sizeof(*req));
	struct key_page p = { 0 };
	int r;

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

struct pinger {
	cfs_transport_t *tr;
	struct cfs_addr dst;
	unsigned left, sent, ok, timeout_ms;
	struct cfs_msg req;
};

static void send_ping(struct pinger *p);

static void on_pong(void *arg, int status, const struct cfs_msg *reply, const struct cfs_rpc_result *res)
{
	struct pinger *p = arg;
	char a[CFS_ADDR_STRLEN];

	cfs_addr_str(&p->dst, a);
	if (status == 0) {
		p->ok++;
		printf("reply from %s: seq=%u time=%.3f ms\n", a, p->sent, (double)res->rtt_us / 1000.0);
	} else if (status == -ETIMEDOUT) {
		printf("no reply from %s: seq=%u timed out after %u ms\n", a, p->sent, p->timeout_ms);
	} else if (status != -ECANCELED) {
		printf("error from %s: seq=%u %s\n", a, p->sent, strerror(-status));
	}
	if (p->left > 0)
		send_ping(p);
	else
		cfs_transport_close(p->tr);
}

static void send_ping(struct pinger *p)
{
	struct cfs_call_opts o = { .timeout_ms = p->timeout_ms };
	int r;

	cfs_msg_init(&p->req, CFS_MSG_PING);
	p->left--;
	p->sent++;
	if ((r = cfs_transport_call(p->tr, &p->dst, &p->req, &o, on_pong, p)) < 0) {
		fprintf(stderr, "cfsctl: cannot send: %s\n", strerror(-r));
		cfs_transport_close(p->tr);
	}
}

static int cmd_ping(const char *target, unsigned count, unsigned timeout_ms)
{
	struct cfs_transport_config c;
	struct pinger *p = xcalloc(1, sizeof(*p));
	uv_loop_t *loop = uv_default_loop();
	int r;

	if (cfs_addr_parse(&p->dst, target) < 0)
		bad_usage("cannot use '%s' as HOST:PORT", target);
	cfs_transport_config_default(&c);
	c.host = p->dst.sa.sa_family == AF_INET6 ? "::" : "0.0.0.0";
	if ((r = cfs_transport_new(loop, &c, NULL, NULL, &p->tr)) < 0) {
		fprintf(stderr, "cfsctl: cannot open a UDP socket: %s\n", uv_strerror(r));
		return 1;
	}
	p->left = count;
	p->timeout_ms = timeout_ms;
	send_ping(p);
	uv_run(loop, UV_RUN_DEFAULT);
	printf("%u sent, %u replies\n", p->sent, p->ok);
	r = p->ok == p->sent ? 0 : 1;
	free(p);
	return r;
}

static unsigned parse_uint(const char *opt, const char *s, unsigned max)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || v == 0 || v > max)
		bad_usage("%s wants a number from 1 to %u, not '%s'", opt, max, s);
	return (unsigned)v;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "count", required_argument, NULL, 'c' },
		{ "timeout", required_argument, NULL, 't' },
		{ "mode", required_argument, NULL, 'm' },
		{ "nsucc", required_argument, NULL, 'n' },
		{ "verify", no_argument, NULL, 'v' },
		{ "random", required_argument, NULL, 'r' },
		{ "root", no_argument, NULL, 1001 },
		{ "lease-days", required_argument, NULL, 1002 },
		{ "size", required_argument, NULL, 1003 },
		{ "seed", required_argument, NULL, 1004 },
		{ "check", no_argument, NULL, 1005 },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char data_dir[512] = "", sock[600] = "";
	bool json = false;
	unsigned count = 3, timeout_ms = 1000, nsucc = 1, random_n = 0;
	uint32_t mode = 0, flags = 0;
	struct cfsctl_put_opts po = { .random_size = 8192 };
	bool check = false;
	const char *output = NULL;
	int c;

	cfs_log_init(argv[0], CFS_LOG_WARN);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":d:s:jc:t:m:n:vr:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			snprintf(data_dir, sizeof(data_dir), "%s", optarg);
			break;
		case 's':
			snprintf(sock, sizeof(sock), "%s", optarg);
			break;
		case 'j':
			json = true;
			break;
		case 'c':
			count = parse_uint("--count", optarg, 1000000);
			break;
		case 't':
			timeout_ms = parse_uint("--timeout", optarg, 600000);
			break;
		case 'm':
			if (chord_mode_parse(optarg, &mode) < 0)
				bad_usage("--mode wants iterative or recursive[,greedy|,cost|,nonlinear][,pN][,pred], not '%s'", optarg);
			break;
		case 'n':
			nsucc = parse_uint("--nsucc", optarg, CFS_MSG_MAX_NODES);
			break;
		case 'v':
			flags |= CFS_LOOKUP_F_VERIFY;
			break;
		case 'r':
			random_n = parse_uint("--random", optarg, 10000000);
			break;
		case 1001: po.root = true; break;
		case 1002: {
			uint64_t secs;
			if (cfs_parse_days(optarg, &secs) < 0)
				bad_usage("--lease-days wants a number of days above 0, at most 3650, not '%s'", optarg);
			po.lease_until = (uint64_t)time(NULL) + secs;
			break;
		}
		case 1003: po.random_size = parse_uint("--size", optarg, 60 * 1024); break;
		case 1004: po.seed = parse_uint("--seed", optarg, 4000000000u); break;
		case 1005: check = true; break;
		case 'o': output = optarg; break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case ':':
			bad_usage("option '%s' needs a value", argv[optind - 1]);
		default:
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		bad_usage("no command given");
	if (cfs_crypto_init() < 0)
		return 1;
	const char *cmd = argv[optind];
	bool is_block = strcmp(cmd, "put") == 0 || strcmp(cmd, "get") == 0 || strcmp(cmd, "refresh") == 0;
	bool is_info = strcmp(cmd, "status") == 0 || strcmp(cmd, "keys") == 0 || strcmp(cmd, "pins") == 0;
	bool is_pin = strcmp(cmd, "pin") == 0 || strcmp(cmd, "unpin") == 0;
	if (is_info || strcmp(cmd, "lookup") == 0 || is_block || is_pin) {
		if (is_info && optind + 1 != argc)
			bad_usage("%s takes no arguments", cmd);
		if (strcmp(cmd, "lookup") == 0 && optind + 1 == argc && !random_n)
			bad_usage("lookup wants keys, '-' or --random N");
		if (strcmp(cmd, "put") == 0 && optind + 1 == argc && !random_n)
			bad_usage("put wants files, '-' or --random N");
		if (strcmp(cmd, "get") == 0 && optind + 1 == argc)
			bad_usage("get wants keys or '-'");
		if (strcmp(cmd, "refresh") == 0 && optind + 1 == argc)
			bad_usage("refresh wants keys or '-'");
		if (is_pin && optind + 2 != argc)
			bad_usage("%s takes one VOLUME", cmd);
		if (!sock[0]) {
			if (!data_dir[0] && cfsd_default_data_dir(data_dir, sizeof(data_dir)) < 0)
				bad_usage("the default data directory path is too long");
			if (cfsd_socket_path(data_dir, sock, sizeof(sock)) < 0)
				bad_usage("--data path is too long");
		}
		if (strcmp(cmd, "lookup") == 0)
			return cfsctl_lookup(sock, mode, nsucc, flags, argv + optind + 1,
			                     argc - optind - 1, random_n);
		if (strcmp(cmd, "put") == 0) {
			po.random_n = random_n;
			return cfsctl_put(sock, &po, argv + optind + 1, argc - optind - 1);
		}
		if (strcmp(cmd, "get") == 0)
			return cfsctl_get(sock, check, output, argv + optind + 1, argc - optind - 1);
		if (strcmp(cmd, "refresh") == 0)
			return cfsctl_refresh(sock, po.lease_until ? po.lease_until : (uint64_t)time(NULL) + 30ull * 86400u,
			                      argv + optind + 1, argc - optind - 1);
		if (strcmp(cmd, "keys") == 0)
			return cmd_keys(sock);
		if (is_pin || strcmp(cmd, "pins") == 0)
			return cmd_pin(sock, cmd, is_pin ? argv[optind + 1] : NULL,
			               json ? CFS_STATUS_F_JSON : 0);
		return cmd_status(sock, json ? CFS_STATUS_F_JSON : 0);
	}
	if (strcmp(cmd, "ping") == 0) {
		if (optind + 2 != argc)
			bad_usage("ping takes one HOST:PORT");
		return cmd_ping(argv[optind + 1], count, timeout_ms);
	}
	bad_usage("unknown command '%s'", cmd);
}
