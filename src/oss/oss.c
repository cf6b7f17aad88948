/*
 * loom-oss: serves one or more OSTs over TCP, and keeps them registered with the MDS.
 *
 * Threads: the event loop (main thread) reads and checks frames; a pool of workers does the disk
 * I/O, so a slow disk read never stalls other clients' frames; one thread registers the OSTs with
 * the MDS and sends heartbeats (free space), reconnecting whenever the MDS restarts.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "common/auth.h"
#include "common/log.h"
#include "common/mmp.h"
#include "common/util.h"
#include "net/bulk.h"
#include "net/http.h"
#include "net/reqq.h"
#include "net/rpc.h"
#include "net/server.h"
#include "oss/oss_impl.h"
#include "oss/ost.h"
#include "proto/codec.h"

static struct oss *the_oss;

/* The position of OST idx in oss->osts, or -1. */
static int oss_find(struct oss *oss, uint32_t idx)
{
	for (int i = 0; i < oss->nosts; i++)
		if (ost_index(oss->osts[i]) == idx)
			return i;
	return -1;
}

/* One request being served: what every handler gets and fills. */
struct oss_op {
	struct oss *oss;
	struct srv_req *req;
	struct ost *ost;          /* the OST it names (OSS rows) */
	struct lw_ost_io io;
	struct lw_ost_io_rep rep; /* the reply of most: the object's size and blocks from os */
	struct ost_objstat os;
	void *buf;                /* the reply's bulk (OST_READ), nread bytes */
	size_t nread;
	bool replied;             /* the handler answered, with a reply of its own form */
	bool quiet;               /* its error is not the OST's trouble: no warning */
};

/* PING: an answer is all it asks for. */
static int oss_op_ping(struct oss_op *o)
{
	(void)o;
	return 0;
}

/* AUTH_*: the frame layer answers them; the decoder turns them away before. */
static int oss_op_auth(struct oss_op *o)
{
	(void)o;
	return -EOPNOTSUPP;
}

static int oss_op_read(struct oss_op *o)
{
	int rc;

	if (o->io.length && !(o->buf = bulk_alloc(o->io.length)))
		return -ENOMEM;
	rc = ost_read(o->ost, o->io.objid, o->io.offset, o->buf, o->io.length, &o->nread, &o->os);
	o->rep.length = o->nread;
	o->req->stat_read = o->nread;
	return rc;
}

static int oss_op_write(struct oss_op *o)
{
	const struct lw_ost_io *io = &o->io;
	int rc;

	if (io->length != o->req->hdr.bulk_len)
		return -EPROTO;
	rc = ost_write(o->ost, io->objid, io->offset, o->req->bulk, io->length, io->ino, io->stripe_idx,
		       io->trunc_epoch, &o->os);
	/* A write of another truncation epoch: its writer knows what to do. */
	o->quiet = rc == -ESTALE || rc == -EAGAIN;
	o->rep.length = rc ? 0 : io->length;
	o->req->stat_write = rc ? 0 : io->length;
	return rc;
}

static int oss_op_punch(struct oss_op *o)
{
	if (o->io.flags & LW_PUNCH_ANEW)
		return ost_make_anew(o->ost, o->io.objid, o->io.ino, o->io.stripe_idx, o->io.trunc_epoch,
				     &o->os);
	return ost_punch(o->ost, o->io.objid, o->io.length, o->io.ino, o->io.stripe_idx,
			 o->io.trunc_epoch, &o->os);
}

static int oss_op_getattr(struct oss_op *o)
{
	return ost_getattr(o->ost, o->io.objid, &o->os);
}

/* The codec let through only the modes ost_fallocate does, and a range in bounds. */
static int oss_op_fallocate(struct oss_op *o)
{
	const struct lw_ost_io *io = &o->io;

	return ost_fallocate(o->ost, io->objid, io->flags, io->offset, io->length, io->ino,
			     io->stripe_idx, io->trunc_epoch, &o->os);
}

static int oss_op_seek(struct oss_op *o)
{
	int rc = ost_seek(o->ost, o->io.objid, o->io.flags, o->io.offset, &o->rep.length, &o->os);

	o->quiet = rc == -ENXIO; /* SEEK_DATA: no data there */
	return rc;
}

static int oss_op_sync(struct oss_op *o)
{
	return ost_sync(o->ost, o->io.objid);
}

static int oss_op_destroy(struct oss_op *o)
{
	return ost_destroy(o->ost, o->io.objid);
}

/* The codec let through a length of whole ids, at most LW_DESTROY_MANY_MAX. */
static int oss_op_destroy_many(struct oss_op *o)
{
	uint64_t n = o->io.length / sizeof(uint64_t);
	int rc = 0;

	if (o->io.length != o->req->hdr.bulk_len)
		return -EPROTO;
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		uint64_t objid;

		memcpy(&objid, (const char *)o->req->bulk + i * sizeof(objid), sizeof(objid));
		rc = objid ? ost_destroy(o->ost, objid) : -EINVAL;
		if (rc == 0)
			o->rep.length = i + 1;
	}
	return rc;
}

/* OST_CONNECT: which instance of the OST this is (ost_instance.c). */
static int oss_op_connect(struct oss_op *o)
{
	struct lw_ost_connect_rep rep = { .instance = ost_instance(o->ost) };

	snprintf(rep.uuid, sizeof(rep.uuid), "%s", ost_uuid(o->ost));
	snprintf(rep.fsname, sizeof(rep.fsname), "%s", ost_fsname(o->ost));

	srv_reply(o->req, 0, &rep, sizeof(rep), NULL, 0, NULL);
	o->replied = true;
	return 0;
}

static int oss_op_statfs(struct oss_op *o)
{
	struct lw_statfs sf;
	int rc = ost_statfs(o->ost, &sf);

	if (rc == 0) {
		srv_reply(o->req, 0, &sf, sizeof(sf), NULL, 0, NULL);
		o->replied = true;
	}
	return rc;
}

/* GET_PARAM, SET_PARAM: the OSTs' parameters (oss_status.c). */
static int oss_op_get_param(struct oss_op *o)
{
	oss_params_answer(o->oss, o->req);
	o->replied = true;
	return 0;
}

static int oss_op_set_param(struct oss_op *o)
{
	return oss_op_get_param(o);
}

/* The codec let only the two commands through. */
static int oss_op_scrub(struct oss_op *o)
{
	struct lw_scrub_rep sr;
	int rc = 0;

	if (o->io.length == LW_SCRUB_START)
		rc = ost_scrub_start(o->ost, o->io.objid, &sr);
	else
		ost_scrub_status(o->ost, &sr);
	if (rc == 0) {
		srv_reply(o->req, 0, &sr, sizeof(sr), NULL, 0, NULL);
		o->replied = true;
	}
	return rc;
}

#define RUN_OSS(name, handler) \
	case LW_OP_##name:     \
		return oss_op_##handler(o);
#define RUN_ANY RUN_OSS
#define RUN_MDS(name, handler)
#define RUN_CLI(name, handler)

static int oss_op_run(struct oss_op *o)
{
	switch (o->req->hdr.opcode) {
#define LW_OP(name, value, server, resend, flags, req, rep, handler, net) RUN_##server(name, handler)
#include "proto/ops.def"
#undef LW_OP
	default:
		return -EOPNOTSUPP;
	}
}

static void oss_serve(struct oss *oss, struct srv_req *req)
{
	uint16_t op = req->hdr.opcode;
	const struct lw_op_info *info = lw_op_info(op);
	struct oss_op o = { .oss = oss, .req = req };
	struct lw_node_ent node;
	int rc;

	/* A node's key: may that node send this? (Objects are named by number alone: see
	 * docs/architecture.md, "Who may do what".) */
	rc = nodemap_req_check(&oss->nodemap, req, &node);
	if (rc < 0) {
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	rc = lw_ost_req_decode(op, req->body, req->hdr.body_len, &o.io);
	if (rc) {
		log_warn("%s from %s: malformed request: %s", lw_op_name(op), srv_req_peer(req),
			 strerror(-rc));
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	if (info->server == LW_SRV_OSS) {
		int at = oss_find(oss, o.io.ost_idx);

		if (at < 0) {
			srv_reply(req, -ENODEV, NULL, 0, NULL, 0, NULL);
			return;
		}
		o.ost = oss->osts[at];
		req->stat_target = o.io.ost_idx;
		/* A server deposed while it was frozen touches the OST no more (it exits here). */
		if (mmp_check(oss->mmps[at]) != 0) {
			srv_reply(req, -EIO, NULL, 0, NULL, 0, NULL);
			return;
		}
		if ((info->flags & LW_OPF_OBJ) && o.io.objid == 0) {
			srv_reply(req, -EINVAL, NULL, 0, NULL, 0, NULL);
			return;
		}
	}
	rc = oss_op_run(&o);
	if (o.replied)
		return;
	if (rc) {
		/* A full OST is not its trouble either. */
		if (rc != -ENOSPC && !o.quiet)
			log_warn("OST%04x: %s of object %llx: %s", o.io.ost_idx, lw_op_name(op),
				 (unsigned long long)o.io.objid, strerror(-rc));
		bulk_free(o.buf);
		srv_reply(req, rc, NULL, 0, NULL, 0, NULL);
		return;
	}
	if (info->server != LW_SRV_OSS) {
		srv_reply(req, 0, NULL, 0, NULL, 0, NULL);
		return;
	}
	if (o.nread == 0) {
		bulk_free(o.buf);
		o.buf = NULL;
	}
	o.rep.obj_size = o.os.size;
	o.rep.obj_blocks = o.os.blocks;
	srv_reply(req, 0, &o.rep, sizeof(o.rep), o.buf, (uint32_t)o.nread, bulk_free);
}

/* Bulk comes only with the OSS's requests that ops.def says carry it (OST_WRITE). */
static bool oss_bulk_ok(uint16_t opcode)
{
	return lw_op_takes_bulk(opcode, LW_SRV_OSS);
}

static void *worker_main(void *arg)
{
	struct oss *oss = arg;
	struct srv_req *req;

	while ((req = srv_req_of(reqq_pop(&oss->queue))))
		oss_serve(oss, req);
	return NULL;
}

static void oss_deliver(struct srv_req *req, void *arg)
{
	struct oss *oss = arg;
	reqq_push(&oss->queue, &req->qitem);
}

/* ---- start-up ---- */

static void on_signal(int sig)
{
	(void)sig;
	if (the_oss)
		srv_stop(the_oss->srv);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: loom-oss --ost DIR [--ost DIR...] --mds HOST[:PORT][,HOST[:PORT]] [options]\n"
		"       loom-oss --format --fsname NAME --ost DIR [--ost DIR...]\n"
		"Serves object storage targets (OSTs) of a Loom file system.\n\n"
		"  --ost DIR          an OST directory (repeatable)\n"
		"  --mds LIST         the MDS to register with, HOST[:PORT] (port %u by default),\n"
		"                     or a failover pair's addresses, tried in turn (mds1,mds2 or\n"
		"                     mds1@tcp:mds2@tcp)\n"
		"  --listen HOST[:PORT]  address to serve on (default 0.0.0.0, any free port)\n"
		"  --advertise HOST   address clients should use (default: the one facing the MDS)\n"
		"  --failover HOST:PORT  where the other server of this one's failover pair serves\n"
		"                     the same OSTs (Lustre's failnode): clients try it when this\n"
		"                     one stops answering (use with --mmp-interval)\n"
		"  --port-file FILE   write the bound HOST:PORT here once serving\n"
		"  --threads N        I/O worker threads (default 8)\n"
		"  --scrub-rate MIB   MiB/s a scrub may read from each OST (default %d; 0: no limit)\n"
		"  --readcache-max-io KIB  reads larger than this are not kept in the page cache\n"
		"                     (default %u; the client caches them; -1: keep all)\n"
		"  --writeback-min-io KIB  writes this large start going to disk at once\n"
		"                     (default %u; -1: leave them to the kernel's flusher)\n"
		"  --key FILE         the file system key: clients must prove they hold it, and the\n"
		"                     MDS is asked to (default /etc/loom/loom.key, if it exists)\n"
		"  --handshake-timeout SEC  a connection that has not proved it holds the key this\n"
		"                     long after connecting is closed (default 5)\n"
		"  --frame-timeout SEC  a connection whose frame stops coming this long is closed\n"
		"                     (default 30)\n"
		"  --max-conns-per-peer N  authenticated connections one address may keep\n"
		"                     (default 256)\n"
		"  --encrypt          every connection to and from this OSS encrypts its frames\n"
		"                     (they are authenticated with the key in any case)\n"
		"  --mmp-interval MS  multi-mount protection, for OSTs another host can reach (a\n"
		"                     failover pair on shared storage): a heartbeat in each OST\n"
		"                     every MS milliseconds (100..60000); see loom-mds(8) (off)\n"
		"  --format           create the OSTs (needs --fsname) and exit\n"
		"  --fsname NAME      file system name, up to %d characters\n"
		"  --index N          with --format and one OST: the index it asks the MDS for\n"
		"                     (default: the lowest free one at its first registration)\n"
		"  --replace          with --format and --index N: the new, empty OST takes index N\n"
		"                     from an OST lost for good (mkfs.lustre --replace); the MDS\n"
		"                     then counts that OST's objects as lost (reads give EIO)\n"
		"  --http HOST:PORT   serve statistics over HTTP there: /metrics (Prometheus) and\n"
		"                     /params?name=PATTERN (default: off; no key is asked)\n"
		"  --no-stats         count no requests (statistics, job statistics): to measure\n"
		"                     what counting costs\n"
		"  --log-level LEVEL  error, warn, info (default) or debug\n"
		"  --log-syslog       also log to syslog (facility daemon); under systemd, lines on\n"
		"                     stderr go to the journal with their priority either way\n"
		"  --config FILE      read settings from FILE first, one `NAME = VALUE` a line, NAME\n"
		"                     any option above without its -- (`ost` once per OST; flags\n"
		"                     given override, --ost flags replace the file's list)\n"
		"  --version          print the release and the protocol versions it speaks\n",
		LW_DEFAULT_MDS_PORT, SCRUB_RATE_MIB, OST_READCACHE_MAX_IO >> 10, OST_WRITEBACK_MIN_IO >> 10,
		LOOM_FSNAME_MAX);
}


#define IO_SIZE_ARG_MAX (1 << 30) /* KiB */

/* A size in KiB for the cache policy; -1 is SIZE_MAX (off). */
static int io_size_arg(const char *arg, size_t *out)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*end || end == arg || v < -1 || v > IO_SIZE_ARG_MAX)
		return -EINVAL;
	*out = v < 0 ? SIZE_MAX : (size_t)v << 10;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ost", required_argument, NULL, 'o' },     { "mds", required_argument, NULL, 'm' },
		{ "listen", required_argument, NULL, 'l' },  { "advertise", required_argument, NULL, 'a' },
		{ "port-file", required_argument, NULL, 'p' }, { "threads", required_argument, NULL, 't' },
		{ "format", no_argument, NULL, 'F' },        { "fsname", required_argument, NULL, 'n' },
		{ "log-level", required_argument, NULL, 'L' }, { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "config", required_argument, NULL, 'C' },
		{ "log-syslog", no_argument, NULL, 'Y' },
		{ "key", required_argument, NULL, 'k' },
		{ "index", required_argument, NULL, 'i' },
		{ "replace", no_argument, NULL, 'X' },
		{ "scrub-rate", required_argument, NULL, 'r' },
		{ "readcache-max-io", required_argument, NULL, 'R' },
		{ "writeback-min-io", required_argument, NULL, 'W' },
		{ "handshake-timeout", required_argument, NULL, 'H' },
		{ "frame-timeout", required_argument, NULL, 'T' },
		{ "max-conns-per-peer", required_argument, NULL, 'P' },
		{ "encrypt", no_argument, NULL, 'E' },
		{ "mmp-interval", required_argument, NULL, 'Q' },
		{ "failover", required_argument, NULL, 'f' },
		{ "http", required_argument, NULL, 'g' },
		{ "no-stats", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dirs[MAX_OSTS], *mds = NULL, *listen_addr = "0.0.0.0", *port_file = NULL,
				     *fsname = NULL, *key_file = NULL, *failover = NULL, *http_addr = NULL;
	char why[256];
	struct oss oss = { .nworkers = 8, .scrub_rate = (uint64_t)SCRUB_RATE_MIB << 20 };
	struct srv_opts so = { 0 };
	char listen_host[64];
	uint16_t listen_port;
	enum log_level level = LOG_INFO;
	bool format = false, syslog = false, replace = false, no_stats = false;
	uint32_t index = OST_IDX_NONE;
	struct ost_cache_policy cache = { OST_READCACHE_MAX_IO, OST_WRITEBACK_MIN_IO };
	uint32_t mmp_ms = 0;
	int ndirs = 0, c, rc;

	static const char *const repeatable[] = { "ost", NULL };

	if (config_argv("loom-oss", opts, repeatable, argc, argv, &argc, &argv))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'C': break; /* read by config_argv */
		case 'Y': syslog = true; break;
		case 'o':
			if (ndirs == MAX_OSTS) {
				fprintf(stderr, "loom-oss: at most %d OSTs\n", MAX_OSTS);
				return 2;
			}
			dirs[ndirs++] = optarg;
			break;
		case 'm': mds = optarg; break;
		case 'f': failover = optarg; break;
		case 'g': http_addr = optarg; break;
		case 'j': no_stats = true; break;
		case 'l': listen_addr = optarg; break;
		case 'a': snprintf(oss.advertise, sizeof(oss.advertise), "%s", optarg); break;
		case 'p': port_file = optarg; break;
		case 'k': key_file = optarg; break;
		case 'E': so.encrypt = oss.encrypt = true; break;
		case 'H':
			if (srv_seconds_parse(optarg, &so.handshake_timeout_ms)) {
				fprintf(stderr, "loom-oss: --handshake-timeout takes 1..3600 seconds\n");
				return 2;
			}
			break;
		case 'T':
			if (srv_seconds_parse(optarg, &so.frame_timeout_ms)) {
				fprintf(stderr, "loom-oss: --frame-timeout takes 1..3600 seconds\n");
				return 2;
			}
			break;
		case 'P':
			if (srv_count_parse(optarg, &so.max_conns_per_peer)) {
				fprintf(stderr, "loom-oss: --max-conns-per-peer takes 1..1000000\n");
				return 2;
			}
			break;
		case 't':
			oss.nworkers = atoi(optarg);
			if (oss.nworkers < 1 || oss.nworkers > 256) {
				fprintf(stderr, "loom-oss: --threads takes 1..256\n");
				return 2;
			}
			break;
		case 'r': {
			uint32_t v;
			if (u32_parse(optarg, 0, SCRUB_RATE_MAX_MIB, &v)) {
				fprintf(stderr, "loom-oss: --scrub-rate takes MiB/s, 0..%d\n", SCRUB_RATE_MAX_MIB);
				return 2;
			}
			oss.scrub_rate = (uint64_t)v << 20;
			break;
		}
		case 'R':
		case 'W':
			if (io_size_arg(optarg, c == 'R' ? &cache.readcache_max_io : &cache.writeback_min_io)) {
				fprintf(stderr, "loom-oss: --%s takes KiB, 0..%d, or -1\n",
					c == 'R' ? "readcache-max-io" : "writeback-min-io", IO_SIZE_ARG_MAX);
				return 2;
			}
			break;
		case 'F': format = true; break;
		case 'Q':
			if (u32_parse(optarg, MMP_INTERVAL_MIN, MMP_INTERVAL_MAX, &mmp_ms)) {
				fprintf(stderr, "loom-oss: --mmp-interval takes %u..%u milliseconds\n",
					MMP_INTERVAL_MIN, MMP_INTERVAL_MAX);
				return 2;
			}
			break;
		case 'X': replace = true; break;
		case 'n': fsname = optarg; break;
		case 'i': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || end == optarg || v >= 65536) {
				fprintf(stderr, "loom-oss: --index takes 0..65535\n");
				return 2;
			}
			index = (uint32_t)v;
			break;
		}
		case 'L':
			if (log_level_parse(optarg, &level)) {
				fprintf(stderr, "loom-oss: unknown log level '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V': lw_print_version("loom-oss"); return 0;
		default: usage(stderr); return 2;
		}
	}
	log_init("loom-oss", level);
	if (syslog)
		log_to_syslog();
	if (ndirs == 0 || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (replace && (!format || index == OST_IDX_NONE)) {
		fprintf(stderr, "loom-oss: --replace goes with --format and --index N (the lost OST's index)\n");
		return 2;
	}
	if (format) {
		if (!fsname || !*fsname || strlen(fsname) > LOOM_FSNAME_MAX) {
			fprintf(stderr, "loom-oss: --format needs --fsname of 1 to %d characters\n", LOOM_FSNAME_MAX);
			return 2;
		}
		if (index != OST_IDX_NONE && ndirs != 1) {
			fprintf(stderr, "loom-oss: --index goes with exactly one --ost\n");
			return 2;
		}
		for (int i = 0; i < ndirs; i++) {
			rc = ost_format(dirs[i], fsname, index, replace);
			if (rc) {
				fprintf(stderr, "loom-oss: cannot format %s: %s\n", dirs[i], strerror(-rc));
				return 1;
			}
			if (replace)
				printf("formatted OST in %s for file system %s, to replace the lost OST%04x\n", dirs[i],
				       fsname, index);
			else
				printf("formatted OST in %s for file system %s\n", dirs[i], fsname);
		}
		return 0;
	}
	if (!mds) {
		fprintf(stderr, "loom-oss: --mds HOST[:PORT] is required\n");
		return 2;
	}
	if (mds_addrs_parse(mds, LW_DEFAULT_MDS_PORT, &oss.mds, why, sizeof(why))) {
		fprintf(stderr, "loom-oss: --mds: %s\n", why);
		return 2;
	}
	if (failover && (addr_parse(failover, oss.failover.host, sizeof(oss.failover.host),
				    &oss.failover.port, 0) || !oss.failover.port || !oss.failover.host[0])) {
		fprintf(stderr, "loom-oss: --failover takes HOST:PORT, the address the other server of "
			"the pair serves on (its --listen)\n");
		return 2;
	}
	if (addr_parse(listen_addr, listen_host, sizeof(listen_host), &listen_port, 0)) {
		fprintf(stderr, "loom-oss: bad --listen address '%s'\n", listen_addr);
		return 2;
	}
	if (!key_file && access(LOOM_DEFAULT_KEY_FILE, F_OK) == 0)
		key_file = LOOM_DEFAULT_KEY_FILE;
	if (key_file) {
		if (loom_key_load_logged(key_file, oss.key, &oss.keylen))
			return 1;
	} else {
		log_warn("no file system key (--key FILE, or %s): any client may connect",
			 LOOM_DEFAULT_KEY_FILE);
	}
	if (so.encrypt && !oss.keylen) {
		log_err("--encrypt needs the file system key (--key FILE)");
		return 2;
	}
	/* Multi-mount protection (common/mmp.h): each OST is this server's, or the start is refused. */
	for (int i = 0; i < ndirs; i++)
		if (mmp_take(dirs[i], "OST", "loom-oss", mmp_ms, &oss.mmps[i]) != 0)
			return 1;
	for (int i = 0; i < ndirs; i++) {
		rc = ost_open(dirs[i], &oss.osts[i]);
		if (rc) {
			log_err("cannot open the OST in %s: %s%s", dirs[i], strerror(-rc),
				rc == -ENOENT ? " (format it with --format --fsname NAME)" : "");
			return 1;
		}
		if (fsname && strcmp(fsname, ost_fsname(oss.osts[i]))) {
			log_err("the OST in %s belongs to file system %s, not %s (--fsname)", dirs[i],
				ost_fsname(oss.osts[i]), fsname);
			return 1;
		}
		ost_set_cache_policy(oss.osts[i], &cache);
		ost_scrub_set_rate(oss.osts[i], oss.scrub_rate);
		oss.nosts++;
	}
	raise_nofile_limit();
	signal(SIGPIPE, SIG_IGN);

	reqq_init(&oss.queue);
	pthread_mutex_init(&oss.stop_lock, NULL);
	pthread_cond_init(&oss.stop_cond, NULL);
	so.name = "oss";
	so.bulk_ok = oss_bulk_ok;
	so.key = oss.keylen ? oss.key : NULL;
	so.keylen = oss.keylen;
	nodemap_init(&oss.nodemap);
	oss.nodemap.refresh = oss_hurry;
	oss.nodemap.refresh_arg = &oss;
	so.nodemap = &oss.nodemap;
	so.listen_host = listen_host;
	so.listen_port = listen_port;
	so.deliver = oss_deliver;
	so.arg = &oss;
	rc = srv_create(&so, &oss.srv);
	if (rc) {
		log_err("cannot listen on %s: %s", listen_addr, strerror(-rc));
		return 1;
	}
	/* This server's record in each OST, once it can serve (a start that fails before leaves the
	 * last server's record, clean or not, as it was). Requests wait for the workers. */
	for (int i = 0; i < oss.nosts; i++) {
		rc = ost_instance_start(oss.osts[i]);
		if (rc) {
			log_err("cannot record this server in the OST in %s: %s", dirs[i], strerror(-rc));
			return 1;
		}
	}
	srv_stats(oss.srv)->off = no_stats;
	if (http_addr && oss_http_start(&oss, http_addr) != 0)
		return 1;
	the_oss = &oss;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	oss.workers = calloc((size_t)oss.nworkers, sizeof(pthread_t));
	for (int i = 0; oss.workers && i < oss.nworkers; i++) {
		if (pthread_create(&oss.workers[i], NULL, worker_main, &oss) != 0) {
			oss.nworkers = i;
			break;
		}
	}
	if (!oss.workers || oss.nworkers == 0) {
		log_err("cannot start worker threads");
		return 1;
	}
	if (port_file) {
		char buf[96];
		int n = snprintf(buf, sizeof(buf), "%s:%u\n", listen_host, srv_port(oss.srv));
		rc = file_write_atomic(port_file, buf, (size_t)n);
		if (rc)
			log_warn("cannot write %s: %s", port_file, strerror(-rc));
	}
	log_info("serving %d OST(s) on %s:%u with %d workers", oss.nosts, listen_host, srv_port(oss.srv),
		 oss.nworkers);
	pthread_create(&oss.mds_thread, NULL, oss_mds_thread, &oss);

	rc = srv_run(oss.srv);

	log_info("shutting down");
	http_stop(oss.http);
	pthread_mutex_lock(&oss.stop_lock);
	oss.stopping = true;
	pthread_cond_broadcast(&oss.stop_cond);
	pthread_mutex_unlock(&oss.stop_lock);
	pthread_join(oss.mds_thread, NULL);
	reqq_close(&oss.queue);
	for (int i = 0; i < oss.nworkers; i++)
		pthread_join(oss.workers[i], NULL);
	srv_destroy(oss.srv);
	for (int i = 0; i < oss.nosts; i++) {
		ost_instance_stop(oss.osts[i]);
		ost_close(oss.osts[i]);
	}
	for (int i = 0; i < ndirs; i++)
		mmp_release(oss.mmps[i]); /* after the last write to the OSTs */
	free(oss.workers);
	reqq_destroy(&oss.queue);
	nodemap_destroy(&oss.nodemap);
	return rc ? 1 : 0;
}
