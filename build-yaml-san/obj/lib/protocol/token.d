build-yaml-san/obj/lib/protocol/token.o: lib/protocol/token.c \
 lib/protocol/validate.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h lib/protocol/vctx.h \
 lib/protocol/unicode_tab.h
lib/protocol/validate.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/protocol/vctx.h:
lib/protocol/unicode_tab.h:
