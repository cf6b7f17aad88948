/*
 * A formatted MDT in a fresh directory under /tmp, and one-call wrappers that run an operation
 * the way the MDS does: in a child transaction of a write transaction, the child committed when
 * the operation succeeds and aborted when it fails. Without a batch each operation commits its own
 * top-level transaction; with fx_batch_begin() they all go into one (much faster for bulk work).
 */
#ifndef LOOM_TEST_MDT_FIXTURE_H
#define LOOM_TEST_MDT_FIXTURE_H

#include <stdint.h>

#include "check.h"
#include "mdt/store.h"

#define FX_FSNAME "testfs"

struct fx {
	char dir[64];
	struct mdt_store *s;
	struct timespec now;     /* the clock operations see; every mutating wrapper ticks it */
	struct mdt_txn *batch;   /* when set, operations run in children of it */
	struct mdt_txn *op_top;  /* the top-level transaction of the operation in progress */
};

void fx_init(struct fx *f);           /* format and open */
void fx_reopen(struct fx *f);         /* close and open again */
void fx_fini(struct fx *f);           /* close and remove the directory */
void fx_rm_rf(const char *path);
struct timespec fx_tick(struct fx *f); /* one second later */

void fx_batch_begin(struct fx *f);
void fx_batch_commit(struct fx *f);

/* The transaction for one operation, and its end: commit on rc == 0, abort otherwise.
 * fx_op_end returns rc (or the commit's error). */
struct mdt_txn *fx_op_begin(struct fx *f);
int fx_op_end(struct fx *f, struct mdt_txn *t, int rc);
/* A read transaction. */
struct mdt_txn *fx_read_begin(struct fx *f);

struct loom_cred fx_root(void);
/* uid, gid, then ngroups supplementary gids. */
struct loom_cred fx_cred(uint32_t uid, uint32_t gid, uint32_t ngroups, ...);

/* A request layout (nobjs 0). */
struct lw_layout fx_layout_req(uint32_t stripe_size, int32_t count, int32_t offset,
			       const char *pool);

int fx_mkdir(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	     uint32_t mode, uint64_t *ino);
/* Exclusive create of a regular file (mode without type bits is fine). */
int fx_create(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	      uint32_t mode, uint64_t *ino);
int fx_create_full(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
		   uint32_t mode, uint32_t rdev, bool excl, const struct lw_layout *req,
		   struct lw_attr *attr, struct loom_layout **layout, bool *created);
int fx_symlink(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	       const char *target, uint64_t *ino);
int fx_link(struct fx *f, const struct loom_cred *cr, uint64_t ino, uint64_t parent,
	    const char *name);
int fx_unlink(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	      struct mdt_unlinked *victim);
int fx_rmdir(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name);
int fx_rename(struct fx *f, const struct loom_cred *cr, uint64_t sp, const char *sn, uint64_t dp,
	      const char *dn, uint32_t flags, struct mdt_unlinked *victim);
int fx_setattr(struct fx *f, const struct loom_cred *cr, const struct lw_setattr *sa,
	       struct lw_attr *out);
int fx_open(struct fx *f, const struct loom_cred *cr, uint64_t ino, uint32_t flags,
	    struct lw_attr *out, struct loom_layout **layout);
int fx_release(struct fx *f, uint64_t ino);
int fx_setxattr(struct fx *f, const struct loom_cred *cr, uint64_t ino, const char *name,
		const char *value, uint32_t flags);
int fx_setlayout(struct fx *f, const struct loom_cred *cr, uint64_t ino,
		 const struct lw_layout *req, uint32_t flags, struct loom_layout **out);

int fx_lookup(struct fx *f, const struct loom_cred *cr, uint64_t parent, const char *name,
	      struct lw_attr *out);
int fx_getattr(struct fx *f, uint64_t ino, struct lw_attr *out);
int fx_getlayout(struct fx *f, uint64_t ino, struct loom_layout **out);
/* The inode a name (looked up as root) names; REQUIREs that it exists. */
uint64_t fx_ino(struct fx *f, uint64_t parent, const char *name);

/* Registers an OST: want_idx (UINT32_MAX: any), uuid, free space in KiB. */
int fx_ost_register(struct fx *f, uint32_t want_idx, const char *uuid, uint64_t free_kib,
		    uint32_t *idx);
/* n OSTs "ost0".."ost<n-1>", indexes 0..n-1, 1 TiB free each. */
void fx_add_osts(struct fx *f, uint32_t n);
struct lw_statfs fx_statfs_kib(uint64_t free_kib);

#endif
