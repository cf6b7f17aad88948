/* Files: init (what the mount asks of the kernel), open, create, read, write, flush, release,
 * fsync, fallocate, lseek (SEEK_DATA / SEEK_HOLE). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "fuse/lmount.h"

int lm_file(fuse_req_t req, struct fuse_file_info *fi, loom_file **f)
{
	loom_behind *b;
	int rc;

	if (!(fi->fh & LM_FH_BEHIND)) {
		*f = (loom_file *)(uintptr_t)fi->fh;
		return 0;
	}
	b = (loom_behind *)(uintptr_t)(fi->fh & ~LM_FH_BEHIND);
	rc = loom_behind_file(b, f);
	if (rc == -EIO)
		lm_lease_drop(lm_of(req), loom_behind_parent(b)); /* its list had the name */
	return rc;
}

static void lm_init(void *userdata, struct fuse_conn_info *conn)
{
	struct lmount *m = userdata;

	/* O_TRUNC arrives with the open, which truncates on the MDS and cuts the objects at once. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
		conn->want |= FUSE_CAP_EXPORT_SUPPORT;
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO;
	/* Cached pages are kept or dropped at open, by comparing the file with what this mount
	 * last saw (close-to-open); dropping them whenever mtime moves would also drop this mount's
	 * own fresh writes. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	/* No write-back cache: the MDS must learn sizes from writes this mount acknowledged. */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* The file system clears setuid/setgid on writes by others (libloom asks the MDS, which
	 * may allow it), rather than the kernel sending a chmod in the writer's name, which the
	 * MDS must refuse to anyone but the owner. */
	if (conn->capable & FUSE_CAP_HANDLE_KILLPRIV)
		conn->want |= FUSE_CAP_HANDLE_KILLPRIV;
	/* `loom df DIR` asks its ioctls (ops_ioctl.c) on a directory's descriptor too. */
	if (conn->capable & FUSE_CAP_IOCTL_DIR)
		conn->want |= FUSE_CAP_IOCTL_DIR;
	/* The kernel's default (128 KiB) keeps one stripe busy at a time; megabytes of read-ahead
	 * keep every stripe of a wide file in flight, in requests of up to 1 MiB. */
	conn->max_readahead = m->opts.readahead_kb << 10;
	/* Read-ahead and asynchronous requests in flight at once: the kernel's default (12) keeps
	 * only a few stripes of a wide file busy. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	log_debug("FUSE capable %#x, want %#x", conn->capable, conn->want);
}

static void open_reply(fuse_req_t req, struct fuse_file_info *fi, loom_file *f,
		       const struct loom_ll_attr *a, const struct fuse_entry_param *e)
{
	struct lmount *m = lm_of(req);
	uint64_t ino = a->st.st_ino;

	fi->fh = (uintptr_t)f;
	/* What this mount had changed when the open's attributes arrived (see lm_getattr). */
	loom_file_set_tag(f, lm_change_count(m));
	/* The pages this mount holds are still the file's if its data version did not move since
	 * they were read (close-to-open, whatever the times say); else the kernel drops them. */
	fi->keep_cache = S_ISREG(a->st.st_mode) && lm_data_current(m, ino, a->data_version);
	if (S_ISREG(a->st.st_mode) && !e) /* (a create's new file has nothing cached) */
		lm_cache_note(&m->mstats, fi->keep_cache ? LM_PAGES_KEPT : LM_PAGES_DROPPED);
	if (fi->flags & O_DIRECT || (fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	lm_handle_opened(m, ino);
	lm_fh_held(m, fi->fh); /* before the reply: its release may come at once */
	if (LM_REPLY(e ? fuse_reply_create(req, e, fi) : fuse_reply_open(req, fi)) != 0) {
		lm_fh_given_back(m, fi->fh);
		loom_close(f); /* the opener was interrupted and will never release it */
		lm_handle_released(m, ino);
	}
}

static void lm_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_ll_expect ex;
	struct loom_ll_attr a;
	struct loom_cred cr;
	loom_file *f = NULL;
	int rc;

	lm_cred(req, &cr);
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		lm_attr_changed(m);
	/* The kernel reached the inode through names it cached: they must still lead here. */
	lm_open_expect(m, ino, (uint32_t)fuse_req_ctx(req)->pid, &ex);
	/* The kernel decides where O_APPEND writes go and passes the offset: the handle must write
	 * exactly there. */
	rc = loom_ll_open(m->fs, &cr, ino, fi->flags & ~O_APPEND, &ex, &f, &a);
	if (fi->flags & O_TRUNC)
		lm_sa_changed(m);
	rc = lm_open_settle(m, ino, (uint32_t)fuse_req_ctx(req)->pid, rc, &a, fi->flags);
	if (rc) {
		if (f)
			loom_close(f);
		lm_reply_err(req, rc);
		return;
	}
	open_reply(req, fi, f, &a, NULL);
}

/* A create sent behind (libloom's behind.c): answered now, its file waited for at its first
 * use (lm_file). */
static void behind_reply(fuse_req_t req, struct fuse_file_info *fi, loom_behind *b,
			 const struct loom_ll_attr *a, const struct fuse_entry_param *e)
{
	struct lmount *m = lm_of(req);
	uint64_t ino = a->st.st_ino;

	fi->fh = (uintptr_t)b | LM_FH_BEHIND;
	fi->keep_cache = 0; /* a new file: nothing cached */
	if (fi->flags & O_DIRECT || (fi->flags & O_ACCMODE) == O_WRONLY)
		fi->direct_io = 1;
	lm_data_current(m, ino, a->data_version);
	lm_handle_opened(m, ino);
	lm_fh_held(m, fi->fh);
	if (LM_REPLY(fuse_reply_create(req, e, fi)) != 0) {
		lm_fh_given_back(m, fi->fh);
		loom_behind_close(b);
		lm_handle_released(m, ino);
	}
}

static void lm_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct fuse_entry_param e;
	struct loom_ll_attr a;
	struct loom_cred cr;
	loom_behind *b = NULL;
	loom_file *f = NULL;
	struct lm_lease_mark mark;
	struct stat dir;
	uint64_t gen;
	int rc = -EAGAIN;

	lm_cred(req, &cr);
	memset(&e, 0, sizeof(e));
	gen = lm_attr_change_count(m);
	lm_entries_begin(m, parent, 0);
	/* Under an exclusive lease the name is known free: answered here, sent behind. */
	if (lm_lease_behind(m, parent, name, &dir, &mark)) {
		struct lm_lease_check still = { m, parent, name, false };

		rc = loom_ll_create_behind(m->fs, &cr, parent, &dir, name, mode, fi->flags & ~O_APPEND,
					   lm_lease_still, &still, &a, &b);
	}
	if (rc == -EAGAIN)
		rc = loom_ll_create(m->fs, &cr, parent, name, mode, fi->flags & ~O_APPEND, &f, &a);
	/* A file made behind changes no other inode's attributes: listings fetched before go
	 * stale, attributes kept of other files (loom_behind_own, loom_ll_made_attr) stay. */
	if (b)
		lm_sa_wrote(m);
	else
		rc = lm_changed(m, rc);
	lm_entries_end(m, rc, 0, NULL, parent, name, rc ? 0 : DT_REG | LM_NAME_MADE);
	if (b) {
		lm_lease_behind_done(m, parent, &mark);
		/* Nobody else can reach the file while the lease stands: its attributes are known
		 * here while nothing else changes through this mount, now and after its close. */
		loom_behind_own(b, gen, mark.gen);
		lm_lease_made_set(m, parent, name, a.st.st_ino, gen);
	}
	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	e.ino = a.st.st_ino;
	e.generation = 1;
	e.attr = a.st;
	e.attr_timeout = m->opts.attr_timeout;
	e.entry_timeout = m->opts.entry_timeout;
	lm_told_entry(m, parent, name, &a);
	if (b)
		behind_reply(req, fi, b, &a, &e);
	else
		open_reply(req, fi, f, &a, &e);
}

static void lm_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	(void)ino;
	if (!buf) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	loom_file *f;
	int rc = lm_file(req, fi, &f);

	n = rc ? rc : loom_pread(f, buf, size, off);
	if (n < 0) {
		lm_reply_err(req, (int)n);
	} else {
		lm_op_bytes((uint64_t)n);
		LM_REPLY(fuse_reply_buf(req, buf, (size_t)n));
	}
	free(buf);
}

static void lm_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	loom_file *f;
	int rc = lm_file(req, fi, &f);
	ssize_t n = rc ? rc : loom_pwrite(f, buf, size, off);

	lm_sa_wrote(lm_of(req));
	if (n > 0)
		lm_wrote(lm_of(req), ino, (uint64_t)off + (uint64_t)n);
	if (n < 0) {
		lm_reply_err(req, (int)n);
	} else {
		lm_op_bytes((uint64_t)n);
		LM_REPLY(fuse_reply_write(req, (size_t)n));
	}
}

/* Every close(2): what this descriptor wrote becomes visible to every later open anywhere. */
/* A handle that could write: its flush, fsync and release report sizes and times to the MDS,
 * which listings and attributes fetched before must not hide. A read-only one changes nothing
 * (and a loop of np.load keeps its statahead listing). */
static int changed_if_writer(struct lmount *m, loom_file *f, int rc)
{
	if ((loom_file_flags(f) & O_ACCMODE) != O_RDONLY)
		lm_sa_wrote(m);
	return rc;
}

/* A report of this mount's writes made a new data version: the pages hold it if they held the
 * one before. */
static void data_reported(struct lmount *m, uint64_t ino, loom_file *f)
{
	uint64_t version = loom_file_reported_version(f);
	struct loom_ll_attr a;

	if (!version)
		return;
	lm_data_changed(m, ino, version);
	loom_file_ll_attr(f, &a);
	lm_reported(m, &a);
}

static void lm_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	loom_file *f;
	int rc;

	lm_unlock_begin(lm_of(req));
	lm_locks_on_close(req, ino, fi);
	lm_unlock_end(lm_of(req));
	/* A file made behind that nothing used has nothing to report: its close does not wait
	 * for the MDS (a create's failure there is logged, and its directory's list dropped). */
	if ((fi->fh & LM_FH_BEHIND) && !loom_behind_used((loom_behind *)(uintptr_t)(fi->fh & ~LM_FH_BEHIND))) {
		lm_reply_err(req, 0);
		return;
	}
	rc = lm_file(req, fi, &f);
	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	rc = changed_if_writer(lm_of(req), f, loom_flush(f));
	if (rc == 0)
		data_reported(lm_of(req), ino, f);
	lm_reply_err(req, rc);
}

static void lm_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	loom_file *f = NULL;
	bool writer;
	int rc;

	lm_fh_given_back(lm_of(req), fi->fh);
	/* A create sent behind: its file, if anything used it (else nothing was written, and its
	 * answer is not waited for: loom_behind_close). */
	if (fi->fh & LM_FH_BEHIND) {
		loom_behind *b = (loom_behind *)(uintptr_t)(fi->fh & ~LM_FH_BEHIND);

		if (loom_behind_used(b))
			(void)loom_behind_file(b, &f);
	} else {
		f = (loom_file *)(uintptr_t)fi->fh;
	}
	writer = (fi->flags & O_ACCMODE) != O_RDONLY;
	lm_unlock_begin(lm_of(req));
	if (fi->flock_release)
		lm_locks_on_close(req, ino, fi);
	/* Writes that reach the MDS only now (mmapped pages written back after the last close):
	 * their version is not known here, so the pages are not trusted past them. */
	if (writer && f && loom_file_unreported(f))
		lm_data_changed(lm_of(req), ino, 0);
	if (fi->fh & LM_FH_BEHIND) {
		loom_behind *b = (loom_behind *)(uintptr_t)(fi->fh & ~LM_FH_BEHIND);
		uint64_t parent = loom_behind_parent(b);

		rc = loom_behind_close(b);
		if (rc == -EIO)
			lm_lease_drop(lm_of(req), parent); /* its list had the name */
	} else {
		rc = loom_close(f);
	}
	lm_handle_released(lm_of(req), ino);
	if (writer)
		lm_sa_wrote(lm_of(req));
	lm_unlock_end(lm_of(req));
	lm_reply_err(req, rc);
}

static void lm_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	loom_file *f;
	int rc = lm_file(req, fi, &f);

	if (rc) {
		lm_reply_err(req, rc);
		return;
	}
	(void)datasync; /* the size must reach the MDS either way, or the data is not reachable */
	rc = changed_if_writer(lm_of(req), f, loom_fsync(f));
	if (rc == 0)
		data_reported(lm_of(req), ino, f);
	lm_reply_err(req, rc);
}

/*
 * The kernel has done fallocate(2)'s checks (and answers the modes FUSE does not pass itself);
 * for a punch or zeroing it wrote its dirty pages of the range back first and drops its pages
 * of the range afterwards (fuse_file_fallocate), so they are not stale. As for a write, the
 * pages of the rest stay valid for the version the next report makes (data_reported), and it
 * grows the size it holds itself when the range ends past it. Never ENOSYS: the kernel would
 * take it for good and stop asking.
 */
static void lm_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	loom_file *f;
	int rc = lm_file(req, fi, &f);

	if (rc == 0)
		rc = loom_fallocate(f, mode, off, len);
	lm_sa_changed(lm_of(req));
	if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE))
		lm_wrote(lm_of(req), ino, (uint64_t)off + (uint64_t)len);
	lm_reply_err(req, rc);
}

/* SEEK_DATA and SEEK_HOLE only (the kernel does the others); the kernel keeps the position. */
static void lm_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	off_t found;
	loom_file *f;
	int rc = lm_file(req, fi, &f);

	if (rc == 0)
		rc = loom_seek_data(f, off, whence, &found);
	(void)ino;
	if (rc)
		lm_reply_err(req, rc);
	else
		LM_REPLY(fuse_reply_lseek(req, found));
}

void lm_file_ops(struct fuse_lowlevel_ops *ops)
{
	ops->init = lm_init;
	ops->open = lm_open;
	ops->create = lm_create;
	ops->read = lm_read;
	ops->write = lm_write;
	ops->flush = lm_flush;
	ops->release = lm_release;
	ops->fsync = lm_fsync;
	ops->fallocate = lm_fallocate;
	ops->lseek = lm_lseek;
}
