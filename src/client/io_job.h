/*
 * libloom's striped I/O, inside: a job is one range of a file mapped onto its objects and cut
 * into RPC-sized pieces, all in flight at once (io.c). io_mirror.c runs jobs on mirrored files.
 */
#ifndef LOOM_CLIENT_IO_JOB_H
#define LOOM_CLIENT_IO_JOB_H

#include "client/internal.h"

struct io_piece {
	struct rpc_call call;
	struct lw_ost_io body;  /* body.stripe_idx: the object's index in the layout */
	struct iovec iov[RPC_MAX_IOV];
	int iovcnt;
	_Atomic uint32_t *loss_ref; /* a write's: its OST's loss generation (ostconns.c) ... */
	uint32_t acked_gen;     /* ... as its reply arrived: the server that acknowledged it */
};

/* The pieces of one range of a file, built and in flight. */
struct io_job {
	loom_fs *fs;            /* set by io_job_submit */
	struct io_piece *pieces;
	uint32_t np, cap;
	bool write;
	struct rpc_wait w;
	uint8_t *owned;         /* a buffer the pieces point into, freed with them (parity) */
	bool bare;              /* an erasure-coded write with bytes no parity covers: a data
	                         * object that misses them loses them */
};

struct stripe_geom;

/* A job built piece by piece: io_job_alloc room for maxpieces (io_job_max_pieces of each range
 * to add), io_job_add each range, io_job_submit. io_job_add maps file range [off, off + len) of
 * geometry g onto pieces, stripe k going to object objmap[k] of l (UINT32_MAX: not sent);
 * -EOVERFLOW past the room. */
uint64_t io_job_max_pieces(const struct stripe_geom *g, uint64_t off, uint64_t len);
int io_job_alloc(struct io_job *job, uint64_t maxpieces, bool write);
int io_job_add(struct io_job *job, uint64_t ino, const struct loom_layout *l,
	       const struct stripe_geom *g, const uint32_t *objmap, uint8_t *buf, uint64_t len,
	       uint64_t off, uint32_t epoch);
void io_job_submit(loom_fs *fs, struct io_job *job, uint32_t rpc_flags);

/* Maps [off, off + len) onto pieces and submits them all, every OSS at once, each call with
 * rpc_flags. pick (one entry per stripe of a copy) names the object that serves each stripe;
 * NULL: every in-sync copy's (a write to a mirrored file). Writes are made in truncation epoch
 * `epoch`. */
int io_job_start(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const uint32_t *pick,
		 uint8_t *buf, uint64_t len, uint64_t off, bool write, uint32_t epoch,
		 uint32_t rpc_flags, struct io_job *job);
/* Waits for the job's pieces, checks their answers, frees the pieces. Returns the error an
 * application sees; obj_err (nobjs entries, 0 to start with, or NULL) gets each object's own. */
int io_job_finish(struct io_job *job, int64_t *obj_blocks, int *obj_err);

/* Whether OST ost_idx is away now (its connection being recovered): a redundant file's reads
 * start elsewhere, rather than learn it from a failed request each time. */
bool io_ost_away(loom_fs *fs, uint32_t ost_idx);
/* The more telling of two errors (io.c's ranking). */
int io_merge_err(int rc, int err);
/* A piece's error as an application sees it. */
int io_app_err(int err);

/* ---- mirrored files (io_mirror.c) ---- */

/* Whether object obj of l is not to be read or written: stale in l, or marked by this client
 * since l was read. */
bool mirror_obj_stale(loom_fs *fs, const struct loom_layout *l, uint32_t obj);
/* Marks objects objs[0..n) (indexes in l) stale on the MDS (why: for the log), and in this
 * client's registry. */
int mirror_mark_stale(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const uint32_t *objs,
		      uint32_t n, const char *why);
/* Puts what a layout read from the MDS says is stale into this client's registry: no handle
 * of it reads those objects until it holds a layout newer than that one. */
void mirror_learn(loom_fs *fs, const struct loom_layout *l);
int mirror_write(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
		 uint64_t off, uint32_t epoch, int64_t *obj_blocks);
int mirror_read(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
		uint64_t off);
/* Settles a write-behind job started on every copy with RPC_NOWAIT: as mirror_write would. */
int mirror_write_settle(loom_fs *fs, uint64_t ino, const struct loom_layout *l, struct io_job *job,
			uint8_t *buf, uint64_t len, uint64_t off, uint32_t epoch, int64_t *obj_blocks);
/* After one request to each object (sync, getattr, fallocate) with obj_err: copies that failed
 * where another copy of their stripe answered are marked stale, and the result is 0; a stripe
 * none of whose copies answered gives the error. */
int mirror_settle_each(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const bool *asked,
		       const int *obj_err);

/* ---- erasure-coded files (io_ec.c) ---- */

/* A write of [off, off + len) of an erasure-coded file: whole rows go with their parity; a part
 * of a row goes with the parity marked stale first, or, while a data object is stale (its bytes
 * live only in the parity), read, merged and written with the row's new parity. What the caller
 * knows of the rest of the rows (span, may be NULL; internal.h) makes more of them whole: the
 * bytes just before off, the file's end at off + len (zeros after it). Started with rpc_flags;
 * ec_write_settle waits and marks objects that missed the write (or tries again waiting for the
 * servers), as mirror_write_settle does. */
int ec_write_start(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf,
		   uint64_t len, uint64_t off, uint32_t epoch, const struct ec_span *span,
		   uint32_t rpc_flags, struct io_job *job);
int ec_write_settle(loom_fs *fs, uint64_t ino, const struct loom_layout *l, struct io_job *job,
		    uint8_t *buf, uint64_t len, uint64_t off, uint32_t epoch, const struct ec_span *span,
		    int64_t *obj_blocks);
int ec_write(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
	     uint64_t off, uint32_t epoch, const struct ec_span *span, int64_t *obj_blocks);
/* Marks the parity stale before a change of data that brings no new parity (a hole punched):
 * -EBUSY while a data object is stale (the parity is what holds its bytes). */
int ec_parity_stale(loom_fs *fs, uint64_t ino, const struct loom_layout *l);
/* A read: the data objects, or, for rows whose data object is stale or fails, any stripe_count
 * objects and the code. */
int ec_read(loom_fs *fs, uint64_t ino, const struct loom_layout *l, uint8_t *buf, uint64_t len,
	    uint64_t off);
/* After one request to each object (sync, getattr, fallocate) with obj_err: objects that failed
 * are marked stale (mark) while the others still give every byte, and the result is 0; else the
 * error. */
int ec_settle_each(loom_fs *fs, uint64_t ino, const struct loom_layout *l, const bool *asked,
		   const int *obj_err, bool mark);

#endif
