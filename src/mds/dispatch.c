/*
 * The metadata thread: decodes requests, runs them against the MDT in batches (group commit), and
 * answers only after the batch is durable.
 */
#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/util.h"
#include "mds/mds.h"
#include "proto/codec.h"

#define BATCH_MAX        1024
#define READDIR_MAX      (128u << 10)
#define TICK_MS          1000

/* A reply waiting for its batch to commit. */
struct reply {
	int status;
	void *body;     /* malloc'd */
	uint32_t len;
	uint64_t park_ino;   /* then for this truncation to be cut (0: none) */
	uint32_t park_epoch;
};

/* What the requests of a batch did that matters after it ran. */
struct batch_state {
	bool released; /* an inode was released: objects joined the destroy queue */
	bool moved_dir; /* a directory was renamed: dir_moves goes up before the replies go out */
};

static bool op_is_read_only(uint16_t op)
{
	switch (op) {
	case LW_OP_PING:
	case LW_OP_MDS_CONNECT:
	case LW_OP_MDS_LOOKUP:
	case LW_OP_MDS_GETATTR:
	case LW_OP_MDS_READLINK:
	case LW_OP_MDS_READDIR:
	case LW_OP_MDS_STATFS:
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_LISTXATTR:
	case LW_OP_MDS_GETLAYOUT:
	case LW_OP_MDS_DOM_READ:
	case LW_OP_MDS_ACCESS:
	case LW_OP_MDS_LOCK: /* memory only */
	case LW_OP_MDS_OST_TABLE:
	case LW_OP_MDS_OST_HEARTBEAT: /* memory only */
		return true;
	default:
		return false;
	}
}

static int reply_alloc(struct reply *r, size_t len)
{
	r->body = malloc(len ? len : 1);
	if (!r->body)
		return -ENOMEM;
	r->len = (uint32_t)len;
	return 0;
}

static int reply_copy(struct reply *r, const void *p, size_t len)
{
	int rc = reply_alloc(r, len);
	if (rc == 0)
		memcpy(r->body, p, len);
	return rc;
}

/* A fixed struct followed by an optional layout, then tail_len bytes of tail. */
static int reply_with_layout_tail(struct reply *r, const void *fixed, size_t flen,
				  const struct loom_layout *l, const void *tail, size_t tail_len)
{
	size_t len = flen + (l ? lw_layout_size(l->nobjs) : 0) + tail_len;
	struct lw_wr w;
	int rc = reply_alloc(r, len);

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

static int reply_with_layout(struct reply *r, const void *fixed, size_t flen,
			     const struct loom_layout *l)
{
	return reply_with_layout_tail(r, fixed, flen, l, NULL, 0);
}

/* The session a request belongs to (sessions.c); 0 only without memory. */
static uint64_t sid_of(struct mds *m, const struct srv_req *req)
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
	return reply_copy(r, &rep, sizeof(rep));
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
	rc = reply_alloc(r, len);
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
	rc = reply_alloc(r, sizeof(rep) + cap);
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

static int exec_getxattr(struct mdt_txn *t, const struct lw_mds_req *q, struct reply *r)
{
	struct lw_blob_rep rep = { 0 };
	size_t cap = q->u.xattr.f.size, len = 0;
	int rc;

	if (cap > LOOM_XATTR_SIZE_MAX)
		cap = LOOM_XATTR_SIZE_MAX;
	rc = reply_alloc(r, sizeof(rep) + cap);
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

static int exec_create(struct mds *m, struct mdt_txn *t, struct srv_req *req,
		       const struct lw_mds_req *q, struct timespec now, struct reply *r)
{
	struct lw_create_rep rep = { 0 };
	struct loom_layout *layout = NULL;
	bool created = false;
	int rc;

	rc = mdt_create(t, &q->cred, q->u.create.f.parent, q->u.create.name.s, q->u.create.name.len,
			q->u.create.f.mode, q->u.create.f.rdev, (q->u.create.f.flags & LW_CR_EXCL) != 0,
			q->u.create.has_layout ? &q->u.create.layout : NULL, now, &rep.attr, &layout,
			&created);
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
			if (rc)
				goto out;
		}
		rc = mds_handle_open(m, rep.attr.ino, sid_of(m, req),
				     (q->u.create.f.open_flags & O_ACCMODE) != O_RDONLY, &rep.handle);
		if (rc)
			goto out;
	}
	rep.has_layout = layout != NULL;
	rc = reply_with_layout(r, &rep, sizeof(rep), layout);
out:
	free(layout);
	return rc;
}

/* A conditional open whose conditions no longer hold: OPEN_STALE with the reply built (nothing
 * was done); 0 when it may go ahead; an error of the inode. */
#define OPEN_STALE 1
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
	rc = reply_copy(r, rep, sizeof(*rep));
	return rc ? rc : OPEN_STALE;
}

/* MDS_OPEN for a handle made already: the checks, the layout, the Data-on-MDT bytes. Returns
 * OPEN_STALE (a reply, and no open: the handle is to be dropped) for a conditional open whose
 * conditions failed. */
static int open_with_handle(struct mds *m, struct mdt_txn *t, const struct lw_mds_req *q,
			    struct timespec now, uint64_t handle, struct reply *r)
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
	rc = mdt_open(t, &q->cred, q->u.open.ino, q->u.open.open_flags, now, &rep.attr, &layout);
	/* Data-on-MDT: the file's first bytes travel with the open, so a small file costs one
	 * round trip. */
	if (rc == 0 && layout && layout->dom_size)
		rc = mdt_dom_peek(t, q->u.open.ino, &dom, &dom_len);
	if (rc == 0) {
		rep.has_layout = layout != NULL;
		rep.dom_len = dom_len;
		rc = reply_with_layout_tail(r, &rep, sizeof(rep), layout, dom, dom_len);
	}
	free(layout);
	return rc;
}

/* The handle is made before the open reads the inode: see run_open_here. */
static int exec_open(struct mds *m, struct mdt_txn *t, struct srv_req *req, const struct lw_mds_req *q,
		     struct timespec now, struct reply *r)
{
	uint64_t handle;
	int rc = mds_handle_open(m, q->u.open.ino, sid_of(m, req), (q->u.open.open_flags & O_ACCMODE) != O_RDONLY,
				 &handle);

	if (rc)
		return rc;
	rc = open_with_handle(m, t, q, now, handle, r);
	if (rc)
		mds_handle_forget(m, handle);
	if (rc == OPEN_STALE)
		rc = 0; /* answered: nothing was opened */
	return rc;
}

/* The Data-on-MDT parts of a size report, written in one go; *end gets where the last ends. */
static int dom_write_parts(struct mdt_txn *t, const struct lw_mds_req *q, uint64_t *end)
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
	}
	rc = mdt_dom_write_parts(t, q->u.close.ino, ext, n);
	free(ext);
	return rc;
}

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
	rc = mds_handle_check(m, c->handle, c->ino, sid_of(m, req));
	if (rc)
		return rc;
	/* Data-on-MDT bytes land with the size that covers them, in one transaction; whatever a
	 * late report wrote past the size (a truncation came first) is cut again. Bytes written
	 * are a change of the data, whatever the flags say. */
	if (c->flags & LW_CL_DOM)
		rc = dom_write_parts(t, q, &carried);
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
			rc = mds_handle_close(m, t, c->handle, c->ino, sid_of(m, req), &bs->released);
	}
	if (rc)
		return rc;
	return reply_copy(r, &attr, sizeof(attr));
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
	/* Where new files go is root's to steer (root squash makes a client's root nobody here). */
	if (q->cred.uid != 0)
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

static int exec_ost_register(struct mds *m, struct mdt_txn *t, struct srv_req *req,
			     const struct lw_mds_req *q, struct reply *r)
{
	struct lw_ost_register_rep rep = { 0 };
	int rc;

	rc = mdt_ost_register(t, &q->u.ost_register, clock_mono_ns(), &rep.idx);
	if (rc) {
		log_warn("refused OST %s from %s (wants index %d): %s", q->u.ost_register.uuid,
			 srv_req_peer(req), (int)q->u.ost_register.want_idx, strerror(-rc));
		return rc;
	}
	log_info("OST%04x registered: %s at %s:%u", rep.idx, q->u.ost_register.uuid,
		 q->u.ost_register.host, q->u.ost_register.port);
	/* Remember who speaks for it: if this connection drops, the OST is down. Memory only; at
	 * worst (out of memory) the OST is found silent by its missing heartbeats instead. */
	u64map_put(&m->ost_conns, rep.idx, (void *)(uintptr_t)req->conn_id);
	snprintf(rep.fsname, sizeof(rep.fsname), "%s", mdt_store_fsname(m->store));
	/* The OSTs it brings are usable at once: the destroyer may have waited for one. */
	m->destroyer.more = true;
	m->destroyer.next_try_ns = 0;
	return reply_copy(r, &rep, sizeof(rep));
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

	if (q->u.connect.proto_version < LW_VERSION_MIN || q->u.connect.proto_version > LW_VERSION)
		return -EPROTONOSUPPORT;
	if (q->u.connect.fsname[0] && strncmp(q->u.connect.fsname, fsname, sizeof(q->u.connect.fsname))) {
		log_warn("client %s asked for file system '%.16s'; this is '%s'", srv_req_peer(req),
			 q->u.connect.fsname, fsname);
		return -ENODEV;
	}
	/* The client's session, found again when it reconnects. */
	sess = mds_session_connect(m, req->conn_id, q->u.connect.client_uuid);
	if (!sess)
		return -ENOMEM;
	mdt_ost_table(m->store, &count, &gen);
	rep.root_ino = LOOM_ROOT_INO;
	/* Differs from the last one a client saw when its session is not the one it had: the MDS
	 * restarted, or ended the session after the client stayed away past the recovery window.
	 * The client then opens its files again (handles live in the session). */
	rep.session_id = m->boot_id ^ (sess->sid * 0x9e3779b97f4a7c15ull);
	snprintf(rep.fsname, sizeof(rep.fsname), "%s", fsname);
	rep.max_bulk = LW_MAX_BULK;
	rep.ost_table_gen = gen;
	return reply_copy(r, &rep, sizeof(rep));
}

/*
 * -ENOENT because the inode a request names (by number) is gone, not because a name is missing,
 * becomes -ESTALE, as an NFS server says: a client that acted on a cached name (renamed over or
 * removed on another node) then looks the name up again instead of failing.
 */
static int stale_if_gone(struct mdt_txn *t, int rc, uint64_t ino)
{
	struct lw_attr attr;

	if (rc == -ENOENT && mdt_getattr(t, ino, &attr) == -ENOENT)
		return -ESTALE;
	return rc;
}

static uint64_t target_ino(const struct lw_mds_req *q)
{
	switch (q->op) {
	case LW_OP_MDS_LOOKUP:
	case LW_OP_MDS_UNLINK:
	case LW_OP_MDS_RMDIR:
		return q->u.name.f.parent;
	case LW_OP_MDS_CREATE: return q->u.create.f.parent;
	case LW_OP_MDS_MKDIR: return q->u.mkdir.f.parent;
	case LW_OP_MDS_SYMLINK: return q->u.symlink.f.parent;
	case LW_OP_MDS_LINK: return q->u.link.f.ino;
	case LW_OP_MDS_GETATTR:
	case LW_OP_MDS_READLINK:
	case LW_OP_MDS_GETLAYOUT:
	case LW_OP_MDS_DOM_READ:
		return q->u.ino.ino;
	case LW_OP_MDS_SETATTR: return q->u.setattr.ino;
	case LW_OP_MDS_READDIR: return q->u.readdir.ino;
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_SETXATTR:
	case LW_OP_MDS_LISTXATTR:
	case LW_OP_MDS_REMOVEXATTR:
		return q->u.xattr.f.ino;
	case LW_OP_MDS_OPEN: return q->u.open.ino;
	case LW_OP_MDS_ACCESS: return q->u.access.ino;
	case LW_OP_MDS_SETLAYOUT: return q->u.setlayout.f.ino;
	case LW_OP_MDS_LOCK: return q->u.lock.ino;
	default: return 0; /* CLOSE and SIZE_UPDATE: a gone inode is fine there */
	}
}

static int exec_one(struct mds *m, struct mdt_txn *t, struct srv_req *req, const struct lw_mds_req *q,
		    struct batch_state *bs, struct reply *r);

/* A request that truncated (a size change, O_TRUNC) is answered once the objects are cut: its
 * reply, which starts with the inode's attributes in each case, waits for truncation (ino,
 * epoch) when that is still to be cut. */
static void park_if_truncated(struct mds *m, struct mdt_txn *t, const struct lw_mds_req *q,
			      struct reply *r)
{
	struct lw_attr attr;
	bool truncating;

	switch (q->op) {
	case LW_OP_MDS_SETATTR: truncating = (q->u.setattr.valid & LW_SA_SIZE) != 0; break;
	case LW_OP_MDS_OPEN: truncating = (q->u.open.open_flags & O_TRUNC) != 0; break;
	case LW_OP_MDS_CREATE:
		truncating = (q->u.create.f.flags & LW_CR_OPEN) && (q->u.create.f.open_flags & O_TRUNC);
		break;
	default: truncating = false; break;
	}
	if (!truncating || r->len < sizeof(attr))
		return;
	memcpy(&attr, r->body, sizeof(attr));
	if (attr.trunc_epoch && mdt_trunc_pending(t, attr.ino, attr.trunc_epoch)) {
		r->park_ino = attr.ino;
		r->park_epoch = attr.trunc_epoch;
		m->truncator.more = true;
	}
}

/* Runs one decoded request, telling a vanished inode from a missing name. */
static int exec(struct mds *m, struct mdt_txn *t, struct srv_req *req, const struct lw_mds_req *q,
		struct batch_state *bs, struct reply *r)
{
	int rc = exec_one(m, t, req, q, bs, r);
	uint64_t ino = target_ino(q);

	if (rc == 0)
		park_if_truncated(m, t, q, r);
	if (rc != -ENOENT)
		return rc;
	if (q->op == LW_OP_MDS_RENAME) {
		rc = stale_if_gone(t, rc, q->u.rename.f.src_parent);
		return rc == -ENOENT ? stale_if_gone(t, rc, q->u.rename.f.dst_parent) : rc;
	}
	return ino ? stale_if_gone(t, rc, ino) : rc;
}

/* Runs one decoded request. */
static int exec_one(struct mds *m, struct mdt_txn *t, struct srv_req *req, const struct lw_mds_req *q,
		struct batch_state *bs, struct reply *r)
{
	struct timespec now = clock_real();
	struct mdt_unlinked victim = { 0 };
	struct lw_attr attr;
	struct loom_layout *layout = NULL;
	int rc;

	switch (q->op) {
	case LW_OP_PING:
		return 0;
	case LW_OP_MDS_CONNECT:
		return exec_connect(m, req, q, r);
	case LW_OP_MDS_LOOKUP:
		rc = mdt_lookup(t, &q->cred, q->u.name.f.parent, q->u.name.name.s, q->u.name.name.len, &attr);
		return rc ? rc : reply_copy(r, &attr, sizeof(attr));
	case LW_OP_MDS_GETATTR:
		rc = mdt_getattr(t, q->u.ino.ino, &attr);
		return rc ? rc : reply_copy(r, &attr, sizeof(attr));
	case LW_OP_MDS_SETATTR:
		rc = mdt_setattr(t, &q->cred, &q->u.setattr, now, &attr);
		return rc ? rc : reply_copy(r, &attr, sizeof(attr));
	case LW_OP_MDS_CREATE:
		return exec_create(m, t, req, q, now, r);
	case LW_OP_MDS_MKDIR:
		rc = mdt_mkdir(t, &q->cred, q->u.mkdir.f.parent, q->u.mkdir.name.s, q->u.mkdir.name.len,
			       q->u.mkdir.f.mode, now, &attr);
		return rc ? rc : reply_copy(r, &attr, sizeof(attr));
	case LW_OP_MDS_UNLINK:
		rc = mdt_unlink(t, &q->cred, q->u.name.f.parent, q->u.name.name.s, q->u.name.name.len, now,
				&victim);
		release_if_unused(m, t, &victim, bs, &rc);
		return rc;
	case LW_OP_MDS_RMDIR:
		return mdt_rmdir(t, &q->cred, q->u.name.f.parent, q->u.name.name.s, q->u.name.name.len, now);
	case LW_OP_MDS_RENAME: {
		uint32_t moved = 0;

		rc = mdt_rename(t, &q->cred, q->u.rename.f.src_parent, q->u.rename.src.s,
				q->u.rename.src.len, q->u.rename.f.dst_parent, q->u.rename.dst.s,
				q->u.rename.dst.len, q->u.rename.f.flags, now, &victim, &moved);
		/* Paths through a moved directory lead elsewhere now: clients check names they
		 * cached against dir_moves at their next open. */
		if (rc == 0 && S_ISDIR(moved))
			bs->moved_dir = true;
		release_if_unused(m, t, &victim, bs, &rc);
		return rc;
	}
	case LW_OP_MDS_LINK:
		rc = mdt_link(t, &q->cred, q->u.link.f.ino, q->u.link.f.new_parent, q->u.link.name.s,
			      q->u.link.name.len, now, &attr);
		return rc ? rc : reply_copy(r, &attr, sizeof(attr));
	case LW_OP_MDS_SYMLINK:
		rc = mdt_symlink(t, &q->cred, q->u.symlink.f.parent, q->u.symlink.name.s,
				 q->u.symlink.name.len, q->u.symlink.target, q->u.symlink.f.targetlen, now,
				 &attr);
		return rc ? rc : reply_copy(r, &attr, sizeof(attr));
	case LW_OP_MDS_READLINK: {
		struct lw_blob_rep rep = { 0 };
		size_t len = 0;

		rc = reply_alloc(r, sizeof(rep) + LOOM_SYMLINK_MAX);
		if (rc)
			return rc;
		rc = mdt_readlink(t, q->u.ino.ino, (char *)r->body + sizeof(rep), LOOM_SYMLINK_MAX, &len);
		if (rc)
			return rc;
		rep.len = (uint32_t)len;
		memcpy(r->body, &rep, sizeof(rep));
		r->len = (uint32_t)(sizeof(rep) + len);
		return 0;
	}
	case LW_OP_MDS_READDIR:
		return exec_readdir(t, q, r);
	case LW_OP_MDS_STATFS:
		return exec_statfs(m, t, r);
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_LISTXATTR:
		return exec_getxattr(t, q, r);
	case LW_OP_MDS_SETXATTR:
		return mdt_setxattr(t, &q->cred, q->u.xattr.f.ino, q->u.xattr.name.s, q->u.xattr.name.len,
				    q->u.xattr.value, q->u.xattr.f.size, q->u.xattr.f.flags, now);
	case LW_OP_MDS_REMOVEXATTR:
		return mdt_removexattr(t, &q->cred, q->u.xattr.f.ino, q->u.xattr.name.s,
				       q->u.xattr.name.len, now);
	case LW_OP_MDS_OPEN:
		return exec_open(m, t, req, q, now, r);
	case LW_OP_MDS_ACCESS:
		return mdt_access(t, &q->cred, q->u.access.ino, q->u.access.mask);
	case LW_OP_MDS_LOCK:
		if (!(q->u.lock.flags & LW_LK_CANCEL) && (rc = mdt_getattr(t, q->u.lock.ino, &attr)) != 0)
			return rc;
		return mds_lock(m, req, sid_of(m, req), &q->u.lock, &r->body, &r->len);
	case LW_OP_MDS_CLOSE:
	case LW_OP_MDS_SIZE_UPDATE:
		return exec_close(m, t, req, q, bs, r);
	case LW_OP_MDS_DOM_READ: {
		struct lw_blob_rep rep = { 0 };
		const void *data;

		rc = mdt_dom_read(t, q->u.ino.ino, &data, &rep.len);
		return rc ? rc : reply_with_layout_tail(r, &rep, sizeof(rep), NULL, data, rep.len);
	}
	case LW_OP_MDS_GETLAYOUT:
		rc = mdt_getlayout(t, q->u.ino.ino, &layout);
		if (rc == 0)
			rc = reply_with_layout(r, NULL, 0, layout);
		free(layout);
		return rc;
	case LW_OP_MDS_SETLAYOUT:
		/* A file open elsewhere may hold written data its size does not show yet: laying it
		 * out again would destroy that data. */
		if (mds_ino_is_open(m, q->u.setlayout.f.ino) && mdt_getattr(t, q->u.setlayout.f.ino, &attr) == 0 &&
		    S_ISREG(attr.mode))
			return -EBUSY;
		rc = mdt_setlayout(t, &q->cred, q->u.setlayout.f.ino, &q->u.setlayout.layout,
				   q->u.setlayout.f.flags, &layout);
		if (rc == 0) {
			rc = reply_with_layout(r, NULL, 0, layout);
			bs->released = true; /* old objects may have joined the destroy queue */
		}
		free(layout);
		return rc;
	case LW_OP_MDS_OST_TABLE:
		return exec_ost_table(m, r);
	case LW_OP_MDS_OST_REGISTER:
		return exec_ost_register(m, t, req, q, r);
	case LW_OP_MDS_POOL:
		return exec_pool(t, req, q, r);
	case LW_OP_MDS_SWAP_LAYOUTS: {
		const struct lw_swap_req *w = &q->u.swap;

		/* A writer's data may not have reached the size yet, and would land in the old objects. */
		if (mds_ino_has_writer(m, w->ino) || mds_ino_has_writer(m, w->tmp))
			return -EBUSY;
		rc = mdt_swap_layouts(t, &q->cred, w->ino, w->tmp, w->size, w->mtime, w->mtime_ns, now);
		if (rc == 0)
			mds_swap_done(m, w->ino, w->tmp);
		return rc;
	}
	case LW_OP_MDS_OST_ADMIN:
		/* The file system's layout of data is root's to steer (root squash makes a client's
		 * root nobody here). */
		if (q->cred.uid != 0)
			return -EPERM;
		rc = mdt_ost_admin(t, q->u.ost_admin.idx, q->u.ost_admin.set, q->u.ost_admin.clear);
		if (rc == 0)
			log_info("OST%04x %s by %s", q->u.ost_admin.idx,
				 q->u.ost_admin.set & LW_TGT_DEACTIVATED ? "deactivated" : "activated",
				 srv_req_peer(req));
		return rc;
	case LW_OP_MDS_OST_HEARTBEAT:
		return exec_heartbeat(m, q);
	default:
		return -EOPNOTSUPP;
	}
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

/* Internal items: a client went away, or the destroyer finished a list. */
static int exec_internal(struct mds *m, struct mdt_txn *t, struct srv_req *item, struct batch_state *bs)
{
	switch (item->hdr.opcode) {
	case MDS_INTERNAL_DISCONNECT:
		osts_of_conn_lost(m, item->conn_id);
		mds_locks_drop_waiters(m, item->conn_id);
		mds_trunc_drop_conn(m, item->conn_id);
		return mds_session_disconnect(m, t, item->conn_id, &bs->released);
	case MDS_INTERNAL_DESTROYED:
		return mds_destroyer_done(m, t, (const struct loom_ostobj *)item->body,
					  item->hdr.body_len / (uint32_t)sizeof(struct loom_ostobj),
					  item->hdr.status == 0);
	case MDS_INTERNAL_TRUNCATED:
		return mds_truncator_done(m, t, item->body, item->hdr.body_len);
	case MDS_INTERNAL_DROP_HANDLE: {
		const struct mds_handle_ref *h = (const struct mds_handle_ref *)item->body;
		return mds_handle_close(m, t, h->handle, h->ino, h->sid, &bs->released);
	}
	default:
		return -EINVAL;
	}
}

/* Requests that must not be applied twice: a resend of one that was applied is answered from
 * the reply cache. The others are idempotent (reading, setting attributes, reporting sizes). */
static bool op_cacheable(uint16_t op)
{
	switch (op) {
	case LW_OP_MDS_CREATE:
	case LW_OP_MDS_MKDIR:
	case LW_OP_MDS_UNLINK:
	case LW_OP_MDS_RMDIR:
	case LW_OP_MDS_RENAME:
	case LW_OP_MDS_LINK:
	case LW_OP_MDS_SYMLINK:
	case LW_OP_MDS_SETXATTR:
	case LW_OP_MDS_REMOVEXATTR:
	case LW_OP_MDS_SETLAYOUT:
		return true;
	default:
		return false;
	}
}

static int decode_req(struct mds *m, const struct srv_req *req, struct lw_mds_req *q)
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
	return 0;
}

/* Runs one item in its own child transaction (write batches), so its failure leaves no trace. */
static void run_one(struct mds *m, struct mdt_txn *txn, bool write, struct srv_req *req,
		    struct batch_state *bs, struct reply *r)
{
	struct mdt_txn *child = txn;
	struct mds_session *sess = NULL;
	struct lw_mds_req q;
	int rc;

	if (req->conn) {
		rc = decode_req(m, req, &q);
		if (rc) {
			r->status = rc;
			return;
		}
	}
	if (req->conn && write && op_cacheable(req->hdr.opcode)) {
		sess = mds_session_of(m, req->conn_id);
		if (sess && !sess->uuid[0] && !sess->uuid[1])
			sess = NULL; /* a client without an identity cannot be told apart on resend */
	}
	if (sess && (req->hdr.flags & LW_F_RESENT)) {
		void *body = NULL;
		uint32_t len = 0;
		int status;

		if (mdt_reply_get(txn, sess->uuid, req->hdr.req_id, req->hdr.opcode, &status, &body,
				  &len) == 0) {
			log_debug("%s %llu from %s resent: answered from the reply cache",
				  lw_op_name(req->hdr.opcode), (unsigned long long)req->hdr.req_id,
				  srv_req_peer(req));
			r->status = status;
			r->body = body;
			r->len = len;
			return;
		}
	}
	if (write) {
		rc = mdt_txn_child(txn, &child);
		if (rc) {
			r->status = rc;
			return;
		}
	}
	rc = req->conn ? exec(m, child, req, &q, bs, r) : exec_internal(m, child, req, bs);
	/* The answer is kept with the change, in the same transaction: at most once, also across
	 * a restart of the MDS. */
	if (rc == 0 && sess)
		rc = mdt_reply_put(child, sess->uuid, req->hdr.req_id, req->hdr.opcode, 0, r->body,
				   r->len, clock_real().tv_sec);
	if (rc == MDS_PARKED) {
		/* The lock manager holds the request now; it changed nothing durable. */
		if (write)
			mdt_txn_commit(child);
		r->status = rc;
		return;
	}
	if (write) {
		if (rc == 0)
			rc = mdt_txn_commit(child);
		else
			mdt_txn_abort(child);
	}
	if (rc) {
		free(r->body);
		r->body = NULL;
		r->len = 0;
		if (!req->conn)
			log_err("internal work item %#x failed: %s", req->hdr.opcode, strerror(-rc));
	}
	r->status = rc;
}

static void run_batch(struct mds *m, struct srv_req *list, uint32_t n)
{
	struct reply *replies = calloc(n, sizeof(*replies));
	struct batch_state bs = { 0 };
	struct mdt_txn *txn = NULL;
	uint32_t i, durable = 0; /* replies [0, durable) are committed whatever happens later */
	bool write = false;
	int rc;

	for (struct srv_req *req = list; req; req = req->next)
		if (!req->conn || !op_is_read_only(req->hdr.opcode))
			write = true;
	rc = replies ? mdt_txn_begin(m->store, write, &txn) : -ENOMEM;
	if (rc == 0) {
		uint32_t first = 0; /* first request of the open transaction */

		i = 0;
		for (struct srv_req *req = list; req; req = req->next, i++) {
			run_one(m, txn, write, req, &bs, &replies[i]);
			if (!write || replies[i].status != MDT_ETXNFULL || i == first)
				continue;
			/* The transaction grew too big for LMDB: commit what ran so far and give this
			 * request a transaction of its own. */
			rc = mdt_txn_commit(txn);
			txn = NULL;
			if (rc == 0) {
				durable = i;
				rc = mdt_txn_begin(m->store, true, &txn);
			}
			if (rc)
				break;
			first = i;
			run_one(m, txn, write, req, &bs, &replies[i]);
		}
		if (bs.released)
			m->destroyer.more = true;
		if (txn) {
			if (write && rc == 0) {
				rc = mdt_txn_commit(txn);
			} else {
				mdt_txn_abort(txn);
			}
		}
		if (rc)
			log_err("commit of a batch of %u requests failed: %s; answering EIO", n, strerror(-rc));
		else
			durable = n;
	} else {
		log_err("cannot start a transaction: %s", strerror(-rc));
	}
	mds_releases_settled(m);
	if (bs.moved_dir)
		atomic_fetch_add(&m->dir_moves, 1);
	/* Truncations this batch recorded are cut now; those it saw cut free their replies. */
	if (durable == n)
		mds_trunc_release(m);
	if (m->truncator.more && !m->truncator.busy && mdt_txn_begin(m->store, false, &txn) == 0) {
		mds_truncator_kick(m, txn);
		mdt_txn_abort(txn);
	}

	/* Durable (or failed) as a whole: now answer. */
	i = 0;
	while (list) {
		struct srv_req *req = list;
		struct reply *r = replies ? &replies[i] : NULL;

		list = req->next;
		if (r && r->status == MDS_PARKED)
			; /* answered later by the lock manager */
		else if (!req->conn)
			free(req);
		else if (!r)
			srv_reply(req, -ENOMEM, NULL, 0, NULL, 0, NULL);
		else if (i >= durable)
			srv_reply(req, -EIO, NULL, 0, NULL, 0, NULL);
		else if (r->status == 0 && r->park_ino) {
			mds_trunc_park(m, req, r->body, r->len, r->park_ino, r->park_epoch);
			r->body = NULL;
		} else
			srv_reply(req, r->status, r->body, r->status ? 0 : r->len, NULL, 0, NULL);
		if (r)
			free(r->body);
		i++;
	}
	free(replies);
}

/* Inodes unlinked while open when the MDS last stopped: once the recovery window has passed,
 * those that no client opened again are released. */
static void release_orphans(struct mds *m)
{
	uint64_t inos[256], after = 0;
	size_t n = 0, total = 0;
	int rc;

	/* In order of inode number, each once: those still open stay in the table. */
	do {
		struct mdt_txn *t;
		bool released = false;

		rc = mdt_txn_begin(m->store, true, &t);
		if (rc)
			break;
		rc = mdt_orphan_list(t, after, inos, ARRAY_SIZE(inos), &n);
		for (size_t i = 0; rc == 0 && i < n; i++) {
			after = inos[i];
			if (!mds_ino_release_if_closed(m, inos[i]))
				continue;
			rc = mdt_inode_release(t, inos[i]);
			released = true;
			total++;
		}
		if (rc) {
			mdt_txn_abort(t);
			break;
		}
		rc = mdt_txn_commit(t);
		if (released)
			m->destroyer.more = true;
	} while (rc == 0 && n == ARRAY_SIZE(inos));
	if (rc)
		log_err("releasing orphan inodes: %s; will try again", strerror(-rc));
	else
		m->orphans_released = true;
	if (total)
		log_info("released %zu inodes left unlinked but open by the previous run", total);
}

struct away_scan {
	uint64_t deadline;
	bool any;
};

static void away_scan(uint64_t sid, void *val, void *arg)
{
	struct away_scan *a = arg;
	struct mds_session *s = val;

	(void)sid;
	if (!s->conn_id && s->away_since_ns <= a->deadline)
		a->any = true;
}

/* Work of its own transaction: sessions that ended, and old reply-cache entries. */
static void housekeeping(struct mds *m, uint64_t now)
{
	uint64_t window = (uint64_t)m->recovery_s * 1000000000ull;
	struct away_scan a = { .deadline = now > window ? now - window : 0 };
	static uint64_t last_sweep, last_run;
	struct mdt_txn *t;
	bool released = false;
	size_t swept = 0;
	int rc;

	if (now - last_run < 1000000000ull)
		return;
	last_run = now;
	if (now > window)
		mds_sessions_each(m, away_scan, &a);
	if (!a.any && now - last_sweep < 10ull * 1000000000ull)
		return;
	if (mdt_txn_begin(m->store, true, &t) != 0)
		return;
	rc = a.any ? mds_sessions_expire(m, t, now, &released) : 0;
	if (rc == 0 && now - last_sweep >= 10ull * 1000000000ull) {
		/* A resend comes within the recovery window; ten of them is plenty. */
		rc = mdt_reply_sweep(t, clock_real().tv_sec - 10 * (int64_t)m->recovery_s - 60, 20000, &swept);
		last_sweep = now;
	}
	if (rc == 0)
		rc = mdt_txn_commit(t);
	else
		mdt_txn_abort(t);
	if (rc)
		log_err("housekeeping: %s", strerror(-rc));
	if (released)
		m->destroyer.more = true;
}

static void periodic(struct mds *m)
{
	uint64_t now = clock_mono_ns();
	uint64_t dead = (uint64_t)MDS_OST_DEAD_SECONDS * 1000000000ull;
	struct mdt_txn *t;

	if (now > dead && mdt_ost_expire(m->store, now - dead))
		log_info("OST table changed: an OST went silent or came back");
	if (!m->orphans_released && now - m->started_ns >= (uint64_t)m->recovery_s * 1000000000ull)
		release_orphans(m);
	housekeeping(m, now);
	mds_releases_settled(m);
	mds_trunc_expire(m, now);
	if (mdt_txn_begin(m->store, false, &t) == 0) {
		mds_destroyer_kick(m, t);
		mds_truncator_kick(m, t);
		mdt_txn_abort(t);
	}
}

void mds_metadata_loop(struct mds *m)
{
	uint64_t last_tick = clock_mono_ns();

	for (;;) {
		uint32_t n = 0;
		struct srv_req *list = reqq_pop_batch(&m->queue, BATCH_MAX, TICK_MS, &n);

		if (!list && m->queue.closed)
			break;
		if (list)
			run_batch(m, list, n);
		if ((m->destroyer.more && !m->destroyer.busy) || (m->truncator.more && !m->truncator.busy))
			periodic(m);
		else if (clock_mono_ns() - last_tick >= TICK_MS * 1000000ull) {
			periodic(m);
			last_tick = clock_mono_ns();
		}
	}
}

/* Requests that only read the MDT, and nothing of the MDS's memory (sessions, handles, locks, the
 * OST table): they are answered on the network thread that received them. */
static bool op_reads_mdt_only(uint16_t op)
{
	switch (op) {
	case LW_OP_MDS_LOOKUP:
	case LW_OP_MDS_GETATTR:
	case LW_OP_MDS_READLINK:
	case LW_OP_MDS_READDIR:
	case LW_OP_MDS_GETXATTR:
	case LW_OP_MDS_LISTXATTR:
	case LW_OP_MDS_GETLAYOUT:
	case LW_OP_MDS_DOM_READ:
	case LW_OP_MDS_ACCESS:
		return true;
	default:
		return false;
	}
}

/*
 * A read at once, in a read transaction of its own, without the hand-over to the metadata
 * thread (a thread wake-up costs as much as the lookup itself). It sees everything a client was
 * told had happened: a change is answered only once its batch committed.
 */
static void run_read_here(struct mds *m, struct srv_req *req)
{
	struct batch_state bs = { 0 };
	struct reply r = { 0 };
	struct mdt_txn *t;
	int rc = mdt_txn_begin(m->store, false, &t);

	if (rc) {
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	run_one(m, t, false, req, &bs, &r);
	mdt_txn_abort(t);
	srv_reply(req, r.status, r.body, r.status ? 0 : r.len, NULL, 0, NULL);
	free(r.body);
}

/* A failed open on the network thread leaves its handle to the metadata thread: if the inode was
 * unlinked meanwhile, this handle kept it, and its end must release it. */
static void drop_handle_later(struct mds *m, uint64_t handle, uint64_t ino, uint64_t sid)
{
	struct srv_req *item = calloc(1, sizeof(*item) + sizeof(struct mds_handle_ref));
	struct mds_handle_ref ref = { handle, ino, sid };

	if (!item) {
		log_err("out of memory: handle %llu of a failed open stays until its session ends",
			(unsigned long long)handle);
		return;
	}
	item->hdr.opcode = MDS_INTERNAL_DROP_HANDLE;
	item->hdr.body_len = sizeof(ref);
	item->body = (uint8_t *)(item + 1);
	memcpy(item->body, &ref, sizeof(ref));
	reqq_push(&m->queue, item);
}

/*
 * An open for reading, on the network thread (np.load opens thousands of files a second; the
 * hand-over to the metadata thread costs as much as the open). It only reads the MDT, but makes
 * a handle, which keeps an unlinked inode alive. The handle is made first, under sess_lock,
 * and only then does the read transaction begin, so that either the metadata thread sees the
 * handle before it decides to release the inode, or the release is decided before (then the
 * inode is marked releasing until its commit, and the open goes to the metadata thread), or it
 * is committed before this transaction begins and the open finds the inode gone.
 * Returns false when the request must go to the metadata thread.
 */
static bool run_open_here(struct mds *m, struct srv_req *req)
{
	struct reply r = { 0 };
	struct lw_mds_req q;
	struct mdt_txn *t;
	uint64_t sid, handle;
	int rc;

	if (decode_req(m, req, &q) != 0)
		return false; /* answered there, with the same error */
	if ((q.u.open.open_flags & O_ACCMODE) != O_RDONLY || (q.u.open.open_flags & O_TRUNC))
		return false;
	sid = mds_session_sid(m, req->conn_id);
	if (!sid || mds_handle_open_shared(m, q.u.open.ino, sid, &handle) != 0)
		return false;
	rc = mdt_txn_begin(m->store, false, &t);
	if (rc == 0) {
		rc = open_with_handle(m, t, &q, clock_real(), handle, &r);
		if (rc == -ENOENT)
			rc = stale_if_gone(t, rc, q.u.open.ino);
		mdt_txn_abort(t);
	}
	if (rc)
		drop_handle_later(m, handle, q.u.open.ino, sid);
	if (rc == OPEN_STALE)
		rc = 0; /* answered: nothing was opened */
	srv_reply(req, rc, r.body, rc ? 0 : r.len, NULL, 0, NULL);
	free(r.body);
	return true;
}

/* The open of MDS_WALK's LW_WALK_OPEN, as run_open_here's: the handle first, then a read
 * transaction of its own. Fills r with MDS_OPEN's reply, or returns an error (the client then
 * opens by itself, and gets the error the metadata thread gives). */
static int walk_open(struct mds *m, struct srv_req *req, const struct lw_mds_req *wq, uint64_t ino,
		     struct reply *r)
{
	struct lw_mds_req q = { .op = LW_OP_MDS_OPEN, .cred = wq->cred };
	struct mdt_txn *t;
	uint64_t sid, handle;
	int rc;

	q.u.open.ino = ino;
	q.u.open.open_flags = wq->u.walk.f.open_flags;
	sid = mds_session_sid(m, req->conn_id);
	if (!sid || mds_handle_open_shared(m, ino, sid, &handle) != 0)
		return -EAGAIN;
	rc = mdt_txn_begin(m->store, false, &t);
	if (rc == 0) {
		rc = open_with_handle(m, t, &q, clock_real(), handle, r);
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

/* MDS_WALK, on the network thread: a read, and with LW_WALK_OPEN an open for reading. */
static void run_walk_here(struct mds *m, struct srv_req *req)
{
	struct lw_walk_rep wr = { 0 };
	struct reply opened = { 0 };
	struct lw_mds_req q;
	struct mdt_txn *t;
	const char *rest;
	uint8_t *body;
	int rc;

	rc = decode_req(m, req, &q);
	if (rc == 0)
		rc = mdt_txn_begin(m->store, false, &t);
	if (rc) {
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	rc = mdt_walk(t, &q.cred, q.u.walk.path, q.u.walk.f.pathlen, q.u.walk.f.flags & LW_WALK_PARENT,
		      &wr.attr, &wr.consumed);
	mdt_txn_abort(t);
	if (rc) {
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	rest = q.u.walk.path + wr.consumed;
	while (rest < q.u.walk.path + q.u.walk.f.pathlen && *rest == '/')
		rest++;
	if ((q.u.walk.f.flags & LW_WALK_OPEN) && rest == q.u.walk.path + q.u.walk.f.pathlen &&
	    (q.u.walk.f.open_flags & O_ACCMODE) == O_RDONLY && !(q.u.walk.f.open_flags & O_TRUNC) &&
	    (S_ISREG(wr.attr.mode) || S_ISDIR(wr.attr.mode)) &&
	    walk_open(m, req, &q, wr.attr.ino, &opened) == 0)
		wr.flags |= LW_WALKR_OPENED;
	body = malloc(sizeof(wr) + opened.len);
	if (!body) {
		free(opened.body);
		srv_reply(req, -ENOMEM, NULL, 0, NULL, 0, NULL);
		return;
	}
	memcpy(body, &wr, sizeof(wr));
	if (opened.len)
		memcpy(body + sizeof(wr), opened.body, opened.len);
	srv_reply(req, 0, body, (uint32_t)(sizeof(wr) + opened.len), NULL, 0, NULL);
	free(opened.body);
	free(body);
}

void mds_deliver(struct srv_req *req, void *arg)
{
	struct mds *m = arg;

	if (op_reads_mdt_only(req->hdr.opcode)) {
		run_read_here(m, req);
		return;
	}
	if (req->hdr.opcode == LW_OP_MDS_WALK) {
		run_walk_here(m, req);
		return;
	}
	if (req->hdr.opcode == LW_OP_MDS_OPEN && run_open_here(m, req))
		return;
	reqq_push(&m->queue, req);
}

void mds_disconnect(uint64_t conn_id, void *arg)
{
	struct mds *m = arg;
	struct srv_req *item = calloc(1, sizeof(*item));

	if (!item) {
		log_err("out of memory: the open handles of connection %llu stay until restart",
			(unsigned long long)conn_id);
		return;
	}
	item->hdr.opcode = MDS_INTERNAL_DISCONNECT;
	item->conn_id = conn_id;
	item->body = (uint8_t *)(item + 1);
	reqq_push(&m->queue, item);
}
