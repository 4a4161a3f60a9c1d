build-cli/obj/lib/protocol/route.o: lib/protocol/route.c \
 lib/protocol/url.h lib/common/err.h lib/protocol/validate.h \
 build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/url.h:
lib/common/err.h:
lib/protocol/validate.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:
