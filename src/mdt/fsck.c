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
 */
#include "mdt/fsck.h"
#include "mdt/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/crc.h"
#include "common/stripe.h"
#include "common/util.h"

#define NOFIX 1               /* not repaired (report only, or nothing fsck can do) */
#define PATH_DEPTH_MAX 4096   /* a longer chain of parents is a loop the path walk gives up on */
#define LOST_FOUND "lost+found"

/* One inode of the table. */
struct fino {
	uint64_t ino;
	uint64_t parent;    /* dirs: the stored "..", then the directory of the accepted entry;
	                     * others: the directory of the first entry found (0 if none) */
	uint64_t cookie;    /* that entry's cookie: its readdir record holds the name */
	uint64_t entries;   /* dirs: entries counted in it */
	uint64_t maxcookie; /* dirs: the highest cookie its entries use */
	uint32_t mode;
	uint32_t nlink;     /* as stored */
	uint32_t links;     /* entries naming it (a directory: its accepted one) */
	uint32_t subdirs;   /* dirs: accepted subdirectory entries */
	uint32_t flags;     /* FI_* */
};

#define FI_ORPHAN 0x1u /* in the orphan list */
#define FI_LAYOUT 0x2u /* has a layout */
#define FI_TARGET 0x4u /* symlinks: has its target */
#define FI_REACH  0x8u /* dirs: reachable from the root (or about to be, through lost+found) */
#define FI_VISIT  0x10u

/* An object the MDT knows: stripe of a layout, or STRIPE_QUEUED (waiting for destruction, or
 * of a stray layout about to be queued). */
struct objref {
	uint32_t ost;
	uint32_t stripe;
	uint64_t objid;
	uint64_t ino;
};
#define STRIPE_QUEUED UINT32_MAX

struct ostnext {
	uint32_t idx;
	uint64_t next;
};

/* A repair queued while a cursor was open. */
struct act {
	uint32_t op;
	uint32_t klen;
	uint8_t key[MDT_KEY_MAX];
	uint64_t a, b, c;
	struct mdt_dentry de;
	struct timespec ts;
};

struct acts {
	struct act *v;
	size_t n, cap;
};

struct mdt_fsck {
	struct mdt_txn *top;   /* the caller's transaction */
	struct mdt_txn *t;     /* where operations go: top, or the child of the repair running */
	bool repair;
	struct mdt_fsck_ops ops;
	struct mdt_fsck_stats st;
	struct timespec now;

	struct fino *ino;
	size_t nino, capino;
	uint64_t maxino;
	bool have_root;

	struct objref *obj;
	size_t nobj, capobj;
	struct ostnext *osts;
	size_t nosts;

	uint64_t lost_found;   /* /lost+found once found or made */
	char what[1024];
	char fix[320];
	char path[8192];
};

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
};

const char *mdt_fsck_kind_name(enum mdt_fsck_kind kind)
{
	return (unsigned)kind < MDT_FSCK_NKINDS ? kind_names[kind] : "problem";
}

/* ---- small helpers ---- */

static int grow(void **v, size_t *cap, size_t want, size_t size)
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

static int acts_push(struct acts *q, const struct act *a)
{
	int rc = grow((void **)&q->v, &q->cap, q->n + 1, sizeof(*q->v));

	if (rc == 0)
		q->v[q->n++] = *a;
	return rc;
}

static void acts_free(struct acts *q)
{
	free(q->v);
	memset(q, 0, sizeof(*q));
}

static struct fino *find(const struct mdt_fsck *f, uint64_t ino)
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

static struct fino *find_dir(const struct mdt_fsck *f, uint64_t ino)
{
	struct fino *fi = find(f, ino);

	return fi && S_ISDIR(fi->mode) ? fi : NULL;
}

static const char *type_name(uint32_t mode)
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

static bool type_ok(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFLNK: case S_IFIFO: case S_IFSOCK: case S_IFCHR:
	case S_IFBLK:
		return true;
	default:
		return false;
	}
}

/* A name for reports: printable characters as they are, others as \xNN, at most 64 bytes. */
static const char *show_name(const char *name, size_t len, char *buf, size_t cap)
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

static void key_name(const struct act *a, const char **name, size_t *len)
{
	*name = (const char *)a->key + 8;
	*len = a->klen - 8;
}

/* Calls fn for every record of db in key order. fn only reads (it queues its repairs). */
static int walk(struct mdt_fsck *f, enum mdt_db db,
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

/* ---- reporting and repairing ---- */

/* The name of dir's entry with this cookie, from its readdir record. */
static bool cookie_name(struct mdt_fsck *f, uint64_t dir, uint64_t cookie, const char **name,
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
		struct fino *fi = find(f, ino);
		const char *name;
		size_t len;

		if (!fi || fi->links == 0 || fi->parent == 0 || depth > PATH_DEPTH_MAX)
			return NULL;
		if (!cookie_name(f, fi->parent, fi->cookie, &name, &len) ||
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
static int report(struct mdt_fsck *f, enum mdt_fsck_kind kind, uint64_t ino, int fixrc,
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

static int fix_begin(struct mdt_fsck *f)
{
	return mdt_txn_child(f->top, &f->t);
}

static int fix_end(struct mdt_fsck *f, int rc)
{
	struct mdt_txn *child = f->t;

	f->t = f->top;
	if (rc == 0)
		return mdt_txn_commit(child);
	mdt_txn_abort(child);
	return rc;
}

/* Runs a repair (an expression giving 0 or an error, using f->t) in a child transaction when
 * repairing; rc becomes its result, or NOFIX when not repairing. */
#define REPAIR(f, rc, expr)                                    \
	do {                                                   \
		(rc) = NOFIX;                                  \
		if ((f)->repair) {                             \
			(rc) = fix_begin(f);                   \
			if ((rc) == 0)                         \
				(rc) = fix_end((f), (expr));   \
		}                                              \
	} while (0)

/* ---- repairs on records ---- */

static int del_key(struct mdt_fsck *f, enum mdt_db db, const void *key, size_t klen)
{
	int rc = mdt_del(f->t, db, key, klen);

	return rc == -ENOENT ? 0 : rc;
}

static int del_ino_key(struct mdt_fsck *f, enum mdt_db db, uint64_t ino)
{
	uint8_t key[8];

	mdt_put_be64(key, ino);
	return del_key(f, db, key, sizeof(key));
}

/* Deletes an entry: its dentry, and its readdir record if that one names this entry. */
static int del_entry(struct mdt_fsck *f, uint64_t dir, const char *name, size_t len,
		     uint64_t cookie)
{
	uint8_t key[MDT_KEY_MAX];
	struct mdt_dentry de;
	const char *cname;
	size_t clen;
	int rc;

	/* A repair earlier in this run may have moved the entry to another cookie. */
	if (mdt_dentry_get(f->t, dir, name, len, &de) == 0)
		cookie = de.cookie;
	mdt_put_be64(key, dir);
	memcpy(key + 8, name, len);
	rc = del_key(f, MDT_DB_DENTRIES, key, 8 + len);
	if (rc == 0 && cookie_name(f, dir, cookie, &cname, &clen) && clen == len &&
	    memcmp(cname, name, len) == 0) {
		mdt_put_be64(key + 8, cookie);
		rc = del_key(f, MDT_DB_DIRCOOKIES, key, 16);
	}
	return rc;
}

enum inode_field { IF_NLINK, IF_NENTRIES, IF_PARENT, IF_NEXT_COOKIE, IF_INO, IF_SIZE };

static int set_inode(struct mdt_fsck *f, uint64_t ino, enum inode_field field, uint64_t val)
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

/* ---- pass 1: inodes, next_ino ---- */

enum { ACT_DEL, ACT_INO_FIELD, ACT_DEL_BOTH, ACT_RETYPE, ACT_REINDEX, ACT_RECOOKIE, ACT_DIR2,
       ACT_SIZE, ACT_STRAY_LAYOUT };

static int inode_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct mdt_inode in;
	struct fino *fi;
	uint64_t ino;
	int rc;

	bool ok = k->mv_size == 8 && v->mv_size == sizeof(in);

	if (ok) {
		memcpy(&in, v->mv_data, sizeof(in));
		ok = type_ok(in.mode);
	}
	if (!ok) {
		a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
		memcpy(a.key, k->mv_data, a.klen);
		a.a = v->mv_size;
		return acts_push(q, &a);
	}
	ino = mdt_get_be64(k->mv_data);
	if (in.ino != ino) {
		a.op = ACT_INO_FIELD;
		a.a = ino;
		a.b = in.ino;
		rc = acts_push(q, &a);
		if (rc)
			return rc;
	}
	rc = grow((void **)&f->ino, &f->capino, f->nino + 1, sizeof(*f->ino));
	if (rc)
		return rc;
	fi = &f->ino[f->nino++];
	memset(fi, 0, sizeof(*fi));
	fi->ino = ino;
	fi->mode = in.mode;
	fi->nlink = in.nlink;
	if (S_ISDIR(in.mode))
		fi->parent = in.parent;
	f->maxino = MAX(f->maxino, ino);
	f->st.inodes++;
	f->st.dirs += S_ISDIR(in.mode);
	f->st.files += S_ISREG(in.mode);
	return 0;
}

static int pass_inodes(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	uint64_t next = 0;
	MDB_val v;
	int rc, frc;

	rc = walk(f, MDT_DB_INODES, inode_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		struct act *a = &q.v[i];
		if (a->op == ACT_DEL) {
			REPAIR(f, frc, del_key(f, MDT_DB_INODES, a->key, a->klen));
			rc = report(f, MDT_FSCK_RECORD, a->klen == 8 ? mdt_get_be64(a->key) : 0, frc,
				    "deleted (names pointing at it are removed as dangling)",
				    "inode record of %llu bytes (key %u bytes) or of no known type",
				    (unsigned long long)a->a, a->klen);
		} else {
			REPAIR(f, frc, set_inode(f, a->a, IF_INO, a->a));
			rc = report(f, MDT_FSCK_RECORD, a->a, frc, "set", "inode record says ino %llu",
				    (unsigned long long)a->b);
		}
	}
	acts_free(&q);
	if (rc)
		return rc;

	f->have_root = find_dir(f, LOOM_ROOT_INO) != NULL;
	if (!f->have_root) {
		report(f, MDT_FSCK_RECORD, LOOM_ROOT_INO, NOFIX, NULL,
		       "the root directory is missing or not a directory: fsck cannot go on");
		return -EIO;
	}

	/* Inode numbers are never reused: the counter must be above every inode. */
	rc = mdt_get(f->t, MDT_DB_META, "next_ino", 8, &v);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0 && v.mv_size == sizeof(next))
		memcpy(&next, v.mv_data, sizeof(next));
	if (next <= f->maxino) {
		uint64_t want = f->maxino + 1;
		snprintf(f->fix, sizeof(f->fix), "next_ino %llu", (unsigned long long)want);
		REPAIR(f, frc, mdt_put(f->t, MDT_DB_META, "next_ino", 8, &want, sizeof(want)));
		rc = report(f, MDT_FSCK_COUNTER, 0, frc, f->fix,
			    "next inode number %llu is not above inode %llu in use: a new file would "
			    "overwrite it", (unsigned long long)next, (unsigned long long)f->maxino);
	}
	return rc;
}

/* ---- pass 2: the orphan list ---- */

static int orphan_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? find(f, mdt_get_be64(k->mv_data)) : NULL;

	(void)v;
	if (fi) {
		fi->flags |= FI_ORPHAN;
		return 0;
	}
	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	return acts_push(q, &a);
}

static int pass_orphans(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	int rc, frc;

	rc = walk(f, MDT_DB_ORPHANS, orphan_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		REPAIR(f, frc, del_key(f, MDT_DB_ORPHANS, q.v[i].key, q.v[i].klen));
		rc = report(f, MDT_FSCK_STRAY, 0, frc, "deleted",
			    "the orphan list names inode %llu, which does not exist",
			    q.v[i].klen == 8 ? (unsigned long long)mdt_get_be64(q.v[i].key) : 0ull);
	}
	acts_free(&q);
	return rc;
}

/* ---- pass 3: entries (dircookies, then dentries) ---- */

static int cookie_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct mdt_dirent_rec rec;
	struct mdt_dentry de;
	struct fino *dir;
	uint64_t cookie;
	int rc;

	bool ok = k->mv_size == 16 && v->mv_size >= sizeof(rec);

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (ok) {
		memcpy(&rec, v->mv_data, sizeof(rec));
		ok = rec.namelen != 0 && v->mv_size == sizeof(rec) + rec.namelen;
	}
	if (!ok) {
		a.a = 1; /* malformed */
		return acts_push(q, &a);
	}
	cookie = mdt_get_be64((const uint8_t *)k->mv_data + 8);
	dir = find_dir(f, mdt_get_be64(k->mv_data));
	rc = mdt_dentry_get(f->t, mdt_get_be64(k->mv_data), (const char *)v->mv_data + sizeof(rec),
			    rec.namelen, &de);
	if (rc && rc != -ENOENT && rc != -EINVAL && rc != -EIO)
		return rc;
	if (!dir || cookie < MDT_COOKIE_FIRST || rc || de.cookie != cookie) {
		/* No entry points back at it: readdir would list a name lookup cannot find. */
		memcpy(a.key + 16, (const char *)v->mv_data + sizeof(rec), MIN(rec.namelen, 200u));
		a.b = MIN(rec.namelen, 200u);
		a.c = dir ? 0 : 1;
		return acts_push(q, &a);
	}
	dir->maxcookie = MAX(dir->maxcookie, cookie);
	return 0;
}

static int pass_cookies(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	char nb[300];
	int rc, frc;

	rc = walk(f, MDT_DB_DIRCOOKIES, cookie_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		struct act *a = &q.v[i];
		uint64_t dir = a->klen >= 8 ? mdt_get_be64(a->key) : 0;

		REPAIR(f, frc, del_key(f, MDT_DB_DIRCOOKIES, a->key, a->klen));
		if (a->a)
			rc = report(f, MDT_FSCK_RECORD, dir, frc, "deleted",
				    "malformed readdir record");
		else
			rc = report(f, a->c ? MDT_FSCK_STRAY : MDT_FSCK_ENTRY_INDEX, a->c ? 0 : dir,
				    frc, "deleted",
				    "readdir record '%s' (cookie %llu) of %s %llu has no entry "
				    "pointing back at it: readdir lists a name lookup cannot find",
				    show_name((const char *)a->key + 16, a->b, nb, sizeof(nb)),
				    (unsigned long long)mdt_get_be64(a->key + 8),
				    a->c ? "missing directory" : "directory",
				    (unsigned long long)dir);
	}
	acts_free(&q);
	return rc;
}

/* Counts an entry (dir, name) -> child that stays. Directories named elsewhere than their ".."
 * are decided after the walk (ACT_DIR2). */
static int count_entry(struct mdt_fsck *f, struct acts *q, const struct act *a, struct fino *dir,
		       struct fino *child)
{
	struct act d = *a;

	if (!S_ISDIR(child->mode)) {
		dir->entries++;
		if (child->links++ == 0) {
			child->parent = dir->ino;
			child->cookie = a->de.cookie;
		}
		return 0;
	}
	if (child->links == 0 && child->parent == dir->ino && child->ino != LOOM_ROOT_INO) {
		dir->entries++;
		dir->subdirs++;
		child->links = 1;
		child->cookie = a->de.cookie;
		return 0;
	}
	d.op = ACT_DIR2;
	return acts_push(q, &d);
}

static int dentry_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct mdt_dirent_rec rec;
	struct fino *dir, *child;
	const char *name = (const char *)k->mv_data + 8;
	size_t len = k->mv_size - 8;
	uint8_t ckey[16];
	uint32_t type;
	MDB_val cv;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (k->mv_size < 9 || k->mv_size > 8 + LOOM_NAME_MAX || v->mv_size != sizeof(a.de)) {
		a.a = 1; /* malformed: delete the dentry alone */
		return acts_push(q, &a);
	}
	memcpy(&a.de, v->mv_data, sizeof(a.de));
	dir = find(f, mdt_get_be64(k->mv_data));
	child = find(f, a.de.ino);
	if (lw_name_check(name, len) != 0 || mdt_name_is_dots(name, len)) {
		a.op = ACT_DEL_BOTH;
		a.a = 2; /* invalid name */
		return acts_push(q, &a);
	}
	if (!dir || !S_ISDIR(dir->mode) || !child) {
		a.op = ACT_DEL_BOTH;
		a.a = !dir ? 3 : !S_ISDIR(dir->mode) ? 4 : 5;
		return acts_push(q, &a);
	}
	if (child->ino == LOOM_ROOT_INO) {
		a.op = ACT_DEL_BOTH;
		a.a = 6; /* names the root */
		return acts_push(q, &a);
	}
	f->st.entries++;
	type = mdt_dt_type(child->mode);

	/* Its readdir record: same cookie, name, inode and type. */
	mdt_put_be64(ckey, dir->ino);
	mdt_put_be64(ckey + 8, a.de.cookie);
	rc = mdt_get(f->t, MDT_DB_DIRCOOKIES, ckey, sizeof(ckey), &cv);
	if (rc && rc != -ENOENT)
		return rc;
	a.b = child->mode;
	if (a.de.cookie < MDT_COOKIE_FIRST) {
		a.op = ACT_RECOOKIE;
	} else if (rc == -ENOENT || cv.mv_size < sizeof(rec)) {
		a.op = ACT_REINDEX;
		a.a = 1; /* missing */
	} else {
		memcpy(&rec, cv.mv_data, sizeof(rec));
		if (cv.mv_size != sizeof(rec) + rec.namelen || rec.namelen != len ||
		    memcmp((const char *)cv.mv_data + sizeof(rec), name, len) != 0) {
			a.op = ACT_RECOOKIE; /* the cookie belongs to another name */
		} else if (rec.ino != a.de.ino || rec.type != a.de.type || a.de.type != type) {
			a.op = a.de.type != type ? ACT_RETYPE : ACT_REINDEX;
			a.a = 2; /* disagrees */
			a.c = a.de.type;
		}
	}
	if (a.op != ACT_DEL) {
		rc = acts_push(q, &a);
		if (rc)
			return rc;
	}
	if (a.op != ACT_RECOOKIE)
		dir->maxcookie = MAX(dir->maxcookie, a.de.cookie);
	return count_entry(f, q, &a, dir, child);
}

/* Gives an entry a new cookie (its old one is taken by another name): writes its dentry and
 * readdir record anew at the directory's next cookie. */
static int recookie(struct mdt_fsck *f, uint64_t dirino, const char *name, size_t len,
		    uint64_t ino, uint32_t mode, uint64_t maxcookie, uint64_t *cookie)
{
	struct mdt_inode dir;
	int rc;

	rc = mdt_inode_get(f->t, dirino, &dir);
	if (rc)
		return rc;
	if (dir.next_cookie <= maxcookie)
		dir.next_cookie = maxcookie + 1; /* pass 4 reports the counter itself */
	if (dir.next_cookie < MDT_COOKIE_FIRST)
		dir.next_cookie = MDT_COOKIE_FIRST;
	*cookie = dir.next_cookie;
	rc = mdt_dentry_add(f->t, &dir, name, len, ino, mode);
	if (rc)
		return rc;
	dir.nentries--; /* the entry was there already: only its cookie changed */
	return mdt_inode_put(f->t, &dir);
}

static int fix_entries(struct mdt_fsck *f, struct acts *q)
{
	static const char *const why[] = {
		[1] = "malformed entry record", [2] = "entry with an invalid name",
		[3] = "entry in a directory that does not exist",
		[4] = "entry in an inode that is not a directory",
		[5] = "entry naming inode %llu, which does not exist",
		[6] = "entry naming the root directory",
	};
	char nb[300], msg[160];
	int rc = 0, frc;

	for (size_t i = 0; rc == 0 && i < q->n; i++) {
		struct act *a = &q->v[i];
		uint64_t dirino = mdt_get_be64(a->key);
		struct fino *dir = find(f, dirino), *child;
		const char *name;
		size_t len;
		uint64_t cookie = 0;

		key_name(a, &name, &len);
		show_name(name, len, nb, sizeof(nb));
		switch (a->op) {
		case ACT_DEL:
			REPAIR(f, frc, del_key(f, MDT_DB_DENTRIES, a->key, a->klen));
			rc = report(f, MDT_FSCK_RECORD, dir ? dirino : 0, frc, "deleted",
				    "%s in directory %llu", why[1], (unsigned long long)dirino);
			break;
		case ACT_DEL_BOTH:
			snprintf(msg, sizeof(msg), why[a->a], (unsigned long long)a->de.ino);
			REPAIR(f, frc, del_entry(f, dirino, name, len, a->de.cookie));
			rc = report(f, a->a == 6 ? MDT_FSCK_DIR_ENTRY
				       : a->a == 2 ? MDT_FSCK_BAD_ENTRY : MDT_FSCK_DANGLING,
				    dir && S_ISDIR(dir->mode) ? dirino : 0, frc, "entry deleted",
				    "'%s' (directory %llu): %s", nb, (unsigned long long)dirino, msg);
			break;
		case ACT_RETYPE:
		case ACT_REINDEX:
			REPAIR(f, frc, mdt_dentry_retarget(f->t, dirino, name, len, &a->de, a->de.ino,
							   (uint32_t)a->b));
			if (a->op == ACT_RETYPE)
				rc = report(f, MDT_FSCK_BAD_ENTRY, a->de.ino, frc, "type set",
					    "entry '%s' says type %u, the inode is a %s", nb,
					    (unsigned)a->c, type_name((uint32_t)a->b));
			else
				rc = report(f, MDT_FSCK_ENTRY_INDEX, a->de.ino, frc,
					    "readdir record rewritten",
					    "entry '%s': its readdir record (cookie %llu) is %s", nb,
					    (unsigned long long)a->de.cookie,
					    a->a == 1 ? "missing: readdir does not list it"
						      : "unlike it");
			break;
		case ACT_RECOOKIE:
			REPAIR(f, frc, recookie(f, dirino, name, len, a->de.ino, (uint32_t)a->b,
						dir ? dir->maxcookie : 0, &cookie));
			if (frc == 0 && dir) {
				dir->maxcookie = MAX(dir->maxcookie, cookie);
				child = find(f, a->de.ino);
				if (child && child->parent == dirino && child->cookie == a->de.cookie)
					child->cookie = cookie;
			}
			snprintf(f->fix, sizeof(f->fix), "moved to cookie %llu",
				 (unsigned long long)cookie);
			rc = report(f, MDT_FSCK_ENTRY_INDEX, a->de.ino, frc, f->fix,
				    "entry '%s': its cookie %llu is %s: readdir does not list it", nb,
				    (unsigned long long)a->de.cookie,
				    a->de.cookie < MDT_COOKIE_FIRST ? "reserved for \".\" and \"..\""
								    : "another name's");
			break;
		}
	}
	return rc;
}

/* Directories named by an entry outside their "..": the first becomes their entry (".." follows
 * it), any other is deleted. */
static int fix_dir_entries(struct mdt_fsck *f, struct acts *q)
{
	char nb[300];
	int rc = 0, frc;

	for (size_t i = 0; rc == 0 && i < q->n; i++) {
		struct act *a = &q->v[i];
		uint64_t dirino = mdt_get_be64(a->key);
		struct fino *dir = find(f, dirino), *child = find(f, a->de.ino);
		const char *name;
		size_t len;

		if (a->op != ACT_DIR2 || !dir || !child)
			continue;
		key_name(a, &name, &len);
		show_name(name, len, nb, sizeof(nb));
		if (child->links == 0) {
			uint64_t old = child->parent;
			REPAIR(f, frc, set_inode(f, child->ino, IF_PARENT, dirino));
			child->parent = dirino;
			child->cookie = a->de.cookie;
			child->links = 1;
			dir->subdirs++;
			dir->entries++;
			snprintf(f->fix, sizeof(f->fix), "\"..\" set to %llu",
				 (unsigned long long)dirino);
			rc = report(f, MDT_FSCK_DIR_PARENT, child->ino, frc, f->fix,
				    "\"..\" is %llu but the directory's entry '%s' is in %llu",
				    (unsigned long long)old, nb, (unsigned long long)dirino);
		} else {
			REPAIR(f, frc, del_entry(f, dirino, name, len, a->de.cookie));
			rc = report(f, MDT_FSCK_DIR_ENTRY, child->ino, frc, "entry deleted",
				    "a second entry '%s' in directory %llu names this directory "
				    "(a directory has one name)", nb, (unsigned long long)dirino);
		}
	}
	return rc;
}

static int pass_entries(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	int rc;

	rc = pass_cookies(f);
	if (rc == 0)
		rc = walk(f, MDT_DB_DENTRIES, dentry_rec, &q);
	if (rc == 0)
		rc = fix_entries(f, &q);
	if (rc == 0)
		rc = fix_dir_entries(f, &q);
	acts_free(&q);
	return rc;
}

/* ---- pass 4: link counts, directories, the orphan list, symlinks, stray records ---- */

static int symlink_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? find(f, mdt_get_be64(k->mv_data)) : NULL;
	struct mdt_inode in;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (!fi || !S_ISLNK(fi->mode))
		return acts_push(q, &a);
	fi->flags |= FI_TARGET;
	rc = mdt_inode_get(f->t, fi->ino, &in);
	if (rc)
		return rc;
	if (in.size != v->mv_size) {
		a.op = ACT_SIZE;
		a.a = fi->ino;
		a.b = in.size;
		a.c = v->mv_size;
		return acts_push(q, &a);
	}
	return 0;
}

static int dirdefault_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? find(f, mdt_get_be64(k->mv_data)) : NULL;
	struct loom_layout *l = NULL;
	struct lw_rd r;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (!fi || !S_ISDIR(fi->mode))
		return acts_push(q, &a);
	lw_rd_init(&r, v->mv_data, v->mv_size);
	rc = lw_layout_decode(&r, &l);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && (lw_rd_done(&r) != 0 || l->nobjs != 0))
		rc = -EPROTO;
	free(l);
	if (rc) {
		a.a = 1; /* does not decode */
		return acts_push(q, &a);
	}
	return 0;
}

/* Data-on-MDT bytes: of a regular file, and matching their checksum. */
static int dom_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct fino *fi = k->mv_size == 8 ? find(f, mdt_get_be64(k->mv_data)) : NULL;
	uint32_t crc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (!fi || !S_ISREG(fi->mode))
		return acts_push(q, &a);
	if (v->mv_size < sizeof(crc))
		return acts_push(q, &a); /* not even a checksum: nothing to keep */
	memcpy(&crc, v->mv_data, sizeof(crc));
	if (crc32c(0, (const uint8_t *)v->mv_data + sizeof(crc), v->mv_size - sizeof(crc)) != crc) {
		a.a = 2; /* the bytes are the file's, damaged: reported, kept (they read as EIO) */
		return acts_push(q, &a);
	}
	return 0;
}

static int xattr_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	uint64_t ino = k->mv_size > 8 ? mdt_get_be64(k->mv_data) : 0;

	(void)v;
	if (ino && find(f, ino))
		return 0;
	/* One report per inode: its xattrs are one range of keys. */
	if (q->n && q->v[q->n - 1].a == ino && ino)
		return 0;
	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	a.a = ino;
	return acts_push(q, &a);
}

static int pass_records(struct mdt_fsck *f)
{
	static const struct {
		enum mdt_db db;
		int (*fn)(struct mdt_fsck *, const MDB_val *, const MDB_val *, void *);
		const char *what;
	} dbs[] = {
		{ MDT_DB_SYMLINKS, symlink_rec, "symlink target" },
		{ MDT_DB_DIRDEFAULTS, dirdefault_rec, "default layout" },
		{ MDT_DB_XATTRS, xattr_rec, "extended attributes" },
		{ MDT_DB_DOM, dom_rec, "Data-on-MDT bytes" },
	};
	int rc = 0, frc;

	for (size_t d = 0; rc == 0 && d < ARRAY_SIZE(dbs); d++) {
		struct acts q = { 0 };

		rc = walk(f, dbs[d].db, dbs[d].fn, &q);
		for (size_t i = 0; rc == 0 && i < q.n; i++) {
			struct act *a = &q.v[i];
			uint64_t ino = a->klen >= 8 ? mdt_get_be64(a->key) : 0;

			if (a->op == ACT_SIZE) {
				snprintf(f->fix, sizeof(f->fix), "size %llu", (unsigned long long)a->c);
				REPAIR(f, frc, set_inode(f, a->a, IF_SIZE, a->c));
				rc = report(f, MDT_FSCK_SYMLINK, a->a, frc, f->fix,
					    "size %llu, its target is %llu bytes",
					    (unsigned long long)a->b, (unsigned long long)a->c);
			} else if (dbs[d].db == MDT_DB_XATTRS) {
				/* Every xattr of the inode; a key too short to name one alone. */
				if (a->klen > 8)
					REPAIR(f, frc, mdt_del_prefix(f->t, MDT_DB_XATTRS, a->key, 8));
				else
					REPAIR(f, frc, del_key(f, MDT_DB_XATTRS, a->key, a->klen));
				rc = report(f, MDT_FSCK_STRAY, 0, frc, "deleted",
					    "extended attributes of inode %llu, which does not exist",
					    (unsigned long long)a->a);
			} else if (a->a == 2) {
				rc = report(f, MDT_FSCK_RECORD, ino, NOFIX, "",
					    "its Data-on-MDT bytes do not match their checksum: reads of "
					    "them fail with EIO until the file is rewritten");
			} else if (a->a == 1) {
				REPAIR(f, frc, del_key(f, dbs[d].db, a->key, a->klen));
				rc = report(f, MDT_FSCK_RECORD, ino, frc,
					    "deleted (the file system default applies)",
					    "the directory's default layout does not decode");
			} else {
				struct fino *fi = a->klen == 8 ? find(f, ino) : NULL;
				REPAIR(f, frc, del_key(f, dbs[d].db, a->key, a->klen));
				rc = report(f, MDT_FSCK_STRAY, 0, frc, "deleted",
					    "%s of inode %llu, which %s", dbs[d].what,
					    (unsigned long long)ino,
					    fi ? (dbs[d].db == MDT_DB_SYMLINKS ? "is not a symlink" :
						  dbs[d].db == MDT_DB_DOM ? "is not a regular file"
									 : "is not a directory")
					       : "does not exist");
			}
		}
		acts_free(&q);
	}
	return rc;
}

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
		fi = find(f, de.ino);
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
	rc = grow((void **)&f->ino, &f->capino, f->nino + 1, sizeof(*f->ino));
	if (rc)
		return rc;
	rc = fix_begin(f);
	if (rc == 0)
		rc = fix_end(f, mdt_mkdir(f->t, &root, LOOM_ROOT_INO, LOST_FOUND, strlen(LOST_FOUND),
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
	fi = find(f, LOOM_ROOT_INO);
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

		if (!cookie_name(f, old_parent, old_cookie, &oname, &olen))
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
static int fix_disconnected(struct mdt_fsck *f, uint64_t ino, bool cycle)
{
	struct fino *fi = find(f, ino);
	uint64_t lf = 0, cookie = 0, old_parent = cycle ? fi->parent : 0, old_cookie = fi->cookie;
	uint32_t nlink = fi->nlink;
	int rc = NOFIX, frc;

	if (f->repair) {
		/* -ENOTDIR: /lost+found is not a directory; -EUCLEAN: next_ino is behind. */
		rc = lost_found(f, &lf);
		fi = find(f, ino); /* the table may have moved */
		if (rc == 0)
			REPAIR(f, rc, reconnect(f, lf, ino, old_parent, old_cookie, &cookie));
	}
	snprintf(f->fix, sizeof(f->fix), "linked as /lost+found/#%llu", (unsigned long long)ino);
	if (cycle)
		frc = report(f, MDT_FSCK_DISCONNECTED, 0, rc, f->fix,
			     "directory %llu is in a cycle of directories cut off from the root",
			     (unsigned long long)ino);
	else
		frc = report(f, MDT_FSCK_DISCONNECTED, 0, rc, f->fix,
			     "%s %llu (nlink %u) has no entry in any directory and is not in the "
			     "orphan list", type_name(fi->mode), (unsigned long long)ino, nlink);
	if (rc == 0) {
		struct fino *d = find(f, lf), *p = old_parent ? find(f, old_parent) : NULL;

		fi = find(f, ino);
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
		REPAIR(f, frc, set_inode(f, ino, IF_PARENT, LOOM_ROOT_INO));
		rc = report(f, MDT_FSCK_DIR_PARENT, ino, frc, "\"..\" set to the root itself",
			    "the root's \"..\" is %llu", (unsigned long long)in.parent);
		if (rc)
			return rc;
	}
	want = 2ull + fi->subdirs;
	if (in.nlink != want) {
		snprintf(f->fix, sizeof(f->fix), "nlink %llu", (unsigned long long)want);
		REPAIR(f, frc, set_inode(f, ino, IF_NLINK, want));
		rc = report(f, MDT_FSCK_NLINK, ino, frc, f->fix,
			    "directory nlink %u, should be 2 + %u subdirectories", in.nlink,
			    fi->subdirs);
		if (rc)
			return rc;
	}
	if (in.nentries != fi->entries) {
		snprintf(f->fix, sizeof(f->fix), "%llu", (unsigned long long)fi->entries);
		REPAIR(f, frc, set_inode(f, ino, IF_NENTRIES, fi->entries));
		rc = report(f, MDT_FSCK_NENTRIES, ino, frc, f->fix,
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
		REPAIR(f, frc, set_inode(f, ino, IF_NEXT_COOKIE, want));
		rc = report(f, MDT_FSCK_COUNTER, ino, frc, f->fix,
			    "directory's next cookie %llu is not above cookie %llu in use: a new "
			    "entry would hide an old one from readdir",
			    (unsigned long long)in.next_cookie, (unsigned long long)fi->maxcookie);
		if (rc)
			return rc;
	}
	if (fi->flags & FI_ORPHAN) {
		REPAIR(f, frc, del_ino_key(f, MDT_DB_ORPHANS, ino));
		rc = report(f, MDT_FSCK_ORPHAN_LIST, ino, frc, "removed from the list",
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
			REPAIR(f, frc, set_inode(f, ino, IF_NLINK, fi->links));
			rc = report(f, MDT_FSCK_NLINK, ino, frc, f->fix,
				    "%s nlink %u, %u %s it%s", type_name(fi->mode), fi->nlink,
				    fi->links, fi->links == 1 ? "entry names" : "entries name",
				    orphan && fi->nlink == 0 ? " (the MDS would free it at start)" : "");
			if (rc)
				return rc;
		}
		if (orphan) {
			REPAIR(f, frc, del_ino_key(f, MDT_DB_ORPHANS, ino));
			rc = report(f, MDT_FSCK_ORPHAN_LIST, ino, frc, "removed from the list",
				    "a %s with entries is in the orphan list", type_name(fi->mode));
		}
		return rc;
	}
	if (orphan && fi->nlink == 0)
		return 0; /* unlinked while open: the MDS releases it when it starts */
	if (orphan) {
		REPAIR(f, frc, set_inode(f, ino, IF_NLINK, 0));
		return report(f, MDT_FSCK_ORPHAN_LIST, ino, frc,
			      "nlink 0 (the MDS releases it at start)",
			      "%s %llu is in the orphan list with nlink %u but no entry",
			      type_name(fi->mode), (unsigned long long)ino, fi->nlink);
	}
	if (fi->nlink == 0) {
		REPAIR(f, frc, mdt_orphan_add(f->t, ino));
		return report(f, MDT_FSCK_ORPHAN_LIST, ino, frc,
			      "added (the MDS releases it and its objects at start)",
			      "unlinked %s %llu is not in the orphan list: it would never be freed",
			      type_name(fi->mode), (unsigned long long)ino);
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
			cur = find_dir(f, cur->parent); /* accepted entries are in directories */
			if (!cur)
				return -EIO;
		}
		if (!(cur->flags & FI_REACH)) {
			int rc = grow((void **)cyc, &cap, *ncyc + 1, sizeof(**cyc));
			if (rc)
				return rc;
			(*cyc)[(*ncyc)++] = cur->ino;
		}
		/* This walk's directories reach the root now (or will, through lost+found). */
		for (cur = d; cur && (cur->flags & FI_VISIT); cur = find_dir(f, cur->parent))
			cur->flags = (cur->flags & ~FI_VISIT) | FI_REACH;
	}
	return 0;
}

static int pass_counts(struct mdt_fsck *f)
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
				rc = report(f, MDT_FSCK_SYMLINK, fi->ino, NOFIX, NULL,
					    "symlink without a target (remove it and make it again)");
		}
		if (rc == 0 && lost) {
			rc = grow((void **)&disc, &capdisc, ndisc + 1, sizeof(*disc));
			if (rc == 0)
				disc[ndisc++] = fi->ino;
		}
	}
	if (rc == 0)
		rc = find_cycles(f, &cyc, &ncyc);
	for (size_t i = 0; rc == 0 && i < ndisc; i++)
		rc = fix_disconnected(f, disc[i], false);
	for (size_t i = 0; rc == 0 && i < ncyc; i++)
		rc = fix_disconnected(f, cyc[i], true);
	free(disc);
	free(cyc);
	return rc;
}

int mdt_fsck_namespace(struct mdt_fsck *f)
{
	int rc;

	rc = pass_inodes(f);
	if (rc == 0)
		rc = pass_orphans(f);
	if (rc == 0)
		rc = pass_entries(f);
	if (rc == 0)
		rc = pass_records(f);
	if (rc == 0)
		rc = pass_counts(f);
	return rc;
}

/* ---- pass 5: layouts and objects ---- */

static int objref_add(struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t ino,
		      uint32_t stripe)
{
	int rc = grow((void **)&f->obj, &f->capobj, f->nobj + 1, sizeof(*f->obj));

	if (rc == 0)
		f->obj[f->nobj++] = (struct objref){ .ost = ost, .stripe = stripe, .objid = objid,
						     .ino = ino };
	return rc;
}

static struct ostnext *ost_find(const struct mdt_fsck *f, uint32_t idx)
{
	for (size_t i = 0; i < f->nosts; i++)
		if (f->osts[i].idx == idx)
			return &f->osts[i];
	return NULL;
}

static int ost_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct mdt_ost_rec rec;
	size_t *cap = arg;
	int rc;

	if (k->mv_size != 4 || v->mv_size != sizeof(rec))
		return -EIO; /* the MDS would not open such an MDT either */
	memcpy(&rec, v->mv_data, sizeof(rec));
	rc = grow((void **)&f->osts, cap, f->nosts + 1, sizeof(*f->osts));
	if (rc == 0)
		f->osts[f->nosts++] = (struct ostnext){ .idx = mdt_get_be32(k->mv_data),
							.next = rec.next_objid };
	return rc;
}

/* Repairs an object through the caller. An OST's I/O error leaves that problem unrepaired; it
 * is no reason to stop checking the MDT (report() stops at -EIO, the MDT's damage). */
static int ost_fix(struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t ino,
		   uint32_t stripe)
{
	int rc;

	if (!f->repair)
		return NOFIX;
	rc = f->ops.obj_fix(f->ops.arg, ost, objid, ino, stripe);
	return rc == -EIO ? -EREMOTEIO : rc;
}

/* Checks a file's objects: tags, missing ones, and the size their data implies. Queues the
 * size repair (the cursor on layouts is open). */
static int check_objects(struct mdt_fsck *f, struct acts *q, uint64_t ino,
			 const struct mdt_inode *in, const struct loom_layout *l)
{
	/* A layout without a stripe size (corrupt: reported where layouts are checked) implies
	 * nothing from its objects' sizes. */
	const struct stripe_geom g = { .size = l->stripe_size, .count = l->nobjs };
	const bool geom = l->stripe_size && l->nobjs;
	struct mdt_fsck_obj *os;
	uint64_t end = 0, blocks = 0, size;
	struct timespec newest = { in->mtime, in->mtime_ns };
	bool any = false, *checked;
	int rc = 0, frc;

	os = calloc(l->nobjs, sizeof(*os) + sizeof(bool));
	if (!os)
		return -ENOMEM;
	checked = (bool *)(os + l->nobjs);
	for (uint32_t k = 0; k < l->nobjs; k++) {
		const struct loom_ostobj *o = &l->objs[k];

		rc = f->ops.obj_stat(f->ops.arg, o->ost_idx, o->objid, &os[k]);
		if (rc == -ENODEV) {
			f->st.unchecked++;
			rc = 0;
			continue;
		}
		if (rc)
			goto out;
		checked[k] = true;
		if (!os[k].exists)
			continue;
		f->st.objects++;
		any = true;
		if (geom)
			end = MAX(end, stripe_file_end(&g, k, os[k].size));
		blocks += os[k].blocks;
		if (os[k].mtime.tv_sec > newest.tv_sec ||
		    (os[k].mtime.tv_sec == newest.tv_sec && os[k].mtime.tv_nsec > newest.tv_nsec))
			newest = os[k].mtime;
		if (os[k].tagged && (os[k].tag_ino != ino || os[k].tag_stripe != k)) {
			frc = ost_fix(f, o->ost_idx, o->objid, ino, k);
			snprintf(f->fix, sizeof(f->fix), "tagged %llu:%u", (unsigned long long)ino, k);
			rc = report(f, MDT_FSCK_OBJECT_TAG, ino, frc, f->fix,
				    "stripe %u: OST %u object %#llx is tagged as %llu:%u", k,
				    o->ost_idx, (unsigned long long)o->objid,
				    (unsigned long long)os[k].tag_ino, os[k].tag_stripe);
			if (rc)
				goto out;
		}
	}
	size = MAX(in->size, MIN(end, MDT_MAX_FILE_SIZE));

	/* Objects are made by their first write, so an absent one is only a loss where the size
	 * says data was. A file none of whose objects exist, and which never reported a block
	 * (or reported none), is sparse: made by truncate, never written. */
	for (uint32_t k = 0; k < l->nobjs; k++) {
		const struct loom_ostobj *o = &l->objs[k];
		/* Bytes below the Data-on-MDT size live on the MDS: a hole on the objects. */
		uint64_t lost = !geom ? 0 :
				stripe_obj_size(&g, k, size) - stripe_obj_size(&g, k, MIN(size, l->dom_size));

		if (!checked[k] || os[k].exists || lost == 0)
			continue;
		if (!any && (!(in->flags & MDT_IF_BLOCKS) || in->blocks == 0))
			continue;
		frc = ost_fix(f, o->ost_idx, o->objid, ino, k);
		rc = report(f, MDT_FSCK_MISSING_OBJECT, ino, frc, "created empty",
			    "stripe %u: OST %u object %#llx does not exist; the file lost data: its "
			    "size puts %llu bytes there, which read as zeros (unless they were a hole)",
			    k, o->ost_idx, (unsigned long long)o->objid, (unsigned long long)lost);
		if (rc)
			goto out;
	}
	if (end > in->size) {
		struct act a = { .op = ACT_SIZE, .a = ino, .b = end, .c = blocks, .ts = newest };
		rc = acts_push(q, &a);
	}
out:
	free(os);
	return rc;
}

static int layout_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	struct loom_layout *l = NULL;
	struct mdt_inode in;
	struct fino *fi;
	struct lw_rd r;
	uint64_t ino;
	int rc;

	a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
	memcpy(a.key, k->mv_data, a.klen);
	if (k->mv_size != 8)
		return acts_push(q, &a);
	ino = mdt_get_be64(k->mv_data);
	a.a = ino;
	lw_rd_init(&r, v->mv_data, v->mv_size);
	rc = lw_layout_decode(&r, &l);
	if (rc == -ENOMEM)
		return rc;
	if (rc == 0 && lw_rd_done(&r) != 0)
		rc = -EPROTO;
	if (rc) {
		free(l);
		a.b = 1; /* does not decode */
		return acts_push(q, &a);
	}
	fi = find(f, ino);
	if (!fi || !S_ISREG(fi->mode)) {
		/* Its objects are about to be queued for destruction: not orphans. */
		for (uint32_t i = 0; rc == 0 && i < l->nobjs; i++)
			rc = objref_add(f, l->objs[i].ost_idx, l->objs[i].objid, ino, STRIPE_QUEUED);
		a.op = ACT_STRAY_LAYOUT;
		a.b = fi ? fi->mode : 0;
		if (rc == 0)
			rc = acts_push(q, &a);
		free(l);
		return rc;
	}
	fi->flags |= FI_LAYOUT;
	for (uint32_t i = 0; rc == 0 && i < l->nobjs; i++) {
		rc = objref_add(f, l->objs[i].ost_idx, l->objs[i].objid, ino, i);
		if (rc == 0 && !ost_find(f, l->objs[i].ost_idx))
			rc = report(f, MDT_FSCK_LAYOUT, ino, NOFIX, NULL,
				    "stripe %u is on OST %u, which the MDT does not know", i,
				    l->objs[i].ost_idx);
	}
	if (rc)
		goto out;
	if (l->nobjs == 0 || l->stripe_size == 0 || (uint32_t)l->stripe_count != l->nobjs ||
	    (l->flags & LOOM_LAYOUT_DEFAULT)) {
		rc = report(f, MDT_FSCK_LAYOUT, ino, NOFIX, NULL,
			    "malformed file layout (stripe size %u, count %d, %u objects, flags %#x): "
			    "its objects are not checked", l->stripe_size, l->stripe_count, l->nobjs,
			    l->flags);
		goto out;
	}
	/* An unlinked file is released at the next MDS start: its data no longer matters. */
	if ((fi->flags & FI_ORPHAN) && fi->links == 0)
		goto out;
	rc = mdt_inode_get(f->t, ino, &in);
	if (rc == 0)
		rc = check_objects(f, q, ino, &in, l);
out:
	free(l);
	return rc;
}

/* Raises a file's size to what its objects hold, with their blocks and newest mtime. */
static int raise_size(struct mdt_fsck *f, const struct act *a)
{
	struct mdt_inode in;
	int rc;

	rc = mdt_inode_get(f->t, a->a, &in);
	if (rc)
		return rc;
	if (a->b > MDT_MAX_FILE_SIZE)
		return -EFBIG;
	in.size = a->b;
	in.blocks = a->c;
	in.flags |= MDT_IF_BLOCKS;
	if (a->ts.tv_sec > in.mtime || (a->ts.tv_sec == in.mtime && a->ts.tv_nsec > in.mtime_ns)) {
		in.mtime = in.ctime = a->ts.tv_sec;
		in.mtime_ns = in.ctime_ns = (uint32_t)a->ts.tv_nsec;
	}
	return mdt_inode_put(f->t, &in);
}

static int stray_layout(struct mdt_fsck *f, uint64_t ino)
{
	struct loom_layout *l;
	int rc;

	rc = mdt_layout_load(f->t, MDT_DB_LAYOUTS, ino, &l);
	if (rc)
		return rc;
	rc = mdt_destroy_queue(f->t, ino, l);
	free(l);
	if (rc == 0)
		rc = del_ino_key(f, MDT_DB_LAYOUTS, ino);
	return rc;
}

static int fix_layouts(struct mdt_fsck *f, struct acts *q)
{
	int rc = 0, frc;

	for (size_t i = 0; rc == 0 && i < q->n; i++) {
		struct act *a = &q->v[i];
		struct mdt_inode in;

		switch (a->op) {
		case ACT_SIZE:
			rc = mdt_inode_get(f->t, a->a, &in);
			if (rc)
				break;
			snprintf(f->fix, sizeof(f->fix), "size %llu, %llu blocks",
				 (unsigned long long)a->b, (unsigned long long)a->c);
			REPAIR(f, frc, raise_size(f, a));
			rc = report(f, MDT_FSCK_SIZE, a->a, frc, f->fix,
				    "size %llu, but its objects hold data up to %llu (a writer died "
				    "before it reported its size, or a client before it cut the "
				    "objects of a truncate)", (unsigned long long)in.size,
				    (unsigned long long)a->b);
			break;
		case ACT_STRAY_LAYOUT:
			REPAIR(f, frc, stray_layout(f, a->a));
			rc = report(f, MDT_FSCK_STRAY, 0, frc,
				    "deleted, its objects queued for destruction",
				    "layout of inode %llu, which %s", (unsigned long long)a->a,
				    a->b ? "is not a regular file" : "does not exist");
			break;
		default:
			REPAIR(f, frc, del_key(f, MDT_DB_LAYOUTS, a->key, a->klen));
			rc = report(f, MDT_FSCK_RECORD, a->b ? a->a : 0, frc,
				    "deleted (the file gets a new, empty layout)",
				    "layout record that does not decode (its objects become orphans)");
			break;
		}
	}
	return rc;
}

/* A new layout for a regular file that has none: its data (if any) is lost. */
static int new_layout(struct mdt_fsck *f, struct fino *fi)
{
	struct mdt_inode in, dir;
	int rc;

	rc = mdt_inode_get(f->t, fi->ino, &in);
	if (rc == 0)
		rc = mdt_inode_get(f->t, fi->links ? fi->parent : LOOM_ROOT_INO, &dir);
	if (rc == 0)
		rc = mdt_layout_new_file(f->t, &dir, NULL, &in, NULL);
	if (rc)
		return rc;
	/* No object holds anything: what the size covers reads as zeros. */
	in.blocks = 0;
	in.flags |= MDT_IF_BLOCKS;
	return mdt_inode_put(f->t, &in);
}

static int destroy_rec(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg)
{
	struct acts *q = arg;
	struct act a = { .op = ACT_DEL };
	uint64_t ino = 0;

	if (k->mv_size != 12) {
		a.klen = (uint32_t)MIN(k->mv_size, sizeof(a.key));
		memcpy(a.key, k->mv_data, a.klen);
		return acts_push(q, &a);
	}
	if (v->mv_size == sizeof(ino))
		memcpy(&ino, v->mv_data, sizeof(ino));
	return objref_add(f, mdt_get_be32(k->mv_data),
			  mdt_get_be64((const uint8_t *)k->mv_data + 4), ino, STRIPE_QUEUED);
}

static int objref_cmp(const void *x, const void *y)
{
	const struct objref *a = x, *b = y;

	if (a->ost != b->ost)
		return a->ost < b->ost ? -1 : 1;
	if (a->objid != b->objid)
		return a->objid < b->objid ? -1 : 1;
	if (a->stripe != b->stripe)
		return a->stripe < b->stripe ? -1 : 1;
	return a->ino < b->ino ? -1 : a->ino > b->ino;
}

static int set_next_objid(struct mdt_fsck *f, uint32_t idx, uint64_t next)
{
	struct mdt_ost_rec rec;
	uint8_t key[4];
	MDB_val v;
	int rc;

	mdt_put_be32(key, idx);
	rc = mdt_get(f->t, MDT_DB_OSTS, key, sizeof(key), &v);
	if (rc)
		return rc;
	if (v.mv_size != sizeof(rec))
		return -EIO;
	memcpy(&rec, v.mv_data, sizeof(rec));
	rec.next_objid = next;
	rc = mdt_put(f->t, MDT_DB_OSTS, key, sizeof(key), &rec, sizeof(rec));
	if (rc == 0)
		f->t->ost_dirty = true;
	return rc;
}

/* Objects in two layouts, in a layout and the destroy queue; object ids at or above the OST's
 * counter. */
static int check_objrefs(struct mdt_fsck *f)
{
	int rc = 0, frc;

	if (f->nobj)
		qsort(f->obj, f->nobj, sizeof(*f->obj), objref_cmp);
	/* An object queued twice (a stray layout's, then in the queue its repair wrote) once. */
	for (size_t i = 0, o = 0; i < f->nobj; i++) {
		if (o && f->obj[i].stripe == STRIPE_QUEUED && f->obj[o - 1].stripe == STRIPE_QUEUED &&
		    f->obj[o - 1].ost == f->obj[i].ost && f->obj[o - 1].objid == f->obj[i].objid)
			continue;
		f->obj[o++] = f->obj[i];
		if (i + 1 == f->nobj)
			f->nobj = o;
	}
	for (size_t i = 0; rc == 0 && i < f->nobj; i++) {
		struct objref *a = &f->obj[i];
		struct ostnext *o;

		for (size_t j = i + 1; rc == 0 && j < f->nobj && f->obj[j].ost == a->ost &&
				       f->obj[j].objid == a->objid; j++) {
			struct objref *b = &f->obj[j];

			if (a->stripe == STRIPE_QUEUED)
				break;
			if (b->stripe != STRIPE_QUEUED) {
				rc = report(f, MDT_FSCK_SHARED_OBJECT, a->ino, NOFIX, NULL,
					    "OST %u object %#llx is stripe %u of inode %llu and stripe "
					    "%u of inode %llu: writes to one change the other (copy one "
					    "file, remove both, put the copy back)", a->ost,
					    (unsigned long long)a->objid, a->stripe,
					    (unsigned long long)a->ino, b->stripe,
					    (unsigned long long)b->ino);
			} else {
				REPAIR(f, frc, mdt_destroy_done(f->t, a->ost, a->objid));
				rc = report(f, MDT_FSCK_QUEUED_OBJECT, a->ino, frc,
					    "removed from the destroy queue",
					    "stripe %u (OST %u object %#llx) is queued for destruction "
					    "(for inode %llu): the MDS would destroy live data",
					    a->stripe, a->ost, (unsigned long long)a->objid,
					    (unsigned long long)b->ino);
			}
		}
		o = ost_find(f, a->ost);
		if (rc == 0 && o && a->objid >= o->next) {
			uint64_t want = a->objid + 1;
			/* Only the highest id of the OST matters: the last of its run. */
			if (i + 1 < f->nobj && f->obj[i + 1].ost == a->ost)
				continue;
			snprintf(f->fix, sizeof(f->fix), "next object id %llu", (unsigned long long)want);
			REPAIR(f, frc, set_next_objid(f, a->ost, want));
			rc = report(f, MDT_FSCK_COUNTER, 0, frc, f->fix,
				    "OST %u: next object id %llu is not above object %#llx in use: a "
				    "new file would share it", a->ost, (unsigned long long)o->next,
				    (unsigned long long)a->objid);
			if (frc == 0)
				o->next = want;
		}
	}
	return rc;
}

int mdt_fsck_layouts(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	size_t cap = 0;
	int rc, frc;

	if (!f->have_root)
		return -EINVAL; /* mdt_fsck_namespace first */
	rc = walk(f, MDT_DB_OSTS, ost_rec, &cap);
	if (rc == 0)
		rc = walk(f, MDT_DB_LAYOUTS, layout_rec, &q);
	if (rc == 0)
		rc = fix_layouts(f, &q);
	acts_free(&q);
	if (rc == 0)
		rc = walk(f, MDT_DB_DESTROY, destroy_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		REPAIR(f, frc, del_key(f, MDT_DB_DESTROY, q.v[i].key, q.v[i].klen));
		rc = report(f, MDT_FSCK_RECORD, 0, frc, "deleted",
			    "destroy queue record with a key of %u bytes", q.v[i].klen);
	}
	acts_free(&q);
	if (rc == 0)
		rc = check_objrefs(f);
	/* After the object counters are right: a new layout takes ids from them. Its objects stay
	 * out of the object set, so that a stale orphan with one of their ids is moved away. */
	for (size_t i = 0; rc == 0 && i < f->nino; i++) {
		struct fino *fi = &f->ino[i];

		if (!S_ISREG(fi->mode) || (fi->flags & FI_LAYOUT) ||
		    ((fi->flags & FI_ORPHAN) && fi->links == 0))
			continue;
		REPAIR(f, frc, new_layout(f, fi));
		rc = report(f, MDT_FSCK_LAYOUT, fi->ino, frc,
			    "given a new layout (any data it had reads as zeros)",
			    "regular file without a layout");
	}
	return rc;
}

/* ---- the object set, for the caller's walk of the OSTs ---- */

int mdt_fsck_object(const struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t *ino,
		    uint32_t *stripe)
{
	size_t lo = 0, hi = f->nobj;

	/* The first entry of (ost, objid): a layout's reference sorts before a queued one. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct objref *o = &f->obj[mid];
		if (o->ost < ost || (o->ost == ost && o->objid < objid))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == f->nobj || f->obj[lo].ost != ost || f->obj[lo].objid != objid)
		return MDT_FSCK_OBJ_UNKNOWN;
	if (ino)
		*ino = f->obj[lo].ino;
	if (stripe)
		*stripe = f->obj[lo].stripe;
	return f->obj[lo].stripe == STRIPE_QUEUED ? MDT_FSCK_OBJ_QUEUED : MDT_FSCK_OBJ_LAYOUT;
}

uint64_t mdt_fsck_next_objid(const struct mdt_fsck *f, uint32_t ost)
{
	struct ostnext *o = ost_find(f, ost);

	return o ? o->next : 0;
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
