build-yaml-san/obj/lib/protocol/labels.o: lib/protocol/labels.c \
 lib/protocol/labels.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h \
 lib/protocol/validate.h lib/protocol/vctx.h
lib/protocol/labels.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/protocol/validate.h:
lib/protocol/vctx.h:
