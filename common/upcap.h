/*
 * common/upcap.h — the upload cap's token bucket
 * (cfs_transport_config.upload_bytes_per_s), without a clock: every entry
 * takes the time, so a unit test scripts it. The links (common/link.c)
 * keep one per transport and ask it before each piece. Internal to
 * common/; tests include it.
 */
#ifndef CFS_COMMON_UPCAP_H
#define CFS_COMMON_UPCAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs__upcap {
	uint64_t rate;    /* bytes a second; 0: no cap */
	double tokens;    /* bytes that may go now (negative: owed), as of at_us */
	double share;     /* the foreground's own share, drained by every piece */
	double bg_share;  /* the background's least share, drained by its pieces */
	uint64_t at_us;   /* the latest time seen: never goes back */
	bool started;     /* at_us is set: the bucket has been filled once */
};

/* What one take took from the bucket and the share, so that a piece that
 * then does not go gives back exactly that. */
struct cfs__up_debit {
	double tokens, share, bg_share;
};

/* A bucket at rate bytes a second (0: no cap), full at its first use. */
void cfs__upcap_init(struct cfs__upcap *u, uint64_t rate);
/* The bucket's depth: 20 ms of the rate, at least 64 KiB. */
double cfs__upcap_burst(const struct cfs__upcap *u);
/* May b bytes of pieces go at now (the background class above a reserve
 * kept for the foreground, or within its own least share)? If so they are
 * taken, and *ret_debit
 * says how; if not, *ret_wait_us says when to ask again. A now older than
 * one already seen (a time read earlier by another caller) counts as
 * that one: the bucket's time never goes back. */
bool cfs__upcap_take(struct cfs__upcap *u, uint32_t b, bool bg, uint64_t now, uint64_t *ret_wait_us,
                     struct cfs__up_debit *ret_debit);
/* What a take took, for a piece that did not go (the bucket full at most). */
void cfs__upcap_give_back(struct cfs__upcap *u, const struct cfs__up_debit *d);
/* A whole datagram of len bytes, sent at now regardless: counted. */
void cfs__upcap_charge(struct cfs__upcap *u, size_t len, uint64_t now);

#endif
