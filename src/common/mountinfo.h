/* Reading /proc/self/mounts: for mount.loom, loom-mount and the tool alike. */
#ifndef LOOM_COMMON_MOUNTINFO_H
#define LOOM_COMMON_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>

/* Undoes /proc/mounts' octal escapes (\040 for a space) in place. */
void mountinfo_unescape(char *s);

/* The source of the Loom mount (fuse.loom) on dir, a real path, the last if several are
 * stacked there: true and source filled, or false. */
bool mountinfo_loom_source(const char *dir, char *source, size_t cap);

/* Whether the Loom mount on dir (a real path) is read-only now (its options begin with "ro"). */
bool mountinfo_read_only(const char *dir);

#endif
