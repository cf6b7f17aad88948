/* The path API: names, attributes, xattrs, directories, layouts, targets. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/door.h"
#include "client/internal.h"
#include "client/path.h"
#include "common/util.h"

void attr_to_stat(const struct lw_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = a->ino;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)a->size;
	st->st_blksize = a->blksize ? a->blksize : 4096;
	st->st_blocks = (blkcnt_t)a->blocks;
	st->st_atim.tv_sec = a->atime;
	st->st_atim.tv_nsec = a->atime_ns;
	st->st_mtim.tv_sec = a->mtime;
	st->st_mtim.tv_nsec = a->mtime_ns;
	st->st_ctim.tv_sec = a->ctime;
	st->st_ctim.tv_nsec = a->ctime_ns;
}

static int do_stat(loom_fs *fs, const char *path, bool follow, struct stat *st)
{
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, follow, &attr);
	if (rc == 0) {
		files_pending_attr(fs, &attr);
		attr_to_stat(&attr, st);
	}
	return rc;
}

int loom_stat(loom_fs *fs, const char *path, struct stat *st)
{
	if (fs->door)
		return door_stat(fs, path, true, st);
	return do_stat(fs, path, true, st);
}

int loom_lstat(loom_fs *fs, const char *path, struct stat *st)
{
	if (fs->door)
		return door_stat(fs, path, false, st);
	return do_stat(fs, path, false, st);
}

/* Where a new entry named by path goes: its directory and its name. */
struct new_entry {
	struct loom_cred cr;
	uint64_t parent;
	char name[LOOM_NAME_MAX + 1];
	size_t len;
	bool trailing;
};

static int new_entry_at(loom_fs *fs, const char *path, struct new_entry *e)
{
	int rc;

	fs_cred(fs, &e->cr);
	rc = path_parent(fs, &e->cr, path, &e->parent, e->name, &e->len, &e->trailing);
	return rc == -EBUSY ? -EEXIST : rc; /* "/" already exists */
}

int loom_mkdir(loom_fs *fs, const char *path, mode_t mode)
{
	struct new_entry e;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_MKDIR, path, NULL, 0, mode, 0);
	rc = new_entry_at(fs, path, &e);
	return rc ? rc : mdc_mkdir(fs, &e.cr, e.parent, e.name, e.len, mode & 07777 & ~fs->umask, &attr,
			      NULL, NULL);
}

static int remove_name(loom_fs *fs, const char *path, uint16_t op)
{
	struct loom_cred cr;
	char name[LOOM_NAME_MAX + 1];
	uint64_t parent;
	size_t nlen;
	bool trailing;
	int rc;

	fs_cred(fs, &cr);
	rc = path_parent(fs, &cr, path, &parent, name, &nlen, &trailing);
	if (rc == -EBUSY)
		return op == LW_OP_MDS_RMDIR ? -EBUSY : -EISDIR;
	if (rc)
		return rc;
	if (trailing && op == LW_OP_MDS_UNLINK) {
		/* "file/" names a directory, or nothing. */
		struct lw_attr attr;
		rc = mdc_lookup(fs, &cr, parent, name, nlen, &attr);
		if (rc)
			return rc;
		return S_ISDIR(attr.mode) ? -EISDIR : -ENOTDIR;
	}
	return mdc_unlink(fs, &cr, op, parent, name, nlen, 0);
}

int loom_rmdir(loom_fs *fs, const char *path)
{
	if (fs->door)
		return door_path_op(fs, DOOR_OP_RMDIR, path, NULL, 0, 0, 0);
	return remove_name(fs, path, LW_OP_MDS_RMDIR);
}

int loom_unlink(loom_fs *fs, const char *path)
{
	if (fs->door)
		return door_path_op(fs, DOOR_OP_UNLINK, path, NULL, 0, 0, 0);
	return remove_name(fs, path, LW_OP_MDS_UNLINK);
}

int loom_rename(loom_fs *fs, const char *from, const char *to, unsigned int flags)
{
	struct loom_cred cr;
	char sname[LOOM_NAME_MAX + 1], dname[LOOM_NAME_MAX + 1];
	uint64_t sp, dp;
	size_t sl, dl;
	bool trailing;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_RENAME, from, to, flags, 0, 0);
	if (flags & ~(LOOM_RENAME_NOREPLACE | LOOM_RENAME_EXCHANGE))
		return -EINVAL;
	fs_cred(fs, &cr);
	rc = path_parent(fs, &cr, from, &sp, sname, &sl, &trailing);
	if (rc == 0)
		rc = path_parent(fs, &cr, to, &dp, dname, &dl, &trailing);
	if (rc == -EBUSY)
		return -EBUSY;
	if (rc)
		return rc;
	return mdc_rename(fs, &cr, sp, sname, sl, dp, dname, dl, flags);
}

int loom_link(loom_fs *fs, const char *from, const char *to)
{
	struct new_entry e;
	struct lw_attr src, attr;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_LINK, from, to, 0, 0, 0);
	fs_cred(fs, &e.cr);
	rc = path_resolve(fs, &e.cr, from, false, &src);
	if (rc == 0)
		rc = new_entry_at(fs, to, &e);
	return rc ? rc : mdc_link(fs, &e.cr, src.ino, e.parent, e.name, e.len, &attr);
}

int loom_symlink(loom_fs *fs, const char *target, const char *linkpath)
{
	struct new_entry e;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_SYMLINK, target, linkpath, 0, 0, 0);
	rc = new_entry_at(fs, linkpath, &e);
	return rc ? rc : mdc_symlink(fs, &e.cr, e.parent, e.name, e.len, target, strlen(target), &attr);
}

int loom_readlink(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len)
{
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return door_readlink(fs, path, buf, cap, len);
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, false, &attr);
	if (rc)
		return rc;
	if (!S_ISLNK(attr.mode))
		return -EINVAL;
	return mdc_readlink(fs, &cr, attr.ino, buf, cap, len);
}

static int setattr_path(loom_fs *fs, const char *path, struct lw_setattr *sa, struct lw_attr *out)
{
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	if (rc)
		return rc;
	sa->ino = attr.ino;
	/* A truncation takes in what this client wrote and has not reported yet (truncate after
	 * write): the MDS cuts the objects to the size it knows. */
	if ((sa->valid & LW_SA_SIZE) && (rc = files_report_ino(fs, sa->ino)) != 0)
		return rc;
	rc = mdc_setattr(fs, &cr, sa, out ? out : &attr);
	if (rc == 0 && (sa->valid & (LW_SA_MTIME | LW_SA_MTIME_NOW)))
		files_forget_mtime(fs, sa->ino);
	return rc;
}

int loom_chmod(loom_fs *fs, const char *path, mode_t mode)
{
	struct lw_setattr sa = { .valid = LW_SA_MODE, .mode = mode & 07777 };

	if (fs->door)
		return door_path_op(fs, DOOR_OP_CHMOD, path, NULL, 0, mode, 0);
	return setattr_path(fs, path, &sa, NULL);
}

int loom_chown(loom_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	struct lw_setattr sa = { 0 };

	if (fs->door)
		return door_path_op(fs, DOOR_OP_CHOWN, path, NULL, uid, gid, 0);
	if (uid != (uid_t)-1) {
		sa.valid |= LW_SA_UID;
		sa.uid = uid;
	}
	if (gid != (gid_t)-1) {
		sa.valid |= LW_SA_GID;
		sa.gid = gid;
	}
	if (!sa.valid)
		sa.valid = LW_SA_CTIME; /* chown(-1, -1) still checks the path and touches ctime */
	if (sa.valid == LW_SA_CTIME) {
		struct timespec now = clock_real();
		sa.ctime = now.tv_sec;
		sa.ctime_ns = (uint32_t)now.tv_nsec;
	}
	return setattr_path(fs, path, &sa, NULL);
}

int loom_utimens(loom_fs *fs, const char *path, const struct timespec times[2])
{
	struct lw_setattr sa = { 0 };

	if (fs->door)
		return door_utimens(fs, path, times);
	if (!times) {
		sa.valid = LW_SA_ATIME_NOW | LW_SA_MTIME_NOW;
	} else {
		for (int i = 0; i < 2; i++) {
			long ns = times[i].tv_nsec;
			if (ns == UTIME_OMIT)
				continue;
			if (ns != UTIME_NOW && (ns < 0 || ns > 999999999))
				return -EINVAL;
			if (i == 0) {
				sa.valid |= ns == UTIME_NOW ? LW_SA_ATIME_NOW : LW_SA_ATIME;
				sa.atime = times[0].tv_sec;
				sa.atime_ns = ns == UTIME_NOW ? 0 : (uint32_t)ns;
			} else {
				sa.valid |= ns == UTIME_NOW ? LW_SA_MTIME_NOW : LW_SA_MTIME;
				sa.mtime = times[1].tv_sec;
				sa.mtime_ns = ns == UTIME_NOW ? 0 : (uint32_t)ns;
			}
		}
		if (!sa.valid)
			return 0;
	}
	return setattr_path(fs, path, &sa, NULL);
}

int loom_truncate(loom_fs *fs, const char *path, off_t size)
{
	struct lw_setattr sa = { .valid = LW_SA_SIZE };
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_TRUNCATE, path, NULL, 0, 0, size);
	if (size < 0)
		return -EINVAL;
	sa.size = (uint64_t)size;
	/* The MDS cuts the objects before it answers (architecture.md, "Truncation"). */
	rc = setattr_path(fs, path, &sa, &attr);
	if (rc == 0)
		files_truncated(fs, &attr);
	return rc;
}

int loom_statfs(loom_fs *fs, struct statvfs *st)
{
	struct lw_statfs_rep rep;
	struct loom_cred cr;
	int rc;

	if (fs->door)
		return door_statfs(fs, st);
	fs_cred(fs, &cr);
	rc = mdc_statfs(fs, &cr, &rep);
	if (rc)
		return rc;
	memset(st, 0, sizeof(*st));
	st->f_bsize = rep.osts.bsize;
	st->f_frsize = rep.osts.bsize;
	st->f_blocks = rep.osts.blocks;
	st->f_bfree = rep.osts.bfree;
	st->f_bavail = rep.osts.bavail;
	/* Inodes live on the MDT, as on Lustre. */
	st->f_files = rep.mdt.files;
	st->f_ffree = rep.mdt.ffree;
	st->f_favail = rep.mdt.ffree;
	st->f_namemax = LOOM_NAME_MAX;
	return 0;
}

/* ---- xattrs ---- */

static int xattr_target(loom_fs *fs, const char *path, struct loom_cred *cr, uint64_t *ino)
{
	struct lw_attr attr;
	int rc;

	fs_cred(fs, cr);
	rc = path_resolve(fs, cr, path, true, &attr);
	if (rc == 0)
		*ino = attr.ino;
	return rc;
}

int loom_getxattr(loom_fs *fs, const char *path, const char *name, void *buf, size_t cap,
		  size_t *len)
{
	struct loom_cred cr;
	uint64_t ino;
	int rc;

	if (fs->door)
		return door_getxattr(fs, path, name, buf, cap, len);
	rc = xattr_target(fs, path, &cr, &ino);
	return rc ? rc : mdc_getxattr(fs, &cr, LW_OP_MDS_GETXATTR, ino, name, buf, cap, len);
}

int loom_setxattr(loom_fs *fs, const char *path, const char *name, const void *value,
		  size_t len, int flags)
{
	struct loom_cred cr;
	uint64_t ino;
	int rc;

	if (fs->door)
		return door_setxattr(fs, path, name, value, len, flags);
	if (flags & ~(LOOM_XATTR_CREATE | LOOM_XATTR_REPLACE))
		return -EINVAL;
	rc = xattr_target(fs, path, &cr, &ino);
	return rc ? rc : mdc_setxattr(fs, &cr, ino, name, value, len, (uint32_t)flags);
}

int loom_listxattr(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len)
{
	struct loom_cred cr;
	uint64_t ino;
	int rc;

	if (fs->door)
		return door_listxattr(fs, path, buf, cap, len);
	rc = xattr_target(fs, path, &cr, &ino);
	return rc ? rc : mdc_getxattr(fs, &cr, LW_OP_MDS_LISTXATTR, ino, NULL, buf, cap, len);
}

int loom_removexattr(loom_fs *fs, const char *path, const char *name)
{
	struct loom_cred cr;
	uint64_t ino;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_REMOVEXATTR, path, name, 0, 0, 0);
	rc = xattr_target(fs, path, &cr, &ino);
	return rc ? rc : mdc_removexattr(fs, &cr, ino, name);
}

/* ---- directories ---- */

static int dir_fetch(loom_dir *d)
{
	struct lw_readdir_rep rep;
	int rc;

	free(d->page);
	d->page = NULL;
	rc = mdc_readdir(d->fs, &d->cred, d->ino, d->cookie, 64u << 10, false, &d->page, &d->page_len,
			 NULL, NULL);
	if (rc)
		return rc;
	memcpy(&rep, d->page, sizeof(rep));
	d->left = rep.count;
	d->eof = rep.eof != 0;
	lw_rd_init(&d->rd, (uint8_t *)d->page + sizeof(rep), d->page_len - sizeof(rep));
	if (rep.count == 0 && !d->eof)
		return -EPROTO; /* an empty page that is not the end would loop forever */
	return 0;
}

int loom_opendir(loom_fs *fs, const char *path, loom_dir **out)
{
	struct lw_attr attr;
	loom_dir *d;
	int rc;

	if (fs->door)
		return door_opendir(fs, path, out);
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->fs = fs;
	fs_cred(fs, &d->cred);
	rc = path_resolve(fs, &d->cred, path, true, &attr);
	if (rc == 0 && !S_ISDIR(attr.mode))
		rc = -ENOTDIR;
	if (rc == 0) {
		d->ino = attr.ino;
		rc = dir_fetch(d); /* surfaces -EACCES here, as opendir(3) does */
	}
	if (rc) {
		loom_closedir(d);
		return rc;
	}
	*out = d;
	return 0;
}

int loom_readdir(loom_dir *d, struct loom_dirent *ent)
{
	struct lw_dirent de;
	struct lw_attr unused;
	const char *name;
	int rc;

	if (d->fs->door)
		return door_readdir(d, ent);
	while (d->left == 0) {
		if (d->eof)
			return 0;
		rc = dir_fetch(d);
		if (rc)
			return rc;
	}
	rc = lw_readdir_next(&d->rd, (uint8_t *)d->page + sizeof(struct lw_readdir_rep), false, &de,
			     &name, &unused);
	if (rc)
		return rc;
	d->left--;
	d->cookie = de.cookie;
	ent->ino = de.ino;
	ent->type = (unsigned char)de.type;
	memcpy(ent->name, name, de.namelen);
	ent->name[de.namelen] = '\0';
	return 1;
}

void loom_closedir(loom_dir *d)
{
	if (d && d->fs->door) {
		door_closedir(d);
		return;
	}
	if (!d)
		return;
	free(d->page);
	free(d);
}

/* ---- layouts ---- */

void loom_layout_free(struct loom_layout *layout)
{
	free(layout);
}

int loom_getlayout(loom_fs *fs, const char *path, struct loom_layout **out)
{
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return door_getlayout(fs, path, out);
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	return rc ? rc : mdc_getlayout(fs, &cr, attr.ino, out);
}

/*
 * -EBUSY from the MDS means the file is open somewhere. It may have been closed on a mount a
 * moment ago: FUSE sends the release after close(2) has returned. A short wait (about 1.5 s in
 * all) lets that land, so that `cp f /mnt/loom/x; loom migrate /mnt/loom/x` works; a file a
 * process really holds open stays -EBUSY.
 */
#define BUSY_FIRST_PAUSE_MS 25
#define BUSY_LAST_PAUSE_MS  800

/* After an answer rc: true (having slept) if it was -EBUSY and it is worth asking again. */
static bool wait_out_busy(int rc, long *pause_ms)
{
	if (rc != -EBUSY || *pause_ms > BUSY_LAST_PAUSE_MS)
		return false;
	sleep_ms(*pause_ms);
	*pause_ms *= 2;
	return true;
}

int loom_swap_layouts(loom_fs *fs, const char *path, const char *tmp_path, const struct stat *expect)
{
	struct lw_attr a, b;
	struct loom_cred cr;
	long pause_ms = BUSY_FIRST_PAUSE_MS;
	int rc;

	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, false, &a);
	if (rc == 0)
		rc = path_resolve(fs, &cr, tmp_path, false, &b);
	if (rc)
		return rc;
	do {
		rc = mdc_swap_layouts(fs, &cr, a.ino, b.ino, (uint64_t)expect->st_size,
				      expect->st_mtim.tv_sec, (uint32_t)expect->st_mtim.tv_nsec);
	} while (wait_out_busy(rc, &pause_ms));
	return rc;
}

int loom_swap_layouts_copy(loom_fs *fs, const char *path, loom_file *copy, const struct stat *expect)
{
	struct loom_layout *l = NULL;
	struct lw_open_rep orep;
	struct lw_attr a, attr;
	struct loom_cred cr;
	uint64_t owner, tmp;
	long pause_ms = BUSY_FIRST_PAUSE_MS;
	int rc, crc;

	if (!copy)
		return -EBADF;
	fs_cred(fs, &cr);
	owner = copy->obj_owner;
	tmp = copy->ino;
	/* The copy's data durable and its size at the MDS (a swap wants a whole copy); then a
	 * read-only handle holds it through the swap, since the MDS swaps under no writer and the
	 * close of its last handle would release it. */
	rc = loom_fsync(copy);
	if (rc == 0)
		rc = mdc_open(fs, &cr, tmp, O_RDONLY, NULL, &orep, &l, NULL);
	free(l);
	crc = loom_close(copy);
	if (rc)
		return rc; /* its last handle closed: the MDS released it */
	rc = crc;
	/* The file the copy was made for (its objects are tagged as that inode's), unchanged. */
	if (rc == 0)
		rc = path_resolve(fs, &cr, path, false, &a);
	if (rc == 0 && (a.ino != owner || (uint64_t)expect->st_ino != owner))
		rc = -EAGAIN;
	if (rc == 0) {
		do {
			rc = mdc_swap_layouts(fs, &cr, a.ino, tmp, (uint64_t)expect->st_size,
					      expect->st_mtim.tv_sec, (uint32_t)expect->st_mtim.tv_nsec);
		} while (wait_out_busy(rc, &pause_ms));
	}
	/* Waited for, so that the copy (now holding the old objects, or its own after a failure)
	 * is released before this returns, unless readers of the file still read the old objects.
	 * Should the close fail, the end of this client's session releases it. */
	mdc_close(fs, &cr, LW_OP_MDS_CLOSE, tmp, orep.handle, 0, 0, 0, (struct timespec){ 0 }, 0,
		  NULL, &attr);
	return rc;
}

int loom_setlayout(loom_fs *fs, const char *path, const struct loom_layout *layout)
{
	if (fs->door)
		return door_setlayout(fs, path, layout);
	struct loom_layout *res = NULL;
	struct loom_cred cr;
	struct lw_attr attr;
	long pause_ms = BUSY_FIRST_PAUSE_MS;
	int rc;

	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	if (rc == -ENOENT) {
		/* `lfs setstripe FILE` on a new name creates the file with that layout. */
		struct lw_create_rep crep;
		struct new_entry e;

		rc = new_entry_at(fs, path, &e);
		if (rc)
			return rc;
		if (e.trailing)
			return -ENOENT;
		return mdc_create(fs, &e.cr, e.parent, e.name, e.len, S_IFREG | (0666 & ~fs->umask), 0, LW_CR_EXCL, 0, layout,
				  &crep, NULL);
	}
	if (rc)
		return rc;
	do {
		rc = mdc_setlayout(fs, &cr, attr.ino, 0, layout, &res);
		free(res);
		res = NULL;
	} while (wait_out_busy(rc, &pause_ms));
	return rc;
}

int loom_dellayout(loom_fs *fs, const char *path)
{
	struct loom_layout *res = NULL;
	struct loom_cred cr;
	struct lw_attr attr;
	int rc;

	if (fs->door)
		return door_path_op(fs, DOOR_OP_DELLAYOUT, path, NULL, 0, 0, 0);
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, true, &attr);
	if (rc)
		return rc;
	if (!S_ISDIR(attr.mode))
		return -ENOTDIR;
	rc = mdc_setlayout(fs, &cr, attr.ino, LW_SL_DELETE, NULL, &res);
	free(res);
	return rc;
}

/* ---- targets ---- */

static void statfs_to_statvfs(const struct lw_statfs *sf, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = sf->bsize;
	st->f_frsize = sf->bsize;
	st->f_blocks = sf->blocks;
	st->f_bfree = sf->bfree;
	st->f_bavail = sf->bavail;
	st->f_files = sf->files;
	st->f_ffree = sf->ffree;
	st->f_favail = sf->ffree;
	st->f_namemax = sf->namemax;
}

int loom_ost_set_active(loom_fs *fs, uint32_t idx, bool active)
{
	struct loom_cred cr;

	fs_cred(fs, &cr);
	return mdc_ost_admin(fs, &cr, idx, active ? 0 : LW_TGT_DEACTIVATED, active ? LW_TGT_DEACTIVATED : 0);
}

int loom_ost_remove(loom_fs *fs, uint32_t idx, uint32_t flags, uint64_t *files, uint64_t *objects)
{
	struct lw_ost_remove_rep rep = { 0 };
	struct loom_cred cr;
	int rc;

	_Static_assert(LOOM_OST_REMOVE_DRYRUN == LW_OSTRM_DRYRUN && LOOM_OST_REMOVE_FORCE == LW_OSTRM_FORCE,
		       "the API's flags are the wire's");
	if (flags & ~(LOOM_OST_REMOVE_DRYRUN | LOOM_OST_REMOVE_FORCE))
		return -EINVAL;
	fs_cred(fs, &cr);
	rc = mdc_ost_remove(fs, &cr, idx, flags, &rep);
	if (rc == -EBUSY && !(flags & LOOM_OST_REMOVE_DRYRUN))
		/* An error reply carries no body: the count, for the message, from a dry run. */
		(void)mdc_ost_remove(fs, &cr, idx, LOOM_OST_REMOVE_DRYRUN, &rep);
	if (files)
		*files = rep.files;
	if (objects)
		*objects = rep.objects;
	return rc;
}

int loom_pool_ctl(loom_fs *fs, int cmd, const char *name, uint32_t ost_idx)
{
	struct loom_cred cr;

	if (cmd < LOOM_POOL_NEW || cmd > LOOM_POOL_REMOVE || !name || !name[0])
		return -EINVAL;
	fs_cred(fs, &cr);
	return mdc_pool(fs, &cr, (uint32_t)cmd, name, ost_idx, NULL, NULL);
}

int loom_pool_list(loom_fs *fs, const char *name, struct loom_pool **out, uint32_t *count)
{
	struct loom_cred cr;
	struct loom_pool *p;
	void *body = NULL;
	uint32_t len = 0, n = 0;
	size_t off = 0;
	int rc;

	fs_cred(fs, &cr);
	rc = mdc_pool(fs, &cr, LW_POOL_LIST, name ? name : "", 0, &body, &len);
	if (rc)
		return rc;
	/* Count and check the entries, then lay them out: the structs, then every index array. */
	while (off < len) {
		struct lw_pool_ent e;

		if (len - off < sizeof(e)) {
			free(body);
			return -EPROTO;
		}
		memcpy(&e, (uint8_t *)body + off, sizeof(e));
		if (e.nosts > (len - off - sizeof(e)) / 4 || !memchr(e.name, '\0', sizeof(e.name))) {
			free(body);
			return -EPROTO;
		}
		off += sizeof(e) + (size_t)e.nosts * 4;
		n++;
	}
	p = malloc(n * sizeof(*p) + len + 1);
	if (!p) {
		free(body);
		return -ENOMEM;
	}
	off = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct lw_pool_ent e;
		uint32_t *osts = (uint32_t *)((uint8_t *)(p + n) + off + sizeof(e));

		memcpy(&e, (uint8_t *)body + off, sizeof(e));
		memset(p[i].name, 0, sizeof(p[i].name));
		memcpy(p[i].name, e.name, strnlen(e.name, sizeof(p[i].name) - 1));
		p[i].nosts = e.nosts;
		p[i].osts = osts;
		memcpy(osts, (uint8_t *)body + off + sizeof(e), (size_t)e.nosts * 4);
		off += sizeof(e) + (size_t)e.nosts * 4;
	}
	free(body);
	*out = p;
	*count = n;
	return 0;
}

void loom_pool_list_free(struct loom_pool *pools)
{
	free(pools);
}

int loom_targets(loom_fs *fs, struct loom_target **out, uint32_t *count)
{
	struct lw_statfs_rep mrep;
	struct loom_target *t;
	struct loom_cred cr;
	struct rpc_wait w;
	struct rpc_call *calls;
	struct lw_ost_io *bodies;
	void *table = NULL;
	uint32_t n, gen;
	int rc;

	fs_cred(fs, &cr);
	rc = mdc_statfs(fs, &cr, &mrep);
	if (rc == 0)
		rc = mdc_ost_table(fs, &table, &n, &gen);
	if (rc)
		return rc;
	t = calloc(n + 1, sizeof(*t));
	calls = calloc(n ? n : 1, sizeof(*calls));
	bodies = calloc(n ? n : 1, sizeof(*bodies));
	if (!t || !calls || !bodies) {
		rc = -ENOMEM;
		goto out;
	}
	t[0].kind = LOOM_TGT_MDT;
	pthread_mutex_lock(&fs->addr_lock); /* the address of the failover list answering now */
	snprintf(t[0].addr, sizeof(t[0].addr), "%s:%u", fs->mds_addrs.addr[fs->mds_cur].host,
		 fs->mds_addrs.addr[fs->mds_cur].port);
	pthread_mutex_unlock(&fs->addr_lock);
	statfs_to_statvfs(&mrep.mdt, &t[0].st);

	/* Every OST is asked at once; one that does not answer is reported inactive. */
	rpc_wait_init(&w);
	for (uint32_t i = 0; i < n; i++) {
		struct lw_ost_entry e;
		struct rpc_conn *c;

		memcpy(&e, (uint8_t *)table + sizeof(struct lw_ost_table_rep) + i * sizeof(e), sizeof(e));
		t[i + 1].kind = LOOM_TGT_OST;
		t[i + 1].idx = e.idx;
		memcpy(t[i + 1].uuid, e.uuid, sizeof(t[i + 1].uuid));
		snprintf(t[i + 1].addr, sizeof(t[i + 1].addr), "%s:%u", e.host, e.port);
		if (e.state & LW_TGT_READONLY)
			t[i + 1].flags |= LOOM_TGTF_READONLY;
		if (e.state & LW_TGT_NOCREATE)
			t[i + 1].flags |= LOOM_TGTF_NOCREATE;
		if (e.state & LW_TGT_DEACTIVATED)
			t[i + 1].flags |= LOOM_TGTF_DEACTIVATED;
		bodies[i].ost_idx = e.idx;
		fs_call_init(fs, &calls[i], LW_OP_OST_STATFS, &bodies[i], sizeof(bodies[i]));
		calls[i].flags |= RPC_NOWAIT; /* df reports an OST that is away, not waits for it */
		if (e.state & LW_TGT_INACTIVE) {
			/* The MDS has not heard from it (its OSS died, or is cut off): not dialled, which
			 * would make an address that does not answer wait for the connect timeout, and
			 * a connection that then waits for it for the recovery window. */
			calls[i].status = -EIO;
			continue;
		}
		if (fs_ost_conn(fs, e.idx, &c) != 0) {
			calls[i].status = -EIO;
			continue;
		}
		rpc_submit(c, &calls[i], &w);
	}
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
	for (uint32_t i = 0; i < n; i++) {
		struct lw_statfs sf;

		if (calls[i].status == 0 && calls[i].rbody_len == sizeof(sf)) {
			memcpy(&sf, calls[i].rbody, sizeof(sf));
			statfs_to_statvfs(&sf, &t[i + 1].st);
		} else {
			t[i + 1].flags |= LOOM_TGTF_INACTIVE;
		}
		rpc_call_release(&calls[i]);
	}
	*out = t;
	*count = n + 1;
	t = NULL;
out:
	free(t);
	free(calls);
	free(bodies);
	free(table);
	return rc;
}
