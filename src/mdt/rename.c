/*
 * rename(2) and renameat2(2), checked in the order of Linux's do_renameat2() and vfs_rename():
 *
 *   1. both parents exist and are directories            ENOENT, ENOTDIR
 *   2. "." or ".." as either name                         EBUSY (EEXIST for a NOREPLACE target)
 *   3. search permission on both parents                  EACCES
 *   4. the source exists; the target per the flags       ENOENT, EEXIST
 *   5. neither is an ancestor of the other's parent       EINVAL, ENOTEMPTY
 *   6. same inode under both names: nothing to do         0
 *   7. may_delete(source), may_delete/may_create(target) EACCES, EPERM (sticky), ENOTDIR, EISDIR
 *   8. a directory changing parent must be writable      EACCES (its ".." changes)
 *   9. a directory target must be empty                   ENOTEMPTY
 */
#include "mdt/internal.h"

#include <errno.h>

/* Is `anc` the directory `ino` itself or one of its ancestors? Walks ".." up to the root. */
static int is_ancestor(struct mdt_txn *t, uint64_t anc, uint64_t ino, bool *yes)
{
	struct mdt_inode in;
	int rc;

	*yes = false;
	for (uint32_t depth = 0;; depth++) {
		if (ino == anc) {
			*yes = true;
			return 0;
		}
		if (ino == LOOM_ROOT_INO)
			return 0;
		if (depth > (1u << 20))
			return -EIO; /* a cycle of ".." links: corruption */
		rc = mdt_inode_get(t, ino, &in);
		if (rc)
			return rc == -ENOENT ? -EIO : rc;
		ino = in.parent;
	}
}

/* may_delete() of an entry, with the victim already read: write+search, sticky, then its type
 * against what the operation expects (is_dir). */
static int may_delete(const struct loom_cred *cr, const struct mdt_inode *dir,
		      const struct mdt_inode *victim, bool is_dir)
{
	struct mdt_owner dir_own = mdt_owner_of(dir), victim_own = mdt_owner_of(victim);
	int rc;

	rc = mdt_may(cr, dir, MDT_MAY_WRITE | MDT_MAY_EXEC);
	if (rc == 0)
		rc = mdt_perm_sticky(cr, &dir_own, &victim_own);
	if (rc)
		return rc;
	if (is_dir && !S_ISDIR(victim->mode))
		return -ENOTDIR;
	if (!is_dir && S_ISDIR(victim->mode))
		return -EISDIR;
	return 0;
}

/* Everything a rename looks at. When both names are in one directory, dst_dir points at src_dir,
 * so that both updates land in one record. */
struct rn {
	struct mdt_inode src_dir, dst_dir_rec, src, dst;
	struct mdt_inode *dst_dir;
	struct mdt_dentry src_de, dst_de;
	bool same_dir, dst_exists;
};

/* Steps 1 to 5 and 7 to 9 of the comment at the top; returns 1 for a same-inode no-op. */
static int rename_check(struct mdt_txn *t, const struct loom_cred *cr, struct rn *r,
			uint64_t src_parent, const char *src, size_t src_len, uint64_t dst_parent,
			const char *dst, size_t dst_len, uint32_t flags)
{
	bool exchange = flags & LW_RENAME_EXCHANGE, trapped;
	int rc;

	r->same_dir = src_parent == dst_parent;
	r->dst_dir = r->same_dir ? &r->src_dir : &r->dst_dir_rec;
	rc = mdt_dir_get(t, cr, src_parent, 0, &r->src_dir);
	if (rc == 0 && !r->same_dir)
		rc = mdt_dir_get(t, cr, dst_parent, 0, r->dst_dir);
	if (rc)
		return rc;
	if (mdt_name_is_dots(src, src_len))
		return -EBUSY;
	if (mdt_name_is_dots(dst, dst_len))
		return (flags & LW_RENAME_NOREPLACE) ? -EEXIST : -EBUSY;
	rc = mdt_may(cr, &r->src_dir, MDT_MAY_EXEC);
	if (rc == 0)
		rc = mdt_may(cr, r->dst_dir, MDT_MAY_EXEC);
	if (rc)
		return rc;

	rc = mdt_dentry_get(t, src_parent, src, src_len, &r->src_de);
	if (rc)
		return rc;
	rc = mdt_dentry_get(t, dst_parent, dst, dst_len, &r->dst_de);
	if (rc && rc != -ENOENT)
		return rc;
	r->dst_exists = rc == 0;
	if (exchange && !r->dst_exists)
		return -ENOENT;
	if ((flags & LW_RENAME_NOREPLACE) && r->dst_exists)
		return -EEXIST;
	rc = mdt_inode_get(t, r->src_de.ino, &r->src);
	if (rc == 0 && r->dst_exists)
		rc = mdt_inode_get(t, r->dst_de.ino, &r->dst);
	if (rc)
		return rc == -ENOENT ? -EIO : rc;

	if (!r->same_dir) {
		/* lock_rename()'s trap: a directory cannot move under itself, nor be replaced by
		 * something from inside it. */
		if (S_ISDIR(r->src.mode)) {
			rc = is_ancestor(t, r->src.ino, dst_parent, &trapped);
			if (rc)
				return rc;
			if (trapped)
				return -EINVAL;
		}
		if (r->dst_exists && S_ISDIR(r->dst.mode)) {
			rc = is_ancestor(t, r->dst.ino, src_parent, &trapped);
			if (rc)
				return rc;
			if (trapped)
				return exchange ? -EINVAL : -ENOTEMPTY;
		}
	}
	if (r->dst_exists && r->src.ino == r->dst.ino)
		return 1;

	rc = may_delete(cr, &r->src_dir, &r->src, S_ISDIR(r->src.mode));
	if (rc)
		return rc;
	if (!r->dst_exists) {
		rc = mdt_may(cr, r->dst_dir, MDT_MAY_WRITE | MDT_MAY_EXEC);
	} else {
		rc = may_delete(cr, r->dst_dir, &r->dst,
				S_ISDIR(exchange ? r->dst.mode : r->src.mode));
	}
	if (rc)
		return rc;
	if (!r->same_dir) {
		if (S_ISDIR(r->src.mode))
			rc = mdt_may(cr, &r->src, MDT_MAY_WRITE);
		if (rc == 0 && exchange && S_ISDIR(r->dst.mode))
			rc = mdt_may(cr, &r->dst, MDT_MAY_WRITE);
		if (rc)
			return rc;
	}
	if (!exchange && r->dst_exists && S_ISDIR(r->dst.mode) && r->dst.nentries > 0)
		return -ENOTEMPTY;
	return 0;
}

/* A directory changes parent: its ".." and both parents' link counts follow. */
static void move_dir(struct rn *r, struct mdt_inode *in, struct mdt_inode *from,
		     struct mdt_inode *to)
{
	if (!S_ISDIR(in->mode) || r->same_dir)
		return;
	in->parent = to->ino;
	from->nlink--;
	to->nlink++;
}

static int do_exchange(struct mdt_txn *t, struct rn *r, const char *src, size_t src_len,
		       const char *dst, size_t dst_len, struct timespec now)
{
	int rc;

	/* Both names keep their places in readdir order; only what they name swaps. */
	rc = mdt_dentry_retarget(t, r->src_dir.ino, src, src_len, &r->src_de, r->dst.ino, r->dst.mode);
	if (rc == 0)
		rc = mdt_dentry_retarget(t, r->dst_dir->ino, dst, dst_len, &r->dst_de, r->src.ino,
					 r->src.mode);
	if (rc)
		return rc;
	move_dir(r, &r->src, &r->src_dir, r->dst_dir);
	move_dir(r, &r->dst, r->dst_dir, &r->src_dir);
	r->dst.name_version++;
	mdt_inode_touch(&r->dst, MDT_T_CTIME, now);
	return mdt_inode_put(t, &r->dst);
}

static int do_move(struct mdt_txn *t, struct rn *r, const char *src, size_t src_len,
		   const char *dst, size_t dst_len, struct timespec now, struct mdt_unlinked *victim)
{
	int rc;

	if (r->dst_exists) {
		rc = mdt_dentry_del(t, r->dst_dir, dst, dst_len, &r->dst_de);
		if (rc)
			return rc;
		if (S_ISDIR(r->dst.mode)) {
			/* An empty directory replaced goes at once, as rmdir's do. */
			r->dst_dir->nlink--;
			rc = mdt_dir_destroy(t, r->dst.ino);
			if (victim) {
				victim->ino = r->dst.ino;
				victim->nlink = 0;
				victim->mode = r->dst.mode;
			}
		} else {
			rc = mdt_drop_link(t, &r->dst, now, victim);
		}
		if (rc)
			return rc;
	}
	rc = mdt_dentry_del(t, &r->src_dir, src, src_len, &r->src_de);
	if (rc == 0)
		rc = mdt_dentry_add(t, r->dst_dir, dst, dst_len, r->src.ino, r->src.mode);
	if (rc == 0)
		move_dir(r, &r->src, &r->src_dir, r->dst_dir);
	return rc;
}

int mdt_rename(struct mdt_txn *t, const struct loom_cred *cr, uint64_t src_parent,
	       const char *src, size_t src_len, uint64_t dst_parent, const char *dst,
	       size_t dst_len, uint32_t flags, struct timespec now, struct mdt_unlinked *victim,
	       uint32_t *moved_mode)
{
	struct rn r;
	int rc;

	if (victim)
		memset(victim, 0, sizeof(*victim));
	if (moved_mode)
		*moved_mode = 0;
	if ((flags & ~(LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE)) ||
	    flags == (LW_RENAME_NOREPLACE | LW_RENAME_EXCHANGE))
		return -EINVAL;
	rc = lw_name_check(src, src_len);
	if (rc == 0)
		rc = lw_name_check(dst, dst_len);
	if (rc)
		return rc;
	memset(&r, 0, sizeof(r));
	rc = rename_check(t, cr, &r, src_parent, src, src_len, dst_parent, dst, dst_len, flags);
	if (rc == 1)
		return 0;
	if (rc)
		return rc;

	if (flags & LW_RENAME_EXCHANGE)
		rc = do_exchange(t, &r, src, src_len, dst, dst_len, now);
	else
		rc = do_move(t, &r, src, src_len, dst, dst_len, now, victim);
	if (rc)
		return rc;
	r.src.name_version++;
	if (moved_mode)
		*moved_mode = (flags & LW_RENAME_EXCHANGE) && S_ISDIR(r.dst.mode) ? r.dst.mode : r.src.mode;
	mdt_inode_touch(&r.src, MDT_T_CTIME, now);
	mdt_inode_touch(&r.src_dir, MDT_T_MTIME | MDT_T_CTIME, now);
	mdt_inode_touch(r.dst_dir, MDT_T_MTIME | MDT_T_CTIME, now);
	rc = mdt_inode_put(t, &r.src);
	if (rc == 0)
		rc = mdt_inode_put(t, &r.src_dir);
	if (rc == 0 && !r.same_dir)
		rc = mdt_inode_put(t, r.dst_dir);
	return rc;
}
