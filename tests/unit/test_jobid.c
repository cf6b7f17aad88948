/*
 * src/common/jobid.c: every pattern code, where the id comes from (a variable present, absent,
 * empty; disable), the cut to 31 bytes and the bytes replaced, the settings refused; jobid_self
 * in a child; and the mount's cache, against real children (a variable in /proc/PID/environ, a
 * child gone) and a fake /proc (expiry, a reused pid, unreadable files, eviction, threads).
 */
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/jobid.h"
#include "common/util.h"

int check_failures;
const char *check_current = "";

extern char **environ;

#define SEC 1000000000ull

/* A process of the tests' making: pid 4242, uid 1000, gid 100, comm "train". */
static const struct jobid_proc proc_train = { .pid = 4242, .uid = 1000, .gid = 100, .comm = "train" };

static struct jobid_conf conf_of(const char *var, const char *name)
{
	struct jobid_conf c;

	jobid_conf_init(&c);
	if (var)
		REQUIRE_RC(jobid_conf_set(&c, "jobid_var", var), 0);
	if (name)
		REQUIRE_RC(jobid_conf_set(&c, "jobid_name", name), 0);
	return c;
}

/* The job id of p under (var, name); a static buffer, good until the next call. */
static const char *make(const char *var, const char *name, const struct jobid_proc *p)
{
	static char out[LOOM_JOBID_LEN];
	struct jobid_conf c = conf_of(var, name);

	memset(out, 'X', sizeof(out));
	jobid_make(&c, p, out);
	return out;
}

#define CHECK_STR(got, want)                                                               \
	do {                                                                                \
		const char *g_ = (got), *w_ = (want);                                       \
		if (strcmp(g_, w_))                                                         \
			CHECK_FAIL_("%s: got \"%s\", want \"%s\"", #got, g_, w_);          \
	} while (0)

static void test_codes(void)
{
	char host[256] = "", shorthost[256];

	REQUIRE(gethostname(host, sizeof(host) - 1) == 0);
	snprintf(shorthost, sizeof(shorthost), "%.*s", (int)strcspn(host, "."), host);

	CHECK_STR(make("nodelocal", "%e", &proc_train), "train");
	CHECK_STR(make("nodelocal", "%u", &proc_train), "1000");
	CHECK_STR(make("nodelocal", "%g", &proc_train), "100");
	CHECK_STR(make("nodelocal", "%p", &proc_train), "4242");
	CHECK_STR(make("nodelocal", "%h", &proc_train), shorthost);
	CHECK(strchr(make("nodelocal", "%h", &proc_train), '.') == NULL);
	/* Compared whole only when it fits: longer host names are cut. */
	if (strlen(host) < LOOM_JOBID_LEN)
		CHECK_STR(make("nodelocal", "%H", &proc_train), host);
	CHECK_STR(make("nodelocal", "100%%", &proc_train), "100%");
	CHECK_STR(make("nodelocal", "%x%q.%e", &proc_train), "%x%q.train"); /* unknown codes kept */
	CHECK_STR(make("nodelocal", "%e%", &proc_train), "train%");         /* a last lone '%' */
	CHECK_STR(make("nodelocal", "%%e", &proc_train), "%e");
	CHECK_STR(make("nodelocal", "job-%u-%g-%p", &proc_train), "job-1000-100-4242");
	CHECK_STR(make("nodelocal", "fixed", &proc_train), "fixed");
	/* %j: jobid_var is no variable here. */
	CHECK_STR(make("nodelocal", "a%jb", &proc_train), "ab");
	/* No comm: "unknown". */
	struct jobid_proc nocomm = proc_train;
	nocomm.comm = NULL;
	CHECK_STR(make("nodelocal", "%e", &nocomm), "unknown");
}

static void test_defaults(void)
{
	struct jobid_conf c;
	char out[LOOM_JOBID_LEN];

	jobid_conf_init(&c);
	CHECK_STR(c.var, JOBID_VAR_DEFAULT);
	CHECK_STR(c.name, JOBID_NAME_DEFAULT);
	jobid_make(&c, &proc_train, out);
	CHECK_STR(out, "train.1000");
	/* procname_uid uses the pattern, and never looks at the environment. */
	struct jobid_proc p = proc_train;
	p.env = "procname_uid=x";
	p.env_len = sizeof("procname_uid=x");
	CHECK_STR(make("procname_uid", NULL, &p), "train.1000");
	CHECK_STR(make("procname_uid", "%e-%g", &p), "train-100");
}

static void test_env(void)
{
	static const char env[] = "HOME=/root\0SLURM_JOB=short\0SLURM_JOB_ID=1234\0SLURM_JOB_ID=dup\0EMPTY=\0"
				  "TAIL=nonul";
	struct jobid_proc p = proc_train;

	p.env = env;
	p.env_len = sizeof(env) - 1; /* the last string without its NUL */
	CHECK_STR(make("SLURM_JOB_ID", NULL, &p), "1234"); /* the first, not a prefix's */
	CHECK_STR(make("SLURM_JOB", NULL, &p), "short");
	CHECK_STR(make("TAIL", NULL, &p), "nonul");
	CHECK_STR(make("HOME", NULL, &p), "/root");
	/* Absent or empty: the pattern. */
	CHECK_STR(make("TORCHELASTIC_RUN_ID", NULL, &p), "train.1000");
	CHECK_STR(make("EMPTY", NULL, &p), "train.1000");
	CHECK_STR(make("EMPTY", "%e@%h", &p), make("nodelocal", "%e@%h", &p));
	/* A bounded block: TAIL cut to "non" is what the process has. */
	p.env_len = sizeof(env) - 1 - 2;
	CHECK_STR(make("TAIL", NULL, &p), "non");
	/* No environment at all. */
	p.env = NULL;
	p.env_len = 0;
	CHECK_STR(make("SLURM_JOB_ID", NULL, &p), "train.1000");
	/* A pattern with %j is used even when the variable is set. */
	p.env = env;
	p.env_len = sizeof(env) - 1;
	CHECK_STR(make("SLURM_JOB_ID", "%j.%e", &p), "1234.train");
	CHECK_STR(make("SLURM_JOB_ID", "%%j.%e", &p), "1234"); /* "%%j" is no %j */
	CHECK_STR(make("MISSING", "%j.%e", &p), ".train");
	CHECK_STR(make("EMPTY", "[%j]", &p), "[]");
}

static void test_disable(void)
{
	static const char env[] = "SLURM_JOB_ID=1234";
	struct jobid_proc p = proc_train;

	p.env = env;
	p.env_len = sizeof(env);
	CHECK_STR(make("disable", NULL, &p), "");
	CHECK_STR(make("disable", "%j%e", &p), "");
}

static void test_cut_and_replace(void)
{
	static const char env[] = "LONG=0123456789abcdefghijklmnopqrstuvwxyz\0"
				  "ODD=a b\tc\x01" "d\xc3\xa9\x7f~\0";
	struct jobid_proc p = proc_train;
	const char *s;

	p.env = env;
	p.env_len = sizeof(env);
	s = make("LONG", NULL, &p);
	CHECK_EQ(strlen(s), LOOM_JOBID_LEN - 1);
	CHECK_STR(s, "0123456789abcdefghijklmnopqrstu");
	CHECK_STR(make("ODD", NULL, &p), "a_b_c_d___~");
	/* A pattern cut mid-code and mid-comm. */
	p.comm = "abcdefghijklmno";
	s = make("nodelocal", "%e%e%e", &p);
	CHECK_EQ(strlen(s), 31);
	CHECK_STR(s, "abcdefghijklmnoabcdefghijklmnoa");
	s = make("nodelocal", "0123456789012345678901234567890%u", &p);
	CHECK_STR(s, "0123456789012345678901234567890");
	/* A comm with a space (prctl allows it) and a pattern with one. */
	p.comm = "my job";
	CHECK_STR(make("nodelocal", "%e %u", &p), "my_job_1000");
}

static void test_conf_set(void)
{
	struct jobid_conf c, before;
	char long_name[80];

	jobid_conf_init(&c);
	before = c;
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "1ABC"), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "A-B"), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", ""), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "A B"), -EINVAL);
	memset(long_name, 'A', 64);
	long_name[64] = '\0';
	CHECK_RC(jobid_conf_set(&c, "jobid_var", long_name), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_name", long_name), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_name", ""), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_name", "a\tb"), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_name", "caf\xc3\xa9"), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_other", "x"), -EINVAL);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", NULL), -EINVAL);
	CHECK(!memcmp(&c, &before, sizeof(c))); /* nothing changed by a refusal */

	long_name[63] = '\0';
	CHECK_RC(jobid_conf_set(&c, "jobid_var", long_name), 0);
	CHECK_RC(jobid_conf_set(&c, "jobid_name", long_name), 0);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "disable"), 0);
	CHECK_STR(c.var, "disable");
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "procname_uid"), 0);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "nodelocal"), 0);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "SLURM_JOB_ID"), 0);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "_x9"), 0);
	CHECK_RC(jobid_conf_set(&c, "jobid_var", "TORCHELASTIC_RUN_ID"), 0);
	CHECK_STR(c.var, "TORCHELASTIC_RUN_ID");
	CHECK_RC(jobid_conf_set(&c, "jobid_name", "%j %e.%u@%h"), 0);
	CHECK_STR(c.name, "%j %e.%u@%h");
}

/* Runs jobid_self under (var, name) in a child that has set LOOM_TEST_JOB to value (NULL: not
 * set), and gives its answer and pid. */
static void self_in_child(const char *var, const char *name, const char *value, char out[LOOM_JOBID_LEN],
			  pid_t *pid)
{
	struct jobid_conf c = conf_of(var, name);
	int fds[2], status;
	ssize_t n;

	REQUIRE(pipe(fds) == 0);
	*pid = fork();
	REQUIRE(*pid >= 0);
	if (*pid == 0) {
		char id[LOOM_JOBID_LEN];

		close(fds[0]);
		if (value)
			setenv("LOOM_TEST_JOB", value, 1);
		else
			unsetenv("LOOM_TEST_JOB");
		jobid_self(&c, id);
		_exit(write_full(fds[1], id, sizeof(id)) == 0 ? 0 : 1);
	}
	close(fds[1]);
	memset(out, 0, LOOM_JOBID_LEN);
	n = read(fds[0], out, LOOM_JOBID_LEN);
	close(fds[0]);
	REQUIRE(waitpid(*pid, &status, 0) == *pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(n, LOOM_JOBID_LEN);
	out[LOOM_JOBID_LEN - 1] = '\0';
}

static void test_self(void)
{
	char out[LOOM_JOBID_LEN], want[64], comm[64] = "";
	pid_t pid;
	FILE *f = fopen("/proc/self/comm", "r");

	REQUIRE(f && fgets(comm, sizeof(comm), f));
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';

	self_in_child("LOOM_TEST_JOB", NULL, "self-7", out, &pid);
	CHECK_STR(out, "self-7");
	self_in_child("LOOM_TEST_JOB", NULL, NULL, out, &pid);
	snprintf(want, sizeof(want), "%s.%u", comm, (unsigned)getuid());
	CHECK_STR(out, want);
	self_in_child("LOOM_TEST_JOB", NULL, "", out, &pid);
	CHECK_STR(out, want);
	self_in_child("procname_uid", NULL, "self-7", out, &pid);
	CHECK_STR(out, want);
	self_in_child("LOOM_TEST_JOB", "%p:%g:%j", "j9", out, &pid);
	snprintf(want, sizeof(want), "%d:%u:j9", (int)pid, (unsigned)getgid());
	CHECK_STR(out, want);
	self_in_child("disable", NULL, "self-7", out, &pid);
	CHECK_STR(out, "");
}

/* A child that sets LOOM_TEST_JOB with setenv and then execs /bin/sleep 5 with that environment,
 * so /proc/PID/environ shows it; returned once its comm is "sleep" (the exec done). */
static pid_t start_sleeper(const char *value)
{
	char path[64], comm[64];
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) {
		setenv("LOOM_TEST_JOB", value, 1);
		execle("/bin/sleep", "sleep", "5", (char *)NULL, environ);
		_exit(127);
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(path, "r");
		bool done = f && fgets(comm, sizeof(comm), f) && !strcmp(comm, "sleep\n");

		if (f)
			fclose(f);
		if (done)
			return pid;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	REQUIRE(!"the child did not exec /bin/sleep");
	return -1;
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, NULL, 0) == pid);
}

static void test_cache_real(void)
{
	struct jobid_conf c = conf_of("LOOM_TEST_JOB", NULL), plain = conf_of(NULL, NULL);
	struct jobid_cache *jc, *jc_plain;
	char out[LOOM_JOBID_LEN], want[64];
	uid_t uid = getuid();
	gid_t gid = getgid();
	uint64_t t0 = clock_mono_ns();
	pid_t pid, other;

	REQUIRE_RC(jobid_cache_new(&c, &jc), 0);
	REQUIRE_RC(jobid_cache_new(NULL, &jc_plain), 0);
	pid = start_sleeper("job-42");

	jobid_cache_get_at(jc, pid, uid, gid, t0, out);
	CHECK_STR(out, "job-42");
	jobid_cache_get_at(jc_plain, pid, uid, gid, t0, out);
	snprintf(want, sizeof(want), "sleep.%u", (unsigned)uid);
	CHECK_STR(out, want);
	/* The uid and gid are the caller's, not read from /proc. */
	jobid_cache_get_at(jc_plain, pid, 4321, gid, t0, out);
	CHECK_STR(out, "sleep.4321");

	/* Another child under another value: each pid its own. */
	other = start_sleeper("job-43");
	jobid_cache_get(jc, other, uid, gid, out);
	CHECK_STR(out, "job-43");

	/* Gone: the entry while fresh, then the pattern with comm "unknown". */
	stop_child(pid);
	jobid_cache_get_at(jc, pid, uid, gid, t0 + 1 * SEC, out);
	CHECK_STR(out, "job-42");
	jobid_cache_get_at(jc, pid, uid, gid, t0 + 11 * SEC, out);
	snprintf(want, sizeof(want), "unknown.%u", (unsigned)uid);
	CHECK_STR(out, want);

	/* New settings: nothing kept from the old. */
	jobid_cache_set_conf(jc, &plain);
	jobid_cache_get(jc, other, uid, gid, out);
	snprintf(want, sizeof(want), "sleep.%u", (unsigned)uid);
	CHECK_STR(out, want);
	stop_child(other);

	jobid_cache_free(jc);
	jobid_cache_free(jc_plain);
}

/* The fake /proc: ROOT/PID/{stat,comm,environ}. */
static char fake_root[64];

static void fake_write(pid_t pid, const char *name, const void *data, size_t len)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%d", fake_root, (int)pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%d/%s", fake_root, (int)pid, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(write_full(fd, data, len) == 0);
	close(fd);
}

/* A stat line with start time start; the comm in it has a space and a ')' to mislead a parser
 * that splits from the left. */
static void fake_stat(pid_t pid, unsigned long long start)
{
	char line[256];
	int n = snprintf(line, sizeof(line),
			 "%d (a) b 7) S 1 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 %llu 12345 678\n",
			 (int)pid, start);

	fake_write(pid, "stat", line, (size_t)n);
}

#define fake_str(pid, name, s) fake_write(pid, name, s, sizeof(s) - 1)

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

static void test_cache_fake(void)
{
	struct jobid_conf c = conf_of("SLURM_JOB_ID", NULL), plain = conf_of(NULL, NULL);
	struct jobid_cache *jc, *jc_plain;
	char out[LOOM_JOBID_LEN], path[128];
	const uint64_t t = 1000 * SEC;

	REQUIRE_RC(jobid_cache_new(&c, &jc), 0);
	REQUIRE_RC(jobid_cache_new(&plain, &jc_plain), 0);
	REQUIRE_RC(jobid_cache_set_proc_root(jc, fake_root), 0);
	REQUIRE_RC(jobid_cache_set_proc_root(jc_plain, fake_root), 0);

	fake_stat(4242, 1000);
	fake_str(4242, "comm", "train\n");
	fake_str(4242, "environ", "A=1\0SLURM_JOB_ID=77\0");
	jobid_cache_get_at(jc, 4242, 1000, 100, t, out);
	CHECK_STR(out, "77");

	/* Within 10 s the cached answer holds, though /proc now says otherwise; after, it is read. */
	fake_str(4242, "environ", "A=1\0SLURM_JOB_ID=88\0");
	jobid_cache_get_at(jc, 4242, 1000, 100, t + 5 * SEC, out);
	CHECK_STR(out, "77");
	jobid_cache_get_at(jc, 4242, 1000, 100, t + 10 * SEC - 1, out);
	CHECK_STR(out, "77");
	jobid_cache_get_at(jc, 4242, 1000, 100, t + 11 * SEC, out);
	CHECK_STR(out, "88");

	/* The pid reused by a process started later: not the cached one's. */
	fake_stat(4242, 2000);
	fake_str(4242, "environ", "SLURM_JOB_ID=99\0");
	jobid_cache_get_at(jc, 4242, 1000, 100, t + 12 * SEC, out);
	CHECK_STR(out, "99");

	/* Another uid under the same pid (setuid) is asked afresh. */
	jobid_cache_get_at(jc_plain, 4242, 1000, 100, t, out);
	CHECK_STR(out, "train.1000");
	jobid_cache_get_at(jc_plain, 4242, 2000, 100, t, out);
	CHECK_STR(out, "train.2000");

	/* environ missing, or unreadable (a directory: read fails even for root): the pattern. */
	fake_stat(4343, 1000);
	fake_str(4343, "comm", "eval\n");
	jobid_cache_get_at(jc, 4343, 1000, 100, t, out);
	CHECK_STR(out, "eval.1000");
	fake_stat(4444, 1000);
	fake_str(4444, "comm", "eval\n");
	snprintf(path, sizeof(path), "%s/4444/environ", fake_root);
	REQUIRE(mkdir(path, 0755) == 0);
	jobid_cache_get_at(jc, 4444, 1000, 100, t, out);
	CHECK_STR(out, "eval.1000");
	/* No such process, or a stat without its fields: comm "unknown". */
	jobid_cache_get_at(jc, 5555, 1000, 100, t, out);
	CHECK_STR(out, "unknown.1000");
	fake_str(4545, "stat", "4545 (x) S 1 2 3\n");
	fake_str(4545, "comm", "x\n");
	jobid_cache_get_at(jc, 4545, 1000, 100, t, out);
	CHECK_STR(out, "unknown.1000");
	/* ... and what was not tied to a process was not kept. */
	fake_stat(5555, 1000);
	fake_str(5555, "comm", "late\n");
	jobid_cache_get_at(jc, 5555, 1000, 100, t, out);
	CHECK_STR(out, "late.1000");

	/* set_conf forgets: 4242 is read again at once. */
	fake_str(4242, "environ", "SLURM_JOB_ID=100\0");
	jobid_cache_get_at(jc, 4242, 1000, 100, t + 12 * SEC, out);
	CHECK_STR(out, "99");
	jobid_cache_set_conf(jc, &c);
	jobid_cache_get_at(jc, 4242, 1000, 100, t + 12 * SEC, out);
	CHECK_STR(out, "100");

	jobid_cache_free(jc);
	jobid_cache_free(jc_plain);
}

/* Past JOBID_CACHE_MAX processes the oldest goes; the newest stay. */
static void test_cache_evict(void)
{
	struct jobid_conf c = conf_of("SLURM_JOB_ID", NULL);
	struct jobid_cache *jc;
	char out[LOOM_JOBID_LEN];
	const uint64_t t = 1000 * SEC;
	const pid_t first = 10000, last = first + JOBID_CACHE_MAX;

	REQUIRE_RC(jobid_cache_new(&c, &jc), 0);
	REQUIRE_RC(jobid_cache_set_proc_root(jc, fake_root), 0);
	fake_str(first, "environ", "SLURM_JOB_ID=first\0");
	for (pid_t pid = first; pid <= last; pid++) {
		fake_stat(pid, 500);
		jobid_cache_get_at(jc, pid, 0, 0, t, out);
		if (pid == first)
			CHECK_STR(out, "first");
		else if (pid == last)
			CHECK_STR(out, "unknown.0");
	}
	fake_str(first, "environ", "SLURM_JOB_ID=again\0");
	fake_str(last, "environ", "SLURM_JOB_ID=late\0");
	fake_str(first + 1, "environ", "SLURM_JOB_ID=late\0");
	jobid_cache_get_at(jc, first, 0, 0, t, out);
	CHECK_STR(out, "again");     /* evicted by the last one in */
	jobid_cache_get_at(jc, last, 0, 0, t, out);
	CHECK_STR(out, "unknown.0"); /* still cached */
	jobid_cache_get_at(jc, first + 1, 0, 0, t, out);
	CHECK_STR(out, "late");      /* evicted by first's return */
	jobid_cache_free(jc);
}

struct hammer {
	struct jobid_cache *jc;
	int bad;
};

static void *hammer_run(void *arg)
{
	struct hammer *h = arg;
	char out[LOOM_JOBID_LEN];

	for (int i = 0; i < 3000; i++) {
		pid_t pid = (i % 3 == 0) ? 4242 : (i % 3 == 1) ? 4343 : 5555;

		jobid_cache_get_at(h->jc, pid, 1000, 100, (uint64_t)i * (SEC / 100), out);
		if (strcmp(out, "100") && strcmp(out, "eval.1000") && strcmp(out, "late.1000") &&
		    strcmp(out, "train.1000"))
			h->bad++;
	}
	return NULL;
}

/* Threads sharing a cache while its settings change: answers are always whole. */
static void test_cache_threads(void)
{
	struct jobid_conf c = conf_of("SLURM_JOB_ID", NULL), plain = conf_of(NULL, NULL);
	struct hammer h[4];
	pthread_t th[4];
	struct jobid_cache *jc;

	REQUIRE_RC(jobid_cache_new(&c, &jc), 0);
	REQUIRE_RC(jobid_cache_set_proc_root(jc, fake_root), 0);
	for (int i = 0; i < 4; i++) {
		h[i] = (struct hammer){ jc, 0 };
		REQUIRE(pthread_create(&th[i], NULL, hammer_run, &h[i]) == 0);
	}
	for (int i = 0; i < 50; i++) {
		jobid_cache_set_conf(jc, i % 2 ? &c : &plain);
		sleep_ms(1);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		CHECK_EQ(h[i].bad, 0);
	}
	jobid_cache_free(jc);
}

int main(void)
{
	snprintf(fake_root, sizeof(fake_root), "/tmp/loom-jobid-XXXXXX");
	REQUIRE(mkdtemp(fake_root));

	RUN(test_codes);
	RUN(test_defaults);
	RUN(test_env);
	RUN(test_disable);
	RUN(test_cut_and_replace);
	RUN(test_conf_set);
	RUN(test_self);
	RUN(test_cache_real);
	RUN(test_cache_fake);
	RUN(test_cache_evict);
	RUN(test_cache_threads);

	nftw(fake_root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return check_report();
}
