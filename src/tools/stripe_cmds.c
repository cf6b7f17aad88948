/* loom setstripe / loom getstripe, in the syntax and output format of Lustre's lfs. */
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sys/xattr.h>
#include <unistd.h>

#include "common/util.h"
#include "loom/loom_ll.h"
#include "tools/tool.h"

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || *end || end == s || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* Through a mount, layouts travel in the virtual xattr loom.lov, as Lustre's lustre.lov. */
#define LOV_XATTR "loom.lov"
#define LOV_MAX   (64u << 10)

static int set_via_mount(const char *path, const struct loom_layout *l)
{
	char buf[256];
	size_t len;
	int rc = loom_layout_to_xattr(l, buf, sizeof(buf), &len);

	if (rc)
		return rc;
	if (access(path, F_OK) != 0) {
		/* `lfs setstripe FILE` on a new name creates the file with that layout. */
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return setxattr(path, LOV_XATTR, buf, len, 0) < 0 ? -errno : 0;
}

static int del_via_mount(const char *path)
{
	return removexattr(path, LOV_XATTR) < 0 ? -errno : 0;
}

int cmd_setstripe(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stripe-count", required_argument, NULL, 'c' }, { "stripe-size", required_argument, NULL, 'S' },
		{ "stripe-index", required_argument, NULL, 'i' }, { "pool", required_argument, NULL, 'p' },
		{ "delete", no_argument, NULL, 'd' },             { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct loom_layout l = { .pattern = LOOM_PATTERN_RAID0, .stripe_offset = -1 };
	bool del = false, any = false;
	loom_fs *fs;
	long v;
	uint64_t size;
	int c, rc, ret = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:S:i:p:dh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (parse_int(optarg, -1, LOOM_MAX_STRIPES, &v)) {
				fprintf(stderr, "loom setstripe: invalid stripe count '%s' (-1 for every OST, up to %d)\n",
					optarg, LOOM_MAX_STRIPES);
				return 2;
			}
			l.stripe_count = (int32_t)v;
			any = true;
			break;
		case 'S':
			if (size_parse(optarg, &size) || size % LOOM_STRIPE_UNIT || size > LOOM_MAX_STRIPE_SIZE) {
				fprintf(stderr, "loom setstripe: invalid stripe size '%s': must be a multiple of 64 KiB, "
						"at most 4 GiB - 64 KiB (suffixes k, M, G)\n", optarg);
				return 2;
			}
			l.stripe_size = (uint32_t)size;
			any = true;
			break;
		case 'i':
			if (parse_int(optarg, -1, 65535, &v)) {
				fprintf(stderr, "loom setstripe: invalid stripe index '%s'\n", optarg);
				return 2;
			}
			l.stripe_offset = (int32_t)v;
			any = true;
			break;
		case 'p':
			if (strlen(optarg) > LOOM_POOL_NAME_MAX) {
				fprintf(stderr, "loom setstripe: pool name '%s' longer than %d characters\n", optarg,
					LOOM_POOL_NAME_MAX);
				return 2;
			}
			snprintf(l.pool, sizeof(l.pool), "%s", optarg);
			any = true;
			break;
		case 'd': del = true; break;
		case 'h':
			printf("usage: loom setstripe [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] PATH...\n"
			       "       loom setstripe -d DIR...\n"
			       "On a directory: the default layout of files created in it. On a new path: creates\n"
			       "an empty file with that layout. -c -1 stripes over every OST; -i -1 lets the MDS\n"
			       "choose; SIZE takes k, M, G suffixes and is a multiple of 64 KiB (default 4M).\n");
			return 0;
		default: return 2;
		}
	}
	if (optind >= argc || (del && any)) {
		fprintf(stderr, "usage: loom setstripe [-c COUNT] [-S SIZE] [-i IDX] [-p POOL] PATH... | -d DIR...\n");
		return 2;
	}
	fs = NULL;
	for (int i = optind; i < argc; i++) {
		struct tool_mount mnt;

		if (tool_mount_of(argv[i], &mnt) == 0) {
			rc = del ? del_via_mount(argv[i]) : set_via_mount(argv[i], &l);
		} else {
			if (!fs && !(fs = tool_connect(ctx)))
				return 1;
			rc = del ? loom_dellayout(fs, argv[i]) : loom_setlayout(fs, argv[i], &l);
		}
		if (rc == -EEXIST) {
			fprintf(stderr, "loom setstripe: '%s': stripe already set (the file holds data)\n", argv[i]);
			ret = 1;
		} else if (rc) {
			ret = tool_fail("setstripe", argv[i], rc);
		}
	}
	if (fs)
		loom_disconnect(fs);
	return ret;
}

enum gs_field { GS_ALL, GS_COUNT, GS_SIZE, GS_INDEX, GS_POOL };

static void print_dir_default(const struct loom_layout *l)
{
	printf("stripe_count:  %d stripe_size:   %u pattern:       raid0 stripe_offset: %d",
	       l->stripe_count ? l->stripe_count : 1, l->stripe_size ? l->stripe_size : LOOM_DEFAULT_STRIPE_SIZE,
	       l->stripe_offset);
	if (l->pool[0])
		printf(" pool:          %s", l->pool);
	printf("\n");
}

static void print_file_layout(const struct loom_layout *l)
{
	printf("lmm_stripe_count:  %d\n", l->stripe_count);
	printf("lmm_stripe_size:   %u\n", l->stripe_size);
	printf("lmm_pattern:       raid0\n");
	printf("lmm_layout_gen:    %u\n", l->layout_gen);
	printf("lmm_stripe_offset: %d\n", l->nobjs ? (int)l->objs[0].ost_idx : l->stripe_offset);
	if (l->pool[0])
		printf("lmm_pool:          %s\n", l->pool);
	printf("\tobdidx\t\t objid\t\t objid\t\t group\n");
	for (uint32_t i = 0; i < l->nobjs; i++)
		printf("\t%6u\t%14llu\t%#13llx\t%14llu\n", l->objs[i].ost_idx,
		       (unsigned long long)l->objs[i].objid, (unsigned long long)l->objs[i].objid, 0ull);
}

static int print_one_field(const struct loom_layout *l, enum gs_field field)
{
	bool dir = l->flags & LOOM_LAYOUT_DEFAULT;

	switch (field) {
	case GS_COUNT: printf("%d\n", l->stripe_count ? l->stripe_count : 1); break;
	case GS_SIZE: printf("%u\n", l->stripe_size ? l->stripe_size : LOOM_DEFAULT_STRIPE_SIZE); break;
	case GS_INDEX: printf("%d\n", !dir && l->nobjs ? (int)l->objs[0].ost_idx : l->stripe_offset); break;
	case GS_POOL: printf("%s\n", l->pool); break;
	case GS_ALL: break;
	}
	return 0;
}

/* Where getstripe looks: through libloom, or (fs NULL) through a mount's loom.lov xattr. */
struct gs_src {
	struct tool_ctx *ctx;
	loom_fs *fs;
};

static int gs_layout(struct gs_src *src, const char *path, bool mounted, struct loom_layout **out)
{
	char *buf;
	ssize_t n;
	int rc;

	if (!mounted) {
		if (!src->fs && !(src->fs = tool_connect(src->ctx)))
			return -ENOTCONN;
		return loom_getlayout(src->fs, path, out);
	}
	buf = malloc(LOV_MAX);
	if (!buf)
		return -ENOMEM;
	n = getxattr(path, LOV_XATTR, buf, LOV_MAX);
	rc = n < 0 ? -errno : loom_layout_from_xattr(buf, (size_t)n, out);
	free(buf);
	return rc;
}

static int show(struct gs_src *src, const char *path, bool mounted, enum gs_field field, bool *first)
{
	struct loom_layout *l = NULL;
	int rc = gs_layout(src, path, mounted, &l);

	if (rc == -ENODATA) {
		if (field == GS_ALL) {
			printf("%s%s has no stripe info\n", *first ? "" : "\n", path);
			*first = false;
		}
		return 0;
	}
	if (rc)
		return rc;
	if (field != GS_ALL) {
		print_one_field(l, field);
	} else {
		printf("%s%s\n", *first ? "" : "\n", path);
		*first = false;
		if (l->flags & LOOM_LAYOUT_DEFAULT)
			print_dir_default(l);
		else
			print_file_layout(l);
	}
	loom_layout_free(l);
	return 0;
}

/* The regular files of a directory, each shown after it (as lfs getstripe DIR). */
static int show_entries(struct gs_src *src, const char *dir, bool mounted, enum gs_field field,
			bool *first)
{
	char child[4096];
	int rc = 0;

	if (mounted) {
		DIR *d = opendir(dir);
		struct dirent *e;

		if (!d)
			return -errno;
		while ((e = readdir(d)) != NULL && rc == 0) {
			if (e->d_type != DT_REG)
				continue;
			snprintf(child, sizeof(child), "%s/%s", dir, e->d_name);
			rc = show(src, child, true, field, first);
		}
		closedir(d);
		return rc;
	}
	{
		struct loom_dirent ent;
		loom_dir *d;

		rc = loom_opendir(src->fs, dir, &d);
		if (rc)
			return rc;
		while ((rc = loom_readdir(d, &ent)) == 1) {
			if (ent.type != DT_REG)
				continue;
			snprintf(child, sizeof(child), "%s/%s", dir, ent.name);
			rc = show(src, child, false, field, first);
			if (rc)
				break;
		}
		loom_closedir(d);
	}
	return rc;
}

int cmd_getstripe(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stripe-count", no_argument, NULL, 'c' }, { "stripe-size", no_argument, NULL, 'S' },
		{ "stripe-index", no_argument, NULL, 'i' }, { "pool", no_argument, NULL, 'p' },
		{ "directory", no_argument, NULL, 'd' },    { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum gs_field field = GS_ALL;
	bool dir_only = false, first = true;
	struct gs_src src = { .ctx = ctx };
	int c, ret = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "cSipdh", opts, NULL)) != -1) {
		switch (c) {
		case 'c': field = GS_COUNT; break;
		case 'S': field = GS_SIZE; break;
		case 'i': field = GS_INDEX; break;
		case 'p': field = GS_POOL; break;
		case 'd': dir_only = true; break;
		case 'h':
			printf("usage: loom getstripe [-c|-S|-i|-p] [-d] PATH...\n"
			       "Prints layouts as `lfs getstripe` does; a directory shows its default layout,\n"
			       "then (without -d) the layouts of the files in it.\n");
			return 0;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: loom getstripe [-c|-S|-i|-p] [-d] PATH...\n");
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct tool_mount mnt;
		bool mounted = tool_mount_of(argv[i], &mnt) == 0;
		struct stat st;
		int rc;

		if (mounted) {
			rc = stat(argv[i], &st) < 0 ? -errno : 0;
		} else {
			if (!src.fs && !(src.fs = tool_connect(ctx)))
				return 1;
			rc = loom_stat(src.fs, argv[i], &st);
		}
		if (rc == 0)
			rc = show(&src, argv[i], mounted, field, &first);
		if (rc == 0 && S_ISDIR(st.st_mode) && !dir_only && field == GS_ALL)
			rc = show_entries(&src, argv[i], mounted, field, &first);
		if (rc == -ENOTCONN)
			return 1;
		if (rc < 0)
			ret = tool_fail("getstripe", argv[i], rc);
	}
	if (src.fs)
		loom_disconnect(src.fs);
	return ret;
}
