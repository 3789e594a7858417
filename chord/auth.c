/*
 * Node ID authentication (CFS 4.4). A node enters a table only if its ID is
 * H(IP ‖ port ‖ index) of the address it claims, and it has echoed a fresh
 * random nonce sent to that address (so nobody can claim an address it does
 * not receive at). Results are cached by ID: a success for ten minutes, a
 * failure for thirty seconds, a node found dead for fifteen.
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

struct auth_call {
	chord_t *c;
	struct cfs_node node;
	uint8_t nonce[CFS_NONCE_BYTES];
};

void chord__auth_init(chord_t *c)
{
	cfs_htab_init(&c->auth, sizeof(struct cfs_id), sizeof(struct auth_ent));
	c->auth_sweep_at = 64;
}

void chord__auth_free(chord_t *c)
{
	cfs_htab_free(&c->auth);
}

static struct auth_ent *find(const chord_t *c, const struct cfs_id *id)
{
	return cfs_htab_get(&c->auth, id);
}

static bool unexpired(void *now, const void *key, void *val)
{
	const struct auth_ent *e = val;
	return e->until_us >= *(uint64_t *)now || e->state == AUTH_PENDING;
}

/* Drop expired entries once the cache has doubled since the last sweep. */
static void maintain(chord_t *c)
{
	uint64_t now = cfs_now_us();

	if (cfs_htab_count(&c->auth) < c->auth_sweep_at)
		return;
	cfs_htab_filter(&c->auth, unexpired, &now);
	c->auth_sweep_at = 2 * cfs_htab_count(&c->auth) > 64 ? 2 * cfs_htab_count(&c->auth) : 64;
}

/* The entry for n (made if new); valid until the cache next changes. */
static struct auth_ent *get(chord_t *c, const struct cfs_node *n)
{
	struct auth_ent *e = find(c, &n->id);

	if (!e) {
		maintain(c);
		e = cfs_htab_put(&c->auth, &n->id, NULL);
		e->id = n->id;
	}
	e->node = *n;
	return e;
}

enum auth_state chord__auth_peek(const chord_t *c, const struct cfs_id *id)
{
	const struct auth_ent *e = find(c, id);

	if (chord__local(c, id))
		return AUTH_OK;
	if (!e || (e->until_us < cfs_now_us() && e->state != AUTH_PENDING))
		return AUTH_NONE;
	return (enum auth_state)e->state;
}

size_t chord__auth_count(const chord_t *c)
{
	return cfs_htab_count(&c->auth);
}

void chord__auth_mark_dead(chord_t *c, const struct cfs_id *id)
{
	struct auth_ent *e = find(c, id);

	if (e && e->state != AUTH_PENDING) {
		e->state = AUTH_DEAD;
		e->until_us = cfs_now_us() + DEAD_US;
	}
}

static void on_auth_reply(void *arg, int status, const struct cfs_msg *reply,
                          const struct cfs_rpc_result *res)
{
	struct auth_call *a = arg;
	chord_t *c = a->c;
	struct auth_ent *e;
	char s[9];

	if (status == -ECANCELED || c->freeing) {
		free(a);
		return;
	}
	e = find(c, &a->node.id);
	if (!e) {
		free(a);
		return;
	}
	if (status == 0 && reply->has_from && cfs_id_eq(&reply->from_id, &a->node.id) &&
	    reply->from_vindex == a->node.vindex &&
	    sodium_memcmp(reply->nonce, a->nonce, CFS_NONCE_BYTES) == 0) {
		e->state = AUTH_OK;
		e->until_us = cfs_now_us() + OK_US;
		e->node.coord = reply->coord;
		c->auth_ok++;
		struct cfs_node n = e->node;
		chord__table_consider(c, &n);
	} else {
		e->state = status == -ETIMEDOUT ? AUTH_DEAD : AUTH_FAILED;
		e->until_us = cfs_now_us() + (status == -ETIMEDOUT ? DEAD_US : FAILED_US);
		c->auth_failed++;
		log_debug("node %s failed authentication: %s", cfs_id_short(&a->node.id, s),
		          status ? strerror(-status) : "wrong answer");
	}
	free(a);
}

enum auth_state chord__auth_check(chord_t *c, const struct cfs_node *n)
{
	struct auth_ent *e;
	struct auth_call *a;
	char s[9];

	if (chord__local(c, &n->id))
		return AUTH_OK;
	e = find(c, &n->id);
	if (e && (e->until_us >= cfs_now_us() || e->state == AUTH_PENDING))
		return (enum auth_state)e->state;
	if (!chord__node_id_ok(c, n)) {
		c->id_mismatch++;
		log_debug("node %s: ID does not match its address and index", cfs_id_short(&n->id, s));
		e = get(c, n);
		e->state = AUTH_FAILED;
		e->until_us = cfs_now_us() + FAILED_US;
		return AUTH_FAILED;
	}
	if (c->leaving || c->freeing)
		return AUTH_FAILED;
	e = get(c, n);
	e->state = AUTH_PENDING;
	e->until_us = cfs_now_us() + PENDING_US;
	a = xcalloc(1, sizeof(*a));
	a->c = c;
	a->node = *n;
	randombytes_buf(a->nonce, sizeof(a->nonce));
	chord__msg_init(c, NULL, CFS_MSG_AUTH, n);
	memcpy(c->msg.nonce, a->nonce, sizeof(a->nonce));
	c->auth_sent++;
	if (chord_call(c, n, &c->msg, AUTH_TIMEOUT_MS, on_auth_reply, a) < 0) {
		e->state = AUTH_FAILED;
		e->until_us = cfs_now_us() + FAILED_US;
		free(a);
		return AUTH_FAILED;
	}
	return AUTH_PENDING;
}
