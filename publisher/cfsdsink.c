/*
 * The DHT store ("cfsd", "cfsd:SOCKET", "ring:ADDR"): blocks go to the ring
 * through the local daemon or a plain ring client (client/client.h). A
 * batch's "have" is one CTL_REFRESH per CFS_MSG_MAX_KEYS keys (a block
 * some replica holds is renewed to the new root's lease), then one
 * CTL_HAVE of the keys it found (a block a majority of its servers holds
 * needs no sending), its put one CTL_PUT per block, all in flight at once;
 * the daemon's DHash client (or the plain client's own) does lookups,
 * stores and replication. Every answer names the lease the
 * servers granted; the least of them bounds the root's valid-until.
 * Reads (the previous root, refresh and fsck walks) are asynchronous gets
 * like everything else; the publisher's walker driver waits for them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "publisher/internal.h"
#include "client/client.h"

struct cfsdsink {
	uv_loop_t *loop;
	char *sock;               /* "cfsd at PATH" or "the ring through ADDR" */
	bool ring;                /* a plain ring client, no daemon */
	client_t *l;
	uint64_t granted;         /* the least lease granted so far (UINT64_MAX: none) */
	uint32_t put_failures;    /* blocks not stored (the first few logged) */
	uint64_t have_unanswered; /* keys a have could not answer: sent instead */
	uint64_t put_retries;     /* puts sent again after a transient failure */
};

#define PUT_FAILURES_LOGGED 10
#define PUT_RETRIES 2             /* a put that failed transiently is sent again */

/*
 * A transient timeout never fails a publish. A have (a renewal
 * or a quorum HAVE) that the ring could not answer, after the retries the
 * daemon's DHash client already made, is not an error here: its blocks
 * are taken for absent and sent (a put of a block the ring holds costs
 * bandwidth, never correctness, and renews it like a refresh). A put that
 * failed the same way is sent again, PUT_RETRIES times. Before, with
 * --replicas 1, one timed-out HAVE on a loaded ring failed 2 publishes in
 * 3 ("the store could not say which blocks it has"). What is transient:
 * silence (-ETIMEDOUT), no server reached (-EHOSTUNREACH) and a put whose
 * quorum was not confirmed (-EREMOTEIO, often a silent server); a refusal
 * (-ENOSPC, -EDQUOT, -EBADMSG, ...) or a daemon gone (-ECONNREFUSED,
 * -ECONNRESET) is not.
 */
static bool is_transient(int status)
{
	return status == -ETIMEDOUT || status == -EHOSTUNREACH || status == -EREMOTEIO;
}

static void note_lease(struct cfsdsink *d, uint64_t lease)
{
	if (lease && lease < d->granted)
		d->granted = lease;
}

/* One batch call: done once every request is answered, with the first
 * error. The caller holds one count while it starts the requests. */
struct sink_batch {
	struct cfs_fanin fan;
	pub_done_fn done;
	void *arg;
	bool *have;
	struct pub_block *blocks;
	size_t base;              /* have: index of this request's first key */
};

static void batch_end(struct sink_batch *b, int status)
{
	if (!cfs_fanin_end(&b->fan, status))
		return;
	b->done(b->arg, b->fan.status);
	free(b);
}

/* Drop the caller's hold. A batch that started no request ends here,
 * inside the call, with the first start's error or else status_none:
 * the publisher never asks for an empty batch. */
static void batch_started(struct sink_batch *b, int status_none)
{
	if (b->fan.out == 1 && b->fan.status == 0)
		b->fan.status = status_none;
	batch_end(b, 0);
}

struct have_req {
	struct cfsdsink *d;
	struct sink_batch *b;
	size_t base;
	const struct cfs_id *keys; /* the batch's, from base (live until it ends) */
	uint32_t n;
	/* the renewal's "present" keys, confirmed again by a quorum HAVE */
	struct cfs_id confirm[CFS_MSG_MAX_KEYS];
	uint32_t at[CFS_MSG_MAX_KEYS], nconfirm;
};

/* The daemon (or the ring) cannot be reached: say so, once, on one line
 * that ends with the program's advice (which option names another store:
 * cfs-publish takes --to, cfs-fsck --from). d->sock reads "cfsd at PATH"
 * or "the ring through ADDR". */
static const char *unreachable_advice;
static bool unreachable_said;

void pub_sink_set_advice(const char *advice)
{
	unreachable_advice = advice;
}

bool pub_sink_said_unreachable(void)
{
	return unreachable_said;
}

static void hint_unreachable(struct cfsdsink *d, int status)
{
	if ((status == -ECONNREFUSED || status == -EHOSTUNREACH) && !unreachable_said) {
		unreachable_said = true;
		log_error("cannot reach %s: %s%s%s", d->sock,
		          d->ring ? "no ring node answered there"
		                  : "no cfsd is running there, or it does not answer",
		          unreachable_advice ? "; " : "", unreachable_advice ? unreachable_advice : "");
	}
}

/* The ring could not say whether these n keys (from the batch's at) are
 * stored: they are sent. True when status is such a transient failure. */
static bool have_unanswered(struct have_req *h, int status, size_t at, uint32_t n)
{
	if (!is_transient(status))
		return false;
	if (h->d->have_unanswered == 0)
		log_warn("the ring could not say whether %u blocks are stored (%s): sending them "
		         "(further such batches only counted)", n, dhash_strerror(status));
	h->d->have_unanswered += n;
	for (uint32_t i = 0; i < n; i++)
		h->b->have[at + i] = false;
	return true;
}

static void have_done(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct have_req *h = arg;

	if (have_unanswered(h, status, h->base, h->n))
		status = 0, n = 0;
	hint_unreachable(h->d, status);
	if (status == 0)
		note_lease(h->d, lease);
	for (uint32_t i = 0; status == 0 && i < n; i++)
		h->b->have[h->base + i] = bits[i / 8] >> (i % 8) & 1;
	batch_end(h->b, status);
	free(h);
}

/* The quorum's answer for the keys the renewal found. */
static void confirm_done(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct have_req *h = arg;

	if (is_transient(status)) { /* the renewal's finds are not confirmed: sent */
		if (h->d->have_unanswered == 0)
			log_warn("the ring could not confirm %u blocks are stored (%s): sending them "
			         "(further such batches only counted)", h->nconfirm, dhash_strerror(status));
		h->d->have_unanswered += h->nconfirm;
		status = 0, n = 0;
	}
	for (uint32_t j = 0; status == 0 && j < n; j++)
		h->b->have[h->base + h->at[j]] = bits[j / 8] >> (j % 8) & 1;
	batch_end(h->b, status);
	free(h);
}

/* A renewal's bit says that some server holds the block (and renewed it),
 * which one liar can claim. The block is skipped only when a
 * majority of its servers say so too (CTL_HAVE), otherwise it is sent.
 * Costs nothing for a new tree, where the renewal finds nothing. */
static void renew_done(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct have_req *h = arg;
	int r;

	if (have_unanswered(h, status, h->base, h->n))
		status = 0, n = 0;
	hint_unreachable(h->d, status);
	if (status == 0)
		note_lease(h->d, lease);
	for (uint32_t i = 0; status == 0 && i < n; i++)
		if (bits[i / 8] >> (i % 8) & 1) {
			h->confirm[h->nconfirm] = h->keys[i];
			h->at[h->nconfirm++] = i;
		}
	if (status < 0 || h->nconfirm == 0) {
		batch_end(h->b, status);
		free(h);
		return;
	}
	if ((r = client_have(h->d->l, h->confirm, h->nconfirm, confirm_done, h)) < 0) {
		batch_end(h->b, r);
		free(h);
	}
}

/* A coded block's renewal extends the leases of its fragments on all n
 * holders (client_refresh_coded), not only of the first k. */
static void sk_have(void *sink, const struct cfs_id *keys, size_t n, uint8_t code_m, uint8_t code_n,
                    uint64_t lease_until, bool *have, pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct sink_batch *b = xcalloc(1, sizeof(*b));

	b->done = done;
	b->arg = arg;
	b->have = have;
	cfs_fanin_add(&b->fan);
	for (size_t i = 0; i < n; i += CFS_MSG_MAX_KEYS) {
		struct have_req *h = xcalloc(1, sizeof(*h));
		uint32_t m = (uint32_t)(n - i < CFS_MSG_MAX_KEYS ? n - i : CFS_MSG_MAX_KEYS);
		h->d = d;
		h->b = b;
		h->base = i;
		h->keys = keys + i;
		h->n = m;
		cfs_fanin_add(&b->fan);
		int r = !lease_until ? client_have(d->l, keys + i, m, have_done, h)
		        : code_m     ? client_refresh_coded(d->l, keys + i, m, code_m, code_n, lease_until,
		                                            renew_done, h)
		                     : client_refresh(d->l, keys + i, m, lease_until, renew_done, h);
		if (r < 0) {
			free(h);
			batch_end(b, r);
		}
	}
	batch_started(b, -EINVAL); /* a zero-length batch is not asked for */
}

struct put_req {
	struct cfsdsink *d;
	struct sink_batch *b;
	struct pub_block *blk;
	pub_done_fn done;         /* put_root: the caller's callback */
	void *arg;
	uint64_t lease_until;     /* put: as asked, for a retry */
	uint32_t tries;
};

static void put_done(void *arg, int status, const struct cfs_id *key, uint64_t lease);

/* A block whole (replicated), or a coded volume's data block as fragments. */
static int sink_put(struct cfsdsink *d, const struct pub_block *b, uint64_t lease_until,
                    struct put_req *p)
{
	if (b->code_m)
		return client_put_coded(d->l, b->code_m, b->code_n, b->p, b->len, lease_until, put_done, p);
	return client_put(d->l, DHASH_KIND_CHASH, b->p, b->len, lease_until, put_done, p);
}

static void put_done(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	struct put_req *p = arg;

	if (is_transient(status) && p->tries < PUT_RETRIES) {
		p->tries++;
		p->d->put_retries++;
		if (sink_put(p->d, p->blk, p->lease_until, p) == 0)
			return;
	}

	if (status == 0)
		note_lease(p->d, lease);
	if (status < 0 && p->d->put_failures++ < PUT_FAILURES_LOGGED) {
		char k[9];
		log_error("storing block %s failed: %s%s", cfs_id_short(key, k), dhash_strerror(status),
		          p->d->put_failures == PUT_FAILURES_LOGGED ? " (further failures only counted)" : "");
	}
	p->blk->status = status;
	batch_end(p->b, 0);
	free(p);
}

static void sk_put(void *sink, struct pub_block *blocks, size_t n, uint64_t lease_until,
                   pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct sink_batch *b = xcalloc(1, sizeof(*b));

	b->done = done;
	b->arg = arg;
	cfs_fanin_add(&b->fan);
	for (size_t i = 0; i < n; i++) {
		struct put_req *p = xcalloc(1, sizeof(*p));
		p->d = d;
		p->b = b;
		p->blk = &blocks[i];
		p->lease_until = lease_until;
		cfs_fanin_add(&b->fan);
		int r = sink_put(d, &blocks[i], lease_until, p);
		if (r < 0) {
			blocks[i].status = r; /* the block's failure, not the batch's */
			free(p);
			batch_end(b, 0);
		}
	}
	batch_started(b, n ? -EIO : -EINVAL);
}

static void root_done(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	struct put_req *p = arg;
	p->done(p->arg, status);
	free(p);
}

static void sk_put_root(void *sink, const struct cfs_id *key, const uint8_t *p, size_t len,
                        uint64_t lease_until, pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct put_req *q = xcalloc(1, sizeof(*q));

	q->done = done;
	q->arg = arg;
	int r = client_put(d->l, DHASH_KIND_ROOT, p, len, lease_until, root_done, q);
	if (r < 0) {
		/* Only a block that is not a root fails here: a bug. */
		log_error_errno(r, "the signed root does not make a root block");
		free(q);
		abort();
	}
}

static void sk_put_version(void *sink, const uint8_t *p, size_t len, uint64_t lease_until,
                           pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct put_req *q = xcalloc(1, sizeof(*q));

	q->done = done;
	q->arg = arg;
	int r = client_put(d->l, DHASH_KIND_VERSION, p, len, lease_until, root_done, q);
	if (r < 0) {
		log_error_errno(r, "the signed root does not make a version block");
		free(q);
		abort();
	}
}

struct refresh_req {
	struct cfsdsink *d;
	struct sink_batch *b;
	uint32_t n;
};

static void refresh_done(void *arg, int status, const uint8_t *bits, uint32_t n, uint64_t lease)
{
	struct refresh_req *q = arg;
	uint32_t missing = 0;

	if (status == 0)
		note_lease(q->d, lease);
	for (uint32_t i = 0; status == 0 && i < n; i++)
		missing += !(bits[i / 8] >> (i % 8) & 1);
	if (missing) {
		log_error("%u of %u blocks were found on no replica (a coded block: on fewer than m "
		          "holders): the volume is no longer whole", missing, n);
		status = -ENOENT;
	}
	batch_end(q->b, status);
	free(q);
}

static void sk_refresh(void *sink, const struct cfs_id *keys, size_t n, uint8_t code_m,
                       uint8_t code_n, uint64_t lease_until, pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct sink_batch *b = xcalloc(1, sizeof(*b));

	b->done = done;
	b->arg = arg;
	cfs_fanin_add(&b->fan);
	for (size_t i = 0; i < n; i += CFS_MSG_MAX_KEYS) {
		struct refresh_req *q = xcalloc(1, sizeof(*q));
		q->d = d;
		q->b = b;
		q->n = (uint32_t)(n - i < CFS_MSG_MAX_KEYS ? n - i : CFS_MSG_MAX_KEYS);
		cfs_fanin_add(&b->fan);
		int r = code_m ? client_refresh_coded(d->l, keys + i, q->n, code_m, code_n, lease_until,
		                                      refresh_done, q)
		               : client_refresh(d->l, keys + i, q->n, lease_until, refresh_done, q);
		if (r < 0) {
			free(q);
			batch_end(b, r);
		}
	}
	batch_started(b, -EINVAL);
}

/* ---- reading blocks back */

struct get_req {
	struct cfsdsink *d;
	pub_get_fn done;
	void *arg;
};

static void get_done(void *arg, const struct dhash_get_result *r)
{
	struct get_req *q = arg;

	hint_unreachable(q->d, r->status);
	q->done(q->arg, r->status, r->status == 0 ? r->data : NULL, r->status == 0 ? r->len : 0);
	free(q);
}

static int sk_get(void *sink, const struct cfs_id *key, pub_get_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct get_req *q = xmalloc(sizeof(*q));
	int r;

	*q = (struct get_req){ d, done, arg };
	if ((r = client_get(d->l, key, get_done, q)) < 0)
		free(q);
	return r;
}

static int sk_get_coded(void *sink, const struct cfs_id *key, uint32_t m, uint32_t n, pub_get_fn done,
                        void *arg)
{
	struct cfsdsink *d = sink;
	struct get_req *q = xmalloc(sizeof(*q));
	int r;

	*q = (struct get_req){ d, done, arg };
	if ((r = client_get_coded(d->l, key, m, n, get_done, q)) < 0)
		free(q);
	return r;
}

static int sk_locate(void *sink, const struct cfs_id *key, dhash_locate_cb cb, void *arg)
{
	struct cfsdsink *d = sink;
	return client_locate(d->l, key, cb, arg);
}

static int sk_locate_coded(void *sink, const struct cfs_id *key, uint32_t m, uint32_t n,
                           dhash_locate_cb cb, void *arg)
{
	struct cfsdsink *d = sink;
	return client_locate_coded(d->l, key, m, n, cb, arg);
}

static int sk_repair_coded(void *sink, const struct cfs_id *key, uint32_t m, uint32_t n,
                           const uint8_t *p, size_t len, const struct cfs_node *holders,
                           uint32_t nholders, uint32_t mask, uint64_t lease_until,
                           pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct put_req *q = xcalloc(1, sizeof(*q));
	int r;

	q->done = done;
	q->arg = arg;
	if ((r = client_repair_coded(d->l, key, m, n, p, len, holders, nholders, mask, lease_until,
	                             root_done, q)) < 0)
		free(q);
	return r;
}

static int sk_restore(void *sink, uint32_t kind, const uint8_t *p, size_t len, uint64_t lease_until,
                      pub_done_fn done, void *arg)
{
	struct cfsdsink *d = sink;
	struct put_req *q = xcalloc(1, sizeof(*q));
	int r;

	q->done = done;
	q->arg = arg;
	if ((r = client_put(d->l, kind, p, len, lease_until, root_done, q)) < 0)
		free(q);
	return r;
}

static uint64_t sk_lease_granted(void *sink)
{
	struct cfsdsink *d = sink;
	return d->granted;
}

static void sk_free(void *sink)
{
	struct cfsdsink *d = sink;

	if (d->have_unanswered || d->put_retries)
		log_info("transient failures: %llu blocks sent because the ring could not say whether it "
		         "held them, %llu puts sent again", (unsigned long long)d->have_unanswered,
		         (unsigned long long)d->put_retries);
	client_free(d->l);
	free(d->sock);
	free(d);
}

static const struct pub_sink_ops cfsdsink_ops = {
	.have = sk_have,
	.put = sk_put,
	.put_root = sk_put_root,
	.put_version = sk_put_version,
	.refresh = sk_refresh,
	.lease_granted = sk_lease_granted,
	.locate = sk_locate,
	.locate_coded = sk_locate_coded,
	.repair_coded = sk_repair_coded,
	.restore = sk_restore,
	.get = sk_get,
	.get_coded = sk_get_coded,
	.free = sk_free,
};

int pub__cfsdsink_open(uv_loop_t *loop, struct client_target *t, struct pub_sink *ret)
{
	struct cfsdsink *d = xcalloc(1, sizeof(*d));
	char name[4200];
	int r;

	if ((r = client_target_resolve(t)) < 0) {
		free(d);
		return r;
	}
	d->loop = loop;
	d->granted = UINT64_MAX;
	d->sock = xstrdup(client_target_name(t, name, sizeof(name)));
	d->ring = t->nboot > 0;
	if ((r = client_target_open(loop, t, 0, &d->l)) < 0) {
		free(d->sock);
		free(d);
		return r;
	}
	ret->ops = &cfsdsink_ops;
	ret->impl = d;
	return 0;
}
