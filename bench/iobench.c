/*
 * loom-iobench: one client writing or reading one file through libloom, timed.
 *   loom-iobench --fs ADDR write PATH SIZE [--bs BYTES] [--stripe-count N] [--stripe-size S] [--fsync]
 *   loom-iobench --fs ADDR read PATH [--bs BYTES]
 * Prints one line: "<write|read> <bytes> <seconds> <MiB/s>". The data is a fixed pseudo-random
 * pattern generated before the clock starts, so only Loom is measured.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/loom.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int parse_size(const char *s, unsigned long long *out)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* meta DIR [N]: N getattrs, creates (with close), read-only opens (with close) and unlinks in
 * DIR, one after another: the latency of each metadata round trip through libloom, without
 * FUSE. */
static int meta_bench(const char *addr, const char *dir, int n)
{
	const char *names[] = { "stat", "create+close", "open+close", "unlink" };
	char path[4096];
	struct stat st;
	loom_fs *fs;
	int rc = loom_connect(addr, NULL, &fs);

	if (rc) {
		fprintf(stderr, "connect %s: %s\n", addr, strerror(-rc));
		return 1;
	}
	loom_mkdir(fs, dir, 0755);
	for (int phase = 0; phase < 4; phase++) {
		double t0 = now();

		for (int i = 0; i < n; i++) {
			loom_file *f;

			snprintf(path, sizeof(path), "%s/f%d", dir, i);
			if (phase == 0)
				rc = loom_stat(fs, dir, &st);
			else if (phase == 1 && (rc = loom_create(fs, path, O_WRONLY | O_CREAT, 0644, NULL, &f)) == 0)
				rc = loom_close(f);
			else if (phase == 2 && (rc = loom_open(fs, path, O_RDONLY, 0, &f)) == 0)
				rc = loom_close(f);
			else if (phase == 3)
				rc = loom_unlink(fs, path);
			if (rc) {
				fprintf(stderr, "%s %s: %s\n", names[phase], path, strerror(-rc));
				return 1;
			}
		}
		printf("%-13s %7.1f us/op\n", names[phase], (now() - t0) / n * 1e6);
	}
	loom_disconnect(fs);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fs", required_argument, NULL, 'f' },           { "bs", required_argument, NULL, 'b' },
		{ "stripe-count", required_argument, NULL, 'c' }, { "stripe-size", required_argument, NULL, 'S' },
		{ "fsync", no_argument, NULL, 'y' },              { NULL, 0, NULL, 0 },
	};
	const char *addr = getenv("LOOM_FS");
	unsigned long long bs = 64ull << 20, size = 0, ss = 0;
	int count = 0, c, rc;
	bool do_fsync = false;
	struct loom_layout layout = { .pattern = LOOM_PATTERN_RAID0, .stripe_offset = -1 };
	loom_fs *fs;
	loom_file *f;
	char *buf;
	double t0, t1;
	unsigned long long done = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'f': addr = optarg; break;
		case 'b': if (parse_size(optarg, &bs) || !bs) return 2; break;
		case 'c': count = atoi(optarg); break;
		case 'S': if (parse_size(optarg, &ss)) return 2; break;
		case 'y': do_fsync = true; break;
		default: return 2;
		}
	}
	if (addr && optind + 2 <= argc && !strcmp(argv[optind], "meta"))
		return meta_bench(addr, argv[optind + 1], argc > optind + 2 ? atoi(argv[optind + 2]) : 1000);
	if (!addr || optind + 2 > argc || (strcmp(argv[optind], "write") == 0 && optind + 3 > argc)) {
		fprintf(stderr, "usage: loom-iobench --fs ADDR write PATH SIZE | read PATH [--bs B] [--stripe-count N] [--stripe-size S] [--fsync]\n");
		return 2;
	}
	rc = loom_connect(addr, NULL, &fs);
	if (rc) {
		fprintf(stderr, "connect %s: %s\n", addr, strerror(-rc));
		return 1;
	}
	buf = aligned_alloc(4096, bs);
	for (unsigned long long i = 0; i < bs; i += 8) {
		unsigned long long v = i * 0x9E3779B97F4A7C15ull;
		memcpy(buf + i, &v, bs - i < 8 ? bs - i : 8);
	}
	if (!strcmp(argv[optind], "write")) {
		if (parse_size(argv[optind + 2], &size))
			return 2;
		layout.stripe_count = count;
		layout.stripe_size = (uint32_t)ss;
		loom_unlink(fs, argv[optind + 1]);
		rc = loom_create(fs, argv[optind + 1], O_WRONLY | O_CREAT | O_TRUNC, 0644, &layout, &f);
		if (rc) {
			fprintf(stderr, "create: %s\n", strerror(-rc));
			return 1;
		}
		t0 = now();
		while (done < size) {
			size_t n = size - done < bs ? size - done : bs;
			ssize_t w = loom_pwrite(f, buf, n, (off_t)done);
			if (w < 0) {
				fprintf(stderr, "write: %s\n", strerror((int)-w));
				return 1;
			}
			done += (unsigned long long)w;
		}
		if (do_fsync && (rc = loom_fsync(f))) {
			fprintf(stderr, "fsync: %s\n", strerror(-rc));
			return 1;
		}
		rc = loom_close(f);
		t1 = now();
		if (rc) {
			fprintf(stderr, "close: %s\n", strerror(-rc));
			return 1;
		}
		printf("write %llu %.3f %.1f\n", done, t1 - t0, (double)done / (1 << 20) / (t1 - t0));
	} else {
		rc = loom_open(fs, argv[optind + 1], O_RDONLY, 0, &f);
		if (rc) {
			fprintf(stderr, "open: %s\n", strerror(-rc));
			return 1;
		}
		t0 = now();
		for (;;) {
			ssize_t n = loom_pread(f, buf, bs, (off_t)done);
			if (n < 0) {
				fprintf(stderr, "read: %s\n", strerror((int)-n));
				return 1;
			}
			if (n == 0)
				break;
			done += (unsigned long long)n;
		}
		t1 = now();
		loom_close(f);
		printf("read %llu %.3f %.1f\n", done, t1 - t0, (double)done / (1 << 20) / (t1 - t0));
	}
	free(buf);
	loom_disconnect(fs);
	return 0;
}
