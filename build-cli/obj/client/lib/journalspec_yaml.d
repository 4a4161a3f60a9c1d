build-cli/obj/client/lib/journalspec_yaml.o: \
 client/lib/journalspec_yaml.c client/include/gazette/journalspec_yaml.h \
 lib/common/err.h build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h \
 client/include/gazette/duration.h lib/common/duration.h \
 build-cli/gen/google/protobuf/duration.pb-c.h \
 client/lib/journalspec_tree.h
client/include/gazette/journalspec_yaml.h:
lib/common/err.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
client/include/gazette/duration.h:
lib/common/duration.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
client/lib/journalspec_tree.h:
