/* Directories: opendir, readdir, readdirplus, releasedir. A FUSE directory offset is the MDS's
 * readdir cookie, so a listing resumes exactly where it stopped while the directory changes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/lmount.h"

struct dir_fill {
	fuse_req_t req;
	struct lmount *m;
	uint64_t ino;
	char *buf;
	size_t size;
	size_t used;
	bool plus;
	uint64_t cookie; /* resumes after the last entry put in buf */
};

static int fill_one(void *arg, const struct loom_dirent *ent, const struct loom_ll_attr *a, uint64_t next)
{
	struct dir_fill *d = arg;
	size_t room = d->size - d->used, n;

	if (d->plus) {
		struct fuse_entry_param e;

		memset(&e, 0, sizeof(e));
		if (!strcmp(ent->name, ".") || !strcmp(ent->name, "..")) {
			/* The kernel takes no reference on these: give no inode to account for. */
			e.attr.st_ino = ent->ino;
			e.attr.st_mode = DTTOIF(ent->type);
		} else {
			e.ino = ent->ino;
			e.generation = 1;
			e.attr = a->st;
			e.attr_timeout = d->m->opts.attr_timeout;
			e.entry_timeout = d->m->opts.entry_timeout;
		}
		n = fuse_add_direntry_plus(d->req, d->buf + d->used, room, ent->name, &e, (off_t)next);
		/* A dentry the kernel now holds (unless the buffer was full). */
		if (n <= room && e.ino)
			lm_told_entry(d->m, d->ino, ent->name, a);
	} else {
		struct stat s;

		memset(&s, 0, sizeof(s));
		s.st_ino = ent->ino;
		s.st_mode = DTTOIF(ent->type);
		n = fuse_add_direntry(d->req, d->buf + d->used, room, ent->name, &s, (off_t)next);
	}
	if (n > room)
		return 1; /* full: this entry waits for the next call */
	d->used += n;
	d->cookie = next;
	return 0;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct dir_fill d = { .req = req, .m = lm_of(req), .ino = ino, .size = size, .plus = plus,
			      .cookie = (uint64_t)off };
	struct loom_cred cr;
	bool eof = false;
	int rc = 0;

	d.buf = malloc(size ? size : 1);
	if (!d.buf) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	lm_cred(req, &cr);
	/* One MDS page may hold fewer entries than fit: keep asking until full or at the end. */
	while (!eof) {
		size_t before = d.used;

		rc = loom_ll_readdir(d.m->fs, &cr, ino, d.cookie, plus, size - d.used, fill_one, &d, &eof);
		if (rc || d.used == before || d.used + 64 > size)
			break;
	}
	if (rc && d.used == 0)
		lm_reply_err(req, rc);
	else
		LM_REPLY(fuse_reply_buf(req, d.buf, d.used));
	free(d.buf);
}

static void lm_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_ll_expect ex;
	struct loom_ll_attr a;
	struct loom_cred cr;
	loom_file *f = NULL;
	int rc;

	lm_cred(req, &cr);
	/* As open(O_RDONLY|O_DIRECTORY): read permission is checked here; and as for a file, the
	 * names the kernel walked must still lead here (ls of a directory renamed elsewhere). */
	lm_open_expect(m, ino, (uint32_t)fuse_req_ctx(req)->pid, &ex);
	rc = loom_ll_open(m->fs, &cr, ino, O_RDONLY | O_DIRECTORY, &ex, &f, &a);
	rc = lm_open_settle(m, ino, (uint32_t)fuse_req_ctx(req)->pid, rc, &a, O_RDONLY);
	if (rc) {
		if (f)
			loom_close(f);
		lm_reply_err(req, rc);
		return;
	}
	fi->fh = (uintptr_t)f;
	lm_fh_held(m, fi->fh);
	if (LM_REPLY(fuse_reply_open(req, fi)) != 0) {
		lm_fh_given_back(m, fi->fh);
		loom_close(f);
	}
}

static void lm_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void lm_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void lm_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	(void)ino;
	lm_fh_given_back(lm_of(req), fi->fh);
	lm_reply_err(req, loom_close((loom_file *)(uintptr_t)fi->fh));
}

static void lm_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	LM_INTERRUPTIBLE(req);
	(void)ino;
	(void)datasync;
	(void)fi;
	/* The MDS may answer a change before it commits it: the directory's entries are durable
	 * once it committed everything this mount was answered. */
	lm_reply_err(req, loom_sync(lm_of(req)->fs));
}

void lm_dir_ops(struct fuse_lowlevel_ops *ops)
{
	ops->opendir = lm_opendir;
	ops->readdir = lm_readdir;
	ops->readdirplus = lm_readdirplus;
	ops->releasedir = lm_releasedir;
	ops->fsyncdir = lm_fsyncdir;
}
