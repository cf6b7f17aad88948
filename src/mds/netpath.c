/*
 * Requests answered on the network thread that received them, without the hand-over to the
 * metadata thread (a thread wake-up costs as much as a lookup): ops.def's NET column names the
 * path of each. They see everything a client was told had happened: while a change that was
 * answered is not committed yet (commit.c), every request goes to the metadata thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

/* Changes answered but not committed are in the metadata thread's transaction only, and while
 * replays are awaited the namespace on disk is not yet what clients were told: the namespace's
 * paths (read, open, walk) leave their requests to the metadata thread until then. */
static bool settled(struct mds *m)
{
	return !atomic_load(&m->commit.pending) && !atomic_load(&m->replay.recovering);
}

/* NET read: a request that only reads the MDT, and nothing of the MDS's memory (sessions,
 * handles, locks, the OST table), at once in a read transaction of its own. */
static bool net_read(struct mds *m, struct srv_req *req)
{
	struct batch_state bs = { 0 };
	struct reply r = { 0 };
	struct mdt_txn *t;
	int rc;

	if (!settled(m))
		return false;
	rc = mdt_txn_begin(m->store, false, &t);
	if (rc) {
		mds_reply(m, req, rc, NULL, 0, 0, NULL);
		return true;
	}
	mds_run_one(m, t, false, req, &bs, &r);
	mdt_txn_abort(t);
	if (r.status == MDS_ELSEWHERE) {
		free(r.body);
		return false;
	}
	mds_req_note_data(req, &r);
	mds_reply(m, req, r.status, r.body, r.len, 0, NULL);
	free(r.body);
	return true;
}

/* A failed open on the network thread leaves its handle to the metadata thread: if the inode was
 * unlinked meanwhile, this handle kept it, and its end must release it. */
static void drop_handle_later(struct mds *m, uint64_t handle, uint64_t ino, uint64_t sid)
{
	struct mds_work *item = mds_work_new(MDS_WORK_DROP_HANDLE, 0, 0);

	if (!item) {
		log_err("out of memory: handle %llu of a failed open stays until its session ends",
			(unsigned long long)handle);
		return;
	}
	item->handle = (struct mds_handle_ref){ handle, ino, sid };
	reqq_push(&m->queue, &item->qitem);
}

/* The handle of a read-only open: the one a resend's first run made, or a new one. */
static int open_handle(struct mds *m, const struct srv_req *req, uint64_t ino, uint64_t sid,
		       uint64_t *handle)
{
	if ((req->hdr.flags & LW_F_RESENT) && mds_handle_find(m, sid, ino, req->hdr.req_id, handle) == 0)
		return 0;
	return mds_handle_open_shared(m, ino, sid, req->hdr.req_id, handle);
}

/*
 * An open for reading, on the network thread (np.load opens thousands of files a second; the
 * hand-over to the metadata thread costs as much as the open). It only reads the MDT, but makes
 * a handle, which keeps an unlinked inode alive. The handle is made first, under sess_lock,
 * and only then does the read transaction begin, so that either the metadata thread sees the
 * handle before it decides to release the inode, or the release is decided before (then the
 * inode is marked releasing until its commit, and the open goes to the metadata thread), or it
 * is committed before this transaction begins and the open finds the inode gone.
 * A resend gets the handle its first run made, if there is one (ops.def: HANDLE).
 * Returns false when the request must go to the metadata thread.
 */
static bool net_open(struct mds *m, struct srv_req *req)
{
	struct reply r = { 0 };
	struct lw_mds_req q;
	struct mdt_txn *t;
	uint64_t sid, handle;
	int rc;

	if (!settled(m) || mds_decode_req(m, req, &q) != 0)
		return false; /* answered there, with the same error */
	/* A lease is granted on the metadata thread only (handlers_open.c). */
	if ((q.u.open.open_flags & O_ACCMODE) != O_RDONLY || (q.u.open.open_flags & O_TRUNC) ||
	    (q.u.open.flags & LW_OPQ_LEASE))
		return false;
	sid = mds_session_sid(m, req->conn_id);
	if (!sid || open_handle(m, req, q.u.open.ino, sid, &handle) != 0)
		return false;
	rc = mdt_txn_begin(m->store, false, &t);
	if (rc == 0) {
		rc = mds_open_with_handle(m, t, &q, clock_real(), handle, false, &r);
		if (rc == -ENOENT)
			rc = mds_stale_if_gone(t, rc, q.u.open.ino);
		mdt_txn_abort(t);
	}
	if (rc)
		drop_handle_later(m, handle, q.u.open.ino, sid);
	if (rc == MDS_OPEN_STALE)
		rc = 0; /* answered: nothing was opened */
	mds_req_note_data(req, &r);
	mds_reply(m, req, rc, r.body, r.len, 0, NULL);
	free(r.body);
	return true;
}

/* The open of MDS_WALK's LW_WALK_OPEN, as net_open's: the handle first, then a read transaction
 * of its own (or t, the metadata thread's, which sees the handle made). Fills r with MDS_OPEN's
 * reply, or returns an error (the client then opens by itself, and gets the error the metadata
 * thread gives). */
static int walk_open(struct mds *m, struct srv_req *req, const struct lw_mds_req *wq, uint64_t ino,
		     struct mdt_txn *given, struct reply *r)
{
	struct lw_mds_req q = { .op = LW_OP_MDS_OPEN, .cred = wq->cred };
	struct mdt_txn *t = given;
	uint64_t sid, handle;
	int rc = 0;

	q.u.open.ino = ino;
	q.u.open.open_flags = wq->u.walk.f.open_flags;
	sid = mds_session_sid(m, req->conn_id);
	if (!sid || open_handle(m, req, ino, sid, &handle) != 0)
		return -EAGAIN;
	if (!given)
		rc = mdt_txn_begin(m->store, false, &t);
	if (rc == 0) {
		rc = mds_open_with_handle(m, t, &q, clock_real(), handle, false, r);
		if (!given)
			mdt_txn_abort(t);
	}
	if (rc) {
		drop_handle_later(m, handle, ino, sid);
		free(r->body);
		r->body = NULL;
		r->len = 0;
	}
	return rc;
}

/* A resent walk whose first run opened the file its path led to then, when it opens another now
 * (ino) or none (0): the path leads elsewhere (a rename came in between), and the first run's
 * handle, which its client never learned of, goes, or it would hold that file open (alive once
 * unlinked, -EBUSY to MDS_SETLAYOUT) until the session ends. */
static void drop_first_run_elsewhere(struct mds *m, const struct srv_req *req, uint64_t ino)
{
	uint64_t sid = mds_session_sid(m, req->conn_id), handle, other;

	if (sid && mds_handle_find_other(m, sid, ino, req->hdr.req_id, &handle, &other) == 0)
		drop_handle_later(m, handle, other, sid);
}

/*
 * MDS_WALK, a read, and with LW_WALK_OPEN an open for reading, in t (the metadata thread's, which
 * holds changes answered and not committed yet) or, when t is NULL, in read transactions of its
 * own (the network thread's). Fills r.
 */
struct walk_held {
	struct mds *m;
	const struct srv_req *req;
};

static bool walk_held(void *arg, uint64_t dir)
{
	struct walk_held *h = arg;

	return mds_leases_excl_other(h->m, h->req, dir);
}

int mds_walk(struct mds *m, struct srv_req *req, const struct lw_mds_req *q, struct mdt_txn *t,
	     struct reply *r)
{
	struct lw_walk_rep wr = { 0 };
	struct reply opened = { 0 };
	struct mdt_txn *own = NULL;
	struct walk_held held = { m, req };
	struct mdt_walk_watch watch = { walk_held, &held };
	const char *rest;
	int rc = 0;

	if (!t) {
		rc = mdt_txn_begin(m->store, false, &own);
		if (rc)
			return rc;
	}
	/* On the network thread, a directory on the path that another session leases exclusively
	 * sends the walk to the metadata thread (-EAGAIN), which waits for that lease
	 * (mds_leases_block); there, the walk has waited for every one already. */
	rc = mdt_walk(t ? t : own, &q->cred, q->u.walk.path, q->u.walk.f.pathlen,
		      q->u.walk.f.flags & LW_WALK_PARENT, t ? NULL : &watch, &wr.attr, &wr.consumed);
	if (own)
		mdt_txn_abort(own);
	if (rc)
		return rc;
	rest = q->u.walk.path + wr.consumed;
	while (rest < q->u.walk.path + q->u.walk.f.pathlen && *rest == '/')
		rest++;
	if ((q->u.walk.f.flags & LW_WALK_OPEN) && rest == q->u.walk.path + q->u.walk.f.pathlen &&
	    (q->u.walk.f.open_flags & O_ACCMODE) == O_RDONLY && !(q->u.walk.f.open_flags & O_TRUNC) &&
	    (S_ISREG(wr.attr.mode) || S_ISDIR(wr.attr.mode)) &&
	    walk_open(m, req, q, wr.attr.ino, t, &opened) == 0)
		wr.flags |= LW_WALKR_OPENED;
	if (req->hdr.flags & LW_F_RESENT)
		drop_first_run_elsewhere(m, req, (wr.flags & LW_WALKR_OPENED) ? wr.attr.ino : 0);
	r->data_read = opened.data_read;
	rc = mds_reply_alloc(r, sizeof(wr) + opened.len);
	if (rc == 0) {
		memcpy(r->body, &wr, sizeof(wr));
		if (opened.len)
			memcpy((uint8_t *)r->body + sizeof(wr), opened.body, opened.len);
	}
	free(opened.body);
	return rc;
}

/* NET walk: MDS_WALK on the network thread. */
static bool net_walk(struct mds *m, struct srv_req *req)
{
	struct reply r = { 0 };
	struct lw_mds_req q;
	int rc;

	if (!settled(m))
		return false;
	rc = mds_decode_req(m, req, &q);
	if (rc == 0)
		rc = mds_walk(m, req, &q, NULL, &r);
	/* Through a directory another session leases exclusively: the metadata thread's, which
	 * waits for it there (leases.c). */
	if (rc == -EAGAIN)
		return false;
	mds_req_note_data(req, &r);
	mds_reply(m, req, rc, r.body, r.len, 0, NULL);
	free(r.body);
	return true;
}

/* NET repl: a standby's pulls, always here (repl.c). */
static bool net_repl(struct mds *m, struct srv_req *req)
{
	if (req->hdr.opcode == LW_OP_MDS_REPL_COPY)
		mds_repl_copy(m, req);
	else
		mds_repl_pull(m, req);
	return true;
}

/* NET params: GET_PARAM and SET_PARAM, from what the metadata thread published (status.c): an
 * MDS whose metadata thread is busy or stuck still shows its statistics. */
static bool net_params(struct mds *m, struct srv_req *req)
{
	struct lw_mds_req q;
	int rc = mds_decode_req(m, req, &q); /* well formed, and the file system key's (ADMIN) */

	if (rc)
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
	else
		mds_params_answer(m, req);
	return true;
}

/* NET none: the metadata thread's. */
static bool net_none(struct mds *m, struct srv_req *req)
{
	(void)m;
	(void)req;
	return false;
}

#define NET_MDS(name, net)  \
	case LW_OP_##name:  \
		return net_##net(m, req);
#define NET_ANY NET_MDS
#define NET_OSS(name, net)
#define NET_CLI(name, net)

/* Answers req here if its row's NET path takes it; false: the metadata thread's. */
static bool answer_here(struct mds *m, struct srv_req *req)
{
	switch (req->hdr.opcode) {
#define LW_OP(name, value, server, resend, flags, rq, rep, handler, net) NET_##server(name, net)
#include "proto/ops.def"
#undef LW_OP
	default:
		return false;
	}
}

void mds_deliver(struct srv_req *req, void *arg)
{
	struct mds *m = arg;

	mds_coord_guard(m->repl.coord); /* a deposed MDS answers nothing */
	req->stat_target = 0; /* the statistics' target: MDT0000 */
	if (!answer_here(m, req))
		reqq_push(&m->queue, &req->qitem);
}

void mds_disconnect(uint64_t conn_id, void *arg)
{
	struct mds *m = arg;
	struct mds_work *item = mds_work_new(MDS_WORK_DISCONNECT, 0, 0);

	if (!item) {
		log_err("out of memory: the open handles of connection %llu stay until restart",
			(unsigned long long)conn_id);
		return;
	}
	item->conn_id = conn_id;
	reqq_push(&m->queue, &item->qitem);
}
