/*
 * loom get_param, set_param, stats, jobstats: the servers' parameters and statistics, as
 * `lctl get_param` / `lctl set_param` show and set them (libloom's loom_get_param, which asks the
 * MDS and every OST's server), and the local mounts' own (llite.FSNAME-XXXX.*, asked of each
 * loom-mount of this node by ioctl: no key needed).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/mount_ioctl.h"
#include "common/mountinfo.h"
#include "tools/tool.h"

/* Asks the loom-mount on mountpoint for its parameters matching pattern (value NULL: their
 * text, appended to *text, *len; else sets value on them). *matched: how many matched. */
static int mount_param(const char *mountpoint, const char *pattern, const char *value, char **text,
		       size_t *len, uint32_t *matched)
{
	struct loom_ioc_mstats *io = calloc(1, sizeof(*io));
	int fd, rc = 0;

	*matched = 0;
	if (!io)
		return -ENOMEM;
	if (strlen(pattern) >= sizeof(io->pattern) || (value && strlen(value) >= sizeof(io->value))) {
		free(io);
		return -EINVAL;
	}
	snprintf(io->pattern, sizeof(io->pattern), "%s", pattern);
	if (value) {
		snprintf(io->value, sizeof(io->value), "%s", value);
		io->flags = LOOM_MSTATS_SET;
	}
	fd = open(mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		rc = -errno;
	else if (ioctl(fd, LOOM_IOC_MSTATS, io) != 0)
		rc = errno == ENOSYS ? -ENOTTY : -errno; /* ENOTTY: a loom-mount that does not count */
	if (fd >= 0)
		close(fd);
	if (rc == 0 && !value && io->matched && io->len && io->len < sizeof(io->text)) {
		char *more = realloc(*text, *len + io->len + 1);

		if (!more) {
			rc = -ENOMEM;
		} else {
			memcpy(more + *len, io->text, io->len);
			*len += io->len;
			more[*len] = '\0';
			*text = more;
		}
	}
	if (rc == 0)
		*matched = io->matched;
	free(io);
	return rc;
}

/*
 * Every Loom mount of this node asked as mount_param does, in the order /proc/self/mounts lists
 * them. A mount that cannot be asked (an older loom-mount, one being unmounted) is left out,
 * with a line saying why when reading. *matched sums the others; returns the first error.
 */
static int mounts_param(const char *pattern, const char *value, char **text, size_t *len,
			uint32_t *matched)
{
	char src[512], mnt[PATH_MAX], type[64];
	FILE *f = fopen("/proc/self/mounts", "re");
	int first = 0;

	*matched = 0;
	if (!f)
		return -errno;
	while (fscanf(f, "%511s %4095s %63s %*[^\n]", src, mnt, type) == 3) {
		uint32_t n;
		int rc;

		if (strcmp(type, "fuse.loom"))
			continue;
		mountinfo_unescape(mnt);
		rc = mount_param(mnt, pattern, value, text, len, &n);
		if (rc && !value)
			fprintf(stderr, "loom get_param: the mount on %s: %s\n", mnt,
				rc == -ENOTTY ? "its loom-mount keeps no counters of its own (an older version)"
				: strerror(-rc));
		if (rc && !first)
			first = rc;
		if (rc == 0)
			*matched += n;
	}
	fclose(f);
	return first;
}

/* Whether pattern names only the mounts' parameters (no server has llite.*). */
static bool llite_only(const char *pattern)
{
	return strncmp(pattern, "llite.", 6) == 0;
}

/* Prints text as lctl would: names with values, values only (-n), or names only (-N). */
static void print_params(const char *text, size_t len, bool values_only, bool names_only)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		const char *eq = memchr(p, '=', n);
		/* A parameter's first line: "NAME=" and its value, if one line. */
		bool head = eq && eq > p && (*p == 'm' || *p == 'o' || *p == 'l') && !memchr(p, ' ', (size_t)(eq - p));

		if (head && names_only)
			printf("%.*s\n", (int)(eq - p), p);
		else if (head && values_only && (size_t)(eq - p) + 2 < n)
			fwrite(eq + 1, 1, n - (size_t)(eq - p) - 1, stdout);
		else if (!head && !names_only)
			fwrite(p, 1, n, stdout);
		else if (head && !values_only)
			fwrite(p, 1, n, stdout);
		p += n;
	}
}

static void params_usage(FILE *f, bool set)
{
	fprintf(f, set ? "usage: loom set_param NAME=VALUE...\n       loom get_param [-n|-N] PATTERN...\n"
		       : "usage: loom get_param [-n|-N] PATTERN...\n       loom set_param NAME=VALUE...\n");
	fprintf(f,
		   "Parameters of the file system's servers, as lctl names them (fnmatch patterns):\n"
		   "  mdt.FSNAME-MDT0000.{stats,job_stats,job_cleanup_interval,recovery_status,\n"
		   "                      num_exports,kbytestotal,kbytesfree,kbytesavail,filestotal,\n"
		   "                      filesfree,target_obd,commit_ms,resync_rate}\n"
		   "  ost.FSNAME-OSTxxxx.{stats,job_stats,job_cleanup_interval,uuid,kbytestotal,\n"
		   "                      kbytesfree,kbytesavail,filestotal,filesfree,scrub_rate}\n"
		   "and each Loom mount of this node's own, for patterns that begin with llite. (asked\n"
		   "of its loom-mount; no key needed):\n"
		   "  llite.FSNAME-XXXXXXXXXXXXXXXX.{stats,statahead_stats,read_ahead_stats,cache_stats,\n"
		   "                      write_behind_stats}   (XXXX: loom-mount's process id, hex)\n"
		   "Settable: *.stats=clear, *.job_stats=clear (or =JOBID), *.job_cleanup_interval=SEC,\n"
		   "  mdt.*.commit_ms=MS, mdt.*.resync_rate=MIB, ost.*.scrub_rate=MIB (MiB/s, 0: no limit).\n"
		   "  -n  values only    -N  names only\n");
}

int cmd_get_param(struct tool_ctx *ctx, int argc, char **argv)
{
	bool values_only = false, names_only = false;
	loom_fs *fs;
	int c, rc = 0;

	optind = 1;
	while ((c = getopt(argc, argv, "nNh")) != -1) {
		switch (c) {
		case 'n': values_only = true; break;
		case 'N': names_only = true; break;
		case 'h': params_usage(stdout, false); return 0;
		default: params_usage(stderr, false); return 2;
		}
	}
	if (optind == argc) {
		params_usage(stderr, false);
		return 2;
	}
	fs = NULL;
	for (int i = optind; i < argc; i++) {
		char *text = NULL, *local = NULL;
		size_t len = 0, local_len = 0;
		uint32_t local_matched = 0;
		int err = 0;

		/* The servers', unless the pattern can only be a mount's; then this node's mounts'. */
		if (!llite_only(argv[i]) && !fs && !(fs = tool_connect_untagged(ctx)))
			return 1;
		if (!llite_only(argv[i]))
			err = loom_get_param(fs, argv[i], &text, &len);
		/* Only when asked by name: a mount point is opened to ask its loom-mount, and that
		 * open waits for the MDS when it is away (another mount's, or a frozen one's). */
		if (llite_only(argv[i]))
			(void)mounts_param(argv[i], NULL, &local, &local_len, &local_matched);
		if (local_matched && (err == -ENOENT || llite_only(argv[i])))
			err = 0;
		else if (llite_only(argv[i]))
			err = -ENOENT;
		if (err) {
			/* As lctl: "error: get_param: param_path 'X': No such file or directory". */
			fprintf(stderr, "loom get_param: %s: %s\n", argv[i],
				err == -ENOENT ? "no such parameter" : strerror(-err));
			rc = 1;
		} else {
			if (text)
				print_params(text, len, values_only, names_only);
			if (local)
				print_params(local, local_len, values_only, names_only);
		}
		free(text);
		free(local);
	}
	if (fs)
		loom_disconnect(fs);
	return rc;
}

int cmd_set_param(struct tool_ctx *ctx, int argc, char **argv)
{
	loom_fs *fs;
	int rc = 0;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		params_usage(argc < 2 ? stderr : stdout, true);
		return argc < 2 ? 2 : 0;
	}
	for (int i = 1; i < argc; i++)
		if (!strchr(argv[i], '=') || argv[i][0] == '=') {
			fprintf(stderr, "loom set_param: '%s' is not NAME=VALUE\n", argv[i]);
			return 2;
		}
	fs = NULL;
	for (int i = 1; i < argc; i++) {
		char *name = argv[i], *value = strchr(argv[i], '=');
		uint32_t matched = 0, local_matched = 0;
		int err = -ENOENT, local_err;

		*value++ = '\0';
		if (!llite_only(name) && !fs && !(fs = tool_connect_untagged(ctx)))
			return 1;
		if (!llite_only(name))
			err = loom_set_param(fs, name, value, &matched);
		local_err = llite_only(name) ? mounts_param(name, value, NULL, NULL, &local_matched) : 0;
		if (err == -ENOENT)
			err = local_matched ? 0 : local_err ? local_err : err;
		if (err) {
			fprintf(stderr, "loom set_param: %s: %s\n", name,
				err == -ENOENT ? "no such parameter"
				: err == -EACCES ? "cannot be set" : err == -EINVAL ? "does not take that value"
				: strerror(-err));
			rc = 1;
			continue;
		}
		printf("%s=%s\n", name, value);
	}
	if (fs)
		loom_disconnect(fs);
	return rc;
}

/* Of job_stats text, only job's entries (the parameter and job_stats lines stay). */
static void print_job(const char *text, size_t len, const char *job)
{
	const char *p = text, *end = text + len;
	bool keep = true;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);

		if (!strncmp(p, "- job_id:", 9)) {
			const char *id = p + 9;

			while (id < p + n && *id == ' ')
				id++;
			keep = (size_t)(p + n - id) == strlen(job) + (nl ? 1 : 0) && !strncmp(id, job, strlen(job));
		} else if (p[0] != ' ') {
			keep = true;
		}
		if (keep)
			fwrite(p, 1, n, stdout);
		p += n;
	}
}

static void stats_usage(FILE *f, const char *verb)
{
	if (!strcmp(verb, "jobstats"))
		fprintf(f, "usage: loom jobstats [--mdt|--ost] [-j JOBID] [clear]\n"
			   "Per-job statistics of the MDT and every OST, in Lustre's job_stats form (jobs\n"
			   "idle for job_cleanup_interval, 600 s by default, are forgotten); clear forgets\n"
			   "them (only JOBID's with -j).\n");
	else
		fprintf(f, "usage: loom stats [--mdt|--ost] [clear]\n"
			   "       loom stats --mount PATH [clear]\n"
			   "Requests each server answered, per operation (samples, min, max and sum of\n"
			   "their time in microseconds), and the data bytes of each target.\n"
			   "--mount: the FUSE requests the Loom mount holding PATH answered, its read and\n"
			   "written bytes (Lustre's llite stats), then what its caches decided (statahead,\n"
			   "read-ahead, page cache, Data-on-MDT, writes sent behind); asked of its\n"
			   "loom-mount, no key needed. clear starts them again (root or whoever mounted).\n");
}

/* loom stats --mount PATH [clear]: the mount's own counters, every llite parameter of it. */
static int mount_stats(const char *path, bool clear)
{
	struct tool_mount mnt;
	char *text = NULL;
	size_t len = 0;
	uint32_t matched = 0;
	int rc;

	if (tool_mount_of(path, &mnt) != 0) {
		fprintf(stderr, "loom stats: %s is not on a Loom mount\n", path);
		return 1;
	}
	rc = clear ? mount_param(mnt.mountpoint, "llite.*.stats", "clear", NULL, NULL, &matched)
		   : mount_param(mnt.mountpoint, "llite.*", NULL, &text, &len, &matched);
	if (rc == 0 && !matched)
		rc = -ENOENT;
	if (rc) {
		fprintf(stderr, "loom stats: the mount on %s: %s\n", mnt.mountpoint,
			rc == -ENOTTY ? "its loom-mount keeps no counters of its own (an older version)"
			: rc == -EPERM ? "only root or the user who mounted it may clear its counters"
			: strerror(-rc));
		free(text);
		return 1;
	}
	if (text)
		fwrite(text, 1, len, stdout);
	free(text);
	return 0;
}

/* loom jobstats, loom stats. */
int cmd_stats(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mdt", no_argument, NULL, 'm' }, { "ost", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' }, { "mount", required_argument, NULL, 'M' },
		{ NULL, 0, NULL, 0 },
	};
	bool jobs = !strcmp(argv[0], "jobstats");
	const char *which = "*", *job = NULL, *param = jobs ? "job_stats" : "stats", *mount = NULL;
	char pattern[128];
	loom_fs *fs;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, jobs ? "j:h" : "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': which = "mdt"; break;
		case 'o': which = "ost"; break;
		case 'j': job = optarg; break;
		case 'M':
			if (jobs) {
				stats_usage(stderr, argv[0]);
				return 2;
			}
			mount = optarg;
			break;
		case 'h': stats_usage(stdout, argv[0]); return 0;
		default: stats_usage(stderr, argv[0]); return 2;
		}
	}
	if (optind < argc && (optind + 1 != argc || strcmp(argv[optind], "clear"))) {
		stats_usage(stderr, argv[0]);
		return 2;
	}
	if (mount)
		return mount_stats(mount, optind < argc);
	snprintf(pattern, sizeof(pattern), "%s.*.%s", which, param);
	fs = tool_connect_untagged(ctx);
	if (!fs)
		return 1;
	if (optind < argc) {
		uint32_t matched;

		err = loom_set_param(fs, pattern, job ? job : "clear", &matched);
		loom_disconnect(fs);
		return err ? tool_fail(argv[0], "clear", err) : 0;
	}
	{
		char *text;
		size_t len;

		err = loom_get_param(fs, pattern, &text, &len);
		loom_disconnect(fs);
		if (err)
			return tool_fail(argv[0], pattern, err);
		if (job)
			print_job(text, len, job);
		else
			fwrite(text, 1, len, stdout);
		free(text);
	}
	return 0;
}
