build-yaml-san/obj/lib/protocol/match.o: lib/protocol/match.c \
 lib/protocol/labels.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:
