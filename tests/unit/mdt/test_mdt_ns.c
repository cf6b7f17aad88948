/* Namespace operations: lookup, create, mkdir, symlink, readlink, link, unlink, rmdir. */
#include <sys/stat.h>

#include "fixture.h"
#include "mdt/internal.h"

static struct loom_cred root_cr;

static void test_lookup(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	struct lw_attr a;
	uint64_t d, sub, file;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0700, &sub), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "file", 0644, &file), 0);

	REQUIRE_RC(fx_lookup(&f, &user, d, "file", &a), 0);
	CHECK_EQ(a.ino, file);
	CHECK_EQ(a.mode, S_IFREG | 0644);
	REQUIRE_RC(fx_lookup(&f, &user, d, ".", &a), 0);
	CHECK_EQ(a.ino, d);
	REQUIRE_RC(fx_lookup(&f, &user, d, "..", &a), 0);
	CHECK_EQ(a.ino, LOOM_ROOT_INO);
	REQUIRE_RC(fx_lookup(&f, &root_cr, sub, "..", &a), 0);
	CHECK_EQ(a.ino, d);
	CHECK_RC(fx_lookup(&f, &user, d, "nope", &a), -ENOENT);
	CHECK_RC(fx_lookup(&f, &user, d, ".x", &a), -ENOENT);
	CHECK_RC(fx_lookup(&f, &user, file, "x", &a), -ENOTDIR);
	CHECK_RC(fx_lookup(&f, &user, 9999, "x", &a), -ENOENT);
	/* search permission on the parent, for every name including "." and ".." */
	CHECK_RC(fx_lookup(&f, &user, sub, "x", &a), -EACCES);
	CHECK_RC(fx_lookup(&f, &user, sub, ".", &a), -EACCES);
	CHECK_RC(fx_lookup(&f, &user, sub, "..", &a), -EACCES);
	CHECK_RC(fx_lookup(&f, &root_cr, sub, "x", &a), -ENOENT);
	/* names are bytes: no NUL termination needed, any byte but '/' and NUL */
	{
		struct mdt_txn *t = fx_op_begin(&f);
		const char odd[] = { 'a', (char)0xff, '\n', 'b' };
		struct lw_attr a2;
		CHECK_RC(mdt_mkdir(t, &root_cr, d, odd, sizeof(odd), 0755, fx_tick(&f), &a), 0);
		CHECK_RC(mdt_lookup(t, &root_cr, d, odd, sizeof(odd), &a2), 0);
		CHECK_EQ(a2.ino, a.ino);
		CHECK_RC(mdt_lookup(t, &root_cr, d, odd, 1, &a2), -ENOENT);
		fx_op_end(&f, t, 0);
	}
	fx_fini(&f);
}

static void test_create(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	struct lw_attr a, a2, dir;
	struct loom_layout *l = NULL;
	bool created;
	uint64_t d;

	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_create_full(&f, &user, d, "f", 0640, 0, true, NULL, &a, &l, &created), 0);
	CHECK(created);
	CHECK_EQ(a.mode, S_IFREG | 0640);
	CHECK_EQ(a.uid, 1000);
	CHECK_EQ(a.gid, 1000);
	CHECK_EQ(a.nlink, 1);
	CHECK_EQ(a.size, 0);
	CHECK_EQ(a.blocks, 0);
	CHECK_EQ(a.gen, 1);
	CHECK_EQ(a.blksize, 4u << 20); /* the stripe size */
	CHECK_EQ(a.atime, f.now.tv_sec);
	CHECK_EQ(a.mtime, f.now.tv_sec);
	CHECK_EQ(a.ctime, f.now.tv_sec);
	CHECK_EQ(a.ctime_ns, f.now.tv_nsec);
	REQUIRE(l != NULL);
	CHECK_EQ(l->nobjs, 1);
	CHECK_EQ(l->stripe_count, 1);
	CHECK_EQ(l->layout_gen, 0);
	CHECK_EQ(l->stripe_offset, l->objs[0].ost_idx);
	CHECK(l->objs[0].objid >= 1);
	free(l);
	/* the parent's mtime and ctime follow; its link count does not */
	REQUIRE_RC(fx_getattr(&f, d, &dir), 0);
	CHECK_EQ(dir.mtime, a.ctime);
	CHECK_EQ(dir.ctime, a.ctime);
	CHECK_EQ(dir.nlink, 2);

	/* existing name */
	CHECK_RC(fx_create_full(&f, &user, d, "f", 0600, 0, true, NULL, &a2, NULL, NULL), -EEXIST);
	l = NULL;
	REQUIRE_RC(fx_create_full(&f, &user, d, "f", 0600, 0, false, NULL, &a2, &l, &created), 0);
	CHECK(!created);
	CHECK_EQ(a2.ino, a.ino);
	CHECK_EQ(a2.mode, S_IFREG | 0640);
	CHECK(l != NULL && l->nobjs == 1);
	free(l);
	/* an existing directory: open(O_CREAT) says EISDIR; "." and ".." are directories */
	REQUIRE_RC(fx_mkdir(&f, &user, d, "sub", 0755, NULL), 0);
	CHECK_RC(fx_create_full(&f, &user, d, "sub", 0600, 0, false, NULL, &a2, NULL, NULL), -EISDIR);
	CHECK_RC(fx_create_full(&f, &user, d, "sub", 0600, 0, true, NULL, &a2, NULL, NULL), -EEXIST);
	CHECK_RC(fx_create_full(&f, &user, d, ".", 0600, 0, true, NULL, &a2, NULL, NULL), -EEXIST);
	CHECK_RC(fx_create_full(&f, &user, d, "..", 0600, 0, false, NULL, &a2, NULL, NULL), -EISDIR);
	/* parent problems */
	CHECK_RC(fx_create(&f, &user, 9999, "x", 0644, NULL), -ENOENT);
	CHECK_RC(fx_create(&f, &user, a.ino, "x", 0644, NULL), -ENOTDIR);
	/* types: mknod of a directory is EPERM, of a symlink or garbage EINVAL */
	CHECK_RC(fx_create(&f, &user, d, "x", S_IFDIR | 0755, NULL), -EPERM);
	CHECK_RC(fx_create(&f, &user, d, "x", S_IFLNK | 0777, NULL), -EINVAL);
	CHECK_RC(fx_create(&f, &user, d, "x", 0170000 | 0644, NULL), -EINVAL);
	/* fifos and sockets: anyone, no layout; devices: root only, with rdev */
	l = (struct loom_layout *)1;
	REQUIRE_RC(fx_create_full(&f, &user, d, "fifo", S_IFIFO | 0600, 0, true, NULL, &a2, &l, NULL), 0);
	CHECK(l == NULL);
	CHECK_EQ(a2.mode, S_IFIFO | 0600);
	CHECK_EQ(a2.blksize, 4096);
	REQUIRE_RC(fx_create(&f, &user, d, "sock", S_IFSOCK | 0600, NULL), 0);
	CHECK_RC(fx_create_full(&f, &user, d, "null", S_IFCHR | 0666, 0x0103, true, NULL, &a2, NULL, NULL),
		 -EPERM);
	REQUIRE_RC(fx_create_full(&f, &root_cr, d, "null", S_IFCHR | 0666, 0x0103, true, NULL, &a2, NULL,
				  NULL), 0);
	CHECK_EQ(a2.rdev, 0x0103);
	CHECK_EQ(a2.mode, S_IFCHR | 0666);
	REQUIRE_RC(fx_create_full(&f, &root_cr, d, "blk", S_IFBLK | 0600, 0x0801, true, NULL, &a2, NULL,
				  NULL), 0);
	CHECK_EQ(a2.rdev, 0x0801);
	/* setuid may be asked for at creation */
	REQUIRE_RC(fx_create_full(&f, &user, d, "suid", 04755, 0, true, NULL, &a2, NULL, NULL), 0);
	CHECK_EQ(a2.mode, S_IFREG | 04755);
	fx_fini(&f);
}

static void test_create_no_osts(void)
{
	struct fx f;
	struct lw_attr a;

	fx_init(&f);
	CHECK_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "f", 0644, NULL), -ENOSPC);
	CHECK_RC(fx_lookup(&f, &root_cr, LOOM_ROOT_INO, "f", &a), -ENOENT);
	/* what has no data needs no OST */
	CHECK_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, "p", S_IFIFO | 0644, NULL), 0);
	CHECK_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, NULL), 0);
	CHECK_RC(fx_symlink(&f, &root_cr, LOOM_ROOT_INO, "s", "t", NULL), 0);
	fx_fini(&f);
}

/* Who may add a name where: w+x on the parent, in Linux's order. */
static void test_create_perm(void)
{
	struct fx f;
	struct loom_cred owner = fx_cred(1000, 1000, 0), member = fx_cred(2000, 500, 1, 1000u);
	struct loom_cred other = fx_cred(3000, 3000, 0);
	uint64_t rx, wx, w_only, grp;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "rx", 0555, &rx), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "wx", 0733, &wx), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "w", 0666, &w_only), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "grp", 0775, &grp), 0);
	{
		struct lw_setattr sa = { .ino = grp, .valid = LW_SA_UID | LW_SA_GID, .uid = 1000, .gid = 1000 };
		REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0);
	}
	REQUIRE_RC(fx_create(&f, &root_cr, rx, "exists", 0644, NULL), 0);

	CHECK_RC(fx_create(&f, &other, rx, "x", 0644, NULL), -EACCES);
	CHECK_RC(fx_mkdir(&f, &other, rx, "x", 0755, NULL), -EACCES);
	CHECK_RC(fx_symlink(&f, &other, rx, "x", "t", NULL), -EACCES);
	/* an existing name is EEXIST before write permission is looked at */
	CHECK_RC(fx_mkdir(&f, &other, rx, "exists", 0755, NULL), -EEXIST);
	CHECK_RC(fx_create(&f, &other, rx, "exists", 0644, NULL), -EEXIST);
	CHECK_RC(fx_symlink(&f, &other, rx, "exists", "t", NULL), -EEXIST);
	/* without search permission nothing is looked up: EACCES */
	CHECK_RC(fx_create(&f, &other, w_only, "x", 0644, NULL), -EACCES);
	CHECK_RC(fx_mkdir(&f, &other, w_only, "x", 0755, NULL), -EACCES);
	/* write+search is enough (no read needed) */
	CHECK_RC(fx_create(&f, &other, wx, "x", 0644, NULL), 0);
	CHECK_RC(fx_mkdir(&f, &other, wx, "y", 0755, NULL), 0);
	/* group class through a supplementary group */
	CHECK_RC(fx_create(&f, &member, grp, "m", 0644, NULL), 0);
	CHECK_RC(fx_create(&f, &other, grp, "o", 0644, NULL), -EACCES);
	CHECK_RC(fx_create(&f, &owner, grp, "o", 0644, NULL), 0);
	/* root ignores the bits */
	CHECK_RC(fx_create(&f, &root_cr, w_only, "r", 0644, NULL), 0);
	fx_fini(&f);
}

static void test_setgid_dir(void)
{
	struct fx f;
	struct loom_cred alice = fx_cred(1000, 1000, 1, 500u), bob = fx_cred(2000, 2000, 0);
	struct lw_attr a;
	uint64_t d, sub;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "shared", 0777, &d), 0);
	{
		struct lw_setattr sa = { .ino = d, .valid = LW_SA_GID | LW_SA_MODE, .gid = 500,
					 .mode = 02777 };
		REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, &a), 0);
		CHECK_EQ(a.mode, S_IFDIR | 02777);
	}
	REQUIRE_RC(fx_create(&f, &bob, d, "file", 0644, NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &bob, d, "file", &a), 0);
	CHECK_EQ(a.gid, 500);
	CHECK_EQ(a.uid, 2000);
	CHECK_EQ(a.mode, S_IFREG | 0644);
	REQUIRE_RC(fx_mkdir(&f, &bob, d, "sub", 0755, &sub), 0);
	REQUIRE_RC(fx_getattr(&f, sub, &a), 0);
	CHECK_EQ(a.gid, 500);
	CHECK_EQ(a.mode, S_IFDIR | 02755);
	/* and again one level down */
	REQUIRE_RC(fx_mkdir(&f, &bob, sub, "deeper", 0700, NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &bob, sub, "deeper", &a), 0);
	CHECK_EQ(a.mode, S_IFDIR | 02700);
	CHECK_EQ(a.gid, 500);
	/* setgid+g+x asked by a non-member: stripped; by a member: kept */
	REQUIRE_RC(fx_create(&f, &bob, d, "sg-bob", 02775, NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &bob, d, "sg-bob", &a), 0);
	CHECK_EQ(a.mode, S_IFREG | 0775);
	REQUIRE_RC(fx_create(&f, &alice, d, "sg-alice", 02775, NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &alice, d, "sg-alice", &a), 0);
	CHECK_EQ(a.mode, S_IFREG | 02775);
	/* symlinks take the group too */
	REQUIRE_RC(fx_symlink(&f, &bob, d, "sym", "file", NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &bob, d, "sym", &a), 0);
	CHECK_EQ(a.gid, 500);
	/* mkdir drops setuid/setgid asked for outside a setgid directory */
	REQUIRE_RC(fx_mkdir(&f, &bob, LOOM_ROOT_INO, "x", 06777, NULL), -EACCES);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "x", 07777, NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &root_cr, LOOM_ROOT_INO, "x", &a), 0);
	CHECK_EQ(a.mode, S_IFDIR | 01777);
	fx_fini(&f);
}

static void test_mkdir(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	struct lw_attr a, p;
	uint64_t d;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_getattr(&f, d, &a), 0);
	CHECK_EQ(a.nlink, 2);
	CHECK_EQ(a.size, 4096);
	CHECK_EQ(a.blocks, 8);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &p), 0);
	CHECK_EQ(p.nlink, 3);
	CHECK_EQ(p.mtime, a.mtime);
	for (int i = 0; i < 5; i++) {
		char name[8];
		snprintf(name, sizeof(name), "s%d", i);
		REQUIRE_RC(fx_mkdir(&f, &user, d, name, 0755, NULL), 0);
	}
	REQUIRE_RC(fx_getattr(&f, d, &a), 0);
	CHECK_EQ(a.nlink, 7);
	CHECK_RC(fx_mkdir(&f, &user, d, "s1", 0755, NULL), -EEXIST);
	CHECK_RC(fx_mkdir(&f, &user, d, ".", 0755, NULL), -EEXIST);
	CHECK_RC(fx_mkdir(&f, &user, d, "..", 0755, NULL), -EEXIST);
	CHECK_RC(fx_mkdir(&f, &user, 77777, "x", 0755, NULL), -ENOENT);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "fifo", S_IFIFO | 0644, NULL), 0);
	CHECK_RC(fx_mkdir(&f, &user, fx_ino(&f, d, "fifo"), "x", 0755, NULL), -ENOTDIR);
	/* a file does not count in the link count */
	REQUIRE_RC(fx_getattr(&f, d, &a), 0);
	CHECK_EQ(a.nlink, 7);
	fx_fini(&f);
}

static void test_symlink_readlink(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	char target[LOOM_SYMLINK_MAX + 2], buf[LOOM_SYMLINK_MAX + 1];
	struct mdt_txn *t;
	struct lw_attr a;
	uint64_t s, d;
	size_t len;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_symlink(&f, &user, d, "s", "../some/where", &s), 0);
	REQUIRE_RC(fx_getattr(&f, s, &a), 0);
	CHECK_EQ(a.mode, S_IFLNK | 0777);
	CHECK_EQ(a.size, 13);
	CHECK_EQ(a.blocks, 1);
	CHECK_EQ(a.uid, 1000);
	CHECK_EQ(a.nlink, 1);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_readlink(t, s, buf, sizeof(buf), &len), 0);
	CHECK(len == 13 && memcmp(buf, "../some/where", 13) == 0);
	CHECK_RC(mdt_readlink(t, s, buf, 5, &len), -ERANGE);
	CHECK_EQ(len, 13);
	CHECK_RC(mdt_readlink(t, d, buf, sizeof(buf), &len), -EINVAL);
	CHECK_RC(mdt_readlink(t, 4242, buf, sizeof(buf), &len), -ENOENT);
	mdt_txn_abort(t);

	/* the longest target there is, and one more */
	memset(target, 'x', sizeof(target));
	target[LOOM_SYMLINK_MAX] = '\0';
	REQUIRE_RC(fx_symlink(&f, &user, d, "long", target, &s), 0);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_readlink(t, s, buf, LOOM_SYMLINK_MAX, &len), 0);
	CHECK_EQ(len, LOOM_SYMLINK_MAX);
	mdt_txn_abort(t);
	target[LOOM_SYMLINK_MAX] = 'x';
	target[LOOM_SYMLINK_MAX + 1] = '\0';
	CHECK_RC(fx_symlink(&f, &user, d, "toolong", target, NULL), -ENAMETOOLONG);
	CHECK_RC(fx_symlink(&f, &user, d, "empty", "", NULL), -ENOENT);
	CHECK_RC(fx_symlink(&f, &user, d, "s", "x", NULL), -EEXIST);
	CHECK_RC(fx_symlink(&f, &user, d, "..", "x", NULL), -EEXIST);
	fx_fini(&f);
}

static void test_link(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0), other = fx_cred(2000, 2000, 0);
	struct mdt_unlinked v;
	struct lw_attr a, p;
	uint64_t d, d2, file, sub;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d2", 0755, &d2), 0);
	REQUIRE_RC(fx_create(&f, &user, d, "f", 0600, &file), 0);
	REQUIRE_RC(fx_mkdir(&f, &user, d, "sub", 0755, &sub), 0);

	REQUIRE_RC(fx_link(&f, &user, file, d, "g"), 0);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.nlink, 2);
	CHECK_EQ(a.ctime, f.now.tv_sec);
	REQUIRE_RC(fx_getattr(&f, d, &p), 0);
	CHECK_EQ(p.mtime, f.now.tv_sec);
	CHECK_EQ(fx_ino(&f, d, "g"), file);
	/* hard links need no permission on the file itself (protected_hardlinks is the client
	 * kernel's business) */
	REQUIRE_RC(fx_link(&f, &other, file, d, "h"), 0);
	CHECK_RC(fx_link(&f, &user, file, d2, "x"), -EACCES);
	CHECK_RC(fx_link(&f, &root_cr, file, d2, "x"), 0);
	CHECK_RC(fx_link(&f, &user, file, d, "g"), -EEXIST);
	CHECK_RC(fx_link(&f, &user, file, d, "."), -EEXIST);
	CHECK_RC(fx_link(&f, &user, sub, d, "subdir-link"), -EPERM);
	CHECK_RC(fx_link(&f, &user, 31337, d, "x"), -ENOENT);
	CHECK_RC(fx_link(&f, &user, file, file, "x"), -ENOTDIR);
	CHECK_RC(fx_link(&f, &user, file, 31337, "x"), -ENOENT);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.nlink, 4);

	/* the link limit: 65000, as ext4 */
	{
		struct mdt_txn *t = fx_op_begin(&f);
		struct mdt_inode in;
		REQUIRE_RC(mdt_inode_get(t, file, &in), 0);
		in.nlink = 64999;
		REQUIRE_RC(mdt_inode_put(t, &in), 0);
		fx_op_end(&f, t, 0);
	}
	CHECK_RC(fx_link(&f, &user, file, d, "l64999"), 0);
	CHECK_RC(fx_link(&f, &user, file, d, "l65000"), -EMLINK);

	/* an inode with no name left (open, unlinked) cannot be linked again */
	REQUIRE_RC(fx_create(&f, &user, d, "tmp", 0600, &file), 0);
	REQUIRE_RC(fx_unlink(&f, &user, d, "tmp", &v), 0);
	CHECK_EQ(v.nlink, 0);
	CHECK_RC(fx_link(&f, &user, file, d, "back"), -ENOENT);
	fx_fini(&f);
}

static void test_unlink(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0), other = fx_cred(2000, 2000, 0);
	struct mdt_unlinked v;
	struct lw_attr a, p;
	uint64_t d, file, sub;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "f", 0666, &file), 0);
	REQUIRE_RC(fx_link(&f, &root_cr, file, d, "f2"), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0777, &sub), 0);

	CHECK_RC(fx_unlink(&f, &user, d, "f", &v), -EACCES); /* d is 0755 root */
	REQUIRE_RC(fx_unlink(&f, &root_cr, d, "f", &v), 0);
	CHECK_EQ(v.ino, file);
	CHECK_EQ(v.nlink, 1);
	CHECK_EQ(v.mode, S_IFREG | 0666);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.nlink, 1);
	CHECK_EQ(a.ctime, f.now.tv_sec);
	REQUIRE_RC(fx_getattr(&f, d, &p), 0);
	CHECK_EQ(p.mtime, f.now.tv_sec);
	CHECK_EQ(p.ctime, f.now.tv_sec);
	CHECK_RC(fx_lookup(&f, &root_cr, d, "f", &a), -ENOENT);
	CHECK_RC(fx_unlink(&f, &root_cr, d, "f", &v), -ENOENT);
	CHECK_EQ(v.ino, 0);
	REQUIRE_RC(fx_unlink(&f, &root_cr, d, "f2", &v), 0);
	CHECK_EQ(v.nlink, 0);
	/* the last name gone: the inode stays (it may be open) as an orphan */
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	CHECK_EQ(a.nlink, 0);

	CHECK_RC(fx_unlink(&f, &root_cr, d, "sub", &v), -EISDIR);
	CHECK_RC(fx_unlink(&f, &root_cr, d, ".", &v), -EISDIR);
	CHECK_RC(fx_unlink(&f, &root_cr, d, "..", &v), -EISDIR);
	CHECK_RC(fx_unlink(&f, &root_cr, file, "x", &v), -ENOTDIR);
	CHECK_RC(fx_unlink(&f, &root_cr, 123456, "x", &v), -ENOENT);
	/* a permission problem comes before the type of the victim */
	CHECK_RC(fx_unlink(&f, &other, d, "sub", &v), -EACCES);
	/* in a writable directory anyone removes anything (no sticky bit) */
	REQUIRE_RC(fx_create(&f, &user, sub, "mine", 0600, NULL), 0);
	CHECK_RC(fx_unlink(&f, &other, sub, "mine", NULL), 0);
	fx_fini(&f);
}

/* open(O_TMPFILE): a nameless file, an orphan from birth, released whole by its last close. */
static void test_create_tmpfile(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	struct lw_layout req = fx_layout_req(1u << 20, 2, -1, "");
	struct loom_layout *l = NULL, *got = NULL;
	struct lw_attr a, p, before;
	struct loom_ostobj q[8];
	uint64_t d, ro, inos[4];
	struct mdt_txn *t;
	size_t n;

	fx_init(&f);
	fx_add_osts(&f, 4);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "ro", 0755, &ro), 0);
	REQUIRE_RC(fx_getattr(&f, d, &before), 0);

	t = fx_op_begin(&f);
	CHECK_RC(mdt_create_tmpfile(t, &user, d, 0600, &req, fx_tick(&f), &a, &l), 0);
	REQUIRE_RC(fx_op_end(&f, t, 0), 0);
	REQUIRE(l != NULL);
	CHECK_EQ(a.mode, S_IFREG | 0600);
	CHECK_EQ(a.uid, 1000);
	CHECK_EQ(a.nlink, 0);
	CHECK_EQ(l->nobjs, 2);
	CHECK_EQ(l->stripe_size, 1u << 20);
	/* No name anywhere; the directory did not change; the file is in the orphan list. */
	REQUIRE_RC(fx_getattr(&f, d, &p), 0);
	CHECK_EQ(p.size, before.size);
	CHECK_EQ(p.mtime, before.mtime);
	CHECK_EQ(p.ctime, before.ctime);
	REQUIRE_RC(fx_getlayout(&f, a.ino, &got), 0);
	CHECK_EQ(got->objs[0].objid, l->objs[0].objid);
	free(got);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_orphan_list(t, 0, inos, 4, &n), 0);
	mdt_txn_abort(t);
	CHECK_EQ(n, 1);
	CHECK_EQ(inos[0], a.ino);
	/* It cannot be given a name. */
	CHECK_RC(fx_link(&f, &user, a.ino, d, "named"), -ENOENT);
	/* Its last close releases it, its objects into the destroy queue. */
	REQUIRE_RC(fx_release(&f, a.ino), 0);
	CHECK_RC(fx_getattr(&f, a.ino, &p), -ENOENT);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_orphan_list(t, 0, inos, 4, &n), 0);
	CHECK_EQ(n, 0);
	REQUIRE_RC(mdt_destroy_list(t, q, 8, &n), 0);
	mdt_txn_abort(t);
	CHECK_EQ(n, 2);
	free(l);

	/* As open(O_TMPFILE) of the directory: write and search permission; regular files only. */
	t = fx_op_begin(&f);
	CHECK_RC(mdt_create_tmpfile(t, &user, ro, 0600, NULL, fx_tick(&f), &a, NULL), -EACCES);
	CHECK_RC(mdt_create_tmpfile(t, &user, d, S_IFIFO | 0600, NULL, fx_tick(&f), &a, NULL), -EINVAL);
	CHECK_RC(mdt_create_tmpfile(t, &user, d, S_IFDIR | 0700, NULL, fx_tick(&f), &a, NULL), -EPERM);
	CHECK_RC(mdt_create_tmpfile(t, &user, 123456, 0600, NULL, fx_tick(&f), &a, NULL), -ENOENT);
	fx_op_end(&f, t, -1);
	fx_fini(&f);
}

static void test_sticky(void)
{
	struct fx f;
	struct loom_cred alice = fx_cred(1000, 100, 0), bob = fx_cred(2000, 100, 0);
	struct loom_cred carol = fx_cred(3000, 100, 0);
	uint64_t tmp;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &alice, LOOM_ROOT_INO, "tmp", 0777, &tmp), -EACCES);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "tmp", 01777, &tmp), 0);
	{
		struct lw_setattr sa = { .ino = tmp, .valid = LW_SA_UID, .uid = 3000 };
		REQUIRE_RC(fx_setattr(&f, &root_cr, &sa, NULL), 0); /* carol owns the directory */
	}
	REQUIRE_RC(fx_create(&f, &alice, tmp, "a1", 0666, NULL), 0);
	REQUIRE_RC(fx_create(&f, &alice, tmp, "a2", 0666, NULL), 0);
	REQUIRE_RC(fx_create(&f, &alice, tmp, "a3", 0666, NULL), 0);
	REQUIRE_RC(fx_mkdir(&f, &alice, tmp, "ad", 0777, NULL), 0);
	CHECK_RC(fx_unlink(&f, &bob, tmp, "a1", NULL), -EPERM);
	CHECK_RC(fx_rmdir(&f, &bob, tmp, "ad"), -EPERM);
	CHECK_RC(fx_rename(&f, &bob, tmp, "a1", tmp, "b1", 0, NULL), -EPERM);
	/* renaming onto someone else's file is removing it */
	REQUIRE_RC(fx_create(&f, &bob, tmp, "b2", 0666, NULL), 0);
	CHECK_RC(fx_rename(&f, &bob, tmp, "b2", tmp, "a1", 0, NULL), -EPERM);
	CHECK_RC(fx_unlink(&f, &alice, tmp, "a1", NULL), 0);   /* the file's owner */
	CHECK_RC(fx_unlink(&f, &carol, tmp, "a2", NULL), 0);   /* the directory's owner */
	CHECK_RC(fx_unlink(&f, &root_cr, tmp, "a3", NULL), 0); /* root */
	CHECK_RC(fx_rmdir(&f, &alice, tmp, "ad"), 0);
	fx_fini(&f);
}

static void test_rmdir(void)
{
	struct fx f;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	struct lw_attr a, p;
	uint64_t d, sub, file;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &user, d, "sub", 0755, &sub), 0);
	REQUIRE_RC(fx_create(&f, &user, d, "file", 0644, &file), 0);
	REQUIRE_RC(fx_create(&f, &user, sub, "inner", 0644, NULL), 0);
	REQUIRE_RC(fx_setxattr(&f, &user, sub, "user.x", "1", 0), 0);

	CHECK_RC(fx_rmdir(&f, &user, d, "sub"), -ENOTEMPTY);
	CHECK_RC(fx_rmdir(&f, &user, d, "file"), -ENOTDIR);
	CHECK_RC(fx_rmdir(&f, &user, d, "none"), -ENOENT);
	CHECK_RC(fx_rmdir(&f, &user, d, "."), -EINVAL);
	CHECK_RC(fx_rmdir(&f, &user, d, ".."), -ENOTEMPTY);
	CHECK_RC(fx_rmdir(&f, &root_cr, LOOM_ROOT_INO, ".."), -ENOTEMPTY);
	CHECK_RC(fx_rmdir(&f, &user, file, "x"), -ENOTDIR);
	/* permission before emptiness, as may_delete runs first */
	CHECK_RC(fx_rmdir(&f, &user, LOOM_ROOT_INO, "d"), -EACCES);

	REQUIRE_RC(fx_unlink(&f, &user, sub, "inner", NULL), 0);
	REQUIRE_RC(fx_getattr(&f, d, &p), 0);
	CHECK_EQ(p.nlink, 3);
	REQUIRE_RC(fx_rmdir(&f, &user, d, "sub"), 0);
	REQUIRE_RC(fx_getattr(&f, d, &p), 0);
	CHECK_EQ(p.nlink, 2);
	CHECK_EQ(p.mtime, f.now.tv_sec);
	/* gone at once, with its xattrs */
	CHECK_RC(fx_getattr(&f, sub, &a), -ENOENT);
	{
		struct mdt_txn *t = fx_read_begin(&f);
		size_t len;
		CHECK_RC(mdt_listxattr(t, &root_cr, sub, NULL, 0, &len), -ENOENT);
		mdt_txn_abort(t);
	}
	CHECK_RC(fx_lookup(&f, &user, d, "sub", &a), -ENOENT);
	/* and its name can be reused */
	REQUIRE_RC(fx_mkdir(&f, &user, d, "sub", 0755, NULL), 0);
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_lookup);
	RUN(test_create);
	RUN(test_create_no_osts);
	RUN(test_create_perm);
	RUN(test_setgid_dir);
	RUN(test_mkdir);
	RUN(test_symlink_readlink);
	RUN(test_link);
	RUN(test_unlink);
	RUN(test_create_tmpfile);
	RUN(test_sticky);
	RUN(test_rmdir);
	return check_report();
}
