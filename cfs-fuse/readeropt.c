/*
 * The options every reader without FUSE shares (cfs-cat, cfs-get,
 * cfs-gateway): which daemon or ring to read through, a dir: store
 * instead, and whether an expired root may be read. One parser, so that
 * the three spell, bound and refuse them alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfs-fuse/cfsfuse.h"

bool cfsfuse_reader_opt(int opt, const char *arg, const char *usage, struct client_target *tgt,
                        struct cfsfuse_options *o)
{
	int v;

	switch (opt) {
	case CFSFUSE_O_CFSD:
		if (snprintf(tgt->sock, sizeof(tgt->sock), "%s", arg) >= (int)sizeof(tgt->sock))
			cfs_usage_error(usage, "--cfsd path too long");
		return true;
	case 'd':
		if (snprintf(tgt->sock, sizeof(tgt->sock), "%s/%s", arg, CLIENT_SOCKET_NAME) >=
		    (int)sizeof(tgt->sock))
			cfs_usage_error(usage, "--data path too long");
		return true;
	case CFSFUSE_O_BOOTSTRAP:
		if (client_target_add(tgt, arg, "--bootstrap") < 0)
			exit(2);
		return true;
	case CFSFUSE_O_FROM:
		if (strncmp(arg, "dir:", 4) != 0 || !arg[4])
			cfs_usage_error(usage, "--from wants dir:PATH, not '%s'", arg);
		o->from_dir = arg + 4;
		return true;
	case CFSFUSE_O_EXPIRED:
		if ((v = cfsfuse_expired_arg(arg)) < 0)
			cfs_usage_error(usage, "--expired wants allow or refuse, not '%s'", arg);
		o->allow_expired = v;
		return true;
	default:
		return false;
	}
}
