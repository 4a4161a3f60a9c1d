build-yaml-san/obj/lib/protocol/url.o: lib/protocol/url.c \
 lib/protocol/url.h lib/common/err.h lib/protocol/vctx.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h
lib/protocol/url.h:
lib/common/err.h:
lib/protocol/vctx.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
