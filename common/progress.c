/*
 * The progress bar of the tools that move a tree between a directory and
 * a volume (cfs-publish, cfs-get), on stderr. The line is built by a pure
 * function of the counters and the time, so a unit test can check it; the
 * drawing only throttles and writes it.
 */
#include "common/cfs.h"

#include <stdio.h>

const char *cfs_decimal_bytes(uint64_t n, char buf[static 16])
{
	static const char *const unit[] = { "B", "kB", "MB", "GB", "TB" };
	double v = (double)n;
	unsigned u = 0;

	while (v >= 1000 && u < CFS_ARRAY_SIZE(unit) - 1)
		v /= 1000, u++;
	snprintf(buf, 16, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

/* The rate is measured from the mark (rate_us, rate_bytes), not from the
 * start: what came before it (a root's read, a tree's walk or listing) is
 * no part of the transfer's speed, and an ETA from it would be wrong. */
size_t cfs_progress_line(const struct cfs_progress *p, uint64_t now_us, char *buf, size_t n)
{
	char a[16], b[16], rate[16], eta[32] = "--:--";
	double secs = p->rate_us && now_us > p->rate_us ? (double)(now_us - p->rate_us) / 1e6 : 0;
	uint64_t files = p->done_files < p->total_files ? p->done_files : p->total_files;
	uint64_t bytes = p->done_bytes < p->total_bytes ? p->done_bytes : p->total_bytes;
	double bps = secs > 0.2 && bytes >= p->rate_bytes ? (double)(bytes - p->rate_bytes) / secs : 0;
	double pct = p->total_bytes ? 100.0 * (double)bytes / (double)p->total_bytes
	           : p->total_files ? 100.0 * (double)files / (double)p->total_files : 0;

	if (bps > 0) {
		unsigned long left = (unsigned long)((double)(p->total_bytes - bytes) / bps + 0.5);
		if (left >= 3600)
			snprintf(eta, sizeof(eta), "%lu:%02lu:%02lu", left / 3600, left / 60 % 60, left % 60);
		else
			snprintf(eta, sizeof(eta), "%lu:%02lu", left / 60, left % 60);
	}
	int r = snprintf(buf, n, "%3.0f%%  %lu/%lu files  %s/%s  %s/s  ETA %s", pct, (unsigned long)files,
	                 (unsigned long)p->total_files, cfs_decimal_bytes(bytes, a),
	                 cfs_decimal_bytes(p->total_bytes, b), cfs_decimal_bytes((uint64_t)bps, rate), eta);
	return r < 0 ? 0 : (size_t)r;
}

void cfs_progress_draw(struct cfs_progress *p, uint64_t now_us)
{
	char line[160];

	if (!p->on || (p->drawn_us && now_us - p->drawn_us < 100000))
		return;
	p->drawn_us = now_us;
	cfs_progress_line(p, now_us, line, sizeof(line));
	fprintf(stderr, "\r%s\033[K", line);
}

void cfs_progress_clear(struct cfs_progress *p)
{
	if (p->on && p->drawn_us)
		fputs("\r\033[K", stderr);
}
