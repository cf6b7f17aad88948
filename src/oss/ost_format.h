/*
 * An OST on disk: the one place that knows what an OST directory holds, what its files are
 * called and how its small files and tags are spelled. The OSS (src/oss/) and `loom fsck`
 * (src/tools/fsck.c) both go through it, so that the two can never disagree on a name.
 *
 *   DIR/ost.conf               OST_CONF_FILE: which file system, which OST (below)
 *   DIR/O/<xx>/                the OST_NDIRS object directories, xx = "%02x" of 00..ff
 *   DIR/O/<xx>/<objid>         an object: its id in lowercase hex without leading zeros,
 *                              in the directory of its low byte (ost_obj_dir)
 *   DIR/O/<xx>/<objid>.crc     its checksums (OST_CSUM_SUFFIX): a crc32c per 64 KiB block,
 *                              laid out as ost_impl.h draws
 *   DIR/csum_intents           OST_INTENT_FILE: the writes in progress (records in ost_impl.h)
 *   DIR/lost+found/            OST_LOST_FOUND: where `loom fsck --repair` moves the objects no
 *                              layout references (the OSS never looks there)
 *
 * The extended attributes of an object's file (a backing file system without user xattrs only
 * loses what they say):
 *
 *   user.loom.fid     OST_FID_XATTR: "INO:STRIPE", the file and the stripe the object was made
 *                     for, both in decimal (ost_fid_format), no NUL. Set when the object is
 *                     created, read by fsck only.
 *   user.loom.epoch   OST_EPOCH_XATTR: the truncation epoch the object is in (ost_obj.c), a
 *                     uint32_t in the host's byte order, 4 bytes. Missing: epoch 0.
 *
 * ost.conf is lines of key=value, written in this order and nothing else:
 *
 *   fsname=NAME      1 to LOOM_FSNAME_MAX characters
 *   uuid=UUID        the OST's own, made by ost_format: 1 to OST_UUID_MAX characters
 *   index=N          decimal, once the MDS gave the OST an index (absent before)
 *   replace=yes      formatted with --replace: the OST is to take index N from a lost OST, and
 *                    the MDS has not said yes yet (the line goes once it has)
 *   lost_below=N     decimal: it replaced a lost OST, whose objects had ids below N; such an
 *                    object that is missing here is lost (reads and writes answer EIO)
 *
 * Reading takes the keys in any order, skips empty lines and lines of keys it does not know
 * (so that a later version may add one), and refuses anything else.
 */
#ifndef LOOM_OSS_OST_FORMAT_H
#define LOOM_OSS_OST_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/types.h"

#define OST_CONF_FILE   "ost.conf"
#define OST_INTENT_FILE "csum_intents"
#define OST_LOST_FOUND  "lost+found"
#define OST_ODIR_FMT    "O/%02x" /* an object directory, relative to the OST's: a printf format */
#define OST_NDIRS       256
#define OST_CSUM_SUFFIX ".crc"
#define OST_FID_XATTR   "user.loom.fid"
#define OST_EPOCH_XATTR "user.loom.epoch"

#define OST_IDX_NONE    UINT32_MAX /* no index yet: the MDS has not assigned one */
#define OST_UUID_MAX    39         /* characters (ost_format makes 36) */
#define OST_CONF_MAX    4096       /* bytes: a longer ost.conf is not one */

#define OST_OBJ_NAME_MAX 24 /* bytes for an object's or sidecar's name and its NUL (16 + 4 + 1) */
#define OST_FID_TAG_MAX  32 /* bytes for a user.loom.fid tag and a NUL (20 + 1 + 10 + 1) */

/* What ost.conf says. */
struct ost_conf {
	char fsname[LOOM_FSNAME_MAX + 1];
	char uuid[OST_UUID_MAX + 1];
	uint32_t idx; /* OST_IDX_NONE: not assigned yet (no index line) */
	bool replace;        /* to replace the lost OST of index idx; the MDS has not accepted it yet */
	uint64_t lost_below; /* 0: no object of this OST was lost */
};

/* Creates an empty OST in dir (created if missing): its object directories and its ost.conf,
 * with a new uuid, asking the MDS for index idx (OST_IDX_NONE: whichever it gives), as the
 * replacement of the lost OST of that index if replace. -EEXIST if one is already there, -EINVAL
 * for an fsname that ost.conf cannot hold or replace without an index. */
int ost_format(const char *dir, const char *fsname, uint32_t idx, bool replace);

/*
 * Parses the len bytes of an ost.conf. -EINVAL when they are not one: a line without '=', a
 * key given twice, fsname or uuid missing, empty, too long or holding a control character, an
 * index that is not a decimal number below OST_IDX_NONE as printf writes it, more than
 * OST_CONF_MAX bytes, or a NUL. Then why (if not NULL) says what is wrong, for a message.
 */
int ost_conf_parse(const char *buf, size_t len, struct ost_conf *conf, char *why, size_t why_cap);
/* Writes conf as ost.conf holds it into buf (cap >= OST_CONF_MAX is always enough); *len gets
 * its length. -EINVAL for a conf ost_conf_parse would refuse. */
int ost_conf_format(const struct ost_conf *conf, char *buf, size_t cap, size_t *len);
/* DIR/ost.conf: -ENOENT when there is none, -EINVAL when it is not one (see ost_conf_parse),
 * another -errno when it cannot be read. why (if not NULL) says which, for a message. */
int ost_conf_read(const char *dir, struct ost_conf *conf, char *why, size_t why_cap);
/* Replaces DIR/ost.conf atomically (and durably); -EINVAL for a conf that cannot be written. */
int ost_conf_write(const char *dir, const struct ost_conf *conf);

/* The object directory an object lives in (0..OST_NDIRS-1): its id's low byte. */
static inline unsigned ost_obj_dir(uint64_t objid)
{
	return (unsigned)(objid & (OST_NDIRS - 1));
}
/* An object's file name in its directory, and its sidecar's; cap >= OST_OBJ_NAME_MAX. */
void ost_obj_name(uint64_t objid, char *buf, size_t cap);
void ost_csum_name(uint64_t objid, char *buf, size_t cap);

/* What a name found in object directory `dir` is. */
enum ost_name_kind {
	OST_NAME_OBJECT, /* an object's name, and this its directory: *objid is set */
	OST_NAME_STRAY,  /* hex digits only, as an object's, but not a name the OSS ever looks
			  * up here: uppercase, leading zeros, more than 16 digits, id 0, or an
			  * id of another directory */
	OST_NAME_OTHER,  /* anything else: a checksum sidecar, a temporary file */
};
enum ost_name_kind ost_name_parse(const char *name, unsigned dir, uint64_t *objid);

/* A user.loom.fid tag, no NUL added; returns its length (< OST_FID_TAG_MAX). */
size_t ost_fid_format(uint64_t ino, uint32_t stripe, char buf[OST_FID_TAG_MAX]);
/* Parses the len bytes of a tag as ost_fid_format writes it (no sign, space, leading zero or
 * NUL, numbers in range); -EINVAL for anything else. */
int ost_fid_parse(const void *buf, size_t len, uint64_t *ino, uint32_t *stripe);

#endif
