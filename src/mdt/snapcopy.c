/*
 * A copy of the MDT as one read transaction sees it: a snapshot's namespace (issue 23).
 *
 * LMDB's own copy (mdb_env_copyfd2, mdt_store_copy_fd) begins its read transaction when it is
 * called, so the MDT would have to stay still for the whole copy to be the snapshot's point. Here
 * the caller opens the read transaction while metadata changes are held (the snapshot's barrier),
 * lets them go, and copies from it afterwards: the changes wait only as long as opening it takes,
 * whatever the MDT's size. LMDB keeps the transaction's pages while it is open (the live MDT grows
 * meanwhile instead of reusing them), so the copy runs at once and closes it.
 *
 * The copy goes to DIR.part, is synced, and only then renamed to DIR: a copy that a crash or an
 * error interrupted never passes for a whole one, and a DIR.part left behind is removed by the
 * next copy to that DIR.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "mdt/internal.h"
#include "mdt/store.h"

#define COPY_BATCH 20000 /* entries per write transaction of the copy (LMDB bounds a txn's dirty pages) */

static int copy_db(MDB_txn *src, MDB_dbi sdbi, MDB_env *dst, const char *name, uint64_t *entries)
{
	MDB_txn *w = NULL;
	MDB_cursor *cur = NULL;
	MDB_dbi ddbi;
	MDB_val k, v;
	int rc, got;
	uint32_t in_txn = 0;

	rc = mdt_errno(mdb_txn_begin(dst, NULL, 0, &w));
	if (rc == 0)
		rc = mdt_errno(mdb_dbi_open(w, name, MDB_CREATE, &ddbi));
	if (rc == 0)
		rc = mdt_errno(mdb_cursor_open(src, sdbi, &cur));
	for (got = rc ? MDB_NOTFOUND : mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && got == 0;
	     got = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		/* In key order, as the source holds them: appended, never searched for. */
		rc = mdt_errno(mdb_put(w, ddbi, &k, &v, MDB_APPEND));
		(*entries)++;
		if (rc == 0 && ++in_txn == COPY_BATCH) {
			rc = mdt_errno(mdb_txn_commit(w));
			w = NULL;
			in_txn = 0;
			if (rc == 0)
				rc = mdt_errno(mdb_txn_begin(dst, NULL, 0, &w));
		}
	}
	if (rc == 0 && got != MDB_NOTFOUND)
		rc = mdt_errno(got);
	if (cur)
		mdb_cursor_close(cur);
	if (rc == 0)
		rc = mdt_errno(mdb_txn_commit(w));
	else if (w)
		mdb_txn_abort(w);
	return rc;
}

static int fsync_path(const char *path, int flags)
{
	int fd = open(path, flags | O_RDONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	rc = fsync(fd) ? -errno : 0;
	close(fd);
	return rc;
}

/* The parent directory of path, in buf. */
static void parent_of(const char *path, char *buf, size_t cap)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, cap, ".");
	else if (slash == path)
		snprintf(buf, cap, "/");
	else
		snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

int mdt_store_copy_txn(struct mdt_txn *rt, const char *dir, uint64_t *entries)
{
	char part[4096], path[4096], parent[4096];
	MDB_env *dst = NULL;
	MDB_envinfo info;
	struct stat st;
	int rc;

	*entries = 0;
	if (!rt || rt->parent || snprintf(part, sizeof(part), "%s.part", dir) >= (int)sizeof(part))
		return -EINVAL;
	if (stat(dir, &st) == 0)
		return -EEXIST;
	/* What an interrupted copy left. */
	snprintf(path, sizeof(path), "%s/data.mdb", part);
	unlink(path);
	snprintf(path, sizeof(path), "%s/lock.mdb", part);
	unlink(path);
	if (rmdir(part) != 0 && errno != ENOENT)
		return -errno;
	if (mkdir(part, 0700) != 0)
		return -errno;
	mdb_env_info(rt->s->env, &info);
	rc = mdt_errno(mdb_env_create(&dst));
	if (rc == 0)
		rc = mdt_errno(mdb_env_set_maxdbs(dst, MDT_DB_COUNT + 4));
	if (rc == 0)
		rc = mdt_errno(mdb_env_set_mapsize(dst, info.me_mapsize));
	/* Unsynced while it is written: it counts only once synced and renamed below. */
	if (rc == 0)
		rc = mdt_errno(mdb_env_open(dst, part, MDB_NOSYNC, 0600));
	for (int i = 0; rc == 0 && i < MDT_DB_COUNT; i++)
		rc = copy_db(rt->mdb, rt->s->dbi[i], dst, mdt_db_name(i), entries);
	if (rc == 0)
		rc = mdt_errno(mdb_env_sync(dst, 1));
	if (dst)
		mdb_env_close(dst);
	/* The lock file is the live environment's business, not the copy's. */
	snprintf(path, sizeof(path), "%s/lock.mdb", part);
	unlink(path);
	if (rc == 0)
		rc = fsync_path(part, O_DIRECTORY);
	if (rc == 0 && rename(part, dir) != 0)
		rc = -errno;
	if (rc == 0) {
		parent_of(dir, parent, sizeof(parent));
		rc = fsync_path(parent, O_DIRECTORY);
	}
	if (rc && stat(part, &st) == 0) {
		snprintf(path, sizeof(path), "%s/data.mdb", part);
		unlink(path);
		rmdir(part);
	}
	return rc;
}
