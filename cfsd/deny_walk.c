/*
 * A volume's keys for the denylist: sfsro-format's walker (root, then a
 * visit of every block under it) driven by the daemon's DHash client.
 *
 * The walker does the work that is the same for every reader of a volume
 * (verifying each block, expanding directories, inodes and indirect
 * blocks, meeting each key once); here is only the driver: it fetches
 * what the walker asks for, at most DENY_WINDOW gets at a time, and
 * collects the keys the visit names. Data blocks are named by their
 * parents, so only the volume's structure travels, never its data.
 */
#include <stdlib.h>
#include <string.h>

#include "cfsd/deny.h"

#define DENY_WINDOW 16

struct deny_walk {
	dhash_client_t *client;
	sfsro_walker_t *w;
	struct cfs_pubkey pk;
	struct sfsro_root root;
	bool have_root;           /* the root is read: the visit is under way */
	struct cfs_id *keys;
	uint32_t n, cap;
	uint32_t inflight;
	int status;               /* the walk's end, once ended */
	bool ended;
	cfsd_deny_walk_cb cb;
	void *arg;
};

struct deny_get {
	struct deny_walk *dw;
	struct cfs_id key;
};

static void add_key(struct deny_walk *dw, const struct cfs_id *key)
{
	if (dw->n == dw->cap) {
		dw->cap = dw->cap ? 2 * dw->cap : 256;
		dw->keys = xrealloc(dw->keys, dw->cap * sizeof(*dw->keys));
	}
	dw->keys[dw->n++] = *key;
}

/* The walk is over once it ended and no get is out: report, free. */
static void maybe_finish(struct deny_walk *dw)
{
	if (!dw->ended || dw->inflight)
		return;
	dw->cb(dw->arg, dw->status, dw->have_root ? &dw->root : NULL, dw->keys, dw->n);
	sfsro_walker_free(dw->w);
	free(dw->keys);
	free(dw);
}

static void on_get(void *arg, const struct dhash_get_result *r);

static int start_get(struct deny_walk *dw, const struct cfs_id *key, bool root)
{
	struct deny_get *g = xcalloc(1, sizeof(*g));
	int r;

	g->dw = dw;
	g->key = *key;
	r = root ? dhash_get_root(dw->client, key, on_get, g) : dhash_get(dw->client, key, on_get, g);
	if (r < 0) {
		free(g);
		return r;
	}
	dw->inflight++;
	return 0;
}

/* Step the walker until it waits for blocks, or the window is full. */
static void pump(struct deny_walk *dw)
{
	struct sfsro_step st;

	while (!dw->ended && dw->inflight < DENY_WINDOW) {
		int r = sfsro_walker_step(dw->w, &st);
		if (r == SFSRO_WALK_NEED) {
			int g = start_get(dw, &st.key, !dw->have_root);
			if (g < 0)
				(void)sfsro_walker_feed(dw->w, &st.key, g, NULL, 0, 0);
		} else if (r == SFSRO_WALK_BLOCK) {
			add_key(dw, &st.key);
		} else if (r == SFSRO_WALK_HINT || r == SFSRO_WALK_ENTRY) {
			continue;
		} else if (r == SFSRO_WALK_WAIT) {
			break;
		} else if (r == SFSRO_WALK_DONE && !dw->have_root) {
			/* the root is read and accepted: now every block under it */
			struct cfs_id rk, vk;
			sfsro_root_key(&dw->pk, &rk);
			add_key(dw, &rk);
			/* its version block too, so that the copy here is
			 * deleted (older versions are refused by the volume
			 * they name, by the server) */
			sfsro_root_version_key(&dw->pk, dw->root.seq, &vk);
			add_key(dw, &vk);
			dw->have_root = true;
			sfsro_walker_visit(dw->w, &dw->root.root_dir);
		} else {
			dw->status = r < 0 ? r : 0;
			dw->ended = true;
		}
	}
}

static void on_get(void *arg, const struct dhash_get_result *r)
{
	struct deny_get *g = arg;
	struct deny_walk *dw = g->dw;

	dw->inflight--;
	if (r->status == -ECANCELED && !dw->ended) {
		/* the client is closing: no further gets */
		dw->status = -ECANCELED;
		dw->ended = true;
	}
	if (!dw->ended)
		(void)sfsro_walker_feed(dw->w, &g->key, r->status, r->data, r->len, 0);
	free(g);
	pump(dw);
	maybe_finish(dw);
}

int cfsd_deny_walk(dhash_client_t *client, const struct cfs_pubkey *pk, cfsd_deny_walk_cb cb,
                   void *arg)
{
	struct deny_walk *dw = xcalloc(1, sizeof(*dw));
	struct sfsro_step st;
	int r;

	dw->client = client;
	dw->pk = *pk;
	dw->cb = cb;
	dw->arg = arg;
	dw->w = sfsro_walker_new();
	sfsro_walker_root(dw->w, pk, 0, 0, &dw->root); /* any sequence, expired or not */
	r = sfsro_walker_step(dw->w, &st);
	if (r == SFSRO_WALK_NEED)
		r = start_get(dw, &st.key, true);
	else
		r = r < 0 ? r : -EPROTO; /* a root walk always asks for the root first */
	if (r < 0) {
		sfsro_walker_free(dw->w);
		free(dw);
	}
	return r;
}
