/*
 * cmd_append.c - `gazctl journals append`: append content to journals
 * matched by a selector (facts §9.1, §10.2 mappings).
 *
 *   --framing none    the whole input is ONE append to a random matched
 *                     journal (retried on routing failures when the input
 *                     is a regular file, which can be re-read)
 *   --framing lines   each line is a record, mapped to a journal by
 *                     --mapping: random; modulo / rendezvous over the
 *                     FNV-1a 32 hash of a partition-key line preceding each
 *                     record (--base64 keys decoded first); direct, where
 *                     the preceding line names the journal. Records of one
 *                     journal keep their order and are batched into appends
 *                     of whole records, flushed when the input pauses, at
 *                     4 MiB, and at the end.
 *
 * A progress line is shown on stderr when it is a terminal and the append
 * runs for more than a second.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"

#define BATCH_FLUSH_BYTES (4u << 20)
#define LINE_MAX_BYTES (64u << 20)

static struct {
	char *selector, *input, *framing, *mapping;
	bool base64;
} opt;

#define APPEND_FLAG(n, s, t, d, h, ini, p, ch, fl)                                            \
	{ .name = n, .short_name = s, .type = t, .def = d, .help = h, .ptr = p,             \
	  .group = "journals.append", .ini_name = ini, .choices = ch, .flags = fl }

static const struct gaz_flag flags[] = {
	APPEND_FLAG("selector", 'l', GAZ_FLAG_STRING, NULL, "Label selector of journals to append to",
		    "Selector", &opt.selector, NULL, GAZ_FLAG_REQUIRED),
	APPEND_FLAG("input", 'i', GAZ_FLAG_STRING, "-", "Input file path. Use '-' for stdin",
		    "Input", &opt.input, NULL, 0),
	APPEND_FLAG("framing", 'f', GAZ_FLAG_STRING, "none", "Framing of records in input, if any",
		    "Framing", &opt.framing, "none|lines|fixed", 0),
	APPEND_FLAG("mapping", 'm', GAZ_FLAG_STRING, "random",
		    "Mapping function of records to journals", "Mapping", &opt.mapping,
		    "random|modulo|rendezvous|direct", 0),
	APPEND_FLAG("base64", 0, GAZ_FLAG_BOOL, NULL,
		    "Partition keys under 'lines' framing are interpreted as base64", "Base64",
		    &opt.base64, NULL, 0),
	{ 0 },
};

static struct gazctl_progress progress;

static void on_progress(void *arg, int64_t bytes)
{
	(void)arg;
	gazctl_progress_update(&progress, bytes);
}

/* append_whole sends all of fd to `journal` as one append. */
static int append_whole(struct gaz_client *c, const char *journal, int fd, struct gaz_status *st)
{
	struct gaz_append_opts o = {.journal = journal, .progress = on_progress};
	struct gaz_append_src src = {.fd = fd};
	Protocol__AppendResponse *resp = NULL;
	int rc;

	gazctl_progress_init(&progress, "appended", isatty(STDERR_FILENO));
	rc = gaz_client_append(c, &o, &src, &resp, st);
	gazctl_progress_done(&progress, resp && resp->commit ? resp->commit->end -
							       resp->commit->begin : 0);
	if (rc)
		gaz_status_prefix(st, "appending to journal: ");
	else if (resp->commit)
		gaz_debug("append response", "journal=%s begin=%lld end=%lld", journal,
			  (long long)resp->commit->begin, (long long)resp->commit->end);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

/* ---- lines framing ------------------------------------------------------------ */

/* A journal's pending records, and the reading state. */
struct batch {
	char *buf;
	size_t len;
};

struct lines {
	struct gaz_client *c;
	const Protocol__ListResponse *list;
	struct batch *batches;      /* one per listed journal */
	uint32_t *name_hash;        /* FNV-1a 32 of each journal name */
	int fd;
	char *in;                   /* input buffer [off, len) unparsed */
	size_t off, len, cap;
	bool eof;
};

static uint32_t fnv1a32(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 16777619u;
	return h;
}

static int flush_one(struct lines *l, size_t j, struct gaz_status *st)
{
	struct batch *b = &l->batches[j];
	struct gaz_append_src src = {.buf = b->buf, .len = b->len, .fd = -1};
	struct gaz_append_opts o = {.journal = l->list->journals[j]->spec->name};
	int rc;

	if (b->len == 0)
		return 0;
	rc = gaz_client_append(l->c, &o, &src, NULL, st);
	b->len = 0;
	if (rc)
		gaz_status_prefix(st, "failed to flush appends: ");
	return rc;
}

static int flush_all(struct lines *l, struct gaz_status *st)
{
	int rc = 0;

	for (size_t j = 0; !rc && j < l->list->n_journals; j++)
		rc = flush_one(l, j, st);
	return rc;
}

/* input_idle: no more input is readable right now. */
static bool input_idle(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 0;
}

/* next_line returns the next line (with its '\n') in *line / *n; GAZ_EOF
 * at a clean end; GAZ_EPROTO for a last line without '\n'. Reading more
 * input first flushes pending batches if the input is idle. */
static int next_line(struct lines *l, const char **line, size_t *n, struct gaz_status *st)
{
	for (;;) {
		char *nl = memchr(l->in + l->off, '\n', l->len - l->off);
		ssize_t r;
		int rc;

		if (nl) {
			*line = l->in + l->off;
			*n = (size_t)(nl + 1 - *line);
			l->off += *n;
			return 0;
		}
		if (l->eof)
			return l->off == l->len ? GAZ_EOF
						: gaz_status_set(st, GAZ_EPROTO, "unexpected EOF");
		if (input_idle(l->fd) && (rc = flush_all(l, st)))
			return rc;
		memmove(l->in, l->in + l->off, l->len - l->off);
		l->len -= l->off;
		l->off = 0;
		if (l->len == l->cap) {
			if (l->cap >= LINE_MAX_BYTES)
				return gaz_status_set(st, GAZ_ERANGE, "input line too long");
			l->in = gazctl_xrealloc(l->in, l->cap *= 2);
		}
		while ((r = read(l->fd, l->in + l->len, l->cap - l->len)) < 0 && errno == EINTR)
			;
		if (r < 0)
			return gaz_status_set(st, GAZ_EIO, "read of input failed: %s", strerror(errno));
		l->eof = r == 0;
		l->len += (size_t)r;
	}
}

static int b64val(int c)
{
	return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26
		: c >= '0' && c <= '9' ? c - '0' + 52 : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* b64decode decodes standard padded base64 in place; returns the length or
 * -1 for invalid input. */
static long b64decode(char *s, size_t n)
{
	size_t o = 0, pad = 0;
	uint32_t acc = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int v = s[i] == '=' && i >= n - 2 ? (pad++, 0) : b64val((unsigned char)s[i]);
		if (v < 0 || (pad && s[i] != '='))
			return -1;
		acc = acc << 6 | (uint32_t)v;
		if (i % 4 == 3) {
			char out[3] = {(char)(acc >> 16), (char)(acc >> 8), (char)acc};
			memcpy(s + o, out, 3);
			o += 3;
		}
	}
	return (long)(o - pad);
}

/* map_record picks the journal index for a record with partition key
 * [key, key+kn) (NULL for random mapping). */
static int map_record(struct lines *l, char *key, size_t kn, size_t *j, struct gaz_status *st)
{
	size_t nj = l->list->n_journals;
	uint32_t h, best = 0;

	if (!strcmp(opt.mapping, "random")) {
		*j = (size_t)random() % nj;
		return 0;
	}
	if (!strcmp(opt.mapping, "direct")) {
		for (*j = 0; *j < nj; (*j)++)
			if (strlen(l->list->journals[*j]->spec->name) == kn &&
			    !memcmp(l->list->journals[*j]->spec->name, key, kn))
				return 0;
		return gaz_status_set(st, GAZ_ENOTFOUND, "mapping partition key to journal: "
				      "journal \"%.*s\" not found", (int)kn, key);
	}
	h = fnv1a32(key, kn);
	if (!strcmp(opt.mapping, "modulo")) {
		*j = h % nj;
		return 0;
	}
	for (size_t i = *j = 0; i < nj; i++)
		if ((h ^ l->name_hash[i]) > best)
			best = h ^ l->name_hash[i], *j = i;
	return 0;
}

/* read_key reads and decodes the partition key line preceding a record. */
static int read_key(struct lines *l, char **key, size_t *kn, struct gaz_status *st)
{
	const char *line;
	size_t n;
	long d;
	int rc = next_line(l, &line, &n, st);

	if (rc)
		return rc == GAZ_EPROTO ? (gaz_status_prefix(st, "unpacking partition key: "), rc) : rc;
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	*key = gazctl_xmalloc(n + 1);
	memcpy(*key, line, n);
	*kn = n;
	if (opt.base64 && (d = b64decode(*key, n)) < 0) {
		free(*key);
		return gaz_status_set(st, GAZ_EINVAL, "unpacking partition key: illegal base64 data");
	}
	if (opt.base64)
		*kn = (size_t)d;
	return 0;
}

/* one_record maps and buffers the next record; GAZ_EOF at the end. */
static int one_record(struct lines *l, struct gaz_status *st)
{
	char *key = NULL;
	size_t kn = 0, j, n;
	const char *rec;
	int rc = strcmp(opt.mapping, "random") ? read_key(l, &key, &kn, st) : 0;

	if (!rc && !(rc = map_record(l, key, kn, &j, st)) && !(rc = next_line(l, &rec, &n, st))) {
		struct batch *b = &l->batches[j];
		gaz_debug("mapped partition key to journal", "journal=%s",
			  l->list->journals[j]->spec->name);
		b->buf = gazctl_xrealloc(b->buf, b->len + n);
		memcpy(b->buf + b->len, rec, n);
		b->len += n;
		if (b->len >= BATCH_FLUSH_BYTES)
			rc = flush_one(l, j, st);
	} else if (rc == GAZ_EPROTO) {
		gaz_status_prefix(st, "unpacking record: ");
	}
	free(key);
	return rc;
}

static int append_lines(struct gaz_client *c, const Protocol__ListResponse *list, int fd,
			struct gaz_status *st)
{
	struct lines l = {.c = c, .list = list, .fd = fd, .cap = 64 * 1024};
	int rc;

	l.in = gazctl_xmalloc(l.cap);
	l.batches = gazctl_xcalloc(list->n_journals, sizeof(*l.batches));
	l.name_hash = gazctl_xcalloc(list->n_journals, sizeof(uint32_t));
	for (size_t i = 0; i < list->n_journals; i++)
		l.name_hash[i] = fnv1a32(list->journals[i]->spec->name,
					 strlen(list->journals[i]->spec->name));
	while ((rc = one_record(&l, st)) == 0)
		;
	if (rc == GAZ_EOF)
		rc = flush_all(&l, st);
	for (size_t i = 0; i < list->n_journals; i++)
		free(l.batches[i].buf);
	free(l.batches);
	free(l.name_hash);
	free(l.in);
	return rc;
}

/* ---- the command ------------------------------------------------------------------ */

static int check_options(struct gaz_status *st)
{
	if (!strcmp(opt.framing, "none") && strcmp(opt.mapping, "random"))
		return gaz_status_set(st, GAZ_EINVAL,
				      "'none' --framing may only be used with 'random' --mapping");
	if (opt.base64 && (strcmp(opt.framing, "lines") || !strcmp(opt.mapping, "random")))
		return gaz_status_set(st, GAZ_EINVAL, "--base64 requires --framing 'lines' and "
						      "not --mapping 'random'");
	if (!strcmp(opt.framing, "fixed"))
		return gaz_status_set(st, GAZ_EINVAL, "--framing fixed is not supported yet");
	return 0;
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	Protocol__ListResponse *list = NULL;
	int fd = STDIN_FILENO, rc;

	srandom((unsigned)time(NULL) ^ (unsigned)getpid());
	if ((rc = check_options(st)) || (rc = gazctl_list_selector(c, opt.selector, &list, st)))
		return rc;
	if (strcmp(opt.input, "-") && (fd = open(opt.input, O_RDONLY | O_CLOEXEC)) < 0)
		rc = gaz_status_set(st, GAZ_EIO, "failed to open input file: %s: %s", opt.input,
				    strerror(errno));
	else if (list->n_journals == 0)
		rc = gaz_status_set(st, GAZ_ENOTFOUND, "mapping to journal: empty ListResponse");
	else if (!strcmp(opt.framing, "none"))
		rc = append_whole(c, list->journals[random() % list->n_journals]->spec->name, fd,
				  st);
	else
		rc = append_lines(c, list, fd, st);
	if (fd > STDIN_FILENO)
		close(fd);
	protobuf_c_message_free_unpacked(&list->base, NULL);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_append = {
	.name = "append",
	.summary = "Append journal content",
	.description = "Append content to one or more journals.\n\n"
		       "A label --selector is required, and determines the set of journals which "
		       "are appended.\n\nIf --framing 'none', then --mapping must be 'random' and "
		       "the input is atomically\nappended to a random journal of the selector. "
		       "If --framing 'lines' then records are\nread from the input line-by-line, "
		       "each mapped to a journal by --mapping.",
	.flags = flags,
	.needs_client = true,
	.run = run,
};
