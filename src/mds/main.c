/*
 * loom-mds: the metadata server. Serves the namespace from an MDT (an LMDB environment in a
 * directory) and keeps the table of OSTs.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/config.h"
#include "common/log.h"
#include "common/mmp.h"
#include "common/util.h"
#include "mds/dispatch.h"
#include "mds/mds.h"
#include "net/http.h"

static struct mds *the_mds;

static void on_signal(int sig)
{
	(void)sig;
	if (!the_mds)
		return;
	if (the_mds->repl.on)
		atomic_store(&the_mds->stop_asked, true); /* the metadata thread stops the server */
	else
		srv_stop(the_mds->srv);
}

/* Bulk comes only with the MDS's requests that ops.def says carry it (none, today). */
static bool mds_bulk_ok(uint16_t opcode)
{
	return lw_op_takes_bulk(opcode, LW_SRV_MDS);
}

static void *md_thread_main(void *arg)
{
	mds_metadata_loop(arg);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: loom-mds --mdt DIR [--listen HOST[:PORT]] [options]\n"
		"       loom-mds --format --fsname NAME --mdt DIR\n"
		"Serves the namespace of a Loom file system.\n\n"
		"  --mdt DIR             the MDT directory (an LMDB environment)\n"
		"  --listen HOST[:PORT]  address to serve on (default 0.0.0.0:%u; port 0 = any free)\n"
		"  --port-file FILE      write the bound HOST:PORT here once serving\n"
		"  --format              create the MDT (needs --fsname) and exit\n"
		"  --fsname NAME         file system name, 1 to %d of [A-Za-z0-9_-]\n"
		"  --key FILE            the file system key: clients and OSSs must prove they hold it\n"
		"                        (default MDT/fs.key; --format makes it)\n"
		"  --recovery-window SEC how long a client that lost its connection keeps its open\n"
		"                        files and locks, and how long after a start unlinked files\n"
		"                        still open wait to be opened again (default 100)\n"
		"  --root-squash         requests from root on any client run as nobody (65534)\n"
		"  --encrypt             every connection to and from this MDS encrypts its frames\n"
		"                        (they are authenticated with the key in any case)\n"
		"  --reserve SIZE|PCT%%   room kept on the MDT for deletions and truncations: creates,\n"
		"                        mkdir, xattrs and Data-on-MDT writes get ENOSPC once the MDT is\n"
		"                        down to it (default 1%% of the smaller of the map and the file\n"
		"                        system under the MDT, at least 4M, at most 256M)\n"
		"  --map-size SIZE       the most the MDT may hold: LMDB's map (default 64G)\n"
		"  --commit-ms MS        answer changes once applied and commit them behind, within MS\n"
		"                        milliseconds (clients replay what a crash lost); 0 commits\n"
		"                        each batch before answering (default %u, at most 60000)\n"
		"  --lease-timeout SEC   how long a client may take to give back a directory lease the\n"
		"                        MDS recalls before it loses every lease it holds (default %u,\n"
		"                        at most 15)\n"
		"  --resync-rate MIB     how fast the MDS copies stale copies of mirrored files again\n"
		"                        and rebuilds erasure-coded ones' stale objects, in MiB/s\n"
		"                        (default %u; 0: as fast as the OSSs go)\n"
		"  --mmp-interval MS     multi-mount protection, for an MDT that another host can reach\n"
		"                        (a failover pair on shared storage): a heartbeat in the MDT\n"
		"                        every MS milliseconds (100..60000); a start waits about two\n"
		"                        intervals and is refused while another server's heartbeat\n"
		"                        is alive; a server whose heartbeat another replaced stops\n"
		"                        (default: off)\n"
		"  --etcd URL[,URL]      a replicated MDT: etcd decides which of the MDSs that name\n"
		"                        it serves; the others follow its commits into their own MDT\n"
		"                        (needs --listen with a port; see docs/operations.md)\n"
		"  --advertise HOST:PORT this MDS's address, as clients and the other MDS reach it\n"
		"                        (default: the --listen address, or the host name and port)\n"
		"  --etcd-lease SEC      how long etcd waits for a silent active MDS before another\n"
		"                        takes over (3..60, default %u)\n"
		"  --repl-timeout MS     how long a commit waits for the standby before the active\n"
		"                        goes on without it (100..60000, default %u)\n"
		"  --handshake-timeout SEC  a connection that has not proved it holds the key this\n"
		"                        long after connecting is closed (default 5)\n"
		"  --frame-timeout SEC  a connection whose frame stops coming this long is closed\n"
		"                        (default 30)\n"
		"  --max-conns-per-peer N  authenticated connections one address may keep\n"
		"                        (default 256)\n"
		"  --http HOST:PORT      serve statistics over HTTP there: /metrics (Prometheus) and\n"
		"                        /params?name=PATTERN (default: off; no key is asked)\n"
		"  --no-stats            count no requests (statistics, job statistics): to measure\n"
		"                        what counting costs\n"
		"  --log-level LEVEL     error, warn, info (default) or debug\n"
		"  --log-syslog          also log to syslog (facility daemon); under systemd, lines\n"
		"                        on stderr go to the journal with their priority either way\n"
		"  --config FILE         read settings from FILE first, one `NAME = VALUE` a line,\n"
		"                        NAME any option above without its -- (flags given override)\n"
		"  --version             print the release and the protocol versions it speaks\n",
		LW_DEFAULT_MDS_PORT, LOOM_FSNAME_MAX, MDS_COMMIT_MS_DEFAULT, MDS_LEASE_TIMEOUT_DEFAULT,
		MDS_RESYNC_RATE_DEFAULT, MDS_ETCD_LEASE_DEFAULT, MDS_REPL_TIMEOUT_MS);
}

#define MDT_KEY_NAME "fs.key"

/* Formatting makes the file system's key, where --key says (kept if it is there already: a
 * reformat keeps the key the OSSs and clients hold), else in the MDT directory. */
static int format_key(const char *mdt_dir, const char *key_file)
{
	char path[PATH_MAX];
	int rc;

	if (key_file)
		snprintf(path, sizeof(path), "%s", key_file);
	else
		snprintf(path, sizeof(path), "%s/" MDT_KEY_NAME, mdt_dir);
	rc = loom_key_create(path);
	if (rc == -EEXIST) {
		uint8_t key[LOOM_KEY_MAX];
		size_t len;

		rc = loom_key_load(path, key, &len, NULL);
		if (rc == 0)
			printf("the file system key is %s (kept)\n", path);
	} else if (rc == 0) {
		printf("the file system key is %s: every OSS and client needs a copy\n"
		       "(loom-oss --key, mount -o key=, or /etc/loom/loom.key)\n", path);
	}
	if (rc) {
		char why[LOOM_KEY_REFUSAL_LEN];

		if (rc == -EPERM && loom_key_refusal(path, why, sizeof(why)) == 0)
			fprintf(stderr, "loom-mds: %s\n", why);
		else
			fprintf(stderr, "loom-mds: cannot make the file system key %s: %s\n", path,
				rc == -EINVAL ? "a file that is not a key is there" : strerror(-rc));
	}
	return rc;
}

/* The clients that may hold locks from before this start: they are waited for (locks.c). */
static int start_lock_recovery(struct mds *m)
{
	uint64_t (*uuids)[2] = NULL;
	struct mdt_txn *t;
	uint32_t n = 0;
	int rc = mdt_txn_begin(m->store, false, &t);

	if (rc == 0) {
		rc = mdt_clients_list(t, &uuids, &n);
		mdt_txn_abort(t);
	}
	if (rc) {
		log_err("cannot read the clients that may hold locks: %s", strerror(-rc));
		return rc;
	}
	mds_locks_recovery_begin(m, uuids, n);
	return 0;
}

/* The MDT's write guard (mdt_store_set_write_guard): multi-mount protection's check. */
static int mmp_guard(void *arg)
{
	return mmp_check(arg);
}

/* --etcd: waits as a standby until the coordinator makes this MDS active (standby.c). */
static int replica_wait(struct mds *m, const char *mdt_dir, const char *fsname, const char *etcd,
			uint32_t lease_s, const char *listen_host, uint16_t listen_port, const char *advertise,
			const uint8_t *key, size_t keylen, bool encrypt)
{
	/* A pull is held 1 s at most: an active silent for 4 s is gone (its host died), and the
	 * standby looks at etcd again instead of waiting out a client's 20 s. */
	struct rpc_conn_opts co = { .name = "active MDS", .key = keylen ? key : NULL, .keylen = keylen,
				    .encrypt = encrypt, .at_min_ms = 4000 };
	struct mds_coord_opts o = { .endpoints = etcd, .lease_s = lease_s };
	struct mdt_store *s = NULL;
	char name[MDS_REPL_NAME_MAX + 1], host[64];
	int rc;

	if (!listen_port) {
		log_err("--etcd needs --listen with a port: the other MDS and the clients reach this one there");
		return -EINVAL;
	}
	/* The file system names the coordinator's keys: the MDT's, else --fsname (a new standby). */
	if (mdt_store_open(mdt_dir, &s) == 0) {
		static char mdt_fsname[LOOM_FSNAME_MAX + 1];

		if (fsname && strcmp(fsname, mdt_store_fsname(s))) {
			log_err("the MDT in %s belongs to file system %s, not %s (--fsname)", mdt_dir,
				mdt_store_fsname(s), fsname);
			mdt_store_close(s);
			return -EINVAL;
		}
		snprintf(mdt_fsname, sizeof(mdt_fsname), "%s", mdt_store_fsname(s));
		fsname = mdt_fsname;
		mdt_store_close(s);
	} else if (!fsname) {
		log_err("no MDT in %s yet: a standby that takes a copy needs --fsname", mdt_dir);
		return -EINVAL;
	}
	if (advertise)
		snprintf(name, sizeof(name), "%s", advertise);
	else if (strcmp(listen_host, "0.0.0.0") && strcmp(listen_host, "::"))
		snprintf(name, sizeof(name), "%s:%u", listen_host, listen_port);
	else if (gethostname(host, sizeof(host)) == 0)
		snprintf(name, sizeof(name), "%.*s:%u", (int)(sizeof(name) - 7), host, listen_port);
	else
		return -errno;
	o.fsname = fsname;
	o.name = name;
	rc = mds_coord_open(&o, &m->repl.coord);
	if (rc) {
		log_err("--etcd %s: %s", etcd, strerror(-rc));
		return rc;
	}
	snprintf(m->repl.name, sizeof(m->repl.name), "%s", name);
	log_info("replicated MDT: %s waits for etcd (%s) to make it active", name, etcd);
	rc = mds_standby_run(m, m->repl.coord, mdt_dir, name, &co);
	if (rc == 0) {
		m->repl.on = true;
		log_info("this MDS is active now, epoch %llu", (unsigned long long)m->repl.epoch);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "mdt", required_argument, NULL, 'd' },       { "listen", required_argument, NULL, 'l' },
		{ "port-file", required_argument, NULL, 'p' }, { "format", no_argument, NULL, 'F' },
		{ "fsname", required_argument, NULL, 'n' },    { "log-level", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },            { "key", required_argument, NULL, 'k' },
		{ "recovery-window", required_argument, NULL, 'r' },
		{ "root-squash", no_argument, NULL, 'S' },     { "encrypt", no_argument, NULL, 'E' },
		{ "handshake-timeout", required_argument, NULL, 'H' },
		{ "frame-timeout", required_argument, NULL, 'T' },
		{ "max-conns-per-peer", required_argument, NULL, 'P' },
		{ "reserve", required_argument, NULL, 'R' },   { "map-size", required_argument, NULL, 'M' },
		{ "version", no_argument, NULL, 'V' },         { "config", required_argument, NULL, 'C' },
		{ "log-syslog", no_argument, NULL, 'Y' },      { "commit-ms", required_argument, NULL, 'K' },
		{ "lease-timeout", required_argument, NULL, 'W' },
		{ "resync-rate", required_argument, NULL, 'G' },
		{ "mmp-interval", required_argument, NULL, 'Q' },
		{ "etcd", required_argument, NULL, 'e' },      { "advertise", required_argument, NULL, 'a' },
		{ "etcd-lease", required_argument, NULL, 'x' },
		{ "repl-timeout", required_argument, NULL, 'y' },
		{ "http", required_argument, NULL, 'g' },
		{ "no-stats", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 },
	};
	const char *mdt_dir = NULL, *listen_addr = NULL, *port_file = NULL, *fsname = NULL, *key_file = NULL;
	const char *etcd = NULL, *advertise = NULL, *http_addr = NULL;
	uint32_t etcd_lease_s = MDS_ETCD_LEASE_DEFAULT;
	uint8_t key[LOOM_KEY_MAX];
	char default_key[PATH_MAX];
	size_t keylen = 0;
	struct mds m = { .commit.interval_ms = MDS_COMMIT_MS_DEFAULT, .resync.rate_mib = MDS_RESYNC_RATE_DEFAULT };
	struct srv_opts so = { 0 };
	char listen_host[64];
	uint16_t listen_port;
	enum log_level level = LOG_INFO;
	bool format = false, reserve_given = false, syslog = false, no_stats = false;
	struct mds_reserve reserve;
	uint64_t map_size = 0;
	uint32_t mmp_ms = 0, u;
	struct mmp *mmp = NULL;
	int c, rc;

	if (config_argv("loom-mds", opts, NULL, argc, argv, &argc, &argv))
		return 2;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'C': break; /* read by config_argv */
		case 'Y': syslog = true; break;
		case 'd': mdt_dir = optarg; break;
		case 'l': listen_addr = optarg; break;
		case 'p': port_file = optarg; break;
		case 'F': format = true; break;
		case 'n': fsname = optarg; break;
		case 'k': key_file = optarg; break;
		case 'e': etcd = optarg; break;
		case 'a': advertise = optarg; break;
		case 'g': http_addr = optarg; break;
		case 'j': no_stats = true; break;
		case 'x':
			/* An active stops a second before its lease lapses, and one etcd call may take
			 * two: less than three would depose it on any slow call. */
			if (u32_parse(optarg, 3, 60, &etcd_lease_s)) {
				fprintf(stderr, "loom-mds: --etcd-lease takes 3..60 seconds\n");
				return 2;
			}
			break;
		case 'y':
			if (u32_parse(optarg, 100, 60000, &m.repl.timeout_ms)) {
				fprintf(stderr, "loom-mds: --repl-timeout takes 100..60000 milliseconds\n");
				return 2;
			}
			break;
		case 'S': m.root_squash = true; break;
		case 'E': so.encrypt = m.encrypt = true; break;
		case 'H':
			if (srv_seconds_parse(optarg, &so.handshake_timeout_ms)) {
				fprintf(stderr, "loom-mds: --handshake-timeout takes 1..3600 seconds\n");
				return 2;
			}
			break;
		case 'T':
			if (srv_seconds_parse(optarg, &so.frame_timeout_ms)) {
				fprintf(stderr, "loom-mds: --frame-timeout takes 1..3600 seconds\n");
				return 2;
			}
			break;
		case 'P':
			if (srv_count_parse(optarg, &so.max_conns_per_peer)) {
				fprintf(stderr, "loom-mds: --max-conns-per-peer takes 1..1000000\n");
				return 2;
			}
			break;
		case 'r':
			m.recovery_s = (uint32_t)atoi(optarg);
			if (m.recovery_s < 1 || m.recovery_s > 86400) {
				fprintf(stderr, "loom-mds: --recovery-window takes 1..86400 seconds\n");
				return 2;
			}
			break;
		case 'K':
			if (u32_parse(optarg, 0, MDS_COMMIT_MS_MAX, &u)) {
				fprintf(stderr, "loom-mds: --commit-ms takes 0..%d milliseconds\n", MDS_COMMIT_MS_MAX);
				return 2;
			}
			m.commit.interval_ms = u;
			break;
		case 'G':
			if (u32_parse(optarg, 0, MDS_RESYNC_RATE_MAX, &u)) {
				fprintf(stderr, "loom-mds: --resync-rate takes MiB/s, 0 to %d\n", MDS_RESYNC_RATE_MAX);
				return 2;
			}
			m.resync.rate_mib = u;
			break;
		case 'Q':
			if (u32_parse(optarg, MMP_INTERVAL_MIN, MMP_INTERVAL_MAX, &mmp_ms)) {
				fprintf(stderr, "loom-mds: --mmp-interval takes %u..%u milliseconds\n",
					MMP_INTERVAL_MIN, MMP_INTERVAL_MAX);
				return 2;
			}
			break;
		case 'W':
			/* A change waits up to this (and a tick): it must stay below what clients
			 * take for a hung server (at_min, 20 s by default). */
			if (u32_parse(optarg, 1, 15, &m.leases.timeout_s)) {
				fprintf(stderr, "loom-mds: --lease-timeout takes 1..15 seconds\n");
				return 2;
			}
			break;
		case 'R':
			if (mds_reserve_parse(optarg, &reserve)) {
				fprintf(stderr, "loom-mds: --reserve takes a size (4M, 1G) or a percentage "
					"(0%% to 50%%)\n");
				return 2;
			}
			reserve_given = true;
			break;
		case 'M':
			if (size_parse(optarg, &map_size) || map_size < (1u << 20)) {
				fprintf(stderr, "loom-mds: --map-size takes a size of 1M or more\n");
				return 2;
			}
			break;
		case 'L':
			if (log_level_parse(optarg, &level)) {
				fprintf(stderr, "loom-mds: unknown log level '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		case 'V': lw_print_version("loom-mds"); return 0;
		default: usage(stderr); return 2;
		}
	}
	log_init("loom-mds", level);
	if (syslog)
		log_to_syslog();
	if (!mdt_dir || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (format) {
		if (!fsname) {
			fprintf(stderr, "loom-mds: --format needs --fsname NAME\n");
			return 2;
		}
		rc = mdt_format(mdt_dir, fsname);
		if (rc) {
			fprintf(stderr, "loom-mds: cannot format %s: %s\n", mdt_dir,
				rc == -EINVAL ? "bad file system name (1 to 8 of A-Z a-z 0-9 _ -)" : strerror(-rc));
			return 1;
		}
		printf("formatted MDT in %s for file system %s\n", mdt_dir, fsname);
		return format_key(mdt_dir, key_file) ? 1 : 0;
	}
	if (addr_parse(listen_addr ? listen_addr : "0.0.0.0", listen_host, sizeof(listen_host),
		       &listen_port, LW_DEFAULT_MDS_PORT)) {
		fprintf(stderr, "loom-mds: bad --listen address '%s'\n", listen_addr);
		return 2;
	}
	if (!key_file) {
		snprintf(default_key, sizeof(default_key), "%s/" MDT_KEY_NAME, mdt_dir);
		if (access(default_key, F_OK) == 0)
			key_file = default_key;
		else
			log_warn("no file system key (--key FILE, or %s): any client may connect", default_key);
	}
	if (key_file && loom_key_load_logged(key_file, key, &keylen))
		return 1;
	if (so.encrypt && !keylen) {
		log_err("--encrypt needs the file system key (--key FILE)");
		return 2;
	}
	if (!m.recovery_s)
		m.recovery_s = 100; /* as Lustre's obd_timeout */
	m.started_ns = clock_mono_ns();
	if (random_bytes(&m.boot_id, sizeof(m.boot_id)) != 0 || m.boot_id == 0)
		m.boot_id = m.started_ns | 1;
	{
		struct timespec now = clock_real();

		atomic_init(&m.dir_moves, (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec);
	}
	/* A replicated MDT: follow the active MDS until this one is made active (repl.h). */
	if (etcd && replica_wait(&m, mdt_dir, fsname, etcd, etcd_lease_s, listen_host, listen_port,
				 advertise, key, keylen, so.encrypt) != 0)
		return 1;
	/* Multi-mount protection (common/mmp.h) first: not even LMDB opens an MDT another host
	 * serves. */
	if (mmp_take(mdt_dir, "MDT", "loom-mds", mmp_ms, &mmp) != 0)
		return 1;
	rc = mdt_store_open(mdt_dir, &m.store);
	if (rc) {
		log_err("cannot open the MDT in %s: %s%s", mdt_dir, strerror(-rc),
			rc == -ENOENT ? " (format it with --format --fsname NAME)" : "");
		return 1;
	}
	m.mmp = mmp;
	if (mmp)
		mdt_store_set_write_guard(m.store, mmp_guard, mmp);
	if (fsname && strcmp(fsname, mdt_store_fsname(m.store))) {
		log_err("the MDT in %s belongs to file system %s, not %s (--fsname)", mdt_dir,
			mdt_store_fsname(m.store), fsname);
		return 1;
	}
	if (mds_space_setup(&m, map_size, reserve_given ? &reserve : NULL) != 0)
		return 1;
	rc = mds_commit_start(&m);
	if (rc) {
		log_err("cannot read the MDT's last transaction number: %s", strerror(-rc));
		return 1;
	}
	if (m.repl.on) {
		m.repl.mdt_dir = mdt_dir;
		rc = mds_repl_start(&m);
		if (rc == 0)
			rc = mds_coord_serve(m.repl.coord, &m);
		if (rc) {
			log_err("cannot start replication: %s", strerror(-rc));
			return 1;
		}
	}
	raise_nofile_limit();
	signal(SIGPIPE, SIG_IGN);
	reqq_init(&m.queue);
	mds_status_init(&m);
	mds_sessions_init(&m);
	mds_leases_init(&m);
	u64map_init(&m.ost_conns);
	u64map_init(&m.locks);
	u64map_init(&m.lock_wakes);
	if (start_lock_recovery(&m) != 0 || mds_nodemap_load(&m) != 0 || mds_replay_begin(&m) != 0)
		return 1;

	so.name = "mds";
	so.bulk_ok = mds_bulk_ok;
	so.key = keylen ? key : NULL;
	so.keylen = keylen;
	so.nodemap = &m.nodemap;
	memcpy(m.key, key, keylen);
	m.keylen = keylen;
	so.max_memory = 256ull << 20;
	so.listen_host = listen_host;
	so.listen_port = listen_port;
	so.deliver = mds_deliver;
	so.disconnect = mds_disconnect;
	so.arg = &m;
	rc = srv_create(&so, &m.srv);
	if (rc) {
		log_err("cannot listen on %s:%u: %s", listen_host, listen_port, strerror(-rc));
		return 1;
	}
	srv_stats(m.srv)->off = no_stats;
	if (http_addr && mds_http_start(&m, http_addr) != 0)
		return 1;
	the_mds = &m;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	rc = mds_destroyer_start(&m);
	if (rc == 0)
		rc = mds_truncator_start(&m);
	if (rc == 0)
		rc = mds_resync_start(&m);
	if (rc == 0)
		rc = -pthread_create(&m.md_thread, NULL, md_thread_main, &m);
	if (rc) {
		log_err("cannot start threads: %s", strerror(-rc));
		return 1;
	}
	if (port_file) {
		char buf[96];
		int n = snprintf(buf, sizeof(buf), "%s:%u\n", listen_host, srv_port(m.srv));
		rc = file_write_atomic(port_file, buf, (size_t)n);
		if (rc)
			log_warn("cannot write %s: %s", port_file, strerror(-rc));
	}
	log_info("file system %s: MDT %s, serving on %s:%u", mdt_store_fsname(m.store), mdt_dir,
		 listen_host, srv_port(m.srv));

	rc = srv_run(m.srv);

	log_info("shutting down");
	http_stop(m.http);
	m.http = NULL;
	atomic_store(&m.repl.draining, true); /* nothing more is answered or acknowledged */
	reqq_close(&m.queue);
	pthread_join(m.md_thread, NULL);
	mds_replay_stop(&m);
	mds_leases_stop(&m);
	mds_destroyer_stop(&m);
	mds_truncator_stop(&m);
	mds_resync_stop(&m);
	/* After the last commit (the metadata thread's, acknowledged by the standby): the leader
	 * key goes, and the standby takes over at once. */
	mds_coord_close(m.repl.coord);
	mds_repl_stop(&m); /* its held pulls answered into the void before their server goes */
	srv_destroy(m.srv);
	/* Disconnect items queued by srv_destroy are moot: handles die with the process. */
	for (struct reqq_item *it; (it = reqq_pop_batch(&m.queue, 1, 0, NULL));) {
		if (it->kind == REQQ_SRV_REQ)
			srv_req_drop(srv_req_of(it));
		else
			free(mds_work_of(it));
	}
	mds_sessions_destroy(&m);
	mds_status_destroy(&m);
	mds_locks_destroy(&m);
	u64map_destroy(&m.ost_conns);
	nodemap_destroy(&m.nodemap);
	mdt_store_close(m.store);
	mmp_release(mmp); /* after the last write to the MDT */
	reqq_destroy(&m.queue);
	return rc ? 1 : 0;
}
