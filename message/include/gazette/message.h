/*
 * gazette/message.h - the message layer: UUIDs, clocks and producers, and
 * the read-committed sequencer (Gazette's package `message`).
 *
 * Brokers never parse messages; this layer lives in clients. Each message
 * carries a UUID (RFC 4122 version 1) whose node field is the 6-byte
 * ProducerID of its publisher, whose 60-bit timestamp and 4-bit clock
 * sequence are the publisher's Clock, and whose low 10 bits of the clock
 * sequence field are flags: OUTSIDE_TXN (committed at once), CONTINUE_TXN
 * (part of an open transaction) or ACK_TXN (commits the producer's
 * earlier CONTINUE_TXN messages of that journal up to its clock). A
 * read-committed reader queues every message it reads into a sequencer,
 * which delivers each committed message once, in journal order, and
 * drops duplicates and rolled-back messages.
 *
 * Byte layout of a UUID from producer P, clock C and flags F
 * (spec/gazette-facts.md §10.1, Gazette's message.BuildUUID):
 *
 *   bytes 0-3    big-endian uint32(C >> 4)          time_low
 *   bytes 4-5    big-endian uint16(C >> 36)         time_mid
 *   bytes 6-7    big-endian uint16(C >> 52) | 0x1000  time_hi, version 1
 *   bytes 8-9    big-endian ((C & 0xF) << 10) | F | 0x8000
 *                                 variant 10, clock sequence, flags
 *   bytes 10-15  P                                 node
 *
 * Thread safety: a gaz_clock may be ticked and updated from any thread
 * (atomics). A gaz_sequencer belongs to one thread (the reader's).
 */
#ifndef GAZETTE_MESSAGE_H
#define GAZETTE_MESSAGE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* ---- UUIDs, clocks, producers ----------------------------------------- */

/* A message UUID, 16 bytes in RFC 4122 order. */
typedef struct gaz_uuid {
	uint8_t b[16];
} gaz_uuid;

/* A publisher's identity: 6 random bytes with the multicast bit set, as
 * RFC 4122 §4.5 asks of a node id that is not a MAC address. */
typedef struct gaz_producer_id {
	uint8_t b[6];
} gaz_producer_id;

/* A Clock: the 60-bit RFC 4122 timestamp (100 ns since 1582-10-15) in the
 * high bits, a 4-bit sequence counter in the low 4 (Gazette's
 * message.Clock). Clocks of one producer only move forward. */
typedef uint64_t gaz_clock_t;

/* A clock shared by threads (a publisher's). Zero-initialised is 0. */
typedef _Atomic uint64_t gaz_clock;

enum {
	GAZ_FLAG_OUTSIDE_TXN = 0x0,
	GAZ_FLAG_CONTINUE_TXN = 0x1,
	GAZ_FLAG_ACK_TXN = 0x2,
	GAZ_FLAGS_MASK = 0x3FF, /* the 10 bits a UUID carries */
};

/* Length of a UUID's canonical text, 8-4-4-4-12 lowercase hex, without
 * the NUL. */
#define GAZ_UUID_STR_LEN 36

/* gaz_producer_id_new fills *out from the system's cryptographic random
 * source (OpenSSL RAND_bytes) and sets the multicast bit (b[0] |= 1), as
 * Gazette's NewProducerID. Returns 0, or GAZ_EIO when no randomness is
 * available (out untouched). One per publishing process. */
int gaz_producer_id_new(gaz_producer_id *out);

/* gaz_clock_from_unix: the Clock of a wall time (seconds and nanoseconds
 * since the Unix epoch; nsec in [0, 1e9)), precise to 100 ns, sequence
 * counter 0 (Gazette's message.NewClock). Times before 1582 are not
 * representable and give 0. */
gaz_clock_t gaz_clock_from_unix(int64_t sec, int64_t nsec);

/* gaz_clock_to_unix: the wall time of a Clock, to 100 ns; the sequence
 * counter is ignored (Gazette's Clock.AsTime). */
void gaz_clock_to_unix(gaz_clock_t c, int64_t *sec, int64_t *nsec);

/* gaz_clock_update moves *c forward to the wall time (sec, nsec) when that
 * is later than its value, resetting the sequence counter; it never moves
 * a clock back (Gazette's Clock.Update). Thread-safe. */
void gaz_clock_update(gaz_clock *c, int64_t sec, int64_t nsec);

/* gaz_clock_update_now: gaz_clock_update with CLOCK_REALTIME. */
void gaz_clock_update_now(gaz_clock *c);

/* gaz_clock_tick advances *c by 1 µs (160 Clock units: the timestamp moves
 * 10 steps of 100 ns and the counter stays) and returns the new value
 * (Gazette's Clock.Tick). Each UUID a publisher builds takes one tick, so
 * its clocks are unique and increasing. Thread-safe. */
gaz_clock_t gaz_clock_tick(gaz_clock *c);

/* gaz_uuid_build: the UUID of (producer, clock, flags) in the layout
 * above. Returns GAZ_EINVAL if flags has bits beyond GAZ_FLAGS_MASK (out
 * untouched), else 0. */
int gaz_uuid_build(gaz_uuid *out, const gaz_producer_id *producer, gaz_clock_t clock, unsigned flags);

/* The parts of a UUID (Gazette's GetClock, GetFlags, GetProducerID). Any
 * 16 bytes decode; a zero UUID has clock 0. */
gaz_clock_t gaz_uuid_clock(const gaz_uuid *u);
unsigned gaz_uuid_flags(const gaz_uuid *u);
gaz_producer_id gaz_uuid_producer(const gaz_uuid *u);
bool gaz_uuid_is_zero(const gaz_uuid *u);

/* gaz_uuid_format writes the canonical text (8-4-4-4-12, lowercase) and a
 * NUL into out, which holds at least GAZ_UUID_STR_LEN + 1 bytes. */
void gaz_uuid_format(const gaz_uuid *u, char out[GAZ_UUID_STR_LEN + 1]);

/* gaz_uuid_parse reads the text forms Go's github.com/google/uuid accepts
 * (so messages written by Gazette's applications parse): canonical
 * 8-4-4-4-12, with "urn:uuid:" before it, in braces, or 32 hex digits
 * without dashes; either case. `len` bytes of `s` (no NUL needed).
 * Returns 0, or GAZ_EINVAL with a reason in st (out untouched). */
int gaz_uuid_parse(const char *s, size_t len, gaz_uuid *out, struct gaz_status *st);


/* ---- framings and message types --------------------------------------- */

/* How messages are laid out in a journal, chosen by its content-type
 * label (spec/gazette-facts.md §10.3):
 *   GAZ_FRAMING_JSON   "application/x-ndjson": one JSON document per line,
 *                      ended by '\n';
 *   GAZ_FRAMING_FIXED  "application/x-protobuf-fixed": an 8-byte header,
 *                      the magic 66 33 93 36 and the payload's length as
 *                      a little-endian uint32, then the payload. */
enum gaz_framing {
	GAZ_FRAMING_JSON = 1,
	GAZ_FRAMING_FIXED = 2,
};

#define GAZ_CONTENT_TYPE_JSON "application/x-ndjson"
#define GAZ_CONTENT_TYPE_FIXED "application/x-protobuf-fixed"
#define GAZ_FIXED_HEADER_LEN 8
/* Frames longer than this are taken as corruption (a fixed header's
 * length) or refused (a JSON line), so a reader's buffer stays bounded. */
#define GAZ_MESSAGE_MAX_LEN (64u << 20)
/* Where a JSON message carries its UUID unless told otherwise (RFC 6901
 * pointer; Estuary's documents keep it there). */
#define GAZ_JSON_UUID_POINTER "/_meta/uuid"

/* gaz_framing_for_content_type: the framing of a content-type label value
 * (parameters after ';' ignored, as a media type). Returns 0, or
 * GAZ_EINVAL naming the type (text/csv and recovery logs are not message
 * framings here). */
int gaz_framing_for_content_type(const char *content_type, enum gaz_framing *out, struct gaz_status *st);

/* gaz_framing_content_type: the label value of a framing. */
const char *gaz_framing_content_type(enum gaz_framing f);

/* One frame found at the start of a byte range. */
struct gaz_frame {
	size_t len;         /* bytes of the whole frame (header or '\n' included) */
	size_t payload_off; /* where the message's bytes start within it */
	size_t payload_len;
};

/* gaz_frame_next finds the frame at the start of p[0..n):
 *   0          *f is a whole frame;
 *   GAZ_EOF    p holds no whole frame: read more. With at_eof (the range
 *              read has ended) f->len is the count of bytes left to
 *              consume, 0 or a lone trailing '\n' after fixed frames,
 *              which Gazette tolerates;
 *   GAZ_EPROTO skip f->len bytes and go on: a fixed frame's magic is
 *              missing or its length is past GAZ_MESSAGE_MAX_LEN (f->len
 *              reaches the next magic within p: Gazette's
 *              de-synchronization); a JSON line is longer than
 *              GAZ_MESSAGE_MAX_LEN; or with at_eof, a frame is cut short
 *              ("unexpected EOF", f->len = n).
 * Pure; st gets the reason. */
int gaz_frame_next(enum gaz_framing framing, const uint8_t *p, size_t n, bool at_eof, struct gaz_frame *f,
		   struct gaz_status *st);

/* gaz_fixed_header writes the 8-byte header of a payload_len-byte
 * payload. */
void gaz_fixed_header(uint8_t out[GAZ_FIXED_HEADER_LEN], uint32_t payload_len);

/* An application's message type: how its messages decode from a frame's
 * payload, encode into one, carry their UUID, and what its ACK messages
 * are (Gazette's Message interface and NewMessageFunc). Every function is
 * called with `arg`; none may block. */
struct gaz_message_type {
	/* Decodes payload[0..len) into a new message (*msg owned by the
	 * caller; free with free_msg): 0, or GAZ_EINVAL with a reason. */
	int (*decode)(const uint8_t *payload, size_t len, void **msg, struct gaz_status *st, void *arg);
	/* Encodes msg's payload into a new buffer (*out malloc'd, owned by the
	 * caller; *len bytes; no framing): 0, or an error. */
	int (*encode)(const void *msg, uint8_t **out, size_t *len, struct gaz_status *st, void *arg);
	/* The message's UUID: 0, or GAZ_ENOTFOUND when it carries none. */
	int (*get_uuid)(const void *msg, gaz_uuid *out, void *arg);
	/* Sets the message's UUID: 0, or an error (GAZ_ENOMEM). */
	int (*set_uuid)(void *msg, const gaz_uuid *u, void *arg);
	/* A new acknowledgement message for journal (Gazette's
	 * NewAcknowledgement), or NULL when out of memory. */
	void *(*new_ack)(const char *journal, void *arg);
	void (*free_msg)(void *msg, void *arg);
	void *arg;
};

/* gaz_json_message_type: messages as jansson documents (json_t *, a
 * reference owned by whoever holds the message), framed as JSON lines,
 * with the UUID as canonical text at RFC 6901 pointer `uuid_pointer`
 * (NULL: GAZ_JSON_UUID_POINTER); setting it creates the objects on its
 * path. An ACK is a document holding only the UUID. `uuid_pointer` is
 * borrowed and must outlive the type's use. Documents encode compactly,
 * keys in insertion order, without Go's HTML escaping. jansson holds
 * integers as int64: a document with a larger one (Go's uint64) has all
 * its numbers decoded as doubles, exact only to 2^53; an application
 * that needs such integers exactly brings its own type. */
struct gaz_message_type gaz_json_message_type(const char *uuid_pointer);

/* gaz_message_frame encodes msg with its type and frames it: a new buffer
 * (*out malloc'd, owned by the caller) of *len bytes. Errors: the type's,
 * GAZ_ERANGE past GAZ_MESSAGE_MAX_LEN, GAZ_ENOMEM. */
int gaz_message_frame(enum gaz_framing framing, const struct gaz_message_type *type, const void *msg,
		      uint8_t **out, size_t *len, struct gaz_status *st);

/* ---- partitions, mappings and the publisher --------------------------- */

struct gaz_client;
struct gaz_reader_wake; /* gazette/client.h */
struct gaz_append_service;
struct gaz_append_handle;

/* Journal names are at most this long (Gazette's token rule). */
#define GAZ_MESSAGE_JOURNAL_MAX 512

/* Where a mapping sends a message. */
struct gaz_mapped {
	char journal[GAZ_MESSAGE_JOURNAL_MAX + 1];
	enum gaz_framing framing;
};

/* A polled list of the journals a label selector matches, in name order
 * (Gazette's client.PolledList): listed once when made, then again every
 * interval by its own thread. Mappings read it under its lock. */
struct gaz_partitions;

/* gaz_partitions_new lists the journals matching `selector` (the gazctl
 * -l grammar) through `c` (borrowed; must outlive the partitions) and
 * re-lists every interval_ms (<= 0: 30 s). Errors: the selector's
 * GAZ_EINVAL, the first List's error (nothing is made). *out is owned by
 * the caller (gaz_partitions_free). A later failed List keeps the last
 * good one and is logged. */
int gaz_partitions_new(struct gaz_client *c, const char *selector, int64_t interval_ms,
		       struct gaz_partitions **out, struct gaz_status *st);

/* gaz_partitions_count: journals in the current list. */
size_t gaz_partitions_count(struct gaz_partitions *p);

/* gaz_partitions_free stops the polling thread and frees. A List in
 * flight is waited for (at most the client's connect and RPC timeouts).
 * No mapping may run on p concurrently. NULL is a no-op. */
void gaz_partitions_free(struct gaz_partitions *p);

/* Mappings (Gazette's message routines), choosing among the current
 * partitions by a key of key_len bytes:
 *   modulo      FNV-1a-32(key) mod the journal count (name order);
 *   rendezvous  the journal maximising FNV-1a-32(key) XOR
 *               FNV-1a-32(journal name), the first of equals;
 *   random      uniformly (key unused).
 * Each fills *out and returns 0, or GAZ_ENOTFOUND when no journal matches
 * ("empty ListResponse"), or GAZ_EINVAL when the chosen journal's
 * content-type has no framing. Thread-safe. */
int gaz_map_modulo(struct gaz_partitions *p, const void *key, size_t key_len, struct gaz_mapped *out,
		   struct gaz_status *st);
int gaz_map_rendezvous(struct gaz_partitions *p, const void *key, size_t key_len, struct gaz_mapped *out,
		       struct gaz_status *st);
int gaz_map_random(struct gaz_partitions *p, struct gaz_mapped *out, struct gaz_status *st);

/* gaz_fnv1a32: FNV-1a, 32 bits (Go's hash/fnv New32a), as the mappings
 * hash keys and journal names. */
uint32_t gaz_fnv1a32(const void *p, size_t n);

/* A mapping for the publisher: where msg goes (Gazette's MappingFunc).
 * Returns 0 with *out, or an error with a reason. */
typedef int (*gaz_mapping_fn)(const void *msg, void *arg, struct gaz_mapped *out, struct gaz_status *st);

struct gaz_publisher_opts {
	struct gaz_append_service *appends;   /* borrowed; required */
	const struct gaz_message_type *type;  /* borrowed; required */
	/* A clock shared with others (a consumer's, moved by its
	 * transactions), borrowed; NULL gives the publisher its own, moved
	 * to the wall time at each publish (Gazette's NewPublisher). */
	gaz_clock *clock;
};

/* An acknowledgement to write when a transaction commits: the framed ACK
 * message for one journal (Gazette's AckIntent). */
struct gaz_ack_intent {
	char *journal;
	uint8_t *intent;
	size_t len;
};

struct gaz_publisher;

/* gaz_publisher_new makes a publisher with a new ProducerID (*out owned
 * by the caller: gaz_publisher_free). Errors: GAZ_EINVAL (missing
 * options), GAZ_EIO (no randomness), GAZ_ENOMEM. Not thread-safe: one
 * thread publishes through it (a consumer shard's). */
int gaz_publisher_new(const struct gaz_publisher_opts *opts, struct gaz_publisher **out, struct gaz_status *st);

/* gaz_publisher_producer: the publisher's ProducerID, which every UUID it
 * builds carries (Gazette's Publisher.ProducerID). */
gaz_producer_id gaz_publisher_producer(const struct gaz_publisher *p);

/* gaz_publish_committed maps msg (borrowed; its UUID is set), ticks the
 * clock, gives msg an OUTSIDE_TXN UUID and queues its frame on the append
 * service. Read-committed readers deliver it at once. *h (may be NULL)
 * is the append's handle, owned by the caller. Errors: the mapping's, the
 * type's, the append service's (nothing appended). Gazette's
 * PublishCommitted. */
int gaz_publish_committed(struct gaz_publisher *p, gaz_mapping_fn map, void *map_arg, void *msg,
			  struct gaz_append_handle **h, struct gaz_status *st);

/* gaz_publish_uncommitted is gaz_publish_committed with a CONTINUE_TXN
 * UUID, and remembers the journal: read-committed readers hold the
 * message until an ACK from gaz_publisher_build_ack_intents is written
 * there (Gazette's PublishUncommitted). */
int gaz_publish_uncommitted(struct gaz_publisher *p, gaz_mapping_fn map, void *map_arg, void *msg,
			    struct gaz_append_handle **h, struct gaz_status *st);

/* gaz_publisher_build_ack_intents builds, for every journal published to
 * uncommitted since the last call, a framed ACK_TXN message with a fresh
 * clock (*out: n of them, owned by the caller: gaz_ack_intents_free), and
 * forgets those journals. Writing them commits the transaction; a
 * consumer stores them in its checkpoint first, so a recovered shard
 * writes them again (Gazette's BuildAckIntents). Errors: the type's,
 * GAZ_ENOMEM (the journals are kept). */
int gaz_publisher_build_ack_intents(struct gaz_publisher *p, struct gaz_ack_intent **out, size_t *n,
				    struct gaz_status *st);

/* gaz_ack_intents_free frees n intents from
 * gaz_publisher_build_ack_intents (or gaz_checkpoint_decode), their
 * strings and buffers, and the array. NULL is a no-op. */
void gaz_ack_intents_free(struct gaz_ack_intent *a, size_t n);

/* gaz_publisher_wait_pending waits until every message published since
 * the last call was written (committed or failed): the last append of
 * each journal, since a journal's appends commit in order and a failure
 * fails every later one (Gazette's consumer waits on the client's
 * pending appends before a store commit). Returns 0, or the first
 * failure ("appending to <journal>: ..."). */
int gaz_publisher_wait_pending(struct gaz_publisher *p, struct gaz_status *st);

/* gaz_publisher_free frees the publisher (not its append service). */
void gaz_publisher_free(struct gaz_publisher *p);

/* ---- envelopes and the read-committed sequencer ------------------------ */

/* A message as read from a journal: where it sits and its UUID. `msg` is
 * the application's decoded message (opaque here); who owns it is said
 * by each function. */
struct gaz_envelope {
	const char *journal; /* NUL-terminated journal name */
	int64_t begin, end;  /* byte offsets of the message's frame */
	gaz_uuid uuid;
	void *msg;
};

/* What a producer has committed to a journal, as a consumer checkpoint
 * keeps it (Gazette's message.ProducerState, consumer.Checkpoint's
 * ProducerEntry). */
struct gaz_producer_state {
	char *journal; /* owned by whoever owns the array */
	gaz_producer_id producer;
	gaz_clock_t last_ack; /* clock of its last ACK_TXN or OUTSIDE_TXN */
	int64_t begin;        /* offset of its first unacknowledged CONTINUE_TXN, or -1 */
};

/* A journal's read-through offset: every message before it was queued. */
struct gaz_read_through {
	char *journal; /* owned by whoever owns the array */
	int64_t offset;
};

/* gaz_sequencer_checkpoint's result; release with
 * gaz_sequencer_checkpoint_release. */
struct gaz_sequencer_checkpoint {
	struct gaz_read_through *offsets;
	size_t n_offsets;
	struct gaz_producer_state *states;
	size_t n_states;
};

/* What queueing one envelope did (Gazette's message.QueueOutcome). The
 * three COMMIT outcomes and ACK_EMPTY leave committed messages to
 * dequeue with gaz_sequencer_step; ACK_COMMIT_REPLAY first needs the part
 * of the transaction that fell out of the ring re-read
 * (gaz_sequencer_replay_range). */
enum gaz_queue_outcome {
	GAZ_QUEUE_OUTSIDE_ALREADY_ACKED, /* OUTSIDE_TXN at or below the last ACK: a duplicate, dropped */
	GAZ_QUEUE_OUTSIDE_COMMIT,        /* OUTSIDE_TXN: delivered now */
	GAZ_QUEUE_CONTINUE_ALREADY_ACKED, /* CONTINUE_TXN at or below the last ACK: dropped */
	GAZ_QUEUE_CONTINUE_CLOCK_LARGER, /* CONTINUE_TXN not above the span's largest clock: a duplicate, dropped */
	GAZ_QUEUE_CONTINUE_BEGIN_SPAN,   /* CONTINUE_TXN opening a producer's span: held */
	GAZ_QUEUE_CONTINUE_EXTEND_SPAN,  /* CONTINUE_TXN extending it: held */
	GAZ_QUEUE_ACK_ROLLBACK,          /* ACK_TXN at or below the last ACK: the span is discarded */
	GAZ_QUEUE_ACK_EMPTY,             /* ACK_TXN with no span: only the ACK is delivered */
	GAZ_QUEUE_ACK_COMMIT_RING,       /* ACK_TXN: the span, all in the ring, is delivered */
	GAZ_QUEUE_ACK_COMMIT_REPLAY,     /* ACK_TXN: the span's start must be re-read first */
};

/* gaz_queue_outcome_str: Gazette's name of an outcome ("ackCommitRing"),
 * as its metrics label them. */
const char *gaz_queue_outcome_str(enum gaz_queue_outcome o);

struct gaz_sequencer_opts {
	/* Envelopes of open transactions kept for their commit (Gazette's
	 * ShardSpec ring_buffer_size); 0 means 8192. A span longer than
	 * the ring is re-read from the journal at its ACK. */
	size_t ring_size;
	/* Frees an envelope's msg once the sequencer is done with it; NULL
	 * when messages need no freeing. Called on the sequencer's thread. */
	void (*free_msg)(void *msg, void *arg);
	void *arg;
};

/* Reads the next envelope of a replay (a read-uncommitted iterator over
 * one journal's range): fills *out (msg consumed by the sequencer) and
 * returns 0, GAZ_EOF at the range's end, or a negative error. */
typedef int (*gaz_replay_next_fn)(void *arg, struct gaz_envelope *out);

struct gaz_sequencer;

/* gaz_sequencer_new makes a sequencer that resumes from a checkpoint:
 * `offsets` (n_offsets) and `states` (n_states), both borrowed for the
 * call, both may be empty (Gazette's NewSequencer). *out is owned by the
 * caller (gaz_sequencer_free). Returns 0 or GAZ_ENOMEM. */
int gaz_sequencer_new(const struct gaz_sequencer_opts *opts, const struct gaz_read_through *offsets,
		      size_t n_offsets, const struct gaz_producer_state *states, size_t n_states,
		      struct gaz_sequencer **out);

/* gaz_sequencer_queue queues one envelope read (uncommitted) from its
 * journal, in the journal's order, and says in *outcome what became of
 * it. The envelope's msg is consumed in every outcome (held, or freed
 * when dropped); its journal is copied. A clock of 0 (a message type
 * without UUIDs) is delivered at once and never deduplicated. Flags other
 * than the three are taken as OUTSIDE_TXN with an error logged, as
 * Gazette does. Returns 0; GAZ_EINVAL when committed messages remain to
 * dequeue (Gazette panics there; nothing is queued and msg is not
 * consumed); GAZ_ENOMEM (msg freed). */
int gaz_sequencer_queue(struct gaz_sequencer *s, struct gaz_envelope *env, enum gaz_queue_outcome *outcome);

/* gaz_sequencer_replay_range: when the commit being dequeued needs a
 * replay (GAZ_QUEUE_ACK_COMMIT_REPLAY, before its first step), true with
 * the journal (borrowed, valid while the sequencer lives) and the byte
 * range [begin, end) to re-read; else false (Gazette's ReplayRange). */
bool gaz_sequencer_replay_range(const struct gaz_sequencer *s, const char **journal, int64_t *begin,
				int64_t *end);

/* gaz_sequencer_start_replay gives the sequencer the reader of that range;
 * `next` is called from gaz_sequencer_step until it returns GAZ_EOF. The
 * sequencer delivers the range's messages of the committing producer and
 * skips the rest (Gazette's StartReplay). */
void gaz_sequencer_start_replay(struct gaz_sequencer *s, gaz_replay_next_fn next, void *arg);

/* gaz_sequencer_step dequeues the next committed message: 0 with
 * *dequeued (borrowed until the next step or queue; its msg is freed
 * then), or GAZ_EOF when the commit is fully dequeued (then queue the
 * next envelope). ACK_TXN messages are dequeued too, last, as in Gazette
 * (applications skip them by their flags). Errors: GAZ_EINVAL when a
 * needed replay was not started; GAZ_EPROTO when the replay reads another
 * journal or outside the range; the replay reader's own error. Gazette's
 * Sequencer.Step. */
int gaz_sequencer_step(struct gaz_sequencer *s, const struct gaz_envelope **dequeued);

/* gaz_sequencer_has_pending: whether a producer began a transaction
 * since the last checkpoint that is neither committed nor rolled back
 * (Gazette's HasPending). */
bool gaz_sequencer_has_pending(const struct gaz_sequencer *s);

/* gaz_sequencer_checkpoint fills *out with the read-through offsets and
 * the producers' states to persist, and forgets producers of a journal
 * whose last clock is older than `prune_horizon_ns` before that journal's
 * newest last-ACK (0 keeps every producer). Clears the pending mark.
 * Call between commits (Gazette's Sequencer.Checkpoint). Returns 0 or
 * GAZ_ENOMEM (*out empty, the sequencer unchanged). */
int gaz_sequencer_checkpoint(struct gaz_sequencer *s, int64_t prune_horizon_ns, struct gaz_sequencer_checkpoint *out);

/* gaz_sequencer_checkpoint_release frees a checkpoint's arrays and
 * strings; *cp is empty after. */
void gaz_sequencer_checkpoint_release(struct gaz_sequencer_checkpoint *cp);

/* gaz_sequencer_free frees the sequencer and every message it holds.
 * NULL is a no-op. */
void gaz_sequencer_free(struct gaz_sequencer *s);

/* ---- readers ---------------------------------------------------------- */

struct gaz_message_reader_opts {
	struct gaz_client *client;  /* borrowed; must outlive the reader */
	const char *journal;        /* copied */
	int64_t offset;             /* where to begin (a message boundary) */
	int64_t end_offset;         /* stop there (exclusive); 0 = no end */
	bool block;                 /* wait at the write head for more */
	const struct gaz_message_type *type; /* borrowed */
	/* The journal's framing; 0 looks up its content-type label with a
	 * List, as Gazette's reader fetches the JournalSpec. */
	enum gaz_framing framing;
	struct gaz_sequencer_opts sequencer; /* read-committed: ring size */
};

struct gaz_message_reader;

/* gaz_message_reader_new makes a reader of one journal's messages, read
 * uncommitted: every message as written, duplicates and rolled-back ones
 * included (Gazette's ReadUncommittedIter), through the client library's
 * retrying reader. *out is owned by the caller
 * (gaz_message_reader_free). Errors: GAZ_EINVAL (options; a content-type
 * with no framing), the List's error, GAZ_ENOMEM. */
int gaz_message_reader_new(const struct gaz_message_reader_opts *o, struct gaz_message_reader **out,
			   struct gaz_status *st);

/* gaz_message_reader_next reads the next message into *env: its journal
 * (borrowed from the reader), offsets and UUID, and msg decoded by the
 * type (owned by the caller). Frames that do not decode, messages
 * without a UUID, and de-synchronized bytes are skipped with a warning
 * logged (counted in gaz_message_reader_skipped); an offset jump (content
 * deleted from the journal) drops a partial frame with a warning, as
 * Gazette's reader. Returns 0; GAZ_EOF at end_offset, or for a reader
 * that does not block, at the write head; a frame cut short at
 * end_offset is an error (GAZ_EPROTO); the client reader's errors
 * (GAZ_ECANCELLED, GAZ_EPERM for SUSPENDED, GAZ_ENOTFOUND). */
int gaz_message_reader_next(struct gaz_message_reader *r, struct gaz_envelope *env, struct gaz_status *st);

/* gaz_message_reader_try_next is gaz_message_reader_next for a reader
 * that holds no thread: where it would wait for the journal's next bytes
 * it returns GAZ_READ_WAIT with `w` armed instead (gaz_reader_try_read:
 * w->fn is called from a client poller once bytes, the end or a failure
 * are in, or w->at_ns says when a retry's backoff ends); frames already
 * buffered come out without waiting. Same results otherwise. */
int gaz_message_reader_try_next(struct gaz_message_reader *r, struct gaz_envelope *env,
				struct gaz_reader_wake *w, struct gaz_status *st);

/* gaz_message_reader_skipped: frames skipped so far. */
uint64_t gaz_message_reader_skipped(const struct gaz_message_reader *r);

/* gaz_message_reader_offset: the offset after the last message returned
 * (or skipped): where a new reader would continue. */
int64_t gaz_message_reader_offset(const struct gaz_message_reader *r);

/* gaz_message_reader_free closes the reader's stream and frees it;
 * messages it returned stay the caller's. NULL is a no-op. */
void gaz_message_reader_free(struct gaz_message_reader *r);

struct gaz_committed_reader;

/* gaz_committed_reader_new makes a read-committed reader: messages of
 * committed transactions and OUTSIDE_TXN messages, each once, in journal
 * order, ACKs included (Gazette's ReadCommittedIter). It resumes from
 * `cp` (may be NULL: the journal's start at o->offset), whose read-through
 * for the journal, when present, overrides o->offset. Replays of
 * transactions longer than the ring read the journal again by
 * themselves. *out owned by the caller (gaz_committed_reader_free). */
int gaz_committed_reader_new(const struct gaz_message_reader_opts *o, const struct gaz_sequencer_checkpoint *cp,
			     struct gaz_committed_reader **out, struct gaz_status *st);

/* gaz_committed_reader_next: the next committed message, *env borrowed
 * until the next call (its msg freed then). Returns as
 * gaz_message_reader_next, plus the sequencer's errors. */
int gaz_committed_reader_next(struct gaz_committed_reader *r, const struct gaz_envelope **env,
			      struct gaz_status *st);

/* gaz_committed_reader_sequencer: its sequencer (borrowed), for
 * checkpoints. */
struct gaz_sequencer *gaz_committed_reader_sequencer(struct gaz_committed_reader *r);

/* gaz_committed_reader_skipped: frames its reader skipped so far. */
uint64_t gaz_committed_reader_skipped(const struct gaz_committed_reader *r);

/* gaz_committed_reader_duplicates: messages read so far that the
 * sequencer dropped as duplicates (at or below their producer's last
 * ACK, or not above its open transaction's largest clock: bytes written
 * again by a retried append or a recovered publisher). Rolled-back
 * transactions are not counted. */
uint64_t gaz_committed_reader_duplicates(const struct gaz_committed_reader *r);

/* gaz_committed_reader_free closes its readers and frees the sequencer
 * with every message it holds (an envelope borrowed from the last
 * gaz_committed_reader_next included). NULL is a no-op. */
void gaz_committed_reader_free(struct gaz_committed_reader *r);

#endif
