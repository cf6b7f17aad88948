/*
 * An OST's objects opened for I/O: the descriptor cache (ost_impl.h, struct fdc_slot) that keeps
 * an object's data and sidecar open between requests, and the truncation epoch each object is in.
 */
#include "oss/ost_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/log.h"

/*
 * Truncation epochs (protocol.md, OST_WRITE and OST_PUNCH). Each object records in an xattr the
 * epoch of the last truncation that cut it (none: 0, as every object before epochs). A cut for
 * an epoch the object is already in (or past) is not done again: the bytes there are newer than
 * it. A write made in an older epoch than the object's is refused (-ESTALE), one made in a newer
 * epoch waits for that epoch's cut (-EAGAIN). Checked and changed under the range lock of what the
 * write or cut covers, so a write is wholly before a cut of the same bytes or wholly after it.
 * The xattr's name and value: OST_EPOCH_XATTR, ost_format.h.
 */

static int epoch_store(int fd, uint32_t epoch)
{
	if (fsetxattr(fd, OST_EPOCH_XATTR, &epoch, sizeof(epoch), 0) < 0)
		return errno == ENOTSUP ? 0 : -errno; /* without xattrs epochs cannot be kept */
	return 0;
}

uint32_t obj_epoch(struct obj *h)
{
	int64_t cached = h->slot ? atomic_load(&h->slot->epoch) : -1;
	uint32_t epoch = 0;

	if (cached >= 0)
		return (uint32_t)cached;
	if (fgetxattr(h->fd, OST_EPOCH_XATTR, &epoch, sizeof(epoch)) != (ssize_t)sizeof(epoch))
		epoch = 0;
	if (h->slot)
		atomic_store(&h->slot->epoch, epoch);
	return epoch;
}

int obj_set_epoch(struct obj *h, uint32_t epoch)
{
	int rc = epoch_store(h->fd, epoch);

	if (h->slot)
		atomic_store(&h->slot->epoch, rc ? -1 : (int64_t)epoch);
	return rc;
}

struct fdc_slot *fdc_slot_of(struct ost *o, uint64_t objid)
{
	return &o->fdc[(objid * 0x9E3779B97F4A7C15ull >> 40) % FDC_SLOTS];
}

int csum_open(struct ost *o, uint64_t objid, bool create, int *cfd)
{
	char name[OST_OBJ_NAME_MAX];
	int d = ost_obj_dir(objid), fd;

	ost_csum_name(objid, name, sizeof(name));
	fd = openat(o->odir[d], name, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		fd = openat(o->odir[d], name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd >= 0)
			atomic_store(&o->odir_dirty[d], true);
	}
	if (fd < 0 && errno == ENOENT && !create) {
		*cfd = -1;
		return 0;
	}
	if (fd < 0)
		return -errno;
	*cfd = fd;
	return 0;
}

void obj_put(struct ost *o, struct obj *h)
{
	struct fdc_slot *s = h->slot;
	int close_fd = -1, close_cfd = -1;

	if (!s) {
		close(h->fd);
		if (h->cfd >= 0)
			close(h->cfd);
		return;
	}
	pthread_mutex_lock(&o->fdc_lock);
	if (--s->refs == 0 && s->doomed) {
		close_fd = s->fd;
		close_cfd = s->cfd;
		s->fd = -1;
		s->cfd = -1;
		s->doomed = false;
	}
	pthread_mutex_unlock(&o->fdc_lock);
	if (close_fd >= 0)
		close(close_fd);
	if (close_cfd >= 0)
		close(close_cfd);
}

/*
 * Whether object directory d (or the OST's own) was removed under the running OSS, as a disk
 * that died or a directory deleted by hand: its objects are gone, and a missing one must not read
 * as a hole (zeros) nor be made again by a write into an empty directory nobody will find.
 */
static bool dirs_gone(struct ost *o, int d)
{
	struct stat st;
	bool gone = (fstat(o->odir[d], &st) == 0 && st.st_nlink == 0) ||
		    (fstat(o->dirfd, &st) == 0 && st.st_nlink == 0);

	if (gone && !atomic_exchange(&o->gone_told, true))
		log_err("OST%04x: its directory %s is gone (a lost disk?): every object it does not hold "
			"open answers EIO; replace it (loom-oss --format --index %u --replace)", o->conf.idx,
			o->dir, o->conf.idx);
	return gone;
}

int obj_get(struct ost *o, uint64_t objid, int create, uint64_t ino, uint32_t stripe_idx,
	    uint32_t epoch, struct obj *h)
{
	struct fdc_slot *s = fdc_slot_of(o, objid);
	char name[OST_OBJ_NAME_MAX];
	int fd, cfd = -1, d = ost_obj_dir(objid), evict_fd = -1, evict_cfd = -1, rc;

	pthread_mutex_lock(&o->fdc_lock);
	if (s->fd >= 0 && s->objid == objid && !s->doomed) {
		s->refs++;
		h->fd = s->fd;
		h->cfd = s->cfd;
		h->slot = s;
		pthread_mutex_unlock(&o->fdc_lock);
		if (h->cfd >= 0 || !create)
			return 0;
		/* The first write to an object cached by a read before it had checksums. */
		rc = csum_open(o, objid, true, &cfd);
		if (rc) {
			obj_put(o, h);
			return rc;
		}
		pthread_mutex_lock(&o->fdc_lock);
		if (s->cfd < 0) {
			s->cfd = cfd;
			cfd = -1;
		}
		h->cfd = s->cfd;
		pthread_mutex_unlock(&o->fdc_lock);
		if (cfd >= 0)
			close(cfd);
		return 0;
	}
	pthread_mutex_unlock(&o->fdc_lock);

	ost_obj_name(objid, name, sizeof(name));
	fd = openat(o->odir[d], name, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && dirs_gone(o, d))
		return -EIO;
	/* Lost, not a hole: neither reads as zeros nor is made again by a write of part of it. */
	if (fd < 0 && errno == ENOENT && create != OBJ_CREATE_LOST && ost_obj_lost(o, objid))
		return -EIO;
	if (fd < 0 && errno == ENOENT && create) {
		fd = openat(o->odir[d], name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			char fid[OST_FID_TAG_MAX];
			size_t n = ost_fid_format(ino, stripe_idx, fid);
			/* The tag is for fsck; a backing fs without user xattrs only loses that. */
			if (fsetxattr(fd, OST_FID_XATTR, fid, n, 0) < 0 && errno != ENOTSUP)
				log_debug("object %llx: cannot tag: %s", (unsigned long long)objid,
					  strerror(errno));
			/* A new object is in the epoch of what made it: nothing older is in it. */
			if (epoch && (rc = epoch_store(fd, epoch)) != 0) {
				unlinkat(o->odir[d], name, 0);
				close(fd);
				return rc;
			}
			atomic_store(&o->odir_dirty[d], true);
		} else if (errno == EEXIST) {
			fd = openat(o->odir[d], name, O_RDWR | O_CLOEXEC);
		}
	}
	if (fd < 0)
		return -errno;
	rc = csum_open(o, objid, create, &cfd);
	if (rc) {
		close(fd);
		return rc;
	}

	pthread_mutex_lock(&o->fdc_lock);
	if (s->fd >= 0 && s->objid == objid && !s->doomed) {
		/* Another worker cached it meanwhile: use theirs (and our sidecar if it had none). */
		s->refs++;
		if (s->cfd < 0 && cfd >= 0) {
			s->cfd = cfd;
			cfd = -1;
		}
		h->fd = s->fd;
		h->cfd = s->cfd;
		h->slot = s;
		pthread_mutex_unlock(&o->fdc_lock);
		close(fd);
		if (cfd >= 0)
			close(cfd);
		return 0;
	}
	if (s->fd < 0 || s->refs == 0) {
		evict_fd = s->fd;
		evict_cfd = s->cfd;
		s->objid = objid;
		s->fd = fd;
		s->cfd = cfd;
		s->refs = 1;
		s->doomed = false;
		atomic_store(&s->epoch, -1);
		h->slot = s;
	} else {
		h->slot = NULL;
	}
	pthread_mutex_unlock(&o->fdc_lock);
	if (evict_fd >= 0)
		close(evict_fd);
	if (evict_cfd >= 0)
		close(evict_cfd);
	h->fd = fd;
	h->cfd = cfd;
	return 0;
}
