/*
 * Inside an OST: what ost.c (objects, I/O, checksums) and scrub.c (the background scrubber)
 * share. Nothing outside src/oss/ includes this.
 *
 * Checksums at rest. Every object O/xx/<objid> has a sidecar O/xx/<objid>.crc (both named by
 * ost_format.h) holding one little-endian u32 per 64 KiB block of the object: block i's entry
 * at byte 4*i.
 *
 *     object   |  block 0 (64 KiB)  |  block 1  |  block 2  | ... | block n-1 (to the end) |
 *     sidecar  | crc 0 | crc 1 | crc 2 | ... | crc n-1 |
 *
 * An entry is crc32c(0, block) where the block counts as 64 KiB, the bytes past the object's end
 * taken as zeros. So a last block that grows (a later write further on makes the gap a hole,
 * which reads as zeros) keeps its checksum; only a punch that cuts inside a block changes it.
 *
 * The entry 0 (CSUM_NONE) means "no checksum": a hole never written (the sidecar is sparse, and
 * shorter than the object when its tail was never written), data from before checksums existed,
 * or a block invalidated after a failed write. Such a block is served unchecked. A block whose
 * real crc32c is 0 is stored as 0 too and goes unchecked: one block in 2^32.
 *
 * Crash consistency (kill -9 of the OSS): a write changes the data and then the sidecar, two
 * files; a kill between the two would leave the new data with the old checksums, a false
 * mismatch after the restart. So before a write (or a punch cutting inside a block) touches the
 * data, it records an intent: {objid, first block, count} in a slot of DIR/csum_intents, a small
 * file every writer has mapped MAP_SHARED. The record is a store to a page-cache page, no system
 * call, and outlives the process; it is cleared once both files are written. At start-up,
 * ost_open() recomputes the checksums of every block a live intent names from the data as it is
 * on disk (whichever of old or new bytes reached it), then clears the intent. A power failure is
 * another matter: pages of the data, the sidecar and the intents reach the disk in any order, so
 * blocks written after their last OST_SYNC may read as mismatched after one (the OST's own file
 * system gives no ordering between files without an fsync in between). OST_SYNC makes the data
 * and then the sidecar durable.
 *
 * Concurrency: an object's blocks are guarded by a range lock (rl_*), shared by readers and the
 * scrubber, exclusive for writers and punches, over whole blocks, so a checksum is always
 * computed and compared with the data it describes.
 */
#ifndef LOOM_OSS_OST_IMPL_H
#define LOOM_OSS_OST_IMPL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "oss/ost.h"

#define FDC_SLOTS    1024 /* open objects kept; direct-mapped by object id */
#define RL_BUCKETS   64   /* range-lock hash buckets, by object id */
#define INTENT_SLOTS 256  /* writes and punches in progress at once on one OST */

#define CSUM_SHIFT 16
#define CSUM_BLOCK (1u << CSUM_SHIFT)
#define CSUM_MASK  ((uint64_t)CSUM_BLOCK - 1)
#define CSUM_NONE  0u

/* A cached open object: its data and sidecar descriptors (cfd -1: no sidecar yet). refs > 0
 * while a worker uses them; a destroyed or evicted object's descriptors are closed by the last
 * user (doomed). */
struct fdc_slot {
	uint64_t objid;
	int fd;
	int cfd;
	int refs;
	bool doomed;
	_Atomic int64_t epoch; /* the object's truncation epoch (EPOCH_XATTR), -1 until read */
};

/* One holder of (or waiter for) blocks [first, last] of an object; lives on its owner's stack. */
struct rl_ent {
	uint64_t objid;
	uint64_t first, last;
	bool excl;
	struct rl_ent *next;
};

/* Holders and waiters of the objects hashing here, in arrival order: an entry waits for the
 * conflicting entries ahead of it only, so every waiter is eventually served (no deadlock, and
 * a writer is not starved by a stream of readers). */
struct rl_bucket {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rl_ent *head, *tail;
};

/* An intent record as it lies in DIR/csum_intents (32 bytes, little-endian). objid 0: free. */
struct csum_intent {
	_Atomic uint64_t objid;
	uint64_t first;
	uint64_t count;
	uint64_t pad;
};
_Static_assert(sizeof(struct csum_intent) == 32, "csum_intent");

struct ost_scrub {
	pthread_mutex_t lock;  /* all below */
	pthread_cond_t cond;   /* wakes the scrubber's rate-limit sleep to stop */
	pthread_t thread;
	bool joinable;
	bool stop;
	uint64_t rate;         /* bytes/s scrubs may read (--scrub-rate; scrub_rate at run time) */
	struct lw_scrub_rep st;
};

struct ost {
	char dir[PATH_MAX];
	struct ost_conf conf;
	int dirfd;
	int odir[OST_NDIRS];
	atomic_bool odir_dirty[OST_NDIRS]; /* a file was created there since the last dir fsync */
	pthread_mutex_t odir_sync[OST_NDIRS]; /* one directory fsync at a time, see ost_sync */
	pthread_mutex_t fdc_lock;
	struct fdc_slot fdc[FDC_SLOTS];
	struct rl_bucket rl[RL_BUCKETS];

	int intent_fd;
	struct csum_intent *intents;   /* mapped; NULL: written with pwrite instead */
	pthread_mutex_t intent_lock;
	pthread_cond_t intent_cond;
	int intent_free[INTENT_SLOTS]; /* a stack of free slot numbers */
	int nintent_free;

	struct ost_scrub scrub;
	struct ost_cache_policy cache;
	/* Objects with ids below it were a lost OST's (this one replaced it): missing means lost.
	 * UINT64_MAX while the replacement awaits the MDS's yes (every missing object is lost). The
	 * registration thread sets it, workers read it. */
	_Atomic uint64_t lost_below;
	atomic_bool gone_told;         /* its directory was found removed (said once) */
	uint64_t instance;             /* ost_instance.c; 0 until ost_instance_start */
};

/* ost_csum.c: range locks, checksums and write intents. */

/* Blocks [first, last] of objid, shared (excl false) or exclusive. */
void rl_lock(struct ost *o, struct rl_ent *e, uint64_t objid, uint64_t first, uint64_t last, bool excl);
void rl_unlock(struct ost *o, struct rl_ent *e);

/* The checksum of a block holding data[0..len) and zeros after (len <= CSUM_BLOCK). */
uint32_t csum_block(const void *data, size_t len);
/* Reads the sidecar entries of blocks [first, first+n); missing ones (and all, for cfd -1) are
 * CSUM_NONE. */
int csum_load(int cfd, uint64_t first, uint32_t n, uint32_t *out);

struct csum_tally {
	uint64_t checked, unchecked, bad;
};
/*
 * Compares the blocks from block `first` on, whose bytes are data[0..len) (len is a multiple of
 * the block size except at the object's end), with their stored entries. Logs an ERROR line per
 * mismatch (`what` says who found it: "read", "scrub"...) and adds to *t. Returns the number of
 * bad blocks.
 */
uint64_t csum_check(const struct ost *o, const char *what, uint64_t objid, uint64_t first,
		    const uint8_t *data, size_t len, const uint32_t *stored, struct csum_tally *t);

/* Writes the sidecar entries of blocks [first, first+n). */
int csum_store(int cfd, uint64_t first, uint32_t n, const uint32_t *crcs);
/* After a change of blocks [first, first+count) that failed or was cut short: their checksums
 * are recomputed from the data on disk, or, failing that, dropped (the sidecar cut before them).
 * 0 once no false mismatch is possible. */
int csum_repair(const struct ost *o, uint64_t objid, int fd, int cfd, uint64_t first,
		uint64_t count);

/* Records that blocks [first, first+count) of objid are about to change (waiting for a free
 * slot) and returns the slot; intent_end clears it once data and checksums agree again. A
 * thread holds one slot at a time, or all of them could be taken by threads waiting for a
 * second. */
int intent_begin(struct ost *o, uint64_t objid, uint64_t first, uint64_t count);
void intent_end(struct ost *o, int slot);
/* At ost_open(): maps DIR/csum_intents and recomputes the checksums of every write a crash
 * interrupted; a record that cannot be repaired now stays for the next start (-EIO when every
 * slot holds one). */
int intents_open_and_recover(struct ost *o);

/* ost_obj.c: objects open for I/O, and their truncation epochs. */

/* An object open for I/O: its descriptors and the cache slot holding them (NULL: not cached,
 * obj_put closes them). cfd is -1 when the object has no sidecar (only without create). The
 * descriptors are shared with other workers: nothing may depend on their file position. */
struct obj {
	int fd;
	int cfd;
	struct fdc_slot *slot;
};
/* Opens an object for I/O, with its sidecar. With create, a missing object is created (and
 * tagged with its file, for fsck) and so is its sidecar, in truncation epoch `epoch`. Release
 * with obj_put(). -ENOENT for a missing object without create. A missing object that was lost
 * with the OST this one replaced (ost_obj_lost) is -EIO, with or without create, unless create is
 * OBJ_CREATE_LOST (a cut to nothing, after which nothing of it is lost any more). */
#define OBJ_CREATE_LOST 2
int obj_get(struct ost *o, uint64_t objid, int create, uint64_t ino, uint32_t stripe_idx,
	    uint32_t epoch, struct obj *h);
/* Was objid made on the lost OST this one replaced? (Whether it is missing is the caller's.) */
static inline bool ost_obj_lost(struct ost *o, uint64_t objid)
{
	return objid < atomic_load_explicit(&o->lost_below, memory_order_acquire);
}
/* The truncation epoch the object is in (protocol.md, OST_WRITE): 0 before any cut. */
uint32_t obj_epoch(struct obj *h);
/* Records that the object is in `epoch` now (it was cut for it). */
int obj_set_epoch(struct obj *h, uint32_t epoch);
/* The cache slot objid would take (one per hash; ost_destroy dooms it). */
struct fdc_slot *fdc_slot_of(struct ost *o, uint64_t objid);
void obj_put(struct ost *o, struct obj *h);
/* Opens objid's sidecar; with create, an empty one is created when missing. Without create a
 * missing sidecar gives *cfd -1 and 0. (An object's descriptors from obj_get without create may
 * lack a sidecar made since by a handle that was not cached.) */
int csum_open(struct ost *o, uint64_t objid, bool create, int *cfd);

/* ost.c: plain I/O. */
/* read/write until done or the end of the file; *got gets the bytes read. 0 or -errno. */
int pread_full(int fd, void *buf, size_t len, uint64_t off, size_t *got);
int pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* The object's size and blocks, as fstat(2) says. */
int fd_stat(int fd, struct ost_objstat *os);

/* scrub.c */
void scrub_init(struct ost *o);
void scrub_fini(struct ost *o);

/* ost_space.c: OST_FALLOCATE and OST_SEEK (declared in ost.h), and: */
/* An object that an OST_PUNCH does not shrink gives up the space allocated past its end (a
 * KEEP_SIZE allocation), as truncate(2) on a local file does; *os is brought up to date. */
int space_trim_past_end(int fd, struct ost_objstat *os);

#endif
