/*
 * loom migrate: re-stripes files online, as `lfs migrate`. Each file is copied whole into a
 * copy that has the new layout and no name (loom_open_copy: open-unlinked from birth, as Lustre's
 * volatile files), then the MDS swaps the two files' objects in one transaction
 * (MDS_SWAP_LAYOUTS), provided the file did not change meanwhile (else the copy is made again)
 * and nobody has it open for writing (-EBUSY: it is left as it was). Readers that have the file
 * open keep reading its old objects, which the MDS keeps until they close; opens after the swap
 * read the new ones. The file keeps its inode, name, attributes and Data-on-MDT size.
 *
 * The copy lives as long as this process's handle of it: if loom migrate is killed, the MDS
 * releases it (and its objects) when it ends the process's session. Its objects are tagged as the
 * file's from their first write, so after the swap loom fsck finds them where their tags say.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "tools/tool.h"

#define COPY_CHUNK (8u << 20)
#define TRIES 3 /* copies of a file that keeps changing, before giving up on it */

struct migrator {
	loom_fs *fs;
	bool recursive, progress;
	char *buf;
	int errors;
	/* Fields not given: 0 / -1 / "" (the directory's default). Last: struct loom_layout ends
	 * in a flexible array (its objects, none here). */
	struct loom_layout want;
};

static void show_progress(const char *path, uint64_t done, uint64_t total)
{
	unsigned pct = total ? (unsigned)(done * 100 / total) : 100;
	char bar[21];

	memset(bar, '#', pct / 5);
	memset(bar + pct / 5, ' ', 20 - pct / 5);
	bar[20] = '\0';
	printf("\r[%s] %3u%% %s", bar, pct, path);
	fflush(stdout);
}

/* The copy: path's bytes into out, whole (loom_swap_layouts_copy makes them durable). */
static int copy_into(struct migrator *mg, const char *path, loom_file *out, uint64_t size)
{
	loom_file *in = NULL;
	uint64_t off = 0;
	int rc = loom_open(mg->fs, path, O_RDONLY, 0, &in);

	while (rc == 0 && off < size) {
		ssize_t n = loom_pread(in, mg->buf, COPY_CHUNK, (off_t)off);

		if (n <= 0) {
			rc = n < 0 ? (int)n : -EAGAIN; /* shorter than it was: it changed */
			break;
		}
		for (ssize_t w = 0; rc == 0 && w < n;) {
			ssize_t k = loom_pwrite(out, mg->buf + w, (size_t)(n - w), (off_t)(off + (uint64_t)w));
			if (k < 0)
				rc = (int)k;
			else
				w += k;
		}
		off += (uint64_t)n;
		if (mg->progress)
			show_progress(path, off, size);
	}
	if (in)
		loom_close(in);
	return rc;
}

static int migrate_file(struct migrator *mg, const char *path, const struct stat *first)
{
	struct loom_layout *cur = NULL;
	struct stat st = *first;
	int rc = loom_getlayout(mg->fs, path, &cur);

	if (rc)
		return rc;
	mg->want.dom_size = cur->dom_size ? cur->dom_size : LOOM_DOM_NONE;
	free(cur);
	for (int attempt = 0; attempt < TRIES; attempt++) {
		loom_file *copy = NULL;

		if (attempt && (rc = loom_stat(mg->fs, path, &st)) != 0)
			break;
		rc = loom_open_copy(mg->fs, path, &mg->want, &copy);
		if (rc == 0)
			rc = copy_into(mg, path, copy, (uint64_t)st.st_size);
		/* Either closes the copy, which the MDS then releases: after a swap, with the old
		 * objects (once the file's readers from before it are done with them). */
		if (rc == 0)
			rc = loom_swap_layouts_copy(mg->fs, path, copy, &st);
		else if (copy)
			loom_close(copy);
		if (rc != -EAGAIN)
			break;
	}
	if (mg->progress)
		printf(rc ? "\n" : "\r[####################] 100%% %s\n", path);
	return rc;
}

static void migrate_path(struct migrator *mg, const char *path)
{
	struct stat st;
	int rc = loom_stat(mg->fs, path, &st);

	if (rc == 0 && S_ISDIR(st.st_mode)) {
		struct loom_dirent ent;
		loom_dir *d;

		if (!mg->recursive) {
			fprintf(stderr, "loom migrate: %s is a directory (-r migrates the files under it)\n", path);
			mg->errors++;
			return;
		}
		rc = loom_opendir(mg->fs, path, &d);
		if (rc == 0) {
			while ((rc = loom_readdir(d, &ent)) == 1) {
				char child[PATH_MAX];

				/* .loom-migrate.*: a named copy an older loom migrate left. */
				if (!strcmp(ent.name, ".") || !strcmp(ent.name, "..") ||
				    !strncmp(ent.name, ".loom-migrate.", 14))
					continue;
				snprintf(child, sizeof(child), "%s/%s", strcmp(path, "/") ? path : "", ent.name);
				migrate_path(mg, child);
			}
			loom_closedir(d);
		}
	} else if (rc == 0 && S_ISREG(st.st_mode)) {
		rc = migrate_file(mg, path, &st);
		if (rc == -EBUSY) {
			fprintf(stderr, "loom migrate: %s is open for writing: left as it was\n", path);
			mg->errors++;
			return;
		}
		if (rc == -EAGAIN) {
			fprintf(stderr, "loom migrate: %s kept changing while it was copied: left as it was\n", path);
			mg->errors++;
			return;
		}
	} else if (rc == 0) {
		return; /* symlinks, devices: nothing to stripe */
	}
	if (rc < 0) {
		fprintf(stderr, "loom migrate: %s: %s\n", path, strerror(-rc));
		mg->errors++;
	}
}

int cmd_migrate(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "stripe-count", required_argument, NULL, 'c' }, { "stripe-size", required_argument, NULL, 'S' },
		{ "stripe-index", required_argument, NULL, 'i' }, { "pool", required_argument, NULL, 'p' },
		{ "recursive", no_argument, NULL, 'r' },          { "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },               { NULL, 0, NULL, 0 },
	};
	struct migrator mg = { .want = { .pattern = LOOM_PATTERN_RAID0, .stripe_offset = -1 } };
	bool quiet = false;
	uint64_t size;
	char *end;
	long v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:S:i:p:rqh", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v == 0 || v < -1 || v > LOOM_MAX_STRIPES) {
				fprintf(stderr, "loom migrate: invalid stripe count '%s'\n", optarg);
				return 2;
			}
			mg.want.stripe_count = (int32_t)v;
			break;
		case 'S':
			if (size_parse(optarg, &size) || !size || size % LOOM_STRIPE_UNIT || size > LOOM_MAX_STRIPE_SIZE) {
				fprintf(stderr, "loom migrate: invalid stripe size '%s': a multiple of 64 KiB\n", optarg);
				return 2;
			}
			mg.want.stripe_size = (uint32_t)size;
			break;
		case 'i':
			v = strtol(optarg, &end, 10);
			if (*end || end == optarg || v < -1 || v > 65535) {
				fprintf(stderr, "loom migrate: invalid stripe index '%s'\n", optarg);
				return 2;
			}
			mg.want.stripe_offset = (int32_t)v;
			break;
		case 'p':
			if (strlen(optarg) > LOOM_POOL_NAME_MAX) {
				fprintf(stderr, "loom migrate: pool name '%s' too long\n", optarg);
				return 2;
			}
			snprintf(mg.want.pool, sizeof(mg.want.pool), "%s", optarg);
			break;
		case 'r': mg.recursive = true; break;
		case 'q': quiet = true; break;
		case 'h':
			printf("usage: loom migrate [-c COUNT] [-S SIZE] [-i IDX | -p POOL] [-r] [-q] FILE|DIR...\n"
			       "Re-stripes files online, as lfs migrate; options left out come from the directory's\n"
			       "default layout. Readers of a file keep reading it throughout. -r: every file\n"
			       "under a directory. A progress bar shows on a terminal unless -q.\n");
			return 0;
		default: return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: loom migrate [-c COUNT] [-S SIZE] [-i IDX | -p POOL] [-r] [-q] FILE|DIR...\n");
		return 2;
	}
	mg.progress = !quiet && isatty(STDOUT_FILENO);
	mg.buf = malloc(COPY_CHUNK);
	if (!mg.buf)
		return tool_fail("migrate", "buffer", -ENOMEM);
	for (int i = optind; i < argc; i++) {
		char buf[PATH_MAX];
		const char *p = tool_fs_path(ctx, argv[i], true, buf, sizeof(buf));

		if (!mg.fs && !(mg.fs = tool_connect(ctx))) {
			free(mg.buf);
			return 1;
		}
		migrate_path(&mg, p);
	}
	if (mg.fs)
		loom_disconnect(mg.fs);
	free(mg.buf);
	return mg.errors ? 1 : 0;
}
