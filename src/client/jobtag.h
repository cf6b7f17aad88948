/*
 * The job id on libloom's requests (Lustre's jobstats: common/jobid.h says how one is made).
 *
 * Every call libloom makes for a process starts with fs_call_init, which gives it the job id of
 * that process (the administrator's requests, GET_PARAM and the like, which servers count to no
 * job, need not). For the thread making the call, that is:
 *  1. the job a front end named for the thread (loom_job_set: loom-mount names its caller's at
 *     the start of every FUSE and door request, and takes it back at the end);
 *  2. inside jobtag_enter .. jobtag_leave, the job recorded with work accepted earlier and done
 *     now, perhaps on another thread or for another caller: a write behind settled or sent again
 *     when someone else's close reaps it, an erasure-coded row or Data-on-MDT bytes sent at a
 *     close, a prefetcher's reads. Bytes are charged to the job that wrote them, and reads ahead
 *     to the job that asked for them;
 *  3. on any other thread (an application's, the lease thread): this process's own, worked out
 *     once per connection from its settings (jobtag.c), and again in a child after fork (%p).
 * 1 and 2 are the thread's own job (the rpc layer's rpc_job_set holds it): a thread that serves
 * many callers sets it per unit of work and takes it back after, so that no caller's job leaks
 * into the next one's requests.
 */
#ifndef LOOM_CLIENT_JOBTAG_H
#define LOOM_CLIENT_JOBTAG_H

#include <stdbool.h>

#include "common/jobid.h"
#include "loom/loom.h"
#include "net/rpc.h"

_Static_assert(LOOM_JOBID_LEN == LW_JOBID_LEN, "a job id as made is a job id as sent");

/* What jobtag_enter replaced, for jobtag_leave to put back. */
struct jobtag_scope {
	bool own;
	char job[LOOM_JOBID_LEN];
};

/* The settings ($LOOM_JOBID_VAR, $LOOM_JOBID_NAME, else the defaults) of a new connection. */
void jobtag_init(loom_fs *fs);
void jobtag_destroy(loom_fs *fs);
/* The job the calling thread's requests are for now (1, 2 or 3 above), into out: what to record
 * with work that will be done later. */
void jobtag_current(loom_fs *fs, char out[LOOM_JOBID_LEN]);
/* From here until jobtag_leave(saved), the calling thread's requests are for job (recorded by
 * jobtag_current). Scopes nest. */
void jobtag_enter(struct jobtag_scope *saved, const char *job);
void jobtag_leave(const struct jobtag_scope *saved);
/* rpc_call_init for libloom's calls, with the calling thread's job. */
void fs_call_init(loom_fs *fs, struct rpc_call *call, uint16_t opcode, const void *body,
		  uint32_t body_len);

#endif
