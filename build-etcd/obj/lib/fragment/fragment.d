build-etcd/obj/lib/fragment/fragment.o: lib/fragment/fragment.c \
 lib/fragment/fragment.h lib/common/err.h build-etcd/gen/protocol.pb-c.h \
 build-etcd/gen/google/protobuf/duration.pb-c.h
lib/fragment/fragment.h:
lib/common/err.h:
build-etcd/gen/protocol.pb-c.h:
build-etcd/gen/google/protobuf/duration.pb-c.h:
