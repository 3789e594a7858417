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
 *     goes through scrub_read, which verifies the bytes (dhash_verify: the
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

int scrub_read(dhash_server_t *s, const struct cfs_id *key, struct dhash_rec *ret,
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

void scrub_slice(dhash_server_t *s)
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
		int r = scrub_read(s, &key, &rec, SCRUB_BY_SCRUB);
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

	scrub_slice(s);
	uv_timer_start(&s->scrub.timer, on_scrub, wait_ms(s), 0);
}

void scrub_start(dhash_server_t *s)
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

void scrub_stop(dhash_server_t *s)
{
	uv_timer_stop(&s->scrub.timer);
}

void scrub_status(dhash_server_t *s, struct cfs_sbuf *b, bool json)
{
	const struct dhash_scrub *c = &s->scrub;
	uint64_t blocks, bytes, recoveries;
	uint64_t bad = c->bad_scrub + c->bad_push + c->bad_fetch;
	char at[9] = "-";
	bool failed = dhash_store_failed(s->store, &recoveries);

	dhash_store_totals(s->store, &blocks, &bytes);
	if (c->started)
		cfs_id_short(&c->at, at);
	if (json) {
		cfs_sb_printf(b, ",\"scrub\":{\"period_ms\":%lu,\"rate\":%lu,\"passes\":%lu,"
		              "\"last_pass_ms\":%lu,\"position\":\"%s\",\"pass_blocks\":%lu,\"pass_bytes\":%lu,"
		              "\"blocks\":%lu,\"bytes\":%lu,\"bad\":%lu,\"bad_scrub\":%lu,\"bad_push\":%lu,"
		              "\"bad_fetch\":%lu,\"dropped\":%lu},\"store_writable\":%s,"
		              "\"store_recoveries\":%lu",
		              (unsigned long)s->cfg.scrub_ms, (unsigned long)(s->cfg.scrub_ms ? c->rate : 0),
		              (unsigned long)c->passes, (unsigned long)c->last_pass_ms, at,
		              (unsigned long)c->pass_blocks, (unsigned long)c->pass_bytes,
		              (unsigned long)c->blocks, (unsigned long)c->bytes, (unsigned long)bad,
		              (unsigned long)c->bad_scrub, (unsigned long)c->bad_push,
		              (unsigned long)c->bad_fetch, (unsigned long)c->dropped,
		              failed ? "false" : "true", (unsigned long)recoveries);
		return;
	}
	if (s->cfg.scrub_ms)
		cfs_sb_printf(b, "scrub: %lu passes done (the last in %.1f s); this pass at %s, %lu of %lu "
		              "blocks, %lu bytes; %lu blocks, %lu bytes checked in all, at %lu bytes/s\n",
		              (unsigned long)c->passes, (double)c->last_pass_ms / 1000.0, at,
		              (unsigned long)c->pass_blocks, (unsigned long)blocks,
		              (unsigned long)c->pass_bytes, (unsigned long)c->blocks,
		              (unsigned long)c->bytes, (unsigned long)c->rate);
	else
		cfs_sb_printf(b, "scrub: off\n");
	cfs_sb_printf(b, "bad copies: %lu found (%lu by the scrub, %lu by repair pushes, %lu by "
	              "fetches), %lu dropped\n", (unsigned long)bad, (unsigned long)c->bad_scrub,
	              (unsigned long)c->bad_push, (unsigned long)c->bad_fetch,
	              (unsigned long)c->dropped);
	if (failed || recoveries)
		cfs_sb_printf(b, "store: %s; %lu recoveries after failed writes\n",
		              failed ? "WRITES REFUSED since a write failed (disk full?)" : "writable",
		              (unsigned long)recoveries);
}
