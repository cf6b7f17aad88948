/*
 * Cuts the objects of truncated files, so that a truncation racing another client's writes keeps
 * exactly what it must (architecture.md, "Truncation").
 *
 * A size change that may leave bytes on the objects records in the MDT, in the transaction of the
 * size, a truncation in a new epoch (mdt_trunc_queue). After the commit the metadata thread hands
 * the truncator the truncations to cut, each inode's oldest first; the truncator sends every
 * object OST_PUNCH with the epoch, all at once, and reports back through the request queue; the
 * metadata thread then deletes the entries. The reply to the request that truncated is held
 * until its objects are cut (as when the client cut them itself), or for PARK_SECONDS at most:
 * an OSS that is away must not hold the truncater forever (its objects are cut when it returns;
 * until then nobody writes to them in the new epoch, and nothing past the size is read).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/stripe.h"
#include "common/util.h"
#include "mds/mds.h"

#define TRUNC_BATCH     64   /* truncations handed over at once */
#define TRUNC_POOL      256  /* OSS connections the truncator keeps */
#define TRUNC_BACKOFF_NS (2ull * 1000000000ull)
#define PARK_SECONDS    10

struct trunc_item {
	char host[64];
	uint16_t port;
	struct lw_ost_io io;
};

struct mds_trunc_job {
	uint64_t ino;
	uint32_t epoch;
	uint32_t nitems;
	struct trunc_item *items;
};

/* What the truncator reports for one truncation. */
struct trunc_result {
	uint64_t ino;
	uint32_t epoch;
	int32_t status;
};

/* A reply held until the truncation it made is cut. */
struct mds_parked {
	struct srv_req *req;
	void *body;
	uint32_t len;
	uint64_t ino;
	uint32_t epoch;
	uint64_t deadline_ns;
	struct mds_parked *next;
};

static void jobs_free(struct mds_trunc_job *jobs, uint32_t n)
{
	for (uint32_t i = 0; jobs && i < n; i++)
		free(jobs[i].items);
	free(jobs);
}

static void cut_jobs(struct mds *m, struct mds_trunc_job *jobs, uint32_t n, struct oss_pool *pool)
{
	struct trunc_result *res = calloc(n ? n : 1, sizeof(*res));
	struct rpc_call **calls = calloc(n ? n : 1, sizeof(*calls));
	struct mds_work *report;
	struct rpc_wait w;
	bool ok = res && calls;

	rpc_wait_init(&w);
	for (uint32_t j = 0; ok && j < n; j++) {
		calls[j] = calloc(jobs[j].nitems ? jobs[j].nitems : 1, sizeof(**calls));
		if (!calls[j]) {
			ok = false;
			break;
		}
		for (uint32_t i = 0; i < jobs[j].nitems; i++) {
			struct trunc_item *it = &jobs[j].items[i];
			struct rpc_conn *c = pool ? oss_pool_conn(m, pool, it->host, it->port) : NULL;

			rpc_call_init(&calls[j][i], LW_OP_OST_PUNCH, &it->io, sizeof(it->io));
			if (!c) {
				calls[j][i].status = -EHOSTUNREACH;
				continue;
			}
			rpc_submit(c, &calls[j][i], &w);
		}
	}
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
	for (uint32_t j = 0; j < n; j++) {
		if (res) {
			res[j].ino = jobs[j].ino;
			res[j].epoch = jobs[j].epoch;
			res[j].status = ok ? 0 : -ENOMEM;
		}
		for (uint32_t i = 0; calls && calls[j] && i < jobs[j].nitems; i++) {
			if (res && calls[j][i].status && !res[j].status)
				res[j].status = calls[j][i].status;
			rpc_call_release(&calls[j][i]);
		}
		if (calls)
			free(calls[j]);
		if (res && res[j].status)
			log_warn("truncator: inode %llu: objects not cut yet (%s); will retry",
				 (unsigned long long)jobs[j].ino, strerror(-res[j].status));
	}
	free(calls);
	/* Without memory for the report, the metadata thread would wait for it forever: keep
	 * trying. No results (res out of memory) is a failure: the truncator backs off. */
	while (!(report = mds_work_new(MDS_WORK_TRUNCATED, res ? n : 0, sizeof(*res))))
		sleep_ms(100);
	if (res)
		memcpy(report->data, res, (size_t)n * sizeof(*res));
	free(res);
	reqq_push(&m->queue, &report->qitem);
}

static void *truncator_main(void *arg)
{
	struct mds *m = arg;
	struct mds_truncator *tr = &m->truncator;
	struct oss_pool pool;
	bool have_pool = oss_pool_init(&pool, TRUNC_POOL) == 0;

	pthread_mutex_lock(&tr->lock);
	for (;;) {
		struct mds_trunc_job *jobs;
		uint32_t n;

		while (!tr->jobs && !tr->stopping)
			pthread_cond_wait(&tr->cond, &tr->lock);
		if (tr->stopping)
			break;
		jobs = tr->jobs;
		n = tr->njobs;
		tr->jobs = NULL;
		tr->njobs = 0;
		pthread_mutex_unlock(&tr->lock);
		cut_jobs(m, jobs, n, have_pool ? &pool : NULL);
		jobs_free(jobs, n);
		pthread_mutex_lock(&tr->lock);
	}
	pthread_mutex_unlock(&tr->lock);
	if (have_pool)
		oss_pool_fini(&pool);
	return NULL;
}

int mds_truncator_start(struct mds *m)
{
	struct mds_truncator *tr = &m->truncator;

	pthread_mutex_init(&tr->lock, NULL);
	pthread_cond_init(&tr->cond, NULL);
	tr->more = true; /* whatever a previous run left */
	tr->done = calloc(TRUNC_BATCH, sizeof(*tr->done));
	if (!tr->done)
		return -ENOMEM;
	return -pthread_create(&tr->thread, NULL, truncator_main, m);
}

void mds_truncator_stop(struct mds *m)
{
	struct mds_truncator *tr = &m->truncator;

	pthread_mutex_lock(&tr->lock);
	tr->stopping = true;
	pthread_cond_signal(&tr->cond);
	pthread_mutex_unlock(&tr->lock);
	pthread_join(tr->thread, NULL);
	jobs_free(tr->jobs, tr->njobs);
	while (tr->parked) {
		struct mds_parked *p = tr->parked;

		tr->parked = p->next;
		srv_req_drop(p->req);
		free(p->body);
		free(p);
	}
	free(tr->done);
	pthread_mutex_destroy(&tr->lock);
	pthread_cond_destroy(&tr->cond);
}

/* One truncation's punches: each object cut to what it holds of a file of `cut` bytes. An inode
 * gone meanwhile has nothing to cut (a job without items reports done). */
static int job_of(struct mds *m, struct mdt_txn *t, const struct mdt_trunc *tc, struct mds_trunc_job *job)
{
	const struct mdt_ost *table;
	struct loom_layout *l = NULL;
	struct stripe_geom g;
	uint32_t count, gen;
	int rc;

	memset(job, 0, sizeof(*job));
	job->ino = tc->ino;
	job->epoch = tc->epoch;
	rc = mdt_getlayout(t, tc->ino, &l);
	if (rc == -ENOENT || rc == -ENODATA)
		return 0;
	if (rc)
		return rc;
	job->items = calloc(l->nobjs ? l->nobjs : 1, sizeof(*job->items));
	if (!job->items) {
		free(l);
		return -ENOMEM;
	}
	table = mdt_ost_table(m->store, &count, &gen);
	g = stripe_geom_of(l);
	for (uint32_t k = 0; k < l->nobjs && g.size; k++) {
		struct trunc_item *it = &job->items[job->nitems];
		bool known = false;

		for (uint32_t i = 0; i < count; i++) {
			if (table[i].idx != l->objs[k].ost_idx)
				continue;
			snprintf(it->host, sizeof(it->host), "%s", table[i].host);
			it->port = table[i].port;
			known = true;
			break;
		}
		if (!known)
			continue; /* an OST removed (loom ost remove --force): nothing there to cut */
		it->io.ost_idx = l->objs[k].ost_idx;
		it->io.objid = l->objs[k].objid;
		it->io.length = layout_obj_size(l, k, tc->cut); /* every copy alike; parity as data object 0 */
		it->io.ino = tc->ino;
		it->io.stripe_idx = k;
		it->io.layout_gen = l->layout_gen;
		it->io.trunc_epoch = tc->epoch;
		job->nitems++;
	}
	free(l);
	return 0;
}

void mds_truncator_kick(struct mds *m, struct mdt_txn *t)
{
	struct mds_truncator *tr = &m->truncator;
	struct mdt_trunc list[TRUNC_BATCH];
	struct mds_trunc_job *jobs;
	size_t n = 0;
	uint32_t njobs = 0;

	if (tr->busy || !tr->more || clock_mono_ns() < tr->next_try_ns)
		return;
	if (mdt_trunc_list(t, list, TRUNC_BATCH, &n) != 0)
		return;
	if (n == 0) {
		/* Nothing yet: unless changes answered wait for their commit (a truncation queued
		 * by a close, committed behind), which this read would not see. */
		if (!m->commit.open && !atomic_load(&m->commit.pending))
			tr->more = false;
		return;
	}
	jobs = calloc(n, sizeof(*jobs));
	if (!jobs)
		return;
	for (size_t i = 0; i < n; i++)
		if (job_of(m, t, &list[i], &jobs[njobs]) == 0)
			njobs++;
	if (njobs == 0) {
		free(jobs);
		return;
	}
	tr->busy = true;
	pthread_mutex_lock(&tr->lock);
	tr->jobs = jobs;
	tr->njobs = njobs;
	pthread_cond_signal(&tr->cond);
	pthread_mutex_unlock(&tr->lock);
}

int mds_truncator_done(struct mds *m, struct mdt_txn *t, const struct mds_work *report)
{
	struct mds_truncator *tr = &m->truncator;
	uint32_t n = report->n;
	bool all_ok = true;
	int rc = 0;

	tr->busy = false;
	tr->more = true;
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		struct trunc_result r;

		memcpy(&r, report->data + (size_t)i * sizeof(r), sizeof(r));
		if (r.status) {
			all_ok = false;
			continue;
		}
		rc = mdt_trunc_done(t, r.ino, r.epoch);
		if (rc == 0 && tr->ndone < TRUNC_BATCH) {
			tr->done[tr->ndone].ino = r.ino;
			tr->done[tr->ndone].epoch = r.epoch;
			tr->ndone++;
		}
	}
	if (!all_ok || n == 0)
		tr->next_try_ns = clock_mono_ns() + TRUNC_BACKOFF_NS;
	return rc;
}

void mds_trunc_park(struct mds *m, struct srv_req *req, void *body, uint32_t len, uint64_t ino,
		    uint32_t epoch)
{
	struct mds_parked *p = malloc(sizeof(*p));

	if (!p) {
		/* No memory to hold it: answered now, as an OSS away would after the wait. */
		mds_reply(m, req, 0, body, len, 0, NULL);
		free(body);
		return;
	}
	p->req = req;
	p->body = body;
	p->len = len;
	p->ino = ino;
	p->epoch = epoch;
	p->deadline_ns = clock_mono_ns() + PARK_SECONDS * 1000000000ull;
	srv_req_park(req);
	p->next = m->truncator.parked;
	m->truncator.parked = p;
}

/* Sends (or with drop, frees) the parked replies keep() rejects. */
static void parked_sweep(struct mds *m, bool (*keep)(struct mds *, const struct mds_parked *, void *),
			 void *arg, bool drop)
{
	struct mds_parked **pp = &m->truncator.parked;

	while (*pp) {
		struct mds_parked *p = *pp;

		if (keep(m, p, arg)) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		if (drop)
			srv_req_drop(p->req);
		else
			mds_reply(m, p->req, 0, p->body, p->len, 0, NULL);
		free(p->body);
		free(p);
	}
}

static bool not_cut_yet(struct mds *m, const struct mds_parked *p, void *arg)
{
	struct mds_truncator *tr = &m->truncator;

	(void)arg;
	for (uint32_t i = 0; i < tr->ndone; i++)
		if (tr->done[i].ino == p->ino && tr->done[i].epoch >= p->epoch)
			return false;
	return true;
}

void mds_trunc_release(struct mds *m)
{
	if (m->truncator.ndone == 0)
		return;
	parked_sweep(m, not_cut_yet, NULL, false);
	m->truncator.ndone = 0;
}

static bool before_deadline(struct mds *m, const struct mds_parked *p, void *arg)
{
	(void)m;
	return p->deadline_ns > *(const uint64_t *)arg;
}

void mds_trunc_expire(struct mds *m, uint64_t now_ns)
{
	parked_sweep(m, before_deadline, &now_ns, false);
}

static bool other_conn(struct mds *m, const struct mds_parked *p, void *arg)
{
	(void)m;
	return p->req->conn_id != *(const uint64_t *)arg;
}

void mds_trunc_drop_conn(struct mds *m, uint64_t conn_id)
{
	parked_sweep(m, other_conn, &conn_id, true);
}
