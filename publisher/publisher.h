/*
 * publisher — cfs-publish and cfs-fsck: turn a directory tree into a
 * signed volume, and check a published volume end to end.
 *
 * Contract:
 *  - Keys: an Ed25519 key file holds the 32-byte seed in canonical base32;
 *    it is created 0600 and refused when group or others can read it.
 *  - Block sinks take blocks in batches and answer per block: first "which
 *    of these do you have", then "store these", then the signed root, which
 *    a sink replaces only by a higher sequence. The interface is batched and
 *    asynchronous (callbacks on a libuv loop): the DHT store through the
 *    local daemon, and a local directory store for offline publishing.
 *  - Publishing walks the tree in a fixed order, so the same tree, key and
 *    sequence give the same blocks; the root is signed only after every
 *    other block was stored, so a failure leaves the previous root in place.
 */
#ifndef CFS_PUBLISHER_H
#define CFS_PUBLISHER_H

#include <stdbool.h>
#include <stdio.h>

#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

/* ---- keys */

/* $XDG_CONFIG_HOME/cfs/publish.key (or ~/.config/cfs/publish.key). */
int pub_default_key_path(char *buf, size_t n) CFS_WUR;
/* Make a new key file at path (0600, never overwriting); ret_pk gets the
 * public key. Creates missing parent directories (0700). */
int pub_key_generate(const char *path, struct cfs_pubkey *ret_pk) CFS_WUR;
/* Load a key file: -EACCES (with a message) if group or others may read
 * it, -EINVAL if it is not a key file. */
int pub_key_load(const char *path, struct cfs_pubkey *ret_pk, struct cfs_seckey *ret_sk) CFS_WUR;

/* ---- block sinks */

struct pub_block {
	struct cfs_id key;
	const uint8_t *p;
	size_t len;
	int status;  /* set by put: 0 or a negative errno */
	uint8_t code_m, code_n; /* a coded volume's data block: stored as code_n
	                         * fragments under its coded key (0: whole) */
};

typedef void (*pub_done_fn)(void *arg, int status);
/* A block read: status 0 with its bytes (borrowed for the call), or a
 * negative errno (-ENOENT: no such block). */
typedef void (*pub_get_fn)(void *arg, int status, const uint8_t *p, size_t len);

struct pub_sink_ops {
	/* Set have[i] for each key stored already, and extend each such
	 * block's lease to lease_until (0: leave leases as they are, for a dry
	 * run): a publish renews every block its root references, changed or
	 * not, in the same pass that finds what to send. Then done(arg, 0 or
	 * error). code_m, code_n: every key is a coded block's (its fragments
	 * are renewed on all code_n holders), or 0, 0: whole blocks. */
	void (*have)(void *sink, const struct cfs_id *keys, size_t n, uint8_t code_m, uint8_t code_n,
	             uint64_t lease_until, bool *have, pub_done_fn done, void *arg);
	/* Store blocks with leases until lease_until, setting each one's
	 * status; done(arg, 0) once all are answered (a negative status there
	 * means the batch as a whole failed). */
	void (*put)(void *sink, struct pub_block *blocks, size_t n, uint64_t lease_until,
	            pub_done_fn done, void *arg);
	/* Store a signed root (replacing only an older one); done with 0,
	 * -ESTALE if the sink holds a higher sequence, or another error. */
	void (*put_root)(void *sink, const struct cfs_id *key, const uint8_t *p, size_t len,
	                 uint64_t lease_until, pub_done_fn done, void *arg);
	/* Store a signed root under its version key (sfsro_root_version_key)
	 * as well, leased like the blocks, so that this version stays
	 * readable by number (VOLUME@SEQ) after a newer one replaces it. */
	void (*put_version)(void *sink, const uint8_t *p, size_t len, uint64_t lease_until,
	                    pub_done_fn done, void *arg);
	/* Extend the leases of keys until lease_until (wall-clock seconds);
	 * code_m, code_n as for have. */
	void (*refresh)(void *sink, const struct cfs_id *keys, size_t n, uint8_t code_m,
	                uint8_t code_n, uint64_t lease_until, pub_done_fn done, void *arg);
	/* The least lease any put, have or refresh of this sink obtained
	 * (servers cap what they grant); UINT64_MAX when every one got what
	 * it asked for. A root is signed valid no longer than this. */
	uint64_t (*lease_granted)(void *sink);
	/* Where key's copies are (dhash_locate); NULL for a store that is not
	 * a ring. Returns a negative errno if it could not start. */
	int (*locate)(void *sink, const struct cfs_id *key, dhash_locate_cb cb, void *arg);
	/* Where a coded block's fragments are (dhash_locate_coded); NULL as
	 * locate. */
	int (*locate_coded)(void *sink, const struct cfs_id *key, uint32_t m, uint32_t n,
	                    dhash_locate_cb cb, void *arg);
	/* Store a block again through the ring's put (the key's successor
	 * stores it and pushes it to the other k-1): repair. NULL as locate. */
	int (*restore)(void *sink, uint32_t kind, const uint8_t *p, size_t len, uint64_t lease_until,
	               pub_done_fn done, void *arg);
	/* Store a coded block's fragments again: for each bit i of mask, the
	 * i-th fragment of p on holders[i] (dhash_repair_coded): repair of
	 * what a locate_coded found missing. NULL as locate. */
	int (*repair_coded)(void *sink, const struct cfs_id *key, uint32_t m, uint32_t n,
	                    const uint8_t *p, size_t len, const struct cfs_node *holders,
	                    uint32_t nholders, uint32_t mask, uint64_t lease_until, pub_done_fn done,
	                    void *arg);
	/* Read key's bytes (a signed root under its root key, or a block):
	 * done runs later, never inside this call, unless this returns a
	 * negative errno (then it never runs). The reader verifies them. */
	int (*get)(void *sink, const struct cfs_id *key, pub_get_fn done, void *arg);
	/* Read a coded volume's data block: m of its n fragments, decoded and
	 * checked against the coded key by the ring's reader (so the bytes
	 * given are verified). NULL for a store that is not a ring. */
	int (*get_coded)(void *sink, const struct cfs_id *key, uint32_t m, uint32_t n, pub_get_fn done,
	                 void *arg);
	/* A synchronous block source over the same store, for a store that
	 * reads without the loop (dir:); NULL for the ring. */
	const struct sfsro_source *(*source)(void *sink);
	void (*free)(void *sink);
};

struct pub_sink {
	const struct pub_sink_ops *ops;
	void *impl;
};

/* Open a sink from its text form: "cfsd" (the ring through the local
 * daemon's default socket, or without one through $CFS_BOOTSTRAP or the
 * client configuration file), "cfsd:SOCKET", "ring:HOST:PORT[,...]" (a
 * plain ring client, no daemon; a host name that does not resolve is
 * -EADDRNOTAVAIL, logged as such), or "dir:PATH" (created if missing). */
int pub_sink_open(uv_loop_t *loop, const char *spec, struct pub_sink *ret) CFS_WUR;
/* Open a sink to read from (cfs-fsck, cfs-publish --from): as
 * pub_sink_open, but a dir: store must exist already: -ENOENT (logged)
 * rather than an empty store made behind a typo. */
int pub_sink_open_existing(uv_loop_t *loop, const char *spec, struct pub_sink *ret) CFS_WUR;
void pub_sink_close(struct pub_sink *s);
/* The end of the one line a ring sink logs when its daemon or ring does
 * not answer (static; NULL: none), and whether it has logged it: a
 * program then adds no line of its own. */
void pub_sink_set_advice(const char *advice);
bool pub_sink_said_unreachable(void);
/* -d DIR of the tools: the store "cfsd:DIR/cfsd.sock" (the daemon whose
 * data directory is DIR) into buf; -ENAMETOOLONG when it does not fit. */
int pub_store_of_data_dir(char *buf, size_t n, const char *dir) CFS_WUR;

/* ---- publishing */

struct pub_options {
	uint32_t block_size;      /* data block payload, default 8 KiB */
	uint64_t valid_s;         /* root validity from now, default 30 days */
	bool dry_run;             /* ask the sink, send nothing */
	bool progress;            /* draw a progress bar on stderr */
	uint8_t code_m, code_n;   /* data blocks as code_n fragments, any code_m of
	                           * which rebuild one (0, 0: whole, replicated);
	                           * named in the root (format 2); a ring store only */
	const char *state_dir;    /* where the last sequence signed per volume is
	                           * kept (NULL: $XDG_STATE_HOME/cfs/published, or
	                           * /var/lib/cfs/published for root) */
};

struct pub_stats {
	uint64_t files, dirs, symlinks, skipped;
	uint64_t bytes;           /* file content read */
	uint64_t blocks;          /* blocks built (distinct within a batch) */
	uint64_t blocks_sent, bytes_sent;
	uint64_t blocks_renewed;  /* stored already: their leases were extended */
	uint64_t seq;             /* the sequence of the root signed */
	uint64_t valid_until;     /* the root's valid-until (wall-clock seconds) */
	double seconds;
	uint64_t blocks_failed;   /* the store did not take them (one line says how many, and the first) */
};

/* Publish the tree at dir as the next version of the volume of pk/sk.
 * Returns 0 once the root is stored; a negative errno (logged) otherwise,
 * in which case no root was signed. */
int pub_publish(uv_loop_t *loop, struct pub_sink *sink, const char *dir,
                const struct cfs_pubkey *pk, const struct cfs_seckey *sk,
                const struct pub_options *opt, struct pub_stats *ret_stats) CFS_WUR;

/* Extend the lease of every block reachable from the volume's current root
 * and re-sign it (next sequence) valid for opt->valid_s more seconds. */
int pub_refresh(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk,
                const struct cfs_seckey *sk, const struct pub_options *opt,
                struct pub_stats *ret_stats) CFS_WUR;

/* ---- checking */

struct pub_replica_stats {
	uint64_t blocks;          /* distinct blocks of the volume, the root included */
	uint64_t at_k, below_k, at_zero, unknown; /* by good copies on their k servers */
	uint64_t repaired;        /* --repair: blocks below k stored again */
	uint32_t k;               /* the servers responsible for each block */
	/* A coded volume's data blocks, also counted above (at_k: all n
	 * fragments good; below_k: fewer; never at_zero): */
	uint32_t code_m, code_n;  /* the volume's code (0: none) */
	uint64_t coded, coded_at_n;
	uint64_t below_n;         /* fewer than n good fragments, ... */
	uint64_t below_m;         /* ... of them fewer than m: unreadable */
};

/* cfs-fsck --replicas: for every block of the volume, which of its k
 * responsible servers hold a good copy. One line per block on out:
 * "KEY GOOD/K" and the servers that do not ("missing ADDR", "bad ADDR",
 * "stale ADDR", "silent ADDR"); a coded volume's data block "KEY
 * GOOD/M/N" and the holders that lack their fragment, the same way. With
 * repair, a block with fewer than k
 * good copies and at least one is stored again (the key's successor keeps
 * it and pushes it to the others) and located once more. Returns 0 when
 * every block is on all k, -EBADMSG when some are not (after a repair:
 * when some still are not), -EOPNOTSUPP for a store that is not a ring.
 * seq as for pub_fsck (a version's first key is its version key). */
int pub_replicas(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
                 bool repair, FILE *out, struct pub_replica_stats *ret) CFS_WUR;

struct pub_fsck_stats {
	uint64_t files, dirs, symlinks, blocks, bytes;
	uint64_t missing, corrupt;
	uint64_t unreadable;      /* the store did not answer for them: not checked */
};

/* Walk the whole volume from its root, verifying every block read from
 * sink (the loop runs while they come; call it from the top of the
 * program, not from a callback). Problems are printed to err by path and
 * key; with list set, every entry is printed to out as "TYPE MODE SIZE
 * MTIME BLAKE2B PATH" (see docs/PUBLISHING.md). Returns 0 if the volume is
 * whole, -EBADMSG if anything is missing or corrupt, -ETIMEDOUT if nothing
 * is but some blocks could not be read (the store did not answer: not
 * checked), or, printing nothing, the error that stopped the walk at the
 * root (-ENOENT: the store has no root for the volume). seq 0 checks the
 * newest version, another the version of that number (VOLUME@SEQ). */
int pub_fsck(uv_loop_t *loop, struct pub_sink *sink, const struct cfs_pubkey *pk, uint64_t seq,
             FILE *out, FILE *err, bool list, struct pub_fsck_stats *ret) CFS_WUR;

/* ---- pushing a published volume into another store */

struct pub_push_stats {
	uint64_t blocks, bytes;   /* the volume's distinct blocks (the root not counted) */
	uint64_t blocks_sent, bytes_sent;       /* the destination lacked them */
	uint64_t blocks_present, bytes_present; /* it had them (their leases renewed) */
	uint64_t blocks_failed;   /* sent and refused (the first error is logged) */
	bool root_sent;           /* false: the destination held this very root */
	bool reported;            /* a failure was told in full on one line already */
	uint64_t seq, valid_until; /* of the root pushed */
	double seconds;
};

/* Copy the volume of pk, as published in from (a store with a synchronous
 * source: dir:), into to: every block is read from from and verified, the
 * blocks to lacks are sent (leased until the root's valid-until, those it
 * has renewed as far), then the signed root as stored — no secret key, the
 * sequence unchanged. Returns 0 once the root is in to; a negative errno
 * (logged) otherwise, with to's previous root left in place: -ESTALE when
 * to holds a newer root, -EKEYEXPIRED when from's has expired,
 * -EOPNOTSUPP when from cannot be read synchronously. Call it from the top
 * of the program (the loop runs while the destination answers). */
int pub_push(uv_loop_t *loop, struct pub_sink *from, struct pub_sink *to,
             const struct cfs_pubkey *pk, struct pub_push_stats *ret) CFS_WUR;

#endif
