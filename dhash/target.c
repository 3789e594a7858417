/*
 * How a client program (cfs-mount, cfs-cat, cfs-publish, cfs-fsck) reaches
 * the ring: through the local cfsd's control socket, or as a plain ring
 * client given bootstrap addresses. The rule, first match wins:
 *
 *   1. a socket named on the command line (--cfsd, --data);
 *   2. bootstrap addresses named on the command line (--bootstrap);
 *   3. the default daemon socket, when a cfsd accepts connections there;
 *   4. $CFS_BOOTSTRAP (addresses separated by commas or spaces);
 *   5. "bootstrap ADDR" lines in the client configuration file:
 *      $XDG_CONFIG_HOME/cfs/client.conf (~/.config/cfs/client.conf), or
 *      /etc/cfs/client.conf;
 *   6. the default daemon socket anyway (the error then says no cfsd runs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "dhash/internal.h"

/* Does a daemon accept connections on the UNIX socket at path? */
static bool socket_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	bool ok;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

int dhash_target_add(struct dhash_target *t, const char *list, const char *from)
{
	char buf[1024], *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return log_error_errno(-EINVAL, "%s: the address list is too long", from);
	for (char *w = strtok_r(buf, ", \t\n", &save); w; w = strtok_r(NULL, ", \t\n", &save)) {
		if (t->nboot == DHASH_BOOT_MAX)
			return log_error_errno(-EINVAL, "%s: more than %d bootstrap addresses", from,
			                       DHASH_BOOT_MAX);
		if (cfs_addr_parse(&t->boot[t->nboot], w) < 0)
			return log_error_errno(-EINVAL, "%s: '%s' is not an address (IP:PORT or [IPv6]:PORT)",
			                       from, w);
		t->nboot++;
	}
	return 0;
}

/* "bootstrap ADDR" lines of the first configuration file that exists. */
static int read_config(struct dhash_target *t)
{
	char dir[4000], path[4096], line[1024];
	const char *paths[2];
	int n = 0;

	if (cfs_user_dir(dir, sizeof(dir), NULL, "XDG_CONFIG_HOME", ".config") == 0 &&
	    snprintf(path, sizeof(path), "%s/client.conf", dir) < (int)sizeof(path))
		paths[n++] = path;
	paths[n++] = "/etc/cfs/client.conf";
	for (int i = 0; i < n; i++) {
		FILE *f = fopen(paths[i], "re");
		unsigned lineno = 0;
		int r = 0;
		if (!f)
			continue;
		while (r == 0 && fgets(line, sizeof(line), f)) {
			char where[4200], *p = line + strspn(line, " \t");
			lineno++;
			if (*p == '#' || *p == '\n' || !*p)
				continue;
			snprintf(where, sizeof(where), "%s:%u", paths[i], lineno);
			if (strncmp(p, "bootstrap", 9) != 0 || !strchr(" \t", p[9]))
				r = log_error_errno(-EINVAL, "%s: unknown setting (only `bootstrap ADDR`)", where);
			else
				r = dhash_target_add(t, p + 10, where);
		}
		fclose(f);
		return r;
	}
	return 0;
}

int dhash_target_resolve(struct dhash_target *t)
{
	const char *env;
	int r;

	if (t->sock[0] || t->nboot > 0)
		return 0;
	if ((r = dhash_default_socket(t->sock, sizeof(t->sock))) < 0)
		return log_error_errno(r, "the default cfsd socket path is too long");
	if (socket_answers(t->sock))
		return 0;
	if ((env = getenv("CFS_BOOTSTRAP")) && *env) {
		if ((r = dhash_target_add(t, env, "$CFS_BOOTSTRAP")) < 0)
			return r;
	} else if ((r = read_config(t)) < 0) {
		return r;
	}
	if (t->nboot > 0)
		t->sock[0] = '\0';
	return 0;
}

int dhash_target_open(uv_loop_t *loop, const struct dhash_target *t, uint32_t timeout_ms,
                      dhash_local_t **ret)
{
	if (t->nboot > 0)
		return dhash_local_new_plain(loop, t->boot, t->nboot, timeout_ms, ret);
	return dhash_local_new(loop, t->sock, timeout_ms, ret);
}

const char *dhash_target_name(const struct dhash_target *t, char *buf, size_t n)
{
	char a[CFS_ADDR_STRLEN];

	if (t->nboot == 0)
		snprintf(buf, n, "cfsd at %s", t->sock);
	else
		snprintf(buf, n, "the ring through %s%s", cfs_addr_str(&t->boot[0], a),
		         t->nboot > 1 ? " (and others)" : "");
	return buf;
}
