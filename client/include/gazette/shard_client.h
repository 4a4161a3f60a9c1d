/*
 * gazette/shard_client.h - calls of the consumer `consumer.Shard` service
 * (gazette-facts §1.7): List, Stat, Apply (in batches), GetHints and
 * Unassign, as Gazette's consumer package calls them (ListShards,
 * StatShard, ApplyShardsInBatches, FetchHints and the Unassign RPC).
 *
 * Transport. These calls run on a struct gaz_client (client.h) whose
 * `broker_address` is the CONSUMER's service address (gazctl
 * --consumer.address): every call is one unary RPC to that address, waiting
 * for a connection (gRPC WaitForReady, as Gazette's calls do) at most the
 * client's connect timeout. The consumer that answers proxies Stat to the
 * shard's primary; List, Apply, GetHints and Unassign are answered by any
 * member from etcd. The client's authorization token, deadline and
 * cancellation apply.
 *
 * Validation. Each response is checked before it is used, as Gazette's
 * Validate methods do: a known Status, a valid Header (List, Stat, Apply),
 * each listed shard's spec (protocol/shard.h), ModRevision > 0, Route,
 * and one ReplicaStatus per route member with FAILED iff errors; a response
 * that fails is GAZ_EPROTO "validating consumer response: <reason>".
 *
 * Errors. 0 or a negative GAZ_E* code with detail in `st` (may be NULL):
 * transport failures GAZ_ERPC (st->grpc set); a consumer Status other than
 * OK gaz_shard_status_err(status) with the status name ("SHARD_NOT_FOUND")
 * as the message, which is the error text Gazette's calls return.
 *
 * Memory. Responses handed out are owned by the caller and freed with
 * protobuf_c_message_free_unpacked(&resp->base, NULL). Requests and their
 * strings are borrowed for the call.
 *
 * Threads. As the client: any number of calls at once.
 */
#ifndef GAZETTE_SHARD_CLIENT_H
#define GAZETTE_SHARD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "consumer.pb-c.h"
#include "gazette/client.h"

/* Shard ids Unassign takes per request in gazctl (Gazette's batch size). */
#define GAZ_SHARD_UNASSIGN_BATCH 100

/* gaz_shard_status_name is the consumer.Status name ("SHARD_NOT_FOUND"), or
 * "Status(<n>)" outside the enum, written into buf[cap]. Returns buf. */
const char *gaz_shard_status_name(int status, char *buf, size_t cap);

/* gaz_shard_status_err maps a consumer Status to an error code: OK -> 0,
 * SHARD_NOT_FOUND -> GAZ_ENOTFOUND, NO_SHARD_PRIMARY and NOT_SHARD_PRIMARY
 * -> GAZ_EUNAVAIL, ETCD_TRANSACTION_FAILED -> GAZ_EEXIST, SHARD_STOPPED ->
 * GAZ_ESTOPPED, anything else GAZ_EPROTO. */
int gaz_shard_status_err(int status);

/* gaz_shard_list lists the shards matching `sel` (NULL = all; the meta-label
 * "id" selects by shard id). *out holds every shard in id order with its
 * spec, mod/create revisions, route and per-member ReplicaStatus. */
int gaz_shard_list(struct gaz_client *c, const Protocol__LabelSelector *sel,
		   Consumer__ListResponse **out, struct gaz_status *st);

/* gaz_shard_stat asks the primary of `shard` for its read-through offsets
 * (journal -> offset of the last committed transaction; *out's
 * read_through) and publish_at. Errors also: SHARD_NOT_FOUND,
 * NO_SHARD_PRIMARY as above. */
int gaz_shard_stat(struct gaz_client *c, const char *shard, Consumer__StatResponse **out,
		   struct gaz_status *st);

/* gaz_shard_apply sends the changes of `req` (validated by the caller:
 * gaz_validate_shard_apply_request) in transactions of at most
 * `max_txn_size` changes (0 = one), in order; a non-OK status stops with
 * the earlier batches applied (ETCD_TRANSACTION_FAILED: some expected
 * revision did not match). *revision (may be NULL) receives the etcd
 * revision of the last response. An empty request is one empty
 * transaction. */
int gaz_shard_apply(struct gaz_client *c, const Consumer__ApplyRequest *req, size_t max_txn_size,
		    int64_t *revision, struct gaz_status *st);

/* gaz_shard_get_hints fetches the primary hints and the hint_backups backup
 * hints of `shard` (each `hints` NULL where none were written). */
int gaz_shard_get_hints(struct gaz_client *c, const char *shard, Consumer__GetHintsResponse **out,
			struct gaz_status *st);

/* gaz_shard_unassign removes the assignments of the shards named in `req`
 * (only of FAILED ones with only_failed; nothing with dry_run). *out lists
 * the shards whose assignments were (or, dry run, would be) removed.
 * A non-OK status fails with "bad status: <name>", as Gazette's
 * UnassignResponse.Validate. */
int gaz_shard_unassign(struct gaz_client *c, const Consumer__UnassignRequest *req,
		       Consumer__UnassignResponse **out, struct gaz_status *st);

#endif
