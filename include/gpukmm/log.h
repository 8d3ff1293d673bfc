/* gpukmm — leveled logging to stderr.
 *
 * Every line carries the time (RFC 3339, UTC, ms), the level and the service name.
 * Text:  2026-12-02T12:00:00.123Z INFO  watcher: message
 * JSON:  {"ts":"…","level":"info","service":"watcher","msg":"…"}
 * Never pass secrets (tokens, keys) to these functions. */
#ifndef GPUKMM_LOG_H
#define GPUKMM_LOG_H

#include <stdarg.h>
#include <stdio.h>

enum gk_log_level { GK_LOG_DEBUG = 0, GK_LOG_INFO, GK_LOG_WARN, GK_LOG_ERROR };
enum gk_log_format { GK_LOG_TEXT = 0, GK_LOG_JSON };

/* Configure once at start (defaults: service "gpukmm", text, info, stderr). */
void gk_log_init(const char *service, enum gk_log_format fmt, enum gk_log_level min);
/* Parse "text"/"json" and "debug"/"info"/"warn"/"error"; -1 if invalid. */
int gk_log_parse_format(const char *s);
int gk_log_parse_level(const char *s);
/* Also honours $GPUKMM_LOG_FORMAT / $GPUKMM_LOG_LEVEL if set (flags win when given). */
void gk_log_init_env(const char *service);
void gk_log_set_stream(FILE *f); /* tests */
int gk_log_enabled(enum gk_log_level lvl);

void gk_log(enum gk_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gk_vlog(enum gk_log_level lvl, const char *fmt, va_list ap);

#define GK_DEBUG(...) do { if (gk_log_enabled(GK_LOG_DEBUG)) gk_log(GK_LOG_DEBUG, __VA_ARGS__); } while (0)
#define GK_INFO(...)  gk_log(GK_LOG_INFO, __VA_ARGS__)
#define GK_WARN(...)  gk_log(GK_LOG_WARN, __VA_ARGS__)
#define GK_ERROR(...) gk_log(GK_LOG_ERROR, __VA_ARGS__)

/* JSON string escaping used by the JSON format (exposed for the supervisor's log
 * forwarding). Writes at most cap-1 bytes + NUL into out; returns bytes written. */
size_t gk_json_escape(char *out, size_t cap, const char *in, size_t len);

#endif
