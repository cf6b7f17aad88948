/*
 * One OST: a directory on a local file system holding one file per object, each with a sidecar
 * of its block checksums, and the OST's ost.conf. ost_format.h draws the directory and names
 * every file in it (for `loom fsck` too), and makes a new OST: ost_format().
 *
 * An object's bytes are its stripe's bytes in object space (stripe k of a file holds file bytes
 * [k*S + n*count*S, ...) contiguously). Objects are created by their first write; a missing
 * object reads as empty, and holes read as zeros, so the client never has to create objects.
 *
 * Every block read is checked against the checksum stored when it was written: a mismatch (a bit
 * flipped on disk) is -EIO with an ERROR log line naming the OST, object and block, never data.
 *
 * Thread-safe: any number of OSS workers call these at once.
 */
#ifndef LOOM_OSS_OST_H
#define LOOM_OSS_OST_H

#include <stddef.h>
#include <stdint.h>

#include "oss/ost_format.h"
#include "proto/wire.h"

struct ost;

/* What an object holds after an operation: its size and the 512-byte blocks it occupies (less
 * than size/512 when it has holes). Both 0 for a missing object. */
struct ost_objstat {
	uint64_t size;
	uint64_t blocks;
};

/* Opens an OST; -ENOENT if dir holds none. Repairs the checksums of writes a crash interrupted. */
int ost_open(const char *dir, struct ost **out);
void ost_close(struct ost *o);
/* ost_instance.c: the OST's instance, which changes when writes acknowledged before may have been
 * lost (a server on another host, or after a reboot, took over from one that did not stop
 * cleanly); clients compare it across their connections. Start: decides and records it (after
 * multi-mount protection gave this server the OST). Stop: a clean stop, everything synced first. */
int ost_instance_start(struct ost *o);
void ost_instance_stop(struct ost *o);
uint64_t ost_instance(const struct ost *o);

const char *ost_dir(const struct ost *o);
const char *ost_uuid(const struct ost *o);
const char *ost_fsname(const struct ost *o);
/* The index the MDS gave this OST, or OST_IDX_NONE before its first registration. */
uint32_t ost_index(const struct ost *o);
/* Records the index the MDS assigned (persistently, in ost.conf). */
int ost_set_index(struct ost *o, uint32_t idx);
/* Formatted with --replace and not yet accepted by the MDS (ost.conf's replace=yes). */
bool ost_replacing(const struct ost *o);
/* The MDS accepted it as the replacement of OST idx: objects below lost_below are lost (kept in
 * ost.conf, and in force at once). */
int ost_replaced(struct ost *o, uint32_t idx, uint64_t lost_below);

/*
 * What a server keeps in its page cache.
 * - readcache_max_io: reads larger than this are dropped from the cache once read (Lustre's
 *   readcache_max_io). Streaming reads are cached by the client that asked; on a machine that
 *   runs clients and servers a second copy only takes memory. Smaller reads stay cached.
 * - writeback_min_io: writes of at least this size start going to disk at once instead of
 *   waiting in the cache for the kernel's flusher, so that a later fsync (a checkpoint's) finds
 *   little left to write and dirty pages do not pile up.
 * SIZE_MAX turns either off.
 */
struct ost_cache_policy {
	size_t readcache_max_io;
	size_t writeback_min_io;
};
#define OST_READCACHE_MAX_IO (512u << 10)
#define OST_WRITEBACK_MIN_IO (512u << 10)
void ost_set_cache_policy(struct ost *o, const struct ost_cache_policy *p);

/* Reads up to len bytes at off. *nread < len at the object's end; a missing object gives 0.
 * -EIO when a block read does not match its checksum. */
int ost_read(struct ost *o, uint64_t objid, uint64_t off, void *buf, size_t len, size_t *nread,
	     struct ost_objstat *st);
/* Writes len bytes at off, creating the object (tagged with ino/stripe for fsck, in truncation
 * epoch `epoch`) if needed. -ESTALE when the object was cut by a truncation of a later epoch than
 * the writer's, -EAGAIN when the cut of the writer's epoch has not reached it yet (nothing is
 * written then). -ENOSPC when the OST is full; nothing is half-acknowledged: on error the caller
 * reports it. -EIO when a block the write covers only partly is already bad (it is not blessed
 * with a new checksum; overwriting the whole block heals it). */
int ost_write(struct ost *o, uint64_t objid, uint64_t off, const void *buf, size_t len,
	      uint64_t ino, uint32_t stripe_idx, uint32_t epoch, struct ost_objstat *st);
/* Discards data at and beyond size (never extends). With an epoch (a truncation's), an object
 * already in that epoch or a later one is left as it is, and a missing one is made, empty, in it
 * (tagged with ino/stripe); epoch 0 cuts unconditionally and leaves a missing object missing. -EIO
 * when the block that size cuts is bad. */
int ost_punch(struct ost *o, uint64_t objid, uint64_t size, uint64_t ino, uint32_t stripe_idx,
	      uint32_t epoch, struct ost_objstat *st);
/* A missing object (a lost one too) made, empty, in epoch (0 included), tagged with ino/stripe;
 * an existing one is left as it is. */
int ost_make_anew(struct ost *o, uint64_t objid, uint64_t ino, uint32_t stripe_idx, uint32_t epoch,
		  struct ost_objstat *st);
int ost_getattr(struct ost *o, uint64_t objid, struct ost_objstat *st);
/*
 * fallocate(2) on [off, off + len) of an object (OST_FALLOCATE); mode is LW_FALLOC_*, checked by
 * the decoder (lw_falloc_mode_check), len > 0. Allocating creates a missing object (tagged with
 * ino/stripe for fsck); punching or zeroing a missing one does nothing. The checksums stay
 * right: blocks covered whole have none afterwards, as a hole; one covered partly gets that of
 * what it holds now. -EIO when the part of a block it keeps is bad; -ENOSPC. Made in truncation
 * epoch `epoch`, checked as a write's (-ESTALE, -EAGAIN).
 */
int ost_fallocate(struct ost *o, uint64_t objid, uint32_t mode, uint64_t off, uint64_t len,
		  uint64_t ino, uint32_t stripe_idx, uint32_t epoch, struct ost_objstat *st);
/* lseek(2) SEEK_DATA / SEEK_HOLE (LW_SEEK_*) from off (OST_SEEK): *found gets the object offset.
 * -ENXIO when SEEK_DATA finds no data (a missing object has none); SEEK_HOLE at or past the end
 * finds off itself. */
int ost_seek(struct ost *o, uint64_t objid, uint32_t whence, uint64_t off, uint64_t *found,
	     struct ost_objstat *st);
/* Makes the object's data, its checksums and their directory entries durable. objid 0: the
 * whole OST. */
int ost_sync(struct ost *o, uint64_t objid);
/* Removes the object; a missing one is not an error. */
int ost_destroy(struct ost *o, uint64_t objid);
int ost_statfs(struct ost *o, struct lw_statfs *out);

/*
 * Starts a scrub in the background: every block of every object of the OST (objid 0) or of one
 * object is read and compared with its checksum, at most rate bytes per second (0: no limit),
 * each bad block logged. Does nothing when a scrub is running already. *st gets the status.
 */
int ost_scrub_start(struct ost *o, uint64_t objid, struct lw_scrub_rep *st);
/* The bytes per second a scrub may read (0: no limit): the next scrub's, and a running one's from
 * its next chunk on (`scrub_rate`, which the OSS sets from --scrub-rate and set_param). */
void ost_scrub_set_rate(struct ost *o, uint64_t rate);
uint64_t ost_scrub_rate(struct ost *o);
/* The running or last scrub (state LW_SCRUB_IDLE when none ran since ost_open). */
void ost_scrub_status(struct ost *o, struct lw_scrub_rep *st);

#endif
