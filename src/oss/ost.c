/*
 * One OST: objects as files in a directory, each with a sidecar of block checksums. The format
 * of the sidecar, the crash-consistency scheme and the locking are described in ost_impl.h.
 */
#include "oss/ost_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"

#define CSUM_STACK   272 /* checksums kept on the stack: a 16 MiB request, unaligned, needs 257 */

/*
 * A test hook for the crash window the intents cover: with LOOM_OSS_CRASH_AT=N in its
 * environment, the OSS kills itself (SIGKILL) after writing the data of its Nth write and
 * before writing its checksums. Read at the first ost_open(); -1: never.
 */
static long crash_at = -1;
static atomic_long writes_seen;
static pthread_once_t crash_once = PTHREAD_ONCE_INIT;

static void crash_hook_init(void)
{
	const char *e = getenv("LOOM_OSS_CRASH_AT");

	if (e && atol(e) > 0) {
		crash_at = atol(e);
		log_warn("LOOM_OSS_CRASH_AT=%ld: this OSS will kill itself inside write %ld", crash_at, crash_at);
	}
}

/* A block of scratch per thread, for the blocks a read or write covers only partly. */
static __thread uint8_t scratch[CSUM_BLOCK];

/* ---- plain I/O ---- */

int pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			*got = done;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
	}
	return 0;
}

int fd_stat(int fd, struct ost_objstat *os)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	os->size = (uint64_t)st.st_size;
	os->blocks = (uint64_t)st.st_blocks;
	return 0;
}

/* ---- opening and closing ---- */

void ost_set_cache_policy(struct ost *o, const struct ost_cache_policy *p)
{
	o->cache = *p;
}

int ost_open(const char *dir, struct ost **out)
{
	struct ost *o;
	char path[PATH_MAX], why[128];
	int rc;

	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->dirfd = -1;
	o->intent_fd = -1;
	o->cache.readcache_max_io = OST_READCACHE_MAX_IO;
	o->cache.writeback_min_io = OST_WRITEBACK_MIN_IO;
	for (int i = 0; i < OST_NDIRS; i++) {
		o->odir[i] = -1;
		pthread_mutex_init(&o->odir_sync[i], NULL);
	}
	for (int i = 0; i < FDC_SLOTS; i++) {
		o->fdc[i].fd = -1;
		o->fdc[i].cfd = -1;
	}
	pthread_mutex_init(&o->fdc_lock, NULL);
	for (int i = 0; i < RL_BUCKETS; i++) {
		pthread_mutex_init(&o->rl[i].lock, NULL);
		pthread_cond_init(&o->rl[i].cond, NULL);
	}
	pthread_mutex_init(&o->intent_lock, NULL);
	pthread_cond_init(&o->intent_cond, NULL);
	scrub_init(o);
	pthread_once(&crash_once, crash_hook_init);
	if (!realpath(dir, o->dir)) {
		rc = -errno;
		goto fail;
	}
	rc = ost_conf_read(o->dir, &o->conf, why, sizeof(why));
	if (rc == -EINVAL)
		log_err("%s/" OST_CONF_FILE " is not an OST's: %s", o->dir, why);
	if (rc)
		goto fail;
	atomic_init(&o->lost_below, o->conf.replace ? UINT64_MAX : o->conf.lost_below);
	o->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	for (int i = 0; i < OST_NDIRS; i++) {
		snprintf(path, sizeof(path), OST_ODIR_FMT, i);
		o->odir[i] = openat(o->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (o->odir[i] < 0) {
			rc = -errno;
			goto fail;
		}
	}
	rc = intents_open_and_recover(o);
	if (rc)
		goto fail;
	*out = o;
	return 0;
fail:
	ost_close(o);
	return rc;
}

void ost_close(struct ost *o)
{
	if (!o)
		return;
	scrub_fini(o);
	for (int i = 0; i < FDC_SLOTS; i++) {
		if (o->fdc[i].fd >= 0)
			close(o->fdc[i].fd);
		if (o->fdc[i].cfd >= 0)
			close(o->fdc[i].cfd);
	}
	for (int i = 0; i < OST_NDIRS; i++) {
		if (o->odir[i] >= 0)
			close(o->odir[i]);
		pthread_mutex_destroy(&o->odir_sync[i]);
	}
	if (o->intents)
		munmap(o->intents, INTENT_SLOTS * sizeof(struct csum_intent));
	if (o->intent_fd >= 0)
		close(o->intent_fd);
	if (o->dirfd >= 0)
		close(o->dirfd);
	for (int i = 0; i < RL_BUCKETS; i++) {
		pthread_mutex_destroy(&o->rl[i].lock);
		pthread_cond_destroy(&o->rl[i].cond);
	}
	pthread_mutex_destroy(&o->intent_lock);
	pthread_cond_destroy(&o->intent_cond);
	pthread_mutex_destroy(&o->fdc_lock);
	free(o);
}

const char *ost_dir(const struct ost *o) { return o->dir; }
const char *ost_uuid(const struct ost *o) { return o->conf.uuid; }
const char *ost_fsname(const struct ost *o) { return o->conf.fsname; }
uint32_t ost_index(const struct ost *o) { return o->conf.idx; }

bool ost_replacing(const struct ost *o) { return o->conf.replace; }

int ost_replaced(struct ost *o, uint32_t idx, uint64_t lost_below)
{
	struct ost_conf c = o->conf;
	int rc;

	c.idx = idx;
	c.replace = false;
	c.lost_below = lost_below;
	rc = ost_conf_write(o->dir, &c);
	if (rc == 0) {
		o->conf = c;
		atomic_store_explicit(&o->lost_below, lost_below, memory_order_release);
	}
	return rc;
}

int ost_set_index(struct ost *o, uint32_t idx)
{
	struct ost_conf c = o->conf;
	int rc;

	if (c.idx == idx)
		return 0;
	c.idx = idx;
	rc = ost_conf_write(o->dir, &c);
	if (rc == 0)
		o->conf.idx = idx;
	return rc;
}

/* ---- object I/O ---- */

/*
 * Reads [off, off+len) into buf checking every block it touches against stored (the entries
 * of blocks from `first` on). Whole blocks go straight into buf; a block the range covers only
 * partly is read whole into the scratch block first, since its checksum covers all of it. So
 * an aligned read costs one pread, an unaligned one up to three.
 */
static int read_checked(struct ost *o, uint64_t objid, int fd, uint64_t off, uint8_t *buf,
			size_t len, uint64_t first, const uint32_t *stored, size_t *nread)
{
	size_t done = 0, got;
	uint64_t pos = off;
	int rc = 0;

	while (done < len) {
		uint64_t b = pos >> CSUM_SHIFT, bs = b << CSUM_SHIFT;
		size_t in = (size_t)(pos - bs);
		const uint32_t *st = stored + (b - first);

		if (in == 0 && len - done >= CSUM_BLOCK) {
			size_t want = (len - done) & ~(size_t)CSUM_MASK;

			rc = pread_full(fd, buf + done, want, pos, &got);
			if (rc == 0 && csum_check(o, "read", objid, b, buf + done, got, st, NULL))
				rc = -EUCLEAN; /* stored bytes that do not match their checksum */
			if (rc)
				break;
			done += got;
			pos += got;
			if (got < want)
				break; /* the object ends here */
		} else {
			size_t take;

			rc = pread_full(fd, scratch, CSUM_BLOCK, bs, &got);
			if (rc || got <= in)
				break; /* an error, or the object ends before pos */
			if (csum_check(o, "read", objid, b, scratch, got, st, NULL)) {
				rc = -EUCLEAN; /* stored bytes that do not match their checksum */
				break;
			}
			take = MIN(got - in, len - done);
			memcpy(buf + done, scratch + in, take);
			done += take;
			pos += take;
			if (got < CSUM_BLOCK)
				break;
		}
	}
	*nread = done;
	return rc;
}

int ost_read(struct ost *o, uint64_t objid, uint64_t off, void *buf, size_t len, size_t *nread,
	     struct ost_objstat *os)
{
	uint32_t stack[CSUM_STACK], *stored = stack;
	struct rl_ent rl;
	struct obj h;
	uint64_t first, n;
	size_t done = 0;
	bool any = false;
	int rc;

	*nread = 0;
	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, false, 0, 0, 0, &h);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (len == 0)
		goto stat;
	first = off >> CSUM_SHIFT;
	n = ((off + len - 1) >> CSUM_SHIFT) - first + 1;
	if (n > CSUM_STACK && !(stored = malloc(n * sizeof(*stored)))) {
		rc = -ENOMEM;
		goto out;
	}
	rl_lock(o, &rl, objid, first, first + n - 1, false);
	rc = csum_load(h.cfd, first, (uint32_t)n, stored);
	for (uint64_t i = 0; rc == 0 && i < n && !any; i++)
		any = stored[i] != CSUM_NONE;
	if (rc == 0 && any)
		rc = read_checked(o, objid, h.fd, off, buf, len, first, stored, &done);
	else if (rc == 0)
		rc = pread_full(h.fd, buf, len, off, &done); /* nothing to check */
	rl_unlock(o, &rl);
	if (rc)
		goto out;
	/* Drop-behind: clean pages go now; dirty ones (written, not yet on disk) stay. */
	if (done > o->cache.readcache_max_io)
		posix_fadvise(h.fd, (off_t)off, (off_t)done, POSIX_FADV_DONTNEED);
	*nread = done;
stat:
	rc = fd_stat(h.fd, os);
out:
	if (stored != stack)
		free(stored);
	obj_put(o, &h);
	return rc;
}

/*
 * The new checksum of block b, which the write of buf at [off, end) covers only partly: the
 * rest is what the block holds now (zeros past the object's end). What is kept must be intact
 * now, or the new checksum would bless a corruption: -EIO then (a write of the whole block
 * heals it).
 */
static int csum_merge(struct ost *o, uint64_t objid, const struct obj *h, uint64_t b,
		      const uint8_t *buf, uint64_t off, uint64_t end, uint32_t *crc)
{
	uint64_t bs = b << CSUM_SHIFT, lo = MAX(bs, off), hi = MIN(bs + CSUM_BLOCK, end);
	uint32_t stored;
	size_t got;
	int rc;

	rc = pread_full(h->fd, scratch, CSUM_BLOCK, bs, &got);
	if (rc)
		return rc;
	if (got > 0 && (lo > bs || hi < bs + got)) {
		rc = csum_load(h->cfd, b, 1, &stored);
		if (rc)
			return rc;
		if (csum_check(o, "write", objid, b, scratch, got, &stored, NULL))
			return -EIO;
	}
	memset(scratch + got, 0, CSUM_BLOCK - got);
	memcpy(scratch + (lo - bs), buf + (lo - off), (size_t)(hi - lo));
	*crc = crc32c(0, scratch, CSUM_BLOCK);
	return 0;
}

int ost_write(struct ost *o, uint64_t objid, uint64_t off, const void *buf, size_t len,
	      uint64_t ino, uint32_t stripe_idx, uint32_t epoch, struct ost_objstat *os)
{
	uint32_t stack[CSUM_STACK], *crcs = stack;
	const uint8_t *src = buf;
	uint64_t end = off + len, first, last, n;
	struct rl_ent rl;
	struct obj h;
	int rc, slot;

	rc = obj_get(o, objid, true, ino, stripe_idx, epoch, &h);
	if (rc)
		return rc;
	if (len == 0)
		goto stat;
	first = off >> CSUM_SHIFT;
	last = (end - 1) >> CSUM_SHIFT;
	n = last - first + 1;
	if (n > CSUM_STACK && !(crcs = malloc(n * sizeof(*crcs)))) {
		rc = -ENOMEM;
		goto out;
	}
	/* Whole blocks: their checksums come from the buffer at hand, before any lock is taken. */
	for (uint64_t i = 0; i < n; i++) {
		uint64_t bs = (first + i) << CSUM_SHIFT;
		if (bs >= off && bs + CSUM_BLOCK <= end)
			crcs[i] = crc32c(0, src + (bs - off), CSUM_BLOCK);
	}

	rl_lock(o, &rl, objid, first, last, true);
	{
		uint32_t cur = obj_epoch(&h);

		if (cur != epoch) {
			rc = cur > epoch ? -ESTALE : -EAGAIN;
			goto unlock;
		}
	}
	/* Only the first and the last block can be partly covered. */
	if ((off & CSUM_MASK) || end < (first << CSUM_SHIFT) + CSUM_BLOCK)
		rc = csum_merge(o, objid, &h, first, src, off, end, &crcs[0]);
	if (rc == 0 && last != first && (end & CSUM_MASK))
		rc = csum_merge(o, objid, &h, last, src, off, end, &crcs[n - 1]);
	if (rc)
		goto unlock;

	/* Ordering: intent, data, checksums, end of intent (see ost_impl.h). */
	slot = intent_begin(o, objid, first, n);
	rc = pwrite_full(h.fd, src, len, off);
	if (crash_at > 0 && atomic_fetch_add(&writes_seen, 1) + 1 == crash_at)
		raise(SIGKILL);
	if (rc == 0)
		rc = csum_store(h.cfd, first, (uint32_t)n, crcs);
	/* A failed write may have changed part of the data: its intent ends either way, since
	 * csum_repair leaves no false mismatch, or has said loudly that it could not. */
	if (rc)
		csum_repair(o, objid, h.fd, h.cfd, first, n);
	intent_end(o, slot);
unlock:
	rl_unlock(o, &rl);
	/* Early write-out; it may wait for the disk's queue, which paces a fast writer. */
	if (rc == 0 && len >= o->cache.writeback_min_io)
		sync_file_range(h.fd, (off_t)off, (off_t)len, SYNC_FILE_RANGE_WRITE);
stat:
	if (rc == 0)
		rc = fd_stat(h.fd, os);
out:
	if (crcs != stack)
		free(crcs);
	obj_put(o, &h);
	return rc;
}

/* 0 if objid's file exists, else -errno. */
static int faccessat_obj(struct ost *o, uint64_t objid)
{
	char name[OST_OBJ_NAME_MAX];

	ost_obj_name(objid, name, sizeof(name));
	return faccessat(o->odir[ost_obj_dir(objid)], name, F_OK, 0) < 0 ? -errno : 0;
}

int ost_make_anew(struct ost *o, uint64_t objid, uint64_t ino, uint32_t stripe_idx, uint32_t epoch,
		  struct ost_objstat *os)
{
	struct obj h;
	int rc;

	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, OBJ_CREATE_LOST, ino, stripe_idx, epoch, &h);
	if (rc)
		return rc;
	rc = fd_stat(h.fd, os);
	obj_put(o, &h);
	return rc;
}

int ost_punch(struct ost *o, uint64_t objid, uint64_t size, uint64_t ino, uint32_t stripe_idx,
	      uint32_t epoch, struct ost_objstat *os)
{
	uint64_t k = size >> CSUM_SHIFT;
	size_t in = (size_t)(size & CSUM_MASK), got;
	uint32_t crc = 0, stored;
	struct rl_ent rl;
	struct obj h;
	int rc, slot = -1;

	memset(os, 0, sizeof(*os));
	/* A cut in an epoch makes a missing object, empty and in that epoch: a write made before the
	 * truncation then finds it and is refused, rather than making it with old bytes. */
	rc = obj_get(o, objid, epoch == 0 ? 0 : size == 0 ? OBJ_CREATE_LOST : 1, ino, stripe_idx, epoch, &h);
	if (rc == -ENOENT)
		return 0;
	if (rc == -EIO && size > 0 && ost_obj_lost(o, objid) && faccessat_obj(o, objid) == -ENOENT)
		return 0; /* lost: a cut that keeps some of it keeps it lost (a cut to 0 makes it anew) */
	if (rc)
		return rc;
	rl_lock(o, &rl, objid, k, UINT64_MAX, true);
	if (epoch && obj_epoch(&h) >= epoch) {
		rc = fd_stat(h.fd, os); /* cut already, or made in this epoch after its cut was due */
		goto unlock;
	}
	rc = fd_stat(h.fd, os);
	if (rc == 0 && os->size <= size)
		rc = space_trim_past_end(h.fd, os); /* space kept past the end goes, as a truncate's */
	if (rc == 0 && os->size <= size && epoch)
		rc = obj_set_epoch(&h, epoch);
	if (rc || os->size <= size)
		goto unlock;
	if (h.cfd >= 0 && in) {
		/* Block k keeps its first `in` bytes: its new checksum is theirs, and they must be
		 * intact now. */
		rc = pread_full(h.fd, scratch, CSUM_BLOCK, k << CSUM_SHIFT, &got);
		if (rc == 0) {
			memset(scratch + got, 0, CSUM_BLOCK - got);
			rc = csum_load(h.cfd, k, 1, &stored);
		}
		if (rc == 0 && csum_check(o, "punch", objid, k, scratch, got, &stored, NULL))
			rc = -EIO;
		if (rc)
			goto unlock;
		crc = csum_block(scratch, in);
		slot = intent_begin(o, objid, k, 1);
	}
	/* The checksums are cut first: until block k's new one is written it has none, so a crash
	 * in between leaves it unchecked (and the intent has it recomputed), never mismatched. */
	if (h.cfd >= 0 && ftruncate(h.cfd, (off_t)(k * sizeof(uint32_t))) < 0)
		rc = -errno;
	if (rc == 0 && ftruncate(h.fd, (off_t)size) < 0)
		rc = -errno;
	if (rc == 0 && slot >= 0)
		rc = csum_store(h.cfd, k, 1, &crc);
	if (slot >= 0)
		intent_end(o, slot);
	/* The epoch last: a crash before it leaves the cut to be done again, which is harmless. A
	 * truncation's cut is durable before it is answered: the MDS forgets it then, and an object
	 * that came back uncut after a power failure would keep its old bytes and epoch for good. */
	if (rc == 0 && epoch)
		rc = obj_set_epoch(&h, epoch);
	if (rc == 0 && epoch && (fsync(h.fd) < 0 || (h.cfd >= 0 && fsync(h.cfd) < 0)))
		rc = -errno;
	if (rc == 0)
		rc = fd_stat(h.fd, os);
unlock:
	rl_unlock(o, &rl);
	obj_put(o, &h);
	return rc;
}

int ost_getattr(struct ost *o, uint64_t objid, struct ost_objstat *os)
{
	struct obj h;
	int rc;

	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, false, 0, 0, 0, &h);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = fd_stat(h.fd, os);
	obj_put(o, &h);
	return rc;
}

int ost_sync(struct ost *o, uint64_t objid)
{
	struct obj h;
	int rc, d, cfd;

	if (objid == 0)
		return syncfs(o->dirfd) < 0 ? -errno : 0;
	rc = obj_get(o, objid, false, 0, 0, 0, &h);
	if (rc == -ENOENT || (rc == -EIO && ost_obj_lost(o, objid)))
		return 0; /* nothing here to make durable (a lost object's loss is told by reads) */
	if (rc)
		return rc;
	/* The data, then its checksums. (A sidecar made by a handle that was not cached has no
	 * descriptor here: open it.) The sidecar's writeback starts first, so that the journal
	 * commit of the data's fdatasync usually covers the sidecar too and its own costs little. */
	cfd = h.cfd;
	if (cfd < 0)
		rc = csum_open(o, objid, false, &cfd);
	if (rc == 0 && cfd >= 0)
		sync_file_range(cfd, 0, 0, SYNC_FILE_RANGE_WRITE);
	if (rc == 0 && fdatasync(h.fd) < 0)
		rc = -errno;
	if (rc == 0 && cfd >= 0 && fdatasync(cfd) < 0)
		rc = -errno;
	if (cfd >= 0 && cfd != h.cfd)
		close(cfd);
	obj_put(o, &h);
	/* A new object's names (object and sidecar) must be durable too, or a crash could lose
	 * the whole object. The mutex makes a second syncer wait for a directory fsync in progress
	 * (which covers its object too) instead of answering before it finished, or failed. */
	d = ost_obj_dir(objid);
	if (rc == 0) {
		pthread_mutex_lock(&o->odir_sync[d]);
		if (atomic_exchange(&o->odir_dirty[d], false) && fsync(o->odir[d]) < 0) {
			atomic_store(&o->odir_dirty[d], true);
			rc = -errno;
		}
		pthread_mutex_unlock(&o->odir_sync[d]);
	}
	return rc;
}

int ost_destroy(struct ost *o, uint64_t objid)
{
	struct fdc_slot *s = fdc_slot_of(o, objid);
	char name[OST_OBJ_NAME_MAX];
	int close_fd = -1, close_cfd = -1, d = ost_obj_dir(objid);

	pthread_mutex_lock(&o->fdc_lock);
	if (s->fd >= 0 && s->objid == objid) {
		if (s->refs == 0) {
			close_fd = s->fd;
			close_cfd = s->cfd;
			s->fd = -1;
			s->cfd = -1;
		} else {
			s->doomed = true;
		}
	}
	pthread_mutex_unlock(&o->fdc_lock);
	if (close_fd >= 0)
		close(close_fd);
	if (close_cfd >= 0)
		close(close_cfd);
	/* The sidecar first: a crash in between leaves an object without checksums (unchecked,
	 * and the destroy is sent again), never checksums that a new object could inherit. */
	ost_csum_name(objid, name, sizeof(name));
	if (unlinkat(o->odir[d], name, 0) < 0 && errno != ENOENT)
		return -errno;
	ost_obj_name(objid, name, sizeof(name));
	if (unlinkat(o->odir[d], name, 0) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int ost_statfs(struct ost *o, struct lw_statfs *out)
{
	struct statvfs sv;

	if (fstatvfs(o->dirfd, &sv) < 0)
		return -errno;
	memset(out, 0, sizeof(*out));
	out->bsize = (uint32_t)sv.f_frsize;
	out->blocks = sv.f_blocks;
	out->bfree = sv.f_bfree;
	out->bavail = sv.f_bavail;
	out->files = sv.f_files;
	out->ffree = sv.f_ffree;
	out->namemax = 255;
	return 0;
}
