/*
 * Erasure-coded files (docs/architecture.md, "Erasure coding"): stripe_count data objects striped
 * as RAID-0, then ec_parity parity objects. Row r is the data units at object offset r * S and
 * the parity units at that same offset of the parity objects (stripe.h); ISA-L computes them
 * (common/ec.c).
 *
 * Writes: whole rows go with their parity, all in flight at once. A part of a row cannot have
 * its parity made without the rest of the row: the parity is marked stale on the MDS first (as
 * Lustre's erasure coding does), and the MDS makes it again once the file has no writer. While a
 * data object is stale (its bytes live only in the parity), a part of a row is instead read
 * (through the code), merged, and written with the row's new parity, so that the parity keeps
 * giving the missing object's bytes. The file's last row, written up to the file's end, is a
 * whole row with zeros after the end: a checkpoint keeps its parity to its last byte.
 *
 * Reads take the data objects; the rows of one that is stale or fails are read from any
 * stripe_count in-sync objects and decoded: the application sees no error while at most
 * ec_parity objects are away. A first try does not wait for a server that is away (RPC_NOWAIT),
 * as a mirrored file's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/io_job.h"
#include "common/ec.h"
#include "common/log.h"
#include "common/stripe.h"
#include "common/util.h"

#define EC_BATCH_BYTES (64ull << 20) /* row data read and decoded at once */

struct ec_geom {
	uint32_t k, m, n;   /* data, parity, all objects */
	uint64_t unit, row; /* S, and a row's data: k * S */
};

static struct ec_geom ec_geom_of(const struct loom_layout *l)
{
	struct ec_geom e = { .k = layout_per_copy(l), .m = l->ec_parity, .n = l->nobjs,
			     .unit = l->stripe_size };

	e.row = e.unit * e.k;
	return e;
}

static bool any_data_stale(loom_fs *fs, const struct loom_layout *l, const struct ec_geom *e)
{
	for (uint32_t k = 0; k < e->k; k++)
		if (mirror_obj_stale(fs, l, k))
			return true;
	return false;
}

static uint32_t count_stale(loom_fs *fs, const struct loom_layout *l)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < l->nobjs; i++)
		n += mirror_obj_stale(fs, l, i);
	return n;
}

/* ---- reads ---- */

/* [off, off + len) from the data objects, each object's error into err[]. */
static int read_data(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf,
		     uint64_t len, uint64_t off, int *err)
{
	struct stripe_geom g = stripe_geom_of(l);
	uint32_t *objmap = malloc(g.count * sizeof(uint32_t));
	struct io_job job;
	int rc;

	if (!objmap)
		return -ENOMEM;
	for (uint32_t k = 0; k < g.count; k++)
		objmap[k] = k;
	rc = io_job_alloc(&job, io_job_max_pieces(&g, off, len), false);
	if (rc == 0)
		rc = io_job_add(&job, ino, l, &g, objmap, buf, len, off, 0);
	free(objmap);
	if (rc) {
		free(job.pieces);
		return rc;
	}
	io_job_submit(fs, &job, RPC_NOWAIT);
	return io_job_finish(&job, NULL, err);
}

/* Reads object range [at, at + span) of the n objects objs[] into dsts[], all at once. Objects
 * that fail get lost[] (and bad[] for bytes their OSS found bad); -EAGAIN then. */
static int read_objects(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const uint32_t *objs,
			uint8_t *const *dsts, uint32_t n, uint64_t span, uint64_t at, uint32_t flags,
			bool *lost, bool *bad, int *err)
{
	struct stripe_geom one = { .size = l->stripe_size, .count = 1 };
	struct io_job job;
	int rc, failed = 0;

	rc = io_job_alloc(&job, n * io_job_max_pieces(&one, at, span), false);
	for (uint32_t i = 0; rc == 0 && i < n; i++)
		rc = io_job_add(&job, ino, l, &one, &objs[i], dsts[i], span, at, 0);
	if (rc) {
		free(job.pieces);
		return rc;
	}
	memset(err, 0, l->nobjs * sizeof(int));
	io_job_submit(fs, &job, flags);
	rc = io_job_finish(&job, NULL, err);
	for (uint32_t i = 0; i < n; i++) {
		if (!err[objs[i]])
			continue;
		failed = -EAGAIN;
		lost[objs[i]] = true;
		bad[objs[i]] |= err[objs[i]] == -EUCLEAN;
	}
	return failed ? failed : rc;
}

/* Copies file range [lo, hi) (within rows [r0, ...)) out of the data objects' buffers. */
static void copy_out(const struct ec_geom *e, uint8_t *const *obj_buf, uint64_t r0, uint8_t *buf,
		     uint64_t off, uint64_t lo, uint64_t hi)
{
	for (uint64_t u = lo / e->unit; u * e->unit < hi; u++) {
		uint64_t from = MAX(lo, u * e->unit), to = MIN(hi, (u + 1) * e->unit);
		uint32_t k = (uint32_t)(u % e->k);
		uint64_t r = u / e->k;

		memcpy(buf + (from - off), obj_buf[k] + (r - r0) * e->unit + (from - u * e->unit), to - from);
	}
}

/* Data object k's units of rows [r0, r1) (all within the range buf holds, from off) copied out of
 * buf, back to back. */
static void copy_in(const struct ec_geom *e, uint32_t k, uint64_t r0, uint64_t r1, const uint8_t *buf,
		    uint64_t off, uint8_t *obj)
{
	for (uint64_t r = r0; r < r1; r++)
		memcpy(obj + (r - r0) * e->unit, buf + (r * e->row + k * e->unit - off), e->unit);
}

/* Reads [off, off + len) through the code: every row from k objects not lost, decoded. A data
 * object whose bytes buf holds already (held[k]: a first read that failed only elsewhere) is not
 * read again for whole rows. */
static int read_decoded(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf,
			uint64_t len, uint64_t off, bool *lost, bool *bad, const bool *held)
{
	struct ec_geom e = ec_geom_of(l);
	uint64_t end = off + len, r0 = off / e.row, rend = (end + e.row - 1) / e.row;
	uint64_t batch = MAX(1, EC_BATCH_BYTES / e.row);
	uint32_t *have = calloc(e.n, sizeof(uint32_t)), *want = calloc(e.n, sizeof(uint32_t));
	uint8_t **src = calloc(e.n, sizeof(uint8_t *)), **dst = calloc(e.n, sizeof(uint8_t *));
	uint8_t **obj_buf = calloc(e.k, sizeof(uint8_t *)), **rd_dst = calloc(e.k, sizeof(uint8_t *));
	uint32_t *rd_obj = calloc(e.k, sizeof(uint32_t)), nread;
	int *err = calloc(e.n, sizeof(int));
	uint8_t *bufs = NULL, *made = NULL;
	struct ec_codec *c = NULL;
	int rc = ec_codec_new(e.k, e.m, &c);

	if (!have || !want || !src || !dst || !obj_buf || !err || !rd_dst || !rd_obj)
		rc = -ENOMEM;
	for (uint64_t rb = r0; rc == 0 && rb < rend; rb += batch) {
		uint64_t r1 = MIN(rend, rb + batch), span = (r1 - rb) * e.unit;
		bool waited = false;
		uint32_t nh, nw;

		free(bufs);
		free(made);
		bufs = malloc(e.k * span);
		made = malloc(e.m * span);
		if (!bufs || !made) {
			rc = -ENOMEM;
			break;
		}
		for (;;) {
			nh = 0;
			for (uint32_t i = 0; i < e.n && nh < e.k; i++)
				if (!lost[i] && !bad[i] && !mirror_obj_stale(fs, l, i))
					have[nh++] = i;
			if (nh < e.k && !waited) {
				/* Too many away at once: a last try that waits for the servers. */
				waited = true;
				memset(lost, 0, e.n * sizeof(bool));
				continue;
			}
			if (nh < e.k) {
				rc = -EIO;
				break;
			}
			/* Whole rows of data objects read already come from buf; the others are read. */
			nread = 0;
			for (uint32_t i = 0; i < e.k; i++) {
				if (held && have[i] < e.k && held[have[i]] && rb * e.row >= off && r1 * e.row <= end) {
					copy_in(&e, have[i], rb, r1, buf, off, bufs + i * span);
				} else {
					rd_obj[nread] = have[i];
					rd_dst[nread++] = bufs + i * span;
				}
			}
			rc = read_objects(fs, ino, l, rd_obj, rd_dst, nread, span, rb * e.unit,
					  waited ? 0 : RPC_NOWAIT, lost, bad, err);
			if (rc != -EAGAIN)
				break;
		}
		if (rc)
			break;
		nw = 0;
		for (uint32_t k = 0; k < e.k; k++) {
			bool among = false;

			for (uint32_t i = 0; i < e.k && !among; i++)
				if (have[i] == k) {
					obj_buf[k] = bufs + i * span;
					among = true;
				}
			if (!among) {
				want[nw] = k;
				obj_buf[k] = dst[nw] = made + nw * span;
				nw++;
			}
		}
		for (uint32_t i = 0; i < e.k; i++)
			src[i] = bufs + i * span;
		/* The code works byte by byte across units at one object offset: the whole batch of
		 * rows decodes as one. */
		rc = ec_decode(c, span, have, src, want, nw, dst);
		if (rc == 0)
			copy_out(&e, obj_buf, rb, buf, off, MAX(off, rb * e.row), MIN(end, r1 * e.row));
	}
	ec_codec_free(c);
	free(bufs);
	free(made);
	free(have);
	free(want);
	free(src);
	free(dst);
	free(obj_buf);
	free(rd_dst);
	free(rd_obj);
	free(err);
	return rc;
}

/* What the MDS says is stale now, learnt: a handle's layout may be older than another client's
 * marks (a parity it made stale with a write to part of a row), and decoding with such parity
 * would give wrong bytes. Degraded reads are rare; one MDS request each is cheap. */
static void learn_marks(loom_fs *fs, uint64_t ino)
{
	struct loom_layout *fresh = NULL;
	struct loom_cred cr;

	fs_cred(fs, &cr);
	if (mdc_getlayout(fs, &cr, ino, &fresh) == 0) {
		mirror_learn(fs, fresh);
		free(fresh);
	}
}

int ec_read(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
	    uint64_t off)
{
	struct ec_geom e = ec_geom_of(l);
	bool *lost = calloc(e.n, sizeof(bool)), *bad = calloc(e.n, sizeof(bool)), *held = calloc(e.n, sizeof(bool));
	int *err = calloc(e.n, sizeof(int));
	uint32_t *marks = calloc(e.n, sizeof(uint32_t)), nmarks = 0;
	bool away = false;
	int rc;

	if (!lost || !bad || !held || !err || !marks) {
		rc = -ENOMEM;
		goto out;
	}
	/* An object whose OSS is away is read around from the start. */
	for (uint32_t i = 0; i < e.n; i++) {
		lost[i] = io_ost_away(fs, l->objs[i].ost_idx);
		away |= i < e.k && lost[i];
	}
	if (!away && !any_data_stale(fs, l, &e)) {
		rc = read_data(fs, ino, l, buf, len, off, err);
		if (rc == 0)
			goto out;
		/* The data objects that answered hold their bytes in buf already. */
		for (uint32_t k = 0; k < e.k; k++) {
			lost[k] = err[k] != 0;
			bad[k] = err[k] == -EUCLEAN;
			held[k] = !lost[k];
		}
	}
	learn_marks(fs, ino);
	rc = read_decoded(fs, ino, l, buf, len, off, lost, bad, held);
	/* Objects whose stored bytes were bad are made again by the MDS (while the others still
	 * give every byte; else they stay, and fsck or a rebuild is the way). */
	for (uint32_t i = 0; rc == 0 && i < e.n; i++)
		if (bad[i] && !mirror_obj_stale(fs, l, i) && count_stale(fs, l) + nmarks < e.m)
			marks[nmarks++] = i;
	if (nmarks)
		mirror_mark_stale(fs, ino, l, marks, nmarks, "read back bad bytes");
out:
	free(lost);
	free(held);
	free(bad);
	free(err);
	free(marks);
	return rc;
}

/* ---- writes ---- */

/* The rows a write makes parity for, [r0, r1), and where their whole data is. */
struct ec_plan {
	uint64_t off, end;   /* the write */
	uint64_t r0, r1;     /* r0 == r1: no parity (it is stale) */
	uint8_t *first;      /* row r0 made here (a part merged, or zeros after the end); NULL: in buf */
	uint8_t *last;       /* the same for row r1 - 1 when it is not r0 */
	uint64_t data_end;   /* the last row's data ends here: its parity past that is zeros */
};

static const uint8_t *row_data(const struct ec_plan *p, const struct ec_geom *e, const uint8_t *buf,
			       uint64_t r)
{
	if (r == p->r0 && p->first)
		return p->first;
	if (r == p->r1 - 1 && p->last)
		return p->last;
	return buf + (r * e->row - p->off);
}

/* Row r made whole here: read as it is (merge) or zeros, then the write's bytes of it on top. */
static int make_row(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const struct ec_geom *e,
		    const uint8_t *buf, uint64_t known, const struct ec_plan *p, uint64_t r, bool merge,
		    uint8_t **out)
{
	uint64_t lo = MAX(p->off - known, r * e->row), hi = MIN(p->end, (r + 1) * e->row);
	uint8_t *row = calloc(1, e->row);
	int rc = 0;

	if (!row)
		return -ENOMEM;
	if (merge)
		rc = ec_read(fs, ino, l, row, e->row, r * e->row);
	if (rc) {
		free(row);
		return rc;
	}
	/* buf - known: the bytes before off the caller knows (written already). */
	memcpy(row + (lo - r * e->row), buf - known + (lo - (p->off - known)), hi - lo);
	*out = row;
	return 0;
}

/* Marks the in-sync parity objects stale before a part of a row is written without them.
 * Refused (another client's marks made it more than the parity can bear): the layout is read
 * again and its marks learnt; *data_stale then says whether a data object is stale. */
static int stale_parity(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const struct ec_geom *e,
			bool *data_stale)
{
	uint32_t objs[LOOM_EC_MAX_PARITY], n = 0;
	int rc;

	for (uint32_t j = e->k; j < e->n; j++)
		if (!mirror_obj_stale(fs, l, j))
			objs[n++] = j;
	rc = mirror_mark_stale(fs, ino, l, objs, n, "will miss a write to part of a row");
	if (rc == 0 || rc == -ENOMEM)
		return rc;
	learn_marks(fs, ino);
	*data_stale = any_data_stale(fs, l, e);
	return *data_stale ? 0 : rc;
}

int ec_parity_stale(loom_fs *fs, uint64_t ino, const struct loom_layout *l)
{
	struct ec_geom e = ec_geom_of(l);
	bool data_stale = any_data_stale(fs, l, &e);
	int rc = data_stale ? 0 : stale_parity(fs, ino, l, &e, &data_stale);

	/* The parity holds a stale data object's bytes: it cannot go stale until the rebuild. */
	if (rc == 0 && data_stale) {
		log_warn("erasure-coded file %llu: a data object is stale: a hole cannot be punched "
			 "(or a range zeroed) until it is rebuilt", (unsigned long long)ino);
		rc = -EBUSY;
	}
	return rc;
}

int ec_write_start(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf,
		   uint64_t len, uint64_t off, uint32_t epoch, const struct ec_span *span,
		   uint32_t rpc_flags, struct io_job *job)
{
	struct ec_geom e = ec_geom_of(l);
	struct stripe_geom g = stripe_geom_of(l), one = { .size = l->stripe_size, .count = 1 };
	struct ec_plan p = { .off = off, .end = off + len };
	uint64_t known = span ? MIN(span->known, off) : 0, from = off - known;
	uint64_t first = off / e.row, last = (p.end - 1) / e.row, nrows;
	bool ends_file = span && span->ends_file;
	/* The row's bytes before off are known: the caller's, or the Data-on-MDT part (a hole in
	 * the objects: zeros). */
	bool head_known = from <= MAX(first * e.row, (uint64_t)l->dom_size);
	bool head_part = off % e.row != 0 && !head_known, tail_ragged = p.end % e.row != 0;
	bool tail_part = tail_ragged && !ends_file && (last != first || !head_part);
	bool data_stale = any_data_stale(fs, l, &e), parity = false;
	uint32_t *objmap = calloc(e.n, sizeof(uint32_t));
	uint8_t **dptr = calloc(e.k, sizeof(uint8_t *)), **pptr = calloc(e.m, sizeof(uint8_t *));
	struct ec_codec *c = NULL;
	int rc = 0;

	memset(job, 0, sizeof(*job));
	if (!objmap || !dptr || !pptr) {
		rc = -ENOMEM;
		goto out;
	}
	if (len == 0) {
		rc = io_job_alloc(job, 0, true);
		if (rc == 0)
			io_job_submit(fs, job, rpc_flags);
		goto out;
	}
	/* A part of a row (not the file's end): its parity cannot be made from this write alone. */
	if ((head_part || tail_part) && !data_stale)
		rc = stale_parity(fs, ino, l, &e, &data_stale);
	if (rc)
		goto out;
	job->bare = (head_part || tail_part) && !data_stale;
	for (uint32_t j = e.k; j < e.n && !job->bare; j++)
		parity |= !mirror_obj_stale(fs, l, j);
	if (parity) {
		p.r0 = first;
		p.r1 = last + 1;
		/* A part of a row is merged with the row as it is; the file's last row is whole with
		 * zeros after the end. */
		if (off % e.row != 0 || (tail_ragged && first == last))
			rc = make_row(fs, ino, l, &e, buf, head_part ? 0 : known, &p, first,
				      head_part || (tail_part && first == last), &p.first);
		if (rc == 0 && tail_ragged && last != first)
			rc = make_row(fs, ino, l, &e, buf, 0, &p, last, tail_part, &p.last);
		p.data_end = tail_ragged && ends_file ? p.end : (last + 1) * e.row;
	}
	nrows = p.r1 - p.r0;
	if (rc == 0)
		rc = io_job_alloc(job, io_job_max_pieces(&g, off, len) +
				       (parity ? e.m * io_job_max_pieces(&one, 0, nrows * e.unit) : 0), true);
	if (rc)
		goto out;
	for (uint32_t k = 0; k < e.k; k++)
		objmap[k] = mirror_obj_stale(fs, l, k) ? UINT32_MAX : k; /* the parity has it */
	rc = io_job_add(job, ino, l, &g, objmap, buf, len, off, epoch);
	if (rc == 0 && parity) {
		job->owned = malloc(e.m * nrows * e.unit);
		rc = job->owned ? ec_codec_new(e.k, e.m, &c) : -ENOMEM;
	}
	if (rc == 0 && parity) {
		/* Parity object j's bytes of every row back to back: one range a parity object. */
		for (uint64_t r = p.r0; r < p.r1; r++) {
			const uint8_t *data = row_data(&p, &e, buf, r);

			for (uint32_t i = 0; i < e.k; i++)
				dptr[i] = (uint8_t *)data + i * e.unit;
			for (uint32_t j = 0; j < e.m; j++)
				pptr[j] = job->owned + (j * nrows + (r - p.r0)) * e.unit;
			ec_encode(c, e.unit, dptr, pptr);
		}
		for (uint32_t j = 0; rc == 0 && j < e.m; j++) {
			uint32_t obj = e.k + j;
			uint64_t plen = (nrows - 1) * e.unit + MIN(e.unit, p.data_end - (p.r1 - 1) * e.row);

			if (!mirror_obj_stale(fs, l, obj))
				rc = io_job_add(job, ino, l, &one, &obj, job->owned + j * nrows * e.unit, plen,
						p.r0 * e.unit, epoch);
		}
	}
	if (rc) {
		free(job->pieces);
		free(job->owned);
		memset(job, 0, sizeof(*job));
		goto out;
	}
	io_job_submit(fs, job, rpc_flags);
out:
	ec_codec_free(c);
	free(p.first);
	free(p.last);
	free(objmap);
	free(dptr);
	free(pptr);
	return rc;
}

int ec_write_settle(loom_fs *fs, uint64_t ino, const struct loom_layout *l, struct io_job *job,
		    uint8_t *buf, uint64_t len, uint64_t off, uint32_t epoch, const struct ec_span *span,
		    int64_t *obj_blocks)
{
	struct ec_geom e = ec_geom_of(l);
	bool *touched = calloc(e.n, sizeof(bool));
	int *err = calloc(e.n, sizeof(int));
	uint32_t *failed = calloc(e.n, sizeof(uint32_t));
	int rc = 0;

	if (!touched || !err || !failed) {
		io_job_finish(job, obj_blocks, NULL);
		rc = -ENOMEM;
		goto out;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		uint32_t nfailed = 0;
		bool bare = job->bare;
		int worst = 0, redo = 0;

		memset(touched, 0, e.n * sizeof(bool));
		memset(err, 0, e.n * sizeof(int));
		for (uint32_t i = 0; i < job->np; i++)
			touched[job->pieces[i].body.stripe_idx] = true;
		io_job_finish(job, obj_blocks, err);
		for (uint32_t i = 0; i < e.n; i++) {
			if (!touched[i] || !err[i])
				continue;
			if (err[i] == -ESTALE || err[i] == -EAGAIN)
				redo = err[i];
			failed[nfailed++] = i;
			worst = io_merge_err(worst, io_app_err(err[i]));
		}
		if (redo || nfailed == 0) {
			rc = redo;
			break;
		}
		/* The objects that missed it, while the others still give every byte: stale. */
		if (!bare && count_stale(fs, l) + nfailed <= e.m) {
			rc = mirror_mark_stale(fs, ino, l, failed, nfailed, "missed a write");
			break;
		}
		rc = worst;
		if (attempt == 1)
			break;
		/* More than the parity bears (or bytes no parity covers): again, waiting for the
		 * servers, as a plain file's write does. */
		rc = ec_write_start(fs, ino, l, buf, len, off, epoch, span, 0, job);
		if (rc)
			break;
	}
out:
	free(touched);
	free(err);
	free(failed);
	return rc;
}

int ec_write(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
	     uint64_t off, uint32_t epoch, const struct ec_span *span, int64_t *obj_blocks)
{
	struct io_job job;
	int rc = ec_write_start(fs, ino, l, buf, len, off, epoch, span, RPC_NOWAIT, &job);

	return rc ? rc : ec_write_settle(fs, ino, l, &job, buf, len, off, epoch, span, obj_blocks);
}

int ec_settle_each(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const bool *asked,
		   const int *obj_err, bool mark)
{
	uint32_t *failed = calloc(l->nobjs, sizeof(uint32_t)), nfailed = 0;
	int worst = 0, rc = 0;

	if (!failed)
		return -ENOMEM;
	for (uint32_t i = 0; i < l->nobjs; i++)
		if (asked[i] && obj_err[i]) {
			failed[nfailed++] = i;
			worst = io_merge_err(worst, obj_err[i]);
		}
	if (nfailed && count_stale(fs, l) + nfailed > l->ec_parity)
		rc = worst;
	else if (nfailed && mark)
		rc = mirror_mark_stale(fs, ino, l, failed, nfailed, "missed a change");
	free(failed);
	return rc;
}
