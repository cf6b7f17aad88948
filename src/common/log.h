/* Logging for daemons and tools: one line per event, to stderr (which the daemon's log file is). */
#ifndef LOOM_COMMON_LOG_H
#define LOOM_COMMON_LOG_H

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set once at start-up, before threads exist. `name` must outlive the program (a literal). */
void log_init(const char *name, enum log_level level);
void log_set_level(enum log_level level);
/* "error", "warn", "info" or "debug": 0, or -EINVAL for anything else. */
int log_level_parse(const char *name, enum log_level *out);
enum log_level log_get_level(void);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_get_level() >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
