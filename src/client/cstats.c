/* The client's cache counters (cstats.h) as loom_client_stats shows them. */
#include <string.h>

#include "client/cstats.h"
#include "loom/loom_ll.h"

_Atomic uint64_t cstats_counter[CSTAT_COUNT];

static uint64_t cstat_get(enum cstat c)
{
	return atomic_load_explicit(&cstats_counter[c], memory_order_relaxed);
}

void loom_client_stats(struct loom_client_stats *out, size_t size)
{
	struct loom_client_stats st = {
		.dom_hits = cstat_get(CSTAT_DOM_HIT),
		.dom_misses = cstat_get(CSTAT_DOM_MISS),
		.writes_behind = cstat_get(CSTAT_WRITE_BEHIND),
		.writes_sync = cstat_get(CSTAT_WRITE_SYNC),
		.creates_behind = cstat_get(CSTAT_CREATE_BEHIND),
		.unlinks_behind = cstat_get(CSTAT_UNLINK_BEHIND),
		.prefetch_hits = cstat_get(CSTAT_PREFETCH_HIT),
		.prefetch_waits = cstat_get(CSTAT_PREFETCH_WAIT),
		.prefetch_misses = cstat_get(CSTAT_PREFETCH_MISS),
	};

	/* A caller built against an older, shorter struct gets its part. */
	memset(out, 0, size);
	memcpy(out, &st, size < sizeof(st) ? size : sizeof(st));
}

void loom_client_stats_clear(void)
{
	for (int c = 0; c < CSTAT_COUNT; c++)
		atomic_store_explicit(&cstats_counter[c], 0, memory_order_relaxed);
}
