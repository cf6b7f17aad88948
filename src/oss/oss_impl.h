/*
 * loom-oss's insides, shared by its serving side (oss.c) and its side facing the MDS
 * (oss_mds.c: registration, failover address, heartbeats).
 */
#ifndef LOOM_OSS_OSS_IMPL_H
#define LOOM_OSS_OSS_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/auth.h"
#include "common/mdsaddr.h"
#include "common/mmp.h"
#include "net/nodemap.h"
#include "net/reqq.h"
#include "net/server.h"
#include "oss/ost.h"

#define MAX_OSTS          64
#define HEARTBEAT_SECONDS 2
#define SCRUB_RATE_MIB    128 /* default limit of a scrub, per OST */
#define SCRUB_RATE_MAX_MIB 1000000

struct http_srv;
struct oss {
	struct ost *osts[MAX_OSTS];
	struct mmp *mmps[MAX_OSTS]; /* each OST's multi-mount protection (NULL: none) */
	int nosts;
	struct srv *srv;
	struct reqq queue;
	pthread_t *workers;
	int nworkers;
	struct mds_addrs mds;     /* where the MDS may answer (a failover list), tried in turn */
	unsigned mds_cur;         /* the one tried last */
	char advertise[64];
	struct mds_addr failover; /* the other server of this one's failover pair (host "": none) */
	uint64_t scrub_rate;      /* bytes per second a scrub may read from one OST; 0: no limit */
	pthread_t mds_thread;
	pthread_mutex_t stop_lock;
	pthread_cond_t stop_cond;
	bool stopping;
	bool hurry;                /* a heartbeat is wanted now (a node's key the nodemap lacks) */
	uint8_t key[LOOM_KEY_MAX]; /* the file system key (keylen 0: none) */
	size_t keylen;
	bool encrypt;              /* --encrypt: the connection to the MDS encrypts too */
	struct nodemap nodemap;    /* the nodes whose own keys are good here, from the MDS */
	struct http_srv *http;     /* --http: /metrics (NULL: off) */
};

/* oss_status.c: parameters (GET_PARAM, SET_PARAM) and the HTTP port (/metrics, /params). */
struct textbuf;
void oss_params_answer(struct oss *oss, struct srv_req *req);
void oss_metrics(struct oss *oss, struct textbuf *tb);
int oss_http_start(struct oss *oss, const char *addr);

/* The thread that registers the OSTs with the MDS and sends heartbeats, reconnecting (to the
 * next address of the list) whenever the MDS goes away; it ends once oss->stopping is set and
 * stop_cond signalled. */
void *oss_mds_thread(void *arg);
/* The nodemap's refresh (net/nodemap.h): the next heartbeat now, which brings a changed map. */
void oss_hurry(void *arg);

#endif
