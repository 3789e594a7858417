/*
 * Can the ring reach us? A member must be reachable by every other; a
 * daemon behind a home router or a firewall that drops unsolicited UDP
 * joins, answers the peers it called first, and is a hole for everyone
 * else. So, after joining and then every CHORD_REACH_MS, a daemon asks up
 * to three members at other addresses to dial it back (libp2p's AutoNAT):
 *
 *   REACH {nonce, our advertised node}  ->  reply {where they saw us}
 *   then each sends DIALBACK {nonce} to our advertised address from a
 *   socket opened for it: a packet of a flow no NAT or firewall here has
 *   seen, which arrives only if we are reachable.
 *
 * A member dials back only the IP the request came from (no one can aim
 * it elsewhere), one small datagram, at most as often as the source's
 * authentication budget allows. The verdict: reachable when a dial-back
 * with our nonce arrived; not reachable when members answered but none
 * got through (behind a NAT when they saw us at another IP); unknown when
 * nobody answered (alone, or only members of the previous version, which
 * drop these messages). It is logged when it changes and shown in status.
 * Two "no"s in a row (cfg.unreachable_client) make the daemon a plain
 * client of the ring (client.c): never a hole in it.
 */
#include <sodium.h>
#include <string.h>

#include "chord/internal.h"

#define REACH_FIRST_MS 2000   /* after the start */
#define REACH_RETRY_MS 5000   /* nobody to ask yet */
#define REACH_WAIT_MS 3000    /* for the dial-backs, after the requests */
#define REACH_ASK 3           /* members asked, at distinct addresses */
#define REACH_CONFIRM_MS 5000 /* a "no" is checked again after this */
#define REACH_NO_ROUNDS 2     /* "no"s in a row that make a member a client */

static void reach_tick(uv_timer_t *t);

const char *chord_reach_name(int state)
{
	switch (state) {
	case CHORD_REACH_YES: return "yes";
	case CHORD_REACH_NO: return "no";
	default: return "unknown";
	}
}

static void reach_arm(chord_t *c, uint64_t ms)
{
	if (!c->freeing && !c->leaving)
		uv_timer_start(&c->reach_timer, reach_tick, ms, 0);
}

/* The verdict of one round, once its wait is over. */
static void reach_decide(chord_t *c)
{
	char a[CFS_ADDR_STRLEN], b[CFS_ADDR_STRLEN];
	int was = c->reach_state, now;

	c->reach_busy = false;
	if (c->reach_dialbacks_round > 0)
		now = CHORD_REACH_YES;
	else if (c->reach_answers_round > 0)
		now = CHORD_REACH_NO;
	else
		now = CHORD_REACH_UNKNOWN;
	c->reach_state = now;
	c->reach_no_rounds = now == CHORD_REACH_NO ? c->reach_no_rounds + 1 : 0;
	if (c->reach_no_rounds >= REACH_NO_ROUNDS && c->cfg.unreachable_client) {
		log_warn("running as a client-only node: this server reads, publishes and pins through the "
		         "ring but holds no part of it, since members cannot reach it (%u checks in a row); "
		         "restart it once they can", c->reach_no_rounds);
		chord__become_client(c);
		return;
	}
	if (now == was)
		return;
	cfs_addr_str(&c->addr, a);
	if (now == CHORD_REACH_NO && c->reach_seen_valid && !cfs_addr_same_ip(&c->reach_seen, &c->addr))
		log_warn("this server is not reachable: members see it at %s, not at its address %s (behind a "
		         "NAT?): it is a hole in the ring for every member it did not call first; forward "
		         "UDP port %u to it, or run it where members can reach it",
		         cfs_addr_str(&c->reach_seen, b), a, cfs_addr_port(&c->addr));
	else if (now == CHORD_REACH_NO)
		log_warn("this server is not reachable at %s: %u member%s dialled it back and no packet "
		         "arrived (a firewall drops unsolicited UDP to port %u?): it is a hole in the ring",
		         a, c->reach_answers_round, c->reach_answers_round == 1 ? "" : "s", cfs_addr_port(&c->addr));
	else if (now == CHORD_REACH_YES)
		log_info("reachable at %s: members' dial-backs arrive", a);
}

static void reach_reply(void *arg, int status, const struct cfs_msg *reply,
                        const struct cfs_rpc_result *res)
{
	chord_t *c = arg;

	if (status == -ECANCELED || c->freeing)
		return;
	if (status < 0 || !c->reach_busy)
		return;
	c->reach_answers_round++;
	c->reach_seen = reply->node.addr;
	c->reach_seen_valid = true;
}

static void pick_add(const chord_t *c, struct cfs_addr *out, uint32_t *n, const struct cfs_addr *a)
{
	if (*n >= REACH_ASK || cfs_addr_same_ip(a, &c->addr))
		return;
	for (uint32_t j = 0; j < *n; j++)
		if (cfs_addr_same_ip(&out[j], a))
			return;
	out[(*n)++] = *a;
}

/* Up to REACH_ASK members at addresses other than ours (and each other's):
 * our neighbours, else (not joined: members may refuse a joiner whose ID
 * does not hash from the address they see) the bootstrap addresses and
 * the remembered peers. */
static uint32_t reach_pick(chord_t *c, struct cfs_addr *out)
{
	const struct chord__vnode *v = &c->v[0];
	uint32_t n = 0;

	for (uint32_t i = 0; i < v->nsuccs; i++)
		pick_add(c, out, &n, &v->succ[i].n.addr);
	if (v->pred.valid)
		pick_add(c, out, &n, &v->pred.n.addr);
	for (int k = 0; k < NFINGERS; k++)
		if (v->finger[k].valid)
			pick_add(c, out, &n, &v->finger[k].n.addr);
	for (size_t i = 0; i < c->nboot; i++)
		pick_add(c, out, &n, &c->boot[i]);
	for (uint32_t i = 0; i < c->npeers; i++)
		pick_add(c, out, &n, &c->peers[i]);
	return n;
}

static void reach_tick(uv_timer_t *t)
{
	chord_t *c = container_of(t, chord_t, reach_timer);
	struct cfs_addr to[REACH_ASK];
	uint32_t n;

	if (c->frozen || c->leaving || c->freeing)
		return;
	if (c->reach_busy) {
		reach_decide(c);
		if (!c->client) /* a "no" is asked again soon: one lost round is no verdict */
			reach_arm(c, c->reach_state == CHORD_REACH_NO ? REACH_CONFIRM_MS : c->cfg.reach_ms);
		return;
	}
	if ((n = reach_pick(c, to)) == 0) {
		reach_arm(c, REACH_RETRY_MS);
		return;
	}
	randombytes_buf(c->reach_nonce, sizeof(c->reach_nonce));
	c->reach_busy = true;
	c->reach_checks++;
	c->reach_answers_round = c->reach_dialbacks_round = 0;
	for (uint32_t i = 0; i < n; i++) {
		/* as a plain sender: asked before we joined, or behind a NAT,
		 * our ID need not hash from the address the member sees */
		cfs_msg_init(&c->msg, CFS_MSG_REACH);
		memcpy(c->msg.nonce, c->reach_nonce, sizeof(c->msg.nonce));
		c->msg.node = c->v[0].self;
		(void)chord__call_addr(c, &to[i], &c->msg, REACH_WAIT_MS - 500, reach_reply, c);
	}
	reach_arm(c, REACH_WAIT_MS);
}

void chord__reach_start(chord_t *c)
{
	if (c->cfg.reach_ms && !c->client)
		reach_arm(c, REACH_FIRST_MS);
}

void chord__reach_stop(chord_t *c)
{
	uv_timer_stop(&c->reach_timer);
}

/* A member asks to be dialled back: tell it where its request came from
 * and, when it claims the same IP, send the dial-back from a fresh socket. */
void chord__reach_handle(chord_t *c, struct chord__vnode *v, const struct cfs_msg *req,
                         const struct cfs_reply_to *from)
{
	struct cfs_msg *m = &c->msg;

	if (chord__rl_admit(&c->auth_rl, cfs_now_us(), &from->addr) < 0) {
		c->reach_refused++;
		return; /* over the source's budget: silence */
	}
	chord__msg_init(c, v, CFS_MSG_REACH, NULL);
	m->node.addr = from->addr;
	m->node.vindex = 0;
	cfs_node_id(&m->node.id, &from->addr, 0);
	chord__reply_simple(c, from, m);
	if (!cfs_addr_same_ip(&req->node.addr, &from->addr) || cfs_addr_port(&req->node.addr) == 0)
		return; /* dial back only the address the request came from */
	cfs_msg_init(m, CFS_MSG_DIALBACK);
	memcpy(m->nonce, req->nonce, sizeof(m->nonce));
	if (cfs_transport_send_fresh(c->tr, &req->node.addr, m) == 0)
		c->reach_dialed++;
}

/* Our dial-back arrived (or a stray one: only our nonce counts). */
void chord__reach_dialback(chord_t *c, const struct cfs_msg *req)
{
	if (c->reach_busy && sodium_memcmp(req->nonce, c->reach_nonce, sizeof(c->reach_nonce)) == 0)
		c->reach_dialbacks_round++;
}
