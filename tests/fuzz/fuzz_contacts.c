/*
 * libFuzzer target: a line of a plain client's saved ring contacts
 * (chord_contact_parse, read back by chord_client_load). What parses is a
 * node whose ID is the hash of its address and index, with an index in
 * range, and its address printed and parsed again is the same address.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chord/chord.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char line[256], a[CFS_ADDR_STRLEN];
	struct cfs_node n, back;
	struct cfs_id id;

	if (size >= sizeof(line))
		return 0;
	memcpy(line, data, size);
	line[size] = 0;
	if (chord_contact_parse(line, &n) < 0)
		return 0;
	if (n.vindex >= CFS_VNODE_INDEX_MAX)
		abort();
	cfs_node_id(&id, &n.addr, n.vindex);
	if (!cfs_id_eq(&id, &n.id))
		abort();
	char again[CFS_ADDR_STRLEN + 16];
	snprintf(again, sizeof(again), "%s %u", cfs_addr_str(&n.addr, a), n.vindex);
	if (chord_contact_parse(again, &back) < 0 || !cfs_addr_eq(&back.addr, &n.addr) ||
	    !cfs_id_eq(&back.id, &n.id))
		abort();
	return 0;
}
