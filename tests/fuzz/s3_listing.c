/*
 * s3_listing.c - fuzz target: an S3 ListObjectsV2 response body as the S3
 * store reads it (lib/store/s3_xml.c on expat: gaz__s3_parse_list, the
 * LastModified times), the objects it yields below the listed prefix
 * (s3.c's list_emit, included here), and each object's key as a fragment
 * name (lib/fragment/fragment.c gaz_fragment_parse_path, as store.c's
 * fragment listing calls it). The same body also goes through the error
 * and multipart-upload parsers, which read other S3 responses.
 *
 * Input: the response body.
 */
#include "fuzz.h"

#include "../../lib/store/s3.c"

static int on_obj(void *arg, const struct gaz_store_obj *obj, struct gaz_status *st)
{
	struct gaz_fragment f;
	struct gaz_status perr = {0};

	(void)arg;
	(void)st;
	if (gaz_fragment_parse_path("p/j", obj->path, &f, &perr) == 0)
		gaz_fragment_release(&f);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gaz_s3_list_page page;
	struct gaz_status st = {0};
	char code[64], msg[256], upload[256];

	if (gaz__s3_parse_list((const char *)data, size, &page, &st) == 0) {
		list_emit(&page, "p/j/", on_obj, NULL, &st);
		gaz__s3_list_page_release(&page);
	}
	gaz__s3_parse_error((const char *)data, size, code, sizeof(code), msg, sizeof(msg));
	gaz__s3_parse_upload_id((const char *)data, size, upload, sizeof(upload));
	return 0;
}
