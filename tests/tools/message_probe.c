/*
 * message_probe.c - the message layer driven as an application would,
 * for the integration tests (tests/integration/test_message.py).
 *
 *   message-probe publish ADDR SELECTOR COUNT TXN
 *       COUNT JSON messages {"stream": "s<i % 7>", "seq": i} mapped by
 *       the modulo of their stream over the journals SELECTOR matches.
 *       TXN 0 publishes each committed; TXN > 0 in transactions of TXN
 *       messages, each acknowledged by writing its ACK intents once its
 *       messages committed. PROBE_HOLD_ACK=FILE waits for FILE to exist
 *       before writing the last transaction's ACKs; PROBE_NO_LAST_ACK=1
 *       never writes them (a publisher that died mid-transaction).
 *       Prints "producer HEX" and "published COUNT".
 *   message-probe read ADDR JOURNAL MODE
 *       reads JOURNAL from 0 to its write head (non-blocking), MODE
 *       "committed" or "uncommitted"; prints one line per message:
 *       "BEGIN END FLAGS DOC" (DOC compact JSON without _meta), ACKs
 *       included; then "skipped N" (frames that did not decode).
 *       PROBE_RING sets the sequencer's ring size, PROBE_UUID_POINTER
 *       where documents keep their UUID (default /_meta/uuid; Gazette's
 *       examples' Go structs: /UUID).
 *
 * Exit 0, or 1 with the error on stderr.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "gazette/append_service.h"
#include "gazette/client.h"
#include "gazette/message.h"
#include "rpc/rpc.h"

static struct gaz_client *client(const char *address)
{
	struct gaz_client_opts o = {.broker_address = address};
	struct gaz_status st = {0};
	struct gaz_client *c;
	if (gaz_client_new(&o, &c, &st)) {
		fprintf(stderr, "message-probe: %s\n", st.msg);
		exit(1);
	}
	return c;
}

static void die(const char *what, const struct gaz_status *st)
{
	fprintf(stderr, "message-probe: %s: %s\n", what, st->msg);
	exit(1);
}

/* The mapping: modulo of the message's "stream". */
static int by_stream(const void *msg, void *arg, struct gaz_mapped *out, struct gaz_status *st)
{
	const char *s = json_string_value(json_object_get(msg, "stream"));
	return gaz_map_modulo(arg, s, strlen(s), out, st);
}

static void wait_all(struct gaz_append_handle **h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct gaz_status st = {0};
		if (gaz_append_handle_wait(h[i], -1, NULL, &st))
			die("append", &st);
		gaz_append_handle_free(h[i]);
	}
}

static void write_acks(struct gaz_publisher *pub, struct gaz_append_service *svc)
{
	struct gaz_ack_intent *acks;
	size_t n;
	struct gaz_status st = {0};
	if (gaz_publisher_build_ack_intents(pub, &acks, &n, &st))
		die("ack intents", &st);
	struct gaz_append_handle **h = calloc(n ? n : 1, sizeof *h);
	if (!h)
		die("append ack", &(struct gaz_status){.msg = "out of memory"});
	for (size_t i = 0; i < n; i++) {
		struct gaz_append_opts ao = {.journal = acks[i].journal};
		if (gaz_append_service_append(svc, &ao, acks[i].intent, acks[i].len, &h[i], &st))
			die("append ack", &st);
	}
	wait_all(h, n);
	free(h);
	gaz_ack_intents_free(acks, n);
}

static int cmd_publish(char **argv)
{
	struct gaz_client *c = client(argv[0]);
	long count = atol(argv[2]), txn = atol(argv[3]);
	struct gaz_status st = {0};
	struct gaz_partitions *parts;
	struct gaz_append_service *svc;
	struct gaz_publisher *pub;
	struct gaz_message_type type = gaz_json_message_type(NULL);
	if (gaz_partitions_new(c, argv[1], 0, &parts, &st))
		die("partitions", &st);
	if (gaz_append_service_new(c, NULL, &svc, &st))
		die("append service", &st);
	struct gaz_publisher_opts po = {.appends = svc, .type = &type};
	if (gaz_publisher_new(&po, &pub, &st))
		die("publisher", &st);
	gaz_producer_id id = gaz_publisher_producer(pub);
	printf("producer %02x%02x%02x%02x%02x%02x\n", id.b[0], id.b[1], id.b[2], id.b[3], id.b[4], id.b[5]);
	const char *hold = getenv("PROBE_HOLD_ACK");
	bool no_last_ack = getenv("PROBE_NO_LAST_ACK") && atoi(getenv("PROBE_NO_LAST_ACK"));
	struct gaz_append_handle **h = calloc((size_t)count + 1, sizeof *h);
	size_t nh = 0;
	for (long i = 0; i < count; i++) {
		char stream[16];
		snprintf(stream, sizeof stream, "s%ld", i % 7);
		json_t *doc = json_pack("{s:s,s:I}", "stream", stream, "seq", (json_int_t)i);
		int rc = txn ? gaz_publish_uncommitted(pub, by_stream, parts, doc, &h[nh], &st)
			     : gaz_publish_committed(pub, by_stream, parts, doc, &h[nh], &st);
		json_decref(doc);
		if (rc)
			die("publish", &st);
		nh++;
		bool txn_end = txn && ((i + 1) % txn == 0 || i + 1 == count);
		if (txn_end) {
			wait_all(h, nh);
			nh = 0;
			bool last = i + 1 == count;
			if (last && no_last_ack)
				break;
			if (last && hold) {
				struct stat sb;
				while (stat(hold, &sb) != 0)
					usleep(20000);
			}
			write_acks(pub, svc);
		}
	}
	wait_all(h, nh);
	free(h);
	printf("published %ld\n", count);
	gaz_publisher_free(pub);
	gaz_append_service_free(svc);
	gaz_partitions_free(parts);
	gaz_client_free(c);
	return 0;
}

static void print_env(const struct gaz_envelope *e)
{
	json_t *doc = json_deep_copy(e->msg);
	json_object_del(doc, "_meta");
	char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	printf("%lld %lld %u %s\n", (long long)e->begin, (long long)e->end, gaz_uuid_flags(&e->uuid), s);
	free(s);
	json_decref(doc);
}

static int cmd_read(char **argv)
{
	struct gaz_client *c = client(argv[0]);
	struct gaz_message_type type = gaz_json_message_type(getenv("PROBE_UUID_POINTER"));
	struct gaz_message_reader_opts o = {.client = c, .journal = argv[1], .type = &type};
	o.sequencer.ring_size = getenv("PROBE_RING") ? (size_t)atol(getenv("PROBE_RING")) : 0;
	struct gaz_status st = {0};
	int rc;
	uint64_t skipped;
	if (strcmp(argv[2], "committed") == 0) {
		struct gaz_committed_reader *r;
		if (gaz_committed_reader_new(&o, NULL, &r, &st))
			die("reader", &st);
		const struct gaz_envelope *e;
		while ((rc = gaz_committed_reader_next(r, &e, &st)) == 0)
			print_env(e);
		skipped = gaz_committed_reader_skipped(r);
		gaz_committed_reader_free(r);
	} else {
		struct gaz_message_reader *r;
		if (gaz_message_reader_new(&o, &r, &st))
			die("reader", &st);
		struct gaz_envelope e;
		while ((rc = gaz_message_reader_next(r, &e, &st)) == 0) {
			print_env(&e);
			type.free_msg(e.msg, type.arg);
		}
		skipped = gaz_message_reader_skipped(r);
		gaz_message_reader_free(r);
	}
	if (rc != GAZ_EOF)
		die("read", &st);
	printf("skipped %llu\n", (unsigned long long)skipped);
	gaz_client_free(c);
	return 0;
}

int main(int argc, char **argv)
{
	if (gaz_log_setup(getenv("LOG_LEVEL") ? getenv("LOG_LEVEL") : "warn", "text") || gaz_rpc_init(1)) {
		fprintf(stderr, "message-probe: start-up failed\n");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 6 && strcmp(argv[1], "publish") == 0)
		return cmd_publish(argv + 2);
	if (argc == 5 && strcmp(argv[1], "read") == 0)
		return cmd_read(argv + 2);
	fprintf(stderr, "usage: message-probe publish ADDR SELECTOR COUNT TXN | read ADDR JOURNAL committed|uncommitted\n");
	return 2;
}
