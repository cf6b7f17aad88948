/* The inode-level API (loom_ll.h): what the FUSE mount calls. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/internal.h"
#include "common/util.h"
#include "loom/loom_ll.h"

void attr_to_ll(const struct lw_attr *attr, struct loom_ll_attr *a)
{
	attr_to_stat(attr, &a->st);
	a->data_version = attr->data_version;
	a->name_version = attr->name_version;
	a->dir_moves = 0;
}

/* Attributes for the caller: what the MDS said, with this client's unreported writes. */
static int stat_reply(loom_fs *fs, int rc, struct lw_attr *attr, struct loom_ll_attr *a)
{
	if (rc == 0 && a) {
		fs_note_attr(fs, attr);
		files_pending_attr(fs, attr);
		attr_to_ll(attr, a);
	}
	return rc;
}

int loom_ll_lookup(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		   struct loom_ll_attr *a)
{
	struct lw_attr attr;

	return stat_reply(fs, mdc_lookup(fs, cr, parent, name, strlen(name), &attr), &attr, a);
}

int loom_ll_getattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_ll_attr *a)
{
	struct lw_attr attr;

	return stat_reply(fs, mdc_getattr(fs, cr, ino, &attr), &attr, a);
}


int loom_ll_setattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino,
		    const struct loom_setattr *sa, loom_file *f, struct loom_ll_attr *a)
{
	struct lw_setattr w = { .ino = ino, .valid = sa->valid & LW_SA_ALL };
	struct lw_attr attr;
	int rc;

	_Static_assert(LOOM_SET_MODE == LW_SA_MODE && LOOM_SET_SIZE == LW_SA_SIZE &&
			       LOOM_SET_MTIME_NOW == LW_SA_MTIME_NOW && LOOM_SET_CTIME == LW_SA_CTIME,
		       "LOOM_SET_* are the wire's LW_SA_*");
	if (sa->valid & ~(LW_SA_ALL & ~LW_SA_FH))
		return -EINVAL;
	if ((sa->valid & LOOM_SET_SIZE) && sa->size < 0)
		return -EINVAL;
	behind_touch(fs, ino);
	w.mode = sa->mode & 07777;
	w.uid = sa->uid;
	w.gid = sa->gid;
	w.size = (uint64_t)sa->size;
	w.atime = sa->atime.tv_sec;
	w.atime_ns = (uint32_t)sa->atime.tv_nsec;
	w.mtime = sa->mtime.tv_sec;
	w.mtime_ns = (uint32_t)sa->mtime.tv_nsec;
	w.ctime = sa->ctime.tv_sec;
	w.ctime_ns = (uint32_t)sa->ctime.tv_nsec;
	if (f && (f->flags & O_ACCMODE) != O_RDONLY)
		w.valid |= LW_SA_FH;
	/* A truncation takes in what this client wrote and has not reported yet (truncate after
	 * write): the MDS cuts the objects to the size it knows, before it answers. */
	if ((sa->valid & LOOM_SET_SIZE) && (rc = files_report_ino(fs, ino)) != 0)
		return rc;
	rc = mdc_setattr(fs, cr, &w, &attr);
	/* An explicit mtime (utimensat, touch, cp -a) is the file's now: the write times of open
	 * handles must not overwrite it when they report. */
	if (rc == 0 && (sa->valid & (LOOM_SET_MTIME | LOOM_SET_MTIME_NOW)))
		files_forget_mtime(fs, ino);
	if (rc == 0 && (sa->valid & LOOM_SET_SIZE) && S_ISREG(attr.mode))
		files_truncated(fs, &attr);
	if (rc == 0 && (sa->valid & (LW_SA_MODE | LW_SA_UID | LW_SA_GID)) && S_ISREG(attr.mode))
		files_mode_set(fs, &attr);
	return stat_reply(fs, rc, &attr, a);
}

int loom_ll_mknod(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		  mode_t mode, dev_t rdev, struct loom_ll_attr *a)
{
	struct lw_create_rep rep;
	int rc;

	if ((mode & S_IFMT) == 0)
		mode |= S_IFREG;
	if (S_ISDIR(mode) || S_ISLNK(mode))
		return -EINVAL; /* mkdir and symlink have their own calls */
	rc = mdc_create(fs, cr, parent, name, strlen(name), mode, (uint32_t)rdev, LW_CR_EXCL, 0, NULL,
			&rep, NULL);
	return stat_reply(fs, rc, &rep.attr, a);
}

int loom_ll_mkdir(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		  mode_t mode, struct loom_ll_attr *a)
{

	return loom_ll_mkdir_leased(fs, cr, parent, name, mode, a, NULL, NULL);
}

int loom_ll_mkdir_leased(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
			 mode_t mode, struct loom_ll_attr *a, uint64_t *lease_gen, bool *excl)
{
	struct lw_attr attr;

	return stat_reply(fs, mdc_mkdir(fs, cr, parent, name, strlen(name), mode & 07777, &attr,
					lease_gen, excl), &attr, a);
}

int loom_ll_unlink(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name)
{
	/* With nothing open here under an inode lease, the MDS need not wait for this client's
	 * lease on the file to come back (its local opens made real) before it unlinks. */
	uint16_t flags = ileases_unlink_begin(fs) ? LW_NM_UNLEASED : 0;
	int rc = mdc_unlink(fs, cr, LW_OP_MDS_UNLINK, parent, name, strlen(name), flags);

	ileases_unlink_end(fs);
	return rc;
}

int loom_ll_rmdir(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name)
{
	return mdc_unlink(fs, cr, LW_OP_MDS_RMDIR, parent, name, strlen(name), 0);
}

int loom_ll_rename(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		   uint64_t newparent, const char *newname, unsigned int flags)
{
	if (flags & ~(LOOM_RENAME_NOREPLACE | LOOM_RENAME_EXCHANGE))
		return -EINVAL;
	return mdc_rename(fs, cr, parent, name, strlen(name), newparent, newname, strlen(newname), flags);
}

int loom_ll_link(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t newparent,
		 const char *newname, struct loom_ll_attr *a)
{
	struct lw_attr attr;

	return stat_reply(fs, mdc_link(fs, cr, ino, newparent, newname, strlen(newname), &attr), &attr, a);
}

int loom_ll_symlink(loom_fs *fs, const struct loom_cred *cr, const char *target, uint64_t parent,
		    const char *name, struct loom_ll_attr *a)
{
	struct lw_attr attr;

	return stat_reply(fs, mdc_symlink(fs, cr, parent, name, strlen(name), target, strlen(target), &attr),
			  &attr, a);
}

int loom_ll_readlink(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		     size_t *len)
{
	return mdc_readlink(fs, cr, ino, buf, cap, len);
}

int loom_ll_access(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, int mask)
{
	if (mask & ~7)
		return -EINVAL;
	return mdc_access(fs, cr, ino, (uint32_t)mask);
}

int loom_ll_open(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, int flags,
		 const struct loom_ll_expect *expect, loom_file **out, struct loom_ll_attr *a)
{
	struct loom_layout *layout = NULL;
	struct mdc_open_if cond = { 0 };
	struct mdc_dom dom;
	struct lw_open_rep rep;
	struct mdc_lease_grant grant = { 0 };
	uint64_t mds_gen = fs_mds_gen(fs), epoch = 0;
	bool ask = false;
	int rc;

	memset(a, 0, sizeof(*a));
	behind_touch(fs, ino);
	/* Reading a file this client holds an inode lease on: no round trip (ileases.c). O_NOATIME
	 * is the owner's only: the MDS checks it. */
	if (fs->ileases && (flags & O_ACCMODE) == O_RDONLY &&
	    !(flags & (O_TRUNC | O_DIRECTORY | O_NOATIME))) {
		struct lw_attr attr;
		uint64_t dir_moves;

		rc = ileases_open(fs, cr, ino, flags, expect, out, &attr, &dir_moves);
		if (rc != -EAGAIN) {
			rc = stat_reply(fs, rc, &attr, a);
			if (rc == 0)
				a->dir_moves = dir_moves;
			return rc;
		}
		ask = ileases_want(fs, ino, &epoch);
	}
	if (expect && expect->name_version) {
		cond.flags |= LW_OPQ_NAMES;
		cond.names = expect->name_version;
	}
	if (expect && expect->dir_moves) {
		cond.flags |= LW_OPQ_DIR_MOVES;
		cond.dir_moves = expect->dir_moves;
	}
	memset(a, 0, sizeof(*a));
	rc = mdc_open_leased(fs, cr, ino,
			     (uint32_t)(flags & (O_ACCMODE | O_TRUNC | O_APPEND | O_NOATIME | O_DIRECTORY)),
			     cond.flags ? &cond : NULL, &rep, &layout, &dom, ask ? &grant : NULL);
	if (ask)
		ileases_keep(fs, cr, ino, epoch, rc == 0 ? &grant : &(struct mdc_lease_grant){ 0 });
	free(grant.body);
	if (rc == -ESTALE && rep.attr.ino) {
		stat_reply(fs, 0, &rep.attr, a);
		a->dir_moves = rep.dir_moves;
		return rc;
	}
	if (rc)
		return rc;
	rc = file_finish_open(fs, cr, flags, &rep.attr, rep.handle, layout, false, &dom, mds_gen, out);
	rc = stat_reply(fs, rc, &rep.attr, a);
	if (rc == 0)
		a->dir_moves = rep.dir_moves;
	return rc;
}

int loom_ll_create(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		   mode_t mode, int flags, loom_file **out, struct loom_ll_attr *a)
{
	struct loom_layout *layout = NULL;
	struct mdc_dom dom = { 0 };
	struct lw_create_rep rep;
	uint32_t cflags = LW_CR_OPEN | ((flags & O_EXCL) ? LW_CR_EXCL : 0);
	uint64_t mds_gen = fs_mds_gen(fs);
	int rc;

	rc = mdc_create(fs, cr, parent, name, strlen(name), S_IFREG | (mode & 07777), 0, cflags,
			(uint32_t)(flags & (O_ACCMODE | O_TRUNC | O_APPEND)), NULL, &rep, &layout);
	if (rc)
		return rc;
	if (!S_ISREG(rep.attr.mode)) {
		/* An existing fifo or device: opened through the MDS like any inode. */
		struct timespec zero = { 0 };
		mdc_close(fs, cr, LW_OP_MDS_CLOSE, rep.attr.ino, rep.handle, 0, 0, 0, zero, 0, NULL, NULL);
		free(layout);
		return -EEXIST;
	}
	/* A file this call made has no bytes yet; an existing one's are fetched when read. */
	dom.known = (rep.flags & LW_CRR_CREATED) != 0;
	rc = file_finish_open(fs, cr, flags, &rep.attr, rep.handle, layout,
			      (rep.flags & LW_CRR_CREATED) != 0, &dom, mds_gen, out);
	return stat_reply(fs, rc, &rep.attr, a);
}

struct rd_state {
	loom_ll_dirent_fn fn;
	void *arg;
};

int loom_ll_readdir(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		    bool plus, size_t max_bytes, loom_ll_dirent_fn fn, void *arg, bool *eof)
{
	return loom_ll_readdir_leased(fs, cr, ino, cookie, plus, max_bytes, fn, arg, eof, NULL, NULL);
}

int loom_ll_readdir_leased(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
			   bool plus, size_t max_bytes, loom_ll_dirent_fn fn, void *arg, bool *eof,
			   uint64_t *lease_gen, bool *excl)
{
	struct lw_readdir_rep rep;
	struct lw_rd rd;
	void *page = NULL;
	uint32_t page_len;
	int rc;

	*eof = false;
	/* Entries on the wire are a little larger than in a FUSE buffer; ask for about as many. */
	rc = mdc_readdir(fs, cr, ino, cookie, (uint32_t)MIN(max_bytes * 2, 128u << 10), plus, &page,
			 &page_len, lease_gen, excl);
	if (rc)
		return rc;
	memcpy(&rep, page, sizeof(rep));
	if (rep.count == 0 && !rep.eof) {
		free(page); /* an empty page that is not the end: a caller would take it for the end */
		return -EPROTO;
	}
	lw_rd_init(&rd, (uint8_t *)page + sizeof(rep), page_len - sizeof(rep));
	for (uint32_t i = 0; i < rep.count; i++) {
		struct lw_dirent de;
		struct lw_attr attr;
		struct loom_dirent ent;
		struct loom_ll_attr la;
		const char *name;

		rc = lw_readdir_next(&rd, (uint8_t *)page + sizeof(rep), plus, &de, &name, &attr);
		if (rc)
			goto out;
		ent.ino = de.ino;
		ent.type = (unsigned char)de.type;
		memcpy(ent.name, name, de.namelen);
		ent.name[de.namelen] = '\0';
		if (plus) {
			fs_note_attr(fs, &attr);
			files_pending_attr(fs, &attr);
			attr_to_ll(&attr, &la);
		}
		if (fn(arg, &ent, plus ? &la : NULL, de.cookie))
			goto out; /* the caller's buffer is full: it resumes from its last cookie */
	}
	*eof = rep.eof != 0;
out:
	free(page);
	return rc;
}

int loom_ll_getxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name,
		     void *buf, size_t cap, size_t *len)
{
	/* `ls -l` asks every file for its ACL: a file without extended attributes needs no round
	 * trip to say so. (The caller's right to ask was checked by the kernel.) */
	if (fs_known_bare(fs, ino))
		return -ENODATA;
	return mdc_getxattr(fs, cr, LW_OP_MDS_GETXATTR, ino, name, buf, cap, len);
}

int loom_ll_setxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name,
		     const void *value, size_t len, int flags)
{
	int rc;

	if (flags & ~(LOOM_XATTR_CREATE | LOOM_XATTR_REPLACE))
		return -EINVAL;
	fs_forget_bare(fs, ino);
	rc = mdc_setxattr(fs, cr, ino, name, value, len, (uint32_t)flags);
	fs_forget_bare(fs, ino); /* the mark's second starts when the change is made */
	return rc;
}

int loom_ll_listxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		      size_t *len)
{
	if (fs_known_bare(fs, ino)) {
		*len = 0;
		return 0;
	}
	return mdc_getxattr(fs, cr, LW_OP_MDS_LISTXATTR, ino, NULL, buf, cap, len);
}

int loom_ll_removexattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name)
{
	return mdc_removexattr(fs, cr, ino, name);
}

int loom_ll_getlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_layout **out)
{
	return mdc_getlayout(fs, cr, ino, out);
}

int loom_ll_setlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino,
		      const struct loom_layout *layout)
{
	struct loom_layout *res = NULL;
	int rc = mdc_setlayout(fs, cr, ino, 0, layout, &res);

	free(res);
	return rc;
}

int loom_ll_dellayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino)
{
	struct loom_layout *res = NULL;
	int rc = mdc_setlayout(fs, cr, ino, LW_SL_DELETE, NULL, &res);

	free(res);
	return rc;
}

int loom_layout_to_xattr(const struct loom_layout *l, void *buf, size_t cap, size_t *len)
{
	struct lw_wr w;

	*len = lw_layout_size(l->nobjs);
	if (cap == 0)
		return 0;
	if (cap < *len)
		return -ERANGE;
	lw_wr_init(&w, buf, cap);
	lw_layout_encode(&w, l);
	return w.err;
}

int loom_layout_from_xattr(const void *buf, size_t len, struct loom_layout **out)
{
	struct lw_rd r;
	int rc;

	lw_rd_init(&r, buf, len);
	rc = lw_layout_decode(&r, out);
	if (rc == 0 && lw_rd_done(&r)) {
		free(*out); /* trailing bytes */
		*out = NULL;
		rc = -EINVAL;
	}
	return rc == -EPROTO ? -EINVAL : rc;
}

static int lock_call(loom_fs *fs, uint64_t ino, uint64_t owner, struct loom_lock *lk, uint32_t flags)
{
	struct lw_lock_req req = { .ino = ino, .owner = owner, .start = lk->start, .end = lk->end,
				   .type = (uint32_t)lk->type, .flags = flags, .pid = lk->pid };
	struct lw_lock_rep rep;
	struct loom_cred cr;
	int rc;

	if (lk->type != F_RDLCK && lk->type != F_WRLCK && lk->type != F_UNLCK)
		return -EINVAL;
	if (lk->start > lk->end)
		return -EINVAL;
	fs_cred(fs, &cr);
	rc = mdc_lock(fs, &cr, &req, &rep);
	if (rc == 0 && (flags & LW_LK_TEST)) {
		lk->type = (int)rep.type;
		lk->start = rep.start;
		lk->end = rep.end;
		lk->pid = rep.pid;
	}
	/* A lock granted orders this node after the previous holder: the Data-on-MDT bytes cached
	 * here (those not written here) are read again, as the mount drops its pages. */
	if (rc == 0 && !(flags & (LW_LK_TEST | LW_LK_CANCEL)) && lk->type != F_UNLCK)
		files_dom_forget(fs, ino);
	return rc;
}

int loom_ll_lock(loom_fs *fs, uint64_t ino, uint64_t owner, const struct loom_lock *lk, unsigned flags)
{
	struct loom_lock copy = *lk;

	if (flags & ~(LOOM_LOCK_WAIT | LOOM_LOCK_FLOCK))
		return -EINVAL;
	return lock_call(fs, ino, owner, &copy, (flags & LOOM_LOCK_WAIT ? LW_LK_WAIT : 0) |
						     (flags & LOOM_LOCK_FLOCK ? LW_LK_FLOCK : 0));
}

int loom_ll_getlock(loom_fs *fs, uint64_t ino, uint64_t owner, struct loom_lock *lk, unsigned flags)
{
	if (flags & ~LOOM_LOCK_FLOCK)
		return -EINVAL;
	return lock_call(fs, ino, owner, lk, LW_LK_TEST | (flags & LOOM_LOCK_FLOCK ? LW_LK_FLOCK : 0));
}

int loom_ll_lock_cancel(loom_fs *fs, uint64_t ino, uint64_t owner)
{
	struct loom_lock lk = { .type = F_UNLCK, .end = UINT64_MAX };

	return lock_call(fs, ino, owner, &lk, LW_LK_CANCEL);
}

/* ---- interrupts (the rpc layer's, for the mount daemon) ---- */

struct loom_intr {
	struct rpc_intr intr;
};

loom_intr *loom_intr_new(void)
{
	loom_intr *in = calloc(1, sizeof(*in));

	if (in)
		rpc_intr_init(&in->intr);
	return in;
}

void loom_intr_free(loom_intr *in)
{
	if (!in)
		return;
	rpc_intr_destroy(&in->intr);
	free(in);
}

void loom_intr_enter(loom_intr *in)
{
	rpc_intr_enter(in ? &in->intr : NULL);
}

void loom_intr_fire(loom_intr *in)
{
	rpc_intr_fire(&in->intr);
}

bool loom_ll_nowait(bool on)
{
	return rpc_nowait_swap(on);
}

bool loom_ll_mds_away(loom_fs *fs)
{
	struct rpc_conn *c;
	bool away;

	pthread_mutex_lock(&fs->mds_lock);
	c = fs->mds;
	away = c && (rpc_conn_recovering(c) || !rpc_conn_alive(c));
	pthread_mutex_unlock(&fs->mds_lock);
	return away;
}
