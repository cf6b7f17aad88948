/* A copy of the MDT as a read transaction saw it (snapcopy.c): what changed after the transaction
 * began is not in it, the copy opens as an MDT, it is never half there. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "mdt/internal.h"

static struct loom_cred root_cr;

static void test_copy_is_the_transactions_point(void)
{
	struct fx f, copy = { 0 };
	struct mdt_txn *rt;
	struct lw_attr a;
	uint64_t d, ino, entries = 0, entries_again = 0;
	char snap[128];

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "kept", 0644, &ino), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "removed-after", 0600, &ino), 0);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, ino, "user.tag", "before", 0), 0);
	/* More than one of the copy's write transactions. */
	fx_batch_begin(&f);
	for (int i = 0; i < 25000; i++) {
		char name[32];

		snprintf(name, sizeof(name), "many-%05d", i);
		REQUIRE_RC(fx_create(&f, &root_cr, LOOM_ROOT_INO, name, 0644, &ino), 0);
	}
	fx_batch_commit(&f);

	rt = fx_read_begin(&f);
	/* Changes after the point: not in the copy. */
	REQUIRE_RC(fx_unlink(&f, &root_cr, d, "removed-after", NULL), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "made-after", 0644, &ino), 0);
	snprintf(snap, sizeof(snap), "%s-snap", f.dir);
	REQUIRE_RC(mdt_store_copy_txn(rt, snap, &entries), 0);
	CHECK(entries > 25000);
	/* A second copy to the same place is refused, and the first stays whole. */
	CHECK_RC(mdt_store_copy_txn(rt, snap, &entries_again), -EEXIST);
	mdt_txn_abort(rt);

	snprintf(copy.dir, sizeof(copy.dir), "%s", snap);
	copy.now = f.now;
	REQUIRE_RC(mdt_store_open(copy.dir, &copy.s), 0);
	CHECK_RC(fx_lookup(&copy, &root_cr, d, "kept", &a), 0);
	CHECK_RC(fx_lookup(&copy, &root_cr, d, "removed-after", &a), 0);
	CHECK_RC(fx_lookup(&copy, &root_cr, d, "made-after", &a), -ENOENT);
	CHECK_RC(fx_lookup(&copy, &root_cr, LOOM_ROOT_INO, "many-24999", &a), 0);
	/* The live MDT went on. */
	CHECK_RC(fx_lookup(&f, &root_cr, d, "removed-after", &a), -ENOENT);
	CHECK_RC(fx_lookup(&f, &root_cr, d, "made-after", &a), 0);
	/* No lock file of the live environment came along, nor a .part. */
	{
		char path[192];
		struct stat st;

		snprintf(path, sizeof(path), "%s.part", snap);
		CHECK(stat(path, &st) != 0 && errno == ENOENT);
	}
	fx_fini(&copy);
	fx_fini(&f);
}

static void test_a_left_part_is_replaced(void)
{
	struct fx f;
	struct mdt_txn *rt;
	struct mdt_store *s;
	uint64_t d, entries;
	char snap[128], part[160], junk[192];
	int fd;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	/* What a copy killed midway leaves: a .part, never the name itself. */
	snprintf(snap, sizeof(snap), "%s-snap", f.dir);
	snprintf(part, sizeof(part), "%s.part", snap);
	REQUIRE(mkdir(part, 0700) == 0);
	snprintf(junk, sizeof(junk), "%s/data.mdb", part);
	fd = open(junk, O_WRONLY | O_CREAT, 0600);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, "half a copy", 11) == 11);
	close(fd);
	CHECK_RC(mdt_store_open(snap, &s), -ENOENT);

	rt = fx_read_begin(&f);
	REQUIRE_RC(mdt_store_copy_txn(rt, snap, &entries), 0);
	mdt_txn_abort(rt);
	REQUIRE_RC(mdt_store_open(snap, &s), 0);
	mdt_store_close(s);
	fx_rm_rf(snap);
	fx_fini(&f);
}

static void test_bad_arguments(void)
{
	struct fx f;
	struct mdt_txn *wt;
	uint64_t entries;

	fx_init(&f);
	CHECK_RC(mdt_store_copy_txn(NULL, "/tmp/x", &entries), -EINVAL);
	/* Into a directory that does not exist: nothing made. */
	wt = fx_read_begin(&f);
	CHECK_RC(mdt_store_copy_txn(wt, "/nonexistent/dir/snap", &entries), -ENOENT);
	mdt_txn_abort(wt);
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_copy_is_the_transactions_point);
	RUN(test_a_left_part_is_replaced);
	RUN(test_bad_arguments);
	return check_report();
}
