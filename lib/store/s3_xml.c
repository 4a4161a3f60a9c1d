/*
 * s3_xml.c - the S3 XML answers the store reads, parsed with libexpat:
 * ListBucketResult (ListObjectsV2), Error, InitiateMultipartUploadResult.
 *
 * One small walker serves all three: it tracks the element path (bounded
 * depth) and the text of the innermost element (bounded length), and calls
 * a per-document handler at each element's end with (parent, name, text).
 * Namespaces are not processed: S3 answers in its default namespace, so
 * element names arrive as plain local names. Unknown elements are ignored.
 *
 * Input is outside data: every length is bounded, and a malformed or
 * oversized document is GAZ_EPROTO, never a crash (fuzzable).
 */
#include "store/s3_int.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DEPTH 8
#define MAX_TEXT 8192

struct walker {
	XML_Parser p;
	char names[MAX_DEPTH][64];
	int depth;            /* elements open; deeper ones are tracked as "" */
	char text[MAX_TEXT + 1];
	size_t text_len;
	bool text_overflow;
	int (*on_end)(struct walker *w, const char *parent, const char *name, const char *text);
	void *arg;
	int rc;               /* first handler error */
};

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct walker *w = ud;

	(void)attrs;
	if (w->depth < MAX_DEPTH)
		snprintf(w->names[w->depth], sizeof(w->names[0]), "%s", name);
	w->depth++;
	w->text_len = 0;
	w->text_overflow = false;
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct walker *w = ud;

	if (w->text_len + (size_t)len > MAX_TEXT) {
		w->text_overflow = true;
		return;
	}
	memcpy(w->text + w->text_len, s, (size_t)len);
	w->text_len += (size_t)len;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct walker *w = ud;
	const char *parent = w->depth >= 2 && w->depth - 2 < MAX_DEPTH ? w->names[w->depth - 2] : "";

	w->text[w->text_len] = 0;
	if (w->rc == 0 && w->depth <= MAX_DEPTH) {
		if (w->text_overflow)
			w->rc = GAZ_EPROTO;
		else
			w->rc = w->on_end(w, parent, name, w->text);
		if (w->rc)
			XML_StopParser(w->p, XML_FALSE);
	}
	w->depth--;
	w->text_len = 0;
	w->text_overflow = false;
}

/* Parses body with w->on_end. Returns 0, the handler's error, or
 * GAZ_EPROTO for malformed XML; *root receives the document element. */
static int walk(struct walker *w, const char *body, size_t len, char *root, size_t root_cap)
{
	enum XML_Status ok;

	if (len > INT32_MAX || !(w->p = XML_ParserCreate("UTF-8")))
		return len > INT32_MAX ? GAZ_EPROTO : GAZ_ENOMEM;
	XML_SetUserData(w->p, w);
	XML_SetElementHandler(w->p, on_start, on_end);
	XML_SetCharacterDataHandler(w->p, on_text);
	w->names[0][0] = 0;
	ok = XML_Parse(w->p, body, (int)len, XML_TRUE);
	if (root)
		snprintf(root, root_cap, "%s", w->names[0]);
	XML_ParserFree(w->p);
	if (w->rc)
		return w->rc;
	return ok == XML_STATUS_OK ? 0 : GAZ_EPROTO;
}

/* ------------------------------------------------------------- listing */

struct list_state {
	struct gaz_s3_list_page *page;
	struct gaz_s3_obj cur;
};

static int list_obj_done(struct list_state *ls)
{
	struct gaz_s3_list_page *pg = ls->page;

	if (!ls->cur.key)
		return 0; /* a <Contents> without a key: nothing to list */
	if (pg->n == pg->cap) {
		size_t cap = pg->cap ? pg->cap * 2 : 256;
		struct gaz_s3_obj *v = realloc(pg->objs, cap * sizeof(*v));
		if (!v)
			return GAZ_ENOMEM;
		pg->objs = v;
		pg->cap = cap;
	}
	pg->objs[pg->n++] = ls->cur;
	memset(&ls->cur, 0, sizeof(ls->cur));
	return 0;
}

static int list_end(struct walker *w, const char *parent, const char *name, const char *text)
{
	struct list_state *ls = w->arg;

	if (!strcmp(parent, "Contents")) {
		if (!strcmp(name, "Key")) {
			free(ls->cur.key);
			if (!(ls->cur.key = strdup(text)))
				return GAZ_ENOMEM;
		} else if (!strcmp(name, "Size")) {
			ls->cur.size = strtoll(text, NULL, 10);
		} else if (!strcmp(name, "LastModified")) {
			ls->cur.mod_time = gaz__s3_parse_time(text);
		}
	} else if (!strcmp(parent, "ListBucketResult")) {
		if (!strcmp(name, "Contents"))
			return list_obj_done(ls);
		if (!strcmp(name, "IsTruncated"))
			ls->page->truncated = !strcmp(text, "true");
		else if (!strcmp(name, "NextContinuationToken") && *text) {
			free(ls->page->next_token);
			if (!(ls->page->next_token = strdup(text)))
				return GAZ_ENOMEM;
		}
	}
	return 0;
}

int gaz__s3_parse_list(const char *body, size_t len, struct gaz_s3_list_page *page,
		       struct gaz_status *st)
{
	struct list_state ls = {page, {0}};
	struct walker w = {.on_end = list_end, .arg = &ls};
	char root[64] = "";
	int rc;

	memset(page, 0, sizeof(*page));
	rc = walk(&w, body, len, root, sizeof(root));
	free(ls.cur.key);
	if (rc == 0 && strcmp(root, "ListBucketResult"))
		rc = gaz_status_set(st, GAZ_EPROTO, "s3 listing: expected ListBucketResult, got <%s>",
				    root);
	else if (rc == 0 && page->truncated && !page->next_token)
		rc = gaz_status_set(st, GAZ_EPROTO,
				    "s3 listing: truncated page without NextContinuationToken");
	else if (rc == GAZ_ENOMEM)
		gaz_status_set(st, rc, "s3 listing: out of memory");
	else if (rc)
		gaz_status_set(st, rc, "s3 listing: malformed ListBucketResult XML");
	if (rc)
		gaz__s3_list_page_release(page);
	return rc;
}

void gaz__s3_list_page_release(struct gaz_s3_list_page *page)
{
	for (size_t i = 0; i < page->n; i++)
		free(page->objs[i].key);
	free(page->objs);
	free(page->next_token);
	memset(page, 0, sizeof(*page));
}

/* -------------------------------------------------- error and upload id */

struct pick {
	const char *parent, *name;
	char *out;
	size_t cap;
	bool found;
};

static int pick_end(struct walker *w, const char *parent, const char *name, const char *text)
{
	struct pick *p = w->arg;

	for (; p->name; p++) {
		if (!strcmp(parent, p->parent) && !strcmp(name, p->name)) {
			snprintf(p->out, p->cap, "%s", text);
			p->found = true;
		}
	}
	return 0;
}

bool gaz__s3_parse_error(const char *body, size_t len, char *code, size_t code_cap, char *msg,
			 size_t msg_cap)
{
	struct pick picks[] = {{"Error", "Code", code, code_cap, false},
			       {"Error", "Message", msg, msg_cap, false},
			       {NULL, NULL, NULL, 0, false}};
	struct walker w = {.on_end = pick_end, .arg = picks};
	char root[64] = "";

	code[0] = msg[0] = 0;
	if (len == 0)
		return false;
	walk(&w, body, len, root, sizeof(root));
	return !strcmp(root, "Error");
}

bool gaz__s3_parse_upload_id(const char *body, size_t len, char *out, size_t cap)
{
	struct pick picks[] = {{"InitiateMultipartUploadResult", "UploadId", out, cap, false},
			       {NULL, NULL, NULL, 0, false}};
	struct walker w = {.on_end = pick_end, .arg = picks};

	out[0] = 0;
	return walk(&w, body, len, NULL, 0) == 0 && picks[0].found && *out;
}

int64_t gaz__s3_parse_time(const char *s)
{
	struct tm tm = {0};
	const char *rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);

	if (!rest)
		return 0;
	return (int64_t)timegm(&tm);
}
