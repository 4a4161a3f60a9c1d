build-cli/obj/client/lib/journalspec_tree.o: \
 client/lib/journalspec_tree.c client/lib/journalspec_tree.h \
 lib/common/err.h client/include/gazette/journalspec_yaml.h \
 build-cli/gen/protocol.pb-c.h \
 build-cli/gen/google/protobuf/duration.pb-c.h \
 client/include/gazette/duration.h lib/common/duration.h \
 build-cli/gen/google/protobuf/duration.pb-c.h
client/lib/journalspec_tree.h:
lib/common/err.h:
client/include/gazette/journalspec_yaml.h:
build-cli/gen/protocol.pb-c.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
client/include/gazette/duration.h:
lib/common/duration.h:
build-cli/gen/google/protobuf/duration.pb-c.h:
