/* cfs-gateway's pure pieces (cfs-fuse/gwhttp.c): URLs, Range headers,
 * If-None-Match, content types, Accept, loopback addresses, escaping. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/gateway.h"
#include "sfsro-format/sfsro.h"

/* The volume of FORMAT.md's test vectors. */
#define VOL "aoqqpp7tzyil4hlq3umoos6atft6jvrqtosq2xy53sdgiesvgg4a"

static int parse(const char *url, struct fs_gw_url *u)
{
	const char *why = NULL;
	int r = fs__gw_parse_url(url, u, &why);
	if (r < 0)
		cr_assert(why && *why, "an error without a reason for %s", url);
	return r;
}

Test(gateway_url, volume_forms)
{
	struct fs_gw_url u;

	cr_assert_eq(parse("/cfs/" VOL "/a/b.txt", &u), 0);
	cr_assert_eq(u.kind, FS_GW_FILE);
	cr_assert_eq(u.seq, 0);
	cr_assert(!u.latest && !u.slash && !u.bare);
	cr_assert_str_eq(u.path, "/a/b.txt");
	cr_assert_str_eq(u.rest, "/a/b.txt");

	cr_assert_eq(parse("/cfs/" VOL "@latest/a/", &u), 0);
	cr_assert(u.latest && u.slash);
	cr_assert_eq(u.seq, 0);
	cr_assert_str_eq(u.path, "/a/");

	cr_assert_eq(parse("/cfs/" VOL "@42", &u), 0);
	cr_assert_eq(u.seq, 42);
	cr_assert(u.bare && u.slash && !u.latest);
	cr_assert_str_eq(u.path, "/");

	cr_assert_eq(parse("/cfs/" VOL "@7/", &u), 0);
	cr_assert(!u.bare && u.slash);
	cr_assert_str_eq(u.path, "/");
}

Test(gateway_url, decoding)
{
	struct fs_gw_url u;

	cr_assert_eq(parse("/cfs/" VOL "/with%20space/%C3%A9t%C3%A9", &u), 0);
	cr_assert_str_eq(u.path, "/with space/\xc3\xa9t\xc3\xa9");
	cr_assert_eq(parse("/cfs/" VOL "//a///b", &u), 0);
	cr_assert_str_eq(u.path, "/a/b");
	cr_assert_eq(parse("/cfs/" VOL "/a+b%2e", &u), 0);
	cr_assert_str_eq(u.path, "/a+b.");
	cr_assert_eq(parse("/cfs/" VOL "/.hidden/..x", &u), 0);
	cr_assert_str_eq(u.path, "/.hidden/..x");
}

Test(gateway_url, refusals)
{
	struct fs_gw_url u;

	cr_assert_eq(parse("/", &u), -ENOENT);
	cr_assert_eq(parse("/favicon.ico", &u), -ENOENT);
	cr_assert_eq(parse("/cfsx/" VOL, &u), -ENOENT);
	cr_assert_eq(parse("/cfs/short", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "@0/a", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "@007/a", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "@x/a", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a/../b", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a/%2e%2E/b", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/./b", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a/..", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a%00b", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a%2Fb", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a%2", &u), -EINVAL);
	cr_assert_eq(parse("/cfs/" VOL "/a%zz", &u), -EINVAL);
	char *big = malloc(FS_GW_PATH_MAX + 200);
	strcpy(big, "/cfs/" VOL "/");
	memset(big + strlen(big), 'a', FS_GW_PATH_MAX + 10);
	big[FS_GW_PATH_MAX + 100] = 0;
	cr_assert_eq(parse(big, &u), -EINVAL);
	free(big);
}

Test(gateway_url, roots_and_blocks)
{
	struct fs_gw_url u;

	cr_assert_eq(parse("/cfs-root/" VOL, &u), 0);
	cr_assert_eq(u.kind, FS_GW_ROOT);
	cr_assert_eq(parse("/cfs-root/" VOL "@3", &u), 0);
	cr_assert_eq(u.seq, 3);
	cr_assert_eq(parse("/cfs-root/" VOL "/a", &u), -EINVAL);

	const char *hex = "3bf4e6e8b4f6c70e6171a89fb4d51b43613aee74f308f91fba95c5e2a4034989";
	char url[128];
	snprintf(url, sizeof(url), "/cfs-block/%s", hex);
	cr_assert_eq(parse(url, &u), 0);
	cr_assert_eq(u.kind, FS_GW_BLOCK);
	cr_assert_eq(u.key.b[0], 0x3b);
	cr_assert_eq(u.key.b[31], 0x89);
	cr_assert_eq(parse("/cfs-block/" VOL, &u), 0); /* base32 */
	cr_assert_eq(parse("/cfs-block/3bf4", &u), -EINVAL);
	cr_assert_eq(parse("/cfs-block/", &u), -EINVAL);
}

static int range(const char *h, uint64_t size, uint64_t *a, uint64_t *b)
{
	*a = *b = 12345;
	return fs__gw_parse_range(h, size, a, b);
}

Test(gateway_range, single)
{
	uint64_t a, b;

	cr_assert_eq(range("bytes=0-99", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 0 && b == 99);
	cr_assert_eq(range("bytes=500-", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 500 && b == 999);
	cr_assert_eq(range("bytes=900-5000", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 900 && b == 999);
	cr_assert_eq(range("bytes=-100", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 900 && b == 999);
	cr_assert_eq(range("bytes=-5000", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 0 && b == 999);
	cr_assert_eq(range(" Bytes = 1-1 ", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 1 && b == 1);
	cr_assert_eq(range("bytes=999-999", 1000, &a, &b), FS_GW_RANGE_ONE);
	cr_assert(a == 999 && b == 999);
}

Test(gateway_range, unsatisfiable)
{
	uint64_t a, b;

	cr_assert_eq(range("bytes=1000-", 1000, &a, &b), FS_GW_RANGE_UNSAT);
	cr_assert_eq(range("bytes=5000-6000", 1000, &a, &b), FS_GW_RANGE_UNSAT);
	cr_assert_eq(range("bytes=-0", 1000, &a, &b), FS_GW_RANGE_UNSAT);
	cr_assert_eq(range("bytes=0-", 0, &a, &b), FS_GW_RANGE_UNSAT);
	cr_assert_eq(range("bytes=-1", 0, &a, &b), FS_GW_RANGE_UNSAT);
}

Test(gateway_range, ignored)
{
	uint64_t a, b;

	cr_assert_eq(range(NULL, 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=0-1,5-6", 1000, &a, &b), FS_GW_RANGE_NONE); /* multi: all of it */
	cr_assert_eq(range("items=0-1", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=5-1", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=-", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=a-b", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=1-2x", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert_eq(range("bytes=99999999999999999999-", 1000, &a, &b), FS_GW_RANGE_NONE);
	cr_assert(a == 12345 && b == 12345, "an ignored range sets nothing");
}

Test(gateway_etag, if_none_match)
{
	const char *e = "\"abc\"";

	cr_assert(fs__gw_etag_match("\"abc\"", e));
	cr_assert(fs__gw_etag_match("W/\"abc\"", e));
	cr_assert(fs__gw_etag_match("\"x\", \"abc\"", e));
	cr_assert(fs__gw_etag_match("*", e));
	cr_assert(fs__gw_etag_match(" ,, \"abc\"", e));
	cr_assert(!fs__gw_etag_match(NULL, e));
	cr_assert(!fs__gw_etag_match("", e));
	cr_assert(!fs__gw_etag_match("\"abcd\"", e));
	cr_assert(!fs__gw_etag_match("\"ab\"", e));
	cr_assert(!fs__gw_etag_match("abc", e));
	cr_assert(!fs__gw_etag_match("\"abc", e));
	cr_assert(!fs__gw_etag_match("\"x\" junk \"abc\"", e));
}

Test(gateway_types, by_extension)
{
	cr_assert_str_eq(fs__gw_content_type("/a/index.html"), "text/html; charset=utf-8");
	cr_assert_str_eq(fs__gw_content_type("/README.TXT"), "text/plain; charset=utf-8");
	cr_assert_str_eq(fs__gw_content_type("x.css"), "text/css; charset=utf-8");
	cr_assert_str_eq(fs__gw_content_type("x.js"), "text/javascript; charset=utf-8");
	cr_assert_str_eq(fs__gw_content_type("x.json"), "application/json");
	cr_assert_str_eq(fs__gw_content_type("x.png"), "image/png");
	cr_assert_str_eq(fs__gw_content_type("x.JPG"), "image/jpeg");
	cr_assert_str_eq(fs__gw_content_type("x.svg"), "image/svg+xml");
	cr_assert_str_eq(fs__gw_content_type("x.pdf"), "application/pdf");
	cr_assert_str_eq(fs__gw_content_type("x.tar.gz"), "application/octet-stream");
	cr_assert_str_eq(fs__gw_content_type("/d.html/noext"), "application/octet-stream");
	cr_assert_str_eq(fs__gw_content_type("/.html"), "application/octet-stream");
	cr_assert_str_eq(fs__gw_content_type("/a."), "application/octet-stream");
}

Test(gateway_types, accept)
{
	cr_assert(fs__gw_wants_json("application/json"));
	cr_assert(fs__gw_wants_json("application/json, */*;q=0.1"));
	cr_assert(!fs__gw_wants_json("text/html,application/xhtml+xml,application/json;q=0.9"));
	cr_assert(!fs__gw_wants_json("*/*"));
	cr_assert(!fs__gw_wants_json(NULL));
}

Test(gateway_types, loopback)
{
	struct sockaddr_in a4 = { .sin_family = AF_INET };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6 };

	inet_pton(AF_INET, "127.0.0.1", &a4.sin_addr);
	cr_assert(fs__gw_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "127.9.8.7", &a4.sin_addr);
	cr_assert(fs__gw_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "0.0.0.0", &a4.sin_addr);
	cr_assert(!fs__gw_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET, "10.0.0.1", &a4.sin_addr);
	cr_assert(!fs__gw_is_loopback((struct sockaddr *)&a4));
	inet_pton(AF_INET6, "::1", &a6.sin6_addr);
	cr_assert(fs__gw_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "::", &a6.sin6_addr);
	cr_assert(!fs__gw_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "::ffff:127.0.0.1", &a6.sin6_addr);
	cr_assert(fs__gw_is_loopback((struct sockaddr *)&a6));
	inet_pton(AF_INET6, "fd00::1", &a6.sin6_addr);
	cr_assert(!fs__gw_is_loopback((struct sockaddr *)&a6));
}

Test(gateway_text, escaping)
{
	struct fs_gw_buf b = { 0 };

	fs__gw_buf_html(&b, (const uint8_t *)"<a href=\"x\">&'", 14);
	cr_assert_str_eq(b.p, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
	b.len = 0;
	fs__gw_buf_pct(&b, (const uint8_t *)"a b/\xc3\xa9~%", 8);
	cr_assert_str_eq(b.p, "a%20b%2F%C3%A9~%25");
	b.len = 0;
	fs__gw_buf_json(&b, (const uint8_t *)"q\"\\\n\xc3\xa9\xff", 7);
	cr_assert_str_eq(b.p, "\"q\\\"\\\\\\u000a\xc3\xa9\\u00ff\"");
	b.len = 0;
	fs__gw_buf_json(&b, (const uint8_t *)"\xed\xa0\x80\xc0\xaf", 5); /* a surrogate, an overlong '/' */
	cr_assert_str_eq(b.p, "\"\\u00ed\\u00a0\\u0080\\u00c0\\u00af\"");
	free(b.p);
}

/* A listing of hostile names: markup, quotes, a newline, invalid UTF-8. */
static const struct fs_gw_ent ents[] = {
	{ (uint8_t *)"<script>\"x\".html", 16, SFSRO_T_FILE, 12, 1690000000 },
	{ (uint8_t *)"dir\n\xff", 5, SFSRO_T_DIR, 3, 0 },
	{ (uint8_t *)"link", 4, SFSRO_T_SYMLINK, 4, -1 },
};

Test(gateway_text, listing_json)
{
	struct fs_gw_buf b = { 0 };
	struct fs_gw_listing l = { .volume = VOL, .seq = 7, .path = "/a \"b\"/", .ents = ents, .n = 3,
	                           .from = 20, .truncated = true };

	fs__gw_listing_json(&l, &b);
	cr_assert_str_eq(b.p, "{\"volume\":\"" VOL "\",\"seq\":7,\"path\":\"/a \\\"b\\\"/\",\"entries\":["
	                 "{\"name\":\"<script>\\\"x\\\".html\",\"type\":\"file\",\"size\":12,\"mtime\":1690000000},"
	                 "{\"name\":\"dir\\u000a\\u00ff\",\"type\":\"dir\",\"size\":3,\"mtime\":0},"
	                 "{\"name\":\"link\",\"type\":\"symlink\",\"size\":4,\"mtime\":-1}],"
	                 "\"truncated\":true,\"next\":23}\n");
	b.len = 0;
	l.truncated = false;
	l.n = 0;
	fs__gw_listing_json(&l, &b);
	cr_assert(strstr(b.p, "\"entries\":[],\"truncated\":false}\n"), "%s", b.p);
	free(b.p);
}

Test(gateway_text, listing_html)
{
	struct fs_gw_buf b = { 0 };
	struct fs_gw_listing l = { .volume = VOL, .seq = 7, .path = "/<p>/", .ents = ents, .n = 3,
	                           .from = 0, .truncated = true };

	fs__gw_listing_html(&l, &b);
	cr_assert(strstr(b.p, "<title>/&lt;p&gt;/</title>"), "%s", b.p);
	cr_assert(strstr(b.p, "<a href=\"../\">../</a>"));
	cr_assert(strstr(b.p, "<a href=\"./%3Cscript%3E%22x%22.html\">&lt;script&gt;&quot;x&quot;.html</a>"), "%s", b.p);
	cr_assert(strstr(b.p, "<a href=\"./dir%0A%FF/\">dir\n\xff/</a>"), "%s", b.p);
	cr_assert(strstr(b.p, "<td class=\"n\">12</td><td>2023-07-22 04:26</td>"), "%s", b.p);
	cr_assert(strstr(b.p, "<a href=\"./?from=3\">more...</a>"));
	cr_assert(!strstr(b.p, "<script>"), "a name became markup");
	b.len = 0;
	l.path = "/";
	l.truncated = false;
	fs__gw_listing_html(&l, &b);
	cr_assert(!strstr(b.p, "../"), "the top has no parent link");
	cr_assert(!strstr(b.p, "more..."));
	free(b.p);
}
