/* Files: open, read, report, fsync, truncate, stat, close (writes are write.c's). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/door.h"
#include "client/internal.h"
#include "common/log.h"
#include "loom/loom_ll.h"
#include "client/path.h"
#include "common/util.h"

static bool can_read(const loom_file *f)
{
	return (f->flags & O_ACCMODE) != O_WRONLY;
}

static uint32_t wire_open_flags(int flags)
{
	/* The MDS needs the access mode and O_TRUNC; O_CREAT/O_EXCL are the CREATE request's. */
	return (uint32_t)(flags & (O_ACCMODE | O_TRUNC | O_APPEND));
}

static int report(loom_file *f, uint16_t op);

int files_report_ino(loom_fs *fs, uint64_t ino)
{
	int rc = 0;

	/* files_lock is held across the reports so that no handle can be freed under us (a close
	 * removes its handle from the registry before freeing it). This is the one place a request
	 * goes out under it: before a truncation, and before a lock of the file is let go. */
	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, ino); f; f = f->next_same_ino) {
		int r = file_can_write(f) ? report(f, LW_OP_MDS_SIZE_UPDATE) : 0;
		if (r && !rc)
			rc = r;
	}
	pthread_mutex_unlock(&fs->files_lock);
	return rc;
}

static int file_new(loom_fs *fs, const struct loom_cred *cr, int flags, const struct lw_attr *attr,
		    uint64_t handle, bool local, struct loom_layout *layout, struct mdc_dom *dom,
		    loom_file **out)
{
	loom_file *f = calloc(1, sizeof(*f));
	struct mdc_dom unknown = { 0 };

	if (!dom)
		dom = &unknown;
	if (f && layout && layout->dom_size) {
		/* A file just created has no bytes yet: known (and empty). */
		int rc = dom_new(layout->dom_size, dom->data, dom->len, dom->known, &f->dom);
		dom->data = NULL;
		if (rc) {
			free(f);
			f = NULL;
		}
	}
	if (!f) {
		free(layout);
		return -ENOMEM;
	}
	f->fs = fs;
	f->cred = *cr;
	f->ino = attr->ino;
	f->obj_owner = attr->ino;
	f->handle = handle;
	f->local = f->born_local = local; /* before it joins the open files the conversions walk */
	f->flags = flags;
	f->layout = layout;
	if (layout && layout->nobjs) {
		f->obj_blocks = malloc(layout->nobjs * sizeof(*f->obj_blocks));
		if (!f->obj_blocks) {
			dom_put(f->dom);
			free(layout);
			free(f);
			return -ENOMEM;
		}
		for (uint32_t k = 0; k < layout->nobjs; k++)
			f->obj_blocks[k] = -1;
	}
	f->attr = *attr;
	f->attr_ns = clock_mono_ns();
	f->fail_off = UINT64_MAX;
	f->err_sample = ino_error_sample(fs, f->ino);
	f->trunc_epoch = ino_epoch(fs, f->ino, attr->trunc_epoch);
	/* Another handle of this client may hold writes the MDS has not heard of yet. */
	files_pending_attr(fs, &f->attr);
	f->size = f->attr.size;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->append_lock, NULL);
	pthread_mutex_init(&f->wb_lock, NULL);
	files_add(fs, f);
	*out = f;
	return 0;
}

static int open_common(loom_fs *fs, const char *path, int flags, mode_t mode,
		       const struct loom_layout *req_layout, loom_file **out)
{
	struct loom_cred cr;
	struct loom_layout *layout = NULL;
	struct mdc_dom dom = { 0 };
	struct lw_attr attr;
	uint64_t handle = 0, parent;
	char name[LOOM_NAME_MAX + 1];
	size_t nlen;
	bool trailing, created = false;
	uint64_t mds_gen = fs_mds_gen(fs);
	int rc;

	fs_cred(fs, &cr);
	if (flags & O_CREAT) {
		if (!(flags & O_EXCL)) {
			/* An existing file (or a symlink to one) is opened, not created. */
			struct lw_open_rep orep;

			rc = path_resolve(fs, &cr, path, true, &attr);
			if (rc == 0) {
				rc = mdc_open(fs, &cr, attr.ino, wire_open_flags(flags), NULL, &orep, &layout, &dom);
				if (rc)
					return rc;
				attr = orep.attr;
				handle = orep.handle;
				goto opened;
			}
			if (rc != -ENOENT)
				return rc;
		}
		rc = path_parent(fs, &cr, path, &parent, name, &nlen, &trailing);
		if (rc == -EBUSY)
			return -EISDIR;
		if (rc)
			return rc;
		if (trailing)
			return -EISDIR;
		{
			struct lw_create_rep crep;
			uint32_t cflags = LW_CR_OPEN | ((flags & O_EXCL) ? LW_CR_EXCL : 0);

			rc = mdc_create(fs, &cr, parent, name, nlen, S_IFREG | (mode & 07777 & ~fs->umask), 0, cflags,
					wire_open_flags(flags), req_layout, &crep, &layout);
			if (rc)
				return rc;
			attr = crep.attr;
			handle = crep.handle;
			created = (crep.flags & LW_CRR_CREATED) != 0;
			dom.known = created; /* a new file has no bytes; an existing one's are fetched */
		}
	} else if ((flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC)) {
		/* np.load's open: the walk and the open in one round trip when the MDS can. */
		struct mdc_walk_open wo = { .open_flags = wire_open_flags(flags) };

		rc = path_resolve_open(fs, &cr, path, &wo, &attr);
		if (rc)
			return rc;
		if (wo.opened) {
			layout = wo.layout;
			dom = wo.dom;
		} else {
			rc = mdc_open(fs, &cr, attr.ino, wo.open_flags, NULL, &wo.rep, &layout, &dom);
			if (rc)
				return rc;
		}
		attr = wo.rep.attr;
		handle = wo.rep.handle;
	} else {
		struct lw_open_rep orep;

		rc = path_resolve(fs, &cr, path, true, &attr);
		if (rc)
			return rc;
		rc = mdc_open(fs, &cr, attr.ino, wire_open_flags(flags), NULL, &orep, &layout, &dom);
		if (rc)
			return rc;
		attr = orep.attr;
		handle = orep.handle;
	}
opened:
	return file_finish_open(fs, &cr, flags, &attr, handle, layout, created, &dom, mds_gen, out);
}

/* An open answered around an MDS restart: the reconnection opened again every file on the list,
 * and this one may not have been on it yet, its handle the dead MDS's. It is opened again (as the
 * reconnection does: no O_TRUNC, done once already) and the handle it had closed, which is a
 * no-op to an MDS that never gave it out (handle numbers differ between MDS runs) and ends the
 * surplus one otherwise. Until the generation holds still across an open: each reconnection
 * meanwhile may have replaced the handle again. A failure is left to the file's own I/O. */
static void file_open_again(loom_file *f, uint64_t mds_gen)
{
	loom_fs *fs = f->fs;
	struct timespec zero = { 0 };

	for (int round = 0; round < 8 && mds_gen != fs_mds_gen(fs); round++) {
		struct loom_layout *layout = NULL;
		struct lw_open_rep rep;
		uint64_t old;
		int rc;

		mds_gen = fs_mds_gen(fs);
		rc = mdc_open(fs, &f->cred, f->ino, (uint32_t)(f->flags & O_ACCMODE), NULL, &rep, &layout, NULL);
		free(layout);
		if (rc) {
			if (rc != -ENOENT && rc != -ESTALE)
				log_warn("inode %llu, opened as the MDS restarted, could not be opened again: %s",
					 (unsigned long long)f->ino, strerror(-rc));
			return;
		}
		pthread_mutex_lock(&f->lock);
		old = f->handle;
		f->handle = rep.handle;
		pthread_mutex_unlock(&f->lock);
		mdc_close(fs, &f->cred, LW_OP_MDS_CLOSE, f->ino, old, 0, 0, 0, zero, 0, NULL, NULL);
	}
}

int file_finish_open(loom_fs *fs, const struct loom_cred *cr, int flags, const struct lw_attr *attr,
		     uint64_t handle, struct loom_layout *layout, bool created, struct mdc_dom *dom,
		     uint64_t mds_gen, loom_file **out)
{
	int rc;

	/* O_TRUNC: the MDS set the size to 0 (even for O_RDONLY, as Linux does) and cut the objects
	 * before it answered; the other handles here follow. */
	if ((flags & O_TRUNC) && !created && layout)
		files_truncated(fs, attr);
	rc = file_new(fs, cr, flags, attr, handle, false, layout, dom, out);
	if (rc == 0)
		file_open_again(*out, mds_gen);
	return rc;
}

int file_open_local(loom_fs *fs, const struct loom_cred *cr, int flags, const struct lw_attr *attr,
		    struct loom_layout *layout, struct mdc_dom *dom, loom_file **out)
{
	return file_new(fs, cr, flags, attr, 0, true, layout, dom, out);
}

int loom_open(loom_fs *fs, const char *path, int flags, mode_t mode, loom_file **out)
{
	if (fs->door)
		return door_open(fs, path, flags, mode, NULL, out);
	return open_common(fs, path, flags, mode, NULL, out);
}

int loom_create(loom_fs *fs, const char *path, int flags, mode_t mode,
		const struct loom_layout *layout, loom_file **out)
{
	if (fs->door)
		return door_open(fs, path, flags | O_CREAT, mode, layout, out);
	return open_common(fs, path, flags | O_CREAT, mode, layout, out);
}

int loom_open_copy(loom_fs *fs, const char *path, const struct loom_layout *layout, loom_file **out)
{
	struct loom_layout *got = NULL;
	struct lw_create_rep crep;
	struct loom_cred cr;
	struct lw_attr attr;
	char name[LOOM_NAME_MAX + 1];
	uint64_t parent, mds_gen = fs_mds_gen(fs);
	size_t nlen;
	bool trailing;
	int rc;

	*out = NULL;
	fs_cred(fs, &cr);
	rc = path_resolve(fs, &cr, path, false, &attr);
	if (rc == 0 && !S_ISREG(attr.mode))
		rc = -EINVAL;
	/* In the file's directory: its default fills what layout leaves unset, and making a file
	 * there takes the permissions the file's own creation took. */
	if (rc == 0)
		rc = path_parent(fs, &cr, path, &parent, name, &nlen, &trailing);
	if (rc == 0)
		rc = mdc_create(fs, &cr, parent, "", 0, S_IFREG | 0600, 0, LW_CR_OPEN | LW_CR_TMPFILE,
				O_RDWR, layout, &crep, &got);
	if (rc == 0) {
		struct mdc_dom dom = { .known = true }; /* a new file: no Data-on-MDT bytes yet */

		rc = file_finish_open(fs, &cr, O_RDWR, &crep.attr, crep.handle, got, true, &dom, mds_gen, out);
	}
	/* Before its first write: the objects it makes are the file's from the swap on. */
	if (rc == 0)
		(*out)->obj_owner = attr.ino;
	return rc;
}

static int read_objects(loom_file *f, void *buf, size_t len, uint64_t off)
{
	/* What this client wrote is read back (an error stays for the writer's flush). */
	if (files_drain_ino(f->fs, f->ino) == -EINTR)
		return -EINTR;
	return io_read(f->fs, f->ino, f->layout, buf, len, off);
}

ssize_t loom_pread(loom_file *f, void *buf, size_t len, off_t off)
{
	uint64_t size;
	int rc;

	if (f->fs->door)
		return door_rw(f, DOOR_OP_PREAD, buf, len, off);
	if (off < 0)
		return -EINVAL;
	if (!can_read(f))
		return -EBADF;
	if (S_ISDIR(f->attr.mode))
		return -EISDIR;
	if (f->born_local && (rc = ileases_file_check(f)) != 0)
		return rc;
	if (!f->layout)
		return -EINVAL;
	pthread_mutex_lock(&f->lock);
	size = f->size;
	pthread_mutex_unlock(&f->lock);
	if ((uint64_t)off + len > size)
		size = files_written_size(f->fs, f->ino, size);
	if ((uint64_t)off >= size || len == 0)
		return 0;
	if (len > size - (uint64_t)off)
		len = (size_t)(size - (uint64_t)off);
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	if (f->dom && (uint64_t)off < f->layout->dom_size) {
		/* The first bytes are the MDS's, and usually here already. */
		size_t n = len < f->layout->dom_size - (uint64_t)off ? len : f->layout->dom_size - (size_t)off;

		rc = dom_read(f, buf, n, (uint64_t)off);
		if (rc == 0 && n < len)
			rc = read_objects(f, (char *)buf + n, len - n, (uint64_t)off + n);
		return rc ? rc : (ssize_t)len;
	}
	rc = read_objects(f, buf, len, (uint64_t)off);
	return rc ? rc : (ssize_t)len;
}

ssize_t loom_read(loom_file *f, void *buf, size_t len)
{
	ssize_t n;

	if (f->fs->door)
		return door_rw(f, DOOR_OP_READ, buf, len, 0);
	n = loom_pread(f, buf, len, (off_t)f->pos);
	if (n > 0)
		f->pos += (uint64_t)n;
	return n;
}

int loom_lseek(loom_file *f, off_t off, int whence, off_t *pos)
{
	int64_t base;
	off_t found;
	int rc;

	if (f->fs->door)
		return door_seek(f, DOOR_OP_LSEEK, off, whence, pos);
	switch (whence) {
	case SEEK_SET: base = 0; break;
	case SEEK_CUR: base = (int64_t)f->pos; break;
	case SEEK_END:
		pthread_mutex_lock(&f->lock);
		base = (int64_t)f->size;
		pthread_mutex_unlock(&f->lock);
		break;
	case SEEK_DATA:
	case SEEK_HOLE:
		rc = loom_seek_data(f, off, whence, &found);
		if (rc)
			return rc;
		base = 0;
		off = found;
		break;
	default: return -EINVAL;
	}
	if ((off > 0 && base > INT64_MAX - off) || base + off < 0)
		return -EINVAL;
	f->pos = (uint64_t)(base + off);
	if (pos)
		*pos = (off_t)f->pos;
	return 0;
}

/* What one size report may carry of Data-on-MDT bytes, leaving room in the largest body for
 * the fixed part and the credentials. */
#define DOM_REPORT_BUDGET (LW_MAX_BODY - 4096)

/* The dirty Data-on-MDT extents (of every handle of the inode here) in reports of their own while
 * more remain than one report carries; *last gets what is left for the report being made. */
static int dom_send_excess(loom_file *f, struct dom_parts *last)
{
	struct timespec none = { 0 };
	struct jobtag_scope js;
	int rc;

	for (;;) {
		rc = dom_take(f->dom, DOM_REPORT_BUDGET, last);
		if (rc || !last->more)
			return rc;
		jobtag_enter(&js, last->jobid); /* the bytes' writer's, as in report() */
		rc = mdc_close(f->fs, &f->cred, LW_OP_MDS_SIZE_UPDATE, f->ino, f->handle,
			       LW_CL_SIZE | LW_CL_DATA, last->end, file_epoch(f), none, 0, last, NULL);
		jobtag_leave(&js);
		if (rc == 0)
			dom_sent(f->dom, last);
		free(last->buf);
		memset(last, 0, sizeof(*last));
		if (rc)
			return rc;
	}
}

/* A close whose report the MDS refused for lack of room (its Data-on-MDT bytes: the MDT is full)
 * still ends the handle, as close(2) ends the descriptor whatever it returns: otherwise the file
 * would stay open on the MDS, and its space held, until the mount goes. The bytes are lost, and
 * the close says so. */
static void report_failed(loom_file *f, uint16_t op, int rc)
{
	if (op == LW_OP_MDS_CLOSE && rc == -ENOSPC)
		(void)mdc_close_detached(f->fs, &f->cred, f->ino, f->handle);
}

/* Reports size and mtime of what this handle wrote. */
static int report(loom_file *f, uint16_t op)
{
	struct dom_parts dom = { 0 };
	struct jobtag_scope js;
	struct timespec mtime;
	uint64_t size, fsize, blocks = 0;
	uint32_t flags = 0, epoch;
	struct lw_attr attr;
	uint64_t writes;
	int rc, wb_rc;

	pthread_mutex_lock(&f->lock);
	f->reported_version = 0;
	pthread_mutex_unlock(&f->lock);
	/* What went behind is answered first. A write of it that failed is this report's error (once
	 * per handle that could have written it), and the size reported stops before the first byte
	 * that failed: what never arrived is never part of the file. */
	if (file_drain(f) == -EINTR)
		return -EINTR; /* they are still in flight: a later report has them */
	wb_rc = ino_error_take(f->fs, f->ino, &f->err_sample);
	if (wb_rc) {
		pthread_mutex_lock(&f->wb_lock);
		f->wb_err = 0; /* reported: later writes may succeed again */
		pthread_mutex_unlock(&f->wb_lock);
	}
	/* Data-on-MDT bytes written here (through any handle of the inode) travel with the size. */
	if (f->dom && file_can_write(f) && (rc = dom_send_excess(f, &dom)) != 0) {
		report_failed(f, op, rc);
		pthread_mutex_lock(&f->lock);
		f->own_gen = 0; /* reports of its excess may have reached the MDS */
		pthread_mutex_unlock(&f->lock);
		return wb_rc ? wb_rc : rc;
	}
	/* The report is of writes made in this epoch: the MDS grows no size with older ones. */
	epoch = file_epoch(f);
	pthread_mutex_lock(&f->lock);
	/* Whatever became of them, writes may have changed bytes: the data version moves on. */
	if (f->dirty)
		flags = LW_CL_DATA | LW_CL_SIZE | (f->mtime_dirty ? LW_CL_MTIME : 0);
	size = f->written_end < f->fail_off ? f->written_end : f->fail_off;
	fsize = f->size;
	mtime = f->mtime;
	writes = f->writes;
	pthread_mutex_unlock(&f->lock);
	if (dom.n) {
		flags |= LW_CL_SIZE | LW_CL_DATA;
		if (dom.end > size)
			size = dom.end;
	}
	if (op == LW_OP_MDS_SIZE_UPDATE && !flags)
		return wb_rc;
	/* With the size goes what the file occupies (st_blocks, which holes do not count): the
	 * objects this handle wrote said so in their replies; the others are asked, unless the
	 * whole file is in its Data-on-MDT part. */
	if ((flags & LW_CL_SIZE) && f->dom && fsize <= f->layout->dom_size) {
		blocks = dom_blocks(f->dom);
		flags |= LW_CL_BLOCKS;
	} else if ((flags & LW_CL_SIZE) && f->layout && f->obj_blocks &&
		   io_blocks(f->fs, f->ino, f->layout, f->obj_blocks) == 0) {
		blocks = f->dom ? dom_blocks(f->dom) : 0;
		for (uint32_t k = 0; k < f->layout->nobjs; k++)
			blocks += (uint64_t)f->obj_blocks[k];
		flags |= LW_CL_BLOCKS;
	}
	/* A read-only handle's close reports nothing: np.load need not wait for its answer. (A
	 * writer's is waited for even when it reports nothing: a close on its way while the MDS
	 * restarts names the old handle, and loom_close ends the new one only if it sees that.) */
	if (op == LW_OP_MDS_CLOSE && !file_can_write(f) && !flags && !wb_rc &&
	    mdc_close_detached(f->fs, &f->cred, f->ino, f->handle) == 0)
		return 0;
	/* A report that carries Data-on-MDT bytes is charged to the job that wrote them (dom.c), not
	 * to whoever closes: another process sharing the descriptor, or a FUSE release, which comes
	 * from no process at all. */
	if (dom.n)
		jobtag_enter(&js, dom.jobid);
	rc = mdc_close(f->fs, &f->cred, op, f->ino, f->handle, flags, size, epoch, mtime, blocks, &dom, &attr);
	if (dom.n)
		jobtag_leave(&js);
	if (rc) {
		report_failed(f, op, rc);
		pthread_mutex_lock(&f->lock);
		f->own_gen = 0; /* the report may or may not have happened */
		pthread_mutex_unlock(&f->lock);
	}
	if (rc == 0)
		ino_epoch(f->fs, f->ino, attr.trunc_epoch);
	if (rc == 0 && dom.n)
		dom_sent(f->dom, &dom);
	free(dom.buf);
	if (rc == 0) {
		pthread_mutex_lock(&f->lock);
		/* Writes that came while the report was on its way stay to report. */
		if (flags && f->writes == writes) {
			f->dirty = false;
			f->mtime_dirty = false;
			f->written_end = 0;
			if (f->fail_off != UINT64_MAX && attr.size < f->size)
				f->size = attr.size; /* what failed is not part of it */
			f->fail_off = UINT64_MAX;
		}
		f->reported_version = (flags & LW_CL_DATA) && f->writes == writes ? attr.data_version : 0;
		f->attr = attr;
		f->attr_ns = clock_mono_ns();
		file_privs_follow(f, attr.mode);
		pthread_mutex_unlock(&f->lock);
	}
	return wb_rc ? wb_rc : rc;
}

/* Whether the file may hold bytes on its objects, as far as this handle knows. */
static bool uses_objects(loom_file *f)
{
	uint64_t size;

	if (!f->dom)
		return true;
	pthread_mutex_lock(&f->lock);
	size = f->size;
	pthread_mutex_unlock(&f->lock);
	return size > f->layout->dom_size;
}

/* After the objects were synced: writes made since the last fsync whose OST's server changed
 * meanwhile for one that may have lost them are this fsync's error, and every handle's of the
 * inode (errseq), as a writeback error of a local file system. Frees marks. */
static void lost_writes(loom_file *f, struct ost_loss_mark *marks, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		if (fs_ost_loss_gen(f->fs, marks[i].ost) == marks[i].gen)
			continue;
		log_warn("inode %llx: OST%04x's server changed since the file was written: writes it had "
			 "acknowledged may be lost; fsync reports EIO", (unsigned long long)f->ino,
			 marks[i].ost);
		ino_error(f->fs, f->ino, -EIO);
		break;
	}
	free(marks);
}

int loom_fsync(loom_file *f)
{
	struct ost_loss_mark *marks;
	uint32_t nmarks;
	int rc, sync_rc = 0;

	if (f->fs->door)
		return door_file_op(f, DOOR_OP_FSYNC, 0, 0, 0, NULL);
	/* The objects' data is made durable by the OSSs, the Data-on-MDT bytes by the report (the
	 * MDS commits before it answers). What did reach the objects is made durable and reported
	 * even when a write failed; the failure is fsync's error. */
	if (file_drain(f) == -EINTR)
		return -EINTR;
	marks = ino_unsynced_take(f->fs, f->obj_owner, &nmarks);
	if (f->layout && uses_objects(f))
		sync_rc = io_sync(f->fs, f->ino, f->layout);
	if (sync_rc) {
		if (marks) /* still to be made durable: the next fsync looks */
			ino_mark_unsynced(f->fs, f->obj_owner, marks, nmarks);
		return sync_rc; /* nothing is reported that may not be on disk */
	}
	lost_writes(f, marks, nmarks);
	rc = report(f, LW_OP_MDS_SIZE_UPDATE);
	return rc ? rc : loom_sync(f->fs);
}

int loom_flush(loom_file *f)
{
	if (f->fs->door)
		return 0; /* the daemon writes what it is given before it answers */
	return report(f, LW_OP_MDS_SIZE_UPDATE);
}

int loom_ll_flush_ino(loom_fs *fs, uint64_t ino)
{
	return files_report_ino(fs, ino);
}

uint64_t loom_file_ino(const loom_file *f)
{
	return f->ino;
}

int loom_file_flags(const loom_file *f)
{
	return f->flags;
}

int loom_ftruncate(loom_file *f, off_t size)
{
	struct lw_setattr sa = { .ino = f->ino, .valid = LW_SA_SIZE | LW_SA_FH };
	struct lw_attr attr;
	int rc;

	if (f->fs->door)
		return door_file_op(f, DOOR_OP_FTRUNCATE, size, 0, 0, NULL);
	if (size < 0)
		return -EINVAL;
	if (!file_can_write(f))
		return -EBADF;
	if ((uint64_t)size > LW_MAX_OFFSET)
		return -EFBIG;
	sa.size = (uint64_t)size;
	/* What this client wrote is reported first (truncate after write): the MDS cuts the objects
	 * to the size it knows, before it answers. */
	rc = files_report_ino(f->fs, f->ino);
	if (rc == 0)
		rc = mdc_setattr(f->fs, &f->cred, &sa, &attr);
	if (rc == 0)
		files_truncated(f->fs, &attr);
	return rc;
}

int loom_fstat(loom_file *f, struct stat *st)
{
	struct lw_attr attr;
	int rc;

	if (f->fs->door)
		return door_fstat(f, DOOR_OP_FSTAT, st);
	rc = mdc_getattr(f->fs, &f->cred, f->ino, &attr);
	if (rc == -ENOENT) {
		attr = f->attr; /* unlinked while open: what we know */
		attr.nlink = 0;
		rc = 0;
	}
	if (rc)
		return rc;
	/* What this client wrote through any handle and did not report yet is part of the file. */
	files_pending_attr(f->fs, &attr);
	pthread_mutex_lock(&f->lock);
	f->attr = attr;
	f->attr_ns = clock_mono_ns();
	pthread_mutex_unlock(&f->lock);
	attr_to_stat(&attr, st);
	return 0;
}

static void file_attr(loom_file *f, uint64_t max_age_ns, struct lw_attr *attr, int *rc)
{
	pthread_mutex_lock(&f->lock);
	*attr = f->attr;
	if (f->size > attr->size || f->dirty)
		attr->size = f->size;
	*rc = clock_mono_ns() - f->attr_ns <= max_age_ns ? 0 : -EAGAIN;
	pthread_mutex_unlock(&f->lock);
}

void loom_file_attr(loom_file *f, struct stat *st)
{
	struct lw_attr attr;
	int rc;

	if (f->fs->door) {
		if (door_fstat(f, DOOR_OP_FILE_ATTR, st))
			memset(st, 0, sizeof(*st));
		return;
	}
	file_attr(f, UINT64_MAX, &attr, &rc);
	attr_to_stat(&attr, st);
}

void loom_file_ll_attr(loom_file *f, struct loom_ll_attr *a)
{
	struct lw_attr attr;
	int rc;

	file_attr(f, UINT64_MAX, &attr, &rc);
	attr_to_ll(&attr, a);
}

uint64_t loom_file_reported_version(loom_file *f)
{
	uint64_t v;

	pthread_mutex_lock(&f->lock);
	v = f->reported_version;
	pthread_mutex_unlock(&f->lock);
	return v;
}

bool loom_file_unreported(loom_file *f)
{
	bool dirty;

	pthread_mutex_lock(&f->lock);
	dirty = f->dirty;
	pthread_mutex_unlock(&f->lock);
	return dirty;
}

int loom_file_attr_recent(loom_file *f, uint64_t max_age_ns, struct stat *st)
{
	struct lw_attr attr;
	int rc;

	file_attr(f, max_age_ns, &attr, &rc);
	attr_to_stat(&attr, st);
	return rc;
}

int loom_ll_attr_recent(loom_fs *fs, uint64_t ino, uint64_t max_age_ns, uint64_t tag,
			struct stat *st)
{
	int rc = -EAGAIN;

	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, ino); f && rc; f = f->next_same_ino) {
		if (f->tag == tag) {
			struct lw_attr attr;

			file_attr(f, max_age_ns, &attr, &rc);
			if (rc == 0)
				attr_to_stat(&attr, st);
		}
	}
	pthread_mutex_unlock(&fs->files_lock);
	return rc;
}

void loom_file_set_tag(loom_file *f, uint64_t tag)
{
	f->tag = tag;
}

int loom_ll_attr_own(loom_fs *fs, uint64_t ino, struct stat *st, uint64_t *gen, uint64_t *parent,
		     uint64_t *lease_gen)
{
	struct lw_attr attr;
	loom_file *f;
	int rc = -EAGAIN;

	pthread_mutex_lock(&fs->files_lock);
	f = u64map_get(&fs->files, ino);
	/* One handle: another's reports would change the file behind this one's attributes. */
	if (f && !f->next_same_ino) {
		pthread_mutex_lock(&f->lock);
		if (f->own_gen) {
			attr = f->attr;
			*gen = f->own_gen;
			*parent = f->own_parent;
			*lease_gen = f->own_lease;
			rc = 0;
		}
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&fs->files_lock);
	if (rc)
		return rc;
	files_pending_attr(fs, &attr);
	attr_to_stat(&attr, st);
	return 0;
}

uint64_t loom_file_tag(const loom_file *f)
{
	return f->tag;
}

/* A file opened under an inode lease (read-only): nothing to report; an MDS handle to end only
 * if it became real, which off the open files (where conversions look) it no longer can. */
static int close_local(loom_file *f)
{
	uint64_t handle;

	ileases_leave(f);
	pthread_mutex_lock(&f->lock);
	handle = f->handle;
	pthread_mutex_unlock(&f->lock);
	if (handle && mdc_close_detached(f->fs, &f->cred, f->ino, handle) != 0) {
		struct timespec zero = { 0 };

		mdc_close(f->fs, &f->cred, LW_OP_MDS_CLOSE, f->ino, handle, 0, 0, 0, zero, 0, NULL, NULL);
	}
	return 0;
}

/* After the close of f (rc): what made.c keeps of a file made here becomes what the close left,
 * if this was its last handle here; a failed report leaves nothing known. */
static void keep_made(loom_file *f, int rc)
{
	struct lw_attr attr;
	bool last;

	if (rc) {
		loom_ll_made_forget(f->fs, f->ino);
		return;
	}
	pthread_mutex_lock(&f->fs->files_lock);
	last = u64map_get(&f->fs->files, f->ino) == NULL;
	pthread_mutex_unlock(&f->fs->files_lock);
	if (!last)
		return;
	pthread_mutex_lock(&f->lock);
	attr = f->attr;
	pthread_mutex_unlock(&f->lock);
	made_put(f->fs, &attr, f->made_here);
}

int loom_close(loom_file *f)
{
	int rc;

	if (f && f->fs->door)
		return door_close_file(f);
	if (!f)
		return -EBADF;
	/* The handle goes: its writes behind are answered first, whatever interrupts come. */
	struct rpc_intr *in = rpc_intr_swap(NULL);
	uint64_t mds_gen = fs_mds_gen(f->fs);

	if (f->born_local) {
		rc = close_local(f);
		goto out;
	}
	rc = report(f, LW_OP_MDS_CLOSE);
	/* Off the list the reconnection opens again: from here an MDS restart leaves it closed. */
	files_remove(f->fs, f);
	keep_made(f, rc);
	if (fs_mds_gen(f->fs) != mds_gen) {
		/* The MDS restarted while the close was on its way: the close, made before, may have
		 * named the dead MDS's handle (a no-op to the new one), and the reconnection opened
		 * the file again under a new handle, which must end too, or an unlinked file would
		 * outlive its last close. Ending a handle twice is a no-op. */
		struct timespec zero = { 0 };
		uint64_t handle;

		pthread_mutex_lock(&f->lock);
		handle = f->handle;
		pthread_mutex_unlock(&f->lock);
		mdc_close(f->fs, &f->cred, LW_OP_MDS_CLOSE, f->ino, handle, 0, 0, 0, zero, 0, NULL, NULL);
	}
out:
	rpc_intr_swap(in);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->append_lock);
	pthread_mutex_destroy(&f->wb_lock);
	free(f->ec_row);
	free(f->obj_blocks);
	free(f->layout);
	free(f);
	return rc;
}
