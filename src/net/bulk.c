#include "net/bulk.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "proto/wire.h"

#define BULK_ALIGN     4096
#define BULK_POOL_MAX  32 /* buffers kept: 128 MiB at 4 MiB each */
#define BULK_MAGIC     0x42554C4B4C4F4F4Dull

/* Each buffer is preceded by one page holding this header, so that bulk_free knows its size. */
struct bulk_hdr {
	uint64_t magic;
	size_t cap;
	struct bulk_hdr *next; /* in the pool */
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bulk_hdr *pool;
static unsigned pool_count;

/* A process that forks while another thread holds pool_lock (a Python DataLoader forking its
 * workers while libloom's threads run) must not leave the lock held forever in the child. */
static void pool_lock_take(void)
{
	pthread_mutex_lock(&pool_lock);
}

static void pool_lock_give(void)
{
	pthread_mutex_unlock(&pool_lock);
}

__attribute__((constructor)) static void pool_atfork(void)
{
	pthread_atfork(pool_lock_take, pool_lock_give, pool_lock_give);
}

void *bulk_alloc(size_t len)
{
	size_t cap = len <= LW_RPC_BULK ? LW_RPC_BULK : len;
	struct bulk_hdr *h = NULL;

	if (cap == LW_RPC_BULK) {
		pthread_mutex_lock(&pool_lock);
		h = pool;
		if (h) {
			pool = h->next;
			pool_count--;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	if (!h) {
		if (posix_memalign((void **)&h, BULK_ALIGN, BULK_ALIGN + cap))
			return NULL;
		h->magic = BULK_MAGIC;
		h->cap = cap;
	}
	return (uint8_t *)h + BULK_ALIGN;
}

void bulk_free(void *p)
{
	struct bulk_hdr *h;

	if (!p)
		return;
	h = (struct bulk_hdr *)((uint8_t *)p - BULK_ALIGN);
	if (h->magic != BULK_MAGIC)
		abort(); /* not ours: a bug that must not pass silently */
	if (h->cap == LW_RPC_BULK) {
		pthread_mutex_lock(&pool_lock);
		if (pool_count < BULK_POOL_MAX) {
			h->next = pool;
			pool = h;
			pool_count++;
			h = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	free(h);
}
