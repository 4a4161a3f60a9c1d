build-yaml-san/obj/lib/etcd/txn.o: lib/etcd/txn.c lib/etcd/txn.h \
 lib/etcd/etcd.h lib/common/err.h build-yaml-san/gen/etcd.pb-c.h
lib/etcd/txn.h:
lib/etcd/etcd.h:
lib/common/err.h:
build-yaml-san/gen/etcd.pb-c.h:
