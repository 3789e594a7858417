/*
 * libFuzzer target: the lookup-mode text (cfsctl lookup --mode, cfs-ring
 * and cfs-testbed --mode). What parses is a mode chord_mode_ok accepts and
 * its name parses back to the same mode; what does not leaves the result
 * untouched.
 */
#include <stdlib.h>
#include <string.h>

#include "chord/chord.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[128], name[48];
	uint32_t m = 0x5a5a5a5a, back = 0;

	if (size >= sizeof(s))
		return 0;
	memcpy(s, data, size);
	s[size] = 0;
	if (chord_mode_parse(s, &m) < 0) {
		if (m != 0x5a5a5a5a)
			abort();
		return 0;
	}
	if (!chord_mode_ok(m))
		abort();
	chord_mode_name(m, name);
	if (chord_mode_parse(name, &back) < 0 || back != m)
		abort();
	return 0;
}
