/* Logging for daemons and tools: one line per event, to stderr (which the daemon's log file is). */
#ifndef LOOM_COMMON_LOG_H
#define LOOM_COMMON_LOG_H

#include <stdint.h>

enum log_level { LOG_ERR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

/* Set once at start-up, before threads exist. `name` must outlive the program (a literal). */
void log_init(const char *name, enum log_level level);
void log_set_level(enum log_level level);
/* Every line from now on also goes to syslog (facility daemon), as `--log-syslog` asks. */
void log_to_syslog(void);
/* "error", "warn", "info" or "debug": 0, or -EINVAL for anything else. */
int log_level_parse(const char *name, enum log_level *out);
enum log_level log_get_level(void);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_get_level() >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

/*
 * At most one line a second of one kind, for what a stranger can make happen thousands of times a
 * second (a server refusing connections). The first line of a kind is written; the next ones
 * within the second are only counted, and the count is told once the second is over: folded into
 * the next line written ("... (and 41 more like it in the last second)"), or, when no other comes,
 * by log_limit_flush() as "WHAT: 41 more like it in the last second".
 *
 * Not thread-safe: each limiter belongs to one thread (a server's event loop). Times are
 * clock_mono_ns().
 */
struct log_limit {
	enum log_level level;
	char what[96];          /* names the kind in a summary line, e.g. "mds: handshake timeouts" */
	uint64_t next_ns;       /* no line of this kind before then */
	uint64_t held;          /* lines counted, not written, since the last one written */
};

void log_limit_init(struct log_limit *l, enum log_level level, const char *what);
void log_limited(struct log_limit *l, uint64_t now_ns, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Writes the count of held lines once their second is over. Returns when it must be called
 * again (a clock_mono_ns() time), or 0 when no line is held. UINT64_MAX as now_ns writes it
 * whatever the time (at exit). */
uint64_t log_limit_flush(struct log_limit *l, uint64_t now_ns);

#endif
