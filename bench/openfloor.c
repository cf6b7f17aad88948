/*
 * loom-openfloor: the least an open and close can cost through FUSE on this machine. A file
 * system of N empty files held in memory, each answered at once: lookup, getattr, open, flush,
 * release. With --no-open its open answers ENOSYS, which the kernel takes as FUSE's no-open
 * support: from then on it opens and closes files without asking the daemon (no OPEN, no
 * RELEASE; a FLUSH still comes at each close unless that too answers ENOSYS, --no-flush).
 * bench/open_floor.py times open+close through it (docs/performance.md, "What an open costs").
 *
 *     loom-openfloor MOUNTPOINT FILES [--no-open] [--no-flush]
 *
 * Not part of Loom: a yardstick, as a local folder is.
 */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fuse_lowlevel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "yardstick.h"

static unsigned long nfiles;
static int no_open, no_flush;

/* Inode 1 is the root; file i (0-based) is inode i + 2, named f%06d. */
static void fill_attr(fuse_ino_t ino, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = ino == FUSE_ROOT_ID ? S_IFDIR | 0755 : S_IFREG | 0644;
	st->st_nlink = ino == FUSE_ROOT_ID ? 2 : 1;
}

static int name_ino(const char *name, fuse_ino_t *ino)
{
	char *end;
	unsigned long i;

	if (name[0] != 'f' || strlen(name) != 7)
		return -ENOENT;
	i = strtoul(name + 1, &end, 10);
	if (*end || i >= nfiles)
		return -ENOENT;
	*ino = i + 2;
	return 0;
}

static void of_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	fuse_ino_t ino;

	if (parent != FUSE_ROOT_ID || name_ino(name, &ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.attr_timeout = 3600;
	e.entry_timeout = 3600;
	fill_attr(ino, &e.attr);
	fuse_reply_entry(req, &e);
}

static void of_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void)fi;
	fill_attr(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

static void of_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	if (no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void of_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, no_flush ? ENOSYS : 0);
}

static void of_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.lookup = of_lookup,
	.getattr = of_getattr,
	.open = of_open,
	.flush = of_flush,
	.release = of_release,
};

int main(int argc, char **argv)
{
	char *fargv[] = { argv[0], "-o", "fsname=openfloor", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	int rc = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: %s MOUNTPOINT FILES [--no-open] [--no-flush]\n", argv[0]);
		return 2;
	}
	nfiles = strtoul(argv[2], NULL, 10);
	for (int i = 3; i < argc; i++) {
		if (strcmp(argv[i], "--no-open") == 0)
			no_open = 1;
		else if (strcmp(argv[i], "--no-flush") == 0)
			no_flush = 1;
		else {
			fprintf(stderr, "%s: unknown option %s\n", argv[0], argv[i]);
			return 2;
		}
	}
	rc = yardstick_serve(&args, &ops, sizeof(ops), argv[1]);
	fuse_opt_free_args(&args);
	return rc;
}
