/*
 * mount.loom: what mount(8) runs for `mount -t loom SPEC DIR` and for fstab lines of type loom:
 *   mount.loom SPEC DIR [-sfnv] [-o OPTIONS]
 * It runs loom-mount, which mounts and then serves in the background. mount(8) runs helpers
 * with an empty PATH, so loom-mount is taken from beside this program (a build tree) or from
 * where meson installed it (LOOM_BINDIR); never from PATH.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/version.h"

static const char usage_text[] =
	"usage: mount.loom HOST[:PORT][,HOST2[:PORT]]:/FSNAME DIR [-sfnv] [-o OPTIONS]\n"
	"Run by mount(8) for `mount -t loom` and for fstab lines of type loom; it runs\n"
	"loom-mount (" LOOM_BINDIR "/loom-mount), which mounts and serves in the background.\n"
	"  -f  fake: do everything but mount     -v  say what is run\n"
	"  -n, -s  accepted (mount(8)'s own)     -o  the mount options: `loom-mount --help`\n";

/* Beside this program first (a build tree, where the link /sbin/mount.loom names the build's
 * helper), then where meson installed it. */
static int find_loom_mount(char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		snprintf(out, cap, "%s/loom-mount", dirname(self));
		if (access(out, X_OK) == 0)
			return 0;
	}
	snprintf(out, cap, "%s/loom-mount", LOOM_BINDIR);
	return access(out, X_OK) == 0 ? 0 : -ENOENT;
}

int main(int argc, char **argv)
{
	char prog[PATH_MAX];
	const char *spec = NULL, *dir = NULL, *opts = NULL;
	char *args[8];
	int n = 0, fake = 0, verbose = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			fputs(usage_text, stdout);
			return 0;
		} else if (!strcmp(argv[i], "-V") || !strcmp(argv[i], "--version")) {
			printf("mount.loom %s\n", LOOM_RELEASE);
			return 0;
		} else if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			opts = argv[++i];
		} else if (argv[i][0] == '-') {
			/* -f fake, -n no mtab, -s sloppy, -v verbose; -o given as -oOPTS too */
			if (!strncmp(argv[i], "-o", 2)) {
				opts = argv[i] + 2;
				continue;
			}
			for (const char *p = argv[i] + 1; *p; p++) {
				if (*p == 'f')
					fake = 1;
				else if (*p == 'v')
					verbose = 1;
				else if (*p != 'n' && *p != 's') {
					fprintf(stderr, "mount.loom: unknown option -%c\n%s", *p, usage_text);
					return 1;
				}
			}
		} else if (!spec) {
			spec = argv[i];
		} else if (!dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "mount.loom: unexpected argument '%s'\n%s", argv[i], usage_text);
			return 1;
		}
	}
	if (!spec || !dir) {
		fputs(usage_text, stderr);
		return 1;
	}
	if (find_loom_mount(prog, sizeof(prog)) != 0) {
		fprintf(stderr, "mount.loom: %s is not there (is loom-client installed?)\n", prog);
		return 1;
	}
	if (fake)
		return 0;
	args[n++] = prog;
	args[n++] = (char *)spec;
	args[n++] = (char *)dir;
	if (opts && *opts) {
		args[n++] = "-o";
		args[n++] = (char *)opts;
	}
	args[n] = NULL;
	if (verbose)
		fprintf(stderr, "mount.loom: running %s %s %s%s%s\n", prog, spec, dir, opts ? " -o " : "",
			opts ? opts : "");
	execv(prog, args);
	fprintf(stderr, "mount.loom: cannot run %s: %s\n", prog, strerror(errno));
	return 1;
}
