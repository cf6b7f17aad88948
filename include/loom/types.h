/*
 * Loom's public constants and plain data types, shared by libloom's API and the wire protocol.
 */
#ifndef LOOM_TYPES_H
#define LOOM_TYPES_H

#include <stdint.h>

#define LOOM_NAME_MAX        255    /* bytes in one path component */
#define LOOM_SYMLINK_MAX     4095   /* bytes in a symlink target */
#define LOOM_XATTR_NAME_MAX  255
#define LOOM_XATTR_SIZE_MAX  65536
#define LOOM_MAX_GROUPS      64     /* supplementary groups a request carries */
#define LOOM_MAX_STRIPES     2000   /* as Lustre */
#define LOOM_FSNAME_MAX      8      /* characters, as Lustre */
#define LOOM_POOL_NAME_MAX   15     /* characters, as Lustre */
#define LOOM_SQUASH_ID       65534u /* who root becomes under root squashing (nobody) */
#define LOOM_ROOT_INO        1      /* the root directory; FUSE_ROOT_ID */
#define LOOM_STRIPE_UNIT     65536  /* a stripe size is a multiple of this */
#define LOOM_DEFAULT_STRIPE_SIZE (4u << 20) /* as Lustre 2.16 */
#define LOOM_MAX_STRIPE_SIZE (0xFFFFFFFFu - LOOM_STRIPE_UNIT + 1) /* 4 GiB - 64 KiB */
/* Data-on-MDT: a file's bytes below its layout's dom_size live on the MDS, not on OSTs. */
#define LOOM_DOM_MAX          (1u << 20)  /* largest dom_size, as Lustre's default cap */
#define LOOM_DEFAULT_DOM_SIZE (64u << 10) /* the built-in default for new files */
#define LOOM_DOM_NONE         0xFFFFFFFFu /* in a request or a directory default: no MDT component */

/* Who is asking. The MDS checks permissions against this, as a local kernel would. */
struct loom_cred {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups;
	uint32_t groups[LOOM_MAX_GROUPS];
};

#define LOOM_PATTERN_RAID0 1u
#define LOOM_MAX_MIRRORS   16   /* copies of a file, as Lustre's LUSTRE_MIRROR_COUNT_MAX */
#define LOOM_EC_MAX_PARITY 16   /* parity objects of an erasure-coded file */
#define LOOM_EC_MAX_WIDTH  255  /* data + parity objects: Reed-Solomon over GF(2^8) */

#define LOOM_OBJ_STALE 0x1u /* a mirror's object that missed a write: read from another copy
                             * until it is resynced; an erasure-coded file's object whose bytes
                             * are rebuilt from the others until then */

/* One stripe's object: which OST holds it, and its id there. */
struct loom_ostobj {
	uint32_t ost_idx;
	uint32_t flags;   /* LOOM_OBJ_* */
	uint64_t objid;
};

#define LOOM_LAYOUT_DEFAULT   0x1u /* a directory's default for new entries */
#define LOOM_LAYOUT_INHERITED 0x2u /* the directory has no default of its own: the fs's */
#define LOOM_LAYOUT_WRITE_PENDING 0x4u /* a mirrored file open for writing: its copies may
                                        * differ by what is in flight (Lustre's "wp") */

/*
 * A RAID-0 layout, optionally behind a Data-on-MDT component (dom_size), in mirror_count copies.
 * For a file every field is concrete and nobjs == mirror_count * stripe_count: the objects of
 * mirror m are objs[m * stripe_count, (m + 1) * stripe_count), each mirror striped alike, so
 * that object k of every mirror holds the same bytes at the same offsets. For a directory's
 * default, nobjs is 0 and stripe_count may be -1 (every OST) and stripe_offset -1 (MDS chooses).
 * As a request, 0 in stripe_size or stripe_count means "inherit", "" in pool means none.
 */
struct loom_layout {
	uint32_t pattern;       /* LOOM_PATTERN_RAID0 */
	uint32_t stripe_size;   /* bytes */
	int32_t  stripe_count;
	int32_t  stripe_offset;
	uint32_t layout_gen;
	uint32_t flags;         /* LOOM_LAYOUT_* */
	char     pool[LOOM_POOL_NAME_MAX + 1];
	/* Data-on-MDT: bytes [0, dom_size) of the file live on the MDS (a multiple of 64 KiB, at
	 * most LOOM_DOM_MAX); the stripes hold the rest, at their usual offsets. For a file 0 means
	 * none. As a request or a directory default, 0 means "inherit" and LOOM_DOM_NONE "none". */
	uint32_t dom_size;
	/* Copies of the data (1..LOOM_MAX_MIRRORS; 0 in a request or a default: inherit). The
	 * Data-on-MDT part is the MDT's, one copy. */
	uint16_t mirror_count;
	/* Erasure coding (ISA-L Reed-Solomon): parity objects after the stripe_count data objects
	 * (0: none; in a request or a default 0 inherits). A file with parity has one copy and
	 * nobjs == stripe_count + ec_parity: any stripe_count of its objects give every byte. */
	uint16_t ec_parity;
	uint32_t nobjs;
	uint32_t pad;           /* 0 */
	struct loom_ostobj objs[]; /* nobjs entries */
};

#endif
