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
	void (*status)(void *arg, struct cfs_sbuf *b, uint32_t flags); /* CTL_STATUS's report (CFS_STATUS_F_*) */
	void (*leave)(void *arg); /* CTL_LEAVE: leave the ring and exit, once the answer is out */
	void *arg;                /* for status and leave */
};

typedef struct cfsd_serve cfsd_serve_t;

cfsd_serve_t *cfsd_serve_new(const struct cfsd_serve_env *env);
/* Closes every connection first. */
void cfsd_serve_free(cfsd_serve_t *sv);
/* The listener's callback (arg: the server): serve a new connection. */
void cfsd_serve_accept(void *arg, cfs_stream_t *s);
/* Close every connection (shutdown); their running requests end quietly. */
void cfsd_serve_close_all(cfsd_serve_t *sv);
/* Requests served, or (malformed) dropped as malformed. */
uint64_t cfsd_serve_requests(const cfsd_serve_t *sv, bool malformed);

#endif
