/* Paths under a Loom mount: `loom getstripe /mnt/loom/x` works as `lfs getstripe` does. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/mountinfo.h"
#include "tools/tool.h"

/*
 * path made absolute and resolved as far as this user can: the longest leading part realpath(3)
 * resolves (a path that does not exist yet, or runs through a directory this user may not
 * search, still tells which mount it is on), then the rest as written. Without follow the last
 * component is never resolved: a symlink names itself, as lstat(2) takes it.
 */
static int resolve(const char *path, bool follow, char *out)
{
	char tmp[PATH_MAX], rest[PATH_MAX] = "", real[PATH_MAX];
	size_t len;

	if (!*path)
		return -ENOENT;
	if (path[0] == '/') {
		if (strlen(path) >= sizeof(tmp))
			return -ENAMETOOLONG;
		snprintf(tmp, sizeof(tmp), "%s", path);
	} else {
		if (!getcwd(tmp, sizeof(tmp)))
			return -errno;
		len = strlen(tmp);
		if (len + 1 + strlen(path) >= sizeof(tmp))
			return -ENAMETOOLONG;
		snprintf(tmp + len, sizeof(tmp) - len, "%s%s", len > 1 ? "/" : "", path);
	}
	for (len = strlen(tmp); len > 1 && tmp[len - 1] == '/'; len--)
		tmp[len - 1] = '\0';
	{
		const char *base = strrchr(tmp, '/') + 1;
		/* "." and ".." are directories whatever follow says */
		if (!strcmp(base, ".") || !strcmp(base, ".."))
			follow = true;
	}
	if (follow && realpath(tmp, out))
		return 0;
	for (;;) {
		char *cut = strrchr(tmp, '/');
		char joined[PATH_MAX];

		if (!cut || cut[1] == '\0')
			return -ENOENT; /* not even "/" resolves */
		if (snprintf(joined, sizeof(joined), "%s%s%s", cut + 1, rest[0] ? "/" : "", rest) >=
		    (int)sizeof(joined))
			return -ENAMETOOLONG;
		memcpy(rest, joined, sizeof(rest));
		if (cut == tmp)
			cut[1] = '\0'; /* down to "/" */
		else
			*cut = '\0';
		if (realpath(tmp, real)) {
			if (snprintf(out, PATH_MAX, "%s%s%s", real, strcmp(real, "/") ? "/" : "", rest) >= PATH_MAX)
				return -ENAMETOOLONG;
			return 0;
		}
	}
}

int tool_mount_of(const char *path, struct tool_mount *out)
{
	char real[PATH_MAX], src[512], mnt[PATH_MAX], type[64];
	size_t best = 0;
	FILE *f;

	if (resolve(path, true, real) != 0)
		return -ENOENT;
	f = fopen("/proc/self/mounts", "re");
	if (!f)
		return -errno;
	while (fscanf(f, "%511s %4095s %63s %*[^\n]", src, mnt, type) == 3) {
		size_t n;

		if (strcmp(type, "fuse.loom"))
			continue;
		mountinfo_unescape(mnt);
		mountinfo_unescape(src);
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
		mountinfo_unescape(mnt);
		rc = tool_mount_of(mnt, out);
	}
	fclose(f);
	return rc;
}

const char *tool_fs_path(struct tool_ctx *ctx, const char *arg, bool follow, char *buf, size_t cap)
{
	struct tool_mount mnt;
	char real[PATH_MAX];
	size_t n;

	if (tool_mount_of(arg, &mnt) != 0 || resolve(arg, follow, real) != 0)
		return arg;
	n = strlen(mnt.mountpoint);
	if (strncmp(real, mnt.mountpoint, n) || (real[n] && real[n] != '/'))
		return arg;
	snprintf(ctx->addr_buf, sizeof(ctx->addr_buf), "%s", mnt.mds_addr);
	ctx->fs_addr = ctx->addr_buf;
	snprintf(buf, cap, "%s", real[n] ? real + n : "/");
	return buf;
}
