/* Memory, logging, clocks, the seeded RNG and histograms. */
#include "common/cfs.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Noreturn void oom(size_t n)
{
	fprintf(stderr, "out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
	void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
	if (!p)
		oom(nmemb * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

uint64_t cfs_rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE) / 1024;
}

int cfs_mkdir_p(const char *path, unsigned mode)
{
	char tmp[4096];
	size_t len = strlen(path);

	if (len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(tmp, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = '/';
		}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int cfs_abs_path(char *path, size_t n)
{
	char cwd[4096], tmp[4096];

	if (path[0] == '/' || !path[0])
		return 0;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	int len = snprintf(tmp, sizeof(tmp), "%s/%s", cwd, path);
	if (len < 0 || (size_t)len >= sizeof(tmp) || (size_t)len >= n)
		return -ENAMETOOLONG;
	memcpy(path, tmp, (size_t)len + 1);
	return 0;
}

int cfs_user_dir(char *buf, size_t n, const char *as_root, const char *xdg_var,
                 const char *home_sub)
{
	const char *xdg = getenv(xdg_var), *home = getenv("HOME");
	int len;

	if (as_root && geteuid() == 0)
		len = snprintf(buf, n, "%s", as_root);
	else if (xdg && *xdg)
		len = snprintf(buf, n, "%s/cfs", xdg);
	else if (home && *home)
		len = snprintf(buf, n, "%s/%s/cfs", home, home_sub);
	else
		return -ENOENT;
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

char *xstrdup(const char *s)
{
	return xmemdup(s, strlen(s) + 1);
}

void *xmemdup(const void *p, size_t n)
{
	void *q = xmalloc(n);
	memcpy(q, p, n);
	return q;
}

/* ------------------------------------------------------------ logging */

static const char *log_prog = "cfs";
static enum cfs_log_level log_level = CFS_LOG_INFO;
static const char *const level_names[] = { "error", "warn", "info", "debug" };
/* sd-daemon(3)'s "<N>" priority prefixes (LOG_ERR, LOG_WARNING, LOG_INFO,
 * LOG_DEBUG), written when stderr is the journal: journald files the line
 * at that priority and records the program and pid itself. */
static const int level_prio[] = { 3, 4, 6, 7 };
static bool log_journal;

/* Is stderr the journal stream systemd gave us? $JOURNAL_STREAM names its
 * "device:inode"; a redirected stderr (a pipe, a file) no longer matches. */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (!env || sscanf(env, "%llu:%llu", &dev, &ino) != 2 || fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

int cfs_log_parse_level(const char *s, enum cfs_log_level *ret)
{
	for (unsigned i = 0; i < CFS_ARRAY_SIZE(level_names); i++)
		if (strcasecmp(s, level_names[i]) == 0) {
			*ret = (enum cfs_log_level)i;
			return 0;
		}
	return -EINVAL;
}

void cfs_log_init(const char *progname, enum cfs_log_level level)
{
	const char *env = getenv("CFS_LOG_LEVEL");
	enum cfs_log_level l;

	if (progname) {
		const char *slash = strrchr(progname, '/');
		log_prog = slash ? slash + 1 : progname;
	}
	log_level = level;
	if (env && cfs_log_parse_level(env, &l) == 0)
		log_level = l;
	log_journal = stderr_is_journal();
}

void cfs_log_set_level(enum cfs_log_level level) { log_level = level; }
enum cfs_log_level cfs_log_get_level(void) { return log_level; }

static void log_va(enum cfs_log_level level, int r, const char *fmt, va_list ap)
{
	char buf[1024];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	if (n < 0)
		return;
	if (r < 0 && (size_t)n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - (size_t)n, ": %s", strerror(-r));
	if (log_journal)
		fprintf(stderr, "<%d>%s: %s\n", level_prio[level], level_names[level], buf);
	else
		fprintf(stderr, "%s[%d]: %s: %s\n", log_prog, (int)getpid(),
		        level_names[level], buf);
}

void cfs_log(enum cfs_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	log_va(level, 0, fmt, ap);
	va_end(ap);
}

int cfs_log_errno(enum cfs_log_level level, int r, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return r;
	va_start(ap, fmt);
	log_va(level, r, fmt, ap);
	va_end(ap);
	return r;
}

void cfs_usage_error(const char *usage, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", log_prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s\n", usage);
	exit(2);
}

int cfs_parse_days(const char *s, uint64_t *ret_s)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);

	if (!*s || *end || errno || !(d > 0.0) || d > 3650.0)
		return -EINVAL;
	double secs = d * 86400.0 + 0.5;
	*ret_s = secs < 1.0 ? 1 : (uint64_t)secs;
	return 0;
}

/* ------------------------------------------------------------ clocks */

uint64_t cfs_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t cfs_now_ms(void) { return cfs_now_us() / 1000u; }

static int64_t wall_offset_s;

void cfs_wall_set_offset_s(int64_t s)
{
	wall_offset_s = s;
}

uint64_t cfs_wall_ms(void)
{
	static bool env_read;
	struct timespec ts;

	if (!env_read) { /* for tests: a tool whose clock is wrong */
		const char *e = getenv("CFS_TEST_CLOCK_OFFSET_S");
		env_read = true;
		if (e && *e && !wall_offset_s)
			wall_offset_s = strtoll(e, NULL, 10);
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)((int64_t)ts.tv_sec + wall_offset_s) * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t cfs_wall_s(void)
{
	return cfs_wall_ms() / 1000u;
}

/* ------------------------------------------------------------ rng */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void cfs_rng_seed(struct cfs_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t cfs_rng_next(struct cfs_rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double cfs_rng_double(struct cfs_rng *r)
{
	return (double)(cfs_rng_next(r) >> 11) * 0x1.0p-53;
}

/* ------------------------------------------------------------ histogram */

/* Values below 16 have a bucket each; above, each power of two [2^e, 2^e+1)
 * is split into 16 equal sub-buckets. */
static unsigned hist_index(uint64_t v)
{
	if (v < 16)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* e >= 4 */
	unsigned sub = (unsigned)(v >> (e - 4)) & 15u;
	unsigned i = (e - 3) * 16 + sub;
	return i < CFS_HIST_BUCKETS ? i : CFS_HIST_BUCKETS - 1;
}

static uint64_t hist_upper(unsigned i)
{
	if (i < 16)
		return i;
	unsigned e = i / 16 + 3, sub = i % 16;
	return ((16ull + sub + 1) << (e - 4)) - 1;
}

void cfs_hist_reset(struct cfs_hist *h) { memset(h, 0, sizeof(*h)); }

void cfs_hist_add(struct cfs_hist *h, uint64_t v)
{
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->count++;
	h->sum += v;
	h->b[hist_index(v)]++;
}

uint64_t cfs_hist_quantile(const struct cfs_hist *h, double q)
{
	if (h->count == 0)
		return 0;
	if (q <= 0)
		return h->min;
	uint64_t want = (uint64_t)ceil(q * (double)h->count), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < CFS_HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= want) {
			if (i == CFS_HIST_BUCKETS - 1) /* the overflow bucket */
				return h->max;
			uint64_t u = hist_upper(i);
			return u > h->max ? h->max : (u < h->min ? h->min : u);
		}
	}
	return h->max;
}

double cfs_hist_mean(const struct cfs_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

/* ------------------------------------------------------------ text buffer */

void cfs_sb_printf(struct cfs_sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n >= 0 && (size_t)n < b->cap - b->len)
			break;
		b->cap = b->cap * 2 + (size_t)n + 64;
		b->p = xrealloc(b->p, b->cap);
	}
	b->len += (size_t)n;
}

void cfs_sb_json_str(struct cfs_sbuf *b, const char *s)
{
	cfs_sb_printf(b, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			cfs_sb_printf(b, "\\%c", ch);
		else if (ch < 0x20)
			cfs_sb_printf(b, "\\u%04x", ch);
		else
			cfs_sb_printf(b, "%c", ch);
	}
	cfs_sb_printf(b, "\"");
}

uint64_t cfs_num_load(const char *path)
{
	FILE *f = fopen(path, "r");
	unsigned long long v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

int cfs_write_file_atomic(const char *path, const void *p, size_t len, unsigned mode)
{
	char tmp[4300], dir[4300];
	const uint8_t *b = p;
	int fd, r = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)) < 0)
		return -errno;
	while (len > 0 && r == 0) {
		ssize_t n = write(fd, b, len);
		if (n < 0) {
			r = -errno;
		} else {
			b += n;
			len -= (size_t)n;
		}
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return r;
	}
	/* the rename itself survives a crash only once the directory is synced */
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else if (slash)
		*slash = 0;
	else
		strcpy(dir, ".");
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

int cfs_num_store(const char *path, uint64_t v)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "%llu\n", (unsigned long long)v);

	return cfs_write_file_atomic(path, line, (size_t)n, 0600);
}

/* ------------------------------------------------------------ mounts */

/* mountinfo escapes blanks and backslashes as \ooo. */
static void mountinfo_unescape(char *s)
{
	char *d = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*d++ = *s;
		}
	}
	*d = 0;
}

int cfs_mounts_each(const char *volume, bool (*cb)(void *arg, const char *mnt, const char *src),
                    void *arg)
{
	char line[8192], want[32];
	int n = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return -errno;
	snprintf(want, sizeof(want), "cfs:%.16s", volume ? volume : "");
	while (fgets(line, sizeof(line), f)) {
		char mp[4096], type[64], src[64];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%63s %63s", type, src) != 2 || strcmp(type, "fuse.cfs") != 0)
			continue;
		if (volume && strcmp(src, want) != 0)
			continue;
		mountinfo_unescape(mp);
		n++;
		if (!cb(arg, mp, src))
			break;
	}
	fclose(f);
	return n;
}
