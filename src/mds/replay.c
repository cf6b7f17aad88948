/*
 * Replays after a start (Lustre's request replay with version checks). Changes this MDS's
 * previous run answered but had not committed come back from their clients (MDS_REPLAY, in each
 * client's hello, one at a time in the order of their transnos, then LW_RP_DONE). They are
 * applied in transno order across all clients: a replay goes as soon as it is the next number,
 * or once every client the MDT listed (the `clients` table: each client is listed, durably,
 * before its first change is answered before its commit) has a replay waiting here or said it
 * has no more; then the lowest waiting is the lowest of all. Each replay runs with its first
 * run's transno and is checked against the versions that run saw (mdt_vers): one whose inodes
 * changed since (a change it depended on was lost with its client) is refused with -EREMCHG.
 * What numbers a replay may take back is checked in replay_check.c.
 *
 * Until every listed client said it has no more, other requests that read or change inodes
 * (ops.def's LW_OPF_NS) wait here, still counted against their connection (so one connection
 * cannot pile them up), and the network thread answers none; then they run in the order they
 * came. When the recovery window ends, each client still awaited that has not been heard from
 * for a while is given up (one replaying goes on, up to twice the window): its changes are lost,
 * and a replay of its that comes later is refused with -ETIMEDOUT, as Lustre evicts a client that
 * missed recovery.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

/* A client replaying sends its next replay as soon as the last is answered: one not heard from
 * this long once the window passed is taken for gone. */
#define REPLAY_QUIET_NS (2ull * 1000000000ull)

enum replay_client_state { AWAITED, DONE, GIVEN_UP };

struct mds_replay_client {
	uint64_t uuid[2];
	enum replay_client_state state;
	uint64_t heard_ns; /* its last MDS_REPLAY */
};

struct mds_replay_wait {
	struct srv_req *req;
	uint64_t transno;
	uint64_t uuid[2];
	struct mds_replay_wait *next;
};

int mds_replay_begin(struct mds *m)
{
	struct mds_replay *rp = &m->replay;
	struct mdt_txn *t;
	int rc;

	rp->applied = atomic_load(&m->commit.last_committed);
	rp->held_tail = &rp->held;
	rp->lost_lo = 1;
	rp->lost_hi = 0; /* empty: nobody was listed, so nobody had a change answered and not committed */
	if (!m->lock_recovery.active) {
		/* Nobody to wait for: a skip an earlier start made is settled. */
		rc = mdt_txn_begin(m->store, true, &t);
		if (rc == 0) {
			rc = mdt_numbers_settled(t);
			rc = rc ? (mdt_txn_abort(t), rc) : mdt_txn_commit(t);
		}
		return rc;
	}
	/* The same list lock recovery starts from (main.c), copied: that one shrinks as clients
	 * replay their locks. */
	rp->clients = calloc(m->lock_recovery.n, sizeof(*rp->clients));
	if (!rp->clients)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->lock_recovery.n; i++)
		memcpy(rp->clients[i].uuid, m->lock_recovery.uuids[i], sizeof(rp->clients[i].uuid));
	rp->nclients = m->lock_recovery.n;
	/* Numbers a lost change handed out are never handed out again: replays take theirs back
	 * below the new counters, and a client that misses the replays may still hold them. */
	rc = mdt_txn_begin(m->store, true, &t);
	if (rc == 0) {
		rc = mds_replay_bounds_new(t, rp->applied, &rp->bounds);
		if (rc == 0)
			rc = mdt_txn_commit(t);
		else
			mdt_txn_abort(t);
	}
	if (rc) {
		log_err("cannot move the MDT's inode and object counters past what a crash may have "
			"lost: %s", strerror(-rc));
		return rc;
	}
	rp->lost_lo = rp->applied + 1;
	rp->lost_hi = mds_replay_bounds_end(rp->bounds);
	rp->active = true;
	atomic_store(&rp->recovering, true);
	log_info("waiting up to %u s for %u client(s) to replay the changes this MDS answered "
		 "after transno %llu; until then their other requests wait",
		 m->recovery_s, rp->nclients, (unsigned long long)rp->applied);
	return 0;
}

void mds_replay_free(struct mds *m)
{
	struct mds_replay *rp = &m->replay;

	while (rp->pending) {
		struct mds_replay_wait *w = rp->pending;
		rp->pending = w->next;
		free(w);
	}
	free(rp->clients);
	rp->clients = NULL;
	mds_replay_bounds_free(rp->bounds);
	rp->bounds = NULL;
}

void mds_replay_stop(struct mds *m)
{
	struct mds_replay *rp = &m->replay;

	while (rp->held) {
		struct reqq_item *it = rp->held;
		rp->held = it->next;
		srv_req_drop(srv_req_of(it));
	}
	rp->held_tail = &rp->held;
	for (struct mds_replay_wait *w = rp->pending; w; w = w->next)
		srv_req_drop(w->req);
	mds_replay_free(m);
}

static bool same_uuid(const uint64_t a[2], const uint64_t b[2])
{
	return a[0] == b[0] && a[1] == b[1];
}

static struct mds_replay_client *listed(const struct mds_replay *rp, const uint64_t uuid[2])
{
	for (uint32_t i = 0; i < rp->nclients; i++)
		if (same_uuid(rp->clients[i].uuid, uuid))
			return &rp->clients[i];
	return NULL;
}

static struct mds_replay_wait **waiting_of(struct mds_replay *rp, const uint64_t uuid[2])
{
	for (struct mds_replay_wait **pp = &rp->pending; *pp; pp = &(*pp)->next)
		if (same_uuid((*pp)->uuid, uuid))
			return pp;
	return NULL;
}

/* Every listed client still awaited has a replay waiting here (or, with and_done, none is still
 * awaited): the lowest waiting is then the lowest any client still holds. */
static bool all_heard(struct mds_replay *rp, bool and_done)
{
	for (uint32_t i = 0; i < rp->nclients; i++)
		if (rp->clients[i].state == AWAITED && (and_done || !waiting_of(rp, rp->clients[i].uuid)))
			return false;
	return true;
}

bool mds_replay_holds(struct mds *m, const struct srv_req *req)
{
	/* What reads or changes inodes (ops.def's LW_OPF_NS) waits; locks have their own recovery
	 * (locks.c), and space, OSTs, pools, the nodemap and syncs touch nothing a replay redoes. */
	return m->replay.active && (lw_op_flags(req->hdr.opcode) & LW_OPF_NS);
}

void mds_replay_hold(struct mds *m, struct srv_req *req)
{
	struct mds_replay *rp = &m->replay;

	/* Not parked: it still counts against its connection, whose reading stops at its limit. */
	req->qitem.next = NULL;
	*rp->held_tail = &req->qitem;
	rp->held_tail = &req->qitem.next;
}

/* Its reply is in the reply cache: its first run was committed after all, or it was replayed. */
static bool done_already(struct mdt_txn *t, const uint64_t uuid[2], const struct lw_replay_req *f)
{
	void *body = NULL;
	uint32_t len = 0;
	int status;

	if (mdt_reply_get(t, uuid, f->req_id, f->opcode, &status, &body, &len) != 0)
		return false;
	free(body);
	return true;
}

int mds_op_replay(struct mds_op *o)
{
	struct mds *m = o->m;
	struct mds_replay *rp = &m->replay;
	struct mds_session *sess = mds_session_of(m, o->req->conn_id);
	const struct lw_replay_req *f = &o->q->u.replay.f;
	struct mds_replay_client *c;
	struct mds_replay_wait *w, **pp;

	if (!sess || (!sess->uuid[0] && !sess->uuid[1]))
		return -EPROTO; /* replays come after the MDS_CONNECT of a client with a uuid */
	c = rp->active ? listed(rp, sess->uuid) : NULL;
	if (f->flags & LW_RP_DONE) {
		if (c && c->state == AWAITED) {
			c->state = DONE;
			rp->more = true;
		}
		return 0; /* a client not awaited has nothing to say */
	}
	/* Outside what a crash can have lost (committed before it, or made since): nothing to
	 * redo. A client replays what it kept without knowing which. */
	if (f->transno < rp->lost_lo || f->transno > rp->lost_hi)
		return 0;
	/* Replayed already, through an earlier connection of the same client (its answer lost). */
	if (done_already(o->t, sess->uuid, f)) {
		stats_note_reply_cache_hit(srv_stats(m->srv));
		return 0;
	}
	if (!c || c->state != AWAITED) {
		log_warn("replay of %s (transno %llu) from %s refused: %s", lw_op_name(f->opcode),
			 (unsigned long long)f->transno, srv_req_peer(o->req),
			 c && c->state == DONE ? "its client said it had no more"
					       : "its client came back after the recovery window");
		return -ETIMEDOUT;
	}
	c->heard_ns = clock_mono_ns();
	/* A client sends one at a time. The same one again comes on a new connection after the
	 * old one broke: it takes the place of the first, whose connection is gone. */
	pp = waiting_of(rp, sess->uuid);
	if (pp && (*pp)->transno != f->transno)
		return -EPROTO;
	if (pp) {
		w = *pp;
		mds_reply(m, w->req, -ENOTCONN, NULL, 0, 0, NULL);
		w->req = o->req;
		srv_req_park(o->req);
		return MDS_PARKED;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->req = o->req;
	w->transno = f->transno;
	memcpy(w->uuid, sess->uuid, sizeof(w->uuid));
	for (pp = &rp->pending; *pp && (*pp)->transno <= w->transno; pp = &(*pp)->next)
		;
	w->next = *pp;
	*pp = w;
	srv_req_park(o->req);
	rp->more = true;
	return MDS_PARKED;
}

/* What the first run made, from its reply: the inode of a create, mkdir or symlink, and the
 * objects of a create's layout. */
static int first_run_made(uint16_t opcode, const uint8_t *reply, uint32_t len, struct mds_replayed *rd,
			  struct loom_layout **layout)
{
	struct lw_create_rep cr;
	struct lw_attr attr;
	struct lw_rd r;

	*layout = NULL;
	if (opcode == LW_OP_MDS_CREATE) {
		if (len < sizeof(cr))
			return -EINVAL;
		memcpy(&cr, reply, sizeof(cr));
		rd->want_ino = cr.attr.ino;
		if (cr.has_layout) {
			lw_rd_init(&r, reply + sizeof(cr), len - sizeof(cr));
			if (lw_layout_decode(&r, layout))
				return -EINVAL;
			rd->objs = (*layout)->objs;
			rd->nobjs = (*layout)->nobjs;
		}
	} else if (opcode == LW_OP_MDS_MKDIR || opcode == LW_OP_MDS_SYMLINK) {
		if (len < sizeof(attr))
			return -EINVAL;
		memcpy(&attr, reply, sizeof(attr));
		rd->want_ino = attr.ino;
	}
	return 0;
}

/* A create with a number the client was handed ahead (LW_CR_INO): its first run made that one,
 * and the create takes it again as a fresh run would, from the client's range (not from the
 * window a crash can have lost numbers in, which it is below). */
static int own_ino_checked(const struct lw_mds_req *replay, struct mds_replayed *rd)
{
	struct lw_mds_req inner;
	int rc = lw_mds_req_decode(LW_OP_MDS_CREATE, replay->u.replay.body, replay->u.replay.f.body_len,
				   &inner);

	if (rc || !(inner.u.create.f.flags & LW_CR_INO))
		return rc;
	if (rd->want_ino != inner.u.create.ino)
		return -EINVAL;
	rd->want_ino = 0;
	return 0;
}

/* Runs rd's request in t. A transaction too full for it is committed and the request runs
 * again in a new one. */
static int run_replay(struct mds *m, struct mdt_txn **t, struct srv_req *inner, const struct mds_replayed *rd,
		      struct batch_state *bs, struct reply *r)
{
	mds_run_as(m, *t, true, inner, rd, bs, r);
	if (r->status != MDT_ETXNFULL || m->commit.changes == 0)
		return r->status;
	*t = NULL;
	if (mds_commit_flush(m, m->commit.changes) != 0 || mds_commit_txn(m, t) != 0)
		return -EIO;
	memset(r, 0, sizeof(*r));
	mds_run_as(m, *t, true, inner, rd, bs, r);
	return r->status;
}

static void log_refusal(const struct mds_replay_wait *w, uint16_t opcode, int rc, const struct reply *r,
			const char *why)
{
	if (rc == MDT_EVERSION)
		log_warn("replay of %s (transno %llu) from %s refused: inode %llu is at version %llu, not "
			 "the one the change was made on (a change before it was lost)", lw_op_name(opcode),
			 (unsigned long long)w->transno, srv_req_peer(w->req),
			 (unsigned long long)r->vers.mismatch_ino, (unsigned long long)r->vers.mismatch_have);
	else if (why)
		log_warn("replay of %s (transno %llu) from %s refused: %s", lw_op_name(opcode),
			 (unsigned long long)w->transno, srv_req_peer(w->req), why);
	else
		log_warn("replay of %s (transno %llu) from %s failed: %s", lw_op_name(opcode),
			 (unsigned long long)w->transno, srv_req_peer(w->req), strerror(-rc));
}

/* Runs one replay in *t (which a full transaction may replace) and answers it. */
static void apply(struct mds *m, struct mdt_txn **t, struct mds_replay_wait *w, struct batch_state *bs)
{
	struct lw_obj_version vers[LW_MAX_VERS];
	struct mds_replayed rd = { .vers = vers, .transno = w->transno, .uuid = w->uuid };
	struct loom_layout *layout = NULL;
	struct srv_req inner = *w->req;
	struct reply r = { 0 };
	const char *why = NULL;
	struct lw_mds_req q;
	uint16_t opcode = 0;
	int rc = lw_mds_req_decode(w->req->hdr.opcode, w->req->body, w->req->hdr.body_len, &q);

	if (rc == 0) {
		opcode = q.u.replay.f.opcode;
		rc = first_run_made(opcode, q.u.replay.reply, q.u.replay.f.reply_len, &rd, &layout);
	}
	if (rc == 0 && opcode == LW_OP_MDS_CREATE)
		rc = own_ino_checked(&q, &rd);
	if (rc == 0) {
		rd.nvers = q.u.replay.f.nvers;
		memcpy(vers, q.u.replay.vers, rd.nvers * sizeof(vers[0]));
		inner.hdr.opcode = opcode;
		inner.hdr.req_id = q.u.replay.f.req_id;
		inner.hdr.flags = LW_F_RESENT; /* its first run's reply may be in the cache: then done */
		inner.hdr.body_len = q.u.replay.f.body_len;
		inner.body = (uint8_t *)q.u.replay.body;
		if (!done_already(*t, w->uuid, &q.u.replay.f))
			rc = mds_replay_bounds_check(m->replay.bounds, *t, &rd, &why);
		if (rc == 0)
			rc = run_replay(m, t, &inner, &rd, bs, &r);
		if (rc == 0)
			mds_replay_bounds_take(m->replay.bounds, &rd);
		free(r.body);
	}
	free(layout);
	if (rc == 0) {
		m->replay.replayed++;
	} else {
		m->replay.refused++;
		log_refusal(w, opcode, rc, &r, why);
	}
	/* Done with, whatever came of it, if it is a number a crash can have lost (a forged one
	 * must not let the others jump the order). */
	if (w->transno > m->replay.applied && w->transno <= mds_replay_bounds_end(m->replay.bounds))
		m->replay.applied = w->transno;
	if (rc == 0 && w->transno > m->commit.transno)
		m->commit.transno = w->transno;
	mds_reply(m, w->req, rc, NULL, 0, 0, NULL);
	free(w);
}

/* Recovery is over: the requests that waited run, in the order they came. */
static void replay_end(struct mds *m)
{
	struct mds_replay *rp = &m->replay;
	uint64_t end = mds_replay_bounds_end(rp->bounds);

	rp->active = false;
	log_info("replay complete: %u change(s) replayed, %u refused; up to transno %llu",
		 rp->replayed, rp->refused, (unsigned long long)rp->applied);
	/* New changes are numbered past every number a lost one may have had: a client that comes
	 * back late must not take a new last_committed for its own change's. */
	if (m->commit.transno < end)
		m->commit.transno = end;
	/* The window's numbers are settled with this commit: a crash from now on skips afresh. */
	{
		struct mdt_txn *t;
		int rc = mds_commit_txn(m, &t);

		if (rc == 0)
			rc = mdt_numbers_settled(t);
		if (rc)
			log_err("cannot record that the replays ran: %s (a crash before the next commit "
				"reuses this start's window)", strerror(-rc));
		else
			mds_commit_applied(m);
	}
	mds_commit_flush(m, m->commit.changes);
	while (rp->held) {
		struct reqq_item *it = rp->held;
		rp->held = it->next;
		it->next = NULL;
		reqq_push(&m->queue, it);
	}
	rp->held_tail = &rp->held;
	mds_replay_free(m);
	atomic_store(&rp->recovering, false);
	if (!m->commit.open)
		atomic_store(&m->commit.pending, false);
}

void mds_replay_drain(struct mds *m)
{
	struct mds_replay *rp = &m->replay;
	struct batch_state bs = { 0 };
	struct mdt_txn *t = NULL;

	if (!rp->more)
		return;
	rp->more = false;
	while (rp->pending) {
		struct mds_replay_wait *w = rp->pending;

		if (rp->active && w->transno > rp->applied + 1 && !all_heard(rp, false))
			break; /* a lower one may still come */
		if (!t && mds_commit_txn(m, &t) != 0)
			break;
		rp->pending = w->next;
		apply(m, &t, w, &bs);
		if (!t || m->commit.changes >= 256) {
			mds_commit_flush(m, m->commit.changes);
			t = NULL;
		}
	}
	if (bs.released)
		m->destroyer.more = true;
	if (rp->active && !rp->pending && all_heard(rp, true))
		replay_end(m);
	else if (m->commit.open && mds_commit_due(m))
		mds_commit_flush(m, m->commit.changes);
}

void mds_replay_expire(struct mds *m, uint64_t now_ns)
{
	struct mds_replay *rp = &m->replay;
	uint64_t window = (uint64_t)m->recovery_s * 1000000000ull;
	uint32_t gone = 0;

	if (!rp->active || now_ns - m->started_ns < window)
		return;
	/* One still replaying (heard from lately, or with a replay waiting) is given until twice
	 * the window; the others are given up. */
	for (uint32_t i = 0; i < rp->nclients; i++) {
		struct mds_replay_client *c = &rp->clients[i];

		if (c->state != AWAITED)
			continue;
		if (now_ns - m->started_ns < 2 * window &&
		    (waiting_of(rp, c->uuid) || (c->heard_ns && now_ns - c->heard_ns < REPLAY_QUIET_NS)))
			continue;
		c->state = GIVEN_UP;
		gone++;
	}
	if (!gone)
		return;
	log_warn("the recovery window passed: %u client(s) did not come back or stopped replaying, "
		 "and the changes they were answered that were not committed are lost; replaying the "
		 "others' in order", gone);
	rp->more = true;
	mds_replay_drain(m);
}
