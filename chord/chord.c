/*
 * A process's ring state: virtual servers, request dispatch, the RPC
 * wrapper that feeds Vivaldi and the neighbour latencies, and status.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

void chord_config_default(struct chord_config *c)
{
	memset(c, 0, sizeof(*c));
	c->vnodes = 1;
	c->nsucc = 16;
	c->stabilize_ms = 1000;
	c->fix_fingers_ms = 500;
	c->probe_timeout_ms = 750;
	c->fail_probes = 3;
	c->pns = 16;
	c->learned_max = CHORD_LEARNED_DEFAULT;
	c->guess_spacings = CHORD_GUESS_DEFAULT;
	c->sweep_ms = CHORD_SWEEP_MS_DEFAULT;
}

static const char *const mode_sels[] = { "greedy", "cost", "nonlinear" };

int chord_mode_parse(const char *s, uint32_t *ret)
{
	static const char *const algos[] = { "iterative", "recursive" };
	const char *comma = strchr(s, ',');
	size_t alen = comma ? (size_t)(comma - s) : strlen(s);
	uint32_t a = 99, sel = CHORD_GREEDY, par = 0, pred = 0;
	bool have_sel = false;

	for (uint32_t i = 0; i < CFS_ARRAY_SIZE(algos); i++)
		if (strlen(algos[i]) == alen && strncmp(s, algos[i], alen) == 0)
			a = i;
	if (a == 99)
		return -EINVAL;
	while (comma) {
		const char *w = comma + 1;
		comma = strchr(w, ',');
		size_t len = comma ? (size_t)(comma - w) : strlen(w);
		bool known = false;
		for (uint32_t i = 0; i < CFS_ARRAY_SIZE(mode_sels); i++)
			if (!have_sel && strlen(mode_sels[i]) == len && strncmp(w, mode_sels[i], len) == 0) {
				sel = i;
				have_sel = known = true;
			}
		if (!known && len == 4 && strncmp(w, "pred", 4) == 0 && !pred) {
			pred = CHORD_MODE_TO_PRED;
			known = true;
		}
		if (!known && len == 2 && w[0] == 'p' && w[1] >= '1' && w[1] <= '0' + CHORD_PAR_MAX &&
		    !par && a == CHORD_ITERATIVE) {
			par = (uint32_t)(w[1] - '0');
			known = true;
		}
		if (!known)
			return -EINVAL;
	}
	*ret = CHORD_MODE_WITH_PAR(CHORD_MODE(a, sel), par > 1 ? par : 0) | pred;
	return 0;
}

const char *chord_mode_name(uint32_t mode, char buf[static 48])
{
	uint32_t s = CHORD_MODE_SELECT(mode), p = CHORD_MODE_PAR(mode);
	int n = snprintf(buf, 48, "%s,%s", CHORD_MODE_ALGO(mode) == CHORD_RECURSIVE ? "recursive" : "iterative",
	                 s < 3 ? mode_sels[s] : "?");
	if (p > 1)
		n += snprintf(buf + n, 48 - (size_t)n, ",p%u", p);
	if (mode & CHORD_MODE_TO_PRED)
		snprintf(buf + n, 48 - (size_t)n, ",pred");
	return buf;
}

bool chord_mode_ok(uint32_t mode)
{
	return CHORD_MODE_ALGO(mode) <= CHORD_RECURSIVE && CHORD_MODE_SELECT(mode) <= CHORD_NONLINEAR &&
	       CHORD_MODE_PAR(mode) <= CHORD_PAR_MAX && !(mode & ~CHORD_MODE_KNOWN) &&
	       (CHORD_MODE_PAR(mode) <= 1 || CHORD_MODE_ALGO(mode) == CHORD_ITERATIVE);
}

uint64_t chord__jitter_ms(chord_t *c, uint32_t mean_ms)
{
	/* Uniform in [0.5, 1.5) × mean: neighbours never fall into lockstep. */
	return (uint64_t)((double)mean_ms * (0.5 + cfs_rng_double(&c->rng))) + 1;
}

/* CFS 4.4 / PROTOCOL.md "Node IDs": an ID must be H(IP ‖ index) of the address it
 * claims, with the index below the maximum, so one IP names at most
 * CFS_VNODE_INDEX_MAX ring positions whatever ports it uses. */
bool chord__node_id_ok(chord_t *c, const struct cfs_node *n)
{
	struct cfs_id id;

	if (n->vindex >= CFS_VNODE_INDEX_MAX)
		return false;
	cfs_node_id(&id, &n->addr, n->vindex);
	return cfs_id_eq(&id, &n->id);
}

struct chord__vnode *chord__local(const chord_t *c, const struct cfs_id *id)
{
	for (uint32_t i = 0; i < c->nv; i++)
		if (cfs_id_eq(&c->v[i].self.id, id))
			return &c->v[i];
	return NULL;
}

void chord__msg_init(chord_t *c, struct chord__vnode *v, enum cfs_msg_type type, const struct cfs_node *to)
{
	if (!v)
		v = &c->v[0];
	cfs_msg_init(&c->msg, type);
	c->msg.has_from = !c->client; /* a plain client is nobody's neighbour */
	c->msg.from_id = v->self.id;
	c->msg.from_vindex = v->self.vindex;
	if (to) {
		c->msg.has_to = true;
		c->msg.to_id = to->id;
	}
}

void chord__reply_simple(chord_t *c, const struct cfs_reply_to *from, struct cfs_msg *m)
{
	(void)cfs_transport_reply(c->tr, from, m);
}

/* ------------------------------------------------------------ RPC wrapper */

struct ccall {
	chord_t *c;
	cfs_reply_cb cb;
	void *arg;
	struct cfs_id to;
	bool has_to;
};

static void maybe_release(chord_t *c);

static void ccall_done(void *p, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct ccall *k = p;
	chord_t *c = k->c;

	c->inflight--;
	if (c->freeing) {
		k->cb(k->arg, -ECANCELED, NULL, res);
	} else {
		if (status == 0 && reply) {
			chord__vivaldi_update(c, &reply->coord, res->rtt_us);
			double ms = (double)res->rtt_us / 1000.0;
			c->avg_rtt_ms = c->avg_rtt_ms > 0 ? c->avg_rtt_ms + (ms - c->avg_rtt_ms) / 32 : ms;
			if (k->has_to)
				chord__table_note_rtt(c, &k->to, (uint32_t)(res->rtt_us > UINT32_MAX ? UINT32_MAX : res->rtt_us));
		}
		k->cb(k->arg, status, reply, res);
	}
	free(k);
	maybe_release(c);
}

/*
 * A fixed timeout to a node covers SLOW_RTTS of its round trips. The
 * maintenance calls' fixed timeouts (AUTH 1,000 ms, stabilization 750 ms)
 * suit most paths; a member every path of which is longer (a satellite
 * link, a far access network) would see every check and stabilization
 * call of its neighbours time out and never be in their lists. A
 * stranger's answer can take two round trips (a token first), hence
 * three. A measured round trip may stretch the timeout up to
 * SLOW_TIMEOUT_MAX_MS; one predicted from the coordinate a node (or
 * whoever named it) sent, at most to twice the fixed timeout, so that
 * made-up coordinates cannot hold the bounded AUTH checks much longer
 * than before. A leaving node keeps the fixed timeouts: its LEAVEs bound
 * how long a shutdown takes.
 */
#define SLOW_RTTS 3
#define SLOW_TIMEOUT_MAX_MS 5000

static uint32_t fixed_timeout_ms(const chord_t *c, const struct cfs_node *to, uint32_t ms)
{
	uint64_t m = cfs_transport_peer_srtt_us(c->tr, &to->addr), need, cap = SLOW_TIMEOUT_MAX_MS;

	if (c->leaving)
		return ms;
	if (!m) {
		m = chord_predict_rtt_us(c, &to->coord);
		cap = 2 * (uint64_t)ms;
	}
	need = SLOW_RTTS * m / 1000;
	if (need > cap)
		need = cap;
	return need > ms ? (uint32_t)need : ms;
}

static int call_addr(chord_t *c, const struct cfs_addr *a, const struct cfs_node *to,
                     struct cfs_msg *req, uint32_t timeout_ms, bool background, bool low,
                     bool pad, cfs_reply_cb cb, void *arg)
{
	struct ccall *k;
	struct cfs_call_opts o = { .timeout_ms = timeout_ms, .background = background,
	                           .low_priority = low, .pad = pad };
	int r;

	if (c->freeing)
		return -ECANCELED;
	k = xcalloc(1, sizeof(*k));
	k->c = c;
	k->cb = cb;
	k->arg = arg;
	if (to) {
		k->to = to->id;
		k->has_to = true;
		if (!timeout_ms) {
			uint64_t p = chord_predict_rtt_us(c, &to->coord);
			o.predicted_rtt_us = (uint32_t)(p > UINT32_MAX ? UINT32_MAX : p);
		} else {
			o.timeout_ms = fixed_timeout_ms(c, to, timeout_ms);
		}
	}
	if ((r = cfs_transport_call(c->tr, a, req, &o, ccall_done, k)) < 0) {
		free(k);
		return r;
	}
	c->inflight++;
	return 0;
}

int chord_call(chord_t *c, const struct cfs_node *to, struct cfs_msg *req, uint32_t timeout_ms,
               cfs_reply_cb cb, void *arg)
{
	return call_addr(c, &to->addr, to, req, timeout_ms, false, false, false, cb, arg);
}

int chord_call_low(chord_t *c, const struct cfs_node *to, struct cfs_msg *req, uint32_t timeout_ms,
                   cfs_reply_cb cb, void *arg)
{
	return call_addr(c, &to->addr, to, req, timeout_ms, false, true, false, cb, arg);
}

int chord__call_background(chord_t *c, const struct cfs_node *to, struct cfs_msg *req,
                           uint32_t timeout_ms, cfs_reply_cb cb, void *arg)
{
	return call_addr(c, &to->addr, to, req, timeout_ms, true, false, false, cb, arg);
}

cfs_transport_t *chord_transport(const chord_t *c)
{
	return c->tr;
}

int chord__call_addr(chord_t *c, const struct cfs_addr *a, struct cfs_msg *req,
                     uint32_t timeout_ms, cfs_reply_cb cb, void *arg)
{
	return call_addr(c, a, NULL, req, timeout_ms, false, false, false, cb, arg);
}

int chord__call_ask(chord_t *c, const struct cfs_addr *a, const struct cfs_node *to,
                    struct cfs_msg *req, uint32_t timeout_ms, cfs_reply_cb cb, void *arg)
{
	return call_addr(c, a, to, req, timeout_ms, false, false, c->client, cb, arg);
}

/* ------------------------------------------------------------ lifetime */

int chord_new(uv_loop_t *loop, cfs_transport_t *t, const struct cfs_addr *self,
              const struct chord_config *cfg, chord_t **ret)
{
	chord_t *c;

	if (cfg->vnodes < 1 || cfg->vnodes > CHORD_VNODES_MAX)
		return log_error_errno(-EINVAL, "virtual servers must number 1 to %d", CHORD_VNODES_MAX);
	if (cfg->nsucc < 1 || cfg->nsucc > CHORD_SUCC_MAX)
		return log_error_errno(-EINVAL, "the successor list holds 1 to %d entries", CHORD_SUCC_MAX);
	c = xcalloc(1, sizeof(*c));
	c->loop = loop;
	c->tr = t;
	c->cfg = *cfg;
	if (!c->cfg.stabilize_ms)
		c->cfg.stabilize_ms = 1000;
	if (!c->cfg.fix_fingers_ms)
		c->cfg.fix_fingers_ms = 500;
	if (!c->cfg.probe_timeout_ms)
		c->cfg.probe_timeout_ms = 750;
	if (!c->cfg.fail_probes)
		c->cfg.fail_probes = 3;
	if (!c->cfg.pns)
		c->cfg.pns = 1;
	if (!c->cfg.merge_ms)
		c->cfg.merge_ms = 30000;
	else if (c->cfg.merge_ms == CHORD_MERGE_OFF)
		c->cfg.merge_ms = 0;
	if (c->cfg.reach_ms == CHORD_MERGE_OFF)
		c->cfg.reach_ms = 0;
	if (c->cfg.pns > c->cfg.nsucc)
		c->cfg.pns = c->cfg.nsucc;
	c->addr = *self;
	cfs_rng_seed(&c->rng, cfg->seed ? cfg->seed : cfs_now_us() ^ ((uint64_t)cfs_addr_port(self) << 32));
	c->coord_err = 1.0;
	c->nv = cfg->vnodes;
	c->v = xcalloc(c->nv, sizeof(*c->v));
	for (uint32_t i = 0; i < c->nv; i++) {
		struct chord__vnode *v = &c->v[i];
		v->c = c;
		v->index = i;
		v->self.addr = *self;
		v->self.vindex = i;
		cfs_node_id(&v->self.id, self, i);
		v->next_finger = NFINGERS - 1;
		uv_timer_init(loop, &v->stab_timer);
		uv_timer_init(loop, &v->fix_timer);
		c->handles += 2;
	}
	uv_timer_init(loop, &c->lk_timer);
	uv_timer_init(loop, &c->merge_timer);
	c->merge_timer.data = c;
	uv_timer_init(loop, &c->reach_timer);
	c->reach_timer.data = c;
	uv_timer_init(loop, &c->sweep_timer);
	c->sweep_timer.data = c;
	c->handles += 4;
	chord__auth_init(c, cfs_now_us());
	chord__learned_init(&c->learned, c->cfg.learned_max < CHORD_LEARNED_MAX ? c->cfg.learned_max
	                                                                        : CHORD_LEARNED_MAX);
	cfs_transport_set_coord(t, &c->coord);
	*ret = c;
	return 0;
}

void chord_start(chord_t *c, const struct cfs_addr *bootstrap, size_t n)
{
	if (c->started)
		return;
	c->started = true;
	c->nboot = n;
	c->boot = n ? xmemdup(bootstrap, n * sizeof(*bootstrap)) : NULL;
	chord__maint_start(c);
	chord__merge_start(c);
	chord__reach_start(c);
	chord__sweep_start(c);
}

void chord_leave(chord_t *c, void (*done)(void *arg), void *arg)
{
	chord__maint_leave(c, done, arg);
}

static void on_timer_closed(uv_handle_t *h)
{
	chord_t *c = h->data;

	c->handles--;
	maybe_release(c);
}

static void maybe_release(chord_t *c)
{
	if (!c->freeing || c->inflight > 0 || c->handles > 0 || c->released)
		return;
	c->released = true;
	chord__auth_free(c);
	chord__learned_free(&c->learned);
	free(c->unproven);
	free(c->arcs);
	free(c->v);
	free(c->boot);
	free(c);
}

void chord_free(chord_t *c)
{
	if (!c || c->freeing)
		return;
	c->freeing = true;
	chord__lookup_cancel_all(c);
	cfs_transport_set_coord(c->tr, NULL);
	for (uint32_t i = 0; i < c->nv; i++) {
		struct chord__vnode *v = &c->v[i];
		v->stab_timer.data = c;
		v->fix_timer.data = c;
		uv_close((uv_handle_t *)&v->stab_timer, on_timer_closed);
		uv_close((uv_handle_t *)&v->fix_timer, on_timer_closed);
	}
	c->lk_timer.data = c;
	uv_close((uv_handle_t *)&c->lk_timer, on_timer_closed);
	uv_close((uv_handle_t *)&c->merge_timer, on_timer_closed);
	uv_close((uv_handle_t *)&c->reach_timer, on_timer_closed);
	uv_close((uv_handle_t *)&c->sweep_timer, on_timer_closed);
}

void chord_set_has_block(chord_t *c, chord_has_block_fn fn, void *arg)
{
	c->has_block = fn;
	c->has_block_arg = arg;
}

void chord_freeze(chord_t *c, bool frozen)
{
	if (c->frozen == frozen)
		return;
	c->frozen = frozen;
	if (frozen) {
		chord__maint_stop(c);
		chord__merge_stop(c);
		chord__reach_stop(c);
		chord__sweep_stop(c);
	} else if (c->started) {
		chord__maint_start(c);
		chord__merge_start(c);
		chord__reach_start(c);
		chord__sweep_start(c);
	}
}

void chord_refresh_fingers(chord_t *c)
{
	chord__maint_refresh_fingers(c);
}

void chord_stabilize_now(chord_t *c)
{
	for (uint32_t i = 0; i < c->nv; i++)
		chord__maint_kick(&c->v[i]);
}

/* ------------------------------------------------------------ requests */

static bool hostile_sender(chord_t *c, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	/* A ring member names itself; its ID must hash from the address the
	 * datagram came from, or nothing it says is believed. */
	if (!req->has_from)
		return false;
	struct cfs_node n = { .id = req->from_id, .addr = from->addr, .vindex = req->from_vindex };
	return !chord__node_id_ok(c, &n);
}

/* Echo an AUTH's nonce: this is us, at this address. Not once we have
 * sent our LEAVE: nobody takes us back into a table then. */
static void answer_auth(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                        const struct cfs_reply_to *from)
{
	if (c->leaving) {
		(void)cfs_transport_reply_error(c->tr, from, -ESHUTDOWN);
		return;
	}
	chord__msg_init(c, v, CFS_MSG_AUTH, NULL);
	memcpy(c->msg.nonce, req->nonce, sizeof(c->msg.nonce));
	chord__reply_simple(c, from, &c->msg);
}

bool chord_handle_request(chord_t *c, const struct cfs_msg *req, const struct cfs_reply_to *from)
{
	struct chord__vnode *v = &c->v[0];

	if ((req->type < CFS_MSG_PING || req->type > CFS_MSG_LOOKUP_DONE) && req->type != CFS_MSG_REACH &&
	    req->type != CFS_MSG_DIALBACK)
		return false;
	if (c->client)
		return false;
	if (c->freeing) {
		(void)cfs_transport_reply_error(c->tr, from, -ESHUTDOWN);
		return true;
	}
	if (req->has_to) {
		v = chord__local(c, &req->to_id);
		if (!v) {
			(void)cfs_transport_reply_error(c->tr, from, -ESRCH);
			return true;
		}
	}
	if (hostile_sender(c, req, from) && req->type != CFS_MSG_PING && req->type != CFS_MSG_AUTH) {
		c->hostile_dropped++;
		(void)cfs_transport_reply_error(c->tr, from, -EPERM);
		return true;
	}
	switch (req->type) {
	case CFS_MSG_PING:
		chord__msg_init(c, v, CFS_MSG_PING, NULL);
		chord__reply_simple(c, from, &c->msg);
		break;
	case CFS_MSG_AUTH:
		answer_auth(c, v, req, from);
		break;
	case CFS_MSG_FIND_NEXT:
		chord__lookup_handle_find_next(c, v, req, from);
		break;
	case CFS_MSG_LOOKUP_FWD:
		chord__lookup_handle_fwd(c, v, req, from);
		break;
	case CFS_MSG_LOOKUP_DONE:
		chord__lookup_handle_done(c, req, from);
		break;
	case CFS_MSG_REACH:
		chord__reach_handle(c, v, req, from);
		break;
	case CFS_MSG_DIALBACK:
		chord__reach_dialback(c, req);
		break;
	default:
		chord__maint_handle(c, v, req, from);
		break;
	}
	return true;
}

/* ------------------------------------------------------------ inspection */

uint32_t chord_vnode_count(const chord_t *c) { return c->nv; }
const struct cfs_node *chord_vnode_self(const chord_t *c, uint32_t i) { return &c->v[i].self; }
const struct cfs_node *chord_vnode_succ(const chord_t *c, uint32_t i) { return chord__vn_succ(&c->v[i]); }
bool chord_vnode_joined(const chord_t *c, uint32_t i) { return c->v[i].joined; }
bool chord_vnode_succs_full(const chord_t *c, uint32_t i)
{
	const struct chord__vnode *v = &c->v[i];

	/* joined with no successor: the ring is this process alone */
	return !v->succ_unsure && (v->nsuccs >= c->cfg.nsucc || v->wraps || (v->joined && v->nsuccs == 0));
}
uint32_t chord_vnode_succs(const chord_t *c, uint32_t i, const struct cfs_node *ret[])
{
	for (uint32_t k = 0; k < c->v[i].nsuccs; k++)
		ret[k] = &c->v[i].succ[k].n;
	return c->v[i].nsuccs;
}

const struct cfs_node *chord_vnode_pred(const chord_t *c, uint32_t i)
{
	return c->v[i].pred.valid ? &c->v[i].pred.n : NULL;
}
bool chord_vnode_settled(const chord_t *c, uint32_t i) { return c->v[i].joined && c->v[i].fingers_done; }
const struct cfs_coord *chord_coord(const chord_t *c) { return &c->coord; }

uint64_t chord_predict_rtt_us(const chord_t *c, const struct cfs_coord *to)
{
	double ms = chord__vivaldi_predict_ms(&c->coord, to);
	return ms > 0 && isfinite(ms) ? (uint64_t)(ms * 1000.0) : 0;
}

uint64_t chord_rtt_us(const chord_t *c, const struct cfs_node *n)
{
	uint64_t m = cfs_transport_peer_srtt_us(c->tr, &n->addr);

	return m ? m : chord_predict_rtt_us(c, &n->coord);
}

double chord_estimate_n(const chord_t *c)
{
	double sum = 0;

	if (c->client) { /* no successor list: the contacts met are a lower bound */
		uint32_t met = chord__client_met(c);
		return met > 1 ? (double)met : 1;
	}

	for (uint32_t i = 0; i < c->nv; i++)
		sum += chord__table_estimate_n(&c->v[i]);
	return sum / c->nv;
}

uint32_t chord_ring_addresses(const chord_t *c)
{
	const struct cfs_addr *seen[CHORD_SUCC_MAX + 1];
	uint32_t n = 0;

	if (c->client || c->nv == 0)
		return 0;
	for (uint32_t i = 0; i < c->nv; i++)
		if (c->v[i].nsuccs > 0 && (!c->v[i].wraps || c->v[i].succ_unsure))
			return 0;
	const struct chord__vnode *v = &c->v[0];
	seen[n++] = &v->self.addr;
	for (uint32_t i = 0; i < v->nsuccs; i++) {
		bool dup = false;
		for (uint32_t j = 0; j < n && !dup; j++)
			dup = cfs_addr_same_ip(seen[j], &v->succ[i].n.addr);
		if (!dup)
			seen[n++] = &v->succ[i].n.addr;
	}
	return n;
}

bool chord_knows(const chord_t *c, const struct cfs_id *id)
{
	return chord__table_contains(c, id);
}

static void json_node(struct cfs_sbuf *b, const struct tnode *t)
{
	char hex[65], a[CFS_ADDR_STRLEN];

	cfs_sb_printf(b, "{\"id\":\"%s\",\"addr\":\"%s\",\"vindex\":%u,\"rtt_us\":%u}",
	              cfs_id_hex(&t->n.id, hex), cfs_addr_str(&t->n.addr, a), t->n.vindex, t->rtt_us);
}

/* The ring's counters, described once (cfs_stat); the coordinate and the
 * virtual servers' tables are lists, written after them. */
struct ring_snap {
	const char *address;
	uint32_t nv;
	double est, coord_err;
	uint64_t lookups_done, lookups_failed, lookup_rpcs, lookup_timeouts;
	uint64_t auth_sent, auth_ok, auth_failed, id_mismatch, auth_cached, auth_revived;
	uint64_t hostile_dropped, fwd_handled, fwd_copies, find_next_handled, alerts_in;
	/* Authenticated leaves, bounded authentication work */
	uint64_t auth_dropped, auth_dropped_src, auth_dropped_all, auth_dup, auth_src_evicted;
	uint32_t auth_inflight;
	uint64_t leave_no_cookie, leave_bad_cookie, leave_stranger, leave_applied;
	uint64_t suspects, suspects_reported, lookup_checks_failed;
	uint64_t index_moves;
	uint64_t merge_checks, merge_found;
	uint32_t peers;
	const char *reachable, *role;
	char seen_at[CFS_ADDR_STRLEN];
	const char *seen_at_p;
	uint64_t reach_checks, reach_dialed;
	uint32_t learned, learned_max;
	uint64_t learned_evicted, remembered, learn_auths, learn_auths_ok, learn_sweeps;
};

#define S(kind, field, name, label, unit) CFS_STAT(kind, struct ring_snap, field, name, label, unit)
static const struct cfs_stat ring_stats[] = {
	CFS_STAT_BEGIN(NULL, "ring"),
	S(STR, address, "address", "address", NULL),
	S(U32, nv, "virtual_servers", "virtual servers", NULL),
	CFS_STAT_D(struct ring_snap, est, 1, "estimated_n", "estimated n", NULL),
	CFS_STAT_D(struct ring_snap, coord_err, 3, "coord_err", "coordinate error", NULL),
	S(U64, hostile_dropped, "hostile_dropped", "hostile replies dropped", NULL),
	S(U64, suspects, "suspects", "suspects now", NULL),
	S(U64, suspects_reported, "suspects_reported", "suspects reported", NULL),
	S(U64, lookup_checks_failed, "lookup_checks_failed", "lookup answers rejected", NULL),
	S(U64, index_moves, "index_moves", "indexes taken by others, moved", NULL),
	S(U32, peers, "peers_remembered", "peers remembered", NULL),
	S(U64, merge_checks, "ring_checks", "ring checks", NULL),
	S(U64, merge_found, "loops_found", "other loops found", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("reach", "reachable"),
	S(STR, reachable, "reachable", "by members' dial-backs", NULL),
	S(STR, role, "role", "role", NULL),
	S(STR, seen_at_p, "seen_at", "members see it at", NULL),
	S(U64, reach_checks, "checks", "checks", NULL),
	S(U64, reach_dialed, "dialed_back", "others dialled back", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("lookups", "lookups"),
	S(U64, lookups_done, "done", "done", NULL),
	S(U64, lookups_failed, "failed", "failed", NULL),
	S(U64, lookup_rpcs, "rpcs", "RPCs", NULL),
	S(U64, lookup_timeouts, "timeouts", "timeouts", NULL),
	S(U32, learned, "learned", "nodes learned from traffic", NULL),
	S(U32, learned_max, "learned_max", "... kept at most", NULL),
	S(U64, learned_evicted, "learned_evicted", "... evicted (full)", NULL),
	S(U64, learn_auths, "learn_auths", "... AUTHs sent to check nodes answers named", NULL),
	S(U64, learn_auths_ok, "learn_auths_ok", "... answered right", NULL),
	S(U64, learn_sweeps, "learn_sweeps", "successor lists asked to fill the learned table", NULL),
	S(U64, remembered, "remembered", "answered with no message (remembered answers, learned nodes)", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("served", "served"),
	S(U64, fwd_handled, "lookup_fwd", "recursive steps", NULL),
	S(U64, fwd_copies, "lookup_fwd_copies", "recursive steps asked again", NULL),
	S(U64, find_next_handled, "find_next", "iterative steps", NULL),
	S(U64, alerts_in, "alerts", "alerts", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("auth", "auth"),
	S(U64, auth_sent, "sent", "nonces sent", NULL),
	S(U64, auth_ok, "ok", "passed", NULL),
	S(U64, auth_failed, "failed", "failed", NULL),
	S(U64, id_mismatch, "id_mismatch", "ID mismatches", NULL),
	S(U64, auth_cached, "cached", "cached", NULL),
	S(U64, auth_revived, "revived", "dead ones asked again", NULL),
	S(U32, auth_inflight, "inflight", "in flight", NULL),
	S(U64, auth_dropped, "dropped", "dropped (over budget)", NULL),
	S(U64, auth_dropped_src, "dropped_source", "... over a source's rate", NULL),
	S(U64, auth_dropped_all, "dropped_total", "... over the total rate", NULL),
	S(U64, auth_src_evicted, "sources_evicted", "sources evicted", NULL),
	S(U64, auth_dup, "duplicate_id", "duplicate IDs refused", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN("leave", "leaves"),
	S(U64, leave_applied, "applied", "applied", NULL),
	S(U64, leave_no_cookie, "no_cookie", "without cookie", NULL),
	S(U64, leave_bad_cookie, "bad_cookie", "bad cookie", NULL),
	S(U64, leave_stranger, "stranger", "from strangers", NULL),
	CFS_STAT_CLOSE,
};
#undef S

static void vnodes_text(const chord_t *c, struct cfs_sbuf *b)
{
	char s1[9], s2[9], s3[9];

	cfs_sb_printf(b, "coord       (%.1f, %.1f, %.1f | %.1f)\n", c->coord.v[0], c->coord.v[1],
	              c->coord.v[2], c->coord.h);
	for (uint32_t i = 0; i < c->nv; i++) {
		const struct chord__vnode *v = &c->v[i];
		unsigned nf = 0;
		for (int k = 0; k < NFINGERS; k++)
			nf += v->finger[k].valid && (k == NFINGERS - 1 ||
			      !v->finger[k + 1].valid || !cfs_id_eq(&v->finger[k].n.id, &v->finger[k + 1].n.id));
		cfs_sb_printf(b, "vnode %-4u  %s  pred %s  succ %s (+%u)  %u fingers%s\n", v->self.vindex,
		              cfs_id_short(&v->self.id, s1),
		              v->pred.valid ? cfs_id_short(&v->pred.n.id, s2) : "-",
		              cfs_id_short(&chord__vn_succ(v)->id, s3), v->nsuccs ? v->nsuccs - 1 : 0, nf,
		              v->joined ? "" : "  (joining)");
	}
}

static void vnode_json(const struct chord__vnode *v, struct cfs_sbuf *b)
{
	char hex[65];

	cfs_sb_printf(b, "{\"index\":%u,\"id\":\"%s\",\"joined\":%s,\"whole_ring\":%s,\"estimated_n\":%.1f,\"pred\":",
	              v->self.vindex, cfs_id_hex(&v->self.id, hex), v->joined ? "true" : "false",
	              v->wraps && !v->succ_unsure ? "true" : "false", chord__table_estimate_n(v));
	if (v->pred.valid)
		json_node(b, &v->pred);
	else
		cfs_sb_printf(b, "null");
	cfs_sb_printf(b, ",\"succs\":[");
	for (uint32_t j = 0; j < v->nsuccs; j++) {
		cfs_sb_printf(b, "%s", j ? "," : "");
		json_node(b, &v->succ[j]);
	}
	cfs_sb_printf(b, "],\"fingers\":[");
	bool first = true;
	const struct cfs_id *last = NULL;
	for (int k = NFINGERS - 1; k >= 0; k--) {
		if (!v->finger[k].valid || (last && cfs_id_eq(last, &v->finger[k].n.id)))
			continue;
		last = &v->finger[k].n.id;
		cfs_sb_printf(b, "%s{\"bit\":%d,\"node\":", first ? "" : ",", FINGER_BASE + k);
		json_node(b, &v->finger[k]);
		cfs_sb_printf(b, "}");
		first = false;
	}
	cfs_sb_printf(b, "]}");
}

void chord_status(const chord_t *c, struct cfs_sbuf *b, bool json)
{
	char a[CFS_ADDR_STRLEN];
	struct ring_snap s = {
		.address = cfs_addr_str(&c->addr, a), .nv = c->nv, .est = chord_estimate_n(c),
		.coord_err = c->coord_err, .lookups_done = c->lookups_done,
		.lookups_failed = c->lookups_failed, .lookup_rpcs = c->lookup_rpcs,
		.lookup_timeouts = c->lookup_timeouts, .auth_sent = c->auth_sent, .auth_ok = c->auth_ok,
		.auth_failed = c->auth_failed, .id_mismatch = c->id_mismatch, .auth_cached = chord__auth_count(c),
		.auth_revived = c->auth_revived,
		.hostile_dropped = c->hostile_dropped, .fwd_handled = c->fwd_handled,
		.fwd_copies = c->fwd_copies,
		.find_next_handled = c->find_next_handled, .alerts_in = c->alerts_in,
		.auth_dropped = c->auth_dropped, .auth_dropped_src = c->auth_rl.dropped_src,
		.auth_dropped_all = c->auth_rl.dropped_all, .auth_dup = c->auth_dup,
		.auth_src_evicted = c->auth_rl.evicted, .auth_inflight = c->auth_inflight,
		.leave_no_cookie = c->leave_no_cookie, .leave_bad_cookie = c->leave_bad_cookie,
		.leave_stranger = c->leave_stranger, .leave_applied = c->leave_applied,
		.suspects = chord__suspects_count(&c->susp, cfs_now_us()),
		.suspects_reported = c->susp.reported, .lookup_checks_failed = c->lookup_checks_failed,
		.index_moves = c->index_moves,
		.merge_checks = c->merge_checks,
		.merge_found = c->merge_found,
		.peers = c->npeers,
		.reachable = chord_reach_name(c->reach_state),
		.role = c->client ? "client-only" : "member",
		.reach_checks = c->reach_checks, .reach_dialed = c->reach_dialed,
		.learned = c->learned.n, .learned_max = c->learned.cap,
		.learned_evicted = c->learned.evicted, .remembered = c->lookups_remembered,
		.learn_auths = c->learned.probes, .learn_auths_ok = c->learned.probes_ok,
		.learn_sweeps = c->learned.sweeps,
	};
	s.seen_at_p = c->reach_seen_valid ? cfs_addr_str(&c->reach_seen, s.seen_at) : "-";
	bool first = true;

	if (!json) {
		cfs_stat_render(b, false, ring_stats, CFS_ARRAY_SIZE(ring_stats), &s, NULL);
		vnodes_text(c, b);
		return;
	}
	cfs_sb_printf(b, "{");
	cfs_stat_render(b, true, ring_stats, CFS_ARRAY_SIZE(ring_stats), &s, &first);
	cfs_sb_printf(b, ",\"coord\":[%.3f,%.3f,%.3f,%.3f],\"vnodes\":[", c->coord.v[0],
	              c->coord.v[1], c->coord.v[2], c->coord.h);
	for (uint32_t i = 0; i < c->nv; i++) {
		cfs_sb_printf(b, "%s", i ? "," : "");
		vnode_json(&c->v[i], b);
	}
	cfs_sb_printf(b, "]}");
}
