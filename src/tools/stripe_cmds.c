/* loom setstripe / loom getstripe, in the syntax and output format of Lustre's lfs. */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"
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
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	for (int i = optind; i < argc; i++) {
		rc = del ? loom_dellayout(fs, argv[i]) : loom_setlayout(fs, argv[i], &l);
		if (rc == -EEXIST) {
			fprintf(stderr, "loom setstripe: '%s': stripe already set (the file holds data)\n", argv[i]);
			ret = 1;
		} else if (rc) {
			ret = tool_fail("setstripe", argv[i], rc);
		}
	}
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

static int show(loom_fs *fs, const char *path, enum gs_field field, bool *first)
{
	struct loom_layout *l = NULL;
	int rc = loom_getlayout(fs, path, &l);

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
	loom_fs *fs;
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
	fs = tool_connect(ctx);
	if (!fs)
		return 1;
	for (int i = optind; i < argc; i++) {
		struct stat st;
		int rc = loom_stat(fs, argv[i], &st);

		if (rc == 0)
			rc = show(fs, argv[i], field, &first);
		if (rc == 0 && S_ISDIR(st.st_mode) && !dir_only && field == GS_ALL) {
			struct loom_dirent ent;
			loom_dir *d;

			rc = loom_opendir(fs, argv[i], &d);
			if (rc == 0) {
				while ((rc = loom_readdir(d, &ent)) == 1) {
					char child[4096];

					if (ent.type != DT_REG)
						continue;
					snprintf(child, sizeof(child), "%s/%s", argv[i], ent.name);
					rc = show(fs, child, field, &first);
					if (rc)
						break;
				}
				loom_closedir(d);
			}
		}
		if (rc < 0)
			ret = tool_fail("getstripe", argv[i], rc);
	}
	loom_disconnect(fs);
	return ret;
}
