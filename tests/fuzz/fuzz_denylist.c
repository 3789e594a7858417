/*
 * libFuzzer target: cfsd's denylist file (cfsd_denylist_load_text, which
 * reads DATA/denylist at start, and cfsd_deny_parse_line under it). What
 * loads stays within the bound, every key loaded is denied, and a line that
 * parses prints back to a line that parses to the same entry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfsd/deny.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	cfsd_denylist_t *l;
	uint32_t bad, n;

	if (!quiet) {
		cfs_log_init("fuzz", CFS_LOG_ERROR); /* skipped lines are warnings */
		quiet = true;
	}
	l = cfsd_denylist_new(NULL, 8);
	cfsd_denylist_load_text(l, (const char *)data, size, &bad);
	if (cfsd_denylist_entries(l) > 8 || cfsd_denylist_keys(l) > cfsd_denylist_entries(l))
		abort();
	struct cfs_id *keys = cfsd_denylist_all_keys(l, &n);
	for (uint32_t i = 0; i < n; i++)
		if (!cfsd_denylist_has(l, &keys[i]))
			abort();
	free(keys);
	cfsd_denylist_free(l);

	/* the first line alone, round trip */
	char line[CFSD_DENY_LINE_MAX + 1], again[CFSD_DENY_LINE_MAX + 1], hex[65];
	char name[CFS_NAME_LEN + 1];
	struct cfsd_deny_entry e, back;
	const char *why;
	size_t len = size < CFSD_DENY_LINE_MAX ? size : CFSD_DENY_LINE_MAX;
	memcpy(line, data, len);
	line[len] = 0;
	if (cfsd_deny_parse_line(line, &e, &why) != 0)
		return 0;
	cfs_id_hex(&e.key, hex);
	if (e.has_volume) {
		cfs_name_encode(name, e.volume.b);
		snprintf(again, sizeof(again), "%s %s\n", hex, name);
	} else {
		snprintf(again, sizeof(again), "%s\n", hex);
	}
	if (cfsd_deny_parse_line(again, &back, &why) != 0 || !cfs_id_eq(&back.key, &e.key) ||
	    back.has_volume != e.has_volume ||
	    (e.has_volume && memcmp(back.volume.b, e.volume.b, sizeof(e.volume.b))))
		abort();
	return 0;
}
