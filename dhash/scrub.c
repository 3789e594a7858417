/*
 * The scrub, and the check of every stored copy this server hands to
 * others.
 *
 * A disk rots quietly: a copy whose bytes changed is still "stored", the
 * digests of replica maintenance (sync.c) cover keys, not bytes, so nothing
 * notices until a reader fetches it, and when the other replicas die one
 * by one the block is gone while this server still lists it. So:
 *
 *   - Every read of a stored block that serves it to someone else (a sync
 *     push to a replica, a FETCH answer to a peer's sync or to a client)
 *     goes through dhash__scrub_read, which verifies the bytes (dhash_verify: the
 *     hash of a content-hash block, the signature of a root). A copy that
 *     fails is logged, counted and dropped from the store; the server then
 *     lacks the key, and the next sync round fetches it back from a replica
 *     that holds it (the key's successor fetches what only a peer holds;
 *     another replica is pushed a good copy by the successor).
 *   - A background scrub rereads and verifies every stored block, in key
 *     order, at a bounded rate: by default the capacity (10 GiB) in a week,
 *     about 18 KB/s, so a copy nobody reads is found within a pass. It
 *     works in slices on a timer (at most SLICE_BLOCKS blocks and
 *     SLICE_BYTES a wake-up), so it never holds the loop for long, and a
 *     pass starts at most once per period.
 */
#include <stdlib.h>
#include <string.h>

#include "dhash/internal.h"

#define SLICE_BLOCKS 32
#define SLICE_BYTES (1 << 20)
#define BLOCK_COST 256          /* bytes charged per block beyond its length (the lookup) */
#define RATE_MIN 4096           /* bytes a second, whatever the period */
#define WAIT_MIN_MS 10
#define WAIT_MAX_MS 60000

/* SCRUB_BY_PUSH is every read of replica maintenance (a push, a
 * comparison of roots), counted as bad_push. */
static const char *reader_name[] = { "scrub", "replica maintenance", "fetch" };

int dhash__scrub_read(dhash_server_t *s, const struct cfs_id *key, struct dhash_rec *ret,
               enum scrub_reader by)
{
	uint64_t seq;
	char hex[65];
	int r = dhash_store_get(s->store, key, ret), v = 0;

	if (r == 0) {
		v = dhash_verify(ret->kind, key, ret->data, ret->len, &seq);
		if (v == 0 && ret->kind == DHASH_KIND_ROOT && seq != ret->seq) {
			/* The signed bytes are good, the header is not: keep the
			 * root (it may be the last copy), mend the header. */
			log_warn("block store: the header of root %s says sequence %lu, its bytes %lu; "
			         "rewritten", cfs_id_hex(key, hex), (unsigned long)ret->seq,
			         (unsigned long)seq);
			ret->seq = seq;
			(void)dhash_store_put(s->store, key, ret);
		}
		if (v == 0)
			return 0;
		free(ret->data);
		ret->data = NULL;
	} else if (r != -EUCLEAN) {
		return r; /* absent, or a read error that may pass: never a reason to drop */
	}
	/* A record that fails to verify, or one too damaged to read. */
	if (by == SCRUB_BY_SCRUB)
		s->scrub.bad_scrub++;
	else if (by == SCRUB_BY_PUSH)
		s->scrub.bad_push++;
	else
		s->scrub.bad_fetch++;
	int d = dhash_store_drop(s->store, key);
	if (d == 0)
		s->scrub.dropped++;
	log_warn("block store: the stored copy of %s %s (found by %s); %s", cfs_id_hex(key, hex),
	         r < 0 ? "cannot be read" : v == -EKEYREJECTED ? "has a bad signature" : "does not verify",
	         reader_name[by], d == 0 ? "dropped, to be fetched again from a replica"
	                                 : "could not be dropped");
	return r < 0 && d < 0 ? r : -ENOENT;
}

/* ------------------------------------------------------------ the pass */

static uint64_t scrub_rate(const dhash_server_t *s)
{
	uint64_t blocks, bytes, basis = s->cfg.capacity_bytes ? s->cfg.capacity_bytes
	                                                      : DHASH_CAPACITY_DEFAULT;

	if (s->cfg.scrub_bytes_per_s)
		return s->cfg.scrub_bytes_per_s;
	dhash_store_totals(s->store, &blocks, &bytes);
	bytes += blocks * BLOCK_COST;
	if (bytes > basis)
		basis = bytes;
	/* basis / period, in bytes a second; the product fits for any sane size */
	uint64_t r = (uint64_t)((double)basis * 1000.0 / (double)s->cfg.scrub_ms);
	return r > RATE_MIN ? r : RATE_MIN;
}

static void pass_end(dhash_server_t *s, uint64_t now)
{
	struct dhash_scrub *c = &s->scrub;

	c->passes++;
	c->last_pass_ms = now - c->pass_start_ms;
	log_debug("scrub: pass %lu done in %lu ms: %lu blocks, %lu bytes", (unsigned long)c->passes,
	          (unsigned long)c->last_pass_ms, (unsigned long)c->pass_blocks,
	          (unsigned long)c->pass_bytes);
	c->next_pass_ms = c->pass_start_ms + s->cfg.scrub_ms;
	c->started = c->in_pass = false;
	c->nbatch = c->ibatch = 0;
	c->batch_last = false;
	c->pass_blocks = c->pass_bytes = 0;
}

/* The next key to check, or false at the end of the pass. */
static bool next_key(dhash_server_t *s, struct cfs_id *ret)
{
	struct dhash_scrub *c = &s->scrub;

	if (c->ibatch == c->nbatch) {
		bool more;
		if (c->batch_last)
			return false;
		c->nbatch = dhash_store_list(s->store, c->started ? &c->at : NULL, c->batch,
		                             (uint32_t)(sizeof(c->batch) / sizeof(c->batch[0])), &more);
		c->ibatch = 0;
		c->batch_last = !more;
		if (c->nbatch == 0)
			return false;
	}
	*ret = c->batch[c->ibatch++];
	return true;
}

void dhash__scrub_slice(dhash_server_t *s)
{
	struct dhash_scrub *c = &s->scrub;
	uint64_t now = uv_now(s->loop);
	uint32_t n = 0;

	c->rate = scrub_rate(s);
	c->credit += (int64_t)(c->rate * (now - c->last_ms) / 1000);
	if (c->credit > SLICE_BYTES)
		c->credit = SLICE_BYTES; /* an idle spell buys no burst */
	c->last_ms = now;
	if (now < c->next_pass_ms)
		return;
	if (!c->in_pass) {
		c->in_pass = true;
		c->pass_start_ms = now;
	}
	while (c->credit > 0 && n < SLICE_BLOCKS) {
		struct cfs_id key;
		struct dhash_rec rec;
		if (!next_key(s, &key)) {
			pass_end(s, now);
			break;
		}
		c->at = key;
		c->started = true;
		n++;
		int r = dhash__scrub_read(s, &key, &rec, SCRUB_BY_SCRUB);
		size_t len = r == 0 ? rec.len : 0;
		if (r == 0)
			free(rec.data);
		c->credit -= (int64_t)(len + BLOCK_COST);
		c->pass_blocks++;
		c->pass_bytes += len;
		c->blocks++;
		c->bytes += len;
	}
}

/* When the next slice may run: once the debt is paid, or the next pass. */
static uint64_t wait_ms(const dhash_server_t *s)
{
	const struct dhash_scrub *c = &s->scrub;
	uint64_t now = uv_now(s->loop), w = WAIT_MIN_MS;

	if (now < c->next_pass_ms)
		w = c->next_pass_ms - now;
	else if (c->credit < 0 && c->rate)
		w = (uint64_t)(-c->credit) * 1000 / c->rate + 1;
	return w < WAIT_MIN_MS ? WAIT_MIN_MS : w > WAIT_MAX_MS ? WAIT_MAX_MS : w;
}

static void on_scrub(uv_timer_t *t)
{
	dhash_server_t *s = t->data;

	dhash__scrub_slice(s);
	uv_timer_start(&s->scrub.timer, on_scrub, wait_ms(s), 0);
}

void dhash__scrub_start(dhash_server_t *s)
{
	struct dhash_scrub *c = &s->scrub;

	uv_timer_init(s->loop, &c->timer);
	c->timer.data = s;
	c->last_ms = c->pass_start_ms = c->next_pass_ms = uv_now(s->loop);
	if (s->cfg.scrub_ms) {
		c->rate = scrub_rate(s);
		uv_timer_start(&c->timer, on_scrub, WAIT_MIN_MS, 0);
	}
}

void dhash__scrub_stop(dhash_server_t *s)
{
	uv_timer_stop(&s->scrub.timer);
}

/* The scrub's progress and the store's health, described once (cfs_stat). */
struct scrub_snap {
	uint64_t period_ms, rate, passes, last_pass_ms, pass_blocks, pass_bytes, blocks, bytes;
	uint64_t bad, bad_scrub, bad_push, bad_fetch, dropped, recoveries;
	const char *position;
	bool writable;
};

#define S(kind, field, name, label, unit) CFS_STAT(kind, struct scrub_snap, field, name, label, unit)
static const struct cfs_stat scrub_stats[] = {
	CFS_STAT_BEGIN("scrub", "scrub"),
	S(U64, period_ms, "period_ms", "every", "ms"),
	S(U64, rate, "rate", "rate", "bytes/s"),
	S(U64, passes, "passes", "passes done", NULL),
	S(U64, last_pass_ms, "last_pass_ms", "the last in", "ms"),
	S(STR, position, "position", "this pass at", NULL),
	S(U64, pass_blocks, "pass_blocks", "blocks", NULL),
	S(U64, pass_bytes, "pass_bytes", "bytes", NULL),
	S(U64, blocks, "blocks", "checked in all", "blocks"),
	S(U64, bytes, "bytes", "checked in all", "bytes"),
	CFS_STAT_BEGIN(NULL, "bad copies"),
	S(U64, bad, "bad", "found", NULL),
	S(U64, bad_scrub, "bad_scrub", "by the scrub", NULL),
	S(U64, bad_push, "bad_push", "by repair pushes", NULL),
	S(U64, bad_fetch, "bad_fetch", "by fetches", NULL),
	S(U64, dropped, "dropped", "dropped", NULL),
	CFS_STAT_CLOSE,
	CFS_STAT_CLOSE,
	CFS_STAT_BEGIN(NULL, "store"),
	S(BOOL, writable, "store_writable", "writable", NULL),
	S(U64, recoveries, "store_recoveries", "recoveries after failed writes", NULL),
	CFS_STAT_CLOSE,
};
#undef S

void dhash__scrub_status(dhash_server_t *s, struct cfs_sbuf *b, bool json)
{
	const struct dhash_scrub *c = &s->scrub;
	char at[9] = "-";
	struct scrub_snap n = {
		.period_ms = s->cfg.scrub_ms, .rate = s->cfg.scrub_ms ? c->rate : 0,
		.passes = c->passes, .last_pass_ms = c->last_pass_ms, .position = at,
		.pass_blocks = c->pass_blocks, .pass_bytes = c->pass_bytes, .blocks = c->blocks,
		.bytes = c->bytes, .bad = c->bad_scrub + c->bad_push + c->bad_fetch,
		.bad_scrub = c->bad_scrub, .bad_push = c->bad_push, .bad_fetch = c->bad_fetch,
		.dropped = c->dropped,
	};
	bool first = false; /* JSON: after the server's own members */

	n.writable = !dhash_store_failed(s->store, &n.recoveries);
	if (c->started)
		cfs_id_short(&c->at, at);
	cfs_stat_render(b, json, scrub_stats, CFS_ARRAY_SIZE(scrub_stats), &n, &first);
	if (!json && !n.writable)
		cfs_sb_printf(b, "store: WRITES REFUSED since a write failed (disk full?)\n");
}
