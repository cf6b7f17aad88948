/*
 * Waiting for calls: groups of calls (struct rpc_wait), the interrupts that end a thread's waits
 * (struct rpc_intr, for FUSE requests the kernel interrupts), and the soft deadline of calls on
 * soft connections. A wait that ends early cancels its calls (rpc_call_cancel): a call still
 * queued or in flight completes at once; one being sent or received finishes that first, since
 * its buffers are the caller's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdatomic.h>
#include <time.h>

#include "common/util.h"
#include "net/rpc_impl.h"

/* How often a wait that cancels looks again at calls it could not cancel yet (being sent or
 * received), and at an interrupt or deadline while the I/O thread is busy elsewhere. */
#define RECHECK_MS 50

static _Thread_local struct rpc_intr *thread_intr;
static _Thread_local bool thread_nowait;
static _Thread_local char thread_job[LW_JOBID_LEN];

bool rpc_nowait_swap(bool on)
{
	bool was = thread_nowait;

	thread_nowait = on;
	return was;
}

bool rpc_nowait_thread(void)
{
	return thread_nowait;
}

void rpc_job_set(const char *job)
{
	snprintf(thread_job, sizeof(thread_job), "%s", job ? job : "");
}

const char *rpc_job_get(void)
{
	return thread_job;
}

void rpc_intr_init(struct rpc_intr *in)
{
	pthread_mutex_init(&in->lock, NULL);
	atomic_init(&in->fired, false);
	in->waiting = NULL;
}

void rpc_intr_destroy(struct rpc_intr *in)
{
	pthread_mutex_destroy(&in->lock);
}

void rpc_intr_enter(struct rpc_intr *in)
{
	if (in)
		atomic_store(&in->fired, false);
	thread_intr = in;
}

struct rpc_intr *rpc_intr_swap(struct rpc_intr *in)
{
	struct rpc_intr *old = thread_intr;

	thread_intr = in;
	return old;
}

void rpc_intr_fire(struct rpc_intr *in)
{
	pthread_mutex_lock(&in->lock);
	atomic_store(&in->fired, true);
	if (in->waiting) {
		/* Under the wait's lock, so a waiter between its check and its sleep cannot miss it. */
		pthread_mutex_lock(&in->waiting->lock);
		pthread_cond_broadcast(&in->waiting->cond);
		pthread_mutex_unlock(&in->waiting->lock);
	}
	pthread_mutex_unlock(&in->lock);
}

bool rpc_intr_fired(void)
{
	struct rpc_intr *in = thread_intr;

	return in && atomic_load(&in->fired);
}

void rpc_wait_init(struct rpc_wait *w)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	w->pending = 0;
	w->calls = NULL;
	w->deadline_ns = 0;
}

void rpc_wait_destroy(struct rpc_wait *w)
{
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
}

/* Cancels every call of w not completed yet. Without w's lock (cancelling takes the
 * connections' locks, which completing holds before w's). */
static void cancel_pending(struct rpc_wait *w, int err)
{
	struct rpc_call *calls;

	pthread_mutex_lock(&w->lock);
	calls = w->calls;
	pthread_mutex_unlock(&w->lock);
	for (struct rpc_call *call = calls; call; call = call->wnext) {
		bool completed;

		pthread_mutex_lock(&w->lock);
		completed = call->completed;
		pthread_mutex_unlock(&w->lock);
		if (!completed)
			rpc_call_cancel(call, err);
	}
}

static void wait_until(struct rpc_wait *w, uint64_t until_ns)
{
	struct timespec ts = { .tv_sec = (time_t)(until_ns / 1000000000ull),
			       .tv_nsec = (long)(until_ns % 1000000000ull) };

	pthread_cond_timedwait(&w->cond, &w->lock, &ts);
}

/* The thread's interrupt, if any, now wakes w (or, with NULL, no longer does). */
static void intr_attach(struct rpc_intr *in, struct rpc_wait *w)
{
	if (in) {
		pthread_mutex_lock(&in->lock);
		in->waiting = w;
		pthread_mutex_unlock(&in->lock);
	}
}

void rpc_wait_all(struct rpc_wait *w)
{
	struct rpc_intr *in = thread_intr;

	intr_attach(in, w);
	pthread_mutex_lock(&w->lock);
	while (w->pending > 0) {
		uint64_t now = clock_mono_ns();
		bool fired = in && rpc_intr_fired();
		bool late = w->deadline_ns && now >= w->deadline_ns;

		if (fired || late) {
			pthread_mutex_unlock(&w->lock);
			cancel_pending(w, fired ? -EINTR : -EIO);
			pthread_mutex_lock(&w->lock);
			if (w->pending > 0)
				wait_until(w, clock_mono_ns() + RECHECK_MS * 1000000ull);
		} else if (w->deadline_ns) {
			wait_until(w, w->deadline_ns);
		} else {
			pthread_cond_wait(&w->cond, &w->lock);
		}
	}
	pthread_mutex_unlock(&w->lock);
	intr_attach(in, NULL);
}

int rpc_wait_settled(struct rpc_wait *w)
{
	struct rpc_intr *in = thread_intr;
	int rc = 0;

	intr_attach(in, w);
	pthread_mutex_lock(&w->lock);
	while (w->pending > 0 && rc == 0) {
		if (in && rpc_intr_fired())
			rc = -EINTR;
		else if (w->deadline_ns && clock_mono_ns() >= w->deadline_ns)
			rc = -ETIMEDOUT;
		else if (w->deadline_ns)
			wait_until(w, w->deadline_ns);
		else
			pthread_cond_wait(&w->cond, &w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	intr_attach(in, NULL);
	return rc;
}

int rpc_call_sync(struct rpc_conn *c, struct rpc_call *call)
{
	struct rpc_wait w;

	rpc_wait_init(&w);
	rpc_submit(c, call, &w);
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
	return call->status;
}
