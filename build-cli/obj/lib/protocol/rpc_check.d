build-cli/obj/lib/protocol/rpc_check.o: lib/protocol/rpc_check.c \
 lib/protocol/labels.h lib/common/err.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h lib/protocol/url.h \
 lib/protocol/validate.h lib/protocol/vctx.h lib/common/duration.h
lib/protocol/labels.h:
lib/common/err.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
lib/protocol/url.h:
lib/protocol/validate.h:
lib/protocol/vctx.h:
lib/common/duration.h:
