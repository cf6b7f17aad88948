/*
 * The MDT half of `loom fsck` (Loom's LFSCK): checks an MDT's namespace, and each file's layout
 * against its objects, and with repair mends what it can. Offline only: the caller holds the MDT
 * (mdt_store_open, which no running MDS allows) and makes sure no OSS serves the OSTs.
 *
 * The MDT layer knows nothing of OST directories: it looks at objects through callbacks
 * (struct mdt_fsck_ops), and the caller walks the OSTs for orphan objects with
 * mdt_fsck_object(). Every problem is handed to ops->report once, after its repair was tried.
 *
 *   mdt_fsck_new(t)        t: a read transaction, or a write one to repair
 *   mdt_fsck_namespace()   inodes, entries (dentries against dircookies), link counts, the orphan
 *                          list, counters, disconnected inodes and directory cycles (into
 *                          /lost+found), records of inodes that do not exist
 *   mdt_fsck_layouts()     layouts: malformed, stray or absent; their objects (missing, sizes
 *                          beyond the MDT's size, tags); objects shared or queued for destruction
 *   commit or abort t
 *   mdt_fsck_object()      for each object found on an OST: referenced, queued, or an orphan
 *   mdt_fsck_free()
 *
 * See docs/operations.md ("Checking a file system: loom fsck") for what each repair does.
 */
#ifndef LOOM_MDT_FSCK_H
#define LOOM_MDT_FSCK_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct mdt_txn;
struct mdt_fsck;

enum mdt_fsck_kind {
	MDT_FSCK_RECORD,         /* a record that does not parse (size, key, type) */
	MDT_FSCK_COUNTER,        /* next_ino, a directory's next cookie or an OST's next object id
	                          * not above what is in use (a new name or object would collide) */
	MDT_FSCK_STRAY,          /* a record of an inode that does not exist (or of the wrong type) */
	MDT_FSCK_DANGLING,       /* an entry naming a missing inode, or in a missing directory */
	MDT_FSCK_BAD_ENTRY,      /* an entry with an invalid name, or a type unlike its inode's */
	MDT_FSCK_ENTRY_INDEX,    /* `dentries` and `dircookies` (readdir's index) disagree */
	MDT_FSCK_DIR_ENTRY,      /* a second entry naming a directory, or one naming the root */
	MDT_FSCK_DIR_PARENT,     /* a directory's ".." is not the directory holding its entry */
	MDT_FSCK_NLINK,          /* link count unlike the entries naming the inode */
	MDT_FSCK_NENTRIES,       /* a directory's entry count unlike its entries */
	MDT_FSCK_DISCONNECTED,   /* no entry (or a directory cycle): reconnected in /lost+found */
	MDT_FSCK_ORPHAN_LIST,    /* the orphan list disagrees with the link count */
	MDT_FSCK_SYMLINK,        /* a symlink without its target, or with a wrong size */
	MDT_FSCK_LAYOUT,         /* a file's layout missing, malformed, or naming an unknown OST */
	MDT_FSCK_SHARED_OBJECT,  /* one object in two layouts (or twice in one) */
	MDT_FSCK_QUEUED_OBJECT,  /* an object in a layout and in the destroy queue */
	MDT_FSCK_MISSING_OBJECT, /* a layout's object absent where the file's size says data is */
	MDT_FSCK_SIZE,           /* the MDT's size below the end of the data the objects hold */
	MDT_FSCK_OBJECT_TAG,     /* an object tagged (user.loom.fid) with another file or stripe */
	MDT_FSCK_ORPHAN_OBJECT,  /* an object no layout references (found by the caller) */
	MDT_FSCK_OST,            /* an OST directory's own damage (found by the caller) */
	MDT_FSCK_LOST_OBJECT,    /* a layout's object that was on an OST since replaced (lost) */
	MDT_FSCK_NKINDS
};

/* "missing object", "wrong size", ...: what the report line starts with. */
const char *mdt_fsck_kind_name(enum mdt_fsck_kind kind);

/* One problem. The strings live until report returns. */
struct mdt_fsck_problem {
	enum mdt_fsck_kind kind;
	uint64_t ino;       /* the inode concerned, 0 for none */
	const char *path;   /* its path when it has one, else NULL */
	const char *what;   /* what is wrong */
	const char *fix;    /* what the repair did; NULL when not repaired */
};

/* What an OST holds for one object. */
struct mdt_fsck_obj {
	bool exists;
	bool tagged;        /* carries a parseable user.loom.fid tag */
	uint64_t size;
	uint64_t blocks;    /* 512-byte blocks */
	struct timespec mtime;
	uint64_t tag_ino;
	uint32_t tag_stripe;
};

struct mdt_fsck_ops {
	void (*report)(void *arg, const struct mdt_fsck_problem *p);
	/* Looks at an object: 0 (out->exists false when it is absent), -ENODEV for an OST the
	 * caller was not given (its objects are skipped and counted as unchecked), or another
	 * negative errno, which stops fsck. */
	int (*obj_stat)(void *arg, uint32_t ost, uint64_t objid, struct mdt_fsck_obj *out);
	/* Repair only: creates the object empty if it is absent and tags it ino:stripe, durably.
	 * A failure leaves the problem unrepaired. */
	int (*obj_fix)(void *arg, uint32_t ost, uint64_t objid, uint64_t ino, uint32_t stripe);
	void *arg;
};

struct mdt_fsck_stats {
	uint64_t problems;      /* reported */
	uint64_t repaired;      /* of those, repaired */
	uint64_t inodes, dirs, files;
	uint64_t entries;
	uint64_t objects;       /* objects of layouts looked at on their OSTs */
	uint64_t unchecked;     /* objects on OSTs the caller did not give */
};

/* Starts a check in t; repair needs a write transaction (-EINVAL otherwise). Repairs go into
 * child transactions of t, so a repair that fails leaves nothing behind; the caller commits t
 * once both passes returned 0, and aborts it on an error. ops is copied; ops->arg is kept. */
int mdt_fsck_new(struct mdt_txn *t, bool repair, const struct mdt_fsck_ops *ops,
		 struct mdt_fsck **out);
void mdt_fsck_free(struct mdt_fsck *f);

/* The namespace. 0 when the check ran to its end (whatever it found), else the error that
 * stopped it (-ENOMEM, -EIO, -ENOSPC, MDT_ETXNFULL: a transaction too big to repair at once). */
int mdt_fsck_namespace(struct mdt_fsck *f);
/* Layouts and their objects; after mdt_fsck_namespace. Same return values, or an error of
 * ops->obj_stat. */
int mdt_fsck_layouts(struct mdt_fsck *f);

#define MDT_FSCK_OBJ_UNKNOWN 0 /* no layout references it and it is not queued: an orphan */
#define MDT_FSCK_OBJ_LAYOUT  1 /* a layout references it (*ino, *stripe) */
#define MDT_FSCK_OBJ_QUEUED  2 /* it waits in the destroy queue (*ino: its file) */
/* After mdt_fsck_layouts (also once its transaction ended): what the MDT knows of an object, as
 * it is after the repairs. ino and stripe may be NULL. */
int mdt_fsck_object(const struct mdt_fsck *f, uint32_t ost, uint64_t objid, uint64_t *ino,
		    uint32_t *stripe);
/* The next object id the MDT will hand out on an OST (after the repairs), 0 if it knows no
 * such OST: an orphan at or above it would be found by a new file. */
uint64_t mdt_fsck_next_objid(const struct mdt_fsck *f, uint32_t ost);

/* Counts a problem the caller found and reported itself (orphan objects, OST damage). */
void mdt_fsck_count(struct mdt_fsck *f, bool repaired);
const struct mdt_fsck_stats *mdt_fsck_stats(const struct mdt_fsck *f);


#endif
