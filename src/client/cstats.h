/*
 * What the client decides from its caches, counted where each decision is made (issue 22), for
 * a front end to show: loom-mount's `loom stats --mount` and its /metrics (src/fuse/mstats.c),
 * through loom_client_stats (loom_ll.h).
 *
 * Process-wide, not per loom_fs: a mount's door sessions connect file systems of their own,
 * and what the mount does for them (their writes, their prefetchers) is the mount's work.
 * Relaxed atomics, one add per decision.
 */
#ifndef LOOM_CLIENT_CSTATS_H
#define LOOM_CLIENT_CSTATS_H

#include <stdatomic.h>
#include <stdint.h>

enum cstat {
	CSTAT_DOM_HIT,        /* a read of Data-on-MDT bytes answered from this client's copy */
	CSTAT_DOM_MISS,       /* ... that fetched them from the MDS first */
	CSTAT_WRITE_BEHIND,   /* a write answered before the OSTs had it (write.c, wb_send) */
	CSTAT_WRITE_SYNC,     /* a write answered once written (larger than 1 MiB, a partial row) */
	CSTAT_CREATE_BEHIND,  /* a create answered here and sent behind (behind.c) */
	CSTAT_UNLINK_BEHIND,  /* an unlink answered here and sent behind */
	CSTAT_PREFETCH_HIT,   /* a prefetched item ready when taken (prefetch.c) */
	CSTAT_PREFETCH_WAIT,  /* ... taken while being read: the reader waited */
	CSTAT_PREFETCH_MISS,  /* ... the reader read itself (it jumped ahead, or a block failed) */
	CSTAT_COUNT
};

extern _Atomic uint64_t cstats_counter[CSTAT_COUNT];

static inline void cstat_add(enum cstat c)
{
	atomic_fetch_add_explicit(&cstats_counter[c], 1, memory_order_relaxed);
}

#endif
