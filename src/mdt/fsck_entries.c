/*
 * loom fsck, the MDT half, pass 3 (see fsck.c): directory entries. Readdir's records
 * (`dircookies`) against the entries (`dentries`, the authority on names), then each entry:
 * its name, its directory and inode, its readdir record, and directories named more than once.
 * Counts what the entries say for pass 4.
 */
#include "mdt/fsck_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static void key_name(const struct act *a, const char **name, size_t *len)
{
	*name = (const char *)a->key + 8;
	*len = a->klen - 8;
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
	rc = fsck_del_key(f, MDT_DB_DENTRIES, key, 8 + len);
	if (rc == 0 && fsck_cookie_name(f, dir, cookie, &cname, &clen) && clen == len &&
	    memcmp(cname, name, len) == 0) {
		mdt_put_be64(key + 8, cookie);
		rc = fsck_del_key(f, MDT_DB_DIRCOOKIES, key, 16);
	}
	return rc;
}

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
		return fsck_acts_push(q, &a);
	}
	cookie = mdt_get_be64((const uint8_t *)k->mv_data + 8);
	dir = fsck_find_dir(f, mdt_get_be64(k->mv_data));
	rc = mdt_dentry_get(f->t, mdt_get_be64(k->mv_data), (const char *)v->mv_data + sizeof(rec),
			    rec.namelen, &de);
	if (rc && rc != -ENOENT && rc != -EINVAL && rc != -EIO)
		return rc;
	if (!dir || cookie < MDT_COOKIE_FIRST || rc || de.cookie != cookie) {
		/* No entry points back at it: readdir would list a name lookup cannot find. */
		memcpy(a.key + 16, (const char *)v->mv_data + sizeof(rec), MIN(rec.namelen, 200u));
		a.b = MIN(rec.namelen, 200u);
		a.c = dir ? 0 : 1;
		return fsck_acts_push(q, &a);
	}
	dir->maxcookie = MAX(dir->maxcookie, cookie);
	return 0;
}

static int pass_cookies(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	char nb[300];
	int rc, frc;

	rc = fsck_walk(f, MDT_DB_DIRCOOKIES, cookie_rec, &q);
	for (size_t i = 0; rc == 0 && i < q.n; i++) {
		struct act *a = &q.v[i];
		uint64_t dir = a->klen >= 8 ? mdt_get_be64(a->key) : 0;

		REPAIR(f, frc, fsck_del_key(f, MDT_DB_DIRCOOKIES, a->key, a->klen));
		if (a->a)
			rc = fsck_report(f, MDT_FSCK_RECORD, dir, frc, "deleted",
					 "malformed readdir record");
		else
			rc = fsck_report(f, a->c ? MDT_FSCK_STRAY : MDT_FSCK_ENTRY_INDEX, a->c ? 0 : dir,
					 frc, "deleted",
					 "readdir record '%s' (cookie %llu) of %s %llu has no entry "
					 "pointing back at it: readdir lists a name lookup cannot find",
					 fsck_show_name((const char *)a->key + 16, a->b, nb, sizeof(nb)),
					 (unsigned long long)mdt_get_be64(a->key + 8),
					 a->c ? "missing directory" : "directory",
					 (unsigned long long)dir);
	}
	fsck_acts_free(&q);
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
	return fsck_acts_push(q, &d);
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
		return fsck_acts_push(q, &a);
	}
	memcpy(&a.de, v->mv_data, sizeof(a.de));
	dir = fsck_find(f, mdt_get_be64(k->mv_data));
	child = fsck_find(f, a.de.ino);
	if (lw_name_check(name, len) != 0 || mdt_name_is_dots(name, len)) {
		a.op = ACT_DEL_BOTH;
		a.a = 2; /* invalid name */
		return fsck_acts_push(q, &a);
	}
	if (!dir || !S_ISDIR(dir->mode) || !child) {
		a.op = ACT_DEL_BOTH;
		a.a = !dir ? 3 : !S_ISDIR(dir->mode) ? 4 : 5;
		return fsck_acts_push(q, &a);
	}
	if (child->ino == LOOM_ROOT_INO) {
		a.op = ACT_DEL_BOTH;
		a.a = 6; /* names the root */
		return fsck_acts_push(q, &a);
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
		rc = fsck_acts_push(q, &a);
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
		struct fino *dir = fsck_find(f, dirino), *child;
		const char *name;
		size_t len;
		uint64_t cookie = 0;

		key_name(a, &name, &len);
		fsck_show_name(name, len, nb, sizeof(nb));
		switch (a->op) {
		case ACT_DEL:
			REPAIR(f, frc, fsck_del_key(f, MDT_DB_DENTRIES, a->key, a->klen));
			rc = fsck_report(f, MDT_FSCK_RECORD, dir ? dirino : 0, frc, "deleted",
					 "%s in directory %llu", why[1], (unsigned long long)dirino);
			break;
		case ACT_DEL_BOTH:
			snprintf(msg, sizeof(msg), why[a->a], (unsigned long long)a->de.ino);
			REPAIR(f, frc, del_entry(f, dirino, name, len, a->de.cookie));
			rc = fsck_report(f, a->a == 6 ? MDT_FSCK_DIR_ENTRY
					    : a->a == 2 ? MDT_FSCK_BAD_ENTRY : MDT_FSCK_DANGLING,
					 dir && S_ISDIR(dir->mode) ? dirino : 0, frc, "entry deleted",
					 "'%s' (directory %llu): %s", nb, (unsigned long long)dirino, msg);
			break;
		case ACT_RETYPE:
		case ACT_REINDEX:
			REPAIR(f, frc, mdt_dentry_retarget(f->t, dirino, name, len, &a->de, a->de.ino,
							   (uint32_t)a->b));
			if (a->op == ACT_RETYPE)
				rc = fsck_report(f, MDT_FSCK_BAD_ENTRY, a->de.ino, frc, "type set",
						 "entry '%s' says type %u, the inode is a %s", nb,
						 (unsigned)a->c, fsck_type_name((uint32_t)a->b));
			else
				rc = fsck_report(f, MDT_FSCK_ENTRY_INDEX, a->de.ino, frc,
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
				child = fsck_find(f, a->de.ino);
				if (child && child->parent == dirino && child->cookie == a->de.cookie)
					child->cookie = cookie;
			}
			snprintf(f->fix, sizeof(f->fix), "moved to cookie %llu",
				 (unsigned long long)cookie);
			rc = fsck_report(f, MDT_FSCK_ENTRY_INDEX, a->de.ino, frc, f->fix,
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
		struct fino *dir = fsck_find(f, dirino), *child = fsck_find(f, a->de.ino);
		const char *name;
		size_t len;

		if (a->op != ACT_DIR2 || !dir || !child)
			continue;
		key_name(a, &name, &len);
		fsck_show_name(name, len, nb, sizeof(nb));
		if (child->links == 0) {
			uint64_t old = child->parent;
			REPAIR(f, frc, fsck_set_inode(f, child->ino, IF_PARENT, dirino));
			child->parent = dirino;
			child->cookie = a->de.cookie;
			child->links = 1;
			dir->subdirs++;
			dir->entries++;
			snprintf(f->fix, sizeof(f->fix), "\"..\" set to %llu",
				 (unsigned long long)dirino);
			rc = fsck_report(f, MDT_FSCK_DIR_PARENT, child->ino, frc, f->fix,
					 "\"..\" is %llu but the directory's entry '%s' is in %llu",
					 (unsigned long long)old, nb, (unsigned long long)dirino);
		} else {
			REPAIR(f, frc, del_entry(f, dirino, name, len, a->de.cookie));
			rc = fsck_report(f, MDT_FSCK_DIR_ENTRY, child->ino, frc, "entry deleted",
					 "a second entry '%s' in directory %llu names this directory "
					 "(a directory has one name)", nb, (unsigned long long)dirino);
		}
	}
	return rc;
}

int fsck_pass_entries(struct mdt_fsck *f)
{
	struct acts q = { 0 };
	int rc;

	rc = pass_cookies(f);
	if (rc == 0)
		rc = fsck_walk(f, MDT_DB_DENTRIES, dentry_rec, &q);
	if (rc == 0)
		rc = fix_entries(f, &q);
	if (rc == 0)
		rc = fix_dir_entries(f, &q);
	fsck_acts_free(&q);
	return rc;
}
