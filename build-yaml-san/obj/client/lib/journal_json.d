build-yaml-san/obj/client/lib/journal_json.o: client/lib/journal_json.c \
 client/include/gazette/journal_json.h lib/common/err.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h \
 client/include/gazette/duration.h lib/common/duration.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h
client/include/gazette/journal_json.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
client/include/gazette/duration.h:
lib/common/duration.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
