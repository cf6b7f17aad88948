/*
 * The daemons' HTTP port over libmicrohttpd (MHD): see http.h. MHD parses, times out and answers
 * malformed requests; this file decides which requests reach the handler and turns its answer
 * into a response.
 *
 * A request reaches on_request() twice or more: first with only its headers, then once per piece
 * of body, then once more with none left. The method and the absence of a body are checked at
 * the first call, where an answer queued makes MHD skip the body and close the connection after
 * it; the handler runs at the last, after which a keep-alive connection stays open for the next
 * request (a scraper's every 15 s).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "net/http.h"

#define HTTP_DEFAULT_TYPE "text/plain; charset=utf-8"

struct http_srv {
	struct MHD_Daemon *mhd;
	const char *name;               /* for log lines; a literal */
	http_handler_fn handler;
	void *arg;
	uint16_t port;                  /* bound, as MHD tells it */
	/* MHD logs from its thread and, while starting and stopping, from the caller's: one limiter
	 * for both, as a stranger's garbage can make a line per connection. */
	pthread_mutex_t log_lock;
	struct log_limit log_limit;
};

/* What *req_cls points to once a request's headers passed the checks (no state of its own). */
static char headers_checked;

static void http_log(struct http_srv *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void http_vlog(struct http_srv *h, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	/* A path is a stranger's, decoded: "%0a" must not start a line of its own in the log. */
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			line[i] = '?';
	}
	pthread_mutex_lock(&h->log_lock);
	log_limited(&h->log_limit, clock_mono_ns(), "%s: http: %s", h->name, line);
	pthread_mutex_unlock(&h->log_lock);
}

static void http_log(struct http_srv *h, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	http_vlog(h, fmt, ap);
	va_end(ap);
}

/* MHD_OPTION_EXTERNAL_LOGGER: MHD's lines end in '\n', which http_vlog drops. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	http_vlog(cls, fmt, ap);
}

/* A short text answer of the module's own (405, 400, 500), from static memory. */
static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned status, const char *text,
				   const char *allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret = MHD_NO;

	r = MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;          /* out of memory: MHD drops the connection */
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, HTTP_DEFAULT_TYPE) == MHD_NO)
		goto out;
	if (allow && MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow) == MHD_NO)
		goto out;
	ret = MHD_queue_response(c, status, r);
out:
	MHD_destroy_response(r);
	return ret;
}

/* Whether a body follows the headers: in HTTP/1.x exactly when there is a Transfer-Encoding or a
 * Content-Length other than 0. */
static int has_body(struct MHD_Connection *c)
{
	const char *len;
	char *end;

	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return 1;
	len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!len)
		return 0;
	return !(*len >= '0' && *len <= '9' && strtoull(len, &end, 10) == 0 && *end == '\0');
}

/* Runs the handler and queues its answer; the body's ownership goes to MHD's response (or is
 * freed here when there is none). */
static enum MHD_Result answer_handler(struct http_srv *h, struct MHD_Connection *c, const char *path)
{
	struct http_answer ans = { 0 };
	struct MHD_Response *r;
	enum MHD_Result ret = MHD_NO;
	int rc;

	rc = h->handler(path, c, &ans, h->arg);
	if (rc == 0 && (ans.status < 200 || ans.status > 599 || (!ans.body && ans.len))) {
		http_log(h, "%s: the handler's answer is no answer (status %u, %zu bytes, body %s)", path,
			 ans.status, ans.len, ans.body ? "set" : "NULL");
		rc = -EINVAL;
	}
	if (rc < 0) {
		free(ans.body);
		if (rc != -EINVAL)
			http_log(h, "%s: %s", path, strerror(-rc));
		return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal server error\n", NULL);
	}
	/* MUST_FREE: MHD frees the body with the response, after the last byte is sent (HEAD's
	 * response never sends it, but still counts its length in Content-Length). */
	r = MHD_create_response_from_buffer(ans.len, ans.body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(ans.body);
		return MHD_NO;
	}
	if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				    ans.content_type ? ans.content_type : HTTP_DEFAULT_TYPE) == MHD_NO)
		goto out;
	ret = MHD_queue_response(c, ans.status, r);
out:
	MHD_destroy_response(r);
	return ret;
}

/* MHD's access handler: see the comment at the top of the file for the order of its calls. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	if (!*req_cls) {
		if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
			return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n",
					   MHD_HTTP_METHOD_GET ", " MHD_HTTP_METHOD_HEAD);
		if (has_body(c))
			return answer_text(c, MHD_HTTP_BAD_REQUEST, "GET and HEAD take no body\n", NULL);
		*req_cls = &headers_checked;
		return MHD_YES;
	}
	/* Cannot come: has_body() said none would. Dropping the connection is the safe answer. */
	if (*upload_data_size)
		return MHD_NO;
	return answer_handler(cls, c, url);
}

const char *http_query(void *conn_ctx, const char *name)
{
	return MHD_lookup_connection_value(conn_ctx, MHD_GET_ARGUMENT_KIND, name);
}

int http_addr_parse(const char *s, char *host, size_t host_cap, uint16_t *port)
{
	char buf[INET_ADDRSTRLEN];
	struct in_addr a;
	const char *colon = s ? strchr(s, ':') : NULL;
	size_t hlen;
	uint32_t p;

	if (!colon)
		return -EINVAL;
	hlen = (size_t)(colon - s);
	if (hlen == 0 || hlen >= sizeof(buf) || hlen >= host_cap)
		return -EINVAL;
	memcpy(buf, s, hlen);
	buf[hlen] = '\0';
	if (inet_pton(AF_INET, buf, &a) != 1 || u32_parse(colon + 1, 0, 65535, &p))
		return -EINVAL;
	memcpy(host, buf, hlen + 1);
	*port = (uint16_t)p;
	return 0;
}

/*
 * Why MHD_start_daemon failed, as an errno: it returns only NULL, with the reason in a log line of
 * text. A bind of the same address as MHD's (SO_REUSEADDR, as MHD sets it) tells the usual ones:
 * a port taken, an address not this host's, a privileged port. Anything else, or a probe that
 * binds (the failure was elsewhere, or the port has just been freed), is -EIO.
 */
static int bind_errno(const struct sockaddr_in *sa)
{
	int fd, one = 1, rc = -EIO;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -EIO;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 &&
	    (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES))
		rc = -errno;
	close(fd);
	return rc;
}

int http_start(const char *name, const char *host, uint16_t port, http_handler_fn handler, void *arg,
	       struct http_srv **out)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	const union MHD_DaemonInfo *info;
	struct http_srv *h = NULL;
	char what[96];
	int rc;

	if (!handler || !host || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		rc = -EINVAL;
		goto fail;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		rc = -ENOMEM;
		goto fail;
	}
	h->name = name;
	h->handler = handler;
	h->arg = arg;
	pthread_mutex_init(&h->log_lock, NULL);
	snprintf(what, sizeof(what), "%s: http: errors", name);
	log_limit_init(&h->log_limit, LOG_WARN, what);

	/*
	 * One internal thread polling every connection (epoll where there is one): a handler blocks
	 * the others, which is fine for /metrics. The logger goes first so that MHD's start-up lines
	 * reach it. The limits keep strangers from hurting the daemon: connections in all and from
	 * one address, the memory of each (request headers beyond it get 431), and 10 s of silence
	 * after which one is closed, so a stalled client holds its slot that long at most.
	 */
	h->mhd = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, port, NULL, NULL,
				  on_request, h,
				  MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, h,
				  MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS,
				  MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNS_PER_IP,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
				  MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
				  MHD_OPTION_END);
	if (!h->mhd) {
		rc = bind_errno(&sa);
		log_err("%s: http: cannot serve on %s:%u: %s", name, host, port,
			rc == -EIO ? "libmicrohttpd refused to start (see its line above)" : strerror(-rc));
		goto fail_lock;
	}
	info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
	if (!info || !info->port) {
		log_err("%s: http: libmicrohttpd does not tell the port it bound", name);
		rc = -EIO;
		goto fail_mhd;
	}
	h->port = info->port;
	log_info("%s: http: serving on %s:%u", name, host, h->port);
	*out = h;
	return 0;

fail_mhd:
	MHD_stop_daemon(h->mhd);
fail_lock:
	pthread_mutex_lock(&h->log_lock);
	log_limit_flush(&h->log_limit, UINT64_MAX);
	pthread_mutex_unlock(&h->log_lock);
	pthread_mutex_destroy(&h->log_lock);
	free(h);
fail:
	return rc;
}

int http_serve_stats(const char *name, const char *addr, http_handler_fn handler, void *arg,
		     struct http_srv **out)
{
	char host[64];
	uint16_t port;
	int rc;

	if (http_addr_parse(addr, host, sizeof(host), &port)) {
		log_err("bad --http address '%s' (HOST:PORT, a numeric IPv4 host)", addr);
		return -EINVAL;
	}
	rc = http_start(name, host, port, handler, arg, out);
	if (rc) {
		log_err("cannot serve HTTP on %s: %s", addr, strerror(-rc));
		return rc;
	}
	log_info("statistics on http://%s:%u/metrics", host, http_port(*out));
	return 0;
}

uint16_t http_port(const struct http_srv *h)
{
	return h->port;
}

void http_stop(struct http_srv *h)
{
	if (!h)
		return;
	/* Joins MHD's thread, which returns once the handler running (if any) has: no handler runs
	 * after this, and none holds h. */
	MHD_stop_daemon(h->mhd);
	log_limit_flush(&h->log_limit, UINT64_MAX);
	pthread_mutex_destroy(&h->log_lock);
	free(h);
}
