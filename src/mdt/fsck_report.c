/*
 * loom fsck, the MDT half: reporting a problem (with the path of its inode), running its repair in
 * a child transaction of the caller's (REPAIR, in fsck_impl.h), and the repairs of records that
 * several passes make. See fsck.c for the whole.
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#define PATH_DEPTH_MAX 4096   /* a longer chain of parents is a loop the path walk gives up on */

/* The name of dir's entry with this cookie, from its readdir record. */
bool fsck_cookie_name(struct mdt_fsck *f, uint64_t dir, uint64_t cookie, const char **name,
		      size_t *len)
{
	struct mdt_dirent_rec rec;
	uint8_t key[16];
	MDB_val v;

	mdt_put_be64(key, dir);
	mdt_put_be64(key + 8, cookie);
	if (mdt_get(f->t, MDT_DB_DIRCOOKIES, key, sizeof(key), &v) != 0 || v.mv_size < sizeof(rec))
		return false;
	memcpy(&rec, v.mv_data, sizeof(rec));
	if (rec.namelen == 0 || rec.namelen > LOOM_NAME_MAX || v.mv_size != sizeof(rec) + rec.namelen)
		return false;
	*name = (const char *)v.mv_data + sizeof(rec);
	*len = rec.namelen;
	return true;
}

/* The inode's path, walking up through each inode's (first) entry; NULL when it has none that
 * leads to the root. Cheap: one lookup per component. */
static const char *path_of(struct mdt_fsck *f, uint64_t ino)
{
	char *end = f->path + sizeof(f->path) - 1, *p = end;

	*end = '\0';
	for (int depth = 0; ino != LOOM_ROOT_INO; depth++) {
		struct fino *fi = fsck_find(f, ino);
		const char *name;
		size_t len;

		if (!fi || fi->links == 0 || fi->parent == 0 || depth > PATH_DEPTH_MAX)
			return NULL;
		if (!fsck_cookie_name(f, fi->parent, fi->cookie, &name, &len) ||
		    len + 1 > (size_t)(p - f->path))
			return NULL;
		p -= len;
		memcpy(p, name, len);
		*--p = '/';
		ino = fi->parent;
	}
	if (p == end)
		*--p = '/';
	return p;
}

/* Errors no later repair can escape: stop. */
static bool fatal(int rc)
{
	return rc == -ENOMEM || rc == -EIO || rc == MDT_ETXNFULL;
}

/*
 * Reports one problem. fixrc: 0 when the repair `fix` was done, NOFIX when none was tried (no
 * --repair, or nothing fsck can do), else the error the repair failed with. Returns that error
 * when it must stop fsck, else 0.
 */
__attribute__((format(printf, 6, 7)))
int fsck_report(struct mdt_fsck *f, enum mdt_fsck_kind kind, uint64_t ino, int fixrc,
		const char *fix, const char *fmt, ...)
{
	struct mdt_fsck_problem p = { .kind = kind, .ino = ino };
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
	if (fixrc < 0 && n >= 0 && (size_t)n < sizeof(f->what))
		snprintf(f->what + n, sizeof(f->what) - (size_t)n, " (repair failed: %s)",
			 fixrc == MDT_ETXNFULL ? "too many changes for one transaction"
					       : strerror(-fixrc));
	p.what = f->what;
	p.path = ino ? path_of(f, ino) : NULL;
	p.fix = fixrc == 0 ? fix : NULL;
	f->st.problems++;
	if (fixrc == 0)
		f->st.repaired++;
	if (f->ops.report)
		f->ops.report(f->ops.arg, &p);
	return fixrc < 0 && fatal(fixrc) ? fixrc : 0;
}

int fsck_fix_begin(struct mdt_fsck *f)
{
	return mdt_txn_child(f->top, &f->t);
}

int fsck_fix_end(struct mdt_fsck *f, int rc)
{
	struct mdt_txn *child = f->t;

	f->t = f->top;
	if (rc == 0)
		return mdt_txn_commit(child);
	mdt_txn_abort(child);
	return rc;
}

/* ---- repairs on records ---- */

int fsck_del_key(struct mdt_fsck *f, enum mdt_db db, const void *key, size_t klen)
{
	int rc = mdt_del(f->t, db, key, klen);

	return rc == -ENOENT ? 0 : rc;
}

int fsck_del_ino_key(struct mdt_fsck *f, enum mdt_db db, uint64_t ino)
{
	uint8_t key[8];

	mdt_put_be64(key, ino);
	return fsck_del_key(f, db, key, sizeof(key));
}

int fsck_set_inode(struct mdt_fsck *f, uint64_t ino, enum inode_field field, uint64_t val)
{
	struct mdt_inode in;
	uint8_t key[8];
	MDB_val v;
	int rc;

	/* Read raw: IF_INO mends a record whose ino field is wrong, which mdt_inode_get allows. */
	mdt_put_be64(key, ino);
	rc = mdt_get(f->t, MDT_DB_INODES, key, sizeof(key), &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(in))
		return -EIO;
	memcpy(&in, v.mv_data, sizeof(in));
	switch (field) {
	case IF_NLINK: in.nlink = (uint32_t)val; break;
	case IF_NENTRIES: in.nentries = val; break;
	case IF_PARENT: in.parent = val; break;
	case IF_NEXT_COOKIE: in.next_cookie = val; break;
	case IF_INO: in.ino = val; break;
	case IF_SIZE: in.size = val; break;
	}
	return mdt_inode_put(f->t, &in);
}
