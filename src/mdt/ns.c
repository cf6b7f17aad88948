/*
 * Namespace operations that add or remove one name: lookup, create (mknod), mkdir, symlink,
 * readlink, link, unlink, rmdir. Rename has a file of its own.
 *
 * Each checks in the order Linux's VFS does, so that a request failing for two reasons gets the
 * errno a local file system would give: the parent (ENOENT, ENOTDIR), "." and "..", search
 * permission on the parent (EACCES), the name (ENOENT/EEXIST), write permission on the parent
 * (EACCES), the sticky bit (EPERM), then the victim's type.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <stdlib.h>

int mdt_lookup(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct lw_attr *out)
{
	struct mdt_inode dir, in;
	struct mdt_dentry de;
	uint64_t ino;
	int rc;

	rc = lw_name_check(name, len);
	if (rc == 0)
		rc = mdt_dir_get(t, cr, parent, MDT_MAY_EXEC, &dir);
	if (rc)
		return rc;
	if (len == 1 && name[0] == '.') {
		ino = parent;
	} else if (len == 2 && name[0] == '.' && name[1] == '.') {
		ino = dir.parent;
	} else {
		rc = mdt_dentry_get(t, parent, name, len, &de);
		if (rc)
			return rc;
		ino = de.ino;
	}
	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc == -ENOENT ? -EIO : rc; /* a name for no inode */
	mdt_inode_attr(&in, out);
	return 0;
}

int mdt_walk(struct mdt_txn *t, const struct loom_cred *cr, const char *path, size_t len,
	     bool stop_at_last, const struct mdt_walk_watch *watch, struct lw_attr *out,
	     uint32_t *consumed)
{
	size_t pos = 0;
	int rc = mdt_getattr(t, LOOM_ROOT_INO, out);

	*consumed = 0;
	while (rc == 0) {
		struct lw_attr child;
		size_t start = pos, end, after;

		while (start < len && path[start] == '/')
			start++;
		for (end = start; end < len && path[end] != '/'; end++)
			;
		for (after = end; after < len && path[after] == '/'; after++)
			;
		if (end == start || (stop_at_last && after == len) || !S_ISDIR(out->mode))
			break;
		if (watch && watch->held(watch->arg, out->ino))
			return -EAGAIN;
		if (mdt_lookup(t, cr, out->ino, path + start, end - start, &child) != 0)
			break; /* the client's own lookup gives the error */
		if (S_ISLNK(child.mode) || (!S_ISDIR(child.mode) && end != len))
			break; /* the client's rules: symlinks, trailing '/' */
		*out = child;
		pos = end;
		*consumed = (uint32_t)end;
	}
	return rc;
}

int mdt_getattr(struct mdt_txn *t, uint64_t ino, struct lw_attr *out)
{
	struct mdt_inode in;
	int rc;

	rc = mdt_inode_get(t, ino, &in);
	if (rc == 0)
		mdt_inode_attr(&in, out);
	return rc;
}

/* may_create() after the lookup found nothing: search was checked when the parent was read, the
 * name is free; what remains is write permission. Returns -EEXIST for a taken name. */
static int may_create(struct mdt_txn *t, const struct loom_cred *cr, const struct mdt_inode *dir,
		      const char *name, size_t len)
{
	struct mdt_dentry de;
	int rc;

	if (mdt_name_is_dots(name, len))
		return -EEXIST;
	rc = mdt_dentry_get(t, dir->ino, name, len, &de);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	return mdt_may(cr, dir, MDT_MAY_WRITE | MDT_MAY_EXEC);
}

/* Links a new inode into dir under name and writes both records. The caller has set up `in`. */
static int add_new(struct mdt_txn *t, struct mdt_inode *dir, const char *name, size_t len,
		   const struct mdt_inode *in, struct timespec now)
{
	int rc;

	/* The name is kept twice: in its entry's key and in its readdir record. */
	rc = mdt_txn_grow(t, 2 * len * MDT_GROW_BYTE);
	if (rc == 0)
		rc = mdt_inode_put(t, in);
	if (rc == 0)
		rc = mdt_dentry_add(t, dir, name, len, in->ino, in->mode);
	if (rc)
		return rc;
	if (S_ISDIR(in->mode))
		dir->nlink++;
	mdt_inode_touch(dir, MDT_T_MTIME | MDT_T_CTIME, now);
	return mdt_inode_put(t, dir);
}

/* An existing name met by a non-exclusive create: open(O_CREAT) of an existing file. */
static int create_existing(struct mdt_txn *t, uint64_t ino, struct lw_attr *out,
			   struct loom_layout **layout_out)
{
	struct mdt_inode in;
	int rc;

	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	if (S_ISDIR(in.mode))
		return -EISDIR;
	if (layout_out && S_ISREG(in.mode)) {
		rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, layout_out);
		if (rc == -ENODATA)
			rc = 0;
		if (rc)
			return rc;
	}
	mdt_inode_attr(&in, out);
	return 0;
}

/* mknodat()'s may_mknod(): the types create makes. */
static int create_type(uint32_t mode, uint32_t *type)
{
	*type = mode & S_IFMT;
	switch (*type) {
	case 0:
		*type = S_IFREG;
		return 0;
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		return 0;
	case S_IFDIR:
		return -EPERM;
	default:
		return -EINVAL;
	}
}

int mdt_create(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, uint32_t mode, uint32_t rdev, bool excl, const struct lw_layout *req,
	       struct timespec now, struct lw_attr *out, struct loom_layout **layout_out,
	       bool *created)
{
	struct loom_layout *layout = NULL;
	struct mdt_inode dir, in;
	struct mdt_owner own, dir_own;
	struct mdt_dentry de;
	uint32_t type;
	uint64_t ino;
	int rc;

	if (layout_out)
		*layout_out = NULL;
	if (created)
		*created = false;
	rc = lw_name_check(name, len);
	if (rc == 0)
		rc = create_type(mode, &type);
	if (rc)
		return rc;
	if (req) {
		rc = lw_layout_req_check(req);
		if (rc)
			return rc;
	}
	rc = mdt_dir_get(t, cr, parent, MDT_MAY_EXEC, &dir);
	if (rc)
		return rc;
	if (mdt_name_is_dots(name, len))
		return excl ? -EEXIST : -EISDIR; /* an existing directory */
	rc = mdt_dentry_get(t, parent, name, len, &de);
	if (rc == 0)
		return excl ? -EEXIST : create_existing(t, de.ino, out, layout_out);
	if (rc != -ENOENT)
		return rc;
	rc = mdt_may(cr, &dir, MDT_MAY_WRITE | MDT_MAY_EXEC);
	if (rc)
		return rc;
	if ((type == S_IFCHR || type == S_IFBLK) && cr->uid != 0)
		return -EPERM; /* CAP_MKNOD */

	dir_own = mdt_owner_of(&dir);
	mdt_perm_new_inode(cr, &dir_own, type | (mode & 07777), &own);
	rc = mdt_ino_alloc(t, &ino);
	if (rc)
		return rc;
	mdt_inode_init(&in, ino, own.mode, own.uid, own.gid, now);
	if (type == S_IFCHR || type == S_IFBLK)
		in.rdev = rdev;
	if (type == S_IFREG) {
		rc = mdt_layout_new_file(t, &dir, req, &in, layout_out ? &layout : NULL);
		if (rc)
			return rc;
	}
	rc = add_new(t, &dir, name, len, &in, now);
	if (rc) {
		free(layout);
		return rc;
	}
	mdt_inode_attr(&in, out);
	if (layout_out)
		*layout_out = layout;
	if (created)
		*created = true;
	return 0;
}

int mdt_create_tmpfile(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, uint32_t mode,
		       const struct lw_layout *req, struct timespec now, struct lw_attr *out,
		       struct loom_layout **layout_out)
{
	struct loom_layout *layout = NULL;
	struct mdt_owner own, dir_own;
	struct mdt_inode dir, in;
	uint32_t type;
	uint64_t ino;
	int rc;

	if (layout_out)
		*layout_out = NULL;
	rc = create_type(mode, &type);
	if (rc == 0 && type != S_IFREG)
		rc = -EINVAL; /* O_TMPFILE makes regular files only */
	if (rc == 0 && req)
		rc = lw_layout_req_check(req);
	/* As open(O_TMPFILE) of the directory: search and write permission on it. */
	if (rc == 0)
		rc = mdt_dir_get(t, cr, parent, MDT_MAY_EXEC, &dir);
	if (rc == 0)
		rc = mdt_may(cr, &dir, MDT_MAY_WRITE | MDT_MAY_EXEC);
	if (rc == 0)
		rc = mdt_ino_alloc(t, &ino);
	if (rc)
		return rc;
	dir_own = mdt_owner_of(&dir);
	mdt_perm_new_inode(cr, &dir_own, S_IFREG | (mode & 07777), &own);
	mdt_inode_init(&in, ino, own.mode, own.uid, own.gid, now);
	/* No name, and none can be given (link needs a link left): an orphan from birth, which the
	 * MDS releases at its last close, or at its next start if it stops first. The directory
	 * itself does not change. */
	in.nlink = 0;
	rc = mdt_layout_new_file(t, &dir, req, &in, layout_out ? &layout : NULL);
	if (rc == 0)
		rc = mdt_inode_put(t, &in);
	if (rc == 0)
		rc = mdt_orphan_add(t, ino);
	if (rc) {
		free(layout);
		return rc;
	}
	mdt_inode_attr(&in, out);
	if (layout_out)
		*layout_out = layout;
	return 0;
}

int mdt_mkdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, uint32_t mode, struct timespec now, struct lw_attr *out)
{
	struct mdt_inode dir, in;
	struct mdt_owner own, dir_own;
	uint64_t ino;
	int rc;

	rc = lw_name_check(name, len);
	if (rc == 0)
		rc = mdt_dir_get(t, cr, parent, MDT_MAY_EXEC, &dir);
	if (rc)
		return rc;
	rc = may_create(t, cr, &dir, name, len);
	if (rc)
		return rc;
	/* mkdir(2) keeps only the permission and sticky bits; setgid comes from the parent. */
	dir_own = mdt_owner_of(&dir);
	mdt_perm_new_inode(cr, &dir_own, S_IFDIR | (mode & 01777), &own);
	rc = mdt_ino_alloc(t, &ino);
	if (rc)
		return rc;
	mdt_inode_init(&in, ino, own.mode, own.uid, own.gid, now);
	in.parent = parent;
	rc = mdt_layout_inherit_dir(t, parent, ino);
	if (rc == 0)
		rc = add_new(t, &dir, name, len, &in, now);
	if (rc == 0)
		mdt_inode_attr(&in, out);
	return rc;
}

int mdt_symlink(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
		size_t len, const char *target, size_t target_len, struct timespec now,
		struct lw_attr *out)
{
	struct mdt_inode dir, in;
	struct mdt_owner own, dir_own;
	uint8_t key[8];
	uint64_t ino;
	int rc;

	rc = lw_name_check(name, len);
	if (rc)
		return rc;
	if (target_len == 0)
		return -ENOENT;
	if (target_len > LOOM_SYMLINK_MAX)
		return -ENAMETOOLONG;
	rc = mdt_dir_get(t, cr, parent, MDT_MAY_EXEC, &dir);
	if (rc)
		return rc;
	rc = may_create(t, cr, &dir, name, len);
	if (rc)
		return rc;
	dir_own = mdt_owner_of(&dir);
	mdt_perm_new_inode(cr, &dir_own, S_IFLNK | 0777, &own);
	rc = mdt_ino_alloc(t, &ino);
	if (rc == 0)
		rc = mdt_txn_grow(t, target_len * MDT_GROW_BYTE);
	if (rc)
		return rc;
	mdt_inode_init(&in, ino, own.mode, own.uid, own.gid, now);
	in.size = target_len;
	mdt_put_be64(key, ino);
	rc = mdt_put(t, MDT_DB_SYMLINKS, key, sizeof(key), target, target_len);
	if (rc == 0)
		rc = add_new(t, &dir, name, len, &in, now);
	if (rc == 0)
		mdt_inode_attr(&in, out);
	return rc;
}

int mdt_readlink(struct mdt_txn *t, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct mdt_inode in;
	uint8_t key[8];
	MDB_val v;
	int rc;

	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	if (!S_ISLNK(in.mode))
		return -EINVAL;
	mdt_put_be64(key, ino);
	rc = mdt_get(t, MDT_DB_SYMLINKS, key, sizeof(key), &v);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	*len = v.mv_size;
	if (v.mv_size > cap)
		return -ERANGE;
	memcpy(buf, v.mv_data, v.mv_size);
	return 0;
}

int mdt_link(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t new_parent,
	     const char *name, size_t len, struct timespec now, struct lw_attr *out)
{
	struct mdt_inode dir, in;
	int rc;

	rc = lw_name_check(name, len);
	if (rc)
		return rc;
	/* The source was resolved first (its path walk), so a missing inode is ENOENT first. */
	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	rc = mdt_dir_get(t, cr, new_parent, MDT_MAY_EXEC, &dir);
	if (rc)
		return rc;
	rc = may_create(t, cr, &dir, name, len);
	if (rc)
		return rc;
	if (S_ISDIR(in.mode))
		return -EPERM;
	if (in.nlink == 0)
		return -ENOENT; /* unlinked but still open: no new names (no O_TMPFILE here) */
	if (in.nlink >= MDT_LINK_MAX)
		return -EMLINK;
	rc = mdt_txn_grow(t, 2 * (MDT_GROW_RECORD + len * MDT_GROW_BYTE));
	if (rc == 0)
		rc = mdt_dentry_add(t, &dir, name, len, ino, in.mode);
	if (rc)
		return rc;
	in.nlink++;
	in.name_version++;
	mdt_inode_touch(&in, MDT_T_CTIME, now);
	mdt_inode_touch(&dir, MDT_T_MTIME | MDT_T_CTIME, now);
	rc = mdt_inode_put(t, &in);
	if (rc == 0)
		rc = mdt_inode_put(t, &dir);
	if (rc == 0)
		mdt_inode_attr(&in, out);
	return rc;
}

/* may_delete() for an entry of dir: write+search on dir, then the sticky bit. Reads the victim
 * into *victim. */
static int may_delete(struct mdt_txn *t, const struct loom_cred *cr, const struct mdt_inode *dir,
		      const struct mdt_dentry *de, struct mdt_inode *victim)
{
	struct mdt_owner dir_own = mdt_owner_of(dir), victim_own;
	int rc;

	rc = mdt_may(cr, dir, MDT_MAY_WRITE | MDT_MAY_EXEC);
	if (rc)
		return rc;
	rc = mdt_inode_get(t, de->ino, victim);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;
	victim_own = mdt_owner_of(victim);
	return mdt_perm_sticky(cr, &dir_own, &victim_own);
}

int mdt_drop_link(struct mdt_txn *t, struct mdt_inode *in, struct timespec now,
		  struct mdt_unlinked *victim)
{
	int rc;

	if (in->nlink > 0)
		in->nlink--;
	in->name_version++;
	mdt_inode_touch(in, MDT_T_CTIME, now);
	rc = mdt_inode_put(t, in);
	if (rc == 0 && in->nlink == 0)
		rc = mdt_orphan_add(t, in->ino);
	if (rc == 0 && victim) {
		victim->ino = in->ino;
		victim->nlink = in->nlink;
		victim->mode = in->mode;
	}
	return rc;
}

int mdt_unlink(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct timespec now, struct mdt_unlinked *victim)
{
	struct mdt_inode dir, in;
	struct mdt_dentry de;
	int rc;

	if (victim)
		memset(victim, 0, sizeof(*victim));
	rc = lw_name_check(name, len);
	if (rc == 0)
		rc = mdt_dir_get(t, cr, parent, 0, &dir);
	if (rc)
		return rc;
	if (mdt_name_is_dots(name, len))
		return -EISDIR;
	rc = mdt_may(cr, &dir, MDT_MAY_EXEC);
	if (rc == 0)
		rc = mdt_dentry_get(t, parent, name, len, &de);
	if (rc == 0)
		rc = may_delete(t, cr, &dir, &de, &in);
	if (rc)
		return rc;
	if (S_ISDIR(in.mode))
		return -EISDIR;
	rc = mdt_dentry_del(t, &dir, name, len, &de);
	if (rc)
		return rc;
	mdt_inode_touch(&dir, MDT_T_MTIME | MDT_T_CTIME, now);
	rc = mdt_inode_put(t, &dir);
	if (rc == 0)
		rc = mdt_drop_link(t, &in, now, victim);
	return rc;
}

int mdt_rmdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, struct timespec now)
{
	struct mdt_inode dir, in;
	struct mdt_dentry de;
	int rc;

	rc = lw_name_check(name, len);
	if (rc == 0)
		rc = mdt_dir_get(t, cr, parent, 0, &dir);
	if (rc)
		return rc;
	if (len == 1 && name[0] == '.')
		return -EINVAL;
	if (len == 2 && name[0] == '.' && name[1] == '.')
		return -ENOTEMPTY;
	rc = mdt_may(cr, &dir, MDT_MAY_EXEC);
	if (rc == 0)
		rc = mdt_dentry_get(t, parent, name, len, &de);
	if (rc == 0)
		rc = may_delete(t, cr, &dir, &de, &in);
	if (rc)
		return rc;
	if (!S_ISDIR(in.mode))
		return -ENOTDIR;
	if (in.ino == LOOM_ROOT_INO)
		return -EBUSY;
	if (in.nentries > 0)
		return -ENOTEMPTY;
	rc = mdt_dentry_del(t, &dir, name, len, &de);
	if (rc)
		return rc;
	dir.nlink--;
	mdt_inode_touch(&dir, MDT_T_MTIME | MDT_T_CTIME, now);
	rc = mdt_inode_put(t, &dir);
	if (rc == 0)
		rc = mdt_dir_destroy(t, in.ino);
	return rc;
}
