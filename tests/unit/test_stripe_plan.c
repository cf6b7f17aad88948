/*
 * The client's striped I/O (src/client/io.c, included whole): which object, object offset and
 * length every request of a file range goes to, cut where RPCs must be cut (LW_RPC_BULK bytes,
 * RPC_MAX_IOV pieces of buffer), and what the answers make of it (holes read as zeros, broken
 * replies refused, the most telling error of several kept).
 *
 * There is no network: the RPC layer (the few rpc_* calls io.c makes) and fs_ost_conn are
 * replaced here by a fake OSS that answers every call at once from objects in memory and logs
 * each request. test_stripe.c checks the stripe math itself against a walking model; this
 * checks io.c's use of it, and where a file's bytes end up in its objects.
 */
#include <stdlib.h>

#include "check.h"
#include "client/io.c"
#include "client/io_mirror.c"
#include "client/io_ec.c"

int check_failures;
const char *check_current = "";

#define KiB (1ull << 10)
#define MiB (1ull << 20)

/* ---- a fake OSS behind a fake RPC layer ---- */

struct fobj {
	uint32_t ost;
	uint64_t objid;
	uint8_t *data, *written; /* written[x]: byte x is data, not a hole */
	uint64_t size, cap;
};

struct logent {
	uint16_t op;
	struct lw_ost_io body;
	int iovcnt;
	const uint8_t *iov0;   /* the first piece of buffer, and the second */
	uint64_t len0;
	const uint8_t *iov1;
	const uint8_t *end;    /* of the last piece of buffer */
};

enum fault { F_NONE, F_STATUS, F_SHORT_BODY, F_LONG_READ, F_SHORT_WRITE, F_HALF_READ,
	     F_BLOCKS_DOWN /* each answer reports fewer blocks: as if answers crossed */ };

static struct fobj objs[64];
static int nobjs_;
static struct logent log_[4096];
static int nlog;
static bool discard;                  /* writes are logged, not kept */
static enum fault fault[32];          /* per OST index */
static int fault_status[32];

static void fake_reset(void)
{
	for (int i = 0; i < nobjs_; i++) {
		free(objs[i].data);
		free(objs[i].written);
	}
	memset(objs, 0, sizeof(objs));
	nobjs_ = 0;
	nlog = 0;
	discard = false;
	memset(fault, 0, sizeof(fault));
}

static struct fobj *fobj_of(uint32_t ost, uint64_t objid, bool create)
{
	for (int i = 0; i < nobjs_; i++)
		if (objs[i].ost == ost && objs[i].objid == objid)
			return &objs[i];
	if (!create)
		return NULL;
	REQUIRE(nobjs_ < 64);
	objs[nobjs_].ost = ost;
	objs[nobjs_].objid = objid;
	return &objs[nobjs_++];
}

static void fobj_reserve(struct fobj *o, uint64_t end)
{
	if (end <= o->cap)
		return;
	o->data = realloc(o->data, end);
	o->written = realloc(o->written, end);
	REQUIRE(o->data && o->written);
	memset(o->data + o->cap, 0, end - o->cap);
	memset(o->written + o->cap, 0, end - o->cap);
	o->cap = end;
}

int fs_ost_conn(loom_fs *fs, uint32_t ost_idx, struct rpc_conn **out)
{
	(void)fs;
	if (ost_idx >= 32)
		return -ENODEV;
	*out = (struct rpc_conn *)(uintptr_t)(ost_idx + 1); /* never looked into */
	return 0;
}

/* The fake OSS never changes instance: no loss generation to note. */
_Atomic uint32_t *fs_ost_loss_ref(loom_fs *fs, uint32_t idx)
{
	(void)fs;
	(void)idx;
	return NULL;
}

void ino_mark_acked(loom_fs *fs, uint64_t ino, uint32_t ost, uint32_t gen)
{
	(void)fs;
	(void)ino;
	(void)ost;
	(void)gen;
}

void rpc_call_init(struct rpc_call *call, uint16_t opcode, const void *body, uint32_t body_len)
{
	memset(call, 0, sizeof(*call));
	call->opcode = opcode;
	call->body = body;
	call->body_len = body_len;
}

/* Job ids (client/jobtag.c) are not this test's: every call is for no job. */
void jobtag_current(loom_fs *fs, char out[LOOM_JOBID_LEN])
{
	(void)fs;
	memset(out, 0, LOOM_JOBID_LEN);
}

void fs_call_init(loom_fs *fs, struct rpc_call *call, uint16_t opcode, const void *body,
		  uint32_t body_len)
{
	(void)fs;
	rpc_call_init(call, opcode, body, body_len);
}

void rpc_call_release(struct rpc_call *call)
{
	free(call->rbody);
	call->rbody = NULL;
}

void rpc_wait_init(struct rpc_wait *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->lock, NULL);
}

void rpc_wait_destroy(struct rpc_wait *w)
{
	pthread_mutex_destroy(&w->lock);
}

void rpc_wait_all(struct rpc_wait *w)
{
	CHECK_EQ(w->pending, 0); /* every call is answered as it is submitted */
}

int rpc_wait_settled(struct rpc_wait *w)
{
	CHECK_EQ(w->pending, 0);
	return 0;
}

/* Interrupts do not come here: io.c only sets them aside around write-behind waits. */
struct rpc_intr *rpc_intr_swap(struct rpc_intr *in)
{
	(void)in;
	return NULL;
}

/* Answers the call as an OSS would, at once. */
void rpc_submit(struct rpc_conn *c, struct rpc_call *call, struct rpc_wait *w)
{
	const struct lw_ost_io *q = call->body;
	struct lw_ost_io_rep rep = { 0 };
	uint32_t ost = (uint32_t)((uintptr_t)c - 1);
	struct fobj *o = fobj_of(q->ost_idx, q->objid, call->opcode == LW_OP_OST_WRITE);
	const struct iovec *iov = call->opcode == LW_OP_OST_WRITE ? call->bulk : call->rbulk;
	int iovcnt = call->opcode == LW_OP_OST_WRITE ? call->bulk_cnt : call->rbulk_cnt;

	(void)w;
	CHECK_EQ(ost, q->ost_idx);
	CHECK_EQ(call->body_len, sizeof(*q));
	if (nlog < (int)(sizeof(log_) / sizeof(log_[0]))) {
		struct logent *e = &log_[nlog];
		e->op = call->opcode;
		e->body = *q;
		e->iovcnt = iovcnt;
		e->iov0 = iovcnt > 0 ? iov[0].iov_base : NULL;
		e->len0 = iovcnt > 0 ? iov[0].iov_len : 0;
		e->iov1 = iovcnt > 1 ? iov[1].iov_base : NULL;
		e->end = iovcnt > 0 ? (const uint8_t *)iov[iovcnt - 1].iov_base + iov[iovcnt - 1].iov_len : NULL;
	}
	nlog++;
	if (fault[ost] == F_STATUS) {
		call->status = fault_status[ost];
		return;
	}
	if (call->opcode == LW_OP_OST_WRITE) {
		uint64_t at = q->offset, total = 0;

		for (int i = 0; i < iovcnt; i++)
			total += iov[i].iov_len;
		CHECK_EQ(total, q->length);
		CHECK_EQ(call->bulk_len, q->length);
		if (!discard) {
			fobj_reserve(o, q->offset + q->length);
			for (int i = 0; i < iovcnt; at += iov[i].iov_len, i++) {
				memcpy(o->data + at, iov[i].iov_base, iov[i].iov_len);
				memset(o->written + at, 1, iov[i].iov_len);
			}
			if (at > o->size)
				o->size = at;
		}
		rep.length = fault[ost] == F_SHORT_WRITE ? q->length - 1 : q->length;
	} else if (call->opcode == LW_OP_OST_READ) {
		uint64_t at = q->offset, end = o && o->size > q->offset ? MIN(o->size, q->offset + q->length) : at;

		if (fault[ost] == F_HALF_READ)
			end = at + (end - at) / 2;
		for (int i = 0; i < iovcnt && at < end; i++) {
			uint64_t n = MIN(iov[i].iov_len, end - at);
			memcpy(iov[i].iov_base, o->data + at, n);
			at += n;
		}
		call->rbulk_len = (uint32_t)(at - q->offset);
		rep.length = call->rbulk_len + (fault[ost] == F_LONG_READ);
	} else if (call->opcode == LW_OP_OST_SEEK) {
		uint64_t x = q->offset;

		if (q->flags == LW_SEEK_DATA) {
			const uint8_t *d = o && x < o->size ? memchr(o->written + x, 1, o->size - x) : NULL;
			if (d)
				x = (uint64_t)(d - o->written);
			else
				call->status = -ENXIO;
		} else {
			const uint8_t *h = o && x < o->size ? memchr(o->written + x, 0, o->size - x) : NULL;
			if (o && x < o->size)
				x = h ? (uint64_t)(h - o->written) : o->size;
		}
		rep.length = x;
	}
	/* OST_FALLOCATE, OST_GETATTR, OST_SYNC: logged, and the blocks of what the object holds. */
	o = fobj_of(q->ost_idx, q->objid, false);
	rep.obj_size = o ? o->size : 0;
	rep.obj_blocks = (rep.obj_size + 511) / 512 + q->stripe_idx * 1000;
	if (fault[ost] == F_BLOCKS_DOWN)
		rep.obj_blocks = 5000 - (uint64_t)nlog;
	if (call->status)
		return;
	call->rbody_len = fault[ost] == F_SHORT_BODY ? sizeof(rep) - 8 : sizeof(rep);
	call->rbody = malloc(sizeof(rep));
	REQUIRE(call->rbody);
	memcpy(call->rbody, &rep, sizeof(rep));
}

/* The MDS's side of stale marks: what it was told, and the layout generation it answers. */
static struct loom_ostobj marked[64];
static int nmarked;
static int mark_status;

int mdc_mirror_stale(loom_fs *fs, uint64_t ino, const struct loom_ostobj *list, uint32_t n, uint32_t *gen)
{
	(void)fs;
	(void)ino;
	if (mark_status)
		return mark_status;
	for (uint32_t i = 0; i < n && nmarked < 64; i++)
		marked[nmarked++] = list[i];
	*gen = 4;
	return 0;
}

/* Connections are never away here: failures come from the fake OSS's answers. */
bool rpc_conn_recovering(struct rpc_conn *c)
{
	(void)c;
	return false;
}

/* The MDS's layout when a mark is refused (io_ec.c reads it again): none here. */
void fs_cred(loom_fs *fs, struct loom_cred *cr)
{
	(void)fs;
	memset(cr, 0, sizeof(*cr));
}

int mdc_getlayout(loom_fs *fs, const struct loom_cred *cr, uint64_t ino, struct loom_layout **out)
{
	(void)fs;
	(void)cr;
	(void)ino;
	*out = NULL;
	return -EIO;
}

/* ---- layouts, and where a file byte lives ---- */

/* Objects on OSTs 10, 11, ... with ids 0x1000, 0x1001, ... */
static struct loom_layout *layout_new(uint32_t size, uint32_t count, uint32_t dom_size)
{
	struct loom_layout *l = calloc(1, sizeof(*l) + count * sizeof(l->objs[0]));

	REQUIRE(l);
	l->stripe_size = size;
	l->stripe_count = (int32_t)count;
	l->nobjs = count;
	l->layout_gen = 3;
	l->dom_size = dom_size;
	for (uint32_t k = 0; k < count; k++) {
		l->objs[k].ost_idx = 10 + k;
		l->objs[k].objid = 0x1000 + k;
	}
	return l;
}

/* Unit u of the file is unit u / C of object u % C (stripe.h's picture, written out). */
static void where(const struct loom_layout *l, uint64_t f, uint32_t *k, uint64_t *x)
{
	uint64_t u = f / l->stripe_size;

	*k = (uint32_t)(u % l->nobjs);
	*x = u / l->nobjs * l->stripe_size + f % l->stripe_size;
}

/* A logged request, as expected. */
static void expect(int i, uint16_t op, const struct loom_layout *l, uint32_t k, uint64_t offset,
		   uint64_t length, int iovcnt)
{
	const struct logent *e = &log_[i];

	if (i >= nlog) {
		CHECK_FAIL_("request %d: not sent (%d were)", i, nlog);
		return;
	}
	CHECK_EQ(e->op, op);
	CHECK_EQ(e->body.ost_idx, l->objs[k].ost_idx);
	CHECK_EQ(e->body.objid, l->objs[k].objid);
	CHECK_EQ(e->body.stripe_idx, k);
	CHECK_EQ(e->body.offset, offset);
	CHECK_EQ(e->body.length, length);
	CHECK_EQ(e->body.layout_gen, l->layout_gen);
	CHECK_EQ(e->iovcnt, iovcnt);
}

/* ---- the plan of a range, exactly ---- */

static void test_plan_exact(void)
{
	uint8_t *buf = malloc(16 * MiB);
	struct loom_layout *l;

	REQUIRE(buf);
	/* 1 MiB stripes on 3 objects, 5 MiB from 1.5 MiB: units 1-6, one request per object,
	 * starting with the object of the first byte, each gathering its two units. */
	fake_reset();
	l = layout_new(MiB, 3, 0);
	CHECK_RC(io_write(NULL, 77, l, buf, 5 * MiB, 3 * MiB / 2, 9, NULL), 0);
	CHECK_EQ(nlog, 3);
	expect(0, LW_OP_OST_WRITE, l, 1, MiB / 2, 3 * MiB / 2, 2);
	expect(1, LW_OP_OST_WRITE, l, 2, 0, 2 * MiB, 2);
	expect(2, LW_OP_OST_WRITE, l, 0, MiB, 3 * MiB / 2, 2);
	/* The pieces of buffer: object 1 gets [0, 0.5M) and [2.5M, 3.5M) of it. */
	CHECK(log_[0].iov0 == buf && log_[0].len0 == MiB / 2 && log_[0].iov1 == buf + 5 * MiB / 2);
	CHECK(log_[1].iov0 == buf + MiB / 2 && log_[1].iov1 == buf + 7 * MiB / 2);
	CHECK(log_[2].iov0 == buf + 3 * MiB / 2 && log_[2].iov1 == buf + 9 * MiB / 2);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(log_[i].body.ino, 77);
		CHECK_EQ(log_[i].body.trunc_epoch, 9); /* writes carry their epoch */
	}
	/* Reads carry none. */
	nlog = 0;
	CHECK_RC(io_read(NULL, 77, l, buf, 100, 0), 0);
	CHECK_EQ(nlog, 1);
	expect(0, LW_OP_OST_READ, l, 0, 0, 100, 1);
	CHECK_EQ(log_[0].body.trunc_epoch, 0);
	free(l);

	/* One object, 9 MiB from byte 100: cut every LW_RPC_BULK (4 MiB), mid-unit. */
	fake_reset();
	l = layout_new(MiB, 1, 0);
	CHECK_RC(io_write(NULL, 77, l, buf, 9 * MiB, 100, 0, NULL), 0);
	CHECK_EQ(nlog, 3);
	expect(0, LW_OP_OST_WRITE, l, 0, 100, 4 * MiB, 5);
	expect(1, LW_OP_OST_WRITE, l, 0, 4 * MiB + 100, 4 * MiB, 5);
	expect(2, LW_OP_OST_WRITE, l, 0, 8 * MiB + 100, MiB, 2);
	CHECK(log_[1].iov0 == buf + 4 * MiB && log_[1].len0 == MiB - 100);
	free(l);

	/* 64 KiB units from byte 1000: the 64th piece of buffer fills a request first. */
	fake_reset();
	l = layout_new(64 * KiB, 1, 0);
	CHECK_RC(io_write(NULL, 77, l, buf, 5 * MiB, 1000, 0, NULL), 0);
	CHECK_EQ(nlog, 2);
	expect(0, LW_OP_OST_WRITE, l, 0, 1000, 4 * MiB - 1000, RPC_MAX_IOV);
	expect(1, LW_OP_OST_WRITE, l, 0, 4 * MiB, MiB + 1000, 17);
	free(l);

	/* Two objects, 16 MiB: each gets two requests of 64 pieces (both limits at once), all
	 * of one object before the other's. */
	fake_reset();
	l = layout_new(64 * KiB, 2, 0);
	CHECK_RC(io_write(NULL, 77, l, buf, 16 * MiB, 0, 0, NULL), 0);
	CHECK_EQ(nlog, 4);
	expect(0, LW_OP_OST_WRITE, l, 0, 0, 4 * MiB, 64);
	expect(1, LW_OP_OST_WRITE, l, 0, 4 * MiB, 4 * MiB, 64);
	expect(2, LW_OP_OST_WRITE, l, 1, 0, 4 * MiB, 64);
	expect(3, LW_OP_OST_WRITE, l, 1, 4 * MiB, 4 * MiB, 64);
	CHECK(log_[2].iov0 == buf + 64 * KiB && log_[2].iov1 == buf + 3 * 64 * KiB);
	free(l);

	/* A range inside one unit, and one that ends exactly at a unit's end. */
	fake_reset();
	l = layout_new(128 * KiB, 4, 0);
	CHECK_RC(io_write(NULL, 77, l, buf, 10, 5 * 128 * KiB + 7, 0, NULL), 0);
	CHECK_RC(io_write(NULL, 77, l, buf, 128 * KiB + 1, 3 * 128 * KiB - 1, 0, NULL), 0);
	CHECK_EQ(nlog, 3);
	expect(0, LW_OP_OST_WRITE, l, 1, 128 * KiB + 7, 10, 1);
	expect(1, LW_OP_OST_WRITE, l, 2, 128 * KiB - 1, 1, 1);
	expect(2, LW_OP_OST_WRITE, l, 3, 0, 128 * KiB, 1);
	CHECK(log_[2].iov0 == buf + 1);
	/* Nothing to move: nothing sent. */
	CHECK_RC(io_write(NULL, 77, l, buf, 0, 12345, 0, NULL), 0);
	CHECK_EQ(nlog, 3);
	free(l);
	/* A layout without objects or stripe size cannot be written or read. */
	l = layout_new(0, 1, 0);
	CHECK_RC(io_read(NULL, 77, l, buf, 10, 0), -EIO);
	l->stripe_size = MiB;
	l->nobjs = 0;
	CHECK_RC(io_write(NULL, 77, l, buf, 10, 0, 0, NULL), -EIO);
	free(l);
	fake_reset();
	free(buf);
}

/* Data-on-MDT: the MDS holds [0, dom_size); the objects hold the rest at their usual offsets,
 * so the client sends them the range from dom_size on, mapped as in any file, and the objects'
 * bytes below what dom_size maps to stay holes. */
static void test_plan_data_on_mdt(void)
{
	uint8_t *buf = calloc(1, 3 * MiB), *back = malloc(3 * MiB);
	struct loom_layout *l;
	uint64_t found;

	REQUIRE(buf && back);
	/* dom_size 1 MiB over 64 KiB units on 4 objects: the first object byte is unit 16's,
	 * object 0 at 256 KiB; every object starts there. */
	fake_reset();
	l = layout_new(64 * KiB, 4, MiB);
	for (uint64_t i = 0; i < 300 * KiB; i++)
		buf[i] = (uint8_t)(i * 13 + 1);
	CHECK_RC(io_write(NULL, 77, l, buf, 300 * KiB, MiB, 0, NULL), 0);
	CHECK_EQ(nlog, 4);
	expect(0, LW_OP_OST_WRITE, l, 0, 256 * KiB, 64 * KiB + 44 * KiB, 2);
	for (uint32_t k = 1; k < 4; k++)
		expect((int)k, LW_OP_OST_WRITE, l, k, 256 * KiB, 64 * KiB, 1);
	for (int i = 0; i < nobjs_; i++)
		CHECK(!objs[i].written[0] && !objs[i].written[256 * KiB - 1] && objs[i].written[256 * KiB]);
	/* Read back from dom_size, and seek: the objects' first data is at dom_size. */
	CHECK_RC(io_read(NULL, 77, l, back, 300 * KiB, MiB), 0);
	CHECK(memcmp(back, buf, 300 * KiB) == 0);
	CHECK_RC(io_seek(NULL, l, LW_SEEK_DATA, 0, &found), 0);
	CHECK_EQ(found, MiB);
	free(l);
	/* dom_size below the stripe size: object 0 starts at dom_size, the others at 0. */
	fake_reset();
	l = layout_new(MiB, 2, 64 * KiB);
	CHECK_RC(io_write(NULL, 77, l, buf, 2 * MiB - 64 * KiB + 5, 64 * KiB, 0, NULL), 0);
	CHECK_EQ(nlog, 2);
	expect(0, LW_OP_OST_WRITE, l, 0, 64 * KiB, MiB - 64 * KiB + 5, 2);
	expect(1, LW_OP_OST_WRITE, l, 1, 0, MiB, 1);
	CHECK(log_[0].iov1 == buf + 2 * MiB - 64 * KiB);
	CHECK_RC(io_seek(NULL, l, LW_SEEK_HOLE, 64 * KiB, &found), 0);
	CHECK_EQ(found, 2 * MiB + 5);
	free(l);
	fake_reset();
	free(buf);
	free(back);
}

/* ---- random ranges against a model file ---- */

static uint64_t rnd(uint64_t n)
{
	return n ? ((uint64_t)rand() << 31 ^ (uint64_t)rand()) % n : 0;
}

/* Writes and reads of random ranges: reads give the model's bytes (zeros in holes), and every
 * object holds exactly the file bytes the stripe math gives it; requests respect the limits. */
static void test_round_trips(void)
{
	enum { FMAX = 12 * MiB };
	uint8_t *model = malloc(FMAX), *mw = malloc(FMAX), *buf = malloc(FMAX);
	static const uint32_t sizes[] = { 64 * KiB, 128 * KiB, MiB, 4 * MiB };

	REQUIRE(model && mw && buf);
	srand(2718);
	for (int iter = 0; iter < 24; iter++) {
		struct loom_layout *l = layout_new(sizes[rnd(4)], 1 + (uint32_t)rnd(7), 0);
		uint64_t fsize = 0;
		int before = check_failures;

		fake_reset();
		memset(model, 0, FMAX);
		memset(mw, 0, FMAX);
		for (int op = 0; op < 10; op++) {
			uint64_t off = rnd(FMAX - 1), len = 1 + rnd(MIN(FMAX - off, 6 * MiB));
			unsigned seed = (unsigned)rnd(1u << 30);
			int64_t blocks[8];

			for (uint64_t i = 0; i < len; i++)
				model[off + i] = (uint8_t)((seed + i * 131 + (i >> 11)) | 1);
			memset(mw + off, 1, len);
			for (int k = 0; k < 8; k++)
				blocks[k] = -1;
			nlog = 0;
			CHECK_RC(io_write(NULL, 5, l, model + off, len, off, 1, blocks), 0);
			fsize = MAX(fsize, off + len);
			/* Each request within limits, and only cut when full. */
			for (int i = 0; i < nlog; i++) {
				const struct logent *e = &log_[i];
				CHECK(e->body.length > 0 && e->body.length <= LW_RPC_BULK);
				CHECK(e->iovcnt >= 1 && e->iovcnt <= RPC_MAX_IOV);
				if (i + 1 < nlog && log_[i + 1].body.objid == e->body.objid)
					CHECK(e->body.length == LW_RPC_BULK || e->iovcnt == RPC_MAX_IOV);
				/* Its first byte of buffer is the file byte its object offset holds. */
				uint32_t k;
				uint64_t x;
				where(l, off + (uint64_t)(e->iov0 - (model + off)), &k, &x);
				CHECK_EQ(k, e->body.stripe_idx);
				CHECK_EQ(x, e->body.offset);
			}
			/* The largest block figure an object reported (the fake adds 1000 per stripe). */
			for (uint32_t k = 0; k < l->nobjs; k++) {
				struct fobj *o = fobj_of(l->objs[k].ost_idx, l->objs[k].objid, false);
				if (o && blocks[k] >= 0)
					CHECK_EQ(blocks[k], (int64_t)((o->size + 511) / 512 + k * 1000));
			}
		}
		/* Every object holds the model's bytes (and holes) that the stripe math puts there,
		 * a stripe unit at a time, and nothing past the file's last. */
		for (uint64_t f = 0; f < fsize && check_failures == before; f += l->stripe_size) {
			uint64_t x, n = MIN(l->stripe_size, fsize - f), have;
			uint32_t k;
			struct fobj *o;

			where(l, f, &k, &x);
			o = fobj_of(l->objs[k].ost_idx, l->objs[k].objid, false);
			have = o && o->size > x ? MIN(n, o->size - x) : 0;
			if ((have && (memcmp(o->data + x, model + f, have) || memcmp(o->written + x, mw + f, have))) ||
			    memchr(mw + f + have, 1, n - have))
				CHECK_FAIL_("iter %d: file bytes from %llu not at object %u offset %llu", iter,
					    (unsigned long long)f, k, (unsigned long long)x);
		}
		for (uint32_t k = 0; k < l->nobjs; k++) {
			struct fobj *o = fobj_of(l->objs[k].ost_idx, l->objs[k].objid, false);
			struct stripe_geom g = { .size = l->stripe_size, .count = l->nobjs };

			CHECK(!o || o->size <= stripe_obj_size(&g, k, fsize));
		}
		/* Reads, past the end too: holes and what no object holds read as zeros. */
		for (int op = 0; op < 10 && check_failures == before; op++) {
			uint64_t off = rnd(FMAX - 1), len = 1 + rnd(MIN(FMAX - off, 6 * MiB));

			memset(buf, 0xee, len);
			CHECK_RC(io_read(NULL, 5, l, buf, len, off), 0);
			if (memcmp(buf, model + off, len) != 0)
				CHECK_FAIL_("iter %d: read of %llu at %llu differs", iter,
					    (unsigned long long)len, (unsigned long long)off);
		}
		/* SEEK_DATA and SEEK_HOLE: the first data or hole byte of the file from there. */
		for (int op = 0; op < 20 && check_failures == before; op++) {
			uint64_t off = rnd(fsize + MiB), found, want;
			int rc;

			const uint8_t *d = off < fsize ? memchr(mw + off, 1, fsize - off) : NULL;
			const uint8_t *h = off < fsize ? memchr(mw + off, 0, fsize - off) : NULL;

			rc = io_seek(NULL, l, LW_SEEK_DATA, off, &found);
			CHECK_RC(rc, 0);
			CHECK_EQ(found, d ? (uint64_t)(d - mw) : UINT64_MAX);
			want = h ? (uint64_t)(h - mw) : MAX(off, fsize);
			CHECK_RC(io_seek(NULL, l, LW_SEEK_HOLE, off, &found), 0);
			CHECK_EQ(found, want);
		}
		free(l);
		if (check_failures != before)
			break;
	}
	fake_reset();
	free(model);
	free(mw);
	free(buf);
}

/* More than IO_WINDOW at once: mapped a window at a time, no request across a window's end. */
static void test_windows(void)
{
	uint64_t len = IO_WINDOW + 5 * MiB + 3, off = 3 * MiB / 2, sum = 0;
	uint8_t *buf = malloc(len); /* never touched: the fake keeps no bytes */
	struct loom_layout *l = layout_new(MiB, 3, 0);

	REQUIRE(buf);
	fake_reset();
	discard = true;
	CHECK_RC(io_write(NULL, 5, l, buf, len, off, 0, NULL), 0);
	for (int i = 0; i < nlog; i++) {
		sum += log_[i].body.length;
		/* A request holds buffer of one window only. */
		if (log_[i].iov0 < buf + IO_WINDOW && log_[i].end > buf + IO_WINDOW)
			CHECK_FAIL_("request %d crosses the window's end", i);
	}
	CHECK_EQ(sum, len);
	/* 256 MiB over 3 objects from 1.5 MiB: object 1's first window starts at 0.5 MiB. */
	CHECK_EQ(log_[0].body.objid, 0x1001);
	CHECK_EQ(log_[0].body.offset, MiB / 2);
	fake_reset();
	free(l);
	free(buf);
}

/* ---- answers ---- */

static void test_replies(void)
{
	uint8_t buf[4 * 64 * KiB], data[4 * 64 * KiB];
	struct loom_layout *l = layout_new(64 * KiB, 4, 0);
	int64_t blocks[4] = { -1, -1, -1, -1 };

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	fake_reset();
	/* Object 2 holds only half a unit: the rest of its piece reads as zeros. */
	CHECK_RC(io_write(NULL, 5, l, data, sizeof(data) / 2 + 32 * KiB, 0, 0, blocks), 0);
	CHECK_EQ(blocks[0], 128);
	CHECK_EQ(blocks[2], 64 + 2000);
	CHECK_EQ(blocks[3], -1); /* not written to */
	memset(buf, 0xee, sizeof(buf));
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), 0);
	CHECK(memcmp(buf, data, sizeof(data) / 2 + 32 * KiB) == 0);
	for (size_t i = sizeof(data) / 2 + 32 * KiB; i < sizeof(buf); i++)
		if (buf[i]) {
			CHECK_FAIL_("byte %zu of a hole reads %d", i, buf[i]);
			break;
		}
	/* Broken replies: a body of the wrong size, more bulk claimed than came, a write taken
	 * in part; and a bulk checksum mismatch is an I/O error. */
	fault[11] = F_SHORT_BODY;
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), -EPROTO);
	fault[11] = F_LONG_READ;
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), -EPROTO);
	fault[11] = F_NONE;
	fault[12] = F_LONG_READ; /* object 2 answers a short piece: claims one byte more */
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), -EPROTO);
	fault[12] = F_NONE;
	fault[11] = F_SHORT_WRITE;
	CHECK_RC(io_write(NULL, 5, l, data, sizeof(data), 0, 0, NULL), -EIO);
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), 0); /* reads unaffected */
	fault[11] = F_STATUS;
	fault_status[11] = -EBADMSG;
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), -EIO);
	/* A short read the bulk agrees with is a hole, not an error. */
	fault[11] = F_HALF_READ;
	memset(buf, 0xee, sizeof(buf));
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), 0);
	CHECK_EQ(buf[64 * KiB + 32 * KiB - 1], data[64 * KiB + 32 * KiB - 1]);
	CHECK_EQ(buf[64 * KiB + 32 * KiB], 0);
	fault[11] = F_NONE;
	/* Of several errors, the most telling: a full target over anything, a definite answer
	 * over a lost server, that over a write to make again in another epoch; the first of
	 * equals. An OST the client does not know is a definite answer too. */
	struct { int a, b, want; } cases[] = {
		{ -ESTALE, -EIO, -EIO },      { -EIO, -ESTALE, -EIO },
		{ -EAGAIN, -EPERM, -EPERM },  { -EIO, -EPERM, -EPERM },
		{ -EPERM, -ENOSPC, -ENOSPC }, { -EDQUOT, -ENOSPC, -EDQUOT },
		{ -EPERM, -EACCES, -EPERM },  { -ESTALE, -EAGAIN, -ESTALE },
		{ 0, -EAGAIN, -EAGAIN },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		fault[10] = fault[12] = F_STATUS;
		fault_status[10] = cases[i].a;
		fault_status[12] = cases[i].b;
		if (!cases[i].a)
			fault[10] = F_NONE;
		CHECK_RC(io_write(NULL, 5, l, data, sizeof(data), 0, 0, NULL), cases[i].want);
	}
	fault[10] = fault[12] = F_NONE;
	/* Several requests to one object: its figure of blocks is the largest any answer gave
	 * (the latest: an object only grows under a write), in whatever order they came. */
	{
		struct loom_layout *one = layout_new(MiB, 1, 0);
		uint8_t *big = malloc(9 * MiB);

		REQUIRE(big);
		discard = true;
		fault[10] = F_BLOCKS_DOWN;
		nlog = 0;
		blocks[0] = -1;
		CHECK_RC(io_write(NULL, 5, one, big, 9 * MiB, 0, 0, blocks), 0);
		CHECK_EQ(nlog, 3);
		CHECK_EQ(blocks[0], 4999);
		fault[10] = F_NONE;
		discard = false;
		free(big);
		free(one);
	}
	l->objs[1].ost_idx = 40; /* unknown (an OST removed with --force): its object is lost */
	fault[10] = F_STATUS;
	fault_status[10] = -EIO;
	CHECK_RC(io_read(NULL, 5, l, buf, sizeof(buf), 0), -EIO);
	fake_reset();
	free(l);
}

/* Per-object requests: each object gets its own part of a fallocate range, as one request. */
static void test_fallocate_and_blocks(void)
{
	struct loom_layout *l = layout_new(MiB, 3, 0);
	int64_t blocks[3] = { -1, 7, -1 };

	fake_reset();
	/* [1.5 MiB, 4.25 MiB): units 1 (half), 2, 3, 4 (a quarter). */
	CHECK_RC(io_fallocate(NULL, 9, l, LW_FALLOC_KEEP_SIZE, 4, 3 * MiB / 2, 11 * MiB / 4, blocks), 0);
	CHECK_EQ(nlog, 3);
	expect(0, LW_OP_OST_FALLOCATE, l, 0, MiB, MiB, 0);
	expect(1, LW_OP_OST_FALLOCATE, l, 1, MiB / 2, MiB / 2 + MiB / 4, 0);
	expect(2, LW_OP_OST_FALLOCATE, l, 2, 0, MiB, 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(log_[i].body.flags, LW_FALLOC_KEEP_SIZE);
		CHECK_EQ(log_[i].body.trunc_epoch, 4);
		CHECK_EQ(log_[i].body.ino, 9);
	}
	CHECK_EQ(blocks[1], 1000); /* the answer replaces what was known */
	/* A range inside one unit asks only its object. */
	nlog = 0;
	CHECK_RC(io_fallocate(NULL, 9, l, 0, 0, 2 * MiB + 5, 10, NULL), 0);
	CHECK_EQ(nlog, 1);
	expect(0, LW_OP_OST_FALLOCATE, l, 2, 5, 10, 0);
	/* GETATTR asks only the objects whose figure is unknown; SYNC asks every one. */
	nlog = 0;
	blocks[0] = -1;
	blocks[1] = 5;
	blocks[2] = -1;
	CHECK_RC(io_blocks(NULL, 9, l, blocks), 0);
	CHECK_EQ(nlog, 2);
	CHECK_EQ(log_[0].body.objid, 0x1000);
	CHECK_EQ(log_[1].body.objid, 0x1002);
	CHECK_EQ(blocks[1], 5);
	CHECK_EQ(blocks[2], 2000);
	nlog = 0;
	CHECK_RC(io_sync(NULL, 9, l), 0);
	CHECK_EQ(nlog, 3);
	CHECK_EQ(log_[2].op, LW_OP_OST_SYNC);
	fake_reset();
	free(l);
}

/* Write-behind: the data is copied at once (the caller's buffer may change), sent as a write
 * would be, and its errors come with its finish. */
static void test_write_behind(void)
{
	uint8_t data[200], back[200];
	struct loom_layout *l = layout_new(64 * KiB, 2, 0);
	struct io_wb *b;

	fake_reset();
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i + 1);
	CHECK_RC(io_wb_start(NULL, 5, l, data, sizeof(data), 64 * KiB - 100, 6, &b), 0);
	memset(data, 0, sizeof(data));
	CHECK(io_wb_done(b));
	CHECK_EQ(io_wb_off(b), 64 * KiB - 100);
	CHECK_EQ(io_wb_len(b), 200);
	CHECK_EQ(io_wb_epoch(b), 6);
	CHECK(io_wb_overlaps(b, 64 * KiB + 99, 1) && !io_wb_overlaps(b, 64 * KiB + 100, 5));
	CHECK(io_wb_overlaps(b, 0, 64 * KiB - 99) && !io_wb_overlaps(b, 0, 64 * KiB - 100));
	CHECK_RC(io_wb_finish(b, NULL), 0);
	CHECK_EQ(nlog, 2);
	expect(0, LW_OP_OST_WRITE, l, 0, 64 * KiB - 100, 100, 1);
	expect(1, LW_OP_OST_WRITE, l, 1, 0, 100, 1);
	CHECK_EQ(log_[0].body.trunc_epoch, 6);
	CHECK_RC(io_read(NULL, 5, l, back, sizeof(back), 64 * KiB - 100), 0);
	for (size_t i = 0; i < sizeof(back); i++)
		CHECK_EQ(back[i], i + 1);
	fault[11] = F_STATUS;
	fault_status[11] = -ESTALE;
	CHECK_RC(io_wb_start(NULL, 5, l, back, sizeof(back), 64 * KiB - 100, 6, &b), 0);
	CHECK_RC(io_wb_finish(b, NULL), -ESTALE);
	fake_reset();
	free(l);
}

/* A 2-copy layout of 2 stripes: copy 0 on OSTs 10, 11, copy 1 on OSTs 12, 13. */
static struct loom_layout *mirrored_new(void)
{
	struct loom_layout *l = layout_new(MiB, 4, 0);

	l->stripe_count = 2;
	l->mirror_count = 2;
	return l;
}

static loom_fs *mirror_fs(void)
{
	loom_fs *fs = calloc(1, sizeof(*fs));

	REQUIRE(fs);
	pthread_mutex_init(&fs->stale_lock, NULL);
	u64map_init(&fs->stale);
	return fs;
}

static bool was_marked(uint32_t ost)
{
	for (int i = 0; i < nmarked; i++)
		if (marked[i].ost_idx == ost)
			return true;
	return false;
}

/* Mirrors: a write goes to every copy; a copy that fails is marked stale and the write succeeds;
 * reads go to the next copy on an error, and a copy whose bytes are bad is marked; a stripe none
 * of whose copies took a write fails it. */
static void test_mirrors(void)
{
	uint8_t *buf = malloc(8 * MiB), *back = malloc(8 * MiB);
	loom_fs *fs = mirror_fs();
	struct loom_layout *l;
	int64_t blocks[4] = { -1, -1, -1, -1 };

	REQUIRE(buf && back);
	for (uint64_t i = 0; i < 8 * MiB; i++)
		buf[i] = (uint8_t)(i * 7 + i / 4096);
	fake_reset();
	nmarked = 0;
	l = mirrored_new();
	CHECK_RC(io_write(fs, 5, l, buf, 8 * MiB, 0, 0, blocks), 0);
	/* 2 objects x 4 MiB each, twice: 4 requests, one per object. */
	CHECK_EQ(nlog, 4);
	for (uint32_t o = 10; o < 14; o++) {
		struct fobj *fo = fobj_of(o, 0x1000 + o - 10, false);
		REQUIRE(fo);
		CHECK_EQ(fo->size, 4 * MiB);
	}
	CHECK_EQ(nmarked, 0);
	/* Stripe 1's first copy fails: the write succeeds and that object is marked. */
	fault[11] = F_STATUS;
	fault_status[11] = -EIO;
	memset(buf, 0xAB, MiB);
	memset(buf + MiB, 0xCD, MiB);
	CHECK_RC(io_write(fs, 5, l, buf, 2 * MiB, 0, 0, blocks), 0);
	CHECK(nmarked == 1 && marked[0].ost_idx == 11 && marked[0].objid == 0x1001);
	CHECK(mirror_obj_stale(fs, l, 1));
	CHECK(!mirror_obj_stale(fs, l, 3));
	/* Reads now take stripe 1 from its other copy, whatever copy this client starts at, and
	 * the next write leaves the stale object alone. */
	for (uint64_t seed = 0; seed < 2; seed++) {
		fs->uuid[0] = seed;
		memset(back, 0, 8 * MiB);
		CHECK_RC(io_read(fs, 5, l, back, 8 * MiB, 0), 0);
		CHECK(memcmp(back, buf, 8 * MiB) == 0);
	}
	nlog = 0;
	CHECK_RC(io_write(fs, 5, l, buf, 2 * MiB, 0, 0, blocks), 0);
	for (int i = 0; i < nlog; i++)
		CHECK(log_[i].body.ost_idx != 11);
	CHECK_EQ(nmarked, 1);
	fault[11] = F_NONE;
	/* A layout read after the resync (a newer generation) trusts its own flags again. */
	l->layout_gen = 5;
	CHECK(!mirror_obj_stale(fs, l, 1));
	l->layout_gen = 3;

	/* A read whose copy fails goes on to the other one, the application sees nothing; a copy
	 * with bad bytes (the OSS's checksum: EUCLEAN) is marked stale. */
	fake_reset();
	nmarked = 0;
	u64map_destroy(&fs->stale);
	u64map_init(&fs->stale);
	CHECK_RC(io_write(fs, 5, l, buf, 8 * MiB, 0, 0, NULL), 0);
	fault[10] = F_STATUS;
	fault_status[10] = -EIO;
	fault[13] = F_STATUS;
	fault_status[13] = -EUCLEAN;
	for (uint64_t seed = 0; seed < 2; seed++) {
		fs->uuid[0] = seed;
		memset(back, 0, 8 * MiB);
		CHECK_RC(io_read(fs, 5, l, back, 8 * MiB, 0), 0);
		CHECK(memcmp(back, buf, 8 * MiB) == 0);
	}
	CHECK(was_marked(13) && !was_marked(10));

	/* Both copies of stripe 0 fail: the write fails with the error, and one copy is marked so
	 * that the two agree after a resync. */
	fake_reset();
	nmarked = 0;
	u64map_destroy(&fs->stale);
	u64map_init(&fs->stale);
	fault[10] = fault[12] = F_STATUS;
	fault_status[10] = fault_status[12] = -EIO;
	CHECK_RC(io_write(fs, 5, l, buf, MiB, 0, 0, NULL), -EIO);
	CHECK(nmarked == 1 && marked[0].ost_idx == 12);
	/* A write to redo in a new truncation epoch is the caller's, before anything is marked. */
	fake_reset();
	nmarked = 0;
	fault[13] = F_STATUS;
	fault_status[13] = -ESTALE;
	CHECK_RC(io_write(fs, 5, l, buf, 2 * MiB, 0, 0, NULL), -ESTALE);
	CHECK_EQ(nmarked, 0);
	/* A stale mark the MDS did not take: the write is not acknowledged. */
	fake_reset();
	fault[11] = F_STATUS;
	fault_status[11] = -EIO;
	mark_status = -EIO;
	CHECK_RC(io_write(fs, 5, l, buf, 2 * MiB, 0, 0, NULL), -EIO);
	mark_status = 0;
	/* A sync a copy misses marks it; one no copy of a stripe answers fails. */
	fake_reset();
	nmarked = 0;
	u64map_destroy(&fs->stale);
	u64map_init(&fs->stale);
	fault[12] = F_STATUS;
	fault_status[12] = -EIO;
	CHECK_RC(io_sync(fs, 5, l), 0);
	CHECK(nmarked == 1 && marked[0].ost_idx == 12);
	fault[10] = F_STATUS;
	fault_status[10] = -EIO;
	u64map_destroy(&fs->stale);
	u64map_init(&fs->stale);
	nmarked = 0;
	CHECK_RC(io_sync(fs, 5, l), -EIO);
	CHECK(nmarked == 1 && marked[0].ost_idx == 12); /* stripe 1's copies both answered */

	/* A handle whose view has every copy of stripe 0 stale (its layout marks copy 1, this client
	 * marked copy 0 since): it is behind the MDS, and writes both rather than neither. */
	fake_reset();
	nmarked = 0;
	u64map_destroy(&fs->stale);
	u64map_init(&fs->stale);
	REQUIRE(u64map_put(&fs->stale, ((uint64_t)10 << 48) ^ 0x1000, (void *)(uintptr_t)5) == 0);
	l->objs[2].flags = LOOM_OBJ_STALE;
	CHECK(mirror_obj_stale(fs, l, 0) && mirror_obj_stale(fs, l, 2));
	CHECK_RC(io_write(fs, 5, l, buf, MiB, 0, 0, NULL), 0);
	CHECK_EQ(nlog, 2);
	CHECK(log_[0].body.ost_idx == 10 && log_[1].body.ost_idx == 12);
	l->objs[2].flags = 0;

	fake_reset();
	u64map_destroy(&fs->stale);
	pthread_mutex_destroy(&fs->stale_lock);
	free(fs);
	free(l);
	free(buf);
	free(back);
}

/* An erasure-coded 4+2 layout: data on OSTs 10..13, parity on 14 and 15, 64 KiB units. */
static struct loom_layout *ec_new(void)
{
	struct loom_layout *l = layout_new(64 * KiB, 6, 0);

	l->stripe_count = 4;
	l->ec_parity = 2;
	return l;
}

static void fill(uint8_t *b, uint64_t n, uint64_t seed)
{
	for (uint64_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 31 + i / 997 + seed);
}

static void ec_reset(loom_fs *fs)
{
	fake_reset();
	nmarked = 0;
	u64map_destroy(&fs->stale);
	u64map_init(&fs->stale);
}

/* Reads [off, off + len) with each pair of objects failing in turn: every byte comes back while
 * two are away; three away fail. */
static void ec_check_reads(loom_fs *fs, struct loom_layout *l, const uint8_t *want, uint64_t len,
			   uint64_t off)
{
	uint8_t *back = malloc(len);

	REQUIRE(back);
	for (uint32_t a = 10; a < 16; a++)
		for (uint32_t b = a; b < 16; b++) {
			memset(back, 0x77, len);
			fault[a] = fault[b] = F_STATUS;
			fault_status[a] = fault_status[b] = -EIO;
			CHECK_RC(io_read(fs, 5, l, back, len, off), 0);
			CHECK(memcmp(back, want, len) == 0);
			fault[a] = fault[b] = F_NONE;
		}
	fault[10] = fault[12] = fault[15] = F_STATUS;
	fault_status[10] = fault_status[12] = fault_status[15] = -EIO;
	CHECK_RC(io_read(fs, 5, l, back, len, off), -EIO);
	fault[10] = fault[12] = fault[15] = F_NONE;
	free(back);
}

/* Erasure coding: whole rows go with their parity, and any two objects away still give every
 * byte; a part of a row marks the parity stale first; with a data object stale, a part of a row
 * is merged and written with new parity; the file's last row keeps its parity, zeros past the
 * end; a full-row write an object misses marks it. */
static void test_erasure_coding(void)
{
	uint64_t row = 256 * KiB, len = 4 * row;
	uint8_t *file = calloc(1, 2 * len), *part = malloc(len);
	loom_fs *fs = mirror_fs();
	struct loom_layout *l = ec_new();
	struct fobj *fo;

	REQUIRE(file && part);
	ec_reset(fs);
	fill(file, len, 1);
	CHECK_RC(io_write(fs, 5, l, file, len, 0, 0, NULL), 0);
	CHECK_EQ(nmarked, 0);
	for (uint32_t o = 10; o < 16; o++) {
		fo = fobj_of(o, 0x1000 + o - 10, false);
		REQUIRE(fo);
		CHECK_EQ(fo->size, 4 * 64 * KiB);
	}
	/* Healthy: only the data objects are read. */
	nlog = 0;
	CHECK_RC(io_read(fs, 5, l, part, len, 0), 0);
	CHECK(memcmp(part, file, len) == 0);
	for (int i = 0; i < nlog; i++)
		CHECK(log_[i].body.ost_idx < 14);
	ec_check_reads(fs, l, file, len, 0);
	ec_check_reads(fs, l, file + 70000, 100000, 70000);

	/* A part of a row: the parity is marked stale before the data goes, and no parity is sent. */
	nlog = 0;
	fill(file + 1000, 5000, 9);
	CHECK_RC(io_write(fs, 5, l, file + 1000, 5000, 1000, 0, NULL), 0);
	CHECK(nmarked == 2 && was_marked(14) && was_marked(15));
	for (int i = 0; i < nlog; i++)
		CHECK(log_[i].body.ost_idx < 14);
	CHECK(mirror_obj_stale(fs, l, 4) && mirror_obj_stale(fs, l, 5));
	/* Every byte from the data objects; with one of them away, nothing to rebuild from. */
	CHECK_RC(io_read(fs, 5, l, part, len, 0), 0);
	CHECK(memcmp(part, file, len) == 0);
	fault[11] = F_STATUS;
	fault_status[11] = -EIO;
	CHECK_RC(io_read(fs, 5, l, part, len, 0), -EIO);
	/* A write such a data object misses is not acknowledged: no parity has its bytes. */
	CHECK_RC(io_write(fs, 5, l, file, len, 0, 0, NULL), -EIO);
	fault[11] = F_NONE;

	/* Data object 1 stale (its OSS was away), parity in sync: a part of a row is read through
	 * the code, merged, and written with the row's new parity; object 1 is not written. */
	ec_reset(fs);
	fill(file, len, 3);
	CHECK_RC(io_write(fs, 5, l, file, len, 0, 0, NULL), 0);
	l->objs[1].flags = LOOM_OBJ_STALE;
	fobj_of(11, 0x1001, false)->data[0] ^= 0xFF; /* what it holds is not to be trusted */
	nlog = 0;
	fill(file + row + 100, 200 * KiB, 4);
	CHECK_RC(io_write(fs, 5, l, file + row + 100, 200 * KiB, row + 100, 0, NULL), 0);
	CHECK_EQ(nmarked, 0);
	for (int i = 0; i < nlog; i++)
		CHECK(log_[i].op != LW_OP_OST_WRITE || log_[i].body.ost_idx != 11);
	fault[10] = F_STATUS; /* object 1 stale and object 0 away: parity gives both */
	fault_status[10] = -EIO;
	CHECK_RC(io_read(fs, 5, l, part, len, 0), 0);
	CHECK(memcmp(part, file, len) == 0);
	fault[10] = F_NONE;
	/* No hole can be punched in it then: the parity holds object 1's bytes. */
	CHECK_RC(io_fallocate(fs, 5, l, LW_FALLOC_PUNCH_HOLE | LW_FALLOC_KEEP_SIZE, 0, 0, row, NULL), -EBUSY);
	l->objs[1].flags = 0;

	/* The file's end: 300 KiB written with ends_file is a whole row 1, zeros past the end; its
	 * parity is as long as data object 0 (64 KiB + 44 KiB). */
	ec_reset(fs);
	memset(file, 0, 2 * len);
	fill(file, 300 * KiB, 5);
	struct ec_span end = { .ends_file = true };

	CHECK_RC(io_write_span(fs, 5, l, file, 300 * KiB, 0, 0, &end, NULL), 0);
	CHECK_EQ(nmarked, 0);
	fo = fobj_of(14, 0x1004, false);
	REQUIRE(fo);
	CHECK_EQ(fo->size, 108 * KiB);
	ec_check_reads(fs, l, file, 300 * KiB, 0);
	/* Writes that go on from there, knowing the bytes before them, keep the parity whole. */
	fill(file + 300 * KiB, 200 * KiB, 8);
	end.known = 300 * KiB;
	CHECK_RC(io_write_span(fs, 5, l, file + 300 * KiB, 200 * KiB, 300 * KiB, 0, &end, NULL), 0);
	CHECK_EQ(nmarked, 0);
	ec_check_reads(fs, l, file, 500 * KiB, 0);
	/* Without ends_file the same write is a part of row 1: stale parity. */
	CHECK_RC(io_write(fs, 5, l, file, 300 * KiB, 0, 0, NULL), 0);
	CHECK_EQ(nmarked, 2);

	/* Data-on-MDT: the objects' first 64 KiB are a hole (zeros): a write from there to the row's
	 * end is a whole row. */
	ec_reset(fs);
	l->dom_size = 64 * KiB;
	memset(file, 0, 64 * KiB);
	fill(file + 64 * KiB, len - 64 * KiB, 10);
	CHECK_RC(io_write(fs, 5, l, file + 64 * KiB, row - 64 * KiB, 64 * KiB, 0, NULL), 0);
	CHECK_EQ(nmarked, 0);
	ec_check_reads(fs, l, file + 64 * KiB, row - 64 * KiB, 64 * KiB);
	l->dom_size = 0;

	/* A data object misses a whole-row write: it is marked, the write succeeds, and its bytes
	 * come from the parity (with one more object away). */
	ec_reset(fs);
	fill(file, len, 6);
	fault[12] = F_STATUS;
	fault_status[12] = -EIO;
	CHECK_RC(io_write(fs, 5, l, file, len, 0, 0, NULL), 0);
	CHECK(nmarked == 1 && marked[0].ost_idx == 12);
	fault[12] = F_NONE;
	fault[15] = F_STATUS;
	fault_status[15] = -EIO;
	CHECK_RC(io_read(fs, 5, l, part, len, 0), 0);
	CHECK(memcmp(part, file, len) == 0);
	/* Three objects missing a write (one stale, two failing): more than the parity bears. */
	fault[10] = F_STATUS;
	fault_status[10] = -EIO;
	CHECK_RC(io_write(fs, 5, l, file, len, 0, 0, NULL), -EIO);
	/* A bad object (the OSS's checksum) is read around and marked. */
	ec_reset(fs);
	CHECK_RC(io_write(fs, 5, l, file, len, 0, 0, NULL), 0);
	fault[13] = F_STATUS;
	fault_status[13] = -EUCLEAN;
	CHECK_RC(io_read(fs, 5, l, part, len, 0), 0);
	CHECK(memcmp(part, file, len) == 0);
	CHECK(nmarked == 1 && marked[0].ost_idx == 13);
	/* A sync one object misses marks it; one three miss fails. */
	ec_reset(fs);
	fault[14] = F_STATUS;
	fault_status[14] = -EIO;
	CHECK_RC(io_sync(fs, 5, l), 0);
	CHECK(nmarked == 1 && marked[0].ost_idx == 14);
	ec_reset(fs);
	fault[10] = fault[11] = fault[12] = F_STATUS;
	fault_status[10] = fault_status[11] = fault_status[12] = -EIO;
	CHECK_RC(io_sync(fs, 5, l), -EIO);

	fake_reset();
	u64map_destroy(&fs->stale);
	pthread_mutex_destroy(&fs->stale_lock);
	free(fs);
	free(l);
	free(file);
	free(part);
}

int main(void)
{
	RUN(test_plan_exact);
	RUN(test_plan_data_on_mdt);
	RUN(test_round_trips);
	RUN(test_windows);
	RUN(test_replies);
	RUN(test_fallocate_and_blocks);
	RUN(test_write_behind);
	RUN(test_mirrors);
	RUN(test_erasure_coding);
	return check_report();
}
