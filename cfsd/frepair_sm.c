/*
 * One key's background repair as a state machine that does no I/O (see
 * cfsd/frepair.h); cfsd/frepair.c drives it, tests/unit/test_frepair.c
 * scripts it.
 */
#include <stdlib.h>
#include <string.h>

#include "cfsd/frepair.h"

uint32_t cfsd_frepair_threshold(uint32_t m, uint32_t n)
{
	return dhash_coded_happy(m, n);
}

bool cfsd_frepair_mine(const struct cfs_id *key, const struct cfs_id *self,
                       const struct cfs_node *preds, uint32_t npreds)
{
	if (npreds == 0)
		return true;
	const struct cfs_id *from = npreds >= 2 ? &preds[1].id : &preds[0].id;
	return cfs_id_eq(key, self) || cfs_id_in_oc(key, from, self);
}

void cfsd_frepair_job_init(struct cfsd_frepair_job *j, const struct dhash_frag_ref *ref, bool until_n)
{
	memset(j, 0, sizeof(*j));
	j->ref = *ref;
	j->threshold = until_n ? ref->n : cfsd_frepair_threshold(ref->m, ref->n);
	j->next = CFSD_FREPAIR_PROBE;
}

bool cfsd_frepair_job_follow(const struct cfsd_frepair_job *j)
{
	uint32_t now = j->good + (j->outcome == CFSD_FREPAIR_REPAIRED ? (uint32_t)__builtin_popcount(j->mask) : 0);

	return (j->outcome == CFSD_FREPAIR_REPAIRED || j->outcome == CFSD_FREPAIR_NOWHERE ||
	        j->outcome == CFSD_FREPAIR_FAILED) && now < j->ref.n;
}

void cfsd_frepair_job_fini(struct cfsd_frepair_job *j)
{
	free(j->block);
	j->block = NULL;
}

static void done(struct cfsd_frepair_job *j, enum cfsd_frepair_outcome o)
{
	j->outcome = o;
	j->next = CFSD_FREPAIR_DONE;
}

/* A probe's count at the threshold or above ends the job; anything else
 * (fewer, or a probe that failed) is looked at closely. */
void cfsd_frepair_job_probed(struct cfsd_frepair_job *j, const struct dhash_locate_result *r)
{
	if (j->next != CFSD_FREPAIR_PROBE)
		return;
	if (r->status == 0 && r->good >= j->threshold) {
		j->good = r->good;
		done(j, CFSD_FREPAIR_ENOUGH);
		return;
	}
	j->next = CFSD_FREPAIR_LOCATE;
}

void cfsd_frepair_job_located(struct cfsd_frepair_job *j, const struct dhash_locate_result *r)
{
	if (j->next != CFSD_FREPAIR_LOCATE)
		return;
	if (r->status < 0) {
		done(j, CFSD_FREPAIR_FAILED);
		return;
	}
	j->loc = *r;
	j->good = r->good;
	if (r->good >= j->threshold)
		done(j, CFSD_FREPAIR_ENOUGH);
	else if (r->good < j->ref.m)
		done(j, CFSD_FREPAIR_LOST);
	else if (!(j->mask = dhash_coded_assign(&j->loc, j->ref.n, j->to)))
		done(j, CFSD_FREPAIR_NOWHERE);
	else
		j->next = CFSD_FREPAIR_GET;
}

void cfsd_frepair_job_got(struct cfsd_frepair_job *j, int status, const uint8_t *p, size_t len)
{
	if (j->next != CFSD_FREPAIR_GET)
		return;
	if (status < 0) {
		done(j, CFSD_FREPAIR_FAILED);
		return;
	}
	j->block = xmemdup(p, len ? len : 1);
	j->len = len;
	j->next = CFSD_FREPAIR_REPAIR;
}

void cfsd_frepair_job_repaired(struct cfsd_frepair_job *j, int status)
{
	if (j->next != CFSD_FREPAIR_REPAIR)
		return;
	done(j, status < 0 ? CFSD_FREPAIR_FAILED : CFSD_FREPAIR_REPAIRED);
}
