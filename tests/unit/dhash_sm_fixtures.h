/* What the DHash state-machine tests (test_dhash_get.c, test_dhash_put.c,
 * test_frepair.c)
 * share: made-up nodes with addresses and IDs of their own. */
#ifndef CFS_TEST_DHASH_SM_FIXTURES_H
#define CFS_TEST_DHASH_SM_FIXTURES_H

#include <criterion/criterion.h>
#include <stdio.h>

#include "dhash/client_sm.h"

/* Node x: ID x·2^248, address 10.0.0.x:4000. */
static inline struct cfs_node node(uint8_t x)
{
	struct cfs_node n = { 0 };
	char ip[32];

	snprintf(ip, sizeof(ip), "10.0.0.%u", x);
	cr_assert_eq(cfs_addr_from_ip(&n.addr, ip, 4000), 0);
	n.id.b[0] = x;
	return n;
}

#endif
