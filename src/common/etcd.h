/*
 * A small etcd v3 client: what an MDS pair needs to agree which of them is active. The active
 * MDS holds a lease with a TTL and keeps it alive; it owns a leader key created only if absent
 * and attached to the lease, so that the key vanishes when the lease expires (the MDS hung, died
 * or lost etcd). Every change is a compare-and-swap transaction on mod_revision (the MDS's use:
 * src/mds/coord.c, which keeps its epoch, the fencing token, in a key of its own).
 *
 * It speaks etcd's v3 JSON gateway (grpc-gateway in front of the gRPC API, on the client port),
 * HTTP POSTs with libcurl, JSON with json-c: /v3/kv/range, /v3/kv/txn, /v3/lease/grant,
 * /v3/lease/keepalive, /v3/lease/revoke, as etcd 3.4 (Debian 12) serves them. On that wire keys
 * and values are base64 and int64 fields are JSON strings; fields at their proto3 default (0,
 * false, empty) are left out of a reply altogether: a failed transaction has no "succeeded", an
 * expired lease's keepalive no "TTL".
 *
 * Each call is one HTTP request per endpoint tried, bounded by timeout_ms. Several endpoints
 * (members of one cluster) are tried in turn, from the last one that answered. Reads, lease
 * grants, keepalives and revokes go on to the next after any failure but an answer from etcd
 * (an HTTP 5xx, a member without a leader, goes on too). A transaction goes on only while its
 * request cannot have reached a server: one that may have (it timed out, the connection broke, a
 * 5xx) is not sent again; its outcome is unknown, and the caller reads the key to learn it.
 *
 * Not thread-safe: a struct etcd is used by one thread at a time (each thread may have its own).
 *
 * Errors every call may return:
 *   -EHOSTUNREACH  no endpoint could be connected to (the request reached no server)
 *   -ETIMEDOUT     no answer within timeout_ms (an endpoint, or the last one tried)
 *   -ECONNRESET    the connection broke before the answer (outcome unknown, as -ETIMEDOUT)
 *   -EIO           etcd answered an error (an HTTP status other than 200, an "error" in the
 *                  JSON), logged with log_err
 *   -EPROTO        the reply is not HTTP, or not the JSON expected (logged)
 *   -ENOMEM
 */
#ifndef LOOM_COMMON_ETCD_H
#define LOOM_COMMON_ETCD_H

#include <stddef.h>
#include <stdint.h>

struct etcd;

/* A key as it is stored. */
struct etcd_kv {
	char *value;         /* malloc'd, len bytes and a NUL after them (values may hold NULs) */
	size_t len;
	int64_t create_rev;  /* the revision that created the key (since it was last absent) */
	int64_t mod_rev;     /* the revision that last wrote it */
	int64_t lease;       /* the lease it is attached to, 0 for none */
};

/* One compare of a transaction: key's mod_revision == mod_rev; 0 means "the key is absent". */
struct etcd_cmp {
	const char *key;
	int64_t mod_rev;
};

/* One operation of a transaction: a put of len bytes at value (attached to lease, if not 0), or a
 * delete of the key when value is NULL. */
struct etcd_op {
	const char *key;
	const void *value;
	size_t len;
	int64_t lease;
};

/* endpoints: "http://127.0.0.1:2379", or a comma-separated list of URLs (http:// or https://).
 * timeout_ms bounds each HTTP request, connection included; a call that tries n endpoints may take
 * n times as long. -EINVAL for an empty list, a URL of another scheme, timeout_ms <= 0. */
int etcd_open(const char *endpoints, int timeout_ms, struct etcd **out);
void etcd_close(struct etcd *e);

/* A new lease of ttl_s seconds (etcd may raise a TTL below its minimum, about 2 s). */
int etcd_lease_grant(struct etcd *e, int ttl_s, int64_t *lease_id);
/* Renews the lease to its full TTL; *ttl_left (may be NULL) is the TTL the server now gives it.
 * -ENOENT when the lease has expired or was revoked. */
int etcd_lease_keepalive(struct etcd *e, int64_t lease_id, int *ttl_left);
/* Revokes the lease, deleting every key attached to it. -ENOENT when it is gone already (expired,
 * revoked: also when a revoke that timed out had done it before this one). */
int etcd_lease_revoke(struct etcd *e, int64_t lease_id);

/* The key's value and revisions into *kv (to free with etcd_kv_free); *revision (may be NULL) the
 * store's revision when it answered. -ENOENT if the key is absent (*revision still set). */
int etcd_get(struct etcd *e, const char *key, struct etcd_kv *kv, int64_t *revision);
/* Frees kv->value, and zeroes *kv. */
void etcd_kv_free(struct etcd_kv *kv);

/* One transaction: if every compare holds, every op runs, at one new revision (*revision, may be
 * NULL): 0. -ECANCELED if a compare failed (nothing ran). -ENOENT if an op names a lease that does
 * not exist (expired, revoked): nothing ran. -ETIMEDOUT and -ECONNRESET leave its outcome unknown. */
int etcd_txn(struct etcd *e, const struct etcd_cmp *cmps, size_t ncmps, const struct etcd_op *ops, size_t nops,
	     int64_t *revision);

#endif
