/*
 * stores.c - a small table of open stores keyed by URL, and fragment
 * reads through them. See stores.h. Stores are opened on first use and
 * kept for the life of the process (a broker uses few distinct URLs).
 */
#include "broker/stores.h"

#include <stdlib.h>
#include <string.h>

#include "fragment/codec.h"

struct store_slot {
	char *url;
	struct gaz_store *store;
};

static pthread_mutex_t stores_mu = PTHREAD_MUTEX_INITIALIZER;
static struct store_slot *slots;
static size_t n_slots;

int gaz_stores_get(struct gaz_broker *b, const char *url, struct gaz_store **out,
		   struct gaz_status *st)
{
	struct store_slot *ns;
	int rc = 0;

	pthread_mutex_lock(&stores_mu);
	for (size_t i = 0; i < n_slots; i++) {
		if (!strcmp(slots[i].url, url)) {
			*out = gaz_store_ref(slots[i].store);
			pthread_mutex_unlock(&stores_mu);
			return 0;
		}
	}
	rc = gaz_store_open(url, b->cfg.file_root, out, st);
	if (!rc && (ns = realloc(slots, (n_slots + 1) * sizeof(*slots)))) {
		slots = ns;
		slots[n_slots].url = strdup(url);
		slots[n_slots].store = gaz_store_ref(*out);
		n_slots++;
	}
	pthread_mutex_unlock(&stores_mu);
	return rc;
}

void gaz_stores_close_all(void)
{
	pthread_mutex_lock(&stores_mu);
	for (size_t i = 0; i < n_slots; i++) {
		free(slots[i].url);
		gaz_store_unref(slots[i].store);
	}
	free(slots);
	slots = NULL;
	n_slots = 0;
	pthread_mutex_unlock(&stores_mu);
}

static int add_fragment(void *arg, const struct gaz_fragment *f, struct gaz_status *st)
{
	return gaz_coverset_add(arg, f, NULL, NULL, st);
}

int gaz_stores_list_fragments(struct gaz_broker *b, const char *url, const char *journal,
			      struct gaz_coverset *out, struct gaz_status *st)
{
	struct gaz_store *s = NULL;
	int rc = gaz_stores_get(b, url, &s, st);

	if (rc)
		return rc;
	rc = gaz_store_list_fragments(s, journal, add_fragment, out, st);
	gaz_store_unref(s);
	return rc;
}

struct gaz_fragment_reader {
	struct gaz_store_reader *raw;
	struct gaz_decoder *dec;
	int64_t remaining;     /* decompressed bytes left to the fragment end */
};

void gaz_fragment_reader_close(struct gaz_fragment_reader *r)
{
	if (!r)
		return;
	gaz_decoder_free(r->dec);
	gaz_store_reader_close(r->raw);
	free(r);
}

int gaz_fragment_reader_read(struct gaz_fragment_reader *r, void *buf, size_t cap, size_t *n,
			     struct gaz_status *st)
{
	int rc;

	if (r->remaining <= 0)
		return GAZ_EOF;
	if ((int64_t)cap > r->remaining)
		cap = (size_t)r->remaining;
	rc = gaz_decoder_read(r->dec, buf, cap, n, st);
	if (rc == GAZ_EOF)
		return gaz_status_set(st, GAZ_EIO, "fragment ended %lld bytes early",
				      (long long)r->remaining);
	if (!rc)
		r->remaining -= (int64_t)*n;
	return rc;
}

int gaz_fragment_reader_finish(struct gaz_fragment_reader *r, struct gaz_status *st)
{
	uint8_t extra[1];
	size_t n = 0;
	int rc;

	if (r->remaining > 0)
		return gaz_status_set(st, GAZ_EIO, "fragment not read to its end (%lld bytes left)",
				      (long long)r->remaining);
	rc = gaz_decoder_read(r->dec, extra, sizeof(extra), &n, st);
	if (rc == GAZ_EOF)
		return 0;
	if (rc == 0)
		return gaz_status_set(st, GAZ_EPROTO, "did not read EOF at expected Fragment.End");
	return rc;
}

/* Discards decompressed bytes up to the wanted offset. */
static int skip(struct gaz_fragment_reader *r, int64_t n, struct gaz_status *st)
{
	char buf[32768];

	while (n > 0) {
		size_t got = 0;
		int rc = gaz_fragment_reader_read(r, buf, n < (int64_t)sizeof(buf) ? (size_t)n : sizeof(buf),
						  &got, st);
		if (rc)
			return rc;
		n -= (int64_t)got;
	}
	return 0;
}

int gaz_stores_open_fragment(struct gaz_broker *b, const struct gaz_fragment *f, int64_t offset,
			     struct gaz_fragment_reader **out, struct gaz_status *st)
{
	char path[GAZ_FRAGMENT_PATH_MAX];
	struct gaz_fragment_reader *r = calloc(1, sizeof(*r));
	struct gaz_store *s = NULL;
	int codec = f->codec, rc;

	if (!r)
		return gaz_status_set(st, GAZ_ENOMEM, "out of memory");
	if ((rc = gaz_fragment_content_path(f, path, sizeof(path), st)) ||
	    (rc = gaz_stores_get(b, f->backing_store, &s, st)))
		goto fail;
	rc = gaz_store_get(s, path, 0, &r->raw, st);
	gaz_store_unref(s);
	if (rc)
		goto fail;
	/* Offload-decompression objects are stored gzip with Content-Encoding:
	 * gzip. Stores answer them as stored (S3, MinIO, SeaweedFS) or decode
	 * them for a client that does not accept gzip (GCS); the answer's own
	 * Content-Encoding says which, so the content is decoded exactly once
	 * (case BR-13). File stores keep no metadata: always gzip. */
	if (codec == PROTOCOL__COMPRESSION_CODEC__GZIP_OFFLOAD_DECOMPRESSION)
		codec = r->raw->fd >= 0 || strstr(r->raw->content_encoding, "gzip")
				? PROTOCOL__COMPRESSION_CODEC__GZIP
				: PROTOCOL__COMPRESSION_CODEC__NONE;
	if ((rc = gaz_decoder_new(codec, gaz_store_reader_read, r->raw, &r->dec, st)))
		goto fail;
	r->remaining = f->end - f->begin;
	if ((rc = skip(r, offset - f->begin, st)))
		goto fail;
	*out = r;
	return 0;
fail:
	gaz_fragment_reader_close(r);
	return rc;
}

int gaz_stores_sign(struct gaz_broker *b, const struct gaz_fragment *f, int64_t ttl_s, char **url,
		    struct gaz_status *st)
{
	char path[GAZ_FRAGMENT_PATH_MAX];
	struct gaz_store *s = NULL;
	int rc;

	if ((rc = gaz_fragment_content_path(f, path, sizeof(path), st)) ||
	    (rc = gaz_stores_get(b, f->backing_store, &s, st)))
		return rc;
	rc = gaz_store_sign_get(s, path, ttl_s, url, st);
	gaz_store_unref(s);
	return rc;
}
