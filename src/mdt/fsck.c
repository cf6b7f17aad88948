/*
 * loom fsck, the MDT half: the namespace, and the layouts against the objects (see fsck.h).
 *
 * The check walks each database once with a cursor, in key order, into an in-memory table of
 * inodes (a sorted array: LMDB hands inodes out in number order, so lookups are binary searches)
 * and only reads while a cursor is open. What a walk finds wrong is queued, and repaired and
 * reported after the cursor closed, each repair in a child transaction of the caller's: a repair
 * that fails leaves no trace and the problem is reported as not repaired.
 *
 * Which record is right when two disagree:
 *   - `dentries` (lookup) is the authority on names; a `dircookies` record (readdir's index)
 *     that no entry points back to is deleted, and an entry whose readdir record is missing or
 *     wrong gets it rewritten (at its own cookie, or at a new one when another name holds it).
 *   - link counts follow the entries: nlink = entries naming a file, 2 + subdirectories for a
 *     directory, nentries = its entries; a directory's ".." follows the entry that names it.
 *   - a directory named twice keeps the entry in its ".." directory (else the first found).
 *   - an inode no entry names: with nlink 0 it is an unlinked file (it must be in the orphan
 *     list, which the MDS releases at start); else it, or a directory cut off in a cycle, is
 *     linked into /lost+found as "#<ino>", as e2fsck does. Nothing is ever deleted that holds
 *     data: only records that point at nothing.
 *   - a file's size only grows: to the end of the data its objects hold (a writer that died
 *     before it reported), with the objects' blocks and newest mtime.
 *
 * Passes, in order (each relies on the repairs of the ones before it):
 *   1 inodes -> the table; next_ino     4 evaluation: link counts, directories, orphan list,
 *   2 the orphan list                      symlinks, records of inodes that do not exist,
 *   3 dircookies, then dentries            cycles, reconnection into /lost+found
 *     (symlink targets, directory defaults, xattrs, Data-on-MDT bytes)
 *   5 layouts and their objects, the destroy queue, next object ids (mdt_fsck_layouts)
 *
 * Where each part lives (fsck_impl.h: what they share):
 *   fsck.c             this: the check's life, the passes' order, the inode table, the walk
 *   fsck_report.c      reporting a problem (with its path), repairs in child transactions
 *                      (REPAIR), the record repairs several passes make
 *   fsck_inodes.c      passes 1 and 2: inodes, next_ino, the orphan list
 *   fsck_entries.c     pass 3: dircookies, then dentries; directories named twice
 *   fsck_records.c     then the records of an inode: symlink targets, directory defaults,
 *                      xattrs, Data-on-MDT bytes (stray ones, a symlink's size, checksums)
 *   fsck_counts.c      pass 4: link and entry counts, "..", the orphan list, cycles
 *   fsck_lost_found.c  pass 4's reconnection into /lost+found
 *   fsck_layouts.c     pass 5: the OST table, layouts (malformed, stray, missing), the destroy
 *                      queue
 *   fsck_objects.c     pass 5's objects: a file's objects on their OSTs (tags, missing, size),
 *                      the object set (shared, queued, next object ids), mdt_fsck_object
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const kind_names[MDT_FSCK_NKINDS] = {
	[MDT_FSCK_RECORD] = "damaged record",
	[MDT_FSCK_COUNTER] = "counter behind",
	[MDT_FSCK_STRAY] = "stray record",
	[MDT_FSCK_DANGLING] = "dangling entry",
	[MDT_FSCK_BAD_ENTRY] = "bad entry",
	[MDT_FSCK_ENTRY_INDEX] = "entry index",
	[MDT_FSCK_DIR_ENTRY] = "extra directory entry",
	[MDT_FSCK_DIR_PARENT] = "wrong parent",
	[MDT_FSCK_NLINK] = "bad link count",
	[MDT_FSCK_NENTRIES] = "bad entry count",
	[MDT_FSCK_DISCONNECTED] = "disconnected inode",
	[MDT_FSCK_ORPHAN_LIST] = "orphan list",
	[MDT_FSCK_SYMLINK] = "bad symlink",
	[MDT_FSCK_LAYOUT] = "bad layout",
	[MDT_FSCK_SHARED_OBJECT] = "shared object",
	[MDT_FSCK_QUEUED_OBJECT] = "object queued for destruction",
	[MDT_FSCK_MISSING_OBJECT] = "missing object",
	[MDT_FSCK_SIZE] = "wrong size",
	[MDT_FSCK_OBJECT_TAG] = "wrong object tag",
	[MDT_FSCK_ORPHAN_OBJECT] = "orphan object",
	[MDT_FSCK_OST] = "damaged OST",
	[MDT_FSCK_LOST_OBJECT] = "lost object",
};

const char *mdt_fsck_kind_name(enum mdt_fsck_kind kind)
{
	return (unsigned)kind < MDT_FSCK_NKINDS ? kind_names[kind] : "problem";
}

/* ---- small helpers ---- */

int fsck_grow(void **v, size_t *cap, size_t want, size_t size)
{
	size_t ncap = *cap ? *cap : 64;
	void *nv;

	if (want <= *cap)
		return 0;
	while (ncap < want)
		ncap *= 2;
	nv = realloc(*v, ncap * size);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

int fsck_acts_push(struct acts *q, const struct act *a)
{
	int rc = fsck_grow((void **)&q->v, &q->cap, q->n + 1, sizeof(*q->v));

	if (rc == 0)
		q->v[q->n++] = *a;
	return rc;
}

void fsck_acts_free(struct acts *q)
{
	free(q->v);
	memset(q, 0, sizeof(*q));
}

struct fino *fsck_find(const struct mdt_fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->nino;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->ino[mid].ino == ino)
			return &f->ino[mid];
		if (f->ino[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct fino *fsck_find_dir(const struct mdt_fsck *f, uint64_t ino)
{
	struct fino *fi = fsck_find(f, ino);

	return fi && S_ISDIR(fi->mode) ? fi : NULL;
}

const char *fsck_type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	default: return "unknown type";
	}
}

/* A name for reports: printable characters as they are, others as \xNN, at most 64 bytes. */
const char *fsck_show_name(const char *name, size_t len, char *buf, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 5 < cap && i < 64; i++) {
		unsigned char c = (unsigned char)name[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			buf[o++] = (char)c;
		else
			o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
	}
	buf[o] = '\0';
	return buf;
}

/* Calls fn for every record of db in key order. fn only reads (it queues its repairs). */
int fsck_walk(struct mdt_fsck *f, enum mdt_db db,
	      int (*fn)(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg), void *arg)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc, mrc;

	rc = mdt_errno(mdb_cursor_open(f->t->mdb, f->t->s->dbi[db], &cur));
	if (rc)
		return rc;
	for (mrc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); mrc == MDB_SUCCESS;
	     mrc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		rc = fn(f, &k, &v, arg);
		if (rc)
			break;
	}
	mdb_cursor_close(cur);
	if (rc)
		return rc;
	return mrc == MDB_NOTFOUND ? 0 : mdt_errno(mrc);
}

/* ---- the namespace: passes 1 to 4, in order ---- */

int mdt_fsck_namespace(struct mdt_fsck *f)
{
	int rc;

	rc = fsck_pass_inodes(f);
	if (rc == 0)
		rc = fsck_pass_orphans(f);
	if (rc == 0)
		rc = fsck_pass_entries(f);
	if (rc == 0)
		rc = fsck_pass_records(f);
	if (rc == 0)
		rc = fsck_pass_counts(f);
	return rc;
}

/* ---- the check itself ---- */

int mdt_fsck_new(struct mdt_txn *t, bool repair, const struct mdt_fsck_ops *ops,
		 struct mdt_fsck **out)
{
	struct mdt_fsck *f;

	if (repair && !t->write)
		return -EINVAL;
	if (!ops->obj_stat || (repair && !ops->obj_fix))
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->top = f->t = t;
	f->repair = repair;
	f->ops = *ops;
	f->now = clock_real();
	*out = f;
	return 0;
}

void mdt_fsck_free(struct mdt_fsck *f)
{
	if (!f)
		return;
	free(f->ino);
	free(f->obj);
	free(f->osts);
	free(f);
}

void mdt_fsck_count(struct mdt_fsck *f, bool repaired)
{
	f->st.problems++;
	f->st.repaired += repaired;
}

const struct mdt_fsck_stats *mdt_fsck_stats(const struct mdt_fsck *f)
{
	return &f->st;
}
