/*
 * cfsd's operator view: traffic rates over a sliding
 * window, the ring neighbours with measured round trips, and a Prometheus
 * text endpoint. Private to the cfsd program.
 *
 * Rates: every second the transport's counters are sampled; a rate is the
 * difference across the last CFSD_RATE_WINDOW_S seconds.
 *
 * Neighbours: chord's public tables name each virtual server's predecessor
 * and successors, but neither chord nor the transport exports a per-peer
 * round trip (docs: /work/wt/notes/ops.md asks for one). So every
 * CFSD_PROBE_MS the daemon PINGs each distinct neighbour address once,
 * through chord_call (which also feeds Vivaldi), and keeps a smoothed RTT
 * (RFC 6298 weights), the time of the last answer and the misses since.
 *
 * Endpoint: GET /metrics over HTTP/1.x on a libuv TCP listener answers the
 * text format 0.0.4; any other request 404; a request head over
 * CFSD_METRICS_REQ_MAX bytes 431; each connection closed after one answer
 * or after CFSD_METRICS_IDLE_MS without a whole request. One address
 * holds at most CFSD_METRICS_PER_IP connections: a new one closes its
 * oldest still sending a request after CFSD_METRICS_GRACE_MS, or is
 * refused. Past CFSD_METRICS_CLIENTS in all, a new connection closes the
 * oldest such one of any address (up to 4 x CFSD_METRICS_CLIENTS are kept
 * when none is that old). Clients that hold connections open without
 * finishing a request (slowloris) cannot keep a scraper out.
 */
#ifndef CFS_CFSD_METRICS_H
#define CFS_CFSD_METRICS_H

#include "chord/chord.h"

#define CFSD_RATE_WINDOW_S 10
#define CFSD_PROBE_MS 5000
#define CFSD_METRICS_REQ_MAX 4096
#define CFSD_METRICS_CLIENTS 16
#define CFSD_METRICS_PER_IP 8
#define CFSD_METRICS_GRACE_MS 1000
#define CFSD_METRICS_IDLE_MS 5000

typedef struct cfsd_metrics cfsd_metrics_t;

/* The daemon's full status as JSON (what `cfsctl status --json` prints). */
typedef void (*cfsd_status_json_fn)(void *arg, struct cfs_sbuf *b);

/* Start sampling t and probing c's neighbours on loop. */
cfsd_metrics_t *cfsd_metrics_new(uv_loop_t *loop, cfs_transport_t *t, chord_t *c,
                                 cfsd_status_json_fn status, void *status_arg);
/* Serve /metrics on "IP:PORT" (IPv6 as [IP]:PORT). A negative errno
 * (logged) when the address is bad or cannot be bound. */
int cfsd_metrics_listen(cfsd_metrics_t *m, const char *addr_port);
/* Append the "traffic" and "neighbours" parts of the status report: JSON
 * members (each preceded by a comma) or text lines. */
void cfsd_metrics_status(cfsd_metrics_t *m, struct cfs_sbuf *b, bool json);
/* Stop timers, probes and the endpoint; memory goes once the last probe
 * and handle have ended (the caller's chord_free cancels probes). */
void cfsd_metrics_close(cfsd_metrics_t *m);

/* For tests: render Prometheus text from a status JSON object (appended to
 * out); -EPROTO when json is not one. Neighbour gauges are not included. */
int cfsd_metrics_from_json(const char *json, struct cfs_sbuf *out);

#endif
