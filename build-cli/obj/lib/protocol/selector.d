build-cli/obj/lib/protocol/selector.o: lib/protocol/selector.c \
 lib/protocol/labels.h lib/common/err.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h lib/protocol/validate.h \
 lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
lib/protocol/validate.h:
lib/protocol/vctx.h:
