/*
 * The wire's common parts: the opcode table (ops.def) and what is asked of it, the read and write
 * cursors, frame headers (checksums, the errno mapping), credentials, layouts and readdir pages.
 * The request bodies are decoded in codec_mds.c and codec_ost.c, by server.
 */
#include "proto/codec.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc.h"
#include "common/version.h"
#include "proto/codec_impl.h"

/* ---- the opcode table (ops.def) ---- */

/* Each row's index in op_table. */
#define OP_ROW_(name) LW_OP_ROW_##name

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
		return &op_table[OP_ROW_(name)];
#include "proto/ops.def"
#undef LW_OP
	default:
		return NULL;
	}
}

int lw_op_row(uint16_t opcode)
{
	const struct lw_op_info *i = lw_op_info(opcode);

	return i ? (int)(i - op_table) : -1;
}

/* Lower case, without the server's prefix: made once, in the table's order. */
static char op_stat_names[LW_OP_ROWS][24];
static pthread_once_t op_stat_once = PTHREAD_ONCE_INIT;

static void op_stat_names_make(void)
{
	for (size_t r = 0; r < LW_OP_ROWS; r++) {
		const char *n = op_table[r].name;
		size_t k = 0;

		if (!strncmp(n, "MDS_", 4) || !strncmp(n, "OST_", 4))
			n += 4;
		for (; *n && k < sizeof(op_stat_names[r]) - 1; n++)
			op_stat_names[r][k++] = (char)tolower((unsigned char)*n);
		op_stat_names[r][k] = '\0';
	}
}

const char *lw_op_stat_name(uint16_t opcode)
{
	int r = lw_op_row(opcode);

	if (r < 0)
		return "";
	pthread_once(&op_stat_once, op_stat_names_make);
	return op_stat_names[r];
}

const struct lw_op_info *lw_op_table(size_t *n)
{
	*n = sizeof(op_table) / sizeof(op_table[0]);
	return op_table;
}

void lw_print_version(const char *prog)
{
	printf("%s %s (protocol %u, accepts %u to %u)\n", prog, LOOM_RELEASE, LW_VERSION, LW_VERSION_MIN,
	       LW_VERSION);
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
	if (h->flags & ~(LW_F_REPLY | LW_F_RESENT | LW_F_ENCRYPT | LW_F_NOTIFY | LW_F_JOBID))
		return -EPROTO;
	/* A job id prefixes a request's body, from a peer that speaks version 10. */
	if ((h->flags & LW_F_JOBID) &&
	    ((h->flags & (LW_F_REPLY | LW_F_NOTIFY)) || h->version < 10 || h->body_len < LW_JOBID_LEN))
		return -EPROTO;
	if (!(h->flags & LW_F_REPLY) && h->status != 0)
		return -EPROTO;
	if ((h->flags & LW_F_NOTIFY) && (h->flags & (LW_F_REPLY | LW_F_RESENT | LW_F_ENCRYPT)))
		return -EPROTO;
	return 0;
}

bool lw_hdr_version_foreign(const struct lw_hdr *h)
{
	return h->magic == LW_MAGIC && (h->version < LW_VERSION_MIN || h->version > LW_VERSION);
}

void lw_version_refusal_fill(const struct lw_hdr *to, struct lw_hdr *h, struct lw_version_refusal *body)
{
	memset(body, 0, sizeof(*body));
	body->version_min = LW_VERSION_MIN;
	body->version_max = LW_VERSION;
	snprintf(body->release, sizeof(body->release), "%s", LOOM_RELEASE);
	lw_hdr_fill(h, to->opcode, LW_F_REPLY, lw_errno_to_wire(-EPROTONOSUPPORT), to->req_id, body,
		    sizeof(*body), 0, 0);
}

bool lw_version_refusal_read(const struct lw_hdr *h, const void *body, struct lw_version_refusal *out)
{
	if (h->magic != LW_MAGIC || !(h->flags & LW_F_REPLY) || h->bulk_len ||
	    h->status != lw_errno_to_wire(-EPROTONOSUPPORT) || h->body_len != sizeof(*out) ||
	    lw_hdr_crc_check(h, body))
		return false;
	memcpy(out, body, sizeof(*out));
	out->release[sizeof(out->release) - 1] = '\0';
	for (char *p = out->release; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?'; /* a peer's text, printed in our logs */
	return true;
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

void lw_rd_cred(struct lw_rd *r, struct loom_cred *out)
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
	if (l->magic != LW_LAYOUT_MAGIC || l->version < LW_LAYOUT_V1 || l->version > LW_LAYOUT_V3)
		return -EPROTO;
	if (l->version < LW_LAYOUT_V3 && (l->mirror_count != 0 || l->ec_parity != 0))
		return -EPROTO;
	/* Version 3 only where it says something (lw_layout_encode): one layout, one byte image. */
	if (l->version == LW_LAYOUT_V3 && l->ec_parity == 0 &&
	    (l->mirror_count == 0 || (l->mirror_count == 1 && l->nobjs)))
		return -EPROTO;
	/* A file's erasure-coded layout names its one copy (lw_layout_encode writes 1). */
	if (l->version == LW_LAYOUT_V3 && l->nobjs && l->mirror_count == 0)
		return -EPROTO;
	if (l->mirror_count > LOOM_MAX_MIRRORS || l->ec_parity > LOOM_EC_MAX_PARITY)
		return -EINVAL;
	/* Copies or parity, not both. */
	if (l->ec_parity && l->mirror_count > 1)
		return -EINVAL;
	if (l->ec_parity && l->stripe_count > 0 &&
	    (uint64_t)l->stripe_count + l->ec_parity > LOOM_EC_MAX_WIDTH)
		return -EINVAL;
	/* Every copy's objects count against the one cap: a layout's image stays bounded. */
	if (l->mirror_count > 1 && l->stripe_count > 0 &&
	    (uint64_t)l->stripe_count * l->mirror_count > LOOM_MAX_STRIPES)
		return -EINVAL;
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

void lw_rd_layout_req(struct lw_rd *r, struct lw_layout *out)
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
	/* A mirrored file's copies are striped alike: stripe_count objects each. */
	if (l.nobjs && l.mirror_count > 1 && (uint64_t)l.stripe_count * l.mirror_count != l.nobjs)
		return -EPROTO;
	/* An erasure-coded file's data objects, then its parity objects. */
	if (l.nobjs && l.ec_parity && ((uint64_t)l.stripe_count + l.ec_parity != l.nobjs || l.stripe_count < 1))
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
	/* A file has at least one copy; a request or a default may leave it to inherit (0). */
	ll->mirror_count = l.nobjs && l.mirror_count == 0 ? 1 : l.mirror_count;
	ll->ec_parity = l.ec_parity;
	lw_rd_fixed(r, ll->objs, (size_t)l.nobjs * sizeof(struct lw_ostobj));
	for (uint32_t i = 0; i < ll->nobjs; i++) {
		/* Only a copy or an erasure-coded object can be stale; a plain layout keeps one
		 * byte image. */
		uint32_t allowed = ll->mirror_count > 1 || ll->ec_parity ? LW_OBJ_STALE : 0;

		if (ll->objs[i].flags & ~allowed) {
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
	/* Version 3 only where it says something: more than one copy, or a default's explicit one
	 * (0 there inherits). A plain file's image stays version 2's. */
	wl->version = l->mirror_count > 1 || l->ec_parity || (l->mirror_count == 1 && !l->nobjs) ?
			      LW_LAYOUT_V3 : LW_LAYOUT_V2;
	if (wl->version == LW_LAYOUT_V3) {
		wl->mirror_count = l->mirror_count;
		wl->ec_parity = l->ec_parity;
	}
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
		struct lw_ostobj o = { .ost_idx = l->objs[i].ost_idx, .objid = l->objs[i].objid,
				       .flags = l->mirror_count > 1 || l->ec_parity ?
							l->objs[i].flags & LW_OBJ_STALE : 0 };
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

bool lw_op_mds_prefixed(uint16_t opcode)
{
	const struct lw_op_info *info = lw_op_info(opcode);

	return info && info->server == LW_SRV_MDS;
}

int lw_recall_decode(const void *body, uint32_t len, const uint8_t **leases, uint32_t *count,
		     uint32_t *flags)
{
	struct lw_recall f;

	if (len < sizeof(f))
		return -EPROTO;
	memcpy(&f, body, sizeof(f));
	if (f.count == 0 || f.count > LW_LEASES_MAX || (f.flags & ~LW_RC_ENDED) ||
	    len != sizeof(f) + (size_t)f.count * sizeof(struct lw_lease))
		return -EPROTO;
	*leases = (const uint8_t *)body + sizeof(f);
	*count = f.count;
	*flags = f.flags;
	return 0;
}

int lw_mds_prefix_take(void *body, uint32_t *len, struct lw_mds_rep_prefix *pre,
		       struct lw_obj_version vers[LW_MAX_VERS])
{
	size_t need;

	memset(pre, 0, sizeof(*pre));
	if (*len == 0)
		return 0;
	if (*len < sizeof(*pre))
		return -EPROTO;
	memcpy(pre, body, sizeof(*pre));
	if (pre->nvers > LW_MAX_VERS || (pre->nvers && !pre->transno) ||
	    (pre->lease_ino && (!pre->lease_gen || (pre->flags & LW_RPF_LEASES_LOST))) ||
	    (!pre->lease_ino && pre->lease_gen && !(pre->flags & LW_RPF_LEASES_LOST)))
		return -EPROTO;
	need = sizeof(*pre) + (size_t)pre->nvers * sizeof(*vers);
	if (*len < need)
		return -EPROTO;
	if (pre->nvers)
		memcpy(vers, (uint8_t *)body + sizeof(*pre), pre->nvers * sizeof(*vers));
	memmove(body, (uint8_t *)body + need, *len - need);
	*len -= (uint32_t)need;
	return 0;
}
