/*
 * Writes: write(2) and pwrite(2) on a handle. A write of up to 1 MiB goes behind (copied, sent,
 * answered later, at most 4 MiB in flight per handle); a larger one is answered once written.
 * An erasure-coded file's sequential writes are gathered into whole rows, which go behind with
 * their parity (io_ec.c); what is left of a row goes when the handle is drained.
 * Only what reached the objects is reported as part of the file, and a write an OSS refuses as
 * made in another truncation epoch is sent again in the right one (architecture.md, Truncation).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/cstats.h"
#include "client/door.h"
#include "client/internal.h"
#include "common/log.h"
#include "common/stripe.h"
#include "common/util.h"

#define WB_MAX_WRITE    (1u << 20) /* writes up to this size go behind (FUSE's are 1 MiB) */
#define WB_MAX_INFLIGHT (4u << 20) /* bytes behind per handle: every stripe of a 4-wide file at
                                    * 1 MiB busy, and little written past a full OST */
#define WB_SLOTS        (sizeof(((loom_file *)0)->wb) / sizeof(((loom_file *)0)->wb[0]))
#define EC_ROW_MAX      (64u << 20) /* rows gathered up to this size; larger ones as they come */

/* An erasure-coded file's row (the data of one row of units), or 0. */
static uint64_t ec_row_size(const loom_file *f)
{
	const struct loom_layout *l = f->layout;

	return l && l->ec_parity && l->nobjs ? (uint64_t)l->stripe_size * layout_per_copy(l) : 0;
}

/* Bytes behind per handle: an erasure-coded file keeps two of its rows in flight. */
static uint64_t wb_limit(const loom_file *f)
{
	return MAX((uint64_t)WB_MAX_INFLIGHT, 2 * ec_row_size(f));
}

static int ec_row_send(loom_file *f);

uint32_t file_epoch(loom_file *f)
{
	uint32_t epoch = ino_epoch(f->fs, f->ino, 0);

	pthread_mutex_lock(&f->lock);
	if (epoch > f->trunc_epoch) {
		f->trunc_epoch = epoch;
		f->written_end = 0;
		f->fail_off = UINT64_MAX;
	}
	epoch = f->trunc_epoch;
	pthread_mutex_unlock(&f->lock);
	return epoch;
}

/* Learns the file's truncation epoch from the MDS after an OSS refused a write as older than its
 * object's last cut: -EIO if the MDS knows of none newer (a broken server). */
static int learn_epoch(loom_file *f, uint32_t refused)
{
	struct lw_attr attr;
	int rc = mdc_getattr(f->fs, &f->cred, f->ino, &attr);

	if (rc)
		return rc;
	if (attr.trunc_epoch <= refused)
		return -EIO;
	ino_epoch(f->fs, f->ino, attr.trunc_epoch);
	file_epoch(f);
	return 0;
}

int file_send_again(loom_file *f, int rc, uint32_t sent, file_epoch_send send, void *arg)
{
	uint64_t give_up = clock_mono_ns() + (uint64_t)f->fs->recovery_ms * 1000000ull;
	unsigned wait_ms = 1;

	while (rc == -ESTALE || rc == -EAGAIN) {
		if (rc == -ESTALE && file_epoch(f) <= sent && (rc = learn_epoch(f, sent)) != 0)
			return rc;
		if (rc == -EAGAIN) {
			if (clock_mono_ns() > give_up)
				return -EIO;
			sleep_ms(wait_ms);
			wait_ms = wait_ms < 64 ? wait_ms * 2 : 64;
		}
		sent = file_epoch(f);
		rc = send(f, sent, arg);
	}
	return rc;
}

int file_send_in_epoch(loom_file *f, file_epoch_send send, void *arg)
{
	uint32_t sent = file_epoch(f);

	return file_send_again(f, send(f, sent, arg), sent, send, arg);
}

struct write_args {
	const void *buf;
	uint64_t len, off;
};

static int send_write(loom_file *f, uint32_t epoch, void *arg)
{
	const struct write_args *w = arg;

	return io_write(f->fs, f->obj_owner, f->layout, w->buf, w->len, w->off, epoch, f->obj_blocks);
}

/* A write of [off, off + len) made in epoch `sent` that ended with rc, sent again as needed. */
static int write_again(loom_file *f, const void *buf, uint64_t len, uint64_t off, int rc,
		       uint32_t sent)
{
	struct write_args w = { .buf = buf, .len = len, .off = off };

	return file_send_again(f, rc, sent, send_write, &w);
}

/* Only what reached the objects is reported as part of the file; a failure is every handle's to
 * hear of (errseq), and this handle's next writes fail until it has reported it. */
void file_wrote(loom_file *f, uint64_t off, uint64_t len, int rc)
{
	pthread_mutex_lock(&f->lock);
	if (rc == 0 && off + len > f->written_end)
		f->written_end = off + len;
	if (rc && off < f->fail_off)
		f->fail_off = off;
	pthread_mutex_unlock(&f->lock);
	if (rc) {
		if (!f->wb_err)
			f->wb_err = rc;
		ino_error(f->fs, f->ino, rc);
	}
}

/* Under wb_lock: the oldest write behind is answered, waiting for it with wait: 1 when one was,
 * 0 when none is (or, without wait, none is yet), -EINTR when the waiting thread was interrupted
 * first. That write stays in flight, in its place: only the wait ends (write(2), fsync(2) or
 * close(2) answer EINTR); the bytes, acknowledged already, are not given up. */
static int wb_reap_one(loom_file *f, bool wait)
{
	struct jobtag_scope js;
	struct io_wb *b;
	uint64_t off, len;
	int rc;

	if (!f->wb_count)
		return 0;
	b = f->wb[f->wb_first];
	if (!wait && !io_wb_done(b))
		return 0;
	if (wait && io_wb_settled(b) == -EINTR)
		return -EINTR;
	f->wb_first = (f->wb_first + 1) % WB_SLOTS;
	f->wb_count--;
	f->wb_bytes -= io_wb_len(b);
	off = io_wb_off(b);
	len = io_wb_len(b);
	/* Whoever reaps it (another process's write or close on a shared handle, a FUSE release that
	 * comes from no process), its second tries are its writer's bytes. */
	jobtag_enter(&js, io_wb_jobid(b));
	rc = io_wb_wait(b, f->obj_blocks);
	if (rc == -ESTALE || rc == -EAGAIN)
		rc = write_again(f, io_wb_data(b), len, off, rc, io_wb_epoch(b));
	jobtag_leave(&js);
	io_wb_free(b);
	file_wrote(f, off, len, rc);
	return 1;
}

static bool wb_overlaps(loom_file *f, uint64_t off, uint64_t len)
{
	if (f->ec_len > f->ec_sent && off < f->ec_off + f->ec_len && f->ec_off + f->ec_sent < off + len)
		return true; /* the part of the gathered row not sent yet */
	for (unsigned i = 0; i < f->wb_count; i++)
		if (io_wb_overlaps(f->wb[(f->wb_first + i) % WB_SLOTS], off, len))
			return true;
	return false;
}

/* Every write behind answered (a row being gathered sent first), or -EINTR. */
static int wb_reap_all(loom_file *f)
{
	int rc = ec_row_send(f);

	if (rc)
		return rc;
	while ((rc = wb_reap_one(f, true)) > 0)
		;
	return rc;
}

int file_drain_locked(loom_file *f)
{
	int rc = wb_reap_all(f);

	return rc ? rc : f->wb_err;
}

int file_drain(loom_file *f)
{
	int rc;

	pthread_mutex_lock(&f->wb_lock);
	rc = file_drain_locked(f);
	pthread_mutex_unlock(&f->wb_lock);
	return rc;
}

int files_drain_ino(loom_fs *fs, uint64_t ino)
{
	int rc = 0;

	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *f = u64map_get(&fs->files, ino); f && rc != -EINTR; f = f->next_same_ino) {
		int r = file_drain(f);
		if (r && (!rc || r == -EINTR))
			rc = r;
	}
	pthread_mutex_unlock(&fs->files_lock);
	return rc;
}

/* Writes of the inode's other handles here that are in flight over these bytes are answered
 * first: the objects must end with the newer bytes, and two writes in flight can land in either
 * order (a write through one descriptor, then another descriptor's write of the same bytes: a
 * page of an mmap written back, a second open of the file). Not under f's wb_lock: another handle
 * may be waiting the same way for f's. Writes racing from two handles at once have no order to
 * keep, as on a local disk. */
static int drain_others(loom_file *f, uint64_t off, uint64_t len)
{
	loom_fs *fs = f->fs;
	int rc = 0;

	pthread_mutex_lock(&fs->files_lock);
	for (loom_file *o = u64map_get(&fs->files, f->ino); o && rc == 0; o = o->next_same_ino) {
		if (o == f)
			continue;
		pthread_mutex_lock(&o->wb_lock);
		if (wb_overlaps(o, off, len) && wb_reap_all(o) == -EINTR)
			rc = -EINTR; /* they stay in flight; their errors are o's to report */
		/* The bytes o kept of an erasure-coded row are not the file's any more. */
		if (o->ec_sent && off < o->ec_off + o->ec_sent && o->ec_off < off + len)
			o->ec_trust = false;
		pthread_mutex_unlock(&o->wb_lock);
	}
	pthread_mutex_unlock(&fs->files_lock);
	return rc;
}

/* The write goes behind: copied (or, given, buf is a malloc'd buffer the batch takes on
 * success), sent, answered later. Under wb_lock. */
static int wb_send(loom_file *f, const void *buf, size_t len, uint64_t off, bool given)
{
	struct io_wb *b;
	int rc;

	while (wb_reap_one(f, false) > 0)
		;
	/* Two writes of the same bytes in flight could be applied in either order: wait. */
	if (wb_overlaps(f, off, len) && (rc = wb_reap_all(f)))
		return rc;
	while (f->wb_count == WB_SLOTS || (f->wb_count && f->wb_bytes + len > wb_limit(f)))
		if ((rc = wb_reap_one(f, true)) < 0)
			return rc;
	if (f->wb_err)
		return f->wb_err; /* an earlier write failed: so do the next ones, until reported */
	rc = given ? io_wb_start_owned(f->fs, f->obj_owner, f->layout, (uint8_t *)buf, len, off,
				       file_epoch(f), &b) :
		     io_wb_start(f->fs, f->obj_owner, f->layout, buf, len, off, file_epoch(f), &b);
	if (rc)
		return rc;
	f->wb[(f->wb_first + f->wb_count) % WB_SLOTS] = b;
	f->wb_count++;
	f->wb_bytes += len;
	cstat_add(CSTAT_WRITE_BEHIND);
	return 0;
}

static int wb_write(loom_file *f, const void *buf, size_t len, uint64_t off)
{
	return wb_send(f, buf, len, off, false);
}

/* As the kernel's file_remove_privs(): a write by anyone but root drops setuid, and setgid on a
 * group-executable file. The MDS does it (the writer may not own the file). */
int file_drop_privs(loom_file *f)
{
	struct lw_setattr sa = { .ino = f->ino, .valid = LW_SA_KILLPRIV | LW_SA_FH };
	struct lw_attr attr;
	uint32_t mode;
	bool checked;
	int rc;

	pthread_mutex_lock(&f->lock);
	checked = f->privs_checked;
	mode = f->attr.mode;
	pthread_mutex_unlock(&f->lock);
	if (checked)
		return 0;
	if (f->cred.uid == 0 || !(mode & (S_ISUID | S_ISGID))) {
		rc = 0;
	} else {
		rc = mdc_setattr(f->fs, &f->cred, &sa, &attr);
		pthread_mutex_lock(&f->lock);
		if (rc == 0)
			f->attr.mode = attr.mode;
		f->own_gen = 0; /* its mode and ctime moved at the MDS (or may have) */
		pthread_mutex_unlock(&f->lock);
	}
	if (rc == 0) {
		pthread_mutex_lock(&f->lock);
		f->privs_checked = true;
		pthread_mutex_unlock(&f->lock);
	}
	return rc;
}

/* Under wb_lock: written before the answer, after every write behind. A failure is this write's
 * error (nothing of it is reported as part of the file), not one for later. */
static int write_now(loom_file *f, const void *buf, uint64_t len, uint64_t off)
{
	uint32_t epoch;
	int rc = wb_reap_all(f);

	if (rc)
		return rc;
	epoch = file_epoch(f);
	rc = f->wb_err ? f->wb_err : io_write(f->fs, f->obj_owner, f->layout, buf, len, off, epoch,
					      f->obj_blocks);
	if (rc == -ESTALE || rc == -EAGAIN)
		rc = write_again(f, buf, len, off, rc, epoch);
	if (rc == 0) {
		file_wrote(f, off, len, 0);
		cstat_add(CSTAT_WRITE_SYNC);
	}
	return rc;
}

struct span_args {
	const uint8_t *buf;
	uint64_t len, off;
	struct ec_span span;
	uint32_t known_epoch;   /* the truncation epoch the known bytes were written in */
};

static int send_span(loom_file *f, uint32_t epoch, void *arg)
{
	const struct span_args *a = arg;
	struct ec_span span = a->span;

	/* Sent again in a newer epoch: a truncation cut what the row held; nothing is known. */
	if (epoch != a->known_epoch)
		span.known = 0;
	return io_write_span(f->fs, f->obj_owner, f->layout, a->buf, a->len, a->off, epoch, &span,
			     f->obj_blocks);
}

/* Where a gathered row may begin: a row's start, or where the Data-on-MDT part of the first
 * row ends (the objects hold zeros below it). */
static bool ec_row_start(const loom_file *f, uint64_t off)
{
	uint64_t row = ec_row_size(f);

	return off % row == 0 || off == f->layout->dom_size;
}

/*
 * Under wb_lock: the row being gathered goes, what of it was not sent yet. A whole row goes
 * behind with its parity. Part of a row that ends the file (as this handle knows it) goes the
 * same way, zeros after the end, written before the answer; the row stays gathered, so that
 * writes that go on from there (after a read, an fsync) make it whole again, writing only their
 * own bytes and the row's new parity. What was sent is trusted only in the truncation epoch it
 * was sent in, and while no other handle here wrote over it (ec_trust; another client's writes
 * over it make the file one of several writers, whose parity the MDS makes again at the last
 * close). Any other part goes at once, its row's parity marked stale (io_ec.c). A failure is the
 * handle's to report, as a write behind's; -EINTR keeps the row.
 */
static int ec_row_send(loom_file *f)
{
	uint64_t off = f->ec_off, len = f->ec_len, sent = f->ec_sent, size;
	struct span_args a = { .buf = f->ec_row + sent, .len = len - sent, .off = off + sent,
			       .span = { .known = f->ec_trust ? sent : 0 }, .known_epoch = f->ec_epoch };
	struct jobtag_scope js;
	bool whole;
	int rc;

	if (len == 0)
		return 0; /* nothing gathered (and not an erasure-coded file's handle) */
	whole = (off + len) % ec_row_size(f) == 0;
	if (len == sent) {
		if (whole)
			f->ec_len = f->ec_sent = 0;
		return 0;
	}
	pthread_mutex_lock(&f->lock);
	size = f->size;
	pthread_mutex_unlock(&f->lock);
	f->ec_len = f->ec_sent = 0;
	/* Whoever drains it, the row goes in the name of the job that wrote its first unsent bytes
	 * (ec_jobid). Two processes filling one row share its RPCs: they are charged to that one. */
	jobtag_enter(&js, f->ec_jobid);
	if (whole && sent == 0) {
		/* The row's buffer goes with the batch (a new one for the next row): no copy. */
		rc = wb_send(f, f->ec_row, len, off, true);
		if (rc == 0)
			f->ec_row = NULL;
		else if (rc != -EINTR)
			file_wrote(f, off, len, rc); /* acknowledged bytes that never went: reported */
	} else if (whole || off + len >= size) {
		/* Written before the answer: wb_write's copy would be a third one of these bytes. */
		a.span.ends_file = !whole;
		rc = wb_reap_all(f);
		if (rc == 0)
			rc = f->wb_err ? f->wb_err : file_send_in_epoch(f, send_span, &a);
		if (rc != -EINTR)
			file_wrote(f, a.off, a.len, rc);
		if (rc == 0 && !whole) {
			f->ec_off = off;
			f->ec_len = f->ec_sent = len;
			f->ec_epoch = file_epoch(f);
			f->ec_trust = true;
		}
	} else {
		rc = write_now(f, a.buf, a.len, a.off);
		if (rc && rc != -EINTR)
			file_wrote(f, a.off, a.len, rc);
	}
	jobtag_leave(&js);
	if (rc == -EINTR) {
		f->ec_off = off; /* still to go */
		f->ec_len = len;
		f->ec_sent = sent;
	}
	return rc == -EINTR ? rc : 0;
}

/* Under wb_lock: an erasure-coded file's write. Sequential writes fill a row, which goes whole
 * when full; whole rows in the write go behind at once; a part of a row that starts none goes at
 * once. */
static int ec_write_data(loom_file *f, const char *buf, size_t len, uint64_t off)
{
	uint64_t row = ec_row_size(f);
	int rc = 0;

	if (f->wb_err)
		return f->wb_err; /* an earlier write failed: so do the next ones, until reported */
	if (f->ec_len && off != f->ec_off + f->ec_len) {
		rc = ec_row_send(f);
		if (rc)
			return rc; /* -EINTR: the row is still to go */
		f->ec_len = f->ec_sent = 0; /* a row sent and kept ends here */
	}
	while (len > 0 && rc == 0) {
		uint64_t n, row_end = (off / row + 1) * row;

		if (f->ec_len || (ec_row_start(f, off) && off + len < row_end)) {
			if (!f->ec_row && !(f->ec_row = malloc(row)))
				return -ENOMEM;
			if (!f->ec_len)
				f->ec_off = off;
			if (f->ec_len == f->ec_sent)
				jobtag_current(f->fs, f->ec_jobid); /* the first of its bytes to send */
			n = MIN(len, row_end - off);
			memcpy(f->ec_row + (off - f->ec_off), buf, n);
			f->ec_len += n;
			if (off + n == row_end)
				rc = ec_row_send(f);
		} else if (ec_row_start(f, off)) {
			n = (off + len) / row * row - off;
			/* As a plain file's: a large write is answered once written, not copied. */
			rc = n <= WB_MAX_WRITE ? wb_write(f, buf, n, off) : write_now(f, buf, n, off);
		} else {
			n = MIN(len, row_end - off);
			rc = write_now(f, buf, n, off);
		}
		buf += n;
		off += n;
		len -= n;
	}
	return rc;
}

/* The bytes below dom_size go to the MDS's part (sent with the next size report), the rest to
 * the objects. */
static int write_data(loom_file *f, const char *buf, size_t len, uint64_t off)
{
	int rc = 0;

	if (f->dom && off < f->layout->dom_size) {
		size_t n = len < f->layout->dom_size - off ? len : (size_t)(f->layout->dom_size - off);

		rc = dom_write(f, buf, n, off);
		if (rc || n == len)
			return rc;
		buf += n;
		len -= n;
		off += n;
	}
	if ((rc = drain_others(f, off, len)) != 0)
		return rc;
	pthread_mutex_lock(&f->wb_lock);
	if (ec_row_size(f) && ec_row_size(f) <= EC_ROW_MAX)
		rc = ec_write_data(f, buf, len, off);
	else if (len <= WB_MAX_WRITE)
		rc = wb_write(f, buf, len, off);
	else
		rc = write_now(f, buf, len, off);
	pthread_mutex_unlock(&f->wb_lock);
	return rc;
}

static ssize_t pwrite_at(loom_file *f, const void *buf, size_t len, uint64_t off)
{
	int rc;

	if (len == 0)
		return 0;
	if ((rc = file_drop_privs(f)) != 0)
		return rc;
	if (len > SSIZE_MAX)
		len = SSIZE_MAX;
	if (off >= LW_MAX_OFFSET || len > LW_MAX_OFFSET - off)
		return -EFBIG;
	rc = write_data(f, buf, len, off);
	if (rc)
		return rc;
	file_modified(f, off + len);
	return (ssize_t)len;
}

void file_modified(loom_file *f, uint64_t end)
{
	pthread_mutex_lock(&f->lock);
	if (end > f->size)
		f->size = end;
	f->dirty = true;
	f->writes++;
	f->mtime_dirty = true;
	f->mtime = clock_real();
	pthread_mutex_unlock(&f->lock);
}

ssize_t loom_pwrite(loom_file *f, const void *buf, size_t len, off_t off)
{
	ssize_t n;

	if (f->fs->door)
		return door_rw(f, DOOR_OP_PWRITE, (void *)buf, len, off);
	if (off < 0)
		return -EINVAL;
	if (!file_can_write(f))
		return -EBADF;
	if (!f->layout)
		return -EINVAL;
	if (!(f->flags & O_APPEND))
		return pwrite_at(f, buf, len, (uint64_t)off);
	/* O_APPEND: the end is chosen and written in one step, so two appends through this handle
	 * never land on the same offset. */
	pthread_mutex_lock(&f->append_lock);
	pthread_mutex_lock(&f->lock);
	off = (off_t)f->size;
	pthread_mutex_unlock(&f->lock);
	n = pwrite_at(f, buf, len, (uint64_t)off);
	pthread_mutex_unlock(&f->append_lock);
	return n;
}

ssize_t loom_write(loom_file *f, const void *buf, size_t len)
{
	ssize_t n;

	if (f->fs->door)
		return door_rw(f, DOOR_OP_WRITE, (void *)buf, len, 0);
	n = loom_pwrite(f, buf, len, (off_t)f->pos);
	if (n > 0) {
		pthread_mutex_lock(&f->lock);
		/* After an append the position is the end it wrote to (which is the end now). */
		f->pos = (f->flags & O_APPEND) ? f->size : f->pos + (uint64_t)n;
		pthread_mutex_unlock(&f->lock);
	}
	return n;
}
