build-yaml-san/obj/lib/keyspace/journals.o: lib/keyspace/journals.c \
 lib/keyspace/journals.h lib/keyspace/keyspace.h lib/common/err.h \
 lib/common/notify.h lib/etcd/etcd.h build-yaml-san/gen/etcd.pb-c.h \
 build-yaml-san/gen/protocol.pb-c.h \
 build-yaml-san/gen/google/protobuf/duration.pb-c.h \
 lib/protocol/validate.h
lib/keyspace/journals.h:
lib/keyspace/keyspace.h:
lib/common/err.h:
lib/common/notify.h:
lib/etcd/etcd.h:
build-yaml-san/gen/etcd.pb-c.h:
build-yaml-san/gen/protocol.pb-c.h:
build-yaml-san/gen/google/protobuf/duration.pb-c.h:
lib/protocol/validate.h:
