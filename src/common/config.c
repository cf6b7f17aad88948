#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kept for the program's life (getopt's results point into it), freed at exit: the settings
 * made from the file are config_vec[1..config_made-1]. */
static char **config_vec;
static int config_made;

static void config_free(void)
{
	for (int i = 1; i < config_made; i++)
		free(config_vec[i]);
	free(config_vec);
	config_vec = NULL;
	config_made = 0;
}

static const struct option *option_named(const struct option *opts, const char *name)
{
	for (; opts->name; opts++)
		if (!strcmp(opts->name, name))
			return opts;
	return NULL;
}

static bool listed(const char *const *names, const char *name)
{
	for (; names && *names; names++)
		if (!strcmp(*names, name))
			return true;
	return false;
}

/* Whether argv[1..] gives option `name` (as --name, --name=V or --name V). */
static bool argv_gives(int argc, char **argv, const char *name)
{
	size_t n = strlen(name);

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, n) &&
		    (argv[i][2 + n] == '\0' || argv[i][2 + n] == '='))
			return true;
	}
	return false;
}

static const char *config_path(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--config"))
			return i + 1 < argc ? argv[i + 1] : NULL;
		if (!strncmp(argv[i], "--config=", 9))
			return argv[i] + 9;
	}
	return NULL;
}

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

static int yes_no(const char *v, bool *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" }, *const no[] = { "no", "false", "off", "0" };

	for (int i = 0; i < 4; i++) {
		if (!strcasecmp(v, yes[i]) || !strcasecmp(v, no[i])) {
			*out = !strcasecmp(v, yes[i]);
			return 0;
		}
	}
	return -EINVAL;
}

/* Appends one setting to vec (*n used, *cap room): "--NAME" or "--NAME=VALUE". */
static int push(char ***vec, int *n, int *cap, const char *name, const char *value)
{
	char *arg;

	if (*n + 1 >= *cap) {
		int ncap = *cap ? *cap * 2 : 32;
		char **nv = realloc(*vec, (size_t)ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*vec = nv;
		*cap = ncap;
	}
	if (value ? asprintf(&arg, "--%s=%s", name, value) < 0 : asprintf(&arg, "--%s", name) < 0) {
		fprintf(stderr, "out of memory\n");
		return -ENOMEM;
	}
	(*vec)[(*n)++] = arg;
	return 0;
}

/* One line of the file: nothing (blank, comment), or a setting pushed. */
static int config_line(const char *prog, const char *path, unsigned lineno, char *line,
		       const struct option *opts, const char *const *repeatable, int argc, char **argv,
		       char ***vec, int *n, int *cap)
{
	const struct option *o;
	char *eq, *name, *value;
	bool on;

	/* A comment: a line that starts with '#', or the rest of one from a '#' after a blank (so
	 * that a '#' inside a value, "ost = /srv/ost#1", stays part of it). */
	for (char *h = strchr(line, '#'); h; h = strchr(h + 1, '#'))
		if (h == line || isspace((unsigned char)h[-1])) {
			*h = '\0';
			break;
		}
	line = trim(line);
	if (!*line)
		return 0;
	eq = strchr(line, '=');
	if (!eq) {
		fprintf(stderr, "%s: %s:%u: not a setting (NAME = VALUE): '%s'\n", prog, path, lineno, line);
		return -EINVAL;
	}
	*eq = '\0';
	name = trim(line);
	value = trim(eq + 1);
	o = option_named(opts, name);
	if (!strcmp(name, "format") || !strcmp(name, "replace")) {
		/* An action, not a setting: the file a unit starts the server with must not reformat. */
		fprintf(stderr, "%s: %s:%u: %s is not a setting: give --%s on the command line\n", prog,
			path, lineno, name, name);
		return -EINVAL;
	}
	if (!o || !strcmp(name, "config") || !strcmp(name, "help") || !strcmp(name, "version")) {
		fprintf(stderr, "%s: %s:%u: unknown setting '%s' (`%s --help` lists them, without their --)\n",
			prog, path, lineno, name, prog);
		return -EINVAL;
	}
	if (listed(repeatable, name)) {
		if (argv_gives(argc, argv, name))
			return 0; /* the command line's list replaces the file's */
	} else if (argv_gives(*n, *vec, name)) { /* the settings read so far */
		fprintf(stderr, "%s: %s:%u: %s is set a second time\n", prog, path, lineno, name);
		return -EINVAL;
	}
	if (o->has_arg == no_argument) {
		if (yes_no(value, &on)) {
			fprintf(stderr, "%s: %s:%u: %s takes yes or no, not '%s'\n", prog, path, lineno, name,
				value);
			return -EINVAL;
		}
		return on ? push(vec, n, cap, name, NULL) : 0;
	}
	if (!*value) {
		fprintf(stderr, "%s: %s:%u: %s needs a value\n", prog, path, lineno, name);
		return -EINVAL;
	}
	return push(vec, n, cap, name, value);
}

int config_argv(const char *prog, const struct option *opts, const char *const *repeatable, int argc,
		char **argv, int *argc_out, char ***argv_out)
{
	const char *path = config_path(argc, argv);
	char **vec = NULL, line[4096];
	int n = 0, nfile, cap = 0, rc = 0;
	unsigned lineno = 0;
	FILE *f;

	*argc_out = argc;
	*argv_out = argv;
	if (!path) {
		for (int i = 1; i < argc; i++)
			if (!strcmp(argv[i], "--config")) {
				fprintf(stderr, "%s: --config needs a FILE\n", prog);
				return -EINVAL;
			}
		return 0;
	}
	f = fopen(path, "re");
	if (!f) {
		rc = -errno;
		fprintf(stderr, "%s: cannot read the config file %s: %s\n", prog, path, strerror(-rc));
		return rc;
	}
	rc = push(&vec, &n, &cap, "", NULL); /* argv[0]'s place */
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			fprintf(stderr, "%s: %s:%u: line too long\n", prog, path, lineno);
			rc = -EINVAL;
			break;
		}
		rc = config_line(prog, path, lineno, line, opts, repeatable, argc, argv, &vec, &n, &cap);
	}
	fclose(f);
	nfile = n;
	if (rc == 0 && n + argc >= cap) {
		char **nv = realloc(vec, (size_t)(n + argc) * sizeof(*nv));
		if (nv) {
			vec = nv;
		} else {
			fprintf(stderr, "%s: out of memory reading %s\n", prog, path);
			rc = -ENOMEM;
		}
	}
	if (rc) {
		for (int i = 0; i < nfile; i++)
			free(vec[i]);
		free(vec);
		return rc;
	}
	for (int i = 1; i < argc; i++)
		vec[n++] = argv[i];
	free(vec[0]);
	vec[0] = argv[0];
	vec[n] = NULL;
	config_vec = vec;
	config_made = nfile;
	atexit(config_free);
	*argc_out = n;
	*argv_out = vec;
	return 0;
}
