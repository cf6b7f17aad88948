/*
 * mount.loom: what mount(8) runs for `mount -t loom SPEC DIR` and for fstab lines of type loom:
 *   mount.loom SPEC DIR [-sfnv] [-o OPTIONS]
 * It runs loom-mount (found beside this program, then in PATH), which mounts and then serves in
 * the background.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void find_loom_mount(char *out, size_t cap)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		snprintf(out, cap, "%s/loom-mount", dirname(self));
		if (access(out, X_OK) == 0)
			return;
	}
	snprintf(out, cap, "loom-mount"); /* execvp searches PATH */
}

int main(int argc, char **argv)
{
	char prog[PATH_MAX];
	const char *spec = NULL, *dir = NULL, *opts = NULL;
	char *args[8];
	int n = 0, fake = 0, verbose = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
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
					fprintf(stderr, "mount.loom: unknown option -%c\n", *p);
					return 1;
				}
			}
		} else if (!spec) {
			spec = argv[i];
		} else if (!dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "mount.loom: unexpected argument '%s'\n", argv[i]);
			return 1;
		}
	}
	if (!spec || !dir) {
		fprintf(stderr, "usage: mount.loom HOST[:PORT]:/FSNAME DIR [-sfnv] [-o OPTIONS]\n");
		return 1;
	}
	if (fake)
		return 0;
	find_loom_mount(prog, sizeof(prog));
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
	execvp(prog, args);
	fprintf(stderr, "mount.loom: cannot run %s: %s\n", prog, strerror(errno));
	return 1;
}
