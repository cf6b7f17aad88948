/*
 * Directory entries and readdir.
 *
 * An entry lives twice: in `dentries` under (parent, name) for lookup, and in `dircookies` under
 * (parent, cookie) for readdir. A directory hands out cookies from a counter that only grows, so
 * readdir walks entries in the order they were added, and a reader resuming after cookie c sees
 * exactly the entries whose cookie is above c: an entry removed meanwhile is simply gone, one
 * added meanwhile comes after everything that was there before, and no entry moves.
 *
 *   cookie:   1    2     3      4      7       9
 *   entry:    .    ..    a      b      c       d      <- 5, 6, 8 were removed
 *   readdir(cookie 4) resumes at the first key >= (dir, 5): c, then d.
 */
#include "mdt/internal.h"

#include <dirent.h>
#include <errno.h>

int mdt_dir_get(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, int may,
		struct mdt_inode *dir)
{
	struct mdt_owner o;
	int rc;

	rc = mdt_inode_get(t, ino, dir);
	if (rc)
		return rc;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (!may)
		return 0;
	o = mdt_owner_of(dir);
	return mdt_perm_access(cr, &o, may);
}

int mdt_dentry_get(struct mdt_txn *t, uint64_t dir, const char *name, size_t len,
		   struct mdt_dentry *out)
{
	uint8_t key[MDT_KEY_MAX];
	MDB_val v;
	int rc;

	/* Every operation checked the name on entry; this keeps a caller that did not from
	 * overrunning key[] (and -EINVAL is never mistaken for "no such name"). */
	if (lw_name_check(name, len) != 0)
		return -EINVAL;
	rc = mdt_get(t, MDT_DB_DENTRIES, key, mdt_key_name(key, dir, name, len), &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*out))
		return -EIO;
	memcpy(out, v.mv_data, sizeof(*out));
	return 0;
}

static size_t cookie_key(uint8_t key[16], uint64_t dir, uint64_t cookie)
{
	mdt_put_be64(key, dir);
	mdt_put_be64(key + 8, cookie);
	return 16;
}

static int cookie_put(struct mdt_txn *t, uint64_t dir, uint64_t cookie, const char *name,
		      size_t len, uint64_t ino, uint32_t type)
{
	uint8_t key[16];
	uint8_t val[sizeof(struct mdt_dirent_rec) + LOOM_NAME_MAX];
	struct mdt_dirent_rec rec = { .ino = ino, .type = type, .namelen = (uint16_t)len };

	memcpy(val, &rec, sizeof(rec));
	memcpy(val + sizeof(rec), name, len);
	return mdt_put(t, MDT_DB_DIRCOOKIES, key, cookie_key(key, dir, cookie), val,
		       sizeof(rec) + len);
}

int mdt_dentry_add(struct mdt_txn *t, struct mdt_inode *dir, const char *name, size_t len,
		   uint64_t ino, uint32_t mode)
{
	uint8_t key[MDT_KEY_MAX];
	struct mdt_dentry de = { .ino = ino, .cookie = dir->next_cookie, .type = mdt_dt_type(mode) };
	int rc;

	if (lw_name_check(name, len) != 0)
		return -EINVAL;
	rc = mdt_put(t, MDT_DB_DENTRIES, key, mdt_key_name(key, dir->ino, name, len), &de, sizeof(de));
	if (rc == 0)
		rc = cookie_put(t, dir->ino, de.cookie, name, len, ino, de.type);
	if (rc)
		return rc;
	dir->next_cookie++;
	dir->nentries++;
	return 0;
}

int mdt_dentry_del(struct mdt_txn *t, struct mdt_inode *dir, const char *name, size_t len,
		   const struct mdt_dentry *de)
{
	uint8_t key[MDT_KEY_MAX];
	int rc;

	rc = mdt_del(t, MDT_DB_DENTRIES, key, mdt_key_name(key, dir->ino, name, len));
	if (rc == 0)
		rc = mdt_del(t, MDT_DB_DIRCOOKIES, key, cookie_key(key, dir->ino, de->cookie));
	if (rc)
		return rc == -ENOENT ? -EIO : rc; /* the two halves of an entry disagree */
	dir->nentries--;
	return 0;
}

int mdt_dentry_retarget(struct mdt_txn *t, uint64_t dir, const char *name, size_t len,
			const struct mdt_dentry *de, uint64_t ino, uint32_t mode)
{
	uint8_t key[MDT_KEY_MAX];
	struct mdt_dentry nde = *de;
	int rc;

	nde.ino = ino;
	nde.type = mdt_dt_type(mode);
	rc = mdt_put(t, MDT_DB_DENTRIES, key, mdt_key_name(key, dir, name, len), &nde, sizeof(nde));
	if (rc == 0)
		rc = cookie_put(t, dir, de->cookie, name, len, ino, nde.type);
	return rc;
}

/* ---- readdir ---- */

struct rd_page {
	struct mdt_txn *t;
	struct lw_wr *w;
	bool plus;
	uint32_t count;
};

/* Appends one entry: 0, 1 when the page is full, or a negative errno. */
static int rd_put(struct rd_page *pg, uint64_t ino, uint64_t cookie, uint32_t type,
		  const char *name, size_t len)
{
	struct lw_dirent de = { .ino = ino, .cookie = cookie, .type = type, .namelen = (uint16_t)len };
	struct lw_attr attr;
	struct mdt_inode in;
	int rc;

	if (pg->plus) {
		rc = mdt_inode_get(pg->t, ino, &in);
		if (rc)
			return rc == -ENOENT ? -EIO : rc; /* an entry naming no inode */
		mdt_inode_attr(&in, &attr);
	}
	rc = lw_readdir_put(pg->w, &de, name, pg->plus ? &attr : NULL);
	if (rc == -EMSGSIZE)
		return 1;
	if (rc)
		return rc;
	pg->count++;
	return 0;
}

/* The entries with cookies >= from, in cookie order. Sets *more when the page filled up first. */
static int rd_entries(struct rd_page *pg, uint64_t dir, uint64_t from, bool *more)
{
	struct mdt_txn *t = pg->t;
	struct mdt_dirent_rec rec;
	uint8_t key[16];
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	*more = false;
	k.mv_size = cookie_key(key, dir, from);
	k.mv_data = key;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_DIRCOOKIES], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size != 16 || mdt_get_be64(k.mv_data) != dir)
			break;
		if (v.mv_size < sizeof(rec)) {
			rc = -EIO;
			goto out;
		}
		memcpy(&rec, v.mv_data, sizeof(rec));
		if (v.mv_size != sizeof(rec) + rec.namelen || rec.namelen == 0) {
			rc = -EIO;
			goto out;
		}
		rc = rd_put(pg, rec.ino, mdt_get_be64((const uint8_t *)k.mv_data + 8), rec.type,
			    (const char *)v.mv_data + sizeof(rec), rec.namelen);
		if (rc == 1) {
			*more = true;
			rc = 0;
			goto out;
		}
		if (rc)
			goto out;
	}
	rc = mrc == MDB_NOTFOUND || mrc == MDB_SUCCESS ? 0 : mdt_errno(mrc);
out:
	mdb_cursor_close(cur);
	return rc;
}

int mdt_readdir(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, uint64_t cookie,
		bool plus, struct lw_wr *w, uint32_t *count, bool *eof)
{
	struct rd_page pg = { .t = t, .w = w, .plus = plus };
	struct mdt_inode dir;
	bool more = false;
	int rc;

	*count = 0;
	*eof = false;
	rc = mdt_dir_get(t, cr, ino, MDT_MAY_READ, &dir);
	if (rc)
		return rc;
	if (cookie < MDT_COOKIE_DOT) {
		rc = rd_put(&pg, ino, MDT_COOKIE_DOT, DT_DIR, ".", 1);
		if (rc)
			goto full;
	}
	if (cookie < MDT_COOKIE_DOTDOT) {
		rc = rd_put(&pg, dir.parent, MDT_COOKIE_DOTDOT, DT_DIR, "..", 2);
		if (rc)
			goto full;
	}
	/* Cookies never reach UINT64_MAX; a client that sends it has read everything. */
	if (cookie < UINT64_MAX) {
		rc = rd_entries(&pg, ino, cookie < MDT_COOKIE_FIRST ? MDT_COOKIE_FIRST : cookie + 1,
				&more);
		if (rc)
			goto out;
	}
	if (more)
		goto full;
	*eof = true;
	goto out;
full:
	/* rc is 1 for "." or ".." not fitting, 0 when the entries filled the page. */
	if (rc < 0)
		goto out;
	rc = pg.count == 0 ? -EINVAL : 0;
out:
	*count = pg.count;
	return rc;
}
