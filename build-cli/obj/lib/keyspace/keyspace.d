build-cli/obj/lib/keyspace/keyspace.o: lib/keyspace/keyspace.c \
 lib/keyspace/keyspace.h lib/common/err.h lib/common/notify.h \
 lib/etcd/etcd.h build-cli/gen/etcd.pb-c.h lib/common/clock.h \
 lib/common/log.h
lib/keyspace/keyspace.h:
lib/common/err.h:
lib/common/notify.h:
lib/etcd/etcd.h:
build-cli/gen/etcd.pb-c.h:
lib/common/clock.h:
lib/common/log.h:
