/* dhash: how a client program picks the local daemon or a plain ring
 * client (command line, a daemon at the default socket, $CFS_BOOTSTRAP,
 * client.conf). Each test runs in its own process (Criterion), so the
 * environment it sets is its own. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/client.h"

static char dir[64];

static void setup(void)
{
	char p[128];
	snprintf(dir, sizeof(dir), "/tmp/cfs-unit-target.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(p, sizeof(p), "%s/data", dir);
	cr_assert_eq(mkdir(p, 0700), 0);
	setenv("CFS_DATA_DIR", p, 1);
	snprintf(p, sizeof(p), "%s/config", dir);
	setenv("XDG_CONFIG_HOME", p, 1);
	unsetenv("CFS_BOOTSTRAP");
	cfs_log_init("test", CFS_LOG_ERROR);
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_assert_eq(system(cmd), 0);
}

static void write_conf(const char *text)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/config/cfs", dir);
	cr_assert_eq(cfs_mkdir_p(p, 0700), 0);
	strcat(p, "/client.conf");
	FILE *f = fopen(p, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

TestSuite(client_target, .init = setup, .fini = teardown);

Test(client_target, add_parses_lists_and_refuses_bad_ones)
{
	static struct client_target t;
	char a[CFS_ADDR_STRLEN];

	cr_assert_eq(client_target_add(&t, "127.0.0.1:1,[::1]:2  10.0.0.1:3", "test"), 0);
	cr_assert_eq(t.nboot, 3);
	cr_assert_str_eq(cfs_addr_str(&t.boot[1], a), "[::1]:2");
	cr_assert_str_eq(cfs_addr_str(&t.boot[2], a), "10.0.0.1:3");
	cr_assert_eq(client_target_add(&t, "127.0.0.1", "test"), -EINVAL);
	cr_assert_eq(client_target_add(&t, "host.example:5", "test"), -EINVAL);
	memset(&t, 0, sizeof(t));
	for (int i = 0; i < CLIENT_BOOT_MAX; i++)
		cr_assert_eq(client_target_add(&t, "127.0.0.1:9", "test"), 0);
	cr_assert_eq(client_target_add(&t, "127.0.0.1:9", "test"), -EINVAL);
}

Test(client_target, the_command_line_wins)
{
	static struct client_target t;

	setenv("CFS_BOOTSTRAP", "127.0.0.1:7", 1);
	snprintf(t.sock, sizeof(t.sock), "/x/cfsd.sock");
	cr_assert_eq(client_target_resolve(&t), 0);
	cr_assert_str_eq(t.sock, "/x/cfsd.sock");
	cr_assert_eq(t.nboot, 0);
}

Test(client_target, no_daemon_and_nothing_given_means_the_default_socket)
{
	static struct client_target t;
	char want[256];

	cr_assert_eq(client_target_resolve(&t), 0);
	snprintf(want, sizeof(want), "%s/data/%s", dir, CLIENT_SOCKET_NAME);
	cr_assert_str_eq(t.sock, want);
	cr_assert_eq(t.nboot, 0);
}

Test(client_target, the_environment_then_the_config_file)
{
	static struct client_target t;

	write_conf("# a comment\n\nbootstrap 127.0.0.1:5, 127.0.0.1:6\nbootstrap [::1]:7\n");
	setenv("CFS_BOOTSTRAP", "127.0.0.1:4", 1);
	cr_assert_eq(client_target_resolve(&t), 0);
	cr_assert_eq(t.nboot, 1, "$CFS_BOOTSTRAP comes before the file");
	cr_assert_str_eq(t.sock, "");

	memset(&t, 0, sizeof(t));
	unsetenv("CFS_BOOTSTRAP");
	cr_assert_eq(client_target_resolve(&t), 0);
	cr_assert_eq(t.nboot, 3);
	cr_assert_eq(cfs_addr_port(&t.boot[2]), 7);

	memset(&t, 0, sizeof(t));
	write_conf("bootstrapp 127.0.0.1:5\n");
	cr_assert_eq(client_target_resolve(&t), -EINVAL);
}

Test(client_target, a_running_daemon_comes_before_the_environment)
{
	static struct client_target t;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/data/%s", dir, CLIENT_SOCKET_NAME);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	setenv("CFS_BOOTSTRAP", "127.0.0.1:4", 1);
	cr_assert_eq(client_target_resolve(&t), 0);
	cr_assert_str_eq(t.sock, sa.sun_path);
	cr_assert_eq(t.nboot, 0);
	close(fd);

	/* A socket file nobody listens on any more does not count. */
	memset(&t, 0, sizeof(t));
	cr_assert_eq(client_target_resolve(&t), 0);
	cr_assert_eq(t.nboot, 1);
}

/* $CFS_DATA is the short form of $CFS_DATA_DIR; the long one wins. */
Test(client_target, cfs_data_names_the_data_directory)
{
	char got[256], want[128];

	snprintf(want, sizeof(want), "%s/short", dir);
	unsetenv("CFS_DATA_DIR");
	setenv("CFS_DATA", want, 1);
	cr_assert_eq(client_default_data_dir(got, sizeof(got)), 0);
	cr_assert_str_eq(got, want);
	cr_assert_eq(client_default_socket(got, sizeof(got)), 0);
	strcat(want, "/" CLIENT_SOCKET_NAME);
	cr_assert_str_eq(got, want);
	setenv("CFS_DATA_DIR", "/tmp/long-wins", 1);
	cr_assert_eq(client_default_data_dir(got, sizeof(got)), 0);
	cr_assert_str_eq(got, "/tmp/long-wins");
	unsetenv("CFS_DATA");
}
