/* Which job libloom's requests are for (jobtag.h), and the public calls that set how this
 * process's job id is made (loom.h, "job ids"). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "client/internal.h"
#include "common/log.h"
#include "common/mount_ioctl.h"
#include "loom/loom_ll.h"

/* Whether the calling thread's job (the rpc layer's rpc_job_get) is its own, named by a front
 * end or a scope (1 and 2 in jobtag.h); if not, its calls are the process's. */
static _Thread_local bool thread_job_own;

/* Bumped in the child of every fork: a job id made before it is the parent's (%p, and a
 * DataLoader worker is a fork). 0 marks one not made yet, so it starts at 1. */
static atomic_uint fork_gen = 1;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
	atomic_fetch_add(&fork_gen, 1);
}

static void atfork_register(void)
{
	if (pthread_atfork(NULL, NULL, on_fork_child) != 0)
		log_warn("no fork handler: a forked child's requests carry its parent's job id");
}

/* s into a job id field: cut to LOOM_JOBID_LEN - 1 bytes, NUL-padded (the wire's form). */
static void job_copy(char dst[LOOM_JOBID_LEN], const char *s)
{
	size_t n = strnlen(s, LOOM_JOBID_LEN - 1);

	memset(dst, 0, LOOM_JOBID_LEN);
	memcpy(dst, s, n);
}

void jobtag_init(loom_fs *fs)
{
	pthread_once(&atfork_once, atfork_register);
	pthread_mutex_init(&fs->job_lock, NULL);
	jobid_conf_init(&fs->job_conf);
	fs->job_gen = 0; /* made at its first use */
}

void jobtag_destroy(loom_fs *fs)
{
	pthread_mutex_destroy(&fs->job_lock);
}

/* fs's settings with the environment's over them. A value jobid_conf_set refuses is ignored, and
 * said: a job id the administrator did not mean is worse than the default. */
static void conf_effective(const struct jobid_conf *set, struct jobid_conf *out)
{
	static const char *const env[][2] = { { "LOOM_JOBID_VAR", "jobid_var" },
					      { "LOOM_JOBID_NAME", "jobid_name" } };

	*out = *set;
	for (size_t i = 0; i < sizeof(env) / sizeof(env[0]); i++) {
		const char *v = getenv(env[i][0]);

		if (v && *v && jobid_conf_set(out, env[i][1], v) != 0)
			log_warn("$%s=%s is not a valid %s (see loom-mount(8)): ignored", env[i][0], v, env[i][1]);
	}
}

/* This process's job id (3 in jobtag.h), made again after a change of settings or a fork. */
static void process_job(loom_fs *fs, char out[LOOM_JOBID_LEN])
{
	unsigned gen = atomic_load(&fork_gen);

	pthread_mutex_lock(&fs->job_lock);
	if (fs->job_gen != gen) {
		struct jobid_conf c;
		char made[LOOM_JOBID_LEN];

		conf_effective(&fs->job_conf, &c);
		jobid_self(&c, made);
		job_copy(fs->job, made);
		fs->job_gen = gen;
	}
	memcpy(out, fs->job, LOOM_JOBID_LEN);
	pthread_mutex_unlock(&fs->job_lock);
}

void jobtag_current(loom_fs *fs, char out[LOOM_JOBID_LEN])
{
	if (thread_job_own)
		job_copy(out, rpc_job_get());
	else
		process_job(fs, out);
}

void jobtag_enter(struct jobtag_scope *saved, const char *job)
{
	saved->own = thread_job_own;
	job_copy(saved->job, rpc_job_get());
	rpc_job_set(job);
	thread_job_own = true;
}

void jobtag_leave(const struct jobtag_scope *saved)
{
	rpc_job_set(saved->job);
	thread_job_own = saved->own;
}

void fs_call_init(loom_fs *fs, struct rpc_call *call, uint16_t opcode, const void *body,
		  uint32_t body_len)
{
	rpc_call_init(call, opcode, body, body_len);
	jobtag_current(fs, call->job);
}

void loom_job_set(const char *job)
{
	rpc_job_set(job);
	thread_job_own = job != NULL;
}

int loom_jobid_conf(loom_fs *fs, const char *var, const char *name)
{
	struct jobid_conf c;
	int rc = 0;

	if (!fs)
		return -EINVAL;
	pthread_mutex_lock(&fs->job_lock);
	c = fs->job_conf;
	if (var)
		rc = jobid_conf_set(&c, "jobid_var", var);
	if (rc == 0 && name)
		rc = jobid_conf_set(&c, "jobid_name", name);
	if (rc == 0) {
		fs->job_conf = c;
		fs->job_gen = 0; /* made again at its next use */
	}
	pthread_mutex_unlock(&fs->job_lock);
	return rc;
}

int loom_jobid_from_mount(loom_fs *fs, const char *path)
{
	struct loom_ioc_jobid ioc;
	int fd, rc = 0;

	if (!fs || !path)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	memset(&ioc, 0, sizeof(ioc));
	if (ioctl(fd, LOOM_IOC_JOBID, &ioc) != 0)
		rc = errno == ENOTTY || errno == EINVAL || errno == ENOSYS ? -ENOTTY : -errno;
	close(fd);
	if (rc == 0 && (!memchr(ioc.var, '\0', sizeof(ioc.var)) || !memchr(ioc.name, '\0', sizeof(ioc.name))))
		rc = -EPROTO;
	if (rc == 0)
		rc = loom_jobid_conf(fs, ioc.var, ioc.name);
	return rc;
}

void loom_jobid(loom_fs *fs, char *buf, size_t cap)
{
	char job[LOOM_JOBID_LEN];

	if (!buf || cap == 0)
		return;
	if (fs)
		jobtag_current(fs, job);
	else
		job_copy(job, thread_job_own ? rpc_job_get() : "");
	snprintf(buf, cap, "%s", job);
}
