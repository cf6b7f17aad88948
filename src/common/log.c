#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log_sink.h"

/* Until log_init: the program's own name, so that what libloom logs inside an application (or
 * inside loom-mount, which holds its own copy of this file) says whose process it came from. */
static const char *log_name;
static enum log_level log_level_cur = LOG_INFO;
static bool log_journal; /* stderr is systemd's journal: "<N>" prefixes, no time stamps */

void log_init(const char *name, enum log_level level)
{
	log_name = name;
	log_level_cur = level;
	log_journal = log_sink_stderr_is_journal();
}

void log_to_syslog(void)
{
	log_sink_syslog_open(log_name ? log_name : program_invocation_short_name);
}

void log_set_level(enum log_level level) { log_level_cur = level; }

int log_level_parse(const char *name, enum log_level *out)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };

	for (int i = 0; i < 4; i++) {
		if (!strcmp(name, names[i])) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}
enum log_level log_get_level(void) { return log_level_cur; }

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const tags[] = { "ERROR", "WARN", "INFO", "DEBUG" };
	char line[1024];
	struct timespec ts;
	struct tm tm;
	size_t n, msg_at;
	va_list ap;

	if (level > log_level_cur)
		return;
	if (log_journal) {
		/* journald stamps the time and the unit itself and reads the priority from <N>. */
		n = (size_t)snprintf(line, sizeof(line), "<%d>%s: ", log_sink_journal_prefix(level), tags[level]);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s[%d] %s: ", ts.tv_nsec / 1000000,
				      log_name ? log_name : program_invocation_short_name, (int)getpid(),
				      tags[level]);
	}
	msg_at = n;
	va_start(ap, fmt);
	if (n < sizeof(line))
		n += (size_t)vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n] = '\0';
	log_sink_syslog(level, line + msg_at);
	line[n++] = '\n';
	/* One write per line so that lines from several threads never interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

#define LOG_LIMIT_NS 1000000000ull

void log_limit_init(struct log_limit *l, enum log_level level, const char *what)
{
	l->level = level;
	snprintf(l->what, sizeof(l->what), "%s", what);
	l->next_ns = 0;
	l->held = 0;
}

void log_limited(struct log_limit *l, uint64_t now_ns, const char *fmt, ...)
{
	char line[900];
	va_list ap;

	if (l->level > log_level_cur)
		return;
	if (now_ns < l->next_ns) {
		l->held++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (l->held)
		log_msg(l->level, "%s (and %llu more like it in the last second)", line,
			(unsigned long long)l->held);
	else
		log_msg(l->level, "%s", line);
	l->held = 0;
	l->next_ns = now_ns + LOG_LIMIT_NS;
}

uint64_t log_limit_flush(struct log_limit *l, uint64_t now_ns)
{
	if (!l->held)
		return 0;
	if (now_ns < l->next_ns)
		return l->next_ns;
	log_msg(l->level, "%s: %llu more like it in the last second", l->what, (unsigned long long)l->held);
	l->held = 0;
	/* The summary is this second's line: a line of the kind that comes now is held. (UINT64_MAX
	 * as now, for a last flush, must not wrap.) */
	l->next_ns = now_ns > UINT64_MAX - LOG_LIMIT_NS ? UINT64_MAX : now_ns + LOG_LIMIT_NS;
	return 0;
}
