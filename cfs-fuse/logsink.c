/*
 * A mount in the background has /dev/null for stderr (libfuse's
 * fuse_daemonize puts it there), so its log would be lost: stderr is
 * replaced by a stream that hands each line to syslog. glibc lets a
 * program assign stderr; every writer (cfs_log, libfuse's fuse_log, a
 * stray perror) goes through it, so nothing needs to know.
 *
 * A line "prog[pid]: LEVEL: text" (cfs_log's form) loses its prefix, which
 * syslog adds again (LOG_PID), and LEVEL becomes the priority; a leading
 * "<N>" (sd-daemon's priority prefix) is honoured too. Anything else is
 * logged at LOG_WARNING (libfuse writes only trouble).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "cfs-fuse/internal.h"

#define LINE_MAX_BYTES 2048

struct sink {
	char line[LINE_MAX_BYTES];
	size_t len;
};

static void emit(struct sink *s)
{
	static const struct { const char *word; int prio; } levels[] = {
		{ "error: ", LOG_ERR }, { "warn: ", LOG_WARNING }, { "warning: ", LOG_WARNING },
		{ "info: ", LOG_INFO }, { "debug: ", LOG_DEBUG },
	};
	char *p = s->line, *q;
	int prio = LOG_WARNING;

	s->line[s->len] = 0;
	s->len = 0;
	if (p[0] == '<' && p[1] >= '0' && p[1] <= '7' && p[2] == '>') {
		prio = p[1] - '0';
		p += 3;
	}
	/* "prog[pid]: " */
	if ((q = strstr(p, "]: ")) && q - p < 64 && memchr(p, '[', (size_t)(q - p)) &&
	    !memchr(p, ' ', (size_t)(q - p)))
		p = q + 3;
	for (size_t i = 0; i < CFS_ARRAY_SIZE(levels); i++) {
		size_t n = strlen(levels[i].word);
		if (strncmp(p, levels[i].word, n) == 0) {
			prio = levels[i].prio;
			p += n;
			break;
		}
	}
	if (*p)
		syslog(prio, "%s", p);
}

static ssize_t sink_write(void *cookie, const char *buf, size_t size)
{
	struct sink *s = cookie;

	for (size_t i = 0; i < size; i++) {
		if (buf[i] == '\n' || s->len == LINE_MAX_BYTES - 1) {
			emit(s);
			if (buf[i] == '\n')
				continue;
		}
		s->line[s->len++] = buf[i];
	}
	return (ssize_t)size;
}

static int sink_close(void *cookie)
{
	struct sink *s = cookie;

	if (s->len)
		emit(s);
	free(s);
	return 0;
}

void fs__log_to_syslog(const char *ident)
{
	static const cookie_io_functions_t io = { .write = sink_write, .close = sink_close };
	struct sink *s = xcalloc(1, sizeof(*s));
	FILE *f;

	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	if (!(f = fopencookie(s, "w", io))) {
		free(s);
		return;
	}
	setvbuf(f, NULL, _IOLBF, 0);
	stderr = f;
}
