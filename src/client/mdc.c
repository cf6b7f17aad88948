/* The metadata client: one function per MDS request, each checking its reply before use. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/util.h"

/* What a call does besides its request: RPC_* flags, and a completion hook (rpc_call). */
struct mdc_opts {
	uint32_t rpc_flags;
	void (*on_complete)(struct rpc_call *call, void *arg);
	void *arg;
};

/*
 * Sends one MDS request and waits. On success the reply body is in call->rbody (release with
 * rpc_call_release). cred NULL: the request has no cred prefix. opts may be NULL.
 */
static int mdc_call_on(loom_fs *fs, struct rpc_conn *conn, const struct loom_cred *cr,
		       uint16_t op, const struct mdc_body *b, const struct mdc_opts *opts,
		       struct rpc_call *call)
{
	size_t total = sizeof(struct lw_cred) + LOOM_MAX_GROUPS * sizeof(uint32_t);
	uint8_t stackbuf[8192], *buf = stackbuf;
	struct lw_wr w;
	int rc;

	for (int i = 0; i < 4; i++)
		total += b ? b->len[i] : 0;
	if (total > LW_MAX_BODY)
		return -E2BIG;
	if (total > sizeof(stackbuf)) {
		buf = malloc(total);
		if (!buf)
			return -ENOMEM;
	}
	lw_wr_init(&w, buf, total);
	if (cr)
		lw_put_cred(&w, cr);
	for (int i = 0; b && i < 4; i++)
		if (b->len[i])
			lw_wr_put(&w, b->part[i], b->len[i]);
	fs_call_init(fs, call, op, buf, (uint32_t)w.len);
	if (opts) {
		call->flags = opts->rpc_flags;
		call->on_complete = opts->on_complete;
		call->on_complete_arg = opts->arg;
	}
	rc = w.err ? w.err : rpc_call_sync(conn, call);
	if (buf != stackbuf)
		free(buf);
	if (rc)
		rpc_call_release(call);
	return rc;
}

/* As mdc_call, with options (NULL: none). Every request goes after the creates sent behind
 * were answered (behind.c): the MDS then sees this client's changes in the order it made them. */
static int mdc_call_opts(loom_fs *fs, const struct loom_cred *cr, uint16_t op,
			 const struct mdc_body *b, const struct mdc_opts *opts, struct rpc_call *call)
{
	struct rpc_conn *conn;
	int rc = behind_barrier(fs);

	if (rc == 0)
		rc = fs_mds_conn(fs, &conn);

	return rc ? rc : mdc_call_on(fs, conn, cr, op, b, opts, call);
}

int mdc_call(loom_fs *fs, const struct loom_cred *cr, uint16_t op, const struct mdc_body *b,
	     struct rpc_call *call)
{
	return mdc_call_opts(fs, cr, op, b, NULL, call);
}

/* A reply of exactly `len` bytes (copied to out unless it is NULL). */
static int fixed_reply(int rc, struct rpc_call *call, void *out, size_t len)
{
	if (rc)
		return rc;
	if (call->rbody_len != len)
		rc = -EPROTO;
	else if (out)
		memcpy(out, call->rbody, len);
	rpc_call_release(call);
	return rc;
}

static int mdc_call_fixed(loom_fs *fs, const struct loom_cred *cr, uint16_t op,
			  const struct mdc_body *b, void *out, size_t len)
{
	struct rpc_call call;
	int rc = mdc_call(fs, cr, op, b, &call);

	return fixed_reply(rc, &call, out, len);
}

int mdc_getattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct lw_attr *out)
{
	struct lw_ino_req req = { .ino = ino };
	struct mdc_body b = { { &req }, { sizeof(req) } };

	return mdc_call_fixed(fs, cr, LW_OP_MDS_GETATTR, &b, out, sizeof(*out));
}

static int name_len(size_t len)
{
	if (len == 0)
		return -ENOENT;
	if (len > LOOM_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int mdc_lookup(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, struct lw_attr *out)
{
	struct lw_name_req req = { .parent = parent, .namelen = (uint16_t)len };
	struct mdc_body b = { { &req, name }, { sizeof(req), len } };
	int rc = name_len(len);

	return rc ? rc : mdc_call_fixed(fs, cr, LW_OP_MDS_LOOKUP, &b, out, sizeof(*out));
}

int mdc_setattr(loom_fs *fs, const struct loom_cred *cr, const struct lw_setattr *sa,
		struct lw_attr *out)
{
	struct mdc_body b = { { sa }, { sizeof(*sa) } };

	return mdc_call_fixed(fs, cr, LW_OP_MDS_SETATTR, &b, out, sizeof(*out));
}

static void layout_req(const struct loom_layout *l, struct lw_layout *out)
{
	memset(out, 0, sizeof(*out));
	out->magic = LW_LAYOUT_MAGIC;
	out->version = l->mirror_count || l->ec_parity ? LW_LAYOUT_V3 : LW_LAYOUT_V2;
	out->mirror_count = l->mirror_count;
	out->ec_parity = l->ec_parity;
	out->pattern = l->pattern ? (uint16_t)l->pattern : LW_PATTERN_RAID0;
	out->dom_size = l->dom_size;
	out->stripe_size = l->stripe_size;
	out->stripe_count = l->stripe_count;
	out->stripe_offset = l->stripe_offset;
	memcpy(out->pool, l->pool, strnlen(l->pool, LOOM_POOL_NAME_MAX));
}

/* A reply of one fixed struct, optionally followed by a layout. */
static int decode_with_layout(const struct rpc_call *call, void *fixed, size_t flen, bool has_layout,
			      struct loom_layout **layout_out)
{
	struct lw_rd r;
	struct loom_layout *l = NULL;
	int rc;

	lw_rd_init(&r, call->rbody, call->rbody_len);
	lw_rd_fixed(&r, fixed, flen);
	if (r.err)
		return -EPROTO;
	if (has_layout) {
		rc = lw_layout_decode(&r, &l);
		if (rc)
			return rc;
	}
	rc = lw_rd_done(&r);
	if (rc) {
		free(l);
		return -EPROTO;
	}
	if (layout_out)
		*layout_out = l;
	else
		free(l);
	return 0;
}

int mdc_create(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
	       size_t len, uint32_t mode, uint32_t rdev, uint32_t flags, uint32_t open_flags,
	       const struct loom_layout *layout, struct lw_create_rep *rep,
	       struct loom_layout **layout_out)
{
	struct lw_create_req req = { .parent = parent, .mode = mode, .rdev = rdev,
				     .flags = flags, .open_flags = open_flags, .namelen = (uint16_t)len };
	struct lw_layout lreq;
	struct mdc_body b = { { &req, name }, { sizeof(req), len } };
	struct rpc_call call;
	/* A nameless file (LW_CR_TMPFILE) goes with namelen 0. */
	int rc = (flags & LW_CR_TMPFILE) ? (len ? -EINVAL : 0) : name_len(len);

	if (rc)
		return rc;
	if (layout) {
		layout_req(layout, &lreq);
		req.flags |= LW_CR_LAYOUT;
		b.part[2] = &lreq;
		b.len[2] = sizeof(lreq);
	}
	if (layout_out)
		*layout_out = NULL;
	rc = mdc_call(fs, cr, LW_OP_MDS_CREATE, &b, &call);
	if (rc)
		return rc;
	rc = call.rbody_len >= sizeof(*rep) ? 0 : -EPROTO;
	if (rc == 0) {
		memcpy(rep, call.rbody, sizeof(*rep));
		rc = decode_with_layout(&call, rep, sizeof(*rep), rep->has_layout != 0, layout_out);
	}
	rpc_call_release(&call);
	return rc;
}

int mdc_create_rep_decode(const void *body, uint32_t len, struct lw_create_rep *rep,
			  struct loom_layout **layout_out)
{
	struct rpc_call call = { .rbody = (void *)body, .rbody_len = len };

	*layout_out = NULL;
	if (len < sizeof(*rep))
		return -EPROTO;
	memcpy(rep, body, sizeof(*rep));
	return decode_with_layout(&call, rep, sizeof(*rep), rep->has_layout != 0, layout_out);
}

int mdc_inos(loom_fs *fs, uint32_t count, struct lw_inos_rep *out)
{
	struct lw_inos_req req = { .count = count };
	struct mdc_body b = { { &req }, { sizeof(req) } };

	return mdc_call_fixed(fs, NULL, LW_OP_MDS_INOS, &b, out, sizeof(*out));
}

int mdc_mkdir(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
	      size_t len, uint32_t mode, struct lw_attr *out, uint64_t *lease_gen, bool *excl)
{
	struct lw_mkdir_req req = { .parent = parent, .mode = mode, .namelen = (uint16_t)len,
				    .flags = (uint16_t)((lease_gen ? LW_MK_LEASE : 0) |
							(lease_gen && excl && *excl ? LW_MK_EXCL : 0)) };
	struct mdc_body b = { { &req, name }, { sizeof(req), len } };
	struct rpc_call call;
	int rc = name_len(len);

	if (rc)
		return rc;
	rc = mdc_call(fs, cr, LW_OP_MDS_MKDIR, &b, &call);
	if (lease_gen)
		*lease_gen = 0;
	if (excl)
		*excl = false;
	if (rc == 0 && lease_gen && call.rbody_len == sizeof(*out)) {
		struct lw_attr made;

		memcpy(&made, call.rbody, sizeof(made));
		if (call.lease_ino == made.ino)
			*lease_gen = call.lease_gen;
		if (excl)
			*excl = *lease_gen && (call.rp_flags & LW_RPF_LEASE_EXCL);
	}
	return fixed_reply(rc, &call, out, sizeof(*out));
}

int mdc_unlink(loom_fs *fs, const struct loom_cred *cr, uint16_t op, uint64_t parent,
	       const char *name, size_t len, uint16_t flags)
{
	struct lw_name_req req = { .parent = parent, .namelen = (uint16_t)len, .flags = flags };
	struct mdc_body b = { { &req, name }, { sizeof(req), len } };
	int rc = name_len(len);

	return rc ? rc : mdc_call_fixed(fs, cr, op, &b, NULL, 0);
}

int mdc_rename(loom_fs *fs, const struct loom_cred *cr, uint64_t sp, const char *sn, size_t sl,
	       uint64_t dp, const char *dn, size_t dl, uint32_t flags)
{
	struct lw_rename_req req = { .src_parent = sp, .dst_parent = dp, .flags = flags,
				     .src_namelen = (uint16_t)sl, .dst_namelen = (uint16_t)dl };
	struct mdc_body b = { { &req, sn, dn }, { sizeof(req), sl, dl } };
	int rc = name_len(sl);

	if (rc == 0)
		rc = name_len(dl);
	return rc ? rc : mdc_call_fixed(fs, cr, LW_OP_MDS_RENAME, &b, NULL, 0);
}

int mdc_link(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t parent,
	     const char *name, size_t len, struct lw_attr *out)
{
	struct lw_link_req req = { .ino = ino, .new_parent = parent, .namelen = (uint16_t)len };
	struct mdc_body b = { { &req, name }, { sizeof(req), len } };
	int rc = name_len(len);

	return rc ? rc : mdc_call_fixed(fs, cr, LW_OP_MDS_LINK, &b, out, sizeof(*out));
}

int mdc_symlink(loom_fs *fs, const struct loom_cred *cr, uint64_t parent, const char *name,
		size_t len, const char *target, size_t tlen, struct lw_attr *out)
{
	struct lw_symlink_req req = { .parent = parent, .namelen = (uint16_t)len,
				      .targetlen = (uint32_t)tlen };
	struct mdc_body b = { { &req, name, target }, { sizeof(req), len, tlen } };
	int rc = name_len(len);

	if (rc == 0 && tlen == 0)
		rc = -ENOENT;
	if (rc == 0 && tlen > LOOM_SYMLINK_MAX)
		rc = -ENAMETOOLONG;
	return rc ? rc : mdc_call_fixed(fs, cr, LW_OP_MDS_SYMLINK, &b, out, sizeof(*out));
}

/* A reply of lw_blob_rep + bytes. With cap 0 only the length is wanted. */
static int decode_blob(const struct rpc_call *call, void *buf, size_t cap, size_t *len, bool size_only)
{
	struct lw_blob_rep rep;
	size_t have;

	if (call->rbody_len < sizeof(rep))
		return -EPROTO;
	memcpy(&rep, call->rbody, sizeof(rep));
	have = call->rbody_len - sizeof(rep);
	if (size_only ? have != 0 : have != rep.len)
		return -EPROTO;
	*len = rep.len;
	if (!size_only)
		memcpy(buf, (const uint8_t *)call->rbody + sizeof(rep), MIN(cap, have));
	return 0;
}

int mdc_readlink(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		 size_t *len)
{
	struct lw_ino_req req = { .ino = ino };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct rpc_call call;
	int rc = mdc_call(fs, cr, LW_OP_MDS_READLINK, &b, &call);

	if (rc)
		return rc;
	rc = decode_blob(&call, buf, cap, len, false);
	rpc_call_release(&call);
	return rc;
}

int mdc_readdir(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		uint32_t max_bytes, bool plus, void **page, uint32_t *page_len, uint64_t *lease_gen,
		bool *excl)
{
	struct lw_readdir_req req = { .ino = ino, .cookie = cookie, .max_bytes = max_bytes,
				      .flags = (plus ? LW_RD_PLUS : 0) | (lease_gen ? LW_RD_LEASE : 0) |
					       (lease_gen && excl && *excl ? LW_RD_EXCL : 0) };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct rpc_call call;
	int rc = mdc_call(fs, cr, LW_OP_MDS_READDIR, &b, &call);

	if (rc)
		return rc;
	if (call.rbody_len < sizeof(struct lw_readdir_rep)) {
		rpc_call_release(&call);
		return -EPROTO;
	}
	if (lease_gen)
		*lease_gen = call.lease_ino == ino ? call.lease_gen : 0;
	if (excl)
		*excl = lease_gen && *lease_gen && (call.rp_flags & LW_RPF_LEASE_EXCL);
	/* Entries are checked one by one as the reader walks them (lw_readdir_next). */
	*page = call.rbody;
	*page_len = call.rbody_len;
	return 0;
}

int mdc_statfs(loom_fs *fs, const struct loom_cred *cr, struct lw_statfs_rep *out)
{
	return mdc_call_fixed(fs, cr, LW_OP_MDS_STATFS, NULL, out, sizeof(*out));
}

int mdc_pool(loom_fs *fs, const struct loom_cred *cr, uint32_t cmd, const char *name, uint32_t idx,
	     void **reply, uint32_t *len)
{
	struct lw_pool_req req = { .cmd = cmd, .idx = idx };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct rpc_call call;
	int rc;

	if (strlen(name) >= sizeof(req.name))
		return -EINVAL;
	memcpy(req.name, name, strlen(name));
	rc = mdc_call(fs, cr, LW_OP_MDS_POOL, &b, &call);
	if (rc)
		return rc;
	if (reply) {
		*reply = malloc(call.rbody_len ? call.rbody_len : 1);
		if (!*reply)
			rc = -ENOMEM;
		else
			memcpy(*reply, call.rbody, call.rbody_len);
		*len = call.rbody_len;
	}
	rpc_call_release(&call);
	return rc;
}

int mdc_swap_layouts(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t tmp, uint64_t size,
		     int64_t mtime, uint32_t mtime_ns)
{
	struct lw_swap_req req = { .ino = ino, .tmp = tmp, .size = size, .mtime = mtime, .mtime_ns = mtime_ns };
	struct mdc_body b = { { &req }, { sizeof(req) } };

	return mdc_call_fixed(fs, cr, LW_OP_MDS_SWAP_LAYOUTS, &b, NULL, 0);
}

int mdc_ost_admin(loom_fs *fs, const struct loom_cred *cr, uint32_t idx, uint32_t set, uint32_t clear)
{
	struct lw_ost_admin_req req = { .idx = idx, .set = set, .clear = clear };
	struct mdc_body b = { { &req }, { sizeof(req) } };

	return mdc_call_fixed(fs, cr, LW_OP_MDS_OST_ADMIN, &b, NULL, 0);
}

int mdc_ost_remove(loom_fs *fs, const struct loom_cred *cr, uint32_t idx, uint32_t flags,
		   struct lw_ost_remove_rep *out)
{
	struct lw_ost_remove_req req = { .idx = idx, .flags = flags };
	struct mdc_body b = { { &req }, { sizeof(req) } };

	return mdc_call_fixed(fs, cr, LW_OP_MDS_OST_REMOVE, &b, out, sizeof(*out));
}

int mdc_getxattr(loom_fs *fs, const struct loom_cred *cr, uint16_t op, uint64_t ino,
		 const char *name, void *buf, size_t cap, size_t *len)
{
	size_t nlen = name ? strlen(name) : 0;
	struct lw_xattr_req req = { .ino = ino, .size = (uint32_t)MIN(cap, LOOM_XATTR_SIZE_MAX),
				    .namelen = (uint16_t)nlen };
	struct mdc_body b = { { &req, name }, { sizeof(req), nlen } };
	struct rpc_call call;
	int rc;

	if (name && (nlen == 0 || nlen > LOOM_XATTR_NAME_MAX))
		return nlen ? -ERANGE : -EINVAL;
	rc = mdc_call(fs, cr, op, &b, &call);
	if (rc)
		return rc;
	rc = decode_blob(&call, buf, cap, len, req.size == 0);
	rpc_call_release(&call);
	return rc;
}

int mdc_setxattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name,
		 const void *value, size_t vlen, uint32_t flags)
{
	size_t nlen = strlen(name);
	struct lw_xattr_req req = { .ino = ino, .size = (uint32_t)vlen, .flags = flags,
				    .namelen = (uint16_t)nlen };
	struct mdc_body b = { { &req, name, value }, { sizeof(req), nlen, vlen } };

	if (nlen == 0)
		return -EINVAL;
	if (nlen > LOOM_XATTR_NAME_MAX)
		return -ERANGE;
	if (vlen > LOOM_XATTR_SIZE_MAX)
		return -E2BIG;
	return mdc_call_fixed(fs, cr, LW_OP_MDS_SETXATTR, &b, NULL, 0);
}

int mdc_removexattr(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, const char *name)
{
	size_t nlen = strlen(name);
	struct lw_xattr_req req = { .ino = ino, .namelen = (uint16_t)nlen };
	struct mdc_body b = { { &req, name }, { sizeof(req), nlen } };

	if (nlen == 0)
		return -EINVAL;
	if (nlen > LOOM_XATTR_NAME_MAX)
		return -ERANGE;
	return mdc_call_fixed(fs, cr, LW_OP_MDS_REMOVEXATTR, &b, NULL, 0);
}

int mdc_lock(loom_fs *fs, const struct loom_cred *cr, const struct lw_lock_req *req,
	     struct lw_lock_rep *rep)
{
	struct mdc_body b = { { req }, { sizeof(*req) } };
	struct held_note note = { .fs = fs, .req = *req };
	/* A request that waits for the lock may wait for as long as another process holds it. The
	 * record of held locks follows the replies in the order they arrive (locks.c). */
	struct mdc_opts o = { .rpc_flags = (req->flags & LW_LK_WAIT) ? RPC_NOTIMEOUT : 0,
			      .on_complete = held_locks_on_reply, .arg = &note };
	struct rpc_call call;
	/* A release must reach the MDS, or other processes wait for a lock nobody holds: an unlock
	 * is not cut short by an interrupt (a process killed while it holds a lock drops it in its
	 * last close, with the fatal signal pending, and the kernel interrupts that close). So a
	 * holder killed while the MDS is stopped exits once the MDS is back, as on NFS. */
	bool must_arrive = req->type == F_UNLCK;
	struct rpc_intr *in = must_arrive ? rpc_intr_swap(NULL) : NULL;
	int rc = mdc_call_opts(fs, cr, LW_OP_MDS_LOCK, &b, &o, &call);

	if (must_arrive)
		rpc_intr_swap(in);
	if (rc)
		return rc;
	/* A cancel is answered with nothing; everything else with lw_lock_rep. */
	if (call.rbody_len == sizeof(*rep))
		memcpy(rep, call.rbody, sizeof(*rep));
	else if (call.rbody_len != 0 || !(req->flags & LW_LK_CANCEL))
		rc = -EPROTO;
	rpc_call_release(&call);
	return rc;
}

int mdc_access(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t mask)
{
	struct lw_access_req req = { .ino = ino, .mask = mask };
	struct mdc_body b = { { &req }, { sizeof(req) } };

	return mdc_call_fixed(fs, cr, LW_OP_MDS_ACCESS, &b, NULL, 0);
}

/* MDS_OPEN's reply, from r (which it must end). */
static int open_reply_decode(struct lw_rd *r, struct lw_open_rep *rep, struct loom_layout **layout_out,
			     struct mdc_dom *dom)
{
	struct loom_layout *l = NULL;
	const uint8_t *bytes;
	int rc;

	*layout_out = NULL;
	if (dom)
		memset(dom, 0, sizeof(*dom));
	lw_rd_fixed(r, rep, sizeof(*rep));
	rc = r->err ? -EPROTO : 0;
	if (rc == 0 && (rep->flags & ~LW_OPR_STALE))
		rc = -EPROTO;
	if (rc == 0 && (rep->flags & LW_OPR_STALE)) {
		/* A conditional open that did nothing: the attributes alone, as they are now. */
		if (rep->handle || rep->has_layout || rep->dom_len || lw_rd_done(r) || rep->attr.ino == 0)
			return -EPROTO;
		return -ESTALE;
	}
	if (rc == 0 && rep->has_layout)
		rc = lw_layout_decode(r, &l);
	/* A layout with a Data-on-MDT part comes with its bytes (protocol 2). */
	if (rc == 0 && rep->dom_len && (!l || rep->dom_len > l->dom_size))
		rc = -EPROTO;
	bytes = rc == 0 ? lw_rd_bytes(r, rep->dom_len) : NULL;
	if (rc == 0 && lw_rd_done(r))
		rc = -EPROTO;
	if (rc == 0 && dom && l && l->dom_size) {
		dom->known = true;
		dom->len = rep->dom_len;
		if (dom->len && !(dom->data = malloc(dom->len)))
			rc = -ENOMEM;
		else if (dom->len)
			memcpy(dom->data, bytes, dom->len);
	}
	if (rc) {
		free(l);
		if (dom) {
			free(dom->data);
			memset(dom, 0, sizeof(*dom));
		}
		return rc;
	}
	*layout_out = l;
	return 0;
}

int mdc_open_decode(const void *body, uint32_t len, struct lw_open_rep *rep,
		    struct loom_layout **layout_out, struct mdc_dom *dom)
{
	struct lw_rd r;

	lw_rd_init(&r, body, len);
	return open_reply_decode(&r, rep, layout_out, dom);
}

int mdc_open(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
	     const struct mdc_open_if *cond, struct lw_open_rep *rep, struct loom_layout **layout_out,
	     struct mdc_dom *dom)
{
	return mdc_open_leased(fs, cr, ino, open_flags, cond, rep, layout_out, dom, NULL);
}

int mdc_open_leased(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t open_flags,
		    const struct mdc_open_if *cond, struct lw_open_rep *rep,
		    struct loom_layout **layout_out, struct mdc_dom *dom, struct mdc_lease_grant *grant)
{
	struct lw_open_req req = { .ino = ino, .open_flags = open_flags };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct rpc_call call;
	struct lw_rd r;
	int rc;

	*layout_out = NULL;
	memset(rep, 0, sizeof(*rep));
	if (dom)
		memset(dom, 0, sizeof(*dom));
	if (cond) {
		req.flags = cond->flags & (LW_OPQ_NAMES | LW_OPQ_DIR_MOVES);
		req.names = cond->names;
		req.dir_moves = cond->dir_moves;
	}
	if (grant) {
		req.flags |= LW_OPQ_LEASE;
		*grant = (struct mdc_lease_grant){ 0 };
	}
	rc = mdc_call(fs, cr, LW_OP_MDS_OPEN, &b, &call);
	if (rc)
		return rc;
	lw_rd_init(&r, call.rbody, call.rbody_len);
	rc = open_reply_decode(&r, rep, layout_out, dom);
	/* Granted: the reply is what later opens under the lease start from. */
	if (rc == 0 && grant && call.lease_gen && call.lease_ino == ino &&
	    (grant->body = malloc(call.rbody_len)) != NULL) {
		memcpy(grant->body, call.rbody, call.rbody_len);
		grant->len = call.rbody_len;
		grant->gen = call.lease_gen;
	}
	rpc_call_release(&call);
	return rc;
}

int mdc_walk(loom_fs *fs, const struct loom_cred *cr, const char *path, size_t len, uint32_t flags,
	     struct mdc_walk_open *wo, struct lw_attr *attr, uint32_t *consumed)
{
	struct lw_walk_req req = { .flags = flags, .open_flags = wo ? wo->open_flags : 0,
				   .pathlen = (uint16_t)len };
	struct mdc_body b = { { &req, path }, { sizeof(req), len } };
	struct lw_walk_rep rep;
	struct rpc_call call;
	struct lw_rd r;
	int rc;

	if (len > LW_WALK_PATH_MAX)
		return -ENAMETOOLONG;
	if (wo) {
		req.flags |= LW_WALK_OPEN;
		wo->opened = false;
	}
	rc = mdc_call(fs, cr, LW_OP_MDS_WALK, &b, &call);
	if (rc)
		return rc;
	lw_rd_init(&r, call.rbody, call.rbody_len);
	lw_rd_fixed(&r, &rep, sizeof(rep));
	rc = r.err || rep.consumed > len || (rep.flags & ~LW_WALKR_OPENED) ? -EPROTO : 0;
	if (rc == 0 && (rep.flags & LW_WALKR_OPENED)) {
		/* An open nobody asked for is a broken MDS. */
		rc = wo ? open_reply_decode(&r, &wo->rep, &wo->layout, &wo->dom) : -EPROTO;
		if (wo)
			wo->opened = rc == 0;
	} else if (rc == 0 && lw_rd_done(&r)) {
		rc = -EPROTO;
	}
	rpc_call_release(&call);
	if (rc == 0) {
		*attr = rep.attr;
		*consumed = rep.consumed;
	}
	return rc;
}

int mdc_dom_read(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, void **data, uint32_t *len)
{
	struct lw_ino_req req = { .ino = ino };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct lw_blob_rep rep;
	const uint8_t *bytes;
	struct rpc_call call;
	struct lw_rd r;
	int rc;

	*data = NULL;
	*len = 0;
	rc = mdc_call(fs, cr, LW_OP_MDS_DOM_READ, &b, &call);
	if (rc)
		return rc;
	lw_rd_init(&r, call.rbody, call.rbody_len);
	lw_rd_fixed(&r, &rep, sizeof(rep));
	bytes = lw_rd_bytes(&r, rep.len);
	rc = lw_rd_done(&r) || rep.len > LOOM_DOM_MAX ? -EPROTO : 0;
	if (rc == 0 && rep.len) {
		*data = malloc(rep.len);
		if (*data) {
			memcpy(*data, bytes, rep.len);
			*len = rep.len;
		} else {
			rc = -ENOMEM;
		}
	}
	rpc_call_release(&call);
	return rc;
}

int mdc_close(loom_fs *fs, const struct loom_cred *cr, uint16_t op, uint64_t ino, uint64_t handle,
	      uint32_t flags, uint64_t size, uint32_t epoch, struct timespec mtime, uint64_t blocks,
	      const struct dom_parts *dom, struct lw_attr *out)
{
	struct lw_close_req req = { .ino = ino, .handle = handle, .size = size, .mtime = mtime.tv_sec,
				    .mtime_ns = (uint32_t)mtime.tv_nsec, .flags = flags, .blocks = blocks,
				    .trunc_epoch = epoch };
	bool parts = dom && dom->n;
	struct mdc_body b = { { &req, parts ? dom->buf : NULL }, { sizeof(req), parts ? dom->len : 0 } };
	struct lw_attr attr;

	if (parts) {
		req.flags |= LW_CL_DOM;
		req.dom_parts = dom->n;
	}
	return mdc_call_fixed(fs, cr, op, &b, out ? out : &attr, sizeof(attr));
}

/* A call nobody waits for, with its body in the same allocation. */
struct detached_call {
	struct rpc_call call; /* first: done gets it */
	uint8_t body[];
};

static void detached_done(struct rpc_call *call)
{
	rpc_call_release(call);
	free((struct detached_call *)call);
}

int mdc_close_detached(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint64_t handle)
{
	struct lw_close_req req = { .ino = ino, .handle = handle };
	size_t cap = sizeof(struct lw_cred) + LOOM_MAX_GROUPS * sizeof(uint32_t) + sizeof(req);
	struct detached_call *d = malloc(sizeof(*d) + cap);
	struct rpc_conn *conn;
	struct lw_wr w;
	int rc;

	if (!d)
		return -ENOMEM;
	rc = fs_mds_conn(fs, &conn);
	if (rc) {
		free(d);
		return rc;
	}
	lw_wr_init(&w, d->body, cap);
	if (cr)
		lw_put_cred(&w, cr);
	lw_wr_put(&w, &req, sizeof(req));
	if (w.err) {
		free(d);
		return w.err;
	}
	fs_call_init(fs, &d->call, LW_OP_MDS_CLOSE, d->body, (uint32_t)w.len);
	d->call.done = detached_done;
	rpc_submit_detached(conn, &d->call);
	return 0;
}

int mdc_getlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_layout **out)
{
	struct lw_ino_req req = { .ino = ino };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct rpc_call call;
	struct lw_rd r;
	int rc;

	rc = mdc_call(fs, cr, LW_OP_MDS_GETLAYOUT, &b, &call);
	if (rc)
		return rc;
	lw_rd_init(&r, call.rbody, call.rbody_len);
	rc = lw_layout_decode(&r, out);
	if (rc == 0 && lw_rd_done(&r)) {
		free(*out); /* trailing bytes */
		*out = NULL;
		rc = -EPROTO;
	}
	rpc_call_release(&call);
	return rc;
}

int mdc_setlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, uint32_t flags,
		  const struct loom_layout *l, struct loom_layout **out)
{
	struct lw_setlayout_req req = { .ino = ino, .flags = flags };
	struct lw_layout lreq;
	struct mdc_body b = { { &req, &lreq }, { sizeof(req), sizeof(lreq) } };
	struct loom_layout empty = { .stripe_offset = -1 };
	struct rpc_call call;
	struct lw_rd r;
	int rc;

	layout_req(l ? l : &empty, &lreq);
	rc = mdc_call(fs, cr, LW_OP_MDS_SETLAYOUT, &b, &call);
	if (rc)
		return rc;
	lw_rd_init(&r, call.rbody, call.rbody_len);
	if (call.rbody_len == 0) {
		*out = NULL; /* LW_SL_DELETE answers with nothing */
	} else {
		rc = lw_layout_decode(&r, out);
		if (rc == 0 && lw_rd_done(&r)) {
			free(*out);
			*out = NULL;
			rc = -EPROTO;
		}
	}
	rpc_call_release(&call);
	return rc;
}

int mdc_mirror_stale(loom_fs *fs, uint64_t ino, const struct loom_ostobj *objs, uint32_t n,
		     uint32_t *gen)
{
	struct lw_mirror_req req = { .ino = ino, .cmd = LW_MIRROR_STALE, .count = n };
	struct lw_ostobj *wire = calloc(n ? n : 1, sizeof(*wire));
	struct mdc_body b = { { &req, wire }, { sizeof(req), n * sizeof(*wire) } };
	struct loom_layout *l = NULL;
	struct loom_cred cr;
	struct rpc_call call;
	struct lw_rd r;
	int rc;

	if (!wire)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		wire[i].ost_idx = objs[i].ost_idx;
		wire[i].objid = objs[i].objid;
	}
	fs_cred(fs, &cr);
	rc = mdc_call(fs, &cr, LW_OP_MDS_MIRROR, &b, &call);
	free(wire);
	if (rc)
		return rc;
	/* The reply is the layout: it must decode, and say those objects are stale now. */
	lw_rd_init(&r, call.rbody, call.rbody_len);
	rc = lw_layout_decode(&r, &l);
	if (rc == 0 && lw_rd_done(&r))
		rc = -EPROTO;
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		bool stale = false;

		for (uint32_t k = 0; k < l->nobjs; k++)
			if (l->objs[k].ost_idx == objs[i].ost_idx && l->objs[k].objid == objs[i].objid)
				stale = l->objs[k].flags & LOOM_OBJ_STALE;
		if (!stale)
			rc = -EPROTO;
	}
	if (rc == 0)
		*gen = l->layout_gen;
	free(l);
	rpc_call_release(&call);
	return rc;
}

/* An OST table's kind of reply (lw_ost_table_rep, then count entries of ent bytes): the call,
 * held, with its header in *rep once the sizes add up (-EPROTO otherwise). */
static int ost_table_call(loom_fs *fs, uint16_t op, size_t ent, struct rpc_call *call,
			  struct lw_ost_table_rep *rep)
{
	struct loom_cred cr;
	int rc;

	fs_cred(fs, &cr);
	rc = mdc_call(fs, &cr, op, NULL, call);
	if (rc)
		return rc;
	if (call->rbody_len >= sizeof(*rep)) {
		memcpy(rep, call->rbody, sizeof(*rep));
		if (call->rbody_len == sizeof(*rep) + (size_t)rep->count * ent)
			return 0;
	}
	rpc_call_release(call);
	return -EPROTO;
}

int mdc_ost_failovers(loom_fs *fs, void **body, uint32_t *count)
{
	struct lw_ost_table_rep rep;
	struct rpc_call call;
	int rc = ost_table_call(fs, LW_OP_MDS_OST_FAILOVERS, sizeof(struct lw_ost_addr), &call, &rep);

	for (uint32_t i = 0; rc == 0 && i < rep.count; i++) {
		struct lw_ost_addr a;

		memcpy(&a, (uint8_t *)call.rbody + sizeof(rep) + i * sizeof(a), sizeof(a));
		if (!memchr(a.host, '\0', sizeof(a.host)) || !a.host[0] || !a.port || a.idx >= 65536) {
			rpc_call_release(&call);
			rc = -EPROTO;
		}
	}
	if (rc)
		return rc;
	*body = call.rbody;
	*count = rep.count;
	return 0;
}

int mdc_ost_table(loom_fs *fs, void **body, uint32_t *count, uint32_t *gen)
{
	struct lw_ost_table_rep rep;
	struct rpc_call call;
	int rc = ost_table_call(fs, LW_OP_MDS_OST_TABLE, sizeof(struct lw_ost_entry), &call, &rep);

	for (uint32_t i = 0; rc == 0 && i < rep.count; i++) {
		struct lw_ost_entry e;

		memcpy(&e, (uint8_t *)call.rbody + sizeof(rep) + i * sizeof(e), sizeof(e));
		if (!memchr(e.host, '\0', sizeof(e.host)) || !memchr(e.uuid, '\0', sizeof(e.uuid)) ||
		    e.idx >= 65536) {
			rpc_call_release(&call);
			rc = -EPROTO;
		}
	}
	if (rc)
		return rc;
	*body = call.rbody;
	*count = rep.count;
	*gen = rep.gen;
	return 0;
}
