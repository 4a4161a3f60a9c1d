/*
 * cmd_read.c - `gazctl journals read`: read every journal matching a
 * selector, concurrently, into one output (facts §9.1, §7.2).
 *
 * One thread per journal runs a retrying reader from offset 0 (or its
 * --offsets entry, or the write head with --tail). Content is copied out a
 * whole fragment at a time under the output lock, so the merged output
 * keeps each journal's appends (and so its messages) whole, as Gazette's
 * gazctl does. Without --block a journal is done at its write head
 * (OFFSET_NOT_YET_AVAILABLE); with it, reading goes on until SIGINT or
 * SIGTERM, which cancel the client. Either way the final offsets go to
 * --offsets-out (written to "<path>.temp", synced, then renamed).
 * FULL-suspended journals are skipped. The selector is evaluated once, at
 * start (Gazette keeps re-evaluating it).
 *
 * With --broker.cache.size > 0 reads are do_not_proxy, as Gazette's:
 * they go to a replica named by the route cache (filled by the listing),
 * or are redirected by the route a non-member broker answers with, and
 * persisted fragments are fetched directly by URL (file:// ones under
 * --file-root). Without it, every read goes to --broker.address.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/gazctl/gazctl.h"
#include "common/log.h"

#define READ_BUF_BYTES (32 * 1024)
/* pump_step: keep reading (distinct from every GAZ_* and GAZ_READ_*). */
#define PUMP_MORE 100

char *gazctl_read_file_root;

static struct {
	char *selector, *output, *offsets, *offsets_out;
	bool block, tail;
	int64_t from;
} opt;

#define READ_FLAG(n, s, t, d, h, ini, p, fl)                                                  \
	{ .name = n, .short_name = s, .type = t, .def = d, .help = h, .ptr = p,             \
	  .group = "journals.read", .ini_name = ini, .flags = fl }

static const struct gaz_flag flags[] = {
	READ_FLAG("selector", 'l', GAZ_FLAG_STRING, NULL, "Label selector of journals to read",
		  "Selector", &opt.selector, GAZ_FLAG_REQUIRED),
	READ_FLAG("block", 'b', GAZ_FLAG_BOOL, NULL,
		  "Do not exit on journal EOF; wait for new data until signaled", "Block",
		  &opt.block, 0),
	READ_FLAG("tail", 0, GAZ_FLAG_BOOL, NULL,
		  "Start reading from the journal write-head (rather than offset 0)", "Tail",
		  &opt.tail, 0),
	READ_FLAG("output", 'o', GAZ_FLAG_STRING, "-", "Output file path. Use '-' for stdout",
		  "Output", &opt.output, 0),
	READ_FLAG("offsets", 0, GAZ_FLAG_STRING, NULL,
		  "Path from which initial journal offsets are read at startup", "OffsetsPath",
		  &opt.offsets, 0),
	READ_FLAG("offsets-out", 0, GAZ_FLAG_STRING, NULL,
		  "Path to which final journal offsets are written at exit", "OffsetsOutPath",
		  &opt.offsets_out, 0),
	READ_FLAG("file-root", 0, GAZ_FLAG_STRING, NULL,
		  "Filesystem path which roots file:// fragment store", "FileRoot",
		  &gazctl_read_file_root, 0),
	READ_FLAG("from", 0, GAZ_FLAG_INT64, "0",
		  "Skip over fragments persisted before this time, in unix seconds since epoch",
		  "FromUnix", &opt.from, 0),
	{ 0 },
};

/* Shared by the reading threads. */
struct output {
	int fd;
	pthread_mutex_t mu;         /* serialises writes: whole fragments */
	atomic_llong bytes;         /* copied so far, for progress */
	struct gazctl_progress progress;
	struct gaz_client *c;
	pthread_mutex_t err_mu;
	struct gaz_status err;      /* first failure */
};

struct pump {
	pthread_t thread;
	struct output *out;
	struct gaz_reader *r;
	int64_t start;              /* initial offset */
};

static int write_all(struct output *o, const char *buf, size_t n, struct gaz_status *st)
{
	while (n > 0) {
		ssize_t w = write(o->fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return gaz_status_set(st, GAZ_EIO, "failed to write: %s", strerror(errno));
		buf += w;
		n -= (size_t)w;
	}
	gazctl_progress_update(&o->progress, atomic_load(&o->bytes));
	return 0;
}

/* copy_fragment copies content from the reader up to `end` (the fragment
 * announced by the last metadata) into the output, holding its lock. */
static int copy_fragment(struct pump *p, int64_t end, char *buf, struct gaz_status *st)
{
	int rc = 0;
	size_t n;

	pthread_mutex_lock(&p->out->mu);
	while (rc == 0 && gaz_reader_offset(p->r) < end) {
		int64_t want = end - gaz_reader_offset(p->r);
		rc = gaz_reader_read(p->r, buf, want < READ_BUF_BYTES ? (size_t)want : READ_BUF_BYTES,
				     &n, st);
		if (rc == 0) {
			atomic_fetch_add(&p->out->bytes, (long long)n);
			rc = write_all(p->out, buf, n, st);
		} else if (rc == GAZ_READ_META || rc == GAZ_READ_JUMP) {
			rc = 0; /* a restarted read re-announces the fragment */
		}
	}
	pthread_mutex_unlock(&p->out->mu);
	return rc;
}

/* pump_step handles one event of the reader; PUMP_MORE = keep going. */
static int pump_step(struct pump *p, char *buf, struct gaz_status *st)
{
	const struct gaz_read_meta *m;
	size_t n;
	int rc = gaz_reader_read(p->r, buf, READ_BUF_BYTES, &n, st);

	switch (rc) {
	case 0: /* content outside an announced fragment: write it as is */
		pthread_mutex_lock(&p->out->mu);
		atomic_fetch_add(&p->out->bytes, (long long)n);
		rc = write_all(p->out, buf, n, st);
		pthread_mutex_unlock(&p->out->mu);
		return rc ? rc : PUMP_MORE;
	case GAZ_READ_META:
	case GAZ_READ_JUMP:
		m = gaz_reader_meta(p->r);
		gaz_debug("read is ready", "journal=%s offset=%lld fragment.end=%lld",
			  gaz_reader_journal(p->r), (long long)gaz_reader_offset(p->r),
			  (long long)m->fragment.end);
		rc = m->has_fragment ? copy_fragment(p, m->fragment.end, buf, st) : 0;
		return rc ? rc : PUMP_MORE;
	default:
		return rc;
	}
}

static void *pump_main(void *arg)
{
	struct pump *p = arg;
	struct gaz_status st = {0};
	char *buf = gazctl_xmalloc(READ_BUF_BYTES);
	int rc;

	while ((rc = pump_step(p, buf, &st)) == PUMP_MORE)
		;
	if (rc == GAZ_READ_TAIL || rc == GAZ_ECANCELLED || rc == GAZ_EOF) {
		gaz_info("read finished", "journal=%s offset=%lld", gaz_reader_journal(p->r),
			 (long long)gaz_reader_offset(p->r));
	} else {
		pthread_mutex_lock(&p->out->err_mu);
		if (!p->out->err.code)
			gaz_status_set(&p->out->err, rc, "error reading fragment of journal \"%s\": %s",
				       gaz_reader_journal(p->r), st.msg);
		pthread_mutex_unlock(&p->out->err_mu);
		gaz_client_cancel(p->out->c); /* stop the others */
	}
	free(buf);
	return NULL;
}

/* ---- offsets and output files --------------------------------------------------- */

static int load_offsets(struct gazctl_offsets *offs, struct gaz_status *st)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	int rc;

	if (!opt.offsets || !*opt.offsets)
		return 0;
	if (!(f = fopen(opt.offsets, "rb")))
		return gaz_status_set(st, GAZ_EIO, "failed to open offsets for reading: %s: %s",
				      opt.offsets, strerror(errno));
	for (size_t n; (text = gazctl_xrealloc(text, len + 65536)),
		       (n = fread(text + len, 1, 65536, f)) > 0;)
		len += n;
	fclose(f);
	rc = gazctl_offsets_parse(text, len, offs, st);
	free(text);
	if (rc == 0 && opt.offsets_out && !strcmp(opt.offsets, opt.offsets_out)) {
		char prev[4096];
		snprintf(prev, sizeof(prev), "%s.previous", opt.offsets);
		if (rename(opt.offsets, prev))
			rc = gaz_status_set(st, GAZ_EIO, "failed to rename previous offsets: %s",
					    strerror(errno));
	}
	return rc;
}

static int save_offsets(const struct gazctl_offsets *offs, struct gaz_status *st)
{
	char tmp[4096];
	FILE *f;
	int bad;

	if (!opt.offsets_out || !*opt.offsets_out)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.temp", opt.offsets_out);
	if (!(f = fopen(tmp, "wb")))
		return gaz_status_set(st, GAZ_EIO, "failed to open offsets for writing: %s",
				      strerror(errno));
	gazctl_offsets_write(offs, f);
	bad = fflush(f) || fsync(fileno(f));
	bad = fclose(f) || bad;
	if (bad || rename(tmp, opt.offsets_out))
		return gaz_status_set(st, GAZ_EIO, "failed to write offsets to %s: %s",
				      opt.offsets_out, strerror(errno));
	return 0;
}

static int open_output(struct output *o, struct gaz_status *st)
{
	bool file = strcmp(opt.output, "-") != 0;

	o->fd = file ? open(opt.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)
		     : STDOUT_FILENO;
	if (o->fd < 0)
		return gaz_status_set(st, GAZ_EIO, "failed to open output file: %s: %s",
				      opt.output, strerror(errno));
	gazctl_progress_init(&o->progress, "read",
			     isatty(STDERR_FILENO) && (file || !isatty(STDOUT_FILENO)));
	return 0;
}

/* ---- the command ----------------------------------------------------------------- */

static int start_pumps(struct gaz_client *c, const Protocol__ListResponse *list,
		       struct gazctl_offsets *offs, struct output *out, struct pump *pumps,
		       size_t *np, struct gaz_status *st)
{
	int rc;

	for (size_t i = 0; i < list->n_journals; i++) {
		const char *name = list->journals[i]->spec->name;
		struct gaz_read_opts ro = {.journal = name, .offset = opt.tail ? -1 : 0,
					   .block = opt.block, .retry = true,
					   .do_not_proxy = gazctl_cfg.broker_cache_size > 0,
					   .begin_mod_time = opt.from};
		struct pump *p = &pumps[*np];

		if (gazctl_is_full_suspended(list->journals[i]))
			continue;
		gazctl_offsets_get(offs, name, &ro.offset);
		if ((rc = gaz_reader_new(c, &ro, &p->r, st)))
			return rc;
		p->out = out;
		p->start = ro.offset;
		gaz_info("read started", "journal=%s offset=%lld", name, (long long)ro.offset);
		if (pthread_create(&p->thread, NULL, pump_main, p)) {
			gaz_reader_free(p->r);
			return gaz_status_set(st, GAZ_ENOMEM, "cannot start reader thread");
		}
		(*np)++;
	}
	return 0;
}

/* finish joins the pumps and records their final offsets. */
static void finish(struct pump *pumps, size_t np, struct gazctl_offsets *offs)
{
	for (size_t i = 0; i < np; i++) {
		int64_t off;

		pthread_join(pumps[i].thread, NULL);
		off = gaz_reader_offset(pumps[i].r);
		gazctl_offsets_set(offs, gaz_reader_journal(pumps[i].r),
				   off < 0 ? pumps[i].start : off);
		gaz_reader_free(pumps[i].r);
	}
}

static int run(struct gaz_client *c, struct gaz_status *st)
{
	struct gazctl_offsets offs = {0};
	Protocol__ListResponse *list = NULL;
	struct output out = {.c = c, .fd = -1};
	struct pump *pumps = NULL;
	size_t np = 0;
	int rc;

	pthread_mutex_init(&out.mu, NULL);
	pthread_mutex_init(&out.err_mu, NULL);
	if ((rc = load_offsets(&offs, st)) || (rc = open_output(&out, st)) ||
	    (rc = gazctl_list_selector(c, opt.selector, &list, st)))
		goto done;
	if (list->n_journals == 0)
		gaz_warn("no journals were matched by the selector", "selector=%s", opt.selector);
	pumps = gazctl_xcalloc(list->n_journals, sizeof(*pumps));
	if ((rc = start_pumps(c, list, &offs, &out, pumps, &np, st)))
		gaz_client_cancel(c);
	finish(pumps, np, &offs);
	gazctl_progress_done(&out.progress, atomic_load(&out.bytes));
	if (!rc && out.err.code)
		rc = gaz_status_set(st, out.err.code, "%s", out.err.msg);
	if (out.fd > STDOUT_FILENO) {
		/* fsync fails with EINVAL on pipes and devices: nothing to sync */
		bool bad = fsync(out.fd) && errno != EINVAL && errno != EROFS;
		bad = close(out.fd) || bad;
		if (!rc && bad)
			rc = gaz_status_set(st, GAZ_EIO, "failed to sync output file: %s",
					    strerror(errno));
	}
	out.fd = -1;
	if (!rc)
		rc = save_offsets(&offs, st);
done:
	if (out.fd > STDOUT_FILENO)
		close(out.fd);
	if (list)
		protobuf_c_message_free_unpacked(&list->base, NULL);
	free(pumps);
	gazctl_offsets_release(&offs);
	return rc;
}

const struct gazctl_cmd gazctl_cmd_read = {
	.name = "read",
	.summary = "Read journal contents",
	.description = "Read the contents of one or more journals.\n\n"
		       "A label --selector is required, and determines the set of journals which "
		       "are read.\nMatched journals are read concurrently, and their content is "
		       "multiplexed into\nthe output file (or stdout) in whole-fragment chunks.\n\n"
		       "Journals are read until the write-head is reached, or gazctl is signaled. "
		       "If\n--block is specified, reads block at the write-head and stream content "
		       "as it\ncommits. --offsets supplies initial offsets (a JSON map of journal "
		       "to offset),\nand --offsets-out receives the final ones.",
	.flags = flags,
	.needs_client = true,
	.cancellable = true,
	.run = run,
};
