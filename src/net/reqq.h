/*
 * A blocking queue between the event loop and a program's workers. It holds items embedded in
 * their owners: a server request (struct srv_req's qitem, kind REQQ_SRV_REQ), or a program's own
 * work item (a kind of its own) that must keep its place in line among the requests.
 */
#ifndef LOOM_NET_REQQ_H
#define LOOM_NET_REQQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define REQQ_SRV_REQ 0 /* the kind of a struct srv_req (see srv_req_of() in server.h) */

struct reqq_item {
	struct reqq_item *next;
	uint16_t kind;
};

struct reqq {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct reqq_item *head;
	struct reqq_item *tail;
	uint32_t len;
	bool closed;
};

void reqq_init(struct reqq *q);
void reqq_destroy(struct reqq *q);
void reqq_push(struct reqq *q, struct reqq_item *item);
/* Waits for an item; NULL once the queue is closed and empty. */
struct reqq_item *reqq_pop(struct reqq *q);
/* Takes up to max queued items as a list (linked by ->next), waiting at most timeout_ms for the
 * first (-1: forever). Returns the list, or NULL on timeout or when closed and empty. */
struct reqq_item *reqq_pop_batch(struct reqq *q, uint32_t max, int timeout_ms, uint32_t *n);
/* Wakes every waiter; later pops drain what is left, then return NULL. */
void reqq_close(struct reqq *q);

#endif
