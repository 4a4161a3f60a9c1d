/* append_int.h - state shared by append.c, append_local.c and proxy.c. */
#ifndef GAZ_BROKER_APPEND_INT_H
#define GAZ_BROKER_APPEND_INT_H

#include "broker/broker.h"
#include "etcd/txn.h"

struct append_ctx {
	struct gaz_broker *b;
	struct gaz_rpc_call *call;
	Protocol__AppendRequest *req;      /* the first message */
	struct gaz_resolution res;
	int64_t read_through_rev;
	struct gaz_replica *token;         /* replica whose append token we hold */
	Protocol__LabelSet *registers;     /* for the response (owned) */
	char store_error[1024];
	bool finished;
	/* the commit */
	int64_t commit_begin, commit_end;
	uint8_t commit_sum[20];
	int commit_codec;
	int64_t total_chunks, delayed_chunks;
};

/* append_local.c: preconditions, content streaming, commit. The token is
 * held. Returns 1 to resolve again, 0 once answered. */
int gaz__append_local(struct append_ctx *a);

/* append_local.c: rolls the spool (and, through the pipeline, every
 * peer's) to an empty fragment at `to`. The token is held. Returns 0 or
 * an error (the pipeline is closed on failure). */
int gaz__append_roll(struct append_ctx *a, int64_t to);

/* append.c: suspension write (UPDATE_SUSPEND). */
int gaz__append_update_suspend(struct append_ctx *a, int level, int64_t offset);

/* append_repl.c: the replicated steps, used while the route has more
 * than one member. Each closes the pipeline (rolling back) on failure.
 * start_pipeline and sync return 0 to go on, 1 to resolve again, -1 on
 * failure; the others 0 or an error. */
int gaz__append_start_pipeline(struct append_ctx *a);
int gaz__append_sync(struct append_ctx *a, int64_t roll_to);
int gaz__append_replicate_content(struct append_ctx *a, const uint8_t *data, size_t len,
				  int64_t delta);
int gaz__append_replicate_commit(struct append_ctx *a);
void gaz__append_pipeline_fail(struct append_ctx *a, const char *why);

/* append.c: answer with a Gazette status (registers or the store error
 * attached as the status needs), or with a gRPC error. */
void gaz__append_respond_status(struct append_ctx *a, int status);
void gaz__append_respond_error(struct append_ctx *a, int code, const char *msg);

/* append.c: the OK response with the commit. */
void gaz__append_respond_commit(struct append_ctx *a);

/* proxy.c: forwards the append to the primary and relays its response. */
void gaz__append_proxy(struct append_ctx *a);

#endif
