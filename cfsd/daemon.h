/*
 * cfsd/ internals: the daemon program's state and what its files share.
 * cfsd.c has the status report, the daemon's lifetime and main; config.c
 * the options, the config file and SIGHUP's reload; startup.c the checks
 * and steps main takes before the loop runs (the data directory's lock,
 * the addresses, the port mapping, the network model, systemd's
 * notifications, the control socket's group). Private to the cfsd program.
 */
#ifndef CFSD_DAEMON_H
#define CFSD_DAEMON_H

#include <getopt.h>

#include "cfsd/cfsd.h"
#include "cfsd/deny.h"
#include "cfsd/frepair.h"
#include "cfsd/metrics.h"
#include "cfsd/pin.h"
#include "cfsd/serve.h"
#include "chord/chord.h"
#include "dhash/dhash.h"

struct daemon {
	cfsd_serve_t *serve;      /* the control socket's requests (serve.c) */
	bool quota_given;         /* --quota-mb was set; else a tenth of the capacity */
	bool lease_given;         /* --lease-days was set; else at most --max-lease-days */
	uv_loop_t *loop;
	cfs_transport_t *tr;
	chord_t *chord;
	struct chord_config cc;
	dhash_server_t *dhash;
	dhash_client_t *client;
	dhash_client_t *repair_client; /* the fragment repairer's, background class */
	struct dhash_config dc;
	uint64_t upload_bytes_per_s; /* --max-upload-mb-per-s (0: no cap) */
	cfsd_pinner_t *pinner;    /* cfsctl pin: volumes this daemon keeps alive */
	cfsd_denylist_t *deny;    /* cfsctl deny: content this daemon refuses (DATA/denylist) */
	uint32_t pin_ms;          /* --pin-ms (0: the default) */
	cfsd_frepair_t *frepair;  /* background repair of coded fragments */
	uint32_t frepair_ms, frepair_keys; /* --frag-repair-ms (0: off), --frag-repair-keys */
	struct cfs_addr boot[16];
	size_t nboot;
	const char *advertise;
	bool stopping;
	int exit_status;          /* 1 after a fatal ring error (on_ring_fatal) */
	uv_timer_t fatal_timer;
	uv_timer_t peers_timer;   /* DATA/peers checked every 5 s, written when changed */
	uv_timer_t ready_timer;   /* READY=1 for systemd once every virtual server joined */
	bool ready_sent;
	bool peers_loaded;        /* DATA/peers was read: it may be written */
	bool map_port;            /* --map-port: ask the home router to forward our port */
	bool portmap_on;          /* a mapping was made: renewed by portmap_timer */
	uv_timer_t portmap_timer;
	uint16_t port;
	cfs_listener_t *ctl;
	uv_signal_t sigterm, sigint, sighup;
	/* service: --first, --socket-group, SIGHUP (see "service" below) */
	bool first;
	const char *sock_group;
	const char *config;       /* --config, re-read on SIGHUP */
	bool level_given;         /* --log-level on the command line: SIGHUP keeps it */
	char *config_rest;        /* the config's settings but log-level, as read */
	struct cfs_addr addr;
	char data_dir[512], sock_path[600];
	int lock_fd;
	uint64_t started_us;
	bool has_wan;             /* --netmodel: evaluation only */
	struct cfs_wan wan;
	struct cfs_wan_node wan_node;
	cfsd_metrics_t *metrics;  /* rates, neighbours, --metrics (cfsd/metrics.c) */
	const char *metrics_addr; /* --metrics IP:PORT, NULL: no endpoint */
};

enum { OPT_FIRST = 1070, OPT_SOCKET_GROUP, OPT_CHECK, OPT_METRICS, OPT_PUSH_RATE, OPT_LOOKUP_MODE,
       OPT_LEARNED, OPT_UPLOAD, OPT_GUESS, OPT_SWEEP, OPT_FREPAIR_MS, OPT_FREPAIR_KEYS };
#define SHORT_OPTS ":p:b:a:B:d:s:c:l:hV"

struct settings {
	struct daemon *d;         /* where the settings go */
	unsigned long port;
	const char *bind_host, *sock, *config;
	enum cfs_log_level level;
};

#define bad_usage(...) cfs_usage_error("usage: cfsd [--port PORT] [--bind ADDR] [--addr IP] [--bootstrap HOST:PORT] [--vnodes V] [--data DIR] [--config FILE] ... (cfsd --help for more)", __VA_ARGS__)

/* config.c: cfsd --help's text; the options, on the command line and in
 * the config file. */
extern const char cfsd__usage_text[];
extern const struct option cfsd__opts[];
/* Apply one option (from the command line or the config file). */
void cfsd__apply(struct settings *st, int c, const char *val);
/* Apply the config file's settings; exit 2 on any error in it. */
void cfsd__read_config(struct settings *st, const char *path);
/* SIGHUP: reread the config file's log level; report other changes. */
void cfsd__on_sighup(uv_signal_t *h, int sig);

/* startup.c */
int cfsd__lock_data_dir(struct daemon *d);
/* The address peers are told to reach this server at. */
const char *cfsd__advertised(const struct settings *st);
/* Exit 2 on addresses that would make a silent, useless server. */
void cfsd__check_addresses(const struct settings *st);
void cfsd__try_portmap(const struct settings *st);
void cfsd__install_netmodel(struct daemon *d);
void cfsd__ready_tick(uv_timer_t *t);
void cfsd__notify(const char *state);
int cfsd__share_socket(struct daemon *d);

#endif
