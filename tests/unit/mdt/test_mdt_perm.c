/* perm.c on its own: every decision against what Linux (ext4) answers. */
#include <sys/stat.h>

#include "fixture.h"
#include "mdt/perm.h"

static struct mdt_owner own(uint32_t mode, uint32_t uid, uint32_t gid)
{
	return (struct mdt_owner){ .mode = mode, .uid = uid, .gid = gid };
}

static void test_in_group(void)
{
	struct loom_cred c = fx_cred(1000, 100, 2, 200u, 300u);

	CHECK(mdt_perm_in_group(&c, 100));
	CHECK(mdt_perm_in_group(&c, 200));
	CHECK(mdt_perm_in_group(&c, 300));
	CHECK(!mdt_perm_in_group(&c, 400));
	/* ngroups beyond the array is clamped, not read past */
	c.ngroups = 1000;
	CHECK(!mdt_perm_in_group(&c, 400));
}

static void test_access_classes(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 0);
	struct loom_cred member = fx_cred(2000, 999, 1, 100u);
	struct loom_cred other = fx_cred(3000, 300, 0);
	struct mdt_owner f = own(S_IFREG | 0640, 1000, 100);

	CHECK_RC(mdt_perm_access(&owner, &f, MDT_MAY_READ | MDT_MAY_WRITE), 0);
	CHECK_RC(mdt_perm_access(&owner, &f, MDT_MAY_EXEC), -EACCES);
	CHECK_RC(mdt_perm_access(&member, &f, MDT_MAY_READ), 0);
	CHECK_RC(mdt_perm_access(&member, &f, MDT_MAY_WRITE), -EACCES);
	CHECK_RC(mdt_perm_access(&other, &f, MDT_MAY_READ), -EACCES);
	CHECK_RC(mdt_perm_access(&other, &f, 0), 0);

	/* the first class that matches decides: an owner without owner bits is denied even
	 * though group and other may */
	f = own(S_IFREG | 0077, 1000, 100);
	CHECK_RC(mdt_perm_access(&owner, &f, MDT_MAY_READ), -EACCES);
	CHECK_RC(mdt_perm_access(&member, &f, MDT_MAY_READ), 0);
	f = own(S_IFREG | 0607, 1000, 100);
	CHECK_RC(mdt_perm_access(&member, &f, MDT_MAY_READ), -EACCES);
	CHECK_RC(mdt_perm_access(&other, &f, MDT_MAY_READ | MDT_MAY_WRITE | MDT_MAY_EXEC), 0);

	/* directories: search is x */
	f = own(S_IFDIR | 0751, 1000, 100);
	CHECK_RC(mdt_perm_access(&member, &f, MDT_MAY_EXEC | MDT_MAY_READ), 0);
	CHECK_RC(mdt_perm_access(&other, &f, MDT_MAY_EXEC), 0);
	CHECK_RC(mdt_perm_access(&other, &f, MDT_MAY_READ), -EACCES);
	CHECK_RC(mdt_perm_access(&member, &f, MDT_MAY_WRITE | MDT_MAY_EXEC), -EACCES);
}

static void test_access_root(void)
{
	struct loom_cred root = fx_root();
	struct mdt_owner f = own(S_IFREG | 0000, 1000, 100);

	CHECK_RC(mdt_perm_access(&root, &f, MDT_MAY_READ | MDT_MAY_WRITE), 0);
	/* exec needs some x bit on a non-directory, even for root */
	CHECK_RC(mdt_perm_access(&root, &f, MDT_MAY_EXEC), -EACCES);
	f.mode = S_IFREG | 0001;
	CHECK_RC(mdt_perm_access(&root, &f, MDT_MAY_EXEC), 0);
	f.mode = S_IFREG | 0010;
	CHECK_RC(mdt_perm_access(&root, &f, MDT_MAY_EXEC), 0);
	f.mode = S_IFDIR | 0000;
	CHECK_RC(mdt_perm_access(&root, &f, MDT_MAY_EXEC | MDT_MAY_WRITE | MDT_MAY_READ), 0);
	/* root by uid 0 alone, whatever its groups */
	root.gid = 5;
	CHECK_RC(mdt_perm_access(&root, &f, MDT_MAY_WRITE), 0);
}

static void test_sticky(void)
{
	struct loom_cred alice = fx_cred(1000, 100, 0), bob = fx_cred(2000, 100, 0);
	struct loom_cred dirowner = fx_cred(3000, 100, 0), root = fx_root();
	struct mdt_owner tmp = own(S_IFDIR | 01777, 3000, 0);
	struct mdt_owner plain = own(S_IFDIR | 0777, 3000, 0);
	struct mdt_owner alices = own(S_IFREG | 0666, 1000, 100);

	CHECK_RC(mdt_perm_sticky(&alice, &tmp, &alices), 0);
	CHECK_RC(mdt_perm_sticky(&bob, &tmp, &alices), -EPERM);
	CHECK_RC(mdt_perm_sticky(&dirowner, &tmp, &alices), 0);
	CHECK_RC(mdt_perm_sticky(&root, &tmp, &alices), 0);
	CHECK_RC(mdt_perm_sticky(&bob, &plain, &alices), 0);
}

static void test_new_inode(void)
{
	struct loom_cred alice = fx_cred(1000, 100, 1, 500u), bob = fx_cred(2000, 200, 0);
	struct loom_cred root = fx_root();
	struct mdt_owner plain = own(S_IFDIR | 0777, 0, 0);
	struct mdt_owner sgid = own(S_IFDIR | 02777, 0, 500);
	struct mdt_owner o;

	mdt_perm_new_inode(&alice, &plain, S_IFREG | 02755, &o);
	CHECK_EQ(o.uid, 1000);
	CHECK_EQ(o.gid, 100);
	CHECK_EQ(o.mode, S_IFREG | 02755); /* setgid kept: alice is in her own group */

	mdt_perm_new_inode(&alice, &sgid, S_IFREG | 0644, &o);
	CHECK_EQ(o.gid, 500);
	CHECK_EQ(o.mode, S_IFREG | 0644);
	mdt_perm_new_inode(&alice, &sgid, S_IFDIR | 0755, &o);
	CHECK_EQ(o.gid, 500);
	CHECK_EQ(o.mode, S_IFDIR | 02755);
	/* setgid+group-exec asked in a setgid dir by a non-member of its group: stripped */
	mdt_perm_new_inode(&bob, &sgid, S_IFREG | 02755, &o);
	CHECK_EQ(o.gid, 500);
	CHECK_EQ(o.mode, S_IFREG | 0755);
	/* not group-executable: kept (mandatory-locking mark) */
	mdt_perm_new_inode(&bob, &sgid, S_IFREG | 02745, &o);
	CHECK_EQ(o.mode, S_IFREG | 02745);
	mdt_perm_new_inode(&alice, &sgid, S_IFREG | 02755, &o);
	CHECK_EQ(o.mode, S_IFREG | 02755);
	mdt_perm_new_inode(&root, &sgid, S_IFREG | 02755, &o);
	CHECK_EQ(o.mode, S_IFREG | 02755);
	CHECK_EQ(o.uid, 0);
	CHECK_EQ(o.gid, 500);
}

static struct lw_setattr sa_of(uint32_t valid)
{
	struct lw_setattr sa;

	memset(&sa, 0, sizeof(sa));
	sa.valid = valid;
	return sa;
}

static void test_setattr_chmod(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 1, 101u), other = fx_cred(2000, 100, 0);
	struct loom_cred root = fx_root();
	struct mdt_owner f = own(S_IFREG | 0644, 1000, 100), n;
	struct lw_setattr sa = sa_of(LW_SA_MODE);

	sa.mode = S_IFDIR | 0600; /* type bits in the request are ignored */
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 0600);
	CHECK_RC(mdt_perm_setattr(&other, &f, &sa, &n), -EPERM);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);

	/* setgid by a non-member of the file's group: cleared, the rest applied */
	f.gid = 555;
	sa.mode = 06755;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 04755);
	f.gid = 101; /* a supplementary group */
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 06755);
	f.gid = 555;
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 06755);
	/* with a chgrp in the same request the new group counts */
	sa = sa_of(LW_SA_MODE | LW_SA_GID);
	sa.mode = 02755;
	sa.gid = 101;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.gid, 101);
	CHECK_EQ(n.mode & 07777, 02755);
	/* the sticky bit on a directory is the owner's to set */
	f = own(S_IFDIR | 0777, 1000, 100);
	sa = sa_of(LW_SA_MODE);
	sa.mode = 01777;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFDIR | 01777);
}

static void test_setattr_chown(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 1, 101u), other = fx_cred(2000, 100, 1, 101u);
	struct loom_cred root = fx_root();
	struct mdt_owner f = own(S_IFREG | 0755, 1000, 100), n;
	struct lw_setattr sa = sa_of(LW_SA_UID);

	sa.uid = 2000;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), -EPERM);
	CHECK_RC(mdt_perm_setattr(&other, &f, &sa, &n), -EPERM);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_EQ(n.uid, 2000);
	/* "chown" to oneself by the owner is allowed, by anyone else not */
	sa.uid = 1000;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&other, &f, &sa, &n), -EPERM);

	sa = sa_of(LW_SA_GID);
	sa.gid = 101; /* the owner's supplementary group */
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.gid, 101);
	CHECK_RC(mdt_perm_setattr(&other, &f, &sa, &n), -EPERM); /* member, not owner */
	sa.gid = 777;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), -EPERM);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	sa.gid = 100; /* its own group again: fine */
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
}

static void test_setattr_chown_kills(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 1, 101u), root = fx_root();
	struct mdt_owner f, n;
	struct lw_setattr sa = sa_of(LW_SA_GID);

	sa.gid = 101;
	/* group-executable: both bits go */
	f = own(S_IFREG | 06775, 1000, 100);
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 0775);
	/* not group-executable: setgid stays for a member (Linux: 6767 -> 2767) */
	f = own(S_IFREG | 06767, 1000, 100);
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 02767);
	/* root is treated like everyone (since Linux 2.2.13), even for a no-op chown */
	sa = sa_of(LW_SA_UID | LW_SA_GID);
	sa.uid = 1000;
	sa.gid = 100;
	f = own(S_IFREG | 06755, 1000, 100);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 0755);
	f = own(S_IFREG | 06745, 1000, 100);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 02745);
	/* directories keep theirs */
	f = own(S_IFDIR | 06755, 1000, 100);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFDIR | 06755);
}

static void test_setattr_times(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 0), writer = fx_cred(2000, 100, 0);
	struct loom_cred stranger = fx_cred(3000, 300, 0), root = fx_root();
	struct mdt_owner f = own(S_IFREG | 0664, 1000, 100), n;
	struct lw_setattr sa;

	/* explicit times: owner or root */
	sa = sa_of(LW_SA_ATIME | LW_SA_MTIME);
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), -EPERM);
	/* one explicit, one now: still explicit */
	sa = sa_of(LW_SA_ATIME | LW_SA_ATIME_NOW | LW_SA_MTIME);
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), -EPERM);
	/* now: owner, root or write permission */
	sa = sa_of(LW_SA_ATIME | LW_SA_MTIME | LW_SA_ATIME_NOW | LW_SA_MTIME_NOW);
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), -EACCES);
	sa = sa_of(LW_SA_MTIME_NOW);
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), -EACCES);
	f.mode = S_IFREG | 0000;
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), -EACCES);
	/* ctime alone is a touch */
	f.mode = S_IFREG | 0664;
	sa = sa_of(LW_SA_CTIME);
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), 0);
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), -EACCES);
}

static void test_setattr_size(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 0), writer = fx_cred(2000, 100, 0);
	struct loom_cred stranger = fx_cred(3000, 300, 0), root = fx_root();
	struct mdt_owner f = own(S_IFREG | 06664, 1000, 100), n;
	struct lw_setattr sa = sa_of(LW_SA_SIZE);

	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), -EACCES);
	/* ftruncate on a handle open for writing: no check */
	sa.valid |= LW_SA_FH;
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), 0);
	/* truncation by non-root drops setuid, and setgid if group-exec or not a member */
	sa = sa_of(LW_SA_SIZE);
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 02664); /* member, not group-exec: setgid stays */
	f.mode = S_IFREG | 06774;
	CHECK_RC(mdt_perm_setattr(&writer, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 0774);
	f.mode = S_IFREG | 06666;
	sa.valid |= LW_SA_FH;
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 0666); /* not a member: setgid goes too */
	sa = sa_of(LW_SA_SIZE);
	CHECK_RC(mdt_perm_setattr(&owner, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 02666);
	CHECK_RC(mdt_perm_setattr(&root, &f, &sa, &n), 0);
	CHECK_EQ(n.mode, S_IFREG | 06666);
	CHECK_EQ(mdt_perm_kill_on_truncate(&root, &f), 0);
	CHECK_EQ(mdt_perm_kill_on_truncate(&owner, &f), S_ISUID);
	CHECK_EQ(mdt_perm_kill_on_truncate(&stranger, &f), S_ISUID | S_ISGID);
}

/* The order of checks: truncate's EACCES comes before chown's EPERM, as in Linux. */
static void test_setattr_order(void)
{
	struct loom_cred stranger = fx_cred(3000, 300, 0);
	struct mdt_owner f = own(S_IFREG | 0644, 1000, 100), n;
	struct lw_setattr sa = sa_of(LW_SA_SIZE | LW_SA_UID);

	sa.uid = 3000;
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), -EACCES);
	sa = sa_of(LW_SA_UID | LW_SA_MODE);
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), -EPERM);
	/* nothing asked, nothing checked */
	sa = sa_of(0);
	CHECK_RC(mdt_perm_setattr(&stranger, &f, &sa, &n), 0);
	CHECK(memcmp(&n, &f, sizeof(n)) == 0);
}

static void test_xattr_ns(void)
{
	enum mdt_xattr_ns ns;

	CHECK_RC(mdt_xattr_ns("user.a", 6, &ns), 0);
	CHECK_EQ(ns, MDT_XNS_USER);
	CHECK_RC(mdt_xattr_ns("trusted.a", 9, &ns), 0);
	CHECK_EQ(ns, MDT_XNS_TRUSTED);
	CHECK_RC(mdt_xattr_ns("security.selinux", 16, &ns), 0);
	CHECK_EQ(ns, MDT_XNS_SECURITY);
	CHECK_RC(mdt_xattr_ns("system.posix_acl_access", 23, &ns), -EOPNOTSUPP);
	CHECK_RC(mdt_xattr_ns("user.", 5, &ns), -EINVAL);
	CHECK_RC(mdt_xattr_ns("user", 4, &ns), -EOPNOTSUPP);
	CHECK_RC(mdt_xattr_ns("lustre.lov", 10, &ns), -EOPNOTSUPP);
	CHECK_RC(mdt_xattr_ns("User.a", 6, &ns), -EOPNOTSUPP);
}

static void test_xattr_perm(void)
{
	struct loom_cred owner = fx_cred(1000, 100, 0), member = fx_cred(2000, 100, 0);
	struct loom_cred stranger = fx_cred(3000, 300, 0), root = fx_root();
	struct mdt_owner f = own(S_IFREG | 0640, 1000, 100);
	struct mdt_owner lnk = own(S_IFLNK | 0777, 1000, 100);
	struct mdt_owner sticky = own(S_IFDIR | 01777, 1000, 100);

	/* user.*: r/w permission on the file */
	CHECK_RC(mdt_perm_xattr(&owner, &f, MDT_XNS_USER, MDT_MAY_WRITE), 0);
	CHECK_RC(mdt_perm_xattr(&member, &f, MDT_XNS_USER, MDT_MAY_READ), 0);
	CHECK_RC(mdt_perm_xattr(&member, &f, MDT_XNS_USER, MDT_MAY_WRITE), -EACCES);
	CHECK_RC(mdt_perm_xattr(&stranger, &f, MDT_XNS_USER, MDT_MAY_READ), -EACCES);
	CHECK_RC(mdt_perm_xattr(&root, &f, MDT_XNS_USER, MDT_MAY_WRITE), 0);
	/* user.* only on files and directories */
	CHECK_RC(mdt_perm_xattr(&owner, &lnk, MDT_XNS_USER, MDT_MAY_WRITE), -EPERM);
	CHECK_RC(mdt_perm_xattr(&owner, &lnk, MDT_XNS_USER, MDT_MAY_READ), -ENODATA);
	/* sticky directory: writers other than owner/root refused */
	CHECK_RC(mdt_perm_xattr(&member, &sticky, MDT_XNS_USER, MDT_MAY_WRITE), -EPERM);
	CHECK_RC(mdt_perm_xattr(&member, &sticky, MDT_XNS_USER, MDT_MAY_READ), 0);
	CHECK_RC(mdt_perm_xattr(&owner, &sticky, MDT_XNS_USER, MDT_MAY_WRITE), 0);
	/* trusted.*: root only */
	CHECK_RC(mdt_perm_xattr(&owner, &f, MDT_XNS_TRUSTED, MDT_MAY_WRITE), -EPERM);
	CHECK_RC(mdt_perm_xattr(&owner, &f, MDT_XNS_TRUSTED, MDT_MAY_READ), -ENODATA);
	CHECK_RC(mdt_perm_xattr(&root, &f, MDT_XNS_TRUSTED, MDT_MAY_WRITE), 0);
	/* security.*: anyone reads, root writes */
	CHECK_RC(mdt_perm_xattr(&stranger, &f, MDT_XNS_SECURITY, MDT_MAY_READ), 0);
	CHECK_RC(mdt_perm_xattr(&owner, &f, MDT_XNS_SECURITY, MDT_MAY_WRITE), -EPERM);
	CHECK_RC(mdt_perm_xattr(&root, &f, MDT_XNS_SECURITY, MDT_MAY_WRITE), 0);
}

int main(void)
{
	RUN(test_in_group);
	RUN(test_access_classes);
	RUN(test_access_root);
	RUN(test_sticky);
	RUN(test_new_inode);
	RUN(test_setattr_chmod);
	RUN(test_setattr_chown);
	RUN(test_setattr_chown_kills);
	RUN(test_setattr_times);
	RUN(test_setattr_size);
	RUN(test_setattr_order);
	RUN(test_xattr_ns);
	RUN(test_xattr_perm);
	return check_report();
}
