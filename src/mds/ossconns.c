/*
 * The MDS's own connections to OSSs (the destroyer's, the truncator's), kept from one list of
 * work to the next: a busy unlinker or truncater would otherwise pay a connection and its
 * authentication per list. Each pool belongs to one thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mds/mds.h"

struct oss_conn {
	char host[64];
	uint16_t port;
	struct rpc_conn *conn;
};

int oss_pool_init(struct oss_pool *p, uint32_t cap)
{
	p->conns = calloc(cap, sizeof(*p->conns));
	p->n = 0;
	p->cap = p->conns ? cap : 0;
	return p->conns ? 0 : -ENOMEM;
}

void oss_pool_fini(struct oss_pool *p)
{
	for (uint32_t i = 0; i < p->n; i++)
		rpc_conn_close(p->conns[i].conn);
	free(p->conns);
	p->conns = NULL;
	p->n = p->cap = 0;
}

struct rpc_conn *oss_pool_conn(struct mds *m, struct oss_pool *p, const char *host, uint16_t port)
{
	uint32_t i;

	for (i = 0; i < p->n; i++)
		if (p->conns[i].port == port && !strcmp(p->conns[i].host, host))
			break;
	if (i == p->n && p->n == p->cap) {
		/* Full: take the place of one that failed, e.g. to an OSS that restarted elsewhere. */
		for (i = 0; i < p->n; i++)
			if (!p->conns[i].conn || !rpc_conn_alive(p->conns[i].conn))
				break;
		if (i == p->n)
			return NULL;
		rpc_conn_close(p->conns[i].conn);
		p->conns[i].conn = NULL;
	} else if (i == p->n) {
		p->conns[i].conn = NULL;
		p->n++;
	}
	snprintf(p->conns[i].host, sizeof(p->conns[i].host), "%s", host);
	p->conns[i].port = port;
	if (p->conns[i].conn && !rpc_conn_alive(p->conns[i].conn)) {
		rpc_conn_close(p->conns[i].conn);
		p->conns[i].conn = NULL;
	}
	if (!p->conns[i].conn) {
		struct rpc_conn_opts o = { .name = "OSS", .connect_timeout_ms = 2000,
					   .key = m->keylen ? m->key : NULL, .keylen = m->keylen,
					   .encrypt = m->encrypt };
		if (rpc_conn_open(host, port, &o, &p->conns[i].conn) < 0)
			p->conns[i].conn = NULL;
	}
	return p->conns[i].conn;
}
