/*
 * Where log lines go besides stderr. Apart from log.c because <syslog.h>'s LOG_ERR, LOG_INFO and
 * LOG_DEBUG macros would shadow log.h's levels.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <syslog.h>

#include "common/log_sink.h"

static bool to_syslog;

void log_sink_syslog_open(const char *name)
{
	openlog(name, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	to_syslog = true;
}

void log_sink_syslog(int level, const char *msg)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

	if (to_syslog && level >= 0 && level < 4)
		syslog(prio[level], "%s", msg);
}

int log_sink_journal_prefix(int level)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };

	return level >= 0 && level < 4 ? prio[level] : LOG_INFO;
}

bool log_sink_stderr_is_journal(void)
{
	/* systemd sets JOURNAL_STREAM=DEV:INODE for a unit's stdout/stderr connected to the journal. */
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char *end;

	if (!js)
		return false;
	dev = strtoull(js, &end, 10);
	if (*end != ':')
		return false;
	ino = strtoull(end + 1, &end, 10);
	if (*end || fstat(2, &st) != 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}
