/*
 * One file's locks as a list of ranges: fcntl(2)'s merging and splitting of one owner's locks,
 * and the conflicts between owners. The MDS's lock manager (src/mds/locks.c) keeps the locks of
 * every client this way; libloom (src/client/locks.c) keeps its own granted locks the same way,
 * with the same code, so that what it replays after an MDS restart is what the MDS held.
 *
 * An owner is (sid, owner): the MDS's session and the client's lock owner id (libloom's record
 * holds one client: sid 0). POSIX locks and flock(2) locks (`flock`) are kept apart, as on
 * Linux: one never merges with, splits or conflicts with the other.
 *
 * Not thread-safe: the list's owner serializes access.
 */
#ifndef LOOM_COMMON_LOCKRANGE_H
#define LOOM_COMMON_LOCKRANGE_H

#include <stdbool.h>
#include <stdint.h>

struct lock_range {
	struct lock_range *next;
	uint64_t sid;        /* the MDS's session holding it (libloom: 0) */
	uint64_t owner;
	uint64_t start, end; /* inclusive; end UINT64_MAX: to the end of the file */
	uint32_t type;       /* F_RDLCK or F_WRLCK */
	uint32_t pid;        /* of the process that took it, for F_GETLK */
	bool flock;
};

/* A change, or a question, about one owner's locks of one kind. */
struct lock_op {
	uint64_t sid, owner;
	uint64_t start, end; /* inclusive, start <= end */
	uint32_t type;       /* F_RDLCK, F_WRLCK, or F_UNLCK to release [start, end] */
	uint32_t pid;
	bool flock;
};

/*
 * Applies a grant or an unlock for op's owner, as fcntl(2) describes: the owner's locks of op's
 * kind over [start, end] are cut away (split when they stick out on both sides), the new one is
 * added (unless F_UNLCK), and neighbours of the same type are merged into it. The merged lock
 * takes op's pid; pieces of older locks keep theirs. 0, or -ENOMEM with nothing changed.
 * Conflicts are not checked: that is the caller's decision (lock_ranges_conflict).
 */
int lock_ranges_apply(struct lock_range **head, const struct lock_op *op);
/* The first lock of another owner, of op's kind, that overlaps op's range where either is a
 * write lock; NULL when there is none. */
const struct lock_range *lock_ranges_conflict(const struct lock_range *head, const struct lock_op *op);
/* Whether op's owner holds one lock of op's kind and type that covers [start, end]. */
bool lock_ranges_holds(const struct lock_range *head, const struct lock_op *op);
/* Frees the whole list. */
void lock_ranges_free(struct lock_range **head);

#endif
