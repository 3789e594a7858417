/* Histograms, the seeded RNG, log levels and per-user directories. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfs.h"

Test(util, hist_quantiles)
{
	struct cfs_hist h;
	cfs_hist_reset(&h);
	cr_assert_eq(cfs_hist_quantile(&h, 0.5), 0);
	for (uint64_t v = 1; v <= 10000; v++)
		cfs_hist_add(&h, v);
	cr_assert_eq(h.count, 10000);
	cr_assert_float_eq(cfs_hist_mean(&h), 5000.5, 1e-9);
	uint64_t p50 = cfs_hist_quantile(&h, 0.5), p99 = cfs_hist_quantile(&h, 0.99);
	cr_assert(p50 >= 5000 && p50 <= 5000 * 1.07, "p50 %lu", (unsigned long)p50);
	cr_assert(p99 >= 9900 && p99 <= 10000, "p99 %lu", (unsigned long)p99);
	cr_assert_eq(cfs_hist_quantile(&h, 1.0), 10000);
	cr_assert_eq(cfs_hist_quantile(&h, 0.0), 1);
	for (uint64_t v = 0; v < 16; v++) { /* small values are exact */
		struct cfs_hist g;
		cfs_hist_reset(&g);
		cfs_hist_add(&g, v);
		cr_assert_eq(cfs_hist_quantile(&g, 0.5), v);
	}
	cfs_hist_add(&h, UINT64_MAX / 2); /* huge values land in the last bucket */
	cr_assert_eq(cfs_hist_quantile(&h, 1.0), UINT64_MAX / 2);
}

Test(util, rng_reproducible)
{
	struct cfs_rng a, b, c;
	cfs_rng_seed(&a, 42);
	cfs_rng_seed(&b, 42);
	cfs_rng_seed(&c, 43);
	int differ = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = cfs_rng_next(&a);
		cr_assert_eq(x, cfs_rng_next(&b));
		differ += x != cfs_rng_next(&c);
		double d = cfs_rng_double(&a);
		cfs_rng_double(&b);
		cr_assert(d >= 0 && d < 1);
	}
	cr_assert(differ > 990);
}

Test(util, log_levels)
{
	enum cfs_log_level l;
	cr_assert(cfs_log_parse_level("debug", &l) == 0 && l == CFS_LOG_DEBUG);
	cr_assert(cfs_log_parse_level("WARN", &l) == 0 && l == CFS_LOG_WARN);
	cr_assert(cfs_log_parse_level("loud", &l) == -EINVAL);
	cr_assert_eq(log_error_errno(-ENOENT, "expected in test output"), -ENOENT);
}

Test(util, user_dir_follows_xdg)
{
	char buf[256];
	const char *home = getenv("HOME"), *xdg = getenv("XDG_CACHE_HOME");
	char *saved_home = home ? strdup(home) : NULL, *saved_xdg = xdg ? strdup(xdg) : NULL;

	setenv("XDG_CACHE_HOME", "/x/cache", 1);
	setenv("HOME", "/home/u", 1);
	cr_assert_eq(cfs_user_dir(buf, sizeof(buf), NULL, "XDG_CACHE_HOME", ".cache"), 0);
	cr_assert_str_eq(buf, "/x/cache/cfs");
	unsetenv("XDG_CACHE_HOME");
	cr_assert_eq(cfs_user_dir(buf, sizeof(buf), NULL, "XDG_CACHE_HOME", ".cache"), 0);
	cr_assert_str_eq(buf, "/home/u/.cache/cfs");
	if (geteuid() == 0) {
		cr_assert_eq(cfs_user_dir(buf, sizeof(buf), "/var/cache/cfs", "XDG_CACHE_HOME", ".cache"), 0);
		cr_assert_str_eq(buf, "/var/cache/cfs");
	}
	cr_assert_eq(cfs_user_dir(buf, 8, NULL, "XDG_CACHE_HOME", ".cache"), -ENAMETOOLONG);
	unsetenv("HOME");
	cr_assert_eq(cfs_user_dir(buf, sizeof(buf), NULL, "XDG_CACHE_HOME", ".cache"), -ENOENT);
	if (saved_home)
		setenv("HOME", saved_home, 1);
	if (saved_xdg)
		setenv("XDG_CACHE_HOME", saved_xdg, 1);
	free(saved_home);
	free(saved_xdg);
}

Test(util, parse_days)
{
	uint64_t s = 0;

	cr_assert(cfs_parse_days("30", &s) == 0 && s == 30u * 86400u);
	cr_assert(cfs_parse_days("0.5", &s) == 0 && s == 43200u);
	cr_assert(cfs_parse_days("0.00023", &s) == 0 && s == 20u); /* 19.872 s, rounded */
	cr_assert(cfs_parse_days("0.000001", &s) == 0 && s == 1u);  /* never 0 */
	cr_assert(cfs_parse_days("3650", &s) == 0 && s == 3650ull * 86400u);
	cr_assert_eq(cfs_parse_days("0", &s), -EINVAL);
	cr_assert_eq(cfs_parse_days("-1", &s), -EINVAL);
	cr_assert_eq(cfs_parse_days("3651", &s), -EINVAL);
	cr_assert_eq(cfs_parse_days("", &s), -EINVAL);
	cr_assert_eq(cfs_parse_days("1d", &s), -EINVAL);
	cr_assert_eq(cfs_parse_days("nan", &s), -EINVAL);
}

Test(util, big_endian_round_trip)
{
	uint8_t b[8];

	cfs_put_be16(b, 0x1234);
	cr_assert(b[0] == 0x12 && b[1] == 0x34);
	cr_assert_eq(cfs_get_be16(b), 0x1234);
	cfs_put_be32(b, 0xdeadbeefu);
	cr_assert(b[0] == 0xde && b[1] == 0xad && b[2] == 0xbe && b[3] == 0xef);
	cr_assert_eq(cfs_get_be32(b), 0xdeadbeefu);
	cfs_put_be64(b, 0x0102030405060708ull);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(b[i], i + 1, "byte %d", i);
	cr_assert_eq(cfs_get_be64(b), 0x0102030405060708ull);
	cfs_put_be64(b, UINT64_MAX);
	cr_assert_eq(cfs_get_be64(b), UINT64_MAX);
	cr_assert_eq(cfs_get_be_n(b, 0), 0);
	cfs_put_be64(b, 0x0102030405060708ull);
	cr_assert_eq(cfs_get_be_n(b, 3), 0x010203u);
	cr_assert_eq(cfs_get_be_n(b, 8), 0x0102030405060708ull);
}
