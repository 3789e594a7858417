/*
 * Node ID authentication (CFS 4.4). A node enters a table only if its ID is
 * H(IP ‖ index) of the address it claims (index below CFS_VNODE_INDEX_MAX), and it has echoed a fresh
 * random nonce sent to that address (so nobody can claim an address it does
 * not receive at). Results are cached by ID: a success for ten minutes, a
 * failure for thirty seconds, a node found dead (or gone with a LEAVE) for
 * fifteen.
 *
 * A dead verdict keeps a node out of every list, and a server restarted
 * in place (an upgrade, a crash) has the same ID at the same address a
 * moment later. So a dead verdict is asked again, the old verdict standing
 * until a fresh nonce comes back, once the node has joined again: at once
 * when it sends us its own stabilization (chord__auth_heard: its successor
 * hears it within a round), and when our successor names it its
 * predecessor at least DEAD_RECHECK_US after the verdict
 * (chord__auth_vouched: its predecessor). Nodes further back that hold
 * it dead take it in when the verdict ends. Not on any other mention: a
 * server that has restarted but not joined answers AUTH too, and taken
 * back then it answers our stabilization with no list and is dropped
 * again, round after round. Kept out for the whole fifteen seconds, a server restarted
 * in a rolling upgrade was missing from its neighbours' lists while the
 * next ones restarted; joins took wrong successors and plain clients
 * found no route.
 *
 * Each check costs an AUTH round trip to an address that whoever offered the
 * node chose, so checks are bounded: de-duplicated by ID (one
 * check at a time), charged to the offering address's and the overall token
 * bucket (ratelimit.c), at most CHORD_AUTH_INFLIGHT_MAX in flight, and sent
 * as background calls that never occupy or shrink the transport's window.
 * Over budget a check is dropped and counted, never queued. Results are
 * kept per (ID, address): a failure at one address does not keep the ID out
 * at another (else anyone could name a live node's ID at a wrong port and
 * shut it out), and an ID held by a live authenticated node is refused at
 * any other address until that entry expires or the node is found dead.
 *
 * Time is an argument (now, in cfs_now_us's microseconds): the cache only
 * compares it with its entries' until_us. The transport's callback for an
 * AUTH reply is the one place here that reads the clock.
 */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "chord/internal.h"

#define OK_US      (600ull * 1000000)
#define FAILED_US  (30ull * 1000000)
#define DEAD_US    (15ull * 1000000)
#define PENDING_US (10ull * 1000000)
#define AUTH_TIMEOUT_MS 1000
#define RECHECK_US (10ull * 1000000)
#define DEAD_RECHECK_US (1ull * 1000000)

struct auth_call {
	chord_t *c;
	struct cfs_node node;
	uint8_t nonce[CFS_NONCE_BYTES];
	uint8_t expect;           /* what it checks: AUTH_PENDING (a first check),
	                             AUTH_OK or AUTH_DEAD (a verdict asked again) */
	uint64_t gen;             /* the entry's gen when sent */
};

static int send_auth(chord_t *c, struct auth_ent *e, enum auth_state expect);

void chord__auth_init(chord_t *c, uint64_t now)
{
	static const struct chord__rl_params p = {
		.src_rate = CHORD_AUTH_SRC_RATE, .src_burst = CHORD_AUTH_SRC_BURST,
		.all_rate = CHORD_AUTH_ALL_RATE, .all_burst = CHORD_AUTH_ALL_BURST,
		.sources = CHORD_AUTH_SOURCES,
	};

	cfs_htab_init(&c->auth, sizeof(struct cfs_id), sizeof(struct auth_ent));
	c->auth_sweep_at = 64;
	chord__rl_init(&c->auth_rl, &p);
	chord__cookie_init(&c->cookies, now);
}

void chord__auth_free(chord_t *c)
{
	cfs_htab_free(&c->auth);
	chord__rl_free(&c->auth_rl);
	chord__cookie_wipe(&c->cookies);
}

static struct auth_ent *find(const chord_t *c, const struct cfs_id *id)
{
	return cfs_htab_get(&c->auth, id);
}

/* An entry counts until until_us inclusive; a PENDING one until its
 * check ends, whatever the clock says (the reply or the timeout ends it). */
static bool live(const struct auth_ent *e, uint64_t now)
{
	return e && (e->until_us >= now || e->state == AUTH_PENDING);
}

static bool unexpired(void *now, const void *key, void *val)
{
	return live(val, *(uint64_t *)now);
}

/* Drop expired entries once the cache has doubled since the last sweep. */
static void maintain(chord_t *c, uint64_t now)
{
	if (cfs_htab_count(&c->auth) < c->auth_sweep_at)
		return;
	cfs_htab_filter(&c->auth, unexpired, &now);
	c->auth_sweep_at = 2 * cfs_htab_count(&c->auth) > 64 ? 2 * cfs_htab_count(&c->auth) : 64;
}

/* The entry for n (made if new); valid until the cache next changes. */
static struct auth_ent *get(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	struct auth_ent *e = find(c, &n->id);

	if (!e) {
		maintain(c, now);
		e = cfs_htab_put(&c->auth, &n->id, NULL);
		e->id = n->id;
	}
	e->node = *n;
	return e;
}

enum auth_state chord__auth_peek(const chord_t *c, const struct cfs_id *id, uint64_t now)
{
	const struct auth_ent *e = find(c, id);

	if (chord__local(c, id))
		return AUTH_OK;
	if (!live(e, now))
		return AUTH_NONE;
	return (enum auth_state)e->state;
}

size_t chord__auth_count(const chord_t *c)
{
	return cfs_htab_count(&c->auth);
}

void chord__auth_mark_dead(chord_t *c, const struct cfs_id *id, uint64_t now)
{
	struct auth_ent *e = find(c, id);

	if (e && e->state != AUTH_PENDING) {
		e->state = AUTH_DEAD;
		e->until_us = now + DEAD_US;
		e->rechecking = false;
		e->gen = ++c->auth_gen; /* an answer to a check in flight no longer counts */
	}
}

/* Ask a dead node again (charged like any check, one at a time); the
 * dead verdict stands until the answer. */
static void revive(chord_t *c, struct auth_ent *e, const struct cfs_addr *src, uint64_t now)
{
	if (e->rechecking || c->leaving || c->freeing)
		return;
	if (c->auth_inflight >= CHORD_AUTH_INFLIGHT_MAX || chord__rl_admit(&c->auth_rl, now, src) < 0) {
		c->auth_dropped++;
		return;
	}
	e->rechecking = send_auth(c, e, AUTH_DEAD) == 0;
	c->auth_revived += e->rechecking;
}

/* The DEAD entry of n at n's own address, or NULL. */
static struct auth_ent *dead_at(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	struct auth_ent *e = find(c, &n->id);

	return live(e, now) && e->state == AUTH_DEAD && cfs_addr_eq(&e->node.addr, &n->addr) &&
	       e->node.vindex == n->vindex ? e : NULL;
}

void chord__auth_heard(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	struct auth_ent *e = dead_at(c, n, now);

	if (e)
		revive(c, e, &n->addr, now);
}

void chord__auth_vouched(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	struct auth_ent *e = dead_at(c, n, now);

	/* every DEAD verdict is set to last DEAD_US from when it was given */
	if (e && now >= e->until_us - DEAD_US + DEAD_RECHECK_US)
		revive(c, e, NULL, now);
}

/* The answer to call a (status 0 with the reply, or the call's error). */
static void answered(struct auth_call *a, int status, const struct cfs_msg *reply, uint64_t now)
{
	chord_t *c = a->c;
	struct auth_ent *e = find(c, &a->node.id);
	char s[9];

	if (!e || e->gen != a->gen || e->state != a->expect || !cfs_addr_eq(&e->node.addr, &a->node.addr))
		return;
	e->rechecking = false;
	if (status == 0 && reply->has_from && cfs_id_eq(&reply->from_id, &a->node.id) &&
	    reply->from_vindex == a->node.vindex &&
	    sodium_memcmp(reply->nonce, a->nonce, CFS_NONCE_BYTES) == 0) {
		e->state = AUTH_OK;
		e->until_us = now + OK_US;
		e->node.coord = reply->coord;
		c->auth_ok++;
		struct cfs_node n = e->node;
		if (a->expect != AUTH_OK)
			chord__table_consider(c, &n, now);
	} else {
		/* A server shutting down refuses (answer_auth): dead, not
		 * failed, so that it is asked again once it is back. A dead
		 * node asked again stays dead whatever the failure. */
		bool dead = status == -ETIMEDOUT || status == -ESHUTDOWN || a->expect == AUTH_DEAD;
		e->state = dead ? AUTH_DEAD : AUTH_FAILED;
		e->until_us = now + (dead ? DEAD_US : FAILED_US);
		c->auth_failed++;
		log_debug("node %s failed authentication: %s", cfs_id_short(&a->node.id, s),
		          status ? strerror(-status) : "wrong answer");
	}
}

/* The transport's callback: the one place here that reads the clock. */
static void on_auth_reply(void *arg, int status, const struct cfs_msg *reply,
                          const struct cfs_rpc_result *res)
{
	struct auth_call *a = arg;

	a->c->auth_inflight--;
	if (status != -ECANCELED && !a->c->freeing)
		answered(a, status, reply, cfs_now_us());
	free(a);
}

/*
 * A cached verdict for n, or AUTH_NONE when a new check is due. A verdict
 * counts only for the address it was reached at; an ID that a live,
 * authenticated node holds is refused at any other (one IP may run several
 * processes, and IDs no longer hash the port: PROTOCOL.md "Node IDs").
 */
static enum auth_state cached(chord_t *c, const struct cfs_node *n, const struct cfs_addr *src,
                              uint64_t now)
{
	struct auth_ent *e = find(c, &n->id);
	char s[9], a[CFS_ADDR_STRLEN];

	if (!live(e, now))
		return AUTH_NONE;
	if (cfs_addr_eq(&e->node.addr, &n->addr) && e->node.vindex == n->vindex)
		return (enum auth_state)e->state;
	if (e->state == AUTH_OK) {
		/* Is the holder still there? Ask it again (charged like any
		 * check, at most one at a time, not sooner than RECHECK_US
		 * after it last answered); if it is gone, n is checked at the
		 * next offer. */
		if (!e->rechecking && now + OK_US - e->until_us > RECHECK_US &&
		    !c->leaving && !c->freeing && c->auth_inflight < CHORD_AUTH_INFLIGHT_MAX &&
		    chord__rl_admit(&c->auth_rl, now, src) == 0) {
			e->rechecking = send_auth(c, e, AUTH_OK) == 0;
		}
		c->auth_dup++;
		log_debug("node %s at %s refused: its ID is held by a live node at %s",
		          cfs_id_short(&n->id, s), cfs_addr_str(&n->addr, a),
		          cfs_addr_str(&e->node.addr, (char[CFS_ADDR_STRLEN]){ 0 }));
		return AUTH_FAILED;
	}
	if (e->state == AUTH_PENDING)
		return AUTH_PENDING; /* one check per ID at a time; not for n */
	return AUTH_NONE; /* failed or dead at another address: n gets its own check */
}

enum auth_state chord__auth_check_from(chord_t *c, const struct cfs_node *n, const struct cfs_addr *src,
                                       uint64_t now)
{
	struct auth_ent *e;
	enum auth_state st;
	char s[9];

	if (chord__local(c, &n->id))
		return AUTH_OK;
	if ((st = cached(c, n, src, now)) != AUTH_NONE)
		return st;
	if (!chord__node_id_ok(c, n)) {
		/* Not cached: an entry would keep the real node out. */
		c->id_mismatch++;
		log_debug("node %s: ID does not match its address and index", cfs_id_short(&n->id, s));
		return AUTH_FAILED;
	}
	if (c->leaving || c->freeing)
		return AUTH_FAILED;
	if (c->auth_inflight >= CHORD_AUTH_INFLIGHT_MAX ||
	    chord__rl_admit(&c->auth_rl, now, src) < 0) {
		c->auth_dropped++;
		return AUTH_NONE;
	}
	e = get(c, n, now);
	e->state = AUTH_PENDING;
	e->until_us = now + PENDING_US;
	e->rechecking = false;
	if (send_auth(c, e, AUTH_PENDING) < 0) {
		e = find(c, &n->id);
		e->state = AUTH_FAILED;
		e->until_us = now + FAILED_US;
		return AUTH_FAILED;
	}
	return AUTH_PENDING;
}

/* Send e's node a fresh nonce as background work (outside the window);
 * only the answer to the newest check of e counts. */
static int send_auth(chord_t *c, struct auth_ent *e, enum auth_state expect)
{
	struct auth_call *a = xcalloc(1, sizeof(*a));
	struct cfs_node copy = e->node, *n = &copy;
	int r;

	a->c = c;
	a->node = *n;
	a->expect = (uint8_t)expect;
	a->gen = e->gen = ++c->auth_gen;
	randombytes_buf(a->nonce, sizeof(a->nonce));
	chord__msg_init(c, NULL, CFS_MSG_AUTH, n);
	memcpy(c->msg.nonce, a->nonce, sizeof(a->nonce));
	c->auth_sent++;
	if ((r = chord__call_background(c, n, &c->msg, AUTH_TIMEOUT_MS, on_auth_reply, a)) < 0) {
		free(a);
		return r;
	}
	c->auth_inflight++;
	return 0;
}

enum auth_state chord__auth_check(chord_t *c, const struct cfs_node *n, uint64_t now)
{
	return chord__auth_check_from(c, n, NULL, now);
}

/* ------------------------------------------------------------ hints */

/* A hint's check (learned.c): its own call, which no entry of the cache
 * above sees, so that it can never stand for a check the tables wait on. */
struct learn_call {
	chord_t *c;
	struct cfs_node node;
	uint8_t nonce[CFS_NONCE_BYTES];
};

static void on_learn_reply(void *arg, int status, const struct cfs_msg *reply,
                           const struct cfs_rpc_result *res)
{
	struct learn_call *a = arg;
	chord_t *c = a->c;

	if (status != -ECANCELED && !c->freeing) {
		uint64_t now = cfs_now_us();
		bool ok = status == 0 && reply->has_from && cfs_id_eq(&reply->from_id, &a->node.id) &&
		          reply->from_vindex == a->node.vindex &&
		          sodium_memcmp(reply->nonce, a->nonce, CFS_NONCE_BYTES) == 0;
		if (ok)
			a->node.coord = reply->coord;
		chord__learned_checked(&c->learned, &a->node, ok, now);
		chord__auth_learn_pump(c, now);
	}
	free(a);
}

void chord__auth_learn_pump(chord_t *c, uint64_t now)
{
	struct cfs_node n;

	while (!c->leaving && !c->freeing && chord__learned_next_check(&c->learned, now, &n)) {
		struct learn_call *a;
		if (!chord__node_id_ok(c, &n)) {
			chord__learned_checked(&c->learned, &n, false, now);
			continue;
		}
		a = xcalloc(1, sizeof(*a));
		a->c = c;
		a->node = n;
		randombytes_buf(a->nonce, sizeof(a->nonce));
		chord__msg_init(c, NULL, CFS_MSG_AUTH, &n);
		memcpy(c->msg.nonce, a->nonce, sizeof(a->nonce));
		if (chord__call_background(c, &n, &c->msg, AUTH_TIMEOUT_MS, on_learn_reply, a) < 0) {
			chord__learned_checked(&c->learned, &n, false, now);
			free(a);
		}
	}
}
