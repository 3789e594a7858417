/*
 * publisher/ internals: one publish's state, shared by publish.c (the
 * walk, the batches, pub_publish and pub_refresh) and root.c (the
 * sequence numbers, the checks on the stored root, signing and storing
 * the root). Private to those two files.
 */
#ifndef PUB_PUBLISH_INT_H
#define PUB_PUBLISH_INT_H

#include "publisher/internal.h"

struct pub {
	uv_loop_t *loop;
	struct pub_sink *sink;
	const struct pub_options *opt;
	struct pub_stats *st;
	struct cfs_idmap stored;   /* emitted (or refreshed) by this run: sent once */
	struct pub__batcher bt;    /* the blocks on their way to the sink */
	uint8_t *chunk;            /* one block of file content */
	/* Progress: the totals from a walk of the tree first, and
	 * what the store has answered for. A data block's payload is done when
	 * its batch is answered (stored, or found present); a file when the
	 * batch with its inode is (the batches' tags). */
	struct cfs_progress bar;   /* the rate is from the first answer on */
	uv_signal_t *sigint;       /* Ctrl-C: stop before the root (pub_publish) */
	bool interrupted;
	bool root_phase;           /* the root is being signed and stored */
	uint64_t lease_until;      /* of every block: the root's valid-until asked for */
	uint64_t start_us;
	int status;
	bool done;
};

/* publish.c: the sink's callback for a single request; run the loop until
 * the sink answers it (the publisher waits only at the top of its
 * program, never inside a callback). */
void pub__on_done(void *arg, int status);
int pub__wait_sink(struct pub *p);

/* root.c: the last sequence signed for pk's volume, kept on disk; the
 * sequence for a new root above it and above every replica's; sign the
 * root (its valid-until bounded by the leases granted) and store it. */
int pub__store_seq(struct pub *p, const struct cfs_pubkey *pk, uint64_t *ret);
int pub__next_seq(struct pub *p, const struct cfs_pubkey *pk, uint64_t current, uint64_t *ret);
int pub__sign_and_store(struct pub *p, struct sfsro_root *root, const struct cfs_seckey *sk);

#endif
