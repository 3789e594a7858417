/*
 * cfsd's settings: the options (the command line's and the config file's
 * "name = value" lines share one table, so a setting is named once), the
 * config file and SIGHUP's reload of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/daemon.h"

const char cfsd__usage_text[] =
	"usage: cfsd [options]\n"
	"\n"
	"Run a CFS server: join the Chord ring, answer peers over UDP and local\n"
	"tools (cfsctl, cfs-mount, cfs-publish) over a UNIX socket.\n"
	"\n"
	"  -p, --port PORT         UDP port to serve on (default 4460)\n"
	"  -b, --bind ADDR         IP address to bind (default :: — IPv6 and IPv4)\n"
	"  -a, --addr IP           the address peers reach this server at, hashed into\n"
	"                          its node IDs (default: --bind when it names one\n"
	"                          address, else 127.0.0.1 — refused with the default\n"
	"                          --bind, which listens on every interface)\n"
	"  -B, --bootstrap H:P     join the ring through this server (repeatable)\n"
	"      --first             start a new ring when no --bootstrap address and no\n"
	"                          remembered peer answers: needed when no --bootstrap\n"
	"                          is given, unless the server's address is a loopback one\n"
	"      --vnodes V          virtual servers to run (default 1, at most 64)\n"
	"      --successors R      successor list length (default 16, at most 32)\n"
	"      --stabilize-ms MS   mean stabilisation period (default 1000)\n"
	"      --map-port MODE     auto (the default): on a private IPv4 address with no\n"
	"                          --addr, ask the router (NAT-PMP, then UPnP-IGD) to\n"
	"                          forward this UDP port and tell peers its public address;\n"
	"                          off: never\n"
	"      --unreachable MODE  when members cannot reach this server (their dial-backs\n"
	"                          do not arrive): client (the default) runs it as a\n"
	"                          client-only node that reads, publishes and pins but\n"
	"                          holds no part of the ring; member keeps it a member\n"
	"      --ring-check-ms MS  mean period of the ring check, a lookup of our own ID\n"
	"                          from a peer outside our successor list that finds\n"
	"                          and joins other loops after a partition (default\n"
	"                          30000; 0: never)\n"
	"      --pns X             proximity samples per finger (default 16)\n"
	"      --learned-nodes N   ring members met in traffic kept so that lookups start\n"
	"                          next to their keys, one round trip in a ring of up to\n"
	"                          about N servers (default 4096, at most 65536; 0: none)\n"
	"      --guess-holders G   a get skips its lookup when learned members lie within\n"
	"                          G mean node spacings after the key, and asks the\n"
	"                          nearest of them (default 5, at most 16; 0: never)\n"
	"      --learn-sweep-ms MS ask one member for its successor list every MS to fill\n"
	"                          the gaps among the learned members (default 1000;\n"
	"                          0: learn from traffic only)\n"
	"      --replicas K        copies of every block, on its K successors (default 6;\n"
	"                          at most --successors)\n"
	"      --lease-days D      lease of a block put without one, in days (default 30;\n"
	"                          a decimal such as 0.5 is allowed)\n"
	"      --max-lease-days D  the longest lease this server grants, whatever a put or\n"
	"                          refresh asks (default 90; publishers sign roots no\n"
	"                          longer than the leases they got)\n"
	"      --expire-ms MS      lease collector period (default 60000)\n"
	"      --max-clock-skew-s S  lease expiry is suspended while this machine's\n"
	"                          clock differs from the median of its peers' by more\n"
	"                          (default 600)\n"
	"      --hedge-ms MS       a get also asks the next replica when the first has not\n"
	"                          answered within MS (OpenDHT's hedged request); auto (the\n"
	"                          default): twice the round trip to it plus 15 ms, for at\n"
	"                          most 5 % of the FETCHes; 0: never\n"
	"      --lookup-mode M     how this server's gets and puts find a key's servers:\n"
	"                          iterative or recursive, then ,greedy ,cost or ,nonlinear\n"
	"                          (next hops by ID or by predicted delay), ,pN (N asks at\n"
	"                          once, iterative) and ,pred (route to the predecessor)\n"
	"                          (default iterative,nonlinear,p2)\n"
	"      --capacity-mb MB    what replicas and cached copies together may fill this\n"
	"                          server to; cached copies make room first (default\n"
	"                          10240; 0: no bound)\n"
	"      --quota-mb MB       what one client IP may store here (default a tenth of\n"
	"                          the capacity; 0: no quota); a client's puts need the\n"
	"                          nonce this server sends its address (CFS 5.4)\n"
	"      --cache-mb MB       bound of the cache of others' blocks fetched through this\n"
	"                          server or pushed to it by gets (DIR/cache; default 64; 0: off)\n"
	"      --cache-push WHERE  after a get, copy the block to the lookup path's caches:\n"
	"                          path (every hop, the default), last (the hop nearest the\n"
	"                          key) or none\n"
	"      --cache-push-mb-per-s MB  upload bound on those copies, which also yield to\n"
	"                          other traffic (default 0: no bound)\n"
	"      --max-upload-mb-per-s MB  cap on everything this server sends: answers,\n"
	"                          replicas, repair, cache pushes (MB/s, a decimal such as\n"
	"                          0.5 allowed; the background class waits behind the rest\n"
	"                          but keeps a tenth; default 0: no cap)\n"
	"      --frag-repair-ms MS a round of coded-fragment repair this often: of the\n"
	"                          fragments kept here, locate the keys this server is\n"
	"                          responsible for and rebuild the missing fragments of\n"
	"                          those below m + ceil((n-m)/2) (default 600000; 0: off)\n"
	"      --frag-repair-keys N fragments looked at a round (default 64)\n"
	"      --pin-ms MS         a round of every pin this often: renew the leases of the\n"
	"                          pinned volumes' blocks, put back what went missing\n"
	"                          (default a quarter of --lease-days, at most an hour)\n"
	"      --sync-ms MS        replica maintenance period: compare each range with its\n"
	"                          replicas, push and fetch what differs (default 20000; 0: off)\n"
	"      --scrub-days D      reread and verify every stored block within D days,\n"
	"                          dropping bad copies for repair to restore (default 7:\n"
	"                          the capacity in a week; 0: off)\n"
	"      --scrub-mb-per-s MB the scrub's read rate instead (default: from --scrub-days)\n"
	"      --compact-mb-per-s MB  the compactor's disk rate, read and written, reclaiming\n"
	"                          dead bytes of expired and dropped blocks (default 8; 0: off)\n"
	"      --compact-live-percent P  it rewrites a pack whose live share is below P\n"
	"                          (default 50)\n"
	"      --metrics IP:PORT   serve Prometheus metrics at http://IP:PORT/metrics (off by\n"
	"                          default; [IPv6]:PORT for IPv6)\n"
	"      --netmodel SPEC     evaluation only: delay, drop and slow down every datagram\n"
	"                          sent as a wide-area model says; SPEC is key=value,...\n"
	"                          of seed=N, median-rtt=MS (default 130), loss=FRAC,\n"
	"                          slow=FRAC, slow-ms=MS, matrix=FILE (off by default)\n"
	"      --test-ring-order   for tests: a get asks the key's successors in ring order,\n"
	"                          not nearest first\n"
	"      --test-clock-offset-s S  for tests: run this daemon's wall clock S seconds\n"
	"                          ahead (negative: behind) of the machine's\n"
	"      --test-corrupt-fetches  for tests: serve every block with a byte flipped\n"
	"                          (a misbehaving server; clients must skip it)\n"
	"  -d, --data DIR          data directory (default: $CFS_DATA_DIR, /var/lib/cfs\n"
	"                          as root, else $XDG_DATA_HOME/cfs)\n"
	"  -s, --socket PATH       control socket (default DIR/cfsd.sock)\n"
	"      --socket-group G    make the control socket mode 0660, group G, so that\n"
	"                          G's members reach the daemon (the service: cfs)\n"
	"  -c, --config FILE       read options from FILE first: one \"name = value\" per\n"
	"                          line (the long option names), '#' starts a comment;\n"
	"                          the command line wins\n"
	"  -l, --log-level LVL     error, warn, info (default) or debug\n"
	"      --check             check the settings (config file and command line)\n"
	"                          and exit: 0 if cfsd would start with them, else 2\n"
	"  -h, --help              show this help\n"
	"  -V, --version           show the version\n"
	"\n"
	"The data directory holds the lock that keeps a second cfsd off it, the block\n"
	"store (DIR/blocks: pack files and a LevelDB index), the cache (DIR/cache), the\n"
	"pins (DIR/pins) and the pinned volumes' blocks (DIR/pinned), and the control\n"
	"socket that cfsctl talks to. SIGTERM or SIGINT makes the daemon tell its ring\n"
	"neighbours it is leaving, then exit 0. SIGHUP rereads the config file's\n"
	"log-level; other settings wait for a restart (logged).\n";
const struct option cfsd__opts[] = {
	{ "port", required_argument, NULL, 'p' },
	{ "bind", required_argument, NULL, 'b' },
	{ "addr", required_argument, NULL, 'a' },
	{ "bootstrap", required_argument, NULL, 'B' },
	{ "vnodes", required_argument, NULL, 'v' },
	{ "successors", required_argument, NULL, 'r' },
	{ "stabilize-ms", required_argument, NULL, 1001 },
	{ "ring-check-ms", required_argument, NULL, 1006 },
	{ "unreachable", required_argument, NULL, 1009 },
	{ "map-port", required_argument, NULL, 1010 },
	{ "pns", required_argument, NULL, 1002 },
	{ "learned-nodes", required_argument, NULL, OPT_LEARNED },
	{ "guess-holders", required_argument, NULL, OPT_GUESS },
	{ "learn-sweep-ms", required_argument, NULL, OPT_SWEEP },
	{ "replicas", required_argument, NULL, 'k' },
	{ "lease-days", required_argument, NULL, 1003 },
	{ "expire-ms", required_argument, NULL, 1004 },
	{ "sync-ms", required_argument, NULL, 1013 },
	{ "scrub-days", required_argument, NULL, 1060 },
	{ "scrub-mb-per-s", required_argument, NULL, 1061 },
	{ "compact-mb-per-s", required_argument, NULL, 1062 },
	{ "compact-live-percent", required_argument, NULL, 1063 },
	{ "pin-ms", required_argument, NULL, 1050 },
	{ "frag-repair-ms", required_argument, NULL, OPT_FREPAIR_MS },
	{ "frag-repair-keys", required_argument, NULL, OPT_FREPAIR_KEYS },
	{ "hedge-ms", required_argument, NULL, 1014 },
	{ "lookup-mode", required_argument, NULL, OPT_LOOKUP_MODE },
	{ "cache-mb", required_argument, NULL, 1015 },
	{ "capacity-mb", required_argument, NULL, 1017 },
	{ "quota-mb", required_argument, NULL, 1018 },
	{ "cache-push", required_argument, NULL, 1016 },
	{ "cache-push-mb-per-s", required_argument, NULL, OPT_PUSH_RATE },
	{ "max-upload-mb-per-s", required_argument, NULL, OPT_UPLOAD },
	{ "max-lease-days", required_argument, NULL, 1040 },
	{ "test-corrupt-fetches", no_argument, NULL, 1005 },
	{ "test-clock-offset-s", required_argument, NULL, 1007 },
	{ "max-clock-skew-s", required_argument, NULL, 1008 },
	{ "test-ring-order", no_argument, NULL, 1019 },
	{ "netmodel", required_argument, NULL, 1020 },
	{ "metrics", required_argument, NULL, OPT_METRICS },
	{ "data", required_argument, NULL, 'd' },
	{ "socket", required_argument, NULL, 's' },
	{ "config", required_argument, NULL, 'c' },
	{ "log-level", required_argument, NULL, 'l' },
	{ "first", no_argument, NULL, OPT_FIRST },
	{ "socket-group", required_argument, NULL, OPT_SOCKET_GROUP },
	{ "check", no_argument, NULL, OPT_CHECK },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ 0 },
};

/* A flag: on the command line (val NULL) it is set; in the config file
 * it says true or false. */
static bool flag_value(const char *opt, const char *val)
{
	if (!val || !strcmp(val, "true") || !strcmp(val, "yes") || !strcmp(val, "1"))
		return true;
	if (!strcmp(val, "false") || !strcmp(val, "no") || !strcmp(val, "0"))
		return false;
	bad_usage("%s wants true or false, not '%s'", opt, val);
}

static const char *level_name(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	return names[cfs_log_get_level()];
}

static unsigned long parse_num(const char *opt, const char *v, unsigned long lo, unsigned long hi)
{
	char *end;
	unsigned long n = strtoul(v, &end, 10);

	if (!*v || *end || n < lo || n > hi)
		bad_usage("%s wants a number from %lu to %lu, not '%s'", opt, lo, hi, v);
	return n;
}

/* Apply one option (from the command line or the config file). */
void cfsd__apply(struct settings *st, int c, const char *val)
{
	struct daemon *d = st->d;
	struct cfs_addr tmp;

	switch (c) {
	case 'p': st->port = parse_num("--port", val, 1, 65535); break;
	case 'b':
		if (cfs_addr_from_ip(&tmp, val, 1) < 0)
			bad_usage("--bind wants an IP address, not '%s'", val);
		st->bind_host = val;
		break;
	case 'a':
		if (cfs_addr_from_ip(&tmp, val, 1) < 0)
			bad_usage("--addr wants an IP address, not '%s'", val);
		d->advertise = val;
		break;
	case 'B':
		if (d->nboot >= CFS_ARRAY_SIZE(d->boot))
			bad_usage("at most %zu --bootstrap servers", CFS_ARRAY_SIZE(d->boot));
		if (cfs_addr_parse(&d->boot[d->nboot], val) < 0)
			bad_usage("--bootstrap wants HOST:PORT, not '%s'", val);
		d->nboot++;
		break;
	case 'v': d->cc.vnodes = (uint32_t)parse_num("--vnodes", val, 1, CHORD_VNODES_MAX); break;
	case 'r': d->cc.nsucc = (uint32_t)parse_num("--successors", val, 1, CHORD_SUCC_MAX); break;
	case 1001: d->cc.stabilize_ms = (uint32_t)parse_num("--stabilize-ms", val, 10, 600000); break;
	case 1002: d->cc.pns = (uint32_t)parse_num("--pns", val, 1, CHORD_SUCC_MAX); break;
	case OPT_LEARNED:
		d->cc.learned_max = (uint32_t)parse_num("--learned-nodes", val, 0, CHORD_LEARNED_MAX);
		break;
	case OPT_GUESS:
		d->cc.guess_spacings = (uint32_t)parse_num("--guess-holders", val, 0, CHORD_GUESS_MAX);
		break;
	case OPT_SWEEP:
		d->cc.sweep_ms = (uint32_t)parse_num("--learn-sweep-ms", val, 0, 3600000);
		break;
	case 'k': d->dc.replicas = (uint32_t)parse_num("--replicas", val, 1, CHORD_SUCC_MAX); break;
	case 1003: {
		uint64_t secs;
		if (cfs_parse_days(val, &secs) < 0)
			bad_usage("--lease-days wants a number of days above 0, at most 3650 (0.5: twelve hours), not '%s'", val);
		d->dc.lease_s = secs;
		d->lease_given = true;
		break;
	}
	case 1040: {
		uint64_t secs;
		if (cfs_parse_days(val, &secs) < 0)
			bad_usage("--max-lease-days wants a number of days above 0, at most 3650, not '%s'", val);
		d->dc.max_lease_s = secs;
		break;
	}
	case 1010:
		if (!strcmp(val, "auto"))
			d->map_port = true;
		else if (!strcmp(val, "off"))
			d->map_port = false;
		else
			bad_usage("--map-port wants auto or off, not '%s'", val);
		break;
	case 1009:
		if (!strcmp(val, "client"))
			d->cc.unreachable_client = true;
		else if (!strcmp(val, "member"))
			d->cc.unreachable_client = false;
		else
			bad_usage("--unreachable wants client or member, not '%s'", val);
		break;
	case 1006: {
		uint32_t ms = (uint32_t)parse_num("--ring-check-ms", val, 0, 86400000);
		d->cc.merge_ms = ms ? ms : CHORD_MERGE_OFF;
		break;
	}
	case 1004: d->dc.expire_ms = (uint32_t)parse_num("--expire-ms", val, 100, 86400000); break;
	case 1013: d->dc.sync_ms = (uint32_t)parse_num("--sync-ms", val, 0, 86400000); break;
	case 1060: {
		uint64_t secs = 0;
		if (strcmp(val, "0") != 0 && cfs_parse_days(val, &secs) < 0)
			bad_usage("--scrub-days wants a number of days, at most 3650 (0: no scrub), not '%s'", val);
		d->dc.scrub_ms = secs * 1000;
		break;
	}
	case 1061: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6)
			bad_usage("--scrub-mb-per-s wants a rate in MB/s (0: from --scrub-days), not '%s'", val);
		d->dc.scrub_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case 1062: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6)
			bad_usage("--compact-mb-per-s wants a rate in MB/s (0: no compaction), not '%s'", val);
		d->dc.compact_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case OPT_UPLOAD: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6 || (mb > 0 && mb < 0.1))
			bad_usage("--max-upload-mb-per-s wants a rate in MB/s, at least 0.1 (0: no cap), not '%s'", val);
		d->upload_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case OPT_PUSH_RATE: {
		char *end;
		double mb = strtod(val, &end);
		if (!*val || *end || !(mb >= 0.0) || mb > 1e6)
			bad_usage("--cache-push-mb-per-s wants a rate in MB/s (0: no bound), not '%s'", val);
		d->dc.cache_push_bytes_per_s = (uint64_t)(mb * 1e6);
		break;
	}
	case 1063: d->dc.compact_live_pct = (uint32_t)parse_num("--compact-live-percent", val, 1, 99); break;
	case 1050: d->pin_ms = (uint32_t)parse_num("--pin-ms", val, 100, 86400000); break;
	case OPT_FREPAIR_MS:
		d->frepair_ms = (uint32_t)parse_num("--frag-repair-ms", val, 0, 86400000);
		break;
	case OPT_FREPAIR_KEYS:
		d->frepair_keys = (uint32_t)parse_num("--frag-repair-keys", val, 1, 65536);
		break;
	case 1014: {
		char *end;
		unsigned long ms = strtoul(val, &end, 10);
		if (strcmp(val, "auto") == 0)
			ms = DHASH_HEDGE_AUTO;
		else if (!*val || *end || ms > 60000)
			bad_usage("--hedge-ms wants auto or a delay in ms from 0 to 60000, not '%s'", val);
		d->dc.hedge_ms = (uint32_t)ms;
		break;
	}
	case OPT_LOOKUP_MODE:
		if (chord_mode_parse(val, &d->dc.lookup_mode) < 0)
			bad_usage("--lookup-mode wants iterative or recursive[,greedy|,cost|,nonlinear][,pN]"
			          "[,pred], not '%s'", val);
		break;
	case 1015: d->dc.cache_bytes = (uint64_t)parse_num("--cache-mb", val, 0, 1ul << 20) << 20; break;
	case 1017: d->dc.capacity_bytes = (uint64_t)parse_num("--capacity-mb", val, 0, 1ul << 30) << 20; break;
	case 1018:
		d->dc.quota_bytes = (uint64_t)parse_num("--quota-mb", val, 0, 1ul << 30) << 20;
		d->quota_given = true;
		break;
	case 1016:
		if (!strcmp(val, "path"))
			d->dc.cache_push = DHASH_PUSH_PATH;
		else if (!strcmp(val, "last"))
			d->dc.cache_push = DHASH_PUSH_LAST;
		else if (!strcmp(val, "none"))
			d->dc.cache_push = DHASH_PUSH_NONE;
		else
			bad_usage("--cache-push wants path, last or none, not '%s'", val);
		break;
	case 1007: {
		char *end;
		long long off = strtoll(val, &end, 10);
		if (!*val || *end || off < -3153600000LL || off > 3153600000LL)
			bad_usage("--test-clock-offset-s wants whole seconds (negative: behind)");
		cfs_wall_set_offset_s(off);
		break;
	}
	case 1008: d->dc.max_skew_s = (uint32_t)parse_num("--max-clock-skew-s", val, 1, 31536000); break;
	case 1005: d->dc.corrupt_fetches = flag_value("test-corrupt-fetches", val); break;
	case 1019: d->dc.ring_order = flag_value("test-ring-order", val); break;
	case OPT_FIRST: d->first = flag_value("first", val); break;
	case OPT_SOCKET_GROUP: d->sock_group = val; break;
	case 1020: {
		/* The config file and the command line may both name one. */
		struct cfs_wan w;
		char err[512];
		if (cfs_wan_parse(val, &w, err, sizeof(err)) < 0)
			bad_usage("--netmodel: %s", err);
		cfs_wan_free(&d->wan);
		d->wan = w;
		d->has_wan = true;
		break;
	}
	case OPT_METRICS: d->metrics_addr = val; break;
	case 'd':
		if (strlen(val) >= sizeof(d->data_dir) - 32)
			bad_usage("--data path is too long");
		strcpy(d->data_dir, val);
		break;
	case 's': st->sock = val; break;
	case 'c': st->config = val; break;
	case 'l':
		if (cfs_log_parse_level(val, &st->level) < 0)
			bad_usage("--log-level wants error, warn, info or debug, not '%s'", val);
		break;
	}
}

/* One line of a config file, trimmed in place: 1 with ret_name and
 * ret_val set, 0 for a blank or comment line, -EINVAL without an '='. */
static int config_line(char *p, char **ret_name, char **ret_val)
{
	char *eq, *e;

	p[strcspn(p, "#\n")] = 0;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	if (!(eq = strchr(p, '=')))
		return -EINVAL;
	*eq = 0;
	for (e = eq - 1; e >= p && (*e == ' ' || *e == '\t'); e--)
		*e = 0;
	*ret_name = p;
	p = eq + 1;
	while (*p == ' ' || *p == '\t')
		p++;
	for (e = p + strlen(p) - 1; e >= p && (*e == ' ' || *e == '\t' || *e == '\r'); e--)
		*e = 0;
	*ret_val = p;
	return 1;
}

/* "name = value" lines; the values are kept for the life of the process.
 * Flags (--first) take true or false. What is not log-level is kept in
 * d->config_rest, for SIGHUP to tell what changed. */
void cfsd__read_config(struct settings *st, const char *path)
{
	struct daemon *d = st->d;
	FILE *f = fopen(path, "re");
	struct cfs_sbuf rest = { 0 };
	char line[1024], *name, *val;
	unsigned lineno = 0;
	int r;

	if (!f)
		bad_usage("cannot read config file %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if ((r = config_line(line, &name, &val)) == 0)
			continue;
		if (r < 0)
			bad_usage("%s:%u: expected 'name = value'", path, lineno);
		const struct option *o = cfsd__opts;
		while (o->name && strcmp(o->name, name) != 0)
			o++;
		if (!o->name || o->val == 'c' || o->val == 'h' || o->val == 'V' || o->val == OPT_CHECK)
			bad_usage("%s:%u: unknown setting '%s'", path, lineno, name);
		if (o->val != 'l')
			cfs_sb_printf(&rest, "%s=%s\n", name, val);
		cfsd__apply(st, o->val, xstrdup(val));
	}
	fclose(f);
	d->config_rest = rest.p ? rest.p : xstrdup("");
}

/* SIGHUP: reread the config file. The log level applies now (unless the
 * command line gave one); any other change is reported as waiting for a
 * restart, for a ring position or a store bound changed under a running
 * daemon would need more care than a reload deserves. Nothing here exits. */
void cfsd__on_sighup(uv_signal_t *h, int sig)
{
	struct daemon *d = h->data;
	struct cfs_sbuf rest = { 0 };
	char line[1024], *name, *val, level[16] = "";
	enum cfs_log_level l;
	unsigned lineno = 0;
	FILE *f;

	if (!d->config) {
		log_info("SIGHUP: no config file (--config) to reload; nothing changed");
		return;
	}
	if (!(f = fopen(d->config, "re"))) {
		log_warn_errno(-errno, "SIGHUP: cannot read %s; nothing changed", d->config);
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		int r = config_line(line, &name, &val);
		lineno++;
		if (r < 0)
			log_warn("SIGHUP: %s:%u: expected 'name = value'; line ignored", d->config, lineno);
		else if (r > 0 && !strcmp(name, "log-level"))
			snprintf(level, sizeof(level), "%s", val);
		else if (r > 0)
			cfs_sb_printf(&rest, "%s=%s\n", name, val);
	}
	fclose(f);
	if (d->level_given)
		log_info("SIGHUP: log level stays %s (given on the command line)", level_name());
	else if (level[0] && cfs_log_parse_level(level, &l) < 0)
		log_warn("SIGHUP: %s: log-level wants error, warn, info or debug, not '%s'; "
		         "it stays %s", d->config, level, level_name());
	else {
		cfs_log_set_level(level[0] ? l : CFS_LOG_INFO);
		log_info("SIGHUP: reloaded %s: log level %s", d->config, level_name());
	}
	if (strcmp(rest.p ? rest.p : "", d->config_rest ? d->config_rest : ""))
		log_warn("SIGHUP: settings other than log-level changed in %s: they take effect "
		         "when cfsd restarts", d->config);
	free(rest.p);
}
