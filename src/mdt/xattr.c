/*
 * Extended attributes, one LMDB record each under (ino, name). Who may read or write which
 * namespace is mdt_perm_xattr()'s decision (perm.c); here are ext4's answers for the rest:
 * -ENODATA for a missing name, -EEXIST/-ENODATA for XATTR_CREATE/XATTR_REPLACE, -ERANGE for a
 * buffer too small, -EOPNOTSUPP for a namespace Loom does not know.
 */
#include "mdt/internal.h"

#include <errno.h>

/* Reads the inode an xattr call is about and checks the caller may do `may` on that name. */
static int xattr_target(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino,
			const char *name, size_t nlen, int may, struct mdt_inode *in)
{
	enum mdt_xattr_ns ns;
	struct mdt_owner o;
	int rc;

	rc = lw_xattr_name_check(name, nlen);
	if (rc)
		return rc;
	rc = mdt_inode_get(t, ino, in);
	if (rc)
		return rc;
	rc = mdt_xattr_ns(name, nlen, &ns);
	if (rc)
		return rc;
	o = mdt_owner_of(in);
	return mdt_perm_xattr(cr, &o, ns, may);
}

int mdt_getxattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, const char *name,
		 size_t nlen, void *buf, size_t cap, size_t *len)
{
	uint8_t key[MDT_KEY_MAX];
	struct mdt_inode in;
	MDB_val v;
	int rc;

	rc = xattr_target(t, cr, ino, name, nlen, MDT_MAY_READ, &in);
	if (rc)
		return rc;
	rc = mdt_get(t, MDT_DB_XATTRS, key, mdt_key_name(key, ino, name, nlen), &v);
	if (rc)
		return rc == -ENOENT ? -ENODATA : rc;
	*len = v.mv_size;
	if (cap == 0)
		return 0; /* a size query */
	if (cap < v.mv_size)
		return -ERANGE;
	memcpy(buf, v.mv_data, v.mv_size);
	return 0;
}

int mdt_setxattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, const char *name,
		 size_t nlen, const void *value, size_t vlen, uint32_t flags, struct timespec now)
{
	uint8_t key[MDT_KEY_MAX];
	struct mdt_inode in;
	size_t klen;
	MDB_val v;
	int rc;

	if (flags & ~(LW_XATTR_CREATE | LW_XATTR_REPLACE))
		return -EINVAL;
	if (vlen > LOOM_XATTR_SIZE_MAX)
		return -E2BIG;
	rc = xattr_target(t, cr, ino, name, nlen, MDT_MAY_WRITE, &in);
	if (rc)
		return rc;
	klen = mdt_key_name(key, ino, name, nlen);
	rc = mdt_get(t, MDT_DB_XATTRS, key, klen, &v);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0 && (flags & LW_XATTR_CREATE))
		return -EEXIST;
	if (rc == -ENOENT && (flags & LW_XATTR_REPLACE))
		return -ENODATA;
	/* A new one is growth, and so is a larger value; a value no larger takes nothing more. */
	if (rc == -ENOENT)
		rc = mdt_txn_grow(t, MDT_GROW_RECORD + (nlen + vlen) * MDT_GROW_BYTE);
	else if (vlen > v.mv_size)
		rc = mdt_txn_grow(t, (vlen - v.mv_size) * MDT_GROW_BYTE);
	if (rc)
		return rc;
	rc = mdt_put(t, MDT_DB_XATTRS, key, klen, vlen ? value : "", vlen);
	if (rc)
		return rc;
	mdt_inode_touch(&in, MDT_T_CTIME, now);
	in.flags &= ~MDT_IF_NO_XATTRS;
	return mdt_inode_put(t, &in);
}

int mdt_listxattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, void *buf,
		  size_t cap, size_t *len)
{
	struct mdt_inode in;
	uint8_t prefix[8];
	MDB_cursor *cur;
	MDB_val k, v;
	size_t total = 0;
	int rc, mrc;

	rc = mdt_inode_get(t, ino, &in);
	if (rc)
		return rc;
	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[MDT_DB_XATTRS], &cur));
	if (rc)
		return rc;
	mdt_put_be64(prefix, ino);
	k.mv_size = sizeof(prefix);
	k.mv_data = prefix;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const char *name = (const char *)k.mv_data + 8;
		size_t nlen = k.mv_size - 8;
		enum mdt_xattr_ns ns;

		if (k.mv_size <= 8 || memcmp(k.mv_data, prefix, 8) != 0)
			break;
		/* ext4 lists trusted.* only to CAP_SYS_ADMIN. */
		if (mdt_xattr_ns(name, nlen, &ns) == 0 && ns == MDT_XNS_TRUSTED && cr->uid != 0)
			continue;
		if (cap && total + nlen + 1 <= cap) {
			memcpy((char *)buf + total, name, nlen);
			((char *)buf)[total + nlen] = '\0';
		}
		total += nlen + 1;
	}
	mdb_cursor_close(cur);
	if (mrc != MDB_SUCCESS && mrc != MDB_NOTFOUND)
		return mdt_errno(mrc);
	*len = total;
	if (cap && cap < total)
		return -ERANGE;
	return 0;
}

int mdt_removexattr(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino,
		    const char *name, size_t nlen, struct timespec now)
{
	uint8_t key[MDT_KEY_MAX];
	struct mdt_inode in;
	int rc;

	rc = xattr_target(t, cr, ino, name, nlen, MDT_MAY_WRITE, &in);
	if (rc)
		return rc;
	rc = mdt_del(t, MDT_DB_XATTRS, key, mdt_key_name(key, ino, name, nlen));
	if (rc)
		return rc == -ENOENT ? -ENODATA : rc;
	mdt_inode_touch(&in, MDT_T_CTIME, now);
	return mdt_inode_put(t, &in);
}
