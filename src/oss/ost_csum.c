/*
 * What keeps an OST's objects intact: the block checksums of the sidecars, the range locks that
 * order the requests on an object's blocks, and the write intents that let a start after a crash
 * recompute the checksums a write left behind (ost_impl.h describes the scheme).
 */
#include "oss/ost_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc.h"
#include "common/log.h"
#include "common/util.h"

#define REHASH_BLOCKS 16 /* blocks read at a time when recomputing checksums */

static const uint8_t zero_block[CSUM_BLOCK];

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
				o->conf.idx, what, (unsigned long long)objid, (unsigned long long)b,
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
			 "be recomputed (%s)", o->conf.idx, (unsigned long long)objid,
			 (unsigned long long)first, strerror(-rc));
		return 0;
	}
	rc = -errno;
	log_err("OST%04x: object %llx: blocks %llu-%llu may read as bad: their checksums could not "
		"be brought up to date after a failed write (%s)", o->conf.idx, (unsigned long long)objid,
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
int intents_open_and_recover(struct ost *o)
{
	size_t len = INTENT_SLOTS * sizeof(struct csum_intent);
	struct stat st;
	void *map;

	o->intent_fd = openat(o->dirfd, OST_INTENT_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (o->intent_fd < 0 || fstat(o->intent_fd, &st) < 0)
		return -errno;
	if ((size_t)st.st_size < len && ftruncate(o->intent_fd, (off_t)len) < 0)
		return -errno;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, o->intent_fd, 0);
	if (map == MAP_FAILED)
		log_warn("%s: cannot map %s (%s): write intents go through pwrite", o->dir,
			 OST_INTENT_FILE, strerror(errno));
	else
		o->intents = map;

	o->nintent_free = 0;
	for (int i = INTENT_SLOTS - 1; i >= 0; i--) {
		uint64_t rec[3];
		char name[OST_OBJ_NAME_MAX];
		int fd, cfd = -1, rc = 0, d;

		intent_read(o, i, rec);
		if (rec[0] == 0) {
			o->intent_free[o->nintent_free++] = i;
			continue;
		}
		d = ost_obj_dir(rec[0]);
		ost_obj_name(rec[0], name, sizeof(name));
		fd = openat(o->odir[d], name, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = errno == ENOENT ? 0 : -errno; /* destroyed since: nothing to repair */
		} else {
			ost_csum_name(rec[0], name, sizeof(name));
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
