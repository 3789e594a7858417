/*
 * The pinner: the daemon's driver of pin rounds on its libuv loop (see
 * cfsd/pin.h; the round itself is cfsd/pin_walk.c).
 *
 * Why the pinner keeps copies at all: a refresh that finds no replica can
 * only be repaired by someone holding the bytes. The copies live in
 * DATA/pinned, apart from the block store (blocks/), whose replicas follow
 * ring placement and whose cached copies give way under pressure; the
 * pinner's are there because it promised to keep them.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfsd/pin.h"

struct pin {
	struct cfs_pubkey pk;
	char name[CFS_NAME_LEN + 1];
	uint64_t seq;                 /* the highest root sequence seen (persisted) */
	uint32_t versions;            /* the newest this many versions are kept (persisted) */
	struct cfsd_pin_walk *walk;   /* the round under way, or NULL */
	uint32_t inflight;            /* its client operations out */
	bool removed;                 /* unpinned: freed when inflight is 0 */
	uint64_t next_ms;             /* monotonic: the next round */
	uint64_t round_start_ms;
	uint64_t rounds;
	bool has_last;
	struct cfsd_pin_stats last;
	uint64_t last_end_s;          /* wall clock */
	uint64_t last_ms;             /* how long it took */
	struct pin *next;
};

struct cfsd_pinner {
	uv_loop_t *loop;
	dhash_client_t *client;
	struct cfsd_pin_config cfg;
	dhash_cache_t *cache;
	struct cfsd_pin_store store;
	char path[600], dir[560];
	struct pin *pins;
	uv_timer_t timer;
	uint32_t inflight;
	bool stopping, freeing, timer_closed;
};

/* One client operation of a round. */
struct pin_op {
	cfsd_pinner_t *p;
	struct pin *pin;
	struct cfsd_pin_action a;
};

static bool cache_has(void *ctx, const struct cfs_id *key)
{
	return dhash_cache_has(ctx, key);
}

static int cache_get(void *ctx, const struct cfs_id *key, uint32_t *kind, uint8_t **p, size_t *len)
{
	uint8_t k;
	int r = dhash_cache_get(ctx, key, &k, p, len);
	if (r == 0)
		*kind = k;
	return r;
}

static int cache_put(void *ctx, const struct cfs_id *key, uint32_t kind, const uint8_t *p, size_t len)
{
	/* The cache keeps the first copy of a key of the same length (right
	 * for content hashes); a newer root must replace the older one. */
	if (kind == DHASH_KIND_ROOT)
		(void)dhash_cache_del(ctx, key);
	return dhash_cache_put(ctx, key, (uint8_t)kind, p, len);
}

/* DATA/pins, one "VOLUME SEQUENCE [VERSIONS]" line per pin (no VERSIONS:
 * 1, as files written before versions were kept), replaced atomically: a
 * crash leaves the old list or the new one, never half of one. */
static int save(cfsd_pinner_t *p)
{
	struct cfs_sbuf b = { 0 };
	int r;

	cfs_sb_printf(&b, "# cfsd pins: VOLUME HIGHEST-ROOT-SEQUENCE-SEEN VERSIONS-KEPT "
	              "(cfsctl pin / unpin)\n");
	for (struct pin *q = p->pins; q; q = q->next)
		cfs_sb_printf(&b, "%s %lu %u\n", q->name, (unsigned long)q->seq, q->versions);
	r = cfs_write_file_atomic(p->path, b.p, b.len, 0600);
	free(b.p);
	return r < 0 ? log_error_errno(r, "cannot write %s", p->path) : 0;
}

static struct pin *pin_new(cfsd_pinner_t *p, const struct cfs_pubkey *pk, uint64_t seq,
                           uint32_t versions)
{
	struct pin *q = xcalloc(1, sizeof(*q)), **tail = &p->pins;

	q->pk = *pk;
	cfs_name_encode(q->name, pk->b);
	q->seq = seq;
	q->versions = versions;
	q->next_ms = cfs_now_ms();
	while (*tail)
		tail = &(*tail)->next;
	*tail = q;
	return q;
}

static void pin_unlink(cfsd_pinner_t *p, struct pin *q)
{
	for (struct pin **pp = &p->pins; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			return;
		}
	}
}

static void pin_release(struct pin *q)
{
	cfsd_pin_walk_free(q->walk);
	free(q);
}

static void maybe_release(cfsd_pinner_t *p)
{
	if (p->freeing && p->timer_closed && p->inflight == 0)
		free(p);
}

static void arm(cfsd_pinner_t *p);

static bool ring_ready(cfsd_pinner_t *p)
{
	return !p->cfg.ring_ready || p->cfg.ring_ready(p->cfg.ring_ready_arg);
}

static void round_start(cfsd_pinner_t *p, struct pin *q)
{
	q->walk = cfsd_pin_walk_new(&q->pk, q->seq, cfs_wall_s(), &p->store);
	cfsd_pin_walk_versions(q->walk, q->versions);
	q->round_start_ms = cfs_now_ms();
}

static void round_end(cfsd_pinner_t *p, struct pin *q)
{
	const struct cfsd_pin_stats *st = cfsd_pin_walk_stats(q->walk);
	uint64_t now = cfs_now_ms();

	q->last = *st;
	q->has_last = true;
	q->last_end_s = cfs_wall_s();
	q->last_ms = now - q->round_start_ms;
	q->rounds++;
	cfsd_pin_walk_free(q->walk);
	q->walk = NULL;
	if (q->last.seq > q->seq) {
		q->seq = q->last.seq;
		(void)save(p);
	}
	/* A round that could not reach the ring (a daemon just started, a
	 * partition) is tried again soon, not a whole period later. */
	uint32_t period = p->cfg.round_ms;
	if ((q->last.errors || !q->last.seq) && period > CFSD_PIN_RETRY_MS)
		period = CFSD_PIN_RETRY_MS;
	q->next_ms = now + period;
	if (q->last.root_expired)
		log_warn("pin %s: root %lu expired at %lu; its blocks are renewed all the same",
		         q->name, (unsigned long)q->last.seq, (unsigned long)q->last.valid_until);
	if (!q->last.seq) {
		log_warn("pin %s: round %lu: no root of the volume found (%s); again in %u ms", q->name,
		         (unsigned long)q->rounds, q->last.errors ? "errors reaching the ring" : "missing",
		         period);
		return;
	}
	cfs_log(q->last.errors || q->last.missing ? CFS_LOG_WARN : CFS_LOG_INFO,
	        "pin %s: round %lu: root %lu, %lu blocks: %lu renewed, %lu re-stored, %lu missing, "
	        "%lu errors, %lu copied here (%lu ms)", q->name, (unsigned long)q->rounds,
	        (unsigned long)q->last.seq, (unsigned long)q->last.blocks,
	        (unsigned long)q->last.renewed, (unsigned long)q->last.restored,
	        (unsigned long)q->last.missing, (unsigned long)q->last.errors,
	        (unsigned long)q->last.fetched, (unsigned long)q->last_ms);
}

static uint64_t lease_until(cfsd_pinner_t *p)
{
	return cfs_wall_s() + p->cfg.lease_s;
}

static void pump(cfsd_pinner_t *p);

/* An operation is back: its pin may have been unpinned meanwhile, the
 * pinner may be stopping (the client cancels with -ECANCELED). */
static bool op_end(struct pin_op *o)
{
	cfsd_pinner_t *p = o->p;
	struct pin *q = o->pin;
	bool live = !p->stopping && !q->removed;

	q->inflight--;
	p->inflight--;
	if (q->removed && q->inflight == 0)
		pin_release(q);
	free(o);
	maybe_release(p);
	return live;
}

static void on_get(void *arg, const struct dhash_get_result *r)
{
	struct pin_op *o = arg;
	cfsd_pinner_t *p = o->p;

	if (!p->stopping && !o->pin->removed)
		cfsd_pin_walk_fetched(o->pin->walk, &o->a, r->status, r->kind, r->data, r->len);
	if (op_end(o))
		pump(p);
}

static void on_refresh(void *arg, int status, const struct cfs_id *key, uint32_t found, uint64_t lease)
{
	struct pin_op *o = arg;
	cfsd_pinner_t *p = o->p;

	if (!p->stopping && !o->pin->removed)
		cfsd_pin_walk_refreshed(o->pin->walk, &o->a, status, found);
	if (op_end(o))
		pump(p);
}

/* A coded block's renewal: found when m of its n holders had theirs
 * (-ENOENT otherwise, as a block on no replica: put back). */
static void on_refresh_coded(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct pin_op *o = arg;
	bool found = status == 0 && n == 1 && (bits[0] & 1);

	on_refresh(o, status < 0 ? status : found ? 0 : -ENOENT, &o->a.key, found, lease);
}

static void on_put(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	struct pin_op *o = arg;
	cfsd_pinner_t *p = o->p;

	if (!p->stopping && !o->pin->removed)
		cfsd_pin_walk_put_done(o->pin->walk, &o->a, status);
	if (op_end(o))
		pump(p);
}

static void op_start(cfsd_pinner_t *p, struct pin *q, struct cfsd_pin_action *a)
{
	struct pin_op *o = xcalloc(1, sizeof(*o));
	int r;

	o->p = p;
	o->pin = q;
	o->a = *a;
	o->a.data = NULL;
	q->inflight++;
	p->inflight++;
	switch (a->type) {
	case CFSD_PIN_A_FETCH:
		r = a->code_m ? dhash_get_coded(p->client, &a->key, a->code_m, a->code_n, on_get, o)
		              : dhash_get(p->client, &a->key, on_get, o);
		break;
	case CFSD_PIN_A_REFRESH:
		r = a->code_m ? dhash_refresh_coded_many(p->client, &a->key, 1, a->code_m, a->code_n,
		                                         lease_until(p), on_refresh_coded, o)
		              : dhash_refresh(p->client, &a->key, lease_until(p), on_refresh, o);
		break;
	default:
		r = a->code_m ? dhash_put_coded(p->client, a->code_m, a->code_n, a->data, a->len,
		                                lease_until(p), on_put, o)
		              : dhash_put(p->client, a->kind, a->data, a->len, lease_until(p), on_put, o);
		break;
	}
	free(a->data);
	if (r >= 0)
		return;
	/* Refused before it started: the same event as a failure. */
	if (a->type == CFSD_PIN_A_FETCH)
		cfsd_pin_walk_fetched(q->walk, &o->a, r, 0, NULL, 0);
	else if (a->type == CFSD_PIN_A_REFRESH)
		cfsd_pin_walk_refreshed(q->walk, &o->a, r, 0);
	else
		cfsd_pin_walk_put_done(q->walk, &o->a, r);
	(void)op_end(o);
}

/* Start what the rounds under way have to start, CFSD_PIN_WINDOW at most
 * in flight, so the daemon's own gets and puts are not crowded out. */
static void pump(cfsd_pinner_t *p)
{
	bool ended = false;

	if (p->stopping)
		return;
	for (struct pin *q = p->pins; q; q = q->next) {
		while (q->walk && p->inflight < CFSD_PIN_WINDOW) {
			struct cfsd_pin_action a;
			enum cfsd_pin_act t = cfsd_pin_walk_next(q->walk, &a);
			if (t == CFSD_PIN_A_WAIT)
				break;
			if (t == CFSD_PIN_A_DONE) {
				round_end(p, q);
				ended = true;
				break;
			}
			op_start(p, q, &a);
		}
	}
	if (ended)
		arm(p);
}

static void on_timer(uv_timer_t *h)
{
	cfsd_pinner_t *p = container_of(h, cfsd_pinner_t, timer);
	uint64_t now = cfs_now_ms();
	bool ready = ring_ready(p);

	for (struct pin *q = p->pins; q; q = q->next) {
		if (q->walk || q->next_ms > now)
			continue;
		if (ready)
			round_start(p, q);
		else
			q->next_ms = now + CFSD_PIN_WAIT_RING_MS;
	}
	pump(p);
	arm(p);
}

/* One timer for every pin: armed for the soonest round not yet started. */
static void arm(cfsd_pinner_t *p)
{
	uint64_t now = cfs_now_ms(), soonest = UINT64_MAX;

	if (p->stopping)
		return;
	for (struct pin *q = p->pins; q; q = q->next)
		if (!q->walk && q->next_ms < soonest)
			soonest = q->next_ms;
	if (soonest == UINT64_MAX)
		uv_timer_stop(&p->timer);
	else
		uv_timer_start(&p->timer, on_timer, soonest > now ? soonest - now : 0, 0);
}

static int load_pins(cfsd_pinner_t *p)
{
	FILE *f = fopen(p->path, "r");
	char line[256];
	unsigned lineno = 0;

	if (!f)
		return errno == ENOENT ? 0 : log_error_errno(-errno, "cannot read %s", p->path);
	while (fgets(line, sizeof(line), f)) {
		char name[128];
		unsigned long seq;
		unsigned versions = 1;
		struct cfs_pubkey pk;
		const char *why;
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		if (sscanf(line, "%127s %lu %u", name, &seq, &versions) < 2 ||
		    cfs_name_decode(pk.b, name, &why) < 0 || versions < 1 ||
		    versions > CFSD_PIN_VERSIONS_MAX) {
			log_warn("%s:%u: not a pin, skipped", p->path, lineno);
			continue;
		}
		(void)pin_new(p, &pk, seq, versions);
	}
	fclose(f);
	return 0;
}

int cfsd_pinner_new(uv_loop_t *loop, dhash_client_t *client, const char *data_dir,
                    const struct cfsd_pin_config *cfg, cfsd_pinner_t **ret)
{
	cfsd_pinner_t *p = xcalloc(1, sizeof(*p));
	char cache_dir[600];
	int r;

	p->loop = loop;
	p->client = client;
	p->cfg = *cfg;
	snprintf(p->dir, sizeof(p->dir), "%s", data_dir);
	snprintf(p->path, sizeof(p->path), "%s/%s", data_dir, CFSD_PINS_FILE);
	snprintf(cache_dir, sizeof(cache_dir), "%s/%s", data_dir, CFSD_PINNED_DIR);
	if ((r = dhash_cache_open(cache_dir, cfg->store_bytes, &p->cache)) < 0) {
		free(p);
		return log_error_errno(r, "cannot open the pinned blocks' store %s", cache_dir);
	}
	p->store = (struct cfsd_pin_store){ cache_has, cache_get, cache_put, p->cache };
	if ((r = load_pins(p)) < 0) {
		dhash_cache_close(p->cache);
		free(p);
		return r;
	}
	uv_timer_init(loop, &p->timer);
	for (struct pin *q = p->pins; q; q = q->next)
		log_info("pin %s: kept from %s (root %lu seen)", q->name, p->path, (unsigned long)q->seq);
	arm(p);
	*ret = p;
	return 0;
}

void cfsd_pinner_stop(cfsd_pinner_t *p)
{
	if (!p)
		return;
	p->stopping = true;
	uv_timer_stop(&p->timer);
}

static void on_timer_closed(uv_handle_t *h)
{
	cfsd_pinner_t *p = container_of((uv_timer_t *)h, cfsd_pinner_t, timer);

	p->timer_closed = true;
	maybe_release(p);
}

void cfsd_pinner_free(cfsd_pinner_t *p)
{
	if (!p)
		return;
	cfsd_pinner_stop(p);
	while (p->pins) {
		struct pin *q = p->pins;
		p->pins = q->next;
		q->removed = true;
		if (q->inflight == 0)
			pin_release(q);
	}
	dhash_cache_close(p->cache);
	p->cache = NULL;
	p->freeing = true;
	uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}

static struct pin *find(cfsd_pinner_t *p, const struct cfs_pubkey *pk)
{
	for (struct pin *q = p->pins; q; q = q->next)
		if (memcmp(q->pk.b, pk->b, sizeof(pk->b)) == 0)
			return q;
	return NULL;
}

int cfsd_pinner_add(cfsd_pinner_t *p, const struct cfs_pubkey *pk, uint32_t versions)
{
	struct pin *q = find(p, pk);

	if (versions < 1 || versions > CFSD_PIN_VERSIONS_MAX)
		return -EINVAL;
	if (q && q->versions == versions)
		return -EEXIST;
	if (q) {
		uint32_t was = q->versions;
		q->versions = versions;
		if (save(p) < 0) {
			q->versions = was;
			return -EIO;
		}
		log_info("pin %s: now keeping the newest %u version%s (was %u)", q->name, versions,
		         versions == 1 ? "" : "s", was);
		if (!q->walk) /* at the next round otherwise */
			q->next_ms = cfs_now_ms();
		arm(p);
		return 0;
	}
	q = pin_new(p, pk, 0, versions);
	if (save(p) < 0) {
		pin_unlink(p, q);
		pin_release(q);
		return -EIO;
	}
	log_info("pin %s: pinned (the newest %u version%s); a round starts now", q->name, versions,
	         versions == 1 ? "" : "s");
	if (ring_ready(p)) {
		round_start(p, q);
		pump(p);
	}
	arm(p);
	return 0;
}

int cfsd_pinner_remove(cfsd_pinner_t *p, const struct cfs_pubkey *pk)
{
	struct pin *q = find(p, pk);

	if (!q)
		return -ENOENT;
	pin_unlink(p, q);
	if (save(p) < 0) {
		/* Still pinned on disk: stay pinned here too. */
		q->next = p->pins;
		p->pins = q;
		return -EIO;
	}
	log_info("pin %s: unpinned (its copies in %s/%s age out)", q->name, p->dir, CFSD_PINNED_DIR);
	q->removed = true;
	if (q->inflight == 0)
		pin_release(q);
	arm(p);
	return 0;
}

void cfsd_pinner_report(cfsd_pinner_t *p, struct cfs_sbuf *b, bool json)
{
	uint64_t now = cfs_now_ms(), wall = cfs_wall_s();
	unsigned n = 0;

	for (struct pin *q = p->pins; q; q = q->next)
		n++;
	if (json)
		cfs_sb_printf(b, "{\"round_ms\":%u,\"lease_s\":%lu,\"pins\":[", p->cfg.round_ms,
		              (unsigned long)p->cfg.lease_s);
	else
		cfs_sb_printf(b, "%u pin%s; a round every %u ms renews leases to %lu s ahead\n", n,
		              n == 1 ? "" : "s", p->cfg.round_ms, (unsigned long)p->cfg.lease_s);
	for (struct pin *q = p->pins; q; q = q->next) {
		const struct cfsd_pin_stats *l = &q->last;
		long next_ms = q->walk ? 0 : (long)(q->next_ms > now ? q->next_ms - now : 0);
		if (json) {
			cfs_sb_printf(b, "%s{\"volume\":\"%s\",\"seq\":%lu,\"versions\":%u,\"rounds\":%lu,"
			              "\"running\":%s,\"next_in_ms\":%ld,\"last\":", q == p->pins ? "" : ",",
			              q->name, (unsigned long)q->seq, q->versions, (unsigned long)q->rounds,
			              q->walk ? "true" : "false", next_ms);
			if (!q->has_last) {
				cfs_sb_printf(b, "null}");
				continue;
			}
			cfs_sb_printf(b, "{\"ended\":%lu,\"ago_s\":%lu,\"ms\":%lu,\"seq\":%lu,"
			              "\"valid_until\":%lu,\"expired\":%s,\"blocks\":%lu,\"renewed\":%lu,"
			              "\"restored\":%lu,\"missing\":%lu,\"errors\":%lu,\"fetched\":%lu,"
			              "\"versions_kept\":%u,\"versions_gone\":%u}}",
			              (unsigned long)q->last_end_s, (unsigned long)(wall - q->last_end_s),
			              (unsigned long)q->last_ms, (unsigned long)l->seq,
			              (unsigned long)l->valid_until, l->root_expired ? "true" : "false",
			              (unsigned long)l->blocks, (unsigned long)l->renewed,
			              (unsigned long)l->restored, (unsigned long)l->missing,
			              (unsigned long)l->errors, (unsigned long)l->fetched, l->versions,
			              l->versions_gone);
			continue;
		}
		cfs_sb_printf(b, "%s root %lu", q->name, (unsigned long)q->seq);
		if (q->versions > 1)
			cfs_sb_printf(b, ", the newest %u versions (%u found last round)", q->versions,
			              q->has_last ? q->last.versions : 0);
		if (q->has_last)
			cfs_sb_printf(b, ", %lu blocks; last round %lus ago in %lu ms: %lu renewed, "
			              "%lu re-stored, %lu missing, %lu errors%s", (unsigned long)l->blocks,
			              (unsigned long)(wall - q->last_end_s), (unsigned long)q->last_ms,
			              (unsigned long)l->renewed, (unsigned long)l->restored,
			              (unsigned long)l->missing, (unsigned long)l->errors,
			              l->root_expired ? " (root expired)" : "");
		else
			cfs_sb_printf(b, ", no round finished yet");
		if (q->walk)
			cfs_sb_printf(b, "; a round is running\n");
		else
			cfs_sb_printf(b, "; next in %.1f s\n", (double)next_ms / 1000.0);
	}
	if (json)
		cfs_sb_printf(b, "]}\n");
}
