/*
 * "Have these keys?" for a batch: one dhash_have per key, one answer for
 * the batch. The daemon's CTL_HAVE and a plain ring client both answer
 * with this, so a publisher sees the same bitmap and the same error
 * whichever way it reaches the ring.
 *
 * The rule (dhash__haves_on_key, dhash_have_many's contract): a bit is
 * set only for a key a majority of its servers hold (dhash_have), a clear
 * bit means that they answered "absent". A key that got no answer at all
 * (nobody reached, its lookup failed, cancelled) fails the batch with its
 * error, the lowest-numbered such key's: read as "absent" it would look
 * like an answer, and a key's error says more than the order the
 * answers came in.
 */
#include <stdlib.h>

#include "dhash/client_sm.h"

void dhash__haves_init(struct dhash__haves *h, uint32_t n)
{
	*h = (struct dhash__haves){ .n = n, .left = n };
	h->bits = xcalloc(1, (n + 7) / 8);
}

void dhash__haves_fini(struct dhash__haves *h)
{
	free(h->bits);
	h->bits = NULL;
}

bool dhash__haves_on_key(struct dhash__haves *h, uint32_t i, int status, uint32_t found)
{
	if (status == 0 && found)
		h->bits[i / 8] |= (uint8_t)(1u << (i % 8));
	if (status < 0 && (!h->err || i < h->err_at)) {
		h->err = status;
		h->err_at = i;
	}
	return --h->left == 0;
}

/* The batch in flight. Each key's have holds it; it ends with the last. */
struct hmany {
	struct dhash__haves sm;
	dhash_bits_cb cb;
	void *arg;
	struct hkey { struct hmany *b; uint32_t i; } keys[];
};

static void key_done(void *arg, int status, const struct cfs_id *key, uint32_t found,
                     uint64_t lease)
{
	struct hkey *k = arg;
	struct hmany *b = k->b;

	if (!dhash__haves_on_key(&b->sm, k->i, status, found))
		return;
	b->cb(b->arg, b->sm.err, b->sm.err ? NULL : b->sm.bits, b->sm.n, 0);
	dhash__haves_fini(&b->sm);
	free(b);
}

int dhash_have_many(dhash_client_t *d, const struct cfs_id *keys, uint32_t n, dhash_bits_cb cb,
                    void *arg)
{
	struct hmany *b;
	int r;

	if (n == 0 || n > CFS_MSG_MAX_KEYS)
		return -EINVAL;
	b = xcalloc(1, sizeof(*b) + n * sizeof(b->keys[0]));
	dhash__haves_init(&b->sm, n);
	b->cb = cb;
	b->arg = arg;
	for (uint32_t i = 0; i < n; i++) {
		b->keys[i] = (struct hkey){ b, i };
		if ((r = dhash_have(d, &keys[i], key_done, &b->keys[i])) == 0)
			continue;
		if (i == 0) { /* nothing started: no callback, the caller gets r */
			dhash__haves_fini(&b->sm);
			free(b);
			return r;
		}
		/* Keys 0..i-1 are out and answer later; key i and the rest
		 * fail with r, which only a lower-numbered key's error beats. */
		for (uint32_t j = i; j < n; j++)
			(void)dhash__haves_on_key(&b->sm, j, r, 0);
		break;
	}
	return 0;
}
