/*
 * Ring maintenance (Chord; CFS section 4): the driver of each virtual
 * server's maintenance machine (maint_sm.c: joining, stabilize / notify,
 * failure detection by consecutive missed probes, finger refresh with
 * proximity neighbour selection), which sends its messages, starts its
 * lookups, arms its jittered timers and feeds the answers back; then
 * alerts, graceful leave and the maintenance messages' handlers.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "chord/maint_sm.h"

/*
 * Operator log lines: joins, lost neighbours and an unreachable
 * bootstrap at info/warn level. Under churn or a long outage they could
 * repeat without end, so each kind may log LOG_BURST lines a minute and
 * then says how many it held back. Process-wide: the lines are the
 * process's, whatever chord_t they come from.
 */
#define LOG_BURST 10
#define LOG_PERIOD_US (60ull * 1000000)
struct log_limit {
	uint64_t start_us;
	uint32_t n, held;
};
static struct log_limit lost_limit, boot_limit;

/* May one more line of this kind go out now? *ret_held: the lines held
 * back since the last one that did. */
static bool log_allowed(struct log_limit *l, uint32_t *ret_held)
{
	uint64_t now = cfs_now_us();

	if (!l->start_us || now - l->start_us >= LOG_PERIOD_US) {
		l->start_us = now;
		l->n = 0;
	}
	if (l->n >= LOG_BURST) {
		l->held++;
		return false;
	}
	l->n++;
	*ret_held = l->held;
	l->held = 0;
	return true;
}

static void log_lost(const struct cfs_node *n, const char *role, const char *why)
{
	char s[9], a[CFS_ADDR_STRLEN];
	uint32_t held;

	if (log_allowed(&lost_limit, &held))
		log_info("lost %s %s at %s: %s%s", role, cfs_id_short(&n->id, s), cfs_addr_str(&n->addr, a),
		         why, held ? " (and more lost neighbours not logged)" : "");
}

static void stab_tick(uv_timer_t *t);
static void fix_tick(uv_timer_t *t);

struct vcall {
	struct chord__vnode *v;
	struct cfs_node to;
};

struct fixcall {
	struct chord__vnode *v;
	int k;
};

static struct vcall *vcall_new(struct chord__vnode *v, const struct cfs_node *to)
{
	struct vcall *k = xcalloc(1, sizeof(*k));
	k->v = v;
	if (to)
		k->to = *to;
	return k;
}

static void on_ignore(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	free(arg);
}

/* Could n, a node at our IP but another port, really be another process
 * here? When our IP is an address of this host, a process holding that
 * port keeps us from binding it: a free port is a claim anyone may put in
 * a lookup answer (a hostile hop naming our own IDs
 * at made-up ports would push us off every index). Behind a NAT the IP is
 * not ours to bind, and the answer is believed. */
static bool port_held(const struct cfs_node *n)
{
	int fd = socket(n->addr.sa.sa_family, SOCK_DGRAM, 0);
	bool held;

	if (fd < 0)
		return true; /* cannot tell: believe */
	/* EADDRINUSE: a process holds it; EADDRNOTAVAIL: not this host's */
	held = bind(fd, &n->addr.sa, cfs_addr_len(&n->addr)) < 0;
	close(fd);
	return held;
}

/* The nodes of an answer that may claim one of our IP's indexes. */
static uint32_t credible(const chord_t *c, const struct cfs_node *in, uint32_t n,
                         struct cfs_node *out)
{
	uint32_t m = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (!cfs_addr_same_ip(&in[i].addr, &c->addr) || cfs_addr_eq(&in[i].addr, &c->addr))
			continue;
		if (port_held(&in[i]))
			out[m++] = in[i];
	}
	return m;
}

static enum auth_state mt_auth(void *ctx, const struct cfs_node *n, uint64_t now)
{
	return chord__auth_check(ctx, n, now);
}

/* ------------------------------------------------------------ join */


/* A join attempt through the next join target failed. Only the first virtual
 * server speaks for the process: V of them retrying one address is one
 * problem. */
static void log_unreachable(chord_t *c, struct chord__vnode *v, int status)
{
	uint32_t held;
	char a[CFS_ADDR_STRLEN];

	if (v == &c->v[0] && log_allowed(&boot_limit, &held))
		log_warn("%s %s is unreachable (%s; attempt %u); retrying%s",
		         c->boot_next % (c->nboot + c->npeers) < c->nboot ? "bootstrap" : "remembered peer",
		         cfs_addr_str(chord__join_target(c), a),
		         status == -EHOSTUNREACH ? "no usable answer through it"
		         : status < 0           ? strerror(-status)
		                                   : "no successor in its answer",
		         v->join_attempts, held ? " (earlier attempts not logged)" : "");
}

/*
 * The index check of a join lookup's answer (PROTOCOL.md "Node IDs"):
 * true when it holds the answer back. Our own ID alive at another address
 * of our IP means another process holds this index: take a free one and
 * join again. No virtual server joins before every index is checked.
 */
static bool index_held(chord_t *c, struct chord__vnode *v, const struct chord_lookup_result *r)
{
	struct cfs_node here[CFS_MSG_MAX_NODES + CHORD_PATH_MAX];
	uint32_t nhere = credible(c, r->succ, r->n, here);

	nhere += credible(c, r->path, r->npath, here + nhere);
	c->index_taken |= chord__index_others(&c->addr, here, nhere);
	if (chord__index_taken(&v->self, here, nhere)) {
		if (chord__index_move(c, v) == 0) {
			chord__maint_kick(v);
		} else if (!c->index_full) {
			c->index_full = true;
			if (c->cfg.on_fatal)
				c->cfg.on_fatal(c->cfg.fatal_arg, -ENOSPC);
		}
		return true;
	}
	if (!v->index_ok) {
		v->index_ok = true;
		if (!chord__index_all_ok(c))
			return true; /* index.c: nobody joins before every index is checked */
		for (uint32_t i = 0; i < c->nv; i++)
			if (&c->v[i] != v)
				chord__maint_kick(&c->v[i]);
	}
	return false;
}

/* A ring of our own: the virtual servers of this process are all in it,
 * and know each other. */
static void found_ring(chord_t *c)
{
	uint64_t now = cfs_now_us();

	for (uint32_t i = 0; i < c->nv; i++)
		c->v[i].joined = true;
	for (uint32_t i = 0; i < c->nv; i++)
		chord__table_consider(c, &c->v[i].self, now);
}

/* The join targets: the bootstrap addresses, then the remembered peers. */
const struct cfs_addr *chord__join_target(const chord_t *c)
{
	size_t n = c->nboot + c->npeers, i = c->boot_next % n;

	return i < c->nboot ? &c->boot[i] : &c->peers[i - c->nboot];
}

/* ------------------------------------------------------------ stabilize */

static void notify_succ(struct chord__vnode *v, const struct cfs_node *s)
{
	chord_t *c = v->c;

	chord__msg_init(c, v, CFS_MSG_NOTIFY, s);
	c->msg.node = v->self;
	c->msg.node.coord = c->coord;
	if (chord_call(c, s, &c->msg, c->cfg.probe_timeout_ms, on_ignore, NULL) < 0)
		return;
}

static void stab_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res);
static void fix_done(void *arg, const struct chord_lookup_result *r);
static void join_done(void *arg, const struct chord_lookup_result *r);
static void pred_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res);

/* Send a GET_PRED or PING that the machine asked for; 0 when it is on
 * its way. */
static int mt_call(struct chord__vnode *v, enum cfs_msg_type type, const struct cfs_node *to, cfs_reply_cb cb)
{
	chord_t *c = v->c;
	struct vcall *k = vcall_new(v, to);

	chord__msg_init(c, v, type, to);
	if (chord_call(c, to, &c->msg, c->cfg.probe_timeout_ms, cb, k) < 0) {
		free(k);
		return -1;
	}
	return 0;
}

/*
 * Carry out the machine's actions in order, then free its queue. The
 * order matters: a NOTIFY goes to the successor the tables name once the
 * OFFERs queued before it are done, and a message that cannot be sent is
 * reported back (chord__mtsm_unsent) before the next action, so that a
 * finger tick goes on to the next finger and re-arms last. One switch,
 * one case per action: the driver's whole vocabulary in one place.
 */
static void mt_run(struct chord__mtsm *sm, uint64_t now)
{
	struct chord__vnode *v = sm->v;
	chord_t *c = v->c;
	struct chord__mt_act a;
	char s[9], a_s[CFS_ADDR_STRLEN], why[96];

	while (chord__mt_pop(sm, &a)) {
		switch (a.type) {
		case CHORD__MTA_ASK_SUCC:
			if (mt_call(v, CFS_MSG_GET_PRED, &a.to, stab_reply) < 0)
				chord__mtsm_unsent(sm, a.type, now);
			break;
		case CHORD__MTA_NOTIFY:
			notify_succ(v, chord__vn_succ(v));
			break;
		case CHORD__MTA_PROBE_PRED:
			if (mt_call(v, CFS_MSG_PING, &a.to, pred_reply) < 0)
				chord__mtsm_unsent(sm, a.type, now);
			break;
		case CHORD__MTA_DROP:
			log_debug("node %s failed (%s)", cfs_id_short(&a.to.id, s), strerror(-a.status));
			snprintf(why, sizeof(why), "%s after %u probe%s", strerror(-a.status), a.n,
			         a.n == 1 ? "" : "s");
			log_lost(&a.to, "successor", why);
			chord__table_remove(c, &a.to.id, now);
			break;
		case CHORD__MTA_PRED_LOST:
			snprintf(why, sizeof(why), "%s after %u probe%s", strerror(-a.status), a.n,
			         a.n == 1 ? "" : "s");
			log_lost(&a.to, "predecessor", why);
			chord__auth_mark_dead(c, &a.to.id, now);
			break;
		case CHORD__MTA_OFFER: /* our successor's predecessor (stabilize) */
			chord__auth_vouched(c, &a.to, now);
			chord__table_offer(c, &a.to, now);
			break;
		case CHORD__MTA_CONSIDER:
			chord__table_consider(c, &a.to, now);
			break;
		case CHORD__MTA_LOOKUP_FINGER: {
			struct fixcall *f = xcalloc(1, sizeof(*f));
			struct chord_lookup_opts o = { .mode = CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY),
			                               .nsucc = c->cfg.pns };
			f->v = v;
			f->k = a.k;
			if (chord__lookup_start(c, v, NULL, &a.key, &o, fix_done, f) < 0) {
				free(f);
				chord__mtsm_unsent(sm, a.type, now);
			}
			break;
		}
		case CHORD__MTA_ARM_FIX:
			uv_timer_start(&v->fix_timer, fix_tick, a.jitter ? chord__jitter_ms(c, a.ms) : a.ms, 0);
			break;
		case CHORD__MTA_ARM_STAB:
			uv_timer_start(&v->stab_timer, stab_tick, a.jitter ? chord__jitter_ms(c, a.ms) : a.ms, 0);
			break;
		case CHORD__MTA_LOOKUP_JOIN: {
			struct chord_lookup_opts o = { .mode = CHORD_MODE(CHORD_ITERATIVE, CHORD_GREEDY),
			                               .nsucc = c->cfg.nsucc };
			if (chord__lookup_start(c, v, chord__join_target(c), &v->self.id, &o, join_done, v) < 0)
				chord__mtsm_unsent(sm, a.type, now);
			break;
		}
		case CHORD__MTA_JOIN_FAILED:
			log_debug("vnode %u: join attempt failed: %s", v->index, strerror(-a.status));
			log_unreachable(c, v, a.status);
			c->boot_next++;
			break;
		case CHORD__MTA_NEXT_TARGET:
			c->boot_next++;
			break;
		case CHORD__MTA_FOUND_RING:
			if (a.founded) {
				log_info("no bootstrap address or remembered peer answered (%u tried): starting "
				         "a new ring; the ring check keeps looking for them", a.n);
				c->founded = true;
			}
			found_ring(c);
			break;
		case CHORD__MTA_ADOPTED:
			chord__maint_kick(v);
			log_debug("vnode %u (%s): joined, successor %s", v->index, cfs_id_short(&v->self.id, s),
			          cfs_id_short(&a.to.id, (char[9]){ 0 }));
			break;
		case CHORD__MTA_JOINED:
			log_info("vnode %u (%s): joined the ring after %u attempt%s; successor %s at %s",
			         v->index, cfs_id_short(&v->self.id, s), a.n, a.n == 1 ? "" : "s",
			         cfs_id_short(&a.to.id, (char[9]){ 0 }), cfs_addr_str(&a.to.addr, a_s));
			break;
		}
	}
	cfs_actq_free(&sm->q);
}

static void stab_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct vcall *k = arg;
	struct chord__vnode *v = k->v;
	struct chord__mtsm sm = { .v = v, .auth = mt_auth, .ctx = v->c };
	uint64_t now = cfs_now_us();

	if (status != -ECANCELED && !v->c->freeing) {
		chord__mtsm_succ_reply(&sm, &k->to, status, status < 0 ? NULL : reply, now);
		mt_run(&sm, now);
	}
	free(k);
}

static void pred_reply(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct vcall *k = arg;
	struct chord__vnode *v = k->v;
	struct chord__mtsm sm = { .v = v, .auth = mt_auth, .ctx = v->c };
	uint64_t now = cfs_now_us();

	if (status != -ECANCELED && !v->c->freeing) {
		chord__mtsm_pred_reply(&sm, &k->to, status, now);
		mt_run(&sm, now);
	}
	free(k);
}

/* A join lookup of our own ID came back; the index check first. */
static void join_done(void *arg, const struct chord_lookup_result *r)
{
	struct chord__vnode *v = arg;
	chord_t *c = v->c;
	struct chord__mtsm sm = { .v = v, .auth = mt_auth, .ctx = c };
	uint64_t now = cfs_now_us();
	int status = c->freeing ? -ECANCELED : r->status;
	bool held = status >= 0 && r->n > 0 && index_held(c, v, r);

	chord__mtsm_join_answer(&sm, status, r->succ, r->n, held, now);
	mt_run(&sm, now);
}

static void stab_tick(uv_timer_t *t)
{
	struct chord__vnode *v = container_of(t, struct chord__vnode, stab_timer);
	struct chord__mtsm sm = { .v = v, .auth = mt_auth, .ctx = v->c };
	chord_t *c = v->c;
	uint64_t now = cfs_now_us();

	if (c->frozen || c->leaving || c->freeing)
		return;
	v->stab_ms = uv_now(c->loop);
	chord__mtsm_tick(&sm, now);
	mt_run(&sm, now);
}

/*
 * Bring the next stabilization round forward. A kick never postpones a round
 * already due sooner, and kicked rounds stay KICK_GAP_MS apart: restarting
 * the timer on every kick let a steady stream of them (each message from a
 * node that would lengthen a short list is one) push the round back forever,
 * and the short lists that cause the kicks were never repaired.
 */
#define KICK_GAP_MS 10

void chord__maint_kick(struct chord__vnode *v)
{
	chord_t *c = v->c;

	if (!c->started || c->frozen || c->leaving || c->freeing)
		return;
	uint64_t now = uv_now(c->loop), at = v->stab_ms + KICK_GAP_MS;
	uint64_t in = at > now ? at - now : 0;
	if (uv_is_active((uv_handle_t *)&v->stab_timer) && uv_timer_get_due_in(&v->stab_timer) <= in)
		return;
	uv_timer_start(&v->stab_timer, stab_tick, in, 0);
}

/* ------------------------------------------------------------ fingers */

static void fix_done(void *arg, const struct chord_lookup_result *r)
{
	struct fixcall *f = arg;
	struct chord__vnode *v = f->v;
	struct chord__mtsm sm = { .v = v, .auth = mt_auth, .ctx = v->c };
	uint64_t now = cfs_now_us();

	if (r->status != -ECANCELED && !v->c->freeing) {
		chord__mtsm_finger_answer(&sm, f->k, r->status, r->succ, r->n, now);
		mt_run(&sm, now);
	}
	free(f);
}

static void fix_tick(uv_timer_t *t)
{
	struct chord__vnode *v = container_of(t, struct chord__vnode, fix_timer);
	struct chord__mtsm sm = { .v = v, .auth = mt_auth, .ctx = v->c };
	chord_t *c = v->c;
	uint64_t now = cfs_now_us();

	if (c->frozen || c->leaving || c->freeing)
		return;
	chord__mtsm_fix_tick(&sm, now);
	mt_run(&sm, now);
}

void chord__maint_start(chord_t *c)
{
	for (uint32_t i = 0; i < c->nv; i++) {
		struct chord__vnode *v = &c->v[i];
		uv_timer_start(&v->stab_timer, stab_tick, i == 0 ? 0 : 20 + 10 * i, 0);
		uv_timer_start(&v->fix_timer, fix_tick, chord__jitter_ms(c, 200), 0);
	}
}

void chord__maint_refresh_fingers(chord_t *c)
{
	for (uint32_t i = 0; i < c->nv; i++) {
		struct chord__vnode *v = &c->v[i];
		v->fingers_done = false;
		v->next_finger = NFINGERS - 1;
		if (c->started && !c->frozen && !c->leaving && !c->freeing)
			uv_timer_start(&v->fix_timer, fix_tick, 1, 0);
	}
}

void chord__maint_stop(chord_t *c)
{
	for (uint32_t i = 0; i < c->nv; i++) {
		uv_timer_stop(&c->v[i].stab_timer);
		uv_timer_stop(&c->v[i].fix_timer);
	}
}

/* ------------------------------------------------------------ leave */

/*
 * Graceful leave (Chord; CFS 4.4) with a cookie round trip: each neighbour
 * answers our first LEAVE with a cookie (CFS_LEAVE_F_COOKIE) and acts only
 * on the second, which carries it. One extra round trip per neighbour, in
 * parallel; done runs once every neighbour has answered or timed out.
 */
struct leaving {
	chord_t *c;
	struct cfs_fanin calls;   /* LEAVEs out, with chord__maint_leave's hold */
	void (*done)(void *);
	void *arg;
};

struct leave_call {
	struct leaving *l;
	struct chord__vnode *v;
	struct cfs_node to;
	bool retried;
};

static void leave_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res);

static void leave_end(struct leaving *l)
{
	if (cfs_fanin_end(&l->calls, 0)) {
		l->done(l->arg);
		free(l);
	}
}

/* Send k's LEAVE (with cookie, or none when NULL); 0 when it is on its way. */
static int leave_send(struct leave_call *k, const uint8_t *cookie)
{
	chord_t *c = k->l->c;
	struct chord__vnode *v = k->v;

	chord__msg_init(c, v, CFS_MSG_LEAVE, &k->to);
	c->msg.has_pred = v->pred.valid && !chord__local(c, &v->pred.n.id);
	if (c->msg.has_pred)
		c->msg.pred = v->pred.n;
	for (uint32_t s = 0; s < v->nsuccs && c->msg.n_nodes < CFS_MSG_MAX_NODES; s++)
		if (!chord__local(c, &v->succ[s].n.id))
			c->msg.nodes[c->msg.n_nodes++] = v->succ[s].n;
	if (cookie)
		memcpy(c->msg.nonce, cookie, CFS_NONCE_BYTES);
	return chord_call(c, &k->to, &c->msg, c->cfg.probe_timeout_ms, leave_reply, k);
}

static void leave_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct leave_call *k = arg;
	struct leaving *l = k->l;

	/* The neighbour asks us to prove the address: once, with its cookie. */
	if (status == 0 && reply && (reply->flags & CFS_LEAVE_F_COOKIE) && !k->retried &&
	    !l->c->freeing) {
		k->retried = true;
		if (leave_send(k, reply->nonce) == 0)
			return;
	}
	free(k);
	leave_end(l);
}

void chord__maint_leave(chord_t *c, void (*done)(void *), void *arg)
{
	struct leaving *l = xcalloc(1, sizeof(*l));

	l->c = c;
	l->done = done;
	l->arg = arg;
	cfs_fanin_add(&l->calls);
	c->leaving = true;
	chord__maint_stop(c);
	chord__merge_stop(c);
	chord__reach_stop(c);
	chord__sweep_stop(c);
	chord__lookup_cancel_all(c);
	for (uint32_t i = 0; i < c->nv; i++) {
		struct chord__vnode *v = &c->v[i];
		const struct cfs_node *to[2] = { v->nsuccs ? &v->succ[0].n : NULL,
		                                 v->pred.valid ? &v->pred.n : NULL };
		for (int j = 0; j < 2; j++) {
			if (!to[j] || chord__local(c, &to[j]->id) ||
			    (j == 1 && to[0] && cfs_id_eq(&to[0]->id, &to[1]->id)))
				continue;
			struct leave_call *k = xcalloc(1, sizeof(*k));
			k->l = l;
			k->v = v;
			k->to = *to[j];
			cfs_fanin_add(&l->calls);
			if (leave_send(k, NULL) < 0) {
				free(k);
				leave_end(l);
			}
		}
	}
	/* Drop our own reference: with no neighbour to tell, done runs now. */
	leave_end(l);
}

void chord__maint_leave_apply(chord_t *c, struct chord__vnode *v, const struct cfs_node *sender,
                              const struct cfs_msg *req, uint64_t now)
{
	bool was_pred = v->pred.valid && cfs_id_eq(&v->pred.n.id, &sender->id);

	c->leave_applied++;
	if (chord__table_contains(c, &sender->id))
		log_lost(sender, was_pred ? "predecessor" : "neighbour", "it left the ring");
	chord__table_remove(c, &sender->id, now);
	/* What a leaving node names is authenticated like anything offered,
	 * charged to its address (a LEAVE offering 64 nodes once
	 * cost 64 unbounded AUTH calls). */
	if (was_pred && req->has_pred && !cfs_id_eq(&req->pred.id, &v->self.id) &&
	    chord__auth_check_from(c, &req->pred, &sender->addr, now) == AUTH_OK)
		chord__table_consider(c, &req->pred, now);
	for (uint32_t i = 0; i < req->n_nodes; i++)
		if (!cfs_id_eq(&req->nodes[i].id, &v->self.id) &&
		    chord__auth_check_from(c, &req->nodes[i], &sender->addr, now) == AUTH_OK)
			chord__table_consider(c, &req->nodes[i], now);
}

/* Is id in a table of ours at exactly address a? A LEAVE may remove only
 * the node we know at the address it came from: with the port out of the
 * ID (PROTOCOL.md "Node IDs") another process on the same IP could claim the ID. */
static bool known_at(const chord_t *c, const struct cfs_id *id, const struct cfs_addr *a)
{
	for (uint32_t vi = 0; vi < c->nv; vi++) {
		const struct chord__vnode *u = &c->v[vi];
		for (uint32_t i = 0; i < u->nsuccs; i++)
			if (cfs_id_eq(&u->succ[i].n.id, id))
				return cfs_addr_eq(&u->succ[i].n.addr, a);
		if (u->pred.valid && cfs_id_eq(&u->pred.n.id, id))
			return cfs_addr_eq(&u->pred.n.addr, a);
		for (int k = 0; k < NFINGERS; k++)
			if (u->finger[k].valid && cfs_id_eq(&u->finger[k].n.id, id))
				return cfs_addr_eq(&u->finger[k].n.addr, a);
	}
	return false;
}

/* A LEAVE (QUIC Retry / DNS cookies, RFC 7873: address validation). It was
 * believed on its source address alone, and ten forged datagrams a second
 * kept a live node out of its neighbours' tables. Now a LEAVE
 * takes effect only with a cookie that we sent to the sender's address;
 * without one we answer with one and change nothing. */
static void handle_leave(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                         const struct cfs_reply_to *from, const struct cfs_node *sender)
{
	uint64_t now = cfs_now_us();
	enum chord__leave_verdict vd = LEAVE_STRANGER;

	if (sender)
		vd = chord__leave_judge(&c->cookies, now, sender, known_at(c, &sender->id, &from->addr),
		                        req->nonce);
	chord__msg_init(c, v, CFS_MSG_LEAVE, NULL);
	switch (vd) {
	case LEAVE_APPLY:
		chord__maint_leave_apply(c, v, sender, req, now);
		chord__msg_init(c, v, CFS_MSG_LEAVE, NULL);
		break;
	case LEAVE_STRANGER:
		c->leave_stranger++; /* nothing of ours to change: done */
		break;
	case LEAVE_NO_COOKIE:
	case LEAVE_BAD_COOKIE:
		if (vd == LEAVE_NO_COOKIE)
			c->leave_no_cookie++;
		else
			c->leave_bad_cookie++;
		c->msg.flags = CFS_LEAVE_F_COOKIE;
		chord__cookie_make(&c->cookies, now, sender, c->msg.nonce);
		break;
	}
	chord__reply_simple(c, from, &c->msg);
}

/* ------------------------------------------------------------ handlers */

struct alert {
	chord_t *c;
	struct cfs_id id;
};

static void alert_probe(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	struct alert *a = arg;

	if (status != -ECANCELED && !a->c->freeing && status < 0 && status != -EPERM)
		chord__table_remove(a->c, &a->id, cfs_now_us());
	free(a);
}

/* CFS 4.4 / Fig. 5: a lookup's originator tells us that a node we named
 * did not answer. Believe no one: if we know the node, ping it ourselves
 * and drop it only if it is silent (alert_probe). */
static void handle_alert(chord_t *c, struct chord__vnode *v, const struct cfs_id *dead)
{
	const struct chord__lnode *le = chord__learned_find(&c->learned, dead);

	c->alerts_in++;
	if ((!le && !chord__table_contains(c, dead)) || chord__local(c, dead))
		return;
	struct alert *a = xcalloc(1, sizeof(*a));
	const struct cfs_node *n = NULL;
	for (uint32_t vi = 0; vi < c->nv && !n; vi++) {
		struct chord__vnode *u = &c->v[vi];
		for (uint32_t i = 0; i < u->nsuccs && !n; i++)
			if (cfs_id_eq(&u->succ[i].n.id, dead))
				n = &u->succ[i].n;
		for (int k = 0; k < NFINGERS && !n; k++)
			if (u->finger[k].valid && cfs_id_eq(&u->finger[k].n.id, dead))
				n = &u->finger[k].n;
		if (!n && u->pred.valid && cfs_id_eq(&u->pred.n.id, dead))
			n = &u->pred.n;
	}
	if (!n && le) /* only learned: we name it to askers as a next hop */
		n = &le->n;
	a->c = c;
	a->id = *dead;
	if (n) {
		struct cfs_node to = *n;
		chord__msg_init(c, v, CFS_MSG_PING, &to);
		if (chord_call(c, &to, &c->msg, c->cfg.probe_timeout_ms, alert_probe, a) == 0)
			a = NULL;
	}
	free(a);
}

/*
 * The maintenance requests a member answers: its predecessor and
 * successor list (only once joined), a NOTIFY (Chord Fig. 7: only the
 * node itself may say it is our predecessor), an ALERT, a LEAVE. A
 * request from our predecessor is news of it, and its GET_PRED or NOTIFY
 * proves it takes us for its successor (pred_sure).
 */
void chord__maint_handle(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                         const struct cfs_reply_to *from)
{
	struct cfs_node sender = { 0 };
	bool member = req->has_from;
	uint64_t now = cfs_now_us();

	if (member) {
		sender.id = req->from_id;
		sender.addr = from->addr;
		sender.vindex = req->from_vindex;
		sender.coord = req->coord;
		/* A node we hold dead is back (restarted in place) and has
		 * joined: only a joined virtual server's stabilization sends
		 * these. Not on its join lookup: taken back before it has
		 * joined, it answers our stabilization with no list and is
		 * dropped again. */
		if (req->type == CFS_MSG_NOTIFY || req->type == CFS_MSG_GET_PRED)
			chord__auth_heard(c, &sender, now);
		if (v->pred.valid && cfs_id_eq(&v->pred.n.id, &sender.id)) {
			v->pred_heard_us = now;
			/* GET_PRED and NOTIFY come only from a node that takes
			 * us for its successor. */
			if ((req->type == CFS_MSG_GET_PRED || req->type == CFS_MSG_NOTIFY) &&
			    cfs_addr_eq(&v->pred.n.addr, &from->addr))
				v->pred_sure = true;
		}
	}
	switch (req->type) {
	case CFS_MSG_GET_PRED:
	case CFS_MSG_GET_SUCCS:
		if (!v->joined) {
			/* No list yet: an empty one would cut the asker's list
			 * down to us (a restarted server is asked at once by the
			 * node before it). Asked again next round. */
			(void)cfs_transport_reply_error(c->tr, from, -EAGAIN);
			return;
		}
		chord__msg_init(c, v, (enum cfs_msg_type)req->type, NULL);
		if (req->type == CFS_MSG_GET_PRED && v->pred.valid) {
			c->msg.has_pred = true;
			c->msg.pred = v->pred.n;
		}
		for (uint32_t i = 0; i < v->nsuccs; i++)
			c->msg.nodes[c->msg.n_nodes++] = v->succ[i].n;
		chord__reply_simple(c, from, &c->msg);
		return;
	case CFS_MSG_NOTIFY:
		/* Only the node itself may say it is our predecessor. */
		if (member && cfs_id_eq(&req->node.id, &sender.id) &&
		    cfs_addr_eq(&req->node.addr, &from->addr) && req->node.vindex == sender.vindex &&
		    !cfs_id_eq(&sender.id, &v->self.id) &&
		    (!v->pred.valid || cfs_id_in_oo(&sender.id, &v->pred.n.id, &v->self.id)))
			if (chord__auth_check_from(c, &sender, &from->addr, now) == AUTH_OK) {
				chord__table_consider(c, &sender, now);
				if (v->pred.valid && cfs_id_eq(&v->pred.n.id, &sender.id))
					v->pred_sure = true;
			}
		break;
	case CFS_MSG_ALERT:
		handle_alert(c, v, &req->key);
		break;
	case CFS_MSG_LEAVE:
		handle_leave(c, v, req, from, member ? &sender : NULL);
		return;
	default:
		(void)cfs_transport_reply_error(c->tr, from, -EOPNOTSUPP);
		return;
	}
	chord__msg_init(c, v, (enum cfs_msg_type)req->type, NULL);
	chord__reply_simple(c, from, &c->msg);
}
