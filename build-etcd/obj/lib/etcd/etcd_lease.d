build-etcd/obj/lib/etcd/etcd_lease.o: lib/etcd/etcd_lease.c \
 lib/common/clock.h lib/common/log.h lib/etcd/etcd.h lib/common/err.h \
 build-etcd/gen/etcd.pb-c.h lib/etcd/etcd_int.h lib/rpc/rpc.h
lib/common/clock.h:
lib/common/log.h:
lib/etcd/etcd.h:
lib/common/err.h:
build-etcd/gen/etcd.pb-c.h:
lib/etcd/etcd_int.h:
lib/rpc/rpc.h:
