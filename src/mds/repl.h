/*
 * A replicated MDT without shared storage (docs/architecture.md, "A replicated MDT"): two MDSs,
 * each with an MDT of its own; the one that holds the coordinator's leader key (etcd, coord.c)
 * serves, the other follows its commits (standby.c) and applies them to its MDT.
 *
 * Sync mode: a commit counts as committed (last_committed, which lets clients forget what they
 * would replay; an fsync's answer) only once the standby has written it, while the standby is
 * counted in. The coordinator keeps the set of MDSs whose MDT holds everything acknowledged (its
 * sync key); only they may take over. A standby that stops acknowledging for --repl-timeout is
 * struck from that set before the active goes on alone; one that caught up is added to it.
 */
#ifndef LOOM_MDS_REPL_H
#define LOOM_MDS_REPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mdt/store.h"

struct mds;
struct srv_req;
struct mds_coord;
struct repl_commit;

#define MDS_REPL_NAME_MAX    63
#define MDS_REPL_TIMEOUT_MS  5000   /* --repl-timeout default */
#define MDS_ETCD_LEASE_DEFAULT 10u  /* --etcd-lease default, seconds */
#define MDS_REPL_LOG_BYTES   (256ull << 20) /* commits kept for a standby that lags */

/*
 * The standby's standing. It rises ALONE -> JOINING (it acknowledged the newest commit: from now
 * on commits wait for it) -> SYNC (the coordinator listed it, while still JOINING of the same
 * generation). It falls to ALONE (generation + 1) when it misses an acknowledgement, goes silent,
 * or says it holds less than it acknowledged; and a fall from JOINING or SYNC leaves a strike
 * pending: no commit counts as committed, and no standby rises, before the coordinator has
 * struck it from the list. The coordinator lists and strikes under its own lock, so a strike
 * always lands after a listing that began before the fall.
 */
enum mds_repl_state {
	REPL_ALONE,
	REPL_JOINING,
	REPL_SYNC,
};

/* A snapshot of the standing, for the coordinator. */
struct mds_repl_view {
	enum mds_repl_state state;
	uint64_t gen;
	bool strike_pending;
	bool silent;            /* not heard from for --repl-timeout */
	char standby[MDS_REPL_NAME_MAX + 1];
};

struct mds_repl {
	bool on;                        /* --etcd: this MDS replicates its MDT */
	char name[MDS_REPL_NAME_MAX + 1]; /* this MDS's address, as the coordinator names it */
	uint8_t uuid[16];               /* the MDT's */
	uint64_t epoch;                 /* the coordinator's fencing token of this run (0: none) */
	struct mdt_repl_pos prev;       /* where this MDT's current epoch began */
	uint32_t timeout_ms;            /* --repl-timeout */
	struct mds_coord *coord;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct repl_commit *head, *tail; /* commits kept for the standby, oldest first */
	uint64_t bytes;
	uint64_t last_seq;              /* the newest commit */
	enum mds_repl_state state;
	uint64_t gen;                   /* of the standing: + 1 at every fall, and a new standby */
	bool strike_pending;            /* fallen from JOINING or SYNC, not struck yet */
	char standby[MDS_REPL_NAME_MAX + 1]; /* the standby that pulls ("" none yet) */
	uint64_t acked_seq;             /* what it has written */
	uint64_t heard_ns;              /* its last pull */
	struct srv_req *parked;         /* its pull, waiting for a commit */
	uint64_t parked_from;
	uint64_t parked_until_ns;
	/* The MDS stopped serving (its event loop ended): no acknowledgement can come any more,
	 * and nothing more is answered; the last commits wait for nobody. */
	_Atomic bool draining;

	/* The copy a new standby starts from (MDS_REPL_COPY). */
	pthread_mutex_t copy_lock;
	int copy_fd;                    /* an unnamed file in the MDT directory, or -1 */
	uint64_t copy_size;
	uint32_t copy_gen;              /* + 1 for each copy made */
	bool copy_busy;                 /* a copy is being made, or its thread still answers */
	const char *mdt_dir;
};

/* Turns replication on for m->store, at epoch (repl.c): the MDT's redo goes to the commit log. */
int mds_repl_start(struct mds *m);
void mds_repl_stop(struct mds *m);
/* After the commit that made seq (the metadata thread, commit.c): waits until the standby has it
 * while it is counted in. 0, or a negative errno when it could not be confirmed that the
 * standby was struck (the MDS must not answer anything more: it stops). */
int mds_repl_wait(struct mds *m, uint64_t seq);
/* Answers pulls that waited long enough (the metadata thread's tick). */
void mds_repl_tick(struct mds *m);
/* MDS_REPL_PULL and MDS_REPL_COPY, on the network thread. */
void mds_repl_pull(struct mds *m, struct srv_req *req);
void mds_repl_copy(struct mds *m, struct srv_req *req);
/* The coordinator's side (coord.c, under its lock): the standing as it is; the listing of a
 * JOINING standby of generation gen (SYNC, unless it fell meanwhile); a pending strike done; a
 * silent standby made to fall (it leaves a strike pending). */
void mds_repl_view(struct mds *m, struct mds_repl_view *v);
void mds_repl_listed(struct mds *m, uint64_t gen);
void mds_repl_struck(struct mds *m, uint64_t gen);
void mds_repl_fall_silent(struct mds *m, uint64_t gen);

/* standby.c: follows the active MDS that the coordinator names, applying its commits to the MDT in
 * mdt_dir (taking a copy first where needed), until this MDS wins the leader key: then 0, with
 * m->repl.epoch set. A negative errno for what stops it for good (logged). */
struct rpc_conn_opts;
int mds_standby_run(struct mds *m, struct mds_coord *coord, const char *mdt_dir, const char *name,
		    const struct rpc_conn_opts *co);

/* coord.c: the coordinator (etcd). */
struct mds_coord_opts {
	const char *endpoints;   /* --etcd */
	const char *fsname;
	const char *name;        /* this MDS's address */
	uint32_t lease_s;        /* --etcd-lease */
};
int mds_coord_open(const struct mds_coord_opts *o, struct mds_coord **out);
void mds_coord_close(struct mds_coord *c);
enum mds_coord_role {
	COORD_ACTIVE,    /* this MDS holds the leader key: *epoch */
	COORD_FOLLOW,    /* another does: leader */
	COORD_WAIT,      /* nobody does, and this MDS may not take it (not in the sync set, no MDT) */
};
/* What this MDS's MDT holds, for a campaign. */
struct mds_coord_mdt {
	bool exists;
	struct mdt_repl_pos pos;   /* its last commit */
	struct mdt_repl_pos prev;  /* where its epoch began */
};
/* One look at the coordinator: takes the leader key when it is free and this MDS may (it has an
 * MDT, listed in the sync set; or there is no sync set and the MDT never replicated). */
int mds_coord_campaign(struct mds_coord *c, const struct mds_coord_mdt *mdt, enum mds_coord_role *role,
		       uint64_t *epoch, char *leader, size_t cap);
/* Whether the leader key still names `leader` (a standby's check). */
int mds_coord_leader_is(struct mds_coord *c, const char *leader, bool *same);
/* The active's: keeps its lease alive and the sync set in step with m->repl (a thread). */
int mds_coord_serve(struct mds_coord *c, struct mds *m);
/* Exits when the lease may have lapsed at etcd (before the active answers a change). */
void mds_coord_guard(struct mds_coord *c);
/* Strikes a fallen standby from the sync set, if one is pending (any thread). 0, or the etcd
 * error: the MDS must not count anything as committed then. */
int mds_coord_strike(struct mds_coord *c, struct mds *m);

#endif
