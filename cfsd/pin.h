/*
 * Pins (cfsd/pin.c): a daemon keeps a volume alive for its publisher.
 *
 * A pin names a volume by its public key. Every round the pinner reads the
 * volume's signed root (never going back to an older sequence), walks
 * every block reachable from it once, renews each block's lease on its
 * replicas to now + the daemon's lease, and puts back from its own copy a
 * block that no replica holds any more. Its copies live in DATA/pinned (a
 * dhash_cache_t): each block is fetched into it once, the first round that
 * finds it missing there. A coded volume's data block is kept there whole,
 * under its coded key; it is renewed on all n holders of its fragments and
 * put back as fragments when fewer than m of them had theirs. (An older
 * version kept with --versions whose code differs from the newest's keeps
 * only its version record.)
 *
 * Two layers. The walk (struct cfsd_pin_walk) is one round of one pin as
 * a state machine that does no network I/O: it yields actions (fetch K,
 * refresh K, put this block, wait, done) and takes events (a block arrived
 * or failed, a refresh or a put answered); a unit test drives it. The
 * pinner (cfsd_pinner_t) is the daemon's driver on its libuv loop: the
 * pins, their timers, the DHash client calls (at most
 * CFSD_PIN_WINDOW in flight), DATA/pins and the status report.
 */
#ifndef CFS_CFSD_PIN_H
#define CFS_CFSD_PIN_H

#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

#define CFSD_PIN_WINDOW 32                 /* client operations in flight, all pins */
#define CFSD_PIN_ROUND_MAX_MS 3600000u     /* --pin-ms default: an hour, ... */
#define CFSD_PIN_RETRY_MS 30000u           /* ... or sooner: a round with errors */
#define CFSD_PIN_WAIT_RING_MS 500u         /* rounds due before the ring is joined */
#define CFSD_PIN_VERSIONS_MAX 1000u        /* cfsctl pin --versions N */
#define CFSD_PINS_FILE "pins"
#define CFSD_PINNED_DIR "pinned"

/* ---- one round of one pin: the walk */

/* What a block is to the walk (from the block that named it). */
enum cfsd_pin_btype {
	CFSD_PIN_B_ROOT = 1,                  /* the tree's kinds are sfsro's blockset's */
	CFSD_PIN_B_DIR = SFSRO_B_DIR, CFSD_PIN_B_INODE = SFSRO_B_INODE,
	CFSD_PIN_B_INDIRECT = SFSRO_B_INDIRECT, CFSD_PIN_B_DATA = SFSRO_B_DATA,
	CFSD_PIN_B_VERSION = 16,              /* a signed root under its version key */
};

enum cfsd_pin_act {
	CFSD_PIN_A_WAIT = 0,   /* nothing to start until an event comes */
	CFSD_PIN_A_FETCH,      /* dhash_get(key) -> cfsd_pin_walk_fetched */
	CFSD_PIN_A_REFRESH,    /* dhash_refresh(key) -> cfsd_pin_walk_refreshed */
	CFSD_PIN_A_PUT,        /* dhash_put(kind, data) -> cfsd_pin_walk_put_done */
	CFSD_PIN_A_DONE,       /* the round is over: read the stats */
};

enum cfsd_pin_state {
	CFSD_PIN_S_ROOT = 0,   /* the root's fetch is out: nothing else can start */
	CFSD_PIN_S_TREE,       /* walking the blocks below the root */
	CFSD_PIN_S_DONE,
};

/* An action, handed back unchanged with its event. */
struct cfsd_pin_action {
	uint8_t type;          /* enum cfsd_pin_act */
	uint8_t btype;         /* enum cfsd_pin_btype */
	uint8_t height;        /* an indirect block's expected height */
	uint32_t kind;         /* DHASH_KIND_* of key */
	uint8_t code_m, code_n;/* a coded volume's data block (0: whole): FETCH
	                        * is dhash_get_coded, REFRESH renews the key's
	                        * n fragments (found: m holders had theirs),
	                        * PUT is dhash_put_coded of the block */
	struct cfs_id key;
	uint8_t *data;         /* PUT: the block (malloc'd; the caller frees it) */
	size_t len;
};

/* The pinner's own copies (DATA/pinned in the daemon; memory in tests).
 * get returns a malloc'd copy; the walk verifies it. */
struct cfsd_pin_store {
	bool (*has)(void *ctx, const struct cfs_id *key);
	int (*get)(void *ctx, const struct cfs_id *key, uint32_t *ret_kind, uint8_t **ret_data,
	           size_t *ret_len);
	/* Replaces what is under key (a newer root replaces an older one). */
	int (*put)(void *ctx, const struct cfs_id *key, uint32_t kind, const uint8_t *p, size_t len);
	void *ctx;
};

/* What a round did. */
struct cfsd_pin_stats {
	uint64_t seq;          /* the root's sequence the round walked (0: no root) */
	uint64_t valid_until;  /* that root's valid-until */
	uint64_t blocks;       /* distinct blocks reached, the root included */
	uint64_t renewed;      /* refreshed on at least one replica */
	uint64_t restored;     /* on no replica: put back from the pinner's copy */
	uint64_t missing;      /* on no replica and no copy here: lost */
	uint64_t errors;       /* a fetch, refresh or put that failed otherwise, a bad block */
	uint64_t fetched;      /* copied into the pinner's store this round */
	bool root_expired;     /* the root's valid-until had passed */
	uint32_t versions;     /* versions kept (the newest included) */
	uint32_t versions_gone;/* of those asked for, versions no server and no copy had */
};

struct cfsd_pin_walk;

/* Start a round for pk, never accepting a root below min_seq; now is the
 * wall clock (seconds) the root's expiry is judged by. */
struct cfsd_pin_walk *cfsd_pin_walk_new(const struct cfs_pubkey *pk, uint64_t min_seq, uint64_t now,
                                        const struct cfsd_pin_store *store);
void cfsd_pin_walk_free(struct cfsd_pin_walk *w);
/* Keep the newest n versions (default 1): each version's root under its
 * version key and every block its tree reaches (blocks the versions share
 * are walked once). Before the first next(). */
void cfsd_pin_walk_versions(struct cfsd_pin_walk *w, uint32_t n);
/* The next action to start (its PUT data now belongs to the caller). */
enum cfsd_pin_act cfsd_pin_walk_next(struct cfsd_pin_walk *w, struct cfsd_pin_action *ret);
enum cfsd_pin_state cfsd_pin_walk_state(const struct cfsd_pin_walk *w);
/* Events, each for an action next() gave: a verified block (status 0) or
 * the get's failure; a refresh's answer; a put's answer. */
void cfsd_pin_walk_fetched(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status,
                           uint32_t kind, const uint8_t *p, size_t len);
void cfsd_pin_walk_refreshed(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status,
                             uint32_t found);
void cfsd_pin_walk_put_done(struct cfsd_pin_walk *w, const struct cfsd_pin_action *a, int status);
const struct cfsd_pin_stats *cfsd_pin_walk_stats(const struct cfsd_pin_walk *w);

/* ---- the daemon's pinner */

typedef struct cfsd_pinner cfsd_pinner_t;

struct cfsd_pin_config {
	uint32_t round_ms;     /* a round per pin this often */
	uint64_t lease_s;      /* renew to now + this */
	uint64_t store_bytes;  /* bound of DATA/pinned */
	/* Has the daemon joined its ring? (NULL: always.) Until it has, a
	 * lookup answers "this node" for every key: a round then would put
	 * blocks back into this node alone, so rounds wait. */
	bool (*ring_ready)(void *arg);
	void *ring_ready_arg;
};

/* Open DATA/pinned, read DATA/pins and start a round for each pin. The
 * client is borrowed: it must outlive cfsd_pinner_stop. */
int cfsd_pinner_new(uv_loop_t *loop, dhash_client_t *client, const char *data_dir,
                    const struct cfsd_pin_config *cfg, cfsd_pinner_t **ret) CFS_WUR;
/* Start no more client operations (call before freeing the client). */
void cfsd_pinner_stop(cfsd_pinner_t *p);
/* Free, once what is in flight has come back (NULL: nothing). */
void cfsd_pinner_free(cfsd_pinner_t *p);
/* Pin pk, keeping its newest versions (1..CFSD_PIN_VERSIONS_MAX; persisted
 * before it returns) and start a round: 0, -EEXIST when pinned already
 * with as many versions (a different number replaces the old one), -EIO
 * when DATA/pins cannot be written. */
int cfsd_pinner_add(cfsd_pinner_t *p, const struct cfs_pubkey *pk, uint32_t versions) CFS_WUR;
/* Unpin: 0 or -ENOENT. A round in flight stops starting operations. */
int cfsd_pinner_remove(cfsd_pinner_t *p, const struct cfs_pubkey *pk) CFS_WUR;
/* The pins and their last rounds, as text lines or one JSON object. */
void cfsd_pinner_report(cfsd_pinner_t *p, struct cfs_sbuf *b, bool json);

#endif
