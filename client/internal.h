/* client/ internals: the handle and its table of requests (client.c), and
 * what a backend (daemon.c, plain.c) is given and must do. */
#ifndef CFS_CLIENT_INTERNAL_H
#define CFS_CLIENT_INTERNAL_H

#include "client/client.h"

/* A root get with an interim answer through cfsd (daemon.c's
 * client_get_root_early; docs/PROTOCOL.md, "ctl_get_root"): a state
 * machine with no I/O. The daemon's own read quorum is the final answer;
 * before it, a daemon that speaks ctl_get_root sends the first root that
 * verifies as an interim reply. Whether it does is asked once per
 * connection with a ping on the control socket, which every daemon
 * decodes: status 0, or -EOPNOTSUPP from an older daemon, which then gets
 * a plain ctl_get. Deadlines are the table's (the sweep), so no event
 * carries a time. */
enum client__speaks {
	CLIENT_SPEAKS_UNKNOWN,    /* not asked yet on this connection */
	CLIENT_SPEAKS_ASKING,     /* the ping is out */
	CLIENT_SPEAKS_YES,        /* ctl_get_root with an interim reply */
	CLIENT_SPEAKS_NO,         /* an older daemon: ctl_get, one reply */
};
enum client__rg_state {
	CLIENT_RG_WAIT,           /* for the connection's ping answer */
	CLIENT_RG_SENT_ROOT,      /* ctl_get_root (EARLY) is out */
	CLIENT_RG_SENT_GET,       /* a plain ctl_get is out */
	CLIENT_RG_DONE,
};
enum client__rg_act {
	CLIENT_RG_NONE,           /* wait */
	CLIENT_RG_ASK,            /* send the connection's ping (once) */
	CLIENT_RG_SEND_ROOT,      /* write ctl_get_root with EARLY */
	CLIENT_RG_SEND_GET,       /* write a plain ctl_get */
	CLIENT_RG_EARLY,          /* pass the reply on to early; keep waiting */
	CLIENT_RG_ANSWER,         /* the final answer: pass it to cb */
	CLIENT_RG_FAIL,           /* fail the request with client__rg's status */
};
struct client__rg {
	enum client__rg_state state;
	bool early_given;
	int status;               /* CLIENT_RG_FAIL's */
};
/* Start, or start again once the connection's answer is known. */
enum client__rg_act client__rg_start(struct client__rg *g, enum client__speaks speaks);
/* A reply to what was sent: its type, status and flags; ok is false when
 * its bytes do not verify under the key. */
enum client__rg_act client__rg_reply(struct client__rg *g, uint8_t type, int status,
                                     uint32_t flags, bool ok);
/* What the ping's reply status says of the daemon. */
enum client__speaks client__speaks_of(int ping_status);
/* The message type the request is written as now. */
uint8_t client__rg_wire(const struct client__rg *g);

/* A request in the handle's table, from its start to its one callback.
 * type is CFS_MSG_CTL_GET, _PUT, _LOCATE, _HAVE or _REFRESH for the typed
 * requests, the control message's own type for client_call's (raw). */
struct client__req {
	uint64_t id;              /* generation << 32 | slot */
	uint8_t type;
	bool sent;                /* handed to the backend (the daemon: written) */
	bool raw;                 /* client_call: data is the encoded frame */
	bool root;                /* client_get_root */
	int error;                /* set by client__fail_soon: the sweep reports it */
	uint64_t deadline_ms;
	uint64_t started_us;
	struct cfs_id key;        /* get, put (computed), locate */
	uint32_t kind;            /* put */
	uint8_t code_m, code_n;   /* a coded get, put, locate or repair (CTL_*_CODED) */
	struct cfs_node *nodes;   /* repair: the holders (malloc'd) ... */
	uint32_t n_nodes, mask;   /* ... and the fragments to store on them */
	uint64_t lease_until;     /* put, refresh */
	uint8_t *data;            /* put: the block; have/refresh: the keys; raw: the frame */
	size_t len;
	uint32_t n_keys;
	dhash_get_cb get_cb;
	dhash_get_cb early_cb;    /* client_get_root_early's */
	struct client__rg rg;     /* client_get_root_early through cfsd */
	dhash_put_cb put_cb;
	dhash_bits_cb bits_cb;
	dhash_locate_cb locate_cb;
	client_ctl_cb ctl_cb;
	void *arg;
};

struct client__daemon;
struct client__plain;

/* A backend carries requests to the ring. Chosen once per handle. */
struct client__backend {
	/* Hand q (in the table) to the ring. A failure to even start is
	 * reported with client__fail_soon, never by a callback here. */
	void (*start)(client_t *c, struct client__req *q);
	/* The handle is being freed: close the connection or the DHash
	 * client. What is in the table is cancelled after this. */
	void (*close)(client_t *c);
	/* Free what close left for the last callbacks (the handle goes next). */
	void (*release)(client_t *c);
	bool raw_calls;           /* takes client_call's control requests */
};

struct client {
	uv_loop_t *loop;
	uint32_t timeout_ms;
	const struct client__backend *be;
	struct client__daemon *daemon; /* daemon.c's state, or NULL */
	struct client__plain *plain;   /* plain.c's state, or NULL */
	struct client__req **slot;
	uint32_t nslots, used;
	uint32_t *free_list;
	uint32_t nfree;
	uint32_t gen;
	uv_timer_t timer;         /* the sweep: deadlines, and failures due */
	bool closing, timer_closed;
	uint32_t holds;           /* backend callbacks still to come (client__hold) */
};

/* ---- the table (client.c) */

/* The request with this ID, or NULL (answered, timed out, cancelled). */
struct client__req *client__req_find(client_t *c, uint64_t id);
/* The next request in the table from slot *pos on (advancing *pos), or NULL. */
struct client__req *client__req_next(client_t *c, uint32_t *pos);

/* Take q out of the table and make its callback with the answer (a get's
 * or locate's result is passed on as it is, failed or not); q is freed.
 * While the handle closes, every answer is -ECANCELED. */
void client__answer_get(client_t *c, struct client__req *q, const struct dhash_get_result *r);
void client__answer_put(client_t *c, struct client__req *q, int status, uint64_t lease);
void client__answer_locate(client_t *c, struct client__req *q,
                           const struct dhash_locate_result *r);
void client__answer_bits(client_t *c, struct client__req *q, int status, const uint8_t *bits,
                         uint64_t lease);
void client__answer_raw(client_t *c, struct client__req *q, const struct cfs_msg *reply);
/* The same with a failure (no answer came): status < 0. */
void client__fail(client_t *c, struct client__req *q, int status);
/* Fail every request in the table: raw ones with raw_status, typed ones
 * with typed_status. */
void client__fail_all(client_t *c, int raw_status, int typed_status);
/* Fail q with status from the loop's next turn: for a request that
 * could not start, inside the call that started it. */
void client__fail_soon(client_t *c, struct client__req *q, int status);

/* A backend call whose callback is still to come keeps the handle's
 * memory (not its requests) until it is back. */
void client__hold(client_t *c);
void client__release(client_t *c);

/* ---- the backends */

extern const struct client__backend client__daemon_backend, client__plain_backend;
int client__daemon_open(client_t *c, const char *sock) CFS_WUR;
int client__plain_open(client_t *c, const struct cfs_addr *boot, size_t n,
                       uint64_t cache_push_bytes_per_s) CFS_WUR;

#endif
