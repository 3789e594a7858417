/*
 * The CFS_IOC_UPDATE asks waiting for root checks (struct fs_updq,
 * internal.h): which check answers which ask. Its own file, without a
 * FUSE call, so that the unit tests reach it; root.c starts the checks
 * and answers. And the rule for the first root's two answers.
 */
#include <string.h>

#include "cfs-fuse/internal.h"

int fs__updq_add(struct fs_updq *q, fuse_req_t req, uint64_t seq)
{
	if (q->n == FS_UPDATE_WAITERS_MAX)
		return FS_UPDQ_FULL;
	q->req[q->n] = req;
	q->seq_before[q->n++] = seq;
	if (!q->checking)
		return FS_UPDQ_START;
	q->recheck = true;
	return FS_UPDQ_WAIT;
}

bool fs__updq_begin(struct fs_updq *q)
{
	if (q->checking)
		return false;
	q->checking = true;
	q->recheck = false;
	q->ncur = q->n;
	return true;
}

bool fs__updq_end(struct fs_updq *q, fuse_req_t *out, uint64_t *seq_out, uint32_t *ret_n)
{
	uint32_t k = q->ncur;

	memcpy(out, q->req, k * sizeof(*out));
	memcpy(seq_out, q->seq_before, k * sizeof(*seq_out));
	memmove(q->req, q->req + k, (q->n - k) * sizeof(q->req[0]));
	memmove(q->seq_before, q->seq_before + k, (q->n - k) * sizeof(q->seq_before[0]));
	q->n -= k;
	q->ncur = 0;
	q->checking = false;
	*ret_n = k;
	bool again = q->recheck && q->n > 0;
	q->recheck = false;
	return again;
}

uint32_t fs__updq_take_all(struct fs_updq *q, fuse_req_t *out, uint64_t *seq_out)
{
	uint32_t n = q->n;

	memcpy(out, q->req, n * sizeof(*out));
	memcpy(seq_out, q->seq_before, n * sizeof(*seq_out));
	q->n = q->ncur = 0;
	q->recheck = false;
	return n;
}

int fs__first_pick(bool have_early, uint64_t early_seq, int final_status, uint64_t final_seq)
{
	if (final_status == 0 && (!have_early || final_seq >= early_seq))
		return FS_FIRST_QUORUM;
	return have_early ? FS_FIRST_EARLY : FS_FIRST_NONE;
}

bool fs__first_moves(uint64_t cur, int status, uint64_t seq)
{
	return status == 0 && seq > cur;
}
