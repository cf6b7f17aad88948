/*
 * A small HTTP server for the daemons' /metrics (Prometheus text) and, later, a dashboard: GET and
 * HEAD only, on one IPv4 address, answered by one handler on one thread of libmicrohttpd's.
 *
 * libmicrohttpd does all of HTTP (parsing, keep-alive, HEAD's missing body, 400s for garbage);
 * this module only adds the policy: no other method (405 with Allow), no request body, limits on
 * connections, their memory and their idle time, and its error lines in the daemon's log.
 *
 * Built into its own library (loomhttp, http_dep), never into libloom: the client library must
 * not depend on libmicrohttpd.
 */
#ifndef LOOM_NET_HTTP_H
#define LOOM_NET_HTTP_H

#include <stddef.h>
#include <stdint.h>

struct http_srv;

/* What one server takes, so that garbage or stalled clients cannot hurt it: connections in all
 * and from one address (127.0.0.1 included; more are closed at once), the memory of each (request
 * headers beyond it get 431), and seconds of silence after which one is closed. */
#define HTTP_MAX_CONNS         64
#define HTTP_MAX_CONNS_PER_IP  16
#define HTTP_CONN_MEMORY       (32 * 1024)
#define HTTP_IDLE_TIMEOUT_S    10

/* What a handler answers: status (200, 404, ...), a body it malloc'd (the module frees it), its
 * length and content type (a static string, e.g. "text/plain; version=0.0.4; charset=utf-8").
 * body may stay NULL for an empty body; content_type NULL means "text/plain; charset=utf-8". */
struct http_answer {
	unsigned status;
	char *body;
	size_t len;
	const char *content_type;
};

/*
 * Called on the module's thread for each GET or HEAD request, with the path (no query string)
 * and the query string's value of `name` available through http_query(). Returns 0 after filling
 * ans, or a negative errno (the module answers 500 then). ans comes zeroed; whatever the return,
 * the module takes ownership of ans->body (frees it also on an error, or when the status is not
 * 200..599, which also gets a 500). One request at a time: handlers never run concurrently with
 * each other, but do with the daemon's other threads.
 */
typedef int (*http_handler_fn)(const char *path, void *conn_ctx, struct http_answer *ans, void *arg);

/* The query string's value of `name` for the request conn_ctx (the handler's), decoded; valid
 * until the handler returns. NULL when absent (or given without "=value"). */
const char *http_query(void *conn_ctx, const char *name);

/* "HOST:PORT" (numeric IPv4 host; port 0 = any free one) into host/port: 0 or -EINVAL (also for a
 * host_cap too small for the host). */
int http_addr_parse(const char *s, char *host, size_t host_cap, uint16_t *port);

/*
 * Listens on host:port (a numeric IPv4 address) and answers with handler(…, arg) until
 * http_stop(). name is for log lines ("mds", "oss"...) and must outlive the server (a literal).
 * Returns 0 with *out set, or:
 *   -EINVAL       host is not a numeric IPv4 address, or handler is NULL
 *   -EADDRINUSE   the port is taken on that address (-EADDRNOTAVAIL: not this host's address,
 *                 -EACCES: a privileged port)
 *   -ENOMEM
 *   -EIO          libmicrohttpd refused to start for another reason (its log lines say why)
 */
int http_start(const char *name, const char *host, uint16_t port, http_handler_fn handler, void *arg,
	       struct http_srv **out);

/* The bound port (useful with port 0). */
/* A daemon's --http ADDR: parses it, starts, and logs where its statistics are ("statistics on
 * http://HOST:PORT/metrics", which tests and admins read for port 0) or why not. */
int http_serve_stats(const char *name, const char *addr, http_handler_fn handler, void *arg,
		     struct http_srv **out);
uint16_t http_port(const struct http_srv *h);

/* Closes the port, waits for a handler running to return, drops the connections; frees h. NULL
 * is allowed. */
void http_stop(struct http_srv *h);

#endif
