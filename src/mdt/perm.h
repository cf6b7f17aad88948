/*
 * Permission decisions, made exactly as Linux's VFS makes them for a local file system
 * (fs/namei.c generic_permission, fs/attr.c setattr_prepare, fs/xattr.c xattr_permission,
 * fs/inode.c inode_init_owner), with uid 0 holding every capability and nobody else any.
 *
 * Pure functions of a credential and an owner/mode triple, so they can be tested one by one.
 */
#ifndef LOOM_MDT_PERM_H
#define LOOM_MDT_PERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/types.h"
#include "proto/wire.h"

#define MDT_MAY_EXEC  0x1
#define MDT_MAY_WRITE 0x2
#define MDT_MAY_READ  0x4

/* Who owns an inode and its mode (type bits included). */
struct mdt_owner {
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
};

/* Is gid the caller's primary group or one of its supplementary groups? */
bool mdt_perm_in_group(const struct loom_cred *cr, uint32_t gid);
/* inode_owner_or_capable(): the owner, or root. */
bool mdt_perm_owner_or_root(const struct loom_cred *cr, const struct mdt_owner *o);

/* generic_permission(): may (MDT_MAY_*) checked against the owner, group or other bits, the first
 * class the caller belongs to deciding. Root may read and write anything and search any directory,
 * but executes a non-directory only if some x bit is set. 0 or -EACCES. */
int mdt_perm_access(const struct loom_cred *cr, const struct mdt_owner *o, int may);

/* check_sticky(): in a sticky directory only the file's owner, the directory's owner or root may
 * remove or rename an entry. 0 or -EPERM. */
int mdt_perm_sticky(const struct loom_cred *cr, const struct mdt_owner *dir,
		    const struct mdt_owner *victim);

/* The owner, group and mode of a new inode in directory `dir`: the caller's uid; the directory's
 * gid if it is setgid (a new directory then is setgid too), else the caller's gid. A new
 * non-directory that asks for setgid and group-exec in a setgid directory whose group the caller is
 * not in loses setgid. `mode` has its type bits; for a directory the caller has already cleared
 * setuid/setgid from the request, as mkdir(2) does. */
void mdt_perm_new_inode(const struct loom_cred *cr, const struct mdt_owner *dir, uint32_t mode,
			struct mdt_owner *out);

/* setattr_prepare() and friends for one MDS_SETATTR: checks each change the request asks for and
 * computes the owner and mode that result (setgid cleared by chmod of a non-member's file;
 * setuid/setgid cleared by chown/chgrp of a non-directory and by truncation by non-root).
 * 0, -EPERM (chmod/chown/explicit times by a non-owner) or -EACCES (truncate or touch without
 * write permission). */
int mdt_perm_setattr(const struct loom_cred *cr, const struct mdt_owner *cur,
		     const struct lw_setattr *sa, struct mdt_owner *next);

/* The setuid/setgid bits that truncation (or a write) by this caller removes from a regular file's
 * mode: setuid always, setgid when group-executable or when the caller is not in the file's group;
 * none for root. */
uint32_t mdt_perm_kill_on_truncate(const struct loom_cred *cr, const struct mdt_owner *o);

/* The xattr namespaces Loom stores. */
enum mdt_xattr_ns { MDT_XNS_USER, MDT_XNS_TRUSTED, MDT_XNS_SECURITY };

/* The namespace of an xattr name: -EOPNOTSUPP for an unknown prefix, -EINVAL for a bare prefix. */
int mdt_xattr_ns(const char *name, size_t len, enum mdt_xattr_ns *ns);

/* xattr_permission(): may is MDT_MAY_READ (get) or MDT_MAY_WRITE (set, remove).
 * user.*: only on regular files and directories (-EPERM to write, -ENODATA to read others), only
 * by the owner or root in a sticky directory, then r/w permission (-EACCES). trusted.*: root only
 * (-EPERM to write, -ENODATA to read). security.*: anyone reads, root writes (as the capability
 * module requires without an LSM). system.* (POSIX ACLs) is not supported: -EOPNOTSUPP. */
int mdt_perm_xattr(const struct loom_cred *cr, const struct mdt_owner *o, enum mdt_xattr_ns ns,
		   int may);

#endif
