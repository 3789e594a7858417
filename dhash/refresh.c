/*
 * Renewing many leases at once (a publisher's pass, cfs-publish --refresh,
 * cfs-fsck's neighbours): the driver of refresh_sm.c's machine, which says
 * what is looked up and which server gets which REFRESH. This file does
 * the lookups and the calls and reports the answer; the operation is
 * freed in one place, after its callback.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/client_sm.h"

struct rmany {
	dhash_client_t *d;
	dhash_bits_cb cb;
	void *arg;
	struct dhash__rmany sm;
	bool finished;
};

struct rcall {                   /* a lookup or a REFRESH in flight */
	struct rmany *rm;
	uint32_t i;              /* the key's index, or the call's */
};

static void rmany_run(struct rmany *rm);

static void lookup_done(void *arg, const struct chord_lookup_result *res)
{
	struct rcall *c = arg;
	struct rmany *rm = c->rm;

	dhash__rmany_on_lookup(&rm->sm, c->i, res, 0);
	free(c);
	rmany_run(rm);
}

static int lookup_send(struct rmany *rm, const struct dhash__act *a)
{
	struct chord_lookup_opts lo = { .mode = dhash__client_mode(rm->d), .nsucc = a->nsucc,
	                                .flags = a->flags };
	struct rcall *c = xmalloc(sizeof(*c));
	int r;

	*c = (struct rcall){ rm, a->i };
	r = chord_lookup(dhash__client_chord(rm->d), &rm->sm.keys[a->i], &lo, lookup_done, c);
	if (r < 0)
		free(c);
	return r;
}

static void refresh_reply(void *arg, int status, const struct cfs_msg *reply,
                          const struct cfs_rpc_result *res)
{
	struct rcall *c = arg;
	struct rmany *rm = c->rm;
	struct dhash__reply rep =
		dhash__reply_of(dhash__client_closing(rm->d) ? -ECANCELED : status, reply, res);

	dhash__rmany_on_reply(&rm->sm, c->i, &rep);
	free(c);
	rmany_run(rm);
}

static int refresh_send(struct rmany *rm, const struct dhash__act *a)
{
	const struct cfs_node *to = dhash__rmany_call_node(&rm->sm, a->i);
	struct cfs_id *keys = xmalloc(DHASH_REFRESH_CHUNK * sizeof(*keys));
	struct cfs_msg *m = xmalloc(sizeof(*m));
	struct rcall *c = xmalloc(sizeof(*c));

	cfs_msg_init(m, CFS_MSG_REFRESH);
	m->keys = keys;
	m->n_keys = dhash__rmany_call_keys(&rm->sm, a->i, keys);
	m->lease_until = rm->sm.lease_until;
	dhash__client_nonce(rm->d, &to->addr, m->nonce); /* CFS 5.4: charged like a put */
	m->has_to = true;
	m->to_id = to->id;
	*c = (struct rcall){ rm, a->i };
	/* the message is encoded inside the call: keys may go right after */
	int r = dhash__client_call(rm->d, to, m, a->timeout_ms, refresh_reply, c);
	free(keys);
	free(m);
	if (r < 0)
		free(c);
	return r;
}

static void rmany_finish(struct rmany *rm, const struct dhash__act *a)
{
	int st = dhash__client_closing(rm->d) ? -ECANCELED : a->status;

	rm->finished = true;
	rm->cb(rm->arg, st, st == 0 ? a->data : NULL, rm->sm.n, st == 0 ? a->lease : 0);
}

/* Carry out the machine's actions; free rm after its callback. */
static void rmany_run(struct rmany *rm)
{
	struct dhash__act a;
	int r;

	while (!rm->finished && dhash__rmany_next(&rm->sm, &a)) {
		switch (a.type) {
		case DHASH_ACT_LOOKUP:
			if ((r = lookup_send(rm, &a)) < 0)
				dhash__rmany_on_lookup(&rm->sm, a.i, NULL, r);
			break;
		case DHASH_ACT_REFRESH:
			if (refresh_send(rm, &a) < 0)
				dhash__rmany_on_reply(&rm->sm, a.i, NULL);
			break;
		case DHASH_ACT_KEEP_NONCE:
			dhash__client_keep_nonce(rm->d, &a.addr, a.nonce);
			break;
		case DHASH_ACT_FINISH:
			rmany_finish(rm, &a);
			break;
		default:
			break;
		}
	}
	if (rm->finished) {
		dhash_client_t *d = rm->d;
		dhash__rmany_fini(&rm->sm);
		free(rm);
		dhash__client_release(d);
	}
}

static int rmany_start(dhash_client_t *d, const struct cfs_id *keys, uint32_t n, uint32_t holders,
                       uint32_t need, uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	if (dhash__client_closing(d))
		return -ECANCELED;
	if (n == 0)
		return -EINVAL;
	struct rmany *rm = xcalloc(1, sizeof(*rm));

	rm->d = d;
	rm->cb = cb;
	rm->arg = arg;
	dhash__rmany_init(&rm->sm, keys, n, holders,
	                  lease_until ? lease_until : cfs_wall_s() + dhash__client_lease(d));
	dhash__rmany_need(&rm->sm, need);
	dhash__client_hold(d);
	rmany_run(rm);
	return 0;
}

int dhash_refresh_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n,
                       uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	return rmany_start(d, keys, n, dhash__client_replicas(d), 1, lease_until, cb, arg);
}

int dhash_refresh_coded_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n, uint32_t m,
                             uint32_t code_n, uint64_t lease_until, dhash_bits_cb cb, void *arg)
{
	if (!dhash_code_valid(m, code_n))
		return -EINVAL;
	return rmany_start(d, keys, n, code_n, m, lease_until, cb, arg);
}
