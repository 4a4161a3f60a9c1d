/*
 * gazette/consumer.h - the consumer layer (Gazette's package `consumer`):
 * shards that read journals through read-committed readers, change a
 * store and publish, committing each transaction's checkpoint with the
 * store. Built up in steps; this part is the checkpoint's encoding, and
 * gazette/store.h the stores that commit it with the application's state.
 *
 * A checkpoint (Gazette's consumer.Checkpoint, spec/gazette-facts.md
 * §1.7) holds, per source journal, the read-through offset and the states
 * of the producers read there, and per journal published to, the framed
 * ACK to write when the transaction's store commit is durable: a shard
 * recovered from it resumes reading exactly where the committed state
 * ends and re-sends the ACKs.
 */
#ifndef GAZETTE_CONSUMER_H
#define GAZETTE_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "gazette/message.h"

/* gaz_checkpoint_encode packs a Checkpoint protobuf from a sequencer's
 * checkpoint (read-through offsets and producer states, borrowed) and a
 * transaction's ACK intents (n_acks, borrowed; may be 0): a source per
 * journal with an offset or a producer, journals in name order, as
 * Gazette's BuildCheckpoint. *out is malloc'd (owned by the caller), *len
 * bytes. Errors: GAZ_ENOMEM. */
int gaz_checkpoint_encode(const struct gaz_sequencer_checkpoint *seq, const struct gaz_ack_intent *acks,
			  size_t n_acks, uint8_t **out, size_t *len, struct gaz_status *st);

/* gaz_checkpoint_decode unpacks Checkpoint bytes (b[0..n), borrowed) into
 * *seq (read-through offsets, one per source, and producer states, as
 * Gazette's FlattenReadThrough and FlattenProducerStates) and *acks (*n_acks
 * ACK intents; may be NULL when not wanted). Both owned by the caller
 * (gaz_sequencer_checkpoint_release, gaz_ack_intents_free). Errors:
 * GAZ_EINVAL (not a Checkpoint, or a producer id that is not 6 bytes),
 * GAZ_ENOMEM; nothing is returned then. An empty input is an empty
 * checkpoint (a shard's first start). */
int gaz_checkpoint_decode(const uint8_t *b, size_t n, struct gaz_sequencer_checkpoint *seq,
			  struct gaz_ack_intent **acks, size_t *n_acks, struct gaz_status *st);

#endif
