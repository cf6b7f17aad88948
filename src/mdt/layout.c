/*
 * Layouts: a regular file's (stripes and their objects) and a directory's default for new files.
 *
 * Both are stored as their wire image (lw_layout + lw_ostobj[]), written and read with the
 * codec's lw_layout_encode/lw_layout_decode, so there is one format to keep compatible.
 *
 * A new file's layout is resolved field by field, the first source that sets a field winning:
 *
 *   request (create with a layout, setstripe)      dom_size 0, stripe_size 0, stripe_count 0,
 *     -> its directory's own default                stripe_offset -1 and pool "" are unset
 *     -> the filesystem default (the root's)
 *     -> Loom's built-in default (64 KiB on the MDT, 4 MiB, 1 stripe, offset -1, no pool)
 *
 * dom_size LOOM_DOM_NONE is set: "no Data-on-MDT part" (a file's layout then says 0).
 *
 * The root's default is the filesystem default and is never copied into subdirectories, so
 * changing it changes every directory that has none of its own. Other directories' defaults are
 * copied into their new subdirectories by mkdir (as Lustre does).
 */
#include "mdt/internal.h"

#include "common/stripe.h"

#include <errno.h>
#include <stdlib.h>

int mdt_layout_load(struct mdt_txn *t, enum mdt_db db, uint64_t ino, struct loom_layout **out)
{
	uint8_t key[8];
	struct lw_rd r;
	MDB_val v;
	int rc;

	mdt_put_be64(key, ino);
	rc = mdt_get(t, db, key, sizeof(key), &v);
	if (rc)
		return rc == -ENOENT ? -ENODATA : rc;
	lw_rd_init(&r, v.mv_data, v.mv_size);
	rc = lw_layout_decode(&r, out);
	if (rc == 0 && lw_rd_done(&r) != 0) {
		free(*out);
		rc = -EPROTO;
	}
	if (rc == -EPROTO)
		rc = -EIO; /* a stored layout that does not decode */
	if (rc)
		*out = NULL;
	return rc;
}

int mdt_layout_save(struct mdt_txn *t, enum mdt_db db, uint64_t ino, const struct loom_layout *l)
{
	size_t size = lw_layout_size(l->nobjs);
	uint8_t key[8];
	struct lw_wr w;
	void *buf;
	int rc;

	buf = malloc(size);
	if (!buf)
		return -ENOMEM;
	lw_wr_init(&w, buf, size);
	lw_layout_encode(&w, l);
	mdt_put_be64(key, ino);
	rc = w.err ? -EIO : mdt_put(t, db, key, sizeof(key), buf, w.len);
	free(buf);
	return rc;
}

int mdt_destroy_queue(struct mdt_txn *t, uint64_t ino, const struct loom_layout *l)
{
	uint8_t key[12];
	int rc;

	for (uint32_t i = 0; i < l->nobjs; i++) {
		mdt_put_be32(key, l->objs[i].ost_idx);
		mdt_put_be64(key + 4, l->objs[i].objid);
		rc = mdt_put(t, MDT_DB_DESTROY, key, sizeof(key), &ino, sizeof(ino));
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- resolving a new file's layout ---- */

struct layout_fields {
	uint32_t dom_size;      /* 0 unset, LOOM_DOM_NONE none */
	uint32_t stripe_size;
	int32_t stripe_count;
	int32_t stripe_offset;
	uint32_t mirror_count;  /* 0 unset */
	uint32_t ec_parity;     /* taken with mirror_count: both come from one source */
	char pool[LOOM_POOL_NAME_MAX + 1];
};

static void fields_init(struct layout_fields *f)
{
	memset(f, 0, sizeof(*f));
	f->stripe_offset = -1;
}

/* Takes from one source the fields still unset. */
static void fields_fill(struct layout_fields *f, uint32_t dom_size, uint32_t stripe_size,
			int32_t stripe_count, int32_t stripe_offset, uint32_t mirror_count,
			uint32_t ec_parity, const char *pool)
{
	/* Copies and parity are one choice, the redundancy: "-N 2" under a directory whose
	 * default is erasure-coded makes a mirrored file, not both. */
	if (f->mirror_count == 0 && f->ec_parity == 0) {
		f->mirror_count = mirror_count;
		f->ec_parity = ec_parity;
	}
	if (f->dom_size == 0)
		f->dom_size = dom_size;
	if (f->stripe_size == 0)
		f->stripe_size = stripe_size;
	if (f->stripe_count == 0)
		f->stripe_count = stripe_count;
	if (f->stripe_offset == -1)
		f->stripe_offset = stripe_offset;
	if (f->pool[0] == '\0')
		memcpy(f->pool, pool, strnlen(pool, LOOM_POOL_NAME_MAX));
}

static void fields_fill_req(struct layout_fields *f, const struct lw_layout *req)
{
	fields_fill(f, req->dom_size, req->stripe_size, req->stripe_count, req->stripe_offset,
		    req->mirror_count, req->ec_parity, req->pool);
}

static void fields_fill_layout(struct layout_fields *f, const struct loom_layout *l)
{
	fields_fill(f, l->dom_size, l->stripe_size, l->stripe_count, l->stripe_offset, l->mirror_count,
		    l->ec_parity, l->pool);
}

/* Fills what is still unset from a directory's stored default, if it has one. */
static int fields_fill_dir(struct mdt_txn *t, struct layout_fields *f, uint64_t dir)
{
	struct loom_layout *def;
	int rc;

	rc = mdt_layout_load(t, MDT_DB_DIRDEFAULTS, dir, &def);
	if (rc == -ENODATA)
		return 0;
	if (rc)
		return rc;
	fields_fill_layout(f, def);
	free(def);
	return 0;
}

/* The filesystem default, then the built-in one. */
static int fields_fill_fs(struct mdt_txn *t, struct layout_fields *f)
{
	int rc = fields_fill_dir(t, f, LOOM_ROOT_INO);

	if (rc == 0)
		fields_fill(f, LOOM_DEFAULT_DOM_SIZE, LOOM_DEFAULT_STRIPE_SIZE, 1, -1, 1, 0, "");
	return rc;
}

/* A pool a request names must exist (lfs setstripe -p refuses an unknown pool); one a directory's
 * default named and that was destroyed since no longer restricts (mdt_alloc_stripes). */
static int req_pool_check(struct mdt_txn *t, const struct lw_layout *req)
{
	char pool[LOOM_POOL_NAME_MAX + 1] = { 0 };

	if (!req || !req->pool[0])
		return 0;
	memcpy(pool, req->pool, strnlen(req->pool, LOOM_POOL_NAME_MAX));
	return mdt_pool_exists(t, pool) ? 0 : -EINVAL;
}

/* Allocates objects for resolved fields: a file layout with generation gen. */
static int layout_build(struct mdt_txn *t, const struct layout_fields *f, uint32_t gen,
			struct loom_layout **out)
{
	struct loom_layout *l;
	uint32_t room = t->s->nosts, n = 0, mirrors = f->mirror_count ? f->mirror_count : 1;
	uint32_t parity = mirrors > 1 ? 0 : f->ec_parity;
	int rc;

	if (room == 0)
		return -ENOSPC;
	if (mirrors == 1 && f->stripe_count > 0 && (uint64_t)f->stripe_count + parity < room)
		room = (uint32_t)f->stripe_count + parity;
	if (t->vers && t->vers->want_objs && t->vers->want_nobjs > room)
		room = t->vers->want_nobjs; /* a replay's objects, whatever the OSTs are now */
	l = calloc(1, sizeof(*l) + room * sizeof(l->objs[0]));
	if (!l)
		return -ENOMEM;
	rc = mdt_alloc_stripes(t, f->stripe_count, f->stripe_offset, f->pool, mirrors, parity, l->objs, &n);
	/* A replay's objects say how many copies the first run made. */
	if (rc == 0 && (n == 0 || n % mirrors || n <= parity))
		rc = -EIO;
	if (rc) {
		free(l);
		return rc;
	}
	l->pattern = LOOM_PATTERN_RAID0;
	l->stripe_size = f->stripe_size;
	l->mirror_count = (uint16_t)mirrors;
	l->ec_parity = (uint16_t)parity;
	l->stripe_count = (int32_t)(n / mirrors - parity);
	l->stripe_offset = (int32_t)l->objs[0].ost_idx;
	l->layout_gen = gen;
	l->dom_size = f->dom_size == LOOM_DOM_NONE ? 0 : f->dom_size;
	memcpy(l->pool, f->pool, sizeof(l->pool));
	l->nobjs = n;
	*out = l;
	return 0;
}

int mdt_layout_new_file(struct mdt_txn *t, const struct mdt_inode *dir, const struct lw_layout *req,
			struct mdt_inode *in, struct loom_layout **out)
{
	struct layout_fields f;
	struct loom_layout *l = NULL;
	int rc;

	rc = req_pool_check(t, req);
	if (rc)
		return rc;
	fields_init(&f);
	if (req)
		fields_fill_req(&f, req);
	rc = fields_fill_dir(t, &f, dir->ino);
	if (rc == 0)
		rc = fields_fill_fs(t, &f);
	if (rc == 0)
		rc = layout_build(t, &f, 0, &l);
	if (rc == 0)
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, in->ino, l);
	if (rc == 0 && layout_redundant(l))
		rc = mdt_mirror_note(t, in->ino, l); /* objects made stale for an OSS away */
	if (rc) {
		free(l);
		return rc;
	}
	in->blksize = l->stripe_size;
	if (out)
		*out = l;
	else
		free(l);
	return 0;
}

int mdt_layout_inherit_dir(struct mdt_txn *t, uint64_t parent, uint64_t child)
{
	struct loom_layout *def;
	int rc;

	if (parent == LOOM_ROOT_INO)
		return 0; /* the fs default applies by fallback; see the top of this file */
	rc = mdt_layout_load(t, MDT_DB_DIRDEFAULTS, parent, &def);
	if (rc == -ENODATA)
		return 0;
	if (rc)
		return rc;
	rc = mdt_layout_save(t, MDT_DB_DIRDEFAULTS, child, def);
	free(def);
	return rc;
}

/* ---- getlayout / setlayout ---- */

static int dir_layout(struct mdt_txn *t, uint64_t ino, struct loom_layout **out)
{
	int rc = mdt_layout_load(t, MDT_DB_DIRDEFAULTS, ino, out);

	if (rc != -ENODATA)
		return rc;
	rc = mdt_layout_load(t, MDT_DB_DIRDEFAULTS, LOOM_ROOT_INO, out);
	if (rc == 0)
		(*out)->flags |= LOOM_LAYOUT_DEFAULT | LOOM_LAYOUT_INHERITED;
	return rc;
}

int mdt_getlayout(struct mdt_txn *t, uint64_t ino, struct loom_layout **out)
{
	struct mdt_inode in;
	int rc;

	*out = NULL;
	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	if (S_ISREG(in.mode))
		return mdt_layout_load(t, MDT_DB_LAYOUTS, ino, out);
	if (S_ISDIR(in.mode))
		return dir_layout(t, ino, out);
	return -ENODATA;
}

static int setlayout_dir(struct mdt_txn *t, uint64_t ino, const struct lw_layout *req,
			 uint32_t flags, struct loom_layout **out)
{
	uint8_t key[8];
	struct loom_layout def;
	int rc;

	if (flags & LW_SL_DELETE) {
		if (ino == LOOM_ROOT_INO)
			return -EPERM; /* the filesystem default can change but not go */
		mdt_put_be64(key, ino);
		rc = mdt_del(t, MDT_DB_DIRDEFAULTS, key, sizeof(key));
		if (rc)
			return rc == -ENOENT ? -ENODATA : rc;
		return dir_layout(t, ino, out);
	}
	if (!req)
		return -EINVAL;
	/* As Lustre's setstripe, an offset must name an OST that exists now. */
	if (req->stripe_offset >= 0 && !mdt_ost_known(t->s, (uint32_t)req->stripe_offset))
		return -EINVAL;
	rc = req_pool_check(t, req);
	if (rc)
		return rc;
	memset(&def, 0, sizeof(def));
	def.pattern = LOOM_PATTERN_RAID0;
	def.stripe_size = req->stripe_size;
	def.stripe_count = req->stripe_count;
	def.stripe_offset = req->stripe_offset;
	def.dom_size = req->dom_size;
	def.mirror_count = req->mirror_count;
	def.ec_parity = req->ec_parity;
	def.flags = LOOM_LAYOUT_DEFAULT;
	memcpy(def.pool, req->pool, strnlen(req->pool, LOOM_POOL_NAME_MAX));
	rc = mdt_layout_save(t, MDT_DB_DIRDEFAULTS, ino, &def);
	if (rc == 0)
		rc = dir_layout(t, ino, out);
	return rc;
}

/* Lays out again a file that holds no data: unset fields come from its current layout (except
 * the offset, which the MDS chooses again unless given), then the filesystem default. */
static int setlayout_file(struct mdt_txn *t, struct mdt_inode *in, const struct lw_layout *req,
			  struct loom_layout **out)
{
	struct loom_layout *cur = NULL, *l = NULL;
	struct layout_fields f;
	int rc;

	if (!req)
		return -EINVAL;
	if (in->size > 0)
		return -EEXIST; /* "stripe already set": the data lives in the current objects */
	rc = req_pool_check(t, req);
	if (rc)
		return rc;
	rc = mdt_layout_load(t, MDT_DB_LAYOUTS, in->ino, &cur);
	if (rc && rc != -ENODATA)
		return rc;
	fields_init(&f);
	fields_fill_req(&f, req);
	if (cur)
		fields_fill(&f, cur->dom_size ? cur->dom_size : LOOM_DOM_NONE, cur->stripe_size,
			    cur->stripe_count, -1, cur->mirror_count, cur->ec_parity, cur->pool);
	rc = fields_fill_fs(t, &f);
	if (rc == 0)
		rc = layout_build(t, &f, cur ? cur->layout_gen + 1 : 0, &l);
	if (rc == 0 && cur)
		rc = mdt_destroy_queue(t, in->ino, cur);
	if (rc == 0)
		rc = mdt_dom_cut(t, in->ino, 0); /* nothing should be there at size 0; make sure */
	if (rc == 0)
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, in->ino, l);
	if (rc == 0)
		rc = mdt_mirror_note(t, in->ino, l);
	if (rc == 0) {
		in->blksize = l->stripe_size;
		rc = mdt_inode_put(t, in);
	}
	free(cur);
	if (rc) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int mdt_swap_layouts(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t tmp,
		     uint64_t size, int64_t mtime, uint32_t mtime_ns, struct timespec now)
{
	struct loom_layout *la = NULL, *lb = NULL;
	struct mdt_inode a, b;
	struct mdt_owner oa, ob;
	uint64_t blocks;
	uint32_t bflags;
	int rc;

	if (ino == tmp)
		return -EINVAL;
	rc = mdt_inode_get(t, ino, &a);
	if (rc == 0)
		rc = mdt_inode_get(t, tmp, &b);
	if (rc)
		return rc;
	if (!S_ISREG(a.mode) || !S_ISREG(b.mode))
		return -EINVAL;
	oa = mdt_owner_of(&a);
	ob = mdt_owner_of(&b);
	if (!mdt_perm_owner_or_root(cr, &oa) || !mdt_perm_owner_or_root(cr, &ob))
		return -EPERM;
	/* The file changed since the copy began: the copy is stale. */
	if (a.size != size || a.mtime != mtime || a.mtime_ns != mtime_ns)
		return -EAGAIN;
	if (b.size != a.size)
		return -EINVAL; /* not a whole copy */
	/* Objects still to be cut for a truncation stay with their file until they are. */
	if (mdt_trunc_pending(t, ino, a.trunc_epoch) || mdt_trunc_pending(t, tmp, b.trunc_epoch))
		return -EBUSY;
	rc = mdt_layout_load(t, MDT_DB_LAYOUTS, ino, &la);
	if (rc == 0)
		rc = mdt_layout_load(t, MDT_DB_LAYOUTS, tmp, &lb);
	/* Both keep their Data-on-MDT bytes, equal after a whole copy: the parts must match. */
	if (rc == 0 && la->dom_size != lb->dom_size)
		rc = -EINVAL;
	if (rc == -ENODATA)
		rc = -EINVAL;
	if (rc == 0) {
		uint32_t gen = la->layout_gen;

		la->layout_gen = lb->layout_gen;
		lb->layout_gen = gen + 1;
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, ino, lb);
	}
	if (rc == 0)
		rc = mdt_layout_save(t, MDT_DB_LAYOUTS, tmp, la);
	if (rc == 0) {
		/* The objects' block counts go with them; the data is the same, so mtime stays. */
		a.blksize = lb->stripe_size;
		b.blksize = la->stripe_size;
		blocks = a.blocks;
		bflags = a.flags & MDT_IF_BLOCKS;
		a.blocks = b.blocks;
		a.flags = (a.flags & ~MDT_IF_BLOCKS) | (b.flags & MDT_IF_BLOCKS);
		b.blocks = blocks;
		b.flags = (b.flags & ~MDT_IF_BLOCKS) | bflags;
		/* The same bytes, but in other objects: a client's cache of them is told to look
		 * again rather than trust a copy it cannot tell from the old objects' bytes. */
		a.data_version++;
		b.data_version++;
		/* Each object keeps the truncation epoch it is in: the epochs go with the objects. */
		{
			uint32_t epoch = a.trunc_epoch;

			a.trunc_epoch = b.trunc_epoch;
			b.trunc_epoch = epoch;
		}
		mdt_inode_touch(&a, MDT_T_CTIME, now);
		mdt_inode_touch(&b, MDT_T_CTIME, now);
		rc = mdt_inode_put(t, &a);
		if (rc == 0)
			rc = mdt_inode_put(t, &b);
	}
	free(la);
	free(lb);
	return rc;
}

int mdt_setlayout(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino,
		  const struct lw_layout *req, uint32_t flags, struct loom_layout **out)
{
	struct mdt_owner own;
	struct mdt_inode in;
	int rc;

	*out = NULL;
	if (flags & ~LW_SL_DELETE)
		return -EINVAL;
	if (req && !(flags & LW_SL_DELETE)) {
		rc = lw_layout_req_check(req);
		if (rc)
			return rc;
	}
	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	own = mdt_owner_of(&in);
	if (!mdt_perm_owner_or_root(cr, &own))
		return -EPERM;
	if (!(flags & LW_SL_DELETE)) {
		rc = mdt_txn_grow(t, MDT_GROW_RECORD); /* a directory's default may be new */
		if (rc)
			return rc;
	}
	if (S_ISDIR(in.mode))
		return setlayout_dir(t, ino, req, flags, out);
	if (S_ISREG(in.mode) && !(flags & LW_SL_DELETE))
		return setlayout_file(t, &in, req, out);
	return -EINVAL;
}
