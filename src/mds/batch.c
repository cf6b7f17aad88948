/*
 * The metadata thread: decodes requests, runs them against the MDT in batches (group commit), and
 * answers only after the batch is durable. What a resend gets is ops.def's RESEND column: the
 * reply cache answers CACHED ones, the handlers HANDLE ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "common/mmp.h"
#include "mds/dispatch.h"

#define BATCH_MAX        1024
#define TICK_MS          1000

static _Thread_local bool on_metadata_thread;

bool mds_on_metadata_thread(void)
{
	return on_metadata_thread;
}

/*
 * -ENOENT because the inode a request names (by number) is gone, not because a name is missing,
 * becomes -ESTALE, as an NFS server says: a client that acted on a cached name (renamed over or
 * removed on another node) then looks the name up again instead of failing.
 */
int mds_stale_if_gone(struct mdt_txn *t, int rc, uint64_t ino)
{
	struct lw_attr attr;

	if (rc == -ENOENT && mdt_getattr(t, ino, &attr) == -ENOENT)
		return -ESTALE;
	return rc;
}

/* What -ENOENT means, by the request's form (ops.def's REQUEST): for the forms that name an inode
 * by number, that inode may be gone (-ESTALE). A size report or close of a gone inode is fine
 * (close(2) succeeds); the other forms name no inode, or only by name. */
static int enoent_by_ino(struct mdt_txn *t, uint64_t ino)
{
	return mds_stale_if_gone(t, -ENOENT, ino);
}

#define ENOENT_IS_ENOENT(form) \
	static int enoent_##form(struct mdt_txn *t, const struct lw_mds_req *q) \
	{                                                                       \
		(void)t;                                                        \
		(void)q;                                                        \
		return -ENOENT;                                                 \
	}
#define ENOENT_OF_INO(form, field) \
	static int enoent_##form(struct mdt_txn *t, const struct lw_mds_req *q) \
	{                                                                       \
		return enoent_by_ino(t, q->u.field);                            \
	}
ENOENT_IS_ENOENT(none)
ENOENT_IS_ENOENT(frame)
ENOENT_IS_ENOENT(connect)
ENOENT_IS_ENOENT(close)
ENOENT_IS_ENOENT(ost_register)
ENOENT_IS_ENOENT(heartbeat)
ENOENT_IS_ENOENT(ost_addr)
ENOENT_IS_ENOENT(repl_pull)
ENOENT_IS_ENOENT(repl_copy)
ENOENT_IS_ENOENT(ost_admin)
ENOENT_IS_ENOENT(ost_remove)
ENOENT_IS_ENOENT(pool)
ENOENT_IS_ENOENT(nodemap)
ENOENT_IS_ENOENT(swap)
ENOENT_IS_ENOENT(walk)
ENOENT_IS_ENOENT(replay)
ENOENT_IS_ENOENT(sync)
ENOENT_IS_ENOENT(lease)
ENOENT_IS_ENOENT(inos)
ENOENT_IS_ENOENT(param)
ENOENT_OF_INO(name, name.f.parent)
ENOENT_OF_INO(ino, ino.ino)
ENOENT_OF_INO(setattr, setattr.ino)
ENOENT_OF_INO(create, create.f.parent)
ENOENT_OF_INO(mkdir, mkdir.f.parent)
ENOENT_OF_INO(link, link.f.ino)
ENOENT_OF_INO(symlink, symlink.f.parent)
ENOENT_OF_INO(readdir, readdir.ino)
ENOENT_OF_INO(xattr_name, xattr.f.ino)
ENOENT_OF_INO(xattr_set, xattr.f.ino)
ENOENT_OF_INO(xattr_list, xattr.f.ino)
ENOENT_OF_INO(open, open.ino)
ENOENT_OF_INO(access, access.ino)
ENOENT_OF_INO(setlayout, setlayout.f.ino)
ENOENT_OF_INO(mirror, mirror.f.ino)
ENOENT_OF_INO(lock, lock.ino)

/* A rename names two directories. */
static int enoent_rename(struct mdt_txn *t, const struct lw_mds_req *q)
{
	int rc = enoent_by_ino(t, q->u.rename.f.src_parent);

	return rc == -ENOENT ? enoent_by_ino(t, q->u.rename.f.dst_parent) : rc;
}

#define ENOENT_MDS(name, form) \
	case LW_OP_##name:     \
		return enoent_##form(t, q);
#define ENOENT_ANY ENOENT_MDS
#define ENOENT_OSS(name, form)
#define ENOENT_CLI(name, form)

static int enoent_means(struct mdt_txn *t, const struct lw_mds_req *q)
{
	switch (q->op) {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) ENOENT_##server(name, req)
#include "proto/ops.def"
#undef LW_OP
	default:
		return -ENOENT;
	}
}

/* A request that truncated (a size change, O_TRUNC) is answered once the objects are cut: its
 * reply, which starts with the inode's attributes, waits for truncation (ino, epoch) when that is
 * still to be cut. */
static void park_if_truncated(struct mds *m, struct mdt_txn *t, struct reply *r)
{
	struct lw_attr attr;

	if (!r->truncates || r->len < sizeof(attr))
		return;
	memcpy(&attr, r->body, sizeof(attr));
	if (attr.trunc_epoch && mdt_trunc_pending(t, attr.ino, attr.trunc_epoch)) {
		r->park_ino = attr.ino;
		r->park_epoch = attr.trunc_epoch;
		m->truncator.more = true;
	}
}

/* Runs one decoded request, telling a vanished inode from a missing name. */
static int exec(struct mds_op *o)
{
	int rc = mds_op_run(o);

	if (rc == 0)
		park_if_truncated(o->m, o->t, o->r);
	return rc == -ENOENT ? enoent_means(o->t, o->q) : rc;
}

struct lost_scan {
	uint64_t conn_id;
	uint32_t *idx;
	uint32_t n, cap;
};

static void lost_scan_one(uint64_t idx, void *val, void *arg)
{
	struct lost_scan *ls = arg;

	if ((uint64_t)(uintptr_t)val != ls->conn_id)
		return;
	if (ls->n == ls->cap) {
		uint32_t cap = ls->cap ? ls->cap * 2 : 16;
		uint32_t *p = realloc(ls->idx, cap * sizeof(*p));
		if (!p)
			return; /* those left out are found silent by their missing heartbeats */
		ls->idx = p;
		ls->cap = cap;
	}
	ls->idx[ls->n++] = (uint32_t)idx;
}

/* An OSS's connection closed: its OSTs take no new stripes until it registers again, rather than
 * after the heartbeat timeout. */
static void osts_of_conn_lost(struct mds *m, uint64_t conn_id)
{
	struct lost_scan ls = { .conn_id = conn_id };

	u64map_each(&m->ost_conns, lost_scan_one, &ls);
	for (uint32_t i = 0; i < ls.n; i++) {
		u64map_del(&m->ost_conns, ls.idx[i]);
		mdt_ost_lost(m->store, ls.idx[i]);
	}
	free(ls.idx);
}

struct mds_work *mds_work_new(enum mds_work_kind kind, uint32_t n, size_t entry_size)
{
	struct mds_work *w;

	if (entry_size && n > (SIZE_MAX - sizeof(*w)) / entry_size)
		return NULL;
	w = calloc(1, sizeof(*w) + (size_t)n * entry_size);
	if (w) {
		w->qitem.kind = (uint16_t)kind;
		w->n = n;
	}
	return w;
}

struct mds_work *mds_work_of(struct reqq_item *item)
{
	return (struct mds_work *)((char *)item - offsetof(struct mds_work, qitem));
}

static int exec_work(struct mds *m, struct mdt_txn *t, const struct mds_work *w, struct batch_state *bs)
{
	switch ((enum mds_work_kind)w->qitem.kind) {
	case MDS_WORK_DISCONNECT:
		osts_of_conn_lost(m, w->conn_id);
		mds_leases_drop_conn(m, w->conn_id);
		mds_locks_drop_waiters(m, w->conn_id);
		mds_trunc_drop_conn(m, w->conn_id);
		return mds_session_disconnect(m, t, w->conn_id, &bs->released);
	case MDS_WORK_DROP_HANDLE:
		return mds_handle_close(m, t, w->handle.handle, w->handle.ino, w->handle.sid,
					&bs->released);
	case MDS_WORK_DESTROYED:
		return mds_destroyer_done(m, t, w);
	case MDS_WORK_TRUNCATED:
		return mds_truncator_done(m, t, w);
	case MDS_WORK_RESYNCED:
		return mds_resync_done(m, t, w);
	case MDS_WORK_MIRROR_TIDY:
		return mds_resync_tidy(m, t, w);
	}
	return -EINVAL;
}

static const char *work_name(uint16_t kind)
{
	switch ((enum mds_work_kind)kind) {
	case MDS_WORK_DISCONNECT: return "disconnect";
	case MDS_WORK_DROP_HANDLE: return "drop-handle";
	case MDS_WORK_DESTROYED: return "destroyed";
	case MDS_WORK_TRUNCATED: return "truncated";
	case MDS_WORK_RESYNCED: return "resynced";
	case MDS_WORK_MIRROR_TIDY: return "mirror-tidy";
	}
	return "unknown";
}

/* A work item, in a child transaction of its own: what it changes is kept only whole. */
static int run_work(struct mds *m, struct mdt_txn *txn, const struct mds_work *w,
		    struct batch_state *bs)
{
	struct mdt_txn *child;
	int rc = mdt_txn_child(txn, &child);

	if (rc == 0) {
		rc = exec_work(m, child, w, bs);
		if (rc == 0)
			rc = mdt_txn_commit(child);
		else
			mdt_txn_abort(child);
	}
	if (rc && rc != MDT_ETXNFULL)
		log_err("MDS work item %s failed: %s", work_name(w->qitem.kind), strerror(-rc));
	return rc;
}

int mds_decode_req(struct mds *m, const struct srv_req *req, struct lw_mds_req *q)
{
	int rc = lw_mds_req_decode(req->hdr.opcode, req->body, req->hdr.body_len, q);

	if (rc) {
		if (rc == -EPROTO || rc == -EOPNOTSUPP)
			log_warn("%s from %s: malformed request (%s)", lw_op_name(req->hdr.opcode),
				 srv_req_peer(req), strerror(-rc));
		return rc;
	}
	if (m->root_squash && q->cred.uid == 0) {
		/* --root-squash: no client's root is root here. */
		q->cred.uid = LOOM_SQUASH_ID;
		q->cred.gid = LOOM_SQUASH_ID;
		q->cred.ngroups = 0;
	}
	/* A node's key: what the node may send and claim (nodemap.c). */
	return mds_nodemap_apply(m, req, q);
}

/* A resend (LW_F_RESENT) of a request that ops.def answers from the reply cache, or whose first
 * run the cache recorded (HANDLE: an open that truncated), from a client with an identity. */
static struct mds_session *cache_session(struct mds *m, const struct srv_req *req, bool write)
{
	const struct lw_op_info *info = lw_op_info(req->hdr.opcode);
	struct mds_session *sess;

	if (!write || !info ||
	    (info->resend != LW_RESEND_CACHED && info->resend != LW_RESEND_HANDLE))
		return NULL;
	sess = mds_session_of(m, req->conn_id);
	if (sess && !sess->uuid[0] && !sess->uuid[1])
		sess = NULL; /* a client without an identity cannot be told apart on resend */
	return sess;
}

void mds_run_as(struct mds *m, struct mdt_txn *txn, bool write, struct srv_req *req,
		const struct mds_replayed *replay, struct batch_state *bs, struct reply *r)
{
	struct mdt_txn *child = txn;
	struct mds_session *sess = cache_session(m, req, write);
	/* A replay's answer is kept under its client, whatever connection it came on. */
	const uint64_t *cache_uuid = replay ? replay->uuid : sess ? sess->uuid : NULL;
	bool handle_op = lw_op_info(req->hdr.opcode) &&
			 lw_op_info(req->hdr.opcode)->resend == LW_RESEND_HANDLE;
	uint32_t flags = lw_op_flags(req->hdr.opcode);
	bool recorded = false;
	struct lw_mds_req q;
	struct mds_op o = { .m = m, .req = req, .q = &q, .bs = bs, .r = r, .now = clock_real(),
			    .write = write, .replay = replay };
	int rc;

	rc = mds_decode_req(m, req, &q);
	if (rc) {
		r->status = rc;
		return;
	}
	/* A replayed create makes no handle: its client opens its open files again after its
	 * replays, as after any restart (client/fs.c). */
	if (replay && q.op == LW_OP_MDS_CREATE)
		q.u.create.f.flags &= ~LW_CR_OPEN;
	if (cache_uuid && (req->hdr.flags & LW_F_RESENT)) {
		void *body = NULL;
		uint32_t len = 0;
		int status;

		if (mdt_reply_get(txn, cache_uuid, req->hdr.req_id, req->hdr.opcode, &status, &body,
				  &len) == 0) {
			log_debug("%s %llu from %s resent: answered from the reply cache",
				  lw_op_name(req->hdr.opcode), (unsigned long long)req->hdr.req_id,
				  srv_req_peer(req));
			stats_note_reply_cache_hit(srv_stats(m->srv));
			if (!handle_op) {
				r->status = status;
				r->body = body;
				r->len = len;
				/* The first run may not be committed yet, and this answer carries no
				 * transno for the client to keep: it goes once on disk. */
				r->sync = (flags & LW_OPF_REPLAY) != 0;
				/* A create that opened: its handle must outlive an MDS restart too. */
				if (status == 0 && q.op == LW_OP_MDS_CREATE)
					r->status = mds_create_resent(m, txn, req, &q, body, len);
				return;
			}
			/* The first run happened, and its handle may be gone: run again, without
			 * what it did once (the truncation). */
			free(body);
			o.resent_done = true;
		}
	}
	/* A change of entries waits for the leases other clients hold on its directories (its
	 * first run's answer, above, needs none: it ran). */
	if (!replay && (r->lease_wait = mds_leases_block(m, txn, req, &q)) != 0) {
		r->status = MDS_LEASE_HELD;
		return;
	}
	if (write) {
		rc = mdt_txn_child(txn, &child);
		if (rc) {
			r->status = rc;
			return;
		}
		/* Its number, which every inode it writes is stamped with; a replay's versions are
		 * checked there too (replay.c). */
		r->transno = replay ? replay->transno : mds_commit_next(m);
		if (replay) {
			r->vers.expect = replay->vers;
			r->vers.nexpect = replay->nvers;
			r->vers.want_ino = replay->want_ino;
			r->vers.want_objs = replay->objs;
			r->vers.want_nobjs = replay->nobjs;
		}
		mdt_txn_set_change(child, r->transno, &r->vers);
	}
	o.t = child;
	rc = exec(&o);
	/* The answer is kept with the change, in the same transaction: at most once, also across
	 * a restart of the MDS. A HANDLE op keeps only that it truncated: its handle does not
	 * outlive this MDS. */
	if (rc == 0 && cache_uuid && !handle_op)
		rc = mdt_reply_put(child, cache_uuid, req->hdr.req_id, req->hdr.opcode, 0, r->body,
				   r->len, clock_real().tv_sec);
	else if (rc == 0 && cache_uuid && r->truncates)
		rc = mdt_reply_put(child, cache_uuid, req->hdr.req_id, req->hdr.opcode, 0, NULL, 0,
				   clock_real().tv_sec);
	if (rc == MDS_PARKED) {
		/* The lock manager holds the request now; it changed nothing durable. */
		if (write)
			mdt_txn_commit(child);
		if (!replay)
			mds_commit_unused(m, r->transno);
		r->transno = 0;
		r->status = rc;
		return;
	}
	/* A client that is answered a change before its commit must be waited for should the MDS
	 * restart before it: the MDT lists it (the `clients` table), durably before the answer. A
	 * change that wrote no inode (a read-only close) leaves it unlisted: it keeps nothing to
	 * replay, and says no goodbye (a restart would wait for it in vain). */
	if (rc == 0 && write && sess && !replay && (flags & LW_OPF_REPLAY) && !sess->recorded &&
	    (r->truncates || r->vers.n || r->vers.overflow)) {
		rc = mds_session_record(m, child, sess);
		recorded = rc == 0;
	}
	if (write) {
		if (rc == 0)
			rc = mdt_txn_commit(child);
		else
			mdt_txn_abort(child);
		if (rc) {
			if (!replay)
				mds_commit_unused(m, r->transno);
			r->transno = 0;
		} else {
			mds_commit_applied(m);
			/* Answered before its commit only if the client keeps it for a replay (ops.def's
			 * LW_OPF_REPLAY) and a replay can redo it: a truncation cuts objects the client
			 * may have written again since, so it is committed first. */
			/* An open (HANDLE), or a change that wrote no inode (a close that reported
			 * nothing and released nothing), changed nothing a crash could lose but its
			 * handle and reply cache entry, which die with the MDS anyway: its number goes
			 * back, its client keeps nothing to replay, and nothing waits for the disk. */
			bool nothing = (handle_op || (flags & LW_OPF_REPLAY)) && !r->truncates &&
				       r->vers.n == 0 && !r->vers.overflow && !replay;

			if (nothing) {
				mds_commit_unused(m, r->transno);
				r->transno = 0;
			}
			/* A client without an identity is not listed and cannot replay: its changes
			 * are committed before they are answered too. */
			r->sync = ((flags & LW_OPF_MDT) && !(flags & LW_OPF_REPLAY) && !nothing) ||
				  req->hdr.opcode == LW_OP_MDS_LOCK || r->truncates || r->vers.overflow ||
				  recorded || ((flags & LW_OPF_REPLAY) && !sess && !replay);
		}
	}
	if (rc) {
		free(r->body);
		r->body = NULL;
		r->len = 0;
	}
	r->status = rc;
}

void mds_run_one(struct mds *m, struct mdt_txn *txn, bool write, struct srv_req *req,
		 struct batch_state *bs, struct reply *r)
{
	mds_run_as(m, txn, write, req, NULL, bs, r);
}

/* A queued item: a client's request, or the MDS's own work. */
static void run_item(struct mds *m, struct mdt_txn *txn, bool write, struct reqq_item *it,
		     struct batch_state *bs, struct reply *r)
{
	if (it->kind == REQQ_SRV_REQ)
		mds_run_one(m, txn, write, srv_req_of(it), bs, r);
	else if ((r->status = run_work(m, txn, mds_work_of(it), bs)) == 0 && write)
		mds_commit_applied(m); /* so that the open transaction is due in its turn */
}

/* Does the batch change the MDT? Then it runs in one write transaction. */
static bool batch_writes(struct mds *m, struct reqq_item *list)
{
	for (struct reqq_item *it = list; it; it = it->next) {
		const struct srv_req *req;

		if (it->kind != REQQ_SRV_REQ)
			return true;
		req = srv_req_of(it);
		if ((lw_op_flags(req->hdr.opcode) & LW_OPF_MDT) ||
		    /* A session's first lock request lists its client in the MDT (locks.c). */
		    (req->hdr.opcode == LW_OP_MDS_LOCK && mds_session_needs_record(m, req->conn_id)))
			return true;
	}
	return false;
}

/* Durable (or failed) as a whole: now answer. Replies [0, durable) are committed; the others get
 * `failed`. */
static void answer_batch(struct mds *m, struct reqq_item *list, struct reply *replies,
			 uint32_t durable, int failed)
{
	uint32_t i = 0;

	for (struct reqq_item *it = list, *next; it; it = next, i++) {
		struct reply *r = replies ? &replies[i] : NULL;
		struct srv_req *req;

		next = it->next;
		if (it->kind != REQQ_SRV_REQ) {
			free(mds_work_of(it));
			continue;
		}
		req = srv_req_of(it);
		if (r && r->status == MDS_PARKED)
			; /* answered later by the lock manager, or the replays (replay.c) */
		else if (r && r->status == MDS_HELD)
			mds_replay_hold(m, req);
		else if (r && r->status == MDS_LEASE_HELD)
			mds_leases_park(m, req, r->lease_wait);
		else if (!r)
			mds_reply(m, req, -ENOMEM, NULL, 0, 0, NULL);
		else if (i >= durable)
			mds_reply(m, req, failed, NULL, 0, 0, NULL);
		else if (r->status == 0 && r->park_ino) {
			mds_trunc_park(m, req, r->body, r->len, r->park_ino, r->park_epoch);
			r->body = NULL;
		} else {
			mds_req_note_data(req, r);
			mds_reply_granted(m, req, r->status, r->body, r->len, r->transno, &r->vers,
					  r->lease_ino, r->lease_gen, r->lease_excl);
		}
		if (r)
			free(r->body);
	}
}

/* The batch's transaction: the open one that changes are applied in (a write batch, or reads
 * that must see what was answered), else a read transaction of the batch's own. */
static int batch_txn(struct mds *m, bool write, struct mdt_txn **txn)
{
	if (write)
		return mds_commit_txn(m, txn);
	if (m->commit.open) {
		*txn = m->commit.open;
		return 0;
	}
	return mdt_txn_begin(m->store, false, txn);
}

static void run_batch(struct mds *m, struct reqq_item *list, uint32_t n)
{
	struct reply *replies = calloc(n, sizeof(*replies));
	struct batch_state bs = { 0 };
	struct mdt_txn *txn = NULL;
	uint32_t i, durable = 0; /* replies [0, durable) are committed whatever happens later */
	int failed = -EIO;       /* the answer of those after them */
	bool write = batch_writes(m, list), sync = false;
	/* Changes answered before this batch and not committed yet: a commit that fails now cannot
	 * be answered as a failure (commit.c). */
	uint32_t answered = m->commit.open ? m->commit.changes : 0;
	int rc;

	/* A server deposed while it was frozen answers nothing more (it exits here): a change is
	 * answered before its commit, whose own check would come too late for that answer. */
	if (write)
		mmp_check(m->mmp);
	mds_coord_guard(m->repl.coord); /* reads too: a deposed MDS's answers are stale */
	rc = replies ? batch_txn(m, write, &txn) : -ENOMEM;
	if (rc == 0) {
		uint32_t first = 0; /* first request of the open transaction */

		i = 0;
		for (struct reqq_item *it = list; it; it = it->next, i++) {
			if (it->kind == REQQ_SRV_REQ && mds_replay_holds(m, srv_req_of(it))) {
				replies[i].status = MDS_HELD;
				continue;
			}
			run_item(m, txn, write, it, &bs, &replies[i]);
			if (!write || replies[i].status != MDT_ETXNFULL || (i == first && !answered))
				continue;
			/* The transaction grew too big for LMDB: commit what ran so far and give this
			 * request a transaction of its own. */
			rc = mds_commit_flush(m, answered);
			txn = NULL;
			answered = 0;
			if (rc == 0) {
				durable = i;
				rc = mds_commit_txn(m, &txn);
			}
			if (rc)
				break;
			first = i;
			run_item(m, txn, write, it, &bs, &replies[i]);
		}
		if (bs.released)
			m->destroyer.more = true;
		i = 0;
		for (struct reqq_item *it = list; it && rc == 0; it = it->next, i++) {
			bool s = replies[i].sync || replies[i].status == MDT_ETXNFULL;
			if (s && !sync && it->kind == REQQ_SRV_REQ)
				log_debug("commit now, for %s", lw_op_name(srv_req_of(it)->hdr.opcode));
			sync |= s;
		}
		if (txn && !write && sync && m->commit.open) {
			/* An MDS_SYNC among reads: what it asks for was answered in earlier batches. */
			txn = NULL;
			mds_commit_flush(m, m->commit.changes);
		} else if (txn && write && rc == 0) {
			if (sync || mds_commit_due(m))
				rc = mds_commit_flush(m, answered);
			else
				atomic_store(&m->commit.pending, true); /* before any reply goes out */
		} else if (txn && write) {
			mds_commit_abort(m, answered);
		} else if (txn && txn != m->commit.open) {
			mdt_txn_abort(txn);
		}
		if (rc) {
			int answer = mds_space_commit_failed(m, rc);

			/* The reserve should have kept room for this: a full MDT is said as one. */
			log_err("commit of a batch of %u requests failed: %s; answering %s", n, strerror(-rc),
				answer == -ENOSPC ? "ENOSPC (the MDT is full)" : "EIO");
			failed = answer == -ENOSPC ? -ENOSPC : -EIO;
		} else {
			durable = n;
		}
	} else {
		log_err("cannot start a transaction: %s", strerror(-rc));
	}
	if (!m->commit.open)
		mds_releases_settled(m);
	if (bs.nodemap)
		mds_nodemap_reload(m);
	if (bs.moved_dir)
		atomic_fetch_add(&m->dir_moves, 1);
	/* Truncations this batch recorded are cut now; those it saw cut free their replies. */
	if (durable == n)
		mds_trunc_release(m);
	if (m->truncator.more && !m->truncator.busy && mdt_txn_begin(m->store, false, &txn) == 0) {
		mds_truncator_kick(m, txn);
		mdt_txn_abort(txn);
	}
	if (m->resync.more && !m->resync.busy && mdt_txn_begin(m->store, false, &txn) == 0) {
		mds_resync_kick(m, txn);
		mdt_txn_abort(txn);
	}

	answer_batch(m, list, replies, durable, failed);
	free(replies);
	/* Waiters the batch let in are granted now, so that their replies follow the batch's. */
	mds_locks_wake(m);
	mds_replay_drain(m);
}

void mds_metadata_loop(struct mds *m)
{
	uint64_t last_tick = clock_mono_ns();

	on_metadata_thread = true;
	for (;;) {
		uint32_t n = 0;
		struct reqq_item *list = reqq_pop_batch(&m->queue, BATCH_MAX,
							mds_commit_wait_ms(m, TICK_MS), &n);

		if (!list && m->queue.closed)
			break;
		if (list)
			run_batch(m, list, n);
		/* Also after batches of reads, which a busy MDS may see nothing else but. */
		if (mds_commit_due(m))
			mds_commit_flush(m, m->commit.changes);
		if ((m->destroyer.more && !m->destroyer.busy) || (m->truncator.more && !m->truncator.busy))
			mds_periodic(m);
		else if (clock_mono_ns() - last_tick >= TICK_MS * 1000000ull) {
			mds_periodic(m);
			last_tick = clock_mono_ns();
		}
		mds_repl_tick(m);
		if (atomic_load(&m->stop_asked) && !m->stop_sent) {
			/* A replicated MDT's stop: its last commits go to the standby while the server
			 * still answers its pulls, and only then does the server stop. */
			mds_commit_flush(m, m->commit.changes);
			srv_stop(m->srv);
			m->stop_sent = true;
		}
	}
	/* Stopped (SIGTERM): what was answered goes to disk before the MDS exits. */
	mds_commit_flush(m, m->commit.changes);
}
