/*
 * loom cluster up|down|status --dir DIR: a whole file system on this machine, one MDS and N OSS
 * processes on loopback, for trying Loom out and for tests.
 *
 *   DIR/cluster.conf   fsname, MDS port and number of OSTs (kept across restarts)
 *   DIR/mds.conf       if the admin made one: the MDS's settings (loom.conf(5)), read at each start
 *   DIR/loom.conf      "mds = 127.0.0.1:PORT" and "key = DIR/fs.key", usable with `loom --config`
 *   DIR/fs.key         the file system key, which every daemon and client must hold
 *   DIR/mdt, DIR/ostN  the targets
 *   DIR/log/NAME.log   each daemon's log
 *   DIR/run/NAME.pid   each daemon's pid
 *
 * `up` formats what does not exist yet and starts whatever is not running, so it also restarts a
 * daemon that died and adds OSTs when --osts grows. `down` stops exactly the processes recorded
 * under DIR (it checks each pid's command line first).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"
#include "common/util.h"
#include "oss/ost_format.h"
#include "common/version.h"
#include "tools/tool.h"

#define MAX_CLUSTER_OSTS 64

struct cluster {
	char dir[PATH_MAX];
	char fsname[16];
	unsigned port;
	int osts;
	char mds_bin[PATH_MAX];
	char oss_bin[PATH_MAX];
	char mount[PATH_MAX];    /* where `up --mount` mounted it, "" if nowhere */
	const char *mount_opts;  /* more mount options for it (-o), or NULL */
	char key[PATH_MAX + 16]; /* DIR/fs.key */
};

/* ---- finding the daemons ---- */

static bool executable(const char *path)
{
	return access(path, X_OK) == 0;
}

static int find_bin(const char *name, const char *build_subdir, char *out, size_t cap)
{
	char self[PATH_MAX], *dir;
	const char *env = getenv("LOOM_BIN_DIR"), *path = getenv("PATH");
	ssize_t n;

	if (env) {
		snprintf(out, cap, "%s/%s", env, name);
		if (executable(out))
			return 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		dir = dirname(self);
		snprintf(out, cap, "%s/%s", dir, name); /* installed side by side */
		if (executable(out))
			return 0;
		snprintf(out, cap, "%s/../%s/%s", dir, build_subdir, name); /* the build tree */
		if (executable(out))
			return 0;
	}
	/* Where meson installed them: the servers in sbin, loom-mount in bin. */
	for (int i = 0; i < 2; i++) {
		snprintf(out, cap, "%s/%s", i ? LOOM_BINDIR : LOOM_SBINDIR, name);
		if (executable(out))
			return 0;
	}
	while (path && *path) {
		const char *colon = strchr(path, ':');
		size_t len = colon ? (size_t)(colon - path) : strlen(path);
		snprintf(out, cap, "%.*s/%s", (int)len, path, name);
		if (len && executable(out))
			return 0;
		path = colon ? colon + 1 : NULL;
	}
	return -ENOENT;
}

/* ---- the cluster's own config ---- */

static void conf_load(struct cluster *c)
{
	char path[PATH_MAX + 32], *buf, *line, *save = NULL;

	snprintf(path, sizeof(path), "%s/cluster.conf", c->dir);
	if (file_read_all(path, &buf, NULL) != 0)
		return;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char key[32], val[PATH_MAX];
		if (sscanf(line, "%31[^=]=%4095s", key, val) != 2)
			continue;
		if (!strcmp(key, "fsname"))
			snprintf(c->fsname, sizeof(c->fsname), "%s", val);
		else if (!strcmp(key, "port"))
			c->port = (unsigned)atoi(val);
		else if (!strcmp(key, "osts") && c->osts == 0)
			c->osts = atoi(val);
		else if (!strcmp(key, "mount") && !c->mount[0])
			snprintf(c->mount, sizeof(c->mount), "%s", val);
	}
	free(buf);
}

static int conf_save(const struct cluster *c)
{
	char path[PATH_MAX + 32], buf[PATH_MAX + 256];
	int n, rc;

	snprintf(path, sizeof(path), "%s/cluster.conf", c->dir);
	n = snprintf(buf, sizeof(buf), "fsname=%s\nport=%u\nosts=%d\n%s%s%s", c->fsname, c->port, c->osts,
		     c->mount[0] ? "mount=" : "", c->mount, c->mount[0] ? "\n" : "");
	rc = file_write_atomic(path, buf, (size_t)n);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/loom.conf", c->dir);
	n = snprintf(buf, sizeof(buf), "# Loom file system %s, started by `loom cluster up`\nmds = 127.0.0.1:%u\nkey = %s\n",
		     c->fsname, c->port, c->key);
	return file_write_atomic(path, buf, (size_t)n);
}

/* ---- processes ---- */

static void pid_path(const struct cluster *c, const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/run/%s.pid", c->dir, name);
}

/* The pid recorded for name if that process is alive and is ours (its command line names the
 * program and our target directory), else 0. */
static pid_t running_pid(const struct cluster *c, const char *name, const char *prog, const char *target)
{
	char path[PATH_MAX + 64], *buf = NULL, cmd[8192];
	pid_t pid;
	size_t len;
	int fd;
	ssize_t n;

	pid_path(c, name, path, sizeof(path));
	if (file_read_all(path, &buf, NULL) != 0)
		return 0;
	pid = (pid_t)atoi(buf);
	free(buf);
	if (pid <= 0 || kill(pid, 0) != 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	len = (size_t)n;
	for (size_t i = 0; i < len; i++)
		if (cmd[i] == '\0')
			cmd[i] = ' ';
	cmd[len] = '\0';
	if (!strstr(cmd, prog) || !strstr(cmd, target))
		return 0;
	/* A zombie (exited, not yet reaped) is not running. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (file_read_all(path, &buf, NULL) == 0) {
		char *rp = strrchr(buf, ')');
		bool zombie = rp && rp[1] == ' ' && rp[2] == 'Z';
		free(buf);
		if (zombie)
			return 0;
	}
	return pid;
}

/* Starts argv[0] detached (own session), output appended to log; records its pid. */
static int spawn(const struct cluster *c, const char *name, char *const argv[], pid_t *out)
{
	char log[PATH_MAX + 64], pidfile[PATH_MAX + 64], buf[32];
	pid_t pid;
	int n;

	snprintf(log, sizeof(log), "%s/log/%s.log", c->dir, name);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
		setsid();
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		if (nul >= 0)
			dup2(nul, STDIN_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	pid_path(c, name, pidfile, sizeof(pidfile));
	n = snprintf(buf, sizeof(buf), "%d\n", (int)pid);
	*out = pid;
	return file_write_atomic(pidfile, buf, (size_t)n);
}

/* Runs a command to completion (formatting); its output goes to log. */
static int run_wait(const struct cluster *c, const char *name, char *const argv[])
{
	char log[PATH_MAX + 64];
	int status;
	pid_t pid;

	snprintf(log, sizeof(log), "%s/log/%s.log", c->dir, name);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* Runs a system command (found in PATH) quietly; 0 if it succeeded. */
static int run_cmd(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (nul >= 0) {
			dup2(nul, STDOUT_FILENO);
			dup2(nul, STDERR_FILENO);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static bool exists(const char *fmt, const char *dir, int k)
{
	char path[PATH_MAX + 64];
	struct stat st;

	snprintf(path, sizeof(path), fmt, dir, k);
	return stat(path, &st) == 0;
}

/* Reaps a child that exited early, so the wait loops notice. */
static bool child_alive(pid_t pid)
{
	int status;
	return waitpid(pid, &status, WNOHANG) == 0;
}

static int start_mds(struct cluster *c)
{
	char mdt[PATH_MAX + 16], listen[32], addrfile[PATH_MAX + 32], conf[PATH_MAX + 32], *buf;
	char *argv[] = { c->mds_bin, "--mdt", mdt, "--listen", listen, "--port-file", addrfile,
			 "--key", (char *)c->key, NULL, NULL, NULL };
	pid_t pid;
	int rc;

	/* DIR/mds.conf, when there is one: the MDS's own settings (loom.conf(5)), e.g. commit-ms. */
	snprintf(conf, sizeof(conf), "%s/mds.conf", c->dir);
	if (access(conf, F_OK) == 0) {
		argv[9] = "--config";
		argv[10] = conf;
	}
	snprintf(mdt, sizeof(mdt), "%s/mdt", c->dir);
	snprintf(listen, sizeof(listen), "127.0.0.1:%u", c->port);
	snprintf(addrfile, sizeof(addrfile), "%s/run/mds.addr", c->dir);
	unlink(addrfile);
	rc = spawn(c, "mds", argv, &pid);
	if (rc)
		return rc;
	for (int i = 0; i < 200; i++) {
		if (file_read_all(addrfile, &buf, NULL) == 0) {
			char *colon = strrchr(buf, ':');
			if (colon)
				c->port = (unsigned)atoi(colon + 1);
			free(buf);
			return c->port ? 0 : -EIO;
		}
		if (!child_alive(pid))
			return -EIO;
		sleep_ms(50);
	}
	return -ETIMEDOUT;
}

static int start_oss(const struct cluster *c, int k, pid_t *pid)
{
	char name[16], ost[PATH_MAX + 16], mds[32], conf[PATH_MAX + 32];
	char *argv[] = { (char *)c->oss_bin, "--ost", ost, "--mds", mds, "--listen", "127.0.0.1:0",
			 "--key", (char *)c->key, NULL, NULL, NULL };

	/* DIR/oss.conf, when there is one: every OSS's own settings (loom.conf(5)), e.g. http. */
	snprintf(conf, sizeof(conf), "%s/oss.conf", c->dir);
	if (access(conf, F_OK) == 0) {
		argv[9] = "--config";
		argv[10] = conf;
	}
	snprintf(name, sizeof(name), "oss%d", k);
	snprintf(ost, sizeof(ost), "%s/ost%d", c->dir, k);
	snprintf(mds, sizeof(mds), "127.0.0.1:%u", c->port);
	return spawn(c, name, argv, pid);
}

/* An OSS started by this run (pids[k], 0: not started now) that exited already: it said why in
 * its log (the MDS refused its OST, another server holds it): no use waiting for it. */
static bool an_oss_exited(const struct cluster *c, const pid_t *pids)
{
	for (int k = 0; k < c->osts; k++) {
		int status;

		if (pids[k] > 0 && waitpid(pids[k], &status, WNOHANG) == pids[k]) {
			fprintf(stderr, "loom cluster: oss%d exited (%s %d) before its OST came up; see "
				"%s/log/oss%d.log\n", k, WIFEXITED(status) ? "status" : "signal",
				WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), c->dir, k);
			return true;
		}
	}
	return false;
}

/* Waits until the MDS reports `want` OSTs that answer, or one of the OSSs started now exits. */
static int wait_osts(const struct cluster *c, int want, const pid_t *pids)
{
	struct loom_connect_opts o = { .key_file = c->key };
	char addr[32];
	int active = 0;

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", c->port);
	for (int i = 0; i < 300; i++) {
		loom_fs *fs = NULL;
		struct loom_target *t = NULL;
		uint32_t n = 0;

		active = 0;
		if (loom_connect_with(addr, &o, &fs) == 0) {
			if (loom_targets(fs, &t, &n) == 0) {
				for (uint32_t k = 0; k < n; k++)
					if (t[k].kind == LOOM_TGT_OST && !(t[k].flags & LOOM_TGTF_INACTIVE))
						active++;
				free(t);
			}
			loom_disconnect(fs);
		}
		if (active >= want)
			return 0;
		if (an_oss_exited(c, pids))
			return -ECHILD;
		sleep_ms(100);
	}
	fprintf(stderr, "loom cluster: only %d of %d OSTs came up; see %s/log/\n", active, want, c->dir);
	return -ETIMEDOUT;
}

/* Is dir a mount point of a Loom file system right now? */
static bool is_loom_mount(const char *dir)
{
	FILE *f = fopen("/proc/self/mounts", "re");
	char src[512], mnt[PATH_MAX], type[64];
	bool found = false;

	if (!f)
		return false;
	while (fscanf(f, "%511s %4095s %63s %*[^\n]", src, mnt, type) == 3)
		if (!strcmp(mnt, dir) && !strcmp(type, "fuse.loom"))
			found = true;
	fclose(f);
	return found;
}

static int mount_fs(struct cluster *c)
{
	char bin[PATH_MAX], spec[128], opts[PATH_MAX + 512];
	char *argv[] = { bin, spec, c->mount, "-o", opts, NULL };
	int rc;

	if (is_loom_mount(c->mount))
		return 0;
	if (find_bin("loom-mount", "fuse", bin, sizeof(bin))) {
		fprintf(stderr, "loom cluster: cannot find loom-mount (set LOOM_BIN_DIR)\n");
		return -ENOENT;
	}
	rc = mkdir_p(c->mount, 0755);
	if (rc)
		return rc;
	snprintf(spec, sizeof(spec), "127.0.0.1:%u:/%s", c->port, c->fsname);
	snprintf(opts, sizeof(opts), "key=%s%s%s", c->key, c->mount_opts ? "," : "",
		 c->mount_opts ? c->mount_opts : "");
	/* loom-mount returns once the mount is in place and serves it in the background. */
	return run_wait(c, "mount", argv);
}

static void unmount_fs(const struct cluster *c)
{
	char *argv[] = { "umount", (char *)c->mount, NULL };
	char *lazy[] = { "umount", "-l", (char *)c->mount, NULL };
	char *user[] = { "fusermount3", "-u", (char *)c->mount, NULL };

	if (!c->mount[0] || !is_loom_mount(c->mount))
		return;
	if (run_cmd(argv) == 0 || run_cmd(user) == 0)
		return;
	fprintf(stderr, "loom cluster: %s is busy; detaching it (lazy unmount)\n", c->mount);
	run_cmd(lazy);
}

static int cluster_up(struct cluster *c)
{
	char sub[PATH_MAX + 16], target[PATH_MAX + 16];
	pid_t *pids;
	int rc;

	if (find_bin("loom-mds", "mds", c->mds_bin, sizeof(c->mds_bin)) ||
	    find_bin("loom-oss", "oss", c->oss_bin, sizeof(c->oss_bin))) {
		fprintf(stderr, "loom cluster: cannot find loom-mds and loom-oss (set LOOM_BIN_DIR)\n");
		return 1;
	}
	snprintf(sub, sizeof(sub), "%s/log", c->dir);
	rc = mkdir_p(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/run", c->dir);
	if (rc == 0)
		rc = mkdir_p(sub, 0755);
	if (rc)
		return tool_fail("cluster", c->dir, rc);

	/* The key first: formatting by hand makes one too, and a cluster made before keys existed
	 * gets one now. */
	rc = loom_key_create(c->key);
	if (rc && rc != -EEXIST)
		return tool_fail("cluster", "cannot make the file system key", rc);
	if (rc == -EEXIST) {
		/* A kept key the servers would refuse is told here, not in their logs. */
		uint8_t key[LOOM_KEY_MAX];
		char why[LOOM_KEY_REFUSAL_LEN];
		size_t len;

		rc = loom_key_load(c->key, key, &len, NULL);
		OPENSSL_cleanse(key, sizeof(key));
		if (rc == -EPERM && loom_key_refusal(c->key, why, sizeof(why)) == 0)
			fprintf(stderr, "loom cluster: %s\n", why);
		else if (rc)
			fprintf(stderr, "loom cluster: cannot use the file system key %s: %s\n", c->key,
				rc == -EINVAL ? "the file holds no key" : strerror(-rc));
		if (rc)
			return 1;
	}
	if (!exists("%s/mdt/data.mdb", c->dir, 0)) {
		char *argv[] = { c->mds_bin, "--format", "--fsname", c->fsname, "--mdt", target,
				 "--key", c->key, NULL };
		snprintf(target, sizeof(target), "%s/mdt", c->dir);
		if (run_wait(c, "mds", argv)) {
			fprintf(stderr, "loom cluster: formatting the MDT failed; see %s/log/mds.log\n", c->dir);
			return 1;
		}
	}
	for (int k = 0; k < c->osts; k++) {
		char index[16];
		/* DIR/ostK is OST index K, so that names in `cluster status` and `df` agree. */
		char *argv[] = { c->oss_bin, "--format", "--fsname", c->fsname, "--ost", target,
				 "--index", index, NULL };
		char name[16];

		if (exists("%s/ost%d/" OST_CONF_FILE, c->dir, k))
			continue;
		snprintf(target, sizeof(target), "%s/ost%d", c->dir, k);
		snprintf(index, sizeof(index), "%d", k);
		snprintf(name, sizeof(name), "oss%d", k);
		if (run_wait(c, name, argv)) {
			fprintf(stderr, "loom cluster: formatting %s failed; see %s/log/%s.log\n", target, c->dir, name);
			return 1;
		}
	}

	snprintf(target, sizeof(target), "%s/mdt", c->dir);
	if (!running_pid(c, "mds", "loom-mds", target)) {
		rc = start_mds(c);
		if (rc) {
			fprintf(stderr, "loom cluster: the MDS did not start (%s); see %s/log/mds.log\n",
				strerror(-rc), c->dir);
			return 1;
		}
	}
	rc = conf_save(c);
	if (rc)
		return tool_fail("cluster", "cannot save cluster.conf", rc);
	pids = calloc((size_t)c->osts, sizeof(*pids));
	if (!pids)
		return tool_fail("cluster", "cannot start the OSSs", -ENOMEM);
	for (int k = 0; k < c->osts; k++) {
		char name[16];

		snprintf(name, sizeof(name), "oss%d", k);
		snprintf(target, sizeof(target), "%s/ost%d", c->dir, k);
		if (running_pid(c, name, "loom-oss", target))
			continue;
		rc = start_oss(c, k, &pids[k]);
		if (rc) {
			free(pids);
			return tool_fail("cluster", "cannot start an OSS", rc);
		}
	}
	rc = wait_osts(c, c->osts, pids);
	free(pids);
	if (rc)
		return 1;
	if (c->mount[0]) {
		rc = mount_fs(c);
		if (rc) {
			fprintf(stderr, "loom cluster: mounting on %s failed (%s); see %s/log/mount.log\n",
				c->mount, strerror(-rc), c->dir);
			return 1;
		}
	}
	printf("Loom file system '%s' is up: MDS at 127.0.0.1:%u, %d OSS with one OST each, under %s\n",
	       c->fsname, c->port, c->osts, c->dir);
	printf("  export LOOM_FS=127.0.0.1:%u LOOM_KEY_FILE=%s   (or: loom --config %s/loom.conf ...)\n",
	       c->port, c->key, c->dir);
	if (c->mount[0])
		printf("  mounted on %s (mount -t loom -o key=%s 127.0.0.1:%u:/%s DIR mounts it elsewhere)\n",
		       c->mount, c->key, c->port, c->fsname);
	return 0;
}

static bool stop_one(const struct cluster *c, const char *name, const char *prog, const char *target)
{
	char pidfile[PATH_MAX + 64];
	pid_t pid = running_pid(c, name, prog, target);

	pid_path(c, name, pidfile, sizeof(pidfile));
	if (!pid) {
		unlink(pidfile);
		return false;
	}
	kill(pid, SIGTERM);
	for (int i = 0; i < 100 && kill(pid, 0) == 0; i++) {
		/* Not our child (it was detached), so it is reaped by init; poll for it. */
		char path[64];
		struct stat st;
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (stat(path, &st) != 0 || !running_pid(c, name, prog, target))
			break;
		sleep_ms(100);
	}
	if (running_pid(c, name, prog, target)) {
		fprintf(stderr, "loom cluster: %s (pid %d) ignored SIGTERM; killing it\n", name, (int)pid);
		kill(pid, SIGKILL);
		sleep_ms(100);
	}
	unlink(pidfile);
	return true;
}

static int cluster_down(struct cluster *c)
{
	char target[PATH_MAX + 16];
	int stopped = 0;

	/* The mount first, while the servers can still answer its last requests; then OSSs, which
	 * would otherwise spin reconnecting to a vanished MDS. */
	unmount_fs(c);
	for (int k = 0; k < MAX_CLUSTER_OSTS; k++) {
		char name[16];
		snprintf(name, sizeof(name), "oss%d", k);
		snprintf(target, sizeof(target), "%s/ost%d", c->dir, k);
		stopped += stop_one(c, name, "loom-oss", target);
	}
	snprintf(target, sizeof(target), "%s/mdt", c->dir);
	stopped += stop_one(c, "mds", "loom-mds", target);
	printf("stopped %d Loom process%s under %s\n", stopped, stopped == 1 ? "" : "es", c->dir);
	return 0;
}

static int cluster_status(struct cluster *c)
{
	char target[PATH_MAX + 16];
	pid_t pid;
	int down = 0;

	snprintf(target, sizeof(target), "%s/mdt", c->dir);
	pid = running_pid(c, "mds", "loom-mds", target);
	printf("file system %s, MDS 127.0.0.1:%u\n", c->fsname, c->port);
	if (c->mount[0])
		printf("  mount  %s %s\n", c->mount, is_loom_mount(c->mount) ? "mounted" : "not mounted");
	printf("  mds    %s", pid ? "running" : "stopped");
	if (pid)
		printf(" (pid %d)", (int)pid);
	printf("\n");
	down += !pid;
	for (int k = 0; k < c->osts; k++) {
		char name[16];
		snprintf(name, sizeof(name), "oss%d", k);
		snprintf(target, sizeof(target), "%s/ost%d", c->dir, k);
		pid = running_pid(c, name, "loom-oss", target);
		printf("  %-6s %s", name, pid ? "running" : "stopped");
		if (pid)
			printf(" (pid %d)", (int)pid);
		printf("\n");
		down += !pid;
	}
	/* As systemctl: 0 when everything runs, 3 when something does not. */
	return down ? 3 : 0;
}

int cmd_cluster(struct tool_ctx *ctx, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },    { "osts", required_argument, NULL, 'n' },
		{ "fsname", required_argument, NULL, 'f' }, { "port", required_argument, NULL, 'p' },
		{ "mount", required_argument, NULL, 'm' },  { "options", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	struct cluster c = { 0 };
	const char *dir = NULL, *verb, *mnt = NULL;
	int ch, osts = 0;
	long port = -1;

	(void)ctx;
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: loom cluster up|down|status --dir DIR [--osts N] [--fsname NAME] [--port PORT] [--mount MNT [-o OPTS]]\n");
		return 2;
	}
	verb = argv[1];
	optind = 2;
	while ((ch = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
		switch (ch) {
		case 'd': dir = optarg; break;
		case 'n':
			osts = atoi(optarg);
			if (osts < 1 || osts > MAX_CLUSTER_OSTS) {
				fprintf(stderr, "loom cluster: --osts takes 1 to %d\n", MAX_CLUSTER_OSTS);
				return 2;
			}
			break;
		case 'f':
			if (!*optarg || strlen(optarg) > LOOM_FSNAME_MAX) {
				fprintf(stderr, "loom cluster: --fsname takes 1 to %d characters\n", LOOM_FSNAME_MAX);
				return 2;
			}
			snprintf(c.fsname, sizeof(c.fsname), "%s", optarg);
			break;
		case 'm': mnt = optarg; break;
		case 'o':
			/* Options of the mount (loom-mount(8)'s -o), after the key it is given. */
			if (!*optarg || strlen(optarg) > 400 || strpbrk(optarg, " \t\n")) {
				fprintf(stderr, "loom cluster: -o takes mount options, comma-separated\n");
				return 2;
			}
			c.mount_opts = optarg;
			break;
		case 'p':
			port = atol(optarg);
			if (port < 0 || port > 65535) {
				fprintf(stderr, "loom cluster: bad --port\n");
				return 2;
			}
			break;
		case 'h':
			printf("usage: loom cluster up|down|status --dir DIR [--osts N] [--fsname NAME] [--port PORT] [--mount MNT [-o OPTS]]\n"
			       "  up      format (the first time) and start an MDS and N OSS (default 4) on\n"
			       "          127.0.0.1 under DIR; starts again whatever is not running;\n"
			       "          with --mount, mounts the file system on MNT too, with the mount\n"
			       "          options OPTS (loom-mount(8)'s -o, e.g. nowsync) besides its key\n"
			       "  down    unmount it, and stop the processes started under DIR\n"

			       "  status  show which of them run (exit 3 if any does not)\n");
			return 0;
		default: return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "loom cluster: --dir DIR is required\n");
		return 2;
	}
	if (mkdir_p(dir, 0755) || !realpath(dir, c.dir))
		return tool_fail("cluster", dir, errno);
	snprintf(c.key, sizeof(c.key), "%s/fs.key", c.dir);
	{
		char keep_fsname[16];
		snprintf(keep_fsname, sizeof(keep_fsname), "%s", c.fsname);
		c.osts = osts;
		conf_load(&c);
		/* up mounts only where --mount says, this time; a mount of the cluster's that is
		 * still in place (servers restarted under it) stays the cluster's, for down. */
		if (strcmp(verb, "up") == 0 && c.mount[0] && !is_loom_mount(c.mount))
			c.mount[0] = '\0';
		if (osts > c.osts)
			c.osts = osts;
		if (keep_fsname[0] && c.fsname[0] && strcmp(keep_fsname, c.fsname) && exists("%s/mdt/data.mdb", c.dir, 0)) {
			fprintf(stderr, "loom cluster: %s already holds file system '%s'\n", c.dir, c.fsname);
			return 1;
		}
		if (!c.fsname[0])
			snprintf(c.fsname, sizeof(c.fsname), "%s", keep_fsname[0] ? keep_fsname : "loom");
	}
	if (c.osts == 0)
		c.osts = 4;
	if (c.mount_opts && (!mnt || strcmp(verb, "up"))) {
		fprintf(stderr, "loom cluster: -o OPTS goes with up --mount MNT\n");
		return 2;
	}
	if (mnt) {
		if (mkdir_p(mnt, 0755) || !realpath(mnt, c.mount))
			return tool_fail("cluster", mnt, errno);
	}
	if (port >= 0 && !exists("%s/cluster.conf", c.dir, 0))
		c.port = (unsigned)port;

	if (!strcmp(verb, "up"))
		return cluster_up(&c);
	if (!strcmp(verb, "down"))
		return cluster_down(&c);
	if (!strcmp(verb, "status"))
		return cluster_status(&c);
	fprintf(stderr, "loom cluster: unknown verb '%s' (up, down, status)\n", verb);
	return 2;
}
