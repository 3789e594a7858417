/*
 * common/transport_int.h — the transport's driver (common/transport.c;
 * common/transport_msg.c, its messages; and common/version.c, which knows
 * each peer's protocol version): the socket, the timers and the two
 * machines it moves bytes and events between, the calls (common/rpc.h)
 * and the links (common/link.h).
 * Internal to common/; nothing below the driver includes it.
 */
#ifndef CFS_COMMON_TRANSPORT_INT_H
#define CFS_COMMON_TRANSPORT_INT_H

#include "common/cfs.h"
#include "common/dgramq.h"
#include "common/heap.h"
#include "common/link.h"
#include "common/rpc.h"
#include "common/udp.h"

struct cfs_transport {
	uv_loop_t *loop;
	struct cfs_udp sock;
	uv_poll_t poll;
	int poll_events;
	uv_timer_t timer;
	uv_idle_t idle;   /* keeps the poll from blocking during a grace */
	uv_check_t check; /* runs after each poll: ends the grace */
	struct cfs__grace grace;  /* before overdue calls expire (rpc.h) */
	int handles_open;
	bool closing;
	struct cfs_transport_config cfg;
	cfs_request_cb on_request;
	void *arg;

	struct cfs__rpc rpc;      /* the calls */
	struct cfs__links links;  /* the links */
	bool driving;             /* their outputs are being carried out */
	struct cfs__dgram_timed delayed; /* datagrams the network model holds */
	uint64_t timer_due_us;    /* UINT64_MAX: idle */

	bool has_model;
	struct cfs_netmodel model;

	const struct cfs_coord *coord; /* stamped on everything sent */

	struct cfs_transport_stats st;

	struct cfs_htab vers;  /* struct peer_key -> struct peer_ver (version.c) */

	struct cfs__dgram_fifo backlog; /* whole datagrams the full socket refused */
	bool sock_blocked;     /* pieces wait for the socket to take more */
};

/* transport.c: carry out the calls' actions now, even inside the drive;
 * at the end of every entry point from outside, carry out what it queued
 * and set the timer. */
void cfs__tr_rpc_run(cfs_transport_t *t, uint64_t now);
void cfs__tr_drive_and_arm(cfs_transport_t *t, uint64_t now);

/* transport_msg.c: a whole message from a datagram or the links. */
void cfs__tr_on_message(cfs_transport_t *t, const struct cfs_addr *from, const uint8_t *p,
                        size_t len, bool low_priority, uint64_t now);

/* version.c: which version each peer speaks, and its clock */
void cfs__ver_init(cfs_transport_t *t);
void cfs__ver_free(cfs_transport_t *t);
/* A message decoded from `from` (at our wall time wall_ms). */
void cfs__ver_heard(cfs_transport_t *t, const struct cfs_addr *from, const struct cfs_msg *m,
                    uint64_t now_us, uint64_t wall_ms);
/* The version to send dst; *ret_probe: send cfs__ver_probe too. */
uint8_t cfs__ver_for(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t now_us, bool *ret_probe);
/* Queue dst a hello at the newer version on the links. */
void cfs__ver_probe(cfs_transport_t *t, const struct cfs_addr *dst, uint64_t now_us);
/* Is this reply the answer to our probe of from? */
bool cfs__ver_probe_answer(cfs_transport_t *t, const struct cfs_addr *from, uint64_t reqid);

#endif
