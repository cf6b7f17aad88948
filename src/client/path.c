#include "client/path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Splits the next component off *p (skipping slashes). Returns its length, 0 at the end. */
static size_t next_component(const char **p, const char **comp)
{
	const char *s = *p, *e;

	while (*s == '/')
		s++;
	e = s;
	while (*e && *e != '/')
		e++;
	*comp = s;
	*p = e;
	return (size_t)(e - s);
}

static bool only_slashes(const char *p)
{
	while (*p == '/')
		p++;
	return *p == '\0';
}

/* A walk starts at the root without asking for its attributes (one round trip less per path
 * call): lookups below it are checked by the MDS, and only a walk that ends at the root needs
 * them. nlink 0 marks the stand-in. */
static void root_placeholder(struct lw_attr *cur)
{
	memset(cur, 0, sizeof(*cur));
	cur->ino = LOOM_ROOT_INO;
	cur->mode = S_IFDIR;
}

/*
 * The MDS resolves what it can of the path in one round trip (MDS_WALK), and with wo opens the
 * file too; the walk below goes on from where it stopped, one lookup at a time, so that errors
 * and symlinks are handled here as before. *p is moved past what the MDS resolved.
 */
static int walk_ahead(loom_fs *fs, const struct loom_cred *cr, char *work, bool want_parent,
		      struct mdc_walk_open *wo, struct lw_attr *cur, const char **p)
{
	uint32_t consumed = 0;
	int rc;

	if (fs->no_walk || only_slashes(work))
		return 0;
	rc = mdc_walk(fs, cr, work, strlen(work), want_parent ? LW_WALK_PARENT : 0, wo, cur, &consumed);
	if (rc == -EOPNOTSUPP) {
		fs->no_walk = true; /* an MDS from before MDS_WALK: look up one component at a time */
		root_placeholder(cur);
		return 0;
	}
	if (rc == 0)
		*p = work + consumed;
	return rc;
}

/*
 * The walk. With want_parent it stops before the last component and reports it; else it
 * resolves it too (following a final symlink when follow). work holds the path being walked,
 * rewritten when a symlink is expanded.
 */
static int walk(loom_fs *fs, const struct loom_cred *cr, const char *path, bool follow,
		bool want_parent, struct lw_attr *cur, char *name, size_t *name_len, bool *trailing,
		struct mdc_walk_open *wo)
{
	char *work = malloc(2 * PATH_MAX + 2), *target = NULL;
	const char *p, *comp;
	int links = 0, rc;
	size_t len;

	if (!work)
		return -ENOMEM;
	if (path[0] == '\0') {
		rc = -ENOENT;
		goto out;
	}
	if (strlen(path) >= PATH_MAX) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	strcpy(work, path);
	root_placeholder(cur);
	p = work;
	rc = walk_ahead(fs, cr, work, want_parent, wo, cur, &p);
	if (rc || (wo && wo->opened))
		goto out;
	for (;;) {
		struct lw_attr child;
		bool last;

		len = next_component(&p, &comp);
		if (len == 0) {
			if (want_parent)
				rc = -EBUSY;
			break;
		}
		if (len > LOOM_NAME_MAX) {
			rc = -ENAMETOOLONG;
			break;
		}
		last = only_slashes(p);
		if (!S_ISDIR(cur->mode)) {
			rc = -ENOTDIR;
			break;
		}
		if (last && want_parent) {
			memcpy(name, comp, len);
			name[len] = '\0';
			*name_len = len;
			*trailing = *p == '/';
			break;
		}
		rc = mdc_lookup(fs, cr, cur->ino, comp, len, &child);
		if (rc)
			break;
		if (S_ISLNK(child.mode) && (!last || follow || *p == '/')) {
			size_t tlen, rest = strlen(p);

			if (++links > PATH_MAX_SYMLINKS) {
				rc = -ELOOP;
				break;
			}
			if (!target && !(target = malloc(LOOM_SYMLINK_MAX + 1))) {
				rc = -ENOMEM;
				break;
			}
			rc = mdc_readlink(fs, cr, child.ino, target, LOOM_SYMLINK_MAX, &tlen);
			if (rc)
				break;
			if (tlen == 0 || tlen > LOOM_SYMLINK_MAX) {
				rc = -EPROTO; /* the MDS never stores such a target */
				break;
			}
			if (tlen + rest >= 2 * PATH_MAX) {
				rc = -ENAMETOOLONG;
				break;
			}
			/* work becomes target + the rest (which starts with '/' when anything follows);
			 * p may point into work, so move the rest first. */
			memmove(work + tlen, p, rest + 1);
			memcpy(work, target, tlen);
			p = work;
			if (target[0] == '/')
				root_placeholder(cur);
			continue;
		}
		*cur = child;
		if (last && *p == '/' && !S_ISDIR(cur->mode)) {
			rc = -ENOTDIR;
			break;
		}
	}
	/* The walk ended at the root itself: its attributes are wanted after all. */
	if (rc == 0 && !want_parent && cur->ino == LOOM_ROOT_INO && cur->nlink == 0)
		rc = mdc_getattr(fs, cr, LOOM_ROOT_INO, cur);
out:
	free(work);
	free(target);
	return rc;
}

/* A directory on the way vanished while we walked (ESTALE): walk once more from the root,
 * and if it is gone for good, the path does not exist. */
int path_resolve(loom_fs *fs, const struct loom_cred *cr, const char *path, bool follow,
		 struct lw_attr *out)
{
	int rc = walk(fs, cr, path, follow, false, out, NULL, NULL, NULL, NULL);

	if (rc == -ESTALE)
		rc = walk(fs, cr, path, follow, false, out, NULL, NULL, NULL, NULL);
	return rc == -ESTALE ? -ENOENT : rc;
}

int path_resolve_open(loom_fs *fs, const struct loom_cred *cr, const char *path,
		      struct mdc_walk_open *wo, struct lw_attr *out)
{
	int rc = walk(fs, cr, path, true, false, out, NULL, NULL, NULL, wo);

	if (rc == -ESTALE && !wo->opened)
		rc = walk(fs, cr, path, true, false, out, NULL, NULL, NULL, wo);
	return rc == -ESTALE ? -ENOENT : rc;
}

int path_parent(loom_fs *fs, const struct loom_cred *cr, const char *path, uint64_t *parent,
		char *name, size_t *len, bool *trailing_slash)
{
	struct lw_attr dir;
	int rc = walk(fs, cr, path, false, true, &dir, name, len, trailing_slash, NULL);

	if (rc == -ESTALE)
		rc = walk(fs, cr, path, false, true, &dir, name, len, trailing_slash, NULL);
	if (rc == -ESTALE)
		rc = -ENOENT;
	if (rc == 0)
		*parent = dir.ino;
	return rc;
}
