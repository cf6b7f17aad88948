/*
 * loom top: the file system live, one line a second, as iostat and `juicefs stats` show theirs:
 * requests per second over every server, data read and written (MiB/s), the jobs that moved the
 * most, and the busiest targets. From the servers' statistics (loom_get_param of "*.stats" and
 * "*.job_stats"), as differences between two readings.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/statsread.h"
#include "tools/tool.h"

#define TOP_MAX STATS_MAX_JOBS  /* what one line ranks: targets, or jobs (the busiest are shown) */

static volatile sig_atomic_t top_stop;

static void on_int(int sig)
{
	(void)sig;
	top_stop = 1;
}

struct top_rank {
	const char *name;
	unsigned long long bytes, ops;
};

static int rank_cmp(const void *a, const void *b)
{
	const struct top_rank *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->ops != y->ops)
		return x->ops < y->ops ? 1 : -1;
	return strcmp(x->name, y->name);
}

static void print_ranked(struct top_rank *r, int n, int show, double secs, int width)
{
	char buf[512];
	size_t at = 0;

	qsort(r, (size_t)n, sizeof(*r), rank_cmp);
	buf[0] = '\0';
	for (int i = 0, shown = 0; i < n && shown < show; i++) {
		if (!r[i].bytes && !r[i].ops)
			continue;
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s %.1f", shown ? ", " : "", r[i].name,
				       (double)r[i].bytes / secs / (1 << 20));
		if (at >= sizeof(buf))
			break;
		shown++;
	}
	printf("  %-*s", width, buf[0] ? buf : "-");
}

static void top_line(const struct stats_reading *a, const struct stats_reading *b, double secs, int show)
{
	static struct stats_job ja[STATS_MAX_JOBS], jb[STATS_MAX_JOBS]; /* one thread; too big for a stack */
	struct top_rank rank[TOP_MAX];
	unsigned long long ops = 0, rd = 0, wr = 0;
	char when[16];
	time_t now = time(NULL);
	int n = 0;

	for (int i = 0; i < b->nt; i++) {
		const struct stats_target *x = &b->t[i], *y = stats_target_find(a, x->name);

		rank[n].name = x->name;
		rank[n].ops = stats_delta(x->ops, y ? y->ops : 0);
		rank[n].bytes = stats_delta(x->rd, y ? y->rd : 0) + stats_delta(x->wr, y ? y->wr : 0);
		ops += rank[n].ops;
		rd += stats_delta(x->rd, y ? y->rd : 0);
		wr += stats_delta(x->wr, y ? y->wr : 0);
		n++;
	}
	strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
	printf("%s %9.0f %10.1f %11.1f", when, (double)ops / secs, (double)rd / secs / (1 << 20),
	       (double)wr / secs / (1 << 20));
	{
		struct top_rank jobs[TOP_MAX];
		int na = stats_job_totals(a, ja), nb = stats_job_totals(b, jb), nj = 0;

		for (int i = 0; i < nb; i++) {
			const struct stats_job *x = &jb[i], *y = NULL;

			for (int k = 0; k < na && !y; k++)
				if (!strcmp(ja[k].id, x->id))
					y = &ja[k];
			jobs[nj].name = x->id;
			jobs[nj].bytes = stats_delta(x->rd, y ? y->rd : 0) + stats_delta(x->wr, y ? y->wr : 0);
			jobs[nj].ops = stats_delta(x->ops, y ? y->ops : 0);
			nj++;
		}
		print_ranked(jobs, nj, show, secs, 40);
	}
	print_ranked(rank, n, show, secs, 0);
	printf("\n");
	fflush(stdout);
}

static void top_usage(FILE *f)
{
	fprintf(f, "usage: loom top [-i SECONDS] [-n COUNT] [-t TOP]\n"
		   "One line every SECONDS (1): requests per second over every server, data read and\n"
		   "written (MiB/s), the TOP (3) jobs and targets that moved the most (MiB/s). COUNT\n"
		   "lines, or until interrupted.\n");
}

int cmd_top(struct tool_ctx *ctx, int argc, char **argv)
{
	struct stats_reading *r = calloc(2, sizeof(*r));
	double interval = 1.0;
	long count = -1;
	int show = 3, c, rc = 0, cur = 0;
	loom_fs *fs;
	struct timespec t0, t1;

	optind = 1;
	while ((c = getopt(argc, argv, "i:n:t:h")) != -1) {
		switch (c) {
		case 'i': interval = atof(optarg); break;
		case 'n': count = atol(optarg); break;
		case 't': show = atoi(optarg); break;
		case 'h': top_usage(stdout); free(r); return 0;
		default: top_usage(stderr); free(r); return 2;
		}
	}
	if (!r || interval < 0.1 || interval > 3600 || show < 1 || show > 20 || count == 0 || optind != argc) {
		top_usage(stderr);
		free(r);
		return 2;
	}
	fs = tool_connect_untagged(ctx);
	if (!fs) {
		free(r);
		return 1;
	}
	signal(SIGINT, on_int);
	signal(SIGTERM, on_int);
	rc = stats_read(fs, &r[cur]);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long line = 0; rc == 0 && !top_stop && (count < 0 || line < count); line++) {
		struct timespec nap = { (time_t)interval, (long)((interval - (long)interval) * 1e9) };
		double secs;

		while (nanosleep(&nap, &nap) && !top_stop)
			;
		if (top_stop)
			break;
		rc = stats_read(fs, &r[!cur]);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rc)
			break;
		secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		if (line % 20 == 0)
			printf("%-8s %9s %10s %11s  %-40s  %s\n", "time", "ops/s", "read MiB/s", "write MiB/s",
			       "top jobs (MiB/s)", "busiest targets (MiB/s)");
		top_line(&r[cur], &r[!cur], secs > 0 ? secs : interval, show);
		cur = !cur;
		t0 = t1;
	}
	loom_disconnect(fs);
	free(r);
	if (rc)
		return tool_fail("top", "reading the servers' statistics", rc);
	return 0;
}
