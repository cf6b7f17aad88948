#include "net/nodemap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/auth.h"
#include "common/util.h"
#include "net/server.h"
#include "proto/codec.h"

_Static_assert(LOOM_NODE_NAME_LEN == LW_NODE_NAME, "node name sizes");

void nodemap_init(struct nodemap *nm)
{
	memset(nm, 0, sizeof(*nm));
	pthread_rwlock_init(&nm->lock, NULL);
	pthread_mutex_init(&nm->asked_lock, NULL);
}

void nodemap_destroy(struct nodemap *nm)
{
	free(nm->ents);
	pthread_rwlock_destroy(&nm->lock);
	pthread_mutex_destroy(&nm->asked_lock);
}

static int ent_cmp(const void *a, const void *b)
{
	return strncmp(((const struct lw_node_ent *)a)->name, ((const struct lw_node_ent *)b)->name,
		       LW_NODE_NAME);
}

int nodemap_set(struct nodemap *nm, const struct lw_node_ent *ents, uint32_t n, uint64_t version)
{
	struct lw_node_ent *copy = malloc(n ? n * sizeof(*copy) : 1), *old;

	if (!copy)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		copy[i] = ents[i];
		if (!memchr(copy[i].name, '\0', LW_NODE_NAME) || loom_node_name_check(copy[i].name)) {
			free(copy);
			return -EINVAL;
		}
	}
	qsort(copy, n, sizeof(*copy), ent_cmp);
	pthread_rwlock_wrlock(&nm->lock);
	old = nm->ents;
	nm->ents = copy;
	nm->n = n;
	nm->version = version;
	nm->known = true;
	nm->confirmed_ns = clock_mono_ns();
	pthread_rwlock_unlock(&nm->lock);
	free(old);
	return 0;
}

int nodemap_set_packed(struct nodemap *nm, const uint8_t *p, uint32_t n, uint64_t version)
{
	struct lw_node_ent *ents = malloc(n ? n * sizeof(*ents) : 1);
	int rc;

	if (!ents)
		return -ENOMEM;
	if (n)
		memcpy(ents, p, (size_t)n * sizeof(*ents));
	rc = nodemap_set(nm, ents, n, version);
	free(ents);
	return rc;
}

uint64_t nodemap_version(struct nodemap *nm)
{
	uint64_t v;

	pthread_rwlock_rdlock(&nm->lock);
	v = nm->version;
	pthread_rwlock_unlock(&nm->lock);
	return v;
}

bool nodemap_confirm(struct nodemap *nm, uint64_t version)
{
	bool current;

	pthread_rwlock_wrlock(&nm->lock);
	current = nm->known && nm->version == version;
	if (current)
		nm->confirmed_ns = clock_mono_ns();
	pthread_rwlock_unlock(&nm->lock);
	return current;
}

/* What the copy says of name at generation: 0 (good), -EAGAIN (no copy yet), -ESTALE (listed at
 * a later generation: revoked), -ENOENT (not listed, or at an earlier generation). */
static int judge(struct nodemap *nm, const char *name, uint32_t generation, struct lw_node_ent *out,
		 uint64_t *confirmed_ns)
{
	struct lw_node_ent key = { 0 }, *e;
	int rc;

	memcpy(key.name, name, strlen(name));
	pthread_rwlock_rdlock(&nm->lock);
	e = nm->n ? bsearch(&key, nm->ents, nm->n, sizeof(key), ent_cmp) : NULL;
	if (!nm->known)
		rc = -EAGAIN;
	else if (e && e->generation > generation)
		rc = -ESTALE;
	else if (!e || e->generation != generation)
		rc = -ENOENT;
	else
		rc = 0;
	if (rc == 0 && out)
		*out = *e;
	*confirmed_ns = nm->confirmed_ns;
	pthread_rwlock_unlock(&nm->lock);
	return rc;
}

int nodemap_lookup(struct nodemap *nm, const char *name, uint32_t generation, struct lw_node_ent *out)
{
	uint64_t confirmed;
	int rc;

	if (loom_node_name_check(name))
		return -EACCES;
	rc = judge(nm, name, generation, out, &confirmed);
	return rc == -ESTALE || rc == -ENOENT ? -EACCES : rc;
}

int nodemap_admit(struct nodemap *nm, const char *name, uint32_t generation)
{
	struct nodemap_asked *a = NULL;
	uint64_t confirmed, now = clock_mono_ns();
	bool judged;
	int rc;

	if (loom_node_name_check(name))
		return -EACCES;
	rc = judge(nm, name, generation, NULL, &confirmed);
	if (rc == -EAGAIN && nm->refresh)
		nm->refresh(nm->refresh_arg);
	if (rc != -ENOENT)
		return rc == -ESTALE ? -EACCES : rc;
	if (nm->authoritative || !nm->refresh)
		return -EACCES;
	/* Perhaps issued since the copy was made: judged once the copy is newer than the first
	 * such claim (within a minute; older claims are forgotten). */
	pthread_mutex_lock(&nm->asked_lock);
	for (uint32_t i = 0; i < sizeof(nm->asked) / sizeof(nm->asked[0]); i++)
		if (nm->asked[i].generation == generation && !strncmp(nm->asked[i].name, name, LW_NODE_NAME) &&
		    now - nm->asked[i].at_ns < 60000000000ull)
			a = &nm->asked[i];
	judged = a && confirmed > a->at_ns;
	if (!a) {
		a = &nm->asked[nm->asked_next++ % (sizeof(nm->asked) / sizeof(nm->asked[0]))];
		memset(a, 0, sizeof(*a));
		memcpy(a->name, name, strlen(name));
		a->generation = generation;
		a->at_ns = now;
	}
	pthread_mutex_unlock(&nm->asked_lock);
	if (judged)
		return -EACCES;
	nm->refresh(nm->refresh_arg);
	return -EAGAIN;
}

int nodemap_req_check(struct nodemap *nm, const struct srv_req *req, struct lw_node_ent *ent)
{
	const struct lw_auth_node *node = srv_req_node(req);
	uint32_t flags = lw_op_flags(req->hdr.opcode);
	int rc;

	if (!node)
		return 0;
	rc = nodemap_lookup(nm, node->name, node->generation, ent);
	if (rc)
		return -EACCES; /* revoked or removed since it connected */
	if (flags & LW_OPF_ADMIN)
		return -EPERM;
	if ((flags & LW_OPF_WRITES) && (ent->flags & LW_NODE_READONLY))
		return -EROFS;
	return 1;
}

static bool may_claim(const struct lw_node_ent *ent, uint32_t id, uint32_t lo, uint32_t hi)
{
	if (id == 0 && !(ent->flags & LW_NODE_ADMIN))
		return false;
	return (ent->flags & LW_NODE_TRUSTED) || (id >= lo && id <= hi);
}

bool nodemap_may_claim_uid(const struct lw_node_ent *ent, uint32_t uid)
{
	return may_claim(ent, uid, ent->uid_min, ent->uid_max);
}

bool nodemap_may_claim_gid(const struct lw_node_ent *ent, uint32_t gid)
{
	return may_claim(ent, gid, ent->gid_min, ent->gid_max);
}

void nodemap_map_cred(const struct lw_node_ent *ent, struct loom_cred *cred)
{
	uint32_t kept = 0;

	if (!nodemap_may_claim_uid(ent, cred->uid))
		cred->uid = ent->squash_uid;
	if (!nodemap_may_claim_gid(ent, cred->gid))
		cred->gid = ent->squash_gid;
	for (uint32_t i = 0; i < cred->ngroups && i < LOOM_MAX_GROUPS; i++) {
		uint32_t g = cred->groups[i];

		if (!nodemap_may_claim_gid(ent, g))
			continue; /* a group it may not claim is not claimed */
		cred->groups[kept++] = g;
	}
	cred->ngroups = kept;
}
