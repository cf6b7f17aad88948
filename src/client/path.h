/* Path resolution inside the file system, as the kernel's path walk does it. */
#ifndef LOOM_CLIENT_PATH_H
#define LOOM_CLIENT_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/internal.h"

#define PATH_MAX_SYMLINKS 40 /* as Linux: -ELOOP beyond */

/* Resolves path to an inode. follow: a final symlink is followed. Intermediate symlinks always
 * are; absolute targets start again at the file system's root. */
int path_resolve(loom_fs *fs, const struct loom_cred *cr, const char *path, bool follow,
		 struct lw_attr *out);

/* path_resolve (following a final symlink) that also opens the file, when the MDS can do both in
 * one round trip (wo->opened; wo->open_flags say how, read-only without O_TRUNC). Otherwise the
 * caller opens *out itself. */
int path_resolve_open(loom_fs *fs, const struct loom_cred *cr, const char *path,
		      struct mdc_walk_open *wo, struct lw_attr *out);

/* Resolves everything but the last component: *parent is the directory that holds (or would
 * hold) it, name/len the component (a view into a buffer of name_cap >= LOOM_NAME_MAX + 1
 * bytes, NUL-terminated). *trailing_slash tells "a/b/" from "a/b".
 * -EBUSY for a path with no last component ("/", ""). */
int path_parent(loom_fs *fs, const struct loom_cred *cr, const char *path, uint64_t *parent,
		char *name, size_t *len, bool *trailing_slash);

#endif
