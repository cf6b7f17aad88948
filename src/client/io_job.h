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
};

/* The pieces of one range of a file, built and in flight. */
struct io_job {
	struct io_piece *pieces;
	uint32_t np;
	bool write;
	struct rpc_wait w;
};

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

/* The more telling of two errors (io.c's ranking). */
int io_merge_err(int rc, int err);
/* A piece's error as an application sees it. */
int io_app_err(int err);

/* ---- mirrored files (io_mirror.c) ---- */

/* Whether object obj of l is not to be read or written: stale in l, or marked by this client
 * since l was read. */
bool mirror_obj_stale(loom_fs *fs, const struct loom_layout *l, uint32_t obj);
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

#endif
