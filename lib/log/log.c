/* gpukmm — leveled logging (see include/gpukmm/log.h).
 *
 * The logger's configuration is the one piece of process-wide state in lib/: a
 * process has one stderr and one service name. It is set once at start. */
#include "gpukmm/log.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static struct {
	char service[64];
	enum gk_log_format fmt;
	enum gk_log_level min;
	FILE *out;
	pthread_mutex_t mu;
} logger = { "gpukmm", GK_LOG_TEXT, GK_LOG_INFO, NULL, PTHREAD_MUTEX_INITIALIZER };

static const char *const level_text[] = { "DEBUG", "INFO ", "WARN ", "ERROR" };
static const char *const level_json[] = { "debug", "info", "warn", "error" };

void gk_log_init(const char *service, enum gk_log_format fmt, enum gk_log_level min)
{
	if (service)
		snprintf(logger.service, sizeof(logger.service), "%s", service);
	logger.fmt = fmt;
	logger.min = min;
}

int gk_log_parse_format(const char *s)
{
	if (!s)
		return -1;
	if (strcasecmp(s, "text") == 0)
		return GK_LOG_TEXT;
	if (strcasecmp(s, "json") == 0)
		return GK_LOG_JSON;
	return -1;
}

int gk_log_parse_level(const char *s)
{
	if (!s)
		return -1;
	for (int i = 0; i < 4; i++)
		if (strcasecmp(s, level_json[i]) == 0)
			return i;
	if (strcasecmp(s, "warning") == 0)
		return GK_LOG_WARN;
	return -1;
}

void gk_log_init_env(const char *service)
{
	int f = gk_log_parse_format(getenv("GPUKMM_LOG_FORMAT"));
	int l = gk_log_parse_level(getenv("GPUKMM_LOG_LEVEL"));
	gk_log_init(service, f < 0 ? GK_LOG_TEXT : (enum gk_log_format)f,
		    l < 0 ? GK_LOG_INFO : (enum gk_log_level)l);
}

void gk_log_set_stream(FILE *f)
{
	logger.out = f;
}

int gk_log_enabled(enum gk_log_level lvl)
{
	return lvl >= logger.min;
}

size_t gk_json_escape(char *out, size_t cap, const char *in, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;
	if (cap == 0)
		return 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		char buf[7];
		size_t n = 0;
		switch (c) {
		case '"': buf[n++] = '\\'; buf[n++] = '"'; break;
		case '\\': buf[n++] = '\\'; buf[n++] = '\\'; break;
		case '\n': buf[n++] = '\\'; buf[n++] = 'n'; break;
		case '\r': buf[n++] = '\\'; buf[n++] = 'r'; break;
		case '\t': buf[n++] = '\\'; buf[n++] = 't'; break;
		default:
			if (c < 0x20 || c == 0x7f) {
				buf[n++] = '\\'; buf[n++] = 'u'; buf[n++] = '0'; buf[n++] = '0';
				buf[n++] = hex[c >> 4]; buf[n++] = hex[c & 15];
			} else {
				buf[n++] = (char)c;
			}
		}
		if (o + n >= cap)
			break;
		memcpy(out + o, buf, n);
		o += n;
	}
	out[o] = '\0';
	return o;
}

static void timestamp(char *buf, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000L);
}

void gk_vlog(enum gk_log_level lvl, const char *fmt, va_list ap)
{
	if (lvl < logger.min || lvl > GK_LOG_ERROR)
		return;
	char msg[4096], ts[40];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	timestamp(ts, sizeof(ts));
	FILE *out = logger.out ? logger.out : stderr;
	pthread_mutex_lock(&logger.mu);
	if (logger.fmt == GK_LOG_JSON) {
		char esc[8192], svc[160];
		gk_json_escape(esc, sizeof(esc), msg, strlen(msg));
		gk_json_escape(svc, sizeof(svc), logger.service, strlen(logger.service));
		fprintf(out, "{\"ts\":\"%s\",\"level\":\"%s\",\"service\":\"%s\",\"msg\":\"%s\"}\n",
			ts, level_json[lvl], svc, esc);
	} else {
		/* one record = one line: fold embedded newlines */
		for (char *p = msg; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		fprintf(out, "%s %s %s: %s\n", ts, level_text[lvl], logger.service, msg);
	}
	fflush(out);
	pthread_mutex_unlock(&logger.mu);
}

void gk_log(enum gk_log_level lvl, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	gk_vlog(lvl, fmt, ap);
	va_end(ap);
}
