/*
 * loom get_param, set_param, stats, jobstats: the servers' parameters and statistics, as
 * `lctl get_param` / `lctl set_param` show and set them (libloom's loom_get_param, which asks the
 * MDS and every OST's server).
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

/* Prints text as lctl would: names with values, values only (-n), or names only (-N). */
static void print_params(const char *text, size_t len, bool values_only, bool names_only)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		const char *eq = memchr(p, '=', n);
		/* A parameter's first line: "NAME=" and its value, if one line. */
		bool head = eq && eq > p && (*p == 'm' || *p == 'o') && !memchr(p, ' ', (size_t)(eq - p));

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
		   "                      filesfree,target_obd}\n"
		   "  ost.FSNAME-OSTxxxx.{stats,job_stats,job_cleanup_interval,uuid,kbytestotal,\n"
		   "                      kbytesfree,kbytesavail,filestotal,filesfree}\n"
		   "Settable: *.stats=clear, *.job_stats=clear (or =JOBID), *.job_cleanup_interval=SEC.\n"
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
	fs = tool_connect_untagged(ctx);
	if (!fs)
		return 1;
	for (int i = optind; i < argc; i++) {
		char *text;
		size_t len;
		int err = loom_get_param(fs, argv[i], &text, &len);

		if (err) {
			/* As lctl: "error: get_param: param_path 'X': No such file or directory". */
			fprintf(stderr, "loom get_param: %s: %s\n", argv[i],
				err == -ENOENT ? "no such parameter" : strerror(-err));
			rc = 1;
			continue;
		}
		print_params(text, len, values_only, names_only);
		free(text);
	}
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
	fs = tool_connect_untagged(ctx);
	if (!fs)
		return 1;
	for (int i = 1; i < argc; i++) {
		char *name = argv[i], *value = strchr(argv[i], '=');
		uint32_t matched = 0;
		int err;

		*value++ = '\0';
		err = loom_set_param(fs, name, value, &matched);
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
			   "Requests each server answered, per operation (samples, min, max and sum of\n"
			   "their time in microseconds), and the data bytes of each target.\n");
}

/* loom jobstats, loom stats. */
int cmd_stats(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mdt", no_argument, NULL, 'm' }, { "ost", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	bool jobs = !strcmp(argv[0], "jobstats");
	const char *which = "*", *job = NULL, *param = jobs ? "job_stats" : "stats";
	char pattern[128];
	loom_fs *fs;
	int c, err;

	optind = 1;
	while ((c = getopt_long(argc, argv, jobs ? "j:h" : "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': which = "mdt"; break;
		case 'o': which = "ost"; break;
		case 'j': job = optarg; break;
		case 'h': stats_usage(stdout, argv[0]); return 0;
		default: stats_usage(stderr, argv[0]); return 2;
		}
	}
	if (optind < argc && (optind + 1 != argc || strcmp(argv[optind], "clear"))) {
		stats_usage(stderr, argv[0]);
		return 2;
	}
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
