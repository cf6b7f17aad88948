/* Layouts (inheritance, setlayout), orphans, release and the destroy queue. */
#include <sys/stat.h>

#include "fixture.h"

static struct loom_cred root_cr;

static struct loom_layout *create_get(struct fx *f, const struct loom_cred *cr, uint64_t dir,
				      const char *name, const struct lw_layout *req, uint64_t *ino)
{
	struct loom_layout *l = NULL;
	struct lw_attr a;

	REQUIRE_RC(fx_create_full(f, cr, dir, name, 0644, 0, true, req, &a, &l, NULL), 0);
	REQUIRE(l != NULL);
	if (ino)
		*ino = a.ino;
	return l;
}

static bool distinct_osts(const struct loom_layout *l)
{
	for (uint32_t i = 0; i < l->nobjs; i++)
		for (uint32_t j = i + 1; j < l->nobjs; j++)
			if (l->objs[i].ost_idx == l->objs[j].ost_idx)
				return false;
	return true;
}

static void test_fs_default(void)
{
	struct fx f;
	struct loom_layout *l, *l2;
	struct lw_attr a;
	uint64_t ino;

	fx_init(&f);
	fx_add_osts(&f, 4);
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "f", NULL, &ino);
	CHECK_EQ(l->pattern, LOOM_PATTERN_RAID0);
	CHECK_EQ(l->stripe_size, 4u << 20);
	CHECK_EQ(l->stripe_count, 1);
	CHECK_EQ(l->nobjs, 1);
	CHECK_EQ(l->stripe_offset, l->objs[0].ost_idx);
	CHECK_EQ(l->layout_gen, 0);
	CHECK_EQ(l->flags, 0);
	CHECK_EQ(l->pool[0], '\0');
	/* the same layout from getlayout, open, and after a reopen */
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(memcmp(l, l2, sizeof(*l) + l->nobjs * sizeof(l->objs[0])) == 0);
	free(l2);
	fx_reopen(&f);
	REQUIRE_RC(fx_open(&f, &root_cr, ino, 0, &a, &l2), 0);
	CHECK(memcmp(l, l2, sizeof(*l) + l->nobjs * sizeof(l->objs[0])) == 0);
	CHECK_EQ(a.blksize, 4u << 20);
	free(l2);
	free(l);
	fx_fini(&f);
}

static void test_dir_default(void)
{
	struct fx f;
	struct lw_layout req;
	struct loom_layout *l;
	struct lw_attr a;
	uint64_t d, partial, sub, sub2, ino;

	fx_init(&f);
	fx_add_osts(&f, 4);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "partial", 0755, &partial), 0);

	/* a directory without a default of its own shows the fs default, marked inherited */
	REQUIRE_RC(fx_getlayout(&f, d, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT | LOOM_LAYOUT_INHERITED);
	CHECK_EQ(l->stripe_size, 4u << 20);
	free(l);

	req = fx_layout_req(1u << 20, 2, -1, NULL);
	REQUIRE_RC(fx_setlayout(&f, &root_cr, d, &req, 0, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT);
	CHECK_EQ(l->stripe_size, 1u << 20);
	CHECK_EQ(l->stripe_count, 2);
	CHECK_EQ(l->stripe_offset, -1);
	CHECK_EQ(l->nobjs, 0);
	free(l);
	req = fx_layout_req(0, 3, -1, NULL);
	REQUIRE_RC(fx_setlayout(&f, &root_cr, partial, &req, 0, NULL), 0);

	/* dir default -> file */
	l = create_get(&f, &root_cr, d, "f", NULL, &ino);
	CHECK_EQ(l->stripe_size, 1u << 20);
	CHECK_EQ(l->stripe_count, 2);
	CHECK_EQ(l->nobjs, 2);
	CHECK(distinct_osts(l));
	free(l);
	REQUIRE_RC(fx_getattr(&f, ino, &a), 0);
	CHECK_EQ(a.blksize, 1u << 20);
	/* fields the directory leaves unset come from the fs default */
	l = create_get(&f, &root_cr, partial, "f", NULL, NULL);
	CHECK_EQ(l->stripe_size, 4u << 20);
	CHECK_EQ(l->stripe_count, 3);
	CHECK(distinct_osts(l));
	free(l);
	/* the request wins field by field; a pool it names must exist */
	req = fx_layout_req(0, 1, 2, "fast");
	CHECK_RC(fx_create_full(&f, &root_cr, d, "g", 0644, 0, true, &req, &a, NULL, NULL), -EINVAL);
	{
		struct mdt_txn *t = fx_op_begin(&f);
		int rc = mdt_pool_new(t, "fast");

		for (uint32_t i = 0; rc == 0 && i < 4; i++)
			rc = mdt_pool_add(t, "fast", i);
		REQUIRE_RC(fx_op_end(&f, t, rc), 0);
	}
	l = create_get(&f, &root_cr, d, "g", &req, NULL);
	CHECK_EQ(l->stripe_size, 1u << 20);
	CHECK_EQ(l->stripe_count, 1);
	CHECK_EQ(l->objs[0].ost_idx, 2);
	CHECK_EQ(l->stripe_offset, 2);
	CHECK(strcmp(l->pool, "fast") == 0);
	free(l);
	req = fx_layout_req(2u << 20, -1, -1, NULL);
	l = create_get(&f, &root_cr, d, "all", &req, NULL);
	CHECK_EQ(l->stripe_size, 2u << 20);
	CHECK_EQ(l->nobjs, 4);
	CHECK(distinct_osts(l));
	free(l);
	/* a bad request */
	req = fx_layout_req(1000, 1, -1, NULL);
	CHECK_RC(fx_create_full(&f, &root_cr, d, "bad", 0644, 0, true, &req, &a, NULL, NULL), -EINVAL);
	req = fx_layout_req(0, 1, 77, NULL);
	CHECK_RC(fx_create_full(&f, &root_cr, d, "bad", 0644, 0, true, &req, &a, NULL, NULL), -EINVAL);
	req.magic = 0;
	CHECK_RC(fx_create_full(&f, &root_cr, d, "bad", 0644, 0, true, &req, &a, NULL, NULL), -EPROTO);

	/* mkdir copies the parent's own default; the root's is not copied */
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0755, &sub), 0);
	REQUIRE_RC(fx_getlayout(&f, sub, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT);
	CHECK_EQ(l->stripe_size, 1u << 20);
	CHECK_EQ(l->stripe_count, 2);
	free(l);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "plain", 0755, &sub2), 0);
	REQUIRE_RC(fx_getlayout(&f, sub2, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT | LOOM_LAYOUT_INHERITED);
	free(l);

	/* changing the fs default reaches every directory without its own, at once */
	req = fx_layout_req(8u << 20, 2, -1, NULL);
	REQUIRE_RC(fx_setlayout(&f, &root_cr, LOOM_ROOT_INO, &req, 0, NULL), 0);
	l = create_get(&f, &root_cr, sub2, "f", NULL, NULL);
	CHECK_EQ(l->stripe_size, 8u << 20);
	CHECK_EQ(l->stripe_count, 2);
	free(l);
	l = create_get(&f, &root_cr, partial, "f2", NULL, NULL);
	CHECK_EQ(l->stripe_size, 8u << 20);
	CHECK_EQ(l->stripe_count, 3);
	free(l);
	l = create_get(&f, &root_cr, sub, "f", NULL, NULL);
	CHECK_EQ(l->stripe_size, 1u << 20);
	free(l);
	/* a root default with unset fields falls back to the built-in ones */
	req = fx_layout_req(0, 0, -1, NULL);
	REQUIRE_RC(fx_setlayout(&f, &root_cr, LOOM_ROOT_INO, &req, 0, NULL), 0);
	l = create_get(&f, &root_cr, sub2, "f3", NULL, NULL);
	CHECK_EQ(l->stripe_size, 4u << 20);
	CHECK_EQ(l->stripe_count, 1);
	free(l);
	fx_fini(&f);
}

static void test_setlayout_dir(void)
{
	struct fx f;
	struct loom_cred owner = fx_cred(1000, 100, 0), other = fx_cred(2000, 200, 0);
	struct lw_layout req = fx_layout_req(1u << 20, 2, 1, NULL);
	struct loom_layout *l;
	uint64_t d, fifo, sym;

	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, NULL), 0);
	REQUIRE_RC(fx_mkdir(&f, &owner, fx_ino(&f, LOOM_ROOT_INO, "d"), "mine", 0755, &d), 0);
	REQUIRE_RC(fx_create(&f, &owner, d, "fifo", S_IFIFO | 0644, &fifo), 0);
	REQUIRE_RC(fx_symlink(&f, &owner, d, "sym", "x", &sym), 0);

	CHECK_RC(fx_setlayout(&f, &other, d, &req, 0, NULL), -EPERM);
	CHECK_RC(fx_setlayout(&f, &owner, d, &req, 0, NULL), 0);
	CHECK_RC(fx_setlayout(&f, &root_cr, d, &req, 0, NULL), 0);
	req.stripe_offset = 5; /* no such OST */
	CHECK_RC(fx_setlayout(&f, &owner, d, &req, 0, NULL), -EINVAL);
	req.stripe_offset = -1;
	req.stripe_count = -2;
	CHECK_RC(fx_setlayout(&f, &owner, d, &req, 0, NULL), -EINVAL);
	req.stripe_count = 2;
	CHECK_RC(fx_setlayout(&f, &owner, d, &req, 0x10, NULL), -EINVAL);
	CHECK_RC(fx_setlayout(&f, &owner, fifo, &req, 0, NULL), -EINVAL);
	CHECK_RC(fx_setlayout(&f, &owner, sym, &req, 0, NULL), -EINVAL);
	CHECK_RC(fx_setlayout(&f, &owner, 4242, &req, 0, NULL), -ENOENT);
	CHECK_RC(fx_getlayout(&f, fifo, &l), -ENODATA);
	CHECK_RC(fx_getlayout(&f, sym, &l), -ENODATA);
	CHECK_RC(fx_getlayout(&f, 4242, &l), -ENOENT);
	/* survives a reopen */
	fx_reopen(&f);
	REQUIRE_RC(fx_getlayout(&f, d, &l), 0);
	CHECK(l->stripe_count == 2 && l->stripe_offset == 1 && l->flags == LOOM_LAYOUT_DEFAULT);
	free(l);
	/* -d */
	CHECK_RC(fx_setlayout(&f, &other, d, NULL, LW_SL_DELETE, NULL), -EPERM);
	REQUIRE_RC(fx_setlayout(&f, &owner, d, NULL, LW_SL_DELETE, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT | LOOM_LAYOUT_INHERITED);
	free(l);
	CHECK_RC(fx_setlayout(&f, &owner, d, NULL, LW_SL_DELETE, NULL), -ENODATA);
	CHECK_RC(fx_setlayout(&f, &root_cr, LOOM_ROOT_INO, NULL, LW_SL_DELETE, NULL), -EPERM);
	REQUIRE_RC(fx_getlayout(&f, d, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT | LOOM_LAYOUT_INHERITED);
	free(l);
	fx_fini(&f);
}

static void test_setlayout_file(void)
{
	struct fx f;
	struct loom_cred owner = fx_cred(1000, 100, 0), other = fx_cred(2000, 200, 0);
	struct lw_layout req = fx_layout_req(0, 3, -1, NULL);
	struct loom_layout *old, *l;
	struct loom_ostobj q[16];
	struct lw_setattr sa;
	struct lw_attr a;
	struct mdt_txn *t;
	uint64_t ino;
	size_t n;

	fx_init(&f);
	fx_add_osts(&f, 4);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, NULL), 0);
	{
		struct lw_layout dreq = fx_layout_req(1u << 20, 1, -1, NULL);
		REQUIRE_RC(fx_setlayout(&f, &root_cr, fx_ino(&f, LOOM_ROOT_INO, "d"), &dreq, 0, NULL), 0);
	}
	old = create_get(&f, &owner, fx_ino(&f, LOOM_ROOT_INO, "d"), "f", NULL, &ino);
	CHECK_EQ(old->layout_gen, 0);

	CHECK_RC(fx_setlayout(&f, &other, ino, &req, 0, NULL), -EPERM);
	REQUIRE_RC(fx_setlayout(&f, &owner, ino, &req, 0, &l), 0);
	CHECK_EQ(l->layout_gen, 1);
	CHECK_EQ(l->stripe_count, 3);
	CHECK_EQ(l->stripe_size, 1u << 20); /* unset: kept from the current layout */
	CHECK_EQ(l->nobjs, 3);
	CHECK(distinct_osts(l));
	/* every object is new */
	for (uint32_t i = 0; i < l->nobjs; i++)
		CHECK(l->objs[i].ost_idx != old->objs[0].ost_idx || l->objs[i].objid != old->objs[0].objid);
	free(l);
	/* the old object waits for destruction */
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_destroy_list(t, q, 16, &n), 0);
	mdt_txn_abort(t);
	REQUIRE(n == 1);
	CHECK(q[0].ost_idx == old->objs[0].ost_idx && q[0].objid == old->objs[0].objid);
	REQUIRE_RC(fx_getlayout(&f, ino, &l), 0);
	CHECK_EQ(l->layout_gen, 1);
	free(l);
	req = fx_layout_req(2u << 20, 0, -1, NULL);
	REQUIRE_RC(fx_setlayout(&f, &root_cr, ino, &req, 0, &l), 0);
	CHECK_EQ(l->layout_gen, 2);
	CHECK_EQ(l->stripe_count, 3);
	CHECK_EQ(l->stripe_size, 2u << 20);
	free(l);
	REQUIRE_RC(fx_getattr(&f, ino, &a), 0);
	CHECK_EQ(a.blksize, 2u << 20);
	CHECK_RC(fx_setlayout(&f, &owner, ino, NULL, LW_SL_DELETE, NULL), -EINVAL);
	/* data: the layout is set for good */
	memset(&sa, 0, sizeof(sa));
	sa.ino = ino;
	sa.valid = LW_SA_SIZE;
	sa.size = 1;
	REQUIRE_RC(fx_setattr(&f, &owner, &sa, NULL), 0);
	CHECK_RC(fx_setlayout(&f, &owner, ino, &req, 0, NULL), -EEXIST);
	free(old);
	fx_fini(&f);
}

static void test_orphan_release_destroy(void)
{
	struct fx f;
	struct lw_layout req = fx_layout_req(0, 3, -1, NULL);
	struct loom_layout *l;
	struct loom_ostobj q[16];
	struct mdt_unlinked v;
	struct lw_attr a;
	struct mdt_txn *t;
	uint64_t ino, sym, inos[4];
	size_t n;

	fx_init(&f);
	fx_add_osts(&f, 3);
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "f", &req, &ino);
	REQUIRE(l->nobjs == 3);
	REQUIRE_RC(fx_symlink(&f, &root_cr, LOOM_ROOT_INO, "s", "f", &sym), 0);
	REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, "f", &v), 0);
	CHECK(v.ino == ino && v.nlink == 0);
	REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, "s", &v), 0);

	/* orphans outlive a restart: that is how the server finds them after a crash */
	fx_reopen(&f);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_orphan_list(t, 0, inos, 4, &n), 0);
	CHECK(n == 2 && inos[0] == ino && inos[1] == sym);
	REQUIRE_RC(mdt_orphan_list(t, 0, inos, 1, &n), 0);
	CHECK_EQ(n, 1);
	REQUIRE_RC(mdt_destroy_list(t, q, 16, &n), 0);
	CHECK_EQ(n, 0);
	mdt_txn_abort(t);
	/* still usable while open */
	REQUIRE_RC(fx_getattr(&f, ino, &a), 0);
	REQUIRE_RC(fx_open(&f, &root_cr, ino, 0, &a, NULL), 0);

	REQUIRE_RC(fx_release(&f, ino), 0);
	REQUIRE_RC(fx_release(&f, sym), 0);
	CHECK_RC(fx_getattr(&f, ino, &a), -ENOENT);
	CHECK_RC(fx_getattr(&f, sym, &a), -ENOENT);
	{
		struct loom_layout *gone = (struct loom_layout *)1;
		CHECK_RC(fx_getlayout(&f, ino, &gone), -ENOENT);
		CHECK(gone == NULL);
	}
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_orphan_list(t, 0, inos, 4, &n), 0);
	CHECK_EQ(n, 0);
	REQUIRE_RC(mdt_destroy_list(t, q, 16, &n), 0);
	mdt_txn_abort(t);
	REQUIRE(n == 3);
	/* the queue is ordered by OST then object; it holds exactly the layout's objects */
	for (uint32_t i = 0; i < 3; i++) {
		bool found = false;
		for (uint32_t j = 0; j < 3; j++)
			found |= q[i].ost_idx == l->objs[j].ost_idx && q[i].objid == l->objs[j].objid;
		CHECK(found);
		if (i)
			CHECK(q[i].ost_idx > q[i - 1].ost_idx);
	}
	/* released twice, or never unlinked: nothing happens */
	REQUIRE_RC(fx_release(&f, ino), 0);
	REQUIRE_RC(fx_release(&f, LOOM_ROOT_INO), 0);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &a), 0);

	t = fx_op_begin(&f);
	REQUIRE_RC(mdt_destroy_done(t, q[1].ost_idx, q[1].objid), 0);
	REQUIRE_RC(mdt_destroy_done(t, q[1].ost_idx, q[1].objid), 0); /* a resend */
	REQUIRE_RC(mdt_destroy_list(t, q, 1, &n), 0);
	CHECK_EQ(n, 1);
	REQUIRE_RC(fx_op_end(&f, t, 0), 0);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_destroy_list(t, q, 16, &n), 0);
	mdt_txn_abort(t);
	CHECK_EQ(n, 2);
	free(l);
	fx_fini(&f);
}

/* A file replaced by rename goes the way of an unlinked one. */
static void test_rename_victim_release(void)
{
	struct fx f;
	struct loom_layout *victim_l;
	struct loom_ostobj q[4];
	struct mdt_unlinked v;
	struct mdt_txn *t;
	uint64_t victim;
	size_t n;

	fx_init(&f);
	fx_add_osts(&f, 2);
	victim_l = create_get(&f, &root_cr, LOOM_ROOT_INO, "victim", NULL, &victim);
	free(create_get(&f, &root_cr, LOOM_ROOT_INO, "src", NULL, NULL));
	REQUIRE_RC(fx_rename(&f, &root_cr, LOOM_ROOT_INO, "src", LOOM_ROOT_INO, "victim", 0, &v), 0);
	CHECK(v.ino == victim && v.nlink == 0);
	REQUIRE_RC(fx_release(&f, v.ino), 0);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_destroy_list(t, q, 4, &n), 0);
	mdt_txn_abort(t);
	CHECK(n == 1 && q[0].objid == victim_l->objs[0].objid &&
	      q[0].ost_idx == victim_l->objs[0].ost_idx);
	free(victim_l);
	fx_fini(&f);
}

/* Mirrors in the MDT: a file with copies and a directory default that makes them; stale marks
 * (never the last in-sync copy of a stripe); the write-pending state of writers; what a writer
 * that went without closing leaves; a resync that clears marks only in the layout it began from;
 * the table of files to look after. */
static uint32_t table_count(struct fx *f)
{
	struct mdt_txn *t = fx_read_begin(f);
	uint64_t inos[16];
	size_t n = 0;

	REQUIRE_RC(mdt_mirror_list(t, 0, inos, 16, &n), 0);
	mdt_txn_abort(t);
	return (uint32_t)n;
}

static int mark(struct fx *f, uint64_t ino, const struct loom_layout *l, uint32_t o)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct loom_layout *out = NULL;
	struct loom_ostobj obj = l->objs[o];
	int rc;

	obj.flags = 0;
	rc = mdt_mirror_stale(t, ino, &obj, 1, &out);
	free(out);
	return fx_op_end(f, t, rc);
}

static void test_mirrors(void)
{
	struct fx f;
	struct lw_layout req = fx_layout_req(1u << 20, 2, -1, NULL);
	struct loom_layout *l, *l2, *out;
	struct mdt_txn *t;
	uint64_t ino, plain;
	uint32_t marked, idx[2];

	fx_init(&f);
	fx_add_osts(&f, 4);
	req.version = LW_LAYOUT_V3;
	req.mirror_count = 2;
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "m", &req, &ino);
	CHECK(l->mirror_count == 2 && l->stripe_count == 2 && l->nobjs == 4 && distinct_osts(l));
	free(create_get(&f, &root_cr, LOOM_ROOT_INO, "plain", NULL, &plain));
	CHECK_EQ(table_count(&f), 0);

	/* Marks: stripe 1's copy 0, then its copy 1 (the last in sync) is refused. */
	CHECK_RC(mark(&f, ino, l, 1), 0);
	CHECK_RC(mark(&f, ino, l, 1), 0); /* again: as it was */
	CHECK_RC(mark(&f, ino, l, 3), -EINVAL);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(l2->objs[1].flags == LOOM_OBJ_STALE && l2->objs[3].flags == 0 && l2->objs[0].flags == 0);
	CHECK_EQ(l2->layout_gen, 1);
	CHECK_EQ(table_count(&f), 1);
	CHECK_RC(mark(&f, plain, l, 0), -EINVAL); /* not mirrored */

	/* A resync of another generation clears nothing; of this one, the mark, and the table. */
	idx[0] = 1;
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_mirror_resynced(t, ino, 0, idx, 1, &out)), -EAGAIN);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_resynced(t, ino, l2->layout_gen, idx, 1, &out)), 0);
	CHECK(out->objs[1].flags == 0 && out->layout_gen == 2);
	free(out);
	free(l2);
	CHECK_EQ(table_count(&f), 0);

	/* A writer: write-pending until its close; a resync meanwhile is refused. */
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_write_begin(t, ino)), 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(l2->flags & LOOM_LAYOUT_WRITE_PENDING);
	CHECK_EQ(table_count(&f), 1);
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_mirror_resynced(t, ino, l2->layout_gen, idx, 1, &out)), -EAGAIN);
	free(l2);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_write_end(t, ino)), 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(!(l2->flags & LOOM_LAYOUT_WRITE_PENDING));
	free(l2);
	CHECK_EQ(table_count(&f), 0);
	/* Plain files: nothing. */
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_mirror_write_begin(t, plain)), 0);
	CHECK_EQ(table_count(&f), 0);

	/* A writer that went without closing: every stripe keeps its first copy; the rest is
	 * stale, to resync. */
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_write_begin(t, ino)), 0);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_abandoned(t, ino, &marked)), 0);
	CHECK_EQ(marked, 2);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(!(l2->flags & LOOM_LAYOUT_WRITE_PENDING));
	CHECK(l2->objs[0].flags == 0 && l2->objs[1].flags == 0);
	CHECK(l2->objs[2].flags == LOOM_OBJ_STALE && l2->objs[3].flags == LOOM_OBJ_STALE);
	CHECK_EQ(table_count(&f), 1);
	/* And it survives a restart. */
	fx_reopen(&f);
	free(l2);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(l2->objs[2].flags == LOOM_OBJ_STALE);
	CHECK_EQ(table_count(&f), 1);
	free(l2);
	free(l);
	fx_fini(&f);
}

/* Erasure coding in the MDT: a request (or a default) for K + M objects; copies and parity are
 * one choice, taken together from the first source that makes it. */
static struct lw_layout ec_req(int32_t count, uint16_t parity)
{
	struct lw_layout req = fx_layout_req(1u << 20, count, -1, NULL);

	req.version = LW_LAYOUT_V3;
	req.ec_parity = parity;
	return req;
}

static void check_ec(const struct loom_layout *l, int32_t k, uint16_t m)
{
	CHECK_EQ(l->ec_parity, m);
	CHECK_EQ(l->mirror_count, 1);
	CHECK_EQ(l->stripe_count, k);
	CHECK_EQ(l->nobjs, (uint32_t)k + m);
	CHECK_EQ(l->stripe_offset, l->objs[0].ost_idx);
	CHECK(distinct_osts(l));
	for (uint32_t i = 0; i < l->nobjs; i++)
		CHECK_EQ(l->objs[i].flags, 0);
}

static void test_ec_dir_default(void)
{
	struct fx f;
	struct lw_layout req = ec_req(4, 2);
	struct loom_layout *l;
	uint64_t d, sub;

	fx_init(&f);
	fx_add_osts(&f, 8);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_setlayout(&f, &root_cr, d, &req, 0, &l), 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT);
	CHECK_EQ(l->ec_parity, 2);
	CHECK_EQ(l->mirror_count, 0);
	CHECK_EQ(l->stripe_count, 4);
	CHECK_EQ(l->nobjs, 0);
	free(l);
	fx_reopen(&f);
	REQUIRE_RC(fx_getlayout(&f, d, &l), 0);
	CHECK(l->flags == LOOM_LAYOUT_DEFAULT && l->ec_parity == 2 && l->stripe_count == 4);
	free(l);

	/* The default makes 4 + 2 files; a request's own parity wins. */
	l = create_get(&f, &root_cr, d, "ec", NULL, NULL);
	check_ec(l, 4, 2);
	CHECK_EQ(l->stripe_size, 1u << 20);
	free(l);
	req = ec_req(0, 1);
	l = create_get(&f, &root_cr, d, "ec41", &req, NULL);
	check_ec(l, 4, 1);
	free(l);
	CHECK_EQ(table_count(&f), 0); /* nothing stale, nobody writing */

	/* "-N 2" there: a mirrored file, without parity; the stripes still the default's. */
	req = fx_layout_req(0, 0, -1, NULL);
	req.version = LW_LAYOUT_V3;
	req.mirror_count = 2;
	l = create_get(&f, &root_cr, d, "m", &req, NULL);
	CHECK_EQ(l->mirror_count, 2);
	CHECK_EQ(l->ec_parity, 0);
	CHECK_EQ(l->stripe_count, 4);
	CHECK_EQ(l->nobjs, 8);
	CHECK_EQ(l->stripe_size, 1u << 20);
	CHECK(distinct_osts(l));
	free(l);
	/* "-N 1": one copy, neither mirrored nor coded. */
	req.mirror_count = 1;
	l = create_get(&f, &root_cr, d, "plain", &req, NULL);
	CHECK(l->mirror_count == 1 && l->ec_parity == 0 && l->stripe_count == 4 && l->nobjs == 4);
	free(l);

	/* Wider than the OSTs: refused. */
	req = ec_req(7, 2);
	CHECK_RC(fx_create_full(&f, &root_cr, d, "wide", 0644, 0, true, &req, NULL, NULL, NULL), -EINVAL);
	/* A subdirectory takes the default with it. */
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0755, &sub), 0);
	l = create_get(&f, &root_cr, sub, "ec", NULL, NULL);
	check_ec(l, 4, 2);
	free(l);
	fx_fini(&f);
}

/* Stale marks on a 4 + 2 file: at most two objects (data or parity) stale at once. */
static void test_ec_stale(void)
{
	struct fx f;
	struct lw_layout req = ec_req(4, 2);
	struct loom_layout *l, *l2, *out = NULL;
	struct loom_ostobj three[3];
	struct mdt_txn *t;
	uint64_t ino;

	fx_init(&f);
	fx_add_osts(&f, 6);
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "ec", &req, &ino);
	check_ec(l, 4, 2);

	/* Three in one request: refused as a whole. */
	for (uint32_t i = 0; i < 3; i++) {
		three[i] = l->objs[i];
		three[i].flags = 0;
	}
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_mirror_stale(t, ino, three, 3, &out)), -EINVAL);
	CHECK(out == NULL);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK_EQ(l2->layout_gen, 0);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, 0);
	free(l2);
	CHECK_EQ(table_count(&f), 0);

	/* A data object, then a parity object; a third is one more than the parity rebuilds. */
	CHECK_RC(mark(&f, ino, l, 0), 0);
	CHECK_RC(mark(&f, ino, l, 4), 0);
	CHECK_RC(mark(&f, ino, l, 1), -EINVAL);
	CHECK_RC(mark(&f, ino, l, 5), -EINVAL);
	CHECK_RC(mark(&f, ino, l, 0), 0); /* a resend: as it was */
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_mirror_mark(t, ino, 2)), -EBUSY); /* fsck's mark too */
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK_EQ(l2->layout_gen, 2);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, i == 0 || i == 4 ? LOOM_OBJ_STALE : 0);
	free(l2);
	CHECK_EQ(table_count(&f), 1);
	free(l);
	fx_fini(&f);
}

/* A writer of a 4 + 2 file that went without closing: the data objects are the truth, the
 * parity is made again from them. */
static void test_ec_abandoned(void)
{
	struct fx f;
	struct lw_layout req = ec_req(4, 2);
	struct loom_layout *l2;
	struct mdt_txn *t;
	uint64_t ino;
	uint32_t marked;

	fx_init(&f);
	fx_add_osts(&f, 6);
	free(create_get(&f, &root_cr, LOOM_ROOT_INO, "ec", &req, &ino));
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_write_begin(t, ino)), 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(l2->flags & LOOM_LAYOUT_WRITE_PENDING);
	free(l2);
	CHECK_EQ(table_count(&f), 1);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_abandoned(t, ino, &marked)), 0);
	CHECK_EQ(marked, 2);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(!(l2->flags & LOOM_LAYOUT_WRITE_PENDING));
	CHECK_EQ(l2->layout_gen, 1);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, i >= 4 ? LOOM_OBJ_STALE : 0);
	free(l2);
	CHECK_EQ(table_count(&f), 1);
	/* Not write-pending (any more): nothing to do. */
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_abandoned(t, ino, &marked)), 0);
	CHECK_EQ(marked, 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK_EQ(l2->layout_gen, 1);
	free(l2);
	fx_fini(&f);
}

/* The same with data object 1 stale already: the parity is all that gives its bytes back, so
 * nothing more is marked (every other object stays in sync). */
static void test_ec_abandoned_data_stale(void)
{
	struct fx f;
	struct lw_layout req = ec_req(4, 2);
	struct loom_layout *l, *l2;
	struct mdt_txn *t;
	uint64_t ino;
	uint32_t marked;

	fx_init(&f);
	fx_add_osts(&f, 6);
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "ec", &req, &ino);
	REQUIRE_RC(mark(&f, ino, l, 1), 0);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_write_begin(t, ino)), 0);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_mirror_abandoned(t, ino, &marked)), 0);
	CHECK_EQ(marked, 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(!(l2->flags & LOOM_LAYOUT_WRITE_PENDING));
	CHECK_EQ(l2->layout_gen, 2);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, i == 1 ? LOOM_OBJ_STALE : 0);
	free(l2);
	CHECK_EQ(table_count(&f), 1);
	free(l);
	fx_fini(&f);
}

static int ec_cut(struct fx *f, uint64_t ino, uint64_t cut, struct loom_layout **l)
{
	struct mdt_txn *t;

	REQUIRE_RC(fx_getlayout(f, ino, l), 0);
	t = fx_op_begin(f);
	return fx_op_end(f, t, mdt_ec_cut(t, ino, *l, cut));
}

/* A cut of a 4 + 2 file (1 MiB stripes, 4 MiB rows): inside a row its parity is stale (a new
 * generation); at a row's boundary nothing changes; with a data object stale, -EBUSY. */
static void test_ec_cut(void)
{
	struct fx f;
	struct lw_layout req = ec_req(4, 2);
	struct loom_layout *l, *l2;
	struct lw_setattr sa;
	uint64_t ino, ino2;

	fx_init(&f);
	fx_add_osts(&f, 6);
	free(create_get(&f, &root_cr, LOOM_ROOT_INO, "ec", &req, &ino));
	CHECK_RC(ec_cut(&f, ino, 8u << 20, &l), 0);
	CHECK_EQ(l->layout_gen, 0);
	free(l);
	CHECK_RC(ec_cut(&f, ino, 0, &l), 0);
	free(l);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	check_ec(l2, 4, 2);
	CHECK_EQ(l2->layout_gen, 0);
	free(l2);
	CHECK_EQ(table_count(&f), 0);

	CHECK_RC(ec_cut(&f, ino, (5u << 20) + 3, &l), 0);
	CHECK_EQ(l->layout_gen, 1);
	free(l);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK_EQ(l2->layout_gen, 1);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, i >= 4 ? LOOM_OBJ_STALE : 0);
	free(l2);
	CHECK_EQ(table_count(&f), 1);
	/* Again inside a row: the parity is stale already, nothing changes. */
	CHECK_RC(ec_cut(&f, ino, 1u << 20, &l), 0);
	CHECK_EQ(l->layout_gen, 1);
	free(l);

	/* A data object stale: the parity is what gives its bytes back; cut after the rebuild. */
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "ec2", &req, &ino2);
	REQUIRE_RC(mark(&f, ino2, l, 2), 0);
	free(l);
	CHECK_RC(ec_cut(&f, ino2, (1u << 20) + 1, &l), -EBUSY);
	free(l);
	CHECK_RC(ec_cut(&f, ino2, 4u << 20, &l), 0); /* a boundary: nothing to do */
	free(l);
	REQUIRE_RC(fx_getlayout(&f, ino2, &l2), 0);
	CHECK_EQ(l2->layout_gen, 1);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, i == 2 ? LOOM_OBJ_STALE : 0);
	free(l2);

	/* The way the MDS gets there: a truncate. To 10 MiB (from nothing), to 4 MiB (a boundary),
	 * to 3 MiB (inside row 0); of the second file, refused. */
	memset(&sa, 0, sizeof(sa));
	sa.valid = LW_SA_SIZE;
	sa.ino = ino2;
	sa.size = 3u << 20;
	REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0); /* from 0: no objects to cut */
	sa.size = 1u << 20;
	CHECK_RC(fx_setattr(&f, &root_cr, &sa, NULL), -EBUSY);
	free(create_get(&f, &root_cr, LOOM_ROOT_INO, "ec3", &req, &ino));
	sa.ino = ino;
	sa.size = 10u << 20;
	REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0);
	sa.size = 4u << 20;
	REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK_EQ(l2->layout_gen, 0);
	CHECK(l2->objs[4].flags == 0 && l2->objs[5].flags == 0);
	free(l2);
	sa.size = 3u << 20;
	REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0);
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK_EQ(l2->layout_gen, 1);
	for (uint32_t i = 0; i < l2->nobjs; i++)
		CHECK_EQ(l2->objs[i].flags, i >= 4 ? LOOM_OBJ_STALE : 0);
	free(l2);
	fx_fini(&f);
}

/* Copies are not added to, or split off, an erasure-coded file (OSTs enough for a copy). */
static void test_ec_extend_split(void)
{
	struct fx f;
	struct lw_layout req = ec_req(4, 2);
	struct loom_layout *l, *l2, *out = NULL;
	struct mdt_txn *t;
	uint64_t ino;

	fx_init(&f);
	fx_add_osts(&f, 10);
	l = create_get(&f, &root_cr, LOOM_ROOT_INO, "ec", &req, &ino);
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_mirror_extend(t, ino, &out)), -EINVAL);
	CHECK(out == NULL);
	for (uint32_t i = 0; i < l->nobjs; i++) {
		t = fx_op_begin(&f);
		CHECK_RC(fx_op_end(&f, t, mdt_mirror_split(t, ino, l->objs[i].ost_idx, l->objs[i].objid, &out)),
			 -EINVAL);
		CHECK(out == NULL);
	}
	REQUIRE_RC(fx_getlayout(&f, ino, &l2), 0);
	CHECK(memcmp(l, l2, sizeof(*l) + l->nobjs * sizeof(l->objs[0])) == 0);
	free(l2);
	free(l);
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_fs_default);
	RUN(test_dir_default);
	RUN(test_setlayout_dir);
	RUN(test_setlayout_file);
	RUN(test_orphan_release_destroy);
	RUN(test_rename_victim_release);
	RUN(test_mirrors);
	RUN(test_ec_dir_default);
	RUN(test_ec_stale);
	RUN(test_ec_abandoned);
	RUN(test_ec_abandoned_data_stale);
	RUN(test_ec_cut);
	RUN(test_ec_extend_split);
	return check_report();
}
