/*
 * journals.h - Gazette's broker keyspace on top of keyspace.h: decoding of
 * items, members and assignments (facts §4.1), and the routes derived from
 * assignments (§4.4).
 *
 * Layout under root R (--etcd.prefix), for brokers (a consumer
 * application's is the same with shards for journals, ShardSpec,
 * ConsumerSpec and ReplicaStatus values):
 *   R/items/<journal>                      JournalSpec bytes
 *   R/members/<zone>#<suffix>              BrokerSpec bytes, member lease
 *   R/assign/<journal>#<zone>#<suffix>#<slot>   Route bytes or "", the
 *                                          assigned member's lease
 * '#' sorts below every legal name character, so the assignments of one
 * journal are contiguous and ordered by (zone, suffix).
 */
#ifndef GAZ_KEYSPACE_JOURNALS_H
#define GAZ_KEYSPACE_JOURNALS_H

#include "keyspace/keyspace.h"
#include "consumer.pb-c.h"
#include "protocol.pb-c.h"

enum gaz_ks_kind { GAZ_KS_ITEM = 1, GAZ_KS_MEMBER, GAZ_KS_ASSIGN };

/* The decoded value of one key, of a brokers' keyspace (journals) or a
 * consumers' one (shards). Strings and messages are owned. */
struct gaz_ks_value {
	enum gaz_ks_kind kind;
	char *item;                    /* ITEM, ASSIGN: the journal or the shard id */
	char *zone, *suffix;           /* MEMBER, ASSIGN */
	int64_t slot;                  /* ASSIGN */
	int64_t item_limit;            /* MEMBER: journal_limit or shard_limit */
	bool exiting;                  /* MEMBER */
	/* Brokers' keyspace: */
	Protocol__JournalSpec *spec;   /* ITEM */
	Protocol__BrokerSpec *broker;  /* MEMBER */
	Protocol__Route *route;        /* ASSIGN; NULL for an empty value */
	/* Consumers' keyspace: */
	Consumer__ShardSpec *shard;    /* ITEM */
	Consumer__ConsumerSpec *consumer; /* MEMBER */
	Consumer__ReplicaStatus *status; /* ASSIGN; an empty value decodes as IDLE */
};

/* gaz_ks_assign_value: an ASSIGN value's message (its Route or its
 * ReplicaStatus), or NULL for an empty Route value. Borrowed. */
const ProtobufCMessage *gaz_ks_assign_value(const struct gaz_ks_value *v);

/* gaz_journals_keyspace_new makes the mirror of `root` ("/gazette/cluster",
 * no trailing slash) with Gazette's decoders. Returns NULL on OOM. */
struct gaz_keyspace *gaz_journals_keyspace_new(struct gaz_etcd *etcd, const char *root);

/* gaz_shards_keyspace_new makes the mirror of a consumer application's
 * `root` (its --etcd.prefix, e.g. "/gazette/consumers/stream-sum", no
 * trailing slash) with Gazette's consumer decoders (consumer/key_space.go):
 * items are ShardSpecs (validated, id equal to the key), members
 * ConsumerSpecs, assignment values ReplicaStatus (empty: IDLE). Returns
 * NULL on OOM. */
struct gaz_keyspace *gaz_shards_keyspace_new(struct gaz_etcd *etcd, const char *root);

/* Key builders; each returns a malloc'd string (free with free) or NULL. */
char *gaz_ks_item_key(const char *root, const char *journal);
char *gaz_ks_member_key(const char *root, const char *zone, const char *suffix);
char *gaz_ks_assign_key(const char *root, const char *journal, const char *zone,
			const char *suffix, int64_t slot);

/* A route derived from a journal's assignments, endpoints attached. */
struct gaz_route {
	size_t n;                      /* members */
	char **zone, **suffix;         /* owned arrays of owned strings */
	char **endpoint;               /* "" when the member key is missing */
	int64_t *slot;                 /* assignment slot per member */
	int64_t *mod_revision;         /* assignment key mod revision */
	bool *consistent;              /* stored Route equivalent to this route */
	int primary;                   /* index of the slot-0 member or -1 */
};

/* gaz_ks_key_journal: the journal an item or assignment key under `root`
 * (root_len bytes) names: a pointer into `key` and its length in *len (not
 * NUL-terminated); NULL for any other key. */
const char *gaz_ks_key_journal(const char *root, size_t root_len, const char *key, size_t *len);

struct gaz_strset;
/* gaz_ks_note_journal adds to `set` the journal that `key` names (as
 * gaz_ks_key_journal), for readers of the keyspace's change log. Returns
 * 1 (a journal key, noted or already there), 0 (not a journal key), or -1
 * when out of memory or the name is too long (the reader must rescan). */
int gaz_ks_note_journal(struct gaz_strset *set, const char *root, size_t root_len, const char *key);

/* With the keyspace read-locked: the item of `journal` or NULL. */
const struct gaz_ks_entry *gaz_ks_item(struct gaz_keyspace *ks, const char *root,
				       const char *journal);
/* With the keyspace read-locked: the member entry or NULL. */
const struct gaz_ks_entry *gaz_ks_member(struct gaz_keyspace *ks, const char *root,
					 const char *zone, const char *suffix);

/* gaz_route_build fills `r` from the assignments of `journal` (read lock
 * held). Returns 0 or GAZ_ENOMEM. Release with gaz_route_release. */
int gaz_route_build(struct gaz_keyspace *ks, const char *root, const char *journal,
		    struct gaz_route *r);
void gaz_route_release(struct gaz_route *r);

/* gaz_route_index: index of member (zone, suffix) or -1. */
int gaz_route_index(const struct gaz_route *r, const char *zone, const char *suffix);

/* gaz_route_equivalent: same members and primary (endpoints ignored),
 * Gazette's Route.Equivalent. */
bool gaz_route_equivalent(const struct gaz_route *a, const struct gaz_route *b);

/* gaz_route_to_proto builds a Protocol__Route whose strings point into `r`
 * (borrowed: valid while r is). With endpoints when `with_endpoints`.
 * Free with gaz_route_proto_free (frees arrays, not strings). */
Protocol__Route *gaz_route_to_proto(const struct gaz_route *r, bool with_endpoints);
void gaz_route_proto_free(Protocol__Route *p);

/* gaz_header_new builds a protocol.Header: the etcd header `eh`, the
 * process id (zone, suffix; NULL leaves it empty) and the route `r` with
 * endpoints (NULL: an empty route). Strings are borrowed from the
 * arguments, valid while they are. NULL when out of memory. Free with
 * gaz_header_free. */
struct gaz_etcd_header;
Protocol__Header *gaz_header_new(const struct gaz_etcd_header *eh, const char *zone, const char *suffix,
				 const struct gaz_route *r);
void gaz_header_free(Protocol__Header *h);

/* gaz_pb_copy deep-copies any protobuf-c message through its wire form.
 * Free the copy with protobuf_c_message_free_unpacked. NULL on OOM. */
ProtobufCMessage *gaz_pb_copy(const ProtobufCMessage *m);

/* gaz_ks_spec_copy returns a copy of the JournalSpec of `journal` (taking
 * the keyspace read lock itself), or NULL when there is none. */
Protocol__JournalSpec *gaz_ks_spec_copy(struct gaz_keyspace *ks, const char *root,
					const char *journal);

/* gaz_proto_route_equivalent compares a stored Route to a derived one. */
bool gaz_proto_route_equivalent(const Protocol__Route *p, const struct gaz_route *r);

#endif
