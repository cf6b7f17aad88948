/* Multi-mount protection (common/mmp.c): two servers of one target in one process, as two
 * hosts on a shared disk would be (no lock between them, only the heartbeat). */
#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/mmp.h"
#include "common/util.h"

int check_failures;
const char *check_current = "";

#define IV 150u /* ms: a beat every IV, a start waits 2 IV + 100 */

static atomic_int lost;
static atomic_int lost_before_write; /* on_lost calls from mmp_check */
static char lost_why[256];

static void on_lost(void *arg, const char *why)
{
	(void)arg;
	if (strstr(why, "seen before a write"))
		atomic_fetch_add(&lost_before_write, 1);
	else
		snprintf(lost_why, sizeof(lost_why), "%s", why);
	atomic_store(&lost, 1);
}

/* SIGSTOP, then waits until every thread of pid has stopped: kill() only queues the signal, and
 * a beat a thread was writing lands after it (a start that looked meanwhile saw it move). */
static void stop_all_threads(pid_t pid)
{
	char path[64];

	kill(pid, SIGSTOP);
	for (int tries = 0; tries < 1000; tries++) {
		char line[512];
		bool running = false;
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
		DIR *d = opendir(path);
		if (!d)
			return;
		for (struct dirent *e; (e = readdir(d));) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
			f = fopen(path, "r");
			if (!f)
				continue;
			/* pid (comm) STATE ...: the state follows the last ')'. */
			if (fgets(line, sizeof(line), f)) {
				const char *p = strrchr(line, ')');
				running |= !p || (p[1] == ' ' && p[2] != 'T' && p[2] != 't');
			}
			fclose(f);
		}
		closedir(d);
		if (!running)
			return;
		sleep_ms(2);
	}
}

static void make_dir(char *dir)
{
	strcpy(dir, "/tmp/loom-test-mmp-XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
}

static void rm_dir(const char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", dir, MMP_FILE);
	unlink(path);
	rmdir(dir);
}

/* A live holder refuses a second server; a clean stop lets the next one in. */
static void test_live_holder_refuses(void)
{
	char dir[64];
	struct mmp *a = NULL, *b = NULL;
	struct mmp_holder h;

	make_dir(dir);
	CHECK_RC(mmp_read_holder(dir, &h), -ENOENT);
	REQUIRE_RC(mmp_acquire(dir, "server A", IV, on_lost, NULL, NULL, &a), 0);
	REQUIRE_RC(mmp_read_holder(dir, &h), 0);
	CHECK(strcmp(h.server, "server A") == 0 && !h.clean && h.interval_ms == IV);
	memset(&h, 0, sizeof(h));
	CHECK_RC(mmp_acquire(dir, "server B", IV, on_lost, NULL, &h, &b), -EBUSY);
	CHECK(b == NULL && strcmp(h.server, "server A") == 0);
	CHECK(!atomic_load(&lost));
	mmp_release(a);
	REQUIRE_RC(mmp_read_holder(dir, &h), 0);
	CHECK(h.clean);
	REQUIRE_RC(mmp_acquire(dir, "server B", IV, on_lost, NULL, NULL, &b), 0);
	mmp_release(b);
	rm_dir(dir);
}

/* A holder that stopped beating (a crash, a hang) is taken over after its silence; when it
 * wakes, its heartbeat thread finds the other's and says it lost the target. */
static void test_silent_holder_is_taken_over_and_learns_it(void)
{
	char dir[64];
	struct mmp *a = NULL, *b = NULL;
	pid_t child;
	int status, ready[2];
	char byte;

	make_dir(dir);
	/* A crashed holder: a child that takes the target and is killed. */
	REQUIRE(pipe(ready) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		struct mmp *c;

		if (mmp_acquire(dir, "server C", IV, on_lost, NULL, NULL, &c) != 0 || write(ready[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	REQUIRE(read(ready[0], &byte, 1) == 1);
	REQUIRE(waitpid(child, &status, WNOHANG) == 0);
	CHECK_RC(mmp_acquire(dir, "server B", IV, on_lost, NULL, NULL, &b), -EBUSY);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);
	REQUIRE_RC(mmp_acquire(dir, "server B", IV, on_lost, NULL, NULL, &b), 0);
	/* A frozen holder (SIGSTOP): D takes over; A, thawed, learns it has lost. */
	mmp_release(b);
	REQUIRE(pipe(ready) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		/* The child is A: it takes the target, says so, and holds it until told it lost. */
		struct mmp *c = NULL;

		if (mmp_acquire(dir, "server A", IV, on_lost, NULL, NULL, &c) != 0)
			_exit(1);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		while (!atomic_load(&lost))
			sleep_ms(10);
		/* D's heartbeat seen, or its own beat stalled between its read and its write (stopped
		 * there: that late beat may have landed over D's, and it must not go on). */
		_exit(strstr(lost_why, "(server D) took") || strstr(lost_why, "from its read to its write") ? 42 : 1);
	}
	REQUIRE(read(ready[0], &byte, 1) == 1);
	sleep_ms(2 * IV);                    /* a beat or two of A's */
	stop_all_threads(child);
	REQUIRE_RC(mmp_acquire(dir, "server D", IV, on_lost, NULL, NULL, &a), 0);
	kill(child, SIGCONT);
	/* A learns it lost; D keeps the target, even when A was stopped between looking at the disk
	 * and writing its beat, whose late write lands over D's heartbeat (D writes its own again:
	 * A counts such a beat lost). Waited for with a limit: a test that hangs says nothing. */
	for (int i = 0; i < 1000 && waitpid(child, &status, WNOHANG) == 0; i++)
		sleep_ms(10);
	if (waitpid(child, &status, WNOHANG) == 0) {
		kill(child, SIGKILL);
		waitpid(child, &status, 0);
		CHECK_FAIL_("A did not learn it lost the target 10 s after it woke");
	}
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);
	sleep_ms(2 * IV);
	CHECK(!atomic_load(&lost));
	CHECK_RC(mmp_check(a), 0);
	mmp_release(a);
	rm_dir(dir);
}

/* A holder frozen while another server took the target looks at the disk before its next write,
 * whichever of its threads wakes first; a holder that beats writes without reading. */
static void test_a_frozen_holder_looks_before_it_writes(void)
{
	char dir[64], byte;
	struct mmp *a = NULL;
	int ready[2], go[2], status, rc;
	pid_t child;

	make_dir(dir);
	REQUIRE_RC(mmp_acquire(dir, "server D", IV, on_lost, NULL, NULL, &a), 0);
	CHECK_RC(mmp_check(a), 0);
	sleep_ms(3 * IV);                    /* beats go on: still ours */
	CHECK_RC(mmp_check(a), 0);
	CHECK_RC(mmp_check(NULL), 0);
	mmp_release(a);
	REQUIRE(pipe(ready) == 0 && pipe(go) == 0);
	child = fork();
	REQUIRE(child >= 0);
	if (child == 0) {
		struct mmp *c = NULL;

		if (mmp_acquire(dir, "server A", IV, on_lost, NULL, NULL, &c) != 0 || write(ready[1], "x", 1) != 1)
			_exit(1);
		if (read(go[0], &byte, 1) != 1) /* frozen here; then a write comes */
			_exit(1);
		/* 42: it looked and lost: its check before a write (mostly), or its beat thread, whether
		 * it saw B's heartbeat or was stopped between reading the heartbeat and writing its beat
		 * (a late write that may have landed over B's). 43: it would go on writing. */
		rc = mmp_check(c);
		for (int i = 0; i < 100 && !atomic_load(&lost); i++)
			sleep_ms(10); /* the beat thread may be the one that tells */
		_exit(rc == -EIO && atomic_load(&lost) ? 42 : rc == 0 ? 43 : 1);
	}
	REQUIRE(read(ready[0], &byte, 1) == 1);
	sleep_ms(2 * IV);
	stop_all_threads(child);
	rc = mmp_acquire(dir, "server B", IV, on_lost, NULL, NULL, &a);
	if (rc) {
		kill(child, SIGKILL); /* not left stopped: the test would hang on its output */
		waitpid(child, &status, 0);
	}
	REQUIRE_RC(rc, 0);
	REQUIRE(write(go[1], "x", 1) == 1);
	kill(child, SIGCONT);
	REQUIRE(waitpid(child, &status, 0) == child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42);
	/* B keeps the target (a late beat of A's that landed over B's heartbeat is written over). */
	sleep_ms(2 * IV);
	CHECK(!atomic_load(&lost));
	CHECK_RC(mmp_check(a), 0);
	mmp_release(a);
	rm_dir(dir);
}

static void test_bad_arguments(void)
{
	char dir[64];
	struct mmp *m = NULL;

	make_dir(dir);
	CHECK_RC(mmp_acquire(dir, "x", MMP_INTERVAL_MIN - 1, on_lost, NULL, NULL, &m), -EINVAL);
	CHECK_RC(mmp_acquire(dir, "x", IV, NULL, NULL, NULL, &m), -EINVAL);
	CHECK_RC(mmp_acquire("/nonexistent/dir", "x", IV, on_lost, NULL, NULL, &m), -ENOENT);
	/* A file that is not a heartbeat is taken over (it says nobody holds the target). */
	{
		char path[128];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, MMP_FILE);
		f = fopen(path, "w");
		REQUIRE(f);
		fputs("not a heartbeat", f);
		fclose(f);
		CHECK_RC(mmp_read_holder(dir, &(struct mmp_holder){ 0 }), -EINVAL);
		REQUIRE_RC(mmp_acquire(dir, "x", IV, on_lost, NULL, NULL, &m), 0);
		mmp_release(m);
	}
	rm_dir(dir);
}

int main(void)
{
	RUN(test_live_holder_refuses);
	RUN(test_silent_holder_is_taken_over_and_learns_it);
	RUN(test_a_frozen_holder_looks_before_it_writes);
	RUN(test_bad_arguments);
	return check_report();
}
