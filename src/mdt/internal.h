/*
 * The MDT's insides, shared by the files of src/mdt/ and nothing else: the store and transaction
 * structs, the on-disk records, key encoding, and the helpers every operation uses.
 *
 * On-disk format (version 1). One LMDB environment, these named databases:
 *
 *   meta        "fsname" -> chars, "uuid" -> 16 bytes, "next_ino" -> u64, "version" -> u32
 *   inodes      ino BE64                 -> struct mdt_inode
 *   dentries    parent BE64 + name       -> struct mdt_dentry (child, type, cookie)
 *   dircookies  parent BE64 + cookie BE64 -> struct mdt_dirent_rec + name (readdir order)
 *   symlinks    ino BE64                 -> target bytes
 *   xattrs      ino BE64 + name          -> value
 *   layouts     ino BE64                 -> lw_layout + lw_ostobj[] (the wire image)
 *   dirdefaults ino BE64                 -> lw_layout, nobjs 0 (a directory's default)
 *   osts        idx BE32                 -> struct mdt_ost_rec
 *   orphans     ino BE64                 -> (empty)
 *   destroy     ost BE32 + objid BE64    -> ino u64
 *   replies, reply_ages                  the reply cache (replies.c)
 *   dom         ino BE64                 -> crc32c u32 + a file's Data-on-MDT bytes (dom.c)
 *   pools       name, NUL-padded to 16   -> u32 count + count OST indices u32, ascending (pool.c)
 *   truncs      ino BE64 + epoch BE32    -> u64: objects still to be cut for a truncation (trunc.c)
 *   clients     client uuid[16]          -> (empty): clients that may hold locks (clients.c)
 *   ost_lost    idx BE32                 -> struct mdt_ost_lost_rec: the objects a replaced OST
 *                                           lost (ost_retire.c)
 *
 * Keys are big-endian so that LMDB's byte order is numeric order (readdir walks cookies, the
 * destroy queue is per OST in object order). Values are host order, which is little-endian on
 * every host Loom runs on (wire.h refuses the others).
 */
#ifndef LOOM_MDT_INTERNAL_H
#define LOOM_MDT_INTERNAL_H

#include <endian.h>
#include <stdatomic.h>
#include <lmdb.h>
#include <string.h>
#include <sys/stat.h>

#include "mdt/perm.h"
#include "mdt/store.h"

#define MDT_MAP_SIZE       (64ull << 30) /* address space only: the file grows as it fills */
#define MDT_LINK_MAX       65000u        /* as ext4's EXT4_LINK_MAX */
#define MDT_MAX_FILE_SIZE  (1ull << 62)
#define MDT_DIR_SIZE       4096u
#define MDT_DEF_BLKSIZE    4096u
#define MDT_COOKIE_DOT     1u
#define MDT_COOKIE_DOTDOT  2u
#define MDT_COOKIE_FIRST   3u
#define MDT_MAX_OST_IDX    65535u        /* as Lustre's highest OST index */

enum mdt_db {
	MDT_DB_META,
	MDT_DB_INODES,
	MDT_DB_DENTRIES,
	MDT_DB_DIRCOOKIES,
	MDT_DB_SYMLINKS,
	MDT_DB_XATTRS,
	MDT_DB_LAYOUTS,
	MDT_DB_DIRDEFAULTS,
	MDT_DB_OSTS,
	MDT_DB_ORPHANS,
	MDT_DB_DESTROY,
	MDT_DB_REPLIES,
	MDT_DB_REPLY_AGES,
	MDT_DB_DOM,
	MDT_DB_POOLS,
	MDT_DB_TRUNCS,
	MDT_DB_CLIENTS,
	MDT_DB_NODEMAP,
	MDT_DB_OST_LOST,
	MDT_DB_MIRRORS,   /* mirrored files with stale copies or writers: ino -> 1 byte */
	MDT_DB_COUNT
};

struct mdt_store {
	MDB_env *env;
	MDB_dbi dbi[MDT_DB_COUNT];
	char *dir;              /* the MDT directory, for statfs */
	int lock_fd;            /* holds flock(LOCK_EX) so that one MDS at a time opens the MDT */
	char fsname[LOOM_FSNAME_MAX + 1];

	/* The OST table in index order: persistent fields as of the last commit, plus what only
	 * memory knows (free space, last heard, inactive). See ost.c. */
	struct mdt_ost *osts;
	uint32_t nosts;
	uint32_t ost_gen;
	uint32_t rr_next;       /* round-robin start for the next allocation */
	uint64_t rng;           /* state of the weighted allocator's generator */

	/* Space (space.c). */
	uint64_t reserve;       /* bytes of room kept for what frees space (mdt_store_set_reserve) */
	uint64_t file_end;      /* the data file's size as last seen (at open, or as reserve_hold
	                         * made it); LMDB may have written past it since */
	bool reserve_short_logged; /* the disk could not hold the whole reserve: said once */
	/* Inode numbers handed clients ahead and not taken yet (clients.c), as last committed: the
	 * room their creates need is kept for them (mdt_txn_grow). */
	_Atomic int64_t promised;
	int (*write_guard)(void *arg); /* mdt_store_set_write_guard */
	void *write_guard_arg;
	/* Replication (redo.c): capture is on while redo_fn is set. */
	mdt_redo_fn redo_fn;
	void *redo_arg;
	uint64_t repl_seq;      /* of the last commit handed to redo_fn (or found in the MDT) */
	uint64_t repl_epoch;
};

/* A registration waiting for its transaction's top-level commit to reach the in-memory table. */
struct mdt_ost_update {
	uint32_t idx;
	struct lw_statfs sf;
	uint64_t heard_ns;
};

struct mdt_txn {
	struct mdt_store *s;
	struct mdt_txn *parent;
	MDB_txn *mdb;
	bool write;
	bool ost_dirty;         /* the osts db changed: rebuild the in-memory table at commit */
	struct mdt_ost_update *ost_updates;
	size_t n_ost_updates;
	size_t cap_ost_updates;
	/* Space (space.c, mdt_txn_grow). grown: bytes this transaction's operations said they add
	 * (a child's join its parent's at commit). The others are a top-level transaction's: the
	 * room measured at its first growth, and whether the freelist is counted in it yet. */
	uint64_t grown;
	int64_t promised;       /* numbers handed ahead (+) and taken or forgotten (-) here */
	bool took_promised;     /* a request's: it creates a number handed ahead (its room kept) */
	uint64_t room;
	uint64_t page_size;
	bool room_known;
	bool room_has_freelist;
	/* The change this transaction is part of (mdt_txn_set_change; a child inherits its
	 * parent's): every inode it writes is stamped with transno, and its version before is noted
	 * in vers (and, for a replay, checked there). */
	uint64_t transno;
	struct mdt_vers *vers;
	/* Its redo (redo.c), while capture is on: records, after a commit header's room for a
	 * top-level one. */
	uint8_t *redo;
	size_t redo_len;
	size_t redo_cap;
	uint32_t redo_nrec;
};

/* ---- records ---- */

/* The value of `inodes`. Fields that only directories use are 0 for the others. */
struct mdt_inode {
	uint64_t ino;
	uint64_t gen;
	uint64_t size;          /* regular files: bytes; symlinks: target length */
	int64_t  atime;
	int64_t  mtime;
	int64_t  ctime;
	uint32_t atime_ns;
	uint32_t mtime_ns;
	uint32_t ctime_ns;
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint32_t rdev;
	uint32_t blksize;       /* regular files: the layout's stripe size */
	uint32_t flags;         /* MDT_IF_* */
	uint64_t parent;        /* directories: the inode ".." names */
	uint64_t next_cookie;   /* directories: the cookie the next entry gets */
	union {
		uint64_t nentries;  /* directories: entries besides "." and ".." */
		uint64_t blocks;    /* regular files with MDT_IF_BLOCKS: 512-byte blocks the objects
		                     * occupied at the last report (holes take none) */
	};
	/* From here, records written since protocol 3 (a record of MDT_INODE_V1_SIZE bytes reads
	 * with these 0). */
	uint64_t data_version;  /* regular files: lw_attr.data_version */
	uint64_t name_version;  /* lw_attr.name_version */
	uint32_t trunc_epoch;   /* regular files: lw_attr.trunc_epoch */
	uint32_t pad;
	/* Records of 144 bytes (protocol 5; shorter ones read with this 0): the transno of the
	 * last change to the inode, which a replay's version check compares (store.c). */
	uint64_t version;
};

#define MDT_IF_BLOCKS 0x1u /* blocks was reported by a client; else it is estimated from size */
#define MDT_IF_NO_XATTRS 0x2u /* no extended attribute was ever set (inodes made before this flag
                               * existed lack it: "may have some") */
#define MDT_INODE_V1_SIZE 112u
#define MDT_INODE_V3_SIZE 136u /* before versions of changes */
_Static_assert(sizeof(struct mdt_inode) == 144, "mdt_inode is an on-disk format");
_Static_assert(offsetof(struct mdt_inode, data_version) == MDT_INODE_V1_SIZE, "mdt_inode v1 prefix");

struct mdt_dentry {
	uint64_t ino;
	uint64_t cookie;
	uint32_t type;          /* DT_* */
	uint32_t pad;
};
_Static_assert(sizeof(struct mdt_dentry) == 24, "mdt_dentry is an on-disk format");

/* The value of `dircookies`: this, then namelen bytes of name. */
struct mdt_dirent_rec {
	uint64_t ino;
	uint32_t type;
	uint16_t namelen;
	uint16_t pad;
};
_Static_assert(sizeof(struct mdt_dirent_rec) == 16, "mdt_dirent_rec is an on-disk format");

struct mdt_ost_rec {
	uint32_t version;       /* MDT_FORMAT_VERSION */
	uint32_t idx;
	uint64_t next_objid;    /* the id the next object on this OST gets; starts at 1 */
	uint16_t port;
	uint16_t pad;
	uint32_t state;         /* LW_TGT_READONLY/NOCREATE as last registered */
	char     host[64];
	char     uuid[40];
	struct lw_statfs sf;    /* as last registered: what allocation starts from after a restart */
};
_Static_assert(sizeof(struct mdt_ost_rec) == 184, "mdt_ost_rec is an on-disk format");

/* In mdt_ost_rec.state only, never on the wire: retired by `loom ost remove`. The record stays so
 * that its index is not handed out again and its OST is refused if it comes back. */
#define MDT_OST_REMOVED 0x80000000u

/* ost_lost: an OST that was replaced (a new, empty OST took its index): every object with an id
 * below lost_below was the old OST's, so one missing now is lost, not a hole. */
struct mdt_ost_lost_rec {
	uint64_t lost_below;
	uint64_t replaced_at;  /* CLOCK_REALTIME seconds */
	char     old_uuid[40]; /* the OST it replaced */
};
_Static_assert(sizeof(struct mdt_ost_lost_rec) == 56, "mdt_ost_lost_rec is an on-disk format");

/* ---- keys ---- */

#define MDT_KEY_MAX (8 + 8 + LOOM_XATTR_NAME_MAX + 1)

static inline void mdt_put_be64(uint8_t *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, 8);
}

static inline uint64_t mdt_get_be64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

static inline void mdt_put_be32(uint8_t *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, 4);
}

static inline uint32_t mdt_get_be32(const void *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

/* ino BE64 + name: the key of dentries and xattrs. key holds MDT_KEY_MAX bytes. */
static inline size_t mdt_key_name(uint8_t *key, uint64_t ino, const char *name, size_t len)
{
	mdt_put_be64(key, ino);
	memcpy(key + 8, name, len);
	return 8 + len;
}

/* ---- store.c: LMDB access ---- */

/* An LMDB return code as a negative errno (MDB_NOTFOUND -> -ENOENT, MDB_MAP_FULL -> -ENOSPC,
 * MDB_TXN_FULL -> MDT_ETXNFULL, corruption -> -EIO). */
int mdt_errno(int mdb_rc);
/* The name of database i (MDT_DB_*) in the LMDB environment. */
const char *mdt_db_name(int i);

/* Copies nothing: val points into the map and is valid until the next write in this txn. */
int mdt_get(struct mdt_txn *t, enum mdt_db db, const void *key, size_t klen, MDB_val *val);
int mdt_put(struct mdt_txn *t, enum mdt_db db, const void *key, size_t klen, const void *val,
	    size_t vlen);
/* -ENOENT if the key is absent. */
int mdt_del(struct mdt_txn *t, enum mdt_db db, const void *key, size_t klen);
/* Deletes every key that starts with prefix. */
int mdt_del_prefix(struct mdt_txn *t, enum mdt_db db, const void *prefix, size_t plen);

/* ---- redo.c ---- */
/* Notes a put (LW_REPL_PUT, with its value) or a delete in t's redo, if capture is on. */
int mdt_redo_note(struct mdt_txn *t, uint8_t op, enum mdt_db db, const void *key, size_t klen,
		  const void *val, size_t vlen);
int mdt_redo_child_reserve(struct mdt_txn *child);
void mdt_redo_child_join(struct mdt_txn *child);
int mdt_redo_before_commit(struct mdt_txn *t);
void mdt_redo_after_commit(struct mdt_txn *t);

/* Makes room for `more` entries in t->ost_updates. */
int mdt_txn_reserve_updates(struct mdt_txn *t, size_t more);

/* ---- space.c ---- */

/*
 * An operation is about to make the MDT hold about `bytes` more (a new inode or name, an xattr,
 * a layout, Data-on-MDT bytes). 0 when that leaves the reserve (space.c), else -ENOSPC, or
 * MDT_ETXNFULL when it would fit but for what the batch's transaction grew before it (the MDS
 * commits the batch and runs the request again alone). Operations that free space never call it:
 * the reserve is theirs.
 */
int mdt_txn_grow(struct mdt_txn *t, uint64_t bytes);
/* MDS_INOS: count numbers are handed ahead, and the room of their creates kept for them from
 * here (what else grows must leave it too), while the room left beyond that is at least twice
 * the reserve: -ENOSPC otherwise, so that near a full MDT creates are answered by the MDS, where
 * ENOSPC can be said in time. */
int mdt_txn_promise(struct mdt_txn *t, uint32_t count);
/* count numbers handed ahead were taken (their create grows as it goes, into the room kept) or
 * forgotten. */
void mdt_txn_unpromise(struct mdt_txn *t, uint32_t count);
/* One number handed ahead is taken by this request's create, which grows from here with the
 * room kept for it, and half the reserve (a request's transaction, not a batch's). */
void mdt_txn_took_promised(struct mdt_txn *t);
/* The room a create of a number handed ahead needs: its inode, its name at the longest and the
 * directory's record of it. */
#define MDT_PROMISE_INO (MDT_GROW_INODE + 2 * (MDT_GROW_RECORD + LOOM_NAME_MAX * MDT_GROW_BYTE))
/* At open: the numbers handed ahead and not taken, from the clients table. */
int mdt_client_inos_load(struct mdt_store *s, struct mdt_txn *t);
/* What an operation that makes an inode says it adds: the inode, its name, a layout of a few
 * stripes and the reply cached for it, with the B-tree's slack (an empty file costs LMDB about
 * 950 bytes, measured on a full MDT). */
#define MDT_GROW_INODE 1024u
/* A record more with its key (a name without its bytes, an xattr, a pool, a layout). */
#define MDT_GROW_RECORD 256u
/* Per byte of a name or value (stored in a key or record, plus the B-tree's slack). */
#define MDT_GROW_BYTE 2u

/* Reads the data file's size, at open. */
int mdt_space_file_init(struct mdt_store *s);

/* ---- store.c: inodes ---- */

/* -ENOENT if there is no such inode. */
int mdt_inode_get(struct mdt_txn *t, uint64_t ino, struct mdt_inode *out);
/* The inode numbers keying db (big-endian u64 keys) from after + 1 on, max at most. */
int mdt_ino_keys(struct mdt_txn *t, enum mdt_db db, uint64_t after, uint64_t *inos, size_t max, size_t *n);
int mdt_inode_put(struct mdt_txn *t, const struct mdt_inode *in);
/* Takes the next inode number from the counter in `meta`. */
int mdt_ino_alloc(struct mdt_txn *t, uint64_t *ino);
/* A fresh inode record: nlink 1 (2 for directories), every time `now`. */
void mdt_inode_init(struct mdt_inode *in, uint64_t ino, uint32_t mode, uint32_t uid, uint32_t gid,
		    struct timespec now);
void mdt_inode_attr(const struct mdt_inode *in, struct lw_attr *out);

#define MDT_T_ATIME 0x1u
#define MDT_T_MTIME 0x2u
#define MDT_T_CTIME 0x4u
void mdt_inode_touch(struct mdt_inode *in, uint32_t which, struct timespec now);

static inline uint32_t mdt_dt_type(uint32_t mode)
{
	return (mode & S_IFMT) >> 12; /* DT_* are S_IF* >> 12, as IFTODT() */
}

static inline struct mdt_owner mdt_owner_of(const struct mdt_inode *in)
{
	return (struct mdt_owner){ .mode = in->mode, .uid = in->uid, .gid = in->gid };
}

/* mdt_perm_access() on an inode record: 0 or -EACCES. */
static inline int mdt_may(const struct loom_cred *cr, const struct mdt_inode *in, int may)
{
	struct mdt_owner o = mdt_owner_of(in);

	return mdt_perm_access(cr, &o, may);
}

/* "." or ".."? */
static inline bool mdt_name_is_dots(const char *name, size_t len)
{
	return (len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.');
}

/* ---- dir.c: directory entries ---- */

/* Reads a directory an operation is about to look into, and checks `may` (MDT_MAY_*) on it.
 * -ENOENT, -ENOTDIR, -EACCES. */
int mdt_dir_get(struct mdt_txn *t, const struct loom_cred *cr, uint64_t ino, int may,
		struct mdt_inode *dir);
/* -ENOENT if the name is absent. */
int mdt_dentry_get(struct mdt_txn *t, uint64_t dir, const char *name, size_t len,
		   struct mdt_dentry *out);
/* Adds name -> ino at the end of dir's cookie order. Updates *dir (next_cookie, nentries) in
 * memory only: the caller writes it back. */
int mdt_dentry_add(struct mdt_txn *t, struct mdt_inode *dir, const char *name, size_t len,
		   uint64_t ino, uint32_t mode);
/* Removes an entry found by mdt_dentry_get. Updates dir->nentries in memory only. */
int mdt_dentry_del(struct mdt_txn *t, struct mdt_inode *dir, const char *name, size_t len,
		   const struct mdt_dentry *de);
/* Points an existing entry at another inode, keeping its place in readdir order. */
int mdt_dentry_retarget(struct mdt_txn *t, uint64_t dir, const char *name, size_t len,
			const struct mdt_dentry *de, uint64_t ino, uint32_t mode);

/* ---- ns.c ---- */

/* One link fewer for a non-directory whose name went away (ctime now); at 0 it becomes an orphan
 * until mdt_inode_release. Writes the inode and fills *victim (may be NULL). */
int mdt_drop_link(struct mdt_txn *t, struct mdt_inode *in, struct timespec now,
		  struct mdt_unlinked *victim);

/* ---- layout.c ---- */

/* trunc.c: in's trunc_epoch goes up and its objects are to be cut to a file of `cut` bytes (the
 * caller writes the inode); a released inode's truncations are forgotten. */
int mdt_trunc_queue(struct mdt_txn *t, struct mdt_inode *in, uint64_t cut);
int mdt_trunc_forget(struct mdt_txn *t, uint64_t ino);

/* Reads a stored layout image (db is MDT_DB_LAYOUTS or MDT_DB_DIRDEFAULTS). -ENODATA if none. */
int mdt_layout_load(struct mdt_txn *t, enum mdt_db db, uint64_t ino, struct loom_layout **out);
int mdt_layout_save(struct mdt_txn *t, enum mdt_db db, uint64_t ino, const struct loom_layout *l);
/* Gives a new regular file its layout: req's fields, else dir's default's, else the fs default's,
 * and objects from mdt_alloc_stripes. Stores it and sets in->blksize. *out may be NULL. */
int mdt_layout_new_file(struct mdt_txn *t, const struct mdt_inode *dir, const struct lw_layout *req,
			struct mdt_inode *in, struct loom_layout **out);
/* Copies dir's own default (if any) onto a new subdirectory. */
int mdt_layout_inherit_dir(struct mdt_txn *t, uint64_t parent, uint64_t child);
/* Queues a layout's objects for destruction. */
int mdt_destroy_queue(struct mdt_txn *t, uint64_t ino, const struct loom_layout *l);

/* ---- orphan.c ---- */

/* Records that ino has no name left (nlink 0) but may still be open. */
int mdt_orphan_add(struct mdt_txn *t, uint64_t ino);
/* Deletes a directory removed by rmdir or rename: record, xattrs, default layout. */
int mdt_dir_destroy(struct mdt_txn *t, uint64_t ino);

/* ---- ost.c ---- */

/* Builds the in-memory OST table from the osts db at open. */
int mdt_ost_load(struct mdt_store *s, struct mdt_txn *t);
void mdt_ost_free(struct mdt_store *s);
/* At a top-level commit: the table as it will be once the commit succeeds (built inside the
 * transaction so that nothing can fail after the commit), then swapped in. */
int mdt_ost_prepare(struct mdt_txn *t, struct mdt_ost **table, uint32_t *count);
void mdt_ost_install(struct mdt_store *s, struct mdt_ost *table, uint32_t count);
/* Does the table hold this index? */
bool mdt_ost_known(const struct mdt_store *s, uint32_t idx);
/* The osts db's records: one by index (-ENOENT), written, or each in index order (fn's first
 * non-zero return stops the walk and is returned). */
int mdt_ost_rec_get(struct mdt_txn *t, uint32_t idx, struct mdt_ost_rec *rec);
int mdt_ost_rec_put(struct mdt_txn *t, const struct mdt_ost_rec *rec);
/* Every OST's next_objid n forward (mdt_numbers_skip). */
int mdt_objids_skip(struct mdt_txn *t, uint64_t n,
		    void (*old_objid)(void *arg, uint32_t ost, uint64_t next_objid), void *arg);
int mdt_ost_rec_each(struct mdt_txn *t, int (*fn)(const struct mdt_ost_rec *rec, void *arg), void *arg);
/* The in-memory table's entry of idx, or NULL. */
struct mdt_ost *mdt_ost_entry(struct mdt_store *s, uint32_t idx);
/* Leaves a note for the top-level commit: idx registered now with sf (it is active from then on). */
int mdt_ost_note_registered(struct mdt_txn *t, uint32_t idx, const struct lw_statfs *sf, uint64_t now_ns);

#endif
