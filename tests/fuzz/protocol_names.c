/*
 * protocol_names.c - fuzz target: the text parsers and checkers of
 * lib/protocol and lib/store that take names from outside (requests,
 * specs, gazctl flags): journal names and path rules (token.c), label
 * selectors in gazctl's -l grammar (selector.c: parse, then format and
 * parse again, which must succeed: format is the canonical spelling),
 * labels (labels.c), URLs (url.c), fragment store URLs and their query
 * parameters (lib/store/store.c), media types (spec.c), path postfix
 * templates (template.c: check, then execute), endpoints and shard ids.
 *
 * Input: byte 0 picks the parser, the rest is the text (a C string: an
 * embedded NUL ends it, as for every caller).
 */
#include "fuzz.h"

#include <stdio.h>

#include "common/err.h"
#include "protocol/labels.h"
#include "protocol/shard.h"
#include "protocol/url.h"
#include "protocol/validate.h"
#include "store/store.h"

static void journal(const char *s)
{
	gaz_validate_journal(s, NULL);
	gaz_journal_name_len(s);
	gaz_path_is_clean(s, strlen(s));
	gaz_validate_path_component(s, 1, 1024, NULL);
}

static void selector(const char *s)
{
	Protocol__LabelSelector *sel = NULL, *again = NULL;
	struct gaz_status st = {0};
	char *text = NULL;

	if (gaz_selector_parse(s, &sel, &st))
		return;
	if (gaz_selector_format(sel, &text, &st) == 0) {
		if (gaz_selector_parse(text, &again, &st)) {
			fprintf(stderr, "formatted selector %s (of %s) does not parse: %s\n", text, s,
				st.msg);
			abort();
		}
		gaz_selector_free(again);
		free(text);
	}
	gaz_selector_free(sel);
}

static void url(const char *s)
{
	struct gaz_url u = {0};

	if (gaz_url_parse(s, &u, NULL) == 0)
		gaz_url_release(&u);
}

static void store_url(const char *s)
{
	struct gaz_store_url u = {0};
	struct gaz_store_param *p = NULL;
	size_t n = 0;

	gaz_validate_fragment_store(s, NULL);
	if (gaz_store_url_parse(s, &u, NULL))
		return;
	if (gaz_store_url_params(&u, &p, &n, NULL) == 0)
		gaz_store_params_free(p, n);
	gaz_store_url_release(&u);
}

static void token(const char *s)
{
	gaz_validate_token(s, GAZ_TOKEN_SYMBOLS, 0, 4096, NULL);
	gaz_validate_token(s, GAZ_PATH_SYMBOLS, 2, 64, NULL);
}

static void label(const char *s)
{
	char *name = strdup(s), *eq = strchr(name, '=');
	Protocol__Label l = PROTOCOL__LABEL__INIT;
	Protocol__Label *lp = &l;
	Protocol__LabelSet set = PROTOCOL__LABEL_SET__INIT;

	if (eq)
		*eq = '\0';
	l.name = name;
	l.value = eq ? eq + 1 : (char *)"";
	l.prefix = eq && eq[1] == '*';
	gaz_validate_label(&l, true, NULL);
	set.n_labels = 1;
	set.labels = &lp;
	gaz_validate_labelset(&set, false, NULL);
	gaz_validate_single_value_labels(&set, NULL);
	free(name);
}

static void media_type(const char *s)
{
	gaz_validate_media_type(s, NULL);
}

static void postfix_template(const char *s)
{
	struct gaz_postfix_data d = {.journal = "a/journal",
				     .begin = 0x1234,
				     .end = 0x5678,
				     .first_append_ns = 1700000000123456789LL,
				     .replication = 3};
	char out[1024];

	if (gaz_validate_postfix_template(s, NULL))
		return;
	gaz_postfix_template_exec(s, &d, out, sizeof(out), NULL);
}

static void endpoint(const char *s)
{
	gaz_validate_endpoint(s, NULL);
	gaz_validate_shard_id(s, NULL);
}

static void (*const parsers[])(const char *s) = {
	journal, selector, url, store_url, token, label, media_type, postfix_template, endpoint,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	char *s = fuzz_str(data + 1, size - 1);
	parsers[data[0] % (sizeof(parsers) / sizeof(parsers[0]))](s);
	free(s);
	return 0;
}
