/*
 * The nodemap on the MDS: client nodes that authenticate with keys of their own (wire_auth.h,
 * "Node keys"). The MDT's table is the truth (mdt/nodemap.c); memory holds a copy for the network
 * thread, which judges every node's authentication and request by it (net/nodemap.c), read
 * again after every commit that changed the table.
 *
 * What a node may claim is decided here, before any handler runs: the request is refused when
 * the node may not send it, and its credentials are mapped (squash, ranges), so that no handler
 * ever sees a node's claim unmapped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mds/dispatch.h"
#include "proto/codec.h"

static int nodemap_read(struct mds *m, uint64_t version)
{
	struct lw_node_ent *ents = NULL;
	struct mdt_txn *t;
	uint32_t n = 0;
	int rc = mdt_txn_begin(m->store, false, &t);

	if (rc == 0) {
		rc = mdt_nodemap_all(t, &ents, &n);
		mdt_txn_abort(t);
	}
	if (rc == 0)
		rc = nodemap_set(&m->nodemap, ents, n, version);
	free(ents);
	return rc;
}

int mds_nodemap_load(struct mds *m)
{
	int rc;

	nodemap_init(&m->nodemap);
	m->nodemap.authoritative = true;
	/* Each run starts from its own version, so that an OSS tells a restarted MDS's map from
	 * the one it had. */
	rc = nodemap_read(m, m->boot_id);
	if (rc)
		log_err("cannot read the nodemap from the MDT: %s", strerror(-rc));
	return rc;
}

void mds_nodemap_reload(struct mds *m)
{
	int rc = nodemap_read(m, nodemap_version(&m->nodemap) + 1);

	/* The old map stays: a node revoked in this commit keeps working until the next change. */
	if (rc)
		log_err("cannot read the changed nodemap from the MDT: %s; the old one stays in use",
			strerror(-rc));
}

/* Does this open (flags as open(2)'s) change anything? */
static bool open_writes(uint32_t open_flags)
{
	return (open_flags & O_ACCMODE) != O_RDONLY || (open_flags & (O_CREAT | O_TRUNC));
}

/*
 * What a node's request claims besides its cred, checked against what its session holds: the
 * file system key's requests are taken on trust here (its holder is every user anyway), a node's
 * are not.
 */
static int node_claims(struct mds *m, const struct srv_req *req, struct lw_mds_req *q,
		       const struct lw_node_ent *ent)
{
	uint64_t sid = mds_sid_of(m, req);

	switch (q->op) {
	case LW_OP_MDS_SETATTR: {
		struct lw_setattr *sa = &q->u.setattr;

		/* "I hold it open for writing" (ftruncate past a chmod) only with such a handle;
		 * else the truncation needs write permission, as a path's does. */
		if ((sa->valid & LW_SA_FH) && !mds_session_holds(m, sid, sa->ino, 0, true))
			sa->valid &= ~(uint32_t)LW_SA_FH;
		/* A file given away goes only to ids the node may claim. */
		if (((sa->valid & LW_SA_UID) && !nodemap_may_claim_uid(ent, sa->uid)) ||
		    ((sa->valid & LW_SA_GID) && !nodemap_may_claim_gid(ent, sa->gid)))
			return -EPERM;
		break;
	}
	case LW_OP_MDS_CLOSE:
	case LW_OP_MDS_SIZE_UPDATE:
		/* A size, times or bytes reported through a handle this session opened for writing
		 * only. */
		if (q->u.close.flags &&
		    !mds_session_holds(m, sid, q->u.close.ino, q->u.close.handle, true))
			return -EBADF;
		break;
	case LW_OP_MDS_DOM_READ:
		/* A file's first bytes, to one that has it open (its open checked the permission). */
		if (!mds_session_holds(m, sid, q->u.ino.ino, 0, false))
			return -EACCES;
		break;
	default:
		break;
	}
	return 0;
}

int mds_nodemap_apply(struct mds *m, const struct srv_req *req, struct lw_mds_req *q)
{
	struct lw_node_ent ent;
	bool ro;
	int rc = nodemap_req_check(&m->nodemap, req, &ent);

	if (rc <= 0)
		return rc; /* the file system key (0), or the refusal */
	rc = node_claims(m, req, q, &ent);
	if (rc)
		return rc;
	ro = ent.flags & LW_NODE_READONLY;
	switch (q->op) {
	case LW_OP_MDS_OPEN:
		if (ro && open_writes(q->u.open.open_flags))
			return -EROFS;
		break;
	case LW_OP_MDS_WALK:
		if (ro && (q->u.walk.f.flags & LW_WALK_OPEN) && open_writes(q->u.walk.f.open_flags))
			return -EROFS;
		break;
	case LW_OP_MDS_CLOSE:
		/* A read-only node's handles wrote nothing: a close that reports size, times or bytes
		 * is not one of theirs. */
		if (ro && q->u.close.flags)
			return -EROFS;
		break;
	default:
		break;
	}
	if (lw_op_flags(q->op) & LW_OPF_CRED)
		nodemap_map_cred(&ent, &q->cred);
	return 0;
}

/* ---- MDS_NODEMAP ---- */

static int reply_nodes(struct mds *m, struct reply *r, const struct lw_node_ent *ents, uint32_t n)
{
	struct lw_nodemap_rep rep = { .version = nodemap_version(&m->nodemap), .count = n };
	int rc = mds_reply_alloc(r, sizeof(rep) + (size_t)n * sizeof(*ents));

	if (rc == 0) {
		memcpy(r->body, &rep, sizeof(rep));
		if (n)
			memcpy((uint8_t *)r->body + sizeof(rep), ents, (size_t)n * sizeof(*ents));
	}
	return rc;
}

static int nodemap_list(struct mds_op *o, const char *name)
{
	struct lw_node_ent *ents = NULL, one;
	uint32_t n = 0;
	int rc;

	if (name[0]) {
		rc = mdt_nodemap_get(o->t, name, &one);
		return rc ? rc : reply_nodes(o->m, o->r, &one, 1);
	}
	rc = mdt_nodemap_all(o->t, &ents, &n);
	if (rc == 0)
		rc = reply_nodes(o->m, o->r, ents, n);
	free(ents);
	return rc;
}

int mds_op_nodemap(struct mds_op *o)
{
	const struct lw_nodemap_req *p = &o->q->u.nodemap;
	struct lw_node_ent cur;
	const char *what;
	int rc;

	/* Only the file system key reaches here (LW_OPF_ADMIN); what it may list, root of an
	 * administrator's node may change. */
	if (srv_req_node(o->req))
		return -EPERM;
	if (p->cmd == LW_NODEMAP_LIST)
		return nodemap_list(o, p->ent.name);
	if (o->q->cred.uid != 0)
		return -EPERM;
	rc = mdt_nodemap_get(o->t, p->ent.name, &cur);
	if (p->cmd == LW_NODEMAP_ADD) {
		if (rc == 0)
			return -EEXIST;
		if (rc != -ENOENT)
			return rc;
		cur = p->ent;
		/* A name removed before goes on from its last generation: its old keys stay dead. */
		rc = mdt_nodemap_last_generation(o->t, p->ent.name, &cur.generation);
		if (rc == 0 && cur.generation == UINT32_MAX)
			return -EOVERFLOW;
		cur.generation = rc == 0 ? cur.generation + 1 : 1;
		what = "added";
	} else if (rc) {
		return rc;
	} else if (p->cmd == LW_NODEMAP_MODIFY) {
		uint32_t generation = cur.generation;

		cur = p->ent;
		cur.generation = generation;
		what = "changed";
	} else if (p->cmd == LW_NODEMAP_REVOKE) {
		if (cur.generation == UINT32_MAX)
			return -EOVERFLOW; /* four billion keys: name the node anew */
		cur.generation++;
		what = "given a new key (the old one is revoked)";
	} else {
		what = "removed";
	}
	rc = p->cmd == LW_NODEMAP_DEL ? mdt_nodemap_del(o->t, cur.name) : mdt_nodemap_put(o->t, &cur);
	if (rc)
		return rc;
	o->bs->nodemap = true;
	log_info("nodemap: node %s %s by %s (generation %u, flags 0x%x, uids %u-%u, gids %u-%u)",
		 cur.name, what, srv_req_peer(o->req), (unsigned)cur.generation, (unsigned)cur.flags,
		 (unsigned)cur.uid_min, (unsigned)cur.uid_max, (unsigned)cur.gid_min,
		 (unsigned)cur.gid_max);
	return reply_nodes(o->m, o->r, &cur, p->cmd == LW_NODEMAP_DEL ? 0 : 1);
}
