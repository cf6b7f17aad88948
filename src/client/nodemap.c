/*
 * The nodemap (wire_auth.h): which client nodes hold keys of their own and what each may claim,
 * kept by the MDS (MDS_NODEMAP), and the node keys themselves, derived here from the file system
 * key this client holds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/internal.h"
#include "common/auth.h"

/* The public values are the wire's, so that they pass through unchanged. */
_Static_assert(LOOM_NODE_ADMIN == LW_NODE_ADMIN, "LOOM_NODE_ADMIN");
_Static_assert(LOOM_NODE_TRUSTED == LW_NODE_TRUSTED, "LOOM_NODE_TRUSTED");
_Static_assert(LOOM_NODE_READONLY == LW_NODE_READONLY, "LOOM_NODE_READONLY");
_Static_assert((LOOM_NODE_ADMIN | LOOM_NODE_TRUSTED | LOOM_NODE_READONLY) == LW_NODE_FLAGS, "LW_NODE_FLAGS");
_Static_assert(LOOM_NODEMAP_ADD == LW_NODEMAP_ADD, "LOOM_NODEMAP_ADD");
_Static_assert(LOOM_NODEMAP_DEL == LW_NODEMAP_DEL, "LOOM_NODEMAP_DEL");
_Static_assert(LOOM_NODEMAP_MODIFY == LW_NODEMAP_MODIFY, "LOOM_NODEMAP_MODIFY");
_Static_assert(LOOM_NODEMAP_REVOKE == LW_NODEMAP_REVOKE, "LOOM_NODEMAP_REVOKE");
_Static_assert(LOOM_NODE_NAME_MAX + 1 == LW_NODE_NAME, "LOOM_NODE_NAME_MAX");
_Static_assert(LW_NODE_NAME == LOOM_NODE_NAME_LEN, "LOOM_NODE_NAME_LEN");

static void ent_of_node(const struct loom_node *n, struct lw_node_ent *e)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->name, n->name, strnlen(n->name, LOOM_NODE_NAME_MAX));
	e->generation = n->generation;
	e->flags = n->flags;
	e->squash_uid = n->squash_uid;
	e->squash_gid = n->squash_gid;
	e->uid_min = n->uid_min;
	e->uid_max = n->uid_max;
	e->gid_min = n->gid_min;
	e->gid_max = n->gid_max;
}

static void node_of_ent(const struct lw_node_ent *e, struct loom_node *n)
{
	memset(n, 0, sizeof(*n));
	memcpy(n->name, e->name, strnlen(e->name, LOOM_NODE_NAME_MAX));
	n->generation = e->generation;
	n->flags = e->flags;
	n->squash_uid = e->squash_uid;
	n->squash_gid = e->squash_gid;
	n->uid_min = e->uid_min;
	n->uid_max = e->uid_max;
	n->gid_min = e->gid_min;
	n->gid_max = e->gid_max;
}

/*
 * One MDS_NODEMAP request (cred prefix, then lw_nodemap_req). The
 * reply's entries are checked (they fill the body exactly, each with a good name) and copied to
 * *ents (malloc'd, NULL when there are none).
 */
static int mdc_nodemap(loom_fs *fs, uint32_t cmd, const struct lw_node_ent *ent,
		       struct lw_node_ent **ents, uint32_t *count)
{
	struct lw_nodemap_req req = { .cmd = cmd, .ent = *ent };
	struct mdc_body b = { { &req }, { sizeof(req) } };
	struct lw_nodemap_rep rep;
	struct loom_cred cr;
	struct rpc_call call;
	struct lw_node_ent *v = NULL;
	size_t have;
	int rc;

	fs_cred(fs, &cr);
	rc = mdc_call(fs, &cr, LW_OP_MDS_NODEMAP, &b, &call);
	if (rc)
		return rc;
	if (call.rbody_len < sizeof(rep)) {
		rc = -EPROTO;
		goto out;
	}
	memcpy(&rep, call.rbody, sizeof(rep));
	have = call.rbody_len - sizeof(rep);
	if (have % sizeof(*v) || have / sizeof(*v) != rep.count) {
		rc = -EPROTO;
		goto out;
	}
	if (rep.count) {
		v = malloc(have);
		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(v, (const uint8_t *)call.rbody + sizeof(rep), have);
	}
	for (uint32_t i = 0; i < rep.count; i++)
		if (!memchr(v[i].name, '\0', sizeof(v[i].name)) || loom_node_name_check(v[i].name)) {
			free(v);
			v = NULL;
			rc = -EPROTO;
			goto out;
		}
	*ents = v;
	*count = rep.count;
out:
	rpc_call_release(&call);
	return rc;
}

/* The node named, as the MDS lists it now. */
static int nodemap_get(loom_fs *fs, const char *name, struct lw_node_ent *out)
{
	struct lw_node_ent key = { .generation = 0 }, *v;
	uint32_t n;
	int rc;

	memcpy(key.name, name, strlen(name));
	rc = mdc_nodemap(fs, LW_NODEMAP_LIST, &key, &v, &n);
	if (rc)
		return rc;
	/* A LIST of one name answers that node alone. */
	if (n != 1 || strcmp(v[0].name, name))
		rc = -EPROTO;
	else
		*out = v[0];
	free(v);
	return rc;
}

int loom_nodemap_ctl(loom_fs *fs, int cmd, const struct loom_node *node, struct loom_node *out)
{
	struct lw_node_ent ent, *v = NULL;
	uint32_t n = 0;
	int rc;

	if (cmd < LOOM_NODEMAP_ADD || cmd > LOOM_NODEMAP_REVOKE || !node ||
	    !memchr(node->name, '\0', sizeof(node->name)) || loom_node_name_check(node->name))
		return -EINVAL;
	if ((cmd == LOOM_NODEMAP_ADD || cmd == LOOM_NODEMAP_MODIFY) &&
	    ((node->flags & ~(uint32_t)LW_NODE_FLAGS) || node->uid_min > node->uid_max ||
	     node->gid_min > node->gid_max))
		return -EINVAL;
	ent_of_node(node, &ent);
	ent.generation = 0; /* the MDS's to set */
	rc = mdc_nodemap(fs, (uint32_t)cmd, &ent, &v, &n);
	if (rc)
		return rc;
	/* ADD and REVOKE answer the node, DEL nothing; MODIFY may answer either. */
	if (n > 1 || (n == 1 && strcmp(v[0].name, node->name)) ||
	    (n == 0 && (cmd == LOOM_NODEMAP_ADD || cmd == LOOM_NODEMAP_REVOKE)) ||
	    (n == 1 && cmd == LOOM_NODEMAP_DEL)) {
		free(v);
		return -EPROTO;
	}
	if (n == 1)
		ent = v[0];
	free(v);
	if (out && cmd == LOOM_NODEMAP_MODIFY && n == 0) {
		rc = nodemap_get(fs, node->name, &ent);
		if (rc)
			return rc;
	}
	if (out && cmd != LOOM_NODEMAP_DEL)
		node_of_ent(&ent, out);
	return 0;
}

int loom_nodemap_list(loom_fs *fs, const char *name, struct loom_node **out, uint32_t *count)
{
	struct lw_node_ent key = { .generation = 0 }, *v = NULL;
	struct loom_node *nodes;
	bool one = name && *name;
	uint32_t n = 0;
	int rc;

	if (one && loom_node_name_check(name))
		return -EINVAL;
	if (one)
		memcpy(key.name, name, strlen(name));
	rc = mdc_nodemap(fs, LW_NODEMAP_LIST, &key, &v, &n);
	if (rc)
		return rc;
	/* The node named alone, or every node in name order (each name once). */
	rc = one && (n != 1 || strcmp(v[0].name, name)) ? -EPROTO : 0;
	for (uint32_t i = 1; rc == 0 && i < n; i++)
		if (strncmp(v[i - 1].name, v[i].name, LW_NODE_NAME) >= 0)
			rc = -EPROTO;
	nodes = rc ? NULL : malloc(n ? n * sizeof(*nodes) : 1);
	if (!rc && !nodes)
		rc = -ENOMEM;
	for (uint32_t i = 0; nodes && i < n; i++)
		node_of_ent(&v[i], &nodes[i]);
	free(v);
	if (rc)
		return rc;
	*out = nodes;
	*count = n;
	return 0;
}

int loom_node_key_write_file(loom_fs *fs, const char *path, const char *name, uint32_t generation)
{
	if (!path || !*path || !name || loom_node_name_check(name) || generation == 0)
		return -EINVAL;
	/* A node's key is made from the file system key; a node's own key makes nothing. */
	if (fs->keylen == 0 || fs->key_id.node[0])
		return -ENOKEY;
	return loom_node_key_write(path, fs->key, fs->keylen, name, generation);
}
