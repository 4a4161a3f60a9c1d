/*
 * publisher.c - word-count's publisher: sends a text to a word-count
 * counter, which splits it into NGrams and publishes an NGramCount delta
 * for each to its delta journals (Gazette's `wordcountctl publish`,
 * examples/word-count/wordcountctl at v0.103.0).
 *
 *   word-count-publisher publish [--file PATH|-] [--consumer.address URL]
 *
 * The text goes whole in one word_count.NGram/Publish call, which waits
 * for a connection (gRPC wait-for-ready, as Gazette's) and returns once
 * the counter's deltas committed. Splitting stays the counter's: Gazette's
 * counter lower-cases the text, takes runs of Unicode letters as words
 * and counts N-grams padded with START and END, and a publisher that did
 * it instead would have to match its Unicode tables exactly. So this is
 * the gRPC client only, as Gazette's is.
 *
 * Exit 0 once the counter answered, 1 on a failed call or unreadable
 * input, 2 for bad usage.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/flags.h"
#include "common/log.h"
#include "rpc/rpc.h"
#include "word_count.pb-c.h"

#define PROG "word-count-publisher"
/* The most text read: more than the counter accepts in one message. */
#define MAX_TEXT_LEN (64u << 20)

static struct {
	char *address, *auth_token;
	char *log_level, *log_format;
	char *file;
} cfg;

static const struct gaz_flag flag_table[] = {
	{.name = "consumer.address", .env = "CONSUMER_ADDRESS", .def = "http://localhost:8080", .ptr = &cfg.address,
	 .group = "Consumer", .ini_name = "Address", .help = "Service address endpoint"},
	{.name = "consumer.auth-token", .env = "CONSUMER_AUTH_TOKEN", .ptr = &cfg.auth_token, .group = "Consumer",
	 .ini_name = "AuthToken", .help = "Bearer token to use for authentication."},
	{.name = "log.level", .env = "LOG_LEVEL", .def = "warn", .ptr = &cfg.log_level, .group = "Logging",
	 .ini_name = "Level", .help = "Logging level", .choices = "trace|debug|info|warn|error|fatal"},
	{.name = "log.format", .env = "LOG_FORMAT", .def = "text", .ptr = &cfg.log_format, .group = "Logging",
	 .ini_name = "Format", .help = "Logging output format", .choices = "json|text|color"},
	{.name = "file", .def = "-", .ptr = &cfg.file, .group = "publish", .ini_name = "File",
	 .help = "Input file to read. Use - for stdin."},
	{0},
};

static const struct gaz_flags_cmd commands[] = {
	{"publish", "Publish NGram text"},
	{0},
};

/* read_all reads f to its end into a new NUL-terminated buffer (*out,
 * *len). 0, or -1 with errno (EFBIG past MAX_TEXT_LEN). */
static int read_all(FILE *f, char **out, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	while (b) {
		n += fread(b + n, 1, cap - n - 1, f);
		if (ferror(f))
			break;
		if (feof(f)) {
			b[n] = '\0';
			*out = b;
			*len = n;
			return 0;
		}
		if (cap >= MAX_TEXT_LEN) {
			free(b);
			errno = EFBIG;
			return -1;
		}
		char *g = realloc(b, cap *= 2);
		if (!g)
			break;
		b = g;
	}
	free(b);
	return -1;
}

static int publish(void)
{
	FILE *f = strcmp(cfg.file, "-") ? fopen(cfg.file, "rb") : stdin;
	char *text;
	size_t len;
	if (!f || read_all(f, &text, &len)) {
		fprintf(stderr, PROG ": reading %s: %m\n", strcmp(cfg.file, "-") ? cfg.file : "stdin");
		if (f && f != stdin)
			fclose(f);
		return 1;
	}
	if (f != stdin)
		fclose(f);

	struct gaz_rpc_channel *ch = gaz_rpc_channel_new(cfg.address, NULL);
	if (!ch) {
		fprintf(stderr, PROG ": invalid --consumer.address %s\n", cfg.address);
		free(text);
		return 1;
	}
	char auth[1024] = "";
	if (cfg.auth_token && *cfg.auth_token)
		snprintf(auth, sizeof auth, "Bearer %s", cfg.auth_token);
	WordCount__PublishRequest req = WORD_COUNT__PUBLISH_REQUEST__INIT;
	req.text = text;
	ProtobufCMessage *resp = NULL;
	struct gaz_status st = {0};
	int rc = gaz_rpc_unary(ch, "/word_count.NGram/Publish", &req.base, &word_count__publish_response__descriptor,
			       &resp, GAZ_DEADLINE_NEVER, true, *auth ? auth : NULL, &st);
	if (rc)
		fprintf(stderr, PROG ": publish to %s failed: %s\n", cfg.address, st.msg[0] ? st.msg : gaz_err_str(rc));
	else
		gaz_info("published", "bytes=%zu address=%s", len, cfg.address);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	gaz_rpc_channel_free(ch);
	free(text);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct gaz_flags top = {.prog = PROG, .usage = "[OPTIONS] <publish>", .table = flag_table,
				.commands = commands};
	struct gaz_status st = {0};
	int at = 0;
	int rc = gaz_flags_find_command(&top, argc - 1, argv + 1, &at, &st);
	if (rc < 0 || rc == GAZ_FLAGS_HELP) {
		if (rc != GAZ_FLAGS_HELP)
			fprintf(stderr, "%s\n%s", st.msg, rc == GAZ_ENOTFOUND ? "\n" : "");
		if (rc == GAZ_ENOTFOUND || rc == GAZ_FLAGS_HELP)
			gaz_flags_print_help(&top, rc == GAZ_FLAGS_HELP ? stdout : stderr);
		return rc == GAZ_FLAGS_HELP ? 0 : 2;
	}
	at++;
	memmove(argv + at, argv + at + 1, (size_t)(argc - at - 1) * sizeof *argv);
	argc--;
	struct gaz_flags f = {.prog = PROG, .usage = "[OPTIONS] publish [publish-OPTIONS]", .table = flag_table,
			      .description = "Publish text to include in the NGram model"};
	if ((rc = gaz_flags_parse(&f, argc - 1, argv + 1, &st))) {
		if (rc != GAZ_FLAGS_HELP)
			fprintf(stderr, "%s\n", st.msg);
		gaz_flags_release(&f);
		return rc == GAZ_FLAGS_HELP ? 0 : 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (gaz_log_setup(cfg.log_level, cfg.log_format) || gaz_rpc_init(1)) {
		fprintf(stderr, PROG ": start-up failed\n");
		gaz_flags_release(&f);
		return 1;
	}
	rc = publish();
	gaz_flags_release(&f);
	return rc;
}
