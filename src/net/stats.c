#include "net/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NJOB_BUCKETS (sizeof(((struct srv_stats *)0)->jobs) / sizeof(struct stats_job *))

static uint64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec;
}

void stats_op_reset(struct stats_op *o)
{
	atomic_store_explicit(&o->count, 0, memory_order_relaxed);
	atomic_store_explicit(&o->errors, 0, memory_order_relaxed);
	atomic_store_explicit(&o->bytes_in, 0, memory_order_relaxed);
	atomic_store_explicit(&o->bytes_out, 0, memory_order_relaxed);
	atomic_store_explicit(&o->usec_sum, 0, memory_order_relaxed);
	atomic_store_explicit(&o->usec_min, UINT64_MAX, memory_order_relaxed);
	atomic_store_explicit(&o->usec_max, 0, memory_order_relaxed);
	for (int b = 0; b < STATS_LAT_BUCKETS; b++)
		atomic_store_explicit(&o->bucket[b], 0, memory_order_relaxed);
}

static void atomic_min(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);

	while (v < cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								   memory_order_relaxed))
		;
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);

	while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
								   memory_order_relaxed))
		;
}

void stats_op_note(struct stats_op *o, uint64_t usec, bool failed, uint64_t bytes_in, uint64_t bytes_out)
{
	atomic_fetch_add_explicit(&o->count, 1, memory_order_relaxed);
	if (failed)
		atomic_fetch_add_explicit(&o->errors, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&o->bytes_in, bytes_in, memory_order_relaxed);
	atomic_fetch_add_explicit(&o->bytes_out, bytes_out, memory_order_relaxed);
	atomic_fetch_add_explicit(&o->usec_sum, usec, memory_order_relaxed);
	atomic_fetch_add_explicit(&o->bucket[stats_lat_bucket(usec)], 1, memory_order_relaxed);
	atomic_min(&o->usec_min, usec);
	atomic_max(&o->usec_max, usec);
}

void stats_asample_reset(struct stats_asample *x)
{
	atomic_store_explicit(&x->samples, 0, memory_order_relaxed);
	atomic_store_explicit(&x->min, UINT64_MAX, memory_order_relaxed);
	atomic_store_explicit(&x->max, 0, memory_order_relaxed);
	atomic_store_explicit(&x->sum, 0, memory_order_relaxed);
}

void stats_asample_add(struct stats_asample *x, uint64_t v)
{
	atomic_fetch_add_explicit(&x->samples, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&x->sum, v, memory_order_relaxed);
	atomic_min(&x->min, v);
	atomic_max(&x->max, v);
}

void stats_asample_read(const struct stats_asample *x, struct stats_sample *out)
{
	/* (The loads take a non-const pointer in C11's generic functions.) */
	struct stats_asample *y = (struct stats_asample *)x;

	out->samples = atomic_load_explicit(&y->samples, memory_order_relaxed);
	out->min = atomic_load_explicit(&y->min, memory_order_relaxed);
	out->max = atomic_load_explicit(&y->max, memory_order_relaxed);
	out->sum = atomic_load_explicit(&y->sum, memory_order_relaxed);
	if (!out->samples || out->min == UINT64_MAX)
		out->min = 0;
}

void stats_init(struct srv_stats *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->start_s = now_s();
	for (int r = 0; r < LW_OP_ROWS; r++)
		stats_op_reset(&s->op[r]);
}

static void jobs_free_locked(struct srv_stats *s, uint32_t target, const char *job)
{
	for (size_t b = 0; b < NJOB_BUCKETS; b++) {
		struct stats_job **pp = &s->jobs[b];

		while (*pp) {
			struct stats_job *j = *pp;

			if ((job && strcmp(j->job, job)) || (target != STATS_NO_TARGET && j->target != target)) {
				pp = &j->next;
				continue;
			}
			*pp = j->next;
			free(j);
			s->njobs--;
		}
	}
}

void stats_fini(struct srv_stats *s)
{
	jobs_free_locked(s, STATS_NO_TARGET, NULL);
	pthread_mutex_destroy(&s->lock);
}

int stats_lat_bucket(uint64_t usec)
{
	int b = 0;

	/* Bucket k holds (2^(k-1), 2^k] us; 0 holds up to 1 us. */
	while (b < STATS_LAT_BUCKETS - 1 && usec > (1ull << b))
		b++;
	return b;
}

double stats_lat_bound_s(int bucket)
{
	if (bucket >= STATS_LAT_BUCKETS - 1)
		return __builtin_inf();
	return (double)(1ull << bucket) / 1e6;
}

static void sample_add(struct stats_sample *x, uint64_t v)
{
	if (!x->samples || v < x->min)
		x->min = v;
	if (v > x->max)
		x->max = v;
	x->samples++;
	x->sum += v;
}

/* FNV-1a over the target and the job id. */
static size_t job_hash(uint32_t target, const char *job)
{
	uint64_t h = 1469598103934665603ull;

	for (int i = 0; i < 4; i++)
		h = (h ^ ((target >> (8 * i)) & 0xff)) * 1099511628211ull;
	for (; *job; job++)
		h = (h ^ (uint8_t)*job) * 1099511628211ull;
	return (size_t)(h % NJOB_BUCKETS);
}

/* Jobs idle past the cleanup interval go; when full, the longest idle goes even if younger. */
static void jobs_expire_locked(struct srv_stats *s, uint64_t now, bool need_room)
{
	uint64_t idle = s->job_idle_s ? s->job_idle_s : STATS_JOB_IDLE_S;
	struct stats_job **oldest = NULL;

	for (size_t b = 0; b < NJOB_BUCKETS; b++) {
		struct stats_job **pp = &s->jobs[b];

		while (*pp) {
			struct stats_job *j = *pp;

			if (now >= j->last_s + idle) {
				*pp = j->next;
				free(j);
				s->njobs--;
				continue;
			}
			if (!oldest || j->last_s < (*oldest)->last_s)
				oldest = pp;
			pp = &j->next;
		}
	}
	if (need_room && s->njobs >= STATS_MAX_JOBS && oldest) {
		struct stats_job *j = *oldest;

		*oldest = j->next;
		free(j);
		s->njobs--;
	}
}

static struct stats_job *job_get_locked(struct srv_stats *s, uint32_t target, const char *job, uint64_t now)
{
	size_t h = job_hash(target, job);
	struct stats_job *j;

	for (j = s->jobs[h]; j; j = j->next)
		if (j->target == target && !strcmp(j->job, job))
			return j;
	if (s->njobs >= STATS_MAX_JOBS) {
		jobs_expire_locked(s, now, true);
		h = job_hash(target, job);
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	snprintf(j->job, sizeof(j->job), "%s", job);
	j->target = target;
	j->start_s = now;
	j->next = s->jobs[h];
	s->jobs[h] = j;
	s->njobs++;
	return j;
}

static struct stats_target *target_get_locked(struct srv_stats *s, uint32_t id)
{
	for (uint32_t i = 0; i < s->ntargets; i++)
		if (s->target[i].id == id)
			return &s->target[i];
	if (s->ntargets == STATS_MAX_TARGETS)
		return NULL;
	s->target[s->ntargets].id = id;
	return &s->target[s->ntargets++];
}

void stats_note(struct srv_stats *s, const struct stats_req *r)
{
	int row = lw_op_row(r->opcode);
	bool data = r->read_bytes || r->write_bytes;
	const char *job = r->job && r->job[0] ? r->job : NULL;
	uint64_t now;

	if (s->off || row < 0)
		return;
	stats_op_note(&s->op[row], r->usec, r->status < 0, r->bytes_in, r->bytes_out);
	if (r->resent)
		atomic_fetch_add_explicit(&s->resent, 1, memory_order_relaxed);
	/* Servers' and administrators' requests (asking for these very statistics, heartbeats)
	 * are no job's work. */
	if (r->job && r->job[0] && (lw_op_flags(r->opcode) & LW_OPF_ADMIN))
		job = NULL;
	if (!data && !job)
		return;

	now = now_s();
	pthread_mutex_lock(&s->lock);
	if (data && r->target != STATS_NO_TARGET) {
		struct stats_target *t = target_get_locked(s, r->target);

		if (t && r->read_bytes)
			sample_add(&t->read_bytes, r->read_bytes);
		if (t && r->write_bytes)
			sample_add(&t->write_bytes, r->write_bytes);
	}
	if (job) {
		struct stats_job *j = job_get_locked(s, r->target == STATS_NO_TARGET ? 0 : r->target, job, now);

		if (j) {
			j->last_s = now;
			sample_add(&j->op[row], r->usec);
			if (r->read_bytes)
				sample_add(&j->read_bytes, r->read_bytes);
			if (r->write_bytes)
				sample_add(&j->write_bytes, r->write_bytes);
		}
	}
	pthread_mutex_unlock(&s->lock);
}

void stats_note_reply_cache_hit(struct srv_stats *s)
{
	if (!s->off)
		atomic_fetch_add_explicit(&s->reply_cache_hits, 1, memory_order_relaxed);
}

void stats_clear(struct srv_stats *s, bool ops)
{
	if (ops) {
		for (int r = 0; r < LW_OP_ROWS; r++)
			stats_op_reset(&s->op[r]);
		atomic_store_explicit(&s->resent, 0, memory_order_relaxed);
		atomic_store_explicit(&s->reply_cache_hits, 0, memory_order_relaxed);
	}
	pthread_mutex_lock(&s->lock);
	if (ops) {
		memset(s->target, 0, sizeof(s->target));
		s->ntargets = 0;
		s->start_s = now_s();
	}
	jobs_free_locked(s, STATS_NO_TARGET, NULL);
	pthread_mutex_unlock(&s->lock);
}

void stats_clear_jobs(struct srv_stats *s, uint32_t target, const char *job)
{
	pthread_mutex_lock(&s->lock);
	jobs_free_locked(s, target, job);
	pthread_mutex_unlock(&s->lock);
}

/* For the renderers (stats_render.c): idle jobs go before anyone sees them. */
void stats_expire_jobs_locked(struct srv_stats *s)
{
	jobs_expire_locked(s, now_s(), false);
}
