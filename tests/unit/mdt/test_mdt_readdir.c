/* readdir: order, cookies, pages, and a directory that changes while it is read. */
#include <dirent.h>
#include <sys/stat.h>

#include "fixture.h"

static struct loom_cred root_cr;

#define MAX_SEEN 12000

/* What a walk returned, in order. */
struct seen {
	uint32_t n;
	char names[MAX_SEEN][32];
	uint64_t inos[MAX_SEEN];
	uint64_t cookies[MAX_SEEN];
	uint32_t types[MAX_SEEN];
	struct lw_attr attrs[MAX_SEEN];
};

static struct seen seen_a;

/* One page from `cookie`: appends to s, returns the cookie to resume from. */
static int read_page(struct fx *f, const struct loom_cred *cr, uint64_t dir, uint64_t cookie,
		     size_t page, bool plus, struct seen *s, uint64_t *next, bool *eof)
{
	static uint8_t buf[1 << 17];
	struct mdt_txn *t = fx_read_begin(f);
	struct lw_wr w;
	struct lw_rd r;
	uint32_t count;
	int rc;

	REQUIRE(page <= sizeof(buf));
	lw_wr_init(&w, buf, page);
	rc = mdt_readdir(t, cr, dir, cookie, plus, &w, &count, eof);
	mdt_txn_abort(t);
	*next = cookie;
	if (rc)
		return rc;
	lw_rd_init(&r, buf, w.len);
	for (uint32_t i = 0; i < count; i++) {
		struct lw_dirent de;
		struct lw_attr attr;
		const char *name;

		REQUIRE_RC(lw_readdir_next(&r, buf, plus, &de, &name, &attr), 0);
		REQUIRE(s->n < MAX_SEEN && de.namelen < sizeof(s->names[0]));
		memcpy(s->names[s->n], name, de.namelen);
		s->names[s->n][de.namelen] = '\0';
		s->inos[s->n] = de.ino;
		s->cookies[s->n] = de.cookie;
		s->types[s->n] = de.type;
		if (plus)
			s->attrs[s->n] = attr;
		s->n++;
		*next = de.cookie;
	}
	CHECK_RC(lw_rd_done(&r), 0);
	return 0;
}

/* Reads the whole directory in pages of `page` bytes. */
static void read_all(struct fx *f, uint64_t dir, size_t page, bool plus, struct seen *s)
{
	uint64_t cookie = 0;
	bool eof = false;

	s->n = 0;
	for (int guard = 0; !eof && guard < 100000; guard++)
		REQUIRE_RC(read_page(f, &root_cr, dir, cookie, page, plus, s, &cookie, &eof), 0);
	REQUIRE(eof);
}

static int find(const struct seen *s, const char *name)
{
	int hits = -1;

	for (uint32_t i = 0; i < s->n; i++) {
		if (strcmp(s->names[i], name) == 0) {
			if (hits >= 0)
				return -2; /* twice */
			hits = (int)i;
		}
	}
	return hits;
}

static void test_basic(void)
{
	struct fx f;
	struct seen *s = &seen_a;
	struct lw_attr a;
	uint64_t d, sub, file, sym;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "file", 0644, &file), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0755, &sub), 0);
	REQUIRE_RC(fx_symlink(&f, &root_cr, d, "sym", "file", &sym), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "fifo", S_IFIFO | 0644, NULL), 0);

	read_all(&f, d, 4096, true, s);
	REQUIRE(s->n == 6);
	CHECK(strcmp(s->names[0], ".") == 0 && s->inos[0] == d && s->cookies[0] == 1);
	CHECK(strcmp(s->names[1], "..") == 0 && s->inos[1] == LOOM_ROOT_INO && s->cookies[1] == 2);
	CHECK_EQ(s->types[0], DT_DIR);
	CHECK_EQ(s->types[1], DT_DIR);
	CHECK(strcmp(s->names[2], "file") == 0 && s->inos[2] == file && s->types[2] == DT_REG);
	CHECK(strcmp(s->names[3], "sub") == 0 && s->inos[3] == sub && s->types[3] == DT_DIR);
	CHECK(strcmp(s->names[4], "sym") == 0 && s->inos[4] == sym && s->types[4] == DT_LNK);
	CHECK(strcmp(s->names[5], "fifo") == 0 && s->types[5] == DT_FIFO);
	for (uint32_t i = 2; i < s->n; i++)
		CHECK(s->cookies[i] > s->cookies[i - 1]);
	CHECK_EQ(s->cookies[2], 3);
	/* plus: the attributes getattr gives */
	for (uint32_t i = 0; i < s->n; i++) {
		REQUIRE_RC(fx_getattr(&f, s->inos[i], &a), 0);
		CHECK(memcmp(&a, &s->attrs[i], sizeof(a)) == 0);
	}
	/* the root's ".." is the root */
	read_all(&f, LOOM_ROOT_INO, 4096, false, s);
	CHECK_EQ(s->inos[1], LOOM_ROOT_INO);
	CHECK_EQ(s->n, 3);
	fx_fini(&f);
}

static void test_cookies_and_errors(void)
{
	struct fx f;
	struct seen *s = &seen_a;
	struct loom_cred user = fx_cred(1000, 1000, 0);
	uint8_t buf[256];
	struct mdt_txn *t;
	struct lw_wr w;
	uint32_t count;
	uint64_t d, xonly, file, next;
	bool eof;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "xonly", 0711, &xonly), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "a", 0644, &file), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "b", 0644, NULL), 0);

	/* resume after ".": "..", then the entries */
	s->n = 0;
	REQUIRE_RC(read_page(&f, &root_cr, d, 1, 4096, false, s, &next, &eof), 0);
	CHECK(s->n == 3 && strcmp(s->names[0], "..") == 0 && eof);
	s->n = 0;
	REQUIRE_RC(read_page(&f, &root_cr, d, 2, 4096, false, s, &next, &eof), 0);
	CHECK(s->n == 2 && strcmp(s->names[0], "a") == 0 && eof);
	s->n = 0;
	REQUIRE_RC(read_page(&f, &root_cr, d, 3, 4096, false, s, &next, &eof), 0);
	CHECK(s->n == 1 && strcmp(s->names[0], "b") == 0 && eof);
	/* past the end: nothing, eof */
	s->n = 0;
	REQUIRE_RC(read_page(&f, &root_cr, d, 4, 4096, false, s, &next, &eof), 0);
	CHECK(s->n == 0 && eof);
	REQUIRE_RC(read_page(&f, &root_cr, d, UINT64_MAX, 4096, false, s, &next, &eof), 0);
	CHECK(s->n == 0 && eof);
	REQUIRE_RC(read_page(&f, &root_cr, d, 1000000, 4096, false, s, &next, &eof), 0);
	CHECK(s->n == 0 && eof);

	/* one entry per page: 24 + 8 bytes fits ".", "..", "a", "b" */
	s->n = 0;
	next = 0;
	eof = false;
	for (int i = 0; i < 4; i++) {
		REQUIRE_RC(read_page(&f, &root_cr, d, next, 32, false, s, &next, &eof), 0);
		CHECK_EQ(s->n, i + 1);
		CHECK(eof == (i == 3));
	}
	/* not even one entry fits */
	t = fx_read_begin(&f);
	lw_wr_init(&w, buf, 31);
	CHECK_RC(mdt_readdir(t, &root_cr, d, 0, false, &w, &count, &eof), -EINVAL);
	lw_wr_init(&w, buf, 32 + 95);
	CHECK_RC(mdt_readdir(t, &root_cr, d, 0, true, &w, &count, &eof), -EINVAL);
	lw_wr_init(&w, buf, 32);
	CHECK_RC(mdt_readdir(t, &root_cr, d, 2, false, &w, &count, &eof), 0);
	CHECK_EQ(count, 1);
	CHECK(!eof);
	/* errors */
	lw_wr_init(&w, buf, sizeof(buf));
	CHECK_RC(mdt_readdir(t, &root_cr, file, 0, false, &w, &count, &eof), -ENOTDIR);
	CHECK_RC(mdt_readdir(t, &root_cr, 99999, 0, false, &w, &count, &eof), -ENOENT);
	CHECK_RC(mdt_readdir(t, &user, xonly, 0, false, &w, &count, &eof), -EACCES);
	CHECK_RC(mdt_readdir(t, &user, d, 0, false, &w, &count, &eof), 0);
	mdt_txn_abort(t);
	fx_fini(&f);
}

/* Entries added and removed between pages: nothing skipped, nothing twice, new ones last. */
static void test_changes_between_pages(void)
{
	struct fx f;
	struct seen *s = &seen_a;
	char name[32];
	uint64_t d, cookie = 0;
	bool eof = false;
	int pages = 0;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	fx_batch_begin(&f);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "old%03d", i);
		REQUIRE_RC(fx_mkdir(&f, &root_cr, d, name, 0755, NULL), 0);
	}
	fx_batch_commit(&f);

	s->n = 0;
	while (!eof) {
		uint32_t before = s->n;

		REQUIRE_RC(read_page(&f, &root_cr, d, cookie, 40 * 32, false, s, &cookie, &eof), 0);
		CHECK(s->n > before);
		pages++;
		if (pages == 2) {
			/* old000..old009 read already: remove some read and some unread, add new */
			for (int i = 0; i < 200; i += 7) {
				snprintf(name, sizeof(name), "old%03d", i);
				REQUIRE_RC(fx_rmdir(&f, &root_cr, d, name), 0);
			}
			for (int i = 0; i < 30; i++) {
				snprintf(name, sizeof(name), "new%03d", i);
				REQUIRE_RC(fx_mkdir(&f, &root_cr, d, name, 0755, NULL), 0);
			}
			/* removed and re-added: a new entry, at the end */
			REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "old007", 0755, NULL), 0);
		}
		if (pages == 4) {
			/* the entry the next page resumes after goes away */
			REQUIRE(s->n > 0);
			REQUIRE_RC(fx_rmdir(&f, &root_cr, d, s->names[s->n - 1]), 0);
		}
	}
	CHECK(pages > 5);
	/* every old entry read before it was removed, or never removed: exactly once */
	for (int i = 0; i < 200; i++) {
		int at;
		snprintf(name, sizeof(name), "old%03d", i);
		at = find(s, name);
		CHECK(at != -2 || i == 7); /* old007 shows up as the old and the new entry */
		if (i % 7 != 0 || i < 78) /* 78 entries (with "." and "..") were read first */
			CHECK(at >= 0 || at == -2);
	}
	/* removed before being reached: not returned */
	for (int i = 84; i < 200; i += 7) {
		snprintf(name, sizeof(name), "old%03d", i);
		CHECK_EQ(find(s, name), -1);
	}
	/* new ones all there, once, after every old one */
	for (int i = 0; i < 30; i++) {
		int at;
		snprintf(name, sizeof(name), "new%03d", i);
		at = find(s, name);
		CHECK(at >= 0);
		for (uint32_t j = (uint32_t)at + 1; j < s->n; j++)
			CHECK(strncmp(s->names[j], "old", 3) != 0 || strcmp(s->names[j], "old007") == 0);
	}
	/* cookies strictly increase over the whole walk */
	for (uint32_t i = 1; i < s->n; i++)
		CHECK(s->cookies[i] > s->cookies[i - 1]);
	fx_fini(&f);
}

/* A rename moves an entry to the end; an exchange keeps both in place. */
static void test_rename_cookies(void)
{
	struct fx f;
	struct seen *s = &seen_a;
	uint64_t d, d2;

	fx_init(&f);
	fx_add_osts(&f, 1);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d2", 0755, &d2), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "a", 0644, NULL), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "b", 0644, NULL), 0);
	REQUIRE_RC(fx_create(&f, &root_cr, d, "c", 0644, NULL), 0);
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "a", d, "z", 0, NULL), 0);
	read_all(&f, d, 4096, false, s);
	REQUIRE(s->n == 5);
	CHECK(strcmp(s->names[2], "b") == 0 && strcmp(s->names[4], "z") == 0);
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "b", d, "c", LW_RENAME_EXCHANGE, NULL), 0);
	read_all(&f, d, 4096, false, s);
	CHECK(strcmp(s->names[2], "b") == 0 && strcmp(s->names[3], "c") == 0);
	CHECK_EQ(s->cookies[2], 4);
	REQUIRE_RC(fx_rename(&f, &root_cr, d, "z", d2, "moved", 0, NULL), 0);
	read_all(&f, d, 4096, false, s);
	CHECK_EQ(s->n, 4);
	read_all(&f, d2, 4096, false, s);
	CHECK(s->n == 3 && strcmp(s->names[2], "moved") == 0 && s->cookies[2] == 3);
	fx_fini(&f);
}

static void test_ten_thousand(void)
{
	struct fx f;
	struct seen *s = &seen_a;
	char name[32];
	uint64_t d;

	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "big", 0755, &d), 0);
	fx_batch_begin(&f);
	for (int i = 0; i < 10000; i++) {
		snprintf(name, sizeof(name), "entry-%05d", (i * 7919) % 10000);
		REQUIRE_RC(fx_create(&f, &root_cr, d, name, S_IFIFO | 0644, NULL), 0);
	}
	fx_batch_commit(&f);
	read_all(&f, d, 4096, false, s);
	REQUIRE(s->n == 10002);
	for (int i = 0; i < 10000; i++) {
		snprintf(name, sizeof(name), "entry-%05d", (i * 7919) % 10000);
		CHECK(strcmp(s->names[i + 2], name) == 0); /* creation order */
	}
	for (uint32_t i = 1; i < s->n; i++)
		CHECK(s->cookies[i] > s->cookies[i - 1]);
	/* with attributes, in the largest pages the MDS sends */
	read_all(&f, d, 128 * 1024, true, s);
	CHECK_EQ(s->n, 10002);
	CHECK_EQ(s->attrs[5000].mode, S_IFIFO | 0644);
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_basic);
	RUN(test_cookies_and_errors);
	RUN(test_changes_between_pages);
	RUN(test_rename_cookies);
	RUN(test_ten_thousand);
	return check_report();
}
