build-yaml-san/obj/lib/protocol/template.o: lib/protocol/template.c \
 lib/protocol/validate.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h
lib/protocol/validate.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:
