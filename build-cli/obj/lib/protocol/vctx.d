build-cli/obj/lib/protocol/vctx.o: lib/protocol/vctx.c \
 lib/protocol/vctx.h lib/common/err.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h
lib/protocol/vctx.h:
lib/common/err.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
