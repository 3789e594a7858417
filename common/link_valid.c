/*
 * The links' proof of address (common/link.h; RFC 9000 8.1): bytes sent
 * to an address in answer are at most three times the bytes received from
 * it until it proves it receives at that address, by answering one of our
 * calls or by echoing a token we gave it. The state is a fixed table of
 * slots indexed by a keyed hash of the address. No I/O.
 */
#include "common/link_int.h"

#include <sodium.h>
#include <string.h>

#define VALID_US (600ull * 1000000) /* an address stays proven this long */
#define TOKEN_EPOCH_S 60
/* a token shown is taken to hold a little less long than the peer holds it */
#define SHOWN_MARGIN_US (60ull * 1000000)

static bool vslot_valid(const struct vslot *v, uint64_t now)
{
	return v->valid_until_us > now;
}

/*
 * An address's slot: one of two, placed by a keyed hash (SipHash), so
 * nobody can aim collisions at a chosen address. A newcomer takes a free
 * slot or the less recently heard unproven one, never a proven one: a
 * flood of strangers cannot make a proven peer ask for tokens again, nor
 * lift the bound for a stranger (no slot is no budget).
 */
static struct vslot *vslot_of(struct cfs__links *lk, const struct cfs_addr *a, bool create,
                              bool proven, uint64_t now)
{
	struct peer_key k;
	uint8_t h[8];

	cfs__peer_key(&k, a);
	crypto_shorthash(h, (const uint8_t *)&k, sizeof(k), lk->vslot_key);
	uint64_t x = cfs_get_be64(h);
	struct vslot *s1 = &lk->vslots[x % lk->cfg.validation_slots],
	            *s2 = &lk->vslots[(x >> 32) % lk->cfg.validation_slots];
	if (s1->used && memcmp(&s1->key, &k, sizeof(k)) == 0)
		return s1;
	if (s2->used && memcmp(&s2->key, &k, sizeof(k)) == 0)
		return s2;
	if (!create)
		return NULL;
	struct vslot *v = NULL;
	if (!s1->used || !s2->used)
		v = !s1->used ? s1 : s2;
	else if (!vslot_valid(s1, now) && (vslot_valid(s2, now) || s1->last_us <= s2->last_us))
		v = s1;
	else if (!vslot_valid(s2, now))
		v = s2;
	else if (proven) /* both proven: the one expiring first gives way */
		v = s1->valid_until_us <= s2->valid_until_us ? s1 : s2;
	if (!v)
		return NULL;
	memset(v, 0, sizeof(*v));
	v->key = k;
	v->used = true;
	return v;
}

void cfs__links_note_in(struct cfs__links *lk, const struct cfs_addr *from, size_t len,
                        uint64_t now)
{
	struct vslot *v = vslot_of(lk, from, true, false, now);

	if (!v)
		return;
	v->last_us = now;
	if (!vslot_valid(v, now))
		v->in += len;
}

void cfs__links_validated(struct cfs__links *lk, const struct cfs_addr *a, uint64_t now)
{
	struct vslot *v = vslot_of(lk, a, true, true, now);

	v->valid_until_us = now + VALID_US;
	v->in = v->out = 0;
}

bool cfs__links_proven(struct cfs__links *lk, const struct cfs_addr *a, uint64_t now)
{
	struct vslot *v = vslot_of(lk, a, false, false, now);
	return v && vslot_valid(v, now);
}

/*
 * May len more bytes go to dst in answer to something of in_len bytes (0:
 * to nothing in particular, e.g. an ack)? If so they are counted. An
 * address with no slot (both of its places held by proven peers) has no
 * running account: it may have 3x what it just sent, no more, so that a
 * peer who lost the draw still gets small answers and its token.
 */
bool cfs__links_answer_take(struct cfs__links *lk, const struct cfs_addr *dst, size_t len,
                            size_t in_len, uint64_t now)
{
	struct vslot *v = vslot_of(lk, dst, false, false, now);

	if (v && vslot_valid(v, now))
		return true;
	if (!v)
		return len <= 3 * (uint64_t)in_len;
	if (v->out + len > 3 * v->in)
		return false;
	v->out += len;
	return true;
}

static void token_for(struct cfs__links *lk, const struct cfs_addr *a, uint64_t epoch,
                      uint8_t out[static XFER_TOKEN_BYTES])
{
	cfs_xfer_token(out, lk->token_key, a, epoch);
}

void cfs__links_send_retry(struct cfs__links *lk, const struct cfs_addr *dst, uint64_t reqid,
                           size_t in_len, uint64_t now)
{
	uint8_t tok[XFER_TOKEN_BYTES], b[XFER_RETRY_LEN];

	if (!cfs__links_answer_take(lk, dst, XFER_RETRY_LEN, in_len, now))
		return;
	token_for(lk, dst, now / 1000000 / TOKEN_EPOCH_S, tok);
	size_t n = cfs_xfer_retry_encode(b, reqid, tok);
	/* the request comes again, perhaps in pieces: take them afresh */
	struct in_key k;
	cfs__link_in_key(&k, dst, reqid, false);
	cfs_htab_del(&lk->done_map, &k, NULL);
	lk->st->retries_sent++;
	cfs__link_whole_push(lk, dst, b, n, now);
}

void cfs__links_validate(struct cfs__links *lk, const struct cfs_addr *dst,
                         const uint8_t token[static XFER_TOKEN_BYTES], uint64_t now)
{
	uint8_t v[XFER_VALIDATE_LEN];
	struct vslot *s = vslot_of(lk, dst, true, false, now);

	if (s)
		s->shown_until_us = now + VALID_US - SHOWN_MARGIN_US;
	cfs__link_whole_push(lk, dst, v, cfs_xfer_validate_encode(v, token), now);
}

/*
 * A request whose answer may be longer than three times it (a lookup's
 * answer names a dozen nodes) is preceded, once per VALID_US, by a
 * datagram of padding to a peer that may not hold our address proven:
 * then its bound on answers to us (3x what it has had from us) lets the
 * answer through at once, where it would first send a token and cost a
 * round trip. QUIC pads a client's first datagrams to 1,200 bytes for the
 * same reason (RFC 9000 8.1, 14.1). Not once we have shown it a token
 * (it holds us proven), nor again while earlier padding may still cover
 * us. A receiver counts the padding's bytes and reads nothing of it (an
 * older release counts it malformed, after counting its bytes too).
 */
bool cfs__links_pad(struct cfs__links *lk, const struct cfs_addr *dst, uint64_t now)
{
	uint8_t pad[CFS_DGRAM_SAFE];
	struct vslot *s = vslot_of(lk, dst, true, false, now);

	if (s && (s->shown_until_us > now || (s->padded_us && now < s->padded_us + VALID_US)))
		return false;
	if (s)
		s->padded_us = now;
	memset(pad, 0, sizeof(pad));
	pad[0] = XFER_PADDING;
	cfs__link_whole_push(lk, dst, pad, sizeof(pad), now);
	lk->st->padding_out++;
	return true;
}

void cfs__link_on_validate(struct cfs__links *lk, const struct cfs_addr *from, const uint8_t *p,
                           size_t len, uint64_t now)
{
	uint8_t got[XFER_TOKEN_BYTES], want[XFER_TOKEN_BYTES];
	uint64_t epoch = now / 1000000 / TOKEN_EPOCH_S;

	if (cfs_xfer_validate_decode(p, len, got) < 0) {
		lk->st->malformed++;
		return;
	}
	for (uint64_t back = 0; back < 2 && back <= epoch; back++) { /* this epoch or the last */
		token_for(lk, from, epoch - back, want);
		if (sodium_memcmp(got, want, sizeof(got)) == 0) {
			cfs__links_validated(lk, from, now);
			lk->st->validated++;
			return;
		}
	}
	lk->st->bad_tokens++;
}
