/*
 * Destroys the OST objects of released files, so that no object is ever leaked.
 *
 * The destroy queue lives in the MDT, written in the same transaction that released the inode,
 * so a crash at any point leaves the work recorded. The metadata thread hands the destroyer a
 * list from the head of the queue; the destroyer sends OST_DESTROY to every OSS at once and
 * reports the objects that are gone back through the request queue; the metadata thread then
 * deletes them from the queue. An OST that cannot be reached keeps its entries for a later try.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/mds.h"
#include "net/rpc.h"

#define DESTROY_BATCH   1024 /* objects in one pass, over every OST (LW_DESTROY_MANY_MAX each request) */
/* After a pass that took all there was, the next waits this long, so that the objects of files
 * released meanwhile go together: one request per OST for many, not one for each as unlinks
 * trickle in (an unlink loop released one file every 70-90 us here). */
#define DESTROY_GATHER_NS (20ull * 1000000ull)
#define DESTROY_BACKOFF_NS (5ull * 1000000000ull)

/* One request for many objects of one OST (OST_DESTROY_MANY), or for one (OST_DESTROY: an OSS
 * that answered the other -EOPNOTSUPP). */
struct destroy_req {
	struct rpc_call call;
	struct lw_ost_io body;
	struct iovec bulk;
	uint64_t *ids;
	uint32_t first, n; /* items[first..] of this OST, in `order` */
};

/* Sends every request of reqs (n) on its OSS and waits for all. */
static void send_all(struct mds *m, struct oss_pool *pool, const struct mds_destroy_item *items,
		     const uint32_t *order, struct destroy_req *reqs, uint32_t n)
{
	struct rpc_wait w;

	rpc_wait_init(&w);
	for (uint32_t i = 0; i < n; i++) {
		const struct mds_destroy_item *it = &items[order[reqs[i].first]];
		struct rpc_conn *c = oss_pool_conn(m, pool, it->host, it->port);

		if (!c) {
			reqs[i].call.status = -EHOSTUNREACH;
			continue;
		}
		rpc_submit(c, &reqs[i].call, &w);
	}
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
}

/* The items in an order that puts each OST's together (by OSS address, then OST), so that each
 * OST's objects go in one request, LW_DESTROY_MANY_MAX at most. */
static int by_ost(const void *a, const void *b, void *arg)
{
	const struct mds_destroy_item *items = arg;
	const struct mds_destroy_item *x = &items[*(const uint32_t *)a], *y = &items[*(const uint32_t *)b];
	int c = strcmp(x->host, y->host);

	if (c)
		return c;
	if (x->port != y->port)
		return x->port < y->port ? -1 : 1;
	if (x->obj.ost_idx != y->obj.ost_idx)
		return x->obj.ost_idx < y->obj.ost_idx ? -1 : 1;
	return 0;
}

static bool same_ost(const struct mds_destroy_item *x, const struct mds_destroy_item *y)
{
	return x->port == y->port && x->obj.ost_idx == y->obj.ost_idx && strcmp(x->host, y->host) == 0;
}

/* pool: the destroyer's connections to the OSSs (NULL without memory: nothing is done). Fills
 * done with the objects destroyed; false if some were not. */
static bool destroy_items(struct mds *m, const struct mds_destroy_item *items, uint32_t n,
			  struct oss_pool *pool, struct loom_ostobj *done, uint32_t *ndone)
{
	uint32_t *order = calloc(n ? n : 1, sizeof(*order));
	uint64_t *ids = calloc(n ? n : 1, sizeof(*ids));
	struct destroy_req *reqs = calloc(n ? n : 1, sizeof(*reqs));
	struct destroy_req *one = calloc(n ? n : 1, sizeof(*one));
	uint32_t nreq = 0, none = 0;
	bool all_ok = true;

	*ndone = 0;
	if (!pool || !order || !ids || !reqs || !one) {
		free(order);
		free(ids);
		free(reqs);
		free(one);
		return false; /* tried again later */
	}
	for (uint32_t i = 0; i < n; i++)
		order[i] = i;
	qsort_r(order, n, sizeof(*order), by_ost, (void *)items);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = items[order[i]].obj.objid;
	for (uint32_t i = 0; i < n;) {
		struct destroy_req *r = &reqs[nreq++];
		uint32_t k = 1;

		while (i + k < n && k < LW_DESTROY_MANY_MAX && same_ost(&items[order[i]], &items[order[i + k]]))
			k++;
		r->first = i;
		r->n = k;
		r->body.ost_idx = items[order[i]].obj.ost_idx;
		r->body.length = (uint64_t)k * sizeof(uint64_t);
		r->bulk.iov_base = &ids[i];
		r->bulk.iov_len = r->body.length;
		rpc_call_init(&r->call, LW_OP_OST_DESTROY_MANY, &r->body, sizeof(r->body));
		r->call.bulk = &r->bulk;
		r->call.bulk_cnt = 1;
		r->call.bulk_len = (uint32_t)r->body.length;
		i += k;
	}
	send_all(m, pool, items, order, reqs, nreq);
	for (uint32_t i = 0; i < nreq; i++) {
		struct destroy_req *r = &reqs[i];

		if (r->call.status == 0) {
			for (uint32_t k = 0; k < r->n; k++)
				done[(*ndone)++] = items[order[r->first + k]].obj;
		} else if (r->call.status == -EOPNOTSUPP) {
			/* An OSS of before OST_DESTROY_MANY: one request per object. */
			for (uint32_t k = 0; k < r->n; k++) {
				struct destroy_req *o = &one[none++];

				o->first = r->first + k;
				o->n = 1;
				o->body.ost_idx = r->body.ost_idx;
				o->body.objid = ids[o->first];
				rpc_call_init(&o->call, LW_OP_OST_DESTROY, &o->body, sizeof(o->body));
			}
		} else {
			all_ok = false;
		}
		rpc_call_release(&r->call);
	}
	send_all(m, pool, items, order, one, none);
	for (uint32_t i = 0; i < none; i++) {
		if (one[i].call.status == 0)
			done[(*ndone)++] = items[order[one[i].first]].obj;
		else
			all_ok = false;
		rpc_call_release(&one[i].call);
	}
	free(order);
	free(ids);
	free(reqs);
	free(one);
	return all_ok;
}

static void destroy_list(struct mds *m, struct mds_destroy_item *items, uint32_t n,
			 struct oss_pool *pool)
{
	struct loom_ostobj *done = calloc(n ? n : 1, sizeof(*done));
	struct mds_work *report;
	uint32_t ndone = 0;
	bool all_ok;

	all_ok = done && destroy_items(m, items, n, pool, done, &ndone);
	if (!all_ok)
		log_warn("destroyer: %u of %u objects could not be destroyed yet; will retry", n - ndone, n);

	/* Report back with the destroyed objects. Without memory for it the metadata thread would
	 * wait for this report forever: keep trying. */
	while (!(report = mds_work_new(MDS_WORK_DESTROYED, ndone, sizeof(*done)))) {
		log_err("destroyer: out of memory reporting back; retrying");
		sleep(1);
	}
	report->all_done = all_ok;
	if (ndone)
		memcpy(report->data, done, (size_t)ndone * sizeof(*done));
	reqq_push(&m->queue, &report->qitem);
	free(done);
}

static void *destroyer_main(void *arg)
{
	struct mds *m = arg;
	struct mds_destroyer *d = &m->destroyer;
	struct oss_pool pool;
	bool have_pool = oss_pool_init(&pool, 256) == 0; /* OSSs it keeps connections to */

	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct mds_destroy_item *items;
		uint32_t n;

		while (!d->items && !d->stopping)
			pthread_cond_wait(&d->cond, &d->lock);
		if (d->stopping)
			break;
		items = d->items;
		n = d->nitems;
		d->items = NULL;
		pthread_mutex_unlock(&d->lock);
		/* Without memory for the connections nothing is done, and tried again. */
		destroy_list(m, items, have_pool ? n : 0, have_pool ? &pool : NULL);
		free(items);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	if (have_pool)
		oss_pool_fini(&pool);
	return NULL;
}

int mds_destroyer_start(struct mds *m)
{
	struct mds_destroyer *d = &m->destroyer;

	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->more = true; /* whatever a previous run left */
	return -pthread_create(&d->thread, NULL, destroyer_main, m);
}

void mds_destroyer_stop(struct mds *m)
{
	struct mds_destroyer *d = &m->destroyer;

	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	free(d->items);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->cond);
}

void mds_destroyer_kick(struct mds *m, struct mdt_txn *t)
{
	struct mds_destroyer *d = &m->destroyer;
	struct loom_ostobj objs[DESTROY_BATCH];
	struct mds_destroy_item *items;
	const struct mdt_ost *table;
	uint32_t count, gen, per_ost;
	size_t got = 0;

	if (d->busy || !d->more || clock_mono_ns() < d->next_try_ns)
		return;
	table = mdt_ost_table(m->store, &count, &gen);
	if (count == 0) {
		d->more = false;
		return;
	}
	/* A share of the batch for each reachable OST in turn: an OST that is down holds up no
	 * other (its objects wait in the queue until it registers again). */
	per_ost = DESTROY_BATCH / count ? DESTROY_BATCH / count : 1;
	d->gather = true;
	for (uint32_t k = 0; k < count && got < DESTROY_BATCH; k++) {
		const struct mdt_ost *o = &table[(d->next_ost + k) % count];
		size_t n = 0;

		if (o->state & LW_TGT_INACTIVE)
			continue;
		if (mdt_destroy_list_ost(t, o->idx, objs + got, MIN(per_ost, DESTROY_BATCH - got), &n) < 0)
			continue;
		if (n == MIN(per_ost, DESTROY_BATCH - got))
			d->gather = false; /* an OST's share full: more waits */
		got += n;
	}
	d->next_ost = (d->next_ost + 1) % count;
	if (got == 0) {
		d->more = false;
		return;
	}
	items = calloc(got, sizeof(*items));
	if (!items)
		return;
	for (size_t i = 0; i < got; i++) {
		for (uint32_t k = 0; k < count; k++) {
			if (table[k].idx != objs[i].ost_idx)
				continue;
			items[i].obj = objs[i];
			snprintf(items[i].host, sizeof(items[i].host), "%s", table[k].host);
			items[i].port = table[k].port;
			break;
		}
	}
	d->busy = true;
	pthread_mutex_lock(&d->lock);
	d->items = items;
	d->nitems = (uint32_t)got;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

int mds_destroyer_done(struct mds *m, struct mdt_txn *t, const struct mds_work *report)
{
	const struct loom_ostobj *objs = (const struct loom_ostobj *)report->data;
	struct mds_destroyer *d = &m->destroyer;
	int rc = 0;

	for (uint32_t i = 0; i < report->n && rc == 0; i++)
		rc = mdt_destroy_done(t, objs[i].ost_idx, objs[i].objid);
	d->busy = false;
	d->more = true;
	if (!report->all_done)
		d->next_try_ns = clock_mono_ns() + DESTROY_BACKOFF_NS;
	else if (d->gather)
		d->next_try_ns = clock_mono_ns() + DESTROY_GATHER_NS;
	return rc;
}
