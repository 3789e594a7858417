/*
 * libFuzzer target: the wide-area delay line's matrix parser
 * (tests/testbed/delay.c). A matrix that parses has its nodes sorted and
 * distinct, every node's region in range, and every pair's one-way delay
 * and loss within their bounds; one that does not says why.
 */
#include <stdlib.h>
#include <string.h>

#include "tests/testbed/delay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct delay_matrix m;
	char err[256] = "";

	if (delay_parse((const char *)data, size, &m, err, sizeof(err)) < 0) {
		if (!err[0])
			abort();
		return 0;
	}
	if (m.nnodes > DELAY_MAX_NODES || m.nregions > DELAY_MAX_REGIONS)
		abort();
	for (unsigned i = 0; i < m.nnodes; i++) {
		if (m.node[i].region >= m.nregions || (i && m.node[i].ip <= m.node[i - 1].ip))
			abort();
		uint32_t d, l;
		delay_pair(&m, m.node[i].ip, m.node[(i + 1) % m.nnodes].ip, &d, &l);
		if (d > DELAY_MAX_RTT_MS * 500u || l > 1000000u)
			abort();
	}
	return 0;
}
