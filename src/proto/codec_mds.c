/*
 * The MDS's request bodies: one decoder per body form that ops.def names for an MDS (or ANY) row,
 * dispatched from the table by lw_mds_req_decode(), and the accessors of what they leave in
 * struct lw_mds_req.
 */
#include "proto/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "common/auth.h"
#include "proto/codec_impl.h"

/* ---- MDS requests ---- */

/* len bytes of a name, which check (lw_name_check or lw_xattr_name_check) must accept. */
static void rd_checked_name(struct lw_rd *r, uint16_t len, struct lw_name *out,
			    int (*check)(const char *, size_t))
{
	const uint8_t *p = lw_rd_bytes(r, len);
	int rc;

	out->s = (const char *)p;
	out->len = len;
	if (!p)
		return;
	rc = check(out->s, len);
	if (rc)
		r->err = rc;
}

static void rd_name(struct lw_rd *r, uint16_t len, struct lw_name *out)
{
	rd_checked_name(r, len, out, lw_name_check);
}

static void rd_xattr_name(struct lw_rd *r, uint16_t len, struct lw_name *out)
{
	rd_checked_name(r, len, out, lw_xattr_name_check);
}

/* Data-on-MDT parts of a size report: each fixed part then its bytes, in increasing offset
 * order, disjoint, none empty, all within LOOM_DOM_MAX (-EINVAL otherwise; -EPROTO when the body
 * ends first). *start points at the first. */
static void rd_dom_parts(struct lw_rd *r, uint32_t n, const uint8_t **start)
{
	uint64_t end = 0;

	if (n > LOOM_DOM_MAX) {
		r->err = -EINVAL; /* every part holds a byte at least */
		return;
	}
	*start = r->p;
	for (uint32_t i = 0; i < n && !r->err; i++) {
		struct lw_dom_part p;

		lw_rd_fixed(r, &p, sizeof(p));
		if (r->err)
			break;
		if (p.pad != 0) {
			r->err = -EPROTO;
			break;
		}
		if (p.len == 0 || p.len > LOOM_DOM_MAX || p.offset > LOOM_DOM_MAX - p.len ||
		    (i > 0 && p.offset < end)) {
			r->err = -EINVAL;
			break;
		}
		end = p.offset + p.len;
		lw_rd_bytes(r, p.len);
	}
}

/* ---- the MDS's request bodies, one decoder per form that ops.def names ---- */

static void lw_dec_none(struct lw_rd *r, struct lw_mds_req *out)
{
	(void)r;
	(void)out;
}

/* AUTH_*: the frame layer (net/server_accept.c) answers them before any server sees a request. */
static void lw_dec_frame(struct lw_rd *r, struct lw_mds_req *out)
{
	(void)out;
	r->err = -EOPNOTSUPP;
}

static void lw_dec_connect(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.connect, sizeof(out->u.connect));
}

static void lw_dec_ino(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.ino, sizeof(out->u.ino));
}

static void lw_dec_sync(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.sync, sizeof(out->u.sync));
	if (!r->err && ((out->u.sync.flags & ~LW_SYNC_BYE) || out->u.sync.pad))
		r->err = -EINVAL;
}

static void lw_dec_inos(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.inos, sizeof(out->u.inos));
	if (!r->err && (out->u.inos.count == 0 || out->u.inos.count > LW_INOS_MAX || out->u.inos.pad))
		r->err = -EINVAL;
}

static void lw_dec_lease(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_lease_req *f = &out->u.lease.f;

	lw_rd_fixed(r, &out->u.lease.f, sizeof(out->u.lease.f));
	if (r->err)
		return;
	if (f->flags & LW_LEASE_ALL ? f->flags != LW_LEASE_ALL || f->count :
	    f->flags || f->count == 0 || f->count > LW_LEASES_MAX) {
		r->err = -EINVAL;
		return;
	}
	out->u.lease.leases = lw_rd_bytes(r, (size_t)f->count * sizeof(struct lw_lease));
}

static void lw_dec_swap(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.swap, sizeof(out->u.swap));
	if (!r->err && (out->u.swap.pad || out->u.swap.mtime_ns >= 1000000000u))
		r->err = -EINVAL;
}

static void lw_dec_mirror(struct lw_rd *r, struct lw_mds_req *out)
{
	struct lw_mirror_req *f = &out->u.mirror.f;

	lw_rd_fixed(r, f, sizeof(*f));
	if (r->err)
		return;
	if (f->cmd == LW_MIRROR_RESYNC || f->cmd == LW_MIRROR_EXTEND) {
		if (f->count != 0)
			r->err = -EINVAL;
		return;
	}
	if ((f->cmd != LW_MIRROR_STALE && f->cmd != LW_MIRROR_SPLIT) || f->count == 0 ||
	    f->count > LW_MIRROR_MAX_OBJS || (f->cmd == LW_MIRROR_SPLIT && f->count != 1)) {
		r->err = -EINVAL;
		return;
	}
	out->u.mirror.objs = lw_rd_bytes(r, (size_t)f->count * sizeof(struct lw_ostobj));
	for (uint32_t i = 0; !r->err && i < f->count; i++) {
		struct lw_ostobj o;

		memcpy(&o, out->u.mirror.objs + i * sizeof(o), sizeof(o));
		if (o.flags)
			r->err = -EINVAL;
	}
}

static void lw_dec_replay(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_replay_req *f = &out->u.replay.f;

	lw_rd_fixed(r, &out->u.replay.f, sizeof(out->u.replay.f));
	if (r->err)
		return;
	if (f->flags & ~LW_RP_DONE) {
		r->err = -EINVAL;
		return;
	}
	if (f->flags & LW_RP_DONE) {
		if (f->transno || f->req_id || f->opcode || f->nvers || f->body_len || f->reply_len)
			r->err = -EINVAL;
		return;
	}
	if (!f->transno || f->nvers > LW_MAX_VERS || !(lw_op_flags(f->opcode) & LW_OPF_REPLAY) ||
	    f->body_len > LW_MAX_BODY || f->reply_len > LW_MAX_BODY) {
		r->err = -EINVAL;
		return;
	}
	out->u.replay.vers = lw_rd_bytes(r, (size_t)f->nvers * sizeof(struct lw_obj_version));
	out->u.replay.body = lw_rd_bytes(r, f->body_len);
	out->u.replay.reply = lw_rd_bytes(r, f->reply_len);
}

static void lw_dec_walk(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_walk_req *f = &out->u.walk.f;

	lw_rd_fixed(r, &out->u.walk.f, sizeof(out->u.walk.f));
	if (r->err)
		return;
	if ((f->flags & ~(LW_WALK_PARENT | LW_WALK_OPEN)) || f->pad[0] || f->pad[1] || f->pad[2] ||
	    f->pathlen > LW_WALK_PATH_MAX) {
		r->err = -EINVAL;
		return;
	}
	out->u.walk.path = (const char *)lw_rd_bytes(r, f->pathlen);
	if (out->u.walk.path && f->pathlen && memchr(out->u.walk.path, '\0', f->pathlen))
		r->err = -EINVAL;
}

static void lw_dec_pool(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_pool_req *p = &out->u.pool;
	size_t n;

	lw_rd_fixed(r, &out->u.pool, sizeof(out->u.pool));
	if (r->err)
		return;
	n = strnlen(p->name, sizeof(p->name));
	if (p->cmd < LW_POOL_NEW || p->cmd > LW_POOL_LIST || n == sizeof(p->name) ||
	    (n == 0 && p->cmd != LW_POOL_LIST))
		r->err = -EINVAL;
	for (size_t i = n; !r->err && i < sizeof(p->name); i++)
		if (p->name[i])
			r->err = -EINVAL;
}

static void lw_dec_nodemap(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_nodemap_req *p = &out->u.nodemap;
	const struct lw_node_ent *e = &p->ent;
	bool sets = p->cmd == LW_NODEMAP_ADD || p->cmd == LW_NODEMAP_MODIFY;
	size_t n;

	lw_rd_fixed(r, &out->u.nodemap, sizeof(out->u.nodemap));
	if (r->err)
		return;
	n = strnlen(e->name, sizeof(e->name));
	if (p->cmd < LW_NODEMAP_ADD || p->cmd > LW_NODEMAP_LIST || p->pad || n == sizeof(e->name) ||
	    (n == 0 && p->cmd != LW_NODEMAP_LIST) ||
	    (n && loom_node_name_check(e->name)) ||
	    (sets && ((e->flags & ~LW_NODE_FLAGS) || e->uid_min > e->uid_max || e->gid_min > e->gid_max)))
		r->err = -EINVAL;
	for (size_t i = n; !r->err && i < sizeof(e->name); i++)
		if (e->name[i])
			r->err = -EINVAL;
}

static void lw_dec_ost_admin(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.ost_admin, sizeof(out->u.ost_admin));
	if (!r->err && (((out->u.ost_admin.set | out->u.ost_admin.clear) & ~LW_TGT_ADMIN_STATE) ||
			out->u.ost_admin.pad))
		r->err = -EINVAL;
}

static void lw_dec_ost_remove(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.ost_remove, sizeof(out->u.ost_remove));
	if (!r->err && (out->u.ost_remove.flags & ~(LW_OSTRM_DRYRUN | LW_OSTRM_FORCE)))
		r->err = -EINVAL;
}

static void lw_dec_name(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.name.f, sizeof(out->u.name.f));
	if (!r->err && (out->u.name.f.flags & ~(out->op == LW_OP_MDS_UNLINK ? LW_NM_UNLEASED : 0)))
		r->err = -EINVAL;
	rd_name(r, out->u.name.f.namelen, &out->u.name.name);
}

static void lw_dec_setattr(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.setattr, sizeof(out->u.setattr));
	if (!r->err && (out->u.setattr.valid & ~LW_SA_ALL))
		r->err = -EINVAL;
}

static void lw_dec_create(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_create_req *f = &out->u.create.f;

	lw_rd_fixed(r, &out->u.create.f, sizeof(out->u.create.f));
	if (!(f->flags & LW_CR_TMPFILE))
		rd_name(r, f->namelen, &out->u.create.name);
	else if (!r->err && (f->namelen || !(f->flags & LW_CR_OPEN)))
		r->err = -EINVAL; /* nameless: only a handle can ever reach it */
	else
		out->u.create.name = (struct lw_name){ .s = "", .len = 0 };
	if (!r->err && (f->flags & ~(LW_CR_EXCL | LW_CR_OPEN | LW_CR_LAYOUT | LW_CR_TMPFILE | LW_CR_INO)))
		r->err = -EINVAL;
	out->u.create.ino = 0;
	if (f->flags & LW_CR_INO) {
		lw_rd_fixed(r, &out->u.create.ino, sizeof(out->u.create.ino));
		if (!r->err && ((f->flags & LW_CR_TMPFILE) || !(f->flags & LW_CR_EXCL) ||
				out->u.create.ino <= LOOM_ROOT_INO))
			r->err = -EINVAL;
	}
	if (f->flags & LW_CR_LAYOUT) {
		out->u.create.has_layout = true;
		lw_rd_layout_req(r, &out->u.create.layout);
	}
}

static void lw_dec_mkdir(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.mkdir.f, sizeof(out->u.mkdir.f));
	rd_name(r, out->u.mkdir.f.namelen, &out->u.mkdir.name);
	if (!r->err && ((out->u.mkdir.f.flags & ~(LW_MK_LEASE | LW_MK_EXCL)) ||
			((out->u.mkdir.f.flags & LW_MK_EXCL) && !(out->u.mkdir.f.flags & LW_MK_LEASE))))
		r->err = -EINVAL;
}

static void lw_dec_rename(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.rename.f, sizeof(out->u.rename.f));
	rd_name(r, out->u.rename.f.src_namelen, &out->u.rename.src);
	rd_name(r, out->u.rename.f.dst_namelen, &out->u.rename.dst);
	if (!r->err && (out->u.rename.f.flags & ~(LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE)))
		r->err = -EINVAL;
	if (!r->err && out->u.rename.f.flags == (LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE))
		r->err = -EINVAL;
}

static void lw_dec_link(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.link.f, sizeof(out->u.link.f));
	rd_name(r, out->u.link.f.namelen, &out->u.link.name);
}

static void lw_dec_symlink(struct lw_rd *r, struct lw_mds_req *out)
{
	const uint8_t *t;

	lw_rd_fixed(r, &out->u.symlink.f, sizeof(out->u.symlink.f));
	rd_name(r, out->u.symlink.f.namelen, &out->u.symlink.name);
	t = lw_rd_bytes(r, out->u.symlink.f.targetlen);
	out->u.symlink.target = (const char *)t;
	if (t && !r->err) {
		if (out->u.symlink.f.targetlen == 0)
			r->err = -ENOENT;
		else if (out->u.symlink.f.targetlen > LOOM_SYMLINK_MAX)
			r->err = -ENAMETOOLONG;
		else if (memchr(t, '\0', out->u.symlink.f.targetlen))
			r->err = -EINVAL;
	}
}

static void lw_dec_readdir(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.readdir, sizeof(out->u.readdir));
	if (!r->err && ((out->u.readdir.flags & ~(LW_RD_PLUS | LW_RD_LEASE | LW_RD_EXCL)) ||
			((out->u.readdir.flags & LW_RD_EXCL) && !(out->u.readdir.flags & LW_RD_LEASE))))
		r->err = -EINVAL;
}

/* GETXATTR, REMOVEXATTR: the fixed part and a name. */
static void lw_dec_xattr_name(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.xattr.f, sizeof(out->u.xattr.f));
	if (!r->err)
		rd_xattr_name(r, out->u.xattr.f.namelen, &out->u.xattr.name);
}

static void lw_dec_xattr_set(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_dec_xattr_name(r, out);
	if (r->err)
		return;
	if (out->u.xattr.f.size > LOOM_XATTR_SIZE_MAX)
		r->err = -E2BIG;
	if (!r->err && (out->u.xattr.f.flags & ~(LW_XATTR_CREATE | LW_XATTR_REPLACE)))
		r->err = -EINVAL;
	out->u.xattr.value = lw_rd_bytes(r, out->u.xattr.f.size);
}

static void lw_dec_xattr_list(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.xattr.f, sizeof(out->u.xattr.f));
	if (!r->err && out->u.xattr.f.namelen != 0)
		r->err = -EPROTO;
}

static void lw_dec_open(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_open_req *o = &out->u.open;

	lw_rd_fixed(r, &out->u.open, sizeof(out->u.open));
	if (!r->err && (o->flags & ~(LW_OPQ_NAMES | LW_OPQ_DIR_MOVES | LW_OPQ_LEASE)))
		r->err = -EINVAL;
	/* A lease covers a file read as it is: not one opened to change it. */
	if (!r->err && (o->flags & LW_OPQ_LEASE) &&
	    ((o->open_flags & O_ACCMODE) != O_RDONLY || (o->open_flags & O_TRUNC)))
		r->err = -EINVAL;
}

static void lw_dec_lock(struct lw_rd *r, struct lw_mds_req *out)
{
	const struct lw_lock_req *l = &out->u.lock;

	lw_rd_fixed(r, &out->u.lock, sizeof(out->u.lock));
	if (r->err)
		return;
	if ((l->flags & ~(LW_LK_WAIT | LW_LK_TEST | LW_LK_FLOCK | LW_LK_CANCEL | LW_LK_REPLAY |
			  LW_LK_REPLAY_DONE)) ||
	    l->type > 2 || l->start > l->end)
		r->err = -EINVAL;
	/* A replay takes a lock, with nothing else; the end of the replay is alone. */
	if ((l->flags & LW_LK_REPLAY) &&
	    ((l->flags & ~(LW_LK_REPLAY | LW_LK_FLOCK)) || l->type == F_UNLCK))
		r->err = -EINVAL;
	if ((l->flags & LW_LK_REPLAY_DONE) && l->flags != LW_LK_REPLAY_DONE)
		r->err = -EINVAL;
}

static void lw_dec_access(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.access, sizeof(out->u.access));
	if (!r->err && (out->u.access.mask & ~7u))
		r->err = -EINVAL;
}

/* CLOSE, SIZE_UPDATE. */
static void lw_dec_close(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.close, sizeof(out->u.close));
	if (!r->err && (out->u.close.flags & ~LW_CL_ALL))
		r->err = -EINVAL;
	if (!r->err && !!(out->u.close.flags & LW_CL_DOM) != (out->u.close.dom_parts != 0))
		r->err = -EINVAL;
	if (!r->err && out->u.close.dom_parts)
		rd_dom_parts(r, out->u.close.dom_parts, &out->dom);
}

static void lw_dec_setlayout(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.setlayout.f, sizeof(out->u.setlayout.f));
	lw_rd_layout_req(r, &out->u.setlayout.layout);
}

static void lw_dec_ost_register(struct lw_rd *r, struct lw_mds_req *out)
{
	struct lw_ost_register_req *reg = &out->u.ost_register;

	lw_rd_fixed(r, reg, sizeof(*reg));
	if (!r->err && (!memchr(reg->host, '\0', sizeof(reg->host)) ||
			!memchr(reg->uuid, '\0', sizeof(reg->uuid)) ||
			!memchr(reg->fsname, '\0', sizeof(reg->fsname)) || reg->host[0] == '\0' ||
			reg->uuid[0] == '\0'))
		r->err = -EPROTO;
}

static void lw_dec_ost_addr(struct lw_rd *r, struct lw_mds_req *out)
{
	struct lw_ost_addr *a = &out->u.ost_addr;

	lw_rd_fixed(r, a, sizeof(*a));
	if (!r->err && (!memchr(a->host, '\0', sizeof(a->host)) || a->pad != 0 ||
			(a->host[0] != '\0' && a->port == 0)))
		r->err = -EPROTO;
}

static void lw_dec_repl_pull(struct lw_rd *r, struct lw_mds_req *out)
{
	struct lw_repl_pull_req *p = &out->u.repl_pull;

	lw_rd_fixed(r, p, sizeof(*p));
	if (!r->err && (!memchr(p->name, '\0', sizeof(p->name)) || p->name[0] == '\0' ||
			p->max_bytes == 0 || p->max_bytes > LW_MAX_BULK || p->wait_ms > 10000 ||
			p->from_seq == 0 || p->applied_seq >= p->from_seq))
		r->err = -EPROTO;
}

static void lw_dec_repl_copy(struct lw_rd *r, struct lw_mds_req *out)
{
	struct lw_repl_copy_req *p = &out->u.repl_copy;

	lw_rd_fixed(r, p, sizeof(*p));
	if (!r->err && (p->max_bytes == 0 || p->max_bytes > LW_MAX_BULK || p->pad != 0))
		r->err = -EPROTO;
}

static void lw_dec_param(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.param, sizeof(out->u.param));
	if (!r->err)
		r->err = lw_param_req_check(&out->u.param);
}

static void lw_dec_heartbeat(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.heartbeat.f, sizeof(out->u.heartbeat.f));
	if (r->err)
		return;
	if (out->u.heartbeat.f.count > 65536) {
		r->err = -EPROTO;
		return;
	}
	out->u.heartbeat.ents =
		lw_rd_bytes(r, (size_t)out->u.heartbeat.f.count * sizeof(struct lw_ost_heartbeat_ent));
}

/* A request's decoder, by the server of its row: the MDS decodes its own rows and the shared
 * ones (PING); an OSS row is not the MDS's (-EOPNOTSUPP). */
#define DEC_MDS_MDS(name, req) \
	case LW_OP_##name:     \
		lw_dec_##req(&r, out); \
		break;
#define DEC_MDS_ANY DEC_MDS_MDS
#define DEC_MDS_OSS(name, req)
#define DEC_MDS_CLI(name, req)

/*
 * A body whose names or flags are bad (too long, a '/') is answered with that errno, as a local
 * kernel would; anything else malformed is -EPROTO. A body too short for its fixed part is always
 * -EPROTO; past the fixed part, the first error met (a bad name, or a short tail) decides.
 */
int lw_mds_req_decode(uint16_t op, const void *body, uint32_t len, struct lw_mds_req *out)
{
	const struct lw_op_info *info = lw_op_info(op);
	struct lw_rd r;

	memset(out, 0, sizeof(*out));
	out->op = op;
	if (!info || info->server == LW_SRV_OSS || info->server == LW_SRV_CLI)
		return -EOPNOTSUPP;
	lw_rd_init(&r, body, len);
	if (info->flags & LW_OPF_CRED)
		lw_rd_cred(&r, &out->cred);
	switch (op) {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) DEC_MDS_##server(name, req)
#include "proto/ops.def"
#undef LW_OP
	default:
		return -EOPNOTSUPP;
	}
	if (r.err == -EOPNOTSUPP)
		return -EOPNOTSUPP;
	return lw_rd_done(&r);
}

void lw_dom_part_at(const struct lw_mds_req *req, size_t *pos, struct lw_dom_part *part,
		    const void **data)
{
	memcpy(part, req->dom + *pos, sizeof(*part));
	*data = req->dom + *pos + sizeof(*part);
	*pos += sizeof(*part) + part->len;
}

void lw_heartbeat_ent(const struct lw_mds_req *req, uint32_t i, struct lw_ost_heartbeat_ent *out)
{
	memcpy(out, req->u.heartbeat.ents + (size_t)i * sizeof(*out), sizeof(*out));
}
