/*
 * test_log.c - lib/common/log: the fields format and the quoting of values.
 *
 * Every line is captured from stderr and read back the way a consumer
 * would: JSON lines with jansson, text lines with a logfmt reader (below)
 * that takes Go's quoting, as go-logfmt and logrus' users do. Each value
 * must come back byte for byte, whatever it holds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "tests/unit/capture.h"

/* ---- a logfmt reader with Go's unquoting -------------------------------- */

struct kv {
	char key[160];
	char val[8192];
	size_t vlen;
};

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static size_t put_utf8(char *o, uint32_t c)
{
	if (c < 0x80)
		return o[0] = (char)c, 1;
	if (c < 0x800)
		return o[0] = (char)(0xc0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3f)), 2;
	if (c < 0x10000)
		return o[0] = (char)(0xe0 | c >> 12), o[1] = (char)(0x80 | ((c >> 6) & 0x3f)),
		       o[2] = (char)(0x80 | (c & 0x3f)), 3;
	return o[0] = (char)(0xf0 | c >> 18), o[1] = (char)(0x80 | ((c >> 12) & 0x3f)),
	       o[2] = (char)(0x80 | ((c >> 6) & 0x3f)), o[3] = (char)(0x80 | (c & 0x3f)), 4;
}

/* Reads a Go-quoted string at *p (at its opening quote) into v; returns
 * false on anything strconv.Unquote would reject. */
static bool go_unquote(const char **p, char *v, size_t *vlen, size_t cap)
{
	static const char from[] = "abfnrtv\\\"", to[] = "\a\b\f\n\r\t\v\\\"";
	const char *s = *p + 1;
	size_t n = 0;

	for (; *s != '"'; s++) {
		if (!*s || (unsigned char)*s < 0x20 || n + 4 >= cap)
			return false;
		if (*s != '\\') {
			v[n++] = *s;
			continue;
		}
		s++;
		const char *f = *s ? strchr(from, *s) : NULL;
		if (f) {
			v[n++] = to[f - from];
		} else if (*s == 'x' || *s == 'u' || *s == 'U') {
			int digits = *s == 'x' ? 2 : *s == 'u' ? 4 : 8;
			uint32_t c = 0;
			for (int i = 1; i <= digits; i++) {
				if (hexval(s[i]) < 0)
					return false;
				c = c << 4 | (uint32_t)hexval(s[i]);
			}
			n += *s == 'x' ? (v[n] = (char)c, 1) : put_utf8(v + n, c);
			s += digits;
		} else {
			return false;
		}
	}
	*p = s + 1;
	*vlen = n;
	v[n] = 0;
	return true;
}

/* Parses one logfmt line (up to '\n') into kv; returns the pair count, or
 * -1 when the line is not logfmt: pairs separated by one space, a bare value
 * holding no space, '"' or '='. */
static int logfmt_parse(const char *line, struct kv *kv, int max)
{
	const char *p = line;
	int n = 0;

	while (*p && *p != '\n') {
		const char *eq = strchr(p, '=');
		if (n == max || !eq || eq == p || (size_t)(eq - p) >= sizeof(kv[n].key) ||
		    memchr(p, ' ', (size_t)(eq - p)) || memchr(p, '"', (size_t)(eq - p)))
			return -1;
		memcpy(kv[n].key, p, (size_t)(eq - p));
		kv[n].key[eq - p] = 0;
		p = eq + 1;
		if (*p == '"') {
			if (!go_unquote(&p, kv[n].val, &kv[n].vlen, sizeof(kv[n].val)))
				return -1;
		} else {
			size_t len = strcspn(p, " \n");
			if (memchr(p, '"', len) || memchr(p, '=', len) || len >= sizeof(kv[n].val))
				return -1;
			memcpy(kv[n].val, p, len);
			kv[n].val[len] = 0;
			kv[n].vlen = len;
			p += len;
		}
		n++;
		if (*p == ' ')
			p++;
		else if (*p && *p != '\n')
			return -1;
	}
	return n;
}

static struct kv kvs[32];

/* The value of `key` in the one text line `out`; fails the test when the
 * line is not logfmt or lacks the key. */
static const struct kv *text_get(const char *out, const char *key)
{
	int n = logfmt_parse(out, kvs, 32);

	if (n < 0)
		fail_msg("not logfmt: %s", out);
	for (int i = 0; i < n; i++)
		if (!strcmp(kvs[i].key, key))
			return &kvs[i];
	fail_msg("no %s in %s", key, out);
	return NULL;
}

/* The one JSON line `out`, parsed (caller decrefs). */
static json_t *json_line(const char *out)
{
	json_error_t err;
	json_t *o = json_loads(out, JSON_DISABLE_EOF_CHECK, &err);

	if (!json_is_object(o))
		fail_msg("not a JSON object (%s): %s", err.text, out);
	assert_non_null(strchr(out, '\n'));
	assert_int_equal(strchr(out, '\n')[1], 0);
	return o;
}

static const char *jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v))
		fail_msg("no string %s", key);
	return json_string_value(v);
}

/* ---- values ------------------------------------------------------------- */

static const char *const values[] = {
	"etcd call \"/etcdserverpb.KV/Range\" failed",
	"back\\slash",
	"trailing backslash\\",
	"\\\"",
	"line one\nline two\n",
	"cr\r tab\t bell\a vt\v ff\f bs\b",
	"\x01\x02\x1b[31m\x1f\x7f",
	"a=b",
	"key=value other=thing",
	"=",
	"two words",
	" ",
	"",
	"\"",
	"\"quoted\"",
	"gr\xc3\xbc\xc3\x9f""e, \xe6\x97\xa5\xe6\x9c\xac, emoji \xf0\x9f\x98\x80",
	"\xc2\x85nel \xe2\x80\xa8ls \xc2\xa0nbsp \xef\xbb\xbf""bom",
	"plain-value_1.2/x@y^z+w",
	"{\"json\":[1,2],\"k\":\"v\"}",
	"%s %d %n",
	"</script>&amp;",
};

#define NVALUES (sizeof(values) / sizeof(values[0]))

static void test_text_values(void **state)
{
	(void)state;
	gaz_log_setup("trace", "text");
	for (size_t i = 0; i < NVALUES; i++) {
		cap_begin();
		gaz_info("value test", "journal=a/b v=%s after=%d", values[i], 42);
		const char *out = cap_end();
		const struct kv *v = text_get(out, "v");
		if (v->vlen != strlen(values[i]) || memcmp(v->val, values[i], v->vlen))
			fail_msg("value %zu: got [%s] from %s", i, v->val, out);
		assert_string_equal(text_get(out, "after")->val, "42");
		assert_string_equal(text_get(out, "journal")->val, "a/b");
		assert_string_equal(text_get(out, "msg")->val, "value test");
		assert_string_equal(text_get(out, "level")->val, "info");
	}
}

static void test_json_values(void **state)
{
	(void)state;
	gaz_log_setup("trace", "json");
	for (size_t i = 0; i < NVALUES; i++) {
		cap_begin();
		gaz_info("value test", "journal=a/b v=%s after=%d", values[i], 42);
		json_t *o = json_line(cap_end());
		assert_string_equal(jstr(o, "v"), values[i]);
		assert_string_equal(jstr(o, "after"), "42");
		assert_string_equal(jstr(o, "journal"), "a/b");
		assert_string_equal(jstr(o, "msg"), "value test");
		assert_string_equal(jstr(o, "level"), "info");
		assert_int_equal(json_object_size(o), 6);
		json_decref(o);
	}
}

/* Messages are quoted like values, in both formats. */
static void test_messages(void **state)
{
	(void)state;
	for (size_t i = 0; i < NVALUES; i++) {
		gaz_log_setup(NULL, "text");
		cap_begin();
		gaz_warn(values[i], "k=%d", 1);
		const char *out = cap_end();
		const struct kv *m = text_get(out, "msg");
		assert_int_equal(m->vlen, strlen(values[i]));
		assert_memory_equal(m->val, values[i], m->vlen);
		assert_string_equal(text_get(out, "k")->val, "1");

		gaz_log_setup(NULL, "json");
		cap_begin();
		gaz_warn(values[i], "k=%d", 1);
		json_t *o = json_line(cap_end());
		assert_string_equal(jstr(o, "msg"), values[i]);
		json_decref(o);
	}
}

/* The exact spellings: logrus' for text (bare when it can be), Go's
 * encoding/json escapes for JSON. */
static void test_exact_spelling(void **state)
{
	static const struct {
		const char *v, *text, *json;
	} cases[] = {
		{"etcd call \"/etcdserverpb.KV/Range\" failed",
		 "v=\"etcd call \\\"/etcdserverpb.KV/Range\\\" failed\"",
		 "\"v\":\"etcd call \\\"/etcdserverpb.KV/Range\\\" failed\""},
		{"a/b-c_d.e", "v=a/b-c_d.e", "\"v\":\"a/b-c_d.e\""},
		{"", "v=\n", "\"v\":\"\""},
		{"x:1", "v=\"x:1\"", "\"v\":\"x:1\""},
		{"1\n2\t\\", "v=\"1\\n2\\t\\\\\"", "\"v\":\"1\\n2\\t\\\\\""},
		{"\x01\x7f", "v=\"\\x01\\x7f\"", "\"v\":\"\\u0001\x7f\""},
		{"\xe2\x80\xa8", "v=\"\\u2028\"", "\"v\":\"\\u2028\""},
		{"\xc3\xa9", "v=\"\xc3\xa9\"", "\"v\":\"\xc3\xa9\""},
		{"bad\xff", "v=\"bad\\xff\"", "\"v\":\"bad\\ufffd\""},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		gaz_log_setup("info", "text");
		cap_begin();
		gaz_info("m", "v=%s", cases[i].v);
		const char *out = cap_end();
		if (!strstr(out, cases[i].text))
			fail_msg("case %zu: want %s in %s", i, cases[i].text, out);
		gaz_log_setup("info", "json");
		cap_begin();
		gaz_info("m", "v=%s", cases[i].v);
		out = cap_end();
		if (!strstr(out, cases[i].json))
			fail_msg("case %zu: want %s in %s", i, cases[i].json, out);
	}
	/* logrus' fixed keys: the time is quoted (it holds ':'), a one-word
	 * message is not. */
	gaz_log_setup("info", "text");
	cap_begin();
	gaz_info("goodbye", NULL);
	const char *out = cap_end();
	assert_true(!strncmp(out, "time=\"", 6));
	assert_non_null(strstr(out, "\" level=info msg=goodbye\n"));
}

/* Bytes that are not UTF-8: text keeps them (as \xNN), JSON stays valid
 * UTF-8 with U+FFFD in their place. */
static void test_invalid_utf8(void **state)
{
	const char *v = "bad \xff\xfe byte \xc3 end \xed\xa0\x80 \xe2\x82";
	(void)state;
	gaz_log_setup("info", "text");
	cap_begin();
	gaz_info("m", "v=%s", v);
	const char *out = cap_end();
	const struct kv *t = text_get(out, "v");
	assert_int_equal(t->vlen, strlen(v));
	assert_memory_equal(t->val, v, t->vlen);

	gaz_log_setup("info", "json");
	cap_begin();
	gaz_info("m", "v=%s", v);
	json_t *o = json_line(cap_end());
#define FFFD "\xef\xbf\xbd"
	assert_string_equal(jstr(o, "v"),
			    "bad " FFFD FFFD " byte " FFFD " end " FFFD FFFD FFFD " " FFFD FFFD);
	json_decref(o);
}

/* ---- the fields format -------------------------------------------------- */

static void test_format_conversions(void **state)
{
	static const struct {
		const char *key, *want;
	} want[] = {
		{"at", "log.c:12"}, {"journal", "a/b"}, {"n", "7"}, {"ll", "-5"},
		{"llx", "ff"}, {"hh", "-3"}, {"hu", "65535"}, {"f", " 3.14"},
		{"w", "   7"}, {"p", "abc"}, {"pct", "100%"}, {"c", "x"},
		{"ld", "-9"}, {"lu", "18446744073709551615"}, {"jd", "-1"}, {"td", "-2"},
		{"zd", "-4"}, {"resync", "30s"}, {"e", "1.5e+00"}, {"neg", "-3  "},
		{"lit", "\"x\""}, {"eqs", "a=b=c"}, {"bare", ""}, {"fields.msg", "inner"},
		{"fields.level", "l"}, {"fields.time", "t"},
	};
	(void)state;
	gaz_log_setup("info", "text");
	for (int json = 0; json < 2; json++) {
		gaz_log_setup(NULL, json ? "json" : "text");
		cap_begin();
		gaz_info("outer",
			 "at=%s:%d %s=%s n=%zu ll=%lld llx=%llx hh=%hhd hu=%hu f=%5.2f w=%*d "
			 "p=%.*s pct=100%% c=%c ld=%ld lu=%lu jd=%jd td=%td zd=%zd resync=%llds "
			 "e=%.1e neg=%-*d lit=\"%s\" eqs=a=%s bare msg=%s level=%s time=%s",
			 "log.c", 12, "journal", "a/b", (size_t)7, -5LL, 255ULL, (signed char)-3,
			 (unsigned short)65535, 3.14159, 4, 7, 3, "abcdef", 'x', -9L,
			 (unsigned long)-1, (intmax_t)-1, (ptrdiff_t)-2, (ssize_t)-4, 30LL, 1.5, 4,
			 -3, "x", "b=c", "inner", "l", "t");
		const char *out = cap_end();
		json_t *o = json ? json_line(out) : NULL;
		for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
			const char *got =
				json ? jstr(o, want[i].key) : text_get(out, want[i].key)->val;
			if (strcmp(got, want[i].want))
				fail_msg("%s: %s=[%s], want [%s] in %s", json ? "json" : "text",
					 want[i].key, got, want[i].want, out);
		}
		assert_string_equal(json ? jstr(o, "msg") : text_get(out, "msg")->val, "outer");
		assert_string_equal(json ? jstr(o, "level") : text_get(out, "level")->val, "info");
		json_decref(o);
	}
}

/* %m prints strerror(errno) as it was at the call; errno survives. */
static void test_errno(void **state)
{
	(void)state;
	gaz_log_setup("info", "text");
	cap_begin();
	errno = ENOENT;
	gaz_info("m", "err=%m path=%s", "/x");
	assert_int_equal(errno, ENOENT);
	const char *out = cap_end();
	assert_string_equal(text_get(out, "err")->val, strerror(ENOENT));
	assert_string_equal(text_get(out, "path")->val, "/x");
}

static void test_no_fields(void **state)
{
	(void)state;
	gaz_log_setup("info", "json");
	cap_begin();
	gaz_info("goodbye", NULL);
	json_t *o = json_line(cap_end());
	assert_int_equal(json_object_size(o), 3);
	assert_string_equal(jstr(o, "msg"), "goodbye");
	json_decref(o);
	cap_begin();
	gaz_info("spaces only", "  ");
	o = json_line(cap_end());
	assert_int_equal(json_object_size(o), 3);
	json_decref(o);
}

/* ---- levels ------------------------------------------------------------- */

static int evaluated;

static const char *side_effect(void)
{
	evaluated++;
	return "x";
}

/* Below the level nothing is written and the arguments are not evaluated. */
static void test_level_checked_first(void **state)
{
	(void)state;
	gaz_log_setup("warn", "json");
	evaluated = 0;
	cap_begin();
	gaz_info("hidden", "v=%s", side_effect());
	gaz_debug("hidden", "v=%s", side_effect());
	assert_string_equal(cap_end(), "");
	assert_int_equal(evaluated, 0);
	cap_begin();
	gaz_warn("shown", "v=%s", side_effect());
	json_t *o = json_line(cap_end());
	assert_int_equal(evaluated, 1);
	assert_string_equal(jstr(o, "level"), "warning");
	json_decref(o);
	assert_int_equal(gaz_log_setup("loud", NULL), -1);
	assert_int_equal(gaz_log_setup(NULL, "xml"), -1);
}

/* ---- long lines --------------------------------------------------------- */

/* A value past the line's room is cut at a character boundary; the line
 * still parses, within 4096 bytes, and what came before is whole. */
static void test_truncation(void **state)
{
	static char big[12000];
	(void)state;
	for (size_t i = 0; i + 2 < sizeof(big); i += 2)
		memcpy(big + i, "\xc3\xa9", 2); /* é: 2 bytes, 2 in text, 2 in JSON */
	big[sizeof(big) - 2] = 0;
	for (int json = 0; json < 2; json++) {
		for (size_t cut = 0; cut < 9; cut++) {
			/* a quote and a control byte at each offset near the end:
			 * escapes of each size meet the line's end */
			char v[6000];
			memcpy(v, big, sizeof(v));
			memset(v + 3980, 'a', 200);
			v[4000 + cut] = '"';
			v[4012 + cut] = '\x01';
			v[sizeof(v) - 1] = 0;
			gaz_log_setup("info", json ? "json" : "text");
			cap_begin();
			gaz_info("long", "a=%s v=%s after=%s", "first", v, "dropped");
			const char *out = cap_end();
			size_t len = strlen(out);
			assert_true(len <= 4096);
			assert_true(len > 3900);
			if (json) {
				json_t *o = json_line(out);
				assert_string_equal(jstr(o, "a"), "first");
				const char *got = jstr(o, "v");
				assert_true(strlen(got) > 3800);
				assert_memory_equal(got, v, strlen(got));
				json_decref(o);
			} else {
				const struct kv *t = text_get(out, "v");
				assert_true(t->vlen > 3800);
				assert_memory_equal(t->val, v, t->vlen);
				assert_string_equal(text_get(out, "a")->val, "first");
			}
		}
	}
}

/* ---- threads ------------------------------------------------------------ */

#define THREADS 4
#define LINES 150

static void *spam(void *arg)
{
	char v[1000];
	memset(v, 'a' + (int)(intptr_t)arg, sizeof(v) - 1);
	v[sizeof(v) - 1] = 0;
	v[10] = '"';
	for (int i = 0; i < LINES; i++)
		gaz_info("from a thread", "thread=%d i=%d v=%s", (int)(intptr_t)arg, i, v);
	return NULL;
}

/* Lines from concurrent threads never interleave: each parses whole. */
static void test_threads(void **state)
{
	pthread_t t[THREADS];
	int count = 0;
	(void)state;
	gaz_log_setup("info", "json");
	cap_begin();
	for (intptr_t i = 0; i < THREADS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, spam, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	const char *out = cap_end();
	for (const char *l = out; *l; l = strchr(l, '\n') + 1) {
		json_error_t err;
		json_t *o = json_loadb(l, (size_t)(strchr(l, '\n') - l), 0, &err);
		if (!o)
			fail_msg("line %d: %s", count, err.text);
		assert_int_equal(strlen(jstr(o, "v")), 999);
		json_decref(o);
		count++;
	}
	assert_int_equal(count, THREADS * LINES);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_values),
		cmocka_unit_test(test_json_values),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_exact_spelling),
		cmocka_unit_test(test_invalid_utf8),
		cmocka_unit_test(test_format_conversions),
		cmocka_unit_test(test_errno),
		cmocka_unit_test(test_no_fields),
		cmocka_unit_test(test_level_checked_first),
		cmocka_unit_test(test_truncation),
		cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
