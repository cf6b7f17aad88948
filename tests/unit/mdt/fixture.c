#include "fixture.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int check_failures;
const char *check_current = "";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void fx_rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/loom-mdt-test.XXXXXX");
	REQUIRE(mkdtemp(f->dir) != NULL);
	REQUIRE_RC(mdt_format(f->dir, FX_FSNAME), 0);
	REQUIRE_RC(mdt_store_open(f->dir, &f->s), 0);
	f->now.tv_sec = 1700000000;
	f->now.tv_nsec = 0;
}

void fx_reopen(struct fx *f)
{
	REQUIRE(f->batch == NULL);
	mdt_store_close(f->s);
	f->s = NULL;
	REQUIRE_RC(mdt_store_open(f->dir, &f->s), 0);
}

void fx_fini(struct fx *f)
{
	if (f->batch)
		mdt_txn_abort(f->batch);
	mdt_store_close(f->s);
	fx_rm_rf(f->dir);
	memset(f, 0, sizeof(*f));
}

struct timespec fx_tick(struct fx *f)
{
	f->now.tv_sec++;
	f->now.tv_nsec = (f->now.tv_nsec + 1000) % 1000000000;
	return f->now;
}

void fx_batch_begin(struct fx *f)
{
	REQUIRE(f->batch == NULL);
	REQUIRE_RC(mdt_txn_begin(f->s, true, &f->batch), 0);
}

void fx_batch_commit(struct fx *f)
{
	REQUIRE(f->batch != NULL);
	REQUIRE_RC(mdt_txn_commit(f->batch), 0);
	f->batch = NULL;
}

struct mdt_txn *fx_op_begin(struct fx *f)
{
	struct mdt_txn *t;

	REQUIRE(f->op_top == NULL);
	if (!f->batch)
		REQUIRE_RC(mdt_txn_begin(f->s, true, &f->op_top), 0);
	REQUIRE_RC(mdt_txn_child(f->batch ? f->batch : f->op_top, &t), 0);
	return t;
}

int fx_op_end(struct fx *f, struct mdt_txn *t, int rc)
{
	int crc;

	if (rc == 0) {
		crc = mdt_txn_commit(t);
		if (crc)
			rc = crc;
	} else {
		mdt_txn_abort(t);
	}
	if (f->op_top) {
		crc = mdt_txn_commit(f->op_top);
		if (crc && rc == 0)
			rc = crc;
		f->op_top = NULL;
	}
	return rc;
}

struct mdt_txn *fx_read_begin(struct fx *f)
{
	struct mdt_txn *t;

	/* Inside a batch, reads must see its writes: a child of it serves as the reader. */
	if (f->batch)
		REQUIRE_RC(mdt_txn_child(f->batch, &t), 0);
	else
		REQUIRE_RC(mdt_txn_begin(f->s, false, &t), 0);
	return t;
}

struct loom_cred fx_root(void)
{
	struct loom_cred c;

	memset(&c, 0, sizeof(c));
	return c;
}

struct loom_cred fx_cred(uint32_t uid, uint32_t gid, uint32_t ngroups, ...)
{
	struct loom_cred c;
	va_list ap;

	memset(&c, 0, sizeof(c));
	c.uid = uid;
	c.gid = gid;
	c.ngroups = ngroups;
	va_start(ap, ngroups);
	for (uint32_t i = 0; i < ngroups && i < LOOM_MAX_GROUPS; i++)
		c.groups[i] = va_arg(ap, uint32_t);
	va_end(ap);
	return c;
}

struct lw_layout fx_layout_req(uint32_t stripe_size, int32_t count, int32_t offset,
			       const char *pool)
{
	struct lw_layout l;

	memset(&l, 0, sizeof(l));
	l.magic = LW_LAYOUT_MAGIC;
	l.version = LW_LAYOUT_V2;
	l.pattern = LW_PATTERN_RAID0;
	l.stripe_size = stripe_size;
	l.stripe_count = count;
	l.stripe_offset = offset;
	if (pool)
		snprintf(l.pool, sizeof(l.pool), "%s", pool);
	return l;
}

int fx_mkdir(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	     uint32_t mode, uint64_t *ino)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	int rc = mdt_mkdir(t, cr, parent, name, strlen(name), mode, fx_tick(f), &a);

	rc = fx_op_end(f, t, rc);
	if (rc == 0 && ino)
		*ino = a.ino;
	return rc;
}

int fx_create_full(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
		   uint32_t mode, uint32_t rdev, bool excl, const struct lw_layout *req,
		   struct lw_attr *attr, struct loom_layout **layout, bool *created)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	int rc = mdt_create(t, cr, parent, name, strlen(name), mode, rdev, excl, req, fx_tick(f),
			    attr ? attr : &a, layout, created);

	return fx_op_end(f, t, rc);
}

int fx_create(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	      uint32_t mode, uint64_t *ino)
{
	struct lw_attr a;
	int rc = fx_create_full(f, cr, parent, name, mode, 0, true, NULL, &a, NULL, NULL);

	if (rc == 0 && ino)
		*ino = a.ino;
	return rc;
}

int fx_symlink(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	       const char *target, uint64_t *ino)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	int rc = mdt_symlink(t, cr, parent, name, strlen(name), target, strlen(target), fx_tick(f), &a);

	rc = fx_op_end(f, t, rc);
	if (rc == 0 && ino)
		*ino = a.ino;
	return rc;
}

int fx_link(struct fx *f, const struct loom_cred *cr, uint64_t ino, uint64_t parent,
	    const char *name)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	int rc = mdt_link(t, cr, ino, parent, name, strlen(name), fx_tick(f), &a);

	return fx_op_end(f, t, rc);
}

int fx_unlink(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	      struct mdt_unlinked *victim)
{
	struct mdt_txn *t = fx_op_begin(f);
	int rc = mdt_unlink(t, cr, parent, name, strlen(name), fx_tick(f), victim);

	return fx_op_end(f, t, rc);
}

int fx_rmdir(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name)
{
	struct mdt_txn *t = fx_op_begin(f);
	int rc = mdt_rmdir(t, cr, parent, name, strlen(name), fx_tick(f));

	return fx_op_end(f, t, rc);
}

int fx_rename(struct fx *f, const struct loom_cred *cr, uint64_t sp, const char *sn, uint64_t dp,
	      const char *dn, uint32_t flags, struct mdt_unlinked *victim)
{
	struct mdt_txn *t = fx_op_begin(f);
	int rc = mdt_rename(t, cr, sp, sn, strlen(sn), dp, dn, strlen(dn), flags, fx_tick(f), victim, NULL);

	return fx_op_end(f, t, rc);
}

int fx_setattr(struct fx *f, const struct loom_cred *cr, const struct lw_setattr *sa,
	       struct lw_attr *out)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	int rc = mdt_setattr(t, cr, sa, fx_tick(f), out ? out : &a);

	return fx_op_end(f, t, rc);
}

int fx_open(struct fx *f, const struct loom_cred *cr, uint64_t ino, uint32_t flags,
	    struct lw_attr *out, struct loom_layout **layout)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct lw_attr a;
	int rc = mdt_open(t, cr, ino, flags, fx_tick(f), out ? out : &a, layout);

	return fx_op_end(f, t, rc);
}

int fx_release(struct fx *f, uint64_t ino)
{
	struct mdt_txn *t = fx_op_begin(f);

	return fx_op_end(f, t, mdt_inode_release(t, ino));
}

int fx_setxattr(struct fx *f, const struct loom_cred *cr, uint64_t ino, const char *name,
		const char *value, uint32_t flags)
{
	struct mdt_txn *t = fx_op_begin(f);
	int rc = mdt_setxattr(t, cr, ino, name, strlen(name), value, strlen(value), flags, fx_tick(f));

	return fx_op_end(f, t, rc);
}

int fx_setlayout(struct fx *f, const struct loom_cred *cr, uint64_t ino,
		 const struct lw_layout *req, uint32_t flags, struct loom_layout **out)
{
	struct mdt_txn *t = fx_op_begin(f);
	struct loom_layout *l = NULL;
	int rc = mdt_setlayout(t, cr, ino, req, flags, &l);

	rc = fx_op_end(f, t, rc);
	if (out)
		*out = l;
	else
		free(l);
	return rc;
}

int fx_lookup(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	      struct lw_attr *out)
{
	struct mdt_txn *t = fx_read_begin(f);
	int rc = mdt_lookup(t, cr, parent, name, strlen(name), out);

	mdt_txn_abort(t);
	return rc;
}

int fx_getattr(struct fx *f, uint64_t ino, struct lw_attr *out)
{
	struct mdt_txn *t = fx_read_begin(f);
	int rc = mdt_getattr(t, ino, out);

	mdt_txn_abort(t);
	return rc;
}

int fx_getlayout(struct fx *f, uint64_t ino, struct loom_layout **out)
{
	struct mdt_txn *t = fx_read_begin(f);
	int rc = mdt_getlayout(t, ino, out);

	mdt_txn_abort(t);
	return rc;
}

uint64_t fx_ino(struct fx *f, uint64_t parent, const char *name)
{
	struct loom_cred root = fx_root();
	struct lw_attr a;

	REQUIRE_RC(fx_lookup(f, &root, parent, name, &a), 0);
	return a.ino;
}

struct lw_statfs fx_statfs_kib(uint64_t free_kib)
{
	struct lw_statfs sf;

	memset(&sf, 0, sizeof(sf));
	sf.bsize = 4096;
	sf.blocks = free_kib / 4 * 2 + 1024;
	sf.bfree = free_kib / 4;
	sf.bavail = free_kib / 4;
	sf.files = 1000000;
	sf.ffree = 900000;
	sf.namemax = 255;
	return sf;
}

int fx_ost_register(struct fx *f, uint32_t want_idx, const char *uuid, uint64_t free_kib,
		    uint32_t *idx)
{
	struct lw_ost_register_req req;
	struct mdt_txn *t;
	uint32_t got = UINT32_MAX;
	int rc;

	memset(&req, 0, sizeof(req));
	req.want_idx = want_idx;
	req.port = 7000;
	snprintf(req.host, sizeof(req.host), "oss-%s", uuid);
	snprintf(req.uuid, sizeof(req.uuid), "%s", uuid);
	snprintf(req.fsname, sizeof(req.fsname), "%s", FX_FSNAME);
	req.sf = fx_statfs_kib(free_kib);
	t = fx_op_begin(f);
	rc = mdt_ost_register(t, &req, 1000, &got);
	rc = fx_op_end(f, t, rc);
	if (idx)
		*idx = got;
	return rc;
}

void fx_add_osts(struct fx *f, uint32_t n)
{
	char uuid[32];
	uint32_t idx;

	for (uint32_t i = 0; i < n; i++) {
		snprintf(uuid, sizeof(uuid), "ost%u", i);
		REQUIRE_RC(fx_ost_register(f, i, uuid, 1ull << 30, &idx), 0);
		REQUIRE(idx == i);
	}
}
