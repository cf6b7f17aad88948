/*
 * The MDT's environment: format, open, transactions, and the record helpers the operations share.
 */
#include "mdt/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

static const char *const db_names[MDT_DB_COUNT] = {
	[MDT_DB_META] = "meta",
	[MDT_DB_INODES] = "inodes",
	[MDT_DB_DENTRIES] = "dentries",
	[MDT_DB_DIRCOOKIES] = "dircookies",
	[MDT_DB_SYMLINKS] = "symlinks",
	[MDT_DB_XATTRS] = "xattrs",
	[MDT_DB_LAYOUTS] = "layouts",
	[MDT_DB_DIRDEFAULTS] = "dirdefaults",
	[MDT_DB_OSTS] = "osts",
	[MDT_DB_ORPHANS] = "orphans",
	[MDT_DB_DESTROY] = "destroy",
	[MDT_DB_REPLIES] = "replies",
	[MDT_DB_REPLY_AGES] = "reply_ages",
	[MDT_DB_DOM] = "dom",
	[MDT_DB_POOLS] = "pools",
	[MDT_DB_TRUNCS] = "truncs",
	[MDT_DB_CLIENTS] = "clients",
	[MDT_DB_NODEMAP] = "nodemap",
	[MDT_DB_OST_LOST] = "ost_lost",
	[MDT_DB_MIRRORS] = "mirrors",
};

#define META_VERSION  "version"
#define META_FSNAME   "fsname"
#define META_UUID     "uuid"
#define META_NEXT_INO "next_ino"
#define META_LAST_TRANSNO "last_transno"
/* How far a start moved the counters (mdt_numbers_skip) while the replays after it have not all
 * run yet; absent or 0 once they did (mdt_numbers_settled). */
#define META_SKIPPED "numbers_skipped"

/* ---- errors and raw access ---- */

int mdt_errno(int mdb_rc)
{
	switch (mdb_rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
		return -ENOSPC;
	case MDB_TXN_FULL:
		/* The batch touched too many pages: the server should commit it and retry the request
		 * in a transaction of its own. Not an errno, so it cannot be confused with one. */
		return MDT_ETXNFULL;
	case MDB_READERS_FULL:
		return -EAGAIN;
	default:
		/* Corruption, version mismatch, a transaction already failed, a panic. */
		return mdb_rc > 0 ? -mdb_rc : -EIO;
	}
}

int mdt_get(struct mdt_txn *t, enum mdt_db db, const void *key, size_t klen, MDB_val *val)
{
	MDB_val k = { .mv_size = klen, .mv_data = (void *)key };

	return mdt_errno(mdb_get(t->mdb, t->s->dbi[db], &k, val));
}

int mdt_put(struct mdt_txn *t, enum mdt_db db, const void *key, size_t klen, const void *val,
	    size_t vlen)
{
	MDB_val k = { .mv_size = klen, .mv_data = (void *)key };
	MDB_val v = { .mv_size = vlen, .mv_data = (void *)val };
	size_t redo_len = t->redo_len;
	uint32_t redo_nrec = t->redo_nrec;
	/* Noted first, as mdt_del does: key and value may point into the map, which the put moves. */
	int rc = mdt_redo_note(t, LW_REPL_PUT, db, key, klen, val, vlen);

	if (rc == 0)
		rc = mdt_errno(mdb_put(t->mdb, t->s->dbi[db], &k, &v, 0));
	if (rc) {
		t->redo_len = redo_len;
		t->redo_nrec = redo_nrec;
	}
	return rc;
}

int mdt_del(struct mdt_txn *t, enum mdt_db db, const void *key, size_t klen)
{
	MDB_val k = { .mv_size = klen, .mv_data = (void *)key };

	size_t redo_len = t->redo_len;
	uint32_t redo_nrec = t->redo_nrec;
	/* Noted first: the key may point into a page of the map that the delete moves. */
	int rc = mdt_redo_note(t, LW_REPL_DEL, db, key, klen, NULL, 0);

	if (rc == 0)
		rc = mdt_errno(mdb_del(t->mdb, t->s->dbi[db], &k, NULL));
	if (rc) {
		t->redo_len = redo_len;
		t->redo_nrec = redo_nrec;
	}
	return rc;
}

int mdt_del_prefix(struct mdt_txn *t, enum mdt_db db, const void *prefix, size_t plen)
{
	MDB_cursor *cur;
	MDB_val k = { .mv_size = plen, .mv_data = (void *)prefix }, v;
	int rc;

	rc = mdt_errno(mdb_cursor_open(t->mdb, t->s->dbi[db], &cur));
	if (rc)
		return rc;
	rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	while (rc == MDB_SUCCESS && k.mv_size >= plen && memcmp(k.mv_data, prefix, plen) == 0) {
		int nrc = mdt_redo_note(t, LW_REPL_DEL, db, k.mv_data, k.mv_size, NULL, 0);

		if (nrc) {
			mdb_cursor_close(cur);
			return nrc;
		}
		rc = mdb_cursor_del(cur, 0);
		if (rc)
			break;
		/* After a delete the cursor sits on the next key, which MDB_NEXT returns. */
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	return rc == MDB_NOTFOUND ? 0 : mdt_errno(rc);
}

static int meta_get(struct mdt_txn *t, const char *key, void *buf, size_t len)
{
	MDB_val v;
	int rc = mdt_get(t, MDT_DB_META, key, strlen(key), &v);

	if (rc)
		return rc == -ENOENT ? -EIO : rc; /* every meta key is written at format */
	if (v.mv_size != len)
		return -EIO;
	memcpy(buf, v.mv_data, len);
	return 0;
}

static int meta_put(struct mdt_txn *t, const char *key, const void *buf, size_t len)
{
	return mdt_put(t, MDT_DB_META, key, strlen(key), buf, len);
}

/* ---- inodes ---- */

int mdt_inode_get(struct mdt_txn *t, uint64_t ino, struct mdt_inode *out)
{
	uint8_t key[8];
	MDB_val v;
	int rc;

	mdt_put_be64(key, ino);
	rc = mdt_get(t, MDT_DB_INODES, key, sizeof(key), &v);
	if (rc)
		return rc;
	/* 112 bytes: written before versions; 128: before truncation epochs (a development build);
	 * 136: before versions of changes. */
	if (v.mv_size != sizeof(*out) && v.mv_size != MDT_INODE_V1_SIZE && v.mv_size != 128 &&
	    v.mv_size != MDT_INODE_V3_SIZE) {
		log_err("mdt: inode %llu: record of %zu bytes, expected %zu", (unsigned long long)ino,
			v.mv_size, sizeof(*out));
		return -EIO;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, v.mv_data, v.mv_size);
	if (v.mv_size == MDT_INODE_V1_SIZE) {
		/* Written before versions: the first ones (versions are never 0). */
		out->data_version = 1;
		out->name_version = 1;
	}
	return 0;
}

int mdt_inode_version(struct mdt_txn *t, uint64_t ino, uint64_t *version)
{
	struct mdt_inode rec;
	int rc = mdt_inode_get(t, ino, &rec);

	*version = rc == 0 ? rec.version : 0;
	return rc == -ENOENT ? 0 : rc;
}

/* The first write of ino in this change: its version before, noted, and for a replay checked
 * against what its first run noted. */
static int vers_note(struct mdt_txn *t, struct mdt_vers *v, uint64_t ino)
{
	uint64_t have;
	int rc;

	for (uint32_t i = 0; i < v->n; i++)
		if (v->got[i].ino == ino)
			return 0;
	rc = mdt_inode_version(t, ino, &have);
	if (rc)
		return rc;
	if (v->expect) {
		uint32_t i = 0;

		while (i < v->nexpect && v->expect[i].ino != ino)
			i++;
		if (i == v->nexpect || v->expect[i].version != have) {
			v->mismatch_ino = ino;
			v->mismatch_have = have;
			return MDT_EVERSION;
		}
	}
	if (v->n == LW_MAX_VERS) {
		v->overflow = true;
		return 0;
	}
	v->got[v->n++] = (struct lw_obj_version){ .ino = ino, .version = have };
	return 0;
}

int mdt_inode_put(struct mdt_txn *t, const struct mdt_inode *in)
{
	struct mdt_inode rec = *in;
	uint8_t key[8];

	if (t->transno) {
		if (t->vers) {
			int rc = vers_note(t, t->vers, in->ino);
			if (rc)
				return rc;
		}
		rec.version = t->transno;
	}
	mdt_put_be64(key, rec.ino);
	return mdt_put(t, MDT_DB_INODES, key, sizeof(key), &rec, sizeof(rec));
}

void mdt_txn_set_change(struct mdt_txn *t, uint64_t transno, struct mdt_vers *v)
{
	t->transno = transno;
	t->vers = v;
}

int mdt_last_transno_get(struct mdt_txn *t, uint64_t *transno)
{
	MDB_val v;
	int rc = mdt_get(t, MDT_DB_META, META_LAST_TRANSNO, strlen(META_LAST_TRANSNO), &v);

	*transno = 0;
	if (rc == -ENOENT)
		return 0; /* an MDT that never committed a numbered change */
	if (rc == 0 && v.mv_size != sizeof(*transno))
		rc = -EIO;
	if (rc == 0)
		memcpy(transno, v.mv_data, sizeof(*transno));
	return rc;
}

int mdt_last_transno_put(struct mdt_txn *t, uint64_t transno)
{
	return meta_put(t, META_LAST_TRANSNO, &transno, sizeof(transno));
}

int mdt_ino_reserve(struct mdt_txn *t, uint64_t ino)
{
	uint64_t next;
	int rc = meta_get(t, META_NEXT_INO, &next, sizeof(next));

	if (rc || ino < next)
		return rc;
	next = ino + 1;
	return meta_put(t, META_NEXT_INO, &next, sizeof(next));
}

/* The skip a start made whose replays have not all run (0: none). */
static int skipped_get(struct mdt_txn *t, uint64_t *n)
{
	MDB_val v;
	int rc = mdt_get(t, MDT_DB_META, META_SKIPPED, strlen(META_SKIPPED), &v);

	*n = 0;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (v.mv_size != sizeof(*n))
		return -EIO;
	memcpy(n, v.mv_data, sizeof(*n));
	return 0;
}

struct unskip {
	uint64_t n;
	void (*old_objid)(void *arg, uint32_t ost, uint64_t next_objid);
	void *arg;
};

static void unskipped_objid(void *arg, uint32_t ost, uint64_t next_objid)
{
	struct unskip *u = arg;

	u->old_objid(u->arg, ost, next_objid > u->n ? next_objid - u->n : 1);
}

int mdt_numbers_skip(struct mdt_txn *t, uint64_t n, uint64_t *old_next_ino,
		     void (*old_objid)(void *arg, uint32_t ost, uint64_t next_objid), void *arg)
{
	uint64_t next, skipped;
	int rc = meta_get(t, META_NEXT_INO, &next, sizeof(next));

	if (rc == 0)
		rc = skipped_get(t, &skipped);
	if (rc)
		return rc;
	if (skipped) {
		/* The last start skipped already and crashed before its replays all ran (nothing
		 * but replays handed numbers out meanwhile): the window is the same, below where
		 * that skip left the counters. Skipping again would put the lost numbers below it. */
		struct unskip u = { skipped, old_objid, arg };

		*old_next_ino = next > skipped ? next - skipped : 1;
		return mdt_objids_skip(t, 0, unskipped_objid, &u);
	}
	*old_next_ino = next;
	next += n;
	rc = meta_put(t, META_NEXT_INO, &next, sizeof(next));
	if (rc == 0)
		rc = meta_put(t, META_SKIPPED, &n, sizeof(n));
	return rc ? rc : mdt_objids_skip(t, n, old_objid, arg);
}

int mdt_numbers_settled(struct mdt_txn *t)
{
	uint64_t zero = 0, skipped;
	int rc = skipped_get(t, &skipped);

	return rc || !skipped ? rc : meta_put(t, META_SKIPPED, &zero, sizeof(zero));
}

int mdt_ino_alloc(struct mdt_txn *t, uint64_t *ino)
{
	uint64_t next;
	int rc;

	/* Every new inode is growth: refused once the MDT is down to its reserve. */
	rc = mdt_txn_grow(t, MDT_GROW_INODE);
	if (rc)
		return rc;
	if (t->vers && t->vers->want_ino) {
		/* A replay: the inode its first run made, which the client knows by number. */
		*ino = t->vers->want_ino;
		t->vers->want_ino = 0;
		return mdt_ino_reserve(t, *ino);
	}
	rc = meta_get(t, META_NEXT_INO, &next, sizeof(next));
	if (rc)
		return rc;
	*ino = next++;
	return meta_put(t, META_NEXT_INO, &next, sizeof(next));
}

int mdt_ino_alloc_range(struct mdt_txn *t, uint32_t count, uint64_t *first)
{
	uint64_t next;
	int rc = meta_get(t, META_NEXT_INO, &next, sizeof(next));

	if (rc)
		return rc;
	if (count == 0 || next > UINT64_MAX - count)
		return -ENOSPC;
	*first = next;
	next += count;
	return meta_put(t, META_NEXT_INO, &next, sizeof(next));
}

void mdt_inode_touch(struct mdt_inode *in, uint32_t which, struct timespec now)
{
	if (which & MDT_T_ATIME) {
		in->atime = now.tv_sec;
		in->atime_ns = (uint32_t)now.tv_nsec;
	}
	if (which & MDT_T_MTIME) {
		in->mtime = now.tv_sec;
		in->mtime_ns = (uint32_t)now.tv_nsec;
	}
	if (which & MDT_T_CTIME) {
		in->ctime = now.tv_sec;
		in->ctime_ns = (uint32_t)now.tv_nsec;
	}
}

void mdt_inode_init(struct mdt_inode *in, uint64_t ino, uint32_t mode, uint32_t uid, uint32_t gid,
		    struct timespec now)
{
	memset(in, 0, sizeof(*in));
	in->ino = ino;
	in->gen = 1;
	in->mode = mode;
	in->uid = uid;
	in->gid = gid;
	in->nlink = S_ISDIR(mode) ? 2 : 1;
	in->blksize = MDT_DEF_BLKSIZE;
	in->flags = MDT_IF_NO_XATTRS;
	in->data_version = 1;
	in->name_version = 1; /* the name it is made with */
	if (S_ISDIR(mode))
		in->next_cookie = MDT_COOKIE_FIRST;
	mdt_inode_touch(in, MDT_T_ATIME | MDT_T_MTIME | MDT_T_CTIME, now);
}

void mdt_inode_attr(const struct mdt_inode *in, struct lw_attr *out)
{
	memset(out, 0, sizeof(*out));
	out->ino = in->ino;
	out->gen = in->gen;
	out->atime = in->atime;
	out->mtime = in->mtime;
	out->ctime = in->ctime;
	out->atime_ns = in->atime_ns;
	out->mtime_ns = in->mtime_ns;
	out->ctime_ns = in->ctime_ns;
	out->mode = in->mode;
	out->uid = in->uid;
	out->gid = in->gid;
	out->nlink = in->nlink;
	out->rdev = in->rdev;
	out->blksize = MDT_DEF_BLKSIZE;
	out->flags = in->flags & MDT_IF_NO_XATTRS ? LW_ATTR_F_NO_XATTRS : 0;
	out->data_version = in->data_version;
	out->name_version = in->name_version;
	out->trunc_epoch = in->trunc_epoch;
	if (S_ISDIR(in->mode)) {
		out->size = MDT_DIR_SIZE;
		out->blocks = MDT_DIR_SIZE / 512;
	} else if (S_ISREG(in->mode) || S_ISLNK(in->mode)) {
		out->size = in->size;
		out->blocks = S_ISREG(in->mode) && (in->flags & MDT_IF_BLOCKS) ? in->blocks
									       : (in->size + 511) / 512;
		if (S_ISREG(in->mode) && in->blksize)
			out->blksize = in->blksize;
	}
}

/* ---- environment ---- */

static bool fsname_ok(const char *fsname)
{
	size_t n = fsname ? strlen(fsname) : 0;

	if (n == 0 || n > LOOM_FSNAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = fsname[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-'))
			return false;
	}
	return true;
}

static void store_free(struct mdt_store *s)
{
	if (!s)
		return;
	if (s->env)
		mdb_env_close(s->env);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	mdt_ost_free(s);
	free(s->dir);
	free(s);
}

const char *mdt_db_name(int i)
{
	return i >= 0 && i < MDT_DB_COUNT ? db_names[i] : NULL;
}

/* Opens the LMDB environment in dir with the largest map the process may have, from
 * MDT_MAP_SIZE down to 1 GiB: a map is only address space, but a process limited by
 * RLIMIT_AS (or run under valgrind) cannot have 64 GiB of it. */
static int env_open(const char *dir, MDB_env **out)
{
	uint64_t map = MDT_MAP_SIZE;
	MDB_env *env;
	int rc;

	for (;;) {
		rc = mdt_errno(mdb_env_create(&env));
		if (rc)
			return rc;
		rc = mdt_errno(mdb_env_set_maxdbs(env, MDT_DB_COUNT + 4));
		if (rc == 0)
			rc = mdt_errno(mdb_env_set_mapsize(env, map));
		/* MDB_NOTLS: read transactions are not tied to a thread. No MDB_WRITEMAP: it
		 * forbids the nested transactions every request runs in. MDB_NOMETASYNC: a commit
		 * writes its pages and flushes them, then writes the meta page that makes it
		 * current without flushing that (one fdatasync per commit, not two). A commit is
		 * then in the page cache when it returns, so it survives the MDS being killed; a
		 * crash of the machine itself may undo the last commit, never break the MDT
		 * (LMDB's ACI). No MDB_NOSYNC: that could corrupt the MDT on power loss. */
		if (rc == 0)
			rc = mdt_errno(mdb_env_open(env, dir, MDB_NOTLS | MDB_NOMETASYNC, 0600));
		if (rc == 0)
			break;
		mdb_env_close(env);
		if ((rc != -ENOMEM && rc != -EINVAL) || map <= (1ull << 30))
			return rc;
		map /= 2;
	}
	if (map != MDT_MAP_SIZE)
		log_warn("mdt: %s: mapped with %llu GiB of address space, not %llu: the MDT can hold "
			 "less", dir, (unsigned long long)(map >> 30),
			 (unsigned long long)(MDT_MAP_SIZE >> 30));
	*out = env;
	return 0;
}

/* Opens (or with create, makes) the environment in dir, holding the MDT's lock file, and opens
 * every named database. */
static int store_setup(const char *dir, bool create, struct mdt_store **out)
{
	struct mdt_store *s;
	char path[PATH_MAX];
	MDB_txn *txn = NULL;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->lock_fd = -1;
	s->dir = strdup(dir);
	if (!s->dir) {
		rc = -ENOMEM;
		goto fail;
	}
	if (snprintf(path, sizeof(path), "%s/mdt.lock", dir) >= (int)sizeof(path)) {
		rc = -ENAMETOOLONG;
		goto fail;
	}
	s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0) {
		rc = -errno;
		goto fail;
	}
	/* LMDB would let a second process share the environment; two MDSs on one MDT would not
	 * share their in-memory OST tables or batches, so the second is refused. */
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto fail;
	}

	rc = env_open(dir, &s->env);
	if (rc == 0)
		rc = mdt_space_file_init(s);
	if (rc)
		goto fail;

	rc = mdt_errno(mdb_txn_begin(s->env, NULL, 0, &txn));
	if (rc)
		goto fail;
	for (int i = 0; i < MDT_DB_COUNT; i++) {
		/* The reply cache's, Data-on-MDT, pool, truncation, client, nodemap, lost-object and
		 * mirror tables are made where missing: an MDT formatted before they existed simply
		 * has no replies, file bytes, pools, truncations under way, clients that may hold
		 * locks, node keys, replaced OSTs or mirrored files to look after. */
		bool cache = i == MDT_DB_REPLIES || i == MDT_DB_REPLY_AGES || i == MDT_DB_DOM || i == MDT_DB_POOLS ||
			     i == MDT_DB_TRUNCS || i == MDT_DB_CLIENTS || i == MDT_DB_NODEMAP ||
			     i == MDT_DB_OST_LOST || i == MDT_DB_MIRRORS;

		rc = mdt_errno(mdb_dbi_open(txn, db_names[i], create || cache ? MDB_CREATE : 0, &s->dbi[i]));
		if (rc) {
			if (rc == -ENOENT) {
				log_err("mdt: %s: database '%s' missing", dir, db_names[i]);
				rc = -EIO;
			}
			mdb_txn_abort(txn);
			goto fail;
		}
	}
	rc = mdt_errno(mdb_txn_commit(txn));
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	store_free(s);
	return rc;
}

static bool mdt_exists(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/data.mdb", dir) >= (int)sizeof(path))
		return false;
	return stat(path, &st) == 0;
}

/* The root directory and the filesystem default layout. */
static int format_root(struct mdt_txn *t)
{
	struct timespec now = clock_real();
	struct loom_layout def = {
		.pattern = LOOM_PATTERN_RAID0,
		.stripe_size = LOOM_DEFAULT_STRIPE_SIZE,
		.dom_size = LOOM_DEFAULT_DOM_SIZE,
		.stripe_count = 1,
		.stripe_offset = -1,
		.flags = LOOM_LAYOUT_DEFAULT,
	};
	struct mdt_inode root;
	int rc;

	mdt_inode_init(&root, LOOM_ROOT_INO, S_IFDIR | 0755, 0, 0, now);
	root.parent = LOOM_ROOT_INO;
	rc = mdt_inode_put(t, &root);
	if (rc == 0)
		rc = mdt_layout_save(t, MDT_DB_DIRDEFAULTS, LOOM_ROOT_INO, &def);
	return rc;
}

int mdt_format(const char *mdt_dir, const char *fsname)
{
	struct mdt_store *s = NULL;
	struct mdt_txn *t = NULL;
	uint32_t version = MDT_FORMAT_VERSION;
	uint64_t next_ino = LOOM_ROOT_INO + 1;
	uint8_t uuid[16];
	MDB_val v;
	int rc;

	if (!fsname_ok(fsname))
		return -EINVAL;
	rc = mkdir_p(mdt_dir, 0700);
	if (rc)
		return rc;
	rc = random_bytes(uuid, sizeof(uuid));
	if (rc)
		return rc;
	/* Under the MDT's lock (-EBUSY while an MDS runs on it). Format writes everything in one
	 * transaction, so the version key says whether an MDT is there; an environment without
	 * it is a format that was interrupted, and is formatted again. */
	rc = store_setup(mdt_dir, true, &s);
	if (rc)
		return rc;
	rc = mdt_txn_begin(s, true, &t);
	if (rc)
		goto out;
	rc = mdt_get(t, MDT_DB_META, META_VERSION, strlen(META_VERSION), &v);
	if (rc != -ENOENT) {
		mdt_txn_abort(t);
		rc = rc == 0 ? -EEXIST : rc;
		goto out;
	}
	rc = meta_put(t, META_VERSION, &version, sizeof(version));
	if (rc == 0)
		rc = meta_put(t, META_FSNAME, fsname, strlen(fsname));
	if (rc == 0)
		rc = meta_put(t, META_UUID, uuid, sizeof(uuid));
	if (rc == 0)
		rc = meta_put(t, META_NEXT_INO, &next_ino, sizeof(next_ino));
	if (rc == 0)
		rc = format_root(t);
	if (rc) {
		mdt_txn_abort(t);
		goto out;
	}
	rc = mdt_txn_commit(t);
out:
	store_free(s);
	return rc;
}

static int store_load(struct mdt_store *s)
{
	struct mdt_txn *t;
	uint32_t version;
	MDB_val v;
	int rc;

	rc = mdt_txn_begin(s, false, &t);
	if (rc)
		return rc;
	rc = meta_get(t, META_VERSION, &version, sizeof(version));
	if (rc)
		goto out;
	if (version != MDT_FORMAT_VERSION) {
		log_err("mdt: %s: format version %u, this MDS reads %u", s->dir, version,
			MDT_FORMAT_VERSION);
		rc = -EPROTONOSUPPORT;
		goto out;
	}
	rc = mdt_get(t, MDT_DB_META, META_FSNAME, strlen(META_FSNAME), &v);
	if (rc == 0 && (v.mv_size == 0 || v.mv_size > LOOM_FSNAME_MAX))
		rc = -EIO;
	if (rc)
		goto out;
	memcpy(s->fsname, v.mv_data, v.mv_size);
	s->fsname[v.mv_size] = '\0';
	rc = mdt_ost_load(s, t);
	if (rc == 0)
		rc = mdt_client_inos_load(s, t);
out:
	mdt_txn_abort(t);
	return rc;
}

int mdt_store_open(const char *mdt_dir, struct mdt_store **out)
{
	struct mdt_store *s;
	uint64_t seed;
	int rc;

	if (!mdt_exists(mdt_dir))
		return -ENOENT;
	rc = store_setup(mdt_dir, false, &s);
	if (rc)
		return rc;
	rc = store_load(s);
	if (rc) {
		store_free(s);
		return rc;
	}
	if (random_bytes(&seed, sizeof(seed)) != 0)
		seed = clock_mono_ns();
	s->rng = seed | 1;
	*out = s;
	return 0;
}

void mdt_store_close(struct mdt_store *s)
{
	store_free(s);
}

const char *mdt_store_fsname(const struct mdt_store *s)
{
	return s->fsname;
}

/* ---- transactions ---- */

static void txn_free(struct mdt_txn *t)
{
	free(t->ost_updates);
	free(t->redo);
	free(t);
}

static int txn_new(struct mdt_store *s, struct mdt_txn *parent, bool write, struct mdt_txn **out)
{
	struct mdt_txn *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->s = s;
	t->parent = parent;
	t->write = write;
	if (parent) {
		t->transno = parent->transno;
		t->vers = parent->vers;
	}
	rc = mdt_errno(mdb_txn_begin(s->env, parent ? parent->mdb : NULL, write ? 0 : MDB_RDONLY,
				     &t->mdb));
	if (rc) {
		txn_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int mdt_txn_begin(struct mdt_store *s, bool write, struct mdt_txn **out)
{
	return txn_new(s, NULL, write, out);
}

int mdt_txn_child(struct mdt_txn *parent, struct mdt_txn **out)
{
	if (!parent->write)
		return -EINVAL;
	return txn_new(parent->s, parent, true, out);
}

int mdt_txn_reserve_updates(struct mdt_txn *t, size_t more)
{
	size_t want = t->n_ost_updates + more;
	struct mdt_ost_update *u;

	if (want <= t->cap_ost_updates)
		return 0;
	u = realloc(t->ost_updates, want * sizeof(*u));
	if (!u)
		return -ENOMEM;
	t->ost_updates = u;
	t->cap_ost_updates = want;
	return 0;
}

static int commit_child(struct mdt_txn *t)
{
	struct mdt_txn *p = t->parent;
	int rc;

	/* A child's pending OST registrations become its parent's. Capacity is reserved before
	 * the child commits so that nothing can fail once it has. */
	rc = mdt_txn_reserve_updates(p, t->n_ost_updates);
	if (rc == 0)
		rc = mdt_redo_child_reserve(t);
	if (rc) {
		mdb_txn_abort(t->mdb);
		return rc;
	}
	rc = mdt_errno(mdb_txn_commit(t->mdb));
	if (rc)
		return rc;
	if (t->n_ost_updates)
		memcpy(p->ost_updates + p->n_ost_updates, t->ost_updates,
		       t->n_ost_updates * sizeof(*t->ost_updates));
	p->n_ost_updates += t->n_ost_updates;
	mdt_redo_child_join(t);
	p->ost_dirty |= t->ost_dirty;
	p->grown += t->grown;
	p->promised += t->promised;
	return 0;
}

void mdt_store_set_write_guard(struct mdt_store *s, int (*guard)(void *arg), void *arg)
{
	s->write_guard = guard;
	s->write_guard_arg = arg;
}

static int commit_top(struct mdt_txn *t)
{
	struct mdt_ost *table = NULL;
	uint32_t count = 0;
	int rc;

	if (t->s->write_guard && (rc = t->s->write_guard(t->s->write_guard_arg)) != 0) {
		mdb_txn_abort(t->mdb);
		return rc;
	}

	if (t->ost_dirty || t->n_ost_updates) {
		rc = mdt_ost_prepare(t, &table, &count);
		if (rc) {
			mdb_txn_abort(t->mdb);
			return rc;
		}
	}
	rc = mdt_redo_before_commit(t);
	if (rc) {
		free(table);
		mdb_txn_abort(t->mdb);
		return rc;
	}
	rc = mdt_errno(mdb_txn_commit(t->mdb));
	if (rc) {
		free(table);
		return rc;
	}
	if (t->ost_dirty || t->n_ost_updates)
		mdt_ost_install(t->s, table, count);
	mdt_redo_after_commit(t);
	atomic_fetch_add(&t->s->promised, t->promised);
	mdt_reserve_hold(t->s);
	return 0;
}

int mdt_txn_commit(struct mdt_txn *t)
{
	int rc;

	if (!t->write) {
		mdb_txn_abort(t->mdb); /* nothing to make durable */
		rc = 0;
	} else if (t->parent) {
		rc = commit_child(t);
	} else {
		rc = commit_top(t);
	}
	txn_free(t);
	return rc;
}

void mdt_txn_abort(struct mdt_txn *t)
{
	if (!t)
		return;
	mdb_txn_abort(t->mdb);
	txn_free(t);
}
