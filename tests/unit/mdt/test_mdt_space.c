/* The MDT's space (space.c): a full map answers ENOSPC to what grows, and leaves its reserve to
 * what frees space, so that emptying a full MDT always works. The disk side (the reserve held in
 * the data file) needs a small file system: tests/integration/test_full_mdt.py. */
#include <errno.h>
#include <stdio.h>

#include "fixture.h"

#define MAP     (1u << 20)   /* 256 pages */
#define RESERVE (128u << 10)

static void small_map(struct fx *f, uint64_t reserve)
{
	fx_init(f);
	REQUIRE_RC(mdt_store_set_map_size(f->s, MAP), 0);
	mdt_store_set_reserve(f->s, reserve);
	fx_add_osts(f, 1); /* a file needs an OST for its stripe */
}

/* Creates f00000, f00001, ... each in a transaction of its own until one fails: how many fit. */
static int fill(struct fx *f, int *rc_out)
{
	struct loom_cred root = fx_root();
	int n, rc = 0;

	for (n = 0; n < 100000; n++) {
		char name[16];

		snprintf(name, sizeof(name), "f%05d", n);
		rc = fx_create(f, &root, LOOM_ROOT_INO, name, 0644, NULL);
		if (rc)
			break;
	}
	*rc_out = rc;
	return n;
}

static struct lw_statfs statfs_now(struct fx *f)
{
	struct lw_statfs sf;
	struct mdt_txn *t = fx_read_begin(f);

	REQUIRE_RC(mdt_statfs(t, &sf), 0);
	mdt_txn_abort(t);
	return sf;
}

static void test_space_of_a_small_map(void)
{
	struct mdt_space sp;
	struct fx f;

	small_map(&f, RESERVE);
	REQUIRE_RC(mdt_space(f.s, &sp), 0);
	CHECK_EQ(sp.map_size, MAP);
	CHECK(sp.map_bound);          /* /tmp has more than a MiB */
	CHECK_EQ(sp.in_use + sp.room, MAP);
	CHECK_EQ(sp.reserve, RESERVE);
	CHECK(sp.in_use > 0 && sp.room > RESERVE);
	/* statfs: the map as the total, the reserve in bfree but not in bavail. */
	struct lw_statfs sf = statfs_now(&f);
	CHECK_EQ(sf.blocks * sf.bsize, MAP);
	CHECK_EQ((sf.bfree - sf.bavail) * sf.bsize, RESERVE);
	CHECK(sf.ffree > 0);
	/* A map smaller than what the MDT holds stays as large as that. */
	CHECK_RC(mdt_store_set_map_size(f.s, 64 * sp.page_size), 0);
	REQUIRE_RC(mdt_space(f.s, &sp), 0);
	CHECK(sp.map_size >= sp.in_use);
	CHECK_RC(mdt_store_set_map_size(f.s, 4096), -EINVAL);
	fx_fini(&f);
}

/* The map fills: creates and the rest of what grows get ENOSPC; every file can still be deleted,
 * and then created again, without reopening. */
static void test_full_map_empties_and_fills_again(void)
{
	struct loom_cred root = fx_root();
	struct lw_statfs sf;
	struct fx f;
	uint64_t ino;
	int n, again, rc;

	small_map(&f, RESERVE);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "keep", 0755, NULL), 0);
	REQUIRE_RC(fx_create(&f, &root, LOOM_ROOT_INO, "x", 0644, &ino), 0);
	REQUIRE_RC(fx_setxattr(&f, &root, ino, "user.k", "before", 0), 0);
	n = fill(&f, &rc);
	CHECK_RC(rc, -ENOSPC);
	CHECK(n > 100);
	sf = statfs_now(&f);
	CHECK_EQ(sf.bavail, 0);
	CHECK_EQ(sf.ffree, 0);
	CHECK(sf.bfree > 0);          /* the reserve */
	CHECK_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "d", 0755, NULL), -ENOSPC);
	CHECK_RC(fx_symlink(&f, &root, LOOM_ROOT_INO, "l", "target", NULL), -ENOSPC);
	CHECK_RC(fx_link(&f, &root, ino, LOOM_ROOT_INO, "x2"), -ENOSPC);
	CHECK_RC(fx_setxattr(&f, &root, ino, "user.big", "0123456789abcdef0123456789abcdef", 0), -ENOSPC);
	/* A value no larger than the stored one takes nothing more. */
	CHECK_RC(fx_setxattr(&f, &root, ino, "user.k", "after", 0), 0);
	/* Errors other than space come first: an existing name is EEXIST, not ENOSPC. */
	CHECK_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "keep", 0755, NULL), -EEXIST);
	/* What does not grow goes on. */
	struct lw_setattr sa = { .ino = ino, .valid = LW_SA_MODE, .mode = 0600 };
	CHECK_RC(fx_setattr(&f, &root, &sa, NULL), 0);
	CHECK_RC(fx_rename(&f, &root, LOOM_ROOT_INO, "x", LOOM_ROOT_INO, "y", 0, NULL), 0);

	for (int i = 0; i < n; i++) {
		char name[16];
		struct mdt_unlinked v;

		snprintf(name, sizeof(name), "f%05d", i);
		rc = fx_unlink(&f, &root, LOOM_ROOT_INO, name, &v);
		if (rc == 0 && v.nlink == 0)
			rc = fx_release(&f, v.ino);
		if (rc) {
			CHECK_RC(rc, 0);
			break;
		}
	}
	CHECK_RC(fx_rmdir(&f, &root, LOOM_ROOT_INO, "keep"), 0);
	sf = statfs_now(&f);
	CHECK(sf.bavail > 0);
	/* The reply cache and destroy queue are not here: about as many fit again. */
	again = fill(&f, &rc);
	CHECK_RC(rc, -ENOSPC);
	CHECK(again > n / 2);
	fx_fini(&f);
}

/* Without a reserve the map fills to the last page: still ENOSPC, never EIO. */
static void test_full_map_without_reserve_is_enospc(void)
{
	struct fx f;
	int n, rc;

	small_map(&f, 0);
	n = fill(&f, &rc);
	CHECK_RC(rc, -ENOSPC);
	CHECK(n > 100);
	fx_fini(&f);
}

/* In a batch, growth counts what the batch grew before: the request that no longer fits is told
 * to run alone (MDT_ETXNFULL), and alone, measured anew, it may. */
static void test_batch_growth_asks_for_a_commit(void)
{
	struct loom_cred root = fx_root();
	struct fx f;
	int n, rc = 0;

	small_map(&f, RESERVE);
	fx_batch_begin(&f);
	for (n = 0; n < 100000; n++) {
		char name[16];

		snprintf(name, sizeof(name), "f%05d", n);
		rc = fx_create(&f, &root, LOOM_ROOT_INO, name, 0644, NULL);
		if (rc)
			break;
	}
	CHECK_RC(rc, MDT_ETXNFULL);
	CHECK(n > 10);
	fx_batch_commit(&f);
	/* The first one alone, in a transaction of its own. */
	char name[16];
	snprintf(name, sizeof(name), "f%05d", n);
	rc = fx_create(&f, &root, LOOM_ROOT_INO, name, 0644, NULL);
	CHECK(rc == 0 || rc == -ENOSPC);
	fx_fini(&f);
}

/* Data-on-MDT: bytes beyond those stored are growth, rewriting stored ones is not. */
static void test_dom_rewrite_on_a_full_map(void)
{
	struct loom_cred root = fx_root();
	char data[4096];
	struct mdt_txn *t;
	uint64_t ino;
	struct fx f;
	int rc;

	memset(data, 'a', sizeof(data));
	small_map(&f, RESERVE);
	REQUIRE_RC(fx_create(&f, &root, LOOM_ROOT_INO, "dom", 0644, &ino), 0);
	t = fx_op_begin(&f);
	REQUIRE_RC(fx_op_end(&f, t, mdt_dom_write(t, ino, 0, data, sizeof(data))), 0);
	fill(&f, &rc);
	CHECK_RC(rc, -ENOSPC);
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_dom_write(t, ino, sizeof(data), data, sizeof(data))), -ENOSPC);
	data[0] = 'b';
	t = fx_op_begin(&f);
	CHECK_RC(fx_op_end(&f, t, mdt_dom_write(t, ino, 0, data, sizeof(data))), 0);
	fx_fini(&f);
}

int main(void)
{
	RUN(test_space_of_a_small_map);
	RUN(test_full_map_empties_and_fills_again);
	RUN(test_full_map_without_reserve_is_enospc);
	RUN(test_batch_growth_asks_for_a_commit);
	RUN(test_dom_rewrite_on_a_full_map);
	return check_report();
}
