/*
 * loom fsck, the MDT half, pass 4 (see fsck.c): what passes 1 to 3 counted, against each inode:
 * a directory's link count, entry count, next cookie and ".."; anything else's link count and
 * its place in the orphan list; symlinks without a target; directory cycles. Inodes found
 * disconnected go to /lost+found (fsck_lost_found.c).
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* A directory's link count, entry count, next cookie and "..". */
static int check_dir(struct mdt_fsck *f, struct fino *fi)
{
	struct mdt_inode in;
	uint64_t ino = fi->ino, want;
	int rc, frc;

	rc = mdt_inode_get(f->t, ino, &in);
	if (rc)
		return rc;
	if (ino == LOOM_ROOT_INO && in.parent != LOOM_ROOT_INO) {
		REPAIR(f, frc, fsck_set_inode(f, ino, IF_PARENT, LOOM_ROOT_INO));
		rc = fsck_report(f, MDT_FSCK_DIR_PARENT, ino, frc, "\"..\" set to the root itself",
				 "the root's \"..\" is %llu", (unsigned long long)in.parent);
		if (rc)
			return rc;
	}
	want = 2ull + fi->subdirs;
	if (in.nlink != want) {
		snprintf(f->fix, sizeof(f->fix), "nlink %llu", (unsigned long long)want);
		REPAIR(f, frc, fsck_set_inode(f, ino, IF_NLINK, want));
		rc = fsck_report(f, MDT_FSCK_NLINK, ino, frc, f->fix,
				 "directory nlink %u, should be 2 + %u subdirectories", in.nlink,
				 fi->subdirs);
		if (rc)
			return rc;
	}
	if (in.nentries != fi->entries) {
		snprintf(f->fix, sizeof(f->fix), "%llu", (unsigned long long)fi->entries);
		REPAIR(f, frc, fsck_set_inode(f, ino, IF_NENTRIES, fi->entries));
		rc = fsck_report(f, MDT_FSCK_NENTRIES, ino, frc, f->fix,
				 "directory counts %llu entries, it has %llu%s",
				 (unsigned long long)in.nentries, (unsigned long long)fi->entries,
				 fi->entries == 0 ? " (rmdir would refuse it)"
				 : in.nentries == 0 ? " (rmdir would remove it with its entries)" : "");
		if (rc)
			return rc;
	}
	want = MAX(fi->maxcookie + 1, (uint64_t)MDT_COOKIE_FIRST);
	if (in.next_cookie < want) {
		snprintf(f->fix, sizeof(f->fix), "next cookie %llu", (unsigned long long)want);
		REPAIR(f, frc, fsck_set_inode(f, ino, IF_NEXT_COOKIE, want));
		rc = fsck_report(f, MDT_FSCK_COUNTER, ino, frc, f->fix,
				 "directory's next cookie %llu is not above cookie %llu in use: a new "
				 "entry would hide an old one from readdir",
				 (unsigned long long)in.next_cookie, (unsigned long long)fi->maxcookie);
		if (rc)
			return rc;
	}
	if (fi->flags & FI_ORPHAN) {
		REPAIR(f, frc, fsck_del_ino_key(f, MDT_DB_ORPHANS, ino));
		rc = fsck_report(f, MDT_FSCK_ORPHAN_LIST, ino, frc, "removed from the list",
				 "a directory is in the orphan list");
	}
	return rc;
}

/* Anything but a directory: its link count against its entries, and the orphan list. Sets
 * *disconnected for an inode that needs /lost+found. */
static int check_nondir(struct mdt_fsck *f, struct fino *fi, bool *disconnected)
{
	uint64_t ino = fi->ino;
	bool orphan = fi->flags & FI_ORPHAN;
	int rc = 0, frc;

	*disconnected = false;
	if (fi->links > 0) {
		if (fi->nlink != fi->links) {
			snprintf(f->fix, sizeof(f->fix), "nlink %u", fi->links);
			REPAIR(f, frc, fsck_set_inode(f, ino, IF_NLINK, fi->links));
			rc = fsck_report(f, MDT_FSCK_NLINK, ino, frc, f->fix,
					 "%s nlink %u, %u %s it%s", fsck_type_name(fi->mode), fi->nlink,
					 fi->links, fi->links == 1 ? "entry names" : "entries name",
					 orphan && fi->nlink == 0 ? " (the MDS would free it at start)" : "");
			if (rc)
				return rc;
		}
		if (orphan) {
			REPAIR(f, frc, fsck_del_ino_key(f, MDT_DB_ORPHANS, ino));
			rc = fsck_report(f, MDT_FSCK_ORPHAN_LIST, ino, frc, "removed from the list",
					 "a %s with entries is in the orphan list", fsck_type_name(fi->mode));
		}
		return rc;
	}
	if (orphan && fi->nlink == 0)
		return 0; /* unlinked while open: the MDS releases it when it starts */
	if (orphan) {
		REPAIR(f, frc, fsck_set_inode(f, ino, IF_NLINK, 0));
		return fsck_report(f, MDT_FSCK_ORPHAN_LIST, ino, frc,
				   "nlink 0 (the MDS releases it at start)",
				   "%s %llu is in the orphan list with nlink %u but no entry",
				   fsck_type_name(fi->mode), (unsigned long long)ino, fi->nlink);
	}
	if (fi->nlink == 0) {
		REPAIR(f, frc, mdt_orphan_add(f->t, ino));
		return fsck_report(f, MDT_FSCK_ORPHAN_LIST, ino, frc,
				   "added (the MDS releases it and its objects at start)",
				   "unlinked %s %llu is not in the orphan list: it would never be freed",
				   fsck_type_name(fi->mode), (unsigned long long)ino);
	}
	*disconnected = true;
	return 0;
}

/* Directories whose chain of parents does not reach the root: cycles. For each, the directory
 * where the walk came round again is cut out of the cycle (added to *cyc). */
static int find_cycles(struct mdt_fsck *f, uint64_t **cyc, size_t *ncyc)
{
	size_t cap = 0;

	for (size_t i = 0; i < f->nino; i++) {
		struct fino *d = &f->ino[i], *cur;

		if (!S_ISDIR(d->mode) || (d->flags & FI_REACH))
			continue;
		for (cur = d; !(cur->flags & (FI_REACH | FI_VISIT));) {
			cur->flags |= FI_VISIT;
			cur = fsck_find_dir(f, cur->parent); /* accepted entries are in directories */
			if (!cur)
				return -EIO;
		}
		if (!(cur->flags & FI_REACH)) {
			int rc = fsck_grow((void **)cyc, &cap, *ncyc + 1, sizeof(**cyc));
			if (rc)
				return rc;
			(*cyc)[(*ncyc)++] = cur->ino;
		}
		/* This walk's directories reach the root now (or will, through lost+found). */
		for (cur = d; cur && (cur->flags & FI_VISIT); cur = fsck_find_dir(f, cur->parent))
			cur->flags = (cur->flags & ~FI_VISIT) | FI_REACH;
	}
	return 0;
}

int fsck_pass_counts(struct mdt_fsck *f)
{
	uint64_t *disc = NULL, *cyc = NULL;
	size_t ndisc = 0, capdisc = 0, ncyc = 0, n = f->nino;
	int rc = 0;

	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct fino *fi = &f->ino[i];
		bool lost = false;

		if (S_ISDIR(fi->mode)) {
			rc = check_dir(f, fi);
			if (fi->ino == LOOM_ROOT_INO)
				fi->flags |= FI_REACH;
			else if (fi->links == 0)
				lost = true;
			if (lost)
				fi->flags |= FI_REACH; /* reachable once reconnected */
		} else {
			rc = check_nondir(f, fi, &lost);
			if (rc == 0 && S_ISLNK(fi->mode) && !(fi->flags & FI_TARGET) && fi->nlink)
				rc = fsck_report(f, MDT_FSCK_SYMLINK, fi->ino, NOFIX, NULL,
						 "symlink without a target (remove it and make it again)");
		}
		if (rc == 0 && lost) {
			rc = fsck_grow((void **)&disc, &capdisc, ndisc + 1, sizeof(*disc));
			if (rc == 0)
				disc[ndisc++] = fi->ino;
		}
	}
	if (rc == 0)
		rc = find_cycles(f, &cyc, &ncyc);
	for (size_t i = 0; rc == 0 && i < ndisc; i++)
		rc = fsck_fix_disconnected(f, disc[i], false);
	for (size_t i = 0; rc == 0 && i < ncyc; i++)
		rc = fsck_fix_disconnected(f, cyc[i], true);
	free(disc);
	free(cyc);
	return rc;
}
