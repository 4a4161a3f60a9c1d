/* release.h - recording the write heads of journals released at exit.
 * See release.c for why. */
#ifndef GAZ_BROKER_RELEASE_H
#define GAZ_BROKER_RELEASE_H

#include "broker/broker.h"

struct gaz_release_head {
	char *journal;   /* owned by the caller */
	int64_t head;    /* the spool's end when it was torn down */
};

/* gaz_release_record_heads writes suspend.offset = head into each journal
 * this broker is still primary of, when that raises the offset. Errors are
 * logged; a journal left without the record needs `gazctl journals
 * reset-head`, as with Gazette. */
void gaz_release_record_heads(struct gaz_broker *b, const struct gaz_release_head *heads, size_t n);

#endif
