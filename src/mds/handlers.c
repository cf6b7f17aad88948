/*
 * The MDS's handlers of the namespace and attributes, one per opcode (ops.def's HANDLER), and the
 * switch that ops.def generates over them. Each runs in its request's transaction and fills the
 * reply; the batch commits before anything is answered (batch.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

#define READDIR_MAX (128u << 10)

int mds_reply_alloc(struct reply *r, size_t len)
{
	r->body = malloc(len ? len : 1);
	if (!r->body)
		return -ENOMEM;
	r->len = (uint32_t)len;
	return 0;
}

int mds_reply_copy(struct reply *r, const void *p, size_t len)
{
	int rc = mds_reply_alloc(r, len);
	if (rc == 0)
		memcpy(r->body, p, len);
	return rc;
}

/* A fixed struct followed by an optional layout, then tail_len bytes of tail. */
int mds_reply_with_layout_tail(struct reply *r, const void *fixed, size_t flen,
				  const struct loom_layout *l, const void *tail, size_t tail_len)
{
	size_t len = flen + (l ? lw_layout_size(l->nobjs) : 0) + tail_len;
	struct lw_wr w;
	int rc = mds_reply_alloc(r, len);

	if (rc)
		return rc;
	lw_wr_init(&w, r->body, len);
	lw_wr_put(&w, fixed, flen);
	if (l)
		lw_layout_encode(&w, l);
	if (tail_len)
		lw_wr_put(&w, tail, tail_len);
	return w.err;
}

uint64_t mds_sid_of(struct mds *m, const struct srv_req *req)
{
	return mds_session_sid(m, req->conn_id);
}

static void release_if_unused(struct mds *m, struct mdt_txn *t, const struct mdt_unlinked *v,
			      struct batch_state *bs, int *rc)
{
	if (*rc || v->ino == 0 || v->nlink != 0 || !mds_ino_release_if_closed(m, v->ino))
		return;
	*rc = mdt_inode_release(t, v->ino);
	bs->released = true;
}

static int exec_readdir(struct mdt_txn *t, const struct lw_mds_req *q, struct reply *r)
{
	uint32_t cap = q->u.readdir.max_bytes, count = 0;
	struct lw_readdir_rep rep;
	struct lw_wr w;
	bool eof = false;
	int rc;

	if (cap < 512)
		cap = 512;
	if (cap > READDIR_MAX)
		cap = READDIR_MAX;
	rc = mds_reply_alloc(r, sizeof(rep) + cap);
	if (rc)
		return rc;
	lw_wr_init(&w, (uint8_t *)r->body + sizeof(rep), cap);
	rc = mdt_readdir(t, &q->cred, q->u.readdir.ino, q->u.readdir.cookie,
			 (q->u.readdir.flags & LW_RD_PLUS) != 0, &w, &count, &eof);
	if (rc)
		return rc;
	rep.count = count;
	rep.eof = eof;
	memcpy(r->body, &rep, sizeof(rep));
	r->len = (uint32_t)(sizeof(rep) + w.len);
	return 0;
}

/* GETXATTR and LISTXATTR: a value or the names, or with size 0 only how long they are. */
static int exec_getxattr(struct mdt_txn *t, const struct lw_mds_req *q, struct reply *r)
{
	struct lw_blob_rep rep = { 0 };
	size_t cap = q->u.xattr.f.size, len = 0;
	int rc;

	if (cap > LOOM_XATTR_SIZE_MAX)
		cap = LOOM_XATTR_SIZE_MAX;
	rc = mds_reply_alloc(r, sizeof(rep) + cap);
	if (rc)
		return rc;
	if (q->op == LW_OP_MDS_GETXATTR)
		rc = mdt_getxattr(t, &q->cred, q->u.xattr.f.ino, q->u.xattr.name.s, q->u.xattr.name.len,
				  (uint8_t *)r->body + sizeof(rep), cap, &len);
	else
		rc = mdt_listxattr(t, &q->cred, q->u.xattr.f.ino, (uint8_t *)r->body + sizeof(rep), cap,
				   &len);
	if (rc)
		return rc;
	rep.len = (uint32_t)len;
	memcpy(r->body, &rep, sizeof(rep));
	/* A size query (cap 0) carries the size and no bytes. */
	r->len = (uint32_t)(sizeof(rep) + (cap ? len : 0));
	return 0;
}

/* PING: an answer is all it asks for. */
int mds_op_ping(struct mds_op *o)
{
	(void)o;
	return 0;
}

/* MDS_SYNC: the batch commits before it is answered (batch.c). */
int mds_op_sync(struct mds_op *o)
{
	struct mds_session *s;

	o->r->sync = true;
	if (!(o->q->u.sync.flags & LW_SYNC_BYE))
		return 0;
	s = mds_session_of(o->m, o->req->conn_id);
	return s ? mds_session_bye(o->m, o->t, s) : 0;
}

/* AUTH_*: the frame layer answers them (net/server_accept.c); the decoder turns them away
 * before. */
int mds_op_auth(struct mds_op *o)
{
	(void)o;
	return -EOPNOTSUPP;
}

static int reply_attr(struct mds_op *o, int rc, const struct lw_attr *attr)
{
	return rc ? rc : mds_reply_copy(o->r, attr, sizeof(*attr));
}

int mds_op_lookup(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct lw_attr attr;

	/* Another's exclusive lease: the metadata thread waits for it (leases.c). */
	if (!mds_on_metadata_thread() && mds_leases_excl_other(o->m, o->req, q->u.name.f.parent))
		return MDS_ELSEWHERE;

	return reply_attr(o, mdt_lookup(o->t, &q->cred, q->u.name.f.parent, q->u.name.name.s,
					q->u.name.name.len, &attr), &attr);
}

int mds_op_getattr(struct mds_op *o)
{
	struct lw_attr attr;

	return reply_attr(o, mdt_getattr(o->t, o->q->u.ino.ino, &attr), &attr);
}

int mds_op_setattr(struct mds_op *o)
{
	struct lw_attr attr;

	o->r->truncates = (o->q->u.setattr.valid & LW_SA_SIZE) != 0;
	return reply_attr(o, mdt_setattr(o->t, &o->q->cred, &o->q->u.setattr, o->now, &attr), &attr);
}

int mds_op_mkdir(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct lw_attr attr;
	int rc = reply_attr(o, mdt_mkdir(o->t, &q->cred, q->u.mkdir.f.parent, q->u.mkdir.name.s,
					 q->u.mkdir.name.len, q->u.mkdir.f.mode, o->now, &attr), &attr);

	/* A new directory is empty: its maker may know its names from the start (leases.c). */
	if (rc == 0 && (q->u.mkdir.f.flags & LW_MK_LEASE) && !o->replay) {
		o->r->lease_excl = (q->u.mkdir.f.flags & LW_MK_EXCL) != 0;
		o->r->lease_gen = mds_lease_grant(o->m, o->req, attr.ino, false, &o->r->lease_excl);
		o->r->lease_ino = o->r->lease_gen ? attr.ino : 0;
	}
	return rc;
}

int mds_op_unlink(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct mdt_unlinked victim = { 0 };
	int rc = mdt_unlink(o->t, &q->cred, q->u.name.f.parent, q->u.name.name.s, q->u.name.name.len,
			    o->now, &victim);

	release_if_unused(o->m, o->t, &victim, o->bs, &rc);
	return rc;
}

int mds_op_rmdir(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;

	return mdt_rmdir(o->t, &q->cred, q->u.name.f.parent, q->u.name.name.s, q->u.name.name.len, o->now);
}

int mds_op_rename(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct mdt_unlinked victim = { 0 };
	uint32_t moved = 0;
	int rc = mdt_rename(o->t, &q->cred, q->u.rename.f.src_parent, q->u.rename.src.s,
			    q->u.rename.src.len, q->u.rename.f.dst_parent, q->u.rename.dst.s,
			    q->u.rename.dst.len, q->u.rename.f.flags, o->now, &victim, &moved);

	/* Paths through a moved directory lead elsewhere now: clients check names they cached
	 * against dir_moves at their next open. */
	if (rc == 0 && S_ISDIR(moved))
		o->bs->moved_dir = true;
	release_if_unused(o->m, o->t, &victim, o->bs, &rc);
	return rc;
}

int mds_op_link(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct lw_attr attr;

	return reply_attr(o, mdt_link(o->t, &q->cred, q->u.link.f.ino, q->u.link.f.new_parent,
				      q->u.link.name.s, q->u.link.name.len, o->now, &attr), &attr);
}

int mds_op_symlink(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;
	struct lw_attr attr;

	return reply_attr(o, mdt_symlink(o->t, &q->cred, q->u.symlink.f.parent, q->u.symlink.name.s,
					 q->u.symlink.name.len, q->u.symlink.target,
					 q->u.symlink.f.targetlen, o->now, &attr), &attr);
}

int mds_op_readlink(struct mds_op *o)
{
	struct lw_blob_rep rep = { 0 };
	size_t len = 0;
	int rc = mds_reply_alloc(o->r, sizeof(rep) + LOOM_SYMLINK_MAX);

	if (rc)
		return rc;
	rc = mdt_readlink(o->t, o->q->u.ino.ino, (char *)o->r->body + sizeof(rep), LOOM_SYMLINK_MAX, &len);
	if (rc)
		return rc;
	rep.len = (uint32_t)len;
	memcpy(o->r->body, &rep, sizeof(rep));
	o->r->len = (uint32_t)(sizeof(rep) + len);
	return 0;
}

int mds_op_readdir(struct mds_op *o)
{
	int rc;

	/* A lease is granted on the metadata thread only, where every change of entries runs: the
	 * listing and the grant are then one step no change comes between. */
	if (((o->q->u.readdir.flags & LW_RD_LEASE) ||
	     mds_leases_excl_other(o->m, o->req, o->q->u.readdir.ino)) && !mds_on_metadata_thread())
		return MDS_ELSEWHERE;
	rc = exec_readdir(o->t, o->q, o->r);
	if (rc == 0 && (o->q->u.readdir.flags & LW_RD_LEASE)) {
		o->r->lease_excl = (o->q->u.readdir.flags & LW_RD_EXCL) != 0;
		o->r->lease_gen = mds_lease_grant(o->m, o->req, o->q->u.readdir.ino, false,
						  &o->r->lease_excl);
		o->r->lease_ino = o->r->lease_gen ? o->q->u.readdir.ino : 0;
	}
	return rc;
}

int mds_op_getxattr(struct mds_op *o)
{
	return exec_getxattr(o->t, o->q, o->r);
}

int mds_op_listxattr(struct mds_op *o)
{
	return exec_getxattr(o->t, o->q, o->r);
}

int mds_op_setxattr(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;

	return mdt_setxattr(o->t, &q->cred, q->u.xattr.f.ino, q->u.xattr.name.s, q->u.xattr.name.len,
			    q->u.xattr.value, q->u.xattr.f.size, q->u.xattr.f.flags, o->now);
}

int mds_op_removexattr(struct mds_op *o)
{
	const struct lw_mds_req *q = o->q;

	return mdt_removexattr(o->t, &q->cred, q->u.xattr.f.ino, q->u.xattr.name.s,
			       q->u.xattr.name.len, o->now);
}

int mds_op_access(struct mds_op *o)
{
	return mdt_access(o->t, &o->q->cred, o->q->u.access.ino, o->q->u.access.mask);
}

/* The handler of each MDS and ANY row; an OSS row is not the MDS's. */
#define RUN_MDS(name, handler)  \
	case LW_OP_##name:      \
		return mds_op_##handler(o);
#define RUN_ANY RUN_MDS
#define RUN_OSS(name, handler)
#define RUN_CLI(name, handler)

int mds_op_run(struct mds_op *o)
{
	switch (o->q->op) {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) RUN_##server(name, handler)
#include "proto/ops.def"
#undef LW_OP
	default:
		return -EOPNOTSUPP;
	}
}
