/*
 * Locate: where are a block's copies? The driver of locate_sm.c's
 * machine: it does the lookup and the FETCHes and reports the result
 * (cfs-fsck --replicas asks this per block to say which of the k hold a
 * good copy, or for a coded block which of its n holders hold their
 * fragment). The operation is freed in one place, after its callback.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

struct locate {
	dhash_client_t *d;
	dhash_locate_cb cb;
	void *arg;
	struct dhash__locate sm;
	bool finished;
};

struct locate_call {
	struct locate *lc;
	uint32_t i;
};

static void locate_run(struct locate *lc);

static void fetch_done(void *arg, int status, const struct cfs_msg *reply,
                       const struct cfs_rpc_result *res)
{
	struct locate_call *c = arg;
	struct locate *lc = c->lc;
	struct dhash__reply rep = dhash__reply_of(status, reply, res);

	dhash__locate_on_fetch(&lc->sm, c->i, &rep);
	free(c);
	locate_run(lc);
}

/*
 * A locate's FETCH waits this long, not the adaptive timeout of a get: its
 * answer is a census ("silent" is a verdict on the server), nobody waits
 * on it for a read, and the first call to a server across an ocean is
 * judged by RTTs measured nearer (a get tries the next holder instead;
 * a census that did so would call far servers silent).
 */
#define LOCATE_FETCH_TIMEOUT_MS 4000

static void have_done(void *arg, int status, const struct cfs_msg *reply,
                      const struct cfs_rpc_result *res)
{
	struct locate_call *c = arg;
	struct locate *lc = c->lc;
	struct dhash__reply rep = dhash__reply_of(status, reply, res);

	dhash__locate_on_have(&lc->sm, c->i, rep.status, rep.status == 0 && rep.len >= 1 && (rep.data[0] & 1));
	free(c);
	locate_run(lc);
}

/* A FETCH of the key, or a probe's HAVE of it, to holder a->i. */
static int fetch_send(struct locate *lc, const struct dhash__act *a)
{
	const struct cfs_node *to = &lc->sm.r.nodes[a->i];
	struct cfs_msg *m = xmalloc(sizeof(*m));
	struct locate_call *call = xmalloc(sizeof(*call));
	bool have = a->type == DHASH_ACT_HAVE;
	int r;

	*call = (struct locate_call){ lc, a->i };
	cfs_msg_init(m, have ? CFS_MSG_HAVE : CFS_MSG_FETCH);
	if (have) {
		m->keys = &lc->sm.key;
		m->n_keys = 1;
	} else {
		m->key = lc->sm.key;
	}
	m->has_to = true;
	m->to_id = to->id;
	if ((r = dhash__client_call(lc->d, to, m, LOCATE_FETCH_TIMEOUT_MS, have ? have_done : fetch_done,
	                            call)) < 0)
		free(call);
	free(m);
	return r;
}

static void lookup_done(void *arg, const struct chord_lookup_result *res)
{
	struct locate *lc = arg;

	dhash__locate_on_lookup(&lc->sm, res);
	locate_run(lc);
}

static void locate_finish(struct locate *lc)
{
	lc->finished = true;
	if (dhash__client_closing(lc->d))
		lc->sm.r.status = -ECANCELED;
	lc->cb(lc->arg, &lc->sm.r);
}

/* Carry out the machine's actions; free lc after its callback. */
static void locate_run(struct locate *lc)
{
	struct dhash__act a;

	while (!lc->finished && dhash__locate_next(&lc->sm, &a)) {
		if (a.type == DHASH_ACT_FETCH && fetch_send(lc, &a) < 0)
			dhash__locate_on_fetch(&lc->sm, a.i, NULL);
		else if (a.type == DHASH_ACT_HAVE && fetch_send(lc, &a) < 0)
			dhash__locate_on_have(&lc->sm, a.i, -EIO, false);
		else if (a.type == DHASH_ACT_FINISH)
			locate_finish(lc);
	}
	if (lc->finished) {
		dhash_client_t *d = lc->d;
		dhash__locate_fini(&lc->sm);
		free(lc);
		dhash__client_release(d);
	}
}

static int locate_start(dhash_client_t *d, const struct cfs_id *key, uint32_t code_n, bool probe,
                        dhash_locate_cb cb, void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	struct locate *lc = xcalloc(1, sizeof(*lc));
	struct dhash__act a;
	int r;

	lc->d = d;
	lc->cb = cb;
	lc->arg = arg;
	if (code_n)
		dhash__locate_init_coded(&lc->sm, key, code_n);
	lc->sm.probe = probe;
	if (!code_n)
		dhash__locate_init(&lc->sm, key, dhash__client_replicas(d));
	dhash__locate_next(&lc->sm, &a); /* the lookup */
	struct chord_lookup_opts lo = { .mode = dhash__client_mode(d), .nsucc = a.nsucc };
	dhash__client_hold(d);
	if ((r = chord_lookup(dhash__client_chord(d), key, &lo, lookup_done, lc)) < 0) {
		dhash__locate_fini(&lc->sm);
		free(lc);
		dhash__client_release(d);
	}
	return r;
}

int dhash_locate(dhash_client_t *d, const struct cfs_id *key, dhash_locate_cb cb, void *arg)
{
	return locate_start(d, key, 0, false, cb, arg);
}

int dhash_locate_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                       dhash_locate_cb cb, void *arg)
{
	if (!sfsro_code_valid(m, n))
		return -EINVAL;
	return locate_start(d, key, n, false, cb, arg);
}

int dhash_probe_coded(dhash_client_t *d, const struct cfs_id *key, uint32_t m, uint32_t n,
                      dhash_locate_cb cb, void *arg)
{
	if (!sfsro_code_valid(m, n))
		return -EINVAL;
	return locate_start(d, key, n, true, cb, arg);
}
