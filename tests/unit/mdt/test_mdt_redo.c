/*
 * Replication capture (redo.c): a standby that applies the active's commits 1..n holds, byte for
 * byte, the records the active held after commit n. Two MDTs start as copies of one; the first
 * runs a mix of operations the way the MDS does (a write transaction per batch, a child per
 * request, some children aborted), the second applies the redo handed over, and every database
 * is compared record by record. A write that slipped past mdt_redo_note shows as a difference.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "mdt/internal.h"

#define EPOCH 5u
#define QMAX 128u

/* The commits A handed over, in order (takes ownership of each buffer). */
struct redo_q {
	uint8_t *buf[QMAX];
	size_t len[QMAX];
	size_t n;
};

static void q_push(void *arg, void *commit, size_t len)
{
	struct redo_q *q = arg;

	REQUIRE(q->n < QMAX);
	q->buf[q->n] = commit;
	q->len[q->n++] = len;
}

static void q_free(struct redo_q *q)
{
	for (size_t i = 0; i < q->n; i++)
		free(q->buf[i]);
	q->n = 0;
}

/* Checks commit i's framing: header seq, epoch, len and nrec against its records. Returns a
 * bit per database its records touch. */
static uint32_t check_commit(const struct redo_q *q, size_t i, uint64_t seq, uint64_t epoch)
{
	const uint8_t *p = q->buf[i] + sizeof(struct lw_repl_commit), *end = q->buf[i] + q->len[i];
	struct lw_repl_commit h;
	uint32_t n = 0, dbs = 0;

	REQUIRE(q->len[i] >= sizeof(h));
	memcpy(&h, q->buf[i], sizeof(h));
	CHECK_EQ(h.seq, seq);
	CHECK_EQ(h.epoch, epoch);
	CHECK_EQ(h.len, q->len[i] - sizeof(h));
	while (end - p >= (ptrdiff_t)sizeof(struct lw_repl_rec)) {
		struct lw_repl_rec r;

		memcpy(&r, p, sizeof(r));
		CHECK(r.op == LW_REPL_PUT || (r.op == LW_REPL_DEL && r.vlen == 0));
		CHECK(r.db < MDT_DB_COUNT && r.klen > 0 && r.klen <= 511);
		dbs |= 1u << (r.db & 31);
		p += sizeof(r) + r.klen + r.vlen;
		n++;
	}
	CHECK(p == end);
	CHECK_EQ(n, h.nrec);
	CHECK(h.nrec > 0); /* a commit that wrote nothing is not handed over */
	return dbs;
}

/* A standby: a copy of a's data file (LMDB's copy, as MDS_REPL_COPY makes it), opened. */
static struct mdt_store *standby_of(struct mdt_store *a, char dir[64])
{
	struct mdt_store *b;
	char path[96];
	int fd;

	snprintf(dir, 64, "/tmp/loom-mdt-test.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	REQUIRE(fd >= 0);
	REQUIRE_RC(mdt_store_copy_fd(a, fd), 0);
	close(fd);
	REQUIRE_RC(mdt_store_open(dir, &b), 0);
	return b;
}

static void standby_close(struct mdt_store *b, const char *dir)
{
	mdt_store_close(b);
	fx_rm_rf(dir);
}

/* Applies commits [from, to) of q to b in one write transaction, as the standby does: each
 * commit's records, then its position. */
static int apply(struct mdt_store *b, const struct redo_q *q, size_t from, size_t to)
{
	struct mdt_txn *t;
	int rc = mdt_txn_begin(b, true, &t);

	if (rc)
		return rc;
	for (size_t i = from; rc == 0 && i < to; i++) {
		struct lw_repl_commit h;
		struct mdt_repl_pos pos;

		memcpy(&h, q->buf[i], sizeof(h));
		pos = (struct mdt_repl_pos){ .seq = h.seq, .epoch = h.epoch };
		rc = mdt_redo_apply(t, q->buf[i] + sizeof(h), h.len, h.nrec);
		if (rc == 0)
			rc = mdt_repl_pos_put(t, &pos);
	}
	if (rc) {
		mdt_txn_abort(t);
		return rc;
	}
	return mdt_txn_commit(t);
}

static bool is_pos_key(int db, const MDB_val *k)
{
	return db == MDT_DB_META && ((k->mv_size == 8 && memcmp(k->mv_data, "repl_seq", 8) == 0) ||
				     (k->mv_size == 10 && memcmp(k->mv_data, "repl_epoch", 10) == 0));
}

/* The next record of db, the replication position's keys (each side writes its own) skipped. */
static int cur_get(MDB_cursor *c, int db, MDB_val *k, MDB_val *v, MDB_cursor_op op)
{
	int rc = mdb_cursor_get(c, k, v, op);

	while (rc == 0 && is_pos_key(db, k))
		rc = mdb_cursor_get(c, k, v, MDB_NEXT);
	return rc;
}

static bool val_eq(const MDB_val *x, const MDB_val *y)
{
	return x->mv_size == y->mv_size && memcmp(x->mv_data, y->mv_data, x->mv_size) == 0;
}

static void key_hex(const MDB_val *k, char *out, size_t cap)
{
	size_t i;

	for (i = 0; i < k->mv_size && 2 * i + 3 <= cap; i++)
		snprintf(out + 2 * i, 3, "%02x", ((const uint8_t *)k->mv_data)[i]);
	out[2 * i] = '\0';
}

/* Every record of every database of a and b is the same, and so is the replication position. */
static void same_mdt(struct mdt_store *a, struct mdt_store *b, const char *when)
{
	struct mdt_repl_pos pa, pb;
	struct mdt_txn *ta, *tb;

	REQUIRE_RC(mdt_txn_begin(a, false, &ta), 0);
	REQUIRE_RC(mdt_txn_begin(b, false, &tb), 0);
	for (int db = 0; db < MDT_DB_COUNT; db++) {
		MDB_cursor *ca, *cb;
		MDB_val ka, va, kb, vb;
		char hex[2 * 64 + 1];
		size_t n = 0;
		int ra, rb;

		REQUIRE(mdb_cursor_open(ta->mdb, a->dbi[db], &ca) == 0);
		REQUIRE(mdb_cursor_open(tb->mdb, b->dbi[db], &cb) == 0);
		ra = cur_get(ca, db, &ka, &va, MDB_FIRST);
		rb = cur_get(cb, db, &kb, &vb, MDB_FIRST);
		while (ra == 0 && rb == 0) {
			if (!val_eq(&ka, &kb) || !val_eq(&va, &vb)) {
				key_hex(val_eq(&ka, &kb) ? &ka : &kb, hex, sizeof(hex));
				CHECK_FAIL_("%s: db %d record %zu differs (%s, key %s)", when, db, n,
					    val_eq(&ka, &kb) ? "value" : "key", hex);
				break;
			}
			n++;
			ra = cur_get(ca, db, &ka, &va, MDB_NEXT);
			rb = cur_get(cb, db, &kb, &vb, MDB_NEXT);
		}
		if ((ra == 0) != (rb == 0)) {
			key_hex(ra == 0 ? &ka : &kb, hex, sizeof(hex));
			CHECK_FAIL_("%s: db %d: only %s has record %zu (key %s)", when, db,
				    ra == 0 ? "the active" : "the standby", n, hex);
		}
		mdb_cursor_close(ca);
		mdb_cursor_close(cb);
	}
	REQUIRE_RC(mdt_repl_pos_get(ta, &pa), 0);
	REQUIRE_RC(mdt_repl_pos_get(tb, &pb), 0);
	CHECK_EQ(pa.seq, pb.seq);
	CHECK_EQ(pa.epoch, pb.epoch);
	mdt_txn_abort(ta);
	mdt_txn_abort(tb);
}

/* ---- the active's workload: one batch (top-level transaction) per step ---- */

struct wl {
	struct fx f;
	struct loom_cred root;
	uint64_t d1, d2, f1, f2, victim, mirrored;
	uint64_t client[2];
};

/* One request in a child of the batch, as the MDS runs it: committed on success. */
#define OP(w, call)                                                                       \
	do {                                                                               \
		struct mdt_txn *t = fx_op_begin(&(w)->f);                                  \
		REQUIRE_RC(fx_op_end(&(w)->f, t, (call)), 0);                              \
	} while (0)

static void step_osts(struct wl *w)
{
	struct lw_node_ent ne = { .name = "node1", .generation = 1, .uid_max = 65535,
				  .gid_max = 65535 };
	uint64_t first;

	fx_add_osts(&w->f, 3);
	OP(w, mdt_nodemap_put(t, &ne));
	OP(w, mdt_client_put(t, w->client));
	OP(w, mdt_client_inos_grant(t, w->client, 8, &first));
	OP(w, mdt_client_ino_take(t, w->client, first));
}

static void step_create(struct wl *w)
{
	struct lw_layout req = fx_layout_req(1u << 20, 2, -1, NULL);
	struct lw_attr a;
	struct mdt_txn *c, *g;

	REQUIRE_RC(fx_mkdir(&w->f, &w->root, LOOM_ROOT_INO, "d1", 0755, &w->d1), 0);
	REQUIRE_RC(fx_mkdir(&w->f, &w->root, LOOM_ROOT_INO, "d2", 0755, &w->d2), 0);
	REQUIRE_RC(fx_mkdir(&w->f, &w->root, w->d1, "sub", 0700, NULL), 0);
	REQUIRE_RC(fx_create(&w->f, &w->root, w->d1, "f1", 0644, &w->f1), 0);
	REQUIRE_RC(fx_create(&w->f, &w->root, w->d1, "f2", 0644, &w->f2), 0);
	REQUIRE_RC(fx_create(&w->f, &w->root, w->d2, "victim", 0644, &w->victim), 0);
	REQUIRE_RC(fx_create(&w->f, &w->root, w->d1, "p", S_IFIFO | 0644, NULL), 0);
	REQUIRE_RC(fx_symlink(&w->f, &w->root, w->d1, "s", "../d2/victim", NULL), 0);
	req.version = LW_LAYOUT_V3;
	req.mirror_count = 2;
	REQUIRE_RC(fx_create_full(&w->f, &w->root, w->d2, "m", 0644, 0, true, &req, &a, NULL, NULL), 0);
	w->mirrored = a.ino;
	OP(w, mdt_pool_new(t, "fast"));
	OP(w, mdt_pool_add(t, "fast", 0));
	OP(w, mdt_pool_add(t, "fast", 2));

	/* A request that wrote, then failed: none of it may reach the standby. */
	c = fx_op_begin(&w->f);
	REQUIRE_RC(mdt_mkdir(c, &w->root, w->d1, "ghost", 5, 0755, fx_tick(&w->f), &a), 0);
	REQUIRE_RC(mdt_create(c, &w->root, a.ino, "ghostf", 6, 0644, 0, true, NULL, fx_tick(&w->f),
			      &a, NULL, NULL), 0);
	CHECK_RC(fx_op_end(&w->f, c, -EIO), -EIO);

	/* Nested: a grandchild that commits joins the child, one that aborts does not. */
	c = fx_op_begin(&w->f);
	REQUIRE_RC(mdt_txn_child(c, &g), 0);
	REQUIRE_RC(mdt_mkdir(g, &w->root, w->d2, "nest", 4, 0755, fx_tick(&w->f), &a), 0);
	REQUIRE_RC(mdt_txn_commit(g), 0);
	REQUIRE_RC(mdt_txn_child(c, &g), 0);
	REQUIRE_RC(mdt_mkdir(g, &w->root, w->d2, "ghost2", 6, 0755, fx_tick(&w->f), &a), 0);
	mdt_txn_abort(g);
	REQUIRE_RC(fx_op_end(&w->f, c, mdt_setxattr(c, &w->root, w->d2, "user.n", 6, "1", 1, 0,
						     fx_tick(&w->f))), 0);
}

static void step_change(struct wl *w)
{
	static const uint64_t uuid[2] = { 0x1111, 0x2222 };
	struct lw_setattr sa = { .ino = w->f2, .valid = LW_SA_MODE | LW_SA_UID, .mode = 0600,
				 .uid = 1000 };
	struct timespec mt = { .tv_sec = 1700001000 };
	struct lw_layout dirdef = fx_layout_req(2u << 20, 2, -1, "fast");
	uint8_t data[300];
	struct lw_attr a;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	REQUIRE_RC(fx_setxattr(&w->f, &w->root, w->f1, "user.a", "one", 0), 0);
	REQUIRE_RC(fx_setxattr(&w->f, &w->root, w->f1, "user.b", "two", 0), 0);
	REQUIRE_RC(fx_setxattr(&w->f, &w->root, w->d1, "trusted.t", "three", 0), 0);
	REQUIRE_RC(fx_setxattr(&w->f, &w->root, w->f1, "user.a", "one again", LW_XATTR_REPLACE), 0);
	REQUIRE_RC(fx_setattr(&w->f, &w->root, &sa, NULL), 0);
	REQUIRE_RC(fx_link(&w->f, &w->root, w->f1, w->d2, "f1link"), 0);
	REQUIRE_RC(fx_setlayout(&w->f, &w->root, w->d2, &dirdef, 0, NULL), 0);
	REQUIRE_RC(fx_setlayout(&w->f, &w->root, fx_ino(&w->f, w->d1, "sub"), &dirdef, 0, NULL), 0);
	REQUIRE_RC(fx_mkdir(&w->f, &w->root, w->d2, "inherits", 0755, NULL), 0);
	OP(w, mdt_dom_write(t, w->f1, 10, data, sizeof(data)));
	OP(w, mdt_size_update(t, w->f1, LW_CL_SIZE | LW_CL_MTIME, 310, 0, 310, mt, 0, &a));
	OP(w, mdt_size_update(t, w->f2, LW_CL_SIZE, 3u << 20, 0, 0, mt, 0, &a));
	OP(w, mdt_reply_put(t, uuid, 42, 0x123, 0, "answer", 6, 1000));
	OP(w, mdt_reply_put(t, uuid, 43, 0x123, -ENOENT, "", 0, 1001));
	OP(w, mdt_mirror_write_begin(t, w->mirrored));
}

static void step_move(struct wl *w)
{
	struct lw_setattr sa = { .ino = w->f2, .valid = LW_SA_SIZE, .size = 1000 };
	struct mdt_unlinked v;

	/* Over a file with another link, then over one that becomes an orphan. */
	REQUIRE_RC(fx_rename(&w->f, &w->root, w->d1, "f2", w->d2, "f1link", 0, &v), 0);
	CHECK(v.ino == w->f1 && v.nlink == 1);
	REQUIRE_RC(fx_rename(&w->f, &w->root, w->d1, "p", w->d2, "victim", 0, &v), 0);
	CHECK(v.ino == w->victim && v.nlink == 0);
	REQUIRE_RC(fx_rename(&w->f, &w->root, w->d1, "s", w->d2, "s2", 0, NULL), 0);
	OP(w, mdt_removexattr(t, &w->root, w->f1, "user.b", 6, fx_tick(&w->f)));
	REQUIRE_RC(fx_unlink(&w->f, &w->root, w->d1, "f1", &v), 0);
	CHECK(v.ino == w->f1 && v.nlink == 0);
	REQUIRE_RC(fx_setattr(&w->f, &w->root, &sa, NULL), 0); /* queues a truncation */
	REQUIRE_RC(fx_rmdir(&w->f, &w->root, w->d1, "sub"), 0);
	OP(w, mdt_mirror_write_end(t, w->mirrored));
}

/* The OSTs cut the one truncation queued (step_move's). */
static int trunc_first_done(struct mdt_txn *t)
{
	struct mdt_trunc tr[4];
	size_t n;
	int rc = mdt_trunc_list(t, tr, 4, &n);

	if (rc == 0 && n != 1)
		rc = -EIO;
	return rc ? rc : mdt_trunc_done(t, tr[0].ino, tr[0].epoch);
}

/* An OST destroyed the first object of the queue (the released files' objects). */
static int destroy_first_done(struct mdt_txn *t)
{
	struct loom_ostobj objs[8];
	size_t n;
	int rc = mdt_destroy_list(t, objs, 8, &n);

	if (rc == 0 && n < 2)
		rc = -EIO;
	return rc ? rc : mdt_destroy_done(t, objs[0].ost_idx, objs[0].objid);
}

static void step_release(struct wl *w)
{
	struct mdt_repl_pos prev = { .seq = 99, .epoch = 4 };
	size_t removed;

	REQUIRE_RC(fx_release(&w->f, w->f1), 0);
	REQUIRE_RC(fx_release(&w->f, w->victim), 0);
	OP(w, mdt_reply_sweep(t, 2000, 100, &removed));
	CHECK_EQ(removed, 2);
	OP(w, trunc_first_done(t));
	OP(w, destroy_first_done(t));
	OP(w, mdt_repl_prev_put(t, &prev));
	OP(w, mdt_pool_remove(t, "fast", 0));
	OP(w, mdt_nodemap_del(t, "node1"));
	OP(w, mdt_client_inos_del(t, w->client));
	OP(w, mdt_client_del(t, w->client));
}

/* Outside a batch: each request a top-level transaction of its own. */
static void step_single(struct wl *w)
{
	uint64_t d3;

	REQUIRE_RC(fx_setxattr(&w->f, &w->root, w->d2, "user.solo", "x", 0), 0);
	REQUIRE_RC(fx_mkdir(&w->f, &w->root, LOOM_ROOT_INO, "d3", 0755, &d3), 0);
	REQUIRE_RC(fx_rmdir(&w->f, &w->root, LOOM_ROOT_INO, "d3"), 0);
}

static void (*const steps[])(struct wl *) = {
	step_osts, step_create, step_change, step_move, step_release, step_single,
};

static void test_standby_matches(void)
{
	struct wl w = { .root = fx_root(), .client = { 0xabc, 0xdef } };
	struct redo_q q = { .n = 0 };
	char dir1[64], dir2[64];
	struct mdt_store *b1, *b2;
	struct mdt_repl_pos pos;
	struct mdt_txn *t;
	uint32_t dbs = 0;
	size_t done = 0;
	char when[64];

	fx_init(&w.f);
	b1 = standby_of(w.f.s, dir1);
	b2 = standby_of(w.f.s, dir2);
	REQUIRE_RC(mdt_store_set_redo(w.f.s, EPOCH, q_push, &q), 0);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		bool batch = steps[i] != step_single;

		if (batch)
			fx_batch_begin(&w.f);
		steps[i](&w);
		if (batch)
			fx_batch_commit(&w.f);
		/* b1 follows commit by commit: after commit n it holds what A held after it. */
		for (; done < q.n; done++) {
			dbs |= check_commit(&q, done, done + 1, EPOCH);
			CHECK_RC(apply(b1, &q, done, done + 1), 0);
		}
		snprintf(when, sizeof(when), "after step %zu, commit %zu", i, done);
		same_mdt(w.f.s, b1, when);
	}
	CHECK_EQ(q.n, 5 + 3); /* a commit a batch, one a single request */
	CHECK_EQ(mdt_store_repl_seq(w.f.s), q.n);

	/* The standby's way: several commits in one transaction. */
	for (size_t i = 0; i < q.n; i += 3)
		CHECK_RC(apply(b2, &q, i, i + 3 < q.n ? i + 3 : q.n), 0);
	same_mdt(w.f.s, b2, "grouped");

	REQUIRE_RC(mdt_txn_begin(b2, false, &t), 0);
	REQUIRE_RC(mdt_repl_pos_get(t, &pos), 0);
	CHECK(pos.seq == q.n && pos.epoch == EPOCH);
	mdt_txn_abort(t);

	/* The workload touched what it meant to (else the comparison proves little). */
	for (int db = 0; db < MDT_DB_COUNT; db++)
		if (db != MDT_DB_OST_LOST && !(dbs & (1u << db)))
			CHECK_FAIL_("no record of db %d in the redo", db);
	/* The aborted request's and grandchild's names never reached the stream. */
	for (size_t i = 0; i < q.n; i++)
		CHECK(memmem(q.buf[i], q.len[i], "ghost", 5) == NULL);

	q_free(&q);
	standby_close(b1, dir1);
	standby_close(b2, dir2);
	fx_fini(&w.f);
}

/* ---- numbering ---- */

static int deny_writes(void *arg)
{
	(void)arg;
	return -EROFS;
}

static void test_seq(void)
{
	struct loom_cred root = fx_root();
	struct redo_q q = { .n = 0 };
	struct mdt_repl_pos pos;
	struct mdt_txn *t, *c;
	struct lw_attr a;
	struct fx f;

	fx_init(&f);
	/* Before capture, commits are not numbered (and not counted later). */
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "before", 0755, NULL), 0);
	REQUIRE_RC(mdt_store_set_redo(f.s, EPOCH, q_push, &q), 0);
	CHECK_EQ(mdt_store_repl_seq(f.s), 0);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "a", 0755, NULL), 0);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "b", 0755, NULL), 0);
	REQUIRE(q.n == 2);

	/* Nothing written: nothing handed over, no number taken. */
	REQUIRE_RC(mdt_txn_begin(f.s, true, &t), 0);
	CHECK_RC(mdt_lookup(t, &root, LOOM_ROOT_INO, "a", 1, &a), 0);
	REQUIRE_RC(mdt_txn_commit(t), 0);
	/* Only an aborted child wrote. */
	REQUIRE_RC(mdt_txn_begin(f.s, true, &t), 0);
	REQUIRE_RC(mdt_txn_child(t, &c), 0);
	REQUIRE_RC(mdt_mkdir(c, &root, LOOM_ROOT_INO, "gone", 4, 0755, fx_tick(&f), &a), 0);
	mdt_txn_abort(c);
	REQUIRE_RC(mdt_txn_commit(t), 0);
	/* A failed request (nothing written). */
	CHECK_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "a", 0755, NULL), -EEXIST);
	/* A commit refused by the write guard: no number taken either. */
	mdt_store_set_write_guard(f.s, deny_writes, NULL);
	CHECK_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "fenced", 0755, NULL), -EROFS);
	mdt_store_set_write_guard(f.s, NULL, NULL);
	CHECK_EQ(q.n, 2);
	CHECK_EQ(mdt_store_repl_seq(f.s), 2);

	/* A batch of three requests is one commit. */
	fx_batch_begin(&f);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "c", 0755, NULL), 0);
	REQUIRE_RC(fx_create(&f, &root, LOOM_ROOT_INO, "fifo", S_IFIFO | 0600, NULL), 0);
	REQUIRE_RC(fx_symlink(&f, &root, LOOM_ROOT_INO, "l", "c", NULL), 0);
	fx_batch_commit(&f);
	REQUIRE(q.n == 3);
	for (size_t i = 0; i < q.n; i++)
		check_commit(&q, i, i + 1, EPOCH);

	/* The position is the MDT's: a reopen goes on from it, in the new epoch. */
	fx_reopen(&f);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_repl_pos_get(t, &pos), 0);
	CHECK(pos.seq == 3 && pos.epoch == EPOCH);
	mdt_txn_abort(t);
	REQUIRE_RC(mdt_store_set_redo(f.s, EPOCH + 1, q_push, &q), 0);
	CHECK_EQ(mdt_store_repl_seq(f.s), 3);
	REQUIRE_RC(fx_rmdir(&f, &root, LOOM_ROOT_INO, "c"), 0);
	REQUIRE(q.n == 4);
	check_commit(&q, 3, 4, EPOCH + 1);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_repl_pos_get(t, &pos), 0);
	CHECK(pos.seq == 4 && pos.epoch == EPOCH + 1);
	mdt_txn_abort(t);

	q_free(&q);
	fx_fini(&f);
}

/* ---- malformed redo ---- */

/* A bad record after a good one (a put of xattr user.r on the root): what its header claims, and
 * how many of its bytes are there (0: all). Its key bytes are the good record's key (14 bytes),
 * then 'k's. */
struct bad_rec {
	const char *what;
	uint8_t op, db;
	uint16_t klen;
	uint32_t vlen;
	uint32_t cut;
	int want;
};

static const struct bad_rec bad_recs[] = {
	{ "a record header cut short", LW_REPL_PUT, MDT_DB_XATTRS, 14, 1, 5, -EPROTO },
	{ "a key cut short", LW_REPL_PUT, MDT_DB_XATTRS, 14, 1, 8 + 3, -EPROTO },
	{ "a value cut short", LW_REPL_PUT, MDT_DB_XATTRS, 14, 10, 8 + 14 + 4, -EPROTO },
	{ "db MDT_DB_COUNT", LW_REPL_PUT, MDT_DB_COUNT, 14, 1, 0, -EPROTO },
	{ "db 255", LW_REPL_PUT, 255, 14, 1, 0, -EPROTO },
	{ "klen 0", LW_REPL_PUT, MDT_DB_XATTRS, 0, 1, 0, -EPROTO },
	{ "klen 512", LW_REPL_PUT, MDT_DB_XATTRS, 512, 1, 0, -EPROTO },
	/* Of the key the good record put: without the check it would go through. */
	{ "a delete with a value", LW_REPL_DEL, MDT_DB_XATTRS, 14, 1, 0, -EPROTO },
	{ "op 0", 0, MDT_DB_XATTRS, 14, 1, 0, -EPROTO },
	{ "op 3", 3, MDT_DB_XATTRS, 14, 0, 0, -EPROTO },
	/* ino 1 + "user": no such xattr. */
	{ "a delete of a missing key", LW_REPL_DEL, MDT_DB_XATTRS, 12, 0, 0, -ESTALE },
};

/* Applies a bad redo to b and aborts, as the standby does: b stays what a is. */
static void refused(struct mdt_store *a, struct mdt_store *b, const uint8_t *buf, size_t len,
		    uint32_t nrec, int want, const char *what)
{
	struct mdt_txn *t;
	int rc;

	REQUIRE_RC(mdt_txn_begin(b, true, &t), 0);
	rc = mdt_redo_apply(t, buf, len, nrec);
	if (rc != want)
		CHECK_FAIL_("%s: got %d, want %d", what, rc, want);
	mdt_txn_abort(t);
	same_mdt(a, b, what);
}

static void test_apply_refuses(void)
{
	static uint8_t buf[2048], kv[600];
	struct lw_repl_rec r = { .op = LW_REPL_PUT, .db = MDT_DB_XATTRS, .klen = 14, .vlen = 1 };
	size_t g = sizeof(r) + 14 + 1;
	struct mdt_store *b;
	struct mdt_txn *t;
	char dir[64];
	struct fx f;
	MDB_val v;

	fx_init(&f);
	b = standby_of(f.s, dir);
	memset(kv, 'k', sizeof(kv));
	REQUIRE(mdt_key_name(kv, LOOM_ROOT_INO, "user.r", 6) == 14);
	memcpy(buf, &r, sizeof(r));
	memcpy(buf + sizeof(r), kv, 14 + 1);
	for (size_t i = 0; i < sizeof(bad_recs) / sizeof(bad_recs[0]); i++) {
		const struct bad_rec *x = &bad_recs[i];

		r = (struct lw_repl_rec){ .op = x->op, .db = x->db, .klen = x->klen, .vlen = x->vlen };
		memcpy(buf + g, &r, sizeof(r));
		memcpy(buf + g + sizeof(r), kv, (size_t)x->klen + x->vlen);
		refused(f.s, b, buf, g + (x->cut ? x->cut : sizeof(r) + x->klen + x->vlen), 2, x->want,
			x->what);
	}
	refused(f.s, b, buf, g, 2, -EPROTO, "nrec above the records");
	refused(f.s, b, buf, g, 0, -EPROTO, "nrec below the records");

	/* An empty redo is fine; the good record alone applies and commits. */
	REQUIRE_RC(mdt_txn_begin(b, true, &t), 0);
	CHECK_RC(mdt_redo_apply(t, buf, 0, 0), 0);
	CHECK_RC(mdt_redo_apply(t, buf, g, 1), 0);
	REQUIRE_RC(mdt_txn_commit(t), 0);
	REQUIRE_RC(mdt_txn_begin(b, false, &t), 0);
	CHECK_RC(mdt_get(t, MDT_DB_XATTRS, kv, 14, &v), 0);
	CHECK(v.mv_size == 1 && memcmp(v.mv_data, "k", 1) == 0);
	mdt_txn_abort(t);

	standby_close(b, dir);
	fx_fini(&f);
}

/* ---- positions ---- */

static void test_positions(void)
{
	struct mdt_repl_pos pos, prev, want = { .seq = 7, .epoch = 3 };
	struct mdt_txn *t;
	struct fx f;

	fx_init(&f);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_repl_pos_get(t, &pos), 0);
	CHECK(pos.seq == 0 && pos.epoch == 0);
	REQUIRE_RC(mdt_repl_prev_get(t, &prev), 0);
	CHECK(prev.seq == 0 && prev.epoch == 0);
	mdt_txn_abort(t);

	REQUIRE_RC(mdt_txn_begin(f.s, true, &t), 0);
	REQUIRE_RC(mdt_repl_prev_put(t, &want), 0);
	REQUIRE_RC(mdt_repl_pos_put(t, &(struct mdt_repl_pos){ .seq = 12, .epoch = 4 }), 0);
	REQUIRE_RC(mdt_txn_commit(t), 0);
	fx_reopen(&f);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_repl_prev_get(t, &prev), 0);
	CHECK(prev.seq == 7 && prev.epoch == 3);
	REQUIRE_RC(mdt_repl_pos_get(t, &pos), 0);
	CHECK(pos.seq == 12 && pos.epoch == 4);
	mdt_txn_abort(t);
	fx_fini(&f);
}

int main(void)
{
	RUN(test_standby_matches);
	RUN(test_seq);
	RUN(test_apply_refuses);
	RUN(test_positions);
	return check_report();
}
