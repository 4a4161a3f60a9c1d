build-yaml-san/obj/lib/keyspace/keyspace.o: lib/keyspace/keyspace.c \
 lib/keyspace/keyspace.h lib/common/err.h lib/common/notify.h \
 lib/etcd/etcd.h build-yaml-san/gen/etcd.pb-c.h lib/common/clock.h \
 lib/common/log.h
lib/keyspace/keyspace.h:
lib/common/err.h:
lib/common/notify.h:
lib/etcd/etcd.h:
build-yaml-san/gen/etcd.pb-c.h:
lib/common/clock.h:
lib/common/log.h:
