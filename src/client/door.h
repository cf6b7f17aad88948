/* libloom's side of a mount's door (src/common/door.h): door.c connects and carries requests,
 * door_api.c is each public call's way through it. */
#ifndef LOOM_CLIENT_DOOR_H
#define LOOM_CLIENT_DOOR_H

#include "client/internal.h"
#include "common/door.h"

/* One request on an idle channel: in (in_len bytes) goes into the slot first, and up to out_cap
 * bytes of what the daemon left there come back in out. 0 with the daemon's answer in *rep, or
 * -EIO when the daemon cannot be reached (then no later call can either). */
int door_call(loom_fs *fs, struct door_req *rq, const char *p0, const char *p1, const void *in, size_t in_len,
	      void *out, size_t out_cap, struct door_rep *rep);

#endif
