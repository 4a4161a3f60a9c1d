build-yaml-san/obj/client/lib/journalspec_yaml.o: \
 client/lib/journalspec_yaml.c client/include/gazette/journalspec_yaml.h \
 lib/common/err.h build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h \
 client/include/gazette/duration.h lib/common/duration.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h \
 client/lib/journalspec_tree.h
client/include/gazette/journalspec_yaml.h:
lib/common/err.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
client/include/gazette/duration.h:
lib/common/duration.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
client/lib/journalspec_tree.h:
