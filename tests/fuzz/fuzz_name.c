/*
 * libFuzzer target: the text decoder for volume names and keys. A name
 * that decodes must re-encode to the identical string; anything else is
 * refused with a reason.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[128], back[CFS_NAME_LEN + 1];
	uint8_t key[32];
	const char *why = NULL;

	if (size >= sizeof(s))
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (cfs_name_decode(key, s, &why) == 0) {
		cfs_name_encode(back, key);
		if (strcmp(back, s) != 0)
			abort();
	} else if (!why) {
		abort();
	}
	return 0;
}
