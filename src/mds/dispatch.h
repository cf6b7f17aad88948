/*
 * The MDS's request path, shared by its parts:
 *  - batch.c: the metadata thread: decodes requests, runs them in batches (group commit), answers
 *    once the batch is durable, keeps the reply cache and the internal work items;
 *  - handlers.c, handlers_open.c, handlers_admin.c: one function per opcode, mds_op_<HANDLER>
 *    as src/proto/ops.def names it, run in the batch's transaction;
 *  - netpath.c: requests answered on the network thread (ops.def's NET column);
 *  - housekeeping.c: the metadata thread's periodic work (sessions that ended, orphans, OSTs
 *    gone silent, the destroyer and the truncator).
 */
#ifndef LOOM_MDS_DISPATCH_H
#define LOOM_MDS_DISPATCH_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "mds/mds.h"
#include "proto/codec.h"

/* A reply waiting for its batch to commit. */
struct reply {
	int status;
	void *body;     /* malloc'd */
	uint32_t len;
	bool truncates; /* the request truncated: the body starts with the inode's lw_attr */
	uint64_t park_ino;   /* then for this truncation to be cut (0: none) */
	uint32_t park_epoch;
	uint64_t transno;    /* the change's number (0: none) */
	struct mdt_vers vers; /* the inodes it wrote, with their versions before */
	bool sync;           /* answered only once committed */
	uint64_t lease_ino;  /* a lease granted with it (lease_gen 0: none) */
	uint64_t lease_gen;
	bool lease_excl;     /* ... exclusive (LW_RPF_LEASE_EXCL) */
	uint64_t lease_wait; /* MDS_LEASE_HELD: the lease it waits on (mds_leases_park) */
	/* Data-on-MDT bytes it read or wrote, for the statistics (net/stats.h) */
	uint64_t data_read, data_written;
};

/* The reply's data bytes into the request's statistics, before it is answered. */
static inline void mds_req_note_data(struct srv_req *req, const struct reply *r)
{
	req->stat_read = r->data_read;
	req->stat_write = r->data_written;
}

/* A replay's first run, as its client kept it (replay.c): the versions it saw, and the inode
 * and objects it made, which the allocators hand out again. */
struct mds_replayed {
	uint64_t transno;                  /* its first run's: the inodes it writes get it again */
	const uint64_t *uuid;              /* its client's: the reply cache's key, whatever the
					    * connection it came on */
	const struct lw_obj_version *vers;
	uint32_t nvers;
	uint64_t want_ino;
	const struct loom_ostobj *objs;
	uint32_t nobjs;
};

/* What a crash can lose: the changes of the open transaction, at most COMMIT_MAX_CHANGES before
 * a batch of up to BATCH_MAX (batch.c) makes it due, each making one inode and at most one
 * object per OST, and each numbered once. A start that may have lost some moves the counters
 * this far forward, and replays take numbers only from that window (replay_check.c). */
#define LOST_NUMBERS_MAX 4096u

/* replay_check.c: the window of numbers replays may take back, and what they took. */
struct mds_replay_bounds;
/* Moves the MDT's counters (in t) LOST_NUMBERS_MAX forward and keeps where they were. */
int mds_replay_bounds_new(struct mdt_txn *t, uint64_t last_committed, struct mds_replay_bounds **out);
void mds_replay_bounds_free(struct mds_replay_bounds *b);
/* The last transno of the window: new changes are numbered after it. */
uint64_t mds_replay_bounds_end(const struct mds_replay_bounds *b);
/* 0 if rd's numbers are in the window, not taken, and its inode does not exist; else an errno
 * and *why, for the log. */
int mds_replay_bounds_check(struct mds_replay_bounds *b, struct mdt_txn *t, const struct mds_replayed *rd,
			    const char **why);
/* rd ran: its numbers are taken. */
void mds_replay_bounds_take(struct mds_replay_bounds *b, const struct mds_replayed *rd);

/* What the requests of a batch did that matters after it ran. */
struct batch_state {
	bool released; /* an inode was released: objects joined the destroy queue */
	bool moved_dir; /* a directory was renamed: dir_moves goes up before the replies go out */
	bool nodemap;   /* the nodemap changed: read again once committed, before the replies */
};

/* One request being run: what every handler gets. */
struct mds_op {
	struct mds *m;
	struct mdt_txn *t;   /* the request's own (child) transaction, or a read transaction */
	struct srv_req *req;
	const struct lw_mds_req *q;
	struct batch_state *bs;
	struct reply *r;
	struct timespec now;
	bool resent_done;    /* HANDLE ops: a resend whose first run is known to have happened */
	bool write;          /* t may be written (a write batch) */
	const struct mds_replayed *replay; /* a replay's first run, or NULL */
};

/* handlers*.c: the handler of every MDS and ANY row of ops.def. */
#define MDS_HANDLER_MDS(handler) int mds_op_##handler(struct mds_op *o);
#define MDS_HANDLER_ANY MDS_HANDLER_MDS
#define MDS_HANDLER_OSS(handler)
#define MDS_HANDLER_CLI(handler)
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) MDS_HANDLER_##server(handler)
#include "proto/ops.def"
#undef LW_OP
/* Runs q's handler: 0 (r filled), a negative errno, MDS_PARKED, or MDS_OPEN_STALE. */
int mds_op_run(struct mds_op *o);

int mds_reply_alloc(struct reply *r, size_t len);
/* MDS_WALK in t, or in read transactions of its own when t is NULL (netpath.c). */
int mds_walk(struct mds *m, struct srv_req *req, const struct lw_mds_req *q, struct mdt_txn *t,
	     struct reply *r);
int mds_reply_copy(struct reply *r, const void *p, size_t len);
/* A fixed struct followed by an optional layout, then tail_len bytes of tail. */
int mds_reply_with_layout_tail(struct reply *r, const void *fixed, size_t flen,
			       const struct loom_layout *l, const void *tail, size_t tail_len);
/* The session a request belongs to (sessions.c); 0 only without memory. */
uint64_t mds_sid_of(struct mds *m, const struct srv_req *req);

/* A conditional open whose conditions no longer hold: answered (the reply says LW_OPR_STALE),
 * nothing opened. */
#define MDS_OPEN_STALE 2
/* MDS_OPEN for a handle made already: the checks, the layout, the Data-on-MDT bytes, O_TRUNC
 * unless skip_trunc. Returns MDS_OPEN_STALE (a reply, and no open: the handle is to be dropped)
 * for a conditional open whose conditions failed. */
int mds_open_with_handle(struct mds *m, struct mdt_txn *t, const struct lw_mds_req *q,
			 struct timespec now, uint64_t handle, bool skip_trunc, struct reply *r);

/* A resent MDS_CREATE answered from the reply cache: with LW_CR_OPEN, a handle for the reply
 * when the first run's is gone (an MDS restart). 0 or the errno to answer with. */
int mds_create_resent(struct mds *m, struct mdt_txn *t, const struct srv_req *req,
		      const struct lw_mds_req *q, void *body, uint32_t len);

/* batch.c */
/* Whether the calling thread is the metadata thread. */
bool mds_on_metadata_thread(void);
/* A request the network thread hands to the metadata thread after all (net_read). */
#define MDS_ELSEWHERE 5
/* -ENOENT because an inode the request names by number is gone becomes -ESTALE. */
int mds_stale_if_gone(struct mdt_txn *t, int rc, uint64_t ino);
/* Decodes req into q (root squash applied): 0 or the errno to answer with. */
int mds_decode_req(struct mds *m, const struct srv_req *req, struct lw_mds_req *q);

/* nodemap.c: the nodemap from the MDT at start (0 or -errno), and again after a commit that
 * changed it; what a node's request may do and claim (0, or the errno to answer with). */
int mds_nodemap_load(struct mds *m);
void mds_nodemap_reload(struct mds *m);
int mds_nodemap_apply(struct mds *m, const struct srv_req *req, struct lw_mds_req *q);
/* Runs one request in txn (in a child transaction of its own when write). */
void mds_run_one(struct mds *m, struct mdt_txn *txn, bool write, struct srv_req *req,
		 struct batch_state *bs, struct reply *r);
/* mds_run_one for a replay of req's first run (replay.c). */
void mds_run_as(struct mds *m, struct mdt_txn *txn, bool write, struct srv_req *req,
		const struct mds_replayed *replay, struct batch_state *bs, struct reply *r);

/* commit.c */
/* At start: the last transno the MDT's disk holds. */
int mds_commit_start(struct mds *m);
/* The open write transaction, begun if there is none. */
int mds_commit_txn(struct mds *m, struct mdt_txn **t);
/* The next change's number; mds_commit_unused gives it back when the change failed. */
uint64_t mds_commit_next(struct mds *m);
void mds_commit_unused(struct mds *m, uint64_t transno);
/* A change was applied in the open transaction. */
void mds_commit_applied(struct mds *m);
/* The MDS's own work between batches, in a child of the open transaction: committed with it,
 * when that is due, not at once (what answered changes wait for is not hurried by it). _end
 * commits the child (or aborts it, when rc is not 0) and returns rc or the child's commit's. */
int mds_commit_work_begin(struct mds *m, struct mdt_txn **child);
int mds_commit_work_end(struct mds *m, struct mdt_txn *child, int rc);
/* Commits the open transaction (0 with none). On failure, with `answered` changes of it already
 * answered, the MDS stops (they cannot be taken back); else the errno, and its changes are gone. */
int mds_commit_flush(struct mds *m, uint32_t answered);
void mds_commit_abort(struct mds *m, uint32_t answered);
/* Before a write transaction of another kind (housekeeping): LMDB has one writer at a time. */
int mds_commit_before_write(struct mds *m);
/* Whether the open transaction is to be committed now; how long the loop may wait for requests
 * before it is (idle_ms without one). */
bool mds_commit_due(const struct mds *m);
int mds_commit_wait_ms(const struct mds *m, int idle_ms);


/* housekeeping.c: the metadata thread's periodic work. */
void mds_periodic(struct mds *m);

#endif
