/*
 * Inside loom fsck's MDT half: what fsck.c and its passes (fsck_*.c) share: the check's state,
 * its table of inodes, the repairs queued while a cursor is open, reporting and REPAIR. fsck.c
 * says how the check goes and which file holds which pass. Nothing outside src/mdt/fsck*.c
 * includes this; the API is fsck.h.
 */
#ifndef LOOM_MDT_FSCK_IMPL_H
#define LOOM_MDT_FSCK_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mdt/fsck.h"
#include "mdt/internal.h"

#include "common/util.h"

#define NOFIX 1               /* not repaired (report only, or nothing fsck can do) */

/* One inode of the table. */
struct fino {
	uint64_t ino;
	uint64_t parent;    /* dirs: the stored "..", then the directory of the accepted entry;
	                     * others: the directory of the first entry found (0 if none) */
	uint64_t cookie;    /* that entry's cookie: its readdir record holds the name */
	uint64_t entries;   /* dirs: entries counted in it */
	uint64_t maxcookie; /* dirs: the highest cookie its entries use */
	uint32_t mode;
	uint32_t nlink;     /* as stored */
	uint32_t links;     /* entries naming it (a directory: its accepted one) */
	uint32_t subdirs;   /* dirs: accepted subdirectory entries */
	uint32_t flags;     /* FI_* */
};

#define FI_ORPHAN 0x1u /* in the orphan list */
#define FI_LAYOUT 0x2u /* has a layout */
#define FI_TARGET 0x4u /* symlinks: has its target */
#define FI_REACH  0x8u /* dirs: reachable from the root (or about to be, through lost+found) */
#define FI_VISIT  0x10u

/* An object the MDT knows: stripe of a layout, or STRIPE_QUEUED (waiting for destruction, or
 * of a stray layout about to be queued). */
struct objref {
	uint32_t ost;
	uint32_t stripe;
	uint64_t objid;
	uint64_t ino;
};
#define STRIPE_QUEUED UINT32_MAX

struct ostnext {
	uint32_t idx;
	uint64_t next;
	uint64_t lost_below; /* a replaced OST: its missing objects below this id are lost */
};

/* A repair queued while a cursor was open. */
struct act {
	uint32_t op;
	uint32_t klen;
	uint8_t key[MDT_KEY_MAX];
	uint64_t a, b, c;
	struct mdt_dentry de;
	struct timespec ts;
};

struct acts {
	struct act *v;
	size_t n, cap;
};

struct mdt_fsck {
	struct mdt_txn *top;   /* the caller's transaction */
	struct mdt_txn *t;     /* where operations go: top, or the child of the repair running */
	bool repair;
	struct mdt_fsck_ops ops;
	struct mdt_fsck_stats st;
	struct timespec now;

	struct fino *ino;
	size_t nino, capino;
	uint64_t maxino;
	bool have_root;

	struct objref *obj;
	size_t nobj, capobj;
	struct ostnext *osts;
	size_t nosts;

	uint64_t lost_found;   /* /lost+found once found or made */
	char what[1024];
	char fix[320];
	char path[8192];
};

/* What a queued repair (struct act) is; each pass uses the few it queues. */
enum { ACT_DEL, ACT_INO_FIELD, ACT_DEL_BOTH, ACT_RETYPE, ACT_REINDEX, ACT_RECOOKIE, ACT_DIR2,
       ACT_SIZE, ACT_STRAY_LAYOUT, ACT_MIRROR_STALE };

/* ---- fsck.c: small helpers ---- */

/* Grows *v (of *cap elements of size bytes) to hold want: 0 or -ENOMEM. */
int fsck_grow(void **v, size_t *cap, size_t want, size_t size);
int fsck_acts_push(struct acts *q, const struct act *a);
void fsck_acts_free(struct acts *q);
/* The table's inode, NULL when there is none (fsck_find_dir: also when it is no directory). */
struct fino *fsck_find(const struct mdt_fsck *f, uint64_t ino);
struct fino *fsck_find_dir(const struct mdt_fsck *f, uint64_t ino);
const char *fsck_type_name(uint32_t mode);
const char *fsck_show_name(const char *name, size_t len, char *buf, size_t cap);
int fsck_walk(struct mdt_fsck *f, enum mdt_db db,
	      int (*fn)(struct mdt_fsck *f, const MDB_val *k, const MDB_val *v, void *arg), void *arg);

/* ---- fsck_report.c: reporting and repairing ---- */

bool fsck_cookie_name(struct mdt_fsck *f, uint64_t dir, uint64_t cookie, const char **name,
		      size_t *len);
__attribute__((format(printf, 6, 7)))
int fsck_report(struct mdt_fsck *f, enum mdt_fsck_kind kind, uint64_t ino, int fixrc,
		const char *fix, const char *fmt, ...);
int fsck_fix_begin(struct mdt_fsck *f);
int fsck_fix_end(struct mdt_fsck *f, int rc);

/* Runs a repair (an expression giving 0 or an error, using f->t) in a child transaction when
 * repairing; rc becomes its result, or NOFIX when not repairing. */
#define REPAIR(f, rc, expr)                                        \
	do {                                                       \
		(rc) = NOFIX;                                      \
		if ((f)->repair) {                                 \
			(rc) = fsck_fix_begin(f);                  \
			if ((rc) == 0)                             \
				(rc) = fsck_fix_end((f), (expr));  \
		}                                                  \
	} while (0)

int fsck_del_key(struct mdt_fsck *f, enum mdt_db db, const void *key, size_t klen);
int fsck_del_ino_key(struct mdt_fsck *f, enum mdt_db db, uint64_t ino);
enum inode_field { IF_NLINK, IF_NENTRIES, IF_PARENT, IF_NEXT_COOKIE, IF_INO, IF_SIZE };
int fsck_set_inode(struct mdt_fsck *f, uint64_t ino, enum inode_field field, uint64_t val);

/* ---- the passes of mdt_fsck_namespace, in order ---- */

int fsck_pass_inodes(struct mdt_fsck *f);   /* fsck_inodes.c */
int fsck_pass_orphans(struct mdt_fsck *f);  /* fsck_inodes.c */
int fsck_pass_entries(struct mdt_fsck *f);  /* fsck_entries.c */
int fsck_pass_records(struct mdt_fsck *f);  /* fsck_records.c */
int fsck_pass_counts(struct mdt_fsck *f);   /* fsck_counts.c */
/* fsck_lost_found.c, for pass 4 */
int fsck_fix_disconnected(struct mdt_fsck *f, uint64_t ino, bool cycle);

/* ---- fsck_objects.c, for pass 5 (fsck_layouts.c) ---- */

int fsck_objref_add(struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t ino,
		    uint32_t stripe);
struct ostnext *fsck_ost_find(const struct mdt_fsck *f, uint32_t idx);
int fsck_check_objects(struct mdt_fsck *f, struct acts *q, uint64_t ino,
		       const struct mdt_inode *in, const struct loom_layout *l);
int fsck_check_objrefs(struct mdt_fsck *f);

#endif
