build-etcd/obj/lib/store/file.o: lib/store/file.c lib/store/store.h \
 lib/common/err.h lib/fragment/fragment.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h lib/fragment/codec.h
lib/store/store.h:
lib/common/err.h:
lib/fragment/fragment.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
lib/fragment/codec.h:
