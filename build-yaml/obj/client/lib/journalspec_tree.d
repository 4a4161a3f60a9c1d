build-yaml/obj/client/lib/journalspec_tree.o: \
 client/lib/journalspec_tree.c client/lib/journalspec_tree.h \
 lib/common/err.h client/include/gazette/journalspec_yaml.h \
 build-yaml/gen/protocol.pb-c.h \
 build-yaml/gen/google/protobuf/duration.pb-c.h \
 client/include/gazette/duration.h lib/common/duration.h \
 build-yaml/gen/google/protobuf/duration.pb-c.h
client/lib/journalspec_tree.h:
lib/common/err.h:
client/include/gazette/journalspec_yaml.h:
build-yaml/gen/protocol.pb-c.h:
build-yaml/gen/google/protobuf/duration.pb-c.h:
client/include/gazette/duration.h:
lib/common/duration.h:
build-yaml/gen/google/protobuf/duration.pb-c.h:
