/*
 * libFuzzer target: cfs-gateway's decoders of what any client sends
 * (cfs-fuse/gwhttp.c). The input is split at the first two NUL bytes into
 * a URL, a Range header and an If-None-Match list. Checked: a URL that
 * parses (a file or root URL) has a decoded path starting with '/', within FS_GW_PATH_MAX,
 * with no NUL, "." or ".." component; one that does not parse says why; a
 * satisfiable range lies inside the file; the escapers and the listings
 * stay in bounds.
 */
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_gw_url u;
	const char *why = NULL;
	char *s = malloc(size + 3);

	memcpy(s, data, size);
	s[size] = s[size + 1] = s[size + 2] = 0;
	const char *url = s, *range = url + strlen(url) + 1;
	if (range > s + size)
		range = s + size + 1;
	const char *inm = range + strlen(range) + 1;
	if (inm > s + size + 1)
		inm = s + size + 2;

	int r = fs__gw_parse_url(url, &u, &why);
	if (r < 0 && (!why || !*why))
		abort();
	if (r == 0 && u.kind != FS_GW_BLOCK) {
		size_t n = strlen(u.path);
		if (u.path[0] != '/' || n > FS_GW_PATH_MAX || strstr(u.path, "/../") || strstr(u.path, "/./"))
			abort();
		if ((n >= 2 && !strcmp(u.path + n - 2, "/.")) || (n >= 3 && !strcmp(u.path + n - 3, "/..")))
			abort();
	}
	uint64_t sizes[] = { 0, 1, 1000, UINT64_C(1) << 40 };
	for (size_t i = 0; i < 4; i++) {
		uint64_t a, b;
		if (fs__gw_parse_range(range, sizes[i], &a, &b) == FS_GW_RANGE_ONE && (a > b || b >= sizes[i]))
			abort();
	}
	(void)fs__gw_etag_match(inm, "\"abc\"");
	(void)fs__gw_content_type(url);
	(void)fs__gw_wants_json(range);

	struct fs_gw_buf b = { 0 };
	fs__gw_buf_json(&b, data, size);
	fs__gw_buf_html(&b, data, size);
	fs__gw_buf_pct(&b, data, size);
	if (b.len < 2 || b.p[b.len] != 0)
		abort();
	struct fs_gw_ent e = { (uint8_t *)s, size, 2, size, -1 };
	struct fs_gw_listing l = { .volume = "v", .seq = 1, .path = "/", .ents = &e, .n = 1, .truncated = true };
	fs__gw_listing_json(&l, &b);
	fs__gw_listing_html(&l, &b);
	free(b.p);
	free(s);
	return 0;
}
