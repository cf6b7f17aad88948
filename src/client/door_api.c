/*
 * The public calls of a loom_fs connected through a mount's door (door.c): each becomes the
 * door request of its name (src/common/door.h), and its answer the call's. A read or write
 * longer than the slot goes in slot-sized pieces, as a short read or write ends it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "client/door.h"

/* A request whose answer is a struct loom_attr in the slot. */
static int attr_call(loom_fs *fs, struct door_req *rq, const char *path, struct stat *st, int64_t *val)
{
	struct loom_attr a;
	struct door_rep rep;
	int rc = door_call(fs, rq, path, NULL, NULL, 0, &a, sizeof(a), &rep);

	if (rc == 0 && rep.rc >= 0 && rep.len != sizeof(a))
		return -EPROTO;
	if (rc)
		return rc;
	if (rep.rc < 0)
		return (int)rep.rc;
	abi_stat_from_attr(&a, st);
	if (val)
		*val = rep.rc;
	return 0;
}

/* A request that answers only a value. */
static int64_t simple_call(loom_fs *fs, struct door_req *rq, const char *p0, const char *p1, const void *in,
			   size_t in_len)
{
	struct door_rep rep;
	int rc = door_call(fs, rq, p0, p1, in, in_len, NULL, 0, &rep);

	return rc ? rc : rep.rc;
}

int door_stat(loom_fs *fs, const char *path, bool follow, struct stat *st)
{
	struct door_req rq = { .op = follow ? DOOR_OP_STAT : DOOR_OP_LSTAT };

	return attr_call(fs, &rq, path, st, NULL);
}

int door_path_op(loom_fs *fs, int op, const char *p0, const char *p1, uint32_t flags, uint32_t mode, int64_t off)
{
	struct door_req rq = { .op = (uint32_t)op, .flags = flags, .mode = mode, .off = off };

	if (op == DOOR_OP_MKDIR)
		rq.mode &= ~fs->umask; /* this process's, as a local mkdir(2) */
	return (int)simple_call(fs, &rq, p0, p1, NULL, 0);
}

/* A request whose answer is bytes in the slot, up to cap (0: the size only). */
static int bytes_call(loom_fs *fs, int op, const char *p0, const char *p1, void *buf, size_t cap, size_t *len)
{
	struct door_req rq = { .op = (uint32_t)op, .len = cap < DOOR_SLOT_BYTES ? cap : DOOR_SLOT_BYTES };
	struct door_rep rep;
	int rc = door_call(fs, &rq, p0, p1, NULL, 0, buf, cap, &rep);

	if (rc)
		return rc;
	if (rep.rc < 0)
		return (int)rep.rc;
	*len = (size_t)rep.rc;
	return 0;
}

int door_readlink(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len)
{
	return bytes_call(fs, DOOR_OP_READLINK, path, NULL, buf, cap, len);
}

int door_getxattr(loom_fs *fs, const char *path, const char *name, void *buf, size_t cap, size_t *len)
{
	return bytes_call(fs, DOOR_OP_GETXATTR, path, name, buf, cap, len);
}

int door_listxattr(loom_fs *fs, const char *path, char *buf, size_t cap, size_t *len)
{
	return bytes_call(fs, DOOR_OP_LISTXATTR, path, NULL, buf, cap, len);
}

int door_setxattr(loom_fs *fs, const char *path, const char *name, const void *value, size_t len, int flags)
{
	struct door_req rq = { .op = DOOR_OP_SETXATTR, .len = len, .flags = (uint32_t)flags };

	if (len > DOOR_SLOT_BYTES)
		return -E2BIG;
	return (int)simple_call(fs, &rq, path, name, value, len);
}

int door_utimens(loom_fs *fs, const char *path, const struct timespec times[2])
{
	struct timespec t[2];
	struct door_req rq = { .op = DOOR_OP_UTIMENS, .len = sizeof(t) };

	if (times) {
		t[0] = times[0];
		t[1] = times[1];
	} else {
		t[0].tv_nsec = t[1].tv_nsec = UTIME_NOW;
		t[0].tv_sec = t[1].tv_sec = 0;
	}
	return (int)simple_call(fs, &rq, path, NULL, t, sizeof(t));
}

int door_statfs(loom_fs *fs, struct statvfs *st)
{
	struct door_req rq = { .op = DOOR_OP_STATFS };
	struct door_rep rep;
	struct loom_fsattr a;
	int rc = door_call(fs, &rq, NULL, NULL, NULL, 0, &a, sizeof(a), &rep);

	if (rc)
		return rc;
	if (rep.rc < 0)
		return (int)rep.rc;
	if (rep.len != sizeof(a))
		return -EPROTO;
	abi_statvfs_from_fsattr(&a, st);
	return 0;
}

static size_t layout_bytes(const struct loom_layout *l)
{
	return sizeof(*l) + (size_t)l->nobjs * sizeof(struct loom_ostobj);
}

int door_getlayout(loom_fs *fs, const char *path, struct loom_layout **out)
{
	struct door_req rq = { .op = DOOR_OP_GETLAYOUT, .len = DOOR_SLOT_BYTES };
	size_t cap = sizeof(struct loom_layout) + LOOM_MAX_STRIPES * sizeof(struct loom_ostobj);
	struct loom_layout *l = malloc(cap);
	struct door_rep rep;
	int rc;

	if (!l)
		return -ENOMEM;
	rc = door_call(fs, &rq, path, NULL, NULL, 0, l, cap, &rep);
	if (rc == 0 && rep.rc < 0)
		rc = (int)rep.rc;
	if (rc == 0 && (rep.len < sizeof(*l) || rep.len > cap || rep.len != layout_bytes(l)))
		rc = -EPROTO;
	if (rc) {
		free(l);
		return rc;
	}
	*out = l;
	return 0;
}

int door_setlayout(loom_fs *fs, const char *path, const struct loom_layout *layout)
{
	struct door_req rq = { .op = DOOR_OP_SETLAYOUT, .len = layout_bytes(layout) };

	return (int)simple_call(fs, &rq, path, NULL, layout, rq.len);
}

/* ---- directories ---- */

#define DOOR_DIR_PAGE (64u << 10)

int door_opendir(loom_fs *fs, const char *path, loom_dir **out)
{
	struct door_req rq = { .op = DOOR_OP_OPENDIR };
	loom_dir *d = calloc(1, sizeof(*d));
	int64_t fh;

	if (!d || !(d->page = malloc(DOOR_DIR_PAGE))) {
		free(d);
		return -ENOMEM;
	}
	fh = simple_call(fs, &rq, path, NULL, NULL, 0);
	if (fh < 0) {
		free(d->page);
		free(d);
		return (int)fh;
	}
	d->fs = fs;
	d->door_fh = (uint64_t)fh;
	*out = d;
	return 0;
}

int door_readdir(loom_dir *d, struct loom_dirent *ent)
{
	struct door_dirent de;

	while (d->left == 0) {
		struct door_req rq = { .op = DOOR_OP_READDIR, .fh = d->door_fh, .len = DOOR_DIR_PAGE };
		struct door_rep rep;
		int rc;

		if (d->eof)
			return 0;
		rc = door_call(d->fs, &rq, NULL, NULL, NULL, 0, d->page, DOOR_DIR_PAGE, &rep);
		if (rc)
			return rc;
		if (rep.rc < 0)
			return (int)rep.rc;
		if (rep.rc == 0)
			d->eof = true;
		d->left = (uint32_t)rep.rc;
		d->page_len = (uint32_t)rep.len;
		d->door_pos = 0;
	}
	if (d->door_pos + sizeof(de) > d->page_len)
		return -EPROTO;
	memcpy(&de, (char *)d->page + d->door_pos, sizeof(de));
	if (de.namelen > LOOM_NAME_MAX || d->door_pos + sizeof(de) + de.namelen > d->page_len)
		return -EPROTO;
	ent->ino = de.ino;
	ent->type = de.type;
	memcpy(ent->name, (char *)d->page + d->door_pos + sizeof(de), de.namelen);
	ent->name[de.namelen] = '\0';
	d->door_pos += (uint32_t)((sizeof(de) + de.namelen + 7) & ~(size_t)7);
	d->left--;
	return 1;
}

void door_closedir(loom_dir *d)
{
	struct door_req rq = { .op = DOOR_OP_CLOSEDIR, .fh = d->door_fh };

	(void)simple_call(d->fs, &rq, NULL, NULL, NULL, 0);
	free(d->page);
	free(d);
}

/* ---- files ---- */

int door_open(loom_fs *fs, const char *path, int flags, mode_t mode, const struct loom_layout *layout,
	      loom_file **out)
{
	bool reader = (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_CREAT | O_TRUNC));
	struct door_req rq = { .op = DOOR_OP_OPEN, .flags = (uint32_t)flags, .mode = mode & ~fs->umask,
			       .len = layout ? layout_bytes(layout) : 0, .arg = reader ? DOOR_HEAD_BYTES : 0 };
	size_t cap = sizeof(struct loom_attr) + (reader ? DOOR_HEAD_BYTES : 0);
	struct door_rep rep;
	loom_file *f = calloc(1, sizeof(*f));
	char *reply = malloc(cap);
	int rc;

	if (!f || !reply) {
		free(f);
		free(reply);
		return -ENOMEM;
	}
	if (rq.len > DOOR_SLOT_BYTES)
		rc = -EINVAL;
	else
		rc = door_call(fs, &rq, path, NULL, layout, rq.len, reply, cap, &rep);
	if (rc == 0 && rep.rc < 0)
		rc = (int)rep.rc;
	if (rc == 0 && (rep.len < sizeof(struct loom_attr) || rep.len > cap))
		rc = -EPROTO;
	if (rc) {
		free(reply);
		free(f);
		return rc;
	}
	f->fs = fs;
	f->door_fh = (uint64_t)rep.rc;
	f->flags = flags;
	if (reader) {
		/* What a reader sees first, as of the open (close-to-open): kept for its reads. */
		char *fit = realloc(reply, rep.len); /* a small file's head: no 64 KiB kept for it */

		f->door_head = fit ? fit : reply;
		f->door_head_len = rep.len - sizeof(struct loom_attr);
		abi_stat_from_attr(f->door_head, &f->door_st);
	} else {
		free(reply);
	}
	*out = f;
	return 0;
}

/* The part of a read the head kept at open answers: the count (0: none of it). */
static size_t from_head(loom_file *f, void *buf, size_t len, off_t off, bool *eof)
{
	size_t n;

	*eof = false;
	if (!f->door_head || (uint64_t)off >= f->door_head_len) {
		/* A head shorter than asked was the whole file: past it is its end. */
		*eof = f->door_head && f->door_head_len < DOOR_HEAD_BYTES;
		return 0;
	}
	n = f->door_head_len - (size_t)off < len ? f->door_head_len - (size_t)off : len;
	memcpy(buf, (char *)f->door_head + sizeof(struct loom_attr) + off, n);
	if (n < len && f->door_head_len < DOOR_HEAD_BYTES)
		*eof = true;
	return n;
}

/* PREAD, PWRITE, READ or WRITE, in slot-sized pieces. */
ssize_t door_rw(loom_file *f, int op, void *buf, size_t len, off_t off)
{
	bool writing = op == DOOR_OP_PWRITE || op == DOOR_OP_WRITE;
	size_t done = 0;

	if (off < 0 && (op == DOOR_OP_PREAD || op == DOOR_OP_PWRITE))
		return -EINVAL;
	if (op == DOOR_OP_PREAD) {
		bool eof;

		done = from_head(f, buf, len, off, &eof);
		if (eof || done == len)
			return (ssize_t)done;
	}
	do {
		size_t piece = len - done < DOOR_SLOT_BYTES ? len - done : DOOR_SLOT_BYTES;
		struct door_req rq = { .op = (uint32_t)op, .fh = f->door_fh, .off = off + (off_t)done, .len = piece };
		struct door_rep rep;
		int rc = door_call(f->fs, &rq, NULL, NULL, writing ? (char *)buf + done : NULL, writing ? piece : 0,
				   writing ? NULL : (char *)buf + done, writing ? 0 : piece, &rep);

		if (rc == 0 && rep.rc > (int64_t)piece)
			rc = -EPROTO;
		if (rc == 0 && rep.rc < 0)
			rc = (int)rep.rc;
		if (rc)
			return done ? (ssize_t)done : rc; /* what was done counts; the error comes again */
		done += (size_t)rep.rc;
		if ((size_t)rep.rc < piece)
			break;
	} while (done < len);
	return (ssize_t)done;
}

int door_file_op(loom_file *f, int op, int64_t off, uint32_t flags, uint64_t arg, int64_t *val)
{
	struct door_req rq = { .op = (uint32_t)op, .fh = f->door_fh, .off = off, .flags = flags, .arg = arg };
	int64_t rc = simple_call(f->fs, &rq, NULL, NULL, NULL, 0);

	if (rc >= 0 && val)
		*val = rc;
	return rc < 0 ? (int)rc : 0;
}

int door_seek(loom_file *f, int op, off_t off, int whence, off_t *out)
{
	int64_t v;
	int rc = door_file_op(f, op, off, (uint32_t)whence, 0, &v);

	if (rc == 0 && out)
		*out = (off_t)v;
	return rc;
}

int door_fstat(loom_file *f, int op, struct stat *st)
{
	if (op == DOOR_OP_FILE_ATTR && f->door_head) {
		*st = f->door_st; /* as of the open, as a keyed client's own view of a file it reads */
		return 0;
	}
	struct door_req rq = { .op = (uint32_t)op, .fh = f->door_fh };

	return attr_call(f->fs, &rq, NULL, st, NULL);
}

int door_close_file(loom_file *f)
{
	struct door_req rq = { .op = DOOR_OP_CLOSE, .fh = f->door_fh };
	int rc = (int)simple_call(f->fs, &rq, NULL, NULL, NULL, 0);

	free(f->door_head);
	free(f);
	return rc;
}
