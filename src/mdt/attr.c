/*
 * Attributes: setattr (chmod, chown, utimes, truncate), open, and the size and mtime a client
 * reports for data it wrote through a handle.
 *
 * The MDS keeps a file's size; data lives on the OSTs. A truncation changes that size and, in
 * the same transaction, records that the objects are to be cut (trunc.c), which the MDS does
 * before it answers; readers never see past the new size meanwhile.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

static bool nsec_ok(uint32_t ns)
{
	return ns < 1000000000u;
}

/*
 * A size change of a regular file from old to in->size: unless the objects hold nothing (the
 * file was empty, or all within its Data-on-MDT part), they are to be cut to a file of
 * min(old, new) bytes in a new truncation epoch (trunc.c): a shrink drops their bytes past the
 * end, and a growth drops what a writer may have left past the old end, so that the new bytes
 * read as zeros.
 */
static int cut_objects(struct mdt_txn *t, struct mdt_inode *in, uint64_t old)
{
	struct loom_layout *l = NULL;
	uint64_t cut = old < in->size ? old : in->size;
	bool needed;
	int rc;

	if (old == 0)
		return 0;
	rc = mdt_layout_load(t, MDT_DB_LAYOUTS, in->ino, &l);
	if (rc == -ENODATA)
		return 0;
	if (rc)
		return rc;
	needed = l->nobjs > 0 && !(l->dom_size && old <= l->dom_size);
	rc = needed ? mdt_ec_cut(t, in->ino, l, cut) : 0;
	free(l);
	if (rc)
		return rc;
	return needed ? mdt_trunc_queue(t, in, cut) : 0;
}

/* Is sa a mode change that only removes setuid and/or setgid? */
static bool is_kill_privs(const struct lw_setattr *sa, const struct mdt_inode *in)
{
	uint32_t old = in->mode & 07777, want = sa->mode & 07777;

	return (sa->valid & ~(LW_SA_MODE | LW_SA_CTIME | LW_SA_FH)) == 0 && (sa->valid & LW_SA_MODE) &&
	       S_ISREG(in->mode) && want != old && (old & ~want & ~(uint32_t)(S_ISUID | S_ISGID)) == 0 &&
	       (want & ~old) == 0;
}

int mdt_setattr(struct mdt_txn *t, const struct loom_cred *cr, const struct lw_setattr *sa,
		struct timespec now, struct lw_attr *out)
{
	uint32_t valid = sa->valid;
	struct mdt_owner cur, next;
	struct mdt_inode in;
	int rc;

	if (valid & ~LW_SA_ALL)
		return -EINVAL;
	if (((valid & LW_SA_ATIME) && !(valid & LW_SA_ATIME_NOW) && !nsec_ok(sa->atime_ns)) ||
	    ((valid & LW_SA_MTIME) && !(valid & LW_SA_MTIME_NOW) && !nsec_ok(sa->mtime_ns)) ||
	    ((valid & LW_SA_CTIME) && !nsec_ok(sa->ctime_ns)))
		return -EINVAL;
	rc = mdt_inode_get(t, sa->ino, &in);
	if (rc)
		return rc;
	if ((valid & LW_SA_MODE) && S_ISLNK(in.mode))
		return -EOPNOTSUPP; /* a symlink's mode is fixed (fchmodat(AT_SYMLINK_NOFOLLOW)) */
	if (valid & LW_SA_SIZE) {
		/* vfs_truncate(): the type first. */
		if (S_ISDIR(in.mode))
			return -EISDIR;
		if (!S_ISREG(in.mode))
			return -EINVAL;
	}
	cur = mdt_owner_of(&in);
	if (!mdt_perm_owner_or_root(cr, &cur) && is_kill_privs(sa, &in)) {
		/* A chmod that only drops setuid/setgid, by someone who may write the file but does
		 * not own it: what the kernel sends in a writer's name before a write (FUSE without
		 * HANDLE_KILLPRIV). Any write by them drops the bits anyway: it grants nothing more. */
		if (!(valid & LW_SA_FH) && (rc = mdt_may(cr, &in, MDT_MAY_WRITE)) != 0)
			return -EPERM; /* as the chmod it is would have been refused */
		next = cur;
		next.mode = (cur.mode & S_IFMT) | (sa->mode & 07777);
	} else {
		rc = mdt_perm_setattr(cr, &cur, sa, &next);
		if (rc)
			return rc;
	}
	if (valid & LW_SA_KILLPRIV) {
		/* file_remove_privs(): anyone who may write the file drops its setuid (and setgid)
		 * by writing, whoever owns it. */
		if (!(valid & LW_SA_FH) && (rc = mdt_may(cr, &in, MDT_MAY_WRITE)) != 0)
			return rc;
		next.mode &= ~mdt_perm_kill_on_truncate(cr, &cur);
	}
	if ((valid & LW_SA_SIZE) && sa->size > MDT_MAX_FILE_SIZE)
		return -EFBIG;
	if (!(valid & ~(uint32_t)LW_SA_FH))
		goto out;

	in.mode = next.mode;
	in.uid = next.uid;
	in.gid = next.gid;
	if ((valid & LW_SA_SIZE) && sa->size != in.size) {
		uint64_t old = in.size;

		in.size = sa->size;
		in.data_version++;
		if (S_ISREG(in.mode) && (rc = cut_objects(t, &in, old)) != 0)
			return rc;
		/* The objects are cut to the new size: they hold no more than it. */
		if ((in.flags & MDT_IF_BLOCKS) && in.blocks > (in.size + 511) / 512)
			in.blocks = (in.size + 511) / 512;
		mdt_inode_touch(&in, MDT_T_MTIME, now);
		/* The bytes kept here are cut with the size, in the same transaction. */
		if (S_ISREG(in.mode) && (rc = mdt_dom_cut(t, in.ino, in.size)) != 0)
			return rc;
	}
	if (valid & LW_SA_ATIME_NOW) {
		mdt_inode_touch(&in, MDT_T_ATIME, now);
	} else if (valid & LW_SA_ATIME) {
		in.atime = sa->atime;
		in.atime_ns = sa->atime_ns;
	}
	if (valid & LW_SA_MTIME_NOW) {
		mdt_inode_touch(&in, MDT_T_MTIME, now);
	} else if (valid & LW_SA_MTIME) {
		in.mtime = sa->mtime;
		in.mtime_ns = sa->mtime_ns;
	}
	if (valid & LW_SA_CTIME) {
		in.ctime = sa->ctime;
		in.ctime_ns = sa->ctime_ns;
	} else {
		mdt_inode_touch(&in, MDT_T_CTIME, now);
	}
	rc = mdt_inode_put(t, &in);
	if (rc)
		return rc;
out:
	mdt_inode_attr(&in, out);
	return 0;
}

/* ACC_MODE(): what an open asks for. O_TRUNC asks for write as well. */
static int open_may(uint32_t open_flags)
{
	int may;

	switch (open_flags & O_ACCMODE) {
	case O_RDONLY:
		may = MDT_MAY_READ;
		break;
	case O_WRONLY:
		may = MDT_MAY_WRITE;
		break;
	default: /* O_RDWR, and 3, which Linux reads as both */
		may = MDT_MAY_READ | MDT_MAY_WRITE;
		break;
	}
	if (open_flags & O_TRUNC)
		may |= MDT_MAY_WRITE;
	return may;
}

int mdt_open(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
	     struct timespec now, struct lw_attr *out, struct loom_layout **layout_out)
{
	struct mdt_owner own;
	struct mdt_inode in;
	uint64_t old_size;
	int may = open_may(open_flags);
	int rc;

	if (layout_out)
		*layout_out = NULL;
	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	/* The client resolves symlinks; one reaching open is opened with O_NOFOLLOW semantics. */
	if (S_ISLNK(in.mode))
		return -ELOOP;
	if ((open_flags & O_DIRECTORY) && !S_ISDIR(in.mode))
		return -ENOTDIR;
	if (S_ISDIR(in.mode) && (may & MDT_MAY_WRITE))
		return -EISDIR;
	rc = mdt_may(cr, &in, may);
	if (rc)
		return rc;
	own = mdt_owner_of(&in);
	if ((open_flags & O_NOATIME) && !mdt_perm_owner_or_root(cr, &own))
		return -EPERM;
	old_size = in.size;

	if ((open_flags & O_TRUNC) && S_ISREG(in.mode)) {
		/* handle_truncate(): size 0, mtime and ctime now even if it was empty, and the
		 * privileges a non-root truncation removes. */
		if (in.size != 0)
			in.data_version++;
		in.size = 0;
		in.blocks = 0; /* every object is cut to nothing */
		if ((rc = cut_objects(t, &in, old_size)) != 0)
			return rc;
		in.mode &= ~mdt_perm_kill_on_truncate(cr, &own);
		mdt_inode_touch(&in, MDT_T_MTIME | MDT_T_CTIME, now);
		rc = mdt_dom_cut(t, ino, 0);
		if (rc == 0)
			rc = mdt_inode_put(t, &in);
		if (rc)
			return rc;
	}
	if (layout_out && S_ISREG(in.mode)) {
		rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, layout_out);
		if (rc == -ENODATA)
			rc = 0;
		if (rc)
			return rc;
	}
	mdt_inode_attr(&in, out);
	/* All of the file was on the MDS: its objects hold nothing for an O_TRUNC to cut. */
	if (layout_out && *layout_out && (*layout_out)->dom_size && old_size <= (*layout_out)->dom_size)
		out->flags |= LW_ATTR_F_OBJECTS_EMPTY;
	return 0;
}

int mdt_access(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint32_t mask)
{
	struct mdt_inode in;
	int rc = mdt_inode_get(t, ino, &in);

	/* R_OK, W_OK and X_OK have the values of MDT_MAY_READ, _WRITE and _EXEC. */
	if (rc == 0 && mask)
		rc = mdt_may(cr, &in, (int)mask);
	return rc;
}

int mdt_size_update(struct mdt_txn *t, uint64_t ino, uint32_t flags, uint64_t size, uint32_t epoch,
		    uint64_t carried, struct timespec mtime, uint64_t blocks, struct lw_attr *out)
{
	struct mdt_inode in;
	bool changed = false;
	int rc;

	if (flags & ~(LW_CL_SIZE | LW_CL_MTIME | LW_CL_BLOCKS | LW_CL_DATA))
		return -EINVAL;
	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	if ((flags & LW_CL_DATA) && S_ISREG(in.mode)) {
		/* The handle wrote: whatever its writes did, caches of the old bytes are stale. */
		in.data_version++;
		changed = true;
	}
	if (flags & LW_CL_SIZE) {
		if (!S_ISREG(in.mode))
			return -EINVAL;
		if (size > MDT_MAX_FILE_SIZE)
			return -EFBIG;
		/* Only grows: a close racing a truncate must not bring the old size back, nor may writes
		 * made before a truncation that cut the objects (an older epoch: those bytes are gone).
		 * Bytes the report carries itself are written now, whatever came before. */
		if (epoch < in.trunc_epoch)
			size = 0;
		if (carried > size)
			size = carried;
		if (size > in.size) {
			in.size = size;
			changed = true;
		}
	}
	if ((flags & LW_CL_BLOCKS) && S_ISREG(in.mode)) {
		in.blocks = blocks;
		in.flags |= MDT_IF_BLOCKS;
		changed = true;
	}
	if (flags & LW_CL_MTIME) {
		if (mtime.tv_nsec < 0 || !nsec_ok((uint32_t)mtime.tv_nsec))
			return -EINVAL;
		in.mtime = in.ctime = mtime.tv_sec;
		in.mtime_ns = in.ctime_ns = (uint32_t)mtime.tv_nsec;
		changed = true;
	}
	if (changed) {
		rc = mdt_inode_put(t, &in);
		if (rc)
			return rc;
	}
	mdt_inode_attr(&in, out);
	return 0;
}
