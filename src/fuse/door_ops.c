/*
 * What each door request does: the libloom call of the same name, on the session's connection
 * (which acts as the caller: door.c set its cred from the kernel's word). Nothing the caller
 * sends is trusted: lengths are bounded by the slot, handles are looked up in the session's own
 * table, and what is parsed from the shared memory (a layout, times) is copied out of it first,
 * since the caller can change it meanwhile.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "fuse/door_srv.h"
#include "loom/loom_ll.h"

static const enum door_fh_kind fh_kind_of[DOOR_OP_COUNT] = {
#define DOOR_FH(name, paths, fh, change) [DOOR_OP_##name] = fh,
	DOOR_OPS(DOOR_FH)
#undef DOOR_FH
};

static const enum door_change change_of[DOOR_OP_COUNT] = {
#define DOOR_CHANGE(name, paths, fh, change) [DOOR_OP_##name] = change,
	DOOR_OPS(DOOR_CHANGE)
#undef DOOR_CHANGE
};

/* The handle a request names, with a reference, or NULL. */
static struct door_handle *handle_get(struct door_session *s, uint64_t fh, enum door_fh_kind kind)
{
	struct door_handle *h;

	pthread_mutex_lock(&s->lock);
	h = u64map_get(&s->handles, fh);
	if (h && h->kind == kind)
		h->refs++;
	else
		h = NULL;
	pthread_mutex_unlock(&s->lock);
	return h;
}

static int handle_close(struct door_session *s, struct door_handle *h)
{
	int rc = 0;

	if (h->kind == DOOR_FH_FILE)
		rc = loom_close(h->u.file);
	else if (h->kind == DOOR_FH_DIR)
		loom_closedir(h->u.dir);
	else
		door_pf_free(s, h->u.pf);
	pthread_mutex_destroy(&h->lock);
	free(h);
	return rc;
}

/* Drops a reference; the last one closes (and returns the close's error). */
static int handle_unref(struct door_session *s, struct door_handle *h)
{
	bool last;

	pthread_mutex_lock(&s->lock);
	last = --h->refs == 0;
	pthread_mutex_unlock(&s->lock);
	return last ? handle_close(s, h) : 0;
}

static unsigned *handle_count(struct door_session *s, enum door_fh_kind kind)
{
	return kind == DOOR_FH_FILE ? &s->nfiles : kind == DOOR_FH_DIR ? &s->ndirs : &s->npf;
}

static const unsigned handle_most[] = { [DOOR_FH_FILE] = DOOR_MAX_FILES, [DOOR_FH_DIR] = DOOR_MAX_DIRS,
					[DOOR_FH_PREFETCH] = DOOR_PF_PER_SESSION };

/* Takes a handle out of the table: its table reference goes with the caller's. */
static int handle_remove(struct door_session *s, struct door_handle *h, uint64_t fh)
{
	pthread_mutex_lock(&s->lock);
	if (u64map_get(&s->handles, fh) == h) {
		u64map_del(&s->handles, fh);
		(*handle_count(s, h->kind))--;
		h->refs--; /* the table's */
	}
	pthread_mutex_unlock(&s->lock);
	return handle_unref(s, h);
}

static int64_t handle_add(struct door_session *s, enum door_fh_kind kind, void *obj)
{
	struct door_handle *h = calloc(1, sizeof(*h));
	int64_t fh = -ENOMEM;

	if (h) {
		unsigned *count = handle_count(s, kind);

		h->kind = kind;
		h->refs = 1;
		pthread_mutex_init(&h->lock, NULL);
		if (kind == DOOR_FH_FILE)
			h->u.file = obj;
		else if (kind == DOOR_FH_DIR)
			h->u.dir = obj;
		else
			h->u.pf = obj;
		pthread_mutex_lock(&s->lock);
		if (*count >= handle_most[kind])
			fh = -EMFILE;
		else if (u64map_put(&s->handles, s->next_fh, h) == 0)
			fh = (int64_t)s->next_fh++, (*count)++;
		pthread_mutex_unlock(&s->lock);
		if (fh >= 0)
			return fh;
		pthread_mutex_destroy(&h->lock);
		free(h);
	}
	if (kind == DOOR_FH_FILE)
		loom_close(obj);
	else if (kind == DOOR_FH_DIR)
		loom_closedir(obj);
	else
		door_pf_free(s, obj);
	return fh;
}

static void close_one(uint64_t fh, void *val, void *arg)
{
	(void)fh;
	handle_close(arg, val);
}

void door_handles_close(struct door_session *s)
{
	/* Only the last channel's thread is left: nothing else holds a reference. */
	u64map_each(&s->handles, close_one, s);
	u64map_destroy(&s->handles);
	u64map_init(&s->handles);
	s->nfiles = s->ndirs = s->npf = 0;
}

/* The stat in fixed-width fields, in the slot. */
static int64_t put_stat(int rc, const struct stat *st, void *slot, struct door_rep *rep)
{
	if (rc == 0) {
		loom_attr_from_stat(st, slot);
		rep->len = sizeof(struct loom_attr);
	}
	return rc;
}

static int64_t do_readdir(loom_dir *d, void *slot, size_t cap, struct door_rep *rep)
{
	size_t used = 0;
	int64_t count = 0;
	struct loom_dirent ent;

	/* Room for the longest entry is left before asking for the next. */
	while (used + sizeof(struct door_dirent) + LOOM_NAME_MAX + 8 <= cap) {
		struct door_dirent de = { 0 };
		int rc = loom_readdir(d, &ent);

		if (rc < 0)
			return count ? count : rc; /* what was read goes first; the error comes again */
		if (rc == 0)
			break;
		de.ino = ent.ino;
		de.type = ent.type;
		de.namelen = (uint16_t)strnlen(ent.name, LOOM_NAME_MAX);
		memcpy((char *)slot + used, &de, sizeof(de));
		memcpy((char *)slot + used + sizeof(de), ent.name, de.namelen);
		used += (sizeof(de) + de.namelen + 7) & ~(size_t)7;
		rep->len = used;
		count++;
	}
	return count;
}

/* A struct loom_layout from the slot, copied out of it and checked. */
static int layout_from_slot(const void *slot, size_t len, struct loom_layout **out)
{
	struct loom_layout *l;

	if (len < sizeof(*l) || len > sizeof(*l) + LOOM_MAX_STRIPES * sizeof(struct loom_ostobj))
		return -EINVAL;
	l = malloc(len);
	if (!l)
		return -ENOMEM;
	memcpy(l, slot, len);
	l->pool[sizeof(l->pool) - 1] = '\0';
	if (len != sizeof(*l) + (size_t)l->nobjs * sizeof(struct loom_ostobj)) {
		free(l);
		return -EINVAL;
	}
	*out = l;
	return 0;
}

static int64_t do_getlayout(loom_fs *fs, const char *path, void *slot, struct door_rep *rep)
{
	struct loom_layout *l;
	size_t len;
	int rc = loom_getlayout(fs, path, &l);

	if (rc)
		return rc;
	len = sizeof(*l) + (size_t)l->nobjs * sizeof(struct loom_ostobj);
	if (len > DOOR_SLOT_BYTES) {
		rc = -E2BIG;
	} else {
		memcpy(slot, l, len);
		rep->len = len;
	}
	loom_layout_free(l);
	return rc;
}

static int64_t do_open(struct door_session *s, const char *path, const struct door_req *rq, void *slot,
		       struct door_rep *rep)
{
	struct loom_layout *l = NULL;
	size_t head = 0;
	loom_file *f;
	int64_t rc;
	struct stat st;

	if (rq->len) {
		rc = layout_from_slot(slot, rq->len, &l);
		if (rc == 0)
			rc = loom_create(s->fs, path, (int)rq->flags, rq->mode, l, &f);
		free(l);
	} else {
		rc = loom_open(s->fs, path, (int)rq->flags, rq->mode, &f);
	}
	if (rc)
		return rc;
	loom_file_attr(f, &st);
	/* The file's head after its attributes, when asked for one (a reader's open): a small file
	 * then needs no read request at all. Read before the handle is known, and so ours alone. */
	if (rq->arg && ((int)rq->flags & O_ACCMODE) == O_RDONLY && S_ISREG(st.st_mode)) {
		size_t room = DOOR_SLOT_BYTES - sizeof(struct loom_attr);
		ssize_t n = loom_pread(f, (char *)slot + sizeof(struct loom_attr),
				       rq->arg < room ? (size_t)rq->arg : room, 0);

		head = n > 0 ? (size_t)n : 0;
	}
	rc = handle_add(s, DOOR_FH_FILE, f);
	if (rc >= 0) {
		put_stat(0, &st, slot, rep);
		rep->len += head;
	}
	return rc;
}

/* What a read left in the slot. */
static int64_t read_reply(ssize_t n, struct door_rep *rep)
{
	if (n > 0)
		rep->len = (uint64_t)n;
	return n;
}

/* The requests on an open file or directory. */
static int64_t do_handle_locked(struct door_session *s, struct door_handle *h, const struct door_req *rq, void *slot,
			 struct door_rep *rep)
{
	loom_file *f = h->u.file;
	struct stat st;
	off_t pos;
	int64_t rc;

	switch (rq->op) {
	case DOOR_OP_READDIR: return do_readdir(h->u.dir, slot, rq->len, rep);
	case DOOR_OP_CLOSEDIR:
	case DOOR_OP_CLOSE:
	case DOOR_OP_PF_STOP: return handle_remove(s, h, rq->fh);
	case DOOR_OP_PF_ITEMS:
	case DOOR_OP_PF_START:
	case DOOR_OP_PF_TAKE:
	case DOOR_OP_PF_STATS: return door_pf_do(s, h->u.pf, rq, slot, rep);
	case DOOR_OP_PREAD: return read_reply(loom_pread(f, slot, rq->len, rq->off), rep);
	case DOOR_OP_PWRITE: return loom_pwrite(f, slot, rq->len, rq->off);
	case DOOR_OP_READ: return read_reply(loom_read(f, slot, rq->len), rep);
	case DOOR_OP_WRITE: return loom_write(f, slot, rq->len);
	case DOOR_OP_LSEEK:
		rc = loom_lseek(f, rq->off, (int)rq->flags, &pos);
		return rc ? rc : pos;
	case DOOR_OP_SEEK_DATA:
		rc = loom_seek_data(f, rq->off, (int)rq->flags, &pos);
		return rc ? rc : pos;
	case DOOR_OP_FALLOCATE: return loom_fallocate(f, (int)rq->flags, rq->off, (off_t)rq->arg);
	case DOOR_OP_FSYNC: return loom_fsync(f);
	case DOOR_OP_FTRUNCATE: return loom_ftruncate(f, rq->off);
	case DOOR_OP_FSTAT: return put_stat(loom_fstat(f, &st), &st, slot, rep);
	case DOOR_OP_FILE_ATTR:
		loom_file_attr(f, &st);
		return put_stat(0, &st, slot, rep);
	}
	return -EOPNOTSUPP;
}

static int64_t do_handle(struct door_session *s, struct door_handle *h, const struct door_req *rq, void *slot,
			 struct door_rep *rep)
{
	/* A listing's page and a file's position are one state: one request at a time uses them.
	 * Reads and writes at an offset go on side by side, as libloom allows. */
	bool shared = rq->op == DOOR_OP_READDIR || rq->op == DOOR_OP_READ || rq->op == DOOR_OP_WRITE ||
		      rq->op == DOOR_OP_LSEEK || rq->op == DOOR_OP_PF_ITEMS || rq->op == DOOR_OP_PF_START ||
		      rq->op == DOOR_OP_PF_TAKE;
	int64_t rc;

	if (shared)
		pthread_mutex_lock(&h->lock);
	rc = do_handle_locked(s, h, rq, slot, rep);
	if (shared)
		pthread_mutex_unlock(&h->lock);
	return rc;
}

/* The sysctl, as the kernel reads it at each link (1 where it cannot be read: the safe side). */
static bool protected_hardlinks(void)
{
	FILE *f = fopen("/proc/sys/fs/protected_hardlinks", "re");
	int v = 1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 1;
		fclose(f);
	}
	return v != 0;
}

/* fs.protected_hardlinks, which the kernel applies to links made through the mount (may_linkat):
 * a user links only a file it owns, or a regular file it may read and write that is neither
 * setuid nor setgid-executable. */
static int link_allowed(struct door_session *s, const char *path)
{
	const struct loom_cred *cr = &s->cred;
	struct stat st;
	bool in_group;
	int rc;

	if (cr->uid == 0 || !protected_hardlinks())
		return 0;
	rc = loom_lstat(s->fs, path, &st);
	if (rc)
		return rc;
	in_group = st.st_gid == cr->gid;
	if (st.st_uid == cr->uid)
		return 0;
	if (!S_ISREG(st.st_mode) || (st.st_mode & S_ISUID) ||
	    (st.st_mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP))
		return -EPERM;
	for (uint32_t i = 0; i < cr->ngroups && !in_group; i++)
		in_group = cr->groups[i] == st.st_gid;
	/* The owner's bits are not the caller's (it is not the owner): the group's, else the others'. */
	if (((in_group ? st.st_mode >> 3 : st.st_mode) & 06) != 06)
		return -EPERM;
	return 0;
}

static int64_t do_path(struct door_session *s, const struct door_req *rq, const char *const p[2], void *slot,
		       struct door_rep *rep)
{
	loom_fs *fs = s->fs;
	struct timespec times[2];
	struct statvfs sv;
	struct stat st;
	struct loom_layout *l;
	struct door_pf *pf;
	uint64_t granted;
	loom_dir *d;
	size_t len = 0;
	int64_t rc;

	switch (rq->op) {
	case DOOR_OP_STAT: return put_stat(loom_stat(fs, p[0], &st), &st, slot, rep);
	case DOOR_OP_LSTAT: return put_stat(loom_lstat(fs, p[0], &st), &st, slot, rep);
	case DOOR_OP_MKDIR: return loom_mkdir(fs, p[0], rq->mode);
	case DOOR_OP_RMDIR: return loom_rmdir(fs, p[0]);
	case DOOR_OP_UNLINK: return loom_unlink(fs, p[0]);
	case DOOR_OP_RENAME: return loom_rename(fs, p[0], p[1], rq->flags);
	case DOOR_OP_LINK:
		rc = link_allowed(s, p[0]);
		return rc ? rc : loom_link(fs, p[0], p[1]);
	case DOOR_OP_SYMLINK: return loom_symlink(fs, p[0], p[1]);
	case DOOR_OP_CHMOD: return loom_chmod(fs, p[0], rq->mode);
	case DOOR_OP_CHOWN: return loom_chown(fs, p[0], rq->flags, rq->mode);
	case DOOR_OP_TRUNCATE: return loom_truncate(fs, p[0], rq->off);
	case DOOR_OP_REMOVEXATTR: return loom_removexattr(fs, p[0], p[1]);
	case DOOR_OP_DELLAYOUT: return loom_dellayout(fs, p[0]);
	case DOOR_OP_SYNC: return loom_sync(fs);
	case DOOR_OP_GETLAYOUT: return do_getlayout(fs, p[0], slot, rep);
	case DOOR_OP_OPEN: return do_open(s, p[0], rq, slot, rep);
	case DOOR_OP_SETXATTR: return loom_setxattr(fs, p[0], p[1], slot, rq->len, (int)rq->flags);
	case DOOR_OP_UTIMENS:
		if (rq->len != sizeof(times))
			return -EINVAL;
		memcpy(times, slot, sizeof(times));
		return loom_utimens(fs, p[0], times);
	case DOOR_OP_STATFS:
		rc = loom_statfs(fs, &sv);
		if (rc == 0) {
			loom_fsattr_from_statvfs(&sv, slot);
			rep->len = sizeof(struct loom_fsattr);
		}
		return rc;
	case DOOR_OP_SETLAYOUT:
		rc = layout_from_slot(slot, rq->len, &l);
		if (rc == 0) {
			rc = loom_setlayout(fs, p[0], l);
			free(l);
		}
		return rc;
	case DOOR_OP_OPENDIR:
		rc = loom_opendir(fs, p[0], &d);
		return rc ? rc : handle_add(s, DOOR_FH_DIR, d);
	case DOOR_OP_PF_NEW:
		rc = door_pf_new(s, rq, &pf, &granted);
		if (rc == 0 && (rc = handle_add(s, DOOR_FH_PREFETCH, pf)) >= 0) {
			memcpy(slot, &granted, sizeof(granted));
			rep->len = sizeof(granted);
		}
		return rc;
	case DOOR_OP_READLINK:
	case DOOR_OP_GETXATTR:
	case DOOR_OP_LISTXATTR:
		rc = rq->op == DOOR_OP_READLINK ? loom_readlink(fs, p[0], slot, rq->len, &len) :
		     rq->op == DOOR_OP_GETXATTR ? loom_getxattr(fs, p[0], p[1], slot, rq->len, &len) :
						  loom_listxattr(fs, p[0], slot, rq->len, &len);
		if (rc == 0)
			rep->len = len < rq->len ? len : rq->len;
		return rc ? rc : (int64_t)len;
	}
	return -EOPNOTSUPP;
}

static bool changes(const struct door_req *rq)
{
	if (change_of[rq->op] == DOOR_MAY_CHANGE)
		return (rq->flags & (O_CREAT | O_TRUNC)) || (rq->flags & O_ACCMODE) != O_RDONLY;
	return change_of[rq->op] == DOOR_CHANGES;
}

void door_do(struct door_session *s, void *slot, const struct door_req *rq, const char *const paths[2],
	     struct door_rep *rep)
{
	enum door_fh_kind kind = fh_kind_of[rq->op];
	struct door_handle *h;

	rep->len = 0;
	if (rq->len > DOOR_SLOT_BYTES) {
		rep->rc = -EINVAL;
	} else if (changes(rq) && lm_door_read_only(s->door)) {
		rep->rc = -EROFS;
	} else if (kind == DOOR_FH_NONE) {
		rep->rc = do_path(s, rq, paths, slot, rep);
	} else if (!(h = handle_get(s, rq->fh, kind))) {
		rep->rc = -EBADF;
	} else {
		rep->rc = do_handle(s, h, rq, slot, rep);
		if (rq->op != DOOR_OP_CLOSE && rq->op != DOOR_OP_CLOSEDIR && rq->op != DOOR_OP_PF_STOP)
			(void)handle_unref(s, h);
	}
	if (rep->rc >= 0 && rep->len > DOOR_SLOT_BYTES)
		rep->rc = -EPROTO, rep->len = 0; /* never: every answer above is bounded by the slot */
}
