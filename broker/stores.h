/*
 * stores.h - the broker's open fragment stores, by URL, and the operations
 * the broker runs on fragments through them: list into an index, open a
 * persisted fragment for reading (decompressed), sign a direct-read URL.
 */
#ifndef GAZ_BROKER_STORES_H
#define GAZ_BROKER_STORES_H

#include "broker/broker.h"
#include "fragment/coverset.h"
#include "store/store.h"

/* gaz_stores_get opens (or reuses) the store of `url`. Returns 0 and *out
 * with a reference (gaz_store_unref), or GAZ_EINVAL/GAZ_ENOMEM. */
int gaz_stores_get(struct gaz_broker *b, const char *url, struct gaz_store **out,
		   struct gaz_status *st);

/* gaz_stores_list_fragments adds every fragment of `journal` listed in the
 * store of `url` to `out`. */
int gaz_stores_list_fragments(struct gaz_broker *b, const char *url, const char *journal,
			      struct gaz_coverset *out, struct gaz_status *st);

struct gaz_fragment_reader;

/* gaz_stores_open_fragment opens persisted fragment `f` and positions the
 * decompressed stream at journal offset `offset` (begin <= offset < end).
 * Returns 0 and *out, GAZ_ENOTFOUND, GAZ_EIO, GAZ_EINVAL. */
int gaz_stores_open_fragment(struct gaz_broker *b, const struct gaz_fragment *f, int64_t offset,
			     struct gaz_fragment_reader **out, struct gaz_status *st);
/* Reads decompressed bytes: 0 with *n > 0, GAZ_EOF at the fragment end,
 * GAZ_EIO ("fragment ended N bytes early") when the object decodes to
 * fewer bytes than the fragment spans, or the decoder's error. */
int gaz_fragment_reader_read(struct gaz_fragment_reader *r, void *buf, size_t cap, size_t *n,
			     struct gaz_status *st);
/* gaz_fragment_reader_finish checks, once every byte up to the fragment's
 * end was read, that the object ends there too: its decoded stream must
 * be complete (a gzip member's trailer, a zstd frame's end) and hold
 * nothing more. Returns 0, GAZ_EPROTO "did not read EOF at expected
 * Fragment.End" (extra bytes or another member), or the decoder's error
 * (e.g. "unexpected EOF" for a cut trailer). As Gazette's FragmentReader
 * (broker/client/reader.go), which the broker's own reads go through. */
int gaz_fragment_reader_finish(struct gaz_fragment_reader *r, struct gaz_status *st);
void gaz_fragment_reader_close(struct gaz_fragment_reader *r);

/* gaz_stores_sign signs a GET of persisted fragment `f` valid ttl_s. */
int gaz_stores_sign(struct gaz_broker *b, const struct gaz_fragment *f, int64_t ttl_s, char **url,
		    struct gaz_status *st);

/* gaz_stores_health reports the health of the store of `url` (borrowed)
 * as its periodic checks last found it (facts §5.7; the PUT/GET/LIST/sign/
 * fetch probe of gaz_store_health_check, or the store's open error). The
 * first call for a URL starts its checks, the first at once; every call
 * marks it used (checks stop after an hour unused, as Gazette sweeps).
 * Until a check has completed it waits up to `wait_ms` for the first.
 * Returns 0 healthy; the last check's error code with its text in st;
 * GAZ_ETIMEDOUT "first health check hasn't completed yet"; GAZ_ENOMEM.
 * Thread-safe; blocks in a condition wait only (call with no journal
 * lock held). As Gazette's ActiveStore.HealthStatus. */
int gaz_stores_health(struct gaz_broker *b, const char *url, int64_t wait_ms,
		      struct gaz_status *st);

/* gaz_stores_metrics_init registers the health metrics, so that
 * gazette_store_active reads 0 from the start as Gazette's does. */
void gaz_stores_metrics_init(void);

/* gaz_stores_close_all stops health checks and drops every store. */
void gaz_stores_close_all(void);

#endif
