/*
 * The nodemap in a server's memory: which client nodes hold keys of their own (wire_auth.h, "Node
 * keys"), with what generation, and what each may claim. The MDS keeps it from its MDT; an OSS
 * from the MDS (MDS_NODEMAP LIST, asked again whenever its heartbeat replies name a new version).
 * Readers (every request from a node) take a read lock and a binary search by name.
 *
 * A copy may lag (an OSS's, by up to a heartbeat): a key it does not know, of a node it does not
 * list or at a generation past the one it lists, may be one issued since. Such a claim is
 * answered -EAGAIN (the client dials again) and the copy refreshed at once; a second claim after
 * a refresh that still does not list it is refused. A key older than the listed generation is
 * revoked for sure.
 */
#ifndef LOOM_NET_NODEMAP_H
#define LOOM_NET_NODEMAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "loom/types.h"
#include "proto/wire.h"

struct srv_req;

struct nodemap {
	pthread_rwlock_t lock;
	struct lw_node_ent *ents; /* sorted by name */
	uint32_t n;
	uint64_t version;
	bool known;               /* set at least once: until then node keys are -EAGAIN */
	bool authoritative;       /* the MDS's: what it does not list does not exist */
	uint64_t confirmed_ns;    /* clock_mono_ns() when the copy was last known current */
	void (*refresh)(void *arg); /* asks for the copy to be made current soon (an OSS's) */
	void *refresh_arg;
	/* Claims answered -EAGAIN, and when: the next claim of the same after a refresh is judged. */
	pthread_mutex_t asked_lock;
	struct nodemap_asked {
		char name[LW_NODE_NAME];
		uint32_t generation;
		uint64_t at_ns;
	} asked[32];
	uint32_t asked_next;
};

void nodemap_init(struct nodemap *nm);
void nodemap_destroy(struct nodemap *nm);
/* Replaces the whole map (copied and sorted; the names are checked: -EINVAL, map unchanged). */
int nodemap_set(struct nodemap *nm, const struct lw_node_ent *ents, uint32_t n, uint64_t version);
/* The same from n entries packed at p (a reply's body, of any alignment). */
int nodemap_set_packed(struct nodemap *nm, const uint8_t *p, uint32_t n, uint64_t version);
uint64_t nodemap_version(struct nodemap *nm);
/* Its source has this version now (a heartbeat reply said so): if the copy is of it, it is
 * current as of now (true); else it must be fetched (false). */
bool nodemap_confirm(struct nodemap *nm, uint64_t version);
/*
 * Whether a key of node `name` at `generation` is good now: 0, -EACCES (not listed, or another
 * generation: removed or revoked), -EAGAIN (no map learned yet). With out, the node's entry.
 */
int nodemap_lookup(struct nodemap *nm, const char *name, uint32_t generation, struct lw_node_ent *out);
/* nodemap_lookup for a node's authentication, where a copy that may lag answers -EAGAIN as the
 * comment at the top says (and a refresh is asked for). */
int nodemap_admit(struct nodemap *nm, const char *name, uint32_t generation);
/*
 * The check every request gets: 0 for a connection with the file system key (no mapping); 1 for
 * one with a node's key that may send this request (its entry in *ent); or the errno to answer:
 * -EACCES (the node's key was revoked or the node removed since it connected), -EPERM (ops.def's
 * LW_OPF_ADMIN: the file system key's only), -EROFS (LW_OPF_WRITES from a read-only node).
 */
int nodemap_req_check(struct nodemap *nm, const struct srv_req *req, struct lw_node_ent *ent);
/* Whether the node may claim (or give a file to) this id: 0 only if ADMIN, and within its range
 * unless TRUSTED (wire_auth.h, lw_node_ent). */
bool nodemap_may_claim_uid(const struct lw_node_ent *ent, uint32_t uid);
bool nodemap_may_claim_gid(const struct lw_node_ent *ent, uint32_t gid);
/* Maps a node's claims: an id it may not claim becomes its squash id; such groups are dropped. */
void nodemap_map_cred(const struct lw_node_ent *ent, struct loom_cred *cred);

#endif
