/*
 * Space in files: fallocate(2), and lseek(2)'s SEEK_DATA and SEEK_HOLE, over a file's
 * Data-on-MDT part and its objects.
 *
 *     file   | Data-on-MDT [0, dom_size) | objects (RAID-0, stripe.h) from dom_size on ...
 *
 * Below dom_size the bytes are the handle's Data-on-MDT cache (dom.c), shared by every handle of
 * the inode here: punching or zeroing writes zeros there, sent with the next size report as a
 * write's bytes are; allocating needs nothing (the MDS stores what was written, the rest reads as
 * zeros up to the size). From dom_size on, each object gets one request for its part of the
 * range (io.c), all in flight at once. A change is then reported as a write is: the handle is
 * dirty, so its next report advances the data version, and reports the size it grew to.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/door.h"
#include "client/internal.h"
#include "common/util.h"

_Static_assert(LW_FALLOC_KEEP_SIZE == FALLOC_FL_KEEP_SIZE, "libloom passes fallocate modes as they are");
_Static_assert(LW_FALLOC_PUNCH_HOLE == FALLOC_FL_PUNCH_HOLE, "libloom passes fallocate modes as they are");
_Static_assert(LW_FALLOC_ZERO_RANGE == FALLOC_FL_ZERO_RANGE, "libloom passes fallocate modes as they are");
_Static_assert(LW_SEEK_DATA == SEEK_DATA && LW_SEEK_HOLE == SEEK_HOLE, "libloom passes whence as it is");

/* The modes Linux's vfs_fallocate() lets through to a file system (Linux 6.17's, which knows
 * FALLOC_FL_WRITE_ZEROES; the headers here may predate some). */
#define MODE_COLLAPSE_RANGE 0x08
#define MODE_INSERT_RANGE   0x20
#define MODE_UNSHARE_RANGE  0x40
#define MODE_WRITE_ZEROES   0x80
#define MODE_MASK (FALLOC_FL_PUNCH_HOLE | MODE_COLLAPSE_RANGE | FALLOC_FL_ZERO_RANGE | \
		   MODE_INSERT_RANGE | MODE_UNSHARE_RANGE | MODE_WRITE_ZEROES)

static bool vfs_mode_ok(int mode)
{
	if (mode & ~(MODE_MASK | FALLOC_FL_KEEP_SIZE))
		return false;
	switch (mode & MODE_MASK) {
	case 0: /* allocate */
	case MODE_UNSHARE_RANGE:
	case FALLOC_FL_ZERO_RANGE:
		return true;
	case FALLOC_FL_PUNCH_HOLE:
		return (mode & FALLOC_FL_KEEP_SIZE) != 0;
	case MODE_COLLAPSE_RANGE:
	case MODE_INSERT_RANGE:
	case MODE_WRITE_ZEROES:
		return (mode & FALLOC_FL_KEEP_SIZE) == 0;
	default:
		return false; /* modes are exclusive */
	}
}

/* fallocate(2)'s errors, checked in the order Linux checks them (a local file answers so). */
static int falloc_check(const loom_file *f, int mode, off_t off, off_t len)
{
	if (off < 0 || len <= 0)
		return -EINVAL;
	if (!vfs_mode_ok(mode))
		return -EOPNOTSUPP;
	if ((f->flags & O_ACCMODE) == O_RDONLY)
		return -EBADF;
	if (S_ISDIR(f->attr.mode))
		return -EISDIR;
	if (!f->layout)
		return -ENODEV;
	if ((uint64_t)off + (uint64_t)len > LW_MAX_OFFSET)
		return -EFBIG;
	/* Then the file system's own answer: the modes Loom does. */
	return lw_falloc_mode_check((uint32_t)mode);
}

struct falloc_args {
	uint32_t mode;
	uint64_t off, len;
};

static int send_falloc(loom_file *f, uint32_t epoch, void *arg)
{
	const struct falloc_args *a = arg;

	return io_fallocate(f->fs, f->obj_owner, f->layout, a->mode, epoch, a->off, a->len, f->obj_blocks);
}

int loom_fallocate(loom_file *f, int mode, off_t off, off_t len)
{
	uint64_t start = (uint64_t)off, end, dom_size, objs_from;
	bool zeroes = (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) != 0;
	bool keep = (mode & FALLOC_FL_KEEP_SIZE) != 0;
	int rc;

	if (f->fs->door)
		return door_file_op(f, DOOR_OP_FALLOCATE, off, (uint32_t)mode, (uint64_t)len, NULL);
	rc = falloc_check(f, mode, off, len);
	if (rc)
		return rc;
	end = start + (uint64_t)len;
	/* As a write: setuid and setgid go first (ext4 drops them for every mode). */
	rc = file_drop_privs(f);
	if (rc)
		return rc;
	/* No write of ours may land after a punch (or be in flight over a zeroing): every handle's
	 * write-behind is waited for. Its errors stay for those handles' flush. */
	if (files_drain_ino(f->fs, f->ino) == -EINTR)
		return -EINTR;

	dom_size = f->dom ? f->layout->dom_size : 0;
	if (zeroes && start < dom_size)
		rc = dom_zero(f, start, MIN(end, dom_size) - start);
	objs_from = MAX(start, dom_size);
	if (rc == 0 && end > objs_from) {
		/* Under wb_lock, where writes are sent and answered: none of this handle's can start
		 * between its last drain and the request (another thread may use it, as the mount's
		 * do), and obj_blocks has one writer. */
		pthread_mutex_lock(&f->wb_lock);
		struct falloc_args a = { .mode = (uint32_t)mode, .off = objs_from, .len = end - objs_from };

		rc = file_drain_locked(f) == -EINTR ? -EINTR : file_send_in_epoch(f, send_falloc, &a);
		/* st_blocks moved, maybe down: with every object's figure known here, a stat before
		 * the report shows the file's (files_pending_attr). Best effort. */
		if (rc == 0)
			io_blocks(f->fs, f->ino, f->layout, f->obj_blocks);
		pthread_mutex_unlock(&f->wb_lock);
	}

	/* Reported as a write: the size it reached (unless KEEP_SIZE), the data version, mtime and
	 * blocks. A punch or zeroing that failed may have changed bytes somewhere: that too. */
	if (rc == 0 && !keep)
		file_wrote(f, start, (uint64_t)len, 0);
	if (rc == 0 || zeroes)
		file_modified(f, rc == 0 && !keep ? end : 0);
	return rc;
}

int loom_seek_data(loom_file *f, off_t off, int whence, off_t *out)
{
	uint64_t size, pos = (uint64_t)off, dom_size, data_end, found;
	int rc;

	if (f->fs->door)
		return door_seek(f, DOOR_OP_SEEK_DATA, off, whence, out);
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	if (off < 0)
		return -ENXIO; /* as ext4 answers */
	if (f->born_local && (rc = ileases_file_check(f)) != 0)
		return rc;
	pthread_mutex_lock(&f->lock);
	size = f->size;
	pthread_mutex_unlock(&f->lock);
	if (!f->layout) {
		/* Not a regular file: all of it data, as Linux's generic_file_llseek has it. */
		if (pos >= size)
			return -ENXIO;
		*out = whence == SEEK_DATA ? off : (off_t)size;
		return 0;
	}
	/* What this client wrote is where the answer looks (an error stays for the writer's flush). */
	if (files_drain_ino(f->fs, f->ino) == -EINTR)
		return -EINTR;
	size = files_written_size(f->fs, f->ino, size);
	if (pos >= size)
		return -ENXIO;

	/* Data-on-MDT: data up to what the MDS stores, then a hole up to dom_size. */
	dom_size = f->dom ? f->layout->dom_size : 0;
	if (pos < dom_size) {
		rc = dom_data_end(f, &data_end);
		if (rc)
			return rc;
		if (whence == SEEK_DATA && pos < data_end) {
			*out = off;
			return 0;
		}
		if (whence == SEEK_HOLE && (pos >= data_end || data_end < dom_size)) {
			*out = (off_t)MIN(MAX(pos, data_end), size);
			return 0;
		}
		pos = dom_size; /* data's next (or a hole's) is in the objects */
		if (pos >= size) {
			if (whence == SEEK_DATA)
				return -ENXIO;
			*out = (off_t)size;
			return 0;
		}
	}

	rc = io_seek(f->fs, f->layout, (uint32_t)whence, pos, &found);
	if (rc)
		return rc;
	if (whence == SEEK_DATA && found >= size)
		return -ENXIO; /* none before the end */
	*out = (off_t)MIN(found, size); /* SEEK_HOLE: the end is one */
	return 0;
}
