/* The prefetcher's state (prefetch.c), and its blocks: ranged items read together (prefetch_blocks.c). */
#ifndef LOOM_CLIENT_PREFETCH_H
#define LOOM_CLIENT_PREFETCH_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/jobid.h"
#include "loom/loom.h"
#include "loom/loom_ll.h"

#define PF_DEFAULT_BYTES   (256u << 20)
#define PF_DEFAULT_THREADS 16u
#define PF_MAX_THREADS     256u
#define PF_DEFAULT_AHEAD   4096u
#define PF_OPEN_FILES      4 /* files each thread keeps open for ranged items (shards) */
#define PF_BLOCK           (1u << 20) /* ranged items are read by the aligned block */

enum { SLOT_WAITING, SLOT_CLAIMED, SLOT_READY, SLOT_GONE };

struct pf_slot {
	unsigned char state;
	int err;      /* READY: 0 or the negative errno of the read */
	size_t len;   /* READY: bytes in buf, all counted in held */
	void *buf;
};

/*
 * An aligned block of a file that several ranged items of the epoch lie in (the records of a
 * shard): read once, by the first thread (or reader) to come to one of them, and each item
 * copied out of it by the reader. Its memory counts in block_held from that read until the last
 * item has had its copy or was given up.
 * NONE -> READING -> READY or FAILED (whose items then read their own ranges).
 */
enum { BLK_NONE, BLK_READING, BLK_READY, BLK_FAILED };

struct pf_block {
	const char *path;
	uint64_t start;
	size_t len;        /* READY: bytes in buf (short at the end of the file) */
	unsigned refs;     /* items that have not had their copy (or been given up) */
	unsigned char state;
	bool charged;      /* PF_BLOCK is in block_held */
	void *buf;
};

struct loom_prefetch {
	loom_fs *fs;
	struct loom_prefetch_item *items; /* paths point into names */
	char *names;
	size_t n;
	size_t max_bytes;
	size_t max_ahead;

	pthread_mutex_t lock;        /* everything below */
	pthread_cond_t work;         /* threads: an item to claim, or memory freed */
	pthread_cond_t ready;        /* the reader: an item became READY */
	struct pf_slot *slots;
	size_t cursor;               /* the next item a thread claims */
	size_t next_reserve;         /* the next item that may reserve memory */
	size_t take_pos;             /* items before it are taken or given up */
	size_t held;
	bool stopping;
	struct loom_prefetch_stats st;
	pthread_cond_t block_done;   /* a block stopped READING */
	pthread_cond_t window;       /* threads ahead of the reader by max_ahead: take_pos moved */
	unsigned window_waiters;     /* threads waiting on window, and on work (to reserve) */
	unsigned reserve_waiters;
	struct pf_block *blocks;
	size_t nblocks;
	uint32_t *item_block;        /* per item: its block's index + 1, 0 for none (or done) */
	size_t *next_plain;          /* per item: the first item from it on without a block */
	size_t block_budget;         /* the most bytes of blocks alive at once, as planned: items
	                              * reserve within max_bytes less this */
	size_t block_held;           /* bytes of blocks alive now */
	uint64_t door_fh;            /* through a mount's door: the daemon runs it (door_prefetch.c)
	                              * and nothing above but fs and n is used */
	char jobid[LOOM_JOBID_LEN];  /* the job of the thread that started it: its threads read
	                              * ahead in that job's name (jobtag.h) */

	pthread_t *threads;
	unsigned nthreads;
};


/* prefetch_blocks.c */
/* Finds the blocks worth reading whole: at least two items in one, and no more of them alive at
 * once (from their first item in the epoch's order to their last) than half of max_bytes. */
int pf_blocks_plan(loom_prefetch *pf);
void pf_blocks_free(loom_prefetch *pf);
/* Under pf->lock: the block of item k while the item still needs it (NULL: none). */
struct pf_block *pf_block_of(loom_prefetch *pf, size_t k);
/* The first item at or after k that is not a block's (pf->n: none): the next to reserve. */
size_t pf_plain_from(loom_prefetch *pf, size_t k);
/* Under pf->lock: true when the caller is to read b (pf_block_fill, without the lock). */
bool pf_block_claim(loom_prefetch *pf, struct pf_block *b);
/* Reads a claimed block through f (NULL: it could not be opened) and tells its waiters. */
void pf_block_fill(loom_prefetch *pf, struct pf_block *b, loom_file *f);
/* Under pf->lock: item k will not take its copy (given up); no-op for an item without block. */
void pf_block_unref(loom_prefetch *pf, size_t k);
/* Under pf->lock (dropped while reading or copying): item i's bytes, copied out of its block
 * into a malloc'd *buf (the block read here if nobody has), or -EAGAIN when the block could not
 * be read (the item's own range is to be read). Drops the item's reference. */
ssize_t pf_block_take(loom_prefetch *pf, size_t i, void **buf);

/* door_prefetch.c: the prefetcher of a connection through a mount's door, run by loom-mount. */
bool pf_via_door(loom_fs *fs);
int door_prefetch_start(loom_fs *fs, const struct loom_prefetch_item *items, size_t n,
			const struct loom_prefetch_opts *opts, loom_prefetch **out);
ssize_t door_prefetch_take(loom_prefetch *pf, size_t i, void **buf);
void door_prefetch_get_stats(loom_prefetch *pf, struct loom_prefetch_stats *st);
void door_prefetch_stop(loom_prefetch *pf);

#endif
