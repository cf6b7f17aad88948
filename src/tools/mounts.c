/* Paths under a Loom mount: `loom getstripe /mnt/loom/x` works as `lfs getstripe` does. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tool.h"

/* Unescapes /proc/mounts' octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *d = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

/* The real path of path, or of its parent directory when path does not exist yet. */
static int real_or_parent(const char *path, char *out)
{
	char tmp[PATH_MAX], *base;

	if (realpath(path, out))
		return 0;
	if (errno != ENOENT || strlen(path) >= sizeof(tmp))
		return -errno;
	snprintf(tmp, sizeof(tmp), "%s", path);
	base = strrchr(tmp, '/');
	if (!base)
		return realpath(".", out) ? 0 : -errno;
	*base = '\0';
	if (!realpath(tmp[0] ? tmp : "/", out))
		return -errno;
	return 0;
}

int tool_mount_of(const char *path, struct tool_mount *out)
{
	char real[PATH_MAX], src[512], mnt[PATH_MAX], type[64];
	size_t best = 0;
	FILE *f;

	if (real_or_parent(path, real) != 0)
		return -ENOENT;
	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return -errno;
	while (fscanf(f, "%511s %4095s %63s %*[^\n]", src, mnt, type) == 3) {
		size_t n;

		if (strcmp(type, "fuse.loom"))
			continue;
		unescape(mnt);
		unescape(src);
		n = strlen(mnt);
		if (strncmp(real, mnt, n) || (real[n] != '/' && real[n] != '\0' && n > 1))
			continue;
		if (n >= best) {
			best = n;
			snprintf(out->mountpoint, sizeof(out->mountpoint), "%s", mnt);
			snprintf(out->source, sizeof(out->source), "%s", src);
		}
	}
	fclose(f);
	if (!best)
		return -ENOENT;
	/* The source whole: libloom takes a mount's source (its list of MDS addresses, in any form
	 * mount accepts, and the file system it must find there). */
	snprintf(out->mds_addr, sizeof(out->mds_addr), "%s", out->source);
	return 0;
}

int tool_first_mount(struct tool_mount *out)
{
	char src[512], mnt[PATH_MAX], type[64];
	FILE *f = fopen("/proc/self/mounts", "re");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (rc && fscanf(f, "%511s %4095s %63s %*[^\n]", src, mnt, type) == 3) {
		if (strcmp(type, "fuse.loom"))
			continue;
		unescape(mnt);
		rc = tool_mount_of(mnt, out);
	}
	fclose(f);
	return rc;
}
