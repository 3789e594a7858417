/* cfsd/ internals: the control socket's server (serve.c). */
#ifndef CFSD_SERVE_H
#define CFSD_SERVE_H

#include "cfsd/cfsd.h"
#include "cfsd/deny.h"
#include "cfsd/pin.h"
#include "chord/chord.h"
#include "dhash/dhash.h"

/* What the requests are served from: the daemon's pieces. */
struct cfsd_serve_env {
	chord_t *chord;
	dhash_server_t *dhash;
	dhash_client_t *client;
	cfsd_pinner_t *pinner;
	cfsd_denylist_t *deny;    /* cfsctl deny: handed to dhash at start and on each change */
	void (*status)(struct cfs_sbuf *b, uint32_t flags); /* CTL_STATUS's report (CFS_STATUS_F_*) */
	void (*leave)(void);      /* CTL_LEAVE: leave the ring and exit, once the answer is out */
};

void cfsd_serve_init(const struct cfsd_serve_env *env);
/* The listener's callback: serve a new connection. */
void cfsd_serve_accept(void *arg, cfs_stream_t *s);
/* Close every connection (shutdown); their running requests end quietly. */
void cfsd_serve_close_all(void);
/* Requests served, or (malformed) dropped as malformed. */
uint64_t cfsd_serve_requests(bool malformed);

#endif
