/*
 * The metadata client's reply decoding (src/client/mdc.c: fixed_reply, decode_with_layout,
 * decode_blob, the readdir, layout, lock and OST table replies), against a fake MDS whose
 * answers come from the fuzz input.
 *
 * mdc.c is included, and the few functions it calls below it (fs_mds_conn, fs_cred and the rpc
 * calls) are replaced here: each rpc_call_sync takes its reply from the input. Input: a list of
 * steps, each one byte choosing the mdc_* call, then its reply: a status byte, a 2-byte length
 * and that many bytes of body.
 *
 * Properties: a call succeeds only on a reply of exactly the size its kind has (fixed structs;
 * a fixed struct followed by a whole layout when it says it has one; a length-prefixed blob whose
 * length matches), and then returns what the reply says; a failed call leaves its out-pointers
 * as its callers expect (NULL, or untouched); reply bodies are exact-size allocations, so any
 * read past one is caught; nothing leaks.
 */
#include "../../src/client/mdc.c"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet();
	return 0;
}

/* ---- the fake MDS ---- */

static struct fuzz_in script;
static uint16_t last_op;
static int calls_made;
static loom_fs fake_fs;

void fs_cred(loom_fs *fs, struct loom_cred *out)
{
	(void)fs;
	memset(out, 0, sizeof(*out));
	out->uid = out->gid = 1000;
}

/* The record of held locks (locks.c) is not under test here. */
void held_locks_on_reply(struct rpc_call *call, void *arg)
{
	(void)call;
	(void)arg;
}

/* No creates are sent behind here. */
int behind_barrier(loom_fs *fs)
{
	(void)fs;
	return 0;
}

int fs_mds_conn(loom_fs *fs, struct rpc_conn **out)
{
	(void)fs;
	*out = (struct rpc_conn *)&fake_fs; /* never dereferenced */
	return 0;
}

void rpc_call_init(struct rpc_call *call, uint16_t opcode, const void *body, uint32_t body_len)
{
	memset(call, 0, sizeof(*call));
	call->opcode = opcode;
	call->body = body;
	call->body_len = body_len;
}

/* libloom's calls carry the process's job id (jobtag.c): none in the harness. */
void fs_call_init(loom_fs *fs, struct rpc_call *call, uint16_t opcode, const void *body, uint32_t body_len)
{
	(void)fs;
	rpc_call_init(call, opcode, body, body_len);
}

struct rpc_intr *rpc_intr_swap(struct rpc_intr *in)
{
	return in; /* no interrupts in the harness */
}

void rpc_call_release(struct rpc_call *call)
{
	free(call->rbody);
	call->rbody = NULL;
	call->rbody_len = 0;
}

/* The reply, as rpc_recv.c hands it over: status, and a malloc'd body of exactly its length. */
int rpc_call_sync(struct rpc_conn *c, struct rpc_call *call)
{
	static const int statuses[8] = { 0, 0, 0, 0, 0, -ENOENT, -EIO, -EACCES };
	uint8_t s = fin_u8(&script);
	uint32_t len = fin_u16(&script);

	(void)c;
	/* The request is what a client sends: a header and body a server would accept. */
	FUZZ_CHECK(call->body_len <= LW_MAX_BODY);
	last_op = call->opcode;
	calls_made++;
	if (len > script.n)
		len = (uint32_t)script.n;
	call->status = statuses[s & 7];
	call->rbody = malloc(len ? len : 1);
	FUZZ_CHECK(call->rbody != NULL);
	memcpy(call->rbody, script.p, len);
	call->rbody_len = len;
	script.p += len;
	script.n -= len;
	return call->status;
}

/* A detached call (a read-only close) takes its reply the same way, then frees itself. */
void rpc_submit_detached(struct rpc_conn *c, struct rpc_call *call)
{
	rpc_call_sync(c, call);
	call->done(call);
}

/* ---- the steps ---- */

/* The reply the step will get, looked at before the call takes it. */
struct peek {
	int status;
	uint32_t len;
	const uint8_t *body;
};

static struct peek peek_reply(void)
{
	static const int statuses[8] = { 0, 0, 0, 0, 0, -ENOENT, -EIO, -EACCES };
	struct peek p = { 0 };

	if (script.n >= 1)
		p.status = statuses[script.p[0] & 7];
	if (script.n >= 3)
		p.len = script.p[1] | (uint32_t)script.p[2] << 8;
	if (p.len > (script.n >= 3 ? script.n - 3 : 0))
		p.len = (uint32_t)(script.n >= 3 ? script.n - 3 : 0);
	p.body = script.n >= 3 ? script.p + 3 : NULL;
	return p;
}

/* A fixed-size reply: success exactly on status 0 and the exact size, and out is the body. */
static void check_fixed(int rc, const struct peek *p, const void *out, size_t size)
{
	if (p->status) {
		FUZZ_CHECK(rc == p->status);
		return;
	}
	FUZZ_CHECK(rc == 0 ? p->len == size : (rc == -EPROTO && p->len != size));
	if (rc == 0 && out)
		FUZZ_CHECK(!memcmp(out, p->body, size));
}

/* A fixed struct then, when it says so, a whole layout and nothing after it. */
/* tail: bytes the reply carries after the layout (MDS_OPEN's Data-on-MDT bytes). */
static void check_with_layout(int rc, const struct peek *p, size_t flen, bool has_layout,
			      const struct loom_layout *l, size_t tail)
{
	if (p->status) {
		FUZZ_CHECK(rc == p->status && l == NULL);
		return;
	}
	if (rc) {
		FUZZ_CHECK(l == NULL && (rc == -EPROTO || rc == -ENOMEM));
		return;
	}
	FUZZ_CHECK(p->len >= flen);
	if (!has_layout) {
		FUZZ_CHECK(p->len == flen && l == NULL);
		return;
	}
	FUZZ_CHECK(l != NULL && l->nobjs <= LOOM_MAX_STRIPES);
	/* A layout of either version: 48 or 56 bytes before the objects. */
	FUZZ_CHECK(p->len == flen + lw_layout_size(l->nobjs) + tail ||
		   p->len == flen + lw_layout_size(l->nobjs) - (sizeof(struct lw_layout) - LW_LAYOUT_V1_SIZE) + tail);
	FUZZ_CHECK(memchr(l->pool, '\0', sizeof(l->pool)) != NULL);
}

static void step_blob(uint8_t sel, struct fuzz_in *args)
{
	uint32_t cap = fin_u16(args) % 5000;
	struct peek p = peek_reply();
	uint8_t *buf = malloc(cap ? cap : 1);
	size_t len = (size_t)-1;
	uint32_t want;
	int rc;

	FUZZ_CHECK(buf != NULL);
	if (sel == 0)
		rc = mdc_readlink(&fake_fs, NULL, 5, (char *)buf, cap, &len);
	else
		rc = mdc_getxattr(&fake_fs, NULL, sel == 1 ? LW_OP_MDS_GETXATTR : LW_OP_MDS_LISTXATTR, 5,
				  sel == 1 ? "user.test" : NULL, buf, cap, &len);
	if (p.status) {
		FUZZ_CHECK(rc == p.status);
	} else if (rc == 0) {
		bool size_only = sel != 0 && cap == 0;

		FUZZ_CHECK(p.len >= sizeof(struct lw_blob_rep));
		memcpy(&want, p.body, sizeof(want));
		FUZZ_CHECK(len == want);
		if (size_only) {
			FUZZ_CHECK(p.len == sizeof(struct lw_blob_rep));
		} else {
			FUZZ_CHECK(p.len == sizeof(struct lw_blob_rep) + len);
			FUZZ_CHECK(!memcmp(buf, p.body + sizeof(struct lw_blob_rep), MIN(len, cap)));
		}
	} else {
		FUZZ_CHECK(rc == -EPROTO);
	}
	free(buf);
}

static void step_readdir(bool plus)
{
	struct peek p = peek_reply();
	void *page = NULL;
	uint32_t page_len = 0;
	struct lw_readdir_rep rep;
	struct lw_rd rd;
	uint64_t lease = 7;
	/* With the lease asked for when plus (both ways covered): the fake call grants none. */
	int rc = mdc_readdir(&fake_fs, NULL, 1, 0, 4096, plus, &page, &page_len, plus ? &lease : NULL, NULL);

	if (p.status || rc) {
		FUZZ_CHECK(rc == (p.status ? p.status : -EPROTO) && page == NULL);
		if (!p.status)
			FUZZ_CHECK(p.len < sizeof(rep));
		return;
	}
	FUZZ_CHECK(page_len == p.len && page_len >= sizeof(rep) && !memcmp(page, p.body, page_len));
	FUZZ_CHECK(!plus || lease == 0);
	/* As loom_ll_readdir walks it. */
	memcpy(&rep, page, sizeof(rep));
	lw_rd_init(&rd, (uint8_t *)page + sizeof(rep), page_len - sizeof(rep));
	for (uint32_t i = 0; i < rep.count; i++) {
		struct lw_dirent de;
		struct lw_attr attr;
		const char *name;
		char copy[LOOM_NAME_MAX + 1];

		if (lw_readdir_next(&rd, (uint8_t *)page + sizeof(rep), plus, &de, &name, &attr))
			break;
		FUZZ_CHECK(de.namelen >= 1 && de.namelen <= LOOM_NAME_MAX);
		FUZZ_CHECK((const uint8_t *)name >= (uint8_t *)page &&
			   (const uint8_t *)name + de.namelen <= (uint8_t *)page + page_len);
		memcpy(copy, name, de.namelen);
		copy[de.namelen] = '\0';
	}
	free(page);
}

static void step_layout(bool set, uint8_t flags)
{
	struct peek p = peek_reply();
	struct loom_layout *l = NULL;
	struct loom_layout req = { .stripe_size = 1u << 20, .stripe_count = 2, .stripe_offset = -1 };
	int rc;

	if (set)
		rc = mdc_setlayout(&fake_fs, NULL, 5, flags & LW_SL_DELETE, &req, &l);
	else
		rc = mdc_getlayout(&fake_fs, NULL, 5, &l);
	if (p.status) {
		FUZZ_CHECK(rc == p.status && l == NULL);
		return;
	}
	if (rc == 0) {
		if (set && p.len == 0) {
			FUZZ_CHECK(l == NULL);
			return;
		}
		FUZZ_CHECK(l != NULL && (p.len == lw_layout_size(l->nobjs) ||
					 p.len == lw_layout_size(l->nobjs) - (sizeof(struct lw_layout) - LW_LAYOUT_V1_SIZE)));
		free(l);
		return;
	}
	FUZZ_CHECK(rc == -EPROTO || rc == -ENOMEM);
	/* Every caller (get_lov, loom_ll_setlayout, loom_getlayout...) frees *out whatever the
	 * result: a failure must leave it NULL. */
	free(l);
}

static void step_create(bool open, struct fuzz_in *args)
{
	bool want = fin_u8(args) & 1; /* (arguments first: then the reply) */
	struct peek p = peek_reply();
	struct loom_layout *l = (struct loom_layout *)&fake_fs; /* must be overwritten */
	struct loom_layout req = { .stripe_size = 1u << 20, .stripe_count = 2, .stripe_offset = -1 };
	bool has_layout = false;
	int rc;

	if (open) {
		struct lw_open_rep rep;
		struct mdc_dom dom;

		rc = mdc_open(&fake_fs, NULL, 5, 0, NULL, &rep, &l, &dom);
		if (rc == -ESTALE && !p.status) {
			/* A conditional open that did nothing: the fixed part alone, naming an inode. */
			FUZZ_CHECK(p.len == sizeof(rep) && (rep.flags & LW_OPR_STALE) && rep.attr.ino != 0);
			FUZZ_CHECK(l == NULL && !dom.known && dom.data == NULL);
			return;
		}
		has_layout = rc == 0 && rep.has_layout != 0;
		if (rc == 0) {
			/* The bytes come exactly when the layout has a Data-on-MDT part. */
			FUZZ_CHECK(dom.known == (l && l->dom_size != 0));
			FUZZ_CHECK(!dom.known || dom.len <= l->dom_size);
			FUZZ_CHECK((dom.data != NULL) == (dom.len != 0));
		} else {
			FUZZ_CHECK(!dom.known && dom.data == NULL);
		}
		check_with_layout(rc, &p, sizeof(rep), has_layout, l, rc == 0 ? dom.len : 0);
		free(dom.data);
	} else {
		struct lw_create_rep rep;

		rc = mdc_create(&fake_fs, NULL, 1, "new", 3, 0100644, 0, LW_CR_OPEN, 0, want ? &req : NULL,
				&rep, &l);
		has_layout = rc == 0 && rep.has_layout != 0;
		check_with_layout(rc, &p, sizeof(rep), has_layout, l, 0);
	}
	free(l);
}

/* MDS_WALK: the walk's reply, and the open's behind it when it says it opened. */
static void step_walk(struct fuzz_in *args)
{
	static const char path[] = "/tok/sub/example_1.npy";
	bool open = fin_u8(args) & 1;
	struct peek p = peek_reply();
	struct mdc_walk_open wo = { .open_flags = 0 };
	struct lw_attr attr;
	uint32_t consumed = 0;
	int rc;

	rc = mdc_walk(&fake_fs, NULL, path, sizeof(path) - 1, 0, open ? &wo : NULL, &attr, &consumed);
	if (p.status) {
		FUZZ_CHECK(rc == p.status && (!open || !wo.opened));
		return;
	}
	if (rc == -ESTALE) {
		/* The walk's open was conditional and did nothing: its fixed part alone. */
		FUZZ_CHECK(open && !wo.opened && wo.layout == NULL &&
			   p.len == sizeof(struct lw_walk_rep) + sizeof(struct lw_open_rep));
		return;
	}
	if (rc) {
		FUZZ_CHECK(rc == -EPROTO || rc == -ENOMEM);
		FUZZ_CHECK(!open || !wo.opened);
		return;
	}
	FUZZ_CHECK(consumed <= sizeof(path) - 1);
	FUZZ_CHECK(p.len >= sizeof(struct lw_walk_rep));
	if (open && wo.opened) {
		FUZZ_CHECK(p.len >= sizeof(struct lw_walk_rep) + sizeof(struct lw_open_rep));
		FUZZ_CHECK(wo.dom.known == (wo.layout && wo.layout->dom_size != 0));
		FUZZ_CHECK((wo.dom.data != NULL) == (wo.dom.len != 0));
		free(wo.dom.data);
		free(wo.layout);
	} else {
		FUZZ_CHECK(p.len == sizeof(struct lw_walk_rep)); /* nothing may trail a walk that did not open */
	}
}

static void step_lock(struct fuzz_in *args)
{
	struct lw_lock_req req = { .ino = 5, .owner = 1, .end = 100, .type = 1,
				   .flags = (fin_u8(args) & 1) ? LW_LK_CANCEL : LW_LK_TEST };
	struct peek p = peek_reply();
	struct lw_lock_rep rep;
	int rc = mdc_lock(&fake_fs, NULL, &req, &rep);

	if (p.status) {
		FUZZ_CHECK(rc == p.status);
		return;
	}
	if (rc == 0)
		FUZZ_CHECK(p.len == sizeof(rep) || (p.len == 0 && (req.flags & LW_LK_CANCEL)));
	else
		FUZZ_CHECK(rc == -EPROTO && p.len != sizeof(rep));
}

static void step_ost_table(void)
{
	struct peek p = peek_reply();
	void *body = NULL;
	uint32_t count = 0, gen = 0;
	int rc = mdc_ost_table(&fake_fs, &body, &count, &gen);

	if (p.status || rc) {
		FUZZ_CHECK(rc == (p.status ? p.status : -EPROTO));
		return;
	}
	FUZZ_CHECK(p.len == sizeof(struct lw_ost_table_rep) + (size_t)count * sizeof(struct lw_ost_entry));
	for (uint32_t i = 0; i < count; i++) {
		struct lw_ost_entry e;

		memcpy(&e, (uint8_t *)body + sizeof(struct lw_ost_table_rep) + (size_t)i * sizeof(e), sizeof(e));
		FUZZ_CHECK(memchr(e.host, '\0', sizeof(e.host)) && memchr(e.uuid, '\0', sizeof(e.uuid)));
		FUZZ_CHECK(e.idx < 65536);
	}
	free(body);
}

static void step(uint8_t which, struct fuzz_in *args)
{
	struct peek p;
	int rc;

	switch (which % 23) {
	case 0: {
		struct lw_attr a;
		p = peek_reply();
		rc = mdc_getattr(&fake_fs, NULL, 5, &a);
		check_fixed(rc, &p, &a, sizeof(a));
		break;
	}
	case 1: {
		struct lw_attr a;
		p = peek_reply();
		rc = mdc_lookup(&fake_fs, NULL, 1, "name", 4, &a);
		check_fixed(rc, &p, &a, sizeof(a));
		break;
	}
	case 2: {
		struct lw_setattr sa = { .ino = 5, .valid = LW_SA_MODE, .mode = 0600 };
		struct lw_attr a;
		p = peek_reply();
		rc = mdc_setattr(&fake_fs, NULL, &sa, &a);
		check_fixed(rc, &p, &a, sizeof(a));
		break;
	}
	case 3:
		step_create(false, args);
		break;
	case 4:
		step_create(true, args);
		break;
	case 5: {
		struct lw_attr a;
		p = peek_reply();
		rc = mdc_mkdir(&fake_fs, NULL, 1, "d", 1, 0755, &a, NULL, NULL);
		check_fixed(rc, &p, &a, sizeof(a));
		break;
	}
	case 6:
		p = peek_reply();
		rc = mdc_unlink(&fake_fs, NULL, LW_OP_MDS_UNLINK, 1, "x", 1, 0);
		check_fixed(rc, &p, NULL, 0);
		break;
	case 7:
		p = peek_reply();
		rc = mdc_rename(&fake_fs, NULL, 1, "a", 1, 2, "b", 1, 0);
		check_fixed(rc, &p, NULL, 0);
		break;
	case 8: {
		struct lw_attr a;
		p = peek_reply();
		rc = mdc_symlink(&fake_fs, NULL, 1, "l", 1, "/target", 7, &a);
		check_fixed(rc, &p, &a, sizeof(a));
		break;
	}
	case 9:
	case 10:
	case 11:
		step_blob((uint8_t)(which % 20 - 9), args);
		break;
	case 12:
		step_readdir(fin_u8(args) & 1);
		break;
	case 13: {
		struct lw_statfs_rep sf;
		p = peek_reply();
		rc = mdc_statfs(&fake_fs, NULL, &sf);
		check_fixed(rc, &p, &sf, sizeof(sf));
		break;
	}
	case 14:
		p = peek_reply();
		rc = mdc_setxattr(&fake_fs, NULL, 5, "user.a", "v", 1, 0);
		check_fixed(rc, &p, NULL, 0);
		break;
	case 15:
		step_lock(args);
		break;
	case 16: {
		struct lw_attr a;
		p = peek_reply();
		rc = mdc_close(&fake_fs, NULL, LW_OP_MDS_CLOSE, 5, 1, LW_CL_SIZE, 10, 0, (struct timespec){ 0 }, 0,
			       NULL, &a);
		check_fixed(rc, &p, &a, sizeof(a));
		break;
	}
	case 17:
	case 18:
		step_layout(which % 21 == 18, fin_u8(args));
		break;
	case 19:
		step_ost_table();
		break;
	case 20: {
		void *data;
		uint32_t len;

		p = peek_reply();
		rc = mdc_dom_read(&fake_fs, NULL, 5, &data, &len);
		if (p.status)
			FUZZ_CHECK(rc == p.status);
		else if (rc == 0)
			FUZZ_CHECK(len <= LOOM_DOM_MAX && p.len == sizeof(struct lw_blob_rep) + len &&
				   (data != NULL) == (len != 0));
		else
			FUZZ_CHECK(rc == -EPROTO || rc == -ENOMEM);
		free(data);
		break;
	}
	case 21:
		step_walk(args);
		break;
	case 22:
		/* A read-only close nobody waits for: whatever comes back, it is freed. */
		FUZZ_CHECK(mdc_close_detached(&fake_fs, NULL, 5, 9) == 0);
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };

	/* Step bytes and step arguments come first, then the replies: [n][n steps][args...]. */
	uint8_t n = fin_u8(&in);
	struct fuzz_in steps = { in.p, MIN((size_t)n % 16, in.n) };

	in.p += steps.n;
	in.n -= steps.n;
	script = in;
	for (size_t i = 0; i < steps.n; i++) {
		calls_made = 0;
		step(steps.p[i], &script);
		FUZZ_CHECK(calls_made <= 1);
	}
	return 0;
}
