/*
 * The OSS's copy of the nodemap (net/nodemap.h): which client nodes' own keys are good, and what
 * each may send. The MDS holds the truth; its heartbeat replies carry the nodemap's version, and
 * when that differs from the copy's (or there is no copy yet) the OSS asks for the whole map. So
 * a revoked key stops working here within a heartbeat or two of the change.
 */
#include "oss/oss_nodemap.h"

#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "proto/codec.h"

/* MDS_NODEMAP LIST, as root (the request carries credentials; the file system key it comes with
 * is what the MDS checks). */
static int fetch(struct nodemap *nm, struct rpc_conn *mds)
{
	struct {
		struct lw_cred cred;
		struct lw_nodemap_req req;
	} body = { .req = { .cmd = LW_NODEMAP_LIST } };
	struct lw_nodemap_rep rep;
	struct rpc_call call;
	int rc;

	rpc_call_init(&call, LW_OP_MDS_NODEMAP, &body, sizeof(body));
	rc = rpc_call_sync(mds, &call);
	if (rc == 0 && call.rbody_len < sizeof(rep))
		rc = -EPROTO;
	if (rc == 0) {
		memcpy(&rep, call.rbody, sizeof(rep));
		if (rep.count != (call.rbody_len - sizeof(rep)) / sizeof(struct lw_node_ent) ||
		    (call.rbody_len - sizeof(rep)) % sizeof(struct lw_node_ent))
			rc = -EPROTO;
	}
	if (rc == 0) {
		/* The entries are copied out (the reply's body is not aligned for them). */
		rc = nodemap_set_packed(nm, (const uint8_t *)call.rbody + sizeof(rep), rep.count, rep.version);
		if (rc == 0)
			log_info("nodemap version %llx from the MDS: %u node%s", (unsigned long long)rep.version,
				 (unsigned)rep.count, rep.count == 1 ? "" : "s");
	}
	rpc_call_release(&call);
	return rc;
}

int oss_nodemap_heard(struct nodemap *nm, struct rpc_conn *mds, const void *hb_reply, uint32_t len)
{
	struct lw_ost_heartbeat_rep rep = { 0 };

	if (len >= sizeof(rep))
		memcpy(&rep, hb_reply, sizeof(rep));
	return nodemap_confirm(nm, rep.nodemap_version) ? 0 : fetch(nm, mds);
}
