/*
 * Identities on the wire: the authentication exchange and the sealed frames after it, node keys,
 * and the nodemap that says what each node may claim. Part of wire.h (included from it; the
 * same rules hold), kept apart so that each file reads in one sitting.
 */
#ifndef LOOM_PROTO_WIRE_AUTH_H
#define LOOM_PROTO_WIRE_AUTH_H

#include <stdint.h>

/* ---------------------------------------------------------------------------------------------
 * Authentication, on every connection to a server that has a file system key, before anything
 * else: the server proves it holds the key to the client and the client to the server.
 *   AUTH_CHALLENGE  request empty; reply lw_auth_challenge (the server's fresh nonce)
 *   AUTH_PROVE      request lw_auth_prove: the client's nonce and
 *                     HMAC-SHA256(key, "loom-auth-client" || server nonce || client nonce);
 *                   reply lw_auth_proof: HMAC-SHA256(key, "loom-auth-server" || client nonce ||
 *                     server nonce), or -EACCES (and the connection is closed)
 * Any other request on a connection not yet authenticated closes it.
 *
 * Encryption: a server that requires it sets LW_F_ENCRYPT on its AUTH_CHALLENGE reply; a client
 * that encrypts (because it was asked to or the server requires it) sets it on AUTH_PROVE and
 * uses the labels "loom-auth-client-encrypt" / "loom-auth-server-encrypt" instead, so that the
 * choice is bound by both proofs; the server's AUTH_PROVE reply carries the flag back. A server
 * that requires encryption answers a proof without it -EACCES.
 *
 * Sealed frames. The exchange gives each direction a session key (HKDF-SHA256 of the file system
 * key with salt = client nonce || server nonce, info "loom c2s" or "loom s2c"; common/auth.h).
 * Every frame after it, both ways (the first being the client's first request after the
 * AUTH_PROVE reply, and the server's first reply after it), is sealed with AES-256-GCM under its
 * direction's key, and carries the 16-byte tag right after its bulk (after the body when there
 * is no bulk, after the header when neither):
 *
 *     lw_hdr | body (body_len) | bulk (bulk_len) | tag (LW_TAG_LEN, not in any length)
 *
 * The 96-bit nonce is 4 zero bytes and the direction's frame counter (u64 big-endian), 0 for the
 * first sealed frame and one more for each after it. It is never sent: a frame replayed, dropped,
 * reordered or injected is checked against another counter than it was sealed with and fails.
 * Without encryption, header, body and bulk are all AAD (authenticated, sent in the clear); with
 * it the header is AAD and body and bulk are ciphertext (same lengths). hdr_crc and bulk_crc stay,
 * over the plain bytes, and are checked after the tag. A frame whose tag fails is never used: the
 * receiver closes the connection (net/seal.h).
 */
#define LW_AUTH_NONCE 32
#define LW_AUTH_MAC   32
#define LW_TAG_LEN    16
struct lw_auth_challenge {
	uint8_t nonce[LW_AUTH_NONCE];
};
_Static_assert(sizeof(struct lw_auth_challenge) == 32, "lw_auth_challenge");

struct lw_auth_prove {
	uint8_t nonce[LW_AUTH_NONCE];
	uint8_t mac[LW_AUTH_MAC];
};
_Static_assert(sizeof(struct lw_auth_prove) == 64, "lw_auth_prove");

struct lw_auth_proof {
	uint8_t mac[LW_AUTH_MAC];
};
_Static_assert(sizeof(struct lw_auth_proof) == 32, "lw_auth_proof");

/* ---------------------------------------------------------------------------------------------
 * Node keys. A client node may hold a key of its own instead of the file system key (`loom key
 * new --node NAME`): HMAC-SHA256(file system key, "loom-node" || name (LW_NODE_NAME bytes,
 * NUL-padded) || generation (u32 little-endian)), which every server derives from the file system
 * key it holds. Such a client sends lw_auth_prove followed by lw_auth_node in AUTH_PROVE, and
 * makes both proofs and the session keys with its node key. The server answers -EACCES for a
 * node the nodemap does not list with that generation (unknown, removed, or its key revoked), and
 * -EAGAIN while it has not yet learned the nodemap (an OSS that just started: try again).
 * Requests on such a connection are then mapped by the node's nodemap entry (lw_node_ent).
 */
#define LW_NODE_NAME 32 /* bytes on the wire: 1..31 of [A-Za-z0-9._-], then NULs */
struct lw_auth_node {
	char     name[LW_NODE_NAME];
	uint32_t generation;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_auth_node) == 40, "lw_auth_node");

/* One node in the nodemap (table `nodemap` of the MDT holds this image, docs/mdt.md). Claims of
 * a node that is not ADMIN to be uid 0 or gid 0 become squash_uid / squash_gid; claims outside
 * [uid_min, uid_max] or [gid_min, gid_max] do too (supplementary groups outside are dropped),
 * unless the node is TRUSTED. A READONLY node may only read: what would change the file system
 * answers -EROFS. Operations for servers and administrators (ops.def's LW_OPF_ADMIN) answer
 * -EPERM to every node key: they need the file system key. */
struct lw_node_ent {
	char     name[LW_NODE_NAME];
	uint32_t generation; /* of its key: 1 at first, one more at each revoke */
	uint32_t flags;      /* LW_NODE_* */
	uint32_t squash_uid;
	uint32_t squash_gid;
	uint32_t uid_min;
	uint32_t uid_max;
	uint32_t gid_min;
	uint32_t gid_max;
};
_Static_assert(sizeof(struct lw_node_ent) == 64, "lw_node_ent");
#define LW_NODE_ADMIN    0x1u /* its root is root (Lustre's admin property) */
#define LW_NODE_TRUSTED  0x2u /* its ids are taken as they are, ranges aside (Lustre's trusted) */
#define LW_NODE_READONLY 0x4u /* it may only read (Lustre's readonly_mount) */
#define LW_NODE_FLAGS    0x7u

/* MDS_NODEMAP: the nodemap, for root with the file system key (a node key gets -EPERM). Request
 * lw_nodemap_req. Reply lw_nodemap_rep + count lw_node_ent:
 *   ADD     a node named ent.name with ent's flags, squash ids and ranges, at generation 1, or
 *           one past the last of a node of that name removed before (its keys stay dead);
 *           -EEXIST if it is there; reply: it.
 *   DEL     the node leaves the nodemap: its key is refused from then on. Reply: none.
 *   MODIFY  ent's flags, squash ids and ranges for the node named (its generation stays).
 *   REVOKE  a new generation for the node: its key so far is refused from then on. Reply: it.
 *   LIST    every node (ent.name "") or the one named (-ENOENT if none), in name order.
 * version (every reply) changes whenever the nodemap does; an OSS learns it from its heartbeat
 * replies and asks for the list again when it differs. */
struct lw_nodemap_req {
	uint32_t cmd; /* LW_NODEMAP_* */
	uint32_t pad;
	struct lw_node_ent ent;
};
_Static_assert(sizeof(struct lw_nodemap_req) == 72, "lw_nodemap_req");
#define LW_NODEMAP_ADD    1u
#define LW_NODEMAP_DEL    2u
#define LW_NODEMAP_MODIFY 3u
#define LW_NODEMAP_REVOKE 4u
#define LW_NODEMAP_LIST   5u

struct lw_nodemap_rep {
	uint64_t version;
	uint32_t count;
	uint32_t pad;
};
_Static_assert(sizeof(struct lw_nodemap_rep) == 16, "lw_nodemap_rep");

#endif
