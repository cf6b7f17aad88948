/*
 * The OSS's request bodies: one lw_ost_io each, its fields checked by the form that ops.def names
 * for an OSS (or ANY) row, dispatched from the table by lw_ost_req_decode().
 */
#include "proto/codec.h"

#include <errno.h>
#include <string.h>

/* ---- OSS requests ---- */

int lw_param_req_check(const struct lw_param_req *p)
{
	if (p->cap > LW_MAX_BULK || p->flags || !memchr(p->name, '\0', sizeof(p->name)) || !p->name[0] ||
	    !memchr(p->value, '\0', sizeof(p->value)))
		return -EPROTO;
	return 0;
}

int lw_param_req_decode(const void *body, uint32_t len, struct lw_param_req *out)
{
	if (len != sizeof(*out))
		return -EPROTO;
	memcpy(out, body, sizeof(*out));
	return lw_param_req_check(out);
}

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

/* GET_PARAM, SET_PARAM: checked here; the handler takes the body with lw_param_req_decode. */
static void lw_ost_dec_param(struct lw_rd *r, struct lw_ost_io *out)
{
	struct lw_param_req p;

	memset(out, 0, sizeof(*out));
	lw_rd_fixed(r, &p, sizeof(p));
	if (!r->err)
		r->err = lw_param_req_check(&p);
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

static int punch_flags(uint32_t flags)
{
	return flags & ~LW_PUNCH_ANEW ? -EPROTO : 0;
}

/* A punch: an epoch, and LW_PUNCH_ANEW only to make an object anew (length 0). */
static void lw_ost_dec_punch(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, punch_flags, true);
	if (!r->err && (out->flags & LW_PUNCH_ANEW) && out->length != 0)
		r->err = -EINVAL;
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

/* OST_DESTROY_MANY: the ids come as bulk (the handler checks its length is `length`); no object
 * in the body. */
static void lw_ost_dec_destroy_many(struct lw_rd *r, struct lw_ost_io *out)
{
	ost_dec_fixed(r, out, flags_reserved, false);
	if (!r->err && (out->objid != 0 || out->offset != 0))
		r->err = -EPROTO;
	if (!r->err && (out->length == 0 || out->length % sizeof(uint64_t) != 0 ||
			out->length > LW_DESTROY_MANY_MAX * sizeof(uint64_t)))
		r->err = -EINVAL;
}

#define DEC_OSS_OSS(name, req)        \
	case LW_OP_##name:            \
		lw_ost_dec_##req(&r, out); \
		break;
#define DEC_OSS_MDS(name, req)
#define DEC_OSS_CLI(name, req)
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
