/* What leases.c and leases_drop.c share (the MDS's leases: src/mds/leases.c). */
#ifndef LOOM_MDS_LEASES_IMPL_H
#define LOOM_MDS_LEASES_IMPL_H

#include "mds/dispatch.h"

/* A session that lost its leases for not giving one back gets none for this long: one that
 * ignores recalls on purpose (any reader of a directory may ask) holds others' changes up for a
 * timeout at most once a minute. */
#define LEASE_PENALTY_NS       (60ull * 1000000000ull)

/* The lease record of ino (made with make, as a file's with inode), or NULL. */
struct lease_dir *lease_dir_get(struct mds *m, uint64_t ino, bool make, bool inode);
/* How many leases sid holds: on directories, or (inode) on files; both with -1. */
uint32_t lease_session_count(struct mds *m, uint64_t sid, int inode);
/* h is dropped without giving its lease back: d stays fenced while h may still trust it. */
void lease_fence(struct mds *m, struct lease_dir *d, const struct lease_holder *h);
/* The changes waiting on d go back in line. */
void lease_release_held(struct mds *m, struct lease_dir *d);
/* Frees h, taken off d's holders. */
void lease_holder_free(struct mds *m, struct lease_dir *d, struct lease_holder *h);
/* d's exclusive holder holds it no more (its fence ran out): others' reads go on. */
void lease_excl_end(struct mds *m, struct lease_dir *d);
/* MDS_LEASE's LW_LEASE_ALL: every lease of sid ends, given back (no fence). */
void mds_leases_give_back_all(struct mds *m, uint64_t sid);
/* A holder went: if that was the last recalled one, the waiting changes go on. */
void lease_after_removal(struct mds *m, struct lease_dir *d);

#endif
