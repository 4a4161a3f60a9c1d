build-cli/obj/lib/protocol/url.o: lib/protocol/url.c lib/protocol/url.h \
 lib/common/err.h lib/protocol/vctx.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h
lib/protocol/url.h:
lib/common/err.h:
lib/protocol/vctx.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
