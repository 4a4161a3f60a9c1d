build-etcd/obj/lib/keyspace/journals.o: lib/keyspace/journals.c \
 lib/keyspace/journals.h lib/keyspace/keyspace.h lib/common/err.h \
 lib/common/notify.h lib/etcd/etcd.h build-etcd/gen/etcd.pb-c.h \
 build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/protocol/validate.h
lib/keyspace/journals.h:
lib/keyspace/keyspace.h:
lib/common/err.h:
lib/common/notify.h:
lib/etcd/etcd.h:
build-etcd/gen/etcd.pb-c.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/protocol/validate.h:
