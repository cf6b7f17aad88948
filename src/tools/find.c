/*
 * loom find: walks trees and prints the paths that match, as `lfs find` does, with find(1)'s
 * --type, --name, --size, --mtime and the layout filters --stripe-count, --stripe-size, --ost and
 * --pool. `!` before an option negates it. Used with `loom migrate` to drain an OST:
 *     loom find /mnt/loom --ost 3 --type f
 * Paths under a Loom mount are walked through the mount (layouts from its loom.lov xattr);
 * others are file system paths reached through libloom.
 */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tools/tool.h"

#define MAX_OSTS_ASKED 64

/* A number compared as find(1) does: +N greater, -N less, N equal. */
struct cmp {
	bool set, neg;
	int sign; /* +1, -1, 0 */
	uint64_t val;
};

struct filters {
	struct cmp size, mtime_days, count, ssize;
	bool type_set, type_neg;
	mode_t type;
	const char *name;
	bool name_neg;
	uint32_t osts[MAX_OSTS_ASKED];
	int nosts;
	bool ost_neg;
	const char *pool;
	bool pool_neg;
	int maxdepth; /* -1: none */
	time_t now;
};

struct walker {
	struct tool_ctx *ctx;
	loom_fs *fs;      /* for paths not under a mount */
	bool mounted;
	struct filters f;
	int errors;
};

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	uint64_t mult = 1;

	if (end == s || *s == '-')
		return -EINVAL;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mult = 1ull << 10; end++; break;
	case 'M': mult = 1ull << 20; end++; break;
	case 'G': mult = 1ull << 30; end++; break;
	case 'T': mult = 1ull << 40; end++; break;
	default: return -EINVAL;
	}
	if (*end || (mult > 1 && v > UINT64_MAX / mult))
		return -EINVAL;
	*out = v * mult;
	return 0;
}

static int parse_cmp(const char *arg, bool sizes, struct cmp *c)
{
	c->sign = 0;
	if (*arg == '+' || *arg == '-')
		c->sign = *arg++ == '+' ? 1 : -1;
	if (sizes)
		return parse_size(arg, &c->val);
	return parse_size(arg, &c->val) || strpbrk(arg, "kKMGT") ? -EINVAL : 0;
}

static bool cmp_match(const struct cmp *c, uint64_t v)
{
	bool m = c->sign > 0 ? v > c->val : c->sign < 0 ? v < c->val : v == c->val;

	return m != c->neg;
}

static int parse_osts(const char *arg, struct filters *f)
{
	char *copy = strdup(arg), *save = NULL, *tok;
	int rc = copy ? 0 : -ENOMEM;

	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		int base = 10;
		unsigned long v;

		if (!strncmp(tok, "OST", 3)) {
			tok += 3;
			base = 16;
		}
		v = strtoul(tok, &end, base);
		if (!*tok || *end || *tok == '-' || v > 0xFFFF || f->nosts == MAX_OSTS_ASKED)
			rc = -EINVAL;
		else
			f->osts[f->nosts++] = (uint32_t)v;
	}
	free(copy);
	return rc;
}

static int get_layout(struct walker *w, const char *path, struct loom_layout **out)
{
	return w->mounted ? tool_layout_of_mounted(path, false, out) : loom_getlayout(w->fs, path, out);
}

/* The layout filters: an entry without a layout (a symlink, a directory with no default of its
 * own) fails each of them, and so passes its negation. */
static bool has_layout_filters(const struct filters *f)
{
	return f->count.set || f->ssize.set || f->nosts || f->pool;
}

static uint64_t stripe_count_of(const struct loom_layout *l)
{
	/* A file's count is its objects; a directory's default says how many files get. */
	return l->nobjs ? l->nobjs : (uint64_t)(int64_t)l->stripe_count;
}

static bool layout_matches(const struct filters *f, const struct loom_layout *l)
{
	if (f->count.set && !(l ? cmp_match(&f->count, stripe_count_of(l)) : f->count.neg))
		return false;
	if (f->ssize.set && !(l ? cmp_match(&f->ssize, l->stripe_size) : f->ssize.neg))
		return false;
	if (f->nosts) {
		bool on = false;

		for (uint32_t i = 0; l && i < l->nobjs && !on; i++)
			for (int k = 0; k < f->nosts && !on; k++)
				on = l->objs[i].ost_idx == f->osts[k];
		if (on == f->ost_neg)
			return false;
	}
	if (f->pool && (l && !strcmp(l->pool, f->pool)) == f->pool_neg)
		return false;
	return true;
}

static bool matches(struct walker *w, const char *path, const char *base, const struct stat *st)
{
	const struct filters *f = &w->f;

	if (f->type_set && ((st->st_mode & S_IFMT) == f->type) == f->type_neg)
		return false;
	if (f->name && (fnmatch(f->name, base, 0) == 0) == f->name_neg)
		return false;
	if (f->size.set && !cmp_match(&f->size, (uint64_t)st->st_size))
		return false;
	if (f->mtime_days.set) {
		/* find(1): the age in whole days, rounded down. */
		time_t age = f->now > st->st_mtime ? f->now - st->st_mtime : 0;
		if (!cmp_match(&f->mtime_days, (uint64_t)(age / 86400)))
			return false;
	}
	if (has_layout_filters(f)) {
		struct loom_layout *l = NULL;
		int rc = S_ISREG(st->st_mode) || S_ISDIR(st->st_mode) ? get_layout(w, path, &l) : -ENODATA;
		bool m;

		if (rc && rc != -ENODATA) {
			fprintf(stderr, "loom find: %s: %s\n", path, strerror(-rc));
			w->errors++;
			return false;
		}
		m = layout_matches(f, l);
		loom_layout_free(l);
		return m;
	}
	return true;
}

static int entry_stat(struct walker *w, const char *path, struct stat *st)
{
	if (w->mounted)
		return lstat(path, st) < 0 ? -errno : 0;
	return loom_lstat(w->fs, path, st);
}

static void walk(struct walker *w, const char *path, int depth);

static void walk_children(struct walker *w, const char *path, int depth)
{
	char child[4096];

	if (w->mounted) {
		DIR *d = opendir(path);
		struct dirent *e;

		if (!d) {
			fprintf(stderr, "loom find: %s: %s\n", path, strerror(errno));
			w->errors++;
			return;
		}
		while ((e = readdir(d)) != NULL) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "", e->d_name);
			walk(w, child, depth + 1);
		}
		closedir(d);
		return;
	}
	{
		struct loom_dirent ent;
		loom_dir *d;
		int rc = loom_opendir(w->fs, path, &d);

		if (rc) {
			fprintf(stderr, "loom find: %s: %s\n", path, strerror(-rc));
			w->errors++;
			return;
		}
		while ((rc = loom_readdir(d, &ent)) == 1) {
			if (!strcmp(ent.name, ".") || !strcmp(ent.name, ".."))
				continue;
			snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "", ent.name);
			walk(w, child, depth + 1);
		}
		if (rc < 0) {
			fprintf(stderr, "loom find: %s: %s\n", path, strerror(-rc));
			w->errors++;
		}
		loom_closedir(d);
	}
}

static void walk(struct walker *w, const char *path, int depth)
{
	const char *base = strrchr(path, '/');
	struct stat st;
	int rc = entry_stat(w, path, &st);

	if (rc) {
		fprintf(stderr, "loom find: %s: %s\n", path, strerror(-rc));
		w->errors++;
		return;
	}
	base = base && base[1] ? base + 1 : path;
	if (matches(w, path, base, &st))
		printf("%s\n", path);
	if (S_ISDIR(st.st_mode) && (w->f.maxdepth < 0 || depth < w->f.maxdepth))
		walk_children(w, path, depth);
}

static void find_usage(FILE *out)
{
	fprintf(out,
		"usage: loom find PATH... [[!] OPTION ARG]...\n"
		"Prints the paths under each PATH that match every option, as `lfs find` does:\n"
		"  -t, --type f|d|l          regular file, directory, symlink\n"
		"  -n, --name GLOB           the last path component (fnmatch)\n"
		"  -s, --size [+-]N[kMGT]    size in bytes: more (+), less (-) or exactly N\n"
		"  -M, --mtime [+-]DAYS      last modified DAYS ago (whole days, as find -mtime)\n"
		"  -c, --stripe-count [+-]N  the layout's stripe count\n"
		"  -S, --stripe-size [+-]N[kM]  the layout's stripe size\n"
		"  -O, --ost IDX[,IDX...]    has an object on one of these OSTs (2 or OST0002)\n"
		"      --pool POOL           the layout names this pool\n"
		"      --maxdepth N          descend at most N levels\n"
		"`!` before an option negates it. Layout options match files and directories with a\n"
		"layout of their own.\n");
}

int cmd_find(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "type", required_argument, NULL, 't' },         { "name", required_argument, NULL, 'n' },
		{ "size", required_argument, NULL, 's' },         { "mtime", required_argument, NULL, 'M' },
		{ "stripe-count", required_argument, NULL, 'c' }, { "stripe-size", required_argument, NULL, 'S' },
		{ "ost", required_argument, NULL, 'O' },          { "obd", required_argument, NULL, 'O' },
		{ "pool", required_argument, NULL, 'P' },         { "maxdepth", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },               { NULL, 0, NULL, 0 },
	};
	struct walker w = { .ctx = ctx, .f = { .maxdepth = -1, .now = time(NULL) } };
	char *paths[256];
	int npaths = 0, c, ret;
	bool neg = false;

	/* Paths come first; `!` is an argument of its own before the option it negates. */
	for (optind = 1; optind < argc && argv[optind][0] != '-' && strcmp(argv[optind], "!"); optind++) {
		if (npaths == (int)(sizeof(paths) / sizeof(paths[0]))) {
			fprintf(stderr, "loom find: too many paths\n");
			return 2;
		}
		paths[npaths++] = argv[optind];
	}
	while (optind < argc) {
		if (!strcmp(argv[optind], "!")) {
			neg = true;
			optind++;
			continue;
		}
		c = getopt_long(argc, argv, "+t:n:s:M:c:S:O:h", opts, NULL);
		if (c == -1) {
			fprintf(stderr, "loom find: unexpected '%s' (paths come first)\n", argv[optind]);
			return 2;
		}
		switch (c) {
		case 't':
			if (strlen(optarg) != 1 || !strchr("fdl", optarg[0])) {
				fprintf(stderr, "loom find: --type takes f, d or l\n");
				return 2;
			}
			w.f.type_set = true;
			w.f.type_neg = neg;
			w.f.type = optarg[0] == 'f' ? S_IFREG : optarg[0] == 'd' ? S_IFDIR : S_IFLNK;
			break;
		case 'n': w.f.name = optarg; w.f.name_neg = neg; break;
		case 's': case 'M': case 'c': case 'S': {
			struct cmp *cm = c == 's' ? &w.f.size : c == 'M' ? &w.f.mtime_days : c == 'c' ? &w.f.count : &w.f.ssize;
			if (parse_cmp(optarg, c == 's' || c == 'S', cm)) {
				fprintf(stderr, "loom find: bad value '%s'\n", optarg);
				return 2;
			}
			cm->set = true;
			cm->neg = neg;
			break;
		}
		case 'O':
			if (parse_osts(optarg, &w.f)) {
				fprintf(stderr, "loom find: bad OST list '%s'\n", optarg);
				return 2;
			}
			w.f.ost_neg = neg;
			break;
		case 'P': w.f.pool = optarg; w.f.pool_neg = neg; break;
		case 'D': {
			char *end;
			long v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < 0 || v > 4096) {
				fprintf(stderr, "loom find: --maxdepth takes 0..4096\n");
				return 2;
			}
			w.f.maxdepth = (int)v;
			break;
		}
		case 'h': find_usage(stdout); return 0;
		default: find_usage(stderr); return 2;
		}
		neg = false;
	}
	if (neg || npaths == 0) {
		find_usage(stderr);
		return 2;
	}
	for (int i = 0; i < npaths; i++) {
		struct tool_mount mnt;

		w.mounted = tool_mount_of(paths[i], &mnt) == 0;
		if (!w.mounted && !w.fs && !(w.fs = tool_connect(ctx)))
			return 1;
		walk(&w, paths[i], 0);
	}
	if (w.fs)
		loom_disconnect(w.fs);
	ret = w.errors ? 1 : 0;
	return ret;
}
