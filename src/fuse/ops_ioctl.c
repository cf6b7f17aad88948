/*
 * ioctls on the mount's files and directories (src/common/mount_ioctl.h): what `loom df` and
 * `loom pool list` need from the MDS, for users who do not hold the file system key, and the
 * mount's own counters (`loom stats --mount`: LOOM_IOC_MSTATS). Only
 * figures anyone on the node may see are answered (statfs(2) gives the sums to anyone; Lustre's
 * `lfs df` and `lfs pool_list` show these to any user), so no caller's identity is needed: the
 * kernel let the caller open the file, and that is all it takes, as for statfs(2).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/door.h"
#include "common/mount_ioctl.h"
#include "fuse/lmount.h"

static void statfs_out(const struct statvfs *st, struct loom_ioc_statfs *o)
{
	o->blocks = st->f_blocks;
	o->bfree = st->f_bfree;
	o->bavail = st->f_bavail;
	o->files = st->f_files;
	o->ffree = st->f_ffree;
	o->favail = st->f_favail;
	o->bsize = (uint32_t)st->f_bsize;
	o->frsize = (uint32_t)st->f_frsize;
	o->namemax = (uint32_t)st->f_namemax;
	o->flag = (uint32_t)st->f_flag;
}

static void ioc_targets(fuse_req_t req, const struct loom_ioc_targets *in)
{
	struct lmount *m = lm_of(req);
	struct loom_ioc_targets *out = calloc(1, sizeof(*out));
	struct loom_target *t = NULL;
	uint32_t n = 0;
	int rc;

	if (!out) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	rc = loom_targets(m->fs, &t, &n);
	if (rc) {
		free(out);
		lm_reply_err(req, rc);
		return;
	}
	out->start = in->start;
	out->total = n;
	snprintf(out->fsname, sizeof(out->fsname), "%s", m->fsname);
	for (uint32_t i = in->start; i < n && out->count < LOOM_IOC_TARGETS_PAGE; i++) {
		struct loom_ioc_target *o = &out->t[out->count++];

		o->kind = (uint32_t)t[i].kind;
		o->idx = t[i].idx;
		o->flags = t[i].flags;
		if (!(t[i].flags & LOOM_TGTF_INACTIVE))
			statfs_out(&t[i].st, &o->st);
	}
	free(t);
	LM_REPLY(fuse_reply_ioctl(req, 0, out, sizeof(*out)));
	free(out);
}

/* A pool's name as the ioctl carries it: NUL-terminated within its field. */
static bool name_ok(const char name[16])
{
	return memchr(name, '\0', 16) != NULL && name[0];
}

static void ioc_pools(fuse_req_t req, const struct loom_ioc_pools *in)
{
	struct lmount *m = lm_of(req);
	struct loom_ioc_pools *out = calloc(1, sizeof(*out));
	struct loom_pool *pools = NULL;
	uint32_t n = 0;
	int rc;

	if (!out) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	rc = loom_pool_list(m->fs, NULL, &pools, &n);
	if (rc) {
		free(out);
		lm_reply_err(req, rc);
		return;
	}
	out->start = in->start;
	out->total = n;
	snprintf(out->fsname, sizeof(out->fsname), "%s", m->fsname);
	for (uint32_t i = in->start; i < n && out->count < LOOM_IOC_POOLS_PAGE; i++)
		snprintf(out->names[out->count++], sizeof(out->names[0]), "%s", pools[i].name);
	loom_pool_list_free(pools);
	LM_REPLY(fuse_reply_ioctl(req, 0, out, sizeof(*out)));
	free(out);
}

static void ioc_pool(fuse_req_t req, const struct loom_ioc_pool *in)
{
	struct lmount *m = lm_of(req);
	struct loom_ioc_pool *out;
	struct loom_pool *pools = NULL;
	uint32_t n = 0;
	int rc;

	if (!name_ok(in->name)) {
		lm_reply_err(req, EINVAL);
		return;
	}
	out = calloc(1, sizeof(*out));
	if (!out) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	rc = loom_pool_list(m->fs, in->name, &pools, &n);
	if (rc == 0 && n == 0)
		rc = -ENOENT;
	if (rc) {
		free(out);
		loom_pool_list_free(pools);
		lm_reply_err(req, rc);
		return;
	}
	memcpy(out->name, in->name, sizeof(out->name));
	snprintf(out->fsname, sizeof(out->fsname), "%s", m->fsname);
	out->start = in->start;
	out->total = pools[0].nosts;
	for (uint32_t k = in->start; k < pools[0].nosts && out->count < LOOM_IOC_POOL_PAGE; k++)
		out->osts[out->count++] = pools[0].osts[k];
	loom_pool_list_free(pools);
	LM_REPLY(fuse_reply_ioctl(req, 0, out, sizeof(*out)));
	free(out);
}

/*
 * libfuse hands over restricted ioctls only: in_buf holds the _IOC_SIZE(cmd) bytes the caller's
 * argument held, and the reply may be as long. FUSE_IOCTL_DIR (a directory's descriptor) is
 * taken as a file's: every command here is about the file system, not the inode.
 */
/* Where this mount's door is (src/common/door.h), and who serves it. */
static void ioc_door(fuse_req_t req)
{
	struct loom_ioc_door out = { .pid = (uint32_t)getpid(), .version = DOOR_VERSION };

	snprintf(out.path, sizeof(out.path), "%s", lm_door_path(lm_of(req)->door));
	LM_REPLY(fuse_reply_ioctl(req, 0, &out, sizeof(out)));
}

/* The mount's job id settings, and the job id this very request carries (set at its start from
 * the caller's process: common.c), which is what the caller's other requests carry too. */
static void ioc_jobid(fuse_req_t req)
{
	struct lmount *m = lm_of(req);
	struct loom_ioc_jobid out;

	memset(&out, 0, sizeof(out));
	snprintf(out.var, sizeof(out.var), "%s", m->jobid.var);
	snprintf(out.name, sizeof(out.name), "%s", m->jobid.name);
	loom_jobid(m->fs, out.job, sizeof(out.job));
	LM_REPLY(fuse_reply_ioctl(req, 0, &out, sizeof(out)));
}

/* The mount's counters as parameters (mount_ioctl.h, LOOM_IOC_MSTATS): anyone who may open a
 * file here may read them, as anyone may read Lustre's llite.*.stats; clearing them is for root
 * and the user who mounted. */
static void ioc_mstats(fuse_req_t req, const struct loom_ioc_mstats *in)
{
	struct lmount *m = lm_of(req);
	struct textbuf tb = TEXTBUF_INIT;
	uid_t uid = fuse_req_ctx(req)->uid;
	struct loom_ioc_mstats *out;
	int rc = 0;

	if (!memchr(in->pattern, '\0', sizeof(in->pattern)) || !memchr(in->value, '\0', sizeof(in->value)) ||
	    (in->flags & ~LOOM_MSTATS_SET)) {
		lm_reply_err(req, EINVAL);
		return;
	}
	out = calloc(1, sizeof(*out));
	if (!out) {
		lm_reply_err(req, ENOMEM);
		return;
	}
	if (!(in->flags & LOOM_MSTATS_SET)) {
		lm_mstats_get_param(&m->mstats, in->pattern, &tb, &out->matched);
		rc = tb.err;
		if (rc == 0 && tb.len >= sizeof(out->text))
			rc = -EOVERFLOW; /* refused whole: a cut text would read as fewer counters */
		if (rc == 0 && tb.len) {
			memcpy(out->text, tb.buf, tb.len);
			out->len = (uint32_t)tb.len;
		}
		tb_free(&tb);
	} else if (uid != 0 && uid != getuid()) {
		rc = -EPERM;
	} else {
		rc = lm_mstats_set_param(&m->mstats, in->pattern, in->value, &out->matched);
		if (rc == -ENOENT)
			rc = 0; /* none of this mount's: matched says so */
	}
	if (rc)
		lm_reply_err(req, rc);
	else
		LM_REPLY(fuse_reply_ioctl(req, 0, out, sizeof(*out)));
	free(out);
}

static void lm_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg, struct fuse_file_info *fi,
		     unsigned flags, const void *in_buf, size_t in_bufsz, size_t out_bufsz)
{
	LM_INTERRUPTIBLE(req);
	unsigned int c = cmd; /* the caller's request, cut to 32 bits */
	size_t want;

	(void)ino;
	(void)arg;
	(void)fi;
	if (flags & FUSE_IOCTL_UNRESTRICTED) {
		lm_reply_err(req, ENOTTY);
		return;
	}
	switch (c) {
	case LOOM_IOC_TARGETS: want = sizeof(struct loom_ioc_targets); break;
	case LOOM_IOC_POOLS: want = sizeof(struct loom_ioc_pools); break;
	case LOOM_IOC_POOL: want = sizeof(struct loom_ioc_pool); break;
	case LOOM_IOC_DOOR: want = sizeof(struct loom_ioc_door); break;
	case LOOM_IOC_JOBID: want = sizeof(struct loom_ioc_jobid); break;
	case LOOM_IOC_MSTATS: want = sizeof(struct loom_ioc_mstats); break;
	default:
		/* lsattr's FS_IOC_GETFLAGS and the like: not a Loom file attribute. */
		lm_reply_err(req, ENOTTY);
		return;
	}
	if (in_bufsz < want || out_bufsz < want || !in_buf) {
		lm_reply_err(req, EINVAL);
		return;
	}
	if (c == LOOM_IOC_DOOR)
		ioc_door(req);
	else if (c == LOOM_IOC_JOBID)
		ioc_jobid(req);
	else if (c == LOOM_IOC_MSTATS)
		ioc_mstats(req, in_buf);
	else if (c == LOOM_IOC_TARGETS)
		ioc_targets(req, in_buf);
	else if (c == LOOM_IOC_POOLS)
		ioc_pools(req, in_buf);
	else
		ioc_pool(req, in_buf);
}

void lm_ioctl_ops(struct fuse_lowlevel_ops *ops)
{
	ops->ioctl = lm_ioctl;
}
