/*
 * The MDS's handlers of the file system as a whole: sessions (MDS_CONNECT), space, the OST table
 * and its OSSs, pools, OST administration, and locks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/dispatch.h"

/* Adds an OST's figures to a sum kept in 4 KiB blocks, converting from its own block size. */
static void statfs_add(struct lw_statfs *sum, const struct lw_statfs *sf)
{
	uint64_t bs = sf->bsize ? sf->bsize : 4096;

	sum->blocks += sf->blocks * bs / 4096;
	sum->bfree += sf->bfree * bs / 4096;
	sum->bavail += sf->bavail * bs / 4096;
	sum->files += sf->files;
	sum->ffree += sf->ffree;
}

static int exec_statfs(struct mds *m, struct mdt_txn *t, struct reply *r)
{
	struct lw_statfs_rep rep = { 0 };
	const struct mdt_ost *table;
	uint32_t count, gen;
	int rc;

	rc = mdt_statfs(t, &rep.mdt);
	if (rc)
		return rc;
	rep.osts.bsize = 4096;
	rep.osts.namemax = LOOM_NAME_MAX;
	table = mdt_ost_table(m->store, &count, &gen);
	for (uint32_t i = 0; i < count; i++) {
		if (table[i].state & LW_TGT_INACTIVE)
			continue;
		statfs_add(&rep.osts, &table[i].sf);
		rep.ost_count++;
	}
	return mds_reply_copy(r, &rep, sizeof(rep));
}

static int exec_ost_table(struct mds *m, struct reply *r)
{
	const struct mdt_ost *table;
	struct lw_ost_table_rep rep;
	struct lw_wr w;
	uint32_t count, gen;
	size_t len;
	int rc;

	table = mdt_ost_table(m->store, &count, &gen);
	len = sizeof(rep) + (size_t)count * sizeof(struct lw_ost_entry);
	if (len > LW_MAX_BODY)
		return -E2BIG;
	rc = mds_reply_alloc(r, len);
	if (rc)
		return rc;
	rep.gen = gen;
	rep.count = count;
	lw_wr_init(&w, r->body, len);
	lw_wr_put(&w, &rep, sizeof(rep));
	for (uint32_t i = 0; i < count; i++) {
		struct lw_ost_entry *e = lw_wr_reserve(&w, sizeof(*e));
		e->idx = table[i].idx;
		e->state = table[i].state;
		e->port = table[i].port;
		memcpy(e->host, table[i].host, sizeof(e->host));
		memcpy(e->uuid, table[i].uuid, sizeof(e->uuid));
		e->sf = table[i].sf;
	}
	return w.err;
}

/* MDS_POOL LIST: one lw_pool_ent and its OSTs per pool, grown as pools come. */
struct pool_list {
	uint8_t *buf;
	size_t len, cap;
};

static int pool_list_one(const char *name, const uint32_t *osts, uint32_t n, void *arg)
{
	struct pool_list *pl = arg;
	struct lw_pool_ent e = { .nosts = n };
	size_t need = sizeof(e) + (size_t)n * 4;

	if (pl->len + need > LW_MAX_BODY - 64)
		return -E2BIG;
	if (pl->len + need > pl->cap) {
		size_t cap = MAX(pl->cap * 2, pl->len + need);
		uint8_t *b = realloc(pl->buf, cap);
		if (!b)
			return -ENOMEM;
		pl->buf = b;
		pl->cap = cap;
	}
	memcpy(e.name, name, strnlen(name, sizeof(e.name) - 1));
	memcpy(pl->buf + pl->len, &e, sizeof(e));
	memcpy(pl->buf + pl->len + sizeof(e), osts, (size_t)n * 4);
	pl->len += need;
	return 0;
}

static int exec_pool(struct mdt_txn *t, struct srv_req *req, const struct lw_mds_req *q, struct reply *r)
{
	const struct lw_pool_req *p = &q->u.pool;
	struct pool_list pl = { 0 };
	int rc;

	if (p->cmd == LW_POOL_LIST) {
		if (p->name[0]) {
			uint32_t *osts, n;

			rc = mdt_pool_members(t, p->name, &osts, &n);
			if (rc == 0)
				rc = pool_list_one(p->name, osts, n, &pl);
			free(osts);
		} else {
			rc = mdt_pool_each(t, pool_list_one, &pl);
		}
		if (rc == 0) {
			r->body = pl.buf ? pl.buf : malloc(1);
			r->len = (uint32_t)pl.len;
			return r->body ? 0 : -ENOMEM;
		}
		free(pl.buf);
		return rc;
	}
	/* Where new files go is root's to steer (root squash makes a client's root nobody here),
	 * on an administrator's node (a node's key is no administrator's). */
	if (q->cred.uid != 0 || srv_req_node(req))
		return -EPERM;
	switch (p->cmd) {
	case LW_POOL_NEW: rc = mdt_pool_new(t, p->name); break;
	case LW_POOL_DESTROY: rc = mdt_pool_destroy(t, p->name); break;
	case LW_POOL_ADD: rc = mdt_pool_add(t, p->name, p->idx); break;
	default: rc = mdt_pool_remove(t, p->name, p->idx); break;
	}
	if (rc == 0 && (p->cmd == LW_POOL_NEW || p->cmd == LW_POOL_DESTROY))
		log_info("pool %s %s by %s", p->name, p->cmd == LW_POOL_NEW ? "made" : "destroyed",
			 srv_req_peer(req));
	else if (rc == 0)
		log_info("pool %s: OST%04x %s by %s", p->name, p->idx,
			 p->cmd == LW_POOL_ADD ? "added" : "removed", srv_req_peer(req));
	return rc;
}

/* Why the MDS refused an OST, for its log (the OSS logs its own line from the errno). */
static const char *ost_refusal(int rc)
{
	switch (rc) {
	case -EEXIST: return "its index belongs to another OST (if that OST is lost for good, format the new one "
			     "with --index N --replace)";
	case -ENODEV: return "it was removed from the file system (loom ost remove); format it again to use the disk";
	case -EBUSY: return "the OST holding that index is in service (its OSS is heard from): stop it first";
	case -EINVAL: return "another file system's, another index than its own, or an invalid record";
	default: return strerror(-rc);
	}
}

/* Who speaks for the OST from now on: if this connection drops, the OST is down. Memory only; at
 * worst (out of memory) the OST is found silent by its missing heartbeats instead. */
static void ost_registered(struct mds *m, struct srv_req *req, uint32_t idx)
{
	u64map_put(&m->ost_conns, idx, (void *)(uintptr_t)req->conn_id);
	/* The OSTs it brings are usable at once: the destroyer may have waited for one. */
	m->destroyer.more = true;
	m->destroyer.next_try_ns = 0;
}

static int exec_ost_register(struct mds *m, struct mdt_txn *t, struct srv_req *req,
			     const struct lw_mds_req *q, struct reply *r)
{
	struct lw_ost_register_rep rep = { 0 };
	int rc;

	rc = mdt_ost_register(t, &q->u.ost_register, clock_mono_ns(), &rep.idx);
	if (rc) {
		log_warn("refused OST %s from %s (wants index %d): %s", q->u.ost_register.uuid,
			 srv_req_peer(req), (int)q->u.ost_register.want_idx, ost_refusal(rc));
		return rc;
	}
	log_info("OST%04x registered: %s at %s:%u", rep.idx, q->u.ost_register.uuid,
		 q->u.ost_register.host, q->u.ost_register.port);
	ost_registered(m, req, rep.idx);
	snprintf(rep.fsname, sizeof(rep.fsname), "%s", mdt_store_fsname(m->store));
	return mds_reply_copy(r, &rep, sizeof(rep));
}

static int exec_ost_replace(struct mds *m, struct mdt_txn *t, struct srv_req *req,
			    const struct lw_mds_req *q, struct reply *r)
{
	const struct lw_ost_register_req *a = &q->u.ost_register;
	struct lw_ost_replace_rep rep = { 0 };
	struct mdt_ost_replaced done;
	int rc;

	rc = mdt_ost_replace(t, a, clock_mono_ns(), &done);
	if (rc) {
		log_warn("refused OST %s from %s as the replacement of OST%04x: %s", a->uuid, srv_req_peer(req),
			 a->want_idx, ost_refusal(rc));
		return rc;
	}
	if (done.replaced)
		log_warn("OST%04x replaced: %s at %s:%u takes the index of %s%s; objects below id %llu were "
			 "on the old OST and are lost", done.idx, a->uuid, a->host, a->port, done.old_uuid,
			 done.was_removed ? " (removed)" : "", (unsigned long long)done.lost_below);
	if (done.mirrored) {
		log_warn("OST%04x: the copies (or erasure-coded objects) %u redundant file%s had there are "
			 "stale, to make again onto the new OST", done.idx, done.mirrored,
			 done.mirrored == 1 ? "" : "s");
		mds_resync_now(m, 0);
	}
	else
		log_info("OST%04x registered (a replacement): %s at %s:%u", done.idx, a->uuid, a->host, a->port);
	ost_registered(m, req, done.idx);
	rep.idx = done.idx;
	rep.lost_below = done.lost_below;
	snprintf(rep.fsname, sizeof(rep.fsname), "%s", mdt_store_fsname(m->store));
	return mds_reply_copy(r, &rep, sizeof(rep));
}

static int exec_heartbeat(struct mds *m, const struct lw_mds_req *q)
{
	uint64_t now = clock_mono_ns();

	for (uint32_t i = 0; i < q->u.heartbeat.f.count; i++) {
		struct lw_ost_heartbeat_ent e;
		lw_heartbeat_ent(q, i, &e);
		if (mdt_ost_heartbeat(m->store, e.idx, &e.sf, now) == -ENOENT)
			return -ENOENT; /* the OSS re-registers */
	}
	return 0;
}

static int exec_connect(struct mds *m, struct srv_req *req, const struct lw_mds_req *q,
			struct reply *r)
{
	struct lw_connect_rep rep = { 0 };
	struct mds_session *sess;
	uint32_t count, gen;
	const char *fsname = mdt_store_fsname(m->store);
	const struct lw_auth_node *node;

	if (q->u.connect.proto_version < LW_VERSION_MIN || q->u.connect.proto_version > LW_VERSION)
		return -EPROTONOSUPPORT;
	if (q->u.connect.fsname[0] && strncmp(q->u.connect.fsname, fsname, sizeof(q->u.connect.fsname))) {
		log_warn("client %s asked for file system '%.16s'; this is '%s'", srv_req_peer(req),
			 q->u.connect.fsname, fsname);
		return -ENODEV;
	}
	/* The client's session, found again when it reconnects, by its own node only. */
	node = srv_req_node(req);
	if (mds_session_may_take(m, q->u.connect.client_uuid, node ? node->name : NULL)) {
		log_warn("client %s (node %s) named the uuid of another node's session; refused",
			 srv_req_peer(req), node->name);
		return -EPERM;
	}
	sess = mds_session_connect(m, req->conn_id, q->u.connect.client_uuid);
	if (!sess)
		return -ENOMEM;
	/* Its reply says LW_RPF_LEASES_LOST: what the session held on another connection goes. */
	mds_leases_drop_session(m, sess->sid);
	if (!sess->owner_set && (sess->uuid[0] || sess->uuid[1])) {
		/* Metadata thread: connects, the only writers of owner, all run here. */
		memset(sess->owner, 0, sizeof(sess->owner));
		if (node)
			memcpy(sess->owner, node->name, strnlen(node->name, sizeof(sess->owner) - 1));
		sess->owner_set = true;
	}
	mdt_ost_table(m->store, &count, &gen);
	rep.root_ino = LOOM_ROOT_INO;
	/* Differs from the last one a client saw when its session is not the one it had: the MDS
	 * restarted, or ended the session after the client stayed away past the recovery window.
	 * The client then opens its files again (handles live in the session). */
	rep.session_id = m->boot_id ^ (sess->sid * 0x9e3779b97f4a7c15ull);
	snprintf(rep.fsname, sizeof(rep.fsname), "%s", fsname);
	rep.max_bulk = LW_MAX_BULK;
	rep.ost_table_gen = gen;
	return mds_reply_copy(r, &rep, sizeof(rep));
}

int mds_op_connect(struct mds_op *o)
{
	return exec_connect(o->m, o->req, o->q, o->r);
}

int mds_op_statfs(struct mds_op *o)
{
	return exec_statfs(o->m, o->t, o->r);
}

int mds_op_ost_table(struct mds_op *o)
{
	return exec_ost_table(o->m, o->r);
}

int mds_op_ost_register(struct mds_op *o)
{
	return exec_ost_register(o->m, o->t, o->req, o->q, o->r);
}

int mds_op_ost_replace(struct mds_op *o)
{
	return exec_ost_replace(o->m, o->t, o->req, o->q, o->r);
}

/* Only the OSS serving an OST names its partner: the connection that registered it. */
int mds_op_ost_failover(struct mds_op *o)
{
	const struct lw_ost_addr *a = &o->q->u.ost_addr;
	void *holder = u64map_get(&o->m->ost_conns, a->idx);
	bool changed;
	int rc;

	if (!holder || (uint64_t)(uintptr_t)holder != o->req->conn_id)
		return -EPERM;
	rc = mdt_ost_set_failover(o->m->store, a->idx, a->host, a->port, &changed);
	if (rc == 0 && changed && a->host[0])
		log_info("OST%04x: its failover partner is %s:%u", a->idx, a->host, a->port);
	else if (rc == 0 && changed)
		log_info("OST%04x: no failover partner any more", a->idx);
	return rc;
}

static int exec_ost_failovers(struct mds *m, struct reply *r)
{
	struct lw_ost_table_rep rep = { 0 };
	const struct mdt_ost *table;
	uint32_t count, gen;
	struct lw_wr w;
	size_t len;
	int rc;

	table = mdt_ost_table(m->store, &count, &gen);
	for (uint32_t i = 0; i < count; i++)
		rep.count += table[i].fo_host[0] != '\0';
	len = sizeof(rep) + (size_t)rep.count * sizeof(struct lw_ost_addr);
	if (len > LW_MAX_BODY)
		return -E2BIG;
	rc = mds_reply_alloc(r, len);
	if (rc)
		return rc;
	rep.gen = gen;
	lw_wr_init(&w, r->body, len);
	lw_wr_put(&w, &rep, sizeof(rep));
	for (uint32_t i = 0; i < count; i++) {
		struct lw_ost_addr *a;

		if (!table[i].fo_host[0])
			continue;
		a = lw_wr_reserve(&w, sizeof(*a));
		if (!a)
			break;
		memset(a, 0, sizeof(*a));
		a->idx = table[i].idx;
		a->port = table[i].fo_port;
		memcpy(a->host, table[i].fo_host, sizeof(a->host));
	}
	return w.err;
}

int mds_op_ost_failovers(struct mds_op *o)
{
	return exec_ost_failovers(o->m, o->r);
}

int mds_op_heartbeat(struct mds_op *o)
{
	struct lw_ost_heartbeat_rep rep = { .nodemap_version = nodemap_version(&o->m->nodemap) };
	int rc = exec_heartbeat(o->m, o->q);

	return rc ? rc : mds_reply_copy(o->r, &rep, sizeof(rep));
}

int mds_op_pool(struct mds_op *o)
{
	return exec_pool(o->t, o->req, o->q, o->r);
}

int mds_op_ost_admin(struct mds_op *o)
{
	const struct lw_ost_admin_req *a = &o->q->u.ost_admin;
	int rc;

	/* The file system's layout of data is root's to steer (root squash makes a client's root
	 * nobody here). */
	if (o->q->cred.uid != 0)
		return -EPERM;
	rc = mdt_ost_admin(o->t, a->idx, a->set, a->clear);
	if (rc == 0)
		log_info("OST%04x %s by %s", a->idx, a->set & LW_TGT_DEACTIVATED ? "deactivated" : "activated",
			 srv_req_peer(o->req));
	return rc;
}

int mds_op_ost_remove(struct mds_op *o)
{
	const struct lw_ost_remove_req *a = &o->q->u.ost_remove;
	struct lw_ost_remove_rep rep = { 0 };
	bool dryrun = a->flags & LW_OSTRM_DRYRUN, force = a->flags & LW_OSTRM_FORCE;
	int rc;

	/* As MDS_OST_ADMIN: root's (after root squash), and ops.def's LW_OPF_ADMIN has refused node
	 * keys already; counting tells what the layouts hold, which is the administrator's too. */
	if (o->q->cred.uid != 0)
		return -EPERM;
	rc = mdt_ost_remove(o->t, a->idx, force, dryrun, &rep.files, &rep.objects);
	if (rc == -EBUSY)
		log_warn("OST%04x not removed (asked by %s): %llu files still have %llu objects there; drain it "
			 "first (loom find MOUNT --ost %u -t f | xargs loom migrate)", a->idx, srv_req_peer(o->req),
			 (unsigned long long)rep.files, (unsigned long long)rep.objects, a->idx);
	if (rc)
		return rc;
	if (!dryrun && rep.files)
		log_warn("OST%04x removed by %s (forced): %llu objects of %llu files there are lost", a->idx,
			 srv_req_peer(o->req), (unsigned long long)rep.objects, (unsigned long long)rep.files);
	else if (!dryrun)
		log_info("OST%04x removed by %s: its index is retired", a->idx, srv_req_peer(o->req));
	return mds_reply_copy(o->r, &rep, sizeof(rep));
}

int mds_op_lock(struct mds_op *o)
{
	const struct lw_lock_req *l = &o->q->u.lock;
	struct mds_session *s = mds_session_of(o->m, o->req->conn_id);
	struct lw_attr attr;
	bool fresh;
	int rc;

	if (!s)
		return -ENOMEM;
	if (l->flags & LW_LK_REPLAY_DONE) {
		/* The client replayed every lock it holds. One this start waited for is listed in the
		 * MDT already (that is why it was waited for). */
		if (mds_locks_awaiting(o->m, s->uuid))
			s->recorded = true;
		mds_lock_replay_done(o->m, s->uuid);
		s->replayed = true;
		return 0;
	}
	if (!(l->flags & LW_LK_CANCEL) && (rc = mdt_getattr(o->t, l->ino, &attr)) != 0)
		return rc;
	/* A session's first lock request lists its client in the MDT, committed with this batch,
	 * before any lock of it is answered: a start after a crash then waits for it to replay. The
	 * batch was made a write one for this (mds_session_needs_record). */
	fresh = !s->recorded && (s->uuid[0] || s->uuid[1]);
	if (fresh) {
		if (!o->write) {
			log_err("MDS_LOCK from %s: its client is not recorded and the batch is read-only",
				srv_req_peer(o->req));
			return -EIO;
		}
		rc = mds_session_record(o->m, o->t, s);
		if (rc)
			return rc;
	}
	if (l->flags & LW_LK_REPLAY)
		rc = mds_lock_replay(o->m, s->sid, s->uuid, s->replayed, l, &o->r->body, &o->r->len);
	else
		rc = mds_lock(o->m, o->req, s->sid, l, &o->r->body, &o->r->len);
	/* An error aborts this request's transaction, and the record with it. */
	if (fresh && rc < 0)
		s->recorded = false;
	return rc;
}

/* A standby's requests never reach the metadata thread: the network thread answers them
 * (netpath.c, repl.c), since this thread may be waiting for what they acknowledge. */
int mds_op_repl_pull(struct mds_op *o)
{
	(void)o;
	return -EOPNOTSUPP;
}

int mds_op_repl_copy(struct mds_op *o)
{
	(void)o;
	return -EOPNOTSUPP;
}

/* Parameters are the network thread's (netpath.c, status.c): what it shows does not wait for
 * this thread. */
int mds_op_get_param(struct mds_op *o)
{
	(void)o;
	return -EOPNOTSUPP;
}

int mds_op_set_param(struct mds_op *o)
{
	(void)o;
	return -EOPNOTSUPP;
}
