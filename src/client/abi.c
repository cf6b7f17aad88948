/*
 * What bindings need to read libloom's answers without copying libc's layouts: struct stat and
 * struct statvfs in fixed-width fields (and back, for the door's answers), and the sizes of the
 * structs a binding mirrors.
 */
#include <string.h>

#include "client/internal.h"
#include "loom/loom.h"

void loom_attr_from_stat(const struct stat *st, struct loom_attr *out)
{
	*out = (struct loom_attr){
		.dev = st->st_dev, .ino = st->st_ino, .nlink = st->st_nlink, .rdev = st->st_rdev,
		.mode = st->st_mode, .uid = st->st_uid, .gid = st->st_gid,
		.size = st->st_size, .blksize = st->st_blksize, .blocks = st->st_blocks,
		.atime_sec = st->st_atim.tv_sec, .atime_nsec = st->st_atim.tv_nsec,
		.mtime_sec = st->st_mtim.tv_sec, .mtime_nsec = st->st_mtim.tv_nsec,
		.ctime_sec = st->st_ctim.tv_sec, .ctime_nsec = st->st_ctim.tv_nsec,
	};
}

void loom_fsattr_from_statvfs(const struct statvfs *st, struct loom_fsattr *out)
{
	*out = (struct loom_fsattr){
		.bsize = st->f_bsize, .frsize = st->f_frsize, .blocks = st->f_blocks,
		.bfree = st->f_bfree, .bavail = st->f_bavail, .files = st->f_files,
		.ffree = st->f_ffree, .favail = st->f_favail, .fsid = st->f_fsid, .flag = st->f_flag,
		.namemax = st->f_namemax,
	};
}

/* The inverses, for answers that arrive in the fixed-width form (a mount's door). */
void abi_stat_from_attr(const struct loom_attr *a, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_dev = a->dev;
	st->st_ino = a->ino;
	st->st_nlink = a->nlink;
	st->st_rdev = a->rdev;
	st->st_mode = a->mode;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_size = a->size;
	st->st_blksize = a->blksize;
	st->st_blocks = a->blocks;
	st->st_atim = (struct timespec){ a->atime_sec, a->atime_nsec };
	st->st_mtim = (struct timespec){ a->mtime_sec, a->mtime_nsec };
	st->st_ctim = (struct timespec){ a->ctime_sec, a->ctime_nsec };
}

void abi_statvfs_from_fsattr(const struct loom_fsattr *a, struct statvfs *st)
{
	memset(st, 0, sizeof(*st));
	st->f_bsize = a->bsize;
	st->f_frsize = a->frsize;
	st->f_blocks = a->blocks;
	st->f_bfree = a->bfree;
	st->f_bavail = a->bavail;
	st->f_files = a->files;
	st->f_ffree = a->ffree;
	st->f_favail = a->favail;
	st->f_fsid = a->fsid;
	st->f_flag = a->flag;
	st->f_namemax = a->namemax;
}

static const struct {
	const char *name;
	size_t size;
} struct_sizes[] = {
	{ "stat", sizeof(struct stat) },
	{ "statvfs", sizeof(struct statvfs) },
	{ "attr", sizeof(struct loom_attr) },
	{ "fsattr", sizeof(struct loom_fsattr) },
	{ "connect_opts", sizeof(struct loom_connect_opts) },
	{ "dirent", sizeof(struct loom_dirent) },
	{ "layout", sizeof(struct loom_layout) },
	{ "ostobj", sizeof(struct loom_ostobj) },
	{ "prefetch_item", sizeof(struct loom_prefetch_item) },
	{ "prefetch_opts", sizeof(struct loom_prefetch_opts) },
	{ "prefetch_stats", sizeof(struct loom_prefetch_stats) },
	{ "mirror_diff", sizeof(struct loom_mirror_diff) },
};

size_t loom_struct_size(const char *name)
{
	if (!name)
		return 0;
	for (size_t i = 0; i < sizeof(struct_sizes) / sizeof(struct_sizes[0]); i++)
		if (strcmp(struct_sizes[i].name, name) == 0)
			return struct_sizes[i].size;
	return 0;
}
