/* gpukmm-webhook: the body look-ahead (see scan.h). */
#include "scan.h"

#include <string.h>

enum { ST_WS, ST_STR, ST_ESC, ST_SCALAR };

void gk_wh_scan_init(gk_wh_scan *s, size_t max_values, int max_depth)
{
	memset(s, 0, sizeof(*s));
	s->max_values = max_values;
	s->max_depth = max_depth > 0 && max_depth <= 64 ? max_depth : 64;
}

static bool in_object(const gk_wh_scan *s)
{
	return s->depth > 0 && (s->obj >> (s->depth - 1) & 1);
}

/* a value begins: counted; which member it is the value of is then forgotten */
static void value(gk_wh_scan *s)
{
	if (++s->values > s->max_values && !s->over)
		s->over = GK_WH_SCAN_TOO_MANY;
	s->key_request = s->key_uid = false;
}

static void open_(gk_wh_scan *s, bool object)
{
	bool request = s->depth == 1 && s->key_request;
	value(s);
	if (s->depth >= s->max_depth) {
		if (!s->over)
			s->over = GK_WH_SCAN_TOO_DEEP;
		return;
	}
	if (object)
		s->obj |= 1ull << s->depth;
	else
		s->obj &= ~(1ull << s->depth);
	s->depth++;
	s->in_request |= request && object;
	s->want_key = object;
}

static void close_(gk_wh_scan *s)
{
	if (s->depth == 0)
		return; /* malformed: cJSON says so later */
	if (s->depth == 2)
		s->in_request = false;
	s->depth--;
	s->want_key = false;
}

static void end_key(gk_wh_scan *s)
{
	bool whole = s->key_len < sizeof(s->key);
	const char *k = s->key;
	size_t n = whole ? s->key_len : 0;
	if (s->depth == 1)
		s->key_request = n == 7 && memcmp(k, "request", 7) == 0;
	else if (s->depth == 2 && s->in_request)
		s->key_uid = n == 3 && memcmp(k, "uid", 3) == 0;
	s->want_key = false;
}

bool gk_wh_scan_feed(gk_wh_scan *s, const char *buf, size_t len)
{
	for (size_t i = 0; i < len && !s->over; i++) {
		char c = buf[i];
		switch (s->st) {
		case ST_ESC:
			s->st = ST_STR;
			continue;
		case ST_STR:
			if (c == '\\') {
				s->st = ST_ESC;
				if (s->uid_value) { /* never in a real uid: not echoed back */
					s->uid_value = false;
					s->uid[0] = 0;
				}
			} else if (c == '"') {
				s->st = ST_WS;
				if (s->key_len != (size_t)-1) {
					end_key(s);
					s->key_len = (size_t)-1;
				} else if (s->uid_value) {
					s->uid[s->uid_len] = 0;
					s->uid_value = false;
				}
			} else if (s->key_len != (size_t)-1) {
				if (s->key_len < sizeof(s->key))
					s->key[s->key_len] = c;
				if (s->key_len < sizeof(s->key))
					s->key_len++;
			} else if (s->uid_value) {
				if (s->uid_len + 1 < sizeof(s->uid)) {
					s->uid[s->uid_len++] = c;
				} else {
					s->uid_value = false;
					s->uid[0] = 0;
				}
			}
			continue;
		case ST_SCALAR:
			if (!strchr(",]}: \t\r\n", c))
				continue;
			s->st = ST_WS;
			break; /* the delimiter is read below */
		default:
			break;
		}
		switch (c) {
		case ' ': case '\t': case '\r': case '\n':
			break;
		case '{':
			open_(s, true);
			break;
		case '[':
			open_(s, false);
			break;
		case '}': case ']':
			close_(s);
			break;
		case ',':
			s->want_key = in_object(s);
			break;
		case ':':
			s->want_key = false;
			break;
		case '"':
			s->st = ST_STR;
			if (in_object(s) && s->want_key) {
				s->key_len = 0;
			} else {
				bool uid = s->depth == 2 && s->in_request && s->key_uid;
				s->key_len = (size_t)-1;
				value(s);
				if (uid) {
					s->uid_value = true;
					s->uid_len = 0;
					s->uid[0] = 0;
				}
			}
			break;
		default:
			value(s);
			s->st = ST_SCALAR;
			break;
		}
	}
	return !s->over;
}
