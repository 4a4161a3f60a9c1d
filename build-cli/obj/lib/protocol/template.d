build-cli/obj/lib/protocol/template.o: lib/protocol/template.c \
 lib/protocol/validate.h lib/common/err.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/validate.h:
lib/common/err.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:
