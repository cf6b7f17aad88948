/* Names and attributes: lookup, getattr, setattr, mknod, mkdir, unlink, rmdir, symlink, rename,
 * link, readlink, access, statfs. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "fuse/lmount.h"

/* The attributes of name in parent if it is a file made here under the exclusive lease the mount
 * holds now, closed since, and nothing changed it through this mount since its create (a
 * rename, chmod, link, open for writing... move the count): loom_ll_made_attr keeps what the MDS
 * answered at its create or last close. */
static bool made_attr(struct lmount *m, uint64_t parent, const char *name, struct loom_ll_attr *a)
{
	uint64_t ino, gen;

	return lm_lease_made(m, parent, name, &ino, &gen) && gen == lm_attr_change_count(m) &&
	       loom_ll_made_attr(m->fs, ino, a) == 0;
}

static void lm_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	struct loom_ll_attr a;
	int rc;

	lm_cred(req, &cr);
	if (lm_lease_absent(m, parent, name)) {
		rc = -ENOENT; /* the directory's names are known, under a lease */
	} else if (made_attr(m, parent, name, &a)) {
		rc = 0; /* a file made here, which nobody else can have changed */
	} else if (!lm_sa_lookup(m, &cr, parent, name, &a)) {
		rc = loom_ll_lookup(m->fs, &cr, parent, name, &a);
		lm_sa_looked_up(m, parent, rc);
		if (rc == -ENOENT)
			lm_lease_missed(m, &cr, parent);
	} else {
		rc = 0;
	}
	if (rc == -ENOENT && m->opts.negative_timeout > 0) {
		/* A negative entry: the kernel may remember the name is absent. */
		struct fuse_entry_param e = { .ino = 0, .entry_timeout = m->opts.negative_timeout };
		LM_REPLY(fuse_reply_entry(req, &e));
		return;
	}
	lm_reply_entry(req, rc, parent, name, &a);
}

static void lm_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	LM_COUNTED(req);
	(void)nlookup;
	lm_forget_inode(lm_of(req), ino);
	LM_REPLY(fuse_reply_none(req));
}

static void lm_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	LM_COUNTED(req);
	for (size_t i = 0; i < count; i++)
		lm_forget_inode(lm_of(req), forgets[i].ino);
	LM_REPLY(fuse_reply_none(req));
}

/*
 * The root, which umount(8) stats: once its attributes were read, a getattr of it does not wait
 * for an MDS that is away or hung, and the attributes last read answer then (stale, and better
 * than a wait that hangs umount).
 */
static int root_getattr(struct lmount *m, const struct loom_cred *cr, struct stat *st)
{
	struct loom_ll_attr a;
	bool known, was;
	int rc;

	pthread_mutex_lock(&m->root_lock);
	known = m->root_known;
	pthread_mutex_unlock(&m->root_lock);
	was = loom_ll_nowait(known);
	rc = loom_ll_getattr(m->fs, cr, FUSE_ROOT_ID, &a);
	loom_ll_nowait(was);
	pthread_mutex_lock(&m->root_lock);
	if (rc == 0) {
		m->root_st = a.st;
		m->root_known = true;
		*st = a.st;
	} else if (rc == -EIO && known && loom_ll_mds_away(m->fs)) {
		*st = m->root_st;
		rc = 0;
	}
	pthread_mutex_unlock(&m->root_lock);
	return rc;
}

/* The attributes of a file made behind, which nobody else can have changed (loom_ll_attr_own):
 * nothing else changed through this mount since its create, and its directory's exclusive lease
 * has stood since. */
static bool own_attr(struct lmount *m, uint64_t ino, struct stat *st)
{
	uint64_t gen, parent, lease_gen;

	return loom_ll_attr_own(m->fs, ino, st, &gen, &parent, &lease_gen) == 0 &&
	       gen == lm_attr_change_count(m) && lm_lease_excl_held(m, parent, lease_gen);
}

static void lm_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	uint64_t max_age = (uint64_t)(m->opts.attr_timeout * 1e9);
	struct loom_cred cr;
	struct loom_ll_attr a;
	struct lm_lease_mark mark;
	struct stat st;
	int rc;

	if (fi && fi->fh) {
		loom_file *f = NULL;

		rc = lm_file(req, fi, &f);
		/* Through an open file: its writes not yet reported count. The attributes the open
		 * brought answer while the kernel could have cached them itself (attr_timeout) and
		 * nothing changed through this mount since (a program's fstat after its read, which
		 * the kernel sends because the read made the cached atime stale). */
		if (rc == 0 && (loom_file_tag(f) != lm_change_count(m) ||
				loom_file_attr_recent(f, max_age, &st) != 0) && !own_attr(m, ino, &st))
			rc = loom_fstat(f, &st);
	} else if (loom_ll_attr_recent(m->fs, ino, max_age, lm_change_count(m), &st) == 0) {
		/* fstat(2) comes without the handle: any handle open here serves as well. */
		rc = 0;
	} else if (own_attr(m, ino, &st)) {
		/* A file made behind, its writer's fstat (np.save's, after its header). */
		rc = 0;
	} else if (lm_lease_dir_attr(m, ino, &st, &mark)) {
		/* A directory leased exclusively: its attributes change only through this mount. */
		rc = 0;
	} else {
		lm_cred(req, &cr);
		if (ino == FUSE_ROOT_ID) {
			rc = root_getattr(m, &cr, &st);
		} else {
			rc = loom_ll_getattr(m->fs, &cr, ino, &a);
			st = a.st;
		}
		if (rc == 0)
			lm_lease_dir_seen(m, ino, &st, &mark);
	}
	lm_reply_attr(req, rc, &st);
}

static void lm_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	loom_file *f = NULL;
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_setattr sa = { 0 };
	struct loom_cred cr;
	struct loom_ll_attr a;
	int rc;

	if (to_set & FUSE_SET_ATTR_MODE) {
		sa.valid |= LOOM_SET_MODE;
		sa.mode = attr->st_mode;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		sa.valid |= LOOM_SET_UID;
		sa.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		sa.valid |= LOOM_SET_GID;
		sa.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		sa.valid |= LOOM_SET_SIZE;
		sa.size = attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
		sa.valid |= LOOM_SET_ATIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_ATIME) {
		sa.valid |= LOOM_SET_ATIME;
		sa.atime = attr->st_atim;
	}
	if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
		sa.valid |= LOOM_SET_MTIME_NOW;
	} else if (to_set & FUSE_SET_ATTR_MTIME) {
		sa.valid |= LOOM_SET_MTIME;
		sa.mtime = attr->st_mtim;
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		sa.valid |= LOOM_SET_CTIME;
		sa.ctime = attr->st_ctim;
	}
	lm_cred(req, &cr);
	rc = fi && fi->fh ? lm_file(req, fi, &f) : 0;
	if (rc == 0)
		rc = loom_ll_setattr(m->fs, &cr, ino, &sa, f, &a);
	/* This mount's own truncation: the kernel cut its pages itself, which hold the new data
	 * unless someone else changed the file before it. */
	if (rc == 0 && (sa.valid & LOOM_SET_SIZE))
		lm_data_changed(m, ino, a.data_version);
	lm_sa_changed(m);
	lm_reply_attr(req, rc, &a.st);
}

static void lm_readlink(fuse_req_t req, fuse_ino_t ino)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	char buf[LOOM_SYMLINK_MAX + 1];
	struct loom_cred cr;
	size_t len;
	int rc;

	lm_cred(req, &cr);
	rc = loom_ll_readlink(m->fs, &cr, ino, buf, LOOM_SYMLINK_MAX, &len);
	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	buf[len < LOOM_SYMLINK_MAX ? len : LOOM_SYMLINK_MAX] = '\0';
	LM_REPLY(fuse_reply_readlink(req, buf));
}

static void lm_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	struct loom_ll_attr a;

	int rc;

	lm_cred(req, &cr);
	lm_entries_begin(m, parent, 0);
	rc = lm_changed(m, loom_ll_mknod(m->fs, &cr, parent, name, mode, rdev, &a));
	lm_entries_end(m, rc, 0, NULL, parent, name, rc ? 0 : IFTODT(a.st.st_mode) | LM_NAME_MADE);
	lm_reply_entry(req, rc, parent, name, &a);
}

static void lm_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	struct loom_ll_attr a;

	int rc;

	lm_cred(req, &cr);
	lm_entries_begin(m, parent, 0);
	rc = lm_changed(m, lm_mkdir_leased(m, &cr, parent, name, mode, &a));
	lm_entries_end(m, rc, 0, NULL, parent, name, rc ? 0 : IFTODT(a.st.st_mode) | LM_NAME_MADE);
	lm_reply_entry(req, rc, parent, name, &a);
}

static void lm_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct lm_lease_mark mark;
	struct loom_cred cr;
	struct stat dir;
	uint64_t ino = 0;
	bool behind = false;
	int rc = -EAGAIN;

	lm_cred(req, &cr);
	lm_entries_begin(m, parent, 0);
	/* Under an exclusive lease the name is known to be a file's: answered here, sent behind. */
	if (lm_lease_unlink_behind(m, parent, name, &dir, &mark)) {
		struct lm_lease_check still = { m, parent, name, true };

		/* What is kept of a file made here goes with its name (made.c). */
		if ((ino = mark.made_ino) != 0)
			loom_ll_made_forget(m->fs, ino);
		rc = loom_ll_unlink_behind(m->fs, &cr, parent, &dir, name, lm_lease_still, &still);
		behind = rc == 0;
	}
	if (rc == -EAGAIN)
		rc = loom_ll_unlink(m->fs, &cr, parent, name);
	/* Sent behind, the one name of a file made here with no handle open here (whose own
	 * attributes would still say one link): no other inode's attributes change, and what is
	 * kept of theirs stays (listings fetched before go stale). */
	if (behind && ino && lm_handles_wait(m, ino, 0))
		lm_sa_wrote(m);
	else
		rc = lm_changed(m, rc);
	lm_entries_end(m, rc, parent, name, 0, NULL, 0);
	if (behind)
		lm_lease_behind_done(m, parent, &mark);
	lm_reply_err(req, rc);
}

static void lm_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	int rc;

	lm_cred(req, &cr);
	lm_entries_begin(m, parent, 0);
	rc = lm_changed(m, loom_ll_rmdir(m->fs, &cr, parent, name));
	lm_entries_end(m, rc, parent, name, 0, NULL, 0);
	lm_reply_err(req, rc);
}

static void lm_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	struct loom_ll_attr a;

	int rc;

	lm_cred(req, &cr);
	lm_entries_begin(m, parent, 0);
	rc = lm_changed(m, loom_ll_symlink(m->fs, &cr, link, parent, name, &a));
	lm_entries_end(m, rc, 0, NULL, parent, name, rc ? 0 : IFTODT(a.st.st_mode) | LM_NAME_MADE);
	lm_reply_entry(req, rc, parent, name, &a);
}

static void lm_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	unsigned int lflags = 0;
	int rc;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		lm_reply_err(req, EINVAL); /* RENAME_WHITEOUT: overlayfs only */
		return;
	}
	if (flags & RENAME_NOREPLACE)
		lflags |= LOOM_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		lflags |= LOOM_RENAME_EXCHANGE;
	lm_cred(req, &cr);
	lm_entries_begin(m, parent, newparent == parent ? 0 : newparent);
	rc = lm_changed(m, loom_ll_rename(m->fs, &cr, parent, name, newparent, newname, lflags));
	/* An exchange keeps both names where they were. */
	if (lflags & LOOM_RENAME_EXCHANGE) {
		lm_entries_end(m, rc, parent, NULL, newparent == parent ? 0 : newparent, NULL, 0);
		lm_lease_untype(m, parent, name);
		lm_lease_untype(m, newparent, newname);
	} else
		lm_entries_end(m, rc, parent, name, newparent, newname, 0);
	lm_reply_err(req, rc);
}

static void lm_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	struct loom_ll_attr a;

	int rc;

	lm_cred(req, &cr);
	lm_entries_begin(m, newparent, 0);
	lm_lease_linked(m); /* before: the new name may be reached from then on */
	rc = lm_changed(m, loom_ll_link(m->fs, &cr, ino, newparent, newname, &a));
	lm_entries_end(m, rc, 0, NULL, newparent, newname, rc ? 0 : IFTODT(a.st.st_mode));
	lm_reply_entry(req, rc, newparent, newname, &a);
}

static void lm_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	LM_INTERRUPTIBLE(req);
	struct loom_cred cr;

	lm_cred(req, &cr);
	lm_reply_err(req, loom_ll_access(lm_of(req)->fs, &cr, ino, mask));
}

static void lm_statfs(fuse_req_t req, fuse_ino_t ino)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct statvfs st;
	bool known, was;
	int rc;

	(void)ino;
	/* umount(8) asks too: as for the root's getattr, the figures last read answer while the
	 * MDS is away or hung. */
	pthread_mutex_lock(&m->root_lock);
	known = m->statfs_known;
	pthread_mutex_unlock(&m->root_lock);
	was = loom_ll_nowait(known);
	rc = loom_statfs(m->fs, &st);
	loom_ll_nowait(was);
	pthread_mutex_lock(&m->root_lock);
	if (rc == 0) {
		m->statfs_st = st;
		m->statfs_known = true;
	} else if (rc == -EIO && known && loom_ll_mds_away(m->fs)) {
		st = m->statfs_st;
		rc = 0;
	}
	pthread_mutex_unlock(&m->root_lock);
	if (rc)
		lm_reply_err(req, rc);
	else
		LM_REPLY(fuse_reply_statfs(req, &st));
}

void lm_entry_ops(struct fuse_lowlevel_ops *ops)
{
	ops->lookup = lm_lookup;
	ops->forget = lm_forget;
	ops->forget_multi = lm_forget_multi;
	ops->getattr = lm_getattr;
	ops->setattr = lm_setattr;
	ops->readlink = lm_readlink;
	ops->mknod = lm_mknod;
	ops->mkdir = lm_mkdir;
	ops->unlink = lm_unlink;
	ops->rmdir = lm_rmdir;
	ops->symlink = lm_symlink;
	ops->rename = lm_rename;
	ops->link = lm_link;
	ops->access = lm_access;
	ops->statfs = lm_statfs;
}
