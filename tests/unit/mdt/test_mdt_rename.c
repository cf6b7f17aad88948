/* rename(2) and renameat2(2) edge cases. */
#include <sys/stat.h>

#include "fixture.h"

static struct loom_cred root_cr;

static uint32_t nlink_of(struct fx *f, uint64_t ino)
{
	struct lw_attr a;

	REQUIRE_RC(fx_getattr(f, ino, &a), 0);
	return a.nlink;
}

static uint64_t dotdot(struct fx *f, uint64_t dir)
{
	return fx_ino(f, dir, "..");
}

static bool exists(struct fx *f, uint64_t dir, const char *name)
{
	struct lw_attr a;

	return fx_lookup(f, &root_cr, dir, name, &a) == 0;
}

static void test_simple(void)
{
	struct fx f;
	struct mdt_unlinked v;
	struct lw_attr a, p;
	uint64_t d, file;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "a", 0644, &file), 0);
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "a", d, "b", 0, &v), 0);
	CHECK_EQ(v.ino, 0);
	CHECK(!exists(&f, d, "a"));
	CHECK_EQ(fx_ino(&f, d, "b"), file);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.ctime, f.now.tv_sec); /* the moved inode's ctime */
	CHECK_EQ(a.nlink, 1);
	REQUIRE_RC(fx_getattr(&f, d, &p), 0);
	CHECK_EQ(p.mtime, f.now.tv_sec);
	CHECK_EQ(p.nlink, 2);
	/* to the same name: nothing to do */
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "b", d, "b", 0, &v), 0);
	CHECK_EQ(fx_ino(&f, d, "b"), file);
	/* errors on the way in */
	CHECK_RC(fx_rename(&f, &root_cr, d, "nope", d, "x", 0, &v), -ENOENT);
	CHECK_RC(fx_rename(&f, &root_cr, 4444, "b", d, "x", 0, &v), -ENOENT);
	CHECK_RC(fx_rename(&f, &root_cr, d, "b", 4444, "x", 0, &v), -ENOENT);
	CHECK_RC(fx_rename(&f, &root_cr, file, "b", d, "x", 0, &v), -ENOTDIR);
	CHECK_RC(fx_rename(&f, &root_cr, d, "b", file, "x", 0, &v), -ENOTDIR);
	CHECK_RC(fx_rename(&f, &root_cr, d, ".", d, "x", 0, &v), -EBUSY);
	CHECK_RC(fx_rename(&f, &root_cr, d, "..", d, "x", 0, &v), -EBUSY);
	CHECK_RC(fx_rename(&f, &root_cr, d, "b", d, ".", 0, &v), -EBUSY);
	CHECK_RC(fx_rename(&f, &root_cr, d, "b", d, "..", LW_RENAME_NOREPLACE, &v), -EEXIST);
	CHECK_RC(fx_rename(&f, &root_cr, d, "b", d, "x", LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE, &v),
		 -EINVAL);
	CHECK_RC(fx_rename(&f, &root_cr, d, "b", d, "x", 0x10, &v), -EINVAL);
	CHECK_EQ(fx_ino(&f, d, "b"), file);
	fx_fini(&f);
}

static void test_over_file(void)
{
	struct fx f;
	struct mdt_unlinked v;
	struct lw_attr a;
	uint64_t d, a_ino, b_ino, c_ino;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "a", 0644, &a_ino), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "b", 0644, &b_ino), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "c", 0644, &c_ino), 0);
	REQUIRE_RC(fx_link(&f, &root_cr, c_ino, d, "c2"), 0);

	REQUIRE_RC(fx_rename(&f, &root_cr, d, "a", d, "b", 0, &v), 0);
	CHECK_EQ(v.ino, b_ino);
	CHECK_EQ(v.nlink, 0);
	CHECK_EQ(v.mode, S_IFREG | 0644);
	CHECK_EQ(fx_ino(&f, d, "b"), a_ino);
	CHECK(!exists(&f, d, "a"));
	REQUIRE_RC(fx_getattr(&f, b_ino, &a), 0); /* an orphan until released */
	CHECK_EQ(a.nlink, 0);
	/* over one of two hard links */
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "b", d, "c2", 0, &v), 0);
	CHECK_EQ(v.ino, c_ino);
	CHECK_EQ(v.nlink, 1);
	CHECK_EQ(nlink_of(&f, c_ino), 1);
	/* noreplace */
	CHECK_RC(fx_rename(&f, &root_cr, d, "c", d, "c2", LW_RENAME_NOREPLACE, &v), -EEXIST);
	CHECK_RC(fx_rename(&f, &root_cr, d, "c", d, "new", LW_RENAME_NOREPLACE, &v), 0);
	CHECK_EQ(fx_ino(&f, d, "new"), c_ino);
	fx_fini(&f);
}

/* Two names of one inode: rename is a no-op and both stay. */
static void test_same_inode(void)
{
	struct fx f;
	struct mdt_unlinked v;
	uint64_t d, d2, file;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d2", 0755, &d2), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "a", 0644, &file), 0);
	REQUIRE_RC(fx_link(&f, &root_cr, file, d, "b"), 0);
	REQUIRE_RC(fx_link(&f, &root_cr, file, d2, "c"), 0);
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "a", d, "b", 0, &v), 0);
	CHECK_EQ(v.ino, 0);
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "a", d2, "c", 0, &v), 0);
	CHECK(exists(&f, d, "a") && exists(&f, d, "b") && exists(&f, d2, "c"));
	CHECK_EQ(nlink_of(&f, file), 3);
	/* even without write permission anywhere, as Linux returns before checking */
	{
		struct loom_cred user = fx_cred(1000, 1000, 0);
		CHECK_RC(fx_rename(&f, &user, d, "a", d, "b", 0, &v), 0);
		CHECK_RC(fx_rename(&f, &user, d, "a", d, "x", 0, &v), -EACCES);
	}
	fx_fini(&f);
}

static void test_dirs(void)
{
	struct fx f;
	struct mdt_unlinked v;
	struct lw_attr a;
	uint64_t A, B, sub, empty, full, file;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "A", 0755, &A), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "B", 0755, &B), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, A, "sub", 0755, &sub), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, B, "empty", 0755, &empty), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, B, "full", 0755, &full), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, full, "x", 0644, NULL), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, B, "file", 0644, &file), 0);
	CHECK_EQ(nlink_of(&f, A), 3);
	CHECK_EQ(nlink_of(&f, B), 4);

	/* type mismatches and non-empty targets */
	CHECK_RC(fx_rename(&f, &root_cr, A, "sub", B, "file", 0, &v), -ENOTDIR);
	CHECK_RC(fx_rename(&f, &root_cr, B, "file", B, "empty", 0, &v), -EISDIR);
	CHECK_RC(fx_rename(&f, &root_cr, A, "sub", B, "full", 0, &v), -ENOTEMPTY);

	/* across parents: "..", both link counts */
	REQUIRE_RC(fx_rename(&f, &root_cr, A, "sub", B, "moved", 0, &v), 0);
	CHECK_EQ(v.ino, 0);
	CHECK_EQ(dotdot(&f, sub), B);
	CHECK_EQ(nlink_of(&f, A), 2);
	CHECK_EQ(nlink_of(&f, B), 5);
	CHECK_EQ(nlink_of(&f, sub), 2);
	REQUIRE_RC(fx_getattr(&f, sub, &a), 0);
	CHECK_EQ(a.ctime, f.now.tv_sec);

	/* over an empty directory: it goes at once */
	REQUIRE_RC(fx_rename(&f, &root_cr, B, "moved", B, "empty", 0, &v), 0);
	CHECK_EQ(v.ino, empty);
	CHECK_EQ(v.nlink, 0);
	CHECK(S_ISDIR(v.mode));
	CHECK_RC(fx_getattr(&f, empty, &a), -ENOENT);
	CHECK_EQ(fx_ino(&f, B, "empty"), sub);
	CHECK_EQ(nlink_of(&f, B), 4);
	/* over an empty directory in another parent */
	REQUIRE_RC(fx_mkdir(&f, &root_cr, A, "target", 0755, NULL), 0);
	CHECK_EQ(nlink_of(&f, A), 3);
	REQUIRE_RC(fx_rename(&f, &root_cr, B, "empty", A, "target", 0, &v), 0);
	CHECK_EQ(nlink_of(&f, A), 3);
	CHECK_EQ(nlink_of(&f, B), 3);
	CHECK_EQ(dotdot(&f, sub), A);
	fx_fini(&f);
}

static void test_subtree(void)
{
	struct fx f;
	struct mdt_unlinked v;
	uint64_t a, b, c;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "a", 0755, &a), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, a, "b", 0755, &b), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, b, "c", 0755, &c), 0);
	/* a directory into its own subtree, or into itself */
	CHECK_RC(fx_rename(&f, &root_cr, LOOM_ROOT_INO, "a", c, "a", 0, &v), -EINVAL);
	CHECK_RC(fx_rename(&f, &root_cr, LOOM_ROOT_INO, "a", a, "x", 0, &v), -EINVAL);
	CHECK_RC(fx_rename(&f, &root_cr, a, "b", c, "x", 0, &v), -EINVAL);
	/* onto one of its own ancestors: that one is not empty */
	CHECK_RC(fx_rename(&f, &root_cr, b, "c", LOOM_ROOT_INO, "a", 0, &v), -ENOTEMPTY);
	CHECK_RC(fx_rename(&f, &root_cr, b, "c", LOOM_ROOT_INO, "a", LW_RENAME_EXCHANGE, &v), -EINVAL);
	CHECK_RC(fx_rename(&f, &root_cr, LOOM_ROOT_INO, "a", b, "c", LW_RENAME_EXCHANGE, &v), -EINVAL);
	/* nothing moved */
	CHECK_EQ(fx_ino(&f, LOOM_ROOT_INO, "a"), a);
	CHECK_EQ(fx_ino(&f, b, "c"), c);
	/* the other way round is fine: c up to the root */
	REQUIRE_RC(fx_rename(&f, &root_cr, b, "c", LOOM_ROOT_INO, "c", 0, &v), 0);
	CHECK_EQ(dotdot(&f, c), LOOM_ROOT_INO);
	CHECK_EQ(nlink_of(&f, LOOM_ROOT_INO), 4);
	CHECK_EQ(nlink_of(&f, b), 2);
	/* and a into c (a sibling subtree) */
	REQUIRE_RC(fx_rename(&f, &root_cr, LOOM_ROOT_INO, "a", c, "a", 0, &v), 0);
	CHECK_EQ(dotdot(&f, a), c);
	CHECK_EQ(nlink_of(&f, c), 3);
	fx_fini(&f);
}

static void test_exchange(void)
{
	struct fx f;
	struct mdt_unlinked v;
	uint64_t A, B, file, dir;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "A", 0755, &A), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "B", 0755, &B), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, A, "file", 0644, &file), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, B, "dir", 0755, &dir), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, dir, "inside", 0644, NULL), 0);

	CHECK_RC(fx_rename(&f, &root_cr, A, "file", B, "missing", LW_RENAME_EXCHANGE, &v), -ENOENT);
	CHECK_RC(fx_rename(&f, &root_cr, A, "missing", B, "dir", LW_RENAME_EXCHANGE, &v), -ENOENT);
	/* a file and a (non-empty) directory across parents swap */
	REQUIRE_RC(fx_rename(&f, &root_cr, A, "file", B, "dir", LW_RENAME_EXCHANGE, &v), 0);
	CHECK_EQ(v.ino, 0);
	CHECK_EQ(fx_ino(&f, A, "file"), dir);
	CHECK_EQ(fx_ino(&f, B, "dir"), file);
	CHECK_EQ(dotdot(&f, dir), A);
	CHECK_EQ(nlink_of(&f, A), 3);
	CHECK_EQ(nlink_of(&f, B), 2);
	CHECK_EQ(nlink_of(&f, file), 1);
	CHECK(exists(&f, dir, "inside"));
	/* in one directory */
	REQUIRE_RC(fx_create(&f, &root_cr, A, "other", 0600, NULL), 0);
	REQUIRE_RC(fx_rename(&f, &root_cr, A, "file", A, "other", LW_RENAME_EXCHANGE, &v), 0);
	CHECK_EQ(fx_ino(&f, A, "other"), dir);
	CHECK_EQ(nlink_of(&f, A), 3);
	fx_fini(&f);
}

static void test_perm(void)
{
	struct fx f;
	struct loom_cred alice = fx_cred(1000, 1000, 0), bob = fx_cred(2000, 2000, 0);
	struct mdt_unlinked v;
	uint64_t shared, ro, adir, own_dir;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "shared", 0777, &shared), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "ro", 0755, &ro), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, ro, "rootfile", 0644, NULL), 0);
	REQUIRE_RC(fx_mkdir(&f, &alice, shared, "adir", 0555, &adir), 0);
	REQUIRE_RC(fx_mkdir(&f, &bob, shared, "bdir", 0755, &own_dir), 0);
	REQUIRE_RC(fx_create(&f, &alice, shared, "afile", 0644, NULL), 0);

	/* write permission on the source's parent, then on the target's */
	CHECK_RC(fx_rename(&f, &alice, ro, "rootfile", shared, "x", 0, &v), -EACCES);
	CHECK_RC(fx_rename(&f, &alice, shared, "afile", ro, "x", 0, &v), -EACCES);
	CHECK_RC(fx_rename(&f, &alice, shared, "afile", ro, "rootfile", 0, &v), -EACCES);
	/* moving a directory to another parent rewrites its "..": it must be writable */
	CHECK_RC(fx_rename(&f, &bob, shared, "adir", own_dir, "adir", 0, &v), -EACCES);
	CHECK_RC(fx_rename(&f, &alice, shared, "adir", own_dir, "adir", 0, &v), -EACCES); /* bdir 0755 */
	/* within one parent it need not be */
	CHECK_RC(fx_rename(&f, &bob, shared, "adir", shared, "adir2", 0, &v), 0);
	/* root may do all of it */
	CHECK_RC(fx_rename(&f, &root_cr, shared, "adir2", own_dir, "adir", 0, &v), 0);
	CHECK_EQ(dotdot(&f, adir), own_dir);
	/* a file needs no permission on itself */
	CHECK_RC(fx_rename(&f, &bob, shared, "afile", own_dir, "afile", 0, &v), 0);
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_simple);
	RUN(test_over_file);
	RUN(test_same_inode);
	RUN(test_dirs);
	RUN(test_subtree);
	RUN(test_exchange);
	RUN(test_perm);
	return check_report();
}
