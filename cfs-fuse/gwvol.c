/*
 * cfs-gateway's open volumes (gwvol.h): one reader per volume and
 * version, kept while requests use it and, unused, up to a bound.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/gwvol.h"

/* The entries, most recently used first: at most c.max unused ones, and
 * those held. A list: c.max is small (cfs-gateway --roots, 16). */
struct fs_gw_vols {
	struct fs_gw_vols_config c;
	struct fs_gw_vol *head;    /* most recently used first */
	uint32_t n;
};

static void vol_unlink(struct fs_gw_vol *v)
{
	struct fs_gw_vols *vs = v->vols;

	if (!v->linked)
		return;
	if (v->prev)
		v->prev->next = v->next;
	else
		vs->head = v->next;
	if (v->next)
		v->next->prev = v->prev;
	v->prev = v->next = NULL;
	v->linked = false;
	vs->n--;
}

static void vol_link_front(struct fs_gw_vol *v)
{
	struct fs_gw_vols *vs = v->vols;

	v->prev = NULL;
	v->next = vs->head;
	if (vs->head)
		vs->head->prev = v;
	vs->head = v;
	v->linked = true;
	vs->n++;
}

void fs__gw_vol_unref(struct fs_gw_vol *v)
{
	if (!v || --v->refs || v->linked)
		return;
	free(v->fs);
	free(v->raw);
	free(v);
}

static void vol_got(void *arg, const struct dhash_get_result *g);

static void vol_fetch(struct fs_gw_vol *v)
{
	cfsfuse_t *fs = v->fs;
	struct cfs_id key;
	int r;

	if (fs->o.version)
		sfsro_root_version_key(&fs->vol, fs->o.version, &key);
	else
		sfsro_root_key(&fs->vol, &key);
	v->fetching = true;
	v->refs++;
	if (v->vols->c.local)
		r = fs__local_get(v->vols->c.local, &key, vol_got, v);
	else if (fs->o.version) /* immutable: any replica's copy will do */
		r = client_get(v->vols->c.dh, &key, vol_got, v);
	else
		r = client_get_root(v->vols->c.dh, &key, vol_got, v);
	if (r < 0) {
		struct dhash_get_result g = { .status = r };
		vol_got(v, &g);
	}
}

static void vol_got(void *arg, const struct dhash_get_result *g)
{
	struct fs_gw_vol *v = arg;
	cfsfuse_t *fs = v->fs;
	struct sfsro_root root;
	int r = fs__root_check(fs, g, &root);

	v->fetching = false;
	v->fetched_ms = uv_now(v->vols->c.loop);
	if (r == 0 && (!v->ready || root.seq > fs->root.seq)) {
		if (v->ready)
			log_info("volume %s: now at sequence %lu (was %lu)", fs->volname,
			         (unsigned long)root.seq, (unsigned long)fs->root.seq);
		fs->root = root;
		if (!fs->o.version && root.seq > fs->max_seq) { /* never back below a root served */
			int w;
			fs->max_seq = root.seq;
			if ((w = cfs_num_store(fs->seq_path, root.seq)) < 0)
				log_warn_errno(w, "cannot record the root sequence in %s", fs->seq_path);
		}
		free(v->raw);
		v->raw = xmemdup(g->data, g->len);
		v->raw_len = g->len;
		v->ready = true;
	} else if (r < 0 && v->ready && r != -ECANCELED) {
		log_warn("volume %s: keeping sequence %lu: the root the ring gave is refused: %s",
		         fs->volname, (unsigned long)fs->root.seq, strerror(-r));
	} else if (r < 0 && !v->ready) {
		v->err = r;
		vol_unlink(v); /* the next request asks again */
	}
	struct fs_gw_waiter *w = v->waiters;
	v->waiters = NULL;
	while (w) {
		struct fs_gw_waiter *next = w->next;
		w->cb(w, v->ready ? 0 : r);
		w = next;
	}
	fs__gw_vol_unref(v);
}

/* Drop unused entries, least recently used first, down to the bound. */
static void vol_trim(struct fs_gw_vols *vs)
{
	struct fs_gw_vol *v = vs->head;

	while (v && v->next)
		v = v->next;
	while (v && vs->n > vs->c.max) {
		struct fs_gw_vol *prev = v->prev;
		if (!v->refs) {
			vol_unlink(v);
			v->refs = 1;
			fs__gw_vol_unref(v);
		}
		v = prev;
	}
}

struct fs_gw_vol *fs__gw_vol_get(struct fs_gw_vols *vs, const uint8_t vol[static 32], uint64_t seq,
                                struct fs_gw_waiter *w)
{
	struct fs_gw_vol *v;

	for (v = vs->head; v; v = v->next)
		if (v->fs->o.version == seq && !memcmp(v->fs->vol.b, vol, 32))
			break;
	if (v) {
		vol_unlink(v);
		vol_link_front(v);
		v->refs++;
		if (v->ready && !seq && !v->fetching && uv_now(vs->c.loop) - v->fetched_ms >= vs->c.max_age_ms)
			vol_fetch(v);
	} else {
		v = xcalloc(1, sizeof(*v));
		v->vols = vs;
		v->fs = xcalloc(1, sizeof(*v->fs));
		v->fs->loop = vs->c.loop;
		v->fs->o = *vs->c.o;
		v->fs->o.version = seq;
		memcpy(v->fs->vol.b, vol, 32);
		cfs_name_encode(v->fs->volname, vol);
		v->fs->dh = vs->c.dh;
		v->fs->local = vs->c.local;
		v->fs->blocks = vs->c.blocks;
		v->fs->doing = "read";
		if (!seq) { /* rollback protection, shared with the user's mounts */
			snprintf(v->fs->seq_path, sizeof(v->fs->seq_path), "%s/%s.seq", vs->c.state_dir,
			         v->fs->volname);
			v->fs->max_seq = cfs_num_load(v->fs->seq_path);
		}
		v->refs = 1;
		vol_link_front(v);
		vol_trim(vs);
		vol_fetch(v);
	}
	if (!v->ready && v->fetching) {
		w->next = v->waiters;
		v->waiters = w;
	}
	return v;
}

struct fs_gw_vols *fs__gw_vols_new(const struct fs_gw_vols_config *c)
{
	struct fs_gw_vols *vs = xcalloc(1, sizeof(*vs));

	vs->c = *c;
	return vs;
}
