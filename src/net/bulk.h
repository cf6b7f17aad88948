/*
 * Bulk buffers for servers: page-aligned, and recycled, so that a steady stream of 4 MiB writes
 * and reads neither faults fresh pages in nor returns them to the kernel on every request.
 */
#ifndef LOOM_NET_BULK_H
#define LOOM_NET_BULK_H

#include <stddef.h>

/* A page-aligned buffer of at least len bytes, or NULL. Buffers of up to LW_RPC_BULK bytes
 * come from (and go back to) a process-wide pool. */
void *bulk_alloc(size_t len);
/* Releases a buffer from bulk_alloc (NULL is fine). Usable as a srv_reply bulk_free. */
void bulk_free(void *p);

#endif
