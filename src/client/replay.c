/*
 * The changes this client was told had happened and the MDS has not committed yet (their
 * transno above the last_committed its replies say), kept whole: request and reply. After an
 * MDS restart the MDS connection's hello sends them again (MDS_REPLAY), in transno order, before
 * it opens the files again and replays the locks; the MDS puts them back in the order they were
 * first made, across all its clients (src/mds/replay.c). Each is dropped once a reply says it is
 * committed. fsync and loom_sync wait for that (MDS_SYNC) when something is still kept.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "client/door.h"
#include "client/internal.h"
#include "common/log.h"
#include "common/util.h"

struct kept_change {
	struct kept_change *next;
	uint64_t transno;
	uint64_t req_id;
	uint16_t opcode;
	uint32_t nvers;
	uint32_t body_len;
	uint32_t reply_len;
	struct lw_obj_version vers[LW_MAX_VERS];
	uint8_t data[];        /* the request's body, then the reply's */
};

void kept_changes_init(loom_fs *fs)
{
	pthread_mutex_init(&fs->kept_lock, NULL);
	fs->kept = NULL;
	fs->last_committed = 0;
}

static void drop_committed(loom_fs *fs, uint64_t upto)
{
	while (fs->kept && fs->kept->transno <= upto) {
		struct kept_change *k = fs->kept;
		fs->kept = k->next;
		free(k);
		fs->nkept--;
	}
}

void kept_changes_destroy(loom_fs *fs)
{
	drop_committed(fs, UINT64_MAX);
	pthread_mutex_destroy(&fs->kept_lock);
}

void kept_changes_on_reply(void *arg, struct rpc_call *call)
{
	loom_fs *fs = arg;
	struct kept_change *k = NULL, **pp;
	bool early = false;

	/* Any change made listed this client, committed first or not: it says goodbye. */
	early = call->transno && (lw_op_flags(call->opcode) & LW_OPF_REPLAY);
	if (early && call->transno > call->last_committed) {
		k = malloc(sizeof(*k) + (size_t)call->body_len + call->rbody_len);
		if (!k) {
			log_warn("no memory to keep %s (transno %llu) for a replay: an MDS crash before its "
				 "commit would lose it", lw_op_name(call->opcode),
				 (unsigned long long)call->transno);
		} else {
			k->transno = call->transno;
			k->req_id = call->req_id;
			k->opcode = call->opcode;
			k->nvers = call->nvers;
			k->body_len = call->body_len;
			k->reply_len = call->rbody_len;
			memcpy(k->vers, call->vers, sizeof(k->vers));
			memcpy(k->data, call->body, call->body_len);
			if (call->rbody_len)
				memcpy(k->data + call->body_len, call->rbody, call->rbody_len);
		}
	}
	pthread_mutex_lock(&fs->kept_lock);
	/* Listed by the MDS among the clients a restart waits for, until the goodbye. */
	fs->changed |= early;
	if (call->last_committed > fs->last_committed) {
		fs->last_committed = call->last_committed;
		drop_committed(fs, fs->last_committed);
	}
	if (k) {
		/* Replies come mostly in transno order: the place is at the end, or near it. */
		for (pp = &fs->kept; *pp && (*pp)->transno < k->transno; pp = &(*pp)->next)
			;
		k->next = *pp;
		*pp = k;
		fs->nkept++;
	}
	pthread_mutex_unlock(&fs->kept_lock);
}

bool kept_changes_any(loom_fs *fs)
{
	bool any;

	pthread_mutex_lock(&fs->kept_lock);
	any = fs->kept != NULL;
	pthread_mutex_unlock(&fs->kept_lock);
	return any;
}

/* One MDS_REPLAY in the hello: 0 with the MDS's answer in *status, or a connection error. */
static int replay_one(struct rpc_hs *hs, const struct kept_change *k, int *status)
{
	struct lw_replay_req f = { .transno = k->transno, .req_id = k->req_id, .opcode = k->opcode,
				   .nvers = k->nvers, .body_len = k->body_len, .reply_len = k->reply_len };
	size_t len = sizeof(f) + k->nvers * sizeof(k->vers[0]) + k->body_len + k->reply_len;
	uint8_t *body, none[8];
	uint32_t rlen = 0;
	int rc;

	if (len > LW_MAX_BODY) {
		*status = -E2BIG;
		return 0;
	}
	body = malloc(len);
	if (!body)
		return -ENOMEM;
	memcpy(body, &f, sizeof(f));
	memcpy(body + sizeof(f), k->vers, k->nvers * sizeof(k->vers[0]));
	memcpy(body + sizeof(f) + k->nvers * sizeof(k->vers[0]), k->data, k->body_len + k->reply_len);
	rc = rpc_hs_call_status(hs, LW_OP_MDS_REPLAY, body, (uint32_t)len, none, sizeof(none), &rlen, status);
	free(body);
	return rc;
}

/*
 * The MDS restarted: every change kept is sent again, in transno order (the MDS answers at once
 * those it needs not redo: committed before the crash, or made since), then that there is no
 * more (also with nothing: the MDS may be waiting for this client). A change the MDS refuses is
 * lost: said, and not sent again. Runs on the MDS connection's thread, the only one that
 * changes the list, so the list is walked without its lock held across the calls.
 */
int kept_changes_replay(loom_fs *fs, struct rpc_hs *hs)
{
	struct lw_replay_req done = { .flags = LW_RP_DONE };
	struct kept_change **pp;
	uint32_t sent = 0, refused = 0, rlen = 0;
	uint8_t none[8];
	int rc = 0, status;

	for (pp = &fs->kept; *pp;) {
		struct kept_change *k = *pp;

		rc = replay_one(hs, k, &status);
		if (rc)
			return rc; /* the hello runs again, and these with it */
		if (status) {
			log_err("the MDS restarted and refused to replay %s (transno %llu) that it had "
				"answered: %s (%s); that change is lost", lw_op_name(k->opcode),
				(unsigned long long)k->transno,
				status == -ETIMEDOUT ? "this client came back after the MDS's recovery window"
						     : "what it changed is not as it was: a change before it "
						       "was lost with another client",
				strerror(-status));
			pthread_mutex_lock(&fs->kept_lock);
			*pp = k->next;
			fs->nkept--;
			pthread_mutex_unlock(&fs->kept_lock);
			free(k);
			refused++;
			continue;
		}
		sent++;
		pp = &k->next;
	}
	rc = rpc_hs_call_status(hs, LW_OP_MDS_REPLAY, &done, sizeof(done), none, sizeof(none), &rlen, &status);
	if (rc == 0 && status)
		log_warn("the MDS answered this client's end of replays with %s", strerror(-status));
	if (rc == 0 && (sent || refused))
		log_info("replayed %u change(s) to the MDS (%u refused)", sent, refused);
	return rc;
}

static int sync_call(loom_fs *fs, uint32_t flags)
{
	struct lw_sync_req req = { .flags = flags };
	struct mdc_body b = { .part = { &req }, .len = { sizeof(req) } };
	struct rpc_call call;
	int rc = mdc_call(fs, NULL, LW_OP_MDS_SYNC, &b, &call);

	if (rc == 0)
		rpc_call_release(&call);
	return rc;
}

int loom_sync(loom_fs *fs)
{
	if (fs->door)
		return door_path_op(fs, DOOR_OP_SYNC, NULL, NULL, 0, 0, 0);
	if (!kept_changes_any(fs))
		return 0; /* everything this client was told is committed */
	return sync_call(fs, 0);
}

void kept_changes_goodbye(loom_fs *fs, bool wait)
{
	size_t kept;
	bool changed, was;
	int rc;

	pthread_mutex_lock(&fs->kept_lock);
	kept = fs->nkept;
	changed = fs->changed;
	pthread_mutex_unlock(&fs->kept_lock);
	if (!changed)
		return; /* the MDS never listed this client */
	/* Only this process could replay what it keeps: it is committed before it goes, waiting
	 * for an MDS that is away as any call does. With nothing kept, or when told not to wait
	 * (a finalizer at a program's exit), the goodbye goes only if the MDS is there. */
	was = rpc_nowait_swap(!(wait && kept));
	rc = sync_call(fs, LW_SYNC_BYE);
	rpc_nowait_swap(was);
	if (rc && kept)
		log_warn("the MDS could not be reached to commit this client's last %zu change(s) before "
			 "it went (%s): they are lost should the MDS have crashed before committing them",
			 kept, strerror(-rc));
}
