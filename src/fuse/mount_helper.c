/*
 * mount.loom: what mount(8) runs for `mount -t loom SPEC DIR` and for fstab lines of type loom:
 *   mount.loom SPEC DIR [-sfnv] [-o OPTIONS] [-t TYPE]
 * and, as mount.fuse.loom, for what it does to a mounted Loom file system (type fuse.loom in
 * /proc/mounts): `mount -o remount DIR`. Without that name mount(8) would run mount.fuse, which
 * runs the program named by the subtype, `loom`, the admin tool.
 * It runs loom-mount, which mounts and then serves in the background. mount(8) runs helpers
 * with an empty PATH, so loom-mount is taken from beside this program (a build tree) or from
 * where meson installed it (LOOM_BINDIR); never from PATH.
 *
 * Exit codes are mount(8)'s for its helpers: 0, 1 (a wrong invocation), 32 (the mount failed);
 * loom-mount gives the same. A directory that holds a Loom mount already is refused, as
 * mount.lustre does; `-o remount` changes the flags the kernel keeps for a mount (ro/rw,
 * nosuid, nodev, noexec, the atime ones) and leaves Loom's own options as they were mounted.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/mountinfo.h"
#include "common/version.h"

#define EX_USAGE 1
#define EX_FAIL  32

static const char usage_text[] =
	"usage: mount.loom HOST[:PORT][,HOST2[:PORT]]:/FSNAME DIR [-sfnv] [-o OPTIONS]\n"
	"Run by mount(8) for `mount -t loom` and for fstab lines of type loom; it runs\n"
	"loom-mount (" LOOM_BINDIR "/loom-mount), which mounts and serves in the background.\n"
	"  -f  fake: do everything but mount     -v  say what is run\n"
	"  -n, -s  accepted (mount(8)'s own)     -o  the mount options: `loom-mount --help`\n"
	"A list gives the MDS's failover addresses, tried in turn; Lustre's NIDs are accepted:\n"
	"mds1@tcp,mds2@tcp:/lfs01, mds1@tcp:mds2@tcp:/lfs01 (TCP only).\n"
	"-o remount changes ro/rw, nosuid, nodev, noexec and the atime flags of a mount; Loom's\n"
	"own options stay as mounted (umount and mount again to change them).\n";

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

/* Whether the comma-separated list opts holds word. */
static int has_option(const char *opts, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

/*
 * mount -o remount: the kernel's flags of the mount on dir, from what it has now (statvfs), with
 * those opts name changed. Everything else (Loom's options, FUSE's) is fixed at mount time and
 * stays; a mount that is not Loom's is not touched.
 */
static int remount(const char *dir, const char *opts, int fake, int verbose)
{
	static const struct {
		const char *name;
		unsigned long set, clear;
	} words[] = {
		{ "ro", MS_RDONLY, 0 },         { "rw", 0, MS_RDONLY },
		{ "nosuid", MS_NOSUID, 0 },     { "suid", 0, MS_NOSUID },
		{ "nodev", MS_NODEV, 0 },       { "dev", 0, MS_NODEV },
		{ "noexec", MS_NOEXEC, 0 },     { "exec", 0, MS_NOEXEC },
		{ "noatime", MS_NOATIME, MS_RELATIME | MS_STRICTATIME },
		{ "atime", 0, MS_NOATIME },
		{ "relatime", MS_RELATIME, MS_NOATIME | MS_STRICTATIME },
		{ "norelatime", 0, MS_RELATIME },
		{ "strictatime", MS_STRICTATIME, MS_NOATIME | MS_RELATIME },
		{ "nodiratime", MS_NODIRATIME, 0 }, { "diratime", 0, MS_NODIRATIME },
	};
	char real[PATH_MAX], source[1024];
	struct statvfs sv;
	unsigned long flags = MS_REMOUNT;

	if (!realpath(dir, real) || !mountinfo_loom_source(real, source, sizeof(source))) {
		fprintf(stderr, "mount.loom: %s is not a Loom mount: nothing to remount\n", dir);
		return EX_FAIL;
	}
	if (statvfs(real, &sv) != 0) {
		fprintf(stderr, "mount.loom: cannot remount %s: %s\n", real, strerror(errno));
		return EX_FAIL;
	}
	flags |= (sv.f_flag & ST_RDONLY ? MS_RDONLY : 0) | (sv.f_flag & ST_NOSUID ? MS_NOSUID : 0) |
		 (sv.f_flag & ST_NODEV ? MS_NODEV : 0) | (sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0) |
		 (sv.f_flag & ST_NOATIME ? MS_NOATIME : 0) | (sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0) |
		 (sv.f_flag & ST_RELATIME ? MS_RELATIME : 0);
	/* In their order: mount(8) gives the mount's options first, then the new ones. */
	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
		size_t n = strcspn(p, ",");

		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (strlen(words[i].name) == n && !strncmp(p, words[i].name, n))
				flags = (flags & ~words[i].clear) | words[i].set;
	}
	if (verbose)
		fprintf(stderr, "mount.loom: remounting %s (%s) with flags 0x%lx\n", real, source, flags);
	if (fake)
		return 0;
	if (mount(source, real, NULL, flags, NULL) != 0) {
		fprintf(stderr, "mount.loom: cannot remount %s: %s\n", real, strerror(errno));
		return EX_FAIL;
	}
	return 0;
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
		} else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "-N")) && i + 1 < argc) {
			/* -t fuse.loom: run as mount.fuse.loom (mount(8) does so for a mounted Loom file
			 * system's remount); -N: mount(8)'s namespace, entered already */
			i++;
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
					return EX_USAGE;
				}
			}
		} else if (!spec) {
			spec = argv[i];
		} else if (!dir) {
			dir = argv[i];
		} else {
			fprintf(stderr, "mount.loom: unexpected argument '%s'\n%s", argv[i], usage_text);
			return EX_USAGE;
		}
	}
	if (!spec || !dir) {
		fputs(usage_text, stderr);
		return EX_USAGE;
	}
	if (opts && has_option(opts, "remount"))
		return remount(dir, opts, fake, verbose);
	if (find_loom_mount(prog, sizeof(prog)) != 0) {
		fprintf(stderr, "mount.loom: %s is not there (is loom-client installed?)\n", prog);
		return EX_FAIL;
	}
	if (fake)
		return 0;
	/* (Not for mount -f, above: it records a mount made before.) As mount.lustre: a second
	 * mount over the first would hide it behind a second daemon. loom-mount checks too, for
	 * those who run it directly. */
	{
		char real[PATH_MAX], source[1024];

		if (realpath(dir, real) && mountinfo_loom_source(real, source, sizeof(source))) {
			fprintf(stderr, "mount.loom: %s is already mounted (%s)\n", real, source);
			return EX_FAIL;
		}
	}
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
	return EX_FAIL;
}
