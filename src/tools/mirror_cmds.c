/*
 * loom mirror: mirrored files, as `lfs mirror`. `create` makes a new file with copies (as
 * `loom setstripe -N` on a new path); `resync` has the MDS copy stale copies again and waits for
 * it; `verify` reads every in-sync copy and compares them.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

#define MIRROR_USAGE \
	"usage: loom mirror create -N COPIES [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] FILE...\n" \
	"       loom mirror resync [--timeout SEC] FILE...\n" \
	"       loom mirror verify [-v] FILE...\n"

/* Runs one (fs, the file's path in the file system, the path as given) per FILE argument from
 * optind on, connecting once; 1 if any failed (each said why), 2 without a FILE. */
static int each_file(struct tool_ctx *ctx, int argc, char **argv, void *opt,
		     int (*one)(loom_fs *fs, const char *path, const char *arg, void *opt))
{
	loom_fs *fs = NULL;
	int ret = 0;

	if (optind >= argc) {
		fprintf(stderr, MIRROR_USAGE);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		char buf[PATH_MAX];
		const char *p = tool_fs_path(ctx, argv[i], true, buf, sizeof(buf));

		if (!fs && !(fs = tool_connect(ctx)))
			return 1;
		if (one(fs, p, argv[i], opt))
			ret = 1;
	}
	if (fs)
		loom_disconnect(fs);
	return ret;
}

static int resync_one(loom_fs *fs, const char *path, const char *arg, void *opt)
{
	unsigned long timeout = *(unsigned long *)opt;
	int rc = loom_mirror_resync(fs, path, (unsigned)timeout);

	if (rc == -EINVAL)
		fprintf(stderr, "loom mirror resync: '%s': not a mirrored file\n", arg);
	else if (rc == -ETIMEDOUT)
		fprintf(stderr, "loom mirror resync: '%s': copies still stale after %lu s (is an OST of "
				"theirs away? `loom df` shows)\n", arg, timeout);
	else if (rc)
		tool_fail("mirror resync", arg, rc);
	return rc ? 1 : 0;
}

static int mirror_resync(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' }, { NULL, 0, NULL, 0 },
	};
	unsigned long timeout = 0;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "t:", opts, NULL)) != -1) {
		char *end;

		if (c != 't') {
			fprintf(stderr, MIRROR_USAGE);
			return 2;
		}
		timeout = strtoul(optarg, &end, 10);
		if (*end || end == optarg || timeout > UINT_MAX) {
			fprintf(stderr, "loom mirror resync: invalid timeout '%s' (seconds)\n", optarg);
			return 2;
		}
	}
	return each_file(ctx, argc, argv, &timeout, resync_one);
}

static int verify_one(loom_fs *fs, const char *path, const char *arg, void *opt)
{
	struct loom_mirror_diff d;
	int rc = loom_mirror_verify(fs, path, &d);

	if (rc == -EINVAL) {
		fprintf(stderr, "loom mirror verify: '%s': not a mirrored file\n", arg);
		return 1;
	}
	if (rc) {
		tool_fail("mirror verify", arg, rc);
		return 1;
	}
	if (d.differ) {
		printf("%s: mirror %u and mirror %u differ at offset %llu\n", arg, d.mirror_a, d.mirror_b,
		       (unsigned long long)d.offset);
		return 1;
	}
	if (*(bool *)opt)
		printf("%s: in-sync mirrors agree (%llu bytes of each compared)\n", arg,
		       (unsigned long long)d.compared);
	return 0;
}

static int mirror_verify(struct tool_ctx *ctx, int argc, char **argv)
{
	bool verbose = false;
	int c;

	optind = 1;
	while ((c = getopt(argc, argv, "v")) != -1) {
		if (c != 'v') {
			fprintf(stderr, MIRROR_USAGE);
			return 2;
		}
		verbose = true;
	}
	return each_file(ctx, argc, argv, &verbose, verify_one);
}

int cmd_mirror(struct tool_ctx *ctx, int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, MIRROR_USAGE);
		return 2;
	}
	if (!strcmp(argv[1], "create")) {
		/* setstripe's own parsing: a new file with the copies -N says. */
		bool copies = false;

		for (int i = 2; i < argc; i++)
			copies |= !strncmp(argv[i], "-N", 2) || !strncmp(argv[i], "--mirror-count", 14);
		if (!copies) {
			fprintf(stderr, "loom mirror create: -N COPIES is needed\n" MIRROR_USAGE);
			return 2;
		}
		return cmd_setstripe(ctx, argc - 1, argv + 1);
	}
	if (!strcmp(argv[1], "resync"))
		return mirror_resync(ctx, argc - 1, argv + 1);
	if (!strcmp(argv[1], "verify"))
		return mirror_verify(ctx, argc - 1, argv + 1);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		printf(MIRROR_USAGE);
		return 0;
	}
	fprintf(stderr, "loom mirror: unknown command '%s'\n" MIRROR_USAGE, argv[1]);
	return 2;
}
