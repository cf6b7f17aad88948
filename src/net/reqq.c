#include "net/reqq.h"

#include <errno.h>
#include <time.h>

#include "common/util.h"

void reqq_init(struct reqq *q)
{
	pthread_mutex_init(&q->lock, NULL);
	cond_init_monotonic(&q->cond);
	q->head = q->tail = NULL;
	q->len = 0;
	q->closed = false;
}

void reqq_destroy(struct reqq *q)
{
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
}

void reqq_push(struct reqq *q, struct reqq_item *item)
{
	item->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = item;
	else
		q->head = item;
	q->tail = item;
	q->len++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

struct reqq_item *reqq_pop_batch(struct reqq *q, uint32_t max, int timeout_ms, uint32_t *n)
{
	struct reqq_item *list = NULL, **tailp = &list;
	struct timespec deadline;
	uint32_t count = 0;

	if (timeout_ms >= 0)
		deadline = deadline_after_ms(timeout_ms);
	pthread_mutex_lock(&q->lock);
	while (!q->head && !q->closed) {
		if (timeout_ms < 0) {
			pthread_cond_wait(&q->cond, &q->lock);
		} else if (pthread_cond_timedwait(&q->cond, &q->lock, &deadline) == ETIMEDOUT) {
			break;
		}
	}
	while (q->head && count < max) {
		struct reqq_item *r = q->head;
		q->head = r->next;
		r->next = NULL;
		*tailp = r;
		tailp = &r->next;
		count++;
	}
	if (!q->head)
		q->tail = NULL;
	q->len -= count;
	pthread_mutex_unlock(&q->lock);
	if (n)
		*n = count;
	return list;
}

struct reqq_item *reqq_pop(struct reqq *q)
{
	return reqq_pop_batch(q, 1, -1, NULL);
}

void reqq_close(struct reqq *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}
