/*
 * The one fan-in (see cfs_fanin in cfs.h): requests out, the first error,
 * and who finishes. Counted, not called back: the caller that ends the
 * last request finishes the whole, so the whole can be freed right there,
 * and nothing here needs to know what it is.
 */
#include <assert.h>

#include "common/cfs.h"

void cfs_fanin_add(struct cfs_fanin *f)
{
	f->out++;
}

bool cfs_fanin_end(struct cfs_fanin *f, int status)
{
	assert(f->out > 0);
	if (status < 0 && f->status == 0)
		f->status = status;
	return --f->out == 0;
}
