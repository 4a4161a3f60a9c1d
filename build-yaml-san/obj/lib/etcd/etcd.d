build-yaml-san/obj/lib/etcd/etcd.o: lib/etcd/etcd.c lib/etcd/etcd.h \
 lib/common/err.h build-yaml-san/gen/etcd.pb-c.h lib/common/clock.h \
 lib/common/log.h lib/etcd/etcd_int.h lib/rpc/rpc.h
lib/etcd/etcd.h:
lib/common/err.h:
build-yaml-san/gen/etcd.pb-c.h:
lib/common/clock.h:
lib/common/log.h:
lib/etcd/etcd_int.h:
lib/rpc/rpc.h:
