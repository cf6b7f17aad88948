/*
 * What a change touches that leases cover (leases.c): the directories whose entries it changes
 * (ops.def's LW_OPF_ENTRIES), and the files whose inode leases it breaks: their attributes,
 * layout, data or names. A change that names its file by a name (an unlink, a rename over a
 * file, an open-creating write to an existing name) has it looked up here, in the transaction
 * the change is about to run in, so the answer is the one the change will act on. A rename of a
 * directory moves every path below it: it breaks every inode lease (a client opens through names
 * the kernel cached; the MDS's dir_moves, which a holder's cached open carries, moved).
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "mds/dispatch.h"

static bool opens_to_write(uint32_t open_flags)
{
	return (open_flags & O_ACCMODE) != O_RDONLY || (open_flags & O_TRUNC);
}

/* The inode a name leads to now, if it is not a directory: the file a change of that name
 * breaks. A directory sets *dir instead. */
static void named(struct mdt_txn *t, const struct lw_mds_req *q, uint64_t parent,
		  const struct lw_name *name, struct lease_targets *out, bool *dir, bool frees)
{
	struct lw_attr attr;

	if (!t || !name->len || out->ninos >= LEASE_TARGET_INOS)
		return;
	if (mdt_lookup(t, &q->cred, parent, name->s, name->len, &attr) != 0)
		return; /* the change fails the same way, or makes the name: no file of it changes */
	if (S_ISDIR(attr.mode)) {
		if (dir)
			*dir = true;
		return;
	}
	if (frees)
		out->may_free |= 1u << out->ninos;
	out->inos[out->ninos++] = attr.ino;
}

/* A directory the change removes (rmdir, a rename over it): its leases are recalled first, or an
 * exclusive holder's creates sent behind would find it gone. */
static void removed_dir(struct mdt_txn *t, const struct lw_mds_req *q, uint64_t parent,
			const struct lw_name *name, struct lease_targets *out)
{
	struct lw_attr attr;

	if (t && name->len && out->ndirs < 3 &&
	    mdt_lookup(t, &q->cred, parent, name->s, name->len, &attr) == 0 && S_ISDIR(attr.mode))
		out->dirs[out->ndirs++] = attr.ino;
}

static void add(struct lease_targets *out, uint64_t ino)
{
	if (ino && out->ninos < LEASE_TARGET_INOS)
		out->inos[out->ninos++] = ino;
}

void mds_lease_targets(struct mdt_txn *t, const struct lw_mds_req *q, bool inodes,
		       struct lease_targets *out)
{
	bool dir = false;

	*out = (struct lease_targets){ 0 };
	switch (q->op) {
	case LW_OP_MDS_CREATE:
		out->dirs[out->ndirs++] = q->u.create.f.parent;
		if (inodes && (q->u.create.f.flags & LW_CR_OPEN) && !(q->u.create.f.flags & LW_CR_EXCL) &&
		    opens_to_write(q->u.create.f.open_flags))
			named(t, q, q->u.create.f.parent, &q->u.create.name, out, NULL, false);
		break;
	case LW_OP_MDS_MKDIR: out->dirs[out->ndirs++] = q->u.mkdir.f.parent; break;
	case LW_OP_MDS_SYMLINK: out->dirs[out->ndirs++] = q->u.symlink.f.parent; break;
	case LW_OP_MDS_RMDIR:
		out->dirs[out->ndirs++] = q->u.name.f.parent;
		removed_dir(t, q, q->u.name.f.parent, &q->u.name.name, out);
		break;
	case LW_OP_MDS_UNLINK:
		out->dirs[out->ndirs++] = q->u.name.f.parent;
		out->unleased = (q->u.name.f.flags & LW_NM_UNLEASED) != 0;
		if (inodes)
			named(t, q, q->u.name.f.parent, &q->u.name.name, out, NULL, true);
		break;
	case LW_OP_MDS_LINK:
		out->dirs[out->ndirs++] = q->u.link.f.new_parent;
		if (inodes)
			add(out, q->u.link.f.ino);
		break;
	case LW_OP_MDS_RENAME:
		out->dirs[out->ndirs++] = q->u.rename.f.src_parent;
		if (q->u.rename.f.dst_parent != q->u.rename.f.src_parent)
			out->dirs[out->ndirs++] = q->u.rename.f.dst_parent;
		removed_dir(t, q, q->u.rename.f.dst_parent, &q->u.rename.dst, out);
		if (inodes) {
			named(t, q, q->u.rename.f.src_parent, &q->u.rename.src, out, &dir, false);
			/* An exchange may move a directory from the destination name too. */
			named(t, q, q->u.rename.f.dst_parent, &q->u.rename.dst, out, &dir, true);
			out->all_inodes = dir;
		}
		break;
	case LW_OP_MDS_OPEN:
		if (inodes && opens_to_write(q->u.open.open_flags))
			add(out, q->u.open.ino);
		break;
	case LW_OP_MDS_SETATTR:
		if (inodes)
			add(out, q->u.setattr.ino);
		break;
	case LW_OP_MDS_SETXATTR:
	case LW_OP_MDS_REMOVEXATTR:
		if (inodes)
			add(out, q->u.xattr.f.ino);
		break;
	case LW_OP_MDS_SETLAYOUT:
		if (inodes)
			add(out, q->u.setlayout.f.ino);
		break;
	case LW_OP_MDS_MIRROR:
		if (inodes)
			add(out, q->u.mirror.f.ino);
		break;
	case LW_OP_MDS_SWAP_LAYOUTS:
		if (inodes) {
			add(out, q->u.swap.ino);
			add(out, q->u.swap.tmp);
		}
		break;
	case LW_OP_MDS_NODEMAP:
		/* Identities map anew: a cached open was checked under the old mapping. */
		out->all_inodes = inodes;
		break;
	default:
		break;
	}
}
