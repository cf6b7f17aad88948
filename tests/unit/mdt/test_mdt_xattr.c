/* Extended attributes through the store. */
#include <sys/stat.h>

#include "fixture.h"

static struct loom_cred root_cr;

static int get(struct fx *f, const struct loom_cred *cr, uint64_t ino, const char *name,
	       char *buf, size_t cap, size_t *len)
{
	struct mdt_txn *t = fx_read_begin(f);
	int rc = mdt_getxattr(t, cr, ino, name, strlen(name), buf, cap, len);

	mdt_txn_abort(t);
	return rc;
}

static int list(struct fx *f, const struct loom_cred *cr, uint64_t ino, char *buf, size_t cap,
		size_t *len)
{
	struct mdt_txn *t = fx_read_begin(f);
	int rc = mdt_listxattr(t, cr, ino, buf, cap, len);

	mdt_txn_abort(t);
	return rc;
}

static int removex(struct fx *f, const struct loom_cred *cr, uint64_t ino, const char *name)
{
	struct mdt_txn *t = fx_op_begin(f);
	int rc = mdt_removexattr(t, cr, ino, name, strlen(name), fx_tick(f));

	return fx_op_end(f, t, rc);
}

static void test_basic(void)
{
	struct fx f;
	struct loom_cred owner = fx_cred(1000, 100, 0);
	char buf[128];
	struct lw_attr a;
	uint64_t file;
	size_t len;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "f", 0644, &file), 0);
	{
		struct lw_setattr sa = { .ino = file, .valid = LW_SA_UID | LW_SA_GID, .uid = 1000, .gid = 100 };
		REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0);
	}
	REQUIRE_RC(fx_setxattr(&f, &owner, file, "user.color", "blue", 0), 0);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.ctime, f.now.tv_sec);
	REQUIRE_RC(get(&f, &owner, file, "user.color", buf, sizeof(buf), &len), 0);
	CHECK(len == 4 && memcmp(buf, "blue", 4) == 0);
	/* a size query, then too small a buffer */
	len = 0;
	REQUIRE_RC(get(&f, &owner, file, "user.color", NULL, 0, &len), 0);
	CHECK_EQ(len, 4);
	CHECK_RC(get(&f, &owner, file, "user.color", buf, 3, &len), -ERANGE);
	CHECK_RC(get(&f, &owner, file, "user.none", buf, sizeof(buf), &len), -ENODATA);
	CHECK_RC(get(&f, &owner, 7777, "user.color", buf, sizeof(buf), &len), -ENOENT);
	/* replace, create flags */
	CHECK_RC(fx_setxattr(&f, &owner, file, "user.color", "red", LW_XATTR_CREATE), -EEXIST);
	CHECK_RC(fx_setxattr(&f, &owner, file, "user.size", "1", LW_XATTR_REPLACE), -ENODATA);
	CHECK_RC(fx_setxattr(&f, &owner, file, "user.color", "red", LW_XATTR_REPLACE), 0);
	CHECK_RC(fx_setxattr(&f, &owner, file, "user.size", "1", LW_XATTR_CREATE), 0);
	CHECK_RC(fx_setxattr(&f, &owner, file, "user.x", "1", 4), -EINVAL);
	REQUIRE_RC(get(&f, &owner, file, "user.color", buf, sizeof(buf), &len), 0);
	CHECK(len == 3 && memcmp(buf, "red", 3) == 0);
	/* an empty value is a value */
	REQUIRE_RC(fx_setxattr(&f, &owner, file, "user.empty", "", 0), 0);
	REQUIRE_RC(get(&f, &owner, file, "user.empty", buf, sizeof(buf), &len), 0);
	CHECK_EQ(len, 0);
	/* list */
	REQUIRE_RC(list(&f, &owner, file, buf, sizeof(buf), &len), 0);
	CHECK_EQ(len, sizeof("user.color") + sizeof("user.empty") + sizeof("user.size"));
	CHECK(memcmp(buf, "user.color\0user.empty\0user.size\0", len) == 0);
	REQUIRE_RC(list(&f, &owner, file, NULL, 0, &len), 0);
	CHECK_EQ(len, 32);
	CHECK_RC(list(&f, &owner, file, buf, 10, &len), -ERANGE);
	/* remove */
	REQUIRE_RC(removex(&f, &owner, file, "user.size"), 0);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.ctime, f.now.tv_sec);
	CHECK_RC(removex(&f, &owner, file, "user.size"), -ENODATA);
	CHECK_RC(get(&f, &owner, file, "user.size", buf, sizeof(buf), &len), -ENODATA);
	/* names */
	CHECK_RC(fx_setxattr(&f, &owner, file, "user.", "1", 0), -EINVAL);
	CHECK_RC(fx_setxattr(&f, &owner, file, "nope.x", "1", 0), -EOPNOTSUPP);
	CHECK_RC(get(&f, &owner, file, "os2.x", buf, sizeof(buf), &len), -EOPNOTSUPP);
	CHECK_RC(fx_setxattr(&f, &owner, file, "", "1", 0), -EINVAL);
	fx_fini(&f);
}

static void test_sizes(void)
{
	struct fx f;
	static char big[LOOM_XATTR_SIZE_MAX + 1], back[LOOM_XATTR_SIZE_MAX];
	char name[LOOM_XATTR_NAME_MAX + 2];
	struct mdt_txn *t;
	uint64_t file;
	size_t len;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &file), 0);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)(i * 31 + 7);
	t = fx_op_begin(&f);
	CHECK_RC(mdt_setxattr(t, &root_cr, file, "user.big", 8, big, LOOM_XATTR_SIZE_MAX, 0, f.now), 0);
	CHECK_RC(mdt_setxattr(t, &root_cr, file, "user.big2", 9, big, LOOM_XATTR_SIZE_MAX + 1, 0, f.now),
		 -E2BIG);
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	CHECK_RC(mdt_setxattr(t, &root_cr, file, name, LOOM_XATTR_NAME_MAX, "v", 1, 0, f.now), 0);
	CHECK_RC(mdt_setxattr(t, &root_cr, file, name, LOOM_XATTR_NAME_MAX + 1, "v", 1, 0, f.now),
		 -ERANGE);
	REQUIRE_RC(fx_op_end(&f, t, 0), 0);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_getxattr(t, &root_cr, file, "user.big", 8, back, sizeof(back), &len), 0);
	CHECK_EQ(len, LOOM_XATTR_SIZE_MAX);
	CHECK(memcmp(back, big, len) == 0);
	REQUIRE_RC(mdt_getxattr(t, &root_cr, file, name, LOOM_XATTR_NAME_MAX, back, sizeof(back),
				&len), 0);
	CHECK_EQ(len, 1);
	mdt_txn_abort(t);
	fx_fini(&f);
}

static void test_namespaces(void)
{
	struct fx f;
	struct loom_cred owner = fx_cred(1000, 100, 0), other = fx_cred(2000, 200, 0);
	char buf[256];
	uint64_t file, sym, fifo;
	size_t len;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, NULL), 0);
	REQUIRE_RC(fx_create(&f, &owner, fx_ino(&f, LOOM_ROOT_INO, "d"), "f", 0644, &file), 0);
	REQUIRE_RC(fx_symlink(&f, &owner, fx_ino(&f, LOOM_ROOT_INO, "d"), "s", "f", &sym), 0);
	REQUIRE_RC(fx_create(&f, &owner, fx_ino(&f, LOOM_ROOT_INO, "d"), "p", S_IFIFO | 0666, &fifo), 0);

	/* user.*: permission bits of the file */
	REQUIRE_RC(fx_setxattr(&f, &owner, file, "user.a", "1", 0), 0);
	CHECK_RC(fx_setxattr(&f, &other, file, "user.a", "2", 0), -EACCES);
	CHECK_RC(get(&f, &other, file, "user.a", buf, sizeof(buf), &len), 0);
	CHECK_RC(removex(&f, &other, file, "user.a"), -EACCES);
	/* ...and only on files and directories */
	CHECK_RC(fx_setxattr(&f, &owner, sym, "user.a", "1", 0), -EPERM);
	CHECK_RC(fx_setxattr(&f, &owner, fifo, "user.a", "1", 0), -EPERM);
	CHECK_RC(get(&f, &owner, sym, "user.a", buf, sizeof(buf), &len), -ENODATA);
	/* trusted.*: root's, hidden from others' lists */
	CHECK_RC(fx_setxattr(&f, &owner, file, "trusted.t", "1", 0), -EPERM);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, file, "trusted.t", "1", 0), 0);
	CHECK_RC(get(&f, &owner, file, "trusted.t", buf, sizeof(buf), &len), -ENODATA);
	CHECK_RC(get(&f, &root_cr, file, "trusted.t", buf, sizeof(buf), &len), 0);
	CHECK_RC(removex(&f, &owner, file, "trusted.t"), -EPERM);
	/* security.*: root writes, anyone reads */
	CHECK_RC(fx_setxattr(&f, &owner, file, "security.s", "1", 0), -EPERM);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, file, "security.s", "lbl", 0), 0);
	CHECK_RC(get(&f, &other, file, "security.s", buf, sizeof(buf), &len), 0);
	/* system.* (POSIX ACLs) is not supported, for anyone */
	CHECK_RC(fx_setxattr(&f, &root_cr, file, "system.posix_acl_access", "x", 0), -EOPNOTSUPP);
	CHECK_RC(get(&f, &owner, file, "system.posix_acl_access", buf, sizeof(buf), &len), -EOPNOTSUPP);
	/* lists */
	REQUIRE_RC(list(&f, &owner, file, buf, sizeof(buf), &len), 0);
	CHECK(len == sizeof("security.s") + sizeof("user.a"));
	CHECK(memcmp(buf, "security.s\0user.a\0", len) == 0);
	REQUIRE_RC(list(&f, &root_cr, file, buf, sizeof(buf), &len), 0);
	CHECK(memmem(buf, len, "trusted.t", 10) != NULL);
	/* lists need no permission at all */
	REQUIRE_RC(list(&f, &other, file, buf, sizeof(buf), &len), 0);
	CHECK_RC(list(&f, &other, 5555, buf, sizeof(buf), &len), -ENOENT);
	fx_fini(&f);
}

/* Unlinked and released, or removed: the xattrs go with the inode. */
static void test_gone_with_inode(void)
{
	struct fx f;
	char buf[64];
	uint64_t file, file2;
	size_t len;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "f", 0644, &file), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "g", 0644, &file2), 0);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, file, "user.a", "1", 0), 0);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, file, "user.b", "1", 0), 0);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, file2, "user.c", "1", 0), 0);
	REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, "f", NULL), 0);
	REQUIRE_RC(get(&f, &root_cr, file, "user.a", buf, sizeof(buf), &len), 0); /* still open */
	REQUIRE_RC(fx_release(&f, file), 0);
	CHECK_RC(get(&f, &root_cr, file, "user.a", buf, sizeof(buf), &len), -ENOENT);
	/* the neighbour's are untouched */
	CHECK_RC(get(&f, &root_cr, file2, "user.c", buf, sizeof(buf), &len), 0);
	REQUIRE_RC(list(&f, &root_cr, file2, buf, sizeof(buf), &len), 0);
	CHECK_EQ(len, 7);
	fx_fini(&f);
}

/* Attributes say when an inode has no extended attributes (clients answer getxattr of such an
 * inode themselves): from creation until the first setxattr, and not again after it. */
static void test_no_xattrs_flag(void)
{
	struct fx f;
	struct lw_attr a;
	uint64_t file, dir;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "f", 0644, &file), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &dir), 0);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK(a.flags & LW_ATTR_F_NO_XATTRS);
	REQUIRE_RC(fx_getattr(&f, dir, &a), 0);
	CHECK(a.flags & LW_ATTR_F_NO_XATTRS);
	/* A failed set changes nothing. */
	CHECK_RC(fx_setxattr(&f, &root_cr, file, "user.x", "1", LW_XATTR_REPLACE), -ENODATA);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK(a.flags & LW_ATTR_F_NO_XATTRS);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, file, "user.x", "1", 0), 0);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK(!(a.flags & LW_ATTR_F_NO_XATTRS));
	REQUIRE_RC(removex(&f, &root_cr, file, "user.x"), 0);
	fx_reopen(&f);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK(!(a.flags & LW_ATTR_F_NO_XATTRS)); /* "may have some": the safe answer */
	/* The root, made at format, says nothing. */
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &a), 0);
	CHECK(a.flags == 0 || (a.flags & LW_ATTR_F_NO_XATTRS));
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_basic);
	RUN(test_sizes);
	RUN(test_namespaces);
	RUN(test_gone_with_inode);
	RUN(test_no_xattrs_flag);
	return check_report();
}
