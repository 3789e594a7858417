/*
 * The daemon's background repair of coded fragments (cfsd/frepair.h): a
 * timer, a cursor over the fragments this server keeps, and one job at a
 * time run on the daemon's DHash client.
 */
#include <stdlib.h>
#include <string.h>

#include "cfsd/frepair.h"

struct cfsd_frepair {
	uv_loop_t *loop;
	chord_t *chord;
	dhash_server_t *server;
	dhash_client_t *client;
	uint32_t round_ms, keys;
	uv_timer_t timer;
	bool timer_closed, freeing, busy;
	struct cfs_id cursor;         /* the last key the previous round looked at */
	bool cursor_set;
	struct dhash_frag_ref *round; /* this round's keys, the next at next_key */
	uint32_t nkeys_round, next_key;
	bool *follow;                 /* round[i] is a followed key */
	struct dhash_frag_ref pend[CFSD_FREPAIR_FOLLOW]; /* keys to follow next round */
	uint32_t npend;
	struct cfsd_frepair_job job;
	struct cfsd_frepair_stats st;
};

static void next_job(cfsd_frepair_t *f);

static void maybe_release(cfsd_frepair_t *f)
{
	if (f->freeing && f->timer_closed && !f->busy) {
		cfsd_frepair_job_fini(&f->job);
		free(f->round);
		free(f->follow);
		free(f);
	}
}

/* Is key one of this process's virtual servers' to repair? Its
 * predecessor (kept right by stabilization) and the nearest node known
 * before that: the tables may still name nodes between the predecessor
 * and us that have died, which must not shrink the range. */
static bool mine(cfsd_frepair_t *f, const struct cfs_id *key)
{
	for (uint32_t i = 0; i < chord_vnode_count(f->chord); i++) {
		struct cfs_node known[16], preds[2];
		uint32_t np = 0;
		if (!chord_vnode_joined(f->chord, i))
			continue;
		const struct cfs_id *me = &chord_vnode_self(f->chord, i)->id;
		const struct cfs_node *pred = chord_vnode_pred(f->chord, i);
		uint32_t nk = chord_vnode_preds(f->chord, i, known, 16);
		if (pred) {
			preds[np++] = *pred;
			for (uint32_t j = 0; j < nk && np < 2; j++)
				if (cfs_id_in_oo(&known[j].id, me, &pred->id)) /* before the predecessor */
					preds[np++] = known[j];
		} else {
			for (uint32_t j = 0; j < nk && np < 2; j++)
				preds[np++] = known[j];
		}
		if (cfsd_frepair_mine(key, me, preds, np))
			return true;
	}
	return false;
}

static void job_end(cfsd_frepair_t *f)
{
	struct cfsd_frepair_job *j = &f->job;
	char k[9];

	f->st.checked++;
	switch (j->outcome) {
	case CFSD_FREPAIR_ENOUGH: f->st.enough++; break;
	case CFSD_FREPAIR_REPAIRED:
		f->st.repaired++;
		f->st.stored += (uint64_t)__builtin_popcount(j->mask);
		f->st.bytes_read += (uint64_t)j->ref.m * sfsro_frag_len((uint32_t)j->len, j->ref.m, j->ref.n);
		f->st.bytes_stored += (uint64_t)__builtin_popcount(j->mask) *
		                      sfsro_frag_len((uint32_t)j->len, j->ref.m, j->ref.n);
		log_info("frag repair: %s had %u of %u fragments (threshold %u): %d stored again",
		         cfs_id_short(&j->ref.key, k), j->good, j->ref.n, j->threshold,
		         __builtin_popcount(j->mask));
		break;
	case CFSD_FREPAIR_LOST:
		f->st.lost++;
		log_warn("frag repair: %s has %u fragments, fewer than the %u that rebuild it",
		         cfs_id_short(&j->ref.key, k), j->good, j->ref.m);
		break;
	case CFSD_FREPAIR_NOWHERE:
		f->st.nowhere++;
		log_info("frag repair: %s has %u of %u fragments and no holder without one to store on",
		         cfs_id_short(&j->ref.key, k), j->good, j->ref.n);
		break;
	default: f->st.failed++; break;
	}
	if (cfsd_frepair_job_follow(j) && f->npend < CFSD_FREPAIR_FOLLOW)
		f->pend[f->npend++] = j->ref;
	cfsd_frepair_job_fini(j);
}

static void step(cfsd_frepair_t *f);

/* A DHash operation of the job is back: false when the repairer is being
 * freed (and has been, if this was the last thing it waited for). */
static bool op_back(cfsd_frepair_t *f)
{
	f->busy = false;
	if (!f->freeing)
		return true;
	maybe_release(f);
	return false;
}

/* A probe's count or a locate's, whichever the job asked for. */
static void on_counted(void *arg, const struct dhash_locate_result *r)
{
	cfsd_frepair_t *f = arg;

	if (!op_back(f))
		return;
	if (f->job.next == CFSD_FREPAIR_PROBE)
		cfsd_frepair_job_probed(&f->job, r);
	else
		cfsd_frepair_job_located(&f->job, r);
	step(f);
}

static void on_got(void *arg, const struct dhash_get_result *r)
{
	cfsd_frepair_t *f = arg;

	if (!op_back(f))
		return;
	cfsd_frepair_job_got(&f->job, r->status, r->data, r->len);
	step(f);
}

static void on_repaired(void *arg, int status, const struct cfs_id *key, uint64_t lease)
{
	cfsd_frepair_t *f = arg;

	if (!op_back(f))
		return;
	cfsd_frepair_job_repaired(&f->job, status);
	step(f);
}

/* Start what the job asks next, or end it and take the next key. */
static void step(cfsd_frepair_t *f)
{
	struct cfsd_frepair_job *j = &f->job;
	int r = 0;

	switch (j->next) {
	case CFSD_FREPAIR_PROBE:
		f->busy = true;
		if ((r = dhash_probe_coded(f->client, &j->ref.key, j->ref.m, j->ref.n, on_counted, f)) < 0) {
			f->busy = false;
			cfsd_frepair_job_probed(j, &(struct dhash_locate_result){ .status = r });
			step(f);
		}
		return;
	case CFSD_FREPAIR_LOCATE:
		f->st.located++;
		f->busy = true;
		if ((r = dhash_locate_coded(f->client, &j->ref.key, j->ref.m, j->ref.n, on_counted, f)) < 0) {
			f->busy = false;
			cfsd_frepair_job_located(j, &(struct dhash_locate_result){ .status = r });
			step(f);
		}
		return;
	case CFSD_FREPAIR_GET:
		f->busy = true;
		if ((r = dhash_get_coded(f->client, &j->ref.key, j->ref.m, j->ref.n, on_got, f)) < 0) {
			f->busy = false;
			cfsd_frepair_job_got(j, r, NULL, 0);
			step(f);
		}
		return;
	case CFSD_FREPAIR_REPAIR:
		/* the lease: our own fragment's, which its publisher gave */
		f->busy = true;
		if ((r = dhash_repair_coded(f->client, &j->ref.key, j->ref.m, j->ref.n, j->block, j->len,
		                            j->to, j->ref.n, j->mask, j->ref.lease_until, on_repaired,
		                            f)) < 0) {
			f->busy = false;
			cfsd_frepair_job_repaired(j, r);
			step(f);
		}
		return;
	default:
		job_end(f);
		next_job(f);
		return;
	}
}

/* The next key of this round that is ours, or the round's end. */
static void next_job(cfsd_frepair_t *f)
{
	while (f->next_key < f->nkeys_round) {
		uint32_t i = f->next_key++;
		const struct dhash_frag_ref *ref = &f->round[i];
		if (!f->follow[i] && !mine(f, &ref->key))
			continue;
		cfsd_frepair_job_init(&f->job, ref, f->follow[i]);
		step(f);
		return;
	}
	f->nkeys_round = f->next_key = 0; /* the round is over; the timer starts the next */
}

/* A round: the next slice of the fragments kept here. */
static void round_start(cfsd_frepair_t *f)
{
	bool more = false;

	f->st.rounds++;
	/* the keys followed first, then the next slice of the store */
	uint32_t nf = f->npend;
	memcpy(f->round, f->pend, nf * sizeof(*f->pend));
	for (uint32_t i = 0; i < nf; i++)
		f->follow[i] = true;
	f->npend = 0;
	uint32_t k = dhash_server_frags(f->server, f->cursor_set ? &f->cursor : NULL, CFSD_FREPAIR_SCAN,
	                                f->round + nf, f->keys, &f->cursor, &more);
	for (uint32_t i = nf; i < nf + k; i++)
		f->follow[i] = false;
	f->nkeys_round = nf + k;
	f->cursor_set = more; /* at the end of the store, the next round starts over */
	f->next_key = 0;
	f->st.looked += k;
	next_job(f);
}

/* Is this server's view of the ring whole: every virtual server joined
 * with a full successor list? A server that has just started (or come
 * back) knows a few successors, and lookups it answers itself can name
 * the wrong ones: it counts nothing until then. */
static bool ring_known(const cfsd_frepair_t *f)
{
	for (uint32_t i = 0; i < chord_vnode_count(f->chord); i++)
		if (!chord_vnode_joined(f->chord, i) || !chord_vnode_succs_full(f->chord, i))
			return false;
	return true;
}

static void on_timer(uv_timer_t *h)
{
	cfsd_frepair_t *f = container_of(h, cfsd_frepair_t, timer);

	if (f->freeing || f->busy || f->next_key < f->nkeys_round || !ring_known(f))
		return;
	round_start(f);
}

static void on_closed(uv_handle_t *h)
{
	cfsd_frepair_t *f = container_of((uv_timer_t *)h, cfsd_frepair_t, timer);

	f->timer_closed = true;
	maybe_release(f);
}

cfsd_frepair_t *cfsd_frepair_new(uv_loop_t *loop, chord_t *chord, dhash_server_t *server,
                                 dhash_client_t *client, uint32_t round_ms, uint32_t keys_per_round)
{
	cfsd_frepair_t *f = xcalloc(1, sizeof(*f));

	f->loop = loop;
	f->chord = chord;
	f->server = server;
	f->client = client;
	f->round_ms = round_ms;
	f->keys = keys_per_round ? keys_per_round : CFSD_FREPAIR_KEYS_DEFAULT;
	f->round = xcalloc(f->keys + CFSD_FREPAIR_FOLLOW, sizeof(*f->round));
	f->follow = xcalloc(f->keys + CFSD_FREPAIR_FOLLOW, sizeof(*f->follow));
	uv_timer_init(loop, &f->timer);
	if (round_ms)
		uv_timer_start(&f->timer, on_timer, round_ms, round_ms);
	return f;
}

void cfsd_frepair_free(cfsd_frepair_t *f)
{
	if (!f)
		return;
	f->freeing = true;
	uv_timer_stop(&f->timer);
	uv_close((uv_handle_t *)&f->timer, on_closed);
}

const struct cfsd_frepair_stats *cfsd_frepair_stats(const cfsd_frepair_t *f)
{
	return &f->st;
}
