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
#include <sys/xattr.h>
#include <unistd.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"

#define FID_XATTR    "user.loom.fid"
#define INTENT_FILE  "csum_intents"
#define CSUM_STACK   272 /* checksums kept on the stack: a 16 MiB request, unaligned, needs 257 */
#define REHASH_BLOCKS 16 /* blocks read at a time when recomputing checksums */

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

static const uint8_t zero_block[CSUM_BLOCK];
/* A block of scratch per thread, for the blocks a read or write covers only partly. */
static __thread uint8_t scratch[CSUM_BLOCK];

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

/* ---- names ---- */

int obj_dir(uint64_t objid)
{
	return (int)(objid & 0xff);
}

void obj_name(uint64_t objid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%llx", (unsigned long long)objid);
}

void csum_name(uint64_t objid, char *buf, size_t cap)
{
	snprintf(buf, cap, "%llx" CSUM_SUFFIX, (unsigned long long)objid);
}

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

/* ---- checksums ---- */

uint32_t csum_block(const void *data, size_t len)
{
	uint32_t crc = crc32c(0, data, len);

	if (len < CSUM_BLOCK)
		crc = crc32c(crc, zero_block, CSUM_BLOCK - len);
	return crc;
}

int csum_load(int cfd, uint64_t first, uint32_t n, uint32_t *out)
{
	size_t len = (size_t)n * sizeof(*out), got = 0;
	int rc = 0;

	if (cfd >= 0)
		rc = pread_full(cfd, out, len, first * sizeof(*out), &got);
	if (rc)
		return rc;
	got &= ~(sizeof(*out) - 1); /* a torn last entry counts as none */
	memset((uint8_t *)out + got, 0, len - got);
	return 0;
}

int csum_store(int cfd, uint64_t first, uint32_t n, const uint32_t *crcs)
{
	return pwrite_full(cfd, crcs, (size_t)n * sizeof(*crcs), first * sizeof(*crcs));
}

uint64_t csum_check(const struct ost *o, const char *what, uint64_t objid, uint64_t first,
		    const uint8_t *data, size_t len, const uint32_t *stored, struct csum_tally *t)
{
	uint64_t bad = 0, checked = 0, unchecked = 0;

	for (size_t i = 0; (i << CSUM_SHIFT) < len; i++) {
		size_t at = i << CSUM_SHIFT, n = MIN((size_t)CSUM_BLOCK, len - at);
		uint32_t crc;

		if (stored[i] == CSUM_NONE) {
			unchecked++;
			continue;
		}
		checked++;
		crc = csum_block(data + at, n);
		if (crc != stored[i]) {
			uint64_t b = first + i;
			log_err("OST%04x: %s: object %llx block %llu (object bytes %llu-%llu): checksum "
				"mismatch, stored %08x, data %08x",
				o->idx, what, (unsigned long long)objid, (unsigned long long)b,
				(unsigned long long)(b << CSUM_SHIFT),
				(unsigned long long)((b << CSUM_SHIFT) + n - 1), stored[i], crc);
			bad++;
		}
	}
	if (t) {
		t->checked += checked;
		t->unchecked += unchecked;
		t->bad += bad;
	}
	return bad;
}

/*
 * Recomputes the checksums of blocks [first, first+count) from the data as it is on disk, and
 * cuts the sidecar after the object's last block (entries past it are never valid: a later
 * extension would find them on its holes).
 */
static int csum_rehash(int fd, int cfd, uint64_t first, uint64_t count)
{
	uint32_t crcs[REHASH_BLOCKS];
	uint64_t nblocks, end;
	struct stat st;
	uint8_t *buf;
	size_t got;
	int rc = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	nblocks = ((uint64_t)st.st_size + CSUM_MASK) >> CSUM_SHIFT;
	end = first + count < nblocks ? first + count : nblocks;
	buf = malloc((size_t)REHASH_BLOCKS << CSUM_SHIFT);
	if (!buf)
		return -ENOMEM;
	for (uint64_t b = first; rc == 0 && b < end; b += REHASH_BLOCKS) {
		uint32_t k = (uint32_t)MIN((uint64_t)REHASH_BLOCKS, end - b);

		rc = pread_full(fd, buf, (size_t)k << CSUM_SHIFT, b << CSUM_SHIFT, &got);
		for (uint32_t i = 0; rc == 0 && i < k; i++) {
			size_t at = (size_t)i << CSUM_SHIFT;
			crcs[i] = csum_block(buf + at, got > at ? MIN((size_t)CSUM_BLOCK, got - at) : 0);
		}
		if (rc == 0)
			rc = csum_store(cfd, b, k, crcs);
	}
	free(buf);
	if (rc == 0 && fstat(cfd, &st) < 0)
		rc = -errno;
	if (rc == 0 && (uint64_t)st.st_size > nblocks * sizeof(uint32_t) &&
	    ftruncate(cfd, (off_t)(nblocks * sizeof(uint32_t))) < 0)
		rc = -errno;
	return rc;
}

/*
 * Makes the checksums of blocks [first, first+count) agree with the data on disk after a write
 * that failed or was interrupted. Failing that (the disk is failing, or full and the sidecar
 * cannot grow), the sidecar is cut before them, which needs no space: those blocks and the ones
 * after go unchecked until rewritten, but never fail a read falsely. 0 once no false mismatch
 * is possible.
 */
int csum_repair(const struct ost *o, uint64_t objid, int fd, int cfd, uint64_t first,
		uint64_t count)
{
	struct stat st;
	int rc = csum_rehash(fd, cfd, first, count);

	if (rc == 0)
		return 0;
	if (fstat(cfd, &st) == 0 && (uint64_t)st.st_size <= first * sizeof(uint32_t))
		return 0; /* no entries there to be wrong */
	if (ftruncate(cfd, (off_t)(first * sizeof(uint32_t))) == 0) {
		log_warn("OST%04x: object %llx: checksums from block %llu on dropped: they could not "
			 "be recomputed (%s)", o->idx, (unsigned long long)objid,
			 (unsigned long long)first, strerror(-rc));
		return 0;
	}
	rc = -errno;
	log_err("OST%04x: object %llx: blocks %llu-%llu may read as bad: their checksums could not "
		"be brought up to date after a failed write (%s)", o->idx, (unsigned long long)objid,
		(unsigned long long)first, (unsigned long long)(first + count - 1), strerror(-rc));
	return rc;
}

/* ---- range locks ---- */

static struct rl_bucket *rl_bucket_of(struct ost *o, uint64_t objid)
{
	return &o->rl[(objid * 0x9E3779B97F4A7C15ull) >> 58];
}
_Static_assert(RL_BUCKETS == 64, "rl_bucket_of takes 6 bits");

static bool rl_conflicts(const struct rl_bucket *b, const struct rl_ent *e)
{
	for (const struct rl_ent *p = b->head; p != e; p = p->next)
		if (p->objid == e->objid && p->first <= e->last && e->first <= p->last &&
		    (p->excl || e->excl))
			return true;
	return false;
}

void rl_lock(struct ost *o, struct rl_ent *e, uint64_t objid, uint64_t first, uint64_t last, bool excl)
{
	struct rl_bucket *b = rl_bucket_of(o, objid);

	e->objid = objid;
	e->first = first;
	e->last = last;
	e->excl = excl;
	e->next = NULL;
	pthread_mutex_lock(&b->lock);
	if (b->tail)
		b->tail->next = e;
	else
		b->head = e;
	b->tail = e;
	while (rl_conflicts(b, e))
		pthread_cond_wait(&b->cond, &b->lock);
	pthread_mutex_unlock(&b->lock);
}

void rl_unlock(struct ost *o, struct rl_ent *e)
{
	struct rl_bucket *b = rl_bucket_of(o, e->objid);
	struct rl_ent **pp, *prev = NULL;

	pthread_mutex_lock(&b->lock);
	for (pp = &b->head; *pp != e; pp = &(*pp)->next)
		prev = *pp;
	*pp = e->next;
	if (b->tail == e)
		b->tail = prev;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

/* ---- write intents (DIR/csum_intents) ---- */

static void intent_write(struct ost *o, int i, uint64_t objid, uint64_t first, uint64_t count)
{
	if (o->intents) {
		struct csum_intent *it = &o->intents[i];

		it->first = first;
		it->count = count;
		/* objid makes the record live (or free): after the other fields, and before the
		 * data is touched by the system call that follows. */
		atomic_store_explicit(&it->objid, objid, memory_order_seq_cst);
	} else {
		uint64_t rec[4] = { objid, first, count, 0 };

		if (pwrite_full(o->intent_fd, rec, sizeof(rec), (uint64_t)i * sizeof(rec)) != 0)
			log_warn("%s: cannot record a write intent: %s", o->dir, strerror(errno));
	}
}

static void intent_read(struct ost *o, int i, uint64_t rec[3])
{
	if (o->intents) {
		rec[0] = atomic_load(&o->intents[i].objid);
		rec[1] = o->intents[i].first;
		rec[2] = o->intents[i].count;
	} else {
		uint64_t r[4] = { 0 };
		size_t got;

		pread_full(o->intent_fd, r, sizeof(r), (uint64_t)i * sizeof(r), &got);
		memcpy(rec, r, 3 * sizeof(*rec));
	}
}

/* Records that blocks [first, first+count) of objid are about to change; waits for a free slot. */
int intent_begin(struct ost *o, uint64_t objid, uint64_t first, uint64_t count)
{
	int i;

	pthread_mutex_lock(&o->intent_lock);
	while (o->nintent_free == 0)
		pthread_cond_wait(&o->intent_cond, &o->intent_lock);
	i = o->intent_free[--o->nintent_free];
	pthread_mutex_unlock(&o->intent_lock);
	intent_write(o, i, objid, first, count);
	return i;
}

/* The data and its checksums agree again. */
void intent_end(struct ost *o, int i)
{
	intent_write(o, i, 0, 0, 0);
	pthread_mutex_lock(&o->intent_lock);
	o->intent_free[o->nintent_free++] = i;
	pthread_cond_signal(&o->intent_cond);
	pthread_mutex_unlock(&o->intent_lock);
}

/* At start-up: the checksums of every write that a crash interrupted are recomputed from the
 * data on disk. A record that cannot be repaired now stays for the next start. */
static int intents_open_and_recover(struct ost *o)
{
	size_t len = INTENT_SLOTS * sizeof(struct csum_intent);
	struct stat st;
	void *map;

	o->intent_fd = openat(o->dirfd, INTENT_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (o->intent_fd < 0 || fstat(o->intent_fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size < len && ftruncate(o->intent_fd, (off_t)len) < 0)
		return -errno;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, o->intent_fd, 0);
	if (map == MAP_FAILED)
		log_warn("%s: cannot map %s (%s): write intents go through pwrite", o->dir, INTENT_FILE,
			 strerror(errno));
	else
		o->intents = map;

	o->nintent_free = 0;
	for (int i = INTENT_SLOTS - 1; i >= 0; i--) {
		uint64_t rec[3];
		char name[40];
		int fd, cfd = -1, rc = 0, d;

		intent_read(o, i, rec);
		if (rec[0] == 0) {
			o->intent_free[o->nintent_free++] = i;
			continue;
		}
		d = obj_dir(rec[0]);
		obj_name(rec[0], name, sizeof(name));
		fd = openat(o->odir[d], name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = errno == ENOENT ? 0 : -errno; /* destroyed since: nothing to repair */
		} else {
			csum_name(rec[0], name, sizeof(name));
			cfd = openat(o->odir[d], name, O_RDWR | O_CLOEXEC);
			if (cfd < 0)
				rc = errno == ENOENT ? 0 : -errno; /* no checksums to repair */
			else
				rc = csum_repair(o, rec[0], fd, cfd, rec[1], rec[2]);
		}
		if (fd >= 0)
			close(fd);
		if (cfd >= 0)
			close(cfd);
		if (rc) {
			log_err("%s: object %llx: cannot recompute the checksums of blocks %llu-%llu that "
				"an interrupted write left: %s", o->dir, (unsigned long long)rec[0],
				(unsigned long long)rec[1], (unsigned long long)(rec[1] + rec[2] - 1),
				strerror(-rc));
			continue;
		}
		log_info("%s: object %llx: checksums of blocks %llu-%llu recomputed after an "
			 "interrupted write", o->dir, (unsigned long long)rec[0],
			 (unsigned long long)rec[1], (unsigned long long)(rec[1] + rec[2] - 1));
		intent_write(o, i, 0, 0, 0);
		o->intent_free[o->nintent_free++] = i;
	}
	if (o->nintent_free == 0)
		return -EIO; /* every slot holds a write that cannot be repaired */
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
	char path[PATH_MAX];
	int rc;

	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->dirfd = -1;
	o->intent_fd = -1;
	o->cache.readcache_max_io = OST_READCACHE_MAX_IO;
	o->cache.writeback_min_io = OST_WRITEBACK_MIN_IO;
	for (int i = 0; i < NDIRS; i++) {
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
	for (int i = 0; i < NDIRS; i++) {
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

/* ---- the descriptor cache ---- */

/*
 * Truncation epochs (protocol.md, OST_WRITE and OST_PUNCH). Each object records in an xattr the
 * epoch of the last truncation that cut it (none: 0, as every object before epochs). A cut for
 * an epoch the object is already in (or past) is not done again: the bytes there are newer than
 * it. A write made in an older epoch than the object's is refused (-ESTALE), one made in a newer
 * epoch waits for that epoch's cut (-EAGAIN). Checked and changed under the range lock of what the
 * write or cut covers, so a write is wholly before a cut of the same bytes or wholly after it.
 */
#define EPOCH_XATTR "user.loom.epoch"

static int epoch_store(int fd, uint32_t epoch)
{
	if (fsetxattr(fd, EPOCH_XATTR, &epoch, sizeof(epoch), 0) < 0)
		return errno == ENOTSUP ? 0 : -errno; /* without xattrs epochs cannot be kept */
	return 0;
}

uint32_t obj_epoch(struct obj *h)
{
	int64_t cached = h->slot ? atomic_load(&h->slot->epoch) : -1;
	uint32_t epoch = 0;

	if (cached >= 0)
		return (uint32_t)cached;
	if (fgetxattr(h->fd, EPOCH_XATTR, &epoch, sizeof(epoch)) != (ssize_t)sizeof(epoch))
		epoch = 0;
	if (h->slot)
		atomic_store(&h->slot->epoch, epoch);
	return epoch;
}

static int obj_set_epoch(struct obj *h, uint32_t epoch)
{
	int rc = epoch_store(h->fd, epoch);

	if (h->slot)
		atomic_store(&h->slot->epoch, rc ? -1 : (int64_t)epoch);
	return rc;
}

static struct fdc_slot *slot_of(struct ost *o, uint64_t objid)
{
	return &o->fdc[(objid * 0x9E3779B97F4A7C15ull >> 40) % FDC_SLOTS];
}

/* Opens objid's sidecar; with create, an empty one is created when missing. Without create a
 * missing sidecar gives *cfd -1 and 0. */
int csum_open(struct ost *o, uint64_t objid, bool create, int *cfd)
{
	char name[40];
	int d = obj_dir(objid), fd;

	csum_name(objid, name, sizeof(name));
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
 * Opens an object for I/O, with its sidecar. With create, a missing object is created (and
 * tagged with its file, for fsck) and so is its sidecar. Release with obj_put(). -ENOENT for a
 * missing object without create.
 */
int obj_get(struct ost *o, uint64_t objid, bool create, uint64_t ino, uint32_t stripe_idx,
	    uint32_t epoch, struct obj *h)
{
	struct fdc_slot *s = slot_of(o, objid);
	char name[32];
	int fd, cfd = -1, d = obj_dir(objid), evict_fd = -1, evict_cfd = -1, rc;

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
				rc = -EIO;
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
				rc = -EIO;
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
	rc = obj_get(o, objid, epoch != 0, ino, stripe_idx, epoch, &h);
	if (rc == -ENOENT)
		return 0;
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
	if (rc == -ENOENT)
		return 0;
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
	char name[40];
	int close_fd = -1, close_cfd = -1, d = obj_dir(objid);

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
	csum_name(objid, name, sizeof(name));
	if (unlinkat(o->odir[d], name, 0) < 0 && errno != ENOENT)
		return -errno;
	obj_name(objid, name, sizeof(name));
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
