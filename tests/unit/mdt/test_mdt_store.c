/* The MDT environment: format, open, reopen, transactions, statfs. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "mdt/internal.h"

static void test_format_fsname(void)
{
	static const char *const bad[] = { "", "ninechars", "a b", "a/b", "fs.1", "é" };
	char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/loom-mdt-test.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	CHECK_RC(mdt_format(dir, NULL), -EINVAL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_RC(mdt_format(dir, bad[i]), -EINVAL);
	CHECK_RC(mdt_format(dir, "eight_8-"), 0);
	CHECK_RC(mdt_format(dir, "eight_8-"), -EEXIST);
	CHECK_RC(mdt_format(dir, "other"), -EEXIST);
	fx_rm_rf(dir);
}

static void test_open_missing_and_busy(void)
{
	struct mdt_store *s, *s2;
	char dir[64], sub[96];

	snprintf(dir, sizeof(dir), "/tmp/loom-mdt-test.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	CHECK_RC(mdt_store_open(dir, &s), -ENOENT);
	snprintf(sub, sizeof(sub), "%s/not/yet/there", dir);
	CHECK_RC(mdt_store_open(sub, &s), -ENOENT);
	/* format creates missing directories */
	REQUIRE_RC(mdt_format(sub, "deep"), 0);
	REQUIRE_RC(mdt_store_open(sub, &s), 0);
	CHECK(strcmp(mdt_store_fsname(s), "deep") == 0);
	/* one MDS at a time */
	CHECK_RC(mdt_store_open(sub, &s2), -EBUSY);
	CHECK_RC(mdt_format(sub, "deep"), -EBUSY);
	mdt_store_close(s);
	REQUIRE_RC(mdt_store_open(sub, &s), 0);
	mdt_store_close(s);
	mdt_store_close(NULL);
	fx_rm_rf(dir);
}

static void test_root(void)
{
	struct fx f;
	struct lw_attr a;
	struct loom_layout *l;
	struct loom_cred root = fx_root(), user = fx_cred(1000, 1000, 0);

	fx_init(&f);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &a), 0);
	CHECK_EQ(a.ino, LOOM_ROOT_INO);
	CHECK_EQ(a.gen, 1);
	CHECK_EQ(a.mode, S_IFDIR | 0755);
	CHECK_EQ(a.uid, 0);
	CHECK_EQ(a.gid, 0);
	CHECK_EQ(a.nlink, 2);
	CHECK_EQ(a.size, 4096);
	CHECK_EQ(a.blocks, 8);
	CHECK_EQ(a.blksize, 4096);
	CHECK(a.ctime > 0);
	/* ".." of the root is the root */
	REQUIRE_RC(fx_lookup(&f, &user, LOOM_ROOT_INO, "..", &a), 0);
	CHECK_EQ(a.ino, LOOM_ROOT_INO);
	REQUIRE_RC(fx_lookup(&f, &root, LOOM_ROOT_INO, ".", &a), 0);
	CHECK_EQ(a.ino, LOOM_ROOT_INO);
	/* the filesystem default layout */
	REQUIRE_RC(fx_getlayout(&f, LOOM_ROOT_INO, &l), 0);
	CHECK_EQ(l->pattern, LOOM_PATTERN_RAID0);
	CHECK_EQ(l->stripe_size, 4u << 20);
	CHECK_EQ(l->stripe_count, 1);
	CHECK_EQ(l->stripe_offset, -1);
	CHECK_EQ(l->nobjs, 0);
	CHECK_EQ(l->flags, LOOM_LAYOUT_DEFAULT);
	free(l);
	CHECK_RC(fx_getattr(&f, 2, &a), -ENOENT);
	CHECK_RC(fx_getattr(&f, 0, &a), -ENOENT);
	fx_fini(&f);
}

/* Everything a namespace holds survives close and open. */
static void test_persistence(void)
{
	struct fx f;
	struct loom_cred root = fx_root(), user = fx_cred(1000, 100, 0);
	struct lw_attr a, a2;
	struct mdt_txn *t;
	uint64_t d, file, link;
	char buf[64];
	size_t len;

	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "d", 0777, &d), 0);
	REQUIRE_RC(fx_create(&f, &user, d, "file", 0640, &file), 0);
	REQUIRE_RC(fx_symlink(&f, &user, d, "sym", "file", &link), 0);
	REQUIRE_RC(fx_setxattr(&f, &user, file, "user.k", "v1", 0), 0);
	REQUIRE_RC(fx_getattr(&f, file, &a), 0);
	fx_reopen(&f);

	CHECK(strcmp(mdt_store_fsname(f.s), FX_FSNAME) == 0);
	CHECK_EQ(fx_ino(&f, LOOM_ROOT_INO, "d"), d);
	CHECK_EQ(fx_ino(&f, d, "file"), file);
	REQUIRE_RC(fx_getattr(&f, file, &a2), 0);
	CHECK(memcmp(&a, &a2, sizeof(a)) == 0);
	t = fx_read_begin(&f);
	CHECK_RC(mdt_readlink(t, link, buf, sizeof(buf), &len), 0);
	CHECK(len == 4 && memcmp(buf, "file", 4) == 0);
	CHECK_RC(mdt_getxattr(t, &user, file, "user.k", 6, buf, sizeof(buf), &len), 0);
	CHECK(len == 2 && memcmp(buf, "v1", 2) == 0);
	mdt_txn_abort(t);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &a), 0);
	CHECK_EQ(a.nlink, 3);
	fx_fini(&f);
}

/* A failed request's child transaction leaves nothing behind; its siblings commit. */
static void test_child_abort(void)
{
	struct fx f;
	struct loom_cred root = fx_root();
	struct mdt_txn *top, *c1, *c2, *c3;
	struct lw_attr a, before;
	uint64_t ino_a;

	fx_init(&f);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &before), 0);
	REQUIRE_RC(mdt_txn_begin(f.s, true, &top), 0);
	REQUIRE_RC(mdt_txn_child(top, &c1), 0);
	REQUIRE_RC(mdt_mkdir(c1, &root, LOOM_ROOT_INO, "a", 1, 0755, fx_tick(&f), &a), 0);
	ino_a = a.ino;
	REQUIRE_RC(mdt_txn_commit(c1), 0);
	REQUIRE_RC(mdt_txn_child(top, &c2), 0);
	REQUIRE_RC(mdt_mkdir(c2, &root, LOOM_ROOT_INO, "b", 1, 0755, fx_tick(&f), &a), 0);
	REQUIRE_RC(mdt_create(c2, &root, a.ino, "x", 1, 0644, 0, true, NULL, fx_tick(&f), &a, NULL,
			      NULL), -ENOSPC); /* no OSTs: the request fails half way */
	mdt_txn_abort(c2);
	/* a child of a child works too, and its abort is local */
	REQUIRE_RC(mdt_txn_child(top, &c3), 0);
	{
		struct mdt_txn *gc;
		REQUIRE_RC(mdt_txn_child(c3, &gc), 0);
		REQUIRE_RC(mdt_mkdir(gc, &root, LOOM_ROOT_INO, "c", 1, 0755, fx_tick(&f), &a), 0);
		mdt_txn_abort(gc);
	}
	REQUIRE_RC(mdt_txn_commit(c3), 0);
	REQUIRE_RC(mdt_txn_commit(top), 0);

	CHECK_EQ(fx_ino(&f, LOOM_ROOT_INO, "a"), ino_a);
	CHECK_RC(fx_lookup(&f, &root, LOOM_ROOT_INO, "b", &a), -ENOENT);
	CHECK_RC(fx_lookup(&f, &root, LOOM_ROOT_INO, "c", &a), -ENOENT);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &a), 0);
	CHECK_EQ(a.nlink, before.nlink + 1);

	/* a top-level abort leaves no trace either */
	REQUIRE_RC(mdt_txn_begin(f.s, true, &top), 0);
	REQUIRE_RC(mdt_mkdir(top, &root, LOOM_ROOT_INO, "d", 1, 0755, fx_tick(&f), &a), 0);
	mdt_txn_abort(top);
	CHECK_RC(fx_lookup(&f, &root, LOOM_ROOT_INO, "d", &a), -ENOENT);

	/* no child of a read transaction; writes in one fail */
	REQUIRE_RC(mdt_txn_begin(f.s, false, &top), 0);
	CHECK_RC(mdt_txn_child(top, &c1), -EINVAL);
	CHECK(mdt_mkdir(top, &root, LOOM_ROOT_INO, "e", 1, 0755, fx_tick(&f), &a) < 0);
	REQUIRE_RC(mdt_txn_commit(top), 0);
	CHECK_RC(fx_lookup(&f, &root, LOOM_ROOT_INO, "e", &a), -ENOENT);
	fx_fini(&f);
}

/* Inode numbers only grow, across unlink, release and reopen. */
static void test_ino_never_reused(void)
{
	struct fx f;
	struct loom_cred root = fx_root();
	uint64_t first, second, third;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_create(&f, &root, LOOM_ROOT_INO, "f", 0644, &first), 0);
	CHECK(first > LOOM_ROOT_INO);
	REQUIRE_RC(fx_unlink(&f, &root, LOOM_ROOT_INO, "f", NULL), 0);
	REQUIRE_RC(fx_release(&f, first), 0);
	fx_reopen(&f);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "g", 0755, &second), 0);
	CHECK(second > first);
	REQUIRE_RC(fx_rmdir(&f, &root, LOOM_ROOT_INO, "g"), 0);
	fx_reopen(&f);
	REQUIRE_RC(fx_create(&f, &root, LOOM_ROOT_INO, "f", 0644, &third), 0);
	CHECK(third > second);
	fx_fini(&f);
}

static void test_statfs(void)
{
	struct fx f;
	struct loom_cred root = fx_root();
	struct lw_statfs sf, sf2;
	struct mdt_txn *t;

	fx_init(&f);
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_statfs(t, &sf), 0);
	mdt_txn_abort(t);
	CHECK(sf.bsize > 0);
	CHECK(sf.blocks > 0 && sf.bfree <= sf.blocks && sf.bavail <= sf.bfree);
	CHECK_EQ(sf.namemax, 255);
	CHECK_EQ(sf.files - sf.ffree, 1); /* the root */
	for (int i = 0; i < 5; i++) {
		char name[8];
		snprintf(name, sizeof(name), "d%d", i);
		REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, name, 0755, NULL), 0);
	}
	t = fx_read_begin(&f);
	REQUIRE_RC(mdt_statfs(t, &sf2), 0);
	mdt_txn_abort(t);
	CHECK_EQ(sf2.files - sf2.ffree, 6);
	fx_fini(&f);
}

/* A format that died before its commit left an empty environment: open refuses it, format
 * finishes the job. */
static void test_interrupted_format(void)
{
	struct mdt_store *s;
	MDB_env *env;
	char dir[64];

	snprintf(dir, sizeof(dir), "/tmp/loom-mdt-test.XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	REQUIRE(mdb_env_create(&env) == 0);
	REQUIRE(mdb_env_open(env, dir, 0, 0600) == 0);
	mdb_env_close(env);
	CHECK_RC(mdt_store_open(dir, &s), -EIO);
	CHECK_RC(mdt_format(dir, "again"), 0);
	REQUIRE_RC(mdt_store_open(dir, &s), 0);
	CHECK(strcmp(mdt_store_fsname(s), "again") == 0);
	mdt_store_close(s);
	CHECK_RC(mdt_format(dir, "again"), -EEXIST);
	fx_rm_rf(dir);
}

/* Names the server should have refused never reach LMDB. */
static void test_bad_names(void)
{
	struct fx f;
	struct loom_cred root = fx_root();
	char longname[300];
	struct mdt_txn *t;
	struct lw_attr a;

	fx_init(&f);
	memset(longname, 'a', sizeof(longname));
	t = fx_op_begin(&f);
	CHECK_RC(mdt_lookup(t, &root, LOOM_ROOT_INO, longname, 256, &a), -ENAMETOOLONG);
	CHECK_RC(mdt_lookup(t, &root, LOOM_ROOT_INO, longname, 255, &a), -ENOENT);
	CHECK_RC(mdt_mkdir(t, &root, LOOM_ROOT_INO, longname, sizeof(longname), 0755, f.now, &a),
		 -ENAMETOOLONG);
	CHECK_RC(mdt_mkdir(t, &root, LOOM_ROOT_INO, "a/b", 3, 0755, f.now, &a), -EINVAL);
	CHECK_RC(mdt_mkdir(t, &root, LOOM_ROOT_INO, "a\0b", 3, 0755, f.now, &a), -EINVAL);
	CHECK_RC(mdt_mkdir(t, &root, LOOM_ROOT_INO, "a\tb", 3, 0755, f.now, &a), 0);
	CHECK_RC(mdt_mkdir(t, &root, LOOM_ROOT_INO, "", 0, 0755, f.now, &a), -ENOENT);
	CHECK_RC(mdt_unlink(t, &root, LOOM_ROOT_INO, longname, 1000, f.now, NULL), -ENAMETOOLONG);
	CHECK_RC(mdt_rename(t, &root, LOOM_ROOT_INO, "a\tb", 3, LOOM_ROOT_INO, longname, 999, 0, f.now,
			    NULL, NULL), -ENAMETOOLONG);
	CHECK_RC(mdt_rename(t, &root, LOOM_ROOT_INO, "a\tb", 3, LOOM_ROOT_INO, "", 0, 0, f.now, NULL, NULL),
		 -ENOENT);
	CHECK_RC(mdt_create(t, &root, LOOM_ROOT_INO, "x/", 2, 0644, 0, true, NULL, f.now, &a, NULL, NULL),
		 -EINVAL);
	CHECK_RC(mdt_symlink(t, &root, LOOM_ROOT_INO, "", 0, "t", 1, f.now, &a), -ENOENT);
	CHECK_RC(mdt_link(t, &root, LOOM_ROOT_INO, LOOM_ROOT_INO, longname, 256, f.now, &a),
		 -ENAMETOOLONG);
	CHECK_RC(mdt_rmdir(t, &root, LOOM_ROOT_INO, "", 0, f.now), -ENOENT);
	CHECK_RC(mdt_getxattr(t, &root, LOOM_ROOT_INO, longname, 300, NULL, 0, NULL), -ERANGE);
	fx_op_end(&f, t, 0);
	fx_fini(&f);
}

/* A damaged record is -EIO, not a crash or a wrong answer. */
static void test_corrupt_record(void)
{
	struct fx f;
	struct loom_cred root = fx_root();
	struct mdt_txn *t;
	struct lw_attr a;
	uint8_t key[8];
	uint64_t d;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root, LOOM_ROOT_INO, "d", 0755, &d), 0);
	t = fx_op_begin(&f);
	mdt_put_be64(key, d);
	REQUIRE_RC(mdt_put(t, MDT_DB_INODES, key, sizeof(key), "short", 5), 0);
	CHECK_RC(mdt_getattr(t, d, &a), -EIO);
	CHECK_RC(mdt_lookup(t, &root, LOOM_ROOT_INO, "d", 1, &a), -EIO);
	fx_op_end(&f, t, -EIO);
	CHECK_RC(fx_getattr(&f, d, &a), 0);
	fx_fini(&f);
}

/* The reply cache: an entry answers only its client, request id and opcode; it survives a
 * reopen; the sweep takes the oldest first and leaves younger ones. */
static void test_reply_cache(void)
{
	const uint64_t a[2] = { 1, 2 }, b[2] = { 3, 4 };
	struct mdt_txn *t;
	struct fx f;
	void *body;
	uint32_t len;
	size_t n;
	int status;

	fx_init(&f);
	REQUIRE_RC(mdt_txn_begin(f.s, true, &t), 0);
	CHECK_RC(mdt_reply_put(t, a, 7, 0x111, 0, "seven", 5, 1000), 0);
	CHECK_RC(mdt_reply_put(t, a, 8, 0x112, -17, NULL, 0, 2000), 0);
	CHECK_RC(mdt_reply_put(t, b, 7, 0x111, 0, "other", 5, 3000), 0);
	REQUIRE_RC(mdt_txn_commit(t), 0);
	fx_reopen(&f);

	REQUIRE_RC(mdt_txn_begin(f.s, false, &t), 0);
	REQUIRE_RC(mdt_reply_get(t, a, 7, 0x111, &status, &body, &len), 0);
	CHECK_EQ(status, 0);
	CHECK(len == 5 && memcmp(body, "seven", 5) == 0);
	free(body);
	REQUIRE_RC(mdt_reply_get(t, a, 8, 0x112, &status, &body, &len), 0);
	CHECK(status == -17 && len == 0);
	free(body);
	CHECK_RC(mdt_reply_get(t, a, 7, 0x112, &status, &body, &len), -ENOENT); /* another opcode */
	CHECK_RC(mdt_reply_get(t, a, 9, 0x111, &status, &body, &len), -ENOENT);
	REQUIRE_RC(mdt_reply_get(t, b, 7, 0x111, &status, &body, &len), 0);
	CHECK(len == 5 && memcmp(body, "other", 5) == 0);
	free(body);
	mdt_txn_abort(t);

	/* Older than 2500: a's two entries, oldest first, one at a time. */
	REQUIRE_RC(mdt_txn_begin(f.s, true, &t), 0);
	CHECK_RC(mdt_reply_sweep(t, 2500, 1, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_RC(mdt_reply_get(t, a, 7, 0x111, &status, &body, &len), -ENOENT);
	REQUIRE_RC(mdt_reply_get(t, a, 8, 0x112, &status, &body, &len), 0);
	free(body);
	CHECK_RC(mdt_reply_sweep(t, 2500, 100, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_RC(mdt_reply_get(t, a, 8, 0x112, &status, &body, &len), -ENOENT);
	REQUIRE_RC(mdt_reply_get(t, b, 7, 0x111, &status, &body, &len), 0);
	free(body);
	/* Written again later under the same key: the old age entry does not take the new one. */
	CHECK_RC(mdt_reply_put(t, b, 7, 0x111, 0, "again", 5, 5000), 0);
	CHECK_RC(mdt_reply_sweep(t, 4000, 100, &n), 0);
	CHECK_EQ(n, 1);
	REQUIRE_RC(mdt_reply_get(t, b, 7, 0x111, &status, &body, &len), 0);
	CHECK(len == 5 && memcmp(body, "again", 5) == 0);
	free(body);
	CHECK_RC(mdt_reply_sweep(t, 6000, 100, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_RC(mdt_reply_get(t, b, 7, 0x111, &status, &body, &len), -ENOENT);
	REQUIRE_RC(mdt_txn_commit(t), 0);
	fx_fini(&f);
}

int main(void)
{
	RUN(test_format_fsname);
	RUN(test_open_missing_and_busy);
	RUN(test_root);
	RUN(test_persistence);
	RUN(test_child_abort);
	RUN(test_ino_never_reused);
	RUN(test_statfs);
	RUN(test_interrupted_format);
	RUN(test_bad_names);
	RUN(test_corrupt_record);
	RUN(test_reply_cache);
	return check_report();
}
