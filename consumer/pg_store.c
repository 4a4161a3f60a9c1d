/*
 * pg_store.c - the PostgreSQL consumer store (Gazette's SQLStore,
 * consumer/store_sql.go): the application's SQL and the shard's
 * checkpoint commit in one transaction, fenced by a counter in the
 * checkpoint's row.
 *
 * Invariants:
 *   - fence is 0 until restore_checkpoint succeeded, then the value this
 *     instance installed; commit requires it still in the shard's row.
 *   - Whether a transaction is open is libpq's transaction status, never a
 *     flag of ours, so a statement of the application's that failed (the
 *     server's "in error" state) is seen at commit.
 *   - Nothing here commits after the connection was lost: a lost
 *     connection is an error of the call that saw it.
 *
 * Only libpq is called here; no threads, no other module's I/O.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "gazette/store.h"

struct pg_store {
	struct gaz_store base; /* first: what callers hold */
	PGconn *conn;
	char *fqn;
	int64_t fence;         /* installed by restore; 0 before */
};

static const struct gaz_store_ops pg_ops;

/* The restore: bump the shard's fence, or start it at 1, in one atomic
 * statement (Gazette does UPDATE, SELECT, then INSERT on no row; an upsert
 * leaves no window for two first restores to race). */
static const char RESTORE_SQL[] =
	"INSERT INTO gazette_checkpoints (shard_fqn, fence, checkpoint) VALUES ($1, 1, ''::bytea) "
	"ON CONFLICT (shard_fqn) DO UPDATE SET fence = gazette_checkpoints.fence + 1 "
	"RETURNING fence::bigint, checkpoint";
static const char COMMIT_SQL[] =
	"UPDATE gazette_checkpoints SET checkpoint=$1 WHERE shard_fqn=$2 AND fence=$3";
static const char CREATE_SQL[] =
	"CREATE TABLE IF NOT EXISTS gazette_checkpoints (shard_fqn TEXT PRIMARY KEY NOT NULL, "
	"fence INTEGER NOT NULL, checkpoint BYTEA NOT NULL)";

static struct pg_store *pg(struct gaz_store *s)
{
	return s && s->ops == &pg_ops ? (struct pg_store *)s : NULL;
}

/* flat copies libpq's message into out as one line: its lines joined by
 * "; ", the tab-indented continuation lines (libpq's hints, such as "Is
 * the server running on that host ...") left out. */
static const char *flat(const char *msg, char *out, size_t cap)
{
	size_t o = 0;
	for (const char *p = msg ? msg : ""; *p && o + 3 < cap; p++) {
		if (*p != '\n') {
			out[o++] = *p == '\t' ? ' ' : *p;
			continue;
		}
		while (p[1] == '\t') /* skip the indented lines */
			while (p[1] && *++p != '\n')
				;
		if (p[1] && p[1] != '\n' && o)
			out[o++] = ';', out[o++] = ' ';
	}
	while (o && out[o - 1] == ' ')
		o--;
	out[o] = 0;
	return out;
}

/* server names the server of conn ("host:port") into out. */
static const char *server(PGconn *conn, char *out, size_t cap)
{
	const char *h = PQhost(conn), *p = PQport(conn);
	snprintf(out, cap, "%s:%s", h && *h ? h : "localhost", p && *p ? p : "5432");
	return out;
}

/* failed sets *st for a statement `what` that failed (res may be NULL):
 * the connection lost is GAZ_EUNAVAIL, anything else the server's answer
 * with its SQLSTATE, GAZ_EIO. Clears res. */
static int failed(struct pg_store *s, PGresult *res, const char *what, struct gaz_status *st)
{
	char m[400], srv[160];
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	int rc;

	flat(res && *PQresultErrorMessage(res) ? PQresultErrorMessage(res) : PQerrorMessage(s->conn), m,
	     sizeof m);
	if (PQstatus(s->conn) == CONNECTION_BAD)
		rc = gaz_status_set(st, GAZ_EUNAVAIL, "%s of shard \"%s\" failed: connection to server at %s lost: %s",
				    what, s->fqn, server(s->conn, srv, sizeof srv), m);
	else
		rc = gaz_status_set(st, GAZ_EIO, "%s of shard \"%s\" failed: %s (SQLSTATE %s)", what, s->fqn, m,
				    state ? state : "none");
	PQclear(res);
	return rc;
}

/* run executes a statement without parameters and expects no rows. */
static int run(struct pg_store *s, const char *sql, const char *what, struct gaz_status *st)
{
	PGresult *res = PQexec(s->conn, sql);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		return failed(s, res, what, st);
	PQclear(res);
	return 0;
}

static bool txn_open(struct pg_store *s)
{
	PGTransactionStatusType t = PQtransactionStatus(s->conn);
	return t == PQTRANS_INTRANS || t == PQTRANS_INERROR;
}

static void rollback(struct pg_store *s)
{
	if (txn_open(s))
		PQclear(PQexec(s->conn, "ROLLBACK"));
}

/* Notices (CREATE TABLE IF NOT EXISTS says the table exists) are not
 * errors; the application may install its own processor. */
static void quiet(void *arg, const char *msg)
{
	(void)arg, (void)msg;
}

/* create_table runs `create_sql` (a CREATE TABLE IF NOT EXISTS) unless
 * `table` exists: looked up first, since CREATE ... IF NOT EXISTS needs
 * CREATE rights even when the table exists; and two sessions creating it
 * at once make one fail on the catalog's unique index (23505), with
 * 42P07 (the table) or 42710 (its row type), which is success here. */
static int create_table(struct pg_store *s, const char *table, const char *create_sql, struct gaz_status *st)
{
	const char *params[1] = {table};
	char what[160];
	PGresult *res = PQexecParams(s->conn, "SELECT to_regclass($1) IS NOT NULL", 1, NULL, params, NULL, NULL, 0);

	snprintf(what, sizeof what, "looking up table %s", table);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return failed(s, res, what, st);
	bool exists = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	if (exists)
		return 0;
	res = PQexec(s->conn, create_sql);
	if (res && PQresultStatus(res) == PGRES_FATAL_ERROR) {
		/* Another session created it at the same moment. */
		const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (state && (!strcmp(state, "23505") || !strcmp(state, "42P07") || !strcmp(state, "42710"))) {
			PQclear(res);
			return 0;
		}
	}
	snprintf(what, sizeof what, "creating table %s", table);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		return failed(s, res, what, st);
	PQclear(res);
	return 0;
}

static int ensure_table(struct pg_store *s, struct gaz_status *st)
{
	return create_table(s, "gazette_checkpoints", CREATE_SQL, st);
}

int gaz_pg_store_create_table(struct gaz_store *store, const char *table, const char *create_sql,
			      struct gaz_status *st)
{
	if (!gaz_pg_store_conn(store))
		return gaz_status_set(st, GAZ_EINVAL, "not a PostgreSQL store");
	return create_table((struct pg_store *)store, table, create_sql, st);
}

struct gaz_store *gaz_pg_store_open(const char *conninfo, const char *shard_fqn, struct gaz_status *st)
{
	char *err = NULL, m[400], srv[160];
	PQconninfoOption *opts;
	struct pg_store *s;

	if (!conninfo || !shard_fqn || !*shard_fqn) {
		gaz_status_set(st, GAZ_EINVAL, "postgres store: a conninfo and a shard FQN are required");
		return NULL;
	}
	if (!(opts = PQconninfoParse(conninfo, &err))) {
		gaz_status_set(st, err ? GAZ_EINVAL : GAZ_ENOMEM, "postgres store for shard \"%s\": invalid conninfo: %s",
			       shard_fqn, flat(err ? err : "out of memory", m, sizeof m));
		PQfreemem(err);
		return NULL;
	}
	PQconninfoFree(opts);
	if (!(s = calloc(1, sizeof *s)) || !(s->fqn = strdup(shard_fqn))) {
		free(s);
		gaz_status_set(st, GAZ_ENOMEM, "postgres store for shard \"%s\": out of memory", shard_fqn);
		return NULL;
	}
	s->base.ops = &pg_ops;
	/* Our connect_timeout first: the conninfo's own, expanded after it,
	 * wins (libpq keeps the last value of a repeated keyword). */
	const char *const kw[] = {"connect_timeout", "dbname", NULL};
	const char *const val[] = {"10", conninfo, NULL};
	if (!(s->conn = PQconnectdbParams(kw, val, 1))) {
		gaz_status_set(st, GAZ_ENOMEM, "postgres store for shard \"%s\": out of memory", shard_fqn);
		goto fail;
	}
	if (PQstatus(s->conn) != CONNECTION_OK) {
		gaz_status_set(st, GAZ_EUNAVAIL,
			       "postgres store for shard \"%s\": cannot connect to server at %s (retryable): %s",
			       shard_fqn, server(s->conn, srv, sizeof srv), flat(PQerrorMessage(s->conn), m, sizeof m));
		goto fail;
	}
	PQsetNoticeProcessor(s->conn, quiet, NULL);
	if (ensure_table(s, st) == 0)
		return &s->base;
fail:
	PQfinish(s->conn);
	free(s->fqn);
	free(s);
	return NULL;
}

PGconn *gaz_pg_store_conn(struct gaz_store *gs)
{
	struct pg_store *s = pg(gs);
	return s ? s->conn : NULL;
}

static int64_t be64(const uint8_t *b)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return (int64_t)v;
}

static int pg_restore(struct gaz_store *gs, uint8_t **cp, size_t *len, struct gaz_status *st)
{
	struct pg_store *s = pg(gs);
	char srv[160], m[400];

	*cp = NULL, *len = 0;
	rollback(s);
	if (PQstatus(s->conn) != CONNECTION_OK) {
		PQreset(s->conn);
		if (PQstatus(s->conn) != CONNECTION_OK)
			return gaz_status_set(st, GAZ_EUNAVAIL,
					      "restore of shard \"%s\" failed: cannot reconnect to server at %s: %s",
					      s->fqn, server(s->conn, srv, sizeof srv),
					      flat(PQerrorMessage(s->conn), m, sizeof m));
	}
	const char *params[] = {s->fqn};
	PGresult *res = PQexecParams(s->conn, RESTORE_SQL, 1, NULL, params, NULL, NULL, 1);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return failed(s, res, "restore", st);
	if (PQgetlength(res, 0, 0) != 8) {
		PQclear(res);
		return gaz_status_set(st, GAZ_EPROTO, "restore of shard \"%s\" failed: fence is not a bigint", s->fqn);
	}
	int64_t fence = be64((const uint8_t *)PQgetvalue(res, 0, 0));
	size_t n = (size_t)PQgetlength(res, 0, 1);
	if (n && !(*cp = malloc(n))) {
		PQclear(res);
		return gaz_status_set(st, GAZ_ENOMEM, "restore of shard \"%s\" failed: out of memory", s->fqn);
	}
	if (n)
		memcpy(*cp, PQgetvalue(res, 0, 1), n);
	*len = n;
	s->fence = fence;
	PQclear(res);
	return 0;
}

static int pg_begin(struct gaz_store *gs, struct gaz_status *st)
{
	struct pg_store *s = pg(gs);
	if (txn_open(s))
		return 0;
	return run(s, "BEGIN", "begin", st);
}

/* pg_commit: the checkpoint's UPDATE must hit exactly the row at our
 * fence, then COMMIT, which must answer COMMIT (a transaction in error
 * answers ROLLBACK to it). */
static int pg_commit(struct gaz_store *gs, const uint8_t *cp, size_t len, struct gaz_status *st)
{
	struct pg_store *s = pg(gs);
	char fence[24], srv[160], m[400];
	int rc;

	if (s->fence == 0)
		return gaz_status_set(st, GAZ_EINVAL, "commit of shard \"%s\" failed: no restore_checkpoint before it",
				      s->fqn);
	if ((rc = pg_begin(gs, st)) != 0)
		return rc;
	if (PQtransactionStatus(s->conn) == PQTRANS_INERROR) {
		rollback(s);
		return gaz_status_set(st, GAZ_EIO,
				      "commit of shard \"%s\" failed: a statement of the transaction failed; "
				      "rolled back",
				      s->fqn);
	}
	snprintf(fence, sizeof fence, "%lld", (long long)s->fence);
	const char *params[] = {len ? (const char *)cp : "", s->fqn, fence};
	const int lens[] = {(int)len, 0, 0}, fmts[] = {1, 0, 0};
	PGresult *res = PQexecParams(s->conn, COMMIT_SQL, 3, NULL, params, lens, fmts, 0);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
		rc = failed(s, res, "commit", st);
		rollback(s);
		return rc;
	}
	bool one = !strcmp(PQcmdTuples(res), "1");
	PQclear(res);
	if (!one) {
		rollback(s);
		return gaz_status_set(st, GAZ_EFENCED,
				      "commit of shard \"%s\" failed: checkpoint fence was updated (ie, by a new "
				      "primary): fence %lld is no longer current",
				      s->fqn, (long long)s->fence);
	}
	res = PQexec(s->conn, "COMMIT");
	if (res && PQresultStatus(res) == PGRES_COMMAND_OK) {
		one = !strcmp(PQcmdStatus(res), "COMMIT");
		PQclear(res);
		if (one)
			return 0;
		return gaz_status_set(st, GAZ_EIO, "commit of shard \"%s\" failed: the server rolled the transaction back",
				      s->fqn);
	}
	if (PQstatus(s->conn) == CONNECTION_BAD) {
		flat(PQerrorMessage(s->conn), m, sizeof m);
		PQclear(res);
		return gaz_status_set(st, GAZ_EUNAVAIL,
				      "commit of shard \"%s\" failed: connection to server at %s lost during COMMIT "
				      "(outcome unknown; restore tells): %s",
				      s->fqn, server(s->conn, srv, sizeof srv), m);
	}
	rc = failed(s, res, "commit", st);
	rollback(s);
	return rc;
}

static void pg_abort(struct gaz_store *gs)
{
	rollback(pg(gs));
}

static void pg_close(struct gaz_store *gs)
{
	struct pg_store *s = pg(gs);
	if (!s)
		return;
	rollback(s);
	PQfinish(s->conn);
	free(s->fqn);
	free(s);
}

static const struct gaz_store_ops pg_ops = {
	.restore_checkpoint = pg_restore,
	.begin = pg_begin,
	.commit = pg_commit,
	.abort = pg_abort,
	.close = pg_close,
};
