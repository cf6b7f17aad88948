#include "oss/ost.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

#define NDIRS     256
#define FDC_SLOTS 1024 /* open object files kept; direct-mapped by object id */
#define FID_XATTR "user.loom.fid"

/* A cached open object file. refs > 0 while a worker uses the descriptor; a destroyed or
 * evicted object's descriptor is closed by the last user (doomed). */
struct fdc_slot {
	uint64_t objid;
	int fd;
	int refs;
	bool doomed;
};

struct ost {
	char dir[PATH_MAX];
	char uuid[40];
	char fsname[16];
	uint32_t idx;
	int dirfd;
	int odir[NDIRS];
	atomic_bool odir_dirty[NDIRS]; /* an object was created there since the last dir fsync */
	pthread_mutex_t odir_sync[NDIRS]; /* one directory fsync at a time, see ost_sync */
	pthread_mutex_t fdc_lock;
	struct fdc_slot fdc[FDC_SLOTS];
};

static int conf_write(const char *dir, const char *fsname, const char *uuid, uint32_t idx)
{
	char path[PATH_MAX], buf[256];
	int n;

	snprintf(path, sizeof(path), "%s/ost.conf", dir);
	if (idx == OST_IDX_NONE)
		n = snprintf(buf, sizeof(buf), "fsname=%s\nuuid=%s\n", fsname, uuid);
	else
		n = snprintf(buf, sizeof(buf), "fsname=%s\nuuid=%s\nindex=%u\n", fsname, uuid, idx);
	return file_write_atomic(path, buf, (size_t)n);
}

int ost_format(const char *dir, const char *fsname, uint32_t idx)
{
	char path[PATH_MAX], uuid[40];
	uint8_t r[16];
	struct stat st;
	int rc;

	if (snprintf(path, sizeof(path), "%s/ost.conf", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (stat(path, &st) == 0)
		return -EEXIST;
	rc = mkdir_p(dir, 0755);
	if (rc)
		return rc;
	for (int i = 0; i < NDIRS; i++) {
		snprintf(path, sizeof(path), "%s/O/%02x", dir, i);
		rc = mkdir_p(path, 0755);
		if (rc)
			return rc;
	}
	rc = random_bytes(r, sizeof(r));
	if (rc)
		return rc;
	snprintf(uuid, sizeof(uuid), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
		 r[14], r[15]);
	return conf_write(dir, fsname, uuid, idx);
}

static int conf_read(struct ost *o)
{
	char path[PATH_MAX], *buf, *line, *save = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/ost.conf", o->dir);
	rc = file_read_all(path, &buf, NULL);
	if (rc)
		return rc;
	o->idx = OST_IDX_NONE;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq++ = '\0';
		if (!strcmp(line, "fsname"))
			snprintf(o->fsname, sizeof(o->fsname), "%s", eq);
		else if (!strcmp(line, "uuid"))
			snprintf(o->uuid, sizeof(o->uuid), "%s", eq);
		else if (!strcmp(line, "index"))
			o->idx = (uint32_t)strtoul(eq, NULL, 10);
	}
	free(buf);
	return o->uuid[0] && o->fsname[0] ? 0 : -EINVAL;
}

int ost_open(const char *dir, struct ost **out)
{
	struct ost *o;
	char path[PATH_MAX];
	int rc;

	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->dirfd = -1;
	for (int i = 0; i < NDIRS; i++) {
		o->odir[i] = -1;
		pthread_mutex_init(&o->odir_sync[i], NULL);
	}
	for (int i = 0; i < FDC_SLOTS; i++)
		o->fdc[i].fd = -1;
	pthread_mutex_init(&o->fdc_lock, NULL);
	if (!realpath(dir, o->dir)) {
		rc = -errno;
		goto fail;
	}
	rc = conf_read(o);
	if (rc)
		goto fail;
	o->dirfd = open(o->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (o->dirfd < 0) {
		rc = -errno;
		goto fail;
	}
	for (int i = 0; i < NDIRS; i++) {
		snprintf(path, sizeof(path), "O/%02x", i);
		o->odir[i] = openat(o->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (o->odir[i] < 0) {
			rc = -errno;
			goto fail;
		}
	}
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
	for (int i = 0; i < FDC_SLOTS; i++)
		if (o->fdc[i].fd >= 0)
			close(o->fdc[i].fd);
	for (int i = 0; i < NDIRS; i++) {
		if (o->odir[i] >= 0)
			close(o->odir[i]);
		pthread_mutex_destroy(&o->odir_sync[i]);
	}
	if (o->dirfd >= 0)
		close(o->dirfd);
	pthread_mutex_destroy(&o->fdc_lock);
	free(o);
}

const char *ost_dir(const struct ost *o) { return o->dir; }
const char *ost_uuid(const struct ost *o) { return o->uuid; }
const char *ost_fsname(const struct ost *o) { return o->fsname; }
uint32_t ost_index(const struct ost *o) { return o->idx; }

int ost_set_index(struct ost *o, uint32_t idx)
{
	int rc;

	if (o->idx == idx)
		return 0;
	rc = conf_write(o->dir, o->fsname, o->uuid, idx);
	if (rc == 0)
		o->idx = idx;
	return rc;
}

static int obj_dir(uint64_t objid)
{
	return (int)(objid & 0xff);
}

static void obj_name(uint64_t objid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%llx", (unsigned long long)objid);
}

/* ---- the descriptor cache ---- */

static struct fdc_slot *slot_of(struct ost *o, uint64_t objid)
{
	return &o->fdc[(objid * 0x9E3779B97F4A7C15ull >> 40) % FDC_SLOTS];
}

/*
 * Opens an object for I/O. With create, a missing object is created (and tagged with its file,
 * for fsck). Returns the descriptor in *fd and the slot holding it (NULL: not cached, the caller
 * closes it) — release with obj_put(). -ENOENT for a missing object without create.
 */
static int obj_get(struct ost *o, uint64_t objid, bool create, uint64_t ino, uint32_t stripe_idx,
		   int *fd_out, struct fdc_slot **slot_out)
{
	struct fdc_slot *s = slot_of(o, objid);
	char name[32];
	int fd, d = obj_dir(objid), evict = -1;

	pthread_mutex_lock(&o->fdc_lock);
	if (s->fd >= 0 && s->objid == objid && !s->doomed) {
		s->refs++;
		*fd_out = s->fd;
		*slot_out = s;
		pthread_mutex_unlock(&o->fdc_lock);
		return 0;
	}
	pthread_mutex_unlock(&o->fdc_lock);

	obj_name(objid, name, sizeof(name));
	fd = openat(o->odir[d], name, O_RDWR | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		fd = openat(o->odir[d], name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd >= 0) {
			char fid[64];
			int n = snprintf(fid, sizeof(fid), "%llu:%u", (unsigned long long)ino, stripe_idx);
			/* The tag is for fsck; a backing fs without user xattrs only loses that. */
			if (fsetxattr(fd, FID_XATTR, fid, (size_t)n, 0) < 0 && errno != ENOTSUP)
				log_debug("object %llx: cannot tag: %s", (unsigned long long)objid,
					  strerror(errno));
			atomic_store(&o->odir_dirty[d], true);
		} else if (errno == EEXIST) {
			fd = openat(o->odir[d], name, O_RDWR | O_CLOEXEC);
		}
	}
	if (fd < 0)
		return -errno;

	pthread_mutex_lock(&o->fdc_lock);
	if (s->fd >= 0 && s->objid == objid && !s->doomed) {
		/* Another worker cached it meanwhile: use theirs. */
		s->refs++;
		*fd_out = s->fd;
		*slot_out = s;
		pthread_mutex_unlock(&o->fdc_lock);
		close(fd);
		return 0;
	}
	if (s->fd < 0 || s->refs == 0) {
		evict = s->fd;
		s->objid = objid;
		s->fd = fd;
		s->refs = 1;
		s->doomed = false;
		*slot_out = s;
	} else {
		*slot_out = NULL;
	}
	pthread_mutex_unlock(&o->fdc_lock);
	if (evict >= 0)
		close(evict);
	*fd_out = fd;
	return 0;
}

static void obj_put(struct ost *o, int fd, struct fdc_slot *s)
{
	int doomed_fd = -1;

	if (!s) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&o->fdc_lock);
	if (--s->refs == 0 && s->doomed) {
		doomed_fd = s->fd;
		s->fd = -1;
		s->doomed = false;
	}
	pthread_mutex_unlock(&o->fdc_lock);
	if (doomed_fd >= 0)
		close(doomed_fd);
}

static int fd_stat(int fd, struct ost_objstat *os)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	os->size = (uint64_t)st.st_size;
	os->blocks = (uint64_t)st.st_blocks;
	return 0;
}

/* ---- object I/O ---- */

int ost_read(struct ost *o, uint64_t objid, uint64_t off, void *buf, size_t len, size_t *nread,
	     struct ost_objstat *os)
{
	struct fdc_slot *s;
	size_t done = 0;
	int fd, rc;

	*nread = 0;
	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, false, 0, 0, &fd, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*nread = done;
	rc = fd_stat(fd, os);
out:
	obj_put(o, fd, s);
	return rc;
}

int ost_write(struct ost *o, uint64_t objid, uint64_t off, const void *buf, size_t len,
	      uint64_t ino, uint32_t stripe_idx, struct ost_objstat *os)
{
	struct fdc_slot *s;
	size_t done = 0;
	int fd, rc;

	rc = obj_get(o, objid, true, ino, stripe_idx, &fd, &s);
	if (rc)
		return rc;
	while (done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			goto out;
		}
		done += (size_t)n;
	}
	rc = fd_stat(fd, os);
out:
	obj_put(o, fd, s);
	return rc;
}

int ost_punch(struct ost *o, uint64_t objid, uint64_t size, struct ost_objstat *os)
{
	struct fdc_slot *s;
	int fd, rc;

	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, false, 0, 0, &fd, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = fd_stat(fd, os);
	if (rc == 0 && os->size > size) {
		if (ftruncate(fd, (off_t)size) < 0)
			rc = -errno;
		else
			rc = fd_stat(fd, os);
	}
	obj_put(o, fd, s);
	return rc;
}

int ost_getattr(struct ost *o, uint64_t objid, struct ost_objstat *os)
{
	struct fdc_slot *s;
	int fd, rc;

	memset(os, 0, sizeof(*os));
	rc = obj_get(o, objid, false, 0, 0, &fd, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = fd_stat(fd, os);
	obj_put(o, fd, s);
	return rc;
}

int ost_sync(struct ost *o, uint64_t objid)
{
	struct fdc_slot *s;
	int fd, rc, d;

	if (objid == 0)
		return syncfs(o->dirfd) < 0 ? -errno : 0;
	rc = obj_get(o, objid, false, 0, 0, &fd, &s);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (fdatasync(fd) < 0)
		rc = -errno;
	obj_put(o, fd, s);
	/* A new object's name must be durable too, or a crash could lose the whole object. The
	 * mutex makes a second syncer wait for a directory fsync in progress (which covers its
	 * object too) instead of answering before it finished, or failed. */
	d = obj_dir(objid);
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
	struct fdc_slot *s = slot_of(o, objid);
	char name[32];
	int close_fd = -1;

	pthread_mutex_lock(&o->fdc_lock);
	if (s->fd >= 0 && s->objid == objid) {
		if (s->refs == 0) {
			close_fd = s->fd;
			s->fd = -1;
		} else {
			s->doomed = true;
		}
	}
	pthread_mutex_unlock(&o->fdc_lock);
	if (close_fd >= 0)
		close(close_fd);
	obj_name(objid, name, sizeof(name));
	if (unlinkat(o->odir[obj_dir(objid)], name, 0) < 0 && errno != ENOENT)
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
