/*
 * cfsd — the CFS server daemon.
 *
 * One libuv loop drives everything: the UDP transport, the control socket
 * and the signal handlers. Start-up takes the data directory's lock before
 * binding anything, so two daemons never share a directory; a port that is
 * taken is reported by number. SIGTERM and SIGINT close the listener (the
 * socket file goes away), cancel what is in flight and exit 0.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cfsd/cfsd.h"

#define CFS_VERSION "0.1.0"

struct daemon {
	uv_loop_t *loop;
	cfs_transport_t *tr;
	cfs_listener_t *ctl;
	uv_signal_t sigterm, sigint;
	struct cfs_addr addr;
	char data_dir[512], sock_path[600];
	int lock_fd;
	uint64_t started_us;
	uint64_t ctl_requests, ctl_malformed;
	struct cfs_msg reply; /* large: not on the stack */
};

static struct daemon D;

static const char usage_text[] =
	"usage: cfsd [options]\n"
	"\n"
	"Run a CFS server: answer peers over UDP and local tools over a UNIX socket.\n"
	"\n"
	"  -p, --port PORT       UDP port to serve on (default 4460)\n"
	"  -b, --bind ADDR       IP address to bind (default :: — IPv6 and IPv4)\n"
	"  -d, --data DIR        data directory (default: $CFS_DATA_DIR, /var/lib/cfs\n"
	"                        as root, else $XDG_DATA_HOME/cfs)\n"
	"  -s, --socket PATH     control socket (default DIR/cfsd.sock)\n"
	"  -l, --log-level LVL   error, warn, info (default) or debug\n"
	"  -h, --help            show this help\n"
	"  -V, --version         show the version\n"
	"\n"
	"The data directory holds the lock that keeps a second cfsd off it and the\n"
	"control socket that cfsctl talks to. SIGTERM or SIGINT stops the daemon.\n";

#define bad_usage(...) cfs_usage_error("usage: cfsd [--port PORT] [--bind ADDR] [--data DIR] [--socket PATH] [--log-level LVL] (cfsd --help for more)", __VA_ARGS__)

/* ------------------------------------------------------------ status */

static void status_report(struct cfs_sbuf *b, bool json)
{
	struct cfs_transport_stats st;
	char a[CFS_ADDR_STRLEN];
	uint64_t up = (cfs_now_us() - D.started_us) / 1000000u;

	cfs_transport_get_stats(D.tr, &st);
	cfs_addr_str(&D.addr, a);
	if (json) {
		cfs_sb_printf(b, "{\"version\":\"%s\",\"pid\":%d,\"address\":\"%s\",\"port\":%u,"
		             "\"data_dir\":", CFS_VERSION, (int)getpid(), a, cfs_addr_port(&D.addr));
		cfs_sb_json_str(b, D.data_dir);
		cfs_sb_printf(b, ",\"uptime_s\":%lu,", (unsigned long)up);
		cfs_sb_printf(b, "\"rpc\":{\"calls\":%lu,\"replies\":%lu,\"timeouts\":%lu,"
		             "\"requests_in\":%lu,\"replies_out\":%lu,\"malformed\":%lu,"
		             "\"unmatched\":%lu,\"send_errors\":%lu,\"bytes_in\":%lu,\"bytes_out\":%lu,"
		             "\"inflight\":%u,\"queued\":%u,\"window\":%.2f,\"srtt_us\":%.0f,"
		             "\"rtt_p50_us\":%lu,\"rtt_p90_us\":%lu,\"rtt_p99_us\":%lu},",
		          (unsigned long)st.calls, (unsigned long)st.replies, (unsigned long)st.timeouts,
		          (unsigned long)st.requests_in, (unsigned long)st.replies_out,
		          (unsigned long)st.malformed, (unsigned long)st.unmatched,
		          (unsigned long)st.send_errors, (unsigned long)st.bytes_in,
		          (unsigned long)st.bytes_out, st.inflight, st.queued, st.window, st.srtt_us,
		          (unsigned long)cfs_hist_quantile(&st.rtt_us, 0.5),
		          (unsigned long)cfs_hist_quantile(&st.rtt_us, 0.9),
		          (unsigned long)cfs_hist_quantile(&st.rtt_us, 0.99));
		cfs_sb_printf(b, "\"control\":{\"requests\":%lu,\"malformed\":%lu}}\n",
		          (unsigned long)D.ctl_requests, (unsigned long)D.ctl_malformed);
		return;
	}
	cfs_sb_printf(b, "cfsd %s, pid %d, up %lus\n", CFS_VERSION, (int)getpid(), (unsigned long)up);
	cfs_sb_printf(b, "address     %s\n", a);
	cfs_sb_printf(b, "data dir    %s\n", D.data_dir);
	cfs_sb_printf(b, "rpc out     %lu calls, %lu replies, %lu timeouts; window %.1f, srtt %.0f us\n",
	          (unsigned long)st.calls, (unsigned long)st.replies, (unsigned long)st.timeouts,
	          st.window, st.srtt_us);
	cfs_sb_printf(b, "rpc rtt     p50 %lu us, p90 %lu us, p99 %lu us\n",
	          (unsigned long)cfs_hist_quantile(&st.rtt_us, 0.5),
	          (unsigned long)cfs_hist_quantile(&st.rtt_us, 0.9),
	          (unsigned long)cfs_hist_quantile(&st.rtt_us, 0.99));
	cfs_sb_printf(b, "rpc in      %lu requests, %lu replies sent, %lu malformed dropped\n",
	          (unsigned long)st.requests_in, (unsigned long)st.replies_out,
	          (unsigned long)st.malformed);
	cfs_sb_printf(b, "control     %lu requests, %lu malformed\n",
	          (unsigned long)D.ctl_requests, (unsigned long)D.ctl_malformed);
}

/* ------------------------------------------------------------ control socket */

static void ctl_reply_error(cfs_stream_t *s, const struct cfs_msg *req, int status)
{
	cfs_msg_init(&D.reply, (enum cfs_msg_type)req->type);
	D.reply.is_reply = true;
	D.reply.reqid = req->reqid;
	D.reply.status = status;
	(void)cfs_stream_write_msg(s, &D.reply);
}

static void ctl_frame(void *arg, cfs_stream_t *s, const uint8_t *f, size_t len)
{
	struct cfs_msg *req = xmalloc(sizeof(*req));
	const char *why = "";
	int r = cfs_msg_decode(f, len, req, &why);

	if (r < 0 || req->is_reply) {
		D.ctl_malformed++;
		log_debug("control: dropping a malformed request (%s)", r < 0 ? why : "a reply");
		cfs_stream_close(s);
		free(req);
		return;
	}
	D.ctl_requests++;
	if (req->type == CFS_MSG_CTL_STATUS) {
		struct cfs_sbuf b = { 0 };
		status_report(&b, req->flags & CFS_STATUS_F_JSON);
		cfs_msg_init(&D.reply, CFS_MSG_CTL_STATUS);
		D.reply.is_reply = true;
		D.reply.reqid = req->reqid;
		D.reply.data = (struct cfs_bytes){ (const uint8_t *)b.p, b.len };
		if ((r = cfs_stream_write_msg(s, &D.reply)) < 0)
			log_warn_errno(r, "control: cannot send status");
		free(b.p);
	} else {
		ctl_reply_error(s, req, -EOPNOTSUPP);
	}
	free(req);
}

static void ctl_end(void *arg, cfs_stream_t *s, int status)
{
	cfs_stream_close(s);
}

static void ctl_accept(void *arg, cfs_stream_t *s)
{
	cfs_stream_start(s, ctl_frame, ctl_end, NULL);
}

/* ------------------------------------------------------------ UDP requests */

static void on_request(void *arg, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	switch (req->type) {
	case CFS_MSG_PING:
		cfs_msg_init(&D.reply, CFS_MSG_PING);
		(void)cfs_transport_reply(D.tr, from, &D.reply);
		break;
	case CFS_MSG_AUTH: /* CFS 4.4: prove we receive at our claimed address */
		cfs_msg_init(&D.reply, CFS_MSG_AUTH);
		memcpy(D.reply.nonce, req->nonce, sizeof(D.reply.nonce));
		(void)cfs_transport_reply(D.tr, from, &D.reply);
		break;
	default:
		(void)cfs_transport_reply_error(D.tr, from, -EOPNOTSUPP);
		break;
	}
}

/* ------------------------------------------------------------ lifetime */

static void on_signal(uv_signal_t *h, int sig)
{
	log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	cfs_listener_close(D.ctl);
	D.ctl = NULL;
	cfs_transport_close(D.tr);
	uv_close((uv_handle_t *)&D.sigterm, NULL);
	uv_close((uv_handle_t *)&D.sigint, NULL);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[512];
	size_t len = strlen(path);

	if (len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(tmp, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Take DIR/cfsd.lock for the life of the process (flock: released by the
 * kernel however the process ends, so a crash never leaves it stuck). */
static int lock_data_dir(void)
{
	char path[600], pid[32];
	int fd, r;

	snprintf(path, sizeof(path), "%s/%s", D.data_dir, CFSD_LOCK_NAME);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return log_error_errno(-errno, "cannot open %s", path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = -errno;
		ssize_t n = read(fd, pid, sizeof(pid) - 1);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(fd);
		if (r == -EWOULDBLOCK) {
			log_error("data directory %s is in use by another cfsd%s%s%s", D.data_dir,
			          *pid ? " (pid " : "", pid, *pid ? ")" : "");
			return -EBUSY;
		}
		return log_error_errno(r, "cannot lock %s", path);
	}
	if (ftruncate(fd, 0) == 0) {
		int n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
		if (write(fd, pid, (size_t)n) != n)
			log_warn("cannot record the pid in %s", path);
	}
	D.lock_fd = fd;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "data", required_argument, NULL, 'd' },
		{ "socket", required_argument, NULL, 's' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct cfs_transport_config tc;
	enum cfs_log_level level = CFS_LOG_INFO;
	const char *bind_host = NULL, *sock = NULL;
	char a[CFS_ADDR_STRLEN], *end;
	unsigned long port = CFSD_DEFAULT_PORT;
	int c, r;

	cfs_log_init(argv[0], CFS_LOG_INFO);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:b:d:s:l:hV", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			port = strtoul(optarg, &end, 10);
			if (*end || !*optarg || port == 0 || port > 65535)
				bad_usage("--port wants a number from 1 to 65535, not '%s'", optarg);
			break;
		case 'b': {
			struct cfs_addr tmp;
			if (cfs_addr_from_ip(&tmp, optarg, 1) < 0)
				bad_usage("--bind wants an IP address, not '%s'", optarg);
			bind_host = optarg;
			break;
		}
		case 'd':
			if (strlen(optarg) >= sizeof(D.data_dir) - 32)
				bad_usage("--data path is too long");
			strcpy(D.data_dir, optarg);
			break;
		case 's':
			sock = optarg;
			break;
		case 'l':
			if (cfs_log_parse_level(optarg, &level) < 0)
				bad_usage("--log-level wants error, warn, info or debug, not '%s'", optarg);
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		case 'V':
			printf("cfsd %s\n", CFS_VERSION);
			return 0;
		case ':':
			bad_usage("option '%s' needs a value", argv[optind - 1]);
		default:
			bad_usage("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	cfs_log_init(argv[0], level);
	if (cfs_crypto_init() < 0)
		return 1;

	if (!D.data_dir[0] && cfsd_default_data_dir(D.data_dir, sizeof(D.data_dir) - 32) < 0)
		bad_usage("the default data directory path is too long; use --data");
	if ((r = mkdir_p(D.data_dir, 0700)) < 0) {
		log_error_errno(r, "cannot create data directory %s", D.data_dir);
		return 1;
	}
	if (lock_data_dir() < 0)
		return 1;
	if (sock)
		snprintf(D.sock_path, sizeof(D.sock_path), "%s", sock);
	else
		cfsd_socket_path(D.data_dir, D.sock_path, sizeof(D.sock_path));

	D.loop = uv_default_loop();
	D.started_us = cfs_now_us();
	cfs_transport_config_default(&tc);
	tc.host = bind_host;
	tc.port = (uint16_t)port;
	if ((r = cfs_transport_new(D.loop, &tc, on_request, NULL, &D.tr)) < 0) {
		if (r == UV_EADDRINUSE)
			log_error("UDP port %lu is in use by another process; choose one with --port", port);
		else
			log_error("cannot serve on UDP port %lu: %s", port, uv_strerror(r));
		return 1;
	}
	cfs_transport_local_addr(D.tr, &D.addr);
	if (cfs_listener_new(D.loop, D.sock_path, 0600, ctl_accept, NULL, &D.ctl) < 0) {
		cfs_transport_close(D.tr);
		uv_run(D.loop, UV_RUN_DEFAULT);
		return 1;
	}
	uv_signal_init(D.loop, &D.sigterm);
	uv_signal_init(D.loop, &D.sigint);
	uv_signal_start(&D.sigterm, on_signal, SIGTERM);
	uv_signal_start(&D.sigint, on_signal, SIGINT);
	signal(SIGPIPE, SIG_IGN);

	log_info("serving on %s, data %s, control %s", cfs_addr_str(&D.addr, a), D.data_dir, D.sock_path);
	uv_run(D.loop, UV_RUN_DEFAULT);
	uv_loop_close(D.loop);
	close(D.lock_fd);
	log_info("stopped");
	return 0;
}
