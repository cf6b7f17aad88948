/* The etcd v3 client over the JSON gateway, as etcd.h describes it. */
#include "common/etcd.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/evp.h>

#include "common/log.h"
#include "common/util.h"

/* A reply longer than this is refused (-EPROTO): etcd's own limit on a request is 1.5 MiB, and a
 * server that is not etcd must not make us allocate without bound. */
#define ETCD_REPLY_MAX (8u << 20)
/* Keys and values are base64 on the wire; EVP_EncodeBlock counts in int. */
#define ETCD_VALUE_MAX (64u << 20)

struct etcd {
	CURL *curl;                  /* one handle: its connection to an endpoint is kept between calls */
	struct curl_slist *headers;
	char **urls;                 /* the endpoints, without a trailing '/' */
	size_t nurls;
	size_t current;              /* the endpoint that answered last: each call starts there */
	char *reply;                 /* the reply's body, as the write callback gathers it */
	size_t reply_len, reply_cap;
	bool reply_too_long, reply_nomem;
	char curl_err[CURL_ERROR_SIZE];
};

static pthread_once_t etcd_curl_once = PTHREAD_ONCE_INIT;
static CURLcode etcd_curl_init_rc;

static void etcd_curl_init(void)
{
	/* Never cleaned up: other code of the process (or a later etcd_open) may still use curl. */
	etcd_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- base64 ---- */

/* n bytes at p as base64, malloc'd and NUL-terminated; NULL when out of memory. */
static char *b64_encode(const void *p, size_t n)
{
	char *s = malloc(4 * ((n + 2) / 3) + 1);

	if (s)
		EVP_EncodeBlock((unsigned char *)s, p, (int)n);
	return s;
}

/* The base64 string s (n characters) decoded into a malloc'd buffer with a NUL after its *len
 * bytes: 0, -EPROTO for what is not padded base64, -ENOMEM. */
static int b64_decode(const char *s, size_t n, char **out, size_t *len)
{
	size_t pad = 0;
	char *buf;
	int got;

	if (n % 4 || n > ETCD_VALUE_MAX / 3 * 4)
		return -EPROTO;
	for (size_t i = 0; i < n; i++)
		if (isspace((unsigned char)s[i]))   /* EVP_DecodeBlock would skip some of them */
			return -EPROTO;
	if (n >= 1 && s[n - 1] == '=')
		pad++;
	if (n >= 2 && s[n - 2] == '=')
		pad++;
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return -ENOMEM;
	got = n ? EVP_DecodeBlock((unsigned char *)buf, (const unsigned char *)s, (int)n) : 0;
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	if (got < 0 || (size_t)got != n / 4 * 3) {
		free(buf);
		return -EPROTO;
	}
	*len = (size_t)got - pad;
	buf[*len] = '\0';
	*out = buf;
	return 0;
}

/* ---- building requests ---- */

/* json-c's adds do not take the value when they fail: it is put here. */
static int add_value(json_object *o, const char *name, json_object *v)
{
	if (!v)
		return -ENOMEM;
	if (json_object_object_add(o, name, v) != 0) {
		json_object_put(v);
		return -ENOMEM;
	}
	return 0;
}

/* An int64 field as the gateway writes them: a decimal string. */
static int add_int64(json_object *o, const char *name, int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%lld", (long long)v);
	return add_value(o, name, json_object_new_string(buf));
}

static int add_bytes(json_object *o, const char *name, const void *p, size_t n)
{
	char *b64;
	int rc;

	if (n > ETCD_VALUE_MAX)
		return -EINVAL;
	b64 = b64_encode(p, n);
	if (!b64)
		return -ENOMEM;
	rc = add_value(o, name, json_object_new_string(b64));
	free(b64);
	return rc;
}

/* ---- reading replies ---- */

/* The member `name` of o, of the given type: 0, -ENOENT when absent (or null), -EPROTO when of
 * another type. */
static int member(json_object *o, const char *name, json_type type, json_object **out)
{
	json_object *v;

	if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
		return -ENOENT;
	if (!json_object_is_type(v, type))
		return -EPROTO;
	*out = v;
	return 0;
}

/* An int64 field: a decimal string (what the gateway writes), or a JSON integer. Absent is 0, as
 * proto3 leaves out fields at their default. */
static int member_int64(json_object *o, const char *name, int64_t *out)
{
	json_object *v;
	const char *s;
	char *end;
	long long n;

	*out = 0;
	if (!json_object_object_get_ex(o, name, &v) || json_object_is_type(v, json_type_null))
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		errno = 0;
		*out = json_object_get_int64(v);
		return errno ? -EPROTO : 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return -EPROTO;
	s = json_object_get_string(v);
	if (!(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1]))))
		return -EPROTO;
	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno || *end || (size_t)(end - s) != (size_t)json_object_get_string_len(v))
		return -EPROTO;
	*out = n;
	return 0;
}

/* The revision of the header every reply carries. */
static int header_revision(json_object *reply, int64_t *revision)
{
	json_object *header;
	int64_t rev = 0;
	int rc;

	rc = member(reply, "header", json_type_object, &header);
	if (rc == 0)
		rc = member_int64(header, "revision", &rev);
	if (rc == 0 && rev <= 0)
		rc = -EPROTO;
	if (rc)
		return -EPROTO;
	if (revision)
		*revision = rev;
	return 0;
}

/* What the gateway's error object says: {"error": "...", "message": "...", "code": 5} for a call,
 * {"error": {"grpc_code": 5, "message": "..."}} for a stream (keepalive). */
static void error_of(json_object *reply, const char **message, int64_t *code)
{
	json_object *err = reply, *v;

	*message = NULL;
	*code = -1;
	if (member(reply, "error", json_type_object, &v) == 0)
		err = v;
	if (member(err, "message", json_type_string, &v) == 0 || member(err, "error", json_type_string, &v) == 0)
		*message = json_object_get_string(v);
	if (member_int64(err, "code", code) != 0 || *code == 0)
		member_int64(err, "grpc_code", code);
}

/* ---- one call ---- */

static size_t on_reply_data(char *data, size_t size, size_t n, void *arg)
{
	struct etcd *e = arg;
	size_t len = size * n;

	if (len > ETCD_REPLY_MAX - e->reply_len) {
		e->reply_too_long = true;
		return 0;   /* curl ends the transfer: CURLE_WRITE_ERROR */
	}
	if (e->reply_len + len + 1 > e->reply_cap) {
		size_t cap = e->reply_cap ? e->reply_cap : 4096;
		char *buf;

		while (cap < e->reply_len + len + 1)
			cap *= 2;
		buf = realloc(e->reply, cap);
		if (!buf) {
			e->reply_nomem = true;
			return 0;
		}
		e->reply = buf;
		e->reply_cap = cap;
	}
	memcpy(e->reply + e->reply_len, data, len);
	e->reply_len += len;
	e->reply[e->reply_len] = '\0';
	return len;
}

/* One POST of body to endpoint i: 0 with *status and the reply in e->reply, or how the transport
 * failed (etcd.h's list). *sent says whether the request may have reached the server. */
static int post_once(struct etcd *e, size_t i, const char *path, const char *body, long *status, bool *sent)
{
	size_t ulen = strlen(e->urls[i]) + strlen(path) + 1;
	char *url = malloc(ulen);
	long request_size = 0;
	CURLcode cc;
	int rc = 0;

	*sent = false;
	if (!url)
		return -ENOMEM;
	snprintf(url, ulen, "%s%s", e->urls[i], path);
	e->reply_len = 0;
	e->reply_too_long = e->reply_nomem = false;
	e->curl_err[0] = '\0';
	curl_easy_setopt(e->curl, CURLOPT_URL, url);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	cc = curl_easy_perform(e->curl);
	/* This call's bytes of request written, on a new connection or one kept from an earlier
	 * call: 0 means no server can have seen it. */
	curl_easy_getinfo(e->curl, CURLINFO_REQUEST_SIZE, &request_size);
	*sent = request_size > 0;
	switch (cc) {
	case CURLE_OK:
		curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, status);
		break;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
		rc = -EHOSTUNREACH;
		break;
	case CURLE_OPERATION_TIMEDOUT:
		rc = -ETIMEDOUT;
		break;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
		rc = -ECONNRESET;
		break;
	case CURLE_OUT_OF_MEMORY:
		rc = -ENOMEM;
		break;
	default:
		if (cc == CURLE_WRITE_ERROR && e->reply_nomem) {
			rc = -ENOMEM;
		} else if (cc == CURLE_WRITE_ERROR && e->reply_too_long) {
			log_err("etcd %s%s: reply longer than %u bytes", e->urls[i], path, ETCD_REPLY_MAX);
			rc = -EPROTO;
		} else {
			log_err("etcd %s%s: %s", e->urls[i], path, e->curl_err[0] ? e->curl_err : curl_easy_strerror(cc));
			rc = -EPROTO;
		}
		break;
	}
	if (rc && rc != -EPROTO)
		log_debug("etcd %s%s: %s", e->urls[i], path, e->curl_err[0] ? e->curl_err : curl_easy_strerror(cc));
	free(url);
	return rc;
}

/* The start of a reply, for a log line: one line, printable. */
static const char *excerpt(const struct etcd *e, char *buf, size_t cap)
{
	size_t n = MIN(e->reply_len, cap - 1);

	for (size_t i = 0; i < n; i++)
		buf[i] = e->reply[i] >= 0x20 && e->reply[i] < 0x7f ? e->reply[i] : '.';
	buf[n] = '\0';
	return buf;
}

/* The reply in e->reply, of HTTP status `status`, as one JSON object into *out (the caller puts
 * it): 0, -ENOENT for etcd's "not found" (gRPC code 5: a lease that does not exist), -EIO for any
 * other error etcd answers, -EPROTO for what is not the JSON object expected. */
static int parse_reply(struct etcd *e, size_t i, const char *path, long status, json_object **out)
{
	json_tokener *tok = json_tokener_new();
	json_object *reply = NULL, *err;
	const char *message;
	int64_t code;
	size_t end;
	int rc = 0;

	if (!tok)
		return -ENOMEM;
	reply = json_tokener_parse_ex(tok, e->reply ? e->reply : "", (int)e->reply_len);
	end = json_tokener_get_parse_end(tok);
	while (reply && end < e->reply_len && isspace((unsigned char)e->reply[end]))
		end++;
	if (!reply || json_tokener_get_error(tok) != json_tokener_success || end != e->reply_len ||
	    !json_object_is_type(reply, json_type_object)) {
		char start[160];

		if (status != 200)
			log_err("etcd %s%s: HTTP %ld: %s", e->urls[i], path, status, excerpt(e, start, sizeof(start)));
		else
			log_err("etcd %s%s: reply is not a JSON object: %s", e->urls[i], path,
				excerpt(e, start, sizeof(start)));
		rc = status != 200 ? -EIO : -EPROTO;
		goto out;
	}
	if (status != 200 || member(reply, "error", json_type_object, &err) != -ENOENT) {
		error_of(reply, &message, &code);
		if (code == 5) {   /* gRPC NotFound: always a lease here */
			rc = -ENOENT;
			goto out;
		}
		log_err("etcd %s%s: HTTP %ld: %s (gRPC code %lld)", e->urls[i], path, status,
			message ? message : "no message", (long long)code);
		rc = -EIO;
		goto out;
	}
	*out = reply;
	reply = NULL;
out:
	if (reply)
		json_object_put(reply);
	json_tokener_free(tok);
	return rc;
}

/* POSTs req to path on the endpoints, from the one that answered last, and parses the answer into
 * *reply (the caller puts it). An endpoint's answer ends the call, but for a server error (HTTP
 * 5xx) when the call is idempotent; a failure to reach an endpoint moves on to the next, unless the
 * request may have reached it and the call is not idempotent. */
static int call(struct etcd *e, const char *path, json_object *req, bool idempotent, json_object **reply)
{
	const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN |
							   JSON_C_TO_STRING_NOSLASHESCAPE);
	int rc = -EHOSTUNREACH;

	*reply = NULL;
	if (!body)
		return -ENOMEM;
	for (size_t n = 0; n < e->nurls; n++) {
		size_t i = (e->current + n) % e->nurls;
		long status = 0;
		bool sent;
		int r = post_once(e, i, path, body, &status, &sent);

		if (r == 0) {
			r = parse_reply(e, i, path, status, reply);
			if (status < 500) {
				e->current = i;
				return r;
			}
		}
		if (r == -ENOMEM)
			return r;
		/* Keep the most telling failure: a timeout, a broken reply say more than "unreachable". */
		if (r != -EHOSTUNREACH || rc == -EHOSTUNREACH)
			rc = r;
		if (sent && !idempotent)
			break;
	}
	return rc;
}

/* ---- the API ---- */

int etcd_open(const char *endpoints, int timeout_ms, struct etcd **out)
{
	struct curl_slist *headers;
	struct etcd *e;
	const char *p = endpoints;
	int rc = -ENOMEM;

	*out = NULL;
	if (!endpoints || timeout_ms <= 0)
		return -EINVAL;
	pthread_once(&etcd_curl_once, etcd_curl_init);
	if (etcd_curl_init_rc != CURLE_OK) {
		log_err("etcd: curl_global_init: %s", curl_easy_strerror(etcd_curl_init_rc));
		return -ENOMEM;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (;;) {
		size_t n = strcspn(p, ",");
		const char *s = p;
		char **urls;

		while (n && isspace((unsigned char)*s))
			s++, n--;
		while (n && (isspace((unsigned char)s[n - 1]) || s[n - 1] == '/'))
			n--;
		if (!((n > 7 && !strncasecmp(s, "http://", 7)) || (n > 8 && !strncasecmp(s, "https://", 8)))) {
			rc = -EINVAL;
			goto fail;
		}
		urls = realloc(e->urls, (e->nurls + 1) * sizeof(*urls));
		if (!urls)
			goto fail;
		e->urls = urls;
		e->urls[e->nurls] = strndup(s, n);
		if (!e->urls[e->nurls])
			goto fail;
		e->nurls++;
		if (!p[strcspn(p, ",")])
			break;
		p += strcspn(p, ",") + 1;
	}
	e->curl = curl_easy_init();
	if (!e->curl)
		goto fail;
	e->headers = curl_slist_append(NULL, "Content-Type: application/json");
	if (!e->headers)
		goto fail;
	/* No "Expect: 100-continue" wait before a large body: the gateway answers at once anyway. */
	headers = curl_slist_append(e->headers, "Expect:");
	if (!headers)
		goto fail;
	e->headers = headers;
	curl_easy_setopt(e->curl, CURLOPT_NOSIGNAL, 1L);            /* threads: no SIGALRM */
	curl_easy_setopt(e->curl, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(e->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	/* etcd is reached directly: an http_proxy of the environment must not carry the calls. */
	curl_easy_setopt(e->curl, CURLOPT_PROXY, "");
	curl_easy_setopt(e->curl, CURLOPT_HTTPHEADER, e->headers);
	curl_easy_setopt(e->curl, CURLOPT_WRITEFUNCTION, on_reply_data);
	curl_easy_setopt(e->curl, CURLOPT_WRITEDATA, e);
	curl_easy_setopt(e->curl, CURLOPT_ERRORBUFFER, e->curl_err);
	*out = e;
	return 0;
fail:
	etcd_close(e);
	return rc;
}

void etcd_close(struct etcd *e)
{
	if (!e)
		return;
	if (e->curl)
		curl_easy_cleanup(e->curl);
	curl_slist_free_all(e->headers);
	for (size_t i = 0; i < e->nurls; i++)
		free(e->urls[i]);
	free(e->urls);
	free(e->reply);
	free(e);
}

int etcd_lease_grant(struct etcd *e, int ttl_s, int64_t *lease_id)
{
	json_object *req = json_object_new_object(), *reply = NULL;
	int64_t id = 0;
	int rc;

	if (!req)
		return -ENOMEM;
	rc = ttl_s > 0 ? add_int64(req, "TTL", ttl_s) : -EINVAL;
	if (rc == 0)
		rc = call(e, "/v3/lease/grant", req, true, &reply);
	if (rc == 0 && (header_revision(reply, NULL) || member_int64(reply, "ID", &id) || id == 0)) {
		log_err("etcd: lease grant: no lease ID in the reply");
		rc = -EPROTO;
	}
	if (rc == 0)
		*lease_id = id;
	json_object_put(reply);
	json_object_put(req);
	return rc;
}

int etcd_lease_keepalive(struct etcd *e, int64_t lease_id, int *ttl_left)
{
	json_object *req = json_object_new_object(), *reply = NULL, *result;
	int64_t id = 0, ttl = 0;
	int rc;

	if (!req)
		return -ENOMEM;
	rc = add_int64(req, "ID", lease_id);
	/* A stream in gRPC; through the gateway, one request gives one {"result": {...}}. */
	if (rc == 0)
		rc = call(e, "/v3/lease/keepalive", req, true, &reply);
	if (rc == 0 && (member(reply, "result", json_type_object, &result) || header_revision(result, NULL) ||
			member_int64(result, "ID", &id) || id != lease_id || member_int64(result, "TTL", &ttl))) {
		log_err("etcd: keepalive of lease %lld: unexpected reply", (long long)lease_id);
		rc = -EPROTO;
	}
	/* An expired or revoked lease is answered with no TTL (0), not an error. */
	if (rc == 0 && ttl <= 0)
		rc = -ENOENT;
	if (rc == 0 && ttl_left)
		*ttl_left = ttl > INT_MAX ? INT_MAX : (int)ttl;
	json_object_put(reply);
	json_object_put(req);
	return rc;
}

int etcd_lease_revoke(struct etcd *e, int64_t lease_id)
{
	json_object *req = json_object_new_object(), *reply = NULL;
	int rc;

	if (!req)
		return -ENOMEM;
	rc = add_int64(req, "ID", lease_id);
	if (rc == 0)
		rc = call(e, "/v3/lease/revoke", req, true, &reply);
	if (rc == 0 && header_revision(reply, NULL)) {
		log_err("etcd: revoke of lease %lld: unexpected reply", (long long)lease_id);
		rc = -EPROTO;
	}
	json_object_put(reply);
	json_object_put(req);
	return rc;
}

void etcd_kv_free(struct etcd_kv *kv)
{
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

/* One element of a range reply's "kvs" into *kv, if its key is key64 (the key in base64). */
static int kv_parse(json_object *item, const char *key64, struct etcd_kv *kv)
{
	json_object *v;
	int rc;

	if (!json_object_is_type(item, json_type_object) || member(item, "key", json_type_string, &v) ||
	    strcmp(json_object_get_string(v), key64) != 0)
		return -EPROTO;
	rc = member(item, "value", json_type_string, &v);
	if (rc == -ENOENT) {   /* an empty value is left out */
		kv->value = calloc(1, 1);
		kv->len = 0;
		rc = kv->value ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = b64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v), &kv->value,
				&kv->len);
	}
	if (rc == 0 && (member_int64(item, "create_revision", &kv->create_rev) ||
			member_int64(item, "mod_revision", &kv->mod_rev) || member_int64(item, "lease", &kv->lease) ||
			kv->create_rev <= 0 || kv->mod_rev < kv->create_rev))
		rc = -EPROTO;
	if (rc)
		etcd_kv_free(kv);
	return rc;
}

int etcd_get(struct etcd *e, const char *key, struct etcd_kv *kv, int64_t *revision)
{
	json_object *req = json_object_new_object(), *reply = NULL, *kvs, *key64;
	int rc;

	memset(kv, 0, sizeof(*kv));
	if (!req)
		return -ENOMEM;
	rc = add_bytes(req, "key", key, strlen(key));
	if (rc == 0)
		rc = call(e, "/v3/kv/range", req, true, &reply);
	if (rc)
		goto out;
	rc = header_revision(reply, revision);
	if (rc == 0)
		rc = member(reply, "kvs", json_type_array, &kvs);
	if (rc == -ENOENT)   /* no key: no "kvs" */
		goto out;
	json_object_object_get_ex(req, "key", &key64);
	if (rc == 0 && json_object_array_length(kvs) == 0)
		rc = -ENOENT;
	else if (rc == 0 && json_object_array_length(kvs) != 1)
		rc = -EPROTO;
	else if (rc == 0)
		rc = kv_parse(json_object_array_get_idx(kvs, 0), json_object_get_string(key64), kv);
	if (rc == -EPROTO)
		log_err("etcd: get of '%s': unexpected reply", key);
out:
	json_object_put(reply);
	json_object_put(req);
	return rc;
}

/* {"target": "MOD", "result": "EQUAL", "key": ..., "mod_revision": ...} */
static int txn_compare(json_object *list, const struct etcd_cmp *cmp)
{
	json_object *c = json_object_new_object();
	int rc;

	if (!c)
		return -ENOMEM;
	rc = add_value(c, "target", json_object_new_string("MOD"));
	if (rc == 0)
		rc = add_value(c, "result", json_object_new_string("EQUAL"));
	if (rc == 0)
		rc = cmp->key ? add_bytes(c, "key", cmp->key, strlen(cmp->key)) : -EINVAL;
	if (rc == 0)
		rc = add_int64(c, "mod_revision", cmp->mod_rev);
	if (rc == 0 && json_object_array_add(list, c) != 0)
		rc = -ENOMEM;
	if (rc)
		json_object_put(c);
	return rc;
}

/* {"request_put": {"key": ..., "value": ..., "lease": ...}} or {"request_delete_range": {"key": ...}} */
static int txn_op(json_object *list, const struct etcd_op *op)
{
	json_object *wrap = json_object_new_object(), *r = json_object_new_object();
	int rc = wrap && r ? 0 : -ENOMEM;

	if (rc == 0)
		rc = op->key ? add_bytes(r, "key", op->key, strlen(op->key)) : -EINVAL;
	if (rc == 0 && op->value) {
		rc = add_bytes(r, "value", op->value, op->len);
		if (rc == 0 && op->lease)
			rc = add_int64(r, "lease", op->lease);
	}
	if (rc == 0) {
		rc = add_value(wrap, op->value ? "request_put" : "request_delete_range", r);
		r = NULL;
	}
	if (rc == 0 && json_object_array_add(list, wrap) != 0)
		rc = -ENOMEM;
	if (rc) {
		json_object_put(r);
		json_object_put(wrap);
	}
	return rc;
}

int etcd_txn(struct etcd *e, const struct etcd_cmp *cmps, size_t ncmps, const struct etcd_op *ops, size_t nops,
	     int64_t *revision)
{
	json_object *req = json_object_new_object(), *reply = NULL, *v;
	json_object *compare = json_object_new_array(), *success = json_object_new_array();
	int64_t rev = 0;
	int rc;

	if (!req || !compare || !success) {
		json_object_put(compare);
		json_object_put(success);
		json_object_put(req);
		return -ENOMEM;
	}
	/* req takes both lists (add_value puts a list it could not add). */
	rc = add_value(req, "compare", compare);
	if (rc == 0)
		rc = add_value(req, "success", success);
	else
		json_object_put(success);
	for (size_t i = 0; rc == 0 && i < ncmps; i++)
		rc = txn_compare(compare, &cmps[i]);
	for (size_t i = 0; rc == 0 && i < nops; i++)
		rc = txn_op(success, &ops[i]);
	/* Not idempotent: a transaction that may have reached a server is not sent to another. */
	if (rc == 0)
		rc = call(e, "/v3/kv/txn", req, false, &reply);
	if (rc)
		goto out;
	rc = header_revision(reply, &rev);
	/* A transaction whose compares failed has no "succeeded" (false is proto3's default). */
	if (rc == 0 && member(reply, "succeeded", json_type_boolean, &v) == 0 && json_object_get_boolean(v)) {
		/* One response per op (none at all for none). */
		if (nops && (member(reply, "responses", json_type_array, &v) || json_object_array_length(v) != nops))
			rc = -EPROTO;
		else if (revision)
			*revision = rev;
	} else if (rc == 0) {
		rc = member(reply, "succeeded", json_type_boolean, &v) == -EPROTO ? -EPROTO : -ECANCELED;
	}
	if (rc == -EPROTO)
		log_err("etcd: transaction: unexpected reply");
out:
	json_object_put(reply);
	json_object_put(req);
	return rc;
}
