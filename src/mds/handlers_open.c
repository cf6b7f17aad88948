/*
 * The MDS's handlers of files' data: creates and opens (the handles of sessions.c), closes and
 * size reports, layouts, Data-on-MDT reads, and the swap of a migration.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/stripe.h"
#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

static int reply_with_layout(struct reply *r, const void *fixed, size_t flen,
			     const struct loom_layout *l)
{
	return mds_reply_with_layout_tail(r, fixed, flen, l, NULL, 0);
}

/* The client's uuid: a replay's, else its session's (NULL for an anonymous one). */
static const uint64_t *client_uuid(struct mds_op *o)
{
	struct mds_session *s;

	if (o->replay)
		return o->replay->uuid;
	s = mds_session_of(o->m, o->req->conn_id);
	return s && (s->uuid[0] || s->uuid[1]) ? s->uuid : NULL;
}

/* MDS_INOS: numbers ahead for creates the client answers itself (LW_CR_INO). */
int mds_op_inos(struct mds_op *o)
{
	struct mds_session *s = mds_session_of(o->m, o->req->conn_id);
	struct lw_inos_rep rep = { .count = o->q->u.inos.count };
	int rc;

	if (!s || (!s->uuid[0] && !s->uuid[1]))
		return -EINVAL; /* nobody to keep them for */
	/* The room of their creates is kept for them; near a full MDT (under twice the reserve
	 * beyond that) none are handed out, and creates are answered by the MDS, where ENOSPC can
	 * be said in time (mdt_txn_promise). */
	rc = mdt_client_inos_grant(o->t, s->uuid, rep.count, &rep.first);
	return rc ? rc : mds_reply_copy(o->r, &rep, sizeof(rep));
}

/* LW_CR_INO: the number the client chose, if it is one it was handed and did not use yet, for the
 * inode allocator to take (as a replay's). */
static int create_own_ino(struct mds_op *o, uint64_t ino)
{
	const uint64_t *uuid = client_uuid(o);
	struct lw_attr attr;
	int rc;

	if (!uuid)
		return -EINVAL;
	if (mdt_getattr(o->t, ino, &attr) != -ENOENT)
		return -EINVAL;
	rc = mdt_client_ino_take(o->t, uuid, ino);
	if (rc == 0)
		o->r->vers.want_ino = ino;
	return rc;
}

int mds_op_create(struct mds_op *o)
{
	struct mds *m = o->m;
	struct mdt_txn *t = o->t;
	const struct lw_mds_req *q = o->q;
	struct timespec now = o->now;
	struct reply *r = o->r;
	struct lw_create_rep rep = { 0 };
	struct loom_layout *layout = NULL;
	bool created = false;
	int rc;

	if (q->u.create.f.flags & LW_CR_INO) {
		rc = create_own_ino(o, q->u.create.ino);
		if (rc)
			return rc;
	}
	if (q->u.create.f.flags & LW_CR_TMPFILE) {
		/* Opened below in this transaction (the decoder wants LW_CR_OPEN): from its birth
		 * a handle of this session holds it, and the session's end releases it. */
		rc = mdt_create_tmpfile(t, &q->cred, q->u.create.f.parent, q->u.create.f.mode,
					q->u.create.has_layout ? &q->u.create.layout : NULL, now, &rep.attr,
					&layout);
		created = rc == 0;
	} else {
		rc = mdt_create(t, &q->cred, q->u.create.f.parent, q->u.create.name.s,
				q->u.create.name.len, q->u.create.f.mode, q->u.create.f.rdev,
				(q->u.create.f.flags & LW_CR_EXCL) != 0,
				q->u.create.has_layout ? &q->u.create.layout : NULL, now, &rep.attr,
				&layout, &created);
	}
	if (rc)
		goto out;
	if (created)
		rep.flags |= LW_CRR_CREATED;
	if (q->u.create.f.flags & LW_CR_OPEN) {
		if (!created) {
			/* Opening an existing file: the same checks (and O_TRUNC) as a plain open. */
			free(layout);
			layout = NULL;
			rc = mdt_open(t, &q->cred, rep.attr.ino, q->u.create.f.open_flags, now, &rep.attr,
				      &layout);
			r->truncates = (q->u.create.f.open_flags & O_TRUNC) != 0;
			if (rc)
				goto out;
		}
		rc = mds_handle_open(m, rep.attr.ino, mds_sid_of(m, o->req),
				     (q->u.create.f.open_flags & O_ACCMODE) != O_RDONLY, o->req->hdr.req_id,
				     &rep.handle);
		if (rc)
			goto out;
		/* A mirrored file's writer: its copies may differ until it closes (mirror.c). */
		if ((q->u.create.f.open_flags & O_ACCMODE) != O_RDONLY)
			rc = mdt_mirror_write_begin(t, rep.attr.ino);
		if (rc)
			goto out;
	}
	rep.has_layout = layout != NULL;
	rc = reply_with_layout(r, &rep, sizeof(rep), layout);
out:
	free(layout);
	return rc;
}

/*
 * A resent MDS_CREATE with LW_CR_OPEN, answered from the reply cache: the cached reply names the
 * handle its first run made. This MDS still has it (found by req_id), unless it restarted since:
 * then that handle is gone and its number may be another's now, so the file is opened again, as
 * a resent MDS_OPEN would be (ops.def: HANDLE), and the reply names the new handle. An inode
 * released meanwhile is -ESTALE, as for MDS_OPEN. body is the cached reply, changed in place.
 */
int mds_create_resent(struct mds *m, struct mdt_txn *t, const struct srv_req *req,
		      const struct lw_mds_req *q, void *body, uint32_t len)
{
	uint64_t sid = mds_sid_of(m, req), handle;
	struct lw_create_rep rep;
	struct lw_attr attr;
	int rc;

	if (!(q->u.create.f.flags & LW_CR_OPEN) || len < sizeof(rep))
		return 0;
	memcpy(&rep, body, sizeof(rep));
	if (!rep.handle || mds_handle_find(m, sid, rep.attr.ino, req->hdr.req_id, &handle) == 0)
		return 0;
	rc = mdt_getattr(t, rep.attr.ino, &attr);
	if (rc)
		return rc == -ENOENT ? -ESTALE : rc;
	rc = mds_handle_open(m, rep.attr.ino, sid, (q->u.create.f.open_flags & O_ACCMODE) != O_RDONLY,
			     req->hdr.req_id, &handle);
	if (rc == 0 && (q->u.create.f.open_flags & O_ACCMODE) != O_RDONLY)
		rc = mdt_mirror_write_begin(t, rep.attr.ino);
	if (rc)
		return rc;
	rep.handle = handle;
	memcpy(body, &rep, sizeof(rep));
	return 0;
}

/* A conditional open whose conditions no longer hold: MDS_OPEN_STALE with the reply built
 * (nothing was done); 0 when it may go ahead; an error of the inode. */
static int open_conditions(struct mdt_txn *t, const struct lw_mds_req *q, struct lw_open_rep *rep,
			   struct reply *r)
{
	const struct lw_open_req *o = &q->u.open;
	int rc;

	if (!(o->flags & (LW_OPQ_NAMES | LW_OPQ_DIR_MOVES)))
		return 0;
	rc = mdt_getattr(t, o->ino, &rep->attr);
	if (rc)
		return rc;
	if (!((o->flags & LW_OPQ_NAMES) && rep->attr.name_version != o->names) &&
	    !((o->flags & LW_OPQ_DIR_MOVES) && rep->dir_moves != o->dir_moves))
		return 0;
	rep->handle = 0;
	rep->flags = LW_OPR_STALE;
	rc = mds_reply_copy(r, rep, sizeof(*rep));
	return rc ? rc : MDS_OPEN_STALE;
}

int mds_open_with_handle(struct mds *m, struct mdt_txn *t, const struct lw_mds_req *q,
			 struct timespec now, uint64_t handle, bool skip_trunc, struct reply *r)
{
	struct lw_open_rep rep = { 0 };
	struct loom_layout *layout = NULL;
	int rc;

	const void *dom = NULL;
	uint32_t dom_len = 0;

	rep.handle = handle;
	rep.dir_moves = atomic_load(&m->dir_moves);
	rc = open_conditions(t, q, &rep, r);
	if (rc)
		return rc;
	rc = mdt_open(t, &q->cred, q->u.open.ino,
		      skip_trunc ? q->u.open.open_flags & ~O_TRUNC : q->u.open.open_flags, now, &rep.attr,
		      &layout);
	/* Data-on-MDT: the file's first bytes travel with the open, so a small file costs one
	 * round trip. */
	if (rc == 0 && layout && layout->dom_size)
		rc = mdt_dom_peek(t, q->u.open.ino, &dom, &dom_len);
	if (rc == 0) {
		rep.has_layout = layout != NULL;
		rep.dom_len = dom_len;
		rc = mds_reply_with_layout_tail(r, &rep, sizeof(rep), layout, dom, dom_len);
		r->data_read = dom_len;
	}
	free(layout);
	return rc;
}

/* An inode lease with a read-only open that asked (LW_OPQ_LEASE; sent to the metadata thread,
 * where every change that would break it runs, so the open's answer and the grant are one step):
 * the client may then open the file again for reading, as this open's caller, without asking
 * (leases.c). Not while anyone has it open for writing: its size and data are moving. */
static void open_lease(struct mds_op *o)
{
	struct lw_open_rep rep;

	if (o->r->len < sizeof(rep))
		return;
	memcpy(&rep, o->r->body, sizeof(rep));
	/* Nor on a file already unlinked (kept by someone's handle: its last close frees it with no
	 * recall), nor after a directory's rename in this batch (the reply's dir_moves is older than
	 * what the batch's replies will say). */
	if (!S_ISREG(rep.attr.mode) || rep.attr.nlink == 0 || o->bs->moved_dir ||
	    mds_ino_has_writer(o->m, rep.attr.ino))
		return;
	o->r->lease_gen = mds_lease_grant(o->m, o->req, rep.attr.ino, true, NULL);
	o->r->lease_ino = o->r->lease_gen ? rep.attr.ino : 0;
}

/*
 * The handle is made before the open reads the inode: see netpath.c's open. A resend (ops.def:
 * HANDLE) gets the handle its first run made, if this MDS still has it, and a truncation is done
 * once: not again when the first run's handle is found, nor when the reply cache says the first
 * run truncated (then the MDS restarted in between and the handle is gone: a new one is made).
 */
int mds_op_open(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	uint64_t sid = mds_sid_of(o->m, o->req), handle;
	bool found = false;
	int rc;

	if (o->req->hdr.flags & LW_F_RESENT)
		found = mds_handle_find(o->m, sid, q->u.open.ino, o->req->hdr.req_id, &handle) == 0;
	if (!found) {
		rc = mds_handle_open(o->m, q->u.open.ino, sid, (q->u.open.open_flags & O_ACCMODE) != O_RDONLY,
				     o->req->hdr.req_id, &handle);
		if (rc)
			return rc;
	}
	rc = mds_open_with_handle(o->m, o->t, q, o->now, handle, found || o->resent_done, o->r);
	/* A mirrored file's writer: its copies may differ until it closes (mirror.c). */
	if (rc == 0 && !found && (q->u.open.open_flags & O_ACCMODE) != O_RDONLY)
		rc = mdt_mirror_write_begin(o->t, q->u.open.ino);
	if (rc && found)
		/* The first run's handle, which its client never learned of, goes too. */
		mds_handle_close(o->m, o->t, handle, q->u.open.ino, sid, &o->bs->released);
	else if (rc)
		mds_handle_forget(o->m, handle);
	if (rc == MDS_OPEN_STALE)
		return 0; /* answered: nothing was opened */
	o->r->truncates = rc == 0 && !found && !o->resent_done && (q->u.open.open_flags & O_TRUNC);
	if (rc == 0 && (q->u.open.flags & LW_OPQ_LEASE))
		open_lease(o);
	return rc;
}

/* The Data-on-MDT parts of a size report, written in one go; *end gets where the last ends,
 * *bytes how many they hold. */
static int dom_write_parts(struct mdt_txn *t, const struct lw_mds_req *q, uint64_t *end, uint64_t *bytes)
{
	uint32_t n = q->u.close.dom_parts;
	struct mdt_dom_extent *ext = calloc(n, sizeof(*ext));
	size_t pos = 0;
	int rc;

	if (!ext)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct lw_dom_part p;

		lw_dom_part_at(q, &pos, &p, &ext[i].data);
		ext[i].off = p.offset;
		ext[i].len = p.len;
		*end = p.offset + p.len;
		*bytes += p.len;
	}
	rc = mdt_dom_write_parts(t, q->u.close.ino, ext, n);
	free(ext);
	return rc;
}

/* CLOSE and SIZE_UPDATE: a size report (and Data-on-MDT bytes), and for CLOSE the handle's end. */
static int exec_close(struct mds *m, struct mdt_txn *t, struct srv_req *req,
		      const struct lw_mds_req *q, struct batch_state *bs, struct reply *r)
{
	const struct lw_close_req *c = &q->u.close;
	struct timespec mt = { .tv_sec = c->mtime, .tv_nsec = c->mtime_ns };
	struct lw_attr attr = { 0 };
	uint64_t carried = 0;
	int rc;

	/* Only the connection that opened a handle reports through it. A handle this MDS does not
	 * know was opened before a restart and is taken on trust. */
	rc = mds_handle_check(m, c->handle, c->ino, mds_sid_of(m, req));
	if (rc)
		return rc;
	/* Data-on-MDT bytes land with the size that covers them, in one transaction; whatever a
	 * late report wrote past the size (a truncation came first) is cut again. Bytes written
	 * are a change of the data, whatever the flags say. */
	if (c->flags & LW_CL_DOM)
		rc = dom_write_parts(t, q, &carried, &r->data_written);
	if (rc == 0 && (c->flags & ~LW_CL_DOM))
		rc = mdt_size_update(t, c->ino, (c->flags & ~LW_CL_DOM) | (c->flags & LW_CL_DOM ? LW_CL_DATA : 0),
				     c->size, c->trunc_epoch, carried, mt, c->blocks, &attr);
	else if (rc == 0)
		rc = mdt_getattr(t, c->ino, &attr);
	if (rc == 0 && (c->flags & LW_CL_DOM))
		rc = mdt_dom_cut(t, c->ino, attr.size);
	if (q->op == LW_OP_MDS_CLOSE) {
		/* The file may be gone (unlinked and released by another client's close): the close
		 * itself still succeeds, as close(2) does. */
		if (rc == -ENOENT)
			rc = 0;
		if (rc == 0)
			rc = mds_handle_close(m, t, c->handle, c->ino, mds_sid_of(m, req), &bs->released);
	}
	if (rc)
		return rc;
	return mds_reply_copy(r, &attr, sizeof(attr));
}

int mds_op_close(struct mds_op *o)
{
	return exec_close(o->m, o->t, o->req, o->q, o->bs, o->r);
}

int mds_op_size_update(struct mds_op *o)
{
	return exec_close(o->m, o->t, o->req, o->q, o->bs, o->r);
}

int mds_op_dom_read(struct mds_op *o)
{
	struct lw_blob_rep rep = { 0 };
	const void *data;
	int rc = mdt_dom_read(o->t, o->q->u.ino.ino, &data, &rep.len);

	o->r->data_read = rc ? 0 : rep.len;
	return rc ? rc : mds_reply_with_layout_tail(o->r, &rep, sizeof(rep), NULL, data, rep.len);
}

int mds_op_getlayout(struct mds_op *o)
{
	struct loom_layout *layout = NULL;
	int rc = mdt_getlayout(o->t, o->q->u.ino.ino, &layout);

	if (rc == 0)
		rc = reply_with_layout(o->r, NULL, 0, layout);
	free(layout);
	return rc;
}

int mds_op_setlayout(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct loom_layout *layout = NULL;
	struct lw_attr attr;
	int rc;

	/* A file open elsewhere may hold written data its size does not show yet: laying it out
	 * again would destroy that data. */
	if (mds_ino_is_open(o->m, q->u.setlayout.f.ino) && mdt_getattr(o->t, q->u.setlayout.f.ino, &attr) == 0 &&
	    S_ISREG(attr.mode))
		return -EBUSY;
	rc = mdt_setlayout(o->t, &q->cred, q->u.setlayout.f.ino, &q->u.setlayout.layout,
			   q->u.setlayout.f.flags, &layout);
	if (rc == 0) {
		rc = reply_with_layout(o->r, NULL, 0, layout);
		o->bs->released = true; /* old objects may have joined the destroy queue */
	}
	free(layout);
	return rc;
}

/* MDS_MIRROR: a holder of the file says which copies missed a write or hold bad bytes. */
int mds_op_mirror(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	uint32_t n = q->u.mirror.f.count;
	struct loom_layout *layout = NULL;
	struct loom_ostobj *objs;
	int rc;

	if (q->u.mirror.f.cmd != LW_MIRROR_STALE) {
		struct lw_attr attr;
		struct lw_ostobj obj = { 0 };

		rc = mdt_getattr(o->t, q->u.mirror.f.ino, &attr);
		if (rc)
			return rc;
		if (q->cred.uid != 0 && q->cred.uid != attr.uid)
			return -EPERM;
		if (q->u.mirror.f.cmd == LW_MIRROR_EXTEND || q->u.mirror.f.cmd == LW_MIRROR_SPLIT) {
			/* A reader holding the old layout would read a split copy's objects after
			 * their destruction (as holes): not while the file is open anywhere. */
			if (q->u.mirror.f.cmd == LW_MIRROR_SPLIT && mds_ino_is_open(o->m, q->u.mirror.f.ino))
				return -EBUSY;
			memcpy(&obj, q->u.mirror.objs, q->u.mirror.f.count ? sizeof(obj) : 0);
			rc = q->u.mirror.f.cmd == LW_MIRROR_EXTEND ?
			     mdt_mirror_extend(o->t, q->u.mirror.f.ino, &layout) :
			     mdt_mirror_split(o->t, q->u.mirror.f.ino, obj.ost_idx, obj.objid, &layout);
			if (rc == 0) {
				mds_resync_now(o->m, q->u.mirror.f.ino);
				o->bs->released = true; /* a split's objects joined the destroy queue */
				rc = reply_with_layout(o->r, NULL, 0, layout);
			}
			free(layout);
			return rc;
		}
		rc = mdt_getlayout(o->t, q->u.mirror.f.ino, &layout);
		if (rc == 0 && !layout_redundant(layout))
			rc = -EINVAL;
		if (rc == 0)
			rc = mds_resync_now(o->m, q->u.mirror.f.ino);
		if (rc == 0)
			rc = reply_with_layout(o->r, NULL, 0, layout);
		free(layout);
		return rc == -ENODATA ? -EINVAL : rc;
	}
	if (!mds_session_holds(o->m, mds_sid_of(o->m, o->req), q->u.mirror.f.ino, 0, false))
		return -EBADF;
	objs = malloc(n * sizeof(*objs));
	if (!objs)
		return -ENOMEM;
	memcpy(objs, q->u.mirror.objs, n * sizeof(*objs)); /* lw_ostobj's image */
	rc = mdt_mirror_stale(o->t, q->u.mirror.f.ino, objs, n, &layout);
	free(objs);
	if (rc == 0)
		mds_resync_now(o->m, 0); /* for when its OSTs answer */
	if (rc == 0)
		rc = reply_with_layout(o->r, NULL, 0, layout);
	free(layout);
	return rc;
}

int mds_op_swap_layouts(struct mds_op *o)
{
	const struct lw_swap_req *w = &o->q->u.swap;
	int rc;

	/* A writer's data may not have reached the size yet, and would land in the old objects. */
	if (mds_ino_has_writer(o->m, w->ino) || mds_ino_has_writer(o->m, w->tmp))
		return -EBUSY;
	rc = mdt_swap_layouts(o->t, &o->q->cred, w->ino, w->tmp, w->size, w->mtime, w->mtime_ns, o->now);
	if (rc == 0)
		mds_swap_done(o->m, w->ino, w->tmp);
	return rc;
}

/* MDS_WALK comes here while changes answered are not committed yet (netpath.c). */
int mds_op_walk(struct mds_op *o)
{
	return mds_walk(o->m, o->req, o->q, o->t, o->r);
}
