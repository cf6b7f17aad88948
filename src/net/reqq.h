/* A blocking queue of server requests between the event loop and a program's workers. */
#ifndef LOOM_NET_REQQ_H
#define LOOM_NET_REQQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/server.h"

struct reqq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct srv_req *head;
	struct srv_req *tail;
	uint32_t len;
	bool closed;
};

void reqq_init(struct reqq *q);
void reqq_destroy(struct reqq *q);
void reqq_push(struct reqq *q, struct srv_req *req);
/* Waits for a request; NULL once the queue is closed and empty. */
struct srv_req *reqq_pop(struct reqq *q);
/* Takes up to max queued requests as a list (linked by ->next), waiting at most timeout_ms for the
 * first (-1: forever). Returns the list, or NULL on timeout or when closed and empty. */
struct srv_req *reqq_pop_batch(struct reqq *q, uint32_t max, int timeout_ms, uint32_t *n);
/* Wakes every waiter; later pops drain what is left, then return NULL. */
void reqq_close(struct reqq *q);

#endif
