/* log.c's outputs besides stderr (log_syslog.c). Levels are enum log_level's values. */
#ifndef LOOM_COMMON_LOG_SINK_H
#define LOOM_COMMON_LOG_SINK_H

#include <stdbool.h>

void log_sink_syslog_open(const char *name);
/* The line without its time stamp and name (syslog adds its own); nothing unless opened. */
void log_sink_syslog(int level, const char *msg);
/* The syslog priority journald reads from a "<N>" prefix on a line of stderr. */
int log_sink_journal_prefix(int level);
/* stderr is the journal (a systemd unit's): lines then carry "<N>" and no time stamp. */
bool log_sink_stderr_is_journal(void);

#endif
