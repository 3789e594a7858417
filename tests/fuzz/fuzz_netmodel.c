/*
 * libFuzzer target: the network model's two parsers, the one-line spec
 * (cfsd --netmodel) and the latency-matrix text. What parses must obey its
 * limits (a square, symmetric matrix of at most a minute per entry; every
 * number in range); what does not must say why.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

static void check_matrix(const struct cfs_wan_matrix *m)
{
	if (m->n == 0 || m->n > CFS_WAN_MATRIX_MAX)
		abort();
	for (uint32_t i = 0; i < m->n; i++)
		for (uint32_t j = 0; j < m->n; j++)
			if (m->rtt_us[(size_t)i * m->n + j] != m->rtt_us[(size_t)j * m->n + i] ||
			    m->rtt_us[(size_t)i * m->n + j] > 60000000u)
				abort();
}

/* A spec that parsed: its numbers in range, its RTTs symmetric. */
static void check_wan(struct cfs_wan *w)
{
	struct cfs_addr a, b;
	char d[512];

	if (w->loss < 0 || w->loss > 1 || w->slow < 0 || w->slow > 1 || w->slow_ms < 0 ||
	    w->slow_ms > 60000 || w->median_rtt_ms < 1 || w->median_rtt_ms > 10000 || w->matrix)
		abort();
	if (cfs_addr_from_ip(&a, "192.0.2.1", 1) < 0 || cfs_addr_from_ip(&b, "2001:db8::1", 2) < 0)
		abort();
	if (cfs_wan_rtt_us(w, &a, &b) != cfs_wan_rtt_us(w, &b, &a) || cfs_wan_rtt_us(w, &a, &a) != 0)
		abort();
	cfs_wan_describe(w, d, sizeof(d));
	cfs_wan_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfs_wan_matrix *m = NULL;
	struct cfs_wan w;
	char err[256];
	char *s;

	err[0] = 0;
	if (cfs_wan_matrix_parse((const char *)data, size, &m, err, sizeof(err)) == 0) {
		check_matrix(m);
		cfs_wan_matrix_free(m);
	} else if (!err[0] || m) {
		abort();
	}

	/* The spec as a C string; matrix=PATH would open files, so it is left
	 * to the matrix parser above. */
	if (memchr(data, 0, size))
		return 0;
	s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = 0;
	err[0] = 0;
	if (!strstr(s, "matrix")) {
		if (cfs_wan_parse(s, &w, err, sizeof(err)) == 0)
			check_wan(&w);
		else if (!err[0])
			abort();
	}
	free(s);
	return 0;
}
