/*
 * loom fsck, the MDT half, pass 4's last step (see fsck.c): an inode no entry names (with a link
 * count), or a directory cut off from the root in a cycle, is linked into /lost+found as
 * "#<ino>", as e2fsck does; /lost+found is made when there is none.
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define LOST_FOUND "lost+found"

/* Finds /lost+found, or makes it (in its own child transaction, so that it stays even if a
 * reconnection fails), and adds it to the table. */
static int lost_found(struct mdt_fsck *f, uint64_t *out)
{
	struct loom_cred root = { 0 };
	struct mdt_dentry de;
	struct lw_attr attr;
	struct fino *fi;
	uint64_t next = 0;
	MDB_val v;
	int rc;

	if (f->lost_found) {
		*out = f->lost_found;
		return 0;
	}
	rc = mdt_dentry_get(f->t, LOOM_ROOT_INO, LOST_FOUND, strlen(LOST_FOUND), &de);
	if (rc == 0) {
		fi = fsck_find(f, de.ino);
		if (!fi || !S_ISDIR(fi->mode))
			return -ENOTDIR; /* a /lost+found that is not a directory: leave it be */
		f->lost_found = de.ino;
		*out = de.ino;
		return 0;
	}
	if (rc != -ENOENT)
		return rc;
	/* mkdir takes the next inode number: only if the counter is right (pass 1). */
	rc = mdt_get(f->t, MDT_DB_META, "next_ino", 8, &v);
	if (rc == 0 && v.mv_size == sizeof(next))
		memcpy(&next, v.mv_data, sizeof(next));
	if (next <= f->maxino)
		return -EUCLEAN;
	rc = fsck_grow((void **)&f->ino, &f->capino, f->nino + 1, sizeof(*f->ino));
	if (rc)
		return rc;
	rc = fsck_fix_begin(f);
	if (rc == 0)
		rc = fsck_fix_end(f, mdt_mkdir(f->t, &root, LOOM_ROOT_INO, LOST_FOUND, strlen(LOST_FOUND),
					       0700, f->now, &attr));
	if (rc == 0)
		rc = mdt_dentry_get(f->t, LOOM_ROOT_INO, LOST_FOUND, strlen(LOST_FOUND), &de);
	if (rc)
		return rc;
	/* Above every inode in the table, so the table stays sorted. */
	fi = &f->ino[f->nino++];
	memset(fi, 0, sizeof(*fi));
	fi->ino = attr.ino;
	fi->mode = attr.mode;
	fi->nlink = 2;
	fi->links = 1;
	fi->parent = LOOM_ROOT_INO;
	fi->cookie = de.cookie;
	fi->maxcookie = MDT_COOKIE_FIRST - 1;
	fi->flags = FI_REACH;
	f->maxino = attr.ino;
	fi = fsck_find(f, LOOM_ROOT_INO);
	fi->entries++;
	fi->subdirs++;
	fi->nlink++;
	f->lost_found = attr.ino;
	*out = attr.ino;
	return 0;
}

/* Links an inode into /lost+found as "#<ino>". A directory in a cycle (old_parent != 0) first
 * leaves the directory that holds it. */
static int reconnect(struct mdt_fsck *f, uint64_t lf, uint64_t ino, uint64_t old_parent,
		     uint64_t old_cookie, uint64_t *cookie)
{
	struct mdt_inode in, dir, pdir;
	struct mdt_dentry de;
	char name[32];
	size_t len = (size_t)snprintf(name, sizeof(name), "#%llu", (unsigned long long)ino);
	int rc;

	rc = mdt_dentry_get(f->t, lf, name, len, &de);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	if (old_parent) {
		const char *oname;
		size_t olen;
		char nb[LOOM_NAME_MAX + 1];

		if (!fsck_cookie_name(f, old_parent, old_cookie, &oname, &olen))
			return -ENOENT;
		memcpy(nb, oname, olen); /* the record moves once the transaction writes */
		rc = mdt_inode_get(f->t, old_parent, &pdir);
		if (rc == 0)
			rc = mdt_dentry_get(f->t, old_parent, nb, olen, &de);
		if (rc == 0)
			rc = mdt_dentry_del(f->t, &pdir, nb, olen, &de);
		if (rc)
			return rc;
		pdir.nlink--;
		mdt_inode_touch(&pdir, MDT_T_MTIME | MDT_T_CTIME, f->now);
		rc = mdt_inode_put(f->t, &pdir);
		if (rc)
			return rc;
	}
	/* Read after the old parent was written: a directory can hold its own entry. */
	rc = mdt_inode_get(f->t, ino, &in);
	if (rc == 0)
		rc = mdt_inode_get(f->t, lf, &dir);
	if (rc)
		return rc;
	*cookie = dir.next_cookie;
	rc = mdt_dentry_add(f->t, &dir, name, len, ino, in.mode);
	if (rc)
		return rc;
	if (S_ISDIR(in.mode)) {
		dir.nlink++;
		in.parent = lf;
	} else {
		in.nlink = 1;
	}
	mdt_inode_touch(&in, MDT_T_CTIME, f->now);
	mdt_inode_touch(&dir, MDT_T_MTIME | MDT_T_CTIME, f->now);
	rc = mdt_inode_put(f->t, &in);
	if (rc == 0)
		rc = mdt_inode_put(f->t, &dir);
	return rc;
}

/* Reconnects one inode, reporting it. */
int fsck_fix_disconnected(struct mdt_fsck *f, uint64_t ino, bool cycle)
{
	struct fino *fi = fsck_find(f, ino);
	uint64_t lf = 0, cookie = 0, old_parent = cycle ? fi->parent : 0, old_cookie = fi->cookie;
	uint32_t nlink = fi->nlink;
	int rc = NOFIX, frc;

	if (f->repair) {
		/* -ENOTDIR: /lost+found is not a directory; -EUCLEAN: next_ino is behind. */
		rc = lost_found(f, &lf);
		fi = fsck_find(f, ino); /* the table may have moved */
		if (rc == 0)
			REPAIR(f, rc, reconnect(f, lf, ino, old_parent, old_cookie, &cookie));
	}
	snprintf(f->fix, sizeof(f->fix), "linked as /lost+found/#%llu", (unsigned long long)ino);
	if (cycle)
		frc = fsck_report(f, MDT_FSCK_DISCONNECTED, 0, rc, f->fix,
				  "directory %llu is in a cycle of directories cut off from the root",
				  (unsigned long long)ino);
	else
		frc = fsck_report(f, MDT_FSCK_DISCONNECTED, 0, rc, f->fix,
				  "%s %llu (nlink %u) has no entry in any directory and is not in the "
				  "orphan list", fsck_type_name(fi->mode), (unsigned long long)ino, nlink);
	if (rc == 0) {
		struct fino *d = fsck_find(f, lf), *p = old_parent ? fsck_find(f, old_parent) : NULL;

		fi = fsck_find(f, ino);
		if (p) {
			p->subdirs--;
			p->entries--;
		}
		fi->parent = lf;
		fi->cookie = cookie;
		fi->links = 1;
		d->entries++;
		d->subdirs += S_ISDIR(fi->mode);
		d->maxcookie = MAX(d->maxcookie, cookie);
	}
	return frc;
}
