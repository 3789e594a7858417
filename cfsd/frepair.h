/*
 * Background repair of coded fragments (cfsd/frepair.c), after Carbonite
 * (Chun et al., NSDI 2006): count the reachable copies, repair only below
 * a threshold, and count again the copies that come back.
 *
 * Every round (once the server has joined with full successor lists)
 * this daemon looks at a slice of the fragments it keeps
 * (at most keys_per_round, from where the last round stopped) and takes
 * those of the keys it is responsible for: keys for which it is the
 * successor or the next server after it (two of the key's holders, so a
 * server that joins before the key and holds nothing yet does not leave
 * it unattended). For each, one job:
 *
 *   PROBE    the key's n holders and two spares, a HAVE each
 *            (dhash_probe_coded): a count of the holders that say they
 *            keep a fragment, about a hundred bytes a holder. At the
 *            threshold or above the key is done; else
 *   LOCATE   the same holders, each asked for its fragment
 *            (dhash_locate_coded: distinct fragment indices, wherever the
 *            ring moved them, each fragment verified)
 *   done     when that count is at the threshold (m + ceil((n-m)/2),
 *            a coded put's quorum) or above: nothing is sent; a loss
 *            the spares absorb costs nothing, and a holder that comes
 *            back counts again (nothing is deleted);
 *            or when it is below m: the block cannot be rebuilt
 *   GET      the block from m fragments (dhash_get_coded)
 *   REPAIR   each missing index on a holder among the first n that has
 *            no fragment (dhash_coded_assign, dhash_repair_coded)
 *
 * A key once found below the threshold is followed until it is at n
 * again: the next rounds take it first and repair it while it is below n
 * (a repair right after failures finds holders still silent, to which it
 * cannot store, and would otherwise stop at the threshold).
 *
 * The job is a state machine that does no I/O; the driver runs one job
 * at a time on a DHash client of its own in the background class
 * (dhash_config.background: it yields to reads and publishes), so the repair traffic of a
 * round is bounded by keys_per_round locates and the repairs they call.
 */
#ifndef CFS_CFSD_FREPAIR_H
#define CFS_CFSD_FREPAIR_H

#include "dhash/dhash.h"
#include "sfsro-format/sfsro.h"

#define CFSD_FREPAIR_MS_DEFAULT 600000u  /* --frag-repair-ms: a round every ten minutes */
#define CFSD_FREPAIR_KEYS_DEFAULT 64u    /* --frag-repair-keys: fragments looked at a round */
#define CFSD_FREPAIR_SCAN 4096u          /* store records read a round, at most */
#define CFSD_FREPAIR_FOLLOW 64u          /* keys followed until they are at n */

enum cfsd_frepair_act {
	CFSD_FREPAIR_WAIT = 0,
	CFSD_FREPAIR_PROBE,    /* dhash_probe_coded(key, m, n) */
	CFSD_FREPAIR_LOCATE,   /* dhash_locate_coded(key, m, n) */
	CFSD_FREPAIR_GET,      /* dhash_get_coded(key, m, n) */
	CFSD_FREPAIR_REPAIR,   /* dhash_repair_coded(key, m, n, block, to, n, mask) */
	CFSD_FREPAIR_DONE,
};

enum cfsd_frepair_outcome {
	CFSD_FREPAIR_ENOUGH = 0,  /* at the threshold or above: nothing sent */
	CFSD_FREPAIR_REPAIRED,    /* fragments stored */
	CFSD_FREPAIR_LOST,        /* below m: cannot be rebuilt */
	CFSD_FREPAIR_NOWHERE,     /* below the threshold, but no holder without a fragment */
	CFSD_FREPAIR_FAILED,      /* a locate, get or store failed */
};

struct cfsd_frepair_job {
	struct dhash_frag_ref ref;
	uint32_t threshold;
	enum cfsd_frepair_act next;
	enum cfsd_frepair_outcome outcome;
	struct dhash_locate_result loc;
	uint8_t *block;               /* GET's answer, for the REPAIR */
	size_t len;
	struct cfs_node to[SFSRO_CODE_N_MAX];
	uint32_t mask;                /* the indices to store, on to[i] */
	uint32_t good;                /* distinct good fragments located */
};

/* The threshold below which a key m-of-n is repaired. */
uint32_t cfsd_frepair_threshold(uint32_t m, uint32_t n);
/* Is key one this server repairs: in (preds[1], self], or (preds[0], self]
 * with one predecessor known, or any with none (preds nearest first)? */
bool cfsd_frepair_mine(const struct cfs_id *key, const struct cfs_id *self,
                       const struct cfs_node *preds, uint32_t npreds);
/* until_n: a key being followed (repaired while below n, not only below
 * the threshold). */
void cfsd_frepair_job_init(struct cfsd_frepair_job *j, const struct dhash_frag_ref *ref, bool until_n);
/* Should the key be followed in the next round (below n after this job)? */
bool cfsd_frepair_job_follow(const struct cfsd_frepair_job *j);
void cfsd_frepair_job_fini(struct cfsd_frepair_job *j);
/* Events: each answers the action j->next was. */
void cfsd_frepair_job_probed(struct cfsd_frepair_job *j, const struct dhash_locate_result *r);
void cfsd_frepair_job_located(struct cfsd_frepair_job *j, const struct dhash_locate_result *r);
void cfsd_frepair_job_got(struct cfsd_frepair_job *j, int status, const uint8_t *p, size_t len);
void cfsd_frepair_job_repaired(struct cfsd_frepair_job *j, int status);

/* ---- the daemon's repairer */

typedef struct cfsd_frepair cfsd_frepair_t;

struct cfsd_frepair_stats {
	uint64_t rounds, looked, checked, enough, repaired, stored, lost, nowhere, failed;
	uint64_t located;             /* keys a probe left below the threshold, located */
	/* fragment bytes of the repairs: the m a rebuild reads at least, and
	 * those stored */
	uint64_t bytes_read, bytes_stored;
};

/* round_ms 0: off. */
cfsd_frepair_t *cfsd_frepair_new(uv_loop_t *loop, chord_t *chord, dhash_server_t *server,
                                 dhash_client_t *client, uint32_t round_ms, uint32_t keys_per_round);
void cfsd_frepair_free(cfsd_frepair_t *f);
const struct cfsd_frepair_stats *cfsd_frepair_stats(const cfsd_frepair_t *f);

#endif
