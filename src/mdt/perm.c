/*
 * Permission decisions as Linux makes them. Root (uid 0) stands for every capability
 * (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_FSETID, CAP_CHOWN, CAP_SYS_ADMIN); nobody else has any.
 */
#include "mdt/perm.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static bool is_root(const struct loom_cred *cr)
{
	return cr->uid == 0;
}

bool mdt_perm_in_group(const struct loom_cred *cr, uint32_t gid)
{
	uint32_t n = cr->ngroups < LOOM_MAX_GROUPS ? cr->ngroups : LOOM_MAX_GROUPS;

	if (cr->gid == gid)
		return true;
	for (uint32_t i = 0; i < n; i++)
		if (cr->groups[i] == gid)
			return true;
	return false;
}

bool mdt_perm_owner_or_root(const struct loom_cred *cr, const struct mdt_owner *o)
{
	return is_root(cr) || cr->uid == o->uid;
}

/* in_group_or_capable(): may this caller keep setgid on a file of group gid? */
static bool in_group_or_root(const struct loom_cred *cr, uint32_t gid)
{
	return is_root(cr) || mdt_perm_in_group(cr, gid);
}

int mdt_perm_access(const struct loom_cred *cr, const struct mdt_owner *o, int may)
{
	uint32_t bits = o->mode;

	may &= MDT_MAY_READ | MDT_MAY_WRITE | MDT_MAY_EXEC;
	if (is_root(cr)) {
		/* CAP_DAC_OVERRIDE: everything but executing a file nobody may execute. */
		if (!(may & MDT_MAY_EXEC) || S_ISDIR(o->mode) || (o->mode & (S_IXUSR | S_IXGRP | S_IXOTH)))
			return 0;
		return -EACCES;
	}
	/* The first class the caller is in decides, even if a later one would allow more:
	 * an owner denied by the owner bits is denied. */
	if (cr->uid == o->uid)
		bits >>= 6;
	else if (mdt_perm_in_group(cr, o->gid))
		bits >>= 3;
	return ((uint32_t)may & ~bits & 07) == 0 ? 0 : -EACCES;
}

int mdt_perm_sticky(const struct loom_cred *cr, const struct mdt_owner *dir,
		    const struct mdt_owner *victim)
{
	if (!(dir->mode & S_ISVTX))
		return 0;
	if (cr->uid == victim->uid || cr->uid == dir->uid || is_root(cr))
		return 0;
	return -EPERM;
}

void mdt_perm_new_inode(const struct loom_cred *cr, const struct mdt_owner *dir, uint32_t mode,
			struct mdt_owner *out)
{
	out->uid = cr->uid;
	out->gid = cr->gid;
	out->mode = mode;
	if (dir->mode & S_ISGID) {
		/* BSD group semantics: the directory's group, and setgid spreads to subdirectories. */
		out->gid = dir->gid;
		if (S_ISDIR(mode))
			out->mode |= S_ISGID;
		else if ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) &&
			 !in_group_or_root(cr, dir->gid))
			out->mode &= ~(uint32_t)S_ISGID; /* mode_strip_sgid() */
	}
}

uint32_t mdt_perm_kill_on_truncate(const struct loom_cred *cr, const struct mdt_owner *o)
{
	uint32_t kill = 0;

	if (is_root(cr) || !S_ISREG(o->mode))
		return 0;
	if (o->mode & S_ISUID)
		kill |= S_ISUID;
	if ((o->mode & S_ISGID) && ((o->mode & S_IXGRP) || !mdt_perm_in_group(cr, o->gid)))
		kill |= S_ISGID;
	return kill;
}

/* The setuid/setgid bits a chown or chgrp removes from a non-directory. Root included: since
 * Linux 2.2.13 root is treated like other users here, except that root may keep setgid on a file
 * that is not group-executable (setattr_should_drop_sgid()). */
static uint32_t kill_on_chown(const struct loom_cred *cr, const struct mdt_owner *o)
{
	uint32_t kill = 0;

	if (S_ISDIR(o->mode))
		return 0;
	if (o->mode & S_ISUID)
		kill |= S_ISUID;
	if ((o->mode & S_ISGID) && ((o->mode & S_IXGRP) || !in_group_or_root(cr, o->gid)))
		kill |= S_ISGID;
	return kill;
}

int mdt_perm_setattr(const struct loom_cred *cr, const struct mdt_owner *cur,
		     const struct lw_setattr *sa, struct mdt_owner *next)
{
	uint32_t valid = sa->valid;
	bool owner = mdt_perm_owner_or_root(cr, cur);
	bool explicit_time = ((valid & LW_SA_ATIME) && !(valid & LW_SA_ATIME_NOW)) ||
			     ((valid & LW_SA_MTIME) && !(valid & LW_SA_MTIME_NOW));
	bool touch = !explicit_time && (valid & (LW_SA_ATIME_NOW | LW_SA_MTIME_NOW));
	int rc;

	*next = *cur;

	/* A ctime alone (some FUSE kernels send it) is treated as a touch. */
	if ((valid & LW_SA_ALL & ~(uint32_t)LW_SA_FH) == LW_SA_CTIME)
		touch = true;

	/* Order as Linux: vfs_truncate()'s write check, then may_setattr()'s touch check, then
	 * setattr_prepare(): chown, chgrp, chmod, explicit times. */
	if ((valid & LW_SA_SIZE) && !(valid & LW_SA_FH)) {
		rc = mdt_perm_access(cr, cur, MDT_MAY_WRITE);
		if (rc)
			return rc;
	}
	if (touch && !owner) {
		rc = mdt_perm_access(cr, cur, MDT_MAY_WRITE);
		if (rc)
			return rc;
	}
	if (valid & LW_SA_UID) {
		/* chown_ok(): root, or the owner "changing" to the same uid. */
		if (!is_root(cr) && !(cr->uid == cur->uid && sa->uid == cur->uid))
			return -EPERM;
		next->uid = sa->uid;
	}
	if (valid & LW_SA_GID) {
		/* chgrp_ok(): root, or the owner changing to a group it is in (or keeping its own). */
		if (!is_root(cr) &&
		    !(cr->uid == cur->uid && (sa->gid == cur->gid || mdt_perm_in_group(cr, sa->gid))))
			return -EPERM;
		next->gid = sa->gid;
	}
	if (valid & LW_SA_MODE) {
		if (!owner)
			return -EPERM;
		next->mode = (cur->mode & S_IFMT) | (sa->mode & 07777);
		/* Setgid only for a member of the group the file will have. */
		if (!in_group_or_root(cr, next->gid))
			next->mode &= ~(uint32_t)S_ISGID;
	}
	if (explicit_time && !owner)
		return -EPERM;

	if (valid & (LW_SA_UID | LW_SA_GID))
		next->mode &= ~kill_on_chown(cr, cur);
	if (valid & LW_SA_SIZE)
		next->mode &= ~mdt_perm_kill_on_truncate(cr, cur);
	return 0;
}

static const struct {
	const char *prefix;
	size_t len;
	enum mdt_xattr_ns ns;
} xattr_prefixes[] = {
	{ "user.", 5, MDT_XNS_USER },
	{ "trusted.", 8, MDT_XNS_TRUSTED },
	{ "security.", 9, MDT_XNS_SECURITY },
	/* No system.*: those are POSIX ACLs, which Loom does not implement. Storing them as plain
	 * xattrs would let cp -a, tar and rsync believe an ACL now sets the mode bits; refusing
	 * them (EOPNOTSUPP, as a file system mounted noacl does) makes them chmod instead. */
};

int mdt_xattr_ns(const char *name, size_t len, enum mdt_xattr_ns *ns)
{
	for (size_t i = 0; i < sizeof(xattr_prefixes) / sizeof(xattr_prefixes[0]); i++) {
		if (len < xattr_prefixes[i].len || memcmp(name, xattr_prefixes[i].prefix, xattr_prefixes[i].len))
			continue;
		if (len == xattr_prefixes[i].len)
			return -EINVAL; /* "user." alone names nothing */
		*ns = xattr_prefixes[i].ns;
		return 0;
	}
	return -EOPNOTSUPP;
}

int mdt_perm_xattr(const struct loom_cred *cr, const struct mdt_owner *o, enum mdt_xattr_ns ns,
		   int may)
{
	bool write = may & MDT_MAY_WRITE;

	switch (ns) {
	case MDT_XNS_SECURITY:
		/* cap_inode_setxattr(): writing security.* needs CAP_SYS_ADMIN. */
		return write && !is_root(cr) ? -EPERM : 0;
	case MDT_XNS_TRUSTED:
		if (!is_root(cr))
			return write ? -EPERM : -ENODATA;
		return 0;
	case MDT_XNS_USER:
		if (!S_ISREG(o->mode) && !S_ISDIR(o->mode))
			return write ? -EPERM : -ENODATA;
		if (write && S_ISDIR(o->mode) && (o->mode & S_ISVTX) && !mdt_perm_owner_or_root(cr, o))
			return -EPERM;
		return mdt_perm_access(cr, o, may);
	}
	return -EOPNOTSUPP;
}
