/*
 * loom mirror: mirrored files, as `lfs mirror`. `create` makes a new file with copies (as
 * `loom setstripe -N` on a new path); `resync` has the MDS copy stale copies again and waits for
 * it; `verify` reads every in-sync copy and compares them; `extend` adds copies (the MDS fills
 * them); `split -d` removes one.
 *
 * loom ec: erasure-coded files. `rebuild` has the MDS make stale objects again (a lost OST's, a
 * stale parity) and waits, as `mirror resync` does; `verify` checks the objects against the code.
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
	"       loom mirror verify [-v] FILE...\n" \
	"       loom mirror extend [-N COUNT] FILE...\n" \
	"       loom mirror split -d --mirror-id ID FILE...\n"

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
		fprintf(stderr, "loom mirror resync: '%s': not a mirrored or erasure-coded file\n", arg);
	else if (rc == -ETIMEDOUT)
		fprintf(stderr, "loom mirror resync: '%s': objects still stale after %lu s (is an OST of "
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
		fprintf(stderr, "loom mirror verify: '%s': not a mirrored or erasure-coded file\n", arg);
		return 1;
	}
	if (rc) {
		tool_fail("mirror verify", arg, rc);
		return 1;
	}
	if (d.differ && d.mirror_a == 0) {
		printf("%s: object %u does not agree with the others' code at offset %llu\n", arg,
		       d.mirror_b - 1, (unsigned long long)d.offset);
		return 1;
	}
	if (d.differ) {
		printf("%s: mirror %u and mirror %u differ at offset %llu\n", arg, d.mirror_a, d.mirror_b,
		       (unsigned long long)d.offset);
		return 1;
	}
	if (*(bool *)opt) {
		struct loom_layout *l = NULL;
		bool ec = loom_getlayout(fs, path, &l) == 0 && l->ec_parity;

		loom_layout_free(l);
		if (ec)
			printf("%s: every object agrees with the code (%llu bytes of each checked)\n", arg,
			       (unsigned long long)d.compared);
		else
			printf("%s: in-sync mirrors agree (%llu bytes of each compared)\n", arg,
			       (unsigned long long)d.compared);
	}
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

static int extend_one(loom_fs *fs, const char *path, const char *arg, void *opt)
{
	long n = *(long *)opt;

	for (long i = 0; i < n; i++) {
		int rc = loom_mirror_extend(fs, path);

		if (rc == -EINVAL) {
			fprintf(stderr, "loom mirror extend: '%s': not a mirrored file, 16 copies already, or "
					"no OST left that holds none of it\n", arg);
			return 1;
		}
		if (rc) {
			tool_fail("mirror extend", arg, rc);
			return 1;
		}
	}
	return 0;
}

static int mirror_extend(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mirror-count", required_argument, NULL, 'N' }, { NULL, 0, NULL, 0 },
	};
	long n = 1;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "N:", opts, NULL)) != -1) {
		char *end;

		n = c == 'N' ? strtol(optarg, &end, 10) : -1;
		if (c != 'N' || *end || end == optarg || n < 1 || n > LOOM_MAX_MIRRORS) {
			fprintf(stderr, c == 'N' ? "loom mirror extend: invalid count '%s' (1 to 15 more copies)\n"
						 : MIRROR_USAGE, optarg);
			return 2;
		}
	}
	return each_file(ctx, argc, argv, &n, extend_one);
}

static int split_one(loom_fs *fs, const char *path, const char *arg, void *opt)
{
	uint32_t id = *(uint32_t *)opt;
	int rc = loom_mirror_split(fs, path, id);

	if (rc == -ENOENT)
		fprintf(stderr, "loom mirror split: '%s': no mirror %u\n", arg, id);
	else if (rc == -EBUSY)
		fprintf(stderr, "loom mirror split: '%s': open somewhere (its readers would read the copy "
				"that goes); try again once it is closed\n", arg);
	else if (rc == -EINVAL)
		fprintf(stderr, "loom mirror split: '%s': not a mirrored file, or mirror %u holds the only "
				"in-sync copy of a stripe (`loom mirror resync` first)\n", arg, id);
	else if (rc)
		tool_fail("mirror split", arg, rc);
	return rc ? 1 : 0;
}

static int mirror_split(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mirror-id", required_argument, NULL, 'm' }, { "destroy", no_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	bool destroy = false;
	long id = 0;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "dm:", opts, NULL)) != -1) {
		char *end;

		if (c == 'd') {
			destroy = true;
			continue;
		}
		id = c == 'm' ? strtol(optarg, &end, 10) : -1;
		if (c != 'm' || *end || end == optarg || id < 1 || id > LOOM_MAX_MIRRORS) {
			fprintf(stderr, c == 'm' ? "loom mirror split: invalid mirror id '%s'\n" : MIRROR_USAGE,
				optarg);
			return 2;
		}
	}
	if (!id || !destroy) {
		fprintf(stderr, "loom mirror split: needs --mirror-id ID and -d (Loom destroys the copy it "
				"splits off; lfs's -f NEWFILE is not supported)\n" MIRROR_USAGE);
		return 2;
	}
	{
		uint32_t mid = (uint32_t)id;

		return each_file(ctx, argc, argv, &mid, split_one);
	}
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
	if (!strcmp(argv[1], "extend"))
		return mirror_extend(ctx, argc - 1, argv + 1);
	if (!strcmp(argv[1], "split"))
		return mirror_split(ctx, argc - 1, argv + 1);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		printf(MIRROR_USAGE);
		return 0;
	}
	fprintf(stderr, "loom mirror: unknown command '%s'\n" MIRROR_USAGE, argv[1]);
	return 2;
}

#define EC_USAGE \
	"usage: loom ec rebuild [--timeout SEC] FILE...\n" \
	"       loom ec verify [-v] FILE...\n"

int cmd_ec(struct tool_ctx *ctx, int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "rebuild"))
		return mirror_resync(ctx, argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "verify"))
		return mirror_verify(ctx, argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf(EC_USAGE);
		return 0;
	}
	fprintf(stderr, EC_USAGE);
	return 2;
}
