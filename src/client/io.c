/*
 * Striped data I/O: a read or write is mapped onto its objects (stripe.h), cut into RPCs of at
 * most LW_RPC_BULK bytes, and every RPC to every OSS is submitted before any is waited for, so
 * the pieces travel to all their servers at once. Bulk moves straight between the caller's buffer
 * and the socket.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "client/io_job.h"
#include "common/stripe.h"
#include "common/util.h"

#define IO_WINDOW (256ull << 20) /* bytes mapped at once, bounding the bookkeeping */

/* How telling a piece's error is; of several, the highest is the request's (the first of equal
 * ones). A write to make again in another truncation epoch (-ESTALE, -EAGAIN) gives way to any
 * real error, -EIO (a server lost) to a definite answer, and a full target beats everything. */
static int err_rank(int err)
{
	switch (err) {
	case 0: return 0;
	case -ESTALE:
	case -EAGAIN: return 1;
	case -EIO: return 2;
	case -ENOSPC:
	case -EDQUOT: return 4;
	default: return 3;
	}
}

bool io_ost_away(loom_fs *fs, uint32_t ost_idx)
{
	struct rpc_conn *c;

	return fs_ost_conn(fs, ost_idx, &c) != 0 || rpc_conn_recovering(c);
}

int io_merge_err(int rc, int err)
{
	return err_rank(err) > err_rank(rc) ? err : rc;
}

/* What an application is told of a piece's error: a checksum that did not match (on the wire,
 * or in the OSS's stored data) is an I/O error. */
int io_app_err(int err)
{
	return err == -EBADMSG || err == -EUCLEAN ? -EIO : err;
}

static void zero_tail(struct io_piece *p, uint64_t from)
{
	for (int i = 0; i < p->iovcnt; i++) {
		uint64_t len = p->iov[i].iov_len;
		if (from >= len) {
			from -= len;
			continue;
		}
		memset((uint8_t *)p->iov[i].iov_base + from, 0, len - from);
		from = 0;
	}
}

/* Cuts one run into RPC-sized pieces appended at pieces[*np], to object `obj` of l (the run's
 * stripe in one copy). */
static void cut_run(const struct stripe_run *run, const struct stripe_seg *segs, uint8_t *buf,
		    uint64_t ino, const struct loom_layout *l, uint32_t obj, bool write, uint32_t epoch,
		    struct io_piece *pieces, uint32_t *np)
{
	struct io_piece *p = NULL;
	uint64_t obj_off = run->obj_off, plen = 0;

	for (uint32_t s = 0; s < run->nsegs; s++) {
		const struct stripe_seg *seg = &segs[run->first_seg + s];
		uint64_t done = 0;

		while (done < seg->len) {
			uint64_t n;

			if (!p || plen == LW_RPC_BULK || p->iovcnt == RPC_MAX_IOV) {
				if (p)
					p->body.length = plen;
				p = &pieces[(*np)++];
				memset(&p->body, 0, sizeof(p->body));
				p->iovcnt = 0;
				p->body.ost_idx = l->objs[obj].ost_idx;
				p->body.objid = l->objs[obj].objid;
				p->body.offset = obj_off;
				p->body.ino = ino;
				p->body.stripe_idx = obj; /* the object's tag: its place in the layout */
				p->body.layout_gen = l->layout_gen;
				p->body.trunc_epoch = write ? epoch : 0;
				plen = 0;
			}
			n = MIN(seg->len - done, LW_RPC_BULK - plen);
			p->iov[p->iovcnt].iov_base = buf + seg->buf_off + done;
			p->iov[p->iovcnt++].iov_len = n;
			plen += n;
			obj_off += n;
			done += n;
		}
	}
	if (p)
		p->body.length = plen;
}

uint64_t io_job_max_pieces(const struct stripe_geom *g, uint64_t off, uint64_t len)
{
	uint64_t maxsegs = stripe_max_segs(g, off, len);

	/* Each segment may open a piece, and each LW_RPC_BULK of data or RPC_MAX_IOV segments too. */
	return maxsegs + len / LW_RPC_BULK + MIN(maxsegs, (uint64_t)g->count) + 1;
}

int io_job_alloc(struct io_job *job, uint64_t maxpieces, bool write)
{
	memset(job, 0, sizeof(*job));
	job->write = write;
	job->cap = maxpieces;
	job->pieces = calloc(maxpieces ? maxpieces : 1, sizeof(*job->pieces));
	return job->pieces ? 0 : -ENOMEM;
}

int io_job_add(struct io_job *job, uint64_t ino, const struct loom_layout *l,
	       const struct stripe_geom *g, const uint32_t *objmap, uint8_t *buf, uint64_t len,
	       uint64_t off, uint32_t epoch)
{
	uint64_t maxsegs = stripe_max_segs(g, off, len);
	struct stripe_run *runs = calloc(MIN(maxsegs, (uint64_t)g->count) + 1, sizeof(*runs));
	struct stripe_seg *segs = calloc(maxsegs + 1, sizeof(*segs));
	uint32_t nruns, nsegs;

	if (!runs || !segs || job->np + io_job_max_pieces(g, off, len) > job->cap) {
		free(runs);
		free(segs);
		return runs && segs ? -EOVERFLOW : -ENOMEM;
	}
	nruns = stripe_map(g, off, len, runs, segs, &nsegs);
	for (uint32_t r = 0; r < nruns; r++)
		if (objmap[runs[r].obj] != UINT32_MAX)
			cut_run(&runs[r], segs, buf, ino, l, objmap[runs[r].obj], job->write, epoch, job->pieces,
				&job->np);
	free(runs);
	free(segs);
	return 0;
}

/* A write's reply arrived (on its connection's I/O thread, after any hello of a reconnection):
 * which server acknowledged it, for the fsync that will make it durable. */
static void piece_acked(struct rpc_call *call, void *arg)
{
	struct io_piece *p = arg;

	if (call->status == 0 && p->loss_ref)
		p->acked_gen = atomic_load(p->loss_ref);
}

void io_job_submit(loom_fs *fs, struct io_job *job, uint32_t rpc_flags)
{
	bool write = job->write;

	job->fs = fs;
	rpc_wait_init(&job->w);
	for (uint32_t i = 0; i < job->np; i++) {
		struct io_piece *p = &job->pieces[i];
		struct rpc_conn *c;
		int err;

		fs_call_init(fs, &p->call, write ? LW_OP_OST_WRITE : LW_OP_OST_READ, &p->body,
			     sizeof(p->body));
		p->call.flags |= rpc_flags;
		if (write) {
			p->call.bulk = p->iov;
			p->call.bulk_cnt = p->iovcnt;
			p->call.bulk_len = (uint32_t)p->body.length;
			p->loss_ref = fs_ost_loss_ref(fs, p->body.ost_idx);
			p->call.on_complete = piece_acked;
			p->call.on_complete_arg = p;
		} else {
			p->call.rbulk = p->iov;
			p->call.rbulk_cnt = p->iovcnt;
		}
		err = fs_ost_conn(fs, p->body.ost_idx, &c);
		if (err) {
			/* An OST the file system no longer has (removed with --force): the object is lost. */
			p->call.status = err == -ENODEV ? -EIO : err;
			continue;
		}
		rpc_submit(c, &p->call, &job->w);
	}
}

int io_job_start(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const uint32_t *pick,
		 uint8_t *buf, uint64_t len, uint64_t off, bool write, uint32_t epoch,
		 uint32_t rpc_flags, struct io_job *job)
{
	struct stripe_geom g = stripe_geom_of(l);
	uint32_t copies = pick ? 1 : layout_copies(l);
	uint32_t *objmap = calloc(g.count, sizeof(uint32_t));
	int rc;

	/* A write goes to every copy. */
	rc = objmap ? io_job_alloc(job, io_job_max_pieces(&g, off, len) * copies, write) : -ENOMEM;
	for (uint32_t m = 0; rc == 0 && m < copies; m++) {
		for (uint32_t k = 0; k < g.count; k++) {
			/* Every copy of the stripe that is in sync; a stale one waits for its resync. A
			 * handle whose view has every copy stale (an old layout and this client's newer
			 * marks) is behind the MDS, which always keeps one in sync: it writes them all
			 * rather than none. */
			bool any_in_sync = copies == 1;

			for (uint32_t c = 0; c < copies && !any_in_sync; c++)
				any_in_sync = !mirror_obj_stale(fs, l, c * g.count + k);
			if (pick)
				objmap[k] = pick[k];
			else if (copies == 1 || !any_in_sync || !mirror_obj_stale(fs, l, m * g.count + k))
				objmap[k] = m * g.count + k;
			else
				objmap[k] = UINT32_MAX;
		}
		rc = io_job_add(job, ino, l, &g, objmap, buf, len, off, epoch);
	}
	free(objmap);
	if (rc) {
		free(job->pieces);
		job->pieces = NULL;
		return rc;
	}
	io_job_submit(fs, job, rpc_flags);
	return 0;
}

/* true when every piece of the job has its answer. */
static bool io_job_done(struct io_job *job)
{
	bool done;

	pthread_mutex_lock(&job->w.lock);
	done = job->w.pending == 0;
	pthread_mutex_unlock(&job->w.lock);
	return done;
}

int io_job_finish(struct io_job *job, int64_t *obj_blocks, int *obj_err)
{
	bool write = job->write;
	int rc = 0;

	rpc_wait_all(&job->w);
	rpc_wait_destroy(&job->w);
	for (uint32_t i = 0; i < job->np; i++) {
		struct io_piece *p = &job->pieces[i];
		struct lw_ost_io_rep rep;
		int err = p->call.status;

		if (err == 0 && p->call.rbody_len != sizeof(rep))
			err = -EPROTO;
		if (err == 0) {
			memcpy(&rep, p->call.rbody, sizeof(rep));
			if (write && rep.length != p->body.length)
				err = -EIO;
			if (write && err == 0 && p->loss_ref && job->fs)
				ino_mark_acked(job->fs, p->body.ino, p->body.ost_idx, p->acked_gen);
			/* Pieces to one object finish in any order: the largest figure is the latest. */
			if (obj_blocks && (int64_t)rep.obj_blocks > obj_blocks[p->body.stripe_idx])
				obj_blocks[p->body.stripe_idx] = (int64_t)rep.obj_blocks;
			if (!write && (rep.length != p->call.rbulk_len || rep.length > p->body.length))
				err = -EPROTO;
		}
		/* The object ends before the piece does: a hole or the stripe's end, read as zeros. */
		if (err == 0 && !write && p->call.rbulk_len < p->body.length)
			zero_tail(p, p->call.rbulk_len);
		if (obj_err)
			obj_err[p->body.stripe_idx] = io_merge_err(obj_err[p->body.stripe_idx], err);
		rc = io_merge_err(rc, io_app_err(err));
		rpc_call_release(&p->call);
	}
	free(job->pieces);
	job->pieces = NULL;
	free(job->owned);
	job->owned = NULL;
	return rc;
}

static int io_window(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf,
		     uint64_t len, uint64_t off, bool write, uint32_t epoch, int64_t *obj_blocks)
{
	struct io_job job;
	int rc;

	if (l->ec_parity)
		return write ? ec_write(fs, ino, l, buf, len, off, epoch, NULL, obj_blocks) :
			       ec_read(fs, ino, l, buf, len, off);
	if (layout_copies(l) > 1)
		return write ? mirror_write(fs, ino, l, buf, len, off, epoch, obj_blocks) :
			       mirror_read(fs, ino, l, buf, len, off);
	rc = io_job_start(fs, ino, l, NULL, buf, len, off, write, epoch, 0, &job);
	return rc ? rc : io_job_finish(&job, obj_blocks, NULL);
}

static int io_rw(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
		 uint64_t off, bool write, uint32_t epoch, int64_t *obj_blocks)
{
	/* An erasure-coded file's windows end at row boundaries: whole rows keep their parity. */
	uint64_t row = l && l->ec_parity ? (uint64_t)l->stripe_size * layout_per_copy(l) : 1;
	uint64_t window = MAX(row, IO_WINDOW / row * row);

	if (!l || l->nobjs == 0 || l->stripe_size == 0)
		return -EIO;
	while (len > 0) {
		uint64_t n = MIN(len, window - off % row);
		int rc = io_window(fs, ino, l, buf, n, off, write, epoch, obj_blocks);
		if (rc)
			return rc;
		buf += n;
		off += n;
		len -= n;
	}
	return 0;
}

int io_read(loom_fs *fs, uint64_t ino, const struct loom_layout *l, void *buf, uint64_t len,
	    uint64_t off)
{
	return io_rw(fs, ino, l, buf, len, off, false, 0, NULL);
}

int io_write(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const void *buf, uint64_t len,
	     uint64_t off, uint32_t epoch, int64_t *obj_blocks)
{
	/* The buffer is only read: the cast serves the shared walker. */
	return io_rw(fs, ino, l, (uint8_t *)buf, len, off, true, epoch, obj_blocks);
}

int io_write_span(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const void *buf, uint64_t len,
		  uint64_t off, uint32_t epoch, const struct ec_span *span, int64_t *obj_blocks)
{
	if (!l || !l->ec_parity || l->nobjs == 0 || l->stripe_size == 0)
		return io_write(fs, ino, l, buf, len, off, epoch, obj_blocks);
	/* One row at most: the caller's (a row gathered by write.c), not cut into windows. */
	return ec_write(fs, ino, l, (uint8_t *)buf, len, off, epoch, span, obj_blocks);
}

/*
 * Write-behind: a write whose data was copied (data is the batch's own) goes out and is
 * answered later; io_wb_finish waits for it. The caller keeps the batches of a file in order
 * and never lets two overlapping ones be in flight at once. A mirrored file's batch goes to
 * every copy at once, and is settled (stale marks, or a second try) when it is waited for.
 */
struct io_wb {
	struct io_wb *next;
	struct io_job job;
	loom_fs *fs;
	uint64_t ino;
	const struct loom_layout *l;
	uint8_t *data;
	uint64_t off, len;
	uint32_t epoch;
	char jobid[LOOM_JOBID_LEN]; /* the writer's (jobtag.h): whoever settles it later sends any
	                             * second try in its name */
};

int io_wb_start(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const void *buf,
		uint64_t len, uint64_t off, uint32_t epoch, struct io_wb **out)
{
	uint8_t *data = malloc(len ? len : 1);
	int rc;

	if (!data)
		return -ENOMEM;
	memcpy(data, buf, len);
	rc = io_wb_start_owned(fs, ino, l, data, len, off, epoch, out);
	if (rc)
		free(data);
	return rc;
}

int io_wb_start_owned(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *data,
		      uint64_t len, uint64_t off, uint32_t epoch, struct io_wb **out)
{
	struct io_wb *b;
	int rc;

	if (!l || l->nobjs == 0 || l->stripe_size == 0)
		return -EIO;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->data = data;
	b->fs = fs;
	b->ino = ino;
	b->l = l;
	b->off = off;
	b->len = len;
	b->epoch = epoch;
	jobtag_current(fs, b->jobid);
	if (l->ec_parity)
		rc = ec_write_start(fs, ino, l, b->data, len, off, epoch, NULL, RPC_NOWAIT, &b->job);
	else
		rc = io_job_start(fs, ino, l, NULL, b->data, len, off, true, epoch,
				  layout_copies(l) > 1 ? RPC_NOWAIT : 0, &b->job);
	if (rc) {
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

const void *io_wb_data(const struct io_wb *b)
{
	return b->data;
}

uint32_t io_wb_epoch(const struct io_wb *b)
{
	return b->epoch;
}

const char *io_wb_jobid(const struct io_wb *b)
{
	return b->jobid;
}

bool io_wb_done(struct io_wb *b)
{
	return io_job_done(&b->job);
}

int io_wb_settled(struct io_wb *b)
{
	return rpc_wait_settled(&b->job.w) == -EINTR ? -EINTR : 0;
}

bool io_wb_overlaps(const struct io_wb *b, uint64_t off, uint64_t len)
{
	return off < b->off + b->len && b->off < off + len;
}

uint64_t io_wb_len(const struct io_wb *b)
{
	return b->len;
}

uint64_t io_wb_off(const struct io_wb *b)
{
	return b->off;
}

/* Not ended by an interrupt: these bytes were acknowledged to the application when write(2)
 * returned, and giving up on them would lose them. A hard mount waits for them up to the
 * recovery window, a soft one up to its timeout. */
int io_wb_wait(struct io_wb *b, int64_t *obj_blocks)
{
	struct rpc_intr *in = rpc_intr_swap(NULL);
	int rc;

	if (b->l->ec_parity)
		rc = ec_write_settle(b->fs, b->ino, b->l, &b->job, b->data, b->len, b->off, b->epoch, NULL,
				     obj_blocks);
	else if (layout_copies(b->l) > 1)
		rc = mirror_write_settle(b->fs, b->ino, b->l, &b->job, b->data, b->len, b->off, b->epoch,
					 obj_blocks);
	else
		rc = io_job_finish(&b->job, obj_blocks, NULL);
	rpc_intr_swap(in);
	return rc;
}

void io_wb_free(struct io_wb *b)
{
	free(b->data);
	free(b);
}

int io_wb_finish(struct io_wb *b, int64_t *obj_blocks)
{
	int rc = io_wb_wait(b, obj_blocks);

	io_wb_free(b);
	return rc;
}

/* One small request per object of a file (no bulk), all in flight at once. */
struct obj_req {
	struct rpc_call call;
	struct lw_ost_io body;
	bool asked;            /* sent; else that object has nothing to be asked */
};

/* A request for every object of l, each asked (but a mirrored file's stale copies), its body
 * addressed to the object. */
static struct obj_req *obj_reqs_new(loom_fs *fs, const struct loom_layout *l)
{
	struct obj_req *reqs = calloc(l->nobjs, sizeof(*reqs));

	for (uint32_t k = 0; reqs && k < l->nobjs; k++) {
		reqs[k].asked = !layout_redundant(l) || !mirror_obj_stale(fs, l, k);
		reqs[k].body.ost_idx = l->objs[k].ost_idx;
		reqs[k].body.objid = l->objs[k].objid;
		reqs[k].body.stripe_idx = k;
		reqs[k].body.layout_gen = l->layout_gen;
	}
	return reqs;
}

/* Sends every request asked, then waits for all their answers. A mirrored file's copies do not
 * wait for a server that is away: another copy answers for it. */
static void obj_reqs_run(loom_fs *fs, const struct loom_layout *l, struct obj_req *reqs, uint32_t n,
			 uint16_t op)
{
	struct rpc_wait w;

	rpc_wait_init(&w);
	for (uint32_t k = 0; k < n; k++) {
		struct obj_req *r = &reqs[k];
		struct rpc_conn *c;
		int err;

		if (!r->asked)
			continue;
		fs_call_init(fs, &r->call, op, &r->body, sizeof(r->body));
		if (layout_redundant(l))
			r->call.flags |= RPC_NOWAIT;
		err = fs_ost_conn(fs, r->body.ost_idx, &c);
		if (err) {
			r->call.status = err == -ENODEV ? -EIO : err; /* as above */
			continue;
		}
		rpc_submit(c, &r->call, &w);
	}
	rpc_wait_all(&w);
	rpc_wait_destroy(&w);
}

/* An answered request: 0 and its reply, or its error (-EPROTO for a reply of the wrong size). */
static int obj_req_reply(const struct obj_req *r, struct lw_ost_io_rep *rep)
{
	int err = r->call.status;

	if (err == 0 && r->call.rbody_len != sizeof(*rep))
		err = -EPROTO;
	if (err == 0)
		memcpy(rep, r->call.rbody, sizeof(*rep));
	return err;
}

static void obj_reqs_free(struct obj_req *reqs, uint32_t n)
{
	for (uint32_t k = 0; k < n; k++)
		if (reqs[k].asked)
			rpc_call_release(&reqs[k].call);
	free(reqs);
}

/* A mirrored file's requests settled: each object's error into err[], then mirror_settle_each
 * (mark: copies that missed a change are marked stale; else their errors are only forgiven). */
static int settle_copies(loom_fs *fs, uint64_t ino, const struct loom_layout *l, struct obj_req *reqs,
			 bool mark)
{
	bool *asked = calloc(l->nobjs, sizeof(bool));
	int *err = calloc(l->nobjs, sizeof(int));
	int rc;

	if (!asked || !err) {
		free(asked);
		free(err);
		return -ENOMEM;
	}
	for (uint32_t k = 0; k < l->nobjs; k++) {
		struct lw_ost_io_rep rep;

		asked[k] = reqs[k].asked;
		if (asked[k])
			err[k] = obj_req_reply(&reqs[k], &rep);
	}
	if (l->ec_parity) {
		rc = ec_settle_each(fs, ino, l, asked, err, mark);
	} else if (mark) {
		rc = mirror_settle_each(fs, ino, l, asked, err);
	} else {
		/* Each stripe needs one copy that answered. */
		uint32_t per = layout_per_copy(l);

		rc = 0;
		for (uint32_t k = 0; k < per; k++) {
			int worst = 0;
			bool ok = false, any = false;

			for (uint32_t m = 0; m < layout_copies(l); m++) {
				any |= asked[m * per + k];
				ok |= asked[m * per + k] && err[m * per + k] == 0;
				worst = io_merge_err(worst, asked[m * per + k] ? err[m * per + k] : 0);
			}
			if (any && !ok)
				rc = io_merge_err(rc, worst);
		}
	}
	free(asked);
	free(err);
	return rc;
}

/* Sends one small request to every object at once (with obj_blocks and GETATTR: only to those
 * whose figure is unknown, < 0), and records the blocks each one reports. A mirrored file's
 * sync that a copy missed marks it stale: the other copies hold the bytes on disk. */
static int io_each_object(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint16_t op,
			  int64_t *obj_blocks)
{
	struct obj_req *reqs;
	int rc = 0;

	if (l->nobjs == 0)
		return 0;
	reqs = obj_reqs_new(fs, l);
	if (!reqs)
		return -ENOMEM;
	for (uint32_t k = 0; k < l->nobjs; k++) {
		if (op == LW_OP_OST_GETATTR && obj_blocks && obj_blocks[k] >= 0)
			reqs[k].asked = false; /* known */
		if (!reqs[k].asked && obj_blocks && obj_blocks[k] < 0)
			obj_blocks[k] = 0; /* a stale copy: what it holds is not the file's */
	}
	obj_reqs_run(fs, l, reqs, l->nobjs, op);
	for (uint32_t k = 0; k < l->nobjs; k++) {
		struct lw_ost_io_rep rep;
		int err;

		if (!reqs[k].asked)
			continue;
		err = obj_req_reply(&reqs[k], &rep);
		if (err == 0 && obj_blocks && op != LW_OP_OST_SYNC)
			obj_blocks[k] = (int64_t)rep.obj_blocks;
		if (err && obj_blocks && op != LW_OP_OST_SYNC && layout_redundant(l))
			obj_blocks[k] = 0; /* a copy away: counted when it answers */
		rc = io_merge_err(rc, err);
	}
	if (layout_redundant(l))
		rc = settle_copies(fs, ino, l, reqs, op == LW_OP_OST_SYNC);
	obj_reqs_free(reqs, l->nobjs);
	return rc;
}

int io_fallocate(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint32_t mode,
		 uint32_t epoch, uint64_t off, uint64_t len, int64_t *obj_blocks)
{
	struct obj_req *reqs;
	int rc = 0;

	if (l->nobjs == 0 || l->stripe_size == 0)
		return -EIO;
	/* A hole punched or a range zeroed changes an erasure-coded file's data: its parity goes
	 * stale first, as for a write to part of a row. */
	if (l->ec_parity && (mode & (LW_FALLOC_PUNCH_HOLE | LW_FALLOC_ZERO_RANGE)) &&
	    (rc = ec_parity_stale(fs, ino, l)) != 0)
		return rc;
	reqs = obj_reqs_new(fs, l);
	if (!reqs)
		return -ENOMEM;
	/* Object k's part of the range is one contiguous object range (stripe.h); every copy's
	 * object k alike, a parity object's as data object 0's. */
	for (uint32_t k = 0; k < l->nobjs; k++) {
		uint64_t a = layout_obj_size(l, k, off), b = layout_obj_size(l, k, off + len);

		reqs[k].asked = reqs[k].asked && b > a;
		reqs[k].body.flags = mode;
		reqs[k].body.offset = a;
		reqs[k].body.length = b - a;
		reqs[k].body.ino = ino; /* allocating makes the object, tagged with its file */
		reqs[k].body.trunc_epoch = epoch;
	}
	obj_reqs_run(fs, l, reqs, l->nobjs, LW_OP_OST_FALLOCATE);
	for (uint32_t k = 0; k < l->nobjs; k++) {
		struct lw_ost_io_rep rep;
		int err;

		if (!reqs[k].asked)
			continue;
		err = obj_req_reply(&reqs[k], &rep);
		/* One request per object: its figure is the latest (a punch lowers it). */
		if (err == 0 && obj_blocks)
			obj_blocks[k] = (int64_t)rep.obj_blocks;
		rc = io_merge_err(rc, err);
	}
	if (layout_redundant(l))
		rc = settle_copies(fs, ino, l, reqs, true);
	obj_reqs_free(reqs, l->nobjs);
	return rc;
}

int io_seek(loom_fs *fs, const struct loom_layout *l, uint32_t whence, uint64_t off, uint64_t *found)
{
	struct stripe_geom g = stripe_geom_of(l);
	struct obj_req *reqs;
	int rc = 0;

	*found = UINT64_MAX;
	if (l->nobjs == 0 || l->stripe_size == 0) {
		if (whence == LW_SEEK_HOLE)
			*found = off; /* no objects: nothing but holes */
		return 0;
	}
	/* An erasure-coded file's data object that is stale says nothing of where its data is:
	 * all of the file is data, as far as a seek can tell. */
	for (uint32_t k = 0; l->ec_parity && k < g.count; k++)
		if (mirror_obj_stale(fs, l, k)) {
			if (whence == LW_SEEK_DATA)
				*found = off;
			return 0;
		}
	reqs = obj_reqs_new(fs, l);
	if (!reqs)
		return -ENOMEM;
	/* Each object from its first byte at or past off: the file's next data (or hole) is the
	 * nearest of theirs, since each object's bytes keep their order in the file. A mirrored
	 * file asks one in-sync copy of each stripe, an erasure-coded one its data objects. */
	for (uint32_t k = 0; k < l->nobjs; k++) {
		if (l->ec_parity && k >= g.count)
			reqs[k].asked = false;
		if (k >= g.count && reqs[k].asked) {
			bool taken = false;

			for (uint32_t j = k % g.count; j < k && !taken; j += g.count)
				taken = reqs[j].asked;
			reqs[k].asked = !taken;
		}
		reqs[k].body.flags = whence;
		reqs[k].body.offset = stripe_obj_size(&g, k % g.count, off);
	}
	obj_reqs_run(fs, l, reqs, l->nobjs, LW_OP_OST_SEEK);
	for (uint32_t k = 0; k < l->nobjs; k++) {
		uint64_t at = reqs[k].body.offset, limit = stripe_obj_size(&g, k % g.count, LW_MAX_OFFSET), fo;
		struct lw_ost_io_rep rep;
		int err;

		if (!reqs[k].asked)
			continue;
		err = obj_req_reply(&reqs[k], &rep);

		if (err == -ENXIO && whence == LW_SEEK_DATA)
			continue; /* no data on this object from there on */
		if (err == 0 && rep.length < at)
			err = -EPROTO;
		if (err) {
			rc = io_merge_err(rc, err);
			continue;
		}
		if (rep.length >= limit)
			continue; /* past any file's end */
		fo = stripe_file_offset(&g, k % g.count, rep.length);
		if (fo < *found)
			*found = fo;
	}
	obj_reqs_free(reqs, l->nobjs);
	return rc;
}

int io_sync(loom_fs *fs, uint64_t ino, const struct loom_layout *l)
{
	return io_each_object(fs, ino, l, LW_OP_OST_SYNC, NULL);
}

int io_blocks(loom_fs *fs, uint64_t ino, const struct loom_layout *l, int64_t *obj_blocks)
{
	return io_each_object(fs, ino, l, LW_OP_OST_GETATTR, obj_blocks);
}
