build-yaml-san/obj/lib/protocol/vctx.o: lib/protocol/vctx.c \
 lib/protocol/vctx.h lib/common/err.h build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h
lib/protocol/vctx.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
