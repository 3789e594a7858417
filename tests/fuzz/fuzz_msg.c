/*
 * libFuzzer target: the message decoder. Any input either decodes, and then
 * re-encodes to exactly the same bytes (the encoding is canonical), or is
 * rejected with one of the documented errors. Sanitizers catch the rest.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cfs.h"

static struct cfs_msg m;
static uint8_t out[CFS_FRAME_MAX];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	size_t len;
	int r = cfs_msg_decode(data, size, &m, &why);

	if (r < 0) {
		if ((r != -EPROTO && r != -EMSGSIZE && r != -ENOMSG && r != -EPROTONOSUPPORT) || !why)
			abort();
		return 0;
	}
	/* Floats may arrive as float64 and leave as float32, so compare the
	 * second encoding with the first, not with the input. */
	if (cfs_msg_encode(&m, out, sizeof(out), &len) < 0)
		abort();
	uint8_t *again = malloc(len);
	memcpy(again, out, len);
	if (cfs_msg_decode(again, len, &m, &why) < 0)
		abort();
	size_t len2;
	if (cfs_msg_encode(&m, out, sizeof(out), &len2) < 0 || len2 != len || memcmp(out, again, len))
		abort();
	free(again);
	return 0;
}
