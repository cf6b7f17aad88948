/*
 * The resync of mirrored files (architecture.md, "Mirrors"): a stale copy of a stripe is copied
 * again from an in-sync copy, by the MDS, in the background, at a bounded rate, as soon as both
 * OSTs are there: after an OSS comes back, a copy found bad, a writer that went without closing.
 *
 * The MDT's `mirrors` table lists the files to look after. The metadata thread looks at a few of
 * them on each kick: a file with a writer waits; a write-pending file whose writers went without
 * closing (after the recovery window, when they can no longer reopen it) has every stripe's copies
 * but the first made stale (tidied in a write transaction, through the request queue); a file
 * with stale copies whose OSTs answer becomes the resyncer's job. The resyncer copies each stale
 * object from an in-sync copy of its stripe: the old object destroyed and made anew, empty, in
 * the file's truncation epoch, then the source's data extents (holes stay holes), then a sync.
 * It reports through the request queue; the metadata thread then clears the marks, in the file's
 * layout of the generation the copy began from, only if no writer opened the file meanwhile
 * (a writer writes only in-sync copies: what it wrote the copy may have missed).
 *
 * An erasure-coded file's stale objects are made again from stripe_count in-sync objects of it:
 * each row's units read, the missing ones decoded (ISA-L, common/ec.h) and written, row batch by
 * row batch up to the file's size (rows of zeros left as holes), then synced. The marks are
 * cleared as for a copy.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ec.h"
#include "common/log.h"
#include "common/stripe.h"
#include "common/util.h"
#include "mds/mds.h"

#define RESYNC_POOL       64
#define RESYNC_SCAN       64     /* files looked at per kick */
#define RESYNC_BACKOFF_NS (2ull * 1000000000ull)
#define RESYNC_IDLE_NS    (5ull * 1000000000ull) /* an empty table is looked at again after */

struct resync_end {
	char host[64];
	uint16_t port;
	uint32_t ost;
	uint64_t objid;
};

struct resync_item {
	struct resync_end src, dst;
	uint32_t dst_index;        /* the stale object's place in the layout: its tag */
};

struct mds_resync_job {
	uint64_t ino;
	uint32_t gen;              /* the layout generation the copy is made from */
	uint32_t epoch;            /* the file's truncation epoch */
	uint32_t nitems;
	struct resync_item *items;
	/* An erasure-coded file's rebuild: items' dst are made from the k objects srcs[] (their
	 * indexes in src_index[]); the file is size bytes long. */
	struct loom_layout *ec;
	uint64_t size;
	struct resync_end *srcs;
	uint32_t *src_index;
};

/* One object's outcome, as the resyncer reports it. */
struct resync_done {
	uint64_t ino;
	uint64_t bytes;
	uint32_t gen;
	uint32_t index;
	int32_t status;
	uint32_t epoch;            /* the truncation epoch it was made in */
};

/* ---- the resyncer's thread ---- */

static int call(struct rpc_conn *c, uint16_t op, struct lw_ost_io *io, struct iovec *bulk, int nbulk,
		bool out, struct lw_ost_io_rep *rep, uint32_t *got)
{
	struct rpc_call rc_;
	int rc;

	rpc_call_init(&rc_, op, io, sizeof(*io));
	if (out) {
		rc_.bulk = bulk;
		rc_.bulk_cnt = nbulk;
		rc_.bulk_len = (uint32_t)io->length;
	} else if (bulk) {
		rc_.rbulk = bulk;
		rc_.rbulk_cnt = nbulk;
	}
	rc = rpc_call_sync(c, &rc_);
	if (rc == 0 && rc_.rbody_len != sizeof(*rep))
		rc = -EPROTO;
	if (rc == 0)
		memcpy(rep, rc_.rbody, sizeof(*rep));
	if (got)
		*got = rc_.rbulk_len;
	rpc_call_release(&rc_);
	return rc;
}

static void io_of(const struct resync_end *e, const struct mds_resync_job *job, struct lw_ost_io *io)
{
	memset(io, 0, sizeof(*io));
	io->ost_idx = e->ost;
	io->objid = e->objid;
	io->ino = job->ino;
}

/* A job's pace: the bytes it moved within resync_rate. The rate is read at every step, so that
 * `set_param mdt.*.resync_rate` takes effect at once; a change starts a new window (what was
 * moved before was paced at the old rate). */
struct resync_pacer {
	uint32_t rate_mib;
	uint64_t t0_ns;
	uint64_t bytes; /* since t0_ns */
};

/* Accounts n more bytes and waits until the rate allows them (0: no limit). */
static void pace(struct mds *m, struct resync_pacer *p, uint64_t n)
{
	uint32_t rate_mib = m->resync.rate_mib;
	uint64_t due, now = clock_mono_ns();

	if (rate_mib != p->rate_mib || !p->t0_ns) {
		p->rate_mib = rate_mib;
		p->t0_ns = now;
		p->bytes = 0;
	}
	p->bytes += n;
	if (!rate_mib)
		return;
	due = p->t0_ns + p->bytes * 1000000000ull / ((uint64_t)rate_mib << 20);
	if (due > now)
		sleep_ms((unsigned)((due - now) / 1000000ull) + 1);
}

static int copy_object(struct mds *m, struct oss_pool *pool, const struct mds_resync_job *job,
		       const struct resync_item *it, uint8_t *buf, struct resync_pacer *pacer, uint64_t *bytes)
{
	struct rpc_conn *src = oss_pool_conn(m, pool, it->src.host, it->src.port);
	struct rpc_conn *dst = oss_pool_conn(m, pool, it->dst.host, it->dst.port);
	struct lw_ost_io io;
	struct lw_ost_io_rep rep;
	uint64_t off = 0, size;
	int rc;

	if (!src || !dst)
		return -EHOSTUNREACH;
	io_of(&it->src, job, &io);
	rc = call(src, LW_OP_OST_GETATTR, &io, NULL, 0, false, &rep, NULL);
	if (rc == -ENOENT)
		rep.obj_size = 0, rc = 0; /* never written: the copy is empty too */
	if (rc)
		return rc;
	size = rep.obj_size;
	/* The stale object goes, whatever it holds (bytes the source does not, a bad block, a lost
	 * object's mark), and is made anew, empty, in the file's epoch. */
	io_of(&it->dst, job, &io);
	rc = call(dst, LW_OP_OST_DESTROY, &io, NULL, 0, false, &rep, NULL);
	if (rc && rc != -ENOENT)
		return rc;
	io_of(&it->dst, job, &io);
	io.stripe_idx = it->dst_index;
	io.trunc_epoch = job->epoch;
	io.flags = LW_PUNCH_ANEW;
	rc = call(dst, LW_OP_OST_PUNCH, &io, NULL, 0, false, &rep, NULL);
	while (rc == 0 && off < size) {
		uint64_t data, hole;

		io_of(&it->src, job, &io);
		io.flags = LW_SEEK_DATA;
		io.offset = off;
		rc = call(src, LW_OP_OST_SEEK, &io, NULL, 0, false, &rep, NULL);
		if (rc == -ENXIO) {
			rc = 0;
			break; /* no data from here on */
		}
		if (rc)
			break;
		data = rep.length;
		io.flags = LW_SEEK_HOLE;
		io.offset = data;
		rc = call(src, LW_OP_OST_SEEK, &io, NULL, 0, false, &rep, NULL);
		if (rc)
			break;
		hole = MIN(MAX(rep.length, data), size);
		for (off = data; rc == 0 && off < hole;) {
			uint32_t n = (uint32_t)MIN(hole - off, (uint64_t)LW_RPC_BULK), got = 0;
			struct iovec iov = { buf, n };

			io_of(&it->src, job, &io);
			io.offset = off;
			io.length = n;
			rc = call(src, LW_OP_OST_READ, &io, &iov, 1, false, &rep, &got);
			if (rc)
				break;
			if (got < n)
				memset(buf + got, 0, n - got);
			io_of(&it->dst, job, &io);
			io.offset = off;
			io.length = n;
			io.stripe_idx = it->dst_index;
			io.trunc_epoch = job->epoch;
			rc = call(dst, LW_OP_OST_WRITE, &io, &iov, 1, true, &rep, NULL);
			if (rc == 0 && rep.length != n)
				rc = -EIO;
			off += n;
			*bytes += n;
			pace(m, pacer, n);
		}
		if (hole <= data)
			break;
	}
	if (rc == 0) {
		io_of(&it->dst, job, &io);
		rc = call(dst, LW_OP_OST_SYNC, &io, NULL, 0, false, &rep, NULL);
	}
	return rc;
}

/* Reads object range [at, at + len) of e into buf, zeros past its end. */
static int read_range(struct rpc_conn *c, const struct resync_end *e, const struct mds_resync_job *job,
		      uint8_t *buf, uint64_t len, uint64_t at)
{
	for (uint64_t done = 0; done < len;) {
		uint32_t n = (uint32_t)MIN(len - done, (uint64_t)LW_RPC_BULK), got = 0;
		struct iovec iov = { buf + done, n };
		struct lw_ost_io_rep rep;
		struct lw_ost_io io;
		int rc;

		io_of(e, job, &io);
		io.offset = at + done;
		io.length = n;
		rc = call(c, LW_OP_OST_READ, &io, &iov, 1, false, &rep, &got);
		if (rc == -ENOENT)
			rc = 0, got = 0; /* never written: zeros */
		if (rc)
			return rc;
		if (got < n)
			memset(buf + done + got, 0, n - got); /* a hole, or the object's end */
		done += n;
	}
	return 0;
}

static bool all_zero(const uint8_t *b, uint64_t n)
{
	return n == 0 || (b[0] == 0 && memcmp(b, b + 1, n - 1) == 0);
}

/* An erasure-coded file's stale objects made again: each made anew, then every row batch's
 * missing units decoded from the k sources and written (up to the object's size for the file,
 * rows of zeros left as holes), then synced. status[i] gets item i's outcome. */
static void rebuild_ec(struct mds *m, struct oss_pool *pool, const struct mds_resync_job *job,
		       struct resync_pacer *pacer, uint64_t *bytes, int32_t *status)
{
	const struct loom_layout *l = job->ec;
	uint32_t k = layout_per_copy(l), nd = job->nitems;
	uint64_t unit = l->stripe_size, batch = MAX(1, (4ull << 20) / unit) * unit;
	uint64_t end = layout_obj_size(l, 0, job->size); /* the longest object's bytes */
	uint8_t *src = malloc(k * batch), *dst = malloc(nd * batch);
	uint8_t **sp = calloc(k, sizeof(uint8_t *)), **dp = calloc(nd ? nd : 1, sizeof(uint8_t *));
	uint32_t *want = calloc(nd ? nd : 1, sizeof(uint32_t));
	struct ec_codec *c = NULL;
	int rc = src && dst && sp && dp && want ? ec_codec_new(k, l->ec_parity, &c) : -ENOMEM;

	for (uint32_t i = 0; i < nd; i++)
		status[i] = rc;
	for (uint32_t i = 0; rc == 0 && i < nd; i++) {
		const struct resync_item *it = &job->items[i];
		struct rpc_conn *dc = oss_pool_conn(m, pool, it->dst.host, it->dst.port);
		struct lw_ost_io_rep rep;
		struct lw_ost_io io;

		want[i] = it->dst_index;
		dp[i] = dst + i * batch;
		if (!dc) {
			status[i] = -EHOSTUNREACH;
			continue;
		}
		io_of(&it->dst, job, &io);
		status[i] = call(dc, LW_OP_OST_DESTROY, &io, NULL, 0, false, &rep, NULL);
		if (status[i] == -ENOENT)
			status[i] = 0;
		io_of(&it->dst, job, &io);
		io.stripe_idx = it->dst_index;
		io.trunc_epoch = job->epoch;
		io.flags = LW_PUNCH_ANEW;
		if (status[i] == 0)
			status[i] = call(dc, LW_OP_OST_PUNCH, &io, NULL, 0, false, &rep, NULL);
	}
	for (uint64_t at = 0; rc == 0 && at < end; at += batch) {
		uint64_t span = MIN(batch, end - at), before = *bytes;

		for (uint32_t s = 0; rc == 0 && s < k; s++) {
			struct rpc_conn *sc = oss_pool_conn(m, pool, job->srcs[s].host, job->srcs[s].port);

			sp[s] = src + s * batch;
			rc = sc ? read_range(sc, &job->srcs[s], job, sp[s], span, at) : -EHOSTUNREACH;
		}
		if (rc == 0)
			rc = ec_decode(c, span, job->src_index, sp, want, nd, dp);
		for (uint32_t i = 0; i < nd; i++) {
			const struct resync_item *it = &job->items[i];
			uint64_t size = layout_obj_size(l, it->dst_index, job->size);
			uint64_t n = at < size ? MIN(span, size - at) : 0;
			struct rpc_conn *dc;

			if (rc) {
				status[i] = status[i] ? status[i] : rc;
				continue;
			}
			if (status[i] || all_zero(dp[i], n))
				continue; /* a hole stays one */
			dc = oss_pool_conn(m, pool, it->dst.host, it->dst.port);
			for (uint64_t done = 0; dc && status[i] == 0 && done < n;) {
				uint32_t len = (uint32_t)MIN(n - done, (uint64_t)LW_RPC_BULK);
				struct iovec iov = { dp[i] + done, len };
				struct lw_ost_io_rep rep;
				struct lw_ost_io io;

				io_of(&it->dst, job, &io);
				io.offset = at + done;
				io.length = len;
				io.stripe_idx = it->dst_index;
				io.trunc_epoch = job->epoch;
				status[i] = call(dc, LW_OP_OST_WRITE, &io, &iov, 1, true, &rep, NULL);
				if (status[i] == 0 && rep.length != len)
					status[i] = -EIO;
				done += len;
			}
			if (!dc)
				status[i] = -EHOSTUNREACH;
			*bytes += n;
		}
		*bytes += k * span;
		pace(m, pacer, *bytes - before);
	}
	for (uint32_t i = 0; i < nd; i++) {
		const struct resync_item *it = &job->items[i];
		struct rpc_conn *dc = oss_pool_conn(m, pool, it->dst.host, it->dst.port);
		struct lw_ost_io_rep rep;
		struct lw_ost_io io;

		io_of(&it->dst, job, &io);
		if (status[i] == 0)
			status[i] = dc ? call(dc, LW_OP_OST_SYNC, &io, NULL, 0, false, &rep, NULL) : -EHOSTUNREACH;
	}
	ec_codec_free(c);
	free(src);
	free(dst);
	free(sp);
	free(dp);
	free(want);
}

static void run_job(struct mds *m, struct mds_resync_job *job, struct oss_pool *pool, uint8_t *buf)
{
	struct mds_work *report;
	struct resync_pacer pacer = { 0 };
	int32_t *ec_status = job->ec ? calloc(job->nitems, sizeof(int32_t)) : NULL;
	uint64_t ec_bytes = 0;

	while (!(report = mds_work_new(MDS_WORK_RESYNCED, job->nitems, sizeof(struct resync_done))))
		sleep_ms(100);
	if (ec_status && pool)
		rebuild_ec(m, pool, job, &pacer, &ec_bytes, ec_status);
	for (uint32_t i = 0; i < job->nitems; i++) {
		struct resync_done d = { .ino = job->ino, .gen = job->gen, .index = job->items[i].dst_index,
					 .epoch = job->epoch };

		if (job->ec)
			d.status = ec_status && pool ? ec_status[i] : -ENOMEM, d.bytes = i ? 0 : ec_bytes;
		else
			d.status = buf ? copy_object(m, pool, job, &job->items[i], buf, &pacer, &d.bytes) : -ENOMEM;
		if (d.status)
			log_warn("resync: inode %llu: OST%04x object %#llx from OST%04x object %#llx: %s; "
				 "will retry", (unsigned long long)job->ino, job->items[i].dst.ost,
				 (unsigned long long)job->items[i].dst.objid, job->items[i].src.ost,
				 (unsigned long long)job->items[i].src.objid, strerror(-d.status));
		memcpy(report->data + (size_t)i * sizeof(d), &d, sizeof(d));
	}
	free(ec_status);
	reqq_push(&m->queue, &report->qitem);
}

static void job_free(struct mds_resync_job *job)
{
	if (job) {
		free(job->items);
		free(job->ec);
		free(job->srcs);
		free(job->src_index);
	}
	free(job);
}

static void *resync_main(void *arg)
{
	struct mds *m = arg;
	struct mds_resync *rs = &m->resync;
	struct oss_pool pool;
	bool have_pool = oss_pool_init(&pool, RESYNC_POOL) == 0;
	uint8_t *buf = malloc(LW_RPC_BULK);

	pthread_mutex_lock(&rs->lock);
	for (;;) {
		struct mds_resync_job *job;

		while (!rs->job && !rs->stopping)
			pthread_cond_wait(&rs->cond, &rs->lock);
		if (rs->stopping)
			break;
		job = rs->job;
		rs->job = NULL;
		pthread_mutex_unlock(&rs->lock);
		run_job(m, job, have_pool ? &pool : NULL, have_pool ? buf : NULL);
		job_free(job);
		pthread_mutex_lock(&rs->lock);
	}
	pthread_mutex_unlock(&rs->lock);
	if (have_pool)
		oss_pool_fini(&pool);
	free(buf);
	return NULL;
}

int mds_resync_start(struct mds *m)
{
	struct mds_resync *rs = &m->resync;

	pthread_mutex_init(&rs->lock, NULL);
	pthread_cond_init(&rs->cond, NULL);
	rs->more = true; /* whatever a previous run left */
	return -pthread_create(&rs->thread, NULL, resync_main, m);
}

void mds_resync_stop(struct mds *m)
{
	struct mds_resync *rs = &m->resync;

	pthread_mutex_lock(&rs->lock);
	rs->stopping = true;
	pthread_cond_signal(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
	pthread_join(rs->thread, NULL);
	job_free(rs->job);
	pthread_mutex_destroy(&rs->lock);
	pthread_cond_destroy(&rs->cond);
}

/* ---- the metadata thread's side ---- */

/* Where OST idx answers, if it is there now. */
static bool ost_end(const struct mdt_ost *table, uint32_t count, uint32_t idx, uint64_t objid,
		    struct resync_end *e)
{
	for (uint32_t i = 0; i < count; i++) {
		if (table[i].idx != idx)
			continue;
		if (table[i].state & (LW_TGT_INACTIVE | LW_TGT_READONLY))
			return false;
		snprintf(e->host, sizeof(e->host), "%s", table[i].host);
		e->port = table[i].port;
		e->ost = idx;
		e->objid = objid;
		return true;
	}
	return false;
}

/* An erasure-coded file's rebuild: its stale objects whose OSTs answer, from stripe_count
 * in-sync objects whose OSTs answer (none if there are not that many), the first from object
 * `rotate` on (after failures: a source that keeps failing, a bad block, is passed over). */
static int ec_job_of(const struct mdt_ost *table, uint32_t count, const struct loom_layout *l,
		     uint64_t size, uint32_t rotate, struct mds_resync_job *job, struct mds_resync_job **out)
{
	uint32_t k = layout_per_copy(l), ns = 0;

	job->size = size;
	job->srcs = calloc(k, sizeof(*job->srcs));
	job->src_index = calloc(k, sizeof(uint32_t));
	job->ec = malloc(sizeof(*l) + l->nobjs * sizeof(l->objs[0]));
	if (!job->srcs || !job->src_index || !job->ec) {
		job_free(job);
		return -ENOMEM;
	}
	memcpy(job->ec, l, sizeof(*l) + l->nobjs * sizeof(l->objs[0]));
	for (uint32_t i = 0; i < l->nobjs; i++) {
		uint32_t o = (i + rotate) % l->nobjs;
		const struct loom_ostobj *ob = &l->objs[o];

		if (!(ob->flags & LOOM_OBJ_STALE)) {
			if (ns < k && ost_end(table, count, ob->ost_idx, ob->objid, &job->srcs[ns]))
				job->src_index[ns++] = o;
		} else if (ost_end(table, count, ob->ost_idx, ob->objid, &job->items[job->nitems].dst)) {
			job->items[job->nitems++].dst_index = o;
		}
	}
	if (ns < k || job->nitems == 0)
		job_free(job);
	else
		*out = job;
	return 0;
}

/* The copies to make now for ino: each stale object whose OST answers, from an in-sync copy of
 * its stripe whose OST answers. *job NULL when there is none. */
static int job_of(struct mds *m, struct mdt_txn *t, uint64_t ino, const struct loom_layout *l,
		  struct mds_resync_job **out)
{
	const struct mdt_ost *table;
	uint32_t count, tgen, per = layout_per_copy(l), copies = layout_copies(l);
	struct mds_resync_job *job;
	struct lw_attr in;
	int rc;

	*out = NULL;
	rc = mdt_getattr(t, ino, &in);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (mdt_trunc_pending(t, ino, in.trunc_epoch))
		return 0; /* its objects are being cut: after that */
	job = calloc(1, sizeof(*job));
	if (!job || !(job->items = calloc(l->nobjs, sizeof(*job->items)))) {
		free(job);
		return -ENOMEM;
	}
	job->ino = ino;
	job->gen = l->layout_gen;
	job->epoch = in.trunc_epoch;
	table = mdt_ost_table(m->store, &count, &tgen);
	if (l->ec_parity)
		return ec_job_of(table, count, l, in.size, m->resync.rotate, job, out);
	for (uint32_t o = 0; o < l->nobjs; o++) {
		struct resync_item *it = &job->items[job->nitems];
		uint32_t k = o % per;
		bool src = false;

		if (!(l->objs[o].flags & LOOM_OBJ_STALE) ||
		    !ost_end(table, count, l->objs[o].ost_idx, l->objs[o].objid, &it->dst))
			continue;
		for (uint32_t c = 0; c < copies && !src; c++) {
			const struct loom_ostobj *s = &l->objs[c * per + k];

			src = !(s->flags & LOOM_OBJ_STALE) && ost_end(table, count, s->ost_idx, s->objid, &it->src);
		}
		if (src) {
			it->dst_index = o;
			job->nitems++;
		}
	}
	if (job->nitems == 0)
		job_free(job);
	else
		*out = job;
	return 0;
}

void mds_resync_kick(struct mds *m, struct mdt_txn *t)
{
	struct mds_resync *rs = &m->resync;
	uint64_t inos[RESYNC_SCAN], tidy[RESYNC_SCAN];
	uint32_t ntidy = 0;
	size_t n = 0;

	/* Also without news (an OSS back, a session ended): every RESYNC_IDLE_NS at least. Never
	 * while changes are answered and not committed (commit behind): read_txn would not see
	 * them, and a resync just done would look still to do, its copy destroyed and made again
	 * while the layout says it is in sync. */
	if (rs->busy || clock_mono_ns() < rs->next_try_ns || m->commit.open || atomic_load(&m->commit.pending))
		return;
	if (mdt_mirror_list(t, rs->cursor, inos, RESYNC_SCAN, &n) != 0)
		return;
	if (n < RESYNC_SCAN)
		rs->cursor = 0; /* the end: from the start next time */
	else
		rs->cursor = inos[n - 1];
	if (n == 0) {
		rs->more = false;
		rs->next_try_ns = clock_mono_ns() + RESYNC_IDLE_NS;
		return;
	}
	for (size_t i = 0; i < n && !rs->busy; i++) {
		struct mds_resync_job *job = NULL;
		struct loom_layout *l = NULL;
		int rc;

		if (mds_ino_has_writer(m, inos[i]))
			continue; /* its writers' close comes first */
		rc = mdt_getlayout(t, inos[i], &l);
		if (rc == -ENODATA || rc == -ENOENT) {
			tidy[ntidy++] = inos[i]; /* gone: out of the table */
			continue;
		}
		if (rc)
			continue;
		if (!layout_redundant(l)) {
			tidy[ntidy++] = inos[i];
		} else if (l->flags & LOOM_LAYOUT_WRITE_PENDING) {
			/* Its writers went without closing. During the recovery window after a start
			 * they may still open it again; after it, its copies are put right. */
			if (m->orphans_released)
				tidy[ntidy++] = inos[i];
		} else if (job_of(m, t, inos[i], l, &job) == 0 && job) {
			rs->busy = true;
			rs->ino = inos[i];
			rs->dirty = false;
			pthread_mutex_lock(&rs->lock);
			rs->job = job;
			pthread_cond_signal(&rs->cond);
			pthread_mutex_unlock(&rs->lock);
		} else {
			bool stale = false;

			for (uint32_t o = 0; o < l->nobjs; o++)
				stale |= l->objs[o].flags & LOOM_OBJ_STALE;
			if (!stale)
				tidy[ntidy++] = inos[i]; /* nothing to do: out of the table */
		}
		free(l);
	}
	if (ntidy) {
		struct mds_work *w = mds_work_new(MDS_WORK_MIRROR_TIDY, ntidy, sizeof(uint64_t));

		if (w) {
			memcpy(w->data, tidy, ntidy * sizeof(uint64_t));
			reqq_push(&m->queue, &w->qitem);
		}
	}
	if (!rs->busy && rs->cursor == 0)
		rs->next_try_ns = clock_mono_ns() + RESYNC_BACKOFF_NS; /* a full pass found no work */
}

int mds_resync_tidy(struct mds *m, struct mdt_txn *t, const struct mds_work *w)
{
	int rc = 0;

	for (uint32_t i = 0; i < w->n && rc == 0; i++) {
		uint64_t ino;
		struct loom_layout *l = NULL;
		uint32_t marked = 0;

		memcpy(&ino, w->data + (size_t)i * sizeof(ino), sizeof(ino));
		if (mds_ino_has_writer(m, ino))
			continue;
		if (m->orphans_released) {
			rc = mdt_mirror_abandoned(t, ino, &marked);
			if (rc == 0 && marked)
				m->truncator.more = true; /* an erasure-coded file is cut at its size first */
			if (rc == 0 && marked)
				log_warn("file %llu: its writer went without closing; %u of its objects to make "
					 "again from its others (copies or parity)", (unsigned long long)ino, marked);
		}
		if (rc)
			break;
		rc = mdt_getlayout(t, ino, &l);
		if (rc == -ENODATA || rc == -ENOENT)
			rc = 0, l = NULL;
		if (rc == 0)
			rc = mdt_mirror_note(t, ino, l);
		free(l);
	}
	m->resync.more = true;
	m->resync.next_try_ns = 0;
	return rc;
}

void mds_resync_writer(struct mds *m, uint64_t ino)
{
	if (m->resync.busy && m->resync.ino == ino)
		m->resync.dirty = true;
}

int mds_resync_done(struct mds *m, struct mdt_txn *t, const struct mds_work *report)
{
	struct mds_resync *rs = &m->resync;
	uint32_t *ok = calloc(report->n ? report->n : 1, sizeof(uint32_t)), nok = 0, gen = 0;
	struct loom_layout *l = NULL;
	uint64_t ino = rs->ino, bytes = 0;
	uint32_t epoch = 0;
	struct lw_attr attr;
	bool failed = false;
	int rc = 0;

	rs->busy = false;
	rs->more = true;
	if (!ok)
		return -ENOMEM;
	for (uint32_t i = 0; i < report->n; i++) {
		struct resync_done d;

		memcpy(&d, report->data + (size_t)i * sizeof(d), sizeof(d));
		ino = d.ino;
		gen = d.gen;
		epoch = d.epoch;
		bytes += d.bytes;
		if (d.status == 0)
			ok[nok++] = d.index;
		else
			failed = true;
	}
	if (rs->dirty || mds_ino_has_writer(m, ino)) {
		/* A writer opened it meanwhile: what it wrote the copies may have missed. */
		failed = true;
		nok = 0;
	}
	if (nok && mdt_getattr(t, ino, &attr) == 0 && attr.trunc_epoch != epoch) {
		/* Cut meanwhile (a truncate by path needs no open): the copy may hold bytes the cut
		 * took from the others. Again, in the new epoch. */
		failed = true;
		nok = 0;
	}
	if (nok) {
		rc = mdt_mirror_resynced(t, ino, gen, ok, nok, &l);
		if (rc == -EAGAIN || rc == -ENOENT) {
			rc = 0;
			failed = true;
		} else if (rc == 0) {
			rs->resynced += nok;
			log_info("resync: inode %llu: %u object%s copied again (%llu bytes)", (unsigned long long)ino,
				 nok, nok == 1 ? "" : "s", (unsigned long long)bytes);
		}
	}
	free(l);
	free(ok);
	if (failed) {
		rs->next_try_ns = clock_mono_ns() + RESYNC_BACKOFF_NS;
		rs->rotate++;
	}
	return rc;
}

int mds_resync_now(struct mds *m, uint64_t ino)
{
	struct mds_resync *rs = &m->resync;

	rs->more = true;
	rs->next_try_ns = 0;
	if (!rs->busy && ino)
		rs->cursor = ino - 1; /* this file first */
	return 0;
}
