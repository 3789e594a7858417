/* Log lines carry sd-daemon(3) "<N>" priorities exactly when stderr is
 * the journal stream $JOURNAL_STREAM names (common/util.c). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cfs.h"

/* stderr into a fresh file; returns its path (static buffer). */
static const char *stderr_to_file(void)
{
	static char path[] = "/tmp/cfs-logj-XXXXXX";
	int fd = mkstemp(path);

	cr_assert(fd >= 0);
	cr_assert(dup2(fd, STDERR_FILENO) == STDERR_FILENO);
	close(fd);
	return path;
}

static void read_back(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	size_t got;

	cr_assert(f);
	got = fread(buf, 1, n - 1, f);
	buf[got] = 0;
	fclose(f);
	unlink(path);
}

Test(log_journal, priorities_when_stderr_is_the_journal)
{
	const char *path = stderr_to_file();
	char env[64], buf[512];
	struct stat st;

	cr_assert(fstat(STDERR_FILENO, &st) == 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
	         (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", env, 1);
	unsetenv("CFS_LOG_LEVEL");
	cfs_log_init("cfsd", CFS_LOG_DEBUG);
	log_error("e %d", 1);
	log_warn("w");
	log_info("i");
	log_debug("d");
	read_back(path, buf, sizeof(buf));
	cr_assert_str_eq(buf, "<3>error: e 1\n<4>warn: w\n<6>info: i\n<7>debug: d\n");
}

Test(log_journal, plain_lines_when_stderr_is_elsewhere)
{
	const char *path = stderr_to_file();
	char buf[512], want[128];

	setenv("JOURNAL_STREAM", "1:2", 1); /* some other stream: stderr was redirected */
	unsetenv("CFS_LOG_LEVEL");
	cfs_log_init("cfsd", CFS_LOG_INFO);
	log_warn("w");
	read_back(path, buf, sizeof(buf));
	snprintf(want, sizeof(want), "cfsd[%d]: warn: w\n", (int)getpid());
	cr_assert_str_eq(buf, want);
}
