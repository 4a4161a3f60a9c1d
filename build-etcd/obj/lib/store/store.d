build-etcd/obj/lib/store/store.o: lib/store/store.c lib/store/store.h \
 lib/common/err.h lib/fragment/fragment.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/common/log.h
lib/store/store.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/common/log.h:
