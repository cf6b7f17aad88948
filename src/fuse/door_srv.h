/* loom-mount's door (src/common/door.h): its sessions and channels (door.c) and what each
 * request does (door_ops.c). */
#ifndef LOOM_FUSE_DOOR_SRV_H
#define LOOM_FUSE_DOOR_SRV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/door.h"
#include "common/u64map.h"
#include "loom/loom.h"

/* An open file or directory of a session. refs: the session's table holds one, and each request
 * using it one more, so that a CLOSE on another channel never frees it under a read. */
struct door_handle {
	enum door_fh_kind kind;
	unsigned refs;          /* under the session's lock */
	/* Held by the requests that share the handle's state (a directory's page, a file's
	 * position): two channels of a session may send them at once. */
	pthread_mutex_t lock;
	union {
		loom_file *file;
		loom_dir *dir;
		struct door_pf *pf;
	} u;
};

struct lm_door;
struct door_pf;

struct door_session {
	struct lm_door *door;
	uint64_t id;
	uint8_t token[16];
	struct loom_cred cred;  /* what the kernel said of the caller (after root_squash) */
	uint32_t peer_uid, peer_gid; /* ... before it: an ATTACH must come from the same */
	loom_fs *fs;            /* its own connection, acting as cred */
	pthread_mutex_t lock;   /* the handles, and channels */
	struct u64map handles;  /* fh -> struct door_handle * */
	uint64_t next_fh;
	unsigned nfiles, ndirs, npf;
	size_t pf_bytes;        /* what its prefetchers may hold (under the server's lock) */
	unsigned channels;      /* under the server's lock */
	struct door_session *next;
};

/* door.c: whether the mount is read-only now (mounted ro, or remounted so since). */
bool lm_door_read_only(struct lm_door *d);
/* What a session's new prefetcher may hold, charged against its uid's and everyone's bound: up
 * to bytes, what is left of them (0: under DOOR_PF_BYTES_LEAST left); given back at its end. */
size_t lm_door_pf_charge(struct lm_door *d, struct door_session *s, size_t bytes);
void lm_door_pf_uncharge(struct lm_door *d, struct door_session *s, size_t bytes);

/* door_pf.c: prefetchers run for a session (PF_*). */
int door_pf_new(struct door_session *s, const struct door_req *rq, struct door_pf **out, uint64_t *granted);
int64_t door_pf_do(struct door_session *s, struct door_pf *p, const struct door_req *rq, void *slot,
		   struct door_rep *rep);
void door_pf_free(struct door_session *s, struct door_pf *p);

/* door_ops.c: does one request of the session (slot: the channel's shared memory) and fills
 * rep. paths: the body's strings, as many as the op's table entry says. */
void door_do(struct door_session *s, void *slot, const struct door_req *rq, const char *const paths[2],
	     struct door_rep *rep);
/* Closes every handle of a session that is ending. */
void door_handles_close(struct door_session *s);

#endif
