/*
 * src/client/jobtag.c: the job id every libloom call is made with (fs_call_init), on a loom_fs
 * connected to nothing. A thread a front end named a job for (loom_job_set) sends that one, ""
 * included, and no other thread sees it; a scope (work done later for a recorded job) sends its
 * job and gives back what was there, nested too; any other thread sends the process's job id,
 * made from the connection's settings with $LOOM_JOBID_VAR / $LOOM_JOBID_NAME over them, and
 * made again in a child after fork (%p). The field goes out NUL-padded: no byte of a longer
 * job id before it trails on the wire.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "client/internal.h"
#include "loom/loom_ll.h"

int check_failures;
const char *check_current = "";

/* The job id field of a call fs would make now, from this thread. */
static void call_job(loom_fs *fs, char out[LOOM_JOBID_LEN])
{
	struct rpc_call call;

	fs_call_init(fs, &call, LW_OP_MDS_GETATTR, NULL, 0);
	memcpy(out, call.job, LOOM_JOBID_LEN);
}

#define CHECK_JOB(fs, want)                                                                \
	do {                                                                                \
		char job_[LOOM_JOBID_LEN];                                                  \
		call_job(fs, job_);                                                         \
		if (strncmp(job_, (want), LOOM_JOBID_LEN))                                  \
			CHECK_FAIL_("call's job '%.32s', want '%s'", job_, (want));         \
	} while (0)

static void unset_env(void)
{
	unsetenv("LOOM_JOBID_VAR");
	unsetenv("LOOM_JOBID_NAME");
	unsetenv("TEST_JOB");
}

/* What %e.%u gives this process. */
static void default_job(char *out, size_t cap)
{
	char comm[64] = "";
	FILE *f = fopen("/proc/self/comm", "re");

	REQUIRE(f && fgets(comm, sizeof(comm), f));
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	snprintf(out, cap, "%s.%u", comm, (unsigned)getuid());
}

static loom_fs *fs_made(void)
{
	loom_fs *fs = fs_new();

	REQUIRE(fs);
	return fs;
}

static void test_process_default(void)
{
	char want[64];
	loom_fs *fs;

	unset_env();
	fs = fs_made();
	default_job(want, sizeof(want));
	CHECK_JOB(fs, want);
	loom_disconnect(fs);
}

static void test_settings_and_environment(void)
{
	loom_fs *fs;
	char buf[LOOM_JOBID_LEN];

	unset_env();
	fs = fs_made();
	setenv("TEST_JOB", "4242", 1);
	CHECK_RC(loom_jobid_conf(fs, "TEST_JOB", NULL), 0);
	CHECK_JOB(fs, "4242");
	CHECK_RC(loom_jobid_conf(fs, NULL, "%j-run"), 0); /* %j: the pattern is used, with the value */
	CHECK_JOB(fs, "4242-run");
	/* Refused values change nothing. */
	CHECK_RC(loom_jobid_conf(fs, "bad-name", NULL), -EINVAL);
	CHECK_RC(loom_jobid_conf(fs, NULL, ""), -EINVAL);
	CHECK_RC(loom_jobid_conf(fs, "procname_uid", "bad\tname"), -EINVAL);
	CHECK_JOB(fs, "4242-run");
	/* The environment wins over the settings; a value it refuses is ignored. */
	setenv("LOOM_JOBID_VAR", "disable", 1);
	CHECK_RC(loom_jobid_conf(fs, NULL, NULL), 0); /* made again at the next use */
	CHECK_JOB(fs, "");
	setenv("LOOM_JOBID_VAR", "procname_uid", 1);
	setenv("LOOM_JOBID_NAME", "env-%u", 1);
	CHECK_RC(loom_jobid_conf(fs, NULL, NULL), 0);
	snprintf(buf, sizeof(buf), "env-%u", (unsigned)getuid());
	CHECK_JOB(fs, buf);
	setenv("LOOM_JOBID_VAR", "not a name", 1);
	unsetenv("LOOM_JOBID_NAME");
	CHECK_RC(loom_jobid_conf(fs, NULL, NULL), 0);
	CHECK_JOB(fs, "4242-run");
	/* loom_jobid says the same, cut to the caller's buffer. */
	loom_jobid(fs, buf, sizeof(buf));
	CHECK(strcmp(buf, "4242-run") == 0);
	loom_jobid(fs, buf, 5);
	CHECK(strcmp(buf, "4242") == 0);
	/* Not a Loom mount: the settings stay. */
	CHECK_RC(loom_jobid_from_mount(fs, "/"), -ENOTTY);
	CHECK_RC(loom_jobid_from_mount(fs, "/nonexistent/loom"), -ENOENT);
	CHECK_JOB(fs, "4242-run");
	unset_env();
	loom_disconnect(fs);
}

/* A forked child (a DataLoader worker) sends its own pid, not its parent's. */
static void test_fork(void)
{
	char want[LOOM_JOBID_LEN], got[LOOM_JOBID_LEN] = "";
	int fds[2], status = 0;
	loom_fs *fs;
	pid_t child;

	unset_env();
	fs = fs_made();
	CHECK_RC(loom_jobid_conf(fs, "procname_uid", "w%p"), 0);
	snprintf(want, sizeof(want), "w%d", (int)getpid());
	CHECK_JOB(fs, want); /* made, and kept: the child must not take it as its own */
	REQUIRE(pipe(fds) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		char job[LOOM_JOBID_LEN];

		close(fds[0]);
		call_job(fs, job);
		_exit(write(fds[1], job, sizeof(job)) == (ssize_t)sizeof(job) ? 0 : 1);
	}
	close(fds[1]);
	CHECK_EQ(read(fds[0], got, sizeof(got)), sizeof(got));
	close(fds[0]);
	REQUIRE(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	snprintf(want, sizeof(want), "w%d", (int)child);
	CHECK(strncmp(got, want, sizeof(got)) == 0);
	snprintf(want, sizeof(want), "w%d", (int)getpid());
	CHECK_JOB(fs, want); /* the parent's is still its own */
	loom_disconnect(fs);
}

/* A front end's thread: the job it names, "" too, until it names none (NULL). */
static void test_front_end(void)
{
	char want[64];
	loom_fs *fs;

	unset_env();
	fs = fs_made();
	default_job(want, sizeof(want));
	loom_job_set("caller.1000");
	CHECK_JOB(fs, "caller.1000");
	loom_job_set("");
	CHECK_JOB(fs, "");
	loom_job_set(NULL);
	CHECK_JOB(fs, want);
	/* A longer job id before leaves nothing past the NUL of the next. */
	loom_job_set("abcdefghijklmnopqrstuvwxyz01234");
	CHECK_JOB(fs, "abcdefghijklmnopqrstuvwxyz01234");
	loom_job_set("ab");
	{
		char job[LOOM_JOBID_LEN];

		call_job(fs, job);
		for (size_t i = 2; i < sizeof(job); i++)
			CHECK_EQ(job[i], 0);
	}
	/* Cut to 31 bytes. */
	loom_job_set("0123456789012345678901234567890123456789");
	CHECK_JOB(fs, "0123456789012345678901234567890");
	loom_job_set(NULL);
	loom_disconnect(fs);
}

/* Work done later for a recorded job, inside a scope: its job, then what was there before. */
static void test_scopes(void)
{
	struct jobtag_scope outer, inner;
	char want[64], rec[LOOM_JOBID_LEN];
	loom_fs *fs;

	unset_env();
	fs = fs_made();
	default_job(want, sizeof(want));
	/* The writer's job is recorded where its write is accepted ... */
	loom_job_set("writer");
	jobtag_current(fs, rec);
	CHECK(strcmp(rec, "writer") == 0);
	/* ... and another caller's thread (or one of no caller) sends it later in its name. */
	loom_job_set("closer");
	jobtag_enter(&outer, rec);
	CHECK_JOB(fs, "writer");
	jobtag_enter(&inner, "other");
	CHECK_JOB(fs, "other");
	jobtag_leave(&inner);
	CHECK_JOB(fs, "writer");
	jobtag_leave(&outer);
	CHECK_JOB(fs, "closer");
	/* A thread without a job of its own gets the process's back after a scope. */
	loom_job_set(NULL);
	jobtag_enter(&outer, "writer");
	CHECK_JOB(fs, "writer");
	jobtag_leave(&outer);
	CHECK_JOB(fs, want);
	/* A scope for "no job" sends none, not the process's. */
	jobtag_enter(&outer, "");
	CHECK_JOB(fs, "");
	jobtag_leave(&outer);
	CHECK_JOB(fs, want);
	loom_disconnect(fs);
}

struct other_thread {
	loom_fs *fs;
	char seen[LOOM_JOBID_LEN];
	char seen_after[LOOM_JOBID_LEN];
	pthread_barrier_t *b;
};

static void *other_main(void *arg)
{
	struct other_thread *t = arg;

	call_job(t->fs, t->seen);    /* the main thread named a job: not this thread's */
	loom_job_set("thread-job");
	pthread_barrier_wait(t->b);  /* main checks its own now */
	pthread_barrier_wait(t->b);
	call_job(t->fs, t->seen_after);
	loom_job_set(NULL);
	return NULL;
}

/* Threads do not see each other's jobs (loom-mount's serving threads run side by side). */
static void test_threads_apart(void)
{
	struct other_thread t = { 0 };
	pthread_barrier_t b;
	pthread_t th;
	char want[64];

	unset_env();
	t.fs = fs_made();
	t.b = &b;
	default_job(want, sizeof(want));
	pthread_barrier_init(&b, NULL, 2);
	loom_job_set("main-job");
	REQUIRE(pthread_create(&th, NULL, other_main, &t) == 0);
	pthread_barrier_wait(&b);
	CHECK_JOB(t.fs, "main-job");
	pthread_barrier_wait(&b);
	pthread_join(th, NULL);
	CHECK(strcmp(t.seen, want) == 0);
	CHECK(strcmp(t.seen_after, "thread-job") == 0);
	CHECK_JOB(t.fs, "main-job");
	loom_job_set(NULL);
	pthread_barrier_destroy(&b);
	loom_disconnect(t.fs);
}

int main(void)
{
	RUN(test_process_default);
	RUN(test_settings_and_environment);
	RUN(test_fork);
	RUN(test_front_end);
	RUN(test_scopes);
	RUN(test_threads_apart);
	return check_report();
}
