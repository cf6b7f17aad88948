#include "proto/codec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc.h"

/* ---- the opcode table (ops.def) ---- */

/* Each row's index in op_table. */
enum op_row {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) OP_ROW_##name,
#include "proto/ops.def"
#undef LW_OP
};

static const struct lw_op_info op_table[] = {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) \
	{ #name, value, LW_SRV_##server, LW_RESEND_##resend, flags, #req, #rep },
#include "proto/ops.def"
#undef LW_OP
};

/* A resend policy that cannot hold, or flags that contradict each other, fail the build. */
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net)                          \
	_Static_assert(LW_RESEND_##resend != LW_RESEND_READ ||                                     \
			       !((flags) & (LW_OPF_MDT | LW_OPF_BULK_IN)),                         \
		       #name ": a request that changes state cannot be READ on resend");            \
	_Static_assert(!((flags) & LW_OPF_OBJ) || LW_SRV_##server == LW_SRV_OSS,                 \
		       #name ": only OSS requests name an object");                                 \
	_Static_assert(!((flags) & LW_OPF_MDT) || LW_SRV_##server == LW_SRV_MDS,                 \
		       #name ": only MDS requests change the MDT");
#include "proto/ops.def"
#undef LW_OP

const struct lw_op_info *lw_op_info(uint16_t opcode)
{
	switch (opcode) {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) \
	case value:                                                       \
		return &op_table[OP_ROW_##name];
#include "proto/ops.def"
#undef LW_OP
	default:
		return NULL;
	}
}

const struct lw_op_info *lw_op_table(size_t *n)
{
	*n = sizeof(op_table) / sizeof(op_table[0]);
	return op_table;
}

const char *lw_op_name(uint16_t opcode)
{
	const struct lw_op_info *i = lw_op_info(opcode);

	return i ? i->name : "UNKNOWN";
}

uint32_t lw_op_flags(uint16_t opcode)
{
	const struct lw_op_info *i = lw_op_info(opcode);

	return i ? i->flags : 0;
}

bool lw_op_takes_bulk(uint16_t opcode, int server)
{
	const struct lw_op_info *i = lw_op_info(opcode);

	return i && (i->server == server || i->server == LW_SRV_ANY) && (i->flags & LW_OPF_BULK_IN);
}

/* ---- cursors ---- */

void lw_rd_init(struct lw_rd *r, const void *buf, size_t len)
{
	r->p = buf;
	r->end = r->p + len;
	r->err = buf || len == 0 ? 0 : -EPROTO;
}

size_t lw_rd_left(const struct lw_rd *r)
{
	return r->err ? 0 : (size_t)(r->end - r->p);
}

const uint8_t *lw_rd_bytes(struct lw_rd *r, size_t n)
{
	const uint8_t *p;

	if (r->err)
		return NULL;
	if ((size_t)(r->end - r->p) < n) {
		r->err = -EPROTO;
		return NULL;
	}
	p = r->p;
	r->p += n;
	return p;
}

void lw_rd_fixed(struct lw_rd *r, void *dst, size_t n)
{
	const uint8_t *p = lw_rd_bytes(r, n);

	if (p)
		memcpy(dst, p, n);
	else
		memset(dst, 0, n);
}

void lw_rd_align8(struct lw_rd *r, const void *base)
{
	size_t off, pad;
	const uint8_t *p;

	if (r->err)
		return;
	off = (size_t)(r->p - (const uint8_t *)base);
	pad = (8 - (off & 7)) & 7;
	p = lw_rd_bytes(r, pad);
	for (size_t i = 0; p && i < pad; i++)
		if (p[i] != 0)
			r->err = -EPROTO;
}

int lw_rd_done(const struct lw_rd *r)
{
	if (r->err)
		return r->err;
	return r->p == r->end ? 0 : -EPROTO;
}

int lw_name_check(const char *s, size_t len)
{
	if (len == 0)
		return -ENOENT;
	if (len > LOOM_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(s, '/', len) || memchr(s, '\0', len))
		return -EINVAL;
	return 0;
}

int lw_xattr_name_check(const char *s, size_t len)
{
	if (len == 0)
		return -EINVAL;
	if (len > LOOM_XATTR_NAME_MAX)
		return -ERANGE;
	if (memchr(s, '\0', len))
		return -EINVAL;
	return 0;
}

void lw_wr_init(struct lw_wr *w, void *buf, size_t cap)
{
	w->buf = buf;
	w->len = 0;
	w->cap = cap;
	w->err = 0;
}

void *lw_wr_reserve(struct lw_wr *w, size_t n)
{
	void *p;

	if (w->err || w->cap - w->len < n) {
		w->err = -EMSGSIZE;
		return NULL;
	}
	p = w->buf + w->len;
	memset(p, 0, n);
	w->len += n;
	return p;
}

void lw_wr_put(struct lw_wr *w, const void *p, size_t n)
{
	void *dst = lw_wr_reserve(w, n);

	if (dst && n)
		memcpy(dst, p, n);
}

void lw_wr_pad8(struct lw_wr *w)
{
	lw_wr_reserve(w, (8 - (w->len & 7)) & 7);
}

/* ---- frames ---- */

void lw_hdr_fill(struct lw_hdr *h, uint16_t opcode, uint32_t flags, int32_t status, uint64_t req_id,
		 const void *body, uint32_t body_len, uint32_t bulk_len, uint32_t bulk_crc)
{
	uint32_t crc;

	h->magic = LW_MAGIC;
	h->version = LW_VERSION;
	h->opcode = opcode;
	h->flags = flags;
	h->status = status;
	h->req_id = req_id;
	h->body_len = body_len;
	h->bulk_len = bulk_len;
	h->bulk_crc = bulk_len ? bulk_crc : 0;
	h->hdr_crc = 0;
	crc = crc32c(0, h, sizeof(*h));
	h->hdr_crc = crc32c(crc, body, body_len);
}

int lw_hdr_check(const struct lw_hdr *h)
{
	if (h->magic != LW_MAGIC || h->version < LW_VERSION_MIN || h->version > LW_VERSION)
		return -EPROTO;
	if (h->body_len > LW_MAX_BODY || h->bulk_len > LW_MAX_BULK)
		return -EPROTO;
	if (h->flags & ~(LW_F_REPLY | LW_F_RESENT))
		return -EPROTO;
	if (!(h->flags & LW_F_REPLY) && h->status != 0)
		return -EPROTO;
	return 0;
}

int lw_hdr_crc_check(const struct lw_hdr *h, const void *body)
{
	struct lw_hdr tmp = *h;
	uint32_t crc;

	tmp.hdr_crc = 0;
	crc = crc32c(0, &tmp, sizeof(tmp));
	crc = crc32c(crc, body, h->body_len);
	return crc == h->hdr_crc ? 0 : -EBADMSG;
}

#define LW_ERRNO_MAX 133 /* EHWPOISON, the last errno Linux defines */

int32_t lw_errno_to_wire(int err)
{
	if (err >= 0)
		return 0;
	if (err < -LW_ERRNO_MAX) /* also keeps -err from overflowing */
		return -EIO;
	return err;
}

int lw_errno_from_wire(int32_t status)
{
	if (status == 0)
		return 0;
	if (status > 0 || status < -LW_ERRNO_MAX)
		return -EIO;
	return status;
}

/* ---- credentials and layouts ---- */

void lw_put_cred(struct lw_wr *w, const struct loom_cred *cred)
{
	struct lw_cred c = { .uid = cred->uid, .gid = cred->gid };

	c.ngroups = cred->ngroups > LOOM_MAX_GROUPS ? LOOM_MAX_GROUPS : cred->ngroups;
	lw_wr_put(w, &c, sizeof(c));
	lw_wr_put(w, cred->groups, c.ngroups * sizeof(uint32_t));
}

static void lw_rd_cred(struct lw_rd *r, struct loom_cred *out)
{
	struct lw_cred c;

	lw_rd_fixed(r, &c, sizeof(c));
	if (r->err)
		return;
	if (c.ngroups > LOOM_MAX_GROUPS || c.pad != 0) {
		r->err = -EPROTO;
		return;
	}
	out->uid = c.uid;
	out->gid = c.gid;
	out->ngroups = c.ngroups;
	lw_rd_fixed(r, out->groups, c.ngroups * sizeof(uint32_t));
}

static int pool_check(const char pool[16])
{
	size_t n = strnlen(pool, 16);

	if (n > LOOM_POOL_NAME_MAX)
		return -EINVAL;
	for (size_t i = n; i < 16; i++)
		if (pool[i] != '\0')
			return -EINVAL;
	return 0;
}

/* 0, LOOM_DOM_NONE, or a multiple of 64 KiB up to LOOM_DOM_MAX. */
static bool dom_size_ok(uint32_t dom_size)
{
	return dom_size == LOOM_DOM_NONE ||
	       (dom_size % LOOM_STRIPE_UNIT == 0 && dom_size <= LOOM_DOM_MAX);
}

int lw_layout_req_check(const struct lw_layout *l)
{
	if (l->magic != LW_LAYOUT_MAGIC || (l->version != LW_LAYOUT_V1 && l->version != LW_LAYOUT_V2))
		return -EPROTO;
	if (l->pad != 0)
		return -EPROTO;
	if (!dom_size_ok(l->dom_size))
		return -EINVAL;
	if (l->pattern != 0 && l->pattern != LW_PATTERN_RAID0)
		return -EINVAL;
	if (l->stripe_size % LOOM_STRIPE_UNIT != 0)
		return -EINVAL;
	if (l->stripe_count < -1 || l->stripe_count > LOOM_MAX_STRIPES)
		return -EINVAL;
	if (l->stripe_offset < -1)
		return -EINVAL;
	if (l->nobjs > LOOM_MAX_STRIPES)
		return -EPROTO;
	return pool_check(l->pool);
}

/* The fixed part of a layout: 48 bytes for version 1 (no dom_size), 56 for version 2. */
static void lw_rd_layout_fixed(struct lw_rd *r, struct lw_layout *out)
{
	memset(out, 0, sizeof(*out));
	lw_rd_fixed(r, out, LW_LAYOUT_V1_SIZE);
	if (!r->err && out->version >= LW_LAYOUT_V2)
		lw_rd_fixed(r, &out->dom_size, sizeof(*out) - LW_LAYOUT_V1_SIZE);
}

static void lw_rd_layout_req(struct lw_rd *r, struct lw_layout *out)
{
	int rc;

	lw_rd_layout_fixed(r, out);
	if (r->err)
		return;
	rc = lw_layout_req_check(out);
	if (rc == 0 && out->nobjs != 0)
		rc = -EPROTO;
	if (rc)
		r->err = rc;
}

int lw_layout_decode(struct lw_rd *r, struct loom_layout **out)
{
	struct lw_layout l;
	struct loom_layout *ll;
	int rc;

	lw_rd_layout_fixed(r, &l);
	if (r->err)
		return r->err;
	rc = lw_layout_req_check(&l);
	if (rc)
		return -EPROTO;
	/* A file's Data-on-MDT part ends where a stripe can begin. */
	if (l.nobjs && l.dom_size == LOOM_DOM_NONE)
		return -EPROTO;
	if (lw_rd_left(r) < (size_t)l.nobjs * sizeof(struct lw_ostobj))
		return -EPROTO;
	/* A file's layout maps bytes to objects: its stripe size divides offsets. */
	if (l.nobjs && l.stripe_size == 0)
		return -EPROTO;
	ll = calloc(1, sizeof(*ll) + (size_t)l.nobjs * sizeof(struct loom_ostobj));
	if (!ll)
		return -ENOMEM;
	ll->pattern = l.pattern;
	ll->stripe_size = l.stripe_size;
	ll->stripe_count = l.stripe_count;
	ll->stripe_offset = l.stripe_offset;
	ll->layout_gen = l.layout_gen;
	ll->flags = l.flags;
	ll->dom_size = l.dom_size;
	memcpy(ll->pool, l.pool, sizeof(ll->pool));
	ll->pool[LOOM_POOL_NAME_MAX] = '\0';
	ll->nobjs = l.nobjs;
	lw_rd_fixed(r, ll->objs, (size_t)l.nobjs * sizeof(struct lw_ostobj));
	for (uint32_t i = 0; i < ll->nobjs; i++) {
		if (ll->objs[i].pad != 0) { /* reserved: one layout, one byte image */
			free(ll);
			return -EPROTO;
		}
	}
	*out = ll;
	return 0;
}

void lw_layout_encode(struct lw_wr *w, const struct loom_layout *l)
{
	struct lw_layout *wl = lw_wr_reserve(w, sizeof(*wl));

	if (!wl)
		return;
	wl->magic = LW_LAYOUT_MAGIC;
	wl->version = LW_LAYOUT_V2;
	wl->pattern = (uint16_t)l->pattern;
	wl->stripe_size = l->stripe_size;
	wl->stripe_count = l->stripe_count;
	wl->stripe_offset = l->stripe_offset;
	wl->layout_gen = l->layout_gen;
	memcpy(wl->pool, l->pool, strnlen(l->pool, LOOM_POOL_NAME_MAX));
	wl->nobjs = l->nobjs;
	wl->flags = l->flags;
	wl->dom_size = l->dom_size;
	for (uint32_t i = 0; i < l->nobjs; i++) {
		struct lw_ostobj o = { .ost_idx = l->objs[i].ost_idx, .objid = l->objs[i].objid };
		lw_wr_put(w, &o, sizeof(o));
	}
}

/* ---- readdir pages ---- */

int lw_readdir_next(struct lw_rd *r, const void *base, bool plus, struct lw_dirent *de,
		    const char **name, struct lw_attr *attr)
{
	const uint8_t *n;

	lw_rd_fixed(r, de, sizeof(*de));
	n = lw_rd_bytes(r, de->namelen);
	lw_rd_align8(r, base);
	if (plus)
		lw_rd_fixed(r, attr, sizeof(*attr));
	if (r->err)
		return -EPROTO;
	/* "." and ".." are valid entries here, and valid components too. */
	if (lw_name_check((const char *)n, de->namelen) != 0 || de->pad != 0)
		return -EPROTO;
	*name = (const char *)n;
	return 0;
}

int lw_readdir_put(struct lw_wr *w, const struct lw_dirent *de, const char *name,
		   const struct lw_attr *attr)
{
	size_t need = sizeof(*de) + ((de->namelen + 7u) & ~7u) + (attr ? sizeof(*attr) : 0);

	if (w->err || w->cap - w->len < need)
		return -EMSGSIZE;
	lw_wr_put(w, de, sizeof(*de));
	lw_wr_put(w, name, de->namelen);
	lw_wr_pad8(w);
	if (attr)
		lw_wr_put(w, attr, sizeof(*attr));
	return 0;
}

/* ---- MDS requests ---- */

static void rd_name(struct lw_rd *r, uint16_t len, struct lw_name *out)
{
	const uint8_t *p = lw_rd_bytes(r, len);
	int rc;

	out->s = (const char *)p;
	out->len = len;
	if (!p)
		return;
	rc = lw_name_check(out->s, len);
	if (rc)
		r->err = rc;
}

static void rd_xattr_name(struct lw_rd *r, uint16_t len, struct lw_name *out)
{
	const uint8_t *p = lw_rd_bytes(r, len);
	int rc;

	out->s = (const char *)p;
	out->len = len;
	if (!p)
		return;
	rc = lw_xattr_name_check(out->s, len);
	if (rc)
		r->err = rc;
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

static void lw_dec_swap(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.swap, sizeof(out->u.swap));
	if (!r->err && (out->u.swap.pad || out->u.swap.mtime_ns >= 1000000000u))
		r->err = -EINVAL;
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

static void lw_dec_ost_admin(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.ost_admin, sizeof(out->u.ost_admin));
	if (!r->err && (((out->u.ost_admin.set | out->u.ost_admin.clear) & ~LW_TGT_ADMIN_STATE) ||
			out->u.ost_admin.pad))
		r->err = -EINVAL;
}

static void lw_dec_name(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.name.f, sizeof(out->u.name.f));
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
	if (!r->err && (f->flags & ~(LW_CR_EXCL | LW_CR_OPEN | LW_CR_LAYOUT | LW_CR_TMPFILE)))
		r->err = -EINVAL;
	if (f->flags & LW_CR_LAYOUT) {
		out->u.create.has_layout = true;
		lw_rd_layout_req(r, &out->u.create.layout);
	}
}

static void lw_dec_mkdir(struct lw_rd *r, struct lw_mds_req *out)
{
	lw_rd_fixed(r, &out->u.mkdir.f, sizeof(out->u.mkdir.f));
	rd_name(r, out->u.mkdir.f.namelen, &out->u.mkdir.name);
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
	if (!r->err && (out->u.readdir.flags & ~LW_RD_PLUS))
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
	lw_rd_fixed(r, &out->u.open, sizeof(out->u.open));
	if (!r->err && (out->u.open.flags & ~(LW_OPQ_NAMES | LW_OPQ_DIR_MOVES)))
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
	if (!info || info->server == LW_SRV_OSS)
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

/* ---- OSS requests ---- */

int lw_falloc_mode_check(uint32_t mode)
{
	switch (mode) {
	case 0:
	case LW_FALLOC_KEEP_SIZE:
	case LW_FALLOC_PUNCH_HOLE | LW_FALLOC_KEEP_SIZE:
	case LW_FALLOC_ZERO_RANGE:
	case LW_FALLOC_ZERO_RANGE | LW_FALLOC_KEEP_SIZE:
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

/* ---- the OSS's request bodies: one lw_ost_io each, its fields checked by form ---- */

/* PING: an empty body. */
static void lw_ost_dec_none(struct lw_rd *r, struct lw_ost_io *out)
{
	(void)r;
	memset(out, 0, sizeof(*out));
}

/* AUTH_*: the frame layer's. */
static void lw_ost_dec_frame(struct lw_rd *r, struct lw_ost_io *out)
{
	memset(out, 0, sizeof(*out));
	r->err = -EOPNOTSUPP;
}

static int flags_reserved(uint32_t flags)
{
	return flags ? -EPROTO : 0;
}

static int seek_whence(uint32_t flags)
{
	return flags == LW_SEEK_DATA || flags == LW_SEEK_HOLE ? 0 : -EINVAL;
}

/* The checks every form shares, in this order: the flags (by the form's rule), no padding, a
 * truncation epoch only where the form carries one, an offset within the largest file. */
static void ost_dec_fixed(struct lw_rd *r, struct lw_ost_io *out, int (*flags_check)(uint32_t),
			  bool epoch)
{
	lw_rd_fixed(r, out, sizeof(*out));
	if (r->err)
		return;
	r->err = flags_check(out->flags);
	if (!r->err && (out->pad != 0 || (!epoch && out->trunc_epoch != 0)))
		r->err = -EPROTO;
	if (!r->err && out->offset > LW_MAX_OFFSET)
		r->err = -EFBIG;
}

static void lw_ost_dec_io(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, flags_reserved, false);
}

/* A read's length comes back as bulk. */
static void lw_ost_dec_read(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, flags_reserved, false);
	if (!r->err && out->length > LW_MAX_BULK)
		r->err = -EPROTO;
}

/* Writes and punches carry the truncation epoch they were made in. */
static void lw_ost_dec_epoch(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, flags_reserved, true);
}

/* fallocate(2)'s rules: a mode it knows, an empty range -EINVAL, one past the largest file
 * -EFBIG. */
static void lw_ost_dec_fallocate(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, lw_falloc_mode_check, true);
	if (!r->err && out->length == 0)
		r->err = -EINVAL;
	if (!r->err && out->length > LW_MAX_OFFSET - out->offset)
		r->err = -EFBIG;
}

static void lw_ost_dec_seek(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, seek_whence, false);
}

/* OST_SCRUB's length is a command; an unknown one may be a newer client's. */
static void lw_ost_dec_scrub(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, flags_reserved, false);
	if (!r->err && out->length != LW_SCRUB_START && out->length != LW_SCRUB_STATUS)
		r->err = -EINVAL;
}

#define DEC_OSS_OSS(name, req)        \
	case LW_OP_##name:            \
		lw_ost_dec_##req(&r, out); \
		break;
#define DEC_OSS_MDS(name, req)
#define DEC_OSS_ANY DEC_OSS_OSS

int lw_ost_req_decode(uint16_t op, const void *body, uint32_t len, struct lw_ost_io *out)
{
	struct lw_rd r;

	lw_rd_init(&r, body, len);
	switch (op) {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) DEC_OSS_##server(name, req)
#include "proto/ops.def"
#undef LW_OP
	default:
		return -EOPNOTSUPP;
	}
	return lw_rd_done(&r);
}
