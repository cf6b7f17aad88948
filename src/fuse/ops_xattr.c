/* Extended attributes, and the virtual "loom.lov" (alias "lustre.lov") that carries a file's
 * layout, as Lustre's does: read it to see where the data lives, write it on a directory or an
 * empty file to decide. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "fuse/lmount.h"

/* How long a layout change waits for this mount's handles of the file to be released. */
#define RELEASE_WAIT_MS 2000

static bool is_lov(const char *name)
{
	return !strcmp(name, LM_LOV_XATTR) || !strcmp(name, LM_LOV_XATTR_LUSTRE);
}

static void reply_value(fuse_req_t req, int rc, const void *buf, size_t size, size_t len)
{
	if (rc)
		lm_reply_err(req, rc);
	else if (size == 0)
		LM_REPLY(fuse_reply_xattr(req, len));
	else if (len > size)
		lm_reply_err(req, ERANGE);
	else
		LM_REPLY(fuse_reply_buf(req, buf, len));
}

static void get_lov(fuse_req_t req, const struct loom_cred *cr, fuse_ino_t ino, size_t size)
{
	struct loom_layout *l = NULL;
	void *buf = NULL;
	size_t len = 0;
	int rc = loom_ll_getlayout(lm_of(req)->fs, cr, ino, &l);

	if (rc == 0) {
		loom_layout_to_xattr(l, NULL, 0, &len);
		buf = malloc(len);
		rc = buf ? loom_layout_to_xattr(l, buf, len, &len) : -ENOMEM;
	}
	reply_value(req, rc, buf, size, len);
	free(buf);
	loom_layout_free(l);
}

static void lm_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	LM_INTERRUPTIBLE(req);
	struct loom_cred cr;
	size_t cap = size > LOOM_XATTR_SIZE_MAX ? LOOM_XATTR_SIZE_MAX : size, len = 0;
	void *buf = NULL;
	int rc;

	lm_cred(req, &cr);
	if (is_lov(name)) {
		get_lov(req, &cr, ino, size);
		return;
	}
	if (cap && !(buf = malloc(cap))) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	rc = loom_ll_getxattr(lm_of(req)->fs, &cr, ino, name, buf, cap, &len);
	reply_value(req, rc, buf, size, len);
	free(buf);
}

static void lm_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	LM_INTERRUPTIBLE(req);
	struct lmount *m = lm_of(req);
	struct loom_cred cr;
	int lflags = 0;

	lm_cred(req, &cr);
	if (is_lov(name)) {
		struct loom_layout *l = NULL;
		int rc = loom_layout_from_xattr(value, size, &l);

		if (rc == 0)
			rc = lm_changed(m, loom_ll_setlayout(m->fs, &cr, ino, l));
		/* The MDS lays out no file that is open (its data may not show in its size yet). If
		 * the handle is this mount's, it may be one whose close(2) has returned while the
		 * kernel's release is on its way (`touch f; setfattr -n loom.lov ... f`): once it
		 * lands, the file is closed as its user believes. A handle a process still holds
		 * keeps it busy. */
		if (rc == -EBUSY && lm_handles_wait(m, ino, RELEASE_WAIT_MS))
			rc = lm_changed(m, loom_ll_setlayout(m->fs, &cr, ino, l));
		loom_layout_free(l);
		lm_reply_err(req, rc);
		return;
	}
	if (flags & XATTR_CREATE)
		lflags |= LOOM_XATTR_CREATE;
	if (flags & XATTR_REPLACE)
		lflags |= LOOM_XATTR_REPLACE;
	lm_reply_err(req, lm_changed(m, loom_ll_setxattr(m->fs, &cr, ino, name, value, size, lflags)));
}

static void lm_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	LM_INTERRUPTIBLE(req);
	struct loom_cred cr;
	size_t cap = size > LOOM_XATTR_SIZE_MAX ? LOOM_XATTR_SIZE_MAX : size, len = 0;
	char *buf = NULL;
	int rc;

	if (cap && !(buf = malloc(cap))) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	lm_cred(req, &cr);
	/* loom.lov is not listed: tools that copy every listed xattr would carry layouts along. */
	rc = loom_ll_listxattr(lm_of(req)->fs, &cr, ino, buf, cap, &len);
	reply_value(req, rc, buf, size, len);
	free(buf);
}

static void lm_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	LM_INTERRUPTIBLE(req);
	struct loom_cred cr;

	lm_cred(req, &cr);
	if (is_lov(name)) {
		/* On a directory: drop its own default (as `setstripe -d`). */
		lm_reply_err(req, loom_ll_dellayout(lm_of(req)->fs, &cr, ino));
		return;
	}
	lm_reply_err(req, lm_changed(lm_of(req), loom_ll_removexattr(lm_of(req)->fs, &cr, ino, name)));
}

void lm_xattr_ops(struct fuse_lowlevel_ops *ops)
{
	ops->getxattr = lm_getxattr;
	ops->setxattr = lm_setxattr;
	ops->listxattr = lm_listxattr;
	ops->removexattr = lm_removexattr;
}
