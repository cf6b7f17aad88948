#include "common/log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Until log_init: the program's own name, so that what libloom logs inside an application (or
 * inside loom-mount, which holds its own copy of this file) says whose process it came from. */
static const char *log_name;
static enum log_level log_level_cur = LOG_INFO;

void log_init(const char *name, enum log_level level)
{
	log_name = name;
	log_level_cur = level;
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
	size_t n;
	va_list ap;

	if (level > log_level_cur)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s[%d] %s: ", ts.tv_nsec / 1000000,
			      log_name ? log_name : program_invocation_short_name, (int)getpid(), tags[level]);
	va_start(ap, fmt);
	if (n < sizeof(line))
		n += (size_t)vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line so that lines from several threads never interleave. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
