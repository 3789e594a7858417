/*
 * How a client program (cfs-mount, cfs-cat, cfs-publish, cfs-fsck) reaches
 * the ring: through the local cfsd's control socket, or as a plain ring
 * client given bootstrap addresses. The rule, first match wins:
 *
 *   1. a socket named on the command line (--cfsd, --data);
 *   2. bootstrap addresses named on the command line (--bootstrap);
 *   3. the default daemon socket (client_default_socket: the user's own
 *      daemon's, else the system daemon's), when a cfsd accepts
 *      connections there;
 *   4. $CFS_BOOTSTRAP (addresses separated by commas or spaces);
 *   5. "bootstrap ADDR" lines in the client configuration file:
 *      $XDG_CONFIG_HOME/cfs/client.conf (~/.config/cfs/client.conf), or
 *      /etc/cfs/client.conf;
 *   6. the default daemon socket anyway (the error then says no cfsd runs).
 *
 * A socket this user may not use (the system daemon's, outside the group
 * cfs) fails the resolution at once with a message that says so. The
 * target resolved, client_target_open (client.c) opens the backend it
 * names.
 */
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/internal.h"

/* Does a daemon accept connections on the UNIX socket at path? 0 if so,
 * else connect's errno: -ENOENT (none), -ECONNREFUSED (a stale socket),
 * -EACCES (not ours to use). */
static int socket_probe(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, r = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* The data directory the environment names: $CFS_DATA_DIR, else its
 * short form $CFS_DATA; NULL when neither is set. */
static const char *data_env(void)
{
	const char *env = getenv("CFS_DATA_DIR");

	if (env && *env)
		return env;
	env = getenv("CFS_DATA");
	return env && *env ? env : NULL;
}

int client_default_data_dir(char *buf, size_t n)
{
	const char *env = data_env();
	int r;

	if (env && *env)
		return snprintf(buf, n, "%s", env) < (int)n ? 0 : -ENAMETOOLONG;
	r = cfs_user_dir(buf, n, CLIENT_SYSTEM_DIR, "XDG_DATA_HOME", ".local/share");
	if (r == -ENOENT)
		r = snprintf(buf, n, "/tmp/cfs-%u", (unsigned)geteuid()) < (int)n ? 0 : -ENAMETOOLONG;
	return r;
}

static bool socket_answers(const char *path)
{
	return socket_probe(path) == 0;
}

int client_default_socket(char *buf, size_t n)
{
	char dir[4000];
	const char *env = data_env();
	int r = client_default_data_dir(dir, sizeof(dir));
	int len;

	if (r < 0)
		return r;
	len = snprintf(buf, n, "%s/%s", dir, CLIENT_SOCKET_NAME);
	if (len < 0 || (size_t)len >= n)
		return -ENAMETOOLONG;
	if ((env && *env) || socket_answers(buf))
		return 0;
	/* No daemon of the user's own: the system one, if it is there. */
	char sys[sizeof(CLIENT_SYSTEM_DIR "/" CLIENT_SOCKET_NAME)] = CLIENT_SYSTEM_DIR "/" CLIENT_SOCKET_NAME;
	r = socket_probe(sys);
	if ((r == 0 || r == -EACCES) && strlen(sys) < n)
		memcpy(buf, sys, sizeof(sys));
	return 0;
}

int client_socket_denied(const char *sock)
{
	char dir[4096], *slash;
	const char *name = "cfs";
	struct stat stt;
	struct group *g;

	snprintf(dir, sizeof(dir), "%s", sock);
	if ((slash = strrchr(dir, '/')) && slash != dir)
		*slash = 0;
	/* The socket's directory is readable where the socket is not. */
	if ((stat(sock, &stt) == 0 || stat(dir, &stt) == 0) && (g = getgrgid(stt.st_gid)) &&
	    stt.st_gid != 0)
		name = g->gr_name;
	log_error("permission denied on the cfsd socket %s: only root and the members of the "
	          "group %s may use it; add yourself to it (sudo adduser $USER %s) and log in again",
	          sock, name, name);
	return -EACCES;
}

int client_target_add(struct client_target *t, const char *list, const char *from)
{
	char buf[1024], *save = NULL;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf))
		return log_error_errno(-EINVAL, "%s: the address list is too long", from);
	for (char *w = strtok_r(buf, ", \t\n", &save); w; w = strtok_r(NULL, ", \t\n", &save)) {
		if (t->nboot == CLIENT_BOOT_MAX)
			return log_error_errno(-EINVAL, "%s: more than %d bootstrap addresses", from,
			                       CLIENT_BOOT_MAX);
		int r = cfs_addr_parse(&t->boot[t->nboot], w);
		if (r == -EADDRNOTAVAIL) /* the name's lookup failed: said already */
			return log_error_errno(-EINVAL, "%s: no address for '%s'", from, w);
		if (r < 0)
			return log_error_errno(-EINVAL, "%s: '%s' is not an address (IP:PORT or [IPv6]:PORT)",
			                       from, w);
		t->nboot++;
	}
	return 0;
}

/* "bootstrap ADDR" lines of the first configuration file that exists. */
static int read_config(struct client_target *t)
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
				r = client_target_add(t, p + 10, where);
		}
		fclose(f);
		return r;
	}
	return 0;
}

int client_target_resolve(struct client_target *t)
{
	const char *env;
	int r, probe;

	if (t->nboot > 0)
		return 0;
	if (t->sock[0])
		return socket_probe(t->sock) == -EACCES ? client_socket_denied(t->sock) : 0;
	if ((r = client_default_socket(t->sock, sizeof(t->sock))) < 0)
		return log_error_errno(r, "the default cfsd socket path is too long");
	if ((probe = socket_probe(t->sock)) == 0)
		return 0;
	if ((env = getenv("CFS_BOOTSTRAP")) && *env) {
		if ((r = client_target_add(t, env, "$CFS_BOOTSTRAP")) < 0)
			return r;
	} else if ((r = read_config(t)) < 0) {
		return r;
	}
	if (t->nboot > 0)
		t->sock[0] = '\0';
	else if (probe == -EACCES)
		return client_socket_denied(t->sock);
	return 0;
}

const char *client_target_name(const struct client_target *t, char *buf, size_t n)
{
	char a[CFS_ADDR_STRLEN];

	if (t->nboot == 0)
		snprintf(buf, n, "cfsd at %s", t->sock);
	else
		snprintf(buf, n, "the ring through %s%s", cfs_addr_str(&t->boot[0], a),
		         t->nboot > 1 ? " (and others)" : "");
	return buf;
}
