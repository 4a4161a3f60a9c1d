build-etcd/obj/client/lib/journal_json.o: client/lib/journal_json.c \
 client/include/gazette/journal_json.h lib/common/err.h \
 build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h \
 client/include/gazette/duration.h lib/common/duration.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h
client/include/gazette/journal_json.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
client/include/gazette/duration.h:
lib/common/duration.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
