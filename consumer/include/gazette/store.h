/*
 * gazette/store.h - consumer stores: where a shard's application state and
 * its checkpoint are committed together (Gazette's consumer.Store).
 *
 * A shard's transaction changes the application's state in its store and
 * ends with a commit that writes the transaction's checkpoint (Gazette's
 * consumer.Checkpoint bytes, gazette/consumer.h) in the same atomic
 * change. A shard recovered later restores that checkpoint and so resumes
 * reading exactly where the committed state ends.
 *
 * Fencing (Gazette's "write fence", consumer/interfaces.go Store): each
 * restore_checkpoint installs a new fence for the shard in the store
 * itself, and each commit verifies, inside its transaction, that the fence
 * it restored is still the current one. So once a new instance of a shard
 * has restored (a new primary after a hand-off), an older instance still
 * running (a zombie) can never commit again: its commit fails with
 * GAZ_EFENCED and none of its changes become visible.
 *
 * The life of a store, driven by the consumer runtime:
 *
 *     open ── restore_checkpoint ──┬─ begin ─ (app changes) ─ commit ─┐
 *                                  │                └──── abort ──────┤
 *                                  └──────────────────────────────────┘
 *     ... close (any time; rolls back what is open)
 *
 * A failed commit (fenced, the server lost, an application statement that
 * failed) leaves nothing of the transaction; the runtime then fails the
 * shard or calls restore_checkpoint again before the next transaction.
 *
 * Threads: a store is used by one thread at a time (the shard's), as
 * Gazette's are; nothing here blocks except on the store's own I/O.
 *
 * Errors: every function returns 0 or a negative GAZ_E* code
 * (common/err.h) with detail in *st (may be NULL):
 *   GAZ_EFENCED   another instance restored since this one: never retry,
 *                 the shard must restore (or stop)
 *   GAZ_EUNAVAIL  the server is unreachable or the connection was lost:
 *                 retryable by re-opening or restoring
 *   GAZ_EIO       the store refused (a failed SQL statement, a write to
 *                 disk that failed): detail in the message
 *   GAZ_EINVAL    misuse (commit before restore_checkpoint, bad arguments)
 *                 or a malformed stored record
 *   GAZ_ENOMEM    allocation failed
 */
#ifndef GAZETTE_STORE_H
#define GAZETTE_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/err.h"

struct gaz_store;

/* The operations of a store. Every implementation fills all five. */
struct gaz_store_ops {
	/* Fences off every earlier instance of this shard's store and returns
	 * the last committed checkpoint: Gazette's consumer.Checkpoint bytes
	 * in *cp (malloc'd, owned by the caller, free()), *len bytes; *len 0
	 * (and *cp NULL) when nothing was committed yet. A transaction still
	 * open is rolled back first. The application's in-memory view (the
	 * JSON store's state) becomes the committed one. */
	int (*restore_checkpoint)(struct gaz_store *s, uint8_t **cp, size_t *len, struct gaz_status *st);
	/* Begins the application's transaction; the runtime calls it before
	 * the first message of a consumer transaction. Calling it with a
	 * transaction open is a no-op (as Gazette's SQLStore.Transaction). */
	int (*begin)(struct gaz_store *s, struct gaz_status *st);
	/* Writes the checkpoint (cp[0..len), borrowed; len 0 for an empty
	 * one) in the same transaction as the application's changes and
	 * commits; begins the transaction first if none is open. Fails with
	 * GAZ_EFENCED ("checkpoint fence was updated (ie, by a new
	 * primary)", Gazette's text) when another instance restored since
	 * this one did, and then nothing of the transaction is kept. */
	int (*commit)(struct gaz_store *s, const uint8_t *cp, size_t len, struct gaz_status *st);
	/* Rolls back an open transaction (none open: nothing happens). */
	void (*abort)(struct gaz_store *s);
	/* Rolls back anything open and frees the store; s is invalid after.
	 * Committed data stays (unlike Gazette's Destroy of a JSONFileStore,
	 * which removes its recorded directory). */
	void (*close)(struct gaz_store *s);
};

/* A store: implementations embed this as their first member. */
struct gaz_store {
	const struct gaz_store_ops *ops;
};

/* ---- PostgreSQL (Gazette's SQLStore, consumer/store_sql.go) ----------- */

/* libpq's connection (libpq-fe.h); declared here so that includers need
 * not include libpq's header. */
typedef struct pg_conn PGconn;

/* gaz_pg_store_open connects to a PostgreSQL server for the shard named
 * shard_fqn (Gazette's Shard.FQN(), e.g. "/consumer.prefix/items/shard-A";
 * borrowed, copied) with the libpq connection string conninfo (borrowed;
 * either "key=value ..." or a postgresql:// URI; a connect_timeout of 10 s
 * applies unless it names one). Programs linking it add -lpq.
 *
 * Checkpoints live in Gazette's table
 *     gazette_checkpoints (shard_fqn TEXT PRIMARY KEY NOT NULL,
 *                          fence INTEGER NOT NULL, checkpoint BYTEA NOT NULL)
 * one row per shard. Gazette leaves creating it to the user; as a
 * convenience this creates it when it does not exist (an existing table,
 * e.g. with a BIGINT fence, is used as it is; shard_fqn must be its
 * primary key). restore_checkpoint bumps the shard's fence (a row at
 * fence 1 with an empty checkpoint when there is none) in one statement
 * of its own transaction and remembers it; commit runs
 *     UPDATE gazette_checkpoints SET checkpoint=$1 WHERE shard_fqn=$2 AND fence=$3
 * in the application's transaction, requires exactly one row updated
 * (else ROLLBACK and GAZ_EFENCED), then COMMIT. The application issues its
 * own SQL on gaz_pg_store_conn() between begin and commit, never BEGIN,
 * COMMIT or ROLLBACK itself. A statement of the application's that failed
 * aborts the transaction: commit then rolls back and fails (GAZ_EIO).
 *
 * A connection lost mid-transaction fails begin or commit with
 * GAZ_EUNAVAIL: the transaction is gone (PostgreSQL rolls back what a
 * dead connection left open). Lost during the COMMIT itself, the outcome
 * is unknown, as with any database; the error says so, and the checkpoint
 * the next restore_checkpoint returns tells which. restore_checkpoint
 * reconnects a lost connection.
 *
 * Returns the store (close with s->ops->close), or NULL with *st set:
 * GAZ_EINVAL (a conninfo libpq cannot parse, an empty shard_fqn),
 * GAZ_EUNAVAIL (the server cannot be reached: the message names it;
 * retryable), GAZ_EIO (the table could not be checked or created),
 * GAZ_ENOMEM. */
struct gaz_store *gaz_pg_store_open(const char *conninfo, const char *shard_fqn, struct gaz_status *st);

/* gaz_pg_store_conn is the store's connection (borrowed; valid until
 * close, the same pointer across reconnects), for the application's own
 * statements inside the open transaction. NULL if s is not a PostgreSQL
 * store. */
PGconn *gaz_pg_store_conn(struct gaz_store *s);

/* gaz_pg_store_create_table creates an application's table `table` with
 * `create_sql` (a CREATE TABLE IF NOT EXISTS statement) when it does not
 * exist, outside any transaction (call it before begin, e.g. when the
 * store opens), as the store creates gazette_checkpoints: safe against
 * shards of other processes creating it at the same moment, which a bare
 * CREATE TABLE IF NOT EXISTS is not in PostgreSQL. Returns 0, GAZ_EINVAL
 * (not a PostgreSQL store), GAZ_EIO or GAZ_EUNAVAIL with the server's
 * message. */
int gaz_pg_store_create_table(struct gaz_store *s, const char *table, const char *create_sql,
			      struct gaz_status *st);

/* ---- a JSON file per shard -------------------------------------------- */

/* gaz_json_store_open is a store for tests and small applications: the
 * application's state is one JSON object (gaz_json_store_state) that it
 * changes in memory during a transaction; commit writes the state, the
 * checkpoint (base64) and the fence to
 *     <dir>/<escaped shard_fqn>.json
 * as one document {"shard": FQN, "fence": N, "checkpoint": B64,
 * "state": {...}}, atomically: a temporary file beside it is written and
 * fsync'd, renamed over it, and the directory fsync'd. The escaping keeps
 * [A-Za-z0-9_.-] (a leading '.' excepted) and writes every other byte as
 * %XX, so "/a/b" is "%2Fa%2Fb.json".
 *
 * Fencing between processes on one host that share dir: restore_checkpoint
 * bumps the fence stored in the file (writing it at fence 1 when absent),
 * and commit re-reads the fence on disk and refuses (GAZ_EFENCED) when it
 * moved. Both hold an exclusive flock(2) on "<file>.lock" meanwhile, so a
 * restore cannot slip between another instance's check and rename (the
 * lock goes with a process that dies). Not for shared network file
 * systems whose flock is not coherent.
 *
 * abort, and a failed commit, put the in-memory state back to the last
 * committed one (what restore_checkpoint loaded or the last commit wrote).
 * A crash mid-commit leaves the previous file whole; a failure after the
 * rename (the directory's fsync) is reported, with the new file possibly
 * in place: restore tells.
 *
 * Gazette's JSONFileStore differs: it rides a recovery log (its writes
 * are recorded to a journal and fenced by the log's registers), keeps the
 * file at <recorder dir>/state.json and its Destroy removes the directory.
 * This store keeps the file in dir, on this host only.
 *
 * dir (borrowed) is created if missing (one level); shard_fqn (borrowed,
 * copied) must not be empty, and escaped it must fit a file name (at most
 * 240 bytes). The file is not read until restore_checkpoint. Returns the
 * store, or NULL with *st set: GAZ_EINVAL, GAZ_ERANGE (the name too long),
 * GAZ_EIO (dir or the lock file cannot be made), GAZ_ENOMEM. */
struct gaz_store *gaz_json_store_open(const char *dir, const char *shard_fqn, struct gaz_status *st);

/* gaz_json_store_state is the application's state: a JSON object
 * (borrowed; the same object from open to close) that the application
 * changes in place during a transaction. restore_checkpoint, abort and a
 * failed commit replace its members with copies of the committed ones, so
 * references to values inside it are invalid after them (take them again
 * from the object). NULL if s is not a JSON store. */
json_t *gaz_json_store_state(struct gaz_store *s);

#endif
