#include "common/mountinfo.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

void mountinfo_unescape(char *s)
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

bool mountinfo_loom_source(const char *dir, char *source, size_t cap)
{
	char src[1024], mnt[PATH_MAX], type[64];
	bool found = false;
	FILE *f = fopen("/proc/self/mounts", "re");

	if (!f)
		return false;
	while (fscanf(f, "%1023s %4095s %63s %*[^\n]", src, mnt, type) == 3) {
		mountinfo_unescape(mnt);
		mountinfo_unescape(src);
		if (!strcmp(type, "fuse.loom") && !strcmp(mnt, dir)) {
			snprintf(source, cap, "%s", src);
			found = true;
		}
	}
	fclose(f);
	return found;
}

bool mountinfo_read_only(const char *dir)
{
	char src[1024], mnt[PATH_MAX], type[64], opts[1024];
	bool ro = false;
	FILE *f = fopen("/proc/self/mounts", "re");

	if (!f)
		return false;
	while (fscanf(f, "%1023s %4095s %63s %1023s %*[^\n]", src, mnt, type, opts) == 4) {
		mountinfo_unescape(mnt);
		if (!strcmp(type, "fuse.loom") && !strcmp(mnt, dir))
			ro = !strcmp(opts, "ro") || !strncmp(opts, "ro,", 3); /* the last stacked there */
	}
	fclose(f);
	return ro;
}
