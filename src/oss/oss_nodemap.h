/* The OSS's copy of the nodemap, kept up from the MDS's heartbeat replies (oss_nodemap.c). */
#ifndef LOOM_OSS_NODEMAP_H
#define LOOM_OSS_NODEMAP_H

#include <stdint.h>

#include "net/nodemap.h"
#include "net/rpc.h"

/* After a heartbeat whose reply (len bytes) named the MDS's nodemap version: asks for the map
 * when the copy is not of that version. 0, or the error of asking (the copy stays). */
int oss_nodemap_heard(struct nodemap *nm, struct rpc_conn *mds, const void *hb_reply, uint32_t len);

#endif
