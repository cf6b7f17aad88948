/* setattr, open and size updates through the store. */
#include <fcntl.h>
#include <sys/stat.h>

#include "fixture.h"

static struct loom_cred root_cr;

struct env {
	struct fx f;
	uint64_t dir, file, fifo, sym;
};

static void env_init(struct env *e)
{
	struct loom_cred owner = fx_cred(1000, 100, 0);

	fx_init(&e->f);
	fx_add_osts(&e->f, 2);
	REQUIRE_RC(fx_mkdir(&e->f, &root_cr, LOOM_ROOT_INO, "d", 0777, &e->dir), 0);
	REQUIRE_RC(fx_create(&e->f, &owner, e->dir, "file", 0664, &e->file), 0);
	REQUIRE_RC(fx_create(&e->f, &owner, e->dir, "fifo", S_IFIFO | 0666, &e->fifo), 0);
	REQUIRE_RC(fx_symlink(&e->f, &owner, e->dir, "sym", "file", &e->sym), 0);
}

static void test_setattr_basic(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0);
	struct lw_setattr sa;
	struct lw_attr a, b;

	env_init(&e);
	REQUIRE_RC(fx_getattr(&e.f, e.file, &b), 0);

	/* chmod: mode and ctime, nothing else */
	memset(&sa, 0, sizeof(sa));
	sa.ino = e.file;
	sa.valid = LW_SA_MODE;
	sa.mode = 0600;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.mode, S_IFREG | 0600);
	CHECK_EQ(a.ctime, e.f.now.tv_sec);
	CHECK_EQ(a.mtime, b.mtime);
	CHECK_EQ(a.atime, b.atime);
	CHECK_RC(fx_getattr(&e.f, e.file, &b), 0);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);

	/* explicit times */
	sa.valid = LW_SA_ATIME | LW_SA_MTIME;
	sa.atime = 1000;
	sa.atime_ns = 5;
	sa.mtime = 2000;
	sa.mtime_ns = 6;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.atime, 1000);
	CHECK_EQ(a.atime_ns, 5);
	CHECK_EQ(a.mtime, 2000);
	CHECK_EQ(a.mtime_ns, 6);
	CHECK_EQ(a.ctime, e.f.now.tv_sec);
	sa.mtime_ns = 1000000000;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EINVAL);
	/* now */
	sa.valid = LW_SA_ATIME | LW_SA_MTIME | LW_SA_ATIME_NOW | LW_SA_MTIME_NOW;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.atime, e.f.now.tv_sec);
	CHECK_EQ(a.mtime, e.f.now.tv_sec);
	/* explicit ctime */
	sa.valid = LW_SA_CTIME;
	sa.ctime = 77;
	sa.ctime_ns = 8;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.ctime, 77);
	CHECK_EQ(a.ctime_ns, 8);
	/* nothing asked: nothing changes */
	sa.valid = 0;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &b), 0);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0);
	sa.valid = 0x8000;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &b), -EINVAL);
	sa.ino = 999999;
	sa.valid = LW_SA_MODE;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &b), -ENOENT);
	fx_fini(&e.f);
}

static void test_setattr_size(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0), other = fx_cred(2000, 200, 0);
	struct lw_setattr sa;
	struct lw_attr a;
	uint64_t mtime;

	env_init(&e);
	memset(&sa, 0, sizeof(sa));
	sa.ino = e.file;
	sa.valid = LW_SA_SIZE;
	sa.size = 10000;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.size, 10000);
	CHECK_EQ(a.blocks, 20);
	CHECK_EQ(a.mtime, e.f.now.tv_sec);
	mtime = (uint64_t)a.mtime;
	/* the same size: ctime moves, mtime does not */
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.mtime, mtime);
	CHECK_EQ(a.ctime, e.f.now.tv_sec);
	sa.size = 1;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.blocks, 1);
	sa.size = 1ull << 62;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	sa.size = (1ull << 62) + 1;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EFBIG);
	/* write permission, unless through a handle */
	sa.size = 0;
	CHECK_RC(fx_setattr(&e.f, &other, &sa, &a), -EACCES);
	sa.valid |= LW_SA_FH;
	CHECK_RC(fx_setattr(&e.f, &other, &sa, &a), 0);
	CHECK_EQ(a.size, 0);
	/* the type */
	sa.valid = LW_SA_SIZE;
	sa.ino = e.dir;
	CHECK_RC(fx_setattr(&e.f, &root_cr, &sa, &a), -EISDIR);
	sa.ino = e.fifo;
	CHECK_RC(fx_setattr(&e.f, &root_cr, &sa, &a), -EINVAL);
	sa.ino = e.sym;
	CHECK_RC(fx_setattr(&e.f, &root_cr, &sa, &a), -EINVAL);
	/* a symlink's mode cannot change; its owner and times can */
	sa.valid = LW_SA_MODE;
	sa.mode = 0600;
	CHECK_RC(fx_setattr(&e.f, &root_cr, &sa, &a), -EOPNOTSUPP);
	sa.valid = LW_SA_UID | LW_SA_MTIME;
	sa.uid = 5;
	sa.mtime = 12345;
	REQUIRE_RC(fx_setattr(&e.f, &root_cr, &sa, &a), 0);
	CHECK(a.uid == 5 && a.mtime == 12345 && a.mode == (S_IFLNK | 0777));
	fx_fini(&e.f);
}

/* Who may change what, end to end (perm.c's own tests cover the matrix). */
static void test_setattr_perm(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 1, 101u), member = fx_cred(1500, 100, 0);
	struct loom_cred other = fx_cred(2000, 200, 0);
	struct lw_setattr sa;
	struct lw_attr a;

	env_init(&e);
	memset(&sa, 0, sizeof(sa));
	sa.ino = e.file;
	sa.valid = LW_SA_MODE;
	sa.mode = 06775;
	CHECK_RC(fx_setattr(&e.f, &member, &sa, &a), -EPERM);
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.mode, S_IFREG | 06775);
	/* chgrp to a group the owner is in: allowed, and setuid/setgid (group-exec) go */
	sa.valid = LW_SA_GID;
	sa.gid = 101;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.gid, 101);
	CHECK_EQ(a.mode, S_IFREG | 0775);
	sa.gid = 300;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EPERM);
	sa.valid = LW_SA_UID;
	sa.uid = 2000;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EPERM);
	REQUIRE_RC(fx_setattr(&e.f, &root_cr, &sa, &a), 0);
	CHECK_EQ(a.uid, 2000);
	/* now other owns it: touch by a non-owner needs write permission */
	sa.valid = LW_SA_MODE;
	sa.mode = 0754;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EPERM);
	REQUIRE_RC(fx_setattr(&e.f, &other, &sa, &a), 0);
	sa.valid = LW_SA_ATIME_NOW | LW_SA_MTIME_NOW;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EACCES); /* group 101 has r-x... */
	sa.valid = LW_SA_MODE;
	sa.mode = 0664;
	REQUIRE_RC(fx_setattr(&e.f, &other, &sa, &a), 0);
	sa.valid = LW_SA_ATIME_NOW | LW_SA_MTIME_NOW;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), 0); /* ...and now rw */
	sa.valid = LW_SA_MTIME;
	CHECK_RC(fx_setattr(&e.f, &owner, &sa, &a), -EPERM);
	CHECK_RC(fx_setattr(&e.f, &other, &sa, &a), 0);
	/* a non-root truncation drops setuid */
	sa.valid = LW_SA_MODE;
	sa.mode = 04666;
	REQUIRE_RC(fx_setattr(&e.f, &other, &sa, &a), 0);
	sa.valid = LW_SA_SIZE;
	sa.size = 0;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	CHECK_EQ(a.mode, S_IFREG | 0666);
	fx_fini(&e.f);
}

static void test_open(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0), member = fx_cred(1500, 100, 0);
	struct loom_cred other = fx_cred(2000, 200, 0);
	struct loom_layout *l;
	struct lw_attr a;

	env_init(&e);
	/* file 0664 owner 1000 group 100 */
	l = NULL;
	REQUIRE_RC(fx_open(&e.f, &owner, e.file, O_RDWR, &a, &l), 0);
	CHECK_EQ(a.ino, e.file);
	REQUIRE(l != NULL);
	CHECK_EQ(l->nobjs, 1);
	free(l);
	CHECK_RC(fx_open(&e.f, &member, e.file, O_WRONLY, &a, NULL), 0);
	CHECK_RC(fx_open(&e.f, &other, e.file, O_RDONLY, &a, NULL), 0);
	CHECK_RC(fx_open(&e.f, &other, e.file, O_WRONLY, &a, NULL), -EACCES);
	CHECK_RC(fx_open(&e.f, &other, e.file, O_RDWR, &a, NULL), -EACCES);
	CHECK_RC(fx_open(&e.f, &other, e.file, O_RDONLY | O_TRUNC, &a, NULL), -EACCES);
	CHECK_RC(fx_open(&e.f, &other, e.file, O_ACCMODE, &a, NULL), -EACCES);
	/* O_CREAT/O_EXCL mean nothing here */
	CHECK_RC(fx_open(&e.f, &other, e.file, O_RDONLY | O_CREAT | O_EXCL, &a, NULL), 0);
	CHECK_RC(fx_open(&e.f, &other, e.file, O_RDONLY | O_NOATIME, &a, NULL), -EPERM);
	CHECK_RC(fx_open(&e.f, &owner, e.file, O_RDONLY | O_NOATIME, &a, NULL), 0);
	CHECK_RC(fx_open(&e.f, &owner, e.file, O_RDONLY | O_DIRECTORY, &a, NULL), -ENOTDIR);
	/* directories: read only */
	CHECK_RC(fx_open(&e.f, &other, e.dir, O_RDONLY | O_DIRECTORY, &a, &l), 0);
	CHECK(l == NULL);
	CHECK_RC(fx_open(&e.f, &root_cr, e.dir, O_WRONLY, &a, NULL), -EISDIR);
	CHECK_RC(fx_open(&e.f, &root_cr, e.dir, O_RDWR, &a, NULL), -EISDIR);
	CHECK_RC(fx_open(&e.f, &root_cr, e.dir, O_RDONLY | O_TRUNC, &a, NULL), -EISDIR);
	/* symlinks are never followed here */
	CHECK_RC(fx_open(&e.f, &root_cr, e.sym, O_RDONLY, &a, NULL), -ELOOP);
	/* fifos open, without a layout */
	l = (struct loom_layout *)1;
	CHECK_RC(fx_open(&e.f, &other, e.fifo, O_WRONLY, &a, &l), 0);
	CHECK(l == NULL);
	CHECK_RC(fx_open(&e.f, &other, 8888, O_RDONLY, &a, NULL), -ENOENT);
	fx_fini(&e.f);
}

static void test_open_trunc(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0), member = fx_cred(1500, 100, 0);
	struct lw_setattr sa;
	struct lw_attr a;

	env_init(&e);
	memset(&sa, 0, sizeof(sa));
	sa.ino = e.file;
	sa.valid = LW_SA_SIZE | LW_SA_MODE;
	sa.size = 123456;
	sa.mode = 06674;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	REQUIRE_RC(fx_open(&e.f, &member, e.file, O_WRONLY | O_TRUNC, &a, NULL), 0);
	CHECK_EQ(a.size, 0);
	CHECK_EQ(a.mtime, e.f.now.tv_sec);
	CHECK_EQ(a.ctime, e.f.now.tv_sec);
	CHECK_EQ(a.mode, S_IFREG | 0674); /* group-exec: both privileges go */
	CHECK_RC(fx_getattr(&e.f, e.file, &a), 0);
	CHECK_EQ(a.size, 0);
	/* even an empty file gets new times */
	REQUIRE_RC(fx_open(&e.f, &owner, e.file, O_RDWR | O_TRUNC, &a, NULL), 0);
	CHECK_EQ(a.mtime, e.f.now.tv_sec);
	/* a fifo is not truncated, but O_TRUNC still needs write permission */
	CHECK_RC(fx_open(&e.f, &member, e.fifo, O_RDONLY | O_TRUNC, &a, NULL), 0);
	fx_fini(&e.f);
}

static void test_size_update(void)
{
	struct env e;
	struct lw_attr a;
	struct mdt_txn *t;
	struct timespec mt = { .tv_sec = 5555, .tv_nsec = 42 };

	env_init(&e);
	t = fx_op_begin(&e.f);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE, 4096, 0, 0, mt, 0, &a), 0);
	CHECK_EQ(a.size, 4096);
	/* only grows */
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE, 100, 0, 0, mt, 0, &a), 0);
	CHECK_EQ(a.size, 4096);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE | LW_CL_MTIME, 8192, 0, 0, mt, 0, &a), 0);
	CHECK_EQ(a.size, 8192);
	CHECK_EQ(a.mtime, 5555);
	CHECK_EQ(a.mtime_ns, 42);
	CHECK_EQ(a.ctime, 5555);
	CHECK_RC(mdt_size_update(t, e.file, LW_CL_SIZE, (1ull << 62) + 1, 0, 0, mt, 0, &a), -EFBIG);
	CHECK_RC(mdt_size_update(t, e.dir, LW_CL_SIZE, 1, 0, 0, mt, 0, &a), -EINVAL);
	CHECK_RC(mdt_size_update(t, e.file, 0x80, 1, 0, 0, mt, 0, &a), -EINVAL);
	CHECK_RC(mdt_size_update(t, 77777, LW_CL_SIZE, 1, 0, 0, mt, 0, &a), -ENOENT);
	mt.tv_nsec = 1000000000;
	CHECK_RC(mdt_size_update(t, e.file, LW_CL_MTIME, 1, 0, 0, mt, 0, &a), -EINVAL);
	REQUIRE_RC(fx_op_end(&e.f, t, 0), 0);
	REQUIRE_RC(fx_getattr(&e.f, e.file, &a), 0);
	CHECK_EQ(a.size, 8192);
	/* an orphan still takes updates; a released inode is gone */
	REQUIRE_RC(fx_unlink(&e.f, &root_cr, e.dir, "file", NULL), 0);
	t = fx_op_begin(&e.f);
	mt.tv_nsec = 0;
	CHECK_RC(mdt_size_update(t, e.file, LW_CL_SIZE, 9000, 0, 0, mt, 0, &a), 0);
	CHECK_RC(mdt_inode_release(t, e.file), 0);
	CHECK_RC(mdt_size_update(t, e.file, LW_CL_SIZE, 9001, 0, 0, mt, 0, &a), -ENOENT);
	fx_op_end(&e.f, t, 0);
	fx_fini(&e.f);
}

/* st_blocks: estimated from the size until a client reports what the objects hold; holes then
 * count for nothing, and a truncation caps it. */
static void test_blocks(void)
{
	struct env e;
	struct lw_attr a;
	struct lw_setattr sa = { .valid = LW_SA_SIZE };
	struct mdt_txn *t;
	struct timespec mt = { .tv_sec = 5555 };

	env_init(&e);
	t = fx_op_begin(&e.f);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE, 1ull << 30, 0, 0, mt, 0, &a), 0);
	CHECK_EQ(a.blocks, (1ull << 30) / 512);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE | LW_CL_BLOCKS, 1ull << 30, 0, 0, mt, 16, &a), 0);
	CHECK_EQ(a.blocks, 16);
	REQUIRE_RC(fx_op_end(&e.f, t, 0), 0);
	sa.ino = e.file;
	sa.size = 1024;
	REQUIRE_RC(fx_setattr(&e.f, &root_cr, &sa, &a), 0);
	CHECK_EQ(a.blocks, 2);
	fx_fini(&e.f);
}

/* A writer who is not the owner drops setuid/setgid (as the kernel asks, by a chmod in the
 * writer's name); a chmod that does anything else stays the owner's. */
static void test_kill_privs(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0), writer = fx_cred(2000, 200, 0);
	struct lw_setattr sa = { .valid = LW_SA_MODE };
	struct lw_attr a;

	env_init(&e);
	sa.ino = e.file;
	sa.mode = 06777;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	sa.mode = 02777; /* more than setuid/setgid removed? no: only setuid */
	CHECK_RC(fx_setattr(&e.f, &writer, &sa, &a), 0);
	CHECK_EQ(a.mode & 07777, 02777);
	sa.mode = 02775; /* a real chmod by a non-owner */
	CHECK_RC(fx_setattr(&e.f, &writer, &sa, &a), -EPERM);
	sa.valid = LW_SA_KILLPRIV;
	CHECK_RC(fx_setattr(&e.f, &writer, &sa, &a), 0);
	CHECK_EQ(a.mode & 07777, 0777);
	/* without write permission, nothing */
	sa.valid = LW_SA_MODE;
	sa.mode = 04744;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	sa.mode = 0744;
	CHECK_RC(fx_setattr(&e.f, &writer, &sa, &a), -EPERM);
	fx_fini(&e.f);
}

/* Data-on-MDT bytes: written within dom_size only, cut by truncation (setattr and O_TRUNC),
 * gone with the inode; a directory default can turn them off. */
static void test_dom(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0);
	struct loom_layout *l = NULL;
	struct lw_setattr sa = { 0 };
	struct mdt_unlinked victim;
	struct lw_attr a;
	struct mdt_txn *t;
	const void *data;
	uint32_t len;
	uint8_t buf[100];

	env_init(&e);
	REQUIRE_RC(fx_getlayout(&e.f, e.file, &l), 0);
	CHECK_EQ(l->dom_size, LOOM_DEFAULT_DOM_SIZE); /* the built-in default */
	free(l);
	memset(buf, 'a', sizeof(buf));
	t = fx_op_begin(&e.f);
	CHECK_RC(fx_op_end(&e.f, t, mdt_dom_write(t, e.file, 1000, buf, sizeof(buf))), 0);
	t = fx_op_begin(&e.f); /* past dom_size */
	CHECK_RC(fx_op_end(&e.f, t, mdt_dom_write(t, e.file, LOOM_DEFAULT_DOM_SIZE - 10, buf, 11)), -EINVAL);
	t = fx_op_begin(&e.f); /* not a regular file */
	CHECK_RC(fx_op_end(&e.f, t, mdt_dom_write(t, e.dir, 0, buf, 1)), -EINVAL);

	t = fx_read_begin(&e.f);
	CHECK_RC(mdt_dom_read(t, e.file, &data, &len), 0);
	CHECK_EQ(len, 1100);
	CHECK(((const uint8_t *)data)[999] == 0 && ((const uint8_t *)data)[1000] == 'a');
	mdt_txn_abort(t);

	/* truncate to 1050: the bytes past it go */
	sa.ino = e.file;
	sa.valid = LW_SA_SIZE;
	sa.size = 1050;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &a), 0);
	t = fx_read_begin(&e.f);
	CHECK_RC(mdt_dom_read(t, e.file, &data, &len), 0);
	CHECK_EQ(len, 1050);
	mdt_txn_abort(t);
	/* O_TRUNC: all of them */
	REQUIRE_RC(fx_open(&e.f, &owner, e.file, O_RDWR | O_TRUNC, &a, NULL), 0);
	t = fx_read_begin(&e.f);
	CHECK_RC(mdt_dom_read(t, e.file, &data, &len), 0);
	CHECK_EQ(len, 0);
	mdt_txn_abort(t);

	/* unlink and release: the bytes go with the inode */
	t = fx_op_begin(&e.f);
	CHECK_RC(fx_op_end(&e.f, t, mdt_dom_write(t, e.file, 0, buf, 10)), 0);
	REQUIRE_RC(fx_unlink(&e.f, &owner, e.dir, "file", &victim), 0);
	REQUIRE_RC(fx_release(&e.f, e.file), 0);
	t = fx_read_begin(&e.f);
	CHECK_RC(mdt_dom_peek(t, e.file, &data, &len), 0);
	CHECK_EQ(len, 0);
	mdt_txn_abort(t);

	/* a directory default without Data-on-MDT: its files have none, and reads say so */
	{
		struct lw_layout req = fx_layout_req(0, 0, -1, NULL);
		uint64_t ino;

		req.dom_size = LOOM_DOM_NONE;
		REQUIRE_RC(fx_setlayout(&e.f, &root_cr, e.dir, &req, 0, &l), 0);
		free(l);
		REQUIRE_RC(fx_create(&e.f, &owner, e.dir, "plain", 0644, &ino), 0);
		REQUIRE_RC(fx_getlayout(&e.f, ino, &l), 0);
		CHECK_EQ(l->dom_size, 0);
		free(l);
		t = fx_read_begin(&e.f);
		CHECK_RC(mdt_dom_read(t, ino, &data, &len), -EINVAL);
		mdt_txn_abort(t);
		/* and one that asks for 128 KiB */
		req.dom_size = 128u << 10;
		REQUIRE_RC(fx_setlayout(&e.f, &root_cr, e.dir, &req, 0, &l), 0);
		free(l);
		REQUIRE_RC(fx_create(&e.f, &owner, e.dir, "big", 0644, &ino), 0);
		REQUIRE_RC(fx_getlayout(&e.f, ino, &l), 0);
		CHECK_EQ(l->dom_size, 128u << 10);
		free(l);
	}
	fx_fini(&e.f);
}

/* Data and name versions, and truncation epochs with their queue of cuts (trunc.c). */
static void test_versions_and_truncations(void)
{
	struct env e;
	struct loom_cred owner = fx_cred(1000, 100, 0);
	struct timespec mt = { .tv_sec = 5555 };
	struct lw_setattr sa = { 0 };
	struct mdt_trunc list[4];
	struct lw_attr a, b;
	struct mdt_txn *t;
	size_t n;

	env_init(&e);
	REQUIRE_RC(fx_getattr(&e.f, e.file, &a), 0);
	CHECK(a.data_version == 1 && a.name_version == 1 && a.trunc_epoch == 0);

	/* A report of writes moves the data version on, once; one without does not. */
	t = fx_op_begin(&e.f);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE | LW_CL_DATA, 3u << 20, 0, 0, mt, 0, &b), 0);
	CHECK_EQ(b.data_version, 2);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_MTIME, 0, 0, 0, mt, 0, &b), 0);
	CHECK_EQ(b.data_version, 2);
	REQUIRE_RC(fx_op_end(&e.f, t, 0), 0);

	/* A shrink of a file with bytes on its objects: a new epoch, and a cut queued to the new
	 * size; data version + 1; utimes moves nothing. */
	sa.ino = e.file;
	sa.valid = LW_SA_SIZE;
	sa.size = 1u << 20;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &b), 0);
	CHECK(b.trunc_epoch == 1 && b.data_version == 3);
	sa.valid = LW_SA_MTIME;
	sa.mtime = 1;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &b), 0);
	CHECK(b.data_version == 3 && b.trunc_epoch == 1);
	/* A growth: cut at the old size, in the next epoch. */
	sa.valid = LW_SA_SIZE;
	sa.size = 2u << 20;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &b), 0);
	CHECK_EQ(b.trunc_epoch, 2);
	t = fx_read_begin(&e.f);
	CHECK(mdt_trunc_pending(t, e.file, 1) && mdt_trunc_pending(t, e.file, 2));
	REQUIRE_RC(mdt_trunc_list(t, list, 4, &n), 0);
	CHECK(n == 1 && list[0].ino == e.file && list[0].epoch == 1 && list[0].cut == 1u << 20);
	mdt_txn_abort(t);

	/* A report of writes made before the truncation grows nothing; bytes it carries do. */
	t = fx_op_begin(&e.f);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE | LW_CL_DATA, 8u << 20, 1, 0, mt, 0, &b), 0);
	CHECK_EQ(b.size, 2u << 20);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE | LW_CL_DATA, 8u << 20, 1, 5u << 20, mt, 0, &b), 0);
	CHECK_EQ(b.size, 5u << 20);
	REQUIRE_RC(mdt_size_update(t, e.file, LW_CL_SIZE | LW_CL_DATA, 8u << 20, 2, 0, mt, 0, &b), 0);
	CHECK_EQ(b.size, 8u << 20);
	/* Cut: the queue moves to the next epoch of the inode. */
	REQUIRE_RC(mdt_trunc_done(t, e.file, 1), 0);
	REQUIRE_RC(mdt_trunc_done(t, e.file, 1), 0); /* twice is fine */
	REQUIRE_RC(mdt_trunc_list(t, list, 4, &n), 0);
	CHECK(n == 1 && list[0].epoch == 2 && list[0].cut == 1u << 20);
	REQUIRE_RC(fx_op_end(&e.f, t, 0), 0);

	/* O_TRUNC of a file with bytes on its objects: a cut to 0. */
	REQUIRE_RC(fx_open(&e.f, &owner, e.file, O_RDWR | O_TRUNC, &b, NULL), 0);
	CHECK_EQ(b.trunc_epoch, 3);
	t = fx_read_begin(&e.f);
	CHECK(mdt_trunc_pending(t, e.file, 3));
	mdt_txn_abort(t);
	/* An empty file, or one all within its Data-on-MDT part, has nothing to cut. */
	sa.size = 1000;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &b), 0);
	sa.size = 10;
	REQUIRE_RC(fx_setattr(&e.f, &owner, &sa, &b), 0);
	CHECK_EQ(b.trunc_epoch, 3);

	/* Names: a link and an unlink each move the name version on. */
	REQUIRE_RC(fx_link(&e.f, &owner, e.file, e.dir, "other"), 0);
	REQUIRE_RC(fx_getattr(&e.f, e.file, &b), 0);
	CHECK_EQ(b.name_version, 2);
	REQUIRE_RC(fx_unlink(&e.f, &owner, e.dir, "other", NULL), 0);
	REQUIRE_RC(fx_getattr(&e.f, e.file, &b), 0);
	CHECK_EQ(b.name_version, 3);

	/* A released inode's cuts are forgotten with it. */
	REQUIRE_RC(fx_unlink(&e.f, &owner, e.dir, "file", NULL), 0);
	REQUIRE_RC(fx_release(&e.f, e.file), 0);
	t = fx_read_begin(&e.f);
	REQUIRE_RC(mdt_trunc_list(t, list, 4, &n), 0);
	CHECK_EQ(n, 0);
	mdt_txn_abort(t);
	fx_fini(&e.f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_setattr_basic);
	RUN(test_setattr_size);
	RUN(test_setattr_perm);
	RUN(test_open);
	RUN(test_open_trunc);
	RUN(test_size_update);
	RUN(test_blocks);
	RUN(test_kill_privs);
	RUN(test_dom);
	RUN(test_versions_and_truncations);
	return check_report();
}
