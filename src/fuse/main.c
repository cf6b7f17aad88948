/*
 * loom-mount HOST[:PORT][,HOST[:PORT]...]:/FSNAME MOUNTPOINT [-o OPTIONS] [-f] [-d]
 * (the MDS's failover list as common/mdsaddr.h has it: Lustre's mds1@tcp:mds2@tcp:/fs too)
 *
 * Connects to the MDS, mounts, and serves FUSE requests with a pool of threads. Runs in the
 * background once the mount is in place (unless -f), so `mount -t loom` returns with a working
 * mount; unmount with `umount MOUNTPOINT` (or `fusermount3 -u` as a user).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/log.h"
#include "common/mountinfo.h"
#include "common/mdsaddr.h"
#include "common/util.h"
#include "common/version.h"
#include "net/http.h"
#include "proto/wire.h"
#include "fuse/lmount.h"

#define LM_OPT(t, p) { t, offsetof(struct lmount_opts, p), 1 }

/* Exit codes, as mount(8) has its helpers give them (mount.loom runs this program): 1 for a
 * wrong invocation (a bad option, source or key file), 32 for a mount that failed. */
#define EX_USAGE 1
#define EX_FAIL  32

enum { KEY_HELP, KEY_VERSION, KEY_DROP, KEY_KEYFILE, KEY_DOOR };

static const struct fuse_opt lm_opt_spec[] = {
	LM_OPT("attr_timeout=%lf", attr_timeout),
	LM_OPT("entry_timeout=%lf", entry_timeout),
	LM_OPT("negative_timeout=%lf", negative_timeout),
	LM_OPT("threads=%u", max_threads),
	LM_OPT("readahead_kb=%u", readahead_kb),
	LM_OPT("-f", foreground),
	LM_OPT("-d", debug),
	LM_OPT("debug", debug),
	LM_OPT("ro", readonly),
	LM_OPT("owner_only", owner_only),
	LM_OPT("no_default_permissions", no_default_permissions),
	LM_OPT("recovery=%u", recovery),
	LM_OPT("soft", soft),
	LM_OPT("hard", hard),
	LM_OPT("timeout=%u", timeout),
	LM_OPT("at_min=%u", at_min),
	LM_OPT("root_squash", root_squash),
	LM_OPT("encrypt", encrypt),
	LM_OPT("noleases", noleases),
	LM_OPT("nowsync", nowsync),
	{ "wsync", offsetof(struct lmount_opts, nowsync), 0 },
	LM_OPT("nodoor", nodoor),
	LM_OPT("jobid_var=%s", jobid_var),
	LM_OPT("jobid_name=%s", jobid_name),
	LM_OPT("http=%s", http),
	LM_OPT("nostats", nostats),
	FUSE_OPT_KEY("key=", KEY_KEYFILE),
	FUSE_OPT_KEY("door=", KEY_DOOR),
	FUSE_OPT_KEY("-h", KEY_HELP),
	FUSE_OPT_KEY("--help", KEY_HELP),
	FUSE_OPT_KEY("-V", KEY_VERSION),
	FUSE_OPT_KEY("--version", KEY_VERSION),
	/* fstab's and mount(8)'s own words, meaningless to FUSE */
	FUSE_OPT_KEY("_netdev", KEY_DROP),
	FUSE_OPT_KEY("defaults", KEY_DROP),
	FUSE_OPT_KEY("auto", KEY_DROP),
	FUSE_OPT_KEY("noauto", KEY_DROP),
	FUSE_OPT_KEY("nofail", KEY_DROP),
	FUSE_OPT_KEY("user", KEY_DROP),
	FUSE_OPT_KEY("nouser", KEY_DROP),
	FUSE_OPT_KEY("users", KEY_DROP),
	FUSE_OPT_KEY("rw", KEY_DROP),
	FUSE_OPT_END,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: loom-mount HOST[:PORT][,HOST[:PORT]...]:/FSNAME MOUNTPOINT [-o OPTION[,OPTION...]] [-f] [-d]\n"
		"Mounts a Loom file system (also as `mount -t loom HOST:/FSNAME MOUNTPOINT`).\n"
		"HOST is a name or an IPv4 address; a list gives the MDS's failover addresses, tried\n"
		"in turn. Lustre's NIDs are accepted: mds1@tcp:/fs, mds1@tcp:mds2@tcp:/fs,\n"
		"mds1@tcp:9901:/fs (TCP only).\n\n"
		"Loom options:\n"
		"  attr_timeout=SEC      how long the kernel trusts attributes (default 1.0)\n"
		"  entry_timeout=SEC     how long the kernel trusts a name's inode (default 1.0)\n"
		"  negative_timeout=SEC  how long it trusts that a name does not exist (default 0)\n"
		"  threads=N             most threads serving requests at once (default 16)\n"
		"  readahead_kb=N        the kernel's read-ahead for this mount (default 16384: enough\n"
		"                        to keep every stripe of a wide file busy)\n"
		"  owner_only            only the mounting user may use the mount (FUSE's default);\n"
		"                        otherwise a mount by root is open to every user (allow_other)\n"

		"  key=PATH              the file system key (default: $LOOM_KEY_FILE, else\n"
		"                        /etc/loom/loom.key if it exists)\n"
		"  recovery=SEC          how long requests wait for a server that went away before\n"
		"                        they fail with EIO (default 100)\n"
		"  hard                  (default) a request waits for a server that is away or hung,\n"
		"                        up to recovery=SEC; a signal (kill -9 too) ends the wait: EINTR\n"
		"  soft                  a request fails with EIO after timeout=SEC without an answer\n"
		"  timeout=SEC           a soft mount's limit (default 30)\n"
		"  at_min=SEC            a server that answers nothing for this long at least (more if\n"
		"                        its replies have been slow) counts as hung (default 20)\n"
		"  root_squash           requests from root reach the MDS as nobody (65534)\n"
		"  encrypt               encrypt every frame to and from the servers, not only\n"
		"                        authenticate it (needs the key; a server started with\n"
		"                        --encrypt has every client do it)\n"
		"  noleases              take no directory leases: every lookup of a missing name\n"
		"                        asks the MDS (by default the mount answers those itself in\n"
		"                        directories it holds a lease on, which the MDS recalls before\n"
		"                        another client changes them), no inode leases (files\n"
		"                        read before open and close for reading without the MDS)\n"
		"  nowsync               creates sent behind (CephFS's nowsync, the default): in a\n"
		"                        directory no other client leases, the mount answers creates,\n"
		"                        and unlinks of files it made, itself and tells the MDS\n"
		"                        behind (see loom-mount(8))\n"
		"  wsync                 every create and unlink waits for the MDS's answer\n"
		"  door=PATH             the socket through which users without the key use the file\n"
		"                        system natively, as themselves (libloom, the Python package;\n"
		"                        default /run/loom/door.PID.sock when root mounts)\n"
		"  nodoor                serve no such socket\n"
		"  jobid_var=NAME        where each request's job id comes from, as Lustre's: the\n"
		"                        caller's environment variable NAME (SLURM_JOB_ID, ...) when\n"
		"                        it has one, else jobid_name; procname_uid (the default) or\n"
		"                        nodelocal: jobid_name; disable: no job id\n"
		"  jobid_name=PATTERN    the job id's pattern: %%e command, %%u uid, %%g gid, %%p pid,\n"
		"                        %%h host, %%H full host name, %%j the jobid_var variable's\n"
		"                        value (default %%e.%%u)\n"
		"  http=HOST:PORT        serve the mount's own counters (per FUSE operation, and its\n"
		"                        caches') at http://HOST:PORT/metrics, in Prometheus' format\n"
		"                        (a numeric IPv4 host; port 0: any free one, logged). Off by\n"
		"                        default; no key is asked there. `loom stats` shows the\n"
		"                        same counters too (see loom(1))\n"
		"  nostats               count no FUSE request (as a server started without counting:\n"
		"                        to measure what counting costs)\n"
		"  -f                    stay in the foreground;  -d  print every request (implies -f)\n"
		"Mount options handled by the kernel or FUSE:\n"
		"  ro, rw, noatime, relatime, nosuid, nodev, noexec, allow_other, allow_root,\n"
		"  max_read=N, fsname=, subtype=.\n"
		"Ignored (for fstab): defaults, _netdev, auto, noauto, nofail, user, users.\n");
}

static int lm_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct lmount_opts *o = data;

	(void)outargs;
	switch (key) {
	case KEY_HELP:
		usage(stdout);
		exit(0);
	case KEY_VERSION:
		printf("loom-mount %s (protocol %u, accepts %u to %u; libfuse %s)\n", LOOM_RELEASE, LW_VERSION,
		       LW_VERSION_MIN, LW_VERSION, fuse_pkgversion());
		exit(0);
	case KEY_DROP:
		return 0;
	case KEY_KEYFILE:
		free(o->key_file);
		o->key_file = realpath(arg + 4, NULL);
		if (!o->key_file) {
			fprintf(stderr, "loom-mount: cannot read the key file %s: %s\n", arg + 4, strerror(errno));
			exit(EX_USAGE);
		}
		return 0;
	case KEY_DOOR:
		if (arg[5] != '/' || strlen(arg + 5) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
			fprintf(stderr, "loom-mount: door=%s: an absolute path of at most 107 bytes\n", arg + 5);
			exit(EX_USAGE);
		}
		free(o->door);
		o->door = strdup(arg + 5);
		return 0;
	case FUSE_OPT_KEY_NONOPT:
		if (!o->spec) {
			o->spec = strdup(arg);
			return 0;
		}
		if (!o->mountpoint) {
			o->mountpoint = realpath(arg, NULL);
			if (!o->mountpoint) {
				fprintf(stderr, "loom-mount: bad mount point %s: %s\n", arg, strerror(errno));
				exit(EX_FAIL);
			}
			return 0;
		}
		fprintf(stderr, "loom-mount: unexpected argument '%s'\n", arg);
		return -1;
	default:
		/* x-systemd.* and friends from fstab */
		if (!strncmp(arg, "x-", 2))
			return 0;
		return 1;
	}
}

/*
 * The kernel gives a FUSE mount 128 KiB of read-ahead and lets the INIT reply only lower it, so
 * it is raised on the mount's backing device before INIT (lm_init then asks for the same).
 * The device's major:minor comes from mountinfo: a stat of the mount point from here would ask
 * this very process, which does not serve requests yet.
 */
static void set_readahead(const char *mountpoint, unsigned kb)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[32] = "", path[PATH_MAX];
	unsigned maj, min;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char mnt[PATH_MAX];
		if (sscanf(line, "%*d %*d %u:%u %*s %4095s", &maj, &min, mnt) == 3 && !strcmp(mnt, mountpoint))
			snprintf(dev, sizeof(dev), "%u:%u", maj, min); /* the last one: the newest mount */
	}
	fclose(f);
	if (!dev[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	f = fopen(path, "we");
	if (!f)
		return; /* not root: the kernel's default stays */
	fprintf(f, "%u\n", kb);
	if (fclose(f) != 0)
		log_warn("cannot set read-ahead of %s to %u KiB", mountpoint, kb);
}

/*
 * Goes to the background before the first connection, so that the daemon's one connection is
 * the one that was checked: a second connection after daemonizing (fuse_daemonize forks, and
 * libloom's threads would not survive that) could find the MDS restarting, and the mount would
 * vanish just after `mount` reported success. The parent waits for daemon_ready() and exits with
 * 0 once it reports, 1 if the daemon exits first. So `mount` still returns once the mount is in
 * place, and connection errors still reach the caller's terminal. Returns the pipe to report
 * on, or -1 on failure.
 */
static int daemon_start(void)
{
	int ready[2];
	pid_t pid;
	char status = EX_FAIL;

	if (pipe2(ready, O_CLOEXEC) != 0) {
		perror("loom-mount: pipe");
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		perror("loom-mount: fork");
		return -1;
	}
	if (pid > 0) {
		close(ready[1]);
		if (read(ready[0], &status, 1) != 1)
			status = EX_FAIL; /* the daemon died before it was ready */
		_exit(status);
	}
	close(ready[0]);
	if (setsid() < 0)
		perror("loom-mount: setsid");
	return ready[1];
}

/* Tells the waiting parent that the mount is in place, and lets go of its terminal. A log
 * file as stderr (what `loom cluster` and service managers give) is kept; a terminal or a pipe
 * is not: a pipe held open would keep whoever reads `mount`'s output waiting forever. */
static void daemon_ready(int ready_fd)
{
	char status = 0;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct stat st;

	if (nul >= 0) {
		dup2(nul, STDIN_FILENO);
		dup2(nul, STDOUT_FILENO);
		if (fstat(STDERR_FILENO, &st) != 0 || !S_ISREG(st.st_mode))
			dup2(nul, STDERR_FILENO);
		close(nul);
	}
	if (chdir("/") != 0)
		log_warn("chdir /: %s", strerror(errno));
	if (write(ready_fd, &status, 1) != 1)
		log_warn("cannot tell the parent that the mount is in place: %s", strerror(errno));
	close(ready_fd);
}

/* jobid_var= and jobid_name= into m->jobid: 0, or -EINVAL once the refused one was named. */
static int jobid_opts(struct lmount *m)
{
	jobid_conf_init(&m->jobid);
	if (m->opts.jobid_var && jobid_conf_set(&m->jobid, "jobid_var", m->opts.jobid_var)) {
		fprintf(stderr, "loom-mount: jobid_var=%s: disable, procname_uid, nodelocal, or the name of "
				"an environment variable ([A-Za-z_][A-Za-z0-9_]*, at most 63 bytes)\n",
			m->opts.jobid_var);
		return -EINVAL;
	}
	if (m->opts.jobid_name && jobid_conf_set(&m->jobid, "jobid_name", m->opts.jobid_name)) {
		fprintf(stderr, "loom-mount: jobid_name=%s: a pattern of 1 to 63 printable ASCII characters "
				"(%%e, %%u, %%g, %%p, %%h, %%H, %%j; no job id at all is jobid_var=disable)\n",
			m->opts.jobid_name);
		return -EINVAL;
	}
	return 0;
}

/* LIST:/FSNAME -> the list and the name, both checked (common/mdsaddr.h); why says what is
 * wrong. The names are resolved when connecting (and at every reconnection: DNS may move). */
static int parse_spec(const char *spec, char *addr, size_t acap, char *fsname, size_t fcap, char *why,
		      size_t cap)
{
	struct mds_addrs addrs;
	int rc;

	rc = mount_source_split(spec, addr, acap, fsname, fcap, why, cap);
	if (rc == 0)
		rc = mds_addrs_parse(addr, LW_DEFAULT_MDS_PORT, &addrs, why, cap);
	return rc;
}

/* The MDS's count of directory renames now (0 if it cannot be had), from an open of the root:
 * the kernel holds no dentry yet, so all it will be told is current as of this. */
static uint64_t dir_moves_now(loom_fs *fs)
{
	struct loom_cred root = { 0 };
	struct loom_ll_attr a;
	loom_file *f;

	if (loom_ll_open(fs, &root, LOOM_ROOT_INO, O_RDONLY | O_DIRECTORY, NULL, &f, &a) != 0)
		return 0;
	loom_close(f);
	return a.dir_moves;
}

/* The door for users without the key (door.c): where asked, else root's default place. A mount
 * without one still works; its users then read through the mount. */
static void door_start(struct lmount *m)
{
	char path[108];
	int rc;

	if (m->opts.nodoor)
		return;
	if (m->opts.door) {
		snprintf(path, sizeof(path), "%s", m->opts.door);
	} else if (getuid() == 0) {
		if (mkdir("/run/loom", 0755) && errno != EEXIST) {
			log_warn("no door: cannot make /run/loom: %s", strerror(errno));
			return;
		}
		snprintf(path, sizeof(path), "/run/loom/door.%d.sock", (int)getpid());
	} else {
		return;
	}
	rc = lm_door_start(m, path, &m->door);
	if (rc)
		log_warn("no door at %s: %s", path, strerror(-rc));
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_lowlevel_ops ops = { 0 };
	struct fuse_loop_config *loop_cfg;
	struct fuse_session *se;
	struct http_srv *http = NULL;
	char http_host[64];
	uint16_t http_asked = 0; /* the port of http= (0: any) */
	struct lmount m = { 0 };
	const char *key_file;
	char fsopt[1200], why[LOOM_KEY_REFUSAL_LEN];
	int rc, ready_fd = -1, ret = EX_FAIL;

	m.opts.attr_timeout = 1.0;
	m.opts.entry_timeout = 1.0;
	m.opts.negative_timeout = 0.0;
	m.opts.max_threads = 16;
	m.opts.nowsync = 1;
	m.opts.readahead_kb = 16384;
	if (fuse_opt_parse(&args, &m.opts, lm_opt_spec, lm_opt_proc) < 0) {
		ret = EX_USAGE;
		goto out_args;
	}
	if (m.opts.debug) {
		fuse_opt_add_arg(&args, "-odebug");
		m.opts.foreground = 1; /* as for any FUSE file system: what it prints is for a terminal */
	}
	if (m.opts.readonly)
		fuse_opt_add_arg(&args, "-oro");
	if (!m.opts.spec || !m.opts.mountpoint) {
		usage(stderr);
		ret = EX_USAGE;
		goto out_args;
	}
	if (parse_spec(m.opts.spec, m.mds_addr, sizeof(m.mds_addr), m.fsname, sizeof(m.fsname), why,
		       sizeof(why))) {
		fprintf(stderr, "loom-mount: %s\n", why);
		ret = EX_USAGE;
		goto out_args;
	}
	/* As mount.lustre: a second mount over the first would hide it, and leave two daemons. */
	if (mountinfo_loom_source(m.opts.mountpoint, why, sizeof(why))) {
		fprintf(stderr, "loom-mount: %s is already mounted (%s)\n", m.opts.mountpoint, why);
		goto out_args; /* EX_FAIL */
	}
	if (m.opts.no_default_permissions) {
		/* Without the kernel's checks nothing checks who may open a fifo or a device node:
		 * the kernel opens those itself and never asks the file system. */
		fprintf(stderr, "loom-mount: no_default_permissions is not supported: the kernel opens fifos "
				"and device nodes without asking the file system, so nothing would check who "
				"may open them\n");
		ret = EX_USAGE;
		goto out_args;
	}
	if (m.opts.recovery > 86400) {
		fprintf(stderr, "loom-mount: recovery=%u: at most 86400 seconds\n", m.opts.recovery);
		ret = EX_USAGE;
		goto out_args;
	}
	if (m.opts.soft && m.opts.hard) {
		fprintf(stderr, "loom-mount: soft and hard: choose one\n");
		ret = EX_USAGE;
		goto out_args;
	}
	if (m.opts.timeout > 86400 || m.opts.at_min > 86400) {
		fprintf(stderr, "loom-mount: timeout= and at_min= are at most 86400 seconds\n");
		ret = EX_USAGE;
		goto out_args;
	}
	if (jobid_opts(&m)) {
		ret = EX_USAGE;
		goto out_args;
	}
	if (m.opts.http && http_addr_parse(m.opts.http, http_host, sizeof(http_host), &http_asked)) {
		fprintf(stderr, "loom-mount: http=%s: HOST:PORT, a numeric IPv4 host\n", m.opts.http);
		ret = EX_USAGE;
		goto out_args;
	}
	if (m.opts.timeout && !m.opts.soft)
		fprintf(stderr, "loom-mount: timeout=%u matters only with soft; a hard mount waits up to "
				"recovery=SEC\n", m.opts.timeout);
	log_init("loom-mount", m.opts.debug ? LOG_DEBUG : LOG_WARN);
	if (!m.opts.foreground) {
		ready_fd = daemon_start();
		if (ready_fd < 0)
			goto out_args;
	}
	/* The connection first: it tells the user at once when the file system cannot be
	 * reached, and nothing is mounted then. */
	m.copts.fsname = m.fsname;
	m.copts.key_file = m.opts.key_file;
	m.copts.recovery_seconds = m.opts.recovery;
	m.copts.soft_seconds = m.opts.soft ? (m.opts.timeout ? m.opts.timeout : 30) : 0;
	m.copts.at_min_seconds = m.opts.at_min;
	m.copts.encrypt = m.opts.encrypt;
	rc = loom_connect_with(m.mds_addr, &m.copts, &m.fs);
	key_file = loom_key_file_choose(m.copts.key_file);
	if (rc == -EPERM && key_file && *key_file && loom_key_refusal(key_file, why, sizeof(why)) == 0) {
		fprintf(stderr, "loom-mount: %s\n", why);
		goto out_args;
	}
	if (rc == -EACCES || rc == -EKEYREJECTED || rc == -ENOKEY || (rc == -EINVAL && m.copts.encrypt)) {
		fprintf(stderr, "loom-mount: cannot reach file system %s at %s: %s\n", m.fsname, m.mds_addr,
			rc == -EACCES ? "the servers refused this node: it must hold the file system key (-o key=PATH, or /etc/loom/loom.key)" :
			rc == -EKEYREJECTED ? "the key file holds no key" :
			rc == -ENOKEY ? "this user may not read the key file" :
			"encrypt needs the file system key (-o key=PATH, or /etc/loom/loom.key)");
		goto out_args;
	}
	if (rc) {
		/* libloom's sentence names the address that said what (a list has several). */
		fprintf(stderr, "loom-mount: cannot reach file system %s: %s\n", m.fsname, loom_connect_error());
		goto out_args;
	}
	/* Every caller's requests carry its job id (common.c); the mount's own (a release, which
	 * comes from no process) the daemon's, made with the same settings. */
	if (jobid_cache_new(&m.jobid, &m.jobs) != 0) {
		fprintf(stderr, "loom-mount: out of memory\n");
		loom_disconnect(m.fs);
		goto out_args;
	}
	(void)loom_jobid_conf(m.fs, m.jobid.var, m.jobid.name); /* checked above: cannot fail */
	pthread_mutex_init(&m.stamp_lock, NULL);
	pthread_mutex_init(&m.root_lock, NULL);
	pthread_cond_init(&m.unlocks_done, NULL);
	cond_init_monotonic(&m.handles_done);
	lm_mstats_init(&m.mstats, m.fsname, (uint64_t)getpid());
	m.mstats.off = m.opts.nostats != 0;
	lm_sa_init(&m);
	lm_cache_init(&m);
	if (lm_leases_init(&m))
		fprintf(stderr, "loom-mount: no directory leases (out of memory)\n");
	m.dir_moves = dir_moves_now(m.fs);
	/* Figures for statfs(2) to answer with while the MDS is away (umount(8) asks). */
	m.statfs_known = loom_statfs(m.fs, &m.statfs_st) == 0;
	u64map_init(&m.posix_locked);
	u64map_init(&m.open_handles);
	u64map_init(&m.fhs);

	/* What /proc/mounts and df show: the source as given, type fuse.loom. */
	{
		/* A failover list's ',' (and any '\\') escaped, or FUSE takes it for the next option. */
		size_t n = (size_t)snprintf(fsopt, sizeof(fsopt), "-ofsname=");

		for (const char *p = m.opts.spec; *p && n + 3 < sizeof(fsopt); p++) {
			if (*p == ',' || *p == '\\')
				fsopt[n++] = '\\';
			fsopt[n++] = *p;
		}
		snprintf(fsopt + n, sizeof(fsopt) - n, ",subtype=loom");
	}
	fuse_opt_add_arg(&args, fsopt);
	/* A cluster file system is for every user of the node, as a Lustre mount is; the MDS checks
	 * each one's permissions. FUSE allows this to root (or with user_allow_other). */
	if (getuid() == 0 && !m.opts.owner_only)
		fuse_opt_add_arg(&args, "-oallow_other");
	/* The kernel checks permissions too, on the attributes it caches: a path walk through a
	 * cached name then still needs search permission on each directory, and opens of fifos and
	 * device nodes, which never reach the file system, are checked at all. The MDS checks every
	 * request anyway. */
	fuse_opt_add_arg(&args, "-odefault_permissions");
	lm_entry_ops(&ops);
	lm_file_ops(&ops);
	lm_dir_ops(&ops);
	lm_xattr_ops(&ops);
	lm_lock_ops(&ops);
	lm_ioctl_ops(&ops);

	/* Before the mount: an address that cannot be served fails it, as it fails a server. The
	 * mount logs warnings only, so the port it took for port 0 is said here. */
	if (m.opts.http) {
		if (http_serve_stats("loom-mount", m.opts.http, lm_mstats_http, &m.mstats, &http) != 0)
			goto out_fs;
		if (http_asked == 0)
			fprintf(stderr, "loom-mount: statistics on http://%s:%u/metrics\n", http_host,
				http_port(http));
	}
	se = fuse_session_new(&args, &ops, sizeof(ops), &m);
	if (!se)
		goto out_fs;
	m.se = se;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, m.opts.mountpoint) != 0)
		goto out_signals;
	if (m.opts.readahead_kb)
		set_readahead(m.opts.mountpoint, m.opts.readahead_kb);
	door_start(&m);
	/* Only now: the mount exists when the parent (and so `mount`) returns. */
	if (ready_fd >= 0) {
		daemon_ready(ready_fd);
		ready_fd = -1;
	}
	loop_cfg = fuse_loop_cfg_create();
	fuse_loop_cfg_set_max_threads(loop_cfg, m.opts.max_threads);
	fuse_loop_cfg_set_clone_fd(loop_cfg, 0);
	ret = fuse_session_loop_mt(se, loop_cfg) ? EX_FAIL : 0;
	fuse_loop_cfg_destroy(loop_cfg);
	fuse_session_unmount(se);
	lm_door_stop(m.door);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_fs:
	http_stop(http); /* before what it shows goes */
	lm_handles_close_left(&m);
	loom_disconnect(m.fs);
	lm_leases_fini(&m);
	lm_sa_fini(&m);
	lm_cache_fini(&m);
	lm_stamps_fini(&m);
	jobid_cache_free(m.jobs);
out_args:
	fuse_opt_free_args(&args);
	free(m.opts.spec);
	free(m.opts.mountpoint);
	free(m.opts.key_file);
	free(m.opts.door);
	free(m.opts.jobid_var);
	free(m.opts.jobid_name);
	free(m.opts.http);
	return ret;
}
