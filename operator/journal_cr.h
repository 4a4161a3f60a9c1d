/*
 * journal_cr.h - the JournalSpec custom resource (crds/
 * gazette-c.dev_journalspecs.yaml) and Gazette's JournalSpec protobuf:
 * conversion both ways and the comparison drift correction uses.
 *
 * CR .spec fields (camelCase JSON) and the protobuf fields they fill:
 *   name -> name, replication -> replication,
 *   labels [{name, value}] -> labels (sorted by name then value, as a
 *     LabelSet must be; duplicates dropped),
 *   fragment.length, .compressionCodec (enum name), .stores,
 *   .refreshInterval / .retention / .flushInterval (Go duration strings,
 *   "10m", "1h30m", "0") -> fragment.*, .pathPostfixTemplate,
 *   flags ("O_RDONLY" | "O_WRONLY" | "O_RDWR"; absent = 0),
 *   maxAppendRate -> max_append_rate.
 * `suspend` is not a CR field: it is broker-owned state (brokers write it
 * when suspending or releasing a journal), so the reconciler carries the
 * etcd value over unchanged. `deletionPolicy` is operator-only.
 *
 * Pure functions; thread-safe.
 */
#ifndef GAZ_OPERATOR_JOURNAL_CR_H
#define GAZ_OPERATOR_JOURNAL_CR_H

#include <stdbool.h>

#include <jansson.h>

#include "common/err.h"
#include "protocol.pb-c.h"

enum gaz_deletion_policy {
	GAZ_DELETION_RETAIN = 0,
	GAZ_DELETION_DELETE = 1,
};

/* gaz_journal_cr_to_spec converts a CR's .spec object (borrowed) into a
 * new JournalSpec (*out, every part heap-allocated: free with
 * protobuf_c_message_free_unpacked(&(*out)->base, NULL)). The result is
 * NOT validated against Gazette's rules (gaz_validate_journal_spec does
 * that). Errors: GAZ_EINVAL naming the field ("spec.fragment.retention:
 * time: unknown unit \"d\" in duration \"7d\""), GAZ_ENOMEM. */
int gaz_journal_cr_to_spec(const json_t *spec, Protocol__JournalSpec **out,
			   struct gaz_status *st);

/* gaz_journal_spec_to_cr converts a JournalSpec (borrowed) into a new CR
 * .spec object (durations as Go text, "10m0s"; zero values omitted;
 * suspend dropped). NULL on OOM. Converting that back yields an equal spec
 * (gaz_journal_spec_equal) without its suspend. */
json_t *gaz_journal_spec_to_cr(const Protocol__JournalSpec *spec);

/* gaz_journal_cr_policy reads .spec.deletionPolicy (absent = Retain). */
enum gaz_deletion_policy gaz_journal_cr_policy(const json_t *spec);

/* gaz_journal_spec_equal compares two specs by value: absent
 * submessages, durations and strings equal their zero values, so a spec
 * read back from etcd (whatever wrote it) equals the one we would write
 * exactly when no write is needed. Suspend is compared too. */
bool gaz_journal_spec_equal(const Protocol__JournalSpec *a, const Protocol__JournalSpec *b);

/* Shared with shard_cr.c (ShardSpec labels have the same CR shape). */

/* gaz_cr_labels_to_pb converts a CR label list ([{name, value}], NULL =
 * none; borrowed) into a new LabelSet (*out, always set, also on error;
 * free with protobuf_c_message_free_unpacked), sorted by (name, value)
 * without exact duplicates, as a LabelSet must be. Errors: GAZ_EINVAL
 * naming the field, GAZ_ENOMEM. */
int gaz_cr_labels_to_pb(const json_t *arr, Protocol__LabelSet **out, struct gaz_status *st);

/* gaz_cr_labels_from_pb sets o.labels from `set` (nothing when empty).
 * 0, or -1 on OOM. */
int gaz_cr_labels_from_pb(json_t *o, const Protocol__LabelSet *set);

/* Codec and flag names as the CR spells them (Gazette's enum names). */
const char *gaz_codec_name(int codec);
const char *gaz_suspend_level_name(int level);

#endif
