/* Publisher key files: the Ed25519 seed in canonical base32, mode 0600. */
#include "publisher/publisher.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_MAGIC "cfs-secret-key-v1 "

int pub_default_key_path(char *buf, size_t n)
{
	int r = cfs_user_dir(buf, n, NULL, "XDG_CONFIG_HOME", ".config");

	if (r == -ENOENT)
		return log_error_errno(r, "neither XDG_CONFIG_HOME nor HOME is set; use --key");
	if (r < 0)
		return r;
	size_t len = strlen(buf);
	return snprintf(buf + len, n - len, "/publish.key") < (int)(n - len) ? 0 : -ENAMETOOLONG;
}

/* The key file's missing parent directories, 0700. */
static void mkdir_parents(const char *path)
{
	char tmp[4096];
	char *slash;

	snprintf(tmp, sizeof(tmp), "%s", path);
	if ((slash = strrchr(tmp, '/')) && slash != tmp) {
		*slash = 0;
		(void)cfs_mkdir_p(tmp, 0700);
	}
}

int pub_key_generate(const char *path, struct cfs_pubkey *ret_pk)
{
	uint8_t seed[32];
	char text[CFS_NAME_LEN + 1], line[128];
	struct cfs_seckey sk;
	int fd, n, r = 0;

	mkdir_parents(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return log_error_errno(-errno, "cannot create key file %s", path);
	cfs_sign_keypair(ret_pk, &sk);
	memcpy(seed, sk.b, 32); /* libsodium's secret key is seed ‖ public key */
	cfs_name_encode(text, seed);
	n = snprintf(line, sizeof(line), "%s%s\n", KEY_MAGIC, text);
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0)
		r = log_error_errno(-EIO, "cannot write key file %s", path);
	close(fd);
	cfs_seckey_wipe(&sk);
	cfs_wipe(seed, sizeof(seed));
	cfs_wipe(line, sizeof(line));
	if (r < 0)
		unlink(path);
	return r;
}

int pub_key_load(const char *path, struct cfs_pubkey *ret_pk, struct cfs_seckey *ret_sk)
{
	char line[256];
	uint8_t seed[32];
	struct stat st;
	const char *why = "";
	ssize_t n;
	int fd, r;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return log_error_errno(-errno, "cannot open key file %s (make one with cfs-publish --keygen)", path);
	if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
		close(fd);
		log_error("key file %s is readable by others (mode %03o): refusing to use it; chmod 600 it",
		          path, (unsigned)(st.st_mode & 0777));
		return -EACCES;
	}
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n < 0)
		return log_error_errno(-errno, "cannot read key file %s", path);
	line[n] = 0;
	line[strcspn(line, "\n")] = 0;
	if (strncmp(line, KEY_MAGIC, strlen(KEY_MAGIC)) != 0 ||
	    (r = cfs_name_decode(seed, line + strlen(KEY_MAGIC), &why)) < 0) {
		cfs_wipe(line, sizeof(line));
		log_error("%s is not a CFS key file%s%s", path, *why ? ": " : "", why);
		return -EINVAL;
	}
	cfs_sign_seed_keypair(seed, ret_pk, ret_sk);
	cfs_wipe(seed, sizeof(seed));
	cfs_wipe(line, sizeof(line));
	return 0;
}
