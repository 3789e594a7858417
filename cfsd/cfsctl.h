/*
 * cfsctl's commands (cfsd/cfsctl.c and the cfsd/..._cmd.c files): private to the
 * cfsctl program. main() reads the options that come before the
 * command (--data, --socket, --help), then hands the rest of the command
 * line to the command, which parses its own options with cfsctl_getopt
 * (those three are accepted there as well).
 */
#ifndef CFS_CFSD_CFSCTL_H
#define CFS_CFSD_CFSCTL_H

#include <getopt.h>

#include "cfsd/cfsd.h"

/* What every command shares: where the daemon is. */
struct cfsctl {
	char data_dir[512];
	char sock[600];
};

/* A command's own option: c as getopt_long returned it, optarg its value. */
typedef void (*cfsctl_opt_fn)(void *arg, int c, const char *optarg);
/* Parse argv (argv[0]: the command's name) with the command's options
 * (opts, shortopts without the common d:s:h), calling fn for each of them;
 * a bad option exits 2 with the usage. Returns the index of the first
 * operand; GNU permutation lets options follow operands. */
int cfsctl_getopt(struct cfsctl *g, int argc, char **argv, const char *shortopts,
                  const struct option *opts, cfsctl_opt_fn fn, void *arg);
/* The control socket: --socket, else DIR/cfsd.sock of --data or the
 * default data directory. */
const char *cfsctl_sock(struct cfsctl *g);
/* A number from 1 to max, or exit 2 naming opt. */
unsigned cfsctl_uint(const char *opt, const char *s, unsigned max);
/* Print "cfsctl: reason" and the short usage, exit 2. */
_Noreturn void cfsctl_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The long help, on stdout. */
void cfsctl_help(void);

/* Read KEY arguments ('-': one per line from stdin) and n random keys into
 * a malloc'd array. -EINVAL (reported) for a bad key. */
int cfsctl_read_keys(char **args, int nargs, unsigned random_n, struct cfs_id **ret, size_t *ret_n);

/* The commands: argv[0] is the command's name; each returns the exit code:
 * 0, 1 (no daemon / failure), 2 (bad arguments), 3 (some keys failed). */
int cfsctl_lookup_main(struct cfsctl *g, int argc, char **argv);
int cfsctl_put_main(struct cfsctl *g, int argc, char **argv);
int cfsctl_get_main(struct cfsctl *g, int argc, char **argv);
int cfsctl_refresh_main(struct cfsctl *g, int argc, char **argv);
int cfsctl_history_main(struct cfsctl *g, int argc, char **argv);
int cfsctl_ping_main(struct cfsctl *g, int argc, char **argv);

#endif
