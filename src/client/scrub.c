/* loom_ost_scrub: starts or asks about the scrub of one OST (OST_SCRUB to its OSS). */
#include <errno.h>
#include <string.h>

#include "client/internal.h"

static void scrub_status_of(const struct lw_scrub_rep *r, struct loom_scrub_status *st)
{
	memset(st, 0, sizeof(*st));
	st->state = (int)r->state;
	st->error = r->error;
	st->start_time = (time_t)r->start_time;
	st->finish_time = (time_t)r->finish_time;
	st->objects_checked = r->objects_checked;
	st->bytes_checked = r->bytes_checked;
	st->blocks_checked = r->blocks_checked;
	st->blocks_unchecked = r->blocks_unchecked;
	st->bad_blocks = r->bad_blocks;
	st->bad_objects = r->bad_objects;
	st->rate = r->rate;
	st->nbad = r->nbad < LOOM_SCRUB_MAX_BAD ? r->nbad : LOOM_SCRUB_MAX_BAD;
	memcpy(st->bad_objids, r->bad_objids, st->nbad * sizeof(st->bad_objids[0]));
}
_Static_assert(LOOM_SCRUB_MAX_BAD == LW_SCRUB_MAX_BAD, "loom_scrub_status.bad_objids");
_Static_assert(LOOM_SCRUB_IDLE == LW_SCRUB_IDLE && LOOM_SCRUB_RUNNING == LW_SCRUB_RUNNING &&
	       LOOM_SCRUB_DONE == LW_SCRUB_DONE, "scrub states");

int loom_ost_scrub(loom_fs *fs, uint32_t ost_idx, int cmd, struct loom_scrub_status *st)
{
	struct lw_ost_io io = { .ost_idx = ost_idx };
	struct lw_scrub_rep rep;
	struct rpc_call call;
	struct rpc_conn *c;
	int rc;

	if (cmd != LOOM_SCRUB_START && cmd != LOOM_SCRUB_STATUS)
		return -EINVAL;
	io.length = cmd == LOOM_SCRUB_START ? LW_SCRUB_START : LW_SCRUB_STATUS;
	rc = fs_ost_conn(fs, ost_idx, &c);
	if (rc)
		return rc;
	fs_call_init(fs, &call, LW_OP_OST_SCRUB, &io, sizeof(io));
	call.flags = RPC_NOWAIT; /* an administrator asking wants an answer, not a wait */
	rc = rpc_call_sync(c, &call);
	if (rc == 0 && call.rbody_len != sizeof(rep))
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(&rep, call.rbody, sizeof(rep));
		scrub_status_of(&rep, st);
	}
	rpc_call_release(&call);
	return rc;
}
