/*
 * loom fsck's MDT half (src/mdt/fsck*.c): the inverse stripe math against the client's, then each
 * kind of damage made by hand in a real MDT (with the store's internals), found by a check,
 * repaired, and gone on the next check. Objects live on a fake OST in memory.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "fixture.h"
#include "mdt/fsck.h"
#include "mdt/internal.h"

#include "common/stripe.c" /* the reference: the client's stripe_obj_size */

static struct loom_cred root_cr;

/* ---- a fake OST and a recording reporter ---- */

struct fobj {
	uint32_t ost;
	uint64_t objid;
	struct mdt_fsck_obj st;
};

struct harness {
	struct fobj objs[256];
	size_t nobjs;
	uint32_t absent_ost;    /* an OST "not given" (-ENODEV), UINT32_MAX for none */
	int kinds[MDT_FSCK_NKINDS];
	int fixed[MDT_FSCK_NKINDS];
	int problems, repaired;
	int fix_calls;
	char last_path[512];
};

static struct fobj *fobj_find(struct harness *h, uint32_t ost, uint64_t objid)
{
	for (size_t i = 0; i < h->nobjs; i++)
		if (h->objs[i].ost == ost && h->objs[i].objid == objid)
			return &h->objs[i];
	return NULL;
}

/* Puts an object of `size` bytes on the fake OST, tagged ino:stripe. */
static void put_obj(struct harness *h, uint32_t ost, uint64_t objid, uint64_t size, uint64_t ino,
		    uint32_t stripe)
{
	struct fobj *o = fobj_find(h, ost, objid);

	if (!o) {
		REQUIRE(h->nobjs < sizeof(h->objs) / sizeof(h->objs[0]));
		o = &h->objs[h->nobjs++];
	}
	memset(o, 0, sizeof(*o));
	o->ost = ost;
	o->objid = objid;
	o->st.exists = true;
	o->st.size = size;
	o->st.blocks = (size + 511) / 512;
	o->st.mtime.tv_sec = 1800000000;
	o->st.tagged = true;
	o->st.tag_ino = ino;
	o->st.tag_stripe = stripe;
}

static void report_cb(void *arg, const struct mdt_fsck_problem *p)
{
	struct harness *h = arg;

	REQUIRE((unsigned)p->kind < MDT_FSCK_NKINDS);
	h->kinds[p->kind]++;
	h->problems++;
	if (p->fix) {
		h->fixed[p->kind]++;
		h->repaired++;
	}
	snprintf(h->last_path, sizeof(h->last_path), "%s", p->path ? p->path : "");
	if (getenv("FSCK_VERBOSE"))
		fprintf(stderr, "  %s: %s%s (ino %llu): %s%s%s\n", mdt_fsck_kind_name(p->kind),
			p->path ? p->path : "", p->path ? "" : "-", (unsigned long long)p->ino, p->what,
			p->fix ? "; repaired: " : "", p->fix ? p->fix : "");
}

static int stat_cb(void *arg, uint32_t ost, uint64_t objid, struct mdt_fsck_obj *out)
{
	struct harness *h = arg;
	struct fobj *o;

	if (ost == h->absent_ost)
		return -ENODEV;
	o = fobj_find(h, ost, objid);
	if (o)
		*out = o->st;
	else
		memset(out, 0, sizeof(*out));
	return 0;
}

static int fix_cb(void *arg, uint32_t ost, uint64_t objid, uint64_t ino, uint32_t stripe)
{
	struct harness *h = arg;
	struct fobj *o = fobj_find(h, ost, objid);

	h->fix_calls++;
	if (o && o->st.exists) {
		o->st.tagged = true;
		o->st.tag_ino = ino;
		o->st.tag_stripe = stripe;
	} else {
		put_obj(h, ost, objid, 0, ino, stripe);
	}
	return 0;
}

static void harness_reset(struct harness *h)
{
	memset(h->kinds, 0, sizeof(h->kinds));
	memset(h->fixed, 0, sizeof(h->fixed));
	h->problems = h->repaired = h->fix_calls = 0;
}

static void harness_init(struct harness *h)
{
	memset(h, 0, sizeof(*h));
	h->absent_ost = UINT32_MAX;
}

/* One whole check, as `loom fsck` runs it; *keep (may be NULL) gets the state for
 * mdt_fsck_object, else it is freed. Returns the check's rc. */
static int run_fsck(struct fx *f, struct harness *h, bool repair, struct mdt_fsck **keep)
{
	struct mdt_fsck_ops ops = { .report = report_cb, .obj_stat = stat_cb, .obj_fix = fix_cb,
				    .arg = h };
	struct mdt_fsck *fs = NULL;
	struct mdt_txn *t;
	int rc;

	harness_reset(h);
	REQUIRE_RC(mdt_txn_begin(f->s, repair, &t), 0);
	rc = mdt_fsck_new(t, repair, &ops, &fs);
	if (rc == 0)
		rc = mdt_fsck_namespace(fs);
	if (rc == 0)
		rc = mdt_fsck_layouts(fs);
	if (rc == 0)
		rc = mdt_txn_commit(t);
	else
		mdt_txn_abort(t);
	if (fs) {
		CHECK_EQ(mdt_fsck_stats(fs)->problems, h->problems);
		CHECK_EQ(mdt_fsck_stats(fs)->repaired, h->repaired);
	}
	if (keep)
		*keep = fs;
	else
		mdt_fsck_free(fs);
	return rc;
}

/* Checks, repairs, and checks again: the first finds `want` problems (all repaired, unless
 * unrepaired > 0), the last none. */
static void check_repair_clean(struct fx *f, struct harness *h, int want, int unrepaired)
{
	REQUIRE_RC(run_fsck(f, h, false, NULL), 0);
	CHECK_EQ(h->problems, want);
	CHECK_EQ(h->repaired, 0);
	REQUIRE_RC(run_fsck(f, h, true, NULL), 0);
	CHECK_EQ(h->problems, want);
	CHECK_EQ(h->repaired, want - unrepaired);
	REQUIRE_RC(run_fsck(f, h, false, NULL), 0);
	CHECK_EQ(h->problems, unrepaired);
	/* And the MDT still opens. */
	fx_reopen(f);
}

/* ---- raw damage ---- */

static struct mdt_txn *raw_begin(struct fx *f)
{
	struct mdt_txn *t;

	REQUIRE_RC(mdt_txn_begin(f->s, true, &t), 0);
	return t;
}

static void raw_end(struct mdt_txn *t)
{
	REQUIRE_RC(mdt_txn_commit(t), 0);
}

static struct mdt_inode raw_inode(struct fx *f, uint64_t ino)
{
	struct mdt_txn *t = fx_read_begin(f);
	struct mdt_inode in;

	REQUIRE_RC(mdt_inode_get(t, ino, &in), 0);
	mdt_txn_abort(t);
	return in;
}

static void raw_set_nlink(struct fx *f, uint64_t ino, uint32_t nlink)
{
	struct mdt_txn *t = raw_begin(f);
	struct mdt_inode in;

	REQUIRE_RC(mdt_inode_get(t, ino, &in), 0);
	in.nlink = nlink;
	REQUIRE_RC(mdt_inode_put(t, &in), 0);
	raw_end(t);
}

/* Deletes (dir, name)'s dentry and/or its readdir record, nothing else. */
static void raw_del_entry(struct fx *f, uint64_t dir, const char *name, bool dentry, bool cookie)
{
	struct mdt_txn *t = raw_begin(f);
	uint8_t key[MDT_KEY_MAX];
	struct mdt_dentry de;

	REQUIRE_RC(mdt_dentry_get(t, dir, name, strlen(name), &de), 0);
	if (dentry)
		REQUIRE_RC(mdt_del(t, MDT_DB_DENTRIES, key, mdt_key_name(key, dir, name, strlen(name))), 0);
	if (cookie) {
		mdt_put_be64(key, dir);
		mdt_put_be64(key + 8, de.cookie);
		REQUIRE_RC(mdt_del(t, MDT_DB_DIRCOOKIES, key, 16), 0);
	}
	raw_end(t);
}

/* Adds an entry (both halves) without touching either inode. */
static void raw_add_entry(struct fx *f, uint64_t dir, const char *name, uint64_t ino, uint32_t mode)
{
	struct mdt_txn *t = raw_begin(f);
	struct mdt_inode d;

	REQUIRE_RC(mdt_inode_get(t, dir, &d), 0);
	REQUIRE_RC(mdt_dentry_add(t, &d, name, strlen(name), ino, mode), 0);
	d.nentries--; /* only next_cookie moves */
	REQUIRE_RC(mdt_inode_put(t, &d), 0);
	raw_end(t);
}

static void raw_del_ino(struct fx *f, enum mdt_db db, uint64_t ino)
{
	struct mdt_txn *t = raw_begin(f);
	uint8_t key[8];

	mdt_put_be64(key, ino);
	REQUIRE_RC(mdt_del(t, db, key, sizeof(key)), 0);
	raw_end(t);
}

static uint64_t mkfile(struct fx *f, uint64_t dir, const char *name, const struct lw_layout *req)
{
	struct lw_attr a;

	REQUIRE_RC(fx_create_full(f, &root_cr, dir, name, 0644, 0, true, req, &a, NULL, NULL), 0);
	return a.ino;
}

static void set_size(struct fx *f, uint64_t ino, uint64_t size, bool blocks)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	struct timespec mt = { 1700000000, 0 };

	REQUIRE_RC(fx_op_end(f, t, mdt_size_update(t, ino, LW_CL_SIZE | (blocks ? LW_CL_BLOCKS : 0),
						   size, 0, 0, mt, (size + 511) / 512, &a)), 0);
}

static struct loom_layout *layout_of(struct fx *f, uint64_t ino)
{
	struct loom_layout *l;

	REQUIRE_RC(fx_getlayout(f, ino, &l), 0);
	return l;
}

/* Puts every object a file of `size` bytes has data in on the fake OST. */
static void put_file_objs(struct fx *f, struct harness *h, uint64_t ino, uint64_t size)
{
	struct loom_layout *l = layout_of(f, ino);

	for (uint32_t k = 0; k < l->nobjs; k++) {
		struct stripe_geom g = { .size = l->stripe_size, .count = l->nobjs };
		uint64_t n = stripe_obj_size(&g, k, size);
		if (n)
			put_obj(h, l->objs[k].ost_idx, l->objs[k].objid, n, ino, k);
	}
	free(l);
}


/* ---- a clean namespace ---- */

/* Dirs, files (one with data in every stripe, one empty, one sparse), hard links, a symlink, a
 * fifo, xattrs, a default layout, an unlinked-but-open file and a released one. */
static void build_clean(struct fx *f, struct harness *h)
{
	struct lw_layout req = fx_layout_req(65536, 3, -1, "");
	struct mdt_unlinked v;
	uint64_t d1, d2, a, b, c, o;
	struct lw_attr attr;

	fx_add_osts(f, 4);
	REQUIRE_RC(fx_mkdir(f, &root_cr, LOOM_ROOT_INO, "d1", 0755, &d1), 0);
	REQUIRE_RC(fx_mkdir(f, &root_cr, d1, "d2", 0755, &d2), 0);
	REQUIRE_RC(fx_setlayout(f, &root_cr, d2, &req, 0, NULL), 0);
	a = mkfile(f, d1, "a", &req);
	set_size(f, a, 1000000, true);
	put_file_objs(f, h, a, 1000000);
	b = mkfile(f, d2, "b", NULL); /* empty: no objects at all */
	(void)b;
	c = mkfile(f, LOOM_ROOT_INO, "sparse", &req); /* truncated up, never written */
	set_size(f, c, 5000000, false);
	REQUIRE_RC(fx_link(f, &root_cr, a, LOOM_ROOT_INO, "a-link"), 0);
	REQUIRE_RC(fx_link(f, &root_cr, a, d2, "a-link2"), 0);
	REQUIRE_RC(fx_symlink(f, &root_cr, d2, "sym", "../a", NULL), 0);
	REQUIRE_RC(fx_create_full(f, &root_cr, d1, "fifo", S_IFIFO | 0600, 0, true, NULL, &attr,
				  NULL, NULL), 0);
	REQUIRE_RC(fx_setxattr(f, &root_cr, a, "user.x", "1", 0), 0);
	/* unlinked while open: an orphan the MDS releases at start */
	o = mkfile(f, d1, "open", NULL);
	set_size(f, o, 10, true);
	REQUIRE_RC(fx_unlink(f, &root_cr, d1, "open", &v), 0);
	CHECK_EQ(v.nlink, 0);
	/* removed and released: its objects wait in the destroy queue */
	o = mkfile(f, d1, "gone", NULL);
	REQUIRE_RC(fx_unlink(f, &root_cr, d1, "gone", NULL), 0);
	REQUIRE_RC(fx_release(f, o), 0);
}

static void test_clean(void)
{
	struct harness h;
	struct fx f;

	harness_init(&h);
	fx_init(&f);
	build_clean(&f, &h);
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.problems, 0);
	REQUIRE_RC(run_fsck(&f, &h, true, NULL), 0);
	CHECK_EQ(h.problems, 0);
	CHECK_EQ(h.fix_calls, 0);
	/* nothing was made: no /lost+found */
	CHECK_RC(fx_lookup(&f, &root_cr, LOOM_ROOT_INO, "lost+found", NULL), -ENOENT);
	fx_fini(&f);
}

/* A read transaction: a repair needs a write one, and a report-only run writes nothing. */
static void test_readonly(void)
{
	struct mdt_fsck_ops ops = { .report = report_cb, .obj_stat = stat_cb, .obj_fix = fix_cb };
	struct mdt_fsck *fs = NULL;
	struct mdt_txn *t;
	struct harness h;
	struct fx f;
	uint64_t a;

	harness_init(&h);
	ops.arg = &h;
	fx_init(&f);
	fx_add_osts(&f, 2);
	a = mkfile(&f, LOOM_ROOT_INO, "a", NULL);
	raw_set_nlink(&f, a, 5);
	REQUIRE_RC(mdt_txn_begin(f.s, false, &t), 0);
	CHECK_RC(mdt_fsck_new(t, true, &ops, &fs), -EINVAL);
	REQUIRE_RC(mdt_fsck_new(t, false, &ops, &fs), 0);
	CHECK_RC(mdt_fsck_layouts(fs), -EINVAL); /* the namespace comes first */
	REQUIRE_RC(mdt_fsck_namespace(fs), 0);
	REQUIRE_RC(mdt_fsck_layouts(fs), 0);
	mdt_txn_abort(t);
	mdt_fsck_free(fs);
	CHECK_EQ(h.kinds[MDT_FSCK_NLINK], 1);
	CHECK_EQ(raw_inode(&f, a).nlink, 5);
	fx_fini(&f);
}

/* ---- link counts ---- */

static void test_nlink(void)
{
	struct harness h;
	struct fx f;
	uint64_t d, a, s;
	struct lw_attr attr;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0755, NULL), 0);
	a = mkfile(&f, d, "a", NULL);
	REQUIRE_RC(fx_link(&f, &root_cr, a, LOOM_ROOT_INO, "a2"), 0);
	REQUIRE_RC(fx_symlink(&f, &root_cr, d, "s", "a", &s), 0);

	raw_set_nlink(&f, a, 7);        /* 2 entries */
	raw_set_nlink(&f, s, 0);        /* 1 entry, and an nlink 0 not in the orphan list */
	raw_set_nlink(&f, d, 9);        /* 2 + 1 subdirectory */
	{
		struct mdt_txn *t = raw_begin(&f);
		struct mdt_inode in;
		REQUIRE_RC(mdt_inode_get(t, d, &in), 0);
		in.nentries = 0; /* it has 3: rmdir would take it with its entries */
		REQUIRE_RC(mdt_inode_put(t, &in), 0);
		raw_end(t);
	}
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_NLINK], 3);
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 1);
	CHECK_EQ(h.problems, 4);
	check_repair_clean(&f, &h, 4, 0);
	REQUIRE_RC(fx_getattr(&f, a, &attr), 0);
	CHECK_EQ(attr.nlink, 2);
	REQUIRE_RC(fx_getattr(&f, s, &attr), 0);
	CHECK_EQ(attr.nlink, 1);
	REQUIRE_RC(fx_getattr(&f, d, &attr), 0);
	CHECK_EQ(attr.nlink, 3);
	CHECK_EQ(raw_inode(&f, d).nentries, 3);
	/* and the directory behaves: rmdir refuses it until it is empty */
	CHECK_RC(fx_rmdir(&f, &root_cr, LOOM_ROOT_INO, "d"), -ENOTEMPTY);
	fx_fini(&f);
}

/* ---- the orphan list ---- */

static void test_orphan_list(void)
{
	struct harness h;
	struct fx f;
	uint64_t a, b, c;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	a = mkfile(&f, LOOM_ROOT_INO, "a", NULL);
	b = mkfile(&f, LOOM_ROOT_INO, "b", NULL);
	c = mkfile(&f, LOOM_ROOT_INO, "c", NULL);
	/* a: named, but in the orphan list with nlink 0: the MDS would free a live file */
	raw_set_nlink(&f, a, 0);
	{
		struct mdt_txn *t = raw_begin(&f);
		REQUIRE_RC(mdt_orphan_add(t, a), 0);
		REQUIRE_RC(mdt_orphan_add(t, 424242), 0); /* an orphan that does not exist */
		raw_end(t);
	}
	/* b: unlinked (no entry) and open, but still nlink 1 */
	REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, "b", NULL), 0);
	raw_set_nlink(&f, b, 1);
	/* c: unlinked with nlink 0, but not in the orphan list: never freed */
	REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, "c", NULL), 0);
	raw_del_ino(&f, MDT_DB_ORPHANS, c);

	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_NLINK], 1);       /* a */
	CHECK_EQ(h.kinds[MDT_FSCK_ORPHAN_LIST], 3); /* a listed, b nlink, c unlisted */
	CHECK_EQ(h.kinds[MDT_FSCK_STRAY], 1);       /* 424242 */
	check_repair_clean(&f, &h, 5, 0);
	CHECK_EQ(raw_inode(&f, a).nlink, 1);
	CHECK_EQ(raw_inode(&f, b).nlink, 0);
	{
		uint64_t inos[8];
		size_t n;
		struct mdt_txn *t = fx_read_begin(&f);
		REQUIRE_RC(mdt_orphan_list(t, 0, inos, 8, &n), 0);
		mdt_txn_abort(t);
		CHECK_EQ(n, 2);
		CHECK(n == 2 && inos[0] == b && inos[1] == c);
	}
	/* what the MDS does at start now frees exactly b and c */
	REQUIRE_RC(fx_release(&f, b), 0);
	REQUIRE_RC(fx_release(&f, c), 0);
	REQUIRE_RC(fx_release(&f, a), 0);
	{
		struct lw_attr attr;
		CHECK_RC(fx_getattr(&f, a, &attr), 0);
		CHECK_RC(fx_getattr(&f, b, &attr), -ENOENT);
	}
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.problems, 0);
	fx_fini(&f);
}

/* ---- entries ---- */

static void test_entries(void)
{
	struct harness h;
	struct fx f;
	uint64_t d, a, b, c, e;
	struct lw_attr attr;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	a = mkfile(&f, d, "a", NULL);
	b = mkfile(&f, d, "b", NULL);
	c = mkfile(&f, d, "c", NULL);
	e = mkfile(&f, d, "e", NULL);
	(void)a;
	(void)b;
	(void)e;
	/* b: its readdir record is gone (lookup finds it, readdir does not) */
	raw_del_entry(&f, d, "b", false, true);
	/* c's inode is gone: a dangling entry */
	raw_del_ino(&f, MDT_DB_INODES, c);
	/* a readdir record with no entry behind it */
	{
		struct mdt_txn *t = raw_begin(&f);
		struct mdt_inode dir;
		REQUIRE_RC(mdt_inode_get(t, d, &dir), 0);
		REQUIRE_RC(mdt_dentry_add(t, &dir, "ghost", 5, a, S_IFREG), 0);
		REQUIRE_RC(mdt_inode_put(t, &dir), 0); /* nentries counts it */
		raw_end(t);
		raw_del_entry(&f, d, "ghost", true, false);
	}
	/* e's entry says it is a directory */
	{
		struct mdt_txn *t = raw_begin(&f);
		struct mdt_dentry de;
		REQUIRE_RC(mdt_dentry_get(t, d, "e", 1, &de), 0);
		REQUIRE_RC(mdt_dentry_retarget(t, d, "e", 1, &de, e, S_IFDIR), 0);
		raw_end(t);
	}
	/* f takes a's cookie: two names, one readdir slot (f's inode was made as /tmp, whose
	 * dentry goes, leaving its readdir record behind) */
	{
		uint64_t fino = mkfile(&f, LOOM_ROOT_INO, "tmp", NULL);
		struct mdt_txn *t = raw_begin(&f);
		struct mdt_dentry de;
		uint8_t key[MDT_KEY_MAX];

		REQUIRE_RC(mdt_dentry_get(t, d, "a", 1, &de), 0);
		de.ino = fino;
		REQUIRE_RC(mdt_put(t, MDT_DB_DENTRIES, key, mdt_key_name(key, d, "f", 1), &de,
				   sizeof(de)), 0);
		REQUIRE_RC(mdt_del(t, MDT_DB_DENTRIES, key, mdt_key_name(key, LOOM_ROOT_INO, "tmp", 3)), 0);
		raw_end(t);
	}
	/* nentries of d: stored 5 (a b c e ghost; f never counted), real a b e f = 4; of the root:
	 * stored 2 (d tmp), real 1 */
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_ENTRY_INDEX], 4);  /* b missing, ghost and tmp stray, f's cookie */
	CHECK_EQ(h.kinds[MDT_FSCK_DANGLING], 1);     /* c */
	CHECK_EQ(h.kinds[MDT_FSCK_BAD_ENTRY], 1);    /* e's type */
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 2);     /* d, root */
	CHECK_EQ(h.kinds[MDT_FSCK_STRAY], 1);        /* c's layout */
	CHECK_EQ(h.problems, 9);
	check_repair_clean(&f, &h, 9, 0);
	REQUIRE_RC(fx_lookup(&f, &root_cr, d, "b", &attr), 0);
	CHECK_RC(fx_lookup(&f, &root_cr, d, "c", &attr), -ENOENT);
	REQUIRE_RC(fx_lookup(&f, &root_cr, d, "f", &attr), 0);
	/* readdir lists exactly the names lookup finds */
	{
		struct mdt_txn *t = fx_read_begin(&f);
		uint8_t buf[8192];
		struct lw_wr w;
		struct lw_rd r;
		uint32_t count;
		bool eof;
		int names = 0;

		lw_wr_init(&w, buf, sizeof(buf));
		REQUIRE_RC(mdt_readdir(t, &root_cr, d, 0, true, &w, &count, &eof), 0);
		mdt_txn_abort(t);
		CHECK(eof);
		CHECK_EQ(count, 6); /* . .. a b e f */
		lw_rd_init(&r, buf, w.len);
		for (uint32_t i = 0; i < count; i++) {
			struct lw_dirent de;
			struct lw_attr at;
			const char *name;
			REQUIRE_RC(lw_readdir_next(&r, buf, true, &de, &name, &at), 0);
			if (de.namelen == 1 && name[0] == 'e')
				CHECK_EQ(de.type, DT_REG);
			names++;
		}
		CHECK_EQ(names, 6);
	}
	fx_fini(&f);
}

/* ---- disconnected inodes and cycles ---- */

static void test_disconnected(void)
{
	struct harness h;
	struct fx f;
	uint64_t d, sub, a, lf;
	struct lw_attr attr;
	char name[32];

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "sub", 0755, &sub), 0);
	a = mkfile(&f, d, "a", NULL);
	mkfile(&f, sub, "inside", NULL);
	/* a loses its only entry, and so does sub (with a file inside) */
	raw_del_entry(&f, d, "a", true, true);
	raw_del_entry(&f, d, "sub", true, true);

	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_DISCONNECTED], 2);
	CHECK_EQ(h.kinds[MDT_FSCK_NLINK], 1);    /* d: 2 + 0 subdirectories now */
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 1); /* d */
	check_repair_clean(&f, &h, 4, 0);
	REQUIRE_RC(fx_lookup(&f, &root_cr, LOOM_ROOT_INO, "lost+found", &attr), 0);
	lf = attr.ino;
	CHECK_EQ(attr.mode, S_IFDIR | 0700);
	CHECK_EQ(attr.nlink, 3); /* 2 + sub */
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)a);
	REQUIRE_RC(fx_lookup(&f, &root_cr, lf, name, &attr), 0);
	CHECK_EQ(attr.ino, a);
	CHECK_EQ(attr.nlink, 1);
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)sub);
	REQUIRE_RC(fx_lookup(&f, &root_cr, lf, name, &attr), 0);
	CHECK_EQ(attr.ino, sub);
	REQUIRE_RC(fx_lookup(&f, &root_cr, sub, "..", &attr), 0);
	CHECK_EQ(attr.ino, lf);
	REQUIRE_RC(fx_lookup(&f, &root_cr, sub, "inside", &attr), 0);
	REQUIRE_RC(fx_getattr(&f, LOOM_ROOT_INO, &attr), 0);
	CHECK_EQ(attr.nlink, 4); /* d, lost+found */

	/* Another disconnection later reuses /lost+found. */
	raw_del_entry(&f, sub, "inside", true, true);
	REQUIRE_RC(run_fsck(&f, &h, true, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_DISCONNECTED], 1);
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 1);
	CHECK_EQ(h.repaired, h.problems);
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.problems, 0);
	fx_fini(&f);
}

static void test_cycle(void)
{
	struct harness h;
	struct fx f;
	uint64_t a, b, lf;
	struct lw_attr attr;
	char name[32];

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "a", 0755, &a), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, a, "b", 0755, &b), 0);
	mkfile(&f, b, "file", NULL);
	/* a's entry moves from the root into b: a in b in a, cut off from the root */
	raw_del_entry(&f, LOOM_ROOT_INO, "a", true, true);
	raw_add_entry(&f, b, "a", a, S_IFDIR);

	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_DIR_PARENT], 1);   /* a's ".." is the root, its entry in b */
	CHECK_EQ(h.kinds[MDT_FSCK_DISCONNECTED], 1); /* the cycle */
	CHECK_EQ(h.kinds[MDT_FSCK_NLINK], 2);        /* root 3 -> 2, b 2 -> 3 */
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 2);     /* root, b */
	check_repair_clean(&f, &h, h.problems, 0);
	REQUIRE_RC(fx_lookup(&f, &root_cr, LOOM_ROOT_INO, "lost+found", &attr), 0);
	lf = attr.ino;
	/* one of the two is in lost+found, the other still inside it */
	snprintf(name, sizeof(name), "#%llu", (unsigned long long)a);
	if (fx_lookup(&f, &root_cr, lf, name, &attr) == 0) {
		REQUIRE_RC(fx_lookup(&f, &root_cr, a, "b", &attr), 0);
		REQUIRE_RC(fx_lookup(&f, &root_cr, b, "file", &attr), 0);
		CHECK_RC(fx_lookup(&f, &root_cr, b, "a", &attr), -ENOENT);
	} else {
		snprintf(name, sizeof(name), "#%llu", (unsigned long long)b);
		REQUIRE_RC(fx_lookup(&f, &root_cr, lf, name, &attr), 0);
		REQUIRE_RC(fx_lookup(&f, &root_cr, b, "a", &attr), 0);
	}
	fx_fini(&f);
}

/* A directory named twice: the entry in its ".." directory stays. */
static void test_dir_two_names(void)
{
	struct harness h;
	struct fx f;
	uint64_t a, b;
	struct lw_attr attr;

	harness_init(&h);
	fx_init(&f);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "a", 0755, &a), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "b", 0755, &b), 0);
	raw_add_entry(&f, b, "alias", a, S_IFDIR);
	raw_add_entry(&f, b, "root", LOOM_ROOT_INO, S_IFDIR);
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_DIR_ENTRY], 2);
	check_repair_clean(&f, &h, h.problems, 0);
	CHECK_RC(fx_lookup(&f, &root_cr, b, "alias", &attr), -ENOENT);
	CHECK_RC(fx_lookup(&f, &root_cr, b, "root", &attr), -ENOENT);
	REQUIRE_RC(fx_lookup(&f, &root_cr, LOOM_ROOT_INO, "a", &attr), 0);
	CHECK_EQ(attr.nlink, 2);
	fx_fini(&f);
}

/* ---- counters and stray records ---- */

static void test_counters_and_strays(void)
{
	struct harness h;
	struct fx f;
	uint64_t d, a, gone, next;
	struct lw_attr attr;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	a = mkfile(&f, d, "a", NULL);
	gone = mkfile(&f, d, "gone", NULL);
	REQUIRE_RC(fx_setxattr(&f, &root_cr, gone, "user.k", "v", 0), 0);
	{
		struct mdt_txn *t = raw_begin(&f);
		struct mdt_inode in;
		uint64_t back = 2;
		/* next_ino behind: a new file would overwrite inode 2 */
		REQUIRE_RC(mdt_put(t, MDT_DB_META, "next_ino", 8, &back, sizeof(back)), 0);
		/* d's next cookie behind its entries */
		REQUIRE_RC(mdt_inode_get(t, d, &in), 0);
		in.next_cookie = 3;
		REQUIRE_RC(mdt_inode_put(t, &in), 0);
		raw_end(t);
	}
	/* gone's inode and entry vanish; its layout and xattr stay behind */
	raw_del_entry(&f, d, "gone", true, true);
	raw_del_ino(&f, MDT_DB_INODES, gone);
	/* a's size in the symlink db: a target for a file */
	{
		struct mdt_txn *t = raw_begin(&f);
		uint8_t key[8];
		mdt_put_be64(key, a);
		REQUIRE_RC(mdt_put(t, MDT_DB_SYMLINKS, key, 8, "x", 1), 0);
		raw_end(t);
	}
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_COUNTER], 2);  /* next_ino, d's cookie */
	CHECK_EQ(h.kinds[MDT_FSCK_STRAY], 3);    /* layout, xattr, symlink target */
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 1); /* d */
	check_repair_clean(&f, &h, 6, 0);
	{
		struct mdt_txn *t = fx_read_begin(&f);
		struct loom_ostobj q[8];
		size_t n;
		MDB_val v;
		REQUIRE_RC(mdt_get(t, MDT_DB_META, "next_ino", 8, &v), 0);
		memcpy(&next, v.mv_data, 8);
		/* the stray layout's object went to the destroy queue */
		REQUIRE_RC(mdt_destroy_list(t, q, 8, &n), 0);
		mdt_txn_abort(t);
		CHECK_EQ(n, 1);
	}
	CHECK(next > a);
	/* new names in d get fresh cookies and appear in readdir */
	REQUIRE_RC(fx_create(&f, &root_cr, d, "new", 0644, NULL), 0);
	REQUIRE_RC(fx_lookup(&f, &root_cr, d, "a", &attr), 0);
	CHECK_EQ(attr.ino, a);
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.problems, 0);
	fx_fini(&f);
}

/* Data-on-MDT bytes: a file's whose size and blocks came with them is clean (no object is
 * missing for bytes that live on the MDS); bytes of an inode that is gone are deleted; bytes that
 * do not match their checksum are reported and kept. */
static void test_dom_records(void)
{
	struct harness h;
	struct fx f;
	uint64_t d, small, gone, damaged;
	uint8_t buf[3000];

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "d", 0755, &d), 0);
	small = mkfile(&f, d, "small", NULL);
	gone = mkfile(&f, d, "gone", NULL);
	damaged = mkfile(&f, d, "damaged", NULL);
	memset(buf, 'x', sizeof(buf));
	{
		struct mdt_txn *t = fx_op_begin(&f);
		int rc = mdt_dom_write(t, small, 0, buf, sizeof(buf));
		if (rc == 0)
			rc = mdt_dom_write(t, gone, 0, buf, 10);
		if (rc == 0)
			rc = mdt_dom_write(t, damaged, 0, buf, 100);
		REQUIRE_RC(fx_op_end(&f, t, rc), 0);
	}
	set_size(&f, small, sizeof(buf), true); /* with blocks, as a client reports them */
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.problems, 0);

	raw_del_entry(&f, d, "gone", true, true);
	raw_del_ino(&f, MDT_DB_LAYOUTS, gone);
	raw_del_ino(&f, MDT_DB_INODES, gone);
	{
		struct mdt_txn *t = raw_begin(&f);
		uint8_t key[8], val[104];
		MDB_val v;
		mdt_put_be64(key, damaged);
		REQUIRE_RC(mdt_get(t, MDT_DB_DOM, key, 8, &v), 0);
		REQUIRE(v.mv_size == sizeof(val));
		memcpy(val, v.mv_data, sizeof(val));
		val[50] ^= 1;
		REQUIRE_RC(mdt_put(t, MDT_DB_DOM, key, 8, val, sizeof(val)), 0);
		raw_end(t);
	}
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_STRAY], 1);  /* gone's bytes */
	CHECK_EQ(h.kinds[MDT_FSCK_RECORD], 1); /* damaged's */
	CHECK_EQ(h.kinds[MDT_FSCK_NENTRIES], 1); /* d counts the entry removed under it */
	check_repair_clean(&f, &h, 3, 1);
	fx_fini(&f);
}

/* ---- layouts and objects ---- */

static void test_objects(void)
{
	struct lw_layout req = fx_layout_req(65536, 4, 0, "");
	struct loom_layout *l;
	struct harness h;
	struct fx f;
	uint64_t full, grown, tagged, beyond, nolayout;
	struct lw_attr attr;
	size_t tagged_obj;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 4);
	/* full: 1 MiB on 4 stripes; its object 2 is lost */
	full = mkfile(&f, LOOM_ROOT_INO, "full", &req);
	set_size(&f, full, 1 << 20, true);
	put_file_objs(&f, &h, full, 1 << 20);
	l = layout_of(&f, full);
	h.objs[2].st.exists = false;
	CHECK_EQ(h.objs[2].objid, l->objs[2].objid);
	free(l);
	/* grown: the MDT says 100 bytes, object 1 holds 70000 (a writer died before close) */
	grown = mkfile(&f, LOOM_ROOT_INO, "grown", &req);
	set_size(&f, grown, 100, true);
	put_file_objs(&f, &h, grown, 100);
	l = layout_of(&f, grown);
	put_obj(&h, l->objs[1].ost_idx, l->objs[1].objid, 70000, grown, 1);
	free(l);
	/* tagged: an object tagged with another file */
	tagged = mkfile(&f, LOOM_ROOT_INO, "tagged", &req);
	set_size(&f, tagged, 10, true);
	put_file_objs(&f, &h, tagged, 10);
	tagged_obj = h.nobjs - 1;
	h.objs[tagged_obj].st.tag_ino = 999;
	/* beyond: 10 bytes, only object 0 exists: the others are simply not written yet */
	beyond = mkfile(&f, LOOM_ROOT_INO, "beyond", &req);
	set_size(&f, beyond, 10, true);
	put_file_objs(&f, &h, beyond, 10);
	/* nolayout: a regular file whose layout is gone */
	nolayout = mkfile(&f, LOOM_ROOT_INO, "nolayout", &req);
	raw_del_ino(&f, MDT_DB_LAYOUTS, nolayout);

	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	/* full's object 2; grown's objects 2 and 3, where its new size puts data */
	CHECK_EQ(h.kinds[MDT_FSCK_MISSING_OBJECT], 3);
	CHECK_EQ(h.kinds[MDT_FSCK_SIZE], 1);
	CHECK_EQ(h.kinds[MDT_FSCK_OBJECT_TAG], 1);
	CHECK_EQ(h.kinds[MDT_FSCK_LAYOUT], 1);
	CHECK_EQ(h.fix_calls, 0);
	check_repair_clean(&f, &h, h.problems, 0);
	/* grown: 70000 bytes in object 1 = file units 1 (64 KiB) and 5 (4464 bytes): its end is
	 * 5 * 65536 + 4464 */
	REQUIRE_RC(fx_getattr(&f, grown, &attr), 0);
	CHECK_EQ(attr.size, 5 * 65536 + 4464);
	CHECK_EQ(attr.blocks, (100 + 511) / 512 + (70000 + 511) / 512);
	CHECK_EQ(attr.mtime, 1800000000);
	/* the lost object of full was created empty, tagged; the tag of tagged fixed */
	l = layout_of(&f, full);
	CHECK(fobj_find(&h, l->objs[2].ost_idx, l->objs[2].objid)->st.exists);
	CHECK_EQ(fobj_find(&h, l->objs[2].ost_idx, l->objs[2].objid)->st.tag_ino, full);
	free(l);
	CHECK_EQ(h.objs[tagged_obj].st.tag_ino, tagged);
	REQUIRE_RC(fx_getlayout(&f, nolayout, &l), 0);
	free(l);
	fx_fini(&f);
}

/* A file none of whose objects exist is sparse when no writer ever reported data for it, and
 * has lost its data when one did. */
static void test_missing_all(void)
{
	struct lw_layout req = fx_layout_req(65536, 2, 0, "");
	struct harness h;
	struct fx f;
	uint64_t sparse, lost;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	sparse = mkfile(&f, LOOM_ROOT_INO, "sparse", &req);
	set_size(&f, sparse, 1 << 20, false);
	lost = mkfile(&f, LOOM_ROOT_INO, "lost", &req);
	set_size(&f, lost, 1 << 20, true);
	(void)sparse;
	(void)lost;
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_MISSING_OBJECT], 2);
	CHECK_EQ(h.problems, 2);
	check_repair_clean(&f, &h, 2, 0);
	fx_fini(&f);
}

/* Objects on an OST the caller does not have are counted, not judged. */
static void test_unchecked_ost(void)
{
	struct lw_layout req = fx_layout_req(65536, 2, 0, "");
	struct mdt_fsck *fs;
	struct harness h;
	struct fx f;
	uint64_t a;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	a = mkfile(&f, LOOM_ROOT_INO, "a", &req);
	set_size(&f, a, 1 << 20, true);
	put_file_objs(&f, &h, a, 1 << 20);
	h.absent_ost = 1;
	REQUIRE_RC(run_fsck(&f, &h, false, &fs), 0);
	CHECK_EQ(h.problems, 0);
	CHECK_EQ(mdt_fsck_stats(fs)->unchecked, 1);
	CHECK_EQ(mdt_fsck_stats(fs)->objects, 1);
	mdt_fsck_free(fs);
	fx_fini(&f);
}

/* What the OST walk asks: referenced, queued, or orphan; and the object counters. */
static void test_objset(void)
{
	struct lw_layout req = fx_layout_req(65536, 2, 0, "");
	struct loom_layout *la, *lg;
	struct mdt_fsck *fs;
	struct harness h;
	struct fx f;
	uint64_t a, g, ino;
	uint32_t stripe;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	a = mkfile(&f, LOOM_ROOT_INO, "a", &req);
	g = mkfile(&f, LOOM_ROOT_INO, "g", &req);
	la = layout_of(&f, a);
	lg = layout_of(&f, g);
	REQUIRE_RC(fx_unlink(&f, &root_cr, LOOM_ROOT_INO, "g", NULL), 0);
	REQUIRE_RC(fx_release(&f, g), 0);

	REQUIRE_RC(run_fsck(&f, &h, false, &fs), 0);
	CHECK_EQ(h.problems, 0);
	CHECK_EQ(mdt_fsck_object(fs, la->objs[1].ost_idx, la->objs[1].objid, &ino, &stripe),
		 MDT_FSCK_OBJ_LAYOUT);
	CHECK_EQ(ino, a);
	CHECK_EQ(stripe, 1);
	CHECK_EQ(mdt_fsck_object(fs, lg->objs[0].ost_idx, lg->objs[0].objid, &ino, NULL),
		 MDT_FSCK_OBJ_QUEUED);
	CHECK_EQ(ino, g);
	CHECK_EQ(mdt_fsck_object(fs, 0, 12345, NULL, NULL), MDT_FSCK_OBJ_UNKNOWN);
	CHECK_EQ(mdt_fsck_object(fs, 7, la->objs[0].objid, NULL, NULL), MDT_FSCK_OBJ_UNKNOWN);
	CHECK_EQ(mdt_fsck_next_objid(fs, 0), 3);
	CHECK_EQ(mdt_fsck_next_objid(fs, 9), 0);
	mdt_fsck_free(fs);

	/* Damage: a's object 0 queued for destruction; OST 1's counter rolled back to 1. */
	{
		struct mdt_txn *t = raw_begin(&f);
		uint8_t key[4];
		struct mdt_ost_rec rec;
		MDB_val v;
		mdt_put_be32(key, 1);
		REQUIRE_RC(mdt_get(t, MDT_DB_OSTS, key, 4, &v), 0);
		memcpy(&rec, v.mv_data, sizeof(rec));
		rec.next_objid = 1;
		REQUIRE_RC(mdt_put(t, MDT_DB_OSTS, key, 4, &rec, sizeof(rec)), 0);
		raw_end(t);
		t = raw_begin(&f);
		{
			struct loom_layout *q = calloc(1, sizeof(*q) + sizeof(q->objs[0]));
			q->nobjs = 1;
			q->objs[0] = la->objs[0];
			REQUIRE_RC(mdt_destroy_queue(t, a, q), 0);
			free(q);
		}
		raw_end(t);
	}
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.kinds[MDT_FSCK_QUEUED_OBJECT], 1);
	CHECK_EQ(h.kinds[MDT_FSCK_COUNTER], 1);
	check_repair_clean(&f, &h, 2, 0);
	REQUIRE_RC(run_fsck(&f, &h, false, &fs), 0);
	CHECK_EQ(mdt_fsck_object(fs, la->objs[0].ost_idx, la->objs[0].objid, NULL, NULL),
		 MDT_FSCK_OBJ_LAYOUT);
	CHECK_EQ(mdt_fsck_next_objid(fs, 1), 3);
	mdt_fsck_free(fs);
	free(la);
	free(lg);
	fx_fini(&f);
}

/* Two layouts naming one object: reported, not repairable by fsck. */
static void test_shared_object(void)
{
	struct lw_layout req = fx_layout_req(65536, 1, 0, "");
	struct loom_layout *la;
	struct harness h;
	struct fx f;
	uint64_t a, b;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 1);
	a = mkfile(&f, LOOM_ROOT_INO, "a", &req);
	b = mkfile(&f, LOOM_ROOT_INO, "b", &req);
	la = layout_of(&f, a);
	{
		struct mdt_txn *t = raw_begin(&f);
		REQUIRE_RC(mdt_layout_save(t, MDT_DB_LAYOUTS, b, la), 0);
		raw_end(t);
	}
	check_repair_clean(&f, &h, 1, 1);
	CHECK_EQ(h.kinds[MDT_FSCK_SHARED_OBJECT], 1);
	free(la);
	fx_fini(&f);
}

/* Paths in reports: through each inode's entry, with the names readdir gives. */
static void test_paths(void)
{
	struct harness h;
	struct fx f;
	uint64_t d, e, a;

	harness_init(&h);
	fx_init(&f);
	fx_add_osts(&f, 2);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, LOOM_ROOT_INO, "top", 0755, &d), 0);
	REQUIRE_RC(fx_mkdir(&f, &root_cr, d, "mid", 0755, &e), 0);
	a = mkfile(&f, e, "leaf", NULL);
	raw_set_nlink(&f, a, 3);
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK_EQ(h.problems, 1);
	CHECK(strcmp(h.last_path, "/top/mid/leaf") == 0);
	raw_set_nlink(&f, a, 1);
	raw_set_nlink(&f, LOOM_ROOT_INO, 9);
	REQUIRE_RC(run_fsck(&f, &h, false, NULL), 0);
	CHECK(strcmp(h.last_path, "/") == 0);
	fx_fini(&f);
}

int main(void)
{
	root_cr = fx_root();
	RUN(test_clean);
	RUN(test_readonly);
	RUN(test_nlink);
	RUN(test_orphan_list);
	RUN(test_entries);
	RUN(test_disconnected);
	RUN(test_cycle);
	RUN(test_dir_two_names);
	RUN(test_counters_and_strays);
	RUN(test_dom_records);
	RUN(test_objects);
	RUN(test_missing_all);
	RUN(test_unchecked_ost);
	RUN(test_objset);
	RUN(test_shared_object);
	RUN(test_paths);
	return check_report();
}
