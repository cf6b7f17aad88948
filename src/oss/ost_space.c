/*
 * Space in objects: OST_FALLOCATE (allocate, punch a hole, zero a range) and OST_SEEK (where an
 * object's data and holes are), with the checksums at rest kept right (see ost_impl.h).
 *
 * Allocating changes no byte: what it allocates reads as zeros, as the hole or the end of the
 * object it replaces did, so no checksum changes. Punching and zeroing change bytes, and keep the
 * checksums right as a write does, under the same exclusive range lock. The range is done in up
 * to three pieces, one fallocate(2) each, in increasing order (so that a zeroing that grows the
 * object grows it once to its end):
 *
 *     object  | ....... block h ....... | block h+1 | ... | block t-1 | ....... block t ....... |
 *     range             [off ...........|...................................|.......... end)
 *                        head (partial)  <----------- whole blocks ---------> tail (partial)
 *
 *  - Whole blocks: their entries are cleared first (CSUM_NONE, what a hole never written has,
 *    and what it is now), then the data goes. A crash in between leaves them unchecked, never
 *    mismatched, and they are holes (or zeros) anyway.
 *  - A block covered partly (head, tail, or both in one) is a write of zeros: its new checksum
 *    is that of what it holds now with the range zeroed, and what it keeps must be intact, or
 *    the new checksum would bless a corruption (-EIO; rewriting the whole block heals it). Then
 *    intent, data, checksum, end of intent, as ost_write orders them, so that a crash has the
 *    checksum recomputed at the next start. A block that had no checksum gets none.
 * A thread holds one intent slot at a time (ost_impl.h says why), so the pieces go one by one.
 *
 * Where the backing file system lacks a mode (tmpfs has no ZERO_RANGE), its effect is had by
 * other means: zeros are punched or written, the size set with ftruncate.
 */
#include "oss/ost_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"

_Static_assert(LW_FALLOC_KEEP_SIZE == FALLOC_FL_KEEP_SIZE, "the wire's fallocate modes are Linux's");
_Static_assert(LW_FALLOC_PUNCH_HOLE == FALLOC_FL_PUNCH_HOLE, "the wire's fallocate modes are Linux's");
_Static_assert(LW_FALLOC_ZERO_RANGE == FALLOC_FL_ZERO_RANGE, "the wire's fallocate modes are Linux's");
_Static_assert(LW_SEEK_DATA == SEEK_DATA && LW_SEEK_HOLE == SEEK_HOLE, "the wire's whence is Linux's");

#define SIDECAR_PUNCH_MIN 4096 /* bytes of sidecar entries worth a hole rather than zeros */

static const uint8_t zeros[CSUM_BLOCK];
/* A block per thread: the one a punch covers partly, read whole for its checksum. */
static __thread uint8_t block[CSUM_BLOCK];

/* ---- fallocate(2), or its effect ---- */

static int write_zeros(int fd, uint64_t off, uint64_t end)
{
	int rc = 0;

	for (uint64_t pos = off; rc == 0 && pos < end; pos += CSUM_BLOCK)
		rc = pwrite_full(fd, zeros, (size_t)MIN((uint64_t)CSUM_BLOCK, end - pos), pos);
	return rc;
}

/* The bytes of [off, off + len) that the object holds (it is size long) become zeros. */
static int punch_or_write_zeros(int fd, uint64_t off, uint64_t len, uint64_t size)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	return off < size ? write_zeros(fd, off, MIN(off + len, size)) : 0;
}

/* Space for [off, off + len), and with keep 0 the size up to its end at least. A file system that
 * cannot allocate gets the size alone: a hole, which reads as zeros as well. */
static int allocate(int fd, int keep, uint64_t off, uint64_t len, uint64_t size)
{
	if (fallocate(fd, keep, (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	if (!keep && off + len > size && ftruncate(fd, (off_t)(off + len)) < 0)
		return -errno;
	return 0;
}

/* fallocate(2) of mode (LW_FALLOC_*, Linux's values) over [off, off + len). */
static int space_apply(int fd, uint32_t mode, uint64_t off, uint64_t len)
{
	struct ost_objstat os;
	int rc;

	if (fallocate(fd, (int)mode, (off_t)off, (off_t)len) == 0)
		return 0;
	if (errno != EOPNOTSUPP)
		return -errno;
	rc = fd_stat(fd, &os);
	if (rc == 0 && (mode & (LW_FALLOC_PUNCH_HOLE | LW_FALLOC_ZERO_RANGE)))
		rc = punch_or_write_zeros(fd, off, len, os.size);
	if (rc == 0 && !(mode & LW_FALLOC_PUNCH_HOLE))
		rc = allocate(fd, (int)(mode & LW_FALLOC_KEEP_SIZE), off, len, os.size);
	return rc;
}

/* ---- punching and zeroing with checksums ---- */

/* Clears the entries of blocks [first, first + n) as far as the sidecar goes (CSUM_NONE). A long
 * run becomes a hole of the sidecar, as where blocks were never written. */
static int csum_clear(int cfd, uint64_t first, uint64_t n)
{
	uint64_t lo = first * sizeof(uint32_t), hi = (first + n) * sizeof(uint32_t);
	struct stat st;
	int rc = 0;

	if (fstat(cfd, &st) < 0)
		return -errno;
	hi = MIN(hi, (uint64_t)st.st_size);
	if (lo >= hi)
		return 0;
	if (hi - lo >= SIDECAR_PUNCH_MIN &&
	    fallocate(cfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(hi - lo)) == 0)
		return 0;
	if (hi - lo >= SIDECAR_PUNCH_MIN && errno != EOPNOTSUPP)
		return -errno;
	rc = write_zeros(cfd, lo, hi);
	return rc;
}

/* A block the range covers in part: bytes [lo, hi) of block b, and the checksum it gets. */
struct partial {
	uint64_t b, lo, hi;
	bool checked; /* it has a checksum, and crc is its new one */
	uint32_t crc;
};

/* The checksum block p->b gets once its bytes [lo, hi) are zeros, when it has one: what it keeps
 * must be intact (-EIO). Under the range lock, before anything changes. */
static int partial_prepare(struct ost *o, uint64_t objid, const struct obj *h, struct partial *p)
{
	uint64_t bs = p->b << CSUM_SHIFT;
	uint32_t stored;
	size_t got;
	int rc;

	rc = csum_load(h->cfd, p->b, 1, &stored);
	p->checked = rc == 0 && stored != CSUM_NONE; /* unchecked it was, unchecked it stays */
	if (!p->checked)
		return rc;
	rc = pread_full(h->fd, block, CSUM_BLOCK, bs, &got);
	if (rc)
		return rc;
	if (csum_check(o, "fallocate", objid, p->b, block, got, &stored, NULL))
		return -EIO;
	memset(block + got, 0, CSUM_BLOCK - got);
	memset(block + (p->lo - bs), 0, (size_t)(p->hi - p->lo));
	p->crc = crc32c(0, block, CSUM_BLOCK);
	return 0;
}

/* As a write of zeros: intent, data, checksum, end of intent. */
static int partial_apply(struct ost *o, uint64_t objid, const struct obj *h, uint32_t mode,
			 const struct partial *p)
{
	int rc, slot;

	if (!p->checked)
		return space_apply(h->fd, mode, p->lo, p->hi - p->lo);
	slot = intent_begin(o, objid, p->b, 1);
	rc = space_apply(h->fd, mode, p->lo, p->hi - p->lo);
	if (rc == 0)
		rc = csum_store(h->cfd, p->b, 1, &p->crc);
	/* Part of the zeroing may have happened: no false mismatch either way (or a loud line). */
	if (rc)
		csum_repair(o, objid, h->fd, h->cfd, p->b, 1);
	intent_end(o, slot);
	return rc;
}

/* Punches or zeroes [off, end) of an object with a sidecar, piece by piece. Both partly covered
 * blocks are checked before anything changes, so a bad one leaves the range as it was. */
static int zero_checked(struct ost *o, uint64_t objid, const struct obj *h, uint32_t mode,
			uint64_t off, uint64_t end)
{
	uint64_t whole_lo = off, whole_hi = end & ~CSUM_MASK;
	struct partial head = { 0 }, tail = { 0 };
	bool has_head = false, has_tail = false;
	int rc = 0;

	if (off & CSUM_MASK) {
		head.b = off >> CSUM_SHIFT;
		head.lo = off;
		head.hi = MIN(end, (head.b + 1) << CSUM_SHIFT);
		has_head = true;
		whole_lo = head.hi; /* on a block boundary, or the end */
	}
	if (whole_lo < end && (end & CSUM_MASK)) {
		tail.b = (end - 1) >> CSUM_SHIFT;
		tail.lo = MAX(whole_lo, tail.b << CSUM_SHIFT);
		tail.hi = end;
		has_tail = true;
	}
	if (has_head)
		rc = partial_prepare(o, objid, h, &head);
	if (rc == 0 && has_tail)
		rc = partial_prepare(o, objid, h, &tail);

	if (rc == 0 && has_head)
		rc = partial_apply(o, objid, h, mode, &head);
	if (rc == 0 && whole_lo < whole_hi) {
		rc = csum_clear(h->cfd, whole_lo >> CSUM_SHIFT, (whole_hi - whole_lo) >> CSUM_SHIFT);
		if (rc == 0)
			rc = space_apply(h->fd, mode, whole_lo, whole_hi - whole_lo);
	}
	if (rc == 0 && has_tail)
		rc = partial_apply(o, objid, h, mode, &tail);
	return rc;
}

int ost_fallocate(struct ost *o, uint64_t objid, uint32_t mode, uint64_t off, uint64_t len,
		  uint64_t ino, uint32_t stripe_idx, uint32_t epoch, struct ost_objstat *os)
{
	bool zeroes = (mode & (LW_FALLOC_PUNCH_HOLE | LW_FALLOC_ZERO_RANGE)) != 0;
	uint64_t end = off + len;
	struct rl_ent rl;
	struct obj h;
	int rc, cfd;

	memset(os, 0, sizeof(*os));
	if (len == 0)
		return -EINVAL;
	/* Allocating makes a missing object, as a first write would; one never written has
	 * nothing to punch or zero (it reads as zeros, and its file's size is the MDS's). */
	rc = obj_get(o, objid, !zeroes, ino, stripe_idx, epoch, &h);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	cfd = h.cfd;
	if (zeroes && cfd < 0)
		rc = csum_open(o, objid, false, &cfd);
	if (rc == 0) {
		struct obj with_sidecar = { .fd = h.fd, .cfd = cfd };

		uint32_t cur;

		rl_lock(o, &rl, objid, off >> CSUM_SHIFT, (end - 1) >> CSUM_SHIFT, true);
		/* As a write: one made before a truncation cut this object must not land after it
		 * (it would allocate, or zero, what the cut was meant to have the last word on). */
		cur = obj_epoch(&h);
		if (cur != epoch)
			rc = cur > epoch ? -ESTALE : -EAGAIN;
		else if (zeroes && cfd >= 0)
			rc = zero_checked(o, objid, &with_sidecar, mode, off, end);
		else
			rc = space_apply(h.fd, mode, off, len); /* no checksum changes (or none kept) */
		rl_unlock(o, &rl);
	}
	if (rc == 0)
		rc = fd_stat(h.fd, os);
	if (cfd >= 0 && cfd != h.cfd)
		close(cfd);
	obj_put(o, &h);
	return rc;
}

int space_trim_past_end(int fd, struct ost_objstat *os)
{
	/* Only when the blocks say there may be some: more than the bytes take, rounded to a page
	 * (metadata blocks of a large extent tree count too; that costs only a needless call). A
	 * truncate to the same size drops them (ext4, tmpfs). */
	if (os->blocks * 512 <= ((os->size + 4095) & ~(uint64_t)4095))
		return 0;
	if (ftruncate(fd, (off_t)os->size) < 0)
		return -errno;
	return fd_stat(fd, os);
}

/* ---- seeking ---- */

int ost_seek(struct ost *o, uint64_t objid, uint32_t whence, uint64_t off, uint64_t *found,
	     struct ost_objstat *os)
{
	struct obj h;
	off_t pos;
	int rc;

	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, false, 0, 0, 0, &h);
	if (rc == -ENOENT) {
		/* A missing object is an empty one: no data, and a hole from anywhere. */
		*found = off;
		return whence == LW_SEEK_DATA ? -ENXIO : 0;
	}
	if (rc)
		return rc;
	/* lseek(2) moves the shared descriptor's position, which nothing uses (all I/O names its
	 * offset); each caller gets its own answer. */
	pos = lseek(h.fd, (off_t)off, whence == LW_SEEK_DATA ? SEEK_DATA : SEEK_HOLE);
	if (pos >= 0)
		*found = (uint64_t)pos;
	else if (errno == ENXIO && whence == LW_SEEK_HOLE)
		*found = off; /* at or past the end: the hole that never ends */
	else
		rc = -errno;
	if (rc == 0)
		rc = fd_stat(h.fd, os);
	obj_put(o, &h);
	return rc;
}
